/* lookahead.cu - depthwise future-context convolution, no bias (twin of
 * cpu/lookahead.inc): each feature j of frame s mixes frames s .. s+k-1
 * with its own weights; frames past the end count as zero.
 *
 * Frames are [n][h] rows, so threads run across e = i*h + j (coalesced) and
 * each sums its taps in double. The weight gradient dw[j][q] is a sum over
 * the (frame, utterance) rows: it is split into at most LA_CHUNKS fixed
 * chunks of rows whose double sums land in work, then a second kernel adds
 * each (j, q)'s chunks in order; deterministic, no atomics. The 16-bit
 * tables widen each element read (exact) and round each sum written once,
 * from double. */
#include <cstdint>

#include "ops_cuda.h"

#define LA_CHUNKS 256     /* work holds LA_CHUNKS * h doubles: chunks * k <= LA_CHUNKS */
#define LA_MIN_ROWS 64    /* rows a chunk gets at least, when the sum is short */
#define LA_BLOCK 128      /* threads across features in the dw kernel */

/* Elements of T holding LA_CHUNKS * h doubles, plus one to align them. It
 * depends on h only, so a call with fewer utterances than planned fits. */
template <typename T> size_t cuda_lookahead_work(int n, int h)
{
    (void)n;
    return ((size_t)LA_CHUNKS * (size_t)(h > 0 ? h : 1) + 1) * sizeof(double) / sizeof(T);
}

/* x, y [t][n][h], w [h][k]: y[s][e] = sum over q < k, s + q < t of
 * w[j][q] * x[s+q][e] (assigns). Block y walks frames, x the features. */
template <typename T>
static __global__ void lookahead_fwd_kernel(int t, int n, int h, int k, const T *x, const T *w,
                                            T *y)
{
    const int nh = n * h;
    for (int s = blockIdx.y; s < t; s += gridDim.y) {
        const int taps = k < t - s ? k : t - s;
        for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < nh; e += gridDim.x * blockDim.x) {
            const T *wj = w + (size_t)(e % h) * k, *xe = x + (size_t)s * nh + e;
            double acc = 0;
            for (int q = 0; q < taps; q++)
                acc += (double)ds_wide(wj[q]) * ds_wide(xe[(size_t)q * nh]);
            y[(size_t)s * nh + e] = ds_round<T>(acc);
        }
    }
}

/* dy [t][n][h], w [h][k]; dx [t][n][h] accumulates: frame s gets
 * w[j][q] * dy[s-q][e] for each tap q <= s. */
template <typename T>
static __global__ void lookahead_dx_kernel(int t, int n, int h, int k, const T *w, const T *dy,
                                           T *dx)
{
    const int nh = n * h;
    for (int s = blockIdx.y; s < t; s += gridDim.y) {
        const int taps = k < s + 1 ? k : s + 1;
        for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < nh; e += gridDim.x * blockDim.x) {
            const T *wj = w + (size_t)(e % h) * k, *dye = dy + (size_t)s * nh + e;
            double acc = 0;
            for (int q = 0; q < taps; q++)
                acc += (double)ds_wide(wj[q]) * ds_wide(dye[-(ptrdiff_t)q * nh]);
            T *d = dx + (size_t)s * nh + e;
            *d = ds_round<T>(ds_wide(*d) + (ds_math_t<T>)acc);
        }
    }
}

/* x, dy [t][n][h]: the sum over rows r of chunk blockIdx.z of tap q =
 * blockIdx.y of dy[r][j] * x[r + q*n][j], rows r = s*n + i running over
 * [0, (t - q) * n) (frames whose tap q is inside the utterance batch). With
 * part, it is stored at part[chunk][j*k + q] [chunks][h*k]; without, added
 * to dw [h][k] directly (a single chunk). */
template <typename T>
static __global__ void __launch_bounds__(LA_BLOCK)
lookahead_dw_kernel(int t, int n, int h, int k, const T *x, const T *dy, double *part, T *dw)
{
    const int j = blockIdx.x * LA_BLOCK + threadIdx.x, q = blockIdx.y, g = blockIdx.z;
    if (j >= h)
        return;
    const long rows = (long)(t - q) * n, chunk = (rows + gridDim.z - 1) / gridDim.z;
    const long r0 = rows > 0 ? g * chunk : 0;
    const long r1 = rows > 0 && r0 + chunk < rows ? r0 + chunk : rows;   /* empty past the end */
    const T *dyj = dy + j, *xj = x + (size_t)q * n * h + j;
    double acc = 0;
    for (long r = r0; r < r1; r++)
        acc += (double)ds_wide(dyj[r * h]) * ds_wide(xj[r * h]);
    if (part)
        part[(size_t)g * h * k + (size_t)j * k + q] = acc;
    else
        dw[(size_t)j * k + q] = ds_round<T>(ds_wide(dw[(size_t)j * k + q]) + (ds_math_t<T>)acc);
}

