/* ops_conv_bn.c - parity cases of conv2d, length-aware BatchNorm and
 * lookahead (grouped as tests/unit/test_ops_conv_bn.c groups them).
 * BatchNorm runs on both views the model uses (conv maps and sequences),
 * with ragged lengths: an utterance of one frame, others short of t, and
 * random values at padding that the ops must ignore. */
#include <math.h>
#include <stdio.h>

#include "parity.h"

/* ---- conv2d ---- */

/* A case's geometry g and the layer's largest one, plan, for which
 * conv2d_work sizes the work (start-up): g itself, or a larger batch and
 * length of the same layer, as a step with shorter utterances runs it.
 * want_dx: the layer's, as conv2d_work is told (0: the first layer). */
typedef struct {
    ds_conv_geom g, plan;
    int want_dx;
} conv_arg;

/* After an op: it must not have searched for algorithms (the counters'
 * searches: cuDNN's Find, which blocks the host), which is conv2d_work's
 * business at start-up only. */
static ds_status conv_unsearched(const p_side *s, long before, ds_status st)
{
    ds_backend_counters c;
    s->be->counters(s->ctx, &c);
    if (st == DS_OK && c.searches != before)
        return DS_FAIL(DS_ERR_BACKEND, "conv2d: %ld algorithm searches inside the op",
                       c.searches - before);
    return st;
}

/* buf: x [n][ci][hi][wi], w [co][ci][kh][kw], b [co], y [n][co][ho][wo]. */
static ds_status call_conv_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const conv_arg *a = arg;
    void *work;
    ds_backend_counters c;
    DS_TRY(p_scratch(s, s->ops->conv2d_work(s->ctx, &a->plan, a->want_dx), &work));
    s->be->counters(s->ctx, &c);
    ds_status st = s->ops->conv2d_fwd(s->ctx, &a->g, buf[0], buf[1], buf[2], buf[3], work);
    p_release(s, work);
    return conv_unsearched(s, c.searches, st);
}

/* buf: x [n][ci][hi][wi], w [co][ci][kh][kw], dy [n][co][ho][wo],
 * dx [n][ci][hi][wi] (or NULL), dw [co][ci][kh][kw], db [co]. */
static ds_status call_conv_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const conv_arg *a = arg;
    void *work;
    ds_backend_counters c;
    DS_TRY(p_scratch(s, s->ops->conv2d_work(s->ctx, &a->plan, a->want_dx), &work));
    s->be->counters(s->ctx, &c);
    ds_status st = s->ops->conv2d_bwd(s->ctx, &a->g, buf[0], buf[1], buf[2], buf[3], buf[4],
                                      buf[5], work);
    p_release(s, work);
    return conv_unsearched(s, c.searches, st);
}

/* Forward and backward on a->g: with dx where the layer wants it, and
 * without dx too where with_null_dx or the layer does not want it. */
static void conv_cases(const char *name, const conv_arg *a, int with_null_dx)
{
    const ds_conv_geom *g = &a->g;
    const size_t nx = (size_t)g->n * g->ci * g->hi * g->wi;
    const size_t nw = (size_t)g->co * g->ci * g->kh * g->kw;
    const size_t ny = (size_t)g->n * g->co * g->ho * g->wo;
    double *x = p_rand(P_COMPUTE, nx, -1, 1), *w = p_rand(P_COMPUTE, nw, -1, 1);
    double *b = p_rand(P_COMPUTE, g->co, -1, 1), *dy = p_rand(P_COMPUTE, ny, -1, 1);
    double *dx0 = p_rand(P_COMPUTE, nx, -1, 1), *dw0 = p_rand(P_COMPUTE, nw, -1, 1);
    double *db0 = p_rand(P_COMPUTE, g->co, -1, 1);
    char variant[64];

    p_case f = {"conv2d_fwd", name, .call = call_conv_fwd, .arg = a};
    p_add(&f, "x", P_COMPUTE, P_IN, nx, x);
    p_add(&f, "w", P_COMPUTE, P_IN, nw, w);
    p_add(&f, "b", P_COMPUTE, P_IN, g->co, b);
    p_add(&f, "y", P_COMPUTE, P_OUT, ny, NULL);
    p_run(&f);

    for (int null_dx = !a->want_dx; null_dx <= (with_null_dx || !a->want_dx); null_dx++) {
        snprintf(variant, sizeof variant, "%s%s", name, null_dx ? " dx=NULL" : "");
        p_case c = {"conv2d_bwd", variant, .call = call_conv_bwd, .arg = a};
        p_add(&c, "x", P_COMPUTE, P_IN, nx, x);
        p_add(&c, "w", P_COMPUTE, P_IN, nw, w);
        p_add(&c, "dy", P_COMPUTE, P_IN, ny, dy);
        p_add(&c, "dx", P_COMPUTE, null_dx ? P_NULL : P_ACC, nx, dx0);
        p_add(&c, "dw", P_COMPUTE, P_ACC, nw, dw0);
        p_add(&c, "db", P_COMPUTE, P_ACC, g->co, db0);
        p_run(&c);
    }
    p_scratch_reset();
}

