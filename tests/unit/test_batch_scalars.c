/* test_batch_scalars.c - the per-batch scalars (BatchNorm's count, the loss
 * norm, the gradient scale 1 / norm and dropout's step) are read by the ops
 * in backend memory, where the model uploads them once per batch: a step
 * captured once per batch shape (a CUDA Graph) must not hold them as
 * arguments.
 *
 *  (a) the ops on scalars in backend memory give what the formula gives,
 *      bit for bit: BatchNorm on data chosen so that every operation is
 *      exact (the reference then does not depend on how the compiler fuses
 *      a*b+c), loss_total summed in the same order;
 *  (b) a new value written into the same backend buffer between two calls
 *      on the same inputs changes the result exactly as the formula says
 *      (count c -> 2c, grad scale g -> 2g, norm n -> 2n): the op reads the
 *      memory, not a copy of the value taken earlier;
 *  (c) the model (tiny preset, fp32 and fp64): a training step on a second
 *      instance, after a step on another batch, is bit-identical to the
 *      first instance's; the same batch as one of two identical shares of
 *      a global batch (set_global_batch, and a bn_reduce hook that doubles
 *      the moments as a two-rank allreduce would) gives the same logits and
 *      utterance losses, and the mean loss and every gradient exactly
 *      halved; the doubled global batch without the doubled moments
 *      changes BatchNorm's output;
 *  (d) the learning rate, which a schedule changes every step, is read by
 *      sgd_step and adamw_step from scal[DS_OPT_LR]: a doubled value in the
 *      same buffer doubles the update exactly (from p = 0, so each update is
 *      one rounded product), and ds_optim_update queues its lr there;
 *  (e) dropout's step is read in backend memory: with one key, a new step
 *      written into its buffer redraws the mask of dropout_fwd and
 *      dropout_bwd (each the generator's at the step in the buffer), and the
 *      first value written back gives the first outputs bit for bit; the
 *      model (conv and FC dropout) draws other masks at another step set by
 *      ds_model_set_dropout_key and the same at the same step, and refuses
 *      a training forward whose step was set after the batch's upload.
 *
 * usage: test_batch_scalars [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "config.h"
#include "dropout_mask.h"
#include "model.h"
#include "synthetic.h"
#include "testutil.h"

static const ds_backend *be;
static ds_ctx *ctx;

/* ---- backend buffers of doubles (set-up failures end the test) ---- */

/* A new buffer of n elements of dt holding h [n] (NULL: zeros). */
static void *up(ds_dtype dt, size_t n, const double *h)
{
    void *d = NULL;
    if (h)
        t_must(t_new_real(be, ctx, dt, n, h, &d), "upload");
    else
        t_must(be->alloc(ctx, dt, n ? n : 1, &d), "alloc");
    return d;
}

static void put(ds_dtype dt, size_t n, const double *h, void *d)
{
    t_must(t_put_real(be, ctx, dt, n, h, d), "upload");
}

static void down(ds_dtype dt, size_t n, const void *d, double *h)
{
    t_must(t_get_real(be, ctx, dt, n, d, h), "download");
}

/* x as the table of dt stores it (FP32 or FP64). */
static double in_dt(ds_dtype dt, double x) { return dt == DS_F32 ? (double)(float)x : x; }

/* Elements of got [n] that are not exactly k * want [n] (k a power of 2). */
static size_t unlike(const double *got, const double *want, double k, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !(got[i] == k * want[i]);   /* a NaN is never alike */
    return bad;
}

/* ---- BatchNorm: a conv map [2][2][4 frames], lengths 4 and 2 ----
 * Channel 0's real values 1 3 1 3 | 1 3 (mean 2, variance 1), channel 1's
 * 0 4 0 4 | 0 4 (mean 2, variance 4): with eps 0, momentum 0.5 and the
 * gammas below, every statistic, scale and output is a short binary
 * fraction, so rounding (FP32 too) and fused multiply-adds change nothing. */

enum { BN_N = 2, BN_C = 2, BN_T = 4, BN_E = BN_N * BN_C * BN_T };
#define PAD 100.0   /* at padding positions: must be ignored */
#define BN_COUNT 6.0
#define BN_EPS 0.0
#define BN_MOMENTUM 0.5

static const int bn_len[BN_N] = {4, 2};
static const double bn_x[BN_E] = {1, 3, 1, 3, 0, 4, 0, 4, 1, 3, PAD, PAD, 0, 4, PAD, PAD};
static const double bn_dy[BN_E] = {1, -1, 2, 0, 0, 1, -2, 1, 1, 1, PAD, PAD, -1, 2, PAD, PAD};
static const double bn_gamma[BN_C] = {1.5, 3}, bn_beta[BN_C] = {0.25, -1};
static const double bn_rm0[BN_C] = {1, -1}, bn_rv0[BN_C] = {2, 0.5};

static const ds_view bn_view = {BN_N, BN_C, BN_T, BN_C * BN_T, BN_T, 1, 1};

static int bn_real(int e) { return e % BN_T < bn_len[e / (BN_C * BN_T)]; }
static int bn_ch(int e) { return e / BN_T % BN_C; }

