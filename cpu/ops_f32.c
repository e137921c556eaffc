/* ops_f32.c - the CPU ops in float32. */
#define DS_REAL_F32
#include "ops_table.inc"
