/* layout.cu - conv maps [N][C][T][F] to sequences [T][N][C*F] and back, a
 * batch's frames [N][T][F] to context windows [T][N][(2C+1)F] and back (twin
 * of cpu/layout.inc). Both layouts keep a frame's f frequencies of one
 * channel contiguous, so each kernel walks the side it writes in memory
 * order (one block per row of it) and the other side in runs of f. The
 * forward pass copies elements (any T); the backward adds in ds_math_t<T>,
 * one rounding per element. */
#include "ops_cuda.h"

/* Blocks of a grid-stride loop over rows: up to 32 per multiprocessor. */
static unsigned layout_grid(const ds_ctx *ctx, size_t rows)
{
    size_t cap = (size_t)ctx->sms * 32;
    return (unsigned)(rows < cap ? rows : cap);
}

/* x [n][c][t][f] -> y [t][n][c*f] (assigns). Row (s, i) of y is c*f
 * contiguous elements; element e of it is channel e / f, frequency e % f. */
template <typename T>
static __global__ void conv_to_seq_kernel(int n, int c, int t, int f, const T *x, T *y)
{
    const int cf = c * f;
    for (size_t row = blockIdx.x; row < (size_t)t * n; row += gridDim.x) {
        const size_t s = row / n, i = row % n;
        T *yr = y + row * cf;
        const T *xr = x + (i * c * t + s) * f;   /* x[i][0][s][0] */
        for (int e = threadIdx.x; e < cf; e += blockDim.x) {
            const int ch = e / f, j = e - ch * f;
            yr[e] = xr[(size_t)ch * t * f + j];
        }
    }
}

/* dy [t][n][c*f] accumulates into dx [n][c][t][f]. Row (i, ch) of dx is t*f
 * contiguous elements (read and written); element e of it is frame e / f,
 * frequency e % f. */
template <typename T>
static __global__ void conv_to_seq_bwd_kernel(int n, int c, int t, int f, const T *dy, T *dx)
{
    const int tf = t * f;
    const size_t ncf = (size_t)n * c * f;   /* one frame of dy */
    for (size_t row = blockIdx.x; row < (size_t)n * c; row += gridDim.x) {
        const size_t i = row / c, ch = row % c;
        T *dxr = dx + row * tf;
        const T *dyr = dy + (i * c + ch) * f;   /* dy[0][i][ch*f] */
        for (int e = threadIdx.x; e < tf; e += blockDim.x) {
            const int s = e / f, j = e - s * f;
            dxr[e] = ds_round<T>(ds_wide(dxr[e]) + ds_wide(dyr[(size_t)s * ncf + j]));
        }
    }
}

/* Rows of c*f and t*f elements are indexed by int inside the kernels. */
static ds_status layout_check(const char *op, int n, int c, int t, int f)
{
    if (n < 0 || c < 0 || t < 0 || f < 0 || (long)c * f > 0x3fffffffL ||
        (long)t * f > 0x3fffffffL)
        return DS_FAIL(DS_ERR_ARG, "%s: shape n %d c %d t %d f %d out of range", op, n, c, t, f);
    return DS_OK;
}