static void conv_all(void)
{
    const ds_conv_geom g[] = {
        ds_backend_conv_geom_of(2, 2, 9, 8, 3, 3, 3, 1, 1, 1, 1),     /* 3x3, same padding */
        ds_backend_conv_geom_of(2, 2, 9, 8, 3, 3, 3, 2, 2, 1, 1),     /* stride 2 */
        ds_backend_conv_geom_of(2, 1, 13, 12, 3, 7, 5, 2, 2, 3, 2),   /* DeepSpeech2-like first layer */
        ds_backend_conv_geom_of(1, 2, 10, 10, 2, 4, 2, 1, 3, 0, 1),   /* even kernel, stride 3 in w */
        /* DeepSpeech2's two layers at full kernel size, 100 frames x 81 bins */
        ds_backend_conv_geom_of(2, 1, 100, 81, 16, 41, 11, 2, 2, 20, 5),
        ds_backend_conv_geom_of(2, 16, 50, 41, 16, 21, 11, 2, 1, 10, 5),
    };
    const char *names[] = {"k3x3 s1 p1",     "k3x3 s2 p1",           "k7x5 s2 p3x2",
                           "k4x2 s1x3 p0x1", "ds2 conv1 100x81 k41x11", "ds2 conv2 50x41 k21x11"};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        const conv_arg a = {g[i], g[i], 1};
        conv_cases(names[i], &a, i == 0);
    }
    /* a step's shorter batch and utterances on the layer's start-up plan
     * (its algorithms reused, never searched again); DeepSpeech2's first
     * layer planned without dx, as the model plans it */
    const conv_arg step[] = {
        {ds_backend_conv_geom_of(1, 16, 37, 41, 16, 21, 11, 2, 1, 10, 5), ds_backend_conv_geom_resized(&g[5], 3, 64), 1},
        {ds_backend_conv_geom_of(3, 16, 23, 41, 16, 21, 11, 2, 1, 10, 5), ds_backend_conv_geom_resized(&g[5], 3, 64), 1},
        {ds_backend_conv_geom_of(2, 1, 63, 81, 16, 41, 11, 2, 2, 20, 5), ds_backend_conv_geom_resized(&g[4], 3, 120), 0},
        {ds_backend_conv_geom_of(1, 1, 120, 81, 16, 41, 11, 2, 2, 20, 5), ds_backend_conv_geom_resized(&g[4], 3, 120), 0},
    };
    const char *step_names[] = {"ds2 conv2 1x37 of 3x64", "ds2 conv2 3x23 of 3x64",
                                "ds2 conv1 2x63 of 3x120", "ds2 conv1 1x120 of 3x120"};
    for (size_t i = 0; i < sizeof step / sizeof step[0]; i++)
        conv_cases(step_names[i], &step[i], 0);

    /* 1-D convolutions over time, "same" padding (Jasper, Wav2Letter+): the
     * prologue (64 mel features as channels, k 11, stride 2, the model's
     * first layer: no dx), a block's layer, the dilated epilogue (k 29,
     * dilation 2), and a step's shorter batch of it on its start-up plan */
    const ds_conv_geom j_pro = ds_backend_conv1d_geom(2, 64, 100, 128, 11, 2, 1);
    const ds_conv_geom j_blk = ds_backend_conv1d_geom(2, 128, 50, 128, 13, 1, 1);
    const ds_conv_geom j_epi = ds_backend_conv1d_geom(3, 64, 80, 96, 29, 1, 2);
    const conv_arg one_d[] = {
        {j_pro, j_pro, 0},
        {j_blk, j_blk, 1},
        {j_epi, j_epi, 1},
        {ds_backend_conv_geom_resized(&j_epi, 2, 61), j_epi, 1},
    };
    const char *one_d_names[] = {"jasper prologue 1d k11 s2", "jasper block 1d k13",
                                 "jasper epilogue 1d k29 d2", "1d k29 d2 2x61 of 3x80"};
    for (size_t i = 0; i < sizeof one_d / sizeof one_d[0]; i++)
        conv_cases(one_d_names[i], &one_d[i], i == 2);
}