/* sums of a and a*b per channel over the real positions (exact here). */
static void bn_sums(const double *a, const double *b, double mom[2 * BN_C])
{
    memset(mom, 0, 2 * BN_C * sizeof *mom);
    for (int e = 0; e < BN_E; e++)
        if (bn_real(e)) {
            mom[bn_ch(e)] += a[e];
            mom[BN_C + bn_ch(e)] += a[e] * b[e];
        }
}

typedef struct {
    double y[BN_E], mean[BN_C], invstd[BN_C], rm[BN_C], rv[BN_C];
} bn_fwd_out;

typedef struct {
    double dx[BN_E], dgamma[BN_C], dbeta[BN_C];
} bn_bwd_out;

/* The old formula with count a host value (cpu/batchnorm.inc), in double,
 * each result rounded to dt as the op stores it. */
static void bn_fwd_ref(ds_dtype dt, double count, const double *mom, bn_fwd_out *o)
{
    for (int ch = 0; ch < BN_C; ch++) {
        double mean = mom[ch] / count, var = fmax(mom[BN_C + ch] / count - mean * mean, 0);
        double invstd = 1 / sqrt(var + BN_EPS);
        double unbiased = count > 1 ? var * count / (count - 1) : var;
        o->mean[ch] = in_dt(dt, mean), o->invstd[ch] = in_dt(dt, invstd);
        o->rm[ch] = in_dt(dt, (1 - BN_MOMENTUM) * bn_rm0[ch] + BN_MOMENTUM * mean);
        o->rv[ch] = in_dt(dt, (1 - BN_MOMENTUM) * bn_rv0[ch] + BN_MOMENTUM * unbiased);
    }
    for (int e = 0; e < BN_E; e++) {
        int ch = bn_ch(e);
        double scale = o->invstd[ch] * bn_gamma[ch];
        o->y[e] = bn_real(e) ? (bn_x[e] - o->mean[ch]) * scale + bn_beta[ch] : 0;
    }
}

/* Backward's start values: what dx, dgamma and dbeta accumulate onto. */
#define BN_DX0 0.5
#define BN_DP0 0.25

static void bn_bwd_ref(double count, const double *dmom, const bn_fwd_out *f, bn_bwd_out *o)
{
    for (int ch = 0; ch < BN_C; ch++)
        o->dgamma[ch] = o->dbeta[ch] = BN_DP0;
    for (int e = 0; e < BN_E; e++) {
        int ch = bn_ch(e);
        double xhat = (bn_x[e] - f->mean[ch]) * f->invstd[ch];
        double k = bn_gamma[ch] * f->invstd[ch] / count;
        o->dx[e] = BN_DX0;
        if (!bn_real(e))
            continue;
        o->dx[e] += k * (count * bn_dy[e] - dmom[ch] - xhat * dmom[BN_C + ch]);
        o->dgamma[ch] += bn_dy[e] * xhat;
        o->dbeta[ch] += bn_dy[e];
    }
}

/* The fixture in one table's memory; count [1] is the scalar the ops read. */
typedef struct {
    ds_dtype dt;
    const ds_ops *op;
    void *len, *x, *dy, *gamma, *beta, *mom, *dmom, *y, *mean, *invstd, *rm, *rv, *dx, *dg, *db;
    void *count;
} bn_dev;

static bn_dev bn_dev_make(ds_dtype dt)
{
    bn_dev d = {.dt = dt, .op = be->ops(dt)};
    t_must(t_new_int(be, ctx, BN_N, bn_len, &d.len), "lengths");
    d.x = up(dt, BN_E, bn_x), d.dy = up(dt, BN_E, bn_dy);
    d.gamma = up(dt, BN_C, bn_gamma), d.beta = up(dt, BN_C, bn_beta);
    d.rm = up(dt, BN_C, NULL), d.rv = up(dt, BN_C, NULL);
    d.mom = up(dt, 2 * BN_C, NULL), d.dmom = up(dt, 2 * BN_C, NULL);
    d.y = up(dt, BN_E, NULL), d.mean = up(dt, BN_C, NULL), d.invstd = up(dt, BN_C, NULL);
    d.dx = up(dt, BN_E, NULL), d.dg = up(dt, BN_C, NULL), d.db = up(dt, BN_C, NULL);
    d.count = t_scalar(be, ctx, BN_COUNT);
    return d;
}

static void bn_dev_free(bn_dev *d)
{
    void *all[] = {d->len, d->x, d->dy, d->gamma, d->beta, d->mom, d->dmom, d->y, d->mean,
                   d->invstd, d->rm, d->rv, d->dx, d->dg, d->db, d->count};
    t_release_all(be, ctx, all, sizeof all / sizeof all[0]);
}

