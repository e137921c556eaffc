/* batchnorm.cu - length-aware BatchNorm over a ds_view [n][c][p] (twin of
 * cpu/batchnorm.inc, whose formulas and precisions are kept here).
 *
 * Only real positions (p / p_per_t < len[i]) enter the statistics and get
 * output; y is zero at padding and dx gets nothing there. Per-channel sums
 * are taken in double and are deterministic: every reduction has a launch
 * shape that depends only on the view's shape and the device's SM count, a
 * fixed per-thread order and fixed trees, and no atomics.
 *
 * Every op walks the view channel by channel in one of two shapes, picked by
 * which stride is 1 so that neighbouring threads read neighbouring elements:
 *  - channel blocks (conv maps [N][C][T][F], sp == 1, and any other strides):
 *    block x = one channel, its threads across positions;
 *  - channel tiles (sequences [T][N][C], sc == 1): a block is TILE_C
 *    neighbouring channels (threadIdx.x) by TILE_R rows (threadIdx.y), rows
 *    being (pos, i) in that order, which is memory order for sequences.
 * Reductions split each channel's (tile's) rows over several blocks by the
 * rule of reduce_split.h, which depends only on the shape and the SM count:
 * pass 1, block b = ch * split + s (tile * split + s) sums a fixed slice of
 * the rows into ctx->partials, two doubles per channel; pass 2 adds each
 * channel's split partials in a fixed order and tree. A split of 1 (little
 * data, or channels too many for the partials) is one pass. The elementwise
 * passes add blocks along the positions to fill the device.
 *
 * An op is a functor with param(ch) (its per-channel constants, computed
 * once per thread) and add (reductions: sums of one real element, plus any
 * elementwise side effect), done (reductions: the channel's totals) or set
 * (elementwise passes: one element, real or padding).
 *
 * In the 16-bit tables x, y, dx and dy are FP16 or BF16 and every stats-role
 * buffer (gamma, beta, their gradients, the statistics, the moments) is
 * float; see "the ops" below for where each value is rounded. */
#include "ops_cuda.h"
#include "reduce_split.h"

#define CB_REDUCE 1024 /* threads of a channel block that reduces */
#define CB_MAP 256     /* threads of a channel block of an elementwise pass */
#define TILE_C 8       /* channels of a tile: 32 bytes of floats, one memory sector */
#define TILE_R 64      /* rows of a tile */
#define BN_MIN_ELEMS 4096 /* fewest elements a reduction block is given when split */
#define BN_SLOTS 2     /* partials per channel of a reduction block: its two sums */

/* Real positions of utterance i: len[i] * p_per_t clamped to [0, p]. */
static __device__ long bn_real_p(const ds_view &v, const int *len, int i)
{
    long r = (long)__ldg(&len[i]) * v.p_per_t;
    return r < 0 ? 0 : (r > v.p ? v.p : r);
}

/* Channel tiles are for views whose channels are contiguous and positions
 * are not (sequences); channel blocks serve everything else. */
static bool bn_tiled(const ds_view *v) { return v->sc == 1 && v->sp != 1; }

/* ---- the two walks ---- */

/* The sum of v over a warp, in lane 0 (fixed shuffle tree). */
static __device__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

/* The end of a pass-1 block: split 1, the channel's totals go to op.done;
 * else its two sums to part [c][split][BN_SLOTS] at (ch, s). */
template <class Op>
static __device__ void bn_block_out(const Op &op, const typename Op::param_t &pr, int ch, int s,
                                    int split, double *part, double s1, double s2)
{
    if (split == 1) {
        op.done(pr, ch, s1, s2);
    } else {
        double *q = part + ((size_t)ch * split + s) * BN_SLOTS;
        q[0] = s1;
        q[1] = s2;
    }
}

/* Reduction pass 1, channel blocks: grid (c * split), block CB_REDUCE; block
 * b = ch * split + s sums channel ch over the flattened positions [s * per,
 * (s + 1) * per) of its n * p (utterance-major), utterance by utterance and
 * real positions only. Thread t sums positions p0 + t, p0 + t + CB_REDUCE,
 * ... of each; then warps, then the block's warps, in fixed trees.
 * part [c][split][BN_SLOTS] (split > 1). */
