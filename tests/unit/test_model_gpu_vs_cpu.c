/* test_model_gpu_vs_cpu.c - the whole model on a backend (the GPU) against
 * the CPU in FP64 for one batch: loss, logits, every parameter gradient and
 * the BatchNorm running statistics after the training-mode forward; then 20
 * optimizer steps on both from the same parameters over the same batches:
 * every parameter and running statistic.
 *
 * usage: test_model_gpu_vs_cpu [BACKEND [DTYPE [MODEL_JSON]]]
 *        BACKEND default cuda; DTYPE float32 (default), float64, float16 or
 *        bfloat16; MODEL_JSON: one model of your own instead of the two
 *        below (to find which layer a difference comes from).
 *        DSTRAIN_TEST_LOSS_SCALE overrides FP16's static loss scale;
 *        DSTRAIN_TEST_LENGTHS=sorted puts each batch's utterances longest
 *        first, =equal gives every utterance the batch's padded length
 *        (switches of the 16-bit gradient investigation, issue 34 item 6:
 *        whether the RNN's handling of ragged batches is where it differs);
 *        DSTRAIN_TEST_CASE_INDEX (default 0) picks the parameters and batch
 *        a model of one's own gets: those of the built-in case of that index.
 *
 * The reference is always the cpu backend in float64. Both sides start from
 * the same parameters and statistics (drawn on the reference, rounded to the
 * test's dtype, so rounding the starting point is not counted as an error)
 * and see the same ragged batches (utterances of several lengths, so every
 * padding path runs). Run as "cpu float64" the two sides are the same
 * computation and agree exactly; "cpu float32" proves the comparison on a
 * machine without a GPU (ctest model_cpu32_vs_cpu64).
 *
 * Comparisons are norm-wise relative, ||a - b|| / max(||a||, ||b||), per
 * tensor; logits only over real frames (t < the utterance's output length).
 * A conv bias in training mode feeds straight into BatchNorm, which cancels
 * it: its true gradient is 0 and both sides hold rounding noise, so its error
 * is taken relative to the norm of the same layer's weight gradient (as the
 * PyTorch peer check does).
 *
 * Tolerances (norm-wise relative):
 *  - FP32 one batch, 1e-5: each op rounds at 2^-24 ~ 6e-8 relative; through
 *    the conv stack, the recurrences, BatchNorm and CTC's log-sum-exp the
 *    error grows by a factor of about 25 (the cpu float32 run: gradients
 *    1e-7 .. 1.5e-6, logits 5e-7, loss 7e-9). The FP32 GPU context is
 *    created without TF32, so 1e-5 leaves room for the GPU's other summation
 *    orders (cuBLASLt split-K, cuDNN's RNN and convolution algorithms) while
 *    catching real errors (a wrong frame, a missed mask, a gate in the wrong
 *    order gives 1e-3 or more).
 *  - FP64 one batch, 1e-12: the same growth factor times 2^-53 ~ 1.1e-16 is
 *    about 3e-15, so 1e-12 is not too tight for the whole model: it leaves
 *    a factor of some 300 for cuDNN's double RNN and convolution summation
 *    orders (cpu float64 against itself agrees exactly).
 *  - after 20 SGD steps, FP32 1e-4: the one-batch error enters every step's
 *    update, is carried by Nesterov momentum (0.9: about 10 steps of memory)
 *    and feeds the next steps' gradients at drifted parameters, so it
 *    compounds over the 20 steps (cpu float32: up to 6e-6). The steps move
 *    the parameters by about 20% of their norm, so comparing the parameters
 *    tests the updates; the displacement's own error is printed too.
 *    FP64 1e-10: the same compounding from 1e-16.
 *  - FP16 and BF16 (u = 2^-11 and 2^-8, the unit roundoff): every stored
 *    tensor is rounded at u, the input features included; the loss and
 *    logits within 8u (measured on the CPU's emulation: loss 3e-5 and
 *    1e-4, logits 2.2u and 2.7u); gradients and statistics within 32u
 *    (measured: at most 21u and 18u). BatchNorm's parameter gradients are
 *    sums over every position of the batch that cancel: the first conv
 *    layer's bias gradient sums 5 x 96 x 16 = 7,680 terms whose result is
 *    far smaller than their magnitudes, so its relative error is larger
 *    (measured: 51u in fp16, 38u in bf16); those get 128u. A GPU's
 *    libraries also round inside a call (cuDNN's RNN stores every step's
 *    state in 16 bits): the margin is for that, and is not yet measured.
 *    FP16 runs with a static loss scale of 1024, as training would, divided
 *    out on the host. After 20 steps 16-bit runs drift apart (conv weights,
 *    which move by about their own size, differ by up to 69%): no precision
 *    bound holds for the parameters there. What must agree is the training:
 *    how far the loss fell from the first step to the last, within 10% of
 *    the reference's fall; the parameters are printed, not compared.
 */