/* count (written into the same scalar buffer), moments mom [2c] -> o. */
static void bn_fwd_run(bn_dev *d, double count, const double *mom, bn_fwd_out *o)
{
    put(DS_F64, 1, &count, d->count);
    put(d->dt, 2 * BN_C, mom, d->mom);
    put(d->dt, BN_C, bn_rm0, d->rm), put(d->dt, BN_C, bn_rv0, d->rv);
    t_must(d->op->bn_fwd_train(ctx, &bn_view, d->len, d->count, d->x, d->mom, d->gamma, d->beta,
                               BN_EPS, BN_MOMENTUM, d->y, d->mean, d->invstd, d->rm, d->rv),
           "bn_fwd_train");
    down(d->dt, BN_E, d->y, o->y);
    down(d->dt, BN_C, d->mean, o->mean), down(d->dt, BN_C, d->invstd, o->invstd);
    down(d->dt, BN_C, d->rm, o->rm), down(d->dt, BN_C, d->rv, o->rv);
}

/* count, backward moments dmom [2c], forward statistics f -> o. */
static void bn_bwd_run(bn_dev *d, double count, const double *dmom, const bn_fwd_out *f,
                       bn_bwd_out *o)
{
    double dx0[BN_E], dp0[BN_C];
    for (int e = 0; e < BN_E; e++)
        dx0[e] = BN_DX0;
    for (int ch = 0; ch < BN_C; ch++)
        dp0[ch] = BN_DP0;
    put(DS_F64, 1, &count, d->count);
    put(d->dt, 2 * BN_C, dmom, d->dmom);
    put(d->dt, BN_C, f->mean, d->mean), put(d->dt, BN_C, f->invstd, d->invstd);
    put(d->dt, BN_E, dx0, d->dx), put(d->dt, BN_C, dp0, d->dg), put(d->dt, BN_C, dp0, d->db);
    t_must(d->op->bn_bwd_train(ctx, &bn_view, d->len, d->count, d->dy, d->x, d->gamma, d->mean,
                               d->invstd, d->dmom, d->dx, d->dg, d->db),
           "bn_bwd_train");
    down(d->dt, BN_E, d->dx, o->dx);
    down(d->dt, BN_C, d->dg, o->dgamma), down(d->dt, BN_C, d->db, o->dbeta);
}

/* Elements of two forward results that differ (the running variance only
 * with with_rv). */
static size_t bn_fwd_unlike(const bn_fwd_out *got, const bn_fwd_out *want, int with_rv)
{
    return unlike(got->y, want->y, 1, BN_E) + unlike(got->mean, want->mean, 1, BN_C) +
           unlike(got->invstd, want->invstd, 1, BN_C) + unlike(got->rm, want->rm, 1, BN_C) +
           (with_rv ? unlike(got->rv, want->rv, 1, BN_C) : 0);
}

static size_t bn_bwd_unlike(const bn_bwd_out *got, const bn_bwd_out *want)
{
    return unlike(got->dx, want->dx, 1, BN_E) + unlike(got->dgamma, want->dgamma, 1, BN_C) +
           unlike(got->dbeta, want->dbeta, 1, BN_C);
}

