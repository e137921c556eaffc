/* conv.cu - 2-D convolution (h = time, w = frequency) through cuDNN, as the
 * CPU twin cpu/conv.inc: cross-correlation as PyTorch, NCHW.
 *
 * Algorithms are timed once per layer, at start-up, and never in a step:
 *  - conv2d_work (start-up, the run's largest geometry of a layer) times the
 *    directions the layer needs with cudnnFind* (cuDNN's own temporary
 *    memory and a blocking host, acceptable only there): forward, backward
 *    filter, and backward data only when the layer wants dx (want_dx). Only
 *    algorithms needing at most the layer's workspace cap (conv_ws_cap: a
 *    share of the memory plan) may win. It records a plan: the three choices
 *    (algorithm and math type) and W, the workspace they need, rounded up to
 *    256 bytes; W is the work size it returns;
 *  - a shape of the step (a batch or utterances shorter than the plan's, so
 *    nearly every batch's) reuses its layer's plan: at its first fwd (and
 *    first bwd) cudnnGet*WorkspaceSize checks, for that shape under the
 *    chosen math type, that the plan's algorithm is supported and fits in W;
 *    where not, the first result of cuDNN's heuristic order
 *    (cudnnGet*Algorithm_v7: host-side, no kernels, no timing) that passes
 *    the filters and fits in W runs instead. Nothing in a step times,
 *    allocates or waits; the cache counts every Find (ds_cuda_conv_searches,
 *    the backend's counters) so that tests can check it.
 * Filters on every choice: status success; deterministic under
 * --deterministic (where every choice, the plan's too, is the heuristic
 * order's first, untimed, so that every run picks the same); FP32 without
 * --tf32 only FMA math (no TF32); never ALLOW_CONVERSION.
 *
 * work is [W] bytes of workspace for a shape of the plan covering it (the
 * smallest plan of the same layer with batch and length at least the
 * shape's, so that whichever of them the caller sized its buffer by, W
 * fits); W is that plan's own, not the largest of all layers: the shared
 * buffer is the largest conv2d_work. A bwd asking for dx on a layer planned
 * without dx fails rather than search.
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
#include "partials.cuh"
#include "reduce_split.h"

/* ---------------------------------------------------------------- cache -- */

/* Slots of the open-addressing table. At 3/4 full the table is flushed (every
 * shape's descriptors made again, and its plan's choices checked again, at
 * its next use: host-side work only) rather than failing a long run whose
 * utterance lengths give many shapes; the plans of conv2d_work survive. */
#define CONV_SLOTS 4096
#define CONV_MAX_USED (CONV_SLOTS / 4 * 3)
/* Perf results asked for per search: more than any direction's algorithm
 * count (cuDNN 9: 8, 6, 7), with room for results per math type. */
#define CONV_MAX_RESULTS 32

#define CONV_ALIGN 256   /* DS_ALIGN_BYTES: the work buffer's alignment */

/* The workspace cap of a layer's plan (conv_ws_cap), bytes: the least of
 *  - CONV_WS_TENSORS times the layer's largest tensor (x, y or w at the
 *    planned shape), but at least CONV_WS_FLOOR. The workspace is one more
 *    buffer of the memory plan beside the layer's activations: an algorithm
 *    needing several times the data it reads (an FFT's padded transforms,
 *    an explicit GEMM's unfolded input) would buy a time measured on one
 *    shape with memory the batch could use, and before the cap FFT choices
 *    could size the work buffer for the whole run. The implicit-GEMM and
 *    Winograd algorithms need a fraction of the data and stay eligible; the
 *    floor keeps small layers from being cut below the few MiB any
 *    algorithm may want;
 *  - 1/CONV_WS_SHARE of the device's free memory at start-up: conv2d_work
 *    runs before the activations, parameters and recurrent reserve are
 *    allocated, and they must fit beside the work buffer. Not under
 *    --deterministic: free memory differs run to run and rank to rank, and
 *    so would the first heuristic algorithm under the cap, and the bits;
 *  - 1/CONV_WS_SHARE of ds_ctx_opts.mem_limit when set, for the same reason
 *    in a run held to a budget (bench --batch max). */
#define CONV_WS_TENSORS 2
#define CONV_WS_FLOOR ((size_t)16 << 20)
#define CONV_WS_SHARE 8

/* The geometry in a failure message. */
#define CONV_SHAPE_FMT "n=%d ci=%d hi=%d wi=%d co=%d k=%dx%d stride=%dx%d pad=%dx%d dilation=%d (%s)"
#define CONV_SHAPE_ARGS(g, dt)                                                                \
    (g)->n, (g)->ci, (g)->hi, (g)->wi, (g)->co, (g)->kh, (g)->kw, (g)->sh, (g)->sw, (g)->ph,  \
        (g)->pw, (g)->dh, conv_dt_name(dt)

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

