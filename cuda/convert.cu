/* convert.cu - ds_backend.convert on the GPU: one element type to another
 * (float, double, __half, __nv_bfloat16), each element widened exactly and
 * rounded once to nearest even (dtype_traits.cuh), as ds_convert does on the
 * host. Used to send gradients over the wire in another dtype
 * (--reduce-dtype with NCCL). */
#include "ops_cuda.h"

namespace {

/* src [n] -> dst [n]. */
template <typename D, typename S>
__global__ void convert_kernel(size_t n, D *__restrict__ dst, const S *__restrict__ src)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = ds_round<D>(ds_wide(src[i]));
}

template <typename D, typename S>
ds_status launch(ds_ctx *ctx, void *dst, const void *src, size_t n)
{
    convert_kernel<D, S><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, (D *)dst, (const S *)src);
    DS_LAUNCHED();
    return DS_OK;
}

/* The source type's dispatch for destination type D. */
template <typename D>
ds_status from(ds_ctx *ctx, void *dst, ds_dtype st, const void *src, size_t n)
{
    switch (st) {
    case DS_F32: return launch<D, float>(ctx, dst, src, n);
    case DS_F64: return launch<D, double>(ctx, dst, src, n);
    case DS_F16: return launch<D, __half>(ctx, dst, src, n);
    case DS_BF16: return launch<D, __nv_bfloat16>(ctx, dst, src, n);
    default: return DS_FAIL(DS_ERR_ARG, "convert: no conversion from %s", ds_dtype_name(st));
    }
}

}   // namespace

ds_status cuda_convert(ds_ctx *ctx, ds_dtype dt, void *dst, ds_dtype st, const void *src, size_t n)
{
    if (n == 0)
        return DS_OK;
    DS_CUDA(cudaSetDevice(ctx->device));
    switch (dt) {
    case DS_F32: return from<float>(ctx, dst, st, src, n);
    case DS_F64: return from<double>(ctx, dst, st, src, n);
    case DS_F16: return from<__half>(ctx, dst, st, src, n);
    case DS_BF16: return from<__nv_bfloat16>(ctx, dst, st, src, n);
    default: return DS_FAIL(DS_ERR_ARG, "convert: no conversion to %s", ds_dtype_name(dt));
    }
}
