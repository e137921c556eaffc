/* ctc.cu - CTC loss with log_softmax folded in, greedy argmax and the batch
 * loss (twin of cpu/ctc.inc, whose formulation is the reference).
 *
 * Utterance i with T = len[i] frames and L labels runs over S = 2L+1
 * extended states: blank, l1, blank, ..., lL, blank (state j is a label when
 * j is odd). Three kernels, all in double whatever T is (alpha and beta of a
 * long utterance reach -1000, where float's resolution would show):
 *   1. log-softmax of every real frame, one warp per (frame, utterance) row;
 *   2. one block per utterance: the checks, the alpha recursion (log space,
 *      threads across states, a barrier between frames), the loss, and when
 *      the gradient is wanted the beta recursion; both tables kept in full;
 *   3. one block per (frame, utterance) row: the gradient softmax - occupancy,
 *      the occupancy of each class summed over its states in state order
 *      (no atomics), zero past len[i] and for utterances without a path.
 *
 * The 16-bit tables widen each logit read (exact) into the same double
 * kernels and round each dlogits element once, from double.
 *
 * The host cannot read lengths or labels (device memory): shapes are checked
 * on the host, lengths and labels by kernel 2, which gives an utterance that
 * fails them a NaN loss and a zero gradient. */
#include <cmath>
#include <cstdint>

#include "ops_cuda.h"