/* The three directions' choices. */
struct conv_algos {
    conv_choice<cudnnConvolutionFwdAlgo_t> fwd;
    conv_choice<cudnnConvolutionBwdDataAlgo_t> data;     /* only where want_dx */
    conv_choice<cudnnConvolutionBwdFilterAlgo_t> filter;
};

/* One shape of one dtype: its descriptors and the algorithms it runs. */
struct conv_entry {
    int used;
    cudnnDataType_t dt;
    ds_conv_geom g;                  /* key, with dt */
    cudnnTensorDescriptor_t xd;      /* x, dx [n][ci][hi][wi] */
    cudnnTensorDescriptor_t yd;      /* y, dy [n][co][ho][wo] */
    cudnnTensorDescriptor_t bd;      /* b [1][co][1][1] */
    cudnnFilterDescriptor_t wd;      /* w, dw [co][ci][kh][kw] */
    cudnnConvolutionDescriptor_t cd; /* pad, stride, dilation (dh, 1), cross-correlation */
    size_t ws_bytes;                 /* the covering plan's workspace W: all of work */
    int want_dx;                     /* the covering plan chose backward data */
    conv_algos algo;                 /* the plan's, or a fallback where it did not fit */
    int ok_fwd, ok_data, ok_filter;  /* which directions are checked for this shape */
};

/* A geometry conv2d_work was asked for: what it chose and the work it promised. */
struct conv_plan {
    cudnnDataType_t dt;
    ds_conv_geom g;
    int want_dx;          /* backward data chosen too */
    conv_algos algo;      /* chosen for g; the layer's smaller shapes start from these */
    size_t ws_bytes;      /* W: the chosen ones' largest workspace, rounded up to CONV_ALIGN */
    ds_status st;         /* DS_OK, or why the start-up choice failed */
};

struct ds_cuda_conv_cache {
    conv_entry slot[CONV_SLOTS];
    int used;
    conv_plan *plans;
    int nplans, cap_plans;
    long searches;        /* cudnnFind* calls so far: conv2d_work's only */
};