#include <math.h>
#include <stdint.h>
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

enum { N_UTT = 5, FRAMES = 96, STEPS = 20 };
#define LR 1e-3   /* fixed (constant schedule): large enough that the steps move the weights */

static const ds_backend *be_test, *be_ref;
static ds_dtype dt_test;
static double tol_out, tol_batch, tol_steps;   /* loss and logits; gradients and stats; steps */
static double tol_cancel;                       /* BatchNorm's parameter gradients */
static int half_test;                           /* a 16-bit tested side */

/* One side of the comparison: a model and its optimizer on one backend. */
typedef struct {
    const ds_backend *be;
    ds_ctx *ctx;
    ds_model *m;
    ds_optim *o;
    ds_dtype dt;
} side;

static void side_free(side *s)
{
    ds_optim_destroy(s->o);
    ds_model_destroy(s->m);
    if (s->ctx)
        s->be->ctx_destroy(s->ctx);
    memset(s, 0, sizeof *s);
}

/* The static loss scale of the tested side: fp16 gradients need one (as
 * training runs them) or the small ones flush to zero; a power of two, so
 * dividing it out on the host is exact. */
static double loss_scale_of(ds_dtype dt)
{
    const char *e = getenv("DSTRAIN_TEST_LOSS_SCALE");
    return dt != DS_F16 ? 1 : e ? atof(e) : 1024;
}

/* DSTRAIN_TEST_LENGTHS: b's utterances longest first (sorted; ties keep
 * their order), or all of the padded length (equal: their padding frames,
 * zero, become real ones); unset, b as drawn. */
static ds_status shape_lengths(ds_batch *b)
{
    const char *how = getenv("DSTRAIN_TEST_LENGTHS");
    if (!how || !*how)
        return DS_OK;
    if (!strcmp(how, "equal")) {
        for (int i = 0; i < b->n; i++)
            b->lengths[i] = b->t;
        return DS_OK;
    }
    if (strcmp(how, "sorted"))
        return DS_FAIL(DS_ERR_ARG, "DSTRAIN_TEST_LENGTHS=%s: sorted or equal", how);
    const size_t row = (size_t)b->t * b->f;
    int *order = malloc((size_t)b->n * sizeof *order), *len = malloc((size_t)b->n * sizeof *len);
    int *lab = malloc((size_t)(b->cap_labels > 0 ? b->cap_labels : 1) * sizeof *lab);
    int *off = malloc((size_t)b->n * sizeof *off), *ll = malloc((size_t)b->n * sizeof *ll);
    float *feat = malloc(row * b->n * sizeof *feat);
    ds_status st = order && len && lab && off && ll && feat ? DS_OK : DS_FAIL(DS_ERR_MEM, "sorted batch");
    for (int i = 0; st == DS_OK && i < b->n; i++)   /* insertion sort, stable, longest first */
        for (int k = i; k >= 0; k--) {
            if (k == 0 || b->lengths[order[k - 1]] >= b->lengths[i]) {
                order[k] = i;
                break;
            }
            order[k] = order[k - 1];
        }
    int at = 0;
    for (int j = 0; st == DS_OK && j < b->n; j++) {
        const int i = order[j];
        len[j] = b->lengths[i];
        memcpy(feat + row * j, b->features + row * i, row * sizeof *feat);
        memcpy(lab + at, b->labels + b->label_off[i], (size_t)b->label_len[i] * sizeof *lab);
        off[j] = at, ll[j] = b->label_len[i];
        at += ll[j];
    }
    if (st == DS_OK) {
        memcpy(b->lengths, len, (size_t)b->n * sizeof *len);
        memcpy(b->features, feat, row * b->n * sizeof *feat);
        memcpy(b->labels, lab, (size_t)at * sizeof *lab);
        memcpy(b->label_off, off, (size_t)b->n * sizeof *off);
        memcpy(b->label_len, ll, (size_t)b->n * sizeof *ll);
    }
    free(order), free(len), free(lab), free(off), free(ll), free(feat);
    return st;
}