namespace {

constexpr int WARP = 32;
constexpr int ROW_BLOCK = 256;    /* kernels 1 and argmax: 8 warps, one row each */
constexpr int REC_BLOCK = 256;    /* kernel 2: threads across the states */
constexpr int GRAD_BLOCK = 128;   /* kernel 3: threads across states, then classes */
constexpr int GRAD_CHUNK = 256;   /* states whose occupancy is staged in shared memory */
static_assert(GRAD_CHUNK % 2 == 0, "chunks start on a blank state");

/* The work: doubles, its start rounded up to a double boundary. */
struct ctc_tables {
    double *lp;      /* [t][n][c] log-softmax (frames past len[i] unused) */
    double *alpha;   /* [n][t][smax] */
    double *beta;    /* [n][t][smax] */
    double *ll;      /* [n] log-likelihood; -inf: zero gradient rows */
};

size_t ctc_doubles(int t, int n, int c, int max_label_len)
{
    const size_t tt = t > 0 ? (size_t)t : 0, nn = n > 0 ? (size_t)n : 0;
    const size_t cc = c > 0 ? (size_t)c : 0;
    const size_t smax = 2 * (size_t)(max_label_len > 0 ? max_label_len : 0) + 1;
    return tt * nn * cc + 2 * nn * tt * smax + nn + 1;   /* + 1: room for alignment */
}

ctc_tables ctc_carve(void *work, int t, int n, int c, size_t smax)
{
    uintptr_t at = ((uintptr_t)work + sizeof(double) - 1) & ~(uintptr_t)(sizeof(double) - 1);
    ctc_tables w;
    w.lp = (double *)at;
    w.alpha = w.lp + (size_t)t * n * c;
    w.beta = w.alpha + (size_t)n * t * smax;
    w.ll = w.beta + (size_t)n * t * smax;
    return w;
}

/* log(exp(a) + exp(b) + exp(c)) without overflow; -inf when all are -inf;
 * NaN when any is NaN (a comparison with NaN is false, so m alone would
 * drop it, and bad logits would pass for an impossible utterance). */
__device__ inline double lse3(double a, double b, double c)
{
    double m = a > b ? a : b;
    m = m > c ? m : c;
    if (m == -INFINITY)
        return a + b + c;   /* -inf, or NaN */
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

/* The class of extended state j of labels lab [L]. */
__device__ inline int ext_class(const int *lab, int blank, int j)
{
    return (j & 1) ? lab[j >> 1] : blank;
}

/* Whether state j may be entered from j-2: a label differing from the
 * previous one (between equal labels the blank cannot be skipped). */
__device__ inline bool ext_skip(const int *lab, int j)
{
    return (j & 1) && j >= 3 && lab[j >> 1] != lab[(j >> 1) - 1];
}

__device__ inline double warp_max(double v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Butterfly sum: lanes add the same pairs (commutatively), so every lane
 * holds the same bits, the same in every run. */
__device__ inline double warp_sum(double v)
{
    for (int o = WARP / 2; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Kernel 1. logits [t][n][c], len [n] -> lp [t][n][c] = log_softmax of each
 * row s < len[i], max-subtracted, the sum of exponentials in double. */
template <typename T>
__global__ void ctc_log_softmax(int t, int n, int c, const T *__restrict__ logits,
                                const int *__restrict__ len, double *__restrict__ lp)
{
    const int lane = threadIdx.x % WARP;
    const size_t rows = (size_t)t * n, warps = (size_t)gridDim.x * (blockDim.x / WARP);
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP; r < rows;
         r += warps) {
        const int s = (int)(r / n), i = (int)(r % n);
        if (s >= len[i])
            continue;   /* padding: never read (the whole warp skips) */
        const T *x = logits + r * c;
        double m = -INFINITY;
        for (int k = lane; k < c; k += WARP)
            m = fmax(m, (double)ds_wide(x[k]));
        m = warp_max(m);
        double sum = 0;
        for (int k = lane; k < c; k += WARP)
            sum += exp((double)ds_wide(x[k]) - m);
        const double lz = m + log(warp_sum(sum));
        for (int k = lane; k < c; k += WARP)
            lp[r * c + k] = (double)ds_wide(x[k]) - lz;
    }
}

/* Whether utterance i's lengths and labels are usable (block-wide verdict),
 * and the frames its labels need: one per label plus a blank between equal
 * neighbours. labels [..], lab = labels + off, L labels. */
__device__ bool ctc_utt_ok(int t, int c, int blank, int max_label_len, int T, int L, int off,
                           const int *__restrict__ labels, int *need)
{
    __shared__ int repeats;
    const bool shape_ok = T >= 0 && T <= t && L >= 0 && L <= max_label_len && off >= 0;
    if (threadIdx.x == 0)
        repeats = 0;
    __syncthreads();
    int bad = 0, rep = 0;
    if (shape_ok) {
        const int *lab = labels + off;
        for (int k = threadIdx.x; k < L; k += blockDim.x) {
            const int l = lab[k];
            bad |= l < 0 || l >= c || l == blank;
            rep += k > 0 && l == lab[k - 1];
        }
    }
    if (rep)
        atomicAdd(&repeats, rep);   /* integers: exact in any order */
    bad = __syncthreads_or(bad);
    *need = L + repeats;
    return shape_ok && !bad;
}

/* alpha [T][smax] of utterance i (emissions of frame s at lp + s*fstride);
 * returns log p(labels | x) to every thread. T >= 1. */
__device__ double ctc_alpha(int T, int blank, const int *__restrict__ lab, int S, size_t smax,
                            const double *__restrict__ lp, size_t fstride,
                            double *__restrict__ alpha)
{
    __shared__ double result;
    for (int j = threadIdx.x; j < S; j += blockDim.x)
        alpha[j] = j < 2 ? lp[ext_class(lab, blank, j)] : -INFINITY;
    __syncthreads();
    for (int s = 1; s < T; s++) {
        const double *prev = alpha + (size_t)(s - 1) * smax, *e = lp + (size_t)s * fstride;
        double *cur = alpha + (size_t)s * smax;
        for (int j = threadIdx.x; j < S; j += blockDim.x) {
            const double a1 = j >= 1 ? prev[j - 1] : -INFINITY;
            const double a2 = ext_skip(lab, j) ? prev[j - 2] : -INFINITY;
            cur[j] = e[ext_class(lab, blank, j)] + lse3(prev[j], a1, a2);
        }
        __syncthreads();   /* row s complete before row s+1 reads it */
    }
    if (threadIdx.x == 0) {
        const double *last = alpha + (size_t)(T - 1) * smax;
        result = lse3(last[S - 1], S > 1 ? last[S - 2] : -INFINITY, -INFINITY);
    }
    __syncthreads();
    return result;
}

/* beta [T][smax] of utterance i: log P(suffix after frame s | state j at s),
 * emission at s excluded, from frame T-1 down to 0. T >= 1. */
__device__ void ctc_beta(int T, int blank, const int *__restrict__ lab, int S, size_t smax,
                         const double *__restrict__ lp, size_t fstride, double *__restrict__ beta)
{
    double *row = beta + (size_t)(T - 1) * smax;
    for (int j = threadIdx.x; j < S; j += blockDim.x)
        row[j] = j >= S - 2 ? 0 : -INFINITY;
    __syncthreads();
    for (int s = T - 1; s >= 1; s--) {
        const double *next = beta + (size_t)s * smax, *e = lp + (size_t)s * fstride;
        double *cur = beta + (size_t)(s - 1) * smax;
        for (int j = threadIdx.x; j < S; j += blockDim.x) {
            const double b0 = next[j] + e[ext_class(lab, blank, j)];
            const double b1 =
                j + 1 < S ? next[j + 1] + e[ext_class(lab, blank, j + 1)] : -INFINITY;
            const double b2 = j + 2 < S && ext_skip(lab, j + 2)
                                  ? next[j + 2] + e[ext_class(lab, blank, j + 2)]
                                  : -INFINITY;
            cur[j] = lse3(b0, b1, b2);
        }
        __syncthreads();
    }
}

/* Kernel 2, block i = utterance i. len, label_off, label_len [n], labels
 * [..], lp [t][n][c] -> alpha, beta [n][t][smax] (beta only with want_beta),
 * loss [n] (scalar) = -log p, ll [n] (-inf where no gradient is formed, +inf
 * for bad lengths or labels). */
__global__ void ctc_recursions(int t, int n, int c, int blank, const int *__restrict__ len,
                               const int *__restrict__ labels, const int *__restrict__ label_off,
                               const int *__restrict__ label_len, int max_label_len,
                               const double *__restrict__ lp, double *__restrict__ alpha_all,
                               double *__restrict__ beta_all, bool want_beta,
                               double *__restrict__ loss, double *__restrict__ ll_out)
{
    const int i = blockIdx.x;
    const int T = len[i], L = label_len[i], off = label_off[i], S = 2 * L + 1;
    const size_t smax = 2 * (size_t)max_label_len + 1, fstride = (size_t)n * c;
    int need;
    const bool ok = ctc_utt_ok(t, c, blank, max_label_len, T, L, off, labels, &need);
    const int *lab = labels + (ok ? off : 0);
    const double *lpi = lp + (size_t)i * c;   /* frame s at lpi + s*fstride */
    double ll = -INFINITY;
    if (!ok)
        ll = NAN;
    else if (T == 0)
        ll = L == 0 ? 0 : -INFINITY;
    else if (need <= T)   /* too few frames: no path, the recursion would only confirm it */
        ll = ctc_alpha(T, blank, lab, S, smax, lpi, fstride, alpha_all + (size_t)i * t * smax);
    /* a NaN from bad logits is passed on (gradient formed, as the CPU does);
     * bad lengths or labels (which the CPU refuses with an error) get a NaN
     * loss and, marked by ll +inf, a NaN gradient: the step is skipped */
    const bool grad = ok && ll != -INFINITY && T > 0;
    if (threadIdx.x == 0) {
        loss[i] = -ll;
        ll_out[i] = !ok ? INFINITY : grad ? ll : -INFINITY;
    }
    if (want_beta && grad)
        ctc_beta(T, blank, lab, S, smax, lpi, fstride, beta_all + (size_t)i * t * smax);
}

/* Kernel 3, a block per row (s, i) of dlogits [t][n][c] (assigns):
 * grad_scale[0] * loss_scale[0] (NULL: 1) * (softmax - occupancy), the
 * occupancy of class k summed over the states of k in state order; zero past
 * len[i] and where ll[i] is -inf, NaN where it is +inf. Both scales [1]
 * (scalar) are read in device memory: the host sets grad_scale per batch,
 * the optimizer's verdicts loss_scale. */
template <typename T>
__global__ void ctc_grad(int t, int n, int c, int blank, const int *__restrict__ len,
                         const int *__restrict__ labels, const int *__restrict__ label_off,
                         const int *__restrict__ label_len, size_t smax,
                         const double *__restrict__ lp, const double *__restrict__ alpha_all,
                         const double *__restrict__ beta_all, const double *__restrict__ ll_all,
                         const double *__restrict__ grad_scale,
                         const double *__restrict__ loss_scale, T *__restrict__ dlogits)
{
    __shared__ double occ_sh[GRAD_CHUNK];
    double scale = *grad_scale;
    if (loss_scale)   /* read on the device: the optimizer's last verdict set it */
        scale *= *loss_scale;
    const size_t rows = (size_t)t * n;
    for (size_t r = blockIdx.x; r < rows; r += gridDim.x) {   /* block-uniform */
        const int s = (int)(r / n), i = (int)(r % n);
        T *g = dlogits + r * c;
        const double ll = ll_all[i];
        if (ll == INFINITY) {   /* bad lengths or labels: every row NaN */
            for (int k = threadIdx.x; k < c; k += blockDim.x)
                g[k] = ds_round<T>(NAN);
            continue;
        }
        if (ll == -INFINITY || s >= len[i]) {
            for (int k = threadIdx.x; k < c; k += blockDim.x)
                g[k] = ds_round<T>(0);
            continue;
        }
        const int S = 2 * label_len[i] + 1;
        const int *lab = labels + label_off[i];
        const size_t at = ((size_t)i * t + s) * smax;
        const double *arow = alpha_all + at, *brow = beta_all + at, *lrow = lp + r * c;
        for (int kbase = 0; kbase < c; kbase += blockDim.x) {
            const int k = kbase + threadIdx.x;
            double occ = 0;
            for (int jbase = 0; jbase < S; jbase += GRAD_CHUNK) {
                const int jn = S - jbase < GRAD_CHUNK ? S - jbase : GRAD_CHUNK;
                for (int q = threadIdx.x; q < jn; q += blockDim.x) {
                    const double lo = arow[jbase + q] + brow[jbase + q] - ll;
                    occ_sh[q] = lo > -INFINITY ? exp(lo) : 0;
                }
                __syncthreads();
                /* jbase is even: even q are blanks, odd q labels */
                if (k < c && k == blank)
                    for (int q = 0; q < jn; q += 2)
                        occ += occ_sh[q];
                else if (k < c)
                    for (int q = 1; q < jn; q += 2)
                        if (lab[(jbase + q) >> 1] == k)
                            occ += occ_sh[q];
                __syncthreads();   /* the chunk is read before the next overwrites it */
            }
            if (k < c)
                g[k] = ds_round<T>(scale * (exp(lrow[k]) - occ));
        }
    }
}

/* logits [rows][c] -> best [rows]: the first largest class of each row, one
 * warp per row. As the CPU's sequential scan with '>': a NaN is never
 * chosen, except that a NaN in column 0 keeps 0. Values are compared
 * widened to the math type M (exact, so the order is T's). */
template <typename T>
__global__ void argmax_rows(size_t rows, int c, const T *__restrict__ logits,
                            int *__restrict__ best)
{
    const int lane = threadIdx.x % WARP;
    const size_t warps = (size_t)gridDim.x * (blockDim.x / WARP);
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / WARP; r < rows;
         r += warps) {
        typedef ds_math_t<T> M;
        const T *x = logits + r * c;
        M bv = 0;
        int bi = -1;   /* -1: no number seen yet */
        for (int k = lane; k < c; k += WARP) {
            const M v = ds_wide(x[k]);
            if (bi < 0 ? !isnan(v) : v > bv) {
                bv = v;
                bi = k;
            }
        }
        /* (value, index) pairs: larger value wins, ties to the lower index */
        for (int o = WARP / 2; o > 0; o /= 2) {
            const M ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0)
            best[r] = bi < 0 || isnan(ds_wide(x[0])) ? 0 : bi;
    }
}

/* loss [n] (scalar) -> out [DS_LOSS_SCALARS]: one thread, in order i = 0..n-1;
 * norm [1] (scalar) is the batch's, read in device memory. */
__global__ void loss_total_kernel(int n, const double *__restrict__ norm_,
                                  const double *__restrict__ loss, double *__restrict__ out)
{
    const double norm = *norm_;
    double sum = 0, inf = 0;
    for (int i = 0; i < n; i++) {
        if (loss[i] == INFINITY)   /* impossible: counted; a NaN is summed, as on the CPU */
            inf++;
        else
            sum += loss[i];
    }
    out[DS_LOSS_MEAN] = sum / norm;
    out[DS_LOSS_INFINITE] = inf;
}

/* Blocks for a loop over rows, `per` rows a block: enough to fill the device. */
unsigned row_grid(const ds_ctx *ctx, size_t rows, size_t per)
{
    size_t want = (rows + per - 1) / per, cap = (size_t)ctx->sms * 64;
    want = want < cap ? want : cap;
    return want ? (unsigned)want : 1u;
}

}   // namespace

/* Workspace in elements of T (2-byte ones for the 16-bit tables): doubles
 * for lp [t][n][c], alpha and beta [n][t][2*max_label_len+1] and ll [n],
 * plus one for alignment. */
template <typename T> size_t cuda_ctc_work(int t, int n, int c, int max_label_len)
{
    return ctc_doubles(t, n, c, max_label_len) * (sizeof(double) / sizeof(T));
}

/* logits [t][n][c], len [n], labels [sum label_len], label_off [n],
 * label_len [n], grad_scale [1] and loss_scale [1] (scalar, device memory;
 * loss_scale NULL: 1), loss [n] (scalar, assigns), dlogits [t][n][c] or NULL
 * (assigns), work [cuda_ctc_work(t, n, c, max_label_len)]. */
template <typename T>
ds_status cuda_ctc_loss(ds_ctx *ctx, int t, int n, int c, int blank, const void *logits,
                        const int *len, const int *labels, const int *label_off,
                        const int *label_len, int max_label_len, const void *grad_scale,
                        const void *loss_scale, void *loss, void *dlogits, void *work)
{
    if (t < 0 || n < 0 || c < 1 || blank < 0 || blank >= c || max_label_len < 0)
        return DS_FAIL(DS_ERR_ARG, "ctc: bad shape t=%d n=%d c=%d blank=%d max_label_len=%d", t,
                       n, c, blank, max_label_len);
    if (n == 0)
        return DS_OK;
    const size_t smax = 2 * (size_t)max_label_len + 1, rows = (size_t)t * n;
    const ctc_tables w = ctc_carve(work, t, n, c, smax);
    if (rows > 0) {
        ctc_log_softmax<T><<<row_grid(ctx, rows, ROW_BLOCK / WARP), ROW_BLOCK, 0, ctx->stream>>>(
            t, n, c, (const T *)logits, len, w.lp);
        DS_LAUNCHED();
    }
    ctc_recursions<<<n, REC_BLOCK, 0, ctx->stream>>>(t, n, c, blank, len, labels, label_off,
                                                     label_len, max_label_len, w.lp, w.alpha,
                                                     w.beta, dlogits != nullptr,
                                                     (double *)loss, w.ll);
    DS_LAUNCHED();
    if (dlogits && rows > 0) {
        ctc_grad<T><<<row_grid(ctx, rows, 1), GRAD_BLOCK, 0, ctx->stream>>>(
            t, n, c, blank, len, labels, label_off, label_len, smax, w.lp, w.alpha, w.beta, w.ll,
            (const double *)grad_scale, (const double *)loss_scale, (T *)dlogits);
        DS_LAUNCHED();
    }
    return DS_OK;
}

/* logits [t][n][c] -> best [t][n] int32 (assigns). */
template <typename T>
ds_status cuda_argmax(ds_ctx *ctx, int t, int n, int c, const void *logits, int *best)
{
    if (t < 0 || n < 0)
        return DS_FAIL(DS_ERR_ARG, "argmax: bad shape t=%d n=%d c=%d", t, n, c);
    const size_t rows = (size_t)t * n;
    if (rows == 0)
        return DS_OK;
    if (c < 1)
        return DS_FAIL(DS_ERR_ARG, "argmax: %d classes", c);
    argmax_rows<T><<<row_grid(ctx, rows, ROW_BLOCK / WARP), ROW_BLOCK, 0, ctx->stream>>>(
        rows, c, (const T *)logits, best);
    DS_LAUNCHED();
    return DS_OK;
}

/* loss [n] (scalar), norm [1] (scalar, device memory) -> out
 * [DS_LOSS_SCALARS] (scalar, assigns). */
template <typename T>
ds_status cuda_loss_total(ds_ctx *ctx, int n, const void *norm, const void *loss, void *out)
{
    loss_total_kernel<<<1, 1, 0, ctx->stream>>>(n, (const double *)norm, (const double *)loss,
                                                (double *)out);
    DS_LAUNCHED();
    return DS_OK;
}

#define CTC_INSTANTIATE(T)                                                                    \
    template size_t cuda_ctc_work<T>(int, int, int, int);                                      \
    template ds_status cuda_ctc_loss<T>(ds_ctx *, int, int, int, int, const void *,            \
                                        const int *, const int *, const int *, const int *,    \
                                        int, const void *, const void *, void *, void *,       \
                                        void *);                                               \
    template ds_status cuda_argmax<T>(ds_ctx *, int, int, int, const void *, int *);           \
    template ds_status cuda_loss_total<T>(ds_ctx *, int, const void *, const void *, void *);

CTC_INSTANTIATE(float)
CTC_INSTANTIATE(double)
CTC_INSTANTIATE(__half)
CTC_INSTANTIATE(__nv_bfloat16)