static size_t conv_align_up(size_t b) { return (b + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN; }

static size_t conv_max(size_t a, size_t b) { return a > b ? a : b; }

static int conv_key_eq(const conv_entry *e, cudnnDataType_t dt, const ds_conv_geom *g)
{
    /* ds_conv_geom is ints only: no padding bytes, so memcmp compares fields */
    return e->dt == dt && memcmp(&e->g, g, sizeof *g) == 0;
}

static unsigned conv_hash(cudnnDataType_t dt, const ds_conv_geom *g)
{
    const int f[] = {(int)dt, g->n,  g->ci, g->hi, g->wi, g->co, g->kh, g->kw,
                     g->sh,   g->sw, g->ph, g->pw, g->ho, g->wo, g->dh};
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

long ds_cuda_conv_searches(const ds_ctx *c) { return c && c->conv ? c->conv->searches : 0; }

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
    DS_CUDNN(cudnnSetConvolution2dDescriptor(e->cd, g->ph, g->pw, g->sh, g->sw, g->dh, 1,
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

/* A new entry for a shape not in the table: descriptors made, nothing
 * chosen or checked (the caller fills in its plan's part). */
static ds_status conv_insert(ds_cuda_conv_cache *c, cudnnDataType_t dt, cudnnDataType_t ct,
                             const ds_conv_geom *g, conv_entry **out)
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
    c->used++;
    *out = e;
    return DS_OK;
}

/* ----------------------------------------------------------- geometry -- */

/* The frames the kernel's time taps reach: dh (kh - 1) + 1. */
static int conv_span(const ds_conv_geom *g) { return ds_backend_conv_dilation(g) * (g->kh - 1) + 1; }

/* g with dh as the ops read it (0 -> 1), so that one layer has one key. */
static ds_conv_geom conv_normal(const ds_conv_geom *g)
{
    ds_conv_geom n = *g;
    n.dh = ds_backend_conv_dilation(g);
    return n;
}

/* As the CPU's conv_check: strides and kernel positive, padding not
 * negative, the padded input at least the kernel. Channel and input sizes must
 * be positive too (the CPU would accept ci = 0 or an all-padding input; cuDNN
 * cannot); n = 0 and co = 0 are valid and empty. */
static int conv_bad_fields(const ds_conv_geom *g)
{
    return g->n < 0 || g->ci < 1 || g->co < 0 || g->hi < 1 || g->wi < 1 || g->sh < 1 ||
           g->sw < 1 || g->kh < 1 || g->kw < 1 || g->ph < 0 || g->pw < 0 ||
           g->hi + 2 * g->ph < conv_span(g) || g->wi + 2 * g->pw < g->kw;
}

/* ho and wo must be what the other fields imply (floor, as PyTorch). */
static int conv_bad_output(const ds_conv_geom *g)
{
    return g->ho != (g->hi + 2 * g->ph - conv_span(g)) / g->sh + 1 ||
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

/* Elements of the layer's largest tensor: x [n][ci][hi][wi], y [n][co][ho][wo]
 * or w [co][ci][kh][kw]. */
static size_t conv_largest_elems(const ds_conv_geom *g)
{
    const size_t nx = (size_t)g->n * g->ci * g->hi * g->wi;
    const size_t ny = (size_t)g->n * g->co * g->ho * g->wo;
    const size_t nw = (size_t)g->co * g->ci * g->kh * g->kw;
    return conv_max(conv_max(nx, ny), nw);
}

/* Same layer: everything but the batch and the time extent agrees. */
static int conv_same_layer(const ds_conv_geom *a, const ds_conv_geom *b)
{
    return a->ci == b->ci && a->wi == b->wi && a->co == b->co && a->kh == b->kh &&
           a->kw == b->kw && a->sh == b->sh && a->sw == b->sw && a->ph == b->ph &&
           a->pw == b->pw && a->wo == b->wo && a->dh == b->dh;
}

/* The plan whose work covers shape g: same layer, batch and length at least
 * g's; of several, the smallest W, so that whichever the caller sized its
 * work by, this one fits in it (of equal W, one with dx). NULL when none. */
static const conv_plan *conv_plan_for(const ds_cuda_conv_cache *c, cudnnDataType_t dt,
                                      const ds_conv_geom *g)
{
    const conv_plan *best = nullptr;
    for (int i = 0; i < c->nplans; i++) {
        const conv_plan *p = &c->plans[i];
        if (p->dt != dt || !conv_same_layer(&p->g, g) || p->g.n < g->n || p->g.hi < g->hi)
            continue;
        if (!best || p->ws_bytes < best->ws_bytes ||
            (p->ws_bytes == best->ws_bytes && p->want_dx > best->want_dx))
            best = p;
    }
    return best;
}

static conv_plan *conv_plan_exact(ds_cuda_conv_cache *c, cudnnDataType_t dt, const ds_conv_geom *g)
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

/* The workspace a layer's plan may need, bytes, for its largest geometry g
 * (the rule and why: CONV_WS_*). Start-up only: asks the device's free
 * memory. */
template <typename T>
static ds_status conv_ws_cap(const ds_ctx *ctx, const ds_conv_geom *g, size_t *cap)
{
    size_t c = conv_max(CONV_WS_TENSORS * conv_largest_elems(g) * sizeof(T), CONV_WS_FLOOR);
    if (!ctx->opts.deterministic) {
        size_t free_b = 0, total_b = 0;
        DS_CUDA(cudaMemGetInfo(&free_b, &total_b));   /* of the current device: the caller's */
        if (c > free_b / CONV_WS_SHARE)
            c = free_b / CONV_WS_SHARE;
    }
    if (ctx->opts.mem_limit && c > ctx->opts.mem_limit / CONV_WS_SHARE)
        c = ctx->opts.mem_limit / CONV_WS_SHARE;
    *cap = c;
    return DS_OK;
}

/* ---------------------------------------------------------- algorithms -- */

/* The math type the descriptor allows while choosing: FP32 FMA only unless
 * --tf32, then cuDNN's default, which permits TF32 but no down-conversion to
 * FP16 (unlike ALLOW_CONVERSION); FP64 cuDNN's default, as PyTorch (every
 * FP64 path computes in FP64); FP16 and BF16 tensor ops (the compute type,
 * FP32, is the descriptor's). */
template <typename T> static cudnnMathType_t conv_find_math(const ds_ctx *ctx)
{
    if (ds_dtype_traits<T>::narrow)
        return ctx->narrow_math;
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

/* One direction of the convolution: its cuDNN types and calls and where its
 * choice lives, so that choosing and checking are written once. Each takes
 * the entry's descriptors: x, dx xd [n][ci][hi][wi]; w, dw wd
 * [co][ci][kh][kw]; y, dy yd [n][co][ho][wo]. heuristic: cuDNN's order for
 * the shape, host-side (no kernels, no memory); timed: every algorithm run
 * on cuDNN's own temporary buffers (start-up only); ws: the workspace an
 * algorithm needs under the descriptor's current math type (NOT_SUPPORTED
 * where it cannot run this shape). */
struct conv_dir_fwd {
    typedef cudnnConvolutionFwdAlgo_t algo_t;
    typedef cudnnConvolutionFwdAlgoPerf_t perf_t;
    static constexpr const char *name = "forward";
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n)
    {
        return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n);
    }
    static cudnnStatus_t heuristic(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                                   perf_t *r)
    {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, e->xd, e->wd, e->cd, e->yd, req, got, r);
    }
    static cudnnStatus_t timed(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                               perf_t *r)
    {
        return cudnnFindConvolutionForwardAlgorithm(h, e->xd, e->wd, e->cd, e->yd, req, got, r);
    }
    static cudnnStatus_t ws(cudnnHandle_t h, const conv_entry *e, algo_t a, size_t *bytes)
    {
        return cudnnGetConvolutionForwardWorkspaceSize(h, e->xd, e->wd, e->cd, e->yd, a, bytes);
    }
    static conv_choice<algo_t> &choice(conv_algos *a) { return a->fwd; }
    static int &ok(conv_entry *e) { return e->ok_fwd; }
    static constexpr const char *tag = "fwd";
    static const char *algo_name(algo_t a)
    {
        static const char *const n[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                        "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
        return (unsigned)a < sizeof n / sizeof *n ? n[a] : "?";
    }
};

struct conv_dir_data {
    typedef cudnnConvolutionBwdDataAlgo_t algo_t;
    typedef cudnnConvolutionBwdDataAlgoPerf_t perf_t;
    static constexpr const char *name = "backward-data";
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n)
    {
        return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
    }
    static cudnnStatus_t heuristic(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                                   perf_t *r)
    {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, e->wd, e->yd, e->cd, e->xd, req,
                                                           got, r);
    }
    static cudnnStatus_t timed(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                               perf_t *r)
    {
        return cudnnFindConvolutionBackwardDataAlgorithm(h, e->wd, e->yd, e->cd, e->xd, req, got,
                                                         r);
    }
    static cudnnStatus_t ws(cudnnHandle_t h, const conv_entry *e, algo_t a, size_t *bytes)
    {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->wd, e->yd, e->cd, e->xd, a,
                                                            bytes);
    }
    static conv_choice<algo_t> &choice(conv_algos *a) { return a->data; }
    static int &ok(conv_entry *e) { return e->ok_data; }
    static constexpr const char *tag = "bwd-data";
    static const char *algo_name(algo_t a)
    {
        static const char *const n[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD",
                                        "WINOGRAD_NONFUSED"};
        return (unsigned)a < sizeof n / sizeof *n ? n[a] : "?";
    }
};

