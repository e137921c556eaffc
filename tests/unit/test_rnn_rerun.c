/* test_rnn_rerun.c - one recurrent layer of test_model_gpu_vs_cpu's model,
 * taken out with its real inputs and run again alone (issue 34, item 6: the
 * GPU's 16-bit RNN gradients sit about 10x further from FP64 inside the
 * model than the CPU's emulation; is it the layer itself, and under which
 * conditions?).
 *
 * The model ("bi-lstm x2 + fc", its starting point and batch drawn as
 * test_model_gpu_vs_cpu draws them) makes one training pass on the cpu in
 * FP64. Layer LAYER's input x (after its BatchNorm), the gradient dy at its
 * output and its weights are taken (ds_model_rnn_io) and first run again on
 * the same cpu FP64 op: the output, dx and weight gradients must come back
 * bit for bit (the dump is the layer's, whole). Then x, w and dy (dy times
 * the loss scale 1024 in FP16, as training scales it) are rounded to DTYPE
 * and run on:
 *   ref   the cpu in FP64 (the truth for these rounded inputs)
 *   emu   the cpu in DTYPE (its 16-bit emulation: the yardstick)
 *   test  BACKEND in DTYPE (the GPU), and on the GPU also: cuDNN's default
 *         math for 16-bit data (DSTRAIN_CUDNN_NARROW_MATH=default, a second
 *         context), and the FP32 op on the DTYPE-rounded values
 * under three batch shapes: the lengths as drawn, sorted longest first, and
 * all equal to the padded length (the reference recomputed for each). Per
 * run: y, dx and each weight gradient's norm-wise relative error to ref in
 * units of u (2^-11 FP16, 2^-8 BF16). Bound: 8u for every tensor. The
 * emulation measures 0.28u to 0.47u (one rounding of each stored result);
 * a library that also stores each time step's state in 16 bits (cuDNN
 * does) rounds once more per step, and the LSTM's forget gates damp what
 * each step passes on, so a few u more; 8u is a quarter of the whole model
 * test's 32u, which a single layer, without the conv stack's and the other
 * layers' errors compounding into it, must stay well inside. The table says
 * which of emu and test is further, which is what the investigation reads.
 *
 * usage: test_rnn_rerun [BACKEND [DTYPE [LAYER]]]
 *        BACKEND default cpu (then test is emu: the dump and the bounds),
 *        DTYPE float16 (default) or bfloat16, LAYER default 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "batch.h"
#include "config.h"
#include "convert.h"
#include "model.h"
#include "optim.h"
#include "synthetic.h"
#include "testmodel.h"
#include "testutil.h"

#include "model_cases.inc"

enum { N_UTT = 5, FRAMES = 96 };   /* test_model_gpu_vs_cpu's batch */

/* The layer's values on the host, in FP64. */
typedef struct {
    ds_rnn_desc d;
    int t, n;
    int len[N_UTT];
    double *x, *y, *dy, *dx;                /* [t][n][in|hidden] */
    double *w[2][DS_RNN_TENSORS];           /* PyTorch's tensors per direction */
    double *dw[2][DS_RNN_TENSORS];
    size_t count[DS_RNN_TENSORS];
} layer_vals;

static const char *const TENSOR[DS_RNN_TENSORS] = {"w_ih", "w_hh", "b_ih", "b_hh"};

static void vals_free(layer_vals *v)
{
    free(v->x), free(v->y), free(v->dy), free(v->dx);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            free(v->w[d][k]), free(v->dw[d][k]);
}