static void test_bn(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    bn_dev d = bn_dev_make(dt);
    double mom[2 * BN_C], mom2[2 * BN_C], got_mom[2 * BN_C];
    bn_sums(bn_x, bn_x, mom);
    for (int k = 0; k < 2 * BN_C; k++)
        mom2[k] = 2 * mom[k];   /* two identical shares' moments, summed */
    t_must(d.op->bn_moments(ctx, &bn_view, d.len, d.x, d.mom), "bn_moments");
    down(dt, 2 * BN_C, d.mom, got_mom);
    T_CHECK(unlike(got_mom, mom, 1, 2 * BN_C) == 0, "%s bn_moments: not the exact sums", dn);

    /* (a) count c in backend memory: the old formula, bit for bit */
    bn_fwd_out a, b, c, ref;
    bn_fwd_run(&d, BN_COUNT, mom, &a);
    bn_fwd_ref(dt, BN_COUNT, mom, &ref);
    T_CHECK(bn_fwd_unlike(&a, &ref, 1) == 0, "%s bn_fwd_train, count c: %zu values off the formula",
            dn, bn_fwd_unlike(&a, &ref, 1));
    /* (b) 2c written into the same buffer, same moments: half the mean (exact),
     * the variance from E[x^2] / 2c; the output changes */
    bn_fwd_run(&d, 2 * BN_COUNT, mom, &b);
    bn_fwd_ref(dt, 2 * BN_COUNT, mom, &ref);
    T_CHECK(unlike(b.mean, a.mean, 0.5, BN_C) == 0 && unlike(b.invstd, ref.invstd, 1, BN_C) == 0 &&
                unlike(b.y, a.y, 1, BN_E) > 0,
            "%s bn_fwd_train, count 2c: mean %g %g (want half of %g %g), invstd %g %g (want %g %g)",
            dn, b.mean[0], b.mean[1], a.mean[0], a.mean[1], b.invstd[0], b.invstd[1],
            ref.invstd[0], ref.invstd[1]);
    /* 2c with the moments of two identical shares: the statistics of one;
     * only the running variance (unbiased: x 2c / (2c - 1)) differs */
    bn_fwd_run(&d, 2 * BN_COUNT, mom2, &c);
    bn_fwd_ref(dt, 2 * BN_COUNT, mom2, &ref);
    T_CHECK(bn_fwd_unlike(&c, &a, 0) == 0 && unlike(c.rv, ref.rv, 1, BN_C) == 0,
            "%s bn_fwd_train, count 2c and moments x2: %zu values differ from count c's, "
            "running variance %g %g (want %g %g)",
            dn, bn_fwd_unlike(&c, &a, 0), c.rv[0], c.rv[1], ref.rv[0], ref.rv[1]);

    /* backward: the moments of dy through the op, then count c, 2c, and 2c
     * with the moments doubled (which is count c's dx again) */
    double dmom[2 * BN_C], dmom2[2 * BN_C], xhat[BN_E];
    for (int e = 0; e < BN_E; e++)
        xhat[e] = (bn_x[e] - a.mean[bn_ch(e)]) * a.invstd[bn_ch(e)];
    bn_sums(bn_dy, xhat, dmom);
    for (int k = 0; k < 2 * BN_C; k++)
        dmom2[k] = 2 * dmom[k];
    put(dt, BN_C, a.mean, d.mean), put(dt, BN_C, a.invstd, d.invstd);
    t_must(d.op->bn_bwd_moments(ctx, &bn_view, d.len, d.dy, d.x, d.mean, d.invstd, d.dmom),
           "bn_bwd_moments");
    down(dt, 2 * BN_C, d.dmom, got_mom);
    T_CHECK(unlike(got_mom, dmom, 1, 2 * BN_C) == 0, "%s bn_bwd_moments: not the exact sums", dn);
    bn_bwd_out ga, gb, gc, gref;
    bn_bwd_run(&d, BN_COUNT, dmom, &a, &ga);
    bn_bwd_ref(BN_COUNT, dmom, &a, &gref);
    T_CHECK(bn_bwd_unlike(&ga, &gref) == 0, "%s bn_bwd_train, count c: %zu values off the formula",
            dn, bn_bwd_unlike(&ga, &gref));
    bn_bwd_run(&d, 2 * BN_COUNT, dmom, &a, &gb);
    bn_bwd_ref(2 * BN_COUNT, dmom, &a, &gref);
    T_CHECK(bn_bwd_unlike(&gb, &gref) == 0 && unlike(gb.dx, ga.dx, 1, BN_E) > 0,
            "%s bn_bwd_train, count 2c: %zu values off the formula, or dx unchanged", dn,
            bn_bwd_unlike(&gb, &gref));
    bn_bwd_run(&d, 2 * BN_COUNT, dmom2, &a, &gc);
    T_CHECK(bn_bwd_unlike(&gc, &ga) == 0,
            "%s bn_bwd_train, count 2c and moments x2: %zu values differ from count c's", dn,
            bn_bwd_unlike(&gc, &ga));
    bn_dev_free(&d);
}

/* ---- CTC and the batch total ---- */

enum { CT_T = 6, CT_N = 2, CT_C = 4, CT_E = CT_T * CT_N * CT_C };

/* ctc_loss on fixed logits with the grad scale g written into the same
 * scalar buffer gs: loss [CT_N], dlogits [CT_E]. */
typedef struct {
    ds_dtype dt;
    void *logits, *len, *labels, *off, *lab_len, *loss, *dlogits, *work, *gs;
} ctc_dev;

static const int ct_len[CT_N] = {6, 4}, ct_labels[] = {1, 2, 1, 3, 3};
static const int ct_off[CT_N] = {0, 3}, ct_lab_len[CT_N] = {3, 2};

static ctc_dev ctc_dev_make(ds_dtype dt, ds_rng *rng)
{
    ctc_dev d = {.dt = dt};
    double x[CT_E];
    t_fill_uniform(rng, x, CT_E, -2, 2);
    d.logits = up(dt, CT_E, x);
    t_must(t_new_int(be, ctx, CT_N, ct_len, &d.len), "lengths");
    t_must(t_new_int(be, ctx, 5, ct_labels, &d.labels), "labels");
    t_must(t_new_int(be, ctx, CT_N, ct_off, &d.off), "label offsets");
    t_must(t_new_int(be, ctx, CT_N, ct_lab_len, &d.lab_len), "label lengths");
    d.loss = up(DS_F64, CT_N, NULL), d.dlogits = up(dt, CT_E, NULL);
    d.work = up(dt, be->ops(dt)->ctc_work(CT_T, CT_N, CT_C, 3), NULL);
    d.gs = t_scalar(be, ctx, 1);
    return d;
}

static void ctc_run(ctc_dev *d, double g, double *loss, double *dlogits)
{
    put(DS_F64, 1, &g, d->gs);
    t_must(be->ops(d->dt)->ctc_loss(ctx, CT_T, CT_N, CT_C, 0, d->logits, d->len, d->labels,
                                    d->off, d->lab_len, 3, d->gs, NULL, d->loss, d->dlogits,
                                    d->work),
           "ctc_loss");
    down(DS_F64, CT_N, d->loss, loss);
    down(d->dt, CT_E, d->dlogits, dlogits);
}