struct conv_dir_filter {
    typedef cudnnConvolutionBwdFilterAlgo_t algo_t;
    typedef cudnnConvolutionBwdFilterAlgoPerf_t perf_t;
    static constexpr const char *name = "backward-filter";
    static cudnnStatus_t max_count(cudnnHandle_t h, int *n)
    {
        return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
    }
    static cudnnStatus_t heuristic(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                                   perf_t *r)
    {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, e->xd, e->yd, e->cd, e->wd, req,
                                                             got, r);
    }
    static cudnnStatus_t timed(cudnnHandle_t h, const conv_entry *e, int req, int *got,
                               perf_t *r)
    {
        return cudnnFindConvolutionBackwardFilterAlgorithm(h, e->xd, e->yd, e->cd, e->wd, req,
                                                           got, r);
    }
    static cudnnStatus_t ws(cudnnHandle_t h, const conv_entry *e, algo_t a, size_t *bytes)
    {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, e->xd, e->yd, e->cd, e->wd, a,
                                                              bytes);
    }
    static conv_choice<algo_t> &choice(conv_algos *a) { return a->filter; }
    static int &ok(conv_entry *e) { return e->ok_filter; }
    static constexpr const char *tag = "bwd-filter";
    static const char *algo_name(algo_t a)
    {
        static const char *const n[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD",
                                        "WINOGRAD_NONFUSED", "FFT_TILING"};
        return (unsigned)a < sizeof n / sizeof *n ? n[a] : "?";
    }
};

/* Each successful result's memory raised to what cuDNN's size query says
 * for its algorithm and math type (the run passes that much; a search's
 * figure has been known to fall short); a result whose query fails is
 * dropped. Leaves the descriptor's math type changed: every call sets its own. */
template <typename D>
static void conv_requery(ds_ctx *ctx, const conv_entry *e, typename D::perf_t *r, int got)
{
    for (int i = 0; i < got; i++) {
        size_t need = 0;
        if (r[i].status != CUDNN_STATUS_SUCCESS)
            continue;
        if (cudnnSetConvolutionMathType(e->cd, r[i].mathType) != CUDNN_STATUS_SUCCESS ||
            D::ws(ctx->dnn, e, r[i].algo, &need) != CUDNN_STATUS_SUCCESS)
            r[i].status = CUDNN_STATUS_NOT_SUPPORTED;
        else if (need > r[i].memory)
            r[i].memory = need;
    }
}