/* ---- BatchNorm ---- */

/* One view with its lengths and every input the BatchNorm ops take, the
 * statistics among them computed here from the rounded x and dy, so that
 * each op is checked on consistent values without depending on another. */
typedef struct {
    const char *name;
    ds_view v;
    const int *len;                 /* [v.n] */
    double count, eps, momentum;
    size_t nx;                      /* v.n * v.c * v.p */
    double *x, *dy;                 /* [view v], random at padding too */
    double *gamma, *beta, *rm, *rv; /* [c] stats */
    double *mom, *mean, *invstd;    /* [2c], [c], [c] stats: of x */
    double *bmom;                   /* [2c] stats: sum dy, sum dy*xhat */
    double *dx0, *dg0, *db0;        /* accumulated starts: [view v], [c], [c] */
} bn_fix;

static int real_pos(const bn_fix *f, int i, long p) { return p / f->v.p_per_t < f->len[i]; }

/* mom [2c] = sum x, sum x^2 over real positions; mean, invstd [c]. */
static void bn_stats(bn_fix *f)
{
    const ds_view *v = &f->v;
    for (int ch = 0; ch < v->c; ch++) {
        double s1 = 0, s2 = 0;
        for (int i = 0; i < v->n; i++)
            for (long p = 0; p < v->p; p++)
                if (real_pos(f, i, p)) {
                    double a = f->x[p_at(v, i, ch, p)];
                    s1 += a, s2 += a * a;
                }
        f->mom[ch] = s1, f->mom[v->c + ch] = s2;
    }
    p_round(P_STATS, f->mom, 2 * (size_t)v->c);
    for (int ch = 0; ch < v->c; ch++) {
        double mean = f->mom[ch] / f->count;
        double var = fmax(f->mom[v->c + ch] / f->count - mean * mean, 0);
        f->mean[ch] = mean, f->invstd[ch] = 1 / sqrt(var + f->eps);
    }
    p_round(P_STATS, f->mean, v->c);
    p_round(P_STATS, f->invstd, v->c);
}

/* bmom [2c] = sum dy, sum dy * (x - mean) * invstd over real positions. */
static void bn_bwd_stats(bn_fix *f)
{
    const ds_view *v = &f->v;
    for (int ch = 0; ch < v->c; ch++) {
        double s1 = 0, s2 = 0;
        for (int i = 0; i < v->n; i++)
            for (long p = 0; p < v->p; p++)
                if (real_pos(f, i, p)) {
                    size_t e = p_at(v, i, ch, p);
                    s1 += f->dy[e], s2 += f->dy[e] * (f->x[e] - f->mean[ch]);
                }
        f->bmom[ch] = s1, f->bmom[v->c + ch] = s2 * f->invstd[ch];
    }
    p_round(P_STATS, f->bmom, 2 * (size_t)v->c);
}