template <class Op> static __global__ void __launch_bounds__(CB_REDUCE)
bn_reduce_cb(ds_view v, const int *len, int split, long per, double *part, Op op)
{
    __shared__ double acc[2][CB_REDUCE / 32];
    const int ch = (int)(blockIdx.x / (unsigned)split), sl = (int)(blockIdx.x % (unsigned)split);
    const typename Op::param_t pr = op.param(ch);
    const long total = (long)v.n * v.p;
    long j = (long)sl * per;
    const long end = j + per < total ? j + per : total;
    double s1 = 0, s2 = 0;
    while (j < end) {
        const int i = (int)(j / v.p);
        const long p0 = j - (long)i * v.p;
        const long p1 = end - j < v.p - p0 ? p0 + (end - j) : v.p;   /* the slice in utterance i */
        const long rp = bn_real_p(v, len, i), lim = p1 < rp ? p1 : rp;
        const long base = (long)i * v.sn + (long)ch * v.sc;
        for (long p = p0 + threadIdx.x; p < lim; p += CB_REDUCE)
            op.add(pr, base + p * v.sp, s1, s2);
        j += p1 - p0;
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        acc[0][warp] = s1;
        acc[1][warp] = s2;
    }
    __syncthreads();
    if (warp == 0) {
        s1 = warp_sum(lane < CB_REDUCE / 32 ? acc[0][lane] : 0.0);
        s2 = warp_sum(lane < CB_REDUCE / 32 ? acc[1][lane] : 0.0);
        if (lane == 0)
            bn_block_out(op, pr, ch, sl, split, part, s1, s2);
    }
}

/* Walks rows r = pos * n + i, starting at r0 and stepping by step, calling
 * f(i, pos) for each while r < rend (at most n * p); no divisions inside
 * the loop. */
template <class F>
static __device__ void bn_rows(const ds_view &v, long r0, long step, long rend, F &f)
{
    if (v.n <= 0)
        return;
    const long dpos = step / v.n;
    const int di = (int)(step % v.n);
    long pos = r0 / v.n;
    int i = (int)(r0 % v.n);
    for (long r = r0; r < rend; r += step) {
        f(i, pos);
        i += di;
        pos += dpos;
        if (i >= v.n) {
            i -= v.n;
            pos++;
        }
    }
}

/* One channel's running sums over the real rows of a tile. */
template <class Op> struct bn_tile_sum {
    const ds_view &v;
    const int *len;
    const Op &op;
    const typename Op::param_t &pr;
    long coff;   /* the channel's offset, ch * sc */
    double s1, s2;
    __device__ void operator()(int i, long pos)
    {
        if (pos < bn_real_p(v, len, i))
            op.add(pr, (long)i * v.sn + coff + pos * v.sp, s1, s2);
    }
};

/* Reduction pass 1, channel tiles: grid (ceil(c / TILE_C) * split), block
 * (TILE_C, TILE_R); block b = tile * split + s takes rows [s * per, (s + 1)
 * * per) of the n * p. Thread (x, y) sums rows s * per + y, + TILE_R, ... of
 * channel x of the tile; the TILE_R partial sums of a channel then meet in a
 * fixed tree. part [c][split][BN_SLOTS] (split > 1). */
template <class Op> static __global__ void __launch_bounds__(TILE_C * TILE_R)
bn_reduce_tile(ds_view v, const int *len, int split, long per, double *part, Op op)
{
    __shared__ double acc[2][TILE_R][TILE_C];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tile = (int)(blockIdx.x / (unsigned)split), sl = (int)(blockIdx.x % (unsigned)split);
    const int ch = tile * TILE_C + tx;
    const bool live = ch < v.c;
    const typename Op::param_t pr = op.param(live ? ch : 0);
    const long total = (long)v.n * v.p, r0 = (long)sl * per;
    bn_tile_sum<Op> f{v, len, op, pr, (long)ch * v.sc, 0, 0};
    if (live)
        bn_rows(v, r0 + ty, TILE_R, r0 + per < total ? r0 + per : total, f);
    acc[0][ty][tx] = f.s1;
    acc[1][ty][tx] = f.s2;
    __syncthreads();
    for (int h = TILE_R / 2; h > 0; h /= 2) {
        if (ty < h) {
            acc[0][ty][tx] += acc[0][ty + h][tx];
            acc[1][ty][tx] += acc[1][ty + h][tx];
        }
        __syncthreads();
    }
    if (ty == 0 && live)
        bn_block_out(op, pr, ch, sl, split, part, acc[0][0][tx], acc[1][0][tx]);
}