/* The usable result to run (any direction's perf type), or -1: succeeded,
 * fits the workspace limit, deterministic when asked, allowed math. first:
 * the first such in the results' order (cuDNN's heuristic order); else the
 * fastest of the timed results. */
template <typename T, typename Perf>
static int conv_pick(const ds_ctx *ctx, const Perf *r, int got, size_t limit, int first)
{
    int best = -1;
    for (int i = 0; i < got; i++) {
        if (r[i].status != CUDNN_STATUS_SUCCESS || r[i].memory > limit ||
            (ctx->opts.deterministic && r[i].determinism != CUDNN_DETERMINISTIC) ||
            !conv_math_ok<T>(ctx, r[i].mathType))
            continue;
        if (first)
            return i;
        if (best < 0 || r[i].time < r[best].time)
            best = i;
    }
    return best;
}

static ds_status conv_none(const char *dir, const conv_entry *e, int got, size_t limit)
{
    return DS_FAIL(DS_ERR_BACKEND,
                   "conv2d: no %s algorithm passes the filters (success, determinism, math "
                   "type, at most %zu bytes of workspace; %d results) for " CONV_SHAPE_FMT,
                   dir, limit, got, CONV_SHAPE_ARGS(&e->g, e->dt));
}

/* Requested result count: cuDNN's own maximum, within our array. */
static int conv_req(int max_count)
{
    return max_count < CONV_MAX_RESULTS ? max_count : CONV_MAX_RESULTS;
}

/* Chooses direction D for e's shape into *out, needing at most limit bytes
 * of workspace (*mem: what it needs). timed (start-up only, where cuDNN may
 * allocate and the host wait): the fastest by cudnnFind*, counted in the
 * cache's searches; otherwise, and always under --deterministic (timings
 * differ run to run, and two deterministic algorithms still round
 * differently), the first in cuDNN's heuristic order, host-side. */
template <typename T, typename D>
static ds_status conv_choose(ds_ctx *ctx, const conv_entry *e, int timed, size_t limit,
                             conv_choice<typename D::algo_t> *out, size_t *mem)
{
    typename D::perf_t r[CONV_MAX_RESULTS];
    int max = 0, got = 0;
    timed = timed && !ctx->opts.deterministic;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, conv_find_math<T>(ctx)));
    DS_CUDNN(D::max_count(ctx->dnn, &max));
    if (timed) {
        ctx->conv->searches++;   /* e is in ctx->conv */
        DS_CUDNN(D::timed(ctx->dnn, e, conv_req(max), &got, r));
    } else {
        DS_CUDNN(D::heuristic(ctx->dnn, e, conv_req(max), &got, r));
    }
    conv_requery<D>(ctx, e, r, got);
    const int k = conv_pick<T>(ctx, r, got, limit, !timed);
    if (k < 0)
        return conv_none(D::name, e, got, limit);
    *out = {r[k].algo, r[k].mathType};
    *mem = r[k].memory;
    return DS_OK;
}

/* In a step, at a shape's first use of direction D: the entry's choice (its
 * plan's) where cuDNN supports it for this shape under its math type and it
 * fits in the entry's W, else the heuristic order's first that passes the
 * filters and fits. Host-side only: no Find, no kernels, no allocation. */
template <typename T, typename D> static ds_status conv_ready(ds_ctx *ctx, conv_entry *e)
{
    if (D::ok(e))
        return DS_OK;
    conv_choice<typename D::algo_t> &c = D::choice(&e->algo);
    size_t need = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, c.math));
    /* a failed query says the algorithm cannot run this shape: an answer, not an error */
    if (D::ws(ctx->dnn, e, c.algo, &need) != CUDNN_STATUS_SUCCESS || need > e->ws_bytes)
        DS_TRY((conv_choose<T, D>(ctx, e, 0, e->ws_bytes, &c, &need)));
    D::ok(e) = 1;
    return DS_OK;
}

/* Start-up, plan p of entry e's shape (p->g): the directions the layer needs
 * that p lacks (upgrade: only backward data, for a plan first made without
 * dx), timed, each within the layer's cap; W grows to the largest of their
 * workspaces. Entries are the caller's to flush: they copy plans. */
