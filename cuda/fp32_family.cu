/* fp32_family.cu - a switch of the 16-bit gradient investigation (issue 34,
 * item 6), not an option: DSTRAIN_CUDA_FP32_OPS=rnn, conv or rnn,conv runs
 * that op family of the FP16 and BF16 tables in FP32 inside the 16-bit model.
 * Each op widens its 16-bit inputs exactly, runs the FP32 op, and rounds its
 * outputs once to the 16-bit type (gradients added into the accumulated one
 * and rounded once). If the GPU's 16-bit gradients come within the CPU
 * emulation's error with one family in FP32, the difference lives in that
 * family's 16-bit library calls; if not, elsewhere.
 *
 * The FP32 ops follow the run's --tf32 as every FP32 op does: run without
 * it for FP32 products. Scratch: the recurrent wrapper holds its own FP32 copies (start-up
 * cudaMalloc, a diagnostic run only) and keeps its FP32 reserve from forward
 * to backward, so the model's reserve and work for the layer are a token; the
 * convolution wrapper asks conv2d_work for the FP32 work and its FP32 copies
 * inside the one work buffer the model already sizes. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "ops_cuda.h"

namespace {

template <typename T> constexpr ds_dtype dtype_of()
{
    return std::is_same_v<T, __half> ? DS_F16 : DS_BF16;
}

/* Floats rounded up to whole 256-byte units, so that every carved region
 * starts aligned. */
size_t f32_units(size_t n) { return (n + 63) / 64 * 64; }

/* dst [n] = round(dst + src): a gradient computed in FP32 added into the
 * accumulated 16-bit one, rounded once. */
template <typename T> __global__ void accumulate(size_t n, const float *__restrict__ src, T *__restrict__ dst)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = ds_round<T>(ds_wide(dst[i]) + src[i]);
}

template <typename T> ds_status add_into(ds_ctx *c, size_t n, const float *src, void *dst)
{
    if (n == 0 || !dst)
        return DS_OK;
    accumulate<T><<<ds_cuda_grid(c, n), DS_CUDA_BLOCK, 0, c->stream>>>(n, src, (T *)dst);
    DS_LAUNCHED();
    return DS_OK;
}

template <typename T> ds_status widen(ds_ctx *c, float *dst, const void *src, size_t n)
{
    return src && n ? cuda_convert(c, DS_F32, dst, dtype_of<T>(), src, n) : DS_OK;
}

template <typename T> ds_status narrow(ds_ctx *c, void *dst, const float *src, size_t n)
{
    return n ? cuda_convert(c, dtype_of<T>(), dst, DS_F32, src, n) : DS_OK;
}

/* ---- recurrent layers ---- */

/* Stands for the layer's plan (the model only passes the pointer back). */
struct f32_rnn {
    ds_rnn_plan *inner;        /* the FP32 plan */
    ds_rnn_layout lay;         /* its layout: the 16-bit span uses the same offsets */
    ds_rnn_desc d;
    char *mem;
    float *x, *dx, *y, *dy, *w, *dw, *reserve, *work;
};

template <typename T>
ds_status rnn_plan(ds_ctx *c, const ds_rnn_desc *d, ds_rnn_plan **plan, ds_rnn_layout *layout)
{
    *plan = nullptr;
    f32_rnn *p = (f32_rnn *)calloc(1, sizeof *p);
    if (!p)
        return DS_FAIL(DS_ERR_MEM, "fp32 rnn wrapper");
    p->d = *d;
    ds_status st = cuda_rnn_plan<float>(c, d, &p->inner, &p->lay);
    const size_t tn = (size_t)d->max_t * d->max_n;
    const size_t nx = f32_units(tn * d->in), ny = f32_units(tn * d->hidden), nw = f32_units(p->lay.span);
    const size_t total = 2 * nx + 2 * ny + 2 * nw + f32_units(p->lay.reserve) + f32_units(p->lay.work);
    if (st == DS_OK && cudaMalloc((void **)&p->mem, total * sizeof(float)) != cudaSuccess) {
        (void)cudaGetLastError();
        p->mem = nullptr;
        st = DS_FAIL(DS_ERR_MEM, "DSTRAIN_CUDA_FP32_OPS=rnn: %zu floats of FP32 copies", total);
    }
    if (st != DS_OK) {
        if (p->inner)
            cuda_rnn_plan_destroy<float>(c, p->inner);
        free(p);
        return st;
    }
    float *q = (float *)p->mem;
    p->x = q, q += nx;
    p->dx = q, q += nx;
    p->y = q, q += ny;
    p->dy = q, q += ny;
    p->w = q, q += nw;
    p->dw = q, q += nw;
    p->reserve = q, q += f32_units(p->lay.reserve);
    p->work = q;
    *layout = p->lay;
    layout->reserve = layout->work = 1;   /* kept here, in FP32 */
    *plan = (ds_rnn_plan *)p;
    return DS_OK;
}