/* x [n][c][t][f], y [t][n][c*f] (assigns). */
template <typename T>
ds_status cuda_conv_to_seq(ds_ctx *ctx, int n, int c, int t, int f, const void *x, void *y)
{
    DS_TRY(layout_check("conv_to_seq", n, c, t, f));
    if ((size_t)n * c * t * f == 0)
        return DS_OK;   /* no elements */
    conv_to_seq_kernel<T><<<layout_grid(ctx, (size_t)t * n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, c, t, f, (const T *)x, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

/* dy [t][n][c*f]; dx [n][c][t][f] accumulates. */
template <typename T>
ds_status cuda_conv_to_seq_bwd(ds_ctx *ctx, int n, int c, int t, int f, const void *dy, void *dx)
{
    DS_TRY(layout_check("conv_to_seq_bwd", n, c, t, f));
    if ((size_t)n * c * t * f == 0)
        return DS_OK;
    conv_to_seq_bwd_kernel<T><<<layout_grid(ctx, (size_t)n * c), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, c, t, f, (const T *)dy, (T *)dx);
    DS_LAUNCHED();
    return DS_OK;
}

/* Frames of utterance i a window may read or write: [0, len[i]) within [0, t). */
static __device__ int context_real(int t, const int *len, int i)
{
    const int l = __ldg(&len[i]);
    return l < 0 ? 0 : (l < t ? l : t);
}

/* x [n][t][f] -> y [t][n][(2c+1)*f] (assigns). One block per row (s, i) of y,
 * written in memory order; slice j of it copies frame s + j - c of x. */
template <typename T>
static __global__ void context_fwd_kernel(int n, int t, int f, int c, const int *len, const T *x,
                                          T *y)
{
    const int w = (2 * c + 1) * f;
    for (size_t row = blockIdx.x; row < (size_t)t * n; row += gridDim.x) {
        const int s = (int)(row / n), i = (int)(row % n), real_t = context_real(t, len, i);
        T *yr = y + row * w;
        for (int e = threadIdx.x; e < w; e += blockDim.x) {
            const int j = e / f, u = s + j - c;
            yr[e] = s < real_t && u >= 0 && u < real_t ? x[((size_t)i * t + u) * f + (e - j * f)]
                                                       : ds_round<T>(0);
        }
    }
}

/* dy [t][n][(2c+1)*f] accumulates into dx [n][t][f]: one block per frame
 * (i, u) of dx, its slices summed in j order as the CPU sums them. */
template <typename T>
static __global__ void context_bwd_kernel(int n, int t, int f, int c, const int *len, const T *dy,
                                          T *dx)
{
    const int w = (2 * c + 1) * f;
    for (size_t row = blockIdx.x; row < (size_t)n * t; row += gridDim.x) {
        const int i = (int)(row / t), u = (int)(row % t), real_t = context_real(t, len, i);
        if (u >= real_t)
            continue;
        T *dxr = dx + row * f;
        for (int q = threadIdx.x; q < f; q += blockDim.x) {
            ds_math_t<T> a = ds_wide(dxr[q]);
            for (int j = 0; j <= 2 * c; j++) {
                const int s = u - j + c;
                if (s >= 0 && s < real_t)
                    a = a + ds_wide(dy[((size_t)s * n + i) * w + (size_t)j * f + q]);
            }
            dxr[q] = ds_round<T>(a);
        }
    }
}

static ds_status context_check(const char *op, int n, int t, int f, int c)
{
    if (n < 0 || t < 0 || f < 0 || c < 0 || (long)(2 * (long)c + 1) * f > 0x3fffffffL)
        return DS_FAIL(DS_ERR_ARG, "%s: shape n %d t %d f %d context %d out of range", op, n, t,
                       f, c);
    return DS_OK;
}

/* x [n][t][f], len [n], y [t][n][(2c+1)*f] (assigns). */
template <typename T>
ds_status cuda_context_fwd(ds_ctx *ctx, int n, int t, int f, int c, const int *len, const void *x,
                           void *y)
{
    DS_TRY(context_check("context_fwd", n, t, f, c));
    if ((size_t)n * t * f == 0)
        return DS_OK;   /* no elements */
    context_fwd_kernel<T><<<layout_grid(ctx, (size_t)t * n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, t, f, c, len, (const T *)x, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

/* dy [t][n][(2c+1)*f], len [n]; dx [n][t][f] accumulates. */
template <typename T>
ds_status cuda_context_bwd(ds_ctx *ctx, int n, int t, int f, int c, const int *len, const void *dy,
                           void *dx)
{
    DS_TRY(context_check("context_bwd", n, t, f, c));
    if ((size_t)n * t * f == 0)
        return DS_OK;
    context_bwd_kernel<T><<<layout_grid(ctx, (size_t)n * t), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, t, f, c, len, (const T *)dy, (T *)dx);
    DS_LAUNCHED();
    return DS_OK;
}

#define LAYOUT_INSTANTIATE(T)                                                                 \
    template ds_status cuda_conv_to_seq<T>(ds_ctx *, int, int, int, int, const void *, void *); \
    template ds_status cuda_conv_to_seq_bwd<T>(ds_ctx *, int, int, int, int, const void *,     \
                                               void *);                                       \
    template ds_status cuda_context_fwd<T>(ds_ctx *, int, int, int, int, const int *,          \
                                           const void *, void *);                             \
    template ds_status cuda_context_bwd<T>(ds_ctx *, int, int, int, int, const int *,          \
                                           const void *, void *);

LAYOUT_INSTANTIATE(float)
LAYOUT_INSTANTIATE(double)
LAYOUT_INSTANTIATE(__half)
LAYOUT_INSTANTIATE(__nv_bfloat16)