static ds_status side_open(side *s, const ds_backend *be, ds_dtype dt, const ds_model_cfg *cfg,
                           const ds_model_limits *lim)
{
    *s = (side){.be = be, .dt = dt};
    /* default options: no TF32, so FP32 products are FP32 */
    DS_TRY(be->ctx_create(0, NULL, &s->ctx));
    DS_TRY(ds_model_create(cfg, be, s->ctx, dt, lim, &s->m));
    ds_optim_cfg oc = ds_optim_defaults();   /* SGD, Nesterov 0.9, wd 1e-5, max norm 400 */
    oc.schedule = DS_LR_CONSTANT;
    oc.lr = LR;
    oc.loss_scale = loss_scale_of(dt);
    DS_TRY(ds_model_optim_create(s->m, &oc, &s->o));
    ds_model_set_loss_scale(s->m, ds_optim_loss_scale(s->o));
    return DS_OK;
}

/* One training step's forward, loss and backward on batch b (grads zeroed first). */
static ds_status side_pass(side *s, const ds_batch *b, ds_loss *l, double *losses)
{
    DS_TRY(ds_model_set_batch(s->m, b));
    DS_TRY(ds_model_zero_grad(s->m));
    DS_TRY(ds_model_forward(s->m, 1));
    DS_TRY(ds_model_loss(s->m, 1));
    DS_TRY(ds_model_backward(s->m));
    return l ? ds_model_read_loss(s->m, l, losses) : DS_OK;
}

/* Rounds x [n] to the nearest values of dt (a no-op for FP64), on the
 * host, one element at a time through ds_convert. */
static void round_to(ds_dtype dt, double *x, size_t n)
{
    uint64_t one;   /* room for one element of any dtype */
    for (size_t i = 0; dt != DS_F64 && i < n; i++)
        if (ds_convert(dt, &one, DS_F64, &x[i], 1) != DS_OK ||
            ds_convert(DS_F64, &x[i], dt, &one, 1) != DS_OK)
            T_CHECK(0, "rounding to %s", ds_dtype_name(dt));
}


static int bias_cancelled_by_bn(const char *name)
{
    return strncmp(name, "conv.", 5) == 0 && strstr(name, ".bias") && !strstr(name, ".bn.");
}

/* The table index of the tensor called name, or -1. */
static int param_index(const ds_model *m, const char *name)
{
    for (int i = 0; i < ds_model_n_params(m); i++)
        if (!strcmp(ds_model_param(m, i)->name, name))
            return i;
    return -1;
}

static double worst_seen;

/* One row of the table: the error err of what against tol. */
static void verdict(const char *cn, const char *what, size_t count, double err, double tol,
                    const char *note)
{
    int ok = err <= tol;   /* NaN fails */
    worst_seen = err > worst_seen ? err : worst_seen;
    printf("  %-36s %7zu  %10.3e  %7.0e  %s%s\n", what, count, err, tol, ok ? "ok" : "FAIL", note);
    T_CHECK(ok, "%s: %s: relative error %.3g > %.0e", cn, what, err, tol);
}

static void table_head(const char *title)
{
    printf("  -- %s\n  %-36s %7s  %10s  %7s  %s\n", title, "tensor", "count", "rel err", "tol",
           "verdict");
}

/* Compares the tensors of table tab (params or BN stats) in the packed host
 * copies a (test) and b (reference). grads: the conv bias rule applies. */
static void compare_tensors(const char *cn, const ds_model *m, int stats, const double *a,
                            const double *b, double tol, int grads, const char *prefix)
{
    const int n = stats ? ds_model_n_bn_stats(m) : ds_model_n_params(m);
    for (int i = 0; i < n; i++) {
        const ds_tensor *t = stats ? ds_model_bn_stat(m, i) : ds_model_param(m, i);
        char what[96];
        snprintf(what, sizeof what, "%s%s", prefix, t->name);
        if (grads && bias_cancelled_by_bn(t->name)) {
            /* conv.K.bias -> conv.K.weight */
            char wname[48];
            snprintf(wname, sizeof wname, "%.*sweight", (int)(strstr(t->name, "bias") - t->name), t->name);
            int w = param_index(m, wname);
            double floor = 0;
            if (w >= 0) {
                const ds_tensor *tw = ds_model_param(m, w);
                for (size_t k = 0; k < tw->count; k++)
                    floor += b[tw->offset + k] * b[tw->offset + k];
            }
            floor = sqrt(floor);
            double d = 0;
            for (size_t k = 0; k < t->count; k++)
                d += (a[t->offset + k] - b[t->offset + k]) * (a[t->offset + k] - b[t->offset + k]);
            T_CHECK(w >= 0, "%s: no %s for %s", cn, wname, t->name);
            verdict(cn, what, t->count, floor > 0 ? sqrt(d) / floor : sqrt(d), tol,
                    "  (* true value 0: vs ||grad weight||)");
            continue;
        }
        const int cancels = grads && strstr(t->name, ".bn.") && tol_cancel > tol;
        verdict(cn, what, t->count, t_rel_err(a + t->offset, b + t->offset, t->count),
                cancels ? tol_cancel : tol, cancels ? "  (a cancelling sum: see the header)" : "");
    }
}

