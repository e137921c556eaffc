/* conv.cu - 2-D convolution (h = time, w = frequency) through cuDNN, as the
 * CPU twin src/cpu/conv.inc: cross-correlation as PyTorch, NCHW.
 *
 * Algorithms are chosen once per shape and cached in ctx->conv:
 *  - conv2d_work (start-up, the run's largest geometry of a layer) times every
 *    algorithm with cudnnFind* (cuDNN's own temporary memory, acceptable only
 *    there) and records a plan: the workspace W the chosen three need and the
 *    total work size;
 *  - a smaller shape of the same layer (shorter batch or utterances) is timed
 *    once, at its first fwd (forward) and first bwd (backward filter, and
 *    backward data once dx is wanted), with cudnnFind*Ex on the op's own
 *    buffers, so nothing is allocated.
 * Filters on every choice: status success; deterministic under
 * --deterministic; FP32 without --tf32 only FMA math (no TF32).
 *
 * work, for a plan of total bytes P and a shape whose Find scratch is S bytes
 * (S = max(x, w) elements of that shape):
 *   [workspace, L = P - S rounded down to 256 bytes][Find-Ex scratch, S]
 * For the planned shape itself L = W rounded up to 256; a smaller shape gets
 * the same buffer with a smaller scratch, so at least as much workspace. The
 * workspace region starts at work, which is what the real calls use. P is the
 * covering plan's own total, not the largest W of all layers: the shared
 * buffer is the largest conv2d_work, which need not hold one layer's W plus
 * another's scratch.
 *
 * The bias gradient is our own deterministic two-pass reduction accumulated
 * in double (the project's rule for reductions), not cudnnConvolutionBackwardBias,
 * whose summation order cuDNN does not promise.
 *
 * The 16-bit tables: x, w, b, y and their gradients in FP16 or BF16, the
 * convolution descriptor's compute type FP32 (cuDNN's pseudo-half
 * configurations) and tensor-op math; alpha and beta are floats. Where
 * cuDNN rounds inside (an algorithm may keep partial results in the data
 * type) is cuDNN's; the output, and dx and dw after adding the old value
 * (beta 1), are rounded to the data type at the end. The forward bias is
 * then added by conv_bias_add, which rounds the sum again (cudnnAddTensor
 * does the same for float and double, in their own types); the bias
 * gradient sums in double and rounds once. */
#include <cstdlib>
#include <cstring>

#include "ops_cuda.h"

/* ---------------------------------------------------------------- cache -- */

/* Slots of the open-addressing table. At 3/4 full the table is flushed (every
 * shape chosen again at its next use) rather than failing a long run whose
 * utterance lengths give many shapes; the plans of conv2d_work survive. */
#define CONV_SLOTS 4096
#define CONV_MAX_USED (CONV_SLOTS / 4 * 3)
/* Perf results asked for per Find: more than any direction's algorithm count
 * (cuDNN 9: 8, 6, 7), with room for results per math type. */
#define CONV_MAX_RESULTS 32

#define CONV_ALIGN 256   /* DS_ALIGN_BYTES: the work buffer's alignment */

/* The geometry in a failure message. */
#define CONV_SHAPE_FMT "n=%d ci=%d hi=%d wi=%d co=%d k=%dx%d stride=%dx%d pad=%dx%d (%s)"
#define CONV_SHAPE_ARGS(g, dt)                                                                \
    (g)->n, (g)->ci, (g)->hi, (g)->wi, (g)->co, (g)->kh, (g)->kw, (g)->sh, (g)->sw, (g)->ph,  \
        (g)->pw, conv_dt_name(dt)

/* The short name of a data type in messages. */
static const char *conv_dt_name(cudnnDataType_t dt)
{
    switch (dt) {
    case CUDNN_DATA_DOUBLE: return "fp64";
    case CUDNN_DATA_HALF: return "fp16";
    case CUDNN_DATA_BFLOAT16: return "bf16";
    default: return "fp32";
    }
}

/* Which algorithm, under which math type, for one direction. */
template <typename A> struct conv_choice {
    A algo;
    cudnnMathType_t math;
};

/* One shape of one dtype: its descriptors and the algorithms chosen so far. */
struct conv_entry {
    int used;
    cudnnDataType_t dt;
    ds_conv_geom g;                  /* key, with dt */
    cudnnTensorDescriptor_t xd;      /* x, dx [n][ci][hi][wi] */
    cudnnTensorDescriptor_t yd;      /* y, dy [n][co][ho][wo] */
    cudnnTensorDescriptor_t bd;      /* b [1][co][1][1] */
    cudnnFilterDescriptor_t wd;      /* w, dw [co][ci][kh][kw] */
    cudnnConvolutionDescriptor_t cd; /* pad, stride, dilation 1, cross-correlation */
    size_t ws_bytes;                 /* workspace region at the start of work (L) */
    int have_fwd, have_data, have_filter;   /* which directions are chosen */
    conv_choice<cudnnConvolutionFwdAlgo_t> fwd;
    conv_choice<cudnnConvolutionBwdDataAlgo_t> bwd_data;
    conv_choice<cudnnConvolutionBwdFilterAlgo_t> bwd_filter;
};