/* Reduction pass 2: grid (c), one warp a channel; its lanes add the
 * channel's split partials part [c][split][BN_SLOTS] in a fixed order and
 * tree, then op.done. */
template <class Op> static __global__ void __launch_bounds__(32)
bn_reduce_sum(int split, const double *part, Op op)
{
    const int ch = blockIdx.x, lane = threadIdx.x;
    double s1 = 0, s2 = 0;
    for (int k = lane; k < split; k += 32) {
        const double *q = part + ((size_t)ch * split + k) * BN_SLOTS;
        s1 += q[0];
        s2 += q[1];
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    if (lane == 0)
        op.done(op.param(ch), ch, s1, s2);
}

/* Elementwise pass, channel blocks: grid (c, chunks), block CB_MAP; the
 * chunks split each utterance's positions. */
template <class Op> static __global__ void __launch_bounds__(CB_MAP)
bn_map_cb(ds_view v, const int *len, Op op)
{
    const int ch = blockIdx.x;
    const typename Op::param_t pr = op.param(ch);
    const long p0 = (long)blockIdx.y * CB_MAP + threadIdx.x, step = (long)gridDim.y * CB_MAP;
    for (int i = 0; i < v.n; i++) {
        const long base = (long)i * v.sn + (long)ch * v.sc, rp = bn_real_p(v, len, i);
        for (long p = p0; p < v.p; p += step)
            op.set(pr, base + p * v.sp, p < rp);
    }
}

/* One channel's elements over the rows of a tile, real or padding. */
template <class Op> struct bn_tile_set {
    const ds_view &v;
    const int *len;
    const Op &op;
    const typename Op::param_t &pr;
    long coff;
    __device__ void operator()(int i, long pos)
    {
        op.set(pr, (long)i * v.sn + coff + pos * v.sp, pos < bn_real_p(v, len, i));
    }
};

/* Elementwise pass, channel tiles: grid (ceil(c / TILE_C), chunks), block
 * (TILE_C, TILE_R); the chunks split the rows. */
template <class Op> static __global__ void __launch_bounds__(TILE_C * TILE_R)
bn_map_tile(ds_view v, const int *len, Op op)
{
    const int ch = blockIdx.x * TILE_C + threadIdx.x;
    if (ch >= v.c)
        return;
    const typename Op::param_t pr = op.param(ch);
    bn_tile_set<Op> f{v, len, op, pr, (long)ch * v.sc};
    bn_rows(v, (long)blockIdx.y * TILE_R + threadIdx.y, (long)gridDim.y * TILE_R,
            (long)v.n * v.p, f);
}

/* Channel tiles across the channels. */
static unsigned bn_tiles(const ds_view *v) { return (unsigned)((v->c + TILE_C - 1) / TILE_C); }

/* Blocks along the positions for an elementwise pass: with the across
 * blocks along the channels, about per_sm blocks per multiprocessor (a full
 * one), never more than the positions need. */
static unsigned bn_chunks(const ds_ctx *ctx, int per_sm, long across, long need)
{
    long want = (long)ctx->sms * per_sm / across;
    if (want > need)
        want = need;
    if (want > 65535)
        want = 65535;
    return want < 1 ? 1u : (unsigned)want;
}

/* Runs reduction op over view v: split blocks per channel (tile), by
 * ds_reduce_split_of over the n * p rows (padding included, so the split
 * depends on the shape alone), each writing BN_SLOTS partials per channel;
 * then, split > 1, the pass that adds them. */
template <class Op>
static ds_status bn_reduce(ds_ctx *ctx, const ds_view *v, const int *len, const Op &op)
{
    if (v->c <= 0)
        return DS_OK;
    const bool tiled = bn_tiled(v);
    const long groups = tiled ? (long)bn_tiles(v) : v->c;
    const long rows = v->n > 0 && v->p > 0 ? (long)v->n * v->p : 0;
    const long per_group = tiled ? TILE_C : 1;   /* channels a group sums */
    const ds_reduce_split sp = ds_reduce_split_of(groups, rows, ctx->sms, DS_CUDA_PARTIALS,
                                                  BN_SLOTS * per_group, BN_MIN_ELEMS / per_group);
    const unsigned blocks = (unsigned)(groups * sp.split);
    if (tiled)
        bn_reduce_tile<Op><<<blocks, dim3(TILE_C, TILE_R), 0, ctx->stream>>>(
            *v, len, (int)sp.split, sp.per, ctx->partials, op);
    else
        bn_reduce_cb<Op><<<blocks, CB_REDUCE, 0, ctx->stream>>>(*v, len, (int)sp.split, sp.per,
                                                               ctx->partials, op);
    DS_LAUNCHED();
    if (sp.split > 1) {
        bn_reduce_sum<Op><<<(unsigned)v->c, 32, 0, ctx->stream>>>((int)sp.split, ctx->partials,
                                                                  op);
        DS_LAUNCHED();
    }
    return DS_OK;
}

/* Runs elementwise op over every element of view v. */
template <class Op>
static ds_status bn_map(ds_ctx *ctx, const ds_view *v, const int *len, const Op &op)
{
    if (v->c <= 0 || v->n <= 0 || v->p <= 0)
        return DS_OK;   /* no elements */
    if (bn_tiled(v)) {
        const long rows = (long)v->n * v->p;
        const unsigned tiles = bn_tiles(v);
        const long need = (rows + TILE_R - 1) / TILE_R;
        dim3 grid(tiles, bn_chunks(ctx, 2048 / (TILE_C * TILE_R), tiles, need));
        bn_map_tile<Op><<<grid, dim3(TILE_C, TILE_R), 0, ctx->stream>>>(*v, len, op);
    } else {
        const long need = (v->p + CB_MAP - 1) / CB_MAP;
        dim3 grid((unsigned)v->c, bn_chunks(ctx, 2048 / CB_MAP, v->c, need));
        bn_map_cb<Op><<<grid, CB_MAP, 0, ctx->stream>>>(*v, len, op);
    }
    DS_LAUNCHED();
    return DS_OK;
}

/* ---- the ops ----
 * T is the element type of x, y, dx and dy; S = ds_stats_t<T> that of the
 * stats role (gamma, beta, dgamma, dbeta, the saved and running statistics,
 * the moments); M = ds_math_t<T> the arithmetic of the per-element parts.
 * For float and double all three are T. For the 16-bit types S and M are
 * float: elements are widened on reading and rounded once on writing, so
 * each op computes what the float32 op computes on the widened inputs (the
 * CPU's emulation, cpu/ops_half.inc); the sums stay in double. */

struct bn_none {};

/* mom [2c] = sum x, sum x^2 (assigns). */
template <typename T> struct bn_moments_op {
    typedef bn_none param_t;
    typedef ds_stats_t<T> S;
    const T *x;
    S *mom;
    int c;
    __device__ param_t param(int) const { return {}; }
    __device__ void add(const param_t &, long e, double &s1, double &s2) const
    {
        double a = ds_wide(x[e]);
        s1 += a;
        s2 += a * a;
    }
    __device__ void done(const param_t &, int ch, double s1, double s2) const
    {
        mom[ch] = (S)s1;
        mom[c + ch] = (S)s2;
    }
};

/* x: view v, len [v.n]; mom [2*c] (stats): sum x, then sum x^2 (assigns). */
template <typename T>
ds_status cuda_bn_moments(ds_ctx *ctx, const ds_view *v, const int *len, const void *x,
                          void *mom)
{
    return bn_reduce(ctx, v, len,
                     bn_moments_op<T>{(const T *)x, (ds_stats_t<T> *)mom, v->c});
}

/* The batch statistics of channel ch from the summed moments mom [2c] (stats
 * type S), as the CPU takes them: biased variance, clamped at 0 against
 * rounding. */
template <typename S>
static __device__ void bn_batch_stats(const S *mom, int c, int ch, double count, double eps,
                                      double &mean, double &var, double &invstd)
{
    mean = mom[ch] / count;
    var = mom[c + ch] / count - mean * mean;
    if (var < 0)
        var = 0;
    invstd = 1 / sqrt(var + eps);
}

/* Per channel: save_mean, save_invstd (assign) and the running estimates
 * (unbiased variance; one value has no spread, so its biased 0 stays).
 * count_ [1] (scalar) is the batch's, read here on the device; every other
 * pointer is of the stats type S. */
template <typename S>
static __global__ void bn_train_stats_kernel(int c, const double *__restrict__ count_, double eps,
                                             double momentum, const S *mom, S *save_mean,
                                             S *save_invstd, S *run_mean, S *run_var)
{
    const double count = *count_;
    for (int ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c; ch += gridDim.x * blockDim.x) {
        double mean, var, invstd;
        bn_batch_stats(mom, c, ch, count, eps, mean, var, invstd);
        double unbiased = count > 1 ? var * count / (count - 1) : var;
        save_mean[ch] = (S)mean;
        save_invstd[ch] = (S)invstd;
        run_mean[ch] = (S)((1 - momentum) * run_mean[ch] + momentum * mean);
        run_var[ch] = (S)((1 - momentum) * run_var[ch] + momentum * unbiased);
    }
}

/* y = (x - mean) * scale + shift at real positions, 0 at padding; mean,
 * scale and shift rounded to M from double, the rest in M, as bn_apply. */
template <typename M> struct bn_affine {
    M mean, scale, shift;
};

/* Training mode: statistics from mom and count [1] (scalar, in device
 * memory: read once per channel a thread serves). */
template <typename T> struct bn_apply_train_op {
    typedef ds_math_t<T> M;
    typedef ds_stats_t<T> S;
    typedef bn_affine<M> param_t;
    const T *x;
    const S *mom, *gamma, *beta;
    T *y;
    int c;
    const double *count;
    double eps;
    __device__ param_t param(int ch) const
    {
        double mean, var, invstd;
        bn_batch_stats(mom, c, ch, *count, eps, mean, var, invstd);
        return {(M)mean, (M)(invstd * gamma[ch]), (M)beta[ch]};
    }
    __device__ void set(const param_t &a, long e, bool real) const
    {
        y[e] = ds_round<T>(real ? (ds_wide(x[e]) - a.mean) * a.scale + a.shift : (M)0);
    }
};

/* Evaluation mode: the running estimates. */
template <typename T> struct bn_apply_eval_op {
    typedef ds_math_t<T> M;
    typedef ds_stats_t<T> S;
    typedef bn_affine<M> param_t;
    const T *x;
    const S *gamma, *beta, *run_mean, *run_var;
    T *y;
    double eps;
    __device__ param_t param(int ch) const
    {
        double invstd = 1 / sqrt((double)run_var[ch] + eps);
        return {(M)run_mean[ch], (M)(invstd * gamma[ch]), (M)beta[ch]};
    }
    __device__ void set(const param_t &a, long e, bool real) const
    {
        y[e] = ds_round<T>(real ? (ds_wide(x[e]) - a.mean) * a.scale + a.shift : (M)0);
    }
};

/* x, y: view v, len [v.n]; count [1] (scalar, device memory: the host cannot
 * check it without waiting, the model does before uploading it) real
 * positions behind mom [2c] from bn_moments (possibly summed over ranks);
 * gamma, beta [c]; save_mean, save_invstd [c] (assign); run_mean, run_var
 * [c] updated. */
template <typename T>
ds_status cuda_bn_fwd_train(ds_ctx *ctx, const ds_view *v, const int *len, const void *count,
                            const void *x, const void *mom, const void *gamma, const void *beta,
                            double eps, double momentum, void *y, void *save_mean,
                            void *save_invstd, void *run_mean, void *run_var)
{
    typedef ds_stats_t<T> S;
    if (v->c <= 0)
        return DS_OK;
    const double *count_d = (const double *)count;
    bn_train_stats_kernel<S><<<ds_cuda_grid(ctx, (size_t)v->c), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        v->c, count_d, eps, momentum, (const S *)mom, (S *)save_mean, (S *)save_invstd,
        (S *)run_mean, (S *)run_var);
    DS_LAUNCHED();
    return bn_map(ctx, v, len,
                  bn_apply_train_op<T>{(const T *)x, (const S *)mom, (const S *)gamma,
                                       (const S *)beta, (T *)y, v->c, count_d, eps});
}