/* Before the copies are written: a call past the plan's limits is refused
 * here as the FP32 op would refuse it. */
ds_status fits(const f32_rnn *p, int t, int n)
{
    if (t < 0 || n < 0 || t > p->d.max_t || n > p->d.max_n)
        return DS_FAIL(DS_ERR_ARG, "rnn: %d frames x %d utterances outside the plan's %d x %d", t, n,
                       p->d.max_t, p->d.max_n);
    return DS_OK;
}

template <typename T> void rnn_plan_destroy(ds_ctx *c, ds_rnn_plan *plan)
{
    f32_rnn *p = (f32_rnn *)plan;
    if (!p)
        return;
    cuda_rnn_plan_destroy<float>(c, p->inner);
    (void)cudaFree(p->mem);
    free(p);
}

template <typename T>
ds_status rnn_fwd(ds_ctx *c, ds_rnn_plan *plan, int t, int n, const int *len_host, const int *len,
                  const void *x, const void *w, void *y, void *, void *)
{
    f32_rnn *p = (f32_rnn *)plan;
    DS_TRY(fits(p, t, n));
    const size_t tn = (size_t)t * n;
    DS_TRY(widen<T>(c, p->x, x, tn * p->d.in));
    DS_TRY(widen<T>(c, p->w, w, p->lay.span));
    DS_TRY(cuda_rnn_fwd<float>(c, p->inner, t, n, len_host, len, p->x, p->w, p->y, p->reserve, p->work));
    return narrow<T>(c, y, p->y, tn * p->d.hidden);
}

template <typename T>
ds_status rnn_bwd(ds_ctx *c, ds_rnn_plan *plan, int t, int n, const int *len_host, const int *len,
                  const void *x, const void *w, const void *dy, void *dx, void *dw, void *, void *)
{
    f32_rnn *p = (f32_rnn *)plan;
    DS_TRY(fits(p, t, n));
    const size_t tn = (size_t)t * n;
    DS_TRY(widen<T>(c, p->x, x, tn * p->d.in));
    DS_TRY(widen<T>(c, p->w, w, p->lay.span));
    DS_TRY(widen<T>(c, p->dy, dy, tn * p->d.hidden));
    DS_CUDA(cudaMemsetAsync(p->dw, 0, p->lay.span * sizeof(float), c->stream));
    DS_TRY(cuda_rnn_bwd<float>(c, p->inner, t, n, len_host, len, p->x, p->w, p->dy, p->dx, p->dw,
                               p->reserve, p->work));
    DS_TRY(narrow<T>(c, dx, p->dx, tn * p->d.in));   /* dx is assigned */
    return add_into<T>(c, p->lay.span, p->dw, dw);
}

/* ---- convolutions ---- */

/* The FP32 copies one geometry needs, carved from the front of work:
 * x, dx [n][ci][hi][wi]; w, dw [co][ci][kh][kw]; b, db [co]; y, dy [n][co][ho][wo]. */
struct conv_f32 {
    float *x, *dx, *w, *dw, *b, *db, *y, *dy, *work;
};

size_t conv_copies(const ds_conv_geom *g)
{
    const size_t nx = (size_t)g->n * g->ci * g->hi * g->wi, nw = (size_t)g->co * g->ci * g->kh * g->kw;
    const size_t ny = (size_t)g->n * g->co * g->ho * g->wo;
    return 2 * (f32_units(nx) + f32_units(nw) + f32_units((size_t)g->co) + f32_units(ny));
}

conv_f32 conv_carve(const ds_conv_geom *g, void *work)
{
    const size_t nx = (size_t)g->n * g->ci * g->hi * g->wi, nw = (size_t)g->co * g->ci * g->kh * g->kw;
    const size_t ny = (size_t)g->n * g->co * g->ho * g->wo;
    float *q = (float *)work;
    conv_f32 f;
    f.x = q, q += f32_units(nx);
    f.dx = q, q += f32_units(nx);
    f.w = q, q += f32_units(nw);
    f.dw = q, q += f32_units(nw);
    f.b = q, q += f32_units((size_t)g->co);
    f.db = q, q += f32_units((size_t)g->co);
    f.y = q, q += f32_units(ny);
    f.dy = q, q += f32_units(ny);
    f.work = q;   /* the FP32 convolution's own: what is left, at least its plan's W */
    return f;
}

/* Elements of T: the FP32 work of the layer's plan and the copies of its
 * largest geometry (a smaller one carves less and leaves more). */
