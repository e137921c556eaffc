/* partials.cuh - the second pass of the backend's two-pass reductions
 * (reduce_split.h): out[g] += the split partial sums of group g, added in a
 * fixed order and tree, so the bits are the same run to run, and rounded
 * once into T. part [groups][split] (ds_ctx.partials), out [groups].
 * Launch: <<<groups, 32>>> (one warp a group). */
#ifndef DS_CUDA_PARTIALS_CUH
#define DS_CUDA_PARTIALS_CUH

#include "dtype_traits.cuh"

template <typename T>
__global__ void __launch_bounds__(32)
ds_partials_add(int split, const double *__restrict__ part, T *__restrict__ out)
{
    const int g = blockIdx.x;
    double s = 0;
    for (int k = threadIdx.x; k < split; k += 32)
        s += part[(size_t)g * split + k];
    for (int d = 16; d > 0; d >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, d);
    if (threadIdx.x == 0)
        out[g] = ds_round<T>((double)ds_wide(out[g]) + s);
}

#endif