/* x, y: view v, len [v.n]; gamma, beta, run_mean, run_var [c]. */
template <typename T>
ds_status cuda_bn_fwd_eval(ds_ctx *ctx, const ds_view *v, const int *len, const void *x,
                           const void *gamma, const void *beta, const void *run_mean,
                           const void *run_var, double eps, void *y)
{
    typedef ds_stats_t<T> S;
    return bn_map(ctx, v, len,
                  bn_apply_eval_op<T>{(const T *)x, (const S *)gamma, (const S *)beta,
                                      (const S *)run_mean, (const S *)run_var, (T *)y, eps});
}

/* mom [2c] = sum dy, (sum dy * (x - mean)) * invstd (assigns). */
template <typename T> struct bn_bwd_moments_op {
    typedef double param_t;   /* the channel's mean */
    typedef ds_stats_t<T> S;
    const T *dy, *x;
    const S *save_mean, *save_invstd;
    S *mom;
    int c;
    __device__ param_t param(int ch) const { return save_mean[ch]; }
    __device__ void add(const param_t &mean, long e, double &s1, double &s2) const
    {
        double d = ds_wide(dy[e]);
        s1 += d;
        s2 += d * (ds_wide(x[e]) - mean);
    }
    __device__ void done(const param_t &, int ch, double s1, double s2) const
    {
        mom[ch] = (S)s1;
        mom[c + ch] = (S)(s2 * save_invstd[ch]);
    }
};