/* A geometry conv2d_work was asked for: the work it promised. */
struct conv_plan {
    cudnnDataType_t dt;
    ds_conv_geom g;
    size_t total_bytes;   /* the work region, bytes (W rounded up + scratch) */
    ds_status st;         /* DS_OK, or why the start-up choice failed */
};

struct ds_cuda_conv_cache {
    conv_entry slot[CONV_SLOTS];
    int used;
    conv_plan *plans;
    int nplans, cap_plans;
};

static size_t conv_align_up(size_t b) { return (b + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN; }

static int conv_key_eq(const conv_entry *e, cudnnDataType_t dt, const ds_conv_geom *g)
{
    /* ds_conv_geom is ints only: no padding bytes, so memcmp compares fields */
    return e->dt == dt && memcmp(&e->g, g, sizeof *g) == 0;
}

static unsigned conv_hash(cudnnDataType_t dt, const ds_conv_geom *g)
{
    const int f[] = {(int)dt, g->n,  g->ci, g->hi, g->wi, g->co, g->kh,
                     g->kw,   g->sh, g->sw, g->ph, g->pw, g->ho, g->wo};
    unsigned h = 2166136261u;   /* FNV-1a over the fields */
    for (int v : f)
        for (int k = 0; k < 4; k++)
            h = (h ^ (((unsigned)v >> (8 * k)) & 0xffu)) * 16777619u;
    return h;
}

static void conv_entry_release(conv_entry *e)
{
    if (e->xd)
        (void)cudnnDestroyTensorDescriptor(e->xd);
    if (e->yd)
        (void)cudnnDestroyTensorDescriptor(e->yd);
    if (e->bd)
        (void)cudnnDestroyTensorDescriptor(e->bd);
    if (e->wd)
        (void)cudnnDestroyFilterDescriptor(e->wd);
    if (e->cd)
        (void)cudnnDestroyConvolutionDescriptor(e->cd);
    memset(e, 0, sizeof *e);
}

static void conv_flush(ds_cuda_conv_cache *c)
{
    for (int i = 0; i < CONV_SLOTS; i++)
        if (c->slot[i].used)
            conv_entry_release(&c->slot[i]);
    c->used = 0;
}

void ds_cuda_conv_cache_free(ds_ctx *c)
{
    if (!c || !c->conv)
        return;
    conv_flush(c->conv);
    free(c->conv->plans);
    free(c->conv);
    c->conv = nullptr;
}

static ds_status conv_cache(ds_ctx *ctx, ds_cuda_conv_cache **out)
{
    if (!ctx->conv) {
        ctx->conv = (ds_cuda_conv_cache *)calloc(1, sizeof *ctx->conv);
        if (!ctx->conv)
            return DS_FAIL(DS_ERR_MEM, "conv2d: algorithm cache");
    }
    *out = ctx->conv;
    return DS_OK;
}

/* The cached entry of a shape, or NULL. */
static conv_entry *conv_lookup(ds_cuda_conv_cache *c, cudnnDataType_t dt, const ds_conv_geom *g)
{
    for (unsigned i = conv_hash(dt, g) % CONV_SLOTS;; i = (i + 1) % CONV_SLOTS) {
        conv_entry *e = &c->slot[i];
        if (!e->used)
            return nullptr;   /* the table is never full: an empty slot ends every probe */
        if (conv_key_eq(e, dt, g))
            return e;
    }
}

/* The descriptors of a shape (entry zeroed; the caller releases it on failure):
 * tensors of dt, the convolution computed in ct (ds_dtype_traits::cudnn_compute). */
static ds_status conv_describe(conv_entry *e, cudnnDataType_t dt, cudnnDataType_t ct,
                               const ds_conv_geom *g)
{
    DS_CUDNN(cudnnCreateTensorDescriptor(&e->xd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&e->yd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&e->bd));
    DS_CUDNN(cudnnCreateFilterDescriptor(&e->wd));
    DS_CUDNN(cudnnCreateConvolutionDescriptor(&e->cd));
    DS_CUDNN(cudnnSetTensor4dDescriptor(e->xd, CUDNN_TENSOR_NCHW, dt, g->n, g->ci, g->hi, g->wi));
    DS_CUDNN(cudnnSetTensor4dDescriptor(e->yd, CUDNN_TENSOR_NCHW, dt, g->n, g->co, g->ho, g->wo));
    DS_CUDNN(cudnnSetTensor4dDescriptor(e->bd, CUDNN_TENSOR_NCHW, dt, 1, g->co, 1, 1));
    DS_CUDNN(cudnnSetFilter4dDescriptor(e->wd, dt, CUDNN_TENSOR_NCHW, g->co, g->ci, g->kh, g->kw));
    DS_CUDNN(cudnnSetConvolution2dDescriptor(e->cd, g->ph, g->pw, g->sh, g->sw, 1, 1,
                                             CUDNN_CROSS_CORRELATION, ct));
    /* our output size rule (floor, as PyTorch) must be cuDNN's */
    int n, c, h, w;
    DS_CUDNN(cudnnGetConvolution2dForwardOutputDim(e->cd, e->xd, e->wd, &n, &c, &h, &w));
    if (n != g->n || c != g->co || h != g->ho || w != g->wo)
        return DS_FAIL(DS_ERR_BACKEND,
                       "conv2d: cuDNN derives output %dx%dx%dx%d for " CONV_SHAPE_FMT, n, c, h, w,
                       CONV_SHAPE_ARGS(g, dt));
    return DS_OK;
}

/* A new entry for a shape not in the table: descriptors made, nothing chosen. */
static ds_status conv_insert(ds_cuda_conv_cache *c, cudnnDataType_t dt, cudnnDataType_t ct,
                             const ds_conv_geom *g, size_t ws_bytes, conv_entry **out)
{
    if (c->used >= CONV_MAX_USED)
        conv_flush(c);
    unsigned i = conv_hash(dt, g) % CONV_SLOTS;
    while (c->slot[i].used)
        i = (i + 1) % CONV_SLOTS;
    conv_entry *e = &c->slot[i];
    ds_status st = conv_describe(e, dt, ct, g);
    if (st != DS_OK) {
        conv_entry_release(e);
        return st;
    }
    e->used = 1;
    e->dt = dt;
    e->g = *g;
    e->ws_bytes = ws_bytes;
    c->used++;
    *out = e;
    return DS_OK;
}

/* ----------------------------------------------------------- geometry -- */

/* As the CPU's conv_check: strides and kernel positive, padding not
 * negative, the padded input at least the kernel. Channel and input sizes must
 * be positive too (the CPU would accept ci = 0 or an all-padding input; cuDNN
 * cannot); n = 0 and co = 0 are valid and empty. */
static int conv_bad_fields(const ds_conv_geom *g)
{
    return g->n < 0 || g->ci < 1 || g->co < 0 || g->hi < 1 || g->wi < 1 || g->sh < 1 ||
           g->sw < 1 || g->kh < 1 || g->kw < 1 || g->ph < 0 || g->pw < 0 ||
           g->hi + 2 * g->ph < g->kh || g->wi + 2 * g->pw < g->kw;
}

/* ho and wo must be what the other fields imply (floor, as PyTorch). */
static int conv_bad_output(const ds_conv_geom *g)
{
    return g->ho != (g->hi + 2 * g->ph - g->kh) / g->sh + 1 ||
           g->wo != (g->wi + 2 * g->pw - g->kw) / g->sw + 1;
}

static ds_status conv_check(const ds_conv_geom *g)
{
    if (conv_bad_fields(g))
        return DS_FAIL(DS_ERR_ARG, "conv2d: bad geometry");
    if (conv_bad_output(g))
        return DS_FAIL(DS_ERR_ARG, "conv2d: output %dx%d does not match geometry", g->ho, g->wo);
    return DS_OK;
}

/* Nothing to compute: no utterances or no output channels. */
static int conv_empty(const ds_conv_geom *g) { return g->n == 0 || g->co == 0; }

/* Elements of the Find-Ex scratch of a shape: dx or dw, whichever is larger. */
static size_t conv_scratch_elems(const ds_conv_geom *g)
{
    size_t nx = (size_t)g->n * g->ci * g->hi * g->wi;
    size_t nw = (size_t)g->co * g->ci * g->kh * g->kw;
    return nx > nw ? nx : nw;
}

/* Same layer: everything but the batch and the time extent agrees. */
static int conv_same_layer(const ds_conv_geom *a, const ds_conv_geom *b)
{
    return a->ci == b->ci && a->wi == b->wi && a->co == b->co && a->kh == b->kh &&
           a->kw == b->kw && a->sh == b->sh && a->sw == b->sw && a->ph == b->ph &&
           a->pw == b->pw && a->wo == b->wo;
}

/* The plan whose work covers shape g: same layer, batch and length at least
 * g's; of several, the smallest, so that whichever the caller sized its work
 * by, this one fits in it. NULL when none. */
static const conv_plan *conv_plan_for(const ds_cuda_conv_cache *c, cudnnDataType_t dt,
                                      const ds_conv_geom *g)
{
    const conv_plan *best = nullptr;
    for (int i = 0; i < c->nplans; i++) {
        const conv_plan *p = &c->plans[i];
        if (p->dt != dt || !conv_same_layer(&p->g, g) || p->g.n < g->n || p->g.hi < g->hi)
            continue;
        if (!best || p->total_bytes < best->total_bytes)
            best = p;
    }
    return best;
}

static const conv_plan *conv_plan_exact(const ds_cuda_conv_cache *c, cudnnDataType_t dt,
                                        const ds_conv_geom *g)
{
    for (int i = 0; i < c->nplans; i++)
        if (c->plans[i].dt == dt && memcmp(&c->plans[i].g, g, sizeof *g) == 0)
            return &c->plans[i];
    return nullptr;
}

static ds_status conv_add_plan(ds_cuda_conv_cache *c, const conv_plan *p)
{
    if (c->nplans == c->cap_plans) {
        int cap = c->cap_plans ? 2 * c->cap_plans : 8;
        conv_plan *np = (conv_plan *)realloc(c->plans, (size_t)cap * sizeof *np);
        if (!np)
            return DS_FAIL(DS_ERR_MEM, "conv2d: plan list");
        c->plans = np;
        c->cap_plans = cap;
    }
    c->plans[c->nplans++] = *p;
    return DS_OK;
}

/* ---------------------------------------------------------- algorithms -- */

/* The math type the descriptor allows while timing: FP32 FMA only unless
 * --tf32, then cuDNN's default, which permits TF32 but no down-conversion to
 * FP16 (unlike ALLOW_CONVERSION); FP64 cuDNN's default, as PyTorch (every
 * FP64 path computes in FP64); FP16 and BF16 tensor ops (the compute type,
 * FP32, is the descriptor's). */
template <typename T> static cudnnMathType_t conv_find_math(const ds_ctx *ctx)
{
    if (ds_dtype_traits<T>::narrow)
        return CUDNN_TENSOR_OP_MATH;
    return sizeof(T) == 4 && !ctx->opts.tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

/* Whether a result's math type may run: never ALLOW_CONVERSION (FP32 data
 * rounded to FP16 or BF16 inside; for 16-bit data, a conversion we did not
 * ask for either); FP32 without --tf32 only FMA; anything else for FP64 and
 * the 16-bit types, whose compute type FP32 (FP64) every math type keeps. */
template <typename T> static int conv_math_ok(const ds_ctx *ctx, cudnnMathType_t m)
{
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
        return 0;   /* may convert to a narrower type */
    if (!ds_dtype_traits<T>::narrow && sizeof(T) == 4 && !ctx->opts.tf32)
        return m == CUDNN_FMA_MATH;
    return 1;
}

/* The workspace an algorithm needs under the descriptor's current math type. */
static cudnnStatus_t conv_ws_query(ds_ctx *ctx, const conv_entry *e, cudnnConvolutionFwdAlgo_t a,
                                   size_t *bytes)
{
    return cudnnGetConvolutionForwardWorkspaceSize(ctx->dnn, e->xd, e->wd, e->cd, e->yd, a, bytes);
}

static cudnnStatus_t conv_ws_query(ds_ctx *ctx, const conv_entry *e,
                                   cudnnConvolutionBwdDataAlgo_t a, size_t *bytes)
{
    return cudnnGetConvolutionBackwardDataWorkspaceSize(ctx->dnn, e->wd, e->yd, e->cd, e->xd, a,
                                                        bytes);
}

static cudnnStatus_t conv_ws_query(ds_ctx *ctx, const conv_entry *e,
                                   cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes)
{
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx->dnn, e->xd, e->yd, e->cd, e->wd, a,
                                                          bytes);
}

/* Each successful result's memory raised to what cuDNN's size query says
 * for its algorithm and math type (the run passes that much; a Find's figure
 * has been known to fall short); a result whose query fails is dropped. Leaves
 * the descriptor's math type changed: every call sets its own. */
template <typename Perf>
static void conv_requery(ds_ctx *ctx, const conv_entry *e, Perf *r, int got)
{
    for (int i = 0; i < got; i++) {
        size_t need = 0;
        if (r[i].status != CUDNN_STATUS_SUCCESS)
            continue;
        if (cudnnSetConvolutionMathType(e->cd, r[i].mathType) != CUDNN_STATUS_SUCCESS ||
            conv_ws_query(ctx, e, r[i].algo, &need) != CUDNN_STATUS_SUCCESS)
            r[i].status = CUDNN_STATUS_NOT_SUPPORTED;
        else if (need > r[i].memory)
            r[i].memory = need;
    }
}

/* The usable result to run (any direction's perf type), or -1: succeeded,
 * fits the workspace limit, deterministic when asked, allowed math. Timed
 * results: the fastest. Deterministic runs: the first in cuDNN's heuristic
 * order, since timings differ run to run and two deterministic algorithms
 * still round differently. */
template <typename T, typename Perf>
static int conv_pick(const ds_ctx *ctx, const Perf *r, int got, size_t limit)
{
    int best = -1;
    for (int i = 0; i < got; i++) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].memory > limit ||
            (ctx->opts.deterministic && r[i].determinism != CUDNN_DETERMINISTIC) ||
            !conv_math_ok<T>(ctx, r[i].mathType))
            continue;
        if (ctx->opts.deterministic)
            return i;
        if (best < 0 || r[i].time < r[best].time)
            best = i;
    }
    return best;
}

