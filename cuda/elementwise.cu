/* elementwise.cu - padding mask, Hardtanh (clipped ReLU), dropout and the
 * residual sum (twin of cpu/elementwise.inc). Arithmetic in ds_math_t<T>
 * (float for the 16-bit types), one rounding per element written. */
#include "ops_cuda.h"   /* first: it declares the core's C headers extern "C" */
#include "dropout_mask.h"

/* Real positions of utterance i: len[i] * p_per_t clamped to [0, p]. */
static __device__ long mask_real_p(const ds_view &v, const int *len, int i)
{
    long r = (long)__ldg(&len[i]) * v.p_per_t;
    return r < 0 ? 0 : (r > v.p ? v.p : r);
}

/* Zero the padding of x (view v, len [v.n]). The view is walked as rows of
 * its innermost dimension, so that a block's threads write neighbours:
 * chan_inner: rows (pos, i) over channels (sequences [T][N][C], sc == 1);
 * otherwise rows (i, ch) over positions (conv maps, sp == 1; any strides). */
template <typename T>
static __global__ void mask_kernel(ds_view v, const int *len, T *x, bool chan_inner)
{
    const long rows = chan_inner ? (long)v.p * v.n : (long)v.n * v.c;
    for (long r = blockIdx.x; r < rows; r += gridDim.x) {
        if (chan_inner) {
            int i = (int)(r % v.n);
            long pos = r / v.n;
            if (pos < mask_real_p(v, len, i))
                continue;   /* a real frame: nothing to zero in this row */
            T *row = x + (long)i * v.sn + pos * v.sp;
            for (int ch = threadIdx.x; ch < v.c; ch += blockDim.x)
                row[(long)ch * v.sc] = ds_round<T>(0);
        } else {
            int i = (int)(r / v.c), ch = (int)(r % v.c);
            T *row = x + (long)i * v.sn + (long)ch * v.sc;
            for (long pos = mask_real_p(v, len, i) + threadIdx.x; pos < v.p; pos += blockDim.x)
                row[pos * v.sp] = ds_round<T>(0);
        }
    }
}

/* x: view v, len [v.n]; padding positions set to zero, real ones untouched. */
template <typename T> ds_status cuda_mask(ds_ctx *ctx, const ds_view *v, const int *len, void *x)
{
    if (v->n <= 0 || v->c <= 0 || v->p <= 0)
        return DS_OK;   /* no elements */
    const bool chan_inner = v->sc == 1 && v->sp != 1;
    const long rows = chan_inner ? (long)v->p * v->n : (long)v->n * v->c;
    const long cap = (long)ctx->sms * 32;
    const unsigned grid = (unsigned)(rows < cap ? rows : cap);
    mask_kernel<T><<<grid, DS_CUDA_BLOCK, 0, ctx->stream>>>(*v, len, (T *)x, chan_inner);
    DS_LAUNCHED();
    return DS_OK;
}

/* x, y [n]; y may alias x (each element read before its own write). NaN
 * passes through, as on the CPU (both comparisons false). lo and hi are in
 * the math type, as the float32 op holds them; a clamped element is lo or
 * hi rounded to T. */
template <typename T>
static __global__ void hardtanh_fwd_kernel(size_t n, ds_math_t<T> lo, ds_math_t<T> hi,
                                           const T *x, T *y)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const ds_math_t<T> a = ds_wide(x[e]);
        y[e] = ds_round<T>(a < lo ? lo : (a > hi ? hi : a));
    }
}

/* y, dy, dx [n]: dx += dy where the output was not clamped (lo < y < hi). */
template <typename T>
static __global__ void hardtanh_bwd_kernel(size_t n, ds_math_t<T> lo, ds_math_t<T> hi,
                                           const T *y, const T *dy, T *dx)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const ds_math_t<T> a = ds_wide(y[e]);
        if (a > lo && a < hi)
            dx[e] = ds_round<T>(ds_wide(dx[e]) + ds_wide(dy[e]));
    }
}

/* x, y [n] (assigns). */
template <typename T>
ds_status cuda_hardtanh_fwd(ds_ctx *ctx, size_t n, double lo, double hi, const void *x, void *y)
{
    if (n == 0)
        return DS_OK;
    hardtanh_fwd_kernel<T><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, (ds_math_t<T>)lo, (ds_math_t<T>)hi, (const T *)x, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

/* y, dy [n]; dx [n] accumulates. */
template <typename T>
ds_status cuda_hardtanh_bwd(ds_ctx *ctx, size_t n, double lo, double hi, const void *y,
                            const void *dy, void *dx)
{
    if (n == 0)
        return DS_OK;
    hardtanh_bwd_kernel<T><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        n, (ds_math_t<T>)lo, (ds_math_t<T>)hi, (const T *)y, (const T *)dy, (T *)dx);
    DS_LAUNCHED();
    return DS_OK;
}