static void test_ctc(ds_dtype dt, ds_rng *rng)
{
    const char *dn = ds_dtype_name(dt);
    ctc_dev d = ctc_dev_make(dt, rng);
    double l1[CT_N], g1[CT_E], la[CT_N], ga[CT_E], lb[CT_N], gb[CT_E];
    ctc_run(&d, 1, l1, g1);
    /* (a) the gradient is grad_scale times the unscaled one (rounded once) */
    ctc_run(&d, 0.37, la, ga);
    double want[CT_E];
    for (int k = 0; k < CT_E; k++)
        want[k] = 0.37 * g1[k];
    double e = t_rel_err(ga, want, CT_E);
    T_CHECK(unlike(la, l1, 1, CT_N) == 0 && e < (dt == DS_F32 ? 1e-6 : 1e-14),
            "%s ctc_loss, grad scale 0.37: loss changed, or dlogits off 0.37 x by %.3g", dn, e);
    /* (b) 2g written into the same buffer: dlogits exactly doubled, losses equal */
    ctc_run(&d, 0.74, lb, gb);
    T_CHECK(unlike(lb, la, 1, CT_N) == 0 && unlike(gb, ga, 2, CT_E) == 0,
            "%s ctc_loss, grad scale 0.37 -> 0.74: %zu dlogits not exactly doubled", dn,
            unlike(gb, ga, 2, CT_E));
    void *all[] = {d.logits, d.len, d.labels, d.off, d.lab_len, d.loss, d.dlogits, d.work, d.gs};
    t_release_all(be, ctx, all, sizeof all / sizeof all[0]);
}

static void test_loss_total(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double loss[] = {1.5, INFINITY, 2.25, 0.1, 7.0 / 3};
    const int n = sizeof loss / sizeof loss[0];
    double sum = 0, a[DS_LOSS_SCALARS], b[DS_LOSS_SCALARS];
    for (int i = 0; i < n; i++)   /* the old formula: in order, then / norm */
        sum += isinf(loss[i]) ? 0 : loss[i];
    void *lo = up(DS_F64, (size_t)n, loss), *out = up(DS_F64, DS_LOSS_SCALARS, NULL);
    void *norm = t_scalar(be, ctx, 3);
    t_must(be->ops(dt)->loss_total(ctx, n, norm, lo, out), "loss_total");
    down(DS_F64, DS_LOSS_SCALARS, out, a);
    T_CHECK(a[DS_LOSS_MEAN] == sum / 3 && a[DS_LOSS_INFINITE] == 1,
            "%s loss_total, norm 3: mean %.17g (want %.17g), %g infinite", dn, a[DS_LOSS_MEAN],
            sum / 3, a[DS_LOSS_INFINITE]);
    const double six = 6;
    put(DS_F64, 1, &six, norm);
    t_must(be->ops(dt)->loss_total(ctx, n, norm, lo, out), "loss_total");
    down(DS_F64, DS_LOSS_SCALARS, out, b);
    T_CHECK(b[DS_LOSS_MEAN] == a[DS_LOSS_MEAN] / 2 && b[DS_LOSS_INFINITE] == 1,
            "%s loss_total, norm 3 -> 6: mean %.17g (want exactly half of %.17g)", dn,
            b[DS_LOSS_MEAN], a[DS_LOSS_MEAN]);
    t_release_all(be, ctx, (void *[]){lo, out, norm}, 3);
}

/* ---- (d) the learning rate ---- */

enum { LR_N = 6 };

/* scal [DS_OPT_BUFFER] before an update of gradients g [LR_N]: their sum of
 * squares, scale 1, nothing decided yet, the learning rate lr. */
static void lr_scalars(const double *g, double lr, double *scal)
{
    memset(scal, 0, DS_OPT_BUFFER * sizeof *scal);
    for (int i = 0; i < LR_N; i++)
        scal[DS_OPT_SUMSQ] += g[i] * g[i];
    scal[DS_OPT_SCALE] = 1;
    scal[DS_OPT_LR] = lr;
}