static ds_status conv_none(const char *dir, const conv_entry *e, int got)
{
    return DS_FAIL(DS_ERR_BACKEND,
                   "conv2d: no %s algorithm passes the filters (success, determinism, math "
                   "type; %d results) for " CONV_SHAPE_FMT,
                   dir, got, CONV_SHAPE_ARGS(&e->g, e->dt));
}

/* Requested result count: cuDNN's own maximum, within our array. */
static int conv_req(int max_count)
{
    return max_count < CONV_MAX_RESULTS ? max_count : CONV_MAX_RESULTS;
}

/* Each direction is timed either at start-up (no buffers: cuDNN's own
 * temporary memory, any workspace) or at a shape's first use with the Ex form
 * on the op's buffers and the entry's workspace region (ws_bytes). *mem gets
 * the chosen algorithm's workspace. Choices are stored; the have_* flags are
 * the caller's. */

/* Forward; the Ex trial outputs land in y, which the real call then assigns.
 * x [n][ci][hi][wi], w [co][ci][kh][kw], y [n][co][ho][wo] (all NULL at start-up). */
template <typename T>
static ds_status conv_find_fwd(ds_ctx *ctx, conv_entry *e, const void *x, const void *w, void *y,
                               void *work, size_t *mem)
{
    cudnnConvolutionFwdAlgoPerf_t r[CONV_MAX_RESULTS];
    int max, got = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, conv_find_math<T>(ctx)));
    DS_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx->dnn, &max));
    if (ctx->opts.deterministic)   /* heuristic order, untimed: the same choice every run */
        DS_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(ctx->dnn, e->xd, e->wd, e->cd, e->yd,
                                                        conv_req(max), &got, r));
    else if (x)
        DS_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(ctx->dnn, e->xd, x, e->wd, w, e->cd, e->yd,
                                                        y, conv_req(max), &got, r, work,
                                                        e->ws_bytes));
    else
        DS_CUDNN(cudnnFindConvolutionForwardAlgorithm(ctx->dnn, e->xd, e->wd, e->cd, e->yd,
                                                      conv_req(max), &got, r));
    conv_requery(ctx, e, r, got);
    const int k = conv_pick<T>(ctx, r, got, x ? e->ws_bytes : SIZE_MAX);
    if (k < 0)
        return conv_none("forward", e, got);
    e->fwd = {r[k].algo, r[k].mathType};
    *mem = r[k].memory;
    return DS_OK;
}