/* dy, x: view v, len [v.n]; save_mean, save_invstd [c];
 * mom [2*c]: sum dy, then sum dy*xhat (assigns). */
template <typename T>
ds_status cuda_bn_bwd_moments(ds_ctx *ctx, const ds_view *v, const int *len, const void *dy,
                              const void *x, const void *save_mean, const void *save_invstd,
                              void *mom)
{
    typedef ds_stats_t<T> S;
    return bn_reduce(ctx, v, len,
                     bn_bwd_moments_op<T>{(const T *)dy, (const T *)x, (const S *)save_mean,
                                          (const S *)save_invstd, (S *)mom, v->c});
}

/* Training-mode backward: dx += k * (n*dy - sum dy - xhat * sum dy*xhat)
 * with k = gamma * invstd / count, all in M as the CPU; dgamma += sum
 * dy*xhat and dbeta += sum dy over this call's own positions. The dx write
 * rides in the reduction that sums them (its pass 1, every element once),
 * so the backward is the two reductions and no elementwise pass; dgamma and
 * dbeta cannot come from bn_bwd_moments' sums, which are taken in another
 * order of rounding and may have been summed over ranks since. */
template <typename M> struct bn_bwd_train_k {
    M mean, inv, k, n, sdy, sdyx;
};

template <typename T> struct bn_bwd_train_op {
    typedef ds_math_t<T> M;
    typedef ds_stats_t<T> S;
    typedef bn_bwd_train_k<M> param_t;
    const T *dy, *x;
    const S *gamma, *save_mean, *save_invstd, *mom;
    T *dx;
    S *dgamma, *dbeta;
    int c;
    const double *count;   /* [1] scalar, device memory */
    __device__ param_t param(int ch) const
    {
        const double n = *count;
        const M inv = save_invstd[ch], gi = gamma[ch] * inv;
        return {(M)save_mean[ch], inv, (M)(gi / n), (M)n, (M)mom[ch], (M)mom[c + ch]};
    }
    __device__ void add(const param_t &q, long e, double &s1, double &s2) const
    {
        const M d = ds_wide(dy[e]), xhat = (ds_wide(x[e]) - q.mean) * q.inv;
        if (dx)
            dx[e] = ds_round<T>(ds_wide(dx[e]) + q.k * (q.n * d - q.sdy - xhat * q.sdyx));
        s1 += d;
        s2 += (double)d * xhat;
    }
    __device__ void done(const param_t &, int ch, double s1, double s2) const
    {
        dgamma[ch] += (S)s2;
        dbeta[ch] += (S)s1;
    }
};