static bn_fix bn_fixture(const char *name, ds_view v, const int *len)
{
    bn_fix f = {.name = name, .v = v, .len = len, .eps = 1e-5, .momentum = 0.1};
    const size_t c = (size_t)v.c;
    f.nx = (size_t)v.n * v.c * v.p;
    for (int i = 0; i < v.n; i++)
        for (long p = 0; p < v.p; p++)
            f.count += real_pos(&f, i, p);
    /* an offset mean, so that centring matters */
    f.x = p_rand(P_COMPUTE, f.nx, -1, 2);
    f.dy = p_rand(P_COMPUTE, f.nx, -1, 1);
    f.gamma = p_rand(P_STATS, c, 0.5, 1.5), f.beta = p_rand(P_STATS, c, -0.5, 0.5);
    f.rm = p_rand(P_STATS, c, -0.5, 0.5), f.rv = p_rand(P_STATS, c, 0.5, 2);
    f.mom = p_vec(2 * c), f.mean = p_vec(c), f.invstd = p_vec(c), f.bmom = p_vec(2 * c);
    f.dx0 = p_rand(P_COMPUTE, f.nx, -1, 1);
    f.dg0 = p_rand(P_STATS, c, -1, 1), f.db0 = p_rand(P_STATS, c, -1, 1);
    bn_stats(&f);
    bn_bwd_stats(&f);
    return f;
}

/* buf: len [n], x [view v], mom [2c]. */
static ds_status call_bn_moments(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_moments(s->ctx, &f->v, buf[0], buf[1], buf[2]);
}

/* buf: len [n], count [1] (scalar), x [view v], mom [2c], gamma, beta [c],
 * y [view v], save_mean, save_invstd, run_mean, run_var [c]. */
static ds_status call_bn_fwd_train(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_fwd_train(s->ctx, &f->v, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5],
                                f->eps, f->momentum, buf[6], buf[7], buf[8], buf[9], buf[10]);
}

/* buf: len [n], x [view v], gamma, beta, run_mean, run_var [c], y [view v]. */
static ds_status call_bn_fwd_eval(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_fwd_eval(s->ctx, &f->v, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5],
                               f->eps, buf[6]);
}

/* buf: len [n], dy, x [view v], save_mean, save_invstd [c], mom [2c]. */
static ds_status call_bn_bwd_moments(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_bwd_moments(s->ctx, &f->v, buf[0], buf[1], buf[2], buf[3], buf[4],
                                  buf[5]);
}

/* buf: len [n], count [1] (scalar), dy, x [view v], gamma, save_mean,
 * save_invstd [c], mom [2c], dx [view v] (or NULL), dgamma, dbeta [c]. */
static ds_status call_bn_bwd_train(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_bwd_train(s->ctx, &f->v, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5],
                                buf[6], buf[7], buf[8], buf[9], buf[10]);
}

/* buf: len [n], dy, x [view v], gamma, run_mean, run_var [c], dx [view v]
 * (or NULL), dgamma, dbeta [c]. */
static ds_status call_bn_bwd_eval(const p_side *s, void *const *buf, const void *arg)
{
    const bn_fix *f = arg;
    return s->ops->bn_bwd_eval(s->ctx, &f->v, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5],
                               f->eps, buf[6], buf[7], buf[8]);
}

