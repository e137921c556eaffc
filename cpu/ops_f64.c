/* ops_f64.c - the CPU ops in float64. */
#define DS_REAL_F64
#include "ops_table.inc"
