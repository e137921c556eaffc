/* peak.cu - the backend's peak_flops: the device's SM count, compute
 * capability and maximum SM clock, and gpu_peak.c's table. Nothing is
 * measured: the figure is the datasheet's kind of peak (see gpu_peak.c). */
#include <cstdio>

#include "cuda_ctx.h"

extern "C" {
#include "gpu_peak.h"
}

double ds_cuda_peak_flops(ds_ctx *c, ds_dtype t, int tf32, char *how, size_t how_size)
{
    cudaDeviceProp p;
    int khz = 0;
    cudaError_t e = cudaGetDeviceProperties(&p, c->device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c->device);
    if (e != cudaSuccess) {
        snprintf(how, how_size, "device %d: %s", c->device, cudaGetErrorString(e));
        return 0;
    }
    const ds_gpu_desc d = {p.name, p.major, p.minor, p.multiProcessorCount, khz / 1000.0};
    return ds_gpu_peak_flops(&d, t, tf32, how, how_size);
}