/* Backward data; the Ex trial outputs land in scratch (never dx, which
 * accumulates). w [co][ci][kh][kw], dy [n][co][ho][wo], scratch [n*ci*hi*wi]. */
template <typename T>
static ds_status conv_find_data(ds_ctx *ctx, conv_entry *e, const void *w, const void *dy,
                                void *scratch, void *work, size_t *mem)
{
    cudnnConvolutionBwdDataAlgoPerf_t r[CONV_MAX_RESULTS];
    int max, got = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, conv_find_math<T>(ctx)));
    DS_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx->dnn, &max));
    if (ctx->opts.deterministic)
        DS_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx->dnn, e->wd, e->yd, e->cd, e->xd,
                                                             conv_req(max), &got, r));
    else if (dy)
        DS_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx->dnn, e->wd, w, e->yd, dy, e->cd,
                                                             e->xd, scratch, conv_req(max), &got,
                                                             r, work, e->ws_bytes));
    else
        DS_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(ctx->dnn, e->wd, e->yd, e->cd, e->xd,
                                                           conv_req(max), &got, r));
    conv_requery(ctx, e, r, got);
    const int k = conv_pick<T>(ctx, r, got, dy ? e->ws_bytes : SIZE_MAX);
    if (k < 0)
        return conv_none("backward-data", e, got);
    e->bwd_data = {r[k].algo, r[k].mathType};
    *mem = r[k].memory;
    return DS_OK;
}

