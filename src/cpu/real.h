/* real.h - the element type of one instantiation of the CPU ops.
 * ops_f32.c and ops_f64.c define DS_REAL_F32 or DS_REAL_F64 and include
 * ops_table.inc, which includes every op body (*.inc) once per type. Op
 * bodies use `real` and the macros below. Each dtype is its own translation
 * unit, so the static op functions keep their plain names (grep and gdb find
 * rnn_fwd); only the exported table, DS_CPU_OPS, differs by dtype. */
#ifndef DS_CPU_REAL_H
#define DS_CPU_REAL_H

#include <cblas.h>
#include <math.h>

#if defined(DS_REAL_F32)
typedef float real;
#define DS_CPU_OPS ds_cpu_ops_f32
#define DS_REAL_DTYPE DS_F32
#define GEMM cblas_sgemm
#define GEMV cblas_sgemv
#define AXPY cblas_saxpy
#define R_EXP expf
#define R_LOG logf
#define R_TANH tanhf
#define R_SQRT sqrtf
#define R_LOG1P log1pf
#elif defined(DS_REAL_F64)
typedef double real;
#define DS_CPU_OPS ds_cpu_ops_f64
#define DS_REAL_DTYPE DS_F64
#define GEMM cblas_dgemm
#define GEMV cblas_dgemv
#define AXPY cblas_daxpy
#define R_EXP exp
#define R_LOG log
#define R_TANH tanh
#define R_SQRT sqrt
#define R_LOG1P log1p
#else
#error "define DS_REAL_F32 or DS_REAL_F64 before including real.h"
#endif

/* The recurrent cells' activations: in float, the vectorisable ones of
 * activation_f32.h; in double, libm's. */
#if defined(DS_REAL_F32)
#include "activation_f32.h"
static inline real sigmoid(real x) { return act_sigmoidf(x); }
static inline real act_tanh(real x) { return act_tanhf(x); }
#else
static inline real sigmoid(real x) { return (real)1 / ((real)1 + R_EXP(-x)); }
static inline real act_tanh(real x) { return R_TANH(x); }
#endif

/* The hot loops are built for AVX-512, AVX2 and the baseline, picked at load
 * time. clang (14: the fuzzing build) gives a static function's clones a
 * global resolver symbol, so the f32 and f64 units, whose static functions
 * share names, collide at link time: with clang they are built once, for
 * the baseline. */
#if defined(__clang__) || !defined(__x86_64__)
#define DS_CLONES
#else
#define DS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

#endif