static void test_lr(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const ds_ops *op = be->ops(dt);
    const double g[LR_N] = {0.5, -1.25, 2, -0.75, 3, 0.125}, zero[LR_N] = {0};
    const ds_opt_hparams h[2] = {{.weight_decay = 0}, {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8}};
    for (int adam = 0; adam < 2; adam++) {
        double got[2][LR_N], scal[DS_OPT_BUFFER];
        void *dg = up(dt, LR_N, g), *dp = up(dt, LR_N, zero), *m = up(dt, LR_N, zero), *v = up(dt, LR_N, zero);
        void *ds = up(DS_F64, DS_OPT_BUFFER, NULL);
        for (int k = 0; k < 2; k++) {   /* lr, then 2 lr written into the same buffer */
            put(dt, LR_N, zero, dp), put(dt, LR_N, zero, m), put(dt, LR_N, zero, v);
            lr_scalars(g, (k + 1) * (adam ? 1e-3 : 0.25), scal);
            put(DS_F64, DS_OPT_BUFFER, scal, ds);
            t_must(adam ? op->adamw_step(ctx, LR_N, &h[1], dp, dg, m, v, NULL, ds)
                        : op->sgd_step(ctx, LR_N, &h[0], dp, dg, NULL, NULL, ds), "update");
            down(dt, LR_N, dp, got[k]);
        }
        size_t off = unlike(got[1], got[0], 2, LR_N), moved = 0;
        for (int i = 0; i < LR_N; i++)
            moved += got[0][i] != 0;
        T_CHECK(moved == LR_N && off == 0, "%s %s: lr doubled in scal[DS_OPT_LR]: %zu of %d updates not "
                "exactly doubled (%zu moved)", dn, adam ? "adamw_step" : "sgd_step", off, LR_N, moved);
        if (!adam)
            for (int i = 0; i < LR_N; i++)
                T_CHECK(got[0][i] == in_dt(dt, -0.25 * in_dt(dt, g[i])), "%s sgd_step: p[%d] %g, want -lr g = %g",
                        dn, i, got[0][i], -0.25 * g[i]);
        t_release_all(be, ctx, (void *[]){dg, dp, m, v, ds}, 5);
    }
    /* the optimizer queues the step's lr into its scalars */
    ds_model_cfg cfg;
    t_must(ds_config_preset("tiny", &cfg), "tiny");
    const ds_model_limits lim = {.batch = 2, .frames = 48, .label_len = 8};
    ds_model *mdl = NULL;
    ds_optim *o = NULL;
    t_must(ds_model_create(&cfg, be, ctx, dt, &lim, &mdl), "model");
    ds_optim_cfg oc = ds_optim_defaults();
    t_must(ds_model_optim_create(mdl, &oc, &o), "optimizer");
    t_must(ds_model_zero_grad(mdl), "zero grads");
    ds_optim_bufs b[2];
    const int nb = ds_model_optim_bufs(mdl, b);
    double scal[DS_OPT_BUFFER];
    for (int k = 1; k <= 2; k++) {
        t_must(ds_optim_update(o, b, nb, 0.125 * k), "update");
        down(DS_F64, DS_OPT_BUFFER, ds_optim_scalars(o), scal);
        T_CHECK(scal[DS_OPT_LR] == 0.125 * k, "%s ds_optim_update(lr %g): scal[DS_OPT_LR] %g", dn, 0.125 * k,
                scal[DS_OPT_LR]);
    }
    ds_optim_destroy(o);
    ds_model_destroy(mdl);
}

/* ---- (c) the model ---- */

enum { M_N = 3, M_FRAMES = 48 };

/* One step's results, on the host. */
typedef struct {
    ds_loss loss;
    double losses[M_N];
    double *logits, *grads;
    size_t n_logits, n_grads;
} step_out;

/* Two identical ranks' allreduce of a BatchNorm layer's moments mom [len]:
 * each doubled (exact). */
static ds_status double_moments(void *user, void *mom, size_t len, ds_dtype dt)
{
    (void)user;
    double *h = t_zeros(len);
    ds_status st = t_get_real(be, ctx, dt, len, mom, h);
    for (size_t i = 0; i < len; i++)
        h[i] *= 2;
    if (st == DS_OK)
        st = t_put_real(be, ctx, dt, len, h, mom);
    free(h);
    return st;
}

/* A training step of batch b as part of the global batch glen [gn]. */
static ds_status model_step(ds_model *m, const ds_batch *b, const int *glen, int gn,
                            step_out *o)
{
    DS_TRY(ds_model_set_batch(m, b));
    DS_TRY(ds_model_set_global_batch(m, glen, gn));
    DS_TRY(ds_model_zero_grad(m));
    DS_TRY(ds_model_forward(m, 1));
    DS_TRY(ds_model_loss(m, 1));
    DS_TRY(ds_model_backward(m));
    DS_TRY(ds_model_read_loss(m, &o->loss, o->losses));
    o->n_logits = (size_t)ds_model_batch_out_frames(m) * b->n * ds_model_config(m)->n_classes;
    o->n_grads = ds_model_param_count(m);
    o->logits = t_zeros(o->n_logits), o->grads = t_zeros(o->n_grads);
    DS_TRY(ds_model_logits(m, o->logits));
    return ds_model_get(m, DS_GRADS, o->grads);
}

static void step_free(step_out *o) { free(o->logits), free(o->grads); }

static ds_model *make_model(const ds_model_cfg *cfg, ds_dtype dt, const ds_model_limits *lim)
{
    ds_model *m = NULL;
    t_must(ds_model_create(cfg, be, ctx, dt, lim, &m), "model");
    t_must(ds_model_init_params(m, 21), "init");
    return m;
}