template <typename T>
static ds_status conv_plan_choose(ds_ctx *ctx, const conv_entry *e, conv_plan *p, int upgrade)
{
    size_t cap = 0, mf = 0, md = 0, mw = 0;
    DS_CUDA(cudaSetDevice(ctx->device));   /* Find allocates on the current device */
    DS_TRY(conv_ws_cap<T>(ctx, &p->g, &cap));
    if (!upgrade) {
        DS_TRY((conv_choose<T, conv_dir_fwd>(ctx, e, 1, cap, &p->algo.fwd, &mf)));
        DS_TRY((conv_choose<T, conv_dir_filter>(ctx, e, 1, cap, &p->algo.filter, &mw)));
    }
    if (p->want_dx)   /* the first layer's input gets no gradient: not searched, cannot fail */
        DS_TRY((conv_choose<T, conv_dir_data>(ctx, e, 1, cap, &p->algo.data, &md)));
    p->ws_bytes = conv_max(p->ws_bytes, conv_align_up(conv_max(conv_max(mf, mw), md)));
    return DS_OK;
}

/* The entry of shape g, made (descriptors, its plan's choices and W) when
 * new. Its plan is the smallest covering it; a shape no conv2d_work covered
 * is refused, since its work cannot be known to suffice. */
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
    DS_TRY(conv_insert(c, dt, ds_dtype_traits<T>::cudnn_compute, g, out));
    (*out)->algo = p->algo;
    (*out)->ws_bytes = p->ws_bytes;
    (*out)->want_dx = p->want_dx;
    return DS_OK;
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

/* db [co] += sum of dy [n][co][ho][wo] over n, ho, wo, in double. The split
 * (reduce_split.h, the backend's one rule) depends only on the shape and the
 * device, so the order is fixed run to run. */
template <typename T>
static ds_status conv_bias_grad(ds_ctx *ctx, const ds_conv_geom *g, const T *dy, T *db)
{
    const long npos = (long)g->ho * g->wo, total = (long)g->n * npos;
    /* one partial per block; at least 4096 elements a block */
    const ds_reduce_split sp = ds_reduce_split_of(g->co, total, ctx->sms, DS_CUDA_PARTIALS, 1, 4096);
    const long split = sp.split, per = sp.per;
    conv_bias_pass1<T><<<(unsigned)(g->co * split), DS_CUDA_BLOCK, 0, ctx->stream>>>(
        dy, g->n, g->co, npos, (int)split, per, ctx->partials, db);
    DS_LAUNCHED();
    if (split > 1) {
        /* pass 2 (partials.cuh): db[o] += channel o's split partials */
        ds_partials_add<T><<<(unsigned)g->co, 32, 0, ctx->stream>>>((int)split, ctx->partials, db);
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

/* Elements of T holding bytes. */
template <typename T> static size_t conv_elems(size_t bytes)
{
    return (bytes + sizeof(T) - 1) / sizeof(T);
}

/* Start-up, the layer's largest geometry: choose its algorithms (backward
 * data only when want_dx) and size its work, W. A failed choice is recorded
 * (DS_FAIL), kept in the plan and returned by the layer's fwd and bwd, since
 * this query cannot return a status. Asked again for a geometry planned
 * without dx, now with it, the plan gains backward data (W may grow). */
template <typename T> size_t cuda_conv2d_work(ds_ctx *ctx, const ds_conv_geom *g_in, int want_dx)
{
    const ds_conv_geom gn = conv_normal(g_in), *g = &gn;
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    if (conv_bad_fields(g) || conv_bad_output(g) || conv_empty(g))
        return 0;   /* the op refuses a bad geometry (conv_check) and skips an empty one */
    ds_cuda_conv_cache *c = nullptr;
    if (conv_cache(ctx, &c) != DS_OK)
        return 0;   /* recorded; no plan, so every op of the layer fails */
    want_dx = want_dx != 0;
    conv_plan *ex = conv_plan_exact(c, dt, g);
    if (ex && (ex->st != DS_OK || ex->want_dx || !want_dx))
        return conv_elems<T>(ex->ws_bytes);   /* a failure stays recorded */

    conv_plan fresh = {dt, *g, want_dx, {}, 0, DS_OK};
    conv_plan *p = ex ? ex : &fresh;
    ds_status st = DS_OK;
    conv_entry *e = conv_lookup(c, dt, g);   /* the descriptors the search needs */
    if (!e)
        st = conv_insert(c, dt, ds_dtype_traits<T>::cudnn_compute, g, &e);
    if (st == DS_OK) {
        p->want_dx = want_dx;
        st = conv_plan_choose<T>(ctx, e, p, ex != nullptr);
    }
    p->st = st;
    if (!ex && conv_add_plan(c, p) != DS_OK)
        return 0;   /* recorded; no plan: the layer's ops fail */
    /* entries copy the plan that covered them when made: with a new or
     * changed plan the smallest covering one may differ, so all are made
     * again at their next use (host-side: descriptors and size queries) */
    conv_flush(c);
    return conv_elems<T>(p->ws_bytes);
}

/* y = conv(x, w) + b (assigns). x [n][ci][hi][wi], w [co][ci][kh][kw], b [co]
 * or NULL, y [n][co][ho][wo], work [conv2d_work(a geometry covering g)]. */
template <typename T>
ds_status cuda_conv2d_fwd(ds_ctx *ctx, const ds_conv_geom *g_in, const void *x, const void *w,
                          const void *b, void *y, void *work)
{
    const ds_conv_geom gn = conv_normal(g_in), *g = &gn;
    DS_TRY(conv_check(g));
    if (conv_empty(g))
        return DS_OK;
    conv_entry *e;
    DS_TRY(conv_entry_for<T>(ctx, g, &e));
    DS_TRY((conv_ready<T, conv_dir_fwd>(ctx, e)));
    const ds_scale_t<T> one = 1, zero = 0;
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->algo.fwd.math));
    DS_CUDNN(cudnnConvolutionForward(ctx->dnn, &one, e->xd, x, e->wd, w, e->cd, e->algo.fwd.algo,
                                     work, e->ws_bytes, &zero, e->yd, y));
    if (b && ds_dtype_traits<T>::narrow)
        DS_TRY(conv_bias_add<T>(ctx, g, (const T *)b, (T *)y));
    else if (b)
        DS_CUDNN(cudnnAddTensor(ctx->dnn, &one, e->bd, b, &one, e->yd, y));
    return DS_OK;
}

