/* ops_f16.c - the CPU ops in float16, emulated (ops_half.inc). */
#define HALF_OPS ds_cpu_ops_f16
#define HALF_TO_F32 ds_f32_from_f16_n
#define HALF_FROM_F32 ds_f16_from_f32_n
#include "ops_half.inc"