/* Backward filter; the Ex trial outputs land in scratch (never dw, which
 * accumulates). x [n][ci][hi][wi], dy [n][co][ho][wo], scratch [co*ci*kh*kw]. */
template <typename T>
static ds_status conv_find_filter(ds_ctx *ctx, conv_entry *e, const void *x, const void *dy,
                                  void *scratch, void *work, size_t *mem)
{
    cudnnConvolutionBwdFilterAlgoPerf_t r[CONV_MAX_RESULTS];
    int max, got = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, conv_find_math<T>(ctx)));
    DS_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx->dnn, &max));
    if (ctx->opts.deterministic)
        DS_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx->dnn, e->xd, e->yd, e->cd, e->wd,
                                                               conv_req(max), &got, r));
    else if (x)
        DS_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx->dnn, e->xd, x, e->yd, dy,
                                                               e->cd, e->wd, scratch,
                                                               conv_req(max), &got, r, work,
                                                               e->ws_bytes));
    else
        DS_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(ctx->dnn, e->xd, e->yd, e->cd, e->wd,
                                                             conv_req(max), &got, r));
    conv_requery(ctx, e, r, got);
    const int k = conv_pick<T>(ctx, r, got, x ? e->ws_bytes : SIZE_MAX);
    if (k < 0)
        return conv_none("backward-filter", e, got);
    e->bwd_filter = {r[k].algo, r[k].mathType};
    *mem = r[k].memory;
    return DS_OK;
}