static void test_model(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    ds_model_cfg cfg;
    t_must(ds_config_preset("tiny", &cfg), "tiny preset");
    const ds_model_limits lim = {M_N, M_FRAMES, ds_synthetic_max_labels(&cfg, M_FRAMES)};
    ds_batch b, other;
    t_must(ds_batch_alloc(&b, M_N, M_FRAMES, cfg.n_features, M_N * lim.label_len), "batch");
    t_must(ds_batch_alloc(&other, 2, M_FRAMES, cfg.n_features, 2 * lim.label_len), "batch");
    ds_rng rng;
    ds_rng_seed(&rng, 9);
    t_must(ds_synthetic_batch(&rng, &cfg, M_N, M_FRAMES, &b), "synthetic batch");
    t_must(ds_synthetic_batch(&rng, &cfg, 2, M_FRAMES - 8, &other), "synthetic batch");
    int twice[2 * M_N];   /* this batch as both shares of a two-rank global batch */
    for (int i = 0; i < 2 * M_N; i++)
        twice[i] = b.lengths[i % M_N];

    ds_model *m1 = make_model(&cfg, dt, &lim), *m2 = make_model(&cfg, dt, &lim);
    step_out s1 = {0}, s2 = {0}, s3 = {0}, sd = {0}, su = {0};
    t_must(model_step(m1, &b, b.lengths, M_N, &s1), "step");
    /* the second instance first steps on another batch (other counts and norm) */
    t_must(model_step(m2, &other, other.lengths, other.n, &s3), "step");
    t_must(model_step(m2, &b, b.lengths, M_N, &s2), "step");
    T_CHECK(s2.loss.loss == s1.loss.loss && unlike(s2.losses, s1.losses, 1, M_N) == 0 &&
                unlike(s2.grads, s1.grads, 1, s1.n_grads) == 0,
            "%s model: the step on a second instance differs (loss %.17g vs %.17g, %zu gradients)",
            dn, s2.loss.loss, s1.loss.loss, unlike(s2.grads, s1.grads, 1, s1.n_grads));

    const ds_model_hooks doubling = {.bn_reduce = double_moments}, none = {0};
    ds_model_set_hooks(m2, &doubling);
    t_must(model_step(m2, &b, twice, 2 * M_N, &sd), "step, global batch x2");
    ds_model_set_hooks(m2, &none);
    T_CHECK(unlike(sd.logits, s1.logits, 1, s1.n_logits) == 0 &&
                unlike(sd.losses, s1.losses, 1, M_N) == 0,
            "%s model, global batch of two identical shares: %zu logits differ", dn,
            unlike(sd.logits, s1.logits, 1, s1.n_logits));
    T_CHECK(sd.loss.loss == s1.loss.loss / 2 && unlike(sd.grads, s1.grads, 0.5, s1.n_grads) == 0,
            "%s model, global batch x2: loss %.17g (want exactly half of %.17g), %zu of %zu "
            "gradients not exactly halved",
            dn, sd.loss.loss, s1.loss.loss, unlike(sd.grads, s1.grads, 0.5, s1.n_grads),
            s1.n_grads);
    /* the doubled counts without the doubled moments: BatchNorm's statistics move */
    t_must(model_step(m1, &b, twice, 2 * M_N, &su), "step, counts x2");
    T_CHECK(unlike(su.logits, s1.logits, 1, s1.n_logits) > 0,
            "%s model: the global batch's counts did not change the output", dn);
    printf("%s: loss %.6f, as one of two identical shares %.6f (%zu gradients)\n", dn,
           s1.loss.loss, sd.loss.loss, s1.n_grads);

    step_free(&s1), step_free(&s2), step_free(&s3), step_free(&sd), step_free(&su);
    ds_model_destroy(m1), ds_model_destroy(m2);
    ds_batch_free(&b), ds_batch_free(&other);
}

/* ---- (e) dropout's step ---- */

enum { DR_N = 1003 };   /* not a multiple of 4: the last Philox block is partial */
#define DR_P 0.3

/* dropout_fwd of x and dropout_bwd of dy = x onto dx = 0 with key, after
 * step is written into its step buffer sb: y [DR_N], dx [DR_N]. */
typedef struct {
    ds_dtype dt;
    void *x, *y, *dx, *sb;
} drop_dev;

static void drop_run(const drop_dev *d, const ds_dropout_key *key, double step, double *y,
                     double *dx)
{
    const ds_ops *op = be->ops(d->dt);
    put(DS_F64, 1, &step, d->sb);
    t_must(op->dropout_fwd(ctx, DR_N, DR_P, key, d->x, d->y), "dropout_fwd");
    t_must(be->zero(ctx, d->dt, DR_N, d->dx), "zero");
    t_must(op->dropout_bwd(ctx, DR_N, DR_P, key, d->x, d->dx), "dropout_bwd");
    down(d->dt, DR_N, d->y, y);
    down(d->dt, DR_N, d->dx, dx);
}

/* Elements of out [DR_N] (of an input never 0) whose being kept differs
 * from the generator's draw for key at step. */
static int off_mask(const ds_dropout_key *key, uint32_t step, const double *out)
{
    const uint32_t thr = ds_dropout_threshold(DR_P);
    int off = 0;
    for (int e = 0; e < DR_N; e++)
        off += (out[e] != 0) != ds_dropout_keeps(key, step, thr, (uint64_t)e);
    return off;
}

static int masks_apart(const double *a, const double *b)
{
    int d = 0;
    for (int e = 0; e < DR_N; e++)
        d += (a[e] != 0) != (b[e] != 0);
    return d;
}