/* Room for every array of v, for v->d, t and n (set). */
static void vals_alloc(layer_vals *v)
{
    const size_t nx = (size_t)v->t * v->n * v->d.in, ny = (size_t)v->t * v->n * v->d.hidden;
    const int G = ds_backend_cell_gates(v->d.cell), H = v->d.hidden;
    v->count[DS_RNN_W_IH] = (size_t)G * H * v->d.in;
    v->count[DS_RNN_W_HH] = (size_t)G * H * H;
    v->count[DS_RNN_B_IH] = v->count[DS_RNN_B_HH] = (size_t)G * H;
    v->x = t_zeros(nx), v->dx = t_zeros(nx), v->y = t_zeros(ny), v->dy = t_zeros(ny);
    for (int d = 0; d < v->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            v->w[d][k] = t_zeros(v->count[k]), v->dw[d][k] = t_zeros(v->count[k]);
}

/* One run of the op of table dt on be: v's x, w, dy, lengths in; its y, dx,
 * dw out (into out, whose arrays vals_alloc made). */
static ds_status run_layer(const ds_backend *be, ds_ctx *ctx, const ds_ops *op, ds_dtype dt,
                           const layer_vals *v, layer_vals *out)
{
    const size_t nx = (size_t)v->t * v->n * v->d.in, ny = (size_t)v->t * v->n * v->d.hidden;
    ds_rnn_plan *plan = NULL;
    ds_rnn_layout lay;
    DS_TRY(op->rnn_plan(ctx, &v->d, &plan, &lay));
    void *x = NULL, *w = NULL, *dw = NULL, *y = NULL, *dy = NULL, *dx = NULL, *res = NULL,
         *work = NULL, *len = NULL;
    double *span = t_zeros(lay.span);
    for (int d = 0; d < v->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            memcpy(span + lay.offset[d][k], v->w[d][k], v->count[k] * sizeof *span);
    ds_status st = t_new_real(be, ctx, dt, nx, v->x, &x);
    if (st == DS_OK) st = t_new_real(be, ctx, dt, lay.span, span, &w);
    if (st == DS_OK) st = t_new_real(be, ctx, dt, ny, v->dy, &dy);
    if (st == DS_OK) st = be->alloc(ctx, dt, lay.span, &dw);
    if (st == DS_OK) st = be->alloc(ctx, dt, ny, &y);
    if (st == DS_OK) st = be->alloc(ctx, dt, nx, &dx);
    if (st == DS_OK) st = be->alloc(ctx, dt, lay.reserve ? lay.reserve : 1, &res);
    if (st == DS_OK) st = be->alloc(ctx, dt, lay.work ? lay.work : 1, &work);
    if (st == DS_OK) st = t_new_int(be, ctx, (size_t)v->n, v->len, &len);
    if (st == DS_OK)
        st = op->rnn_fwd(ctx, plan, v->t, v->n, v->len, len, x, w, y, res, work);
    if (st == DS_OK)
        st = op->rnn_bwd(ctx, plan, v->t, v->n, v->len, len, x, w, dy, dx, dw, res, work);
    if (st == DS_OK) st = t_get_real(be, ctx, dt, ny, y, out->y);
    if (st == DS_OK) st = t_get_real(be, ctx, dt, nx, dx, out->dx);
    if (st == DS_OK) st = t_get_real(be, ctx, dt, lay.span, dw, span);
    for (int d = 0; st == DS_OK && d < v->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            memcpy(out->dw[d][k], span + lay.offset[d][k], v->count[k] * sizeof *span);
    t_release_all(be, ctx, (void *[]){x, w, dw, y, dy, dx, res, work, len}, 9);
    op->rnn_plan_destroy(ctx, plan);
    free(span);
    return st;
}

/* Layer j of the reference model after one training pass, on the host. */
static ds_status take_layer(ds_model *m, const ds_backend *be, ds_ctx *ctx, int j, layer_vals *v)
{
    ds_model_rnn_layer io;
    DS_TRY(ds_model_rnn_io(m, j, &io));
    *v = (layer_vals){.d = io.desc, .t = io.t, .n = io.n};
    memcpy(v->len, io.len_host, (size_t)io.n * sizeof *v->len);
    vals_alloc(v);
    const size_t nx = (size_t)v->t * v->n * v->d.in, ny = (size_t)v->t * v->n * v->d.hidden;
    DS_TRY(t_get_real(be, ctx, DS_F64, nx, io.x, v->x));
    DS_TRY(t_get_real(be, ctx, DS_F64, ny, io.y, v->y));
    DS_TRY(t_get_real(be, ctx, DS_F64, ny, io.dy, v->dy));
    DS_TRY(t_get_real(be, ctx, DS_F64, nx, io.dx, v->dx));
    const size_t np = ds_model_param_count(m);
    double *p = t_zeros(np), *g = t_zeros(np);
    ds_status st = ds_model_get(m, DS_PARAMS, p);
    if (st == DS_OK)
        st = ds_model_get(m, DS_GRADS, g);
    for (int d = 0; st == DS_OK && d < v->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            const ds_tensor *t = ds_model_param(m, io.first_param + d * DS_RNN_TENSORS + k);
            if (t->count != v->count[k]) {
                st = DS_FAIL(DS_ERR_ARG, "%s: %zu elements, expected %zu for %s", t->name, t->count,
                             v->count[k], TENSOR[k]);
                break;
            }
            memcpy(v->w[d][k], p + t->offset, t->count * sizeof *p);
            memcpy(v->dw[d][k], g + t->offset, t->count * sizeof *g);
        }
    free(p), free(g);
    return st;
}

static void round_to(ds_dtype dt, double *x, size_t n)
{
    uint64_t one;
    for (size_t i = 0; i < n; i++) {
        ds_convert(dt, &one, DS_F64, &x[i], 1);
        ds_convert(DS_F64, &x[i], dt, &one, 1);
    }
}

/* A copy of a's inputs (x, w, dy, lengths), and room for outputs. */
static void copy_inputs(const layer_vals *a, layer_vals *b)
{
    *b = (layer_vals){.d = a->d, .t = a->t, .n = a->n};
    memcpy(b->len, a->len, sizeof b->len);
    vals_alloc(b);
    memcpy(b->x, a->x, (size_t)a->t * a->n * a->d.in * sizeof *b->x);
    memcpy(b->dy, a->dy, (size_t)a->t * a->n * a->d.hidden * sizeof *b->dy);
    for (int d = 0; d < a->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            memcpy(b->w[d][k], a->w[d][k], a->count[k] * sizeof(double));
}

/* v's utterances longest first (stable), or all of the padded length. */
static void shape(layer_vals *v, int how)
{
    if (how == 2) {
        for (int i = 0; i < v->n; i++)
            v->len[i] = v->t;
        return;
    }
    if (how == 0)
        return;
    int order[N_UTT], len[N_UTT];
    for (int i = 0; i < v->n; i++) {
        int k = i;
        while (k > 0 && v->len[order[k - 1]] < v->len[i])
            order[k] = order[k - 1], k--;
        order[k] = i;
    }
    const int ins[2] = {v->d.in, v->d.hidden};
    double *arr[2] = {v->x, v->dy};
    for (int a = 0; a < 2; a++) {
        const size_t w = (size_t)ins[a];
        double *tmp = t_zeros((size_t)v->t * v->n * w);
        for (int s = 0; s < v->t; s++)
            for (int j = 0; j < v->n; j++)
                memcpy(tmp + ((size_t)s * v->n + j) * w, arr[a] + ((size_t)s * v->n + order[j]) * w,
                       w * sizeof *tmp);
        memcpy(arr[a], tmp, (size_t)v->t * v->n * w * sizeof *tmp);
        free(tmp);
    }
    for (int j = 0; j < v->n; j++)
        len[j] = v->len[order[j]];
    memcpy(v->len, len, (size_t)v->n * sizeof *len);
}

/* Norm-wise relative error of b to a, 0 when both are 0. */
static double rel(const double *a, const double *b, size_t n) { return t_rel_err(a, b, n); }

/* The worst of y, dx and every dw against ref, in u; each printed. */
static double report(const char *label, const layer_vals *ref, const layer_vals *got, double u)
{
    const size_t nx = (size_t)ref->t * ref->n * ref->d.in, ny = (size_t)ref->t * ref->n * ref->d.hidden;
    double worst = 0, e;
    printf("  %-28s y %6.2fu  dx %6.2fu ", label, (e = rel(ref->y, got->y, ny)) / u, rel(ref->dx, got->dx, nx) / u);
    worst = fmax(e, rel(ref->dx, got->dx, nx));
    for (int d = 0; d < ref->d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            e = rel(ref->dw[d][k], got->dw[d][k], ref->count[k]);
            printf(" %s%s %6.2fu", d ? "r." : "", TENSOR[k], e / u);
            worst = fmax(worst, e);
        }
    printf("\n");
    return worst / u;
}

int main(int argc, char **argv)
{
    const ds_backend *cpu = t_backend("cpu"), *be = t_backend(argc > 1 ? argv[1] : "cpu");
    ds_dtype dt = DS_F16;
    if (argc > 2 && (!ds_dtype_parse(argv[2], &dt) || (dt != DS_F16 && dt != DS_BF16))) {
        fprintf(stderr, "test_rnn_rerun: dtype %s: float16 or bfloat16\n", argv[2]);
        return 2;
    }
    const int layer = argc > 3 ? atoi(argv[3]) : 1;
    const double u = dt == DS_BF16 ? 0x1p-8 : 0x1p-11, bound = 8;
    const double dy_scale = dt == DS_F16 ? 1024 : 1;   /* training's static scale */

    /* the reference model, its start and batch as test_model_gpu_vs_cpu's first case */
    ds_model_cfg cfg;
    T_OK(ds_config_parse(cases[0].json, cases[0].name, &cfg));
    const ds_model_limits lim = {N_UTT, FRAMES, ds_synthetic_max_labels(&cfg, FRAMES)};
    ds_ctx *rctx;
    ds_model *m;
    T_OK(cpu->ctx_create(0, NULL, &rctx));
    T_OK(ds_model_create(&cfg, cpu, rctx, DS_F64, &lim, &m));
    ds_rng rng;
    ds_rng_seed(&rng, 1000);
    T_OK(ds_model_init_params(m, 42));
    T_OK(t_perturb_bn(m, &rng));
    const size_t np = ds_model_param_count(m);
    double *p0 = t_zeros(np);
    T_OK(ds_model_get(m, DS_PARAMS, p0));
    round_to(dt, p0, np);
    T_OK(ds_model_put(m, DS_PARAMS, p0));
    free(p0);
    ds_batch b;
    T_OK(ds_batch_alloc(&b, N_UTT, FRAMES, cfg.n_features, N_UTT * lim.label_len));
    T_OK(ds_synthetic_batch(&rng, &cfg, N_UTT, FRAMES, &b));
    T_OK(ds_model_set_batch(m, &b));
    T_OK(ds_model_zero_grad(m));
    T_OK(ds_model_forward(m, 1));
    T_OK(ds_model_loss(m, 1));
    T_OK(ds_model_backward(m));

    /* the dump: run again on the same op, it must give the model's values */
    layer_vals v, again;
    T_OK(take_layer(m, cpu, rctx, layer, &v));
    printf("%s, layer rnn.%d: %s x%d, in %d, hidden %d, %d frames x %d utterances, lengths", cases[0].name,
           layer, cfg.cell == DS_CELL_LSTM ? "LSTM" : "GRU", v.d.dirs, v.d.in, v.d.hidden, v.t, v.n);
    for (int i = 0; i < v.n; i++)
        printf(" %d", v.len[i]);
    printf("\n");
    copy_inputs(&v, &again);
    T_OK(run_layer(cpu, rctx, cpu->ops(DS_F64), DS_F64, &again, &again));
    const size_t nx = (size_t)v.t * v.n * v.d.in, ny = (size_t)v.t * v.n * v.d.hidden;
    T_CHECK(!memcmp(v.y, again.y, ny * sizeof *v.y) && !memcmp(v.dx, again.dx, nx * sizeof *v.dx),
            "the layer run alone does not give the model's output and input gradient (y %g, dx %g): "
            "the dump is not the layer's", t_max_abs_diff(v.y, again.y, ny), t_max_abs_diff(v.dx, again.dx, nx));
    for (int d = 0; d < v.d.dirs; d++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            T_CHECK(!memcmp(v.dw[d][k], again.dw[d][k], v.count[k] * sizeof(double)),
                    "direction %d %s: the layer alone gives another gradient than the model's (%g)", d,
                    TENSOR[k], t_max_abs_diff(v.dw[d][k], again.dw[d][k], v.count[k]));
    vals_free(&again);

    /* the inputs in DTYPE; dy scaled as training scales it */
    for (size_t i = 0; i < ny; i++)
        v.dy[i] *= dy_scale;
    round_to(dt, v.x, nx);
    round_to(dt, v.dy, ny);
    ds_ctx *tctx = rctx, *dctx = NULL;
    const int gpu = be != cpu;
    if (gpu) {
        T_OK(be->ctx_create(0, NULL, &tctx));
        setenv("DSTRAIN_CUDNN_NARROW_MATH", "default", 1);   /* read when a context opens */
        T_OK(be->ctx_create(0, NULL, &dctx));
        unsetenv("DSTRAIN_CUDNN_NARROW_MATH");
    }
    const char *const SHAPE[3] = {"as drawn", "sorted", "equal"};
    printf("errors to FP64 on the same %s inputs (u = 2^%d; bound %.0fu):\n", ds_dtype_name(dt),
           dt == DS_BF16 ? -8 : -11, bound);
    for (int sh = 0; sh < 3; sh++) {
        layer_vals in, ref, emu, tst;
        copy_inputs(&v, &in);
        shape(&in, sh);
        copy_inputs(&in, &ref), copy_inputs(&in, &emu), copy_inputs(&in, &tst);
        T_OK(run_layer(cpu, rctx, cpu->ops(DS_F64), DS_F64, &in, &ref));
        T_OK(run_layer(cpu, rctx, cpu->ops(dt), dt, &in, &emu));
        char label[64];
        snprintf(label, sizeof label, "%s: cpu emulation", SHAPE[sh]);
        const double e_emu = report(label, &ref, &emu, u);
        T_CHECK(e_emu <= bound, "%s: the cpu's %s emulation is %.1fu off FP64", SHAPE[sh], ds_dtype_name(dt), e_emu);
        if (gpu) {
            T_OK(run_layer(be, tctx, be->ops(dt), dt, &in, &tst));
            snprintf(label, sizeof label, "%s: %s", SHAPE[sh], be->name);
            const double e = report(label, &ref, &tst, u);
            T_CHECK(e <= bound, "%s: %s %s is %.1fu off FP64 (emulation %.1fu)", SHAPE[sh], be->name,
                    ds_dtype_name(dt), e, e_emu);
            T_OK(run_layer(be, dctx, be->ops(dt), dt, &in, &tst));
            snprintf(label, sizeof label, "%s: %s default math", SHAPE[sh], be->name);
            report(label, &ref, &tst, u);
            T_OK(run_layer(be, tctx, be->ops(DS_F32), DS_F32, &in, &tst));
            snprintf(label, sizeof label, "%s: %s fp32 op", SHAPE[sh], be->name);
            report(label, &ref, &tst, u);
        }
        vals_free(&in), vals_free(&ref), vals_free(&emu), vals_free(&tst);
    }
    vals_free(&v);
    ds_batch_free(&b);
    ds_model_destroy(m);
    if (dctx)
        be->ctx_destroy(dctx);
    if (gpu)
        be->ctx_destroy(tctx);
    cpu->ctx_destroy(rctx);
    return t_finish(__FILE__);
}