/* Start-up: all three directions; the entry counts as chosen only when all
 * three are, with *ws (the largest of their workspaces) as its region. */
template <typename T> static ds_status conv_find_startup(ds_ctx *ctx, conv_entry *e, size_t *ws)
{
    size_t mf = 0, md = 0, mw = 0;
    e->have_fwd = e->have_data = e->have_filter = 0;
    DS_CUDA(cudaSetDevice(ctx->device));   /* Find allocates on the current device */
    DS_TRY(conv_find_fwd<T>(ctx, e, nullptr, nullptr, nullptr, nullptr, &mf));
    DS_TRY(conv_find_data<T>(ctx, e, nullptr, nullptr, nullptr, nullptr, &md));
    DS_TRY(conv_find_filter<T>(ctx, e, nullptr, nullptr, nullptr, nullptr, &mw));
    *ws = mf > md ? mf : md;
    *ws = mw > *ws ? mw : *ws;
    e->ws_bytes = conv_align_up(*ws);
    e->have_fwd = e->have_data = e->have_filter = 1;
    return DS_OK;
}

/* The entry of shape g, made (descriptors, workspace limit) when new. Its
 * work is that of the smallest plan covering it; a shape no conv2d_work
 * covered is refused, since its work cannot be known to suffice. */
template <typename T>
static ds_status conv_entry_for(ds_ctx *ctx, const ds_conv_geom *g, conv_entry **out)
{
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    ds_cuda_conv_cache *c = nullptr;
    DS_TRY(conv_cache(ctx, &c));
    if ((*out = conv_lookup(c, dt, g)))
        return DS_OK;
    const conv_plan *p = conv_plan_for(c, dt, g);
    if (!p)
        return DS_FAIL(DS_ERR_ARG,
                       "conv2d: no conv2d_work geometry covers " CONV_SHAPE_FMT
                       " (the work must be sized for the run's largest batch and length)",
                       CONV_SHAPE_ARGS(g, dt));
    if (p->st != DS_OK)
        return DS_FAIL(p->st, "conv2d: the start-up algorithm choice failed for the layer "
                       "of " CONV_SHAPE_FMT, CONV_SHAPE_ARGS(g, dt));
    /* scratch at the end of the plan's region; what is left before it is workspace */
    const size_t scratch = conv_scratch_elems(g) * sizeof(T);
    const size_t ws = (p->total_bytes - scratch) / CONV_ALIGN * CONV_ALIGN;
    return conv_insert(c, dt, ds_dtype_traits<T>::cudnn_compute, g, ws, out);
}

/* ---------------------------------------------------------- bias grad -- */

/* Sum of v over the block (blockDim.x == DS_CUDA_BLOCK), fixed tree order;
 * the result in thread 0. */
static __device__ double conv_block_sum(double v)
{
    __shared__ double s[DS_CUDA_BLOCK];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int h = DS_CUDA_BLOCK / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h)
            s[threadIdx.x] += s[threadIdx.x + h];
        __syncthreads();
    }
    return s[0];
}

/* Pass 1: block b = o*split + s sums channel o of dy over flattened
 * positions [s*per, (s+1)*per) of its n*npos (utterance-major), row by row so
 * reads are coalesced and no index is divided per element. split == 1: adds
 * straight into db; else writes part[b]. dy [n][co][npos], db [co]. */