/* dy, x, dx: view v, len [v.n]; gamma, save_mean, save_invstd [c]; mom [2*c]
 * from bn_bwd_moments (possibly summed over ranks) with count [1] (scalar,
 * device memory, as in cuda_bn_fwd_train) behind it. dx (or NULL), dgamma,
 * dbeta [c] accumulate. */
template <typename T>
ds_status cuda_bn_bwd_train(ds_ctx *ctx, const ds_view *v, const int *len, const void *count,
                            const void *dy, const void *x, const void *gamma,
                            const void *save_mean, const void *save_invstd, const void *mom,
                            void *dx, void *dgamma, void *dbeta)
{
    typedef ds_stats_t<T> S;
    return bn_reduce(ctx, v, len,
                     bn_bwd_train_op<T>{(const T *)dy, (const T *)x, (const S *)gamma,
                                        (const S *)save_mean, (const S *)save_invstd,
                                        (const S *)mom, (T *)dx, (S *)dgamma, (S *)dbeta, v->c,
                                        (const double *)count});
}

/* Evaluation-mode backward: the running statistics are constants, so
 * dx += gamma * invstd * dy; dgamma, dbeta as in training. */
template <typename M> struct bn_bwd_eval_k {
    M mean, inv, k;
};

template <typename T> struct bn_bwd_eval_op {
    typedef ds_math_t<T> M;
    typedef ds_stats_t<T> S;
    typedef bn_bwd_eval_k<M> param_t;
    const T *dy, *x;
    const S *gamma, *run_mean, *run_var;
    T *dx;
    S *dgamma, *dbeta;
    double eps;
    __device__ param_t param(int ch) const
    {
        const M inv = (M)(1 / sqrt((double)run_var[ch] + eps));
        return {(M)run_mean[ch], inv, (M)(gamma[ch] * inv)};
    }
    __device__ void add(const param_t &q, long e, double &s1, double &s2) const
    {
        const M d = ds_wide(dy[e]), xc = ds_wide(x[e]) - q.mean;
        if (dx)
            dx[e] = ds_round<T>(ds_wide(dx[e]) + q.k * d);
        s1 += d;
        s2 += (double)d * xc * q.inv;
    }
    __device__ void done(const param_t &, int ch, double s1, double s2) const
    {
        dgamma[ch] += (S)s2;
        dbeta[ch] += (S)s1;
    }
};