/* Dropout: one thread per group of up to 4 elements of a run that share a
 * Philox block (dropout_mask.h, the CPU's draws bit for bit). The step is
 * read from key.step in device memory by each thread as the kernel runs,
 * never passed as a value, so a captured launch draws the step uploaded
 * before each replay. gain = 1 / (1 - p) in the math type, as the CPU
 * holds it. fwd: y = kept ? x * gain : 0 (y may alias x); bwd: dx += kept ?
 * dy * gain : 0. */
template <typename T, bool BWD>
static __global__ void dropout_kernel(ds_dropout_walk w, ds_dropout_key key, uint32_t thr,
                                      ds_math_t<T> gain, const T *in, T *out)
{
    const uint64_t groups = w.runs * w.per_run;
    const uint32_t step = ds_dropout_step(&key);
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t d[4];
        uint64_t e;
        int k;
        ds_dropout_draws(&key, step, ds_dropout_group(&key, &w, g, &e, &k), d);
        for (int l = 0; l < k; l++) {
            const bool kept = d[l] >= thr;
            if (BWD) {
                if (kept)
                    out[e + l] = ds_round<T>(ds_wide(out[e + l]) + ds_wide(in[e + l]) * gain);
            } else {
                out[e + l] = ds_round<T>(kept ? ds_wide(in[e + l]) * gain : (ds_math_t<T>)0);
            }
        }
    }
}

template <typename T, bool BWD>
static ds_status dropout_launch(ds_ctx *ctx, size_t n, double p, const ds_dropout_key *key,
                                const void *in, void *out)
{
    if (!(p >= 0 && p < 1))
        return DS_FAIL(DS_ERR_ARG, "dropout: probability %g outside [0, 1)", p);
    if (!key->step)
        return DS_FAIL(DS_ERR_ARG, "dropout: no step in backend memory (key.step NULL)");
    ds_dropout_walk w;
    if (!ds_dropout_walk_of(key, n, &w))
        return DS_FAIL(DS_ERR_ARG, "dropout: %zu elements in runs of %llu numbered %llu apart: "
                       "not whole runs, or numbers past 2^50", n, key->run, key->stride);
    if (n == 0)
        return DS_OK;
    const size_t groups = (size_t)(w.runs * w.per_run);
    dropout_kernel<T, BWD><<<ds_cuda_grid(ctx, groups), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        w, *key, ds_dropout_threshold(p), (ds_math_t<T>)(1.0 / (1.0 - p)), (const T *)in, (T *)out);
    DS_LAUNCHED();
    return DS_OK;
}

/* x, y [n] (assigns; y may alias x). */
template <typename T>
ds_status cuda_dropout_fwd(ds_ctx *ctx, size_t n, double p, const ds_dropout_key *key,
                           const void *x, void *y)
{
    return dropout_launch<T, false>(ctx, n, p, key, x, y);
}

/* dy [n]; dx [n] accumulates. */
template <typename T>
ds_status cuda_dropout_bwd(ds_ctx *ctx, size_t n, double p, const ds_dropout_key *key,
                           const void *dy, void *dx)
{
    return dropout_launch<T, true>(ctx, n, p, key, dy, dx);
}

template <typename T> static __global__ void add_kernel(size_t n, const T *x, T *y)
{
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x)
        y[e] = ds_round<T>(ds_wide(y[e]) + ds_wide(x[e]));
}

/* x [n]; y [n] += x. */
template <typename T> ds_status cuda_add(ds_ctx *ctx, size_t n, const void *x, void *y)
{
    if (n == 0)
        return DS_OK;
    add_kernel<T><<<ds_cuda_grid(ctx, n), DS_CUDA_BLOCK, 0, ctx->stream>>>(n, (const T *)x, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

#define ELEMENTWISE_INSTANTIATE(T)                                                            \
    template ds_status cuda_mask<T>(ds_ctx *, const ds_view *, const int *, void *);          \
    template ds_status cuda_hardtanh_fwd<T>(ds_ctx *, size_t, double, double, const void *,    \
                                            void *);                                          \
    template ds_status cuda_hardtanh_bwd<T>(ds_ctx *, size_t, double, double, const void *,    \
                                            const void *, void *);                            \
    template ds_status cuda_dropout_fwd<T>(ds_ctx *, size_t, double, const ds_dropout_key *,   \
                                           const void *, void *);                             \
    template ds_status cuda_dropout_bwd<T>(ds_ctx *, size_t, double, const ds_dropout_key *,   \
                                           const void *, void *);                             \
    template ds_status cuda_add<T>(ds_ctx *, size_t, const void *, void *);

ELEMENTWISE_INSTANTIATE(float)
ELEMENTWISE_INSTANTIATE(double)
ELEMENTWISE_INSTANTIATE(__half)
ELEMENTWISE_INSTANTIATE(__nv_bfloat16)
