/* cpu_ctx.h - the CPU backend's context, private to cpu/: the device
 * number and the float scratch the FP16/BF16 emulation converts through. */
#ifndef DS_CPU_CTX_H
#define DS_CPU_CTX_H

#include <stddef.h>

#include "backend.h"
#include "range_log.h"

enum { DS_CPU_SCRATCH_SLOTS = 8 };   /* the most compute-role tensors one op touches */

struct ds_ctx {
    int device;
    size_t mem_limit;           /* bytes; 0: none (ds_ctx_opts.mem_limit) */
    ds_range_log ranges;        /* --profile layers: the clock at each range's push and pop */
    float *scratch[DS_CPU_SCRATCH_SLOTS];
    size_t scratch_cap[DS_CPU_SCRATCH_SLOTS];   /* floats */
};

/* Scratch slot k of c holding at least count floats, grown when needed
 * (contents not kept); NULL when memory runs out. */
float *ds_cpu_scratch(ds_ctx *c, int k, size_t count);

/* float32 and float64: one table per instruction set (cpu_isa.h); the 16-bit
 * ones wrap the chosen float32 table */
extern const ds_ops ds_cpu_ops_f16, ds_cpu_ops_bf16;

#endif