/* x [n][ci][hi][wi], w [co][ci][kh][kw], dy [n][co][ho][wo]; dx [n][ci][hi][wi]
 * (NULL: not wanted; refused where conv2d_work planned the layer without dx),
 * dw [co][ci][kh][kw], db [co] (NULL: no bias) accumulate.
 * work [conv2d_work(a geometry covering g)]. */
template <typename T>
ds_status cuda_conv2d_bwd(ds_ctx *ctx, const ds_conv_geom *g_in, const void *x, const void *w,
                          const void *dy, void *dx, void *dw, void *db, void *work)
{
    const ds_conv_geom gn = conv_normal(g_in), *g = &gn;
    DS_TRY(conv_check(g));
    if (conv_empty(g))
        return DS_OK;
    conv_entry *e;
    DS_TRY(conv_entry_for<T>(ctx, g, &e));
    if (dx && !e->want_dx)   /* choosing now would be a search inside the step */
        return DS_FAIL(DS_ERR_ARG,
                       "conv2d_bwd: dx asked for " CONV_SHAPE_FMT ", but conv2d_work planned "
                       "its layer without dx (want_dx 0), so no backward-data algorithm was "
                       "chosen",
                       CONV_SHAPE_ARGS(g, e->dt));
    if (dx)
        DS_TRY((conv_ready<T, conv_dir_data>(ctx, e)));
    DS_TRY((conv_ready<T, conv_dir_filter>(ctx, e)));
    const ds_scale_t<T> one = 1;
    if (dx) {
        DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->algo.data.math));
        DS_CUDNN(cudnnConvolutionBackwardData(ctx->dnn, &one, e->wd, w, e->yd, dy, e->cd,
                                              e->algo.data.algo, work, e->ws_bytes, &one, e->xd,
                                              dx));
    }
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, e->algo.filter.math));
    DS_CUDNN(cudnnConvolutionBackwardFilter(ctx->dnn, &one, e->xd, x, e->yd, dy, e->cd,
                                            e->algo.filter.algo, work, e->ws_bytes, &one, e->wd,
                                            dw));
    if (db)
        DS_TRY(conv_bias_grad<T>(ctx, g, (const T *)dy, (T *)db));
    return DS_OK;
}

#define CONV_INSTANTIATE(T)                                                                   \
    template size_t cuda_conv2d_work<T>(ds_ctx *, const ds_conv_geom *, int);                  \
    template ds_status cuda_conv2d_fwd<T>(ds_ctx *, const ds_conv_geom *, const void *,        \
                                          const void *, const void *, void *, void *);         \
    template ds_status cuda_conv2d_bwd<T>(ds_ctx *, const ds_conv_geom *, const void *,        \
                                          const void *, const void *, void *, void *, void *,  \
                                          void *);

CONV_INSTANTIATE(float)
CONV_INSTANTIATE(double)
CONV_INSTANTIATE(__half)
CONV_INSTANTIATE(__nv_bfloat16)

/* ------------------------------------------------------------ choices -- */

/* Every rank runs rank 0's plans (backend.h, choices_get / choices_set):
 * each plan's directions in the order conv2d_work made them, forward,
 * backward filter, then backward data where the layer wants dx. */

