/* ops_bf16.c - the CPU ops in bfloat16, emulated: the half_<op> wrappers of
 * ops_half.inc (widen to float32, run the float32 table of the instruction
 * set chosen, round back) and the bfloat16 table. */
#define HALF_TO_F32 ds_half_f32_from_bf16_n
#define HALF_FROM_F32 ds_half_bf16_from_f32_n
#include "ops_half.inc"
#include "ops_table.h"

const ds_ops ds_cpu_ops_bf16 = DS_CPU_OPS_TABLE(half);   /* ops_table.h */