template <typename T>
__global__ void conv_bias_pass1(const T *dy, int n, int co, long npos, int split, long per,
                                double *part, T *db)
{
    const int o = (int)(blockIdx.x / (unsigned)split), s = (int)(blockIdx.x % (unsigned)split);
    const long total = (long)n * npos;
    long j = (long)s * per;
    const long end = j + per < total ? j + per : total;
    double acc = 0;
    while (j < end) {
        const long i = j / npos, p0 = j - i * npos;
        const long len = (end - j < npos - p0) ? end - j : npos - p0;   /* rest of row i */
        const T *row = dy + ((size_t)i * co + o) * npos + p0;
        for (long k = threadIdx.x; k < len; k += blockDim.x)
            acc += (double)ds_wide(row[k]);
        j += len;
    }
    const double sum = conv_block_sum(acc);
    if (threadIdx.x == 0) {
        if (split == 1)
            db[o] = ds_round<T>((double)ds_wide(db[o]) + sum);
        else
            part[blockIdx.x] = sum;
    }
}

/* Pass 2: db[o] += the split partial sums of channel o, in fixed order.
 * part [co*split], db [co]. */
template <typename T> __global__ void conv_bias_pass2(const double *part, int split, T *db)
{
    const int o = blockIdx.x;
    double acc = 0;
    for (int k = threadIdx.x; k < split; k += blockDim.x)
        acc += part[(size_t)o * split + k];
    const double sum = conv_block_sum(acc);
    if (threadIdx.x == 0)
        db[o] = ds_round<T>((double)ds_wide(db[o]) + sum);
}

/* db [co] += sum of dy [n][co][ho][wo] over n, ho, wo, in double. The split
 * depends only on the shape and the device, so the order is fixed run to run. */
template <typename T>
static ds_status conv_bias_grad(ds_ctx *ctx, const ds_conv_geom *g, const T *dy, T *db)
{
    const long npos = (long)g->ho * g->wo, total = (long)g->n * npos;
    long split = ((long)ctx->sms * 4 + g->co - 1) / g->co;   /* ~4 blocks per SM in all */
    const long useful = (total + 4095) / 4096;                /* >= 4096 elements a block */
    split = split < useful ? split : useful;
    split = split < DS_CUDA_PARTIALS / g->co ? split : DS_CUDA_PARTIALS / g->co;
    if (split < 1)
        split = 1;
    const long per = (total + split - 1) / split;
    conv_bias_pass1<T><<<(unsigned)(g->co * split), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        dy, g->n, g->co, npos, (int)split, per, ctx->partials, db);
    DS_LAUNCHED();
    if (split > 1) {
        conv_bias_pass2<T><<<(unsigned)g->co, DS_CUDA_BLOCK, 0, ctx->stream>>>(ctx->partials,
                                                                              (int)split, db);
        DS_LAUNCHED();
    }
    return DS_OK;
}

/* ----------------------------------------------------------- bias add -- */

/* y [n][co][npos] += b [co] per channel, in the math type, rounded once. */
template <typename T>
__global__ void conv_bias_add_kernel(size_t total, int co, long npos, const T *__restrict__ b,
                                     T *__restrict__ y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const int o = (int)((e / (size_t)npos) % (size_t)co);
        y[e] = ds_round<T>(ds_wide(y[e]) + ds_wide(b[o]));
    }
}

/* The 16-bit tables' forward bias: our kernel rather than cudnnAddTensor,
 * so that FP16 and BF16 take one path whose arithmetic we know (float, one
 * rounding), whatever the legacy API covers. b [co], y [n][co][ho][wo]. */
template <typename T>
static ds_status conv_bias_add(ds_ctx *ctx, const ds_conv_geom *g, const T *b, T *y)
{
    const long npos = (long)g->ho * g->wo;
    const size_t total = (size_t)g->n * g->co * npos;
    if (total == 0)
        return DS_OK;
    conv_bias_add_kernel<T><<<ds_cuda_grid(ctx, total), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        total, g->co, npos, b, y);
    DS_LAUNCHED();
    return DS_OK;
}

/* ---------------------------------------------------------------- ops -- */

/* Start-up, the layer's largest geometry: choose its algorithms and size its
 * work. A failed choice is recorded (DS_FAIL), kept in the plan and returned
 * by the layer's fwd and bwd, since this query cannot return a status; its
 * work then holds only the scratch. */
template <typename T> size_t cuda_conv2d_work(ds_ctx *ctx, const ds_conv_geom *g)
{
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    if (conv_bad_fields(g) || conv_bad_output(g) || conv_empty(g))
        return 0;   /* the op refuses a bad geometry (conv_check) and skips an empty one */
    const size_t scratch = conv_scratch_elems(g) * sizeof(T);

    ds_cuda_conv_cache *c = nullptr;
    if (conv_cache(ctx, &c) != DS_OK)
        return (scratch + sizeof(T) - 1) / sizeof(T);   /* recorded; every op fails */
    if (const conv_plan *p = conv_plan_exact(c, dt, g))
        return (p->total_bytes + sizeof(T) - 1) / sizeof(T);

    conv_plan p = {dt, *g, 0, DS_OK};
    size_t ws = 0;
    conv_entry *e = conv_lookup(c, dt, g);
    const int fresh = !e;
    if (fresh)
        p.st = conv_insert(c, dt, ds_dtype_traits<T>::cudnn_compute, g, 0, &e);
    if (p.st == DS_OK)
        p.st = conv_find_startup<T>(ctx, e, &ws);
    if (p.st != DS_OK && fresh && e) {
        conv_entry_release(e);   /* the last of its probe chain: safe to empty */
        c->used--;
    }
    p.total_bytes = conv_align_up(ws) + scratch;
    if (conv_add_plan(c, &p) != DS_OK)
        return (scratch + sizeof(T) - 1) / sizeof(T);   /* recorded; no plan: ops fail */
    return (p.total_bytes + sizeof(T) - 1) / sizeof(T);
}