/* dw [hk] += the chunks' partial sums part [chunks][hk], in chunk order. */
template <typename T>
static __global__ void lookahead_dw_sum_kernel(size_t hk, int chunks, const double *part, T *dw)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < hk;
         e += (size_t)gridDim.x * blockDim.x) {
        double acc = 0;
        for (int g = 0; g < chunks; g++)
            acc += part[(size_t)g * hk + e];
        dw[e] = ds_round<T>(ds_wide(dw[e]) + (ds_math_t<T>)acc);
    }
}

/* Grid of the frame kernels: features across x, frames across y. */
static dim3 lookahead_grid(int t, int nh)
{
    unsigned gx = (unsigned)((nh + DS_CUDA_BLOCK - 1) / DS_CUDA_BLOCK);
    return dim3(gx, (unsigned)(t < 65535 ? t : 65535));
}

/* Frames are indexed by int inside the kernels; taps ride in grid y. */
static ds_status lookahead_check(const char *op, int t, int n, int h, int k)
{
    if (t < 0 || n < 0 || h < 0 || k < 0 || k > 65535 || (long)n * h > 0x3fffffffL)
        return DS_FAIL(DS_ERR_ARG, "%s: shape t %d n %d h %d k %d out of range", op, t, n, h, k);
    return DS_OK;
}

/* x, y [t][n][h], w [h][k] (assigns). */
template <typename T>
ds_status cuda_lookahead_fwd(ds_ctx *ctx, int t, int n, int h, int k, const void *x,
                             const void *w, void *y)
{
    DS_TRY(lookahead_check("lookahead_fwd", t, n, h, k));
    if ((long)t * n * h == 0)
        return DS_OK;   /* no elements */
    lookahead_fwd_kernel<T><<<lookahead_grid(t, n * h), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        t, n, h, k, (const T *)x, (const T *)w, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

/* Chunks of the dw sum: as many as work holds for k taps, fewer when the
 * rows are few; 1 means no partials (dw summed in one pass). */
static int lookahead_chunks(int t, int n, int k)
{
    long most = LA_CHUNKS / k, by_rows = ((long)t * n + LA_MIN_ROWS - 1) / LA_MIN_ROWS;
    long g = most < by_rows ? most : by_rows;
    return g < 1 ? 1 : (int)g;
}

/* x, dy [t][n][h], w [h][k]; dx [t][n][h] (or NULL), dw [h][k] accumulate.
 * work [cuda_lookahead_work(n, h)]. */
template <typename T>
ds_status cuda_lookahead_bwd(ds_ctx *ctx, int t, int n, int h, int k, const void *x,
                             const void *w, const void *dy, void *dx, void *dw, void *work)
{
    DS_TRY(lookahead_check("lookahead_bwd", t, n, h, k));
    if (h == 0 || k == 0)
        return DS_OK;   /* no weights, and dx gets nothing */
    if (dx && (long)t * n > 0) {
        lookahead_dx_kernel<T><<<lookahead_grid(t, n * h), DS_CUDA_BLOCK, 0, ctx->stream>>>(
            t, n, h, k, (const T *)w, (const T *)dy, (T *)dx);
        DS_LAUNCHED();
    }
    const int chunks = lookahead_chunks(t, n, k);
    double *part = chunks > 1 ? (double *)(((uintptr_t)work + sizeof(double) - 1) &
                                           ~(uintptr_t)(sizeof(double) - 1))
                              : nullptr;
    dim3 grid((unsigned)((h + LA_BLOCK - 1) / LA_BLOCK), (unsigned)k, (unsigned)chunks);
    lookahead_dw_kernel<T><<<grid, LA_BLOCK, 0, ctx->stream>>>(t, n, h, k, (const T *)x,
                                                              (const T *)dy, part, (T *)dw);
    DS_LAUNCHED();
    if (part) {
        const size_t hk = (size_t)h * k;
        lookahead_dw_sum_kernel<T><<<ds_cuda_grid(ctx, hk), DS_CUDA_BLOCK, 0, ctx->stream>>>(
            hk, chunks, part, (T *)dw);
        DS_LAUNCHED();
    }
    return DS_OK;
}

#define LOOKAHEAD_INSTANTIATE(T)                                                              \
    template size_t cuda_lookahead_work<T>(int, int);                                          \
    template ds_status cuda_lookahead_fwd<T>(ds_ctx *, int, int, int, int, const void *,       \
                                             const void *, void *);                            \
    template ds_status cuda_lookahead_bwd<T>(ds_ctx *, int, int, int, int, const void *,       \
                                             const void *, const void *, void *, void *, void *);

LOOKAHEAD_INSTANTIATE(float)
LOOKAHEAD_INSTANTIATE(double)
LOOKAHEAD_INSTANTIATE(__half)
LOOKAHEAD_INSTANTIATE(__nv_bfloat16)