/* Every real frame of logits [T'][N][C] gathered into out; returns the count. */
static size_t real_frames(const double *logits, int tt, int n, int c, const int *len, double *out)
{
    size_t k = 0;
    for (int s = 0; s < tt; s++)
        for (int i = 0; i < n; i++)
            if (s < len[i])
                for (int j = 0; j < c; j++)
                    out[k++] = logits[((size_t)s * n + i) * c + j];
    return k;
}

#define T_OK_CASE(expr)                                                                    \
    do {                                                                                   \
        ds_status st_ = (expr);                                                            \
        if (st_ != DS_OK) {                                                                \
            T_CHECK(0, "%s: %s: %s", c->name, #expr, ds_status_last_error());                     \
            goto out;                                                                      \
        }                                                                                  \
    } while (0)

static void check_case(const mc_case *c, int ci)
{
    ds_model_cfg cfg;
    side ref = {0}, tst = {0};
    ds_batch b = {0};
    double *h = NULL, *p0 = NULL, *ga = NULL, *gb = NULL, *la = NULL, *lb = NULL, *ra = NULL,
           *rb = NULL;
    const int failed_before = t_failures;
    printf("== %s: %s %s vs cpu float64\n", c->name, be_test->name, ds_dtype_name(dt_test));
    T_OK_CASE(ds_config_parse(c->json, c->name, &cfg));
    ds_model_limits lim = {N_UTT, FRAMES, ds_synthetic_max_labels(&cfg, FRAMES)};
    T_OK_CASE(side_open(&ref, be_ref, DS_F64, &cfg, &lim));
    T_OK_CASE(side_open(&tst, be_test, dt_test, &cfg, &lim));
    T_CHECK(ds_model_n_params(ref.m) == ds_model_n_params(tst.m) &&
                ds_model_param_count(ref.m) == ds_model_param_count(tst.m) &&
                ds_model_bn_stats_count(ref.m) == ds_model_bn_stats_count(tst.m),
            "%s: the two sides' tensor tables differ", c->name);
    for (int i = 0; i < ds_model_n_params(ref.m) && i < ds_model_n_params(tst.m); i++)
        T_CHECK(!strcmp(ds_model_param(ref.m, i)->name, ds_model_param(tst.m, i)->name) &&
                    ds_model_param(ref.m, i)->offset == ds_model_param(tst.m, i)->offset,
                "%s: tensor %d: %s vs %s", c->name, i, ds_model_param(tst.m, i)->name,
                ds_model_param(ref.m, i)->name);
    if (t_failures > failed_before)
        goto out;

    const size_t np = ds_model_param_count(ref.m), ns = ds_model_bn_stats_count(ref.m);
    const size_t nmax = np > ns ? np : ns;
    h = malloc(nmax * sizeof *h);
    p0 = malloc(np * sizeof *p0);
    ga = malloc(nmax * sizeof *ga);
    gb = malloc(nmax * sizeof *gb);
    T_CHECK(h && p0 && ga && gb, "%s: host buffers", c->name);
    if (!h || !p0 || !ga || !gb)
        goto out;

    /* ---- the same starting point on both sides ---- */
    ds_rng rng;
    ds_rng_seed(&rng, 1000 + ci);
    T_OK_CASE(ds_model_init_params(ref.m, 42 + ci));
    T_OK_CASE(t_perturb_bn(ref.m, &rng));
    T_OK_CASE(ds_model_get(ref.m, DS_PARAMS, p0));
    round_to(dt_test, p0, np);
    T_OK_CASE(ds_model_put(ref.m, DS_PARAMS, p0));
    T_OK_CASE(ds_model_put(tst.m, DS_PARAMS, p0));
    T_OK_CASE(ds_model_get(ref.m, DS_BN_STATS, h));
    round_to(dt_test, h, ns);
    T_OK_CASE(ds_model_put(ref.m, DS_BN_STATS, h));
    T_OK_CASE(ds_model_put(tst.m, DS_BN_STATS, h));

    /* ---- one ragged batch ---- */
    T_OK_CASE(ds_batch_alloc(&b, N_UTT, FRAMES, cfg.n_features, N_UTT * lim.label_len));
    T_OK_CASE(ds_synthetic_batch(&rng, &cfg, N_UTT, FRAMES, &b));
    T_OK_CASE(shape_lengths(&b));
    const char *shaped = getenv("DSTRAIN_TEST_LENGTHS");
    int distinct = 0, padded = 0;
    for (int i = 0; i < b.n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= b.lengths[j] == b.lengths[i];
        distinct += !seen;
        padded += b.lengths[i] < b.t;
    }
    printf("  batch: %d utterances, lengths", b.n);
    for (int i = 0; i < b.n; i++)
        printf(" %d", b.lengths[i]);
    printf(" (padded to %d)\n", b.t);
    T_CHECK((shaped && !strcmp(shaped, "equal")) || (distinct >= 3 && padded >= 2),
            "%s: the batch is not ragged enough (%d lengths, %d padded)", c->name, distinct, padded);

    ds_loss lt, lr;
    la = malloc(N_UTT * sizeof *la);
    lb = malloc(N_UTT * sizeof *lb);
    T_CHECK(la && lb, "%s: host buffers", c->name);
    if (!la || !lb)
        goto out;
    T_OK_CASE(side_pass(&ref, &b, &lr, lb));
    T_OK_CASE(side_pass(&tst, &b, &lt, la));
    T_CHECK(lr.n_infinite == 0 && lt.n_infinite == 0, "%s: infinite losses: ref %d, test %d", c->name,
            lr.n_infinite, lt.n_infinite);

    table_head("one batch, training mode");
    double el = fabs(lt.loss - lr.loss) / fmax(fabs(lr.loss), 1e-300);
    printf("  loss: test %.12g, reference %.12g\n", lt.loss, lr.loss);
    verdict(c->name, "loss (mean)", 1, el, tol_out, "");
    verdict(c->name, "loss per utterance", N_UTT, t_rel_err(la, lb, N_UTT), tol_out, "");

    /* logits over real frames */
    const int tt = ds_model_batch_out_frames(ref.m), C = cfg.n_classes;
    const int *ol = ds_model_out_lengths(ref.m), *olt = ds_model_out_lengths(tst.m);
    T_CHECK(ds_model_batch_out_frames(tst.m) == tt && !memcmp(ol, olt, N_UTT * sizeof *ol),
            "%s: output lengths differ", c->name);
    const size_t nl = (size_t)tt * N_UTT * C;
    ra = malloc(nl * sizeof *ra);
    rb = malloc(nl * sizeof *rb);
    T_CHECK(ra && rb, "%s: host buffers", c->name);
    if (!ra || !rb)
        goto out;
    T_OK_CASE(ds_model_logits(tst.m, ra));
    T_OK_CASE(ds_model_logits(ref.m, rb));
    double *xa = malloc(nl * sizeof *xa), *xb = malloc(nl * sizeof *xb);
    if (xa && xb) {
        size_t k = real_frames(ra, tt, N_UTT, C, ol, xa);
        real_frames(rb, tt, N_UTT, C, ol, xb);
        int short_ = 0;
        for (int i = 0; i < N_UTT; i++)
            short_ += ol[i] < tt;
        T_CHECK(short_ >= 1, "%s: no utterance has output padding", c->name);
        verdict(c->name, "logits (real frames)", k, t_rel_err(xa, xb, k), tol_out, "");
    }
    T_CHECK(xa && xb, "%s: host buffers", c->name);
    free(xa);
    free(xb);

    /* every parameter gradient, by name */
    T_OK_CASE(ds_model_get(tst.m, DS_GRADS, ga));
    T_OK_CASE(ds_model_get(ref.m, DS_GRADS, gb));
    for (size_t k = 0; k < np; k++)
        ga[k] /= loss_scale_of(dt_test);
    worst_seen = 0;
    compare_tensors(c->name, ref.m, 0, ga, gb, tol_batch, 1, "grad ");
    printf("  worst gradient error %.3g\n", worst_seen);
    /* running statistics after the training-mode forward */
    T_OK_CASE(ds_model_get(tst.m, DS_BN_STATS, ga));
    T_OK_CASE(ds_model_get(ref.m, DS_BN_STATS, gb));
    compare_tensors(c->name, ref.m, 1, ga, gb, tol_batch, 0, "stat ");

    /* ---- STEPS optimizer steps over the same batches, from the same start ---- */
    T_OK_CASE(ds_model_put(ref.m, DS_PARAMS, p0));
    T_OK_CASE(ds_model_put(tst.m, DS_PARAMS, p0));
    T_OK_CASE(ds_model_put(ref.m, DS_BN_STATS, h));
    T_OK_CASE(ds_model_put(tst.m, DS_BN_STATS, h));
    ds_rng brng;
    ds_rng_seed(&brng, 2000 + ci);
    double first = 0, last = 0, norm_err = 0, loss0_ref = 0, loss0_tst = 0;
    for (int s = 0; s < STEPS; s++) {
        T_OK_CASE(ds_synthetic_batch(&brng, &cfg, N_UTT, FRAMES, &b));
        T_OK_CASE(shape_lengths(&b));
        T_OK_CASE(side_pass(&ref, &b, &lr, NULL));
        T_OK_CASE(side_pass(&tst, &b, &lt, NULL));
        if (s == 0)
            loss0_ref = lr.loss, loss0_tst = lt.loss;
        ds_optim_bufs rb[2], tb[2];
        const int nr = ds_model_optim_bufs(ref.m, rb), nt = ds_model_optim_bufs(tst.m, tb);
        T_OK_CASE(ds_optim_update(ref.o, rb, nr, LR));
        T_OK_CASE(ds_optim_update(tst.o, tb, nt, LR));
        ds_optim_status sr, stt;
        T_OK_CASE(ds_optim_read(ref.o, &sr));
        T_OK_CASE(ds_optim_read(tst.o, &stt));
        T_CHECK(!sr.skipped && !stt.skipped && sr.steps == s + 1 && stt.steps == s + 1,
                "%s: step %d: skipped %d/%d, steps %ld/%ld", c->name, s, stt.skipped, sr.skipped,
                stt.steps, sr.steps);
        T_CHECK((sr.clip == 1) == (stt.clip == 1), "%s: step %d: clipped on one side only (%g vs %g)",
                c->name, s, stt.clip, sr.clip);
        double e = fabs(stt.grad_norm - sr.grad_norm) / fmax(sr.grad_norm, 1e-300);
        norm_err = e > norm_err ? e : norm_err;
        if (s == 0)
            first = sr.grad_norm;
        last = sr.grad_norm;
    }
    T_OK_CASE(ds_model_read_loss(ref.m, &lr, NULL));
    T_OK_CASE(ds_model_read_loss(tst.m, &lt, NULL));
    printf("  %d SGD steps (lr %g, Nesterov 0.9): |g| %.4g -> %.4g, worst |g| error %.3g, last loss "
           "%.8g vs %.8g\n", STEPS, LR, first, last, norm_err, lt.loss, lr.loss);
    T_OK_CASE(ds_model_get(tst.m, DS_PARAMS, ga));
    T_OK_CASE(ds_model_get(ref.m, DS_PARAMS, gb));
    table_head("parameters after the steps");
    if (half_test) {   /* drift, not precision: the trained loss is compared */
        for (int i = 0; i < ds_model_n_params(ref.m); i++) {
            const ds_tensor *t = ds_model_param(ref.m, i);
            printf("  param %-32s %7zu  %10.3e  (drift: not a test)\n", t->name, t->count,
                   t_rel_err(ga + t->offset, gb + t->offset, t->count));
        }
        const double fell_ref = loss0_ref - lr.loss, fell_tst = loss0_tst - lt.loss;
        printf("  loss fell %.6g -> %.6g (test), %.6g -> %.6g (reference)\n", loss0_tst, lt.loss,
               loss0_ref, lr.loss);
        T_CHECK(fell_ref > 0, "%s: the reference's loss did not fall over the steps", c->name);
        verdict(c->name, "how far the loss fell over the steps", 1,
                fabs(fell_tst - fell_ref) / fmax(fabs(fell_ref), 1e-300), tol_steps, "");
    } else {
        compare_tensors(c->name, ref.m, 0, ga, gb, tol_steps, 0, "param ");
    }
    /* for information: the error of the displacement, which the steps made */
    double dd = 0, dn = 0, pn = 0;
    for (size_t k = 0; k < np; k++) {
        dd += (ga[k] - gb[k]) * (ga[k] - gb[k]);
        dn += (gb[k] - p0[k]) * (gb[k] - p0[k]);
        pn += p0[k] * p0[k];
    }
    printf("  displacement ||p20 - p0|| / ||p0|| = %.3g; its relative error %.3g\n", sqrt(dn / pn),
           dn > 0 ? sqrt(dd / dn) : 0);
    T_CHECK(dn > 1e-6 * pn, "%s: the steps hardly moved the parameters (%.3g)", c->name, sqrt(dn / pn));
    T_OK_CASE(ds_model_get(tst.m, DS_BN_STATS, ga));
    T_OK_CASE(ds_model_get(ref.m, DS_BN_STATS, gb));
    if (!half_test)
        compare_tensors(c->name, ref.m, 1, ga, gb, tol_steps, 0, "stat ");
out:
    free(h);
    free(p0);
    free(ga);
    free(gb);
    free(la);
    free(lb);
    free(ra);
    free(rb);
    ds_batch_free(&b);
    side_free(&tst);
    side_free(&ref);
}

static int parse_dtype(const char *s, ds_dtype *out)
{
    if (!strcmp(s, "float32") || !strcmp(s, "fp32") || !strcmp(s, "f32"))
        *out = DS_F32;
    else if (!strcmp(s, "float64") || !strcmp(s, "fp64") || !strcmp(s, "f64"))
        *out = DS_F64;
    else if (!strcmp(s, "float16") || !strcmp(s, "fp16"))
        *out = DS_F16;
    else if (!strcmp(s, "bfloat16") || !strcmp(s, "bf16"))
        *out = DS_BF16;
    else
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "cuda";
    dt_test = DS_F32;
    if (argc > 4 || (argc > 2 && parse_dtype(argv[2], &dt_test))) {
        fprintf(stderr, "usage: test_model_gpu_vs_cpu [BACKEND [float32|float64|float16|bfloat16 "
                        "[MODEL_JSON]]]\n");
        return 2;
    }
    be_test = ds_backend_get(name);
#ifdef DS_HAVE_CUDA_BACKEND
    if (!be_test && !strcmp(name, "cuda")) {   /* built, and its plugin would not load */
        fprintf(stderr, "FAIL: --device cuda: %s\n", ds_backend_missing(name));
        return 1;
    }
#endif
    if (!be_test || be_test->device_count() < 1) {
        if (!strcmp(name, "cuda"))
            printf("skipped: no CUDA device (%s)\n",
                   be_test ? "none visible" : "the cuda backend is not built in");
        else
            printf("skipped: no %s device (%s)\n", name, be_test ? "none here" : "backend not built");
        return T_SKIP_CODE;
    }
    be_ref = ds_backend_get("cpu");
    half_test = dt_test == DS_F16 || dt_test == DS_BF16;
    if (dt_test == DS_F32) {
        tol_batch = 1e-5;
        tol_steps = 1e-4;
    } else if (half_test) {   /* see the top of the file */
        const double u = dt_test == DS_F16 ? 0x1p-11 : 0x1p-8;
        tol_out = 8 * u;
        tol_batch = 32 * u;
        tol_cancel = 128 * u;
        tol_steps = 0.1;
    } else {
        tol_batch = 1e-12;
        tol_steps = 1e-10;
    }
    if (!half_test)
        tol_out = tol_batch;
    if (!be_test->ops(dt_test)) {
        T_CHECK(0, "backend %s has no %s ops", name, ds_dtype_name(dt_test));
        return t_finish(__FILE__);
    }
    if (argc > 3) {
        const mc_case own = {"the model given", argv[3], 0};
        const char *ci = getenv("DSTRAIN_TEST_CASE_INDEX");
        check_case(&own, ci ? atoi(ci) : 0);
        return t_finish(__FILE__);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (half_test && cases[i].wide_only) {
            printf("== %s: not compared in %s (FP32 and FP64 only: see the case)\n",
                   cases[i].name, ds_dtype_name(dt_test));
            continue;
        }
        check_case(&cases[i], (int)i);
    }
    return t_finish(__FILE__);
}
