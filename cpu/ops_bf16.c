/* ops_bf16.c - the CPU ops in bfloat16, emulated (ops_half.inc). */
#define HALF_OPS ds_cpu_ops_bf16
#define HALF_TO_F32 ds_f32_from_bf16_n
#define HALF_FROM_F32 ds_bf16_from_f32_n
#include "ops_half.inc"