static void test_dropout_ops(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    double x[DR_N];
    for (int e = 0; e < DR_N; e++)
        x[e] = 1 + e % 5;   /* never 0: a zero output is a drop */
    drop_dev d = {dt, up(dt, DR_N, x), up(dt, DR_N, NULL), up(dt, DR_N, NULL),
                  t_scalar(be, ctx, 0)};
    const ds_dropout_key key = {.seed = 77, .step = d.sb, .layer = 9, .part = 1};
    static double out[3][2][DR_N];   /* steps 7, 8, 7 again: y, dx */
    const double steps[3] = {7, 8, 7};
    for (int k = 0; k < 3; k++)
        drop_run(&d, &key, steps[k], out[k][0], out[k][1]);
    for (int o = 0; o < 2; o++) {
        const char *op = o ? "dropout_bwd" : "dropout_fwd";
        const int off7 = off_mask(&key, 7, out[0][o]), off8 = off_mask(&key, 8, out[1][o]);
        T_CHECK(off7 == 0 && off8 == 0,
                "%s %s: not the generator's mask at the step in the buffer (step 7: %d elements "
                "off, 8 written into it: %d off)", dn, op, off7, off8);
        /* independent masks differ in 2p(1-p) = 42% of elements: 421 of 1003 */
        const int apart = masks_apart(out[0][o], out[1][o]);
        T_CHECK(apart > 300, "%s %s: step 7 -> 8 in the buffer redrew only %d of %d elements", dn,
                op, apart, DR_N);
        const size_t back = unlike(out[2][o], out[0][o], 1, DR_N);
        T_CHECK(back == 0, "%s %s: step 7 written back: %zu of %d outputs differ from the first",
                dn, op, back, DR_N);
    }
    t_release_all(be, ctx, (void *[]){d.x, d.y, d.dx, d.sb}, 4);
}

/* tiny's shape with dropout on its conv layer and after an FC layer before
 * the RNN */
static const char DROP_CFG[] =
    "{\"name\":\"drop\",\"n_features\":16,\"conv\":["
    "{\"channels\":3,\"kernel_time\":5,\"kernel_freq\":5,\"stride_time\":2,\"stride_freq\":2,"
    "\"pad_time\":2,\"pad_freq\":2,\"dropout\":0.2}],"
    "\"fc_pre\":[12],\"dropout\":0.3,\"rnn\":{\"type\":\"gru\",\"hidden\":8,\"layers\":1,"
    "\"bidirectional\":true}}";

static void test_dropout_model(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    ds_model_cfg cfg;
    t_must(ds_config_parse(DROP_CFG, "dropout model", &cfg), "config");
    const ds_model_limits lim = {M_N, M_FRAMES, ds_synthetic_max_labels(&cfg, M_FRAMES)};
    ds_batch b;
    t_must(ds_batch_alloc(&b, M_N, M_FRAMES, cfg.n_features, M_N * lim.label_len), "batch");
    ds_rng rng;
    ds_rng_seed(&rng, 5);
    t_must(ds_synthetic_batch(&rng, &cfg, M_N, M_FRAMES, &b), "synthetic batch");
    ds_model *m = make_model(&cfg, dt, &lim);
    const uint32_t steps[3] = {5, 6, 5};
    double *logits[3];
    size_t n = 0;
    for (int k = 0; k < 3; k++) {   /* the key before the batch, as a training step sets it */
        ds_model_set_dropout_key(m, 1234, steps[k], 1);
        t_must(ds_model_set_batch(m, &b), "batch");
        t_must(ds_model_forward(m, 1), "forward");
        n = (size_t)ds_model_batch_out_frames(m) * b.n * cfg.n_classes;
        logits[k] = t_zeros(n);
        t_must(ds_model_logits(m, logits[k]), "logits");
    }
    T_CHECK(unlike(logits[1], logits[0], 1, n) > 0, "%s model: steps 5 and 6 gave the same logits "
            "(the same masks)", dn);
    const size_t again = unlike(logits[2], logits[0], 1, n);
    T_CHECK(again == 0, "%s model: step 5 twice: %zu of %zu logits differ", dn, again, n);
    /* a key set after the batch's upload would draw the previous step: refused */
    t_must(ds_model_set_batch(m, &b), "batch");
    ds_model_set_dropout_key(m, 1234, 7, 1);
    T_CHECK(ds_model_forward(m, 1) == DS_ERR_ARG, "%s model: a training forward ran with the step "
            "set after the batch", dn);
    ds_status_clear_error();
    for (int k = 0; k < 3; k++)
        free(logits[k]);
    ds_model_destroy(m);
    ds_batch_free(&b);
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    const ds_ctx_opts opts = {.deterministic = 1};
    t_must(be->ctx_create(0, &opts, &ctx), "context");
    ds_rng rng;
    ds_rng_seed(&rng, 3);
    const ds_dtype dts[] = {DS_F64, DS_F32};
    for (int k = 0; k < 2; k++) {
        test_bn(dts[k]);
        test_ctc(dts[k], &rng);
        test_loss_total(dts[k]);
        test_model(dts[k]);
        test_lr(dts[k]);
        test_dropout_ops(dts[k]);
        test_dropout_model(dts[k]);
    }
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