/* y = conv(x, w) + b (assigns). x [n][ci][hi][wi], w [co][ci][kh][kw], b [co]
 * or NULL, y [n][co][ho][wo], work [conv2d_work(a geometry covering g)]. */
template <typename T>
ds_status cuda_conv2d_fwd(ds_ctx *ctx, const ds_conv_geom *g, const void *x, const void *w,
                          const void *b, void *y, void *work)
{
    DS_TRY(conv_check(g));
    if (conv_empty(g))
        return DS_OK;
    conv_entry *e;
    DS_TRY(conv_entry_for<T>(ctx, g, &e));
    if (!e->have_fwd) {
        size_t mem;
        DS_TRY(conv_find_fwd<T>(ctx, e, x, w, y, work, &mem));
        e->have_fwd = 1;
    }
    const ds_scale_t<T> one = 1, zero = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->fwd.math));
    DS_CUDNN(cudnnConvolutionForward(ctx->dnn, &one, e->xd, x, e->wd, w, e->cd, e->fwd.algo,
                                     work, e->ws_bytes, &zero, e->yd, y));
    if (b && ds_dtype_traits<T>::narrow)
        DS_TRY(conv_bias_add<T>(ctx, g, (const T *)b, (T *)y));
    else if (b)
        DS_CUDNN(cudnnAddTensor(ctx->dnn, &one, e->bd, b, &one, e->yd, y));
    return DS_OK;
}

/* x [n][ci][hi][wi], w [co][ci][kh][kw], dy [n][co][ho][wo]; dx [n][ci][hi][wi]
 * (NULL: not wanted), dw [co][ci][kh][kw], db [co] (NULL: no bias) accumulate.
 * work [conv2d_work(a geometry covering g)]. */
template <typename T>
ds_status cuda_conv2d_bwd(ds_ctx *ctx, const ds_conv_geom *g, const void *x, const void *w,
                          const void *dy, void *dx, void *dw, void *db, void *work)
{
    DS_TRY(conv_check(g));
    if (conv_empty(g))
        return DS_OK;
    conv_entry *e;
    DS_TRY(conv_entry_for<T>(ctx, g, &e));
    /* a new shape's Find-Ex scratch: after the workspace region */
    void *scratch = (char *)work + e->ws_bytes;
    size_t mem;
    if (dx && !e->have_data) {   /* never needed where dx is never wanted */
        DS_TRY(conv_find_data<T>(ctx, e, w, dy, scratch, work, &mem));
        e->have_data = 1;
    }
    if (!e->have_filter) {
        DS_TRY(conv_find_filter<T>(ctx, e, x, dy, scratch, work, &mem));
        e->have_filter = 1;
    }
    const ds_scale_t<T> one = 1;
    if (dx) {
        DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->bwd_data.math));
        DS_CUDNN(cudnnConvolutionBackwardData(ctx->dnn, &one, e->wd, w, e->yd, dy, e->cd,
                                              e->bwd_data.algo, work, e->ws_bytes, &one, e->xd,
                                              dx));
    }
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->bwd_filter.math));
    DS_CUDNN(cudnnConvolutionBackwardFilter(ctx->dnn, &one, e->xd, x, e->yd, dy, e->cd,
                                            e->bwd_filter.algo, work, e->ws_bytes, &one, e->wd,
                                            dw));
    if (db)
        DS_TRY(conv_bias_grad<T>(ctx, g, (const T *)dy, (T *)db));
    return DS_OK;
}

#define CONV_INSTANTIATE(T)                                                                   \
    template size_t cuda_conv2d_work<T>(ds_ctx *, const ds_conv_geom *);                       \
    template ds_status cuda_conv2d_fwd<T>(ds_ctx *, const ds_conv_geom *, const void *,        \
                                          const void *, const void *, void *, void *);         \
    template ds_status cuda_conv2d_bwd<T>(ds_ctx *, const ds_conv_geom *, const void *,        \
                                          const void *, const void *, void *, void *, void *,  \
                                          void *);

CONV_INSTANTIATE(float)
CONV_INSTANTIATE(double)
CONV_INSTANTIATE(__half)
CONV_INSTANTIATE(__nv_bfloat16)