static const char *conv_math_name(cudnnMathType_t m)
{
    switch (m) {
    case CUDNN_TENSOR_OP_MATH: return "tensor op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor op, conversion";
    case CUDNN_FMA_MATH: return "FMA";
    default: return "default math";
    }
}

/* The choice of direction D of plan p, named, into *out. */
template <typename D> static void conv_choice_of(const conv_plan *p, ds_choice *out)
{
    const conv_choice<typename D::algo_t> &c = D::choice(const_cast<conv_algos *>(&p->algo));
    const ds_conv_geom *g = &p->g;
    *out = ds_choice{};
    snprintf(out->what, sizeof out->what, "conv %s %dx%dx%dx%d k%dx%d s%dx%d d%d co%d %s",
             conv_dt_name(p->dt), g->n, g->ci, g->hi, g->wi, g->kh, g->kw, g->sh, g->sw, g->dh, g->co,
             D::tag);
    snprintf(out->how, sizeof out->how, "%s, %s", D::algo_name(c.algo), conv_math_name(c.math));
    out->code[0] = (int)c.algo;
    out->code[1] = (int)c.math;
}

/* Plan p's directions as choices into out [max] from *n on; *n counts them all. */
static void conv_plan_choices(const conv_plan *p, ds_choice *out, int max, int *n)
{
    if (p->st != DS_OK)
        return;   /* a failed plan runs nothing: its ops fail */
    if (*n < max)
        conv_choice_of<conv_dir_fwd>(p, &out[*n]);
    ++*n;
    if (*n < max)
        conv_choice_of<conv_dir_filter>(p, &out[*n]);
    ++*n;
    if (p->want_dx) {
        if (*n < max)
            conv_choice_of<conv_dir_data>(p, &out[*n]);
        ++*n;
    }
}

int ds_cuda_conv_choices_get(ds_ctx *ctx, ds_choice *out, int max)
{
    int n = 0;
    if (ctx->conv)
        for (int i = 0; i < ctx->conv->nplans; i++)
            conv_plan_choices(&ctx->conv->plans[i], out, out ? max : 0, &n);
    return n;
}

/* Direction D of plan p set to in's codes (its what checked against ours);
 * *need the workspace they take on e's descriptors. */
template <typename D>
static ds_status conv_choice_set(ds_ctx *ctx, conv_plan *p, conv_entry *e, const ds_choice *in,
                                 size_t *need)
{
    ds_choice mine;
    conv_choice_of<D>(p, &mine);
    if (strncmp(mine.what, in->what, sizeof mine.what))
        return DS_FAIL(DS_ERR_ARG, "conv2d: the choice given for %.96s is for %.96s", mine.what,
                       in->what);
    conv_choice<typename D::algo_t> c = {(typename D::algo_t)in->code[0], (cudnnMathType_t)in->code[1]};
    DS_CUDNN(cudnnSetConvolutionMathType(e->cd, c.math));
    if (D::ws(ctx->dnn, e, c.algo, need) != CUDNN_STATUS_SUCCESS)
        return DS_FAIL(DS_ERR_ARG, "conv2d: %s (%s) cannot run %.96s on this GPU", in->how,
                       D::name, mine.what);
    D::choice(&p->algo) = c;
    return DS_OK;
}

ds_status ds_cuda_conv_choices_set(ds_ctx *ctx, const ds_choice *in, int n)
{
    const int have = ds_cuda_conv_choices_get(ctx, nullptr, 0);
    if (have != n)
        return DS_FAIL(DS_ERR_ARG, "conv2d: %d choices given for the %d made here", n, have);
    ds_cuda_conv_cache *c = ctx->conv;
    int k = 0;
    for (int i = 0; c && i < c->nplans; i++) {
        conv_plan *p = &c->plans[i];
        if (p->st != DS_OK)
            continue;
        conv_entry *e = conv_lookup(c, p->dt, &p->g);
        const cudnnDataType_t ct = p->dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
        if (!e)
            DS_TRY(conv_insert(c, p->dt, ct, &p->g, &e));
        size_t mf = 0, mw = 0, md = 0;
        DS_TRY(conv_choice_set<conv_dir_fwd>(ctx, p, e, &in[k++], &mf));
        DS_TRY(conv_choice_set<conv_dir_filter>(ctx, p, e, &in[k++], &mw));
        if (p->want_dx)
            DS_TRY(conv_choice_set<conv_dir_data>(ctx, p, e, &in[k++], &md));
        p->ws_bytes = conv_align_up(conv_max(conv_max(mf, mw), md));
    }
    if (c)
        conv_flush(c);   /* entries copy their plan's choices when made again */
    return DS_OK;
}