static void bn_forward_cases(const bn_fix *f)
{
    const size_t c = (size_t)f->v.c;
    p_case mo = {"bn_moments", f->name, .call = call_bn_moments, .arg = f};
    p_add_ints(&mo, "len", f->v.n, f->len);
    p_add(&mo, "x", P_COMPUTE, P_IN, f->nx, f->x);
    p_add(&mo, "mom", P_STATS, P_OUT, 2 * c, NULL);
    p_run(&mo);

    p_case t = {"bn_fwd_train", f->name, .call = call_bn_fwd_train, .arg = f};
    p_add_ints(&t, "len", f->v.n, f->len);
    p_add(&t, "count", P_SCALAR, P_IN, 1, &f->count);   /* the batch's, in backend memory */
    p_add(&t, "x", P_COMPUTE, P_IN, f->nx, f->x);
    p_add(&t, "mom", P_STATS, P_IN, 2 * c, f->mom);
    p_add(&t, "gamma", P_STATS, P_IN, c, f->gamma);
    p_add(&t, "beta", P_STATS, P_IN, c, f->beta);
    p_add(&t, "y", P_COMPUTE, P_OUT, f->nx, NULL);
    p_add(&t, "save_mean", P_STATS, P_OUT, c, NULL);
    p_add(&t, "save_invstd", P_STATS, P_OUT, c, NULL);
    p_add(&t, "run_mean", P_STATS, P_ACC, c, f->rm);
    p_add(&t, "run_var", P_STATS, P_ACC, c, f->rv);
    p_run(&t);

    p_case e = {"bn_fwd_eval", f->name, .call = call_bn_fwd_eval, .arg = f};
    p_add_ints(&e, "len", f->v.n, f->len);
    p_add(&e, "x", P_COMPUTE, P_IN, f->nx, f->x);
    p_add(&e, "gamma", P_STATS, P_IN, c, f->gamma);
    p_add(&e, "beta", P_STATS, P_IN, c, f->beta);
    p_add(&e, "run_mean", P_STATS, P_IN, c, f->rm);
    p_add(&e, "run_var", P_STATS, P_IN, c, f->rv);
    p_add(&e, "y", P_COMPUTE, P_OUT, f->nx, NULL);
    p_run(&e);
}

static void bn_backward_cases(const bn_fix *f)
{
    const size_t c = (size_t)f->v.c;
    char variant[64];
    p_case mo = {"bn_bwd_moments", f->name, .call = call_bn_bwd_moments, .arg = f};
    p_add_ints(&mo, "len", f->v.n, f->len);
    p_add(&mo, "dy", P_COMPUTE, P_IN, f->nx, f->dy);
    p_add(&mo, "x", P_COMPUTE, P_IN, f->nx, f->x);
    p_add(&mo, "save_mean", P_STATS, P_IN, c, f->mean);
    p_add(&mo, "save_invstd", P_STATS, P_IN, c, f->invstd);
    p_add(&mo, "mom", P_STATS, P_OUT, 2 * c, NULL);
    p_run(&mo);

    for (int null_dx = 0; null_dx <= 1; null_dx++) {
        snprintf(variant, sizeof variant, "%s%s", f->name, null_dx ? " dx=NULL" : "");
        p_case t = {"bn_bwd_train", variant, .call = call_bn_bwd_train, .arg = f};
        p_add_ints(&t, "len", f->v.n, f->len);
        p_add(&t, "count", P_SCALAR, P_IN, 1, &f->count);
        p_add(&t, "dy", P_COMPUTE, P_IN, f->nx, f->dy);
        p_add(&t, "x", P_COMPUTE, P_IN, f->nx, f->x);
        p_add(&t, "gamma", P_STATS, P_IN, c, f->gamma);
        p_add(&t, "save_mean", P_STATS, P_IN, c, f->mean);
        p_add(&t, "save_invstd", P_STATS, P_IN, c, f->invstd);
        p_add(&t, "mom", P_STATS, P_IN, 2 * c, f->bmom);
        p_add(&t, "dx", P_COMPUTE, null_dx ? P_NULL : P_ACC, f->nx, f->dx0);
        p_add(&t, "dgamma", P_STATS, P_ACC, c, f->dg0);
        p_add(&t, "dbeta", P_STATS, P_ACC, c, f->db0);
        p_run(&t);

        p_case e = {"bn_bwd_eval", variant, .call = call_bn_bwd_eval, .arg = f};
        p_add_ints(&e, "len", f->v.n, f->len);
        p_add(&e, "dy", P_COMPUTE, P_IN, f->nx, f->dy);
        p_add(&e, "x", P_COMPUTE, P_IN, f->nx, f->x);
        p_add(&e, "gamma", P_STATS, P_IN, c, f->gamma);
        p_add(&e, "run_mean", P_STATS, P_IN, c, f->rm);
        p_add(&e, "run_var", P_STATS, P_IN, c, f->rv);
        p_add(&e, "dx", P_COMPUTE, null_dx ? P_NULL : P_ACC, f->nx, f->dx0);
        p_add(&e, "dgamma", P_STATS, P_ACC, c, f->dg0);
        p_add(&e, "dbeta", P_STATS, P_ACC, c, f->db0);
        p_run(&e);
    }
}