template <typename T> size_t conv2d_work(ds_ctx *c, const ds_conv_geom *g, int want_dx)
{
    const size_t w32 = cuda_conv2d_work<float>(c, g, want_dx);
    if (w32 == 0)
        return 0;   /* refused or empty: the op says why */
    const size_t floats = w32 + conv_copies(g);
    return (floats * sizeof(float) + sizeof(T) - 1) / sizeof(T);
}

template <typename T>
ds_status conv2d_fwd(ds_ctx *c, const ds_conv_geom *g, const void *x, const void *w, const void *b, void *y,
                     void *work)
{
    const conv_f32 f = conv_carve(g, work);
    DS_TRY(widen<T>(c, f.x, x, (size_t)g->n * g->ci * g->hi * g->wi));
    DS_TRY(widen<T>(c, f.w, w, (size_t)g->co * g->ci * g->kh * g->kw));
    DS_TRY(widen<T>(c, f.b, b, b ? (size_t)g->co : 0));
    DS_TRY(cuda_conv2d_fwd<float>(c, g, f.x, f.w, b ? f.b : nullptr, f.y, f.work));
    return narrow<T>(c, y, f.y, (size_t)g->n * g->co * g->ho * g->wo);
}

template <typename T>
ds_status conv2d_bwd(ds_ctx *c, const ds_conv_geom *g, const void *x, const void *w, const void *dy, void *dx,
                     void *dw, void *db, void *work)
{
    const conv_f32 f = conv_carve(g, work);
    const size_t nx = (size_t)g->n * g->ci * g->hi * g->wi, nw = (size_t)g->co * g->ci * g->kh * g->kw;
    DS_TRY(widen<T>(c, f.x, x, nx));
    DS_TRY(widen<T>(c, f.w, w, nw));
    DS_TRY(widen<T>(c, f.dy, dy, (size_t)g->n * g->co * g->ho * g->wo));
    DS_CUDA(cudaMemsetAsync(f.dx, 0, nx * sizeof(float), c->stream));
    DS_CUDA(cudaMemsetAsync(f.dw, 0, nw * sizeof(float), c->stream));
    DS_CUDA(cudaMemsetAsync(f.db, 0, (size_t)g->co * sizeof(float), c->stream));
    DS_TRY(cuda_conv2d_bwd<float>(c, g, f.x, f.w, f.dy, dx ? f.dx : nullptr, f.dw, db ? f.db : nullptr,
                                  f.work));
    DS_TRY(add_into<T>(c, dx ? nx : 0, f.dx, dx));
    DS_TRY(add_into<T>(c, nw, f.dw, dw));
    return add_into<T>(c, db ? (size_t)g->co : 0, f.db, db);
}

/* base with the families the switch names replaced; "" when the switch is unset */
template <typename T> ds_ops with_fp32(const ds_ops *base, const char *families)
{
    ds_ops o = *base;
    if (strstr(families, "rnn")) {
        o.rnn_plan = rnn_plan<T>;
        o.rnn_plan_destroy = rnn_plan_destroy<T>;
        o.rnn_fwd = rnn_fwd<T>;
        o.rnn_bwd = rnn_bwd<T>;
    }
    if (strstr(families, "conv")) {
        o.conv2d_work = conv2d_work<T>;
        o.conv2d_fwd = conv2d_fwd<T>;
        o.conv2d_bwd = conv2d_bwd<T>;
    }
    return o;
}

}   // namespace

ds_status ds_cuda_fp32_family_check(void)
{
    const char *fam = getenv("DSTRAIN_CUDA_FP32_OPS");
    if (!fam || !*fam)
        return DS_OK;
    char copy[64];
    snprintf(copy, sizeof copy, "%s", fam);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(nullptr, ","))
        if (strcmp(tok, "rnn") && strcmp(tok, "conv"))
            return DS_FAIL(DS_ERR_ARG, "DSTRAIN_CUDA_FP32_OPS=%s: '%s' is not rnn or conv", fam, tok);
    return DS_OK;
}

const ds_ops *ds_cuda_fp32_family(ds_dtype t, const ds_ops *base)
{
    const char *fam = getenv("DSTRAIN_CUDA_FP32_OPS");
    if (!fam || !*fam)
        return base;
    /* each built once, from its own table, on first use (thread-safe statics) */
    if (t == DS_F16) {
        static const ds_ops f16 = with_fp32<__half>(base, fam);
        return &f16;
    }
    if (t == DS_BF16) {
        static const ds_ops bf16 = with_fp32<__nv_bfloat16>(base, fam);
        return &bf16;
    }
    return base;
}
