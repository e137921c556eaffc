/* real.h - the element type and the instruction set of one instantiation of
 * the CPU ops. ops_f32.c and ops_f64.c define DS_REAL_F32 or DS_REAL_F64,
 * include ops_families.inc (every op family's body, cpu/<family>.inc, named
 * like its CUDA twin cuda/<family>.cu) and make their dtype's table from
 * ops_table.h's entry list.
 * CMake compiles the pair once per instruction set (DS_CPU_ISA: avx512,
 * avx2, baseline, neon; see cpu_isa.h), with that set's compiler flags, so
 * each table is built whole for the machine it runs on. Op bodies use `real`
 * and the macros below. Each (dtype, set) is its own translation unit, so
 * the static op functions keep one name written in the source, cpu_<op>
 * (grep and gdb find cpu_rnn_fwd, as cuda_rnn_fwd<T> on the GPU); only the
 * exported table, DS_CPU_OPS, differs: ds_cpu_ops_f32_avx2 ... */
#ifndef DS_CPU_REAL_H
#define DS_CPU_REAL_H

#include <cblas.h>
#include <math.h>

#ifndef DS_CPU_ISA
#error "define DS_CPU_ISA (avx512, avx2, baseline or neon): CMake compiles the ops once per set"
#endif
#define DS_CPU_PASTE2(a, b) a##_##b
#define DS_CPU_PASTE(a, b) DS_CPU_PASTE2(a, b)

#if defined(DS_REAL_F32)
typedef float real;
#define DS_CPU_OPS DS_CPU_PASTE(ds_cpu_ops_f32, DS_CPU_ISA)
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
#define DS_CPU_OPS DS_CPU_PASTE(ds_cpu_ops_f64, DS_CPU_ISA)
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

/* Register blocking per instruction set: the vector width (PANEL_VEC_BYTES)
 * and the tiles of the two hand-written products, sized so that a tile's
 * sums, the vectors loaded beside them and one broadcast fit the set's
 * vector registers without spilling.
 *   panel_block (panel.inc): PANEL_ROWS x PANEL_NV sums + PANEL_NV loaded
 *     weights + 1 broadcast;
 *   conv tiles (conv_tile.inc): CONV_TILE_CO x CONV_TILE_V sums +
 *     CONV_TILE_V loaded vectors + 1 broadcast.
 * AVX-512: 32 registers of 64 bytes: 4 x 4 + 4 + 1 = 21, 8 x 3 + 3 + 1 = 28.
 * AVX2+FMA: 16 of 32 bytes: 4 x 3 + 3 + 1 = 16, 4 x 3 + 3 + 1 = 16.
 * baseline x86-64 (SSE2): 16 of 16 bytes, the AVX2 shapes.
 * NEON (aarch64): 32 of 16 bytes, the AVX-512 shapes.
 * The order in which each output is summed does not depend on the blocking,
 * so every set gives the same bits on any thread count; sets differ among
 * themselves only where FMA contracts a product and a sum. */
#if defined(DS_CPU_ISA_AVX512)
#define PANEL_VEC_BYTES 64
#define PANEL_NV 4
#define PANEL_ROWS 4
#define CONV_TILE_CO 8
#elif defined(DS_CPU_ISA_AVX2)
#define PANEL_VEC_BYTES 32
#define PANEL_NV 3
#define PANEL_ROWS 4
#define CONV_TILE_CO 4
#elif defined(DS_CPU_ISA_NEON)
#define PANEL_VEC_BYTES 16
#define PANEL_NV 4
#define PANEL_ROWS 4
#define CONV_TILE_CO 8
#else   /* the portable baseline */
#define PANEL_VEC_BYTES 16
#define PANEL_NV 3
#define PANEL_ROWS 4
#define CONV_TILE_CO 4
#endif
#define CONV_TILE_V 3

#endif