static void bn_all(void)
{
    p_ragged r[P_RAGGED];
    p_ragged_views(r);
    bn_fix fixes[P_RAGGED];
    /* one after the other, in order: the fixtures' draws are sequenced */
    for (int i = 0; i < P_RAGGED; i++)
        fixes[i] = bn_fixture(r[i].name, r[i].v, r[i].len);
    for (size_t i = 0; i < sizeof fixes / sizeof fixes[0]; i++) {
        bn_forward_cases(&fixes[i]);
        bn_backward_cases(&fixes[i]);
    }
    p_scratch_reset();
}

/* ---- lookahead ---- */

typedef struct {
    int t, n, h, k;
} la_arg;

/* buf: x [t][n][h], w [h][k], y [t][n][h]. */
static ds_status call_la_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const la_arg *a = arg;
    return s->ops->lookahead_fwd(s->ctx, a->t, a->n, a->h, a->k, buf[0], buf[1], buf[2]);
}

/* buf: x [t][n][h], w [h][k], dy [t][n][h], dx [t][n][h] (or NULL), dw [h][k]. */
static ds_status call_la_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const la_arg *a = arg;
    void *work;
    DS_TRY(p_scratch(s, s->ops->lookahead_work(a->n, a->h), &work));
    ds_status st = s->ops->lookahead_bwd(s->ctx, a->t, a->n, a->h, a->k, buf[0], buf[1], buf[2],
                                         buf[3], buf[4], work);
    p_release(s, work);
    return st;
}

static void lookahead_case(const char *name, const la_arg *a)
{
    const size_t nx = (size_t)a->t * a->n * a->h, nw = (size_t)a->h * a->k;
    double *x = p_rand(P_COMPUTE, nx, -1, 1), *w = p_rand(P_COMPUTE, nw, -1, 1);
    double *dy = p_rand(P_COMPUTE, nx, -1, 1), *dx0 = p_rand(P_COMPUTE, nx, -1, 1);
    double *dw0 = p_rand(P_COMPUTE, nw, -1, 1);
    char variant[64];

    p_case f = {"lookahead_fwd", name, .call = call_la_fwd, .arg = a};
    p_add(&f, "x", P_COMPUTE, P_IN, nx, x);
    p_add(&f, "w", P_COMPUTE, P_IN, nw, w);
    p_add(&f, "y", P_COMPUTE, P_OUT, nx, NULL);
    p_run(&f);

    for (int null_dx = 0; null_dx <= 1; null_dx++) {
        snprintf(variant, sizeof variant, "%s%s", name, null_dx ? " dx=NULL" : "");
        p_case b = {"lookahead_bwd", variant, .call = call_la_bwd, .arg = a};
        p_add(&b, "x", P_COMPUTE, P_IN, nx, x);
        p_add(&b, "w", P_COMPUTE, P_IN, nw, w);
        p_add(&b, "dy", P_COMPUTE, P_IN, nx, dy);
        p_add(&b, "dx", P_COMPUTE, null_dx ? P_NULL : P_ACC, nx, dx0);
        p_add(&b, "dw", P_COMPUTE, P_ACC, nw, dw0);
        p_run(&b);
    }
    p_scratch_reset();
}

static void lookahead_all(void)
{
    static const la_arg a = {9, 3, 8, 3}, longer = {3, 2, 5, 5}, big = {60, 8, 96, 20};
    lookahead_case("t9 n3 h8 k3", &a);
    lookahead_case("t3 n2 h5 k5 (k > t)", &longer);
    lookahead_case("t60 n8 h96 k20", &big);
}

void p_conv_bn_cases(void)
{
    conv_all();
    bn_all();
    lookahead_all();
}
