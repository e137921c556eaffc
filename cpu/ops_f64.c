/* ops_f64.c - the CPU ops in float64: every family's body (ops_families.inc)
 * compiled for this dtype, once per instruction set (CMake's
 * dstrain_cpu_ops_<set>), and the float64 table. DS_CPU_OPS is
 * ds_cpu_ops_f64_<set> (real.h); cpu_isa.c picks one set's table. */
#define DS_REAL_F64
#include "ops_families.inc"
#include "ops_table.h"

const ds_ops DS_CPU_OPS = DS_CPU_OPS_TABLE(cpu);   /* ops_table.h */
