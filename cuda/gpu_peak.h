/* gpu_peak.h - an NVIDIA GPU's dense peak rate for matrix products, from its
 * architecture, SM count and clock: plain C and no CUDA, so the arithmetic
 * and the table are tested on any machine (tests/unit/test_gpu_peak.c). The
 * CUDA backend's peak_flops (peak.cu) fills ds_gpu_desc from the device. */
#ifndef DS_GPU_PEAK_H
#define DS_GPU_PEAK_H

#include <stddef.h>

#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;       /* cudaDeviceProp.name: "NVIDIA H100 80GB HBM3" */
    int major, minor;       /* compute capability */
    int sms;                /* multiprocessors */
    double max_clock_mhz;   /* the SM's peak (boost) clock: cudaDevAttrClockRate / 1000 */
} ds_gpu_desc;

/* FLOP/s of dense matrix products in dtype t (F64, F32 with or without
 * tf32, F16, BF16: tensor cores where the architecture has them for it),
 * and how into how [how_size]:
 *   "NVIDIA H100 80GB HBM3: 132 SMs x 1830 MHz x 4096 FLOP/clk/SM dense FP16 tensor ..."
 * 0, with how saying why, for an architecture or dtype the table lacks. */
double ds_gpu_peak_flops(const ds_gpu_desc *d, ds_dtype t, int tf32, char *how, size_t how_size);

#ifdef __cplusplus
}
#endif

#endif
