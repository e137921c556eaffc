/* cpu_isa.h - which instruction set the CPU backend's ops run on.
 *
 * The CPU op tables are compiled once per instruction set (cpu/real.h:
 * the vector width and register tiles of each), and one of them serves the
 * whole process: the widest the host can run, or the one DSTRAIN_CPU_ISA
 * names (avx512 | avx2 | baseline on x86-64; neon, or baseline, on aarch64;
 * auto or unset: the widest), so that every path can be run and tested on
 * any host that has it. A named set the host cannot run, or one this build
 * does not have, is refused with a message naming what it can run.
 *
 *   avx512    AVX-512 F/BW/DQ/VL with FMA: 32 vector registers of 64 bytes
 *   avx2      AVX2 with FMA: 16 registers of 32 bytes
 *   baseline  the architecture's baseline (x86-64: SSE2, 16 of 16 bytes)
 *   neon      aarch64's Advanced SIMD: 32 registers of 16 bytes
 *
 * Each set gives the same bits on any thread count; sets differ among
 * themselves where FMA contracts a product and a sum. */
#ifndef DS_CPU_ISA_H
#define DS_CPU_ISA_H

#include <stddef.h>

#include "backend.h"

typedef enum { DS_ISA_BASELINE, DS_ISA_AVX2, DS_ISA_AVX512, DS_ISA_NEON, DS_ISA_COUNT } ds_cpu_isa;

/* Chooses the set once per process (later calls return the first verdict):
 * DSTRAIN_CPU_ISA, else the widest the host runs. */
ds_status ds_cpu_isa_select(void);

/* The set chosen; where a forced one was refused, the widest the host runs
 * (whose tables stay usable: ds_cpu_isa_select reports the refusal). */
ds_cpu_isa ds_cpu_isa_chosen(void);

/* "avx512", "avx2", "baseline", "neon". */
const char *ds_cpu_isa_name(ds_cpu_isa isa);

/* One line for `dstrain version` and bench's results: the set chosen and
 * why, and the sets this host runs, e.g. "avx2 (forced: DSTRAIN_CPU_ISA=avx2);
 * this CPU runs avx512 avx2 baseline". */
void ds_cpu_isa_describe(char *buf, size_t size);

/* The chosen set's float32 or float64 op table (NULL for other dtypes). */
const ds_ops *ds_cpu_isa_ops(ds_dtype t);

#endif