/* dy, x, dx: view v, len [v.n]; gamma, run_mean, run_var [c].
 * dx (or NULL), dgamma, dbeta [c] accumulate. */
template <typename T>
ds_status cuda_bn_bwd_eval(ds_ctx *ctx, const ds_view *v, const int *len, const void *dy,
                           const void *x, const void *gamma, const void *run_mean,
                           const void *run_var, double eps, void *dx, void *dgamma, void *dbeta)
{
    typedef ds_stats_t<T> S;
    return bn_reduce(ctx, v, len,
                     bn_bwd_eval_op<T>{(const T *)dy, (const T *)x, (const S *)gamma,
                                       (const S *)run_mean, (const S *)run_var, (T *)dx,
                                       (S *)dgamma, (S *)dbeta, eps});
}

#define BN_INSTANTIATE(T)                                                                     \
    template ds_status cuda_bn_moments<T>(ds_ctx *, const ds_view *, const int *, const void *, \
                                          void *);                                            \
    template ds_status cuda_bn_fwd_train<T>(ds_ctx *, const ds_view *, const int *,            \
                                            const void *, const void *, const void *,          \
                                            const void *, const void *, double, double,        \
                                            void *, void *, void *, void *, void *);           \
    template ds_status cuda_bn_fwd_eval<T>(ds_ctx *, const ds_view *, const int *, const void *, \
                                           const void *, const void *, const void *,          \
                                           const void *, double, void *);                     \
    template ds_status cuda_bn_bwd_moments<T>(ds_ctx *, const ds_view *, const int *,          \
                                              const void *, const void *, const void *,        \
                                              const void *, void *);                           \
    template ds_status cuda_bn_bwd_train<T>(ds_ctx *, const ds_view *, const int *,            \
                                            const void *, const void *, const void *,          \
                                            const void *, const void *, const void *,          \
                                            const void *, void *, void *, void *);             \
    template ds_status cuda_bn_bwd_eval<T>(ds_ctx *, const ds_view *, const int *, const void *, \
                                           const void *, const void *, const void *,          \
                                           const void *, double, void *, void *, void *);

BN_INSTANTIATE(float)
BN_INSTANTIATE(double)
BN_INSTANTIATE(__half)
BN_INSTANTIATE(__nv_bfloat16)
