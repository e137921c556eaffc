/* test_ops_conv_bn.c - a backend's conv2d, length-aware BatchNorm and
 * lookahead ops through the public op table: every backward against central
 * finite differences and every forward against naive loops in float64,
 * float32 against float64, conv2d on smaller shapes of a start-up plan
 * (no algorithm search after start-up), and BatchNorm's padding rules.
 *
 * usage: test_ops_conv_bn [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "testutil.h"

#define FD_H 1e-6
#define FD_TOL 1e-6      /* analytic against finite differences */
#define EXACT_TOL 1e-12  /* float64 op against float64 naive loops */
#define F32_TOL 1e-5     /* float32 op against float64 op */

static const ds_backend *be;
static ds_ctx *ctx;
static ds_rng rng;

/* ---- helpers ---- */

int openblas_get_num_threads(void);

static double *rnd(size_t n, double lo, double hi)
{
    double *p = t_zeros(n);
    t_fill_uniform(&rng, p, n, lo, hi);
    return p;
}

static double *dup(const double *a, size_t n)
{
    double *p = t_zeros(n);
    memcpy(p, a, n * sizeof *p);
    return p;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void sub(double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] -= b[i];
}

/* A backend buffer of n elements of type t holding h (zeros when h is NULL). */
static void *up(ds_dtype t, const double *h, size_t n)
{
    void *d;
    t_must(be->alloc(ctx, t, n, &d), "alloc");
    if (!h)
        return d;
    if (t == DS_F64) {
        t_must(be->from_host(ctx, t, n, h, d), "from_host");
        return d;
    }
    float *f = malloc((n ? n : 1) * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)h[i];
    t_must(be->from_host(ctx, t, n, f, d), "from_host");
    free(f);
    return d;
}

static void down(ds_dtype t, const void *d, double *h, size_t n)
{
    if (t == DS_F64) {
        t_must(be->to_host(ctx, t, n, d, h), "to_host");
        return;
    }
    float *f = malloc((n ? n : 1) * sizeof *f);
    t_must(be->to_host(ctx, t, n, d, f), "to_host");
    for (size_t i = 0; i < n; i++)
        h[i] = f[i];
    free(f);
}

static int *up_len(const int *len, int n)
{
    void *d;
    t_must(be->alloc(ctx, DS_I32, n, &d), "alloc");
    t_must(be->from_host(ctx, DS_I32, n, len, d), "from_host");
    return d;
}

static void drop(void *d)
{
    if (d)
        be->release(ctx, d);
}

/* The analytic gradient got against finite differences fd; a zero fd would
 * make the comparison vacuous, so it fails too. */
static void check_grad(const char *what, const double *got, const double *fd, size_t n)
{
    double e = t_rel_err(got, fd, n), nrm = sqrt(dot(fd, fd, n));
    printf("  %-36s fd rel err %.2e\n", what, e);
    T_CHECK(nrm > 0, "%s: finite-difference gradient is zero", what);
    T_CHECK(e < FD_TOL, "%s: rel err %.3e against finite differences", what, e);
}

static void check_close(const char *what, const double *got, const double *want, size_t n,
                        double tol)
{
    double e = t_rel_err(got, want, n), nrm = sqrt(dot(want, want, n));
    printf("  %-36s rel err %.2e\n", what, e);
    T_CHECK(nrm > 0, "%s: reference is zero", what);
    T_CHECK(e < tol, "%s: rel err %.3e (tolerance %.0e)", what, e, tol);
}

/* ---- conv2d ---- */


static size_t conv_nx(const ds_conv_geom *g) { return (size_t)g->n * g->ci * g->hi * g->wi; }
static size_t conv_nw(const ds_conv_geom *g) { return (size_t)g->co * g->ci * g->kh * g->kw; }
static size_t conv_ny(const ds_conv_geom *g) { return (size_t)g->n * g->co * g->ho * g->wo; }

/* work: a buffer from conv2d_work of a geometry covering g, or NULL for one
 * of conv2d_work(g) (a layer that wants dx) made here. */
static void conv_fwd_in(ds_dtype t, const ds_conv_geom *g, const double *x, const double *w,
                        const double *b, double *y, void *work)
{
    const ds_ops *op = be->ops(t);
    void *X = up(t, x, conv_nx(g)), *W = up(t, w, conv_nw(g)), *B = up(t, b, g->co);
    void *Y = up(t, NULL, conv_ny(g));
    void *own = work ? NULL : up(t, NULL, op->conv2d_work(ctx, g, 1));
    t_must(op->conv2d_fwd(ctx, g, X, W, B, Y, work ? work : own), "conv2d_fwd");
    down(t, Y, y, conv_ny(g));
    drop(X), drop(W), drop(B), drop(Y), drop(own);
}

static void conv_fwd(ds_dtype t, const ds_conv_geom *g, const double *x, const double *w,
                     const double *b, double *y)
{
    conv_fwd_in(t, g, x, w, b, y, NULL);
}

/* dx (or NULL), dw, db accumulate onto their contents; work as conv_fwd_in's
 * (made here for a layer wanting dx when dx is given). */
static void conv_bwd_in(ds_dtype t, const ds_conv_geom *g, const double *x, const double *w,
                        const double *dy, double *dx, double *dw, double *db, void *work)
{
    const ds_ops *op = be->ops(t);
    void *X = up(t, x, conv_nx(g)), *W = up(t, w, conv_nw(g)), *DY = up(t, dy, conv_ny(g));
    void *DX = dx ? up(t, dx, conv_nx(g)) : NULL, *DW = up(t, dw, conv_nw(g));
    void *DB = up(t, db, g->co);
    void *own = work ? NULL : up(t, NULL, op->conv2d_work(ctx, g, dx != NULL));
    t_must(op->conv2d_bwd(ctx, g, X, W, DY, DX, DW, DB, work ? work : own), "conv2d_bwd");
    if (dx)
        down(t, DX, dx, conv_nx(g));
    down(t, DW, dw, conv_nw(g));
    down(t, DB, db, g->co);
    drop(X), drop(W), drop(DY), drop(DX), drop(DW), drop(DB), drop(own);
}

static void conv_bwd(ds_dtype t, const ds_conv_geom *g, const double *x, const double *w,
                     const double *dy, double *dx, double *dw, double *db)
{
    conv_bwd_in(t, g, x, w, dy, dx, dw, db, NULL);
}

/* Input tap (ih, iw) of channel c of utterance i, zero outside. */
static double conv_tap(const ds_conv_geom *g, const double *x, int i, int c, int ih, int iw)
{
    if (ih < 0 || ih >= g->hi || iw < 0 || iw >= g->wi)
        return 0;
    return x[(((size_t)i * g->ci + c) * g->hi + ih) * g->wi + iw];
}

/* The definition, one output element at a time. */
static void conv_naive(const ds_conv_geom *g, const double *x, const double *w, const double *b,
                       double *y)
{
    for (int i = 0; i < g->n; i++)
        for (int o = 0; o < g->co; o++)
            for (int oh = 0; oh < g->ho; oh++)
                for (int ow = 0; ow < g->wo; ow++) {
                    double s = b[o];
                    for (int c = 0; c < g->ci; c++)
                        for (int a = 0; a < g->kh; a++)
                            for (int e = 0; e < g->kw; e++)
                                s += w[((o * g->ci + c) * g->kh + a) * g->kw + e] *
                                     conv_tap(g, x, i, c, oh * g->sh - g->ph + a * ds_backend_conv_dilation(g),
                                              ow * g->sw - g->pw + e);
                    y[(((size_t)i * g->co + o) * g->ho + oh) * g->wo + ow] = s;
                }
}

/* The chain rule on the definition; dx, dw, db accumulate. */
static void conv_naive_bwd(const ds_conv_geom *g, const double *x, const double *w,
                           const double *dy, double *dx, double *dw, double *db)
{
    for (int i = 0; i < g->n; i++)
        for (int o = 0; o < g->co; o++)
            for (int oh = 0; oh < g->ho; oh++)
                for (int ow = 0; ow < g->wo; ow++) {
                    double d = dy[(((size_t)i * g->co + o) * g->ho + oh) * g->wo + ow];
                    db[o] += d;
                    for (int c = 0; c < g->ci; c++)
                        for (int a = 0; a < g->kh; a++)
                            for (int e = 0; e < g->kw; e++) {
                                int ih = oh * g->sh - g->ph + a * ds_backend_conv_dilation(g),
                                    iw = ow * g->sw - g->pw + e;
                                size_t wk = ((o * g->ci + c) * g->kh + a) * g->kw + e;
                                dw[wk] += d * conv_tap(g, x, i, c, ih, iw);
                                if (ih >= 0 && ih < g->hi && iw >= 0 && iw < g->wi)
                                    dx[(((size_t)i * g->ci + c) * g->hi + ih) * g->wi + iw] +=
                                        d * w[wk];
                            }
                }
}

struct conv_case {
    ds_conv_geom g;
    double *x, *w, *b, *r, *y;
};

static double conv_loss(void *arg)
{
    struct conv_case *c = arg;
    conv_fwd(DS_F64, &c->g, c->x, c->w, c->b, c->y);
    return dot(c->y, c->r, conv_ny(&c->g));
}

/* dx, dw, db of sum(y * r) against finite differences. The gradients start
 * from random values, so an op that assigned instead of adding would fail. */
static void conv_grad_check(const ds_conv_geom *g, int id)
{
    size_t nx = conv_nx(g), nw = conv_nw(g), ny = conv_ny(g);
    struct conv_case c = {.g = *g, .y = t_zeros(ny)};
    c.x = rnd(nx, -1, 1), c.w = rnd(nw, -1, 1), c.b = rnd(g->co, -1, 1), c.r = rnd(ny, -1, 1);
    double *dx0 = rnd(nx, -1, 1), *dw0 = rnd(nw, -1, 1), *db0 = rnd(g->co, -1, 1);
    double *dx = dup(dx0, nx), *dw = dup(dw0, nw), *db = dup(db0, g->co);
    double *fx = t_zeros(nx), *fw = t_zeros(nw), *fb = t_zeros(g->co);
    char what[64];

    conv_bwd(DS_F64, g, c.x, c.w, c.r, dx, dw, db);
    sub(dx, dx0, nx), sub(dw, dw0, nw), sub(db, db0, g->co);
    t_fd_grad(conv_loss, &c, c.x, nx, FD_H, fx);
    t_fd_grad(conv_loss, &c, c.w, nw, FD_H, fw);
    t_fd_grad(conv_loss, &c, c.b, g->co, FD_H, fb);
    snprintf(what, sizeof what, "conv g%d dx", id);
    check_grad(what, dx, fx, nx);
    snprintf(what, sizeof what, "conv g%d dw", id);
    check_grad(what, dw, fw, nw);
    snprintf(what, sizeof what, "conv g%d db", id);
    check_grad(what, db, fb, g->co);
    free(c.x), free(c.w), free(c.b), free(c.r), free(c.y);
    free(dx0), free(dw0), free(db0), free(dx), free(dw), free(db), free(fx), free(fw), free(fb);
}

/* Forward and backward against the naive loops, float32 against float64,
 * and dx == NULL leaving dw and db as they are with dx. */
/* tail > 0: the last utterance's last tail input rows and last tail/sh
 * rows of dy are zero, as padding is (the CPU skips such rows). */
static void conv_ref_check(const ds_conv_geom *g, int id, int tail)
{
    size_t nx = conv_nx(g), nw = conv_nw(g), ny = conv_ny(g);
    double *x = rnd(nx, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(g->co, -1, 1);
    double *dy = rnd(ny, -1, 1), *y = t_zeros(ny), *yref = t_zeros(ny), *y32 = t_zeros(ny);
    for (int c = 0; tail > 0 && c < g->ci; c++)
        memset(x + (((size_t)(g->n - 1) * g->ci + c) * g->hi + g->hi - tail) * g->wi, 0,
               (size_t)tail * g->wi * sizeof *x);
    for (int o = 0; tail > 0 && o < g->co; o++)
        memset(dy + (((size_t)(g->n - 1) * g->co + o) * g->ho + g->ho - tail / g->sh) * g->wo,
               0, (size_t)(tail / g->sh) * g->wo * sizeof *dy);
    double *dx = t_zeros(nx), *dw = t_zeros(nw), *db = t_zeros(g->co);
    double *rx = t_zeros(nx), *rw = t_zeros(nw), *rb = t_zeros(g->co);
    double *sx = t_zeros(nx), *sw = t_zeros(nw), *sb = t_zeros(g->co);
    char what[64];

    conv_fwd(DS_F64, g, x, w, b, y);
    conv_naive(g, x, w, b, yref);
    snprintf(what, sizeof what, "conv g%d y vs naive", id);
    check_close(what, y, yref, ny, EXACT_TOL);
    conv_fwd(DS_F32, g, x, w, b, y32);
    snprintf(what, sizeof what, "conv g%d y f32 vs f64", id);
    check_close(what, y32, y, ny, F32_TOL);

    conv_bwd(DS_F64, g, x, w, dy, dx, dw, db);
    conv_naive_bwd(g, x, w, dy, rx, rw, rb);
    snprintf(what, sizeof what, "conv g%d dx dw db vs naive", id);
    check_close(what, dx, rx, nx, EXACT_TOL);
    check_close(what, dw, rw, nw, EXACT_TOL);
    check_close(what, db, rb, g->co, EXACT_TOL);
    conv_bwd(DS_F32, g, x, w, dy, sx, sw, sb);
    snprintf(what, sizeof what, "conv g%d dx dw db f32 vs f64", id);
    check_close(what, sx, dx, nx, F32_TOL);
    check_close(what, sw, dw, nw, F32_TOL);
    check_close(what, sb, db, g->co, F32_TOL);

    memset(sw, 0, nw * sizeof *sw), memset(sb, 0, g->co * sizeof *sb);
    conv_bwd(DS_F64, g, x, w, dy, NULL, sw, sb);
    T_CHECK(t_max_abs_diff(sw, dw, nw) == 0 && t_max_abs_diff(sb, db, g->co) == 0,
            "conv g%d: dw, db differ when dx is NULL", id);
    free(x), free(w), free(b), free(dy), free(y), free(yref), free(y32);
    free(dx), free(dw), free(db), free(rx), free(rw), free(rb), free(sx), free(sw), free(sb);
}

static void test_conv(void)
{
    const ds_conv_geom small[] = {
        ds_backend_conv_geom_of(2, 2, 6, 5, 3, 3, 3, 1, 1, 1, 1),     /* plain 3x3, same padding */
        ds_backend_conv_geom_of(2, 2, 9, 8, 3, 3, 3, 2, 2, 1, 1),     /* stride 2 */
        ds_backend_conv_geom_of(1, 3, 11, 7, 2, 5, 3, 2, 1, 2, 0),    /* tall kernel, padding in h only */
        ds_backend_conv_geom_of(2, 1, 10, 10, 4, 4, 2, 1, 3, 0, 1),   /* even kernel; last columns unused */
        ds_backend_conv_geom_of(2, 1, 13, 12, 3, 7, 5, 2, 2, 3, 2),   /* DeepSpeech2-like first layer */
    };
    /* 97 output rows of 90: six chunks of 17 rows (1536 positions), the last short */
    const ds_conv_geom big = ds_backend_conv_geom_of(2, 2, 97, 90, 3, 3, 3, 1, 1, 1, 1);
    /* stride 2x3, 100 output rows of 83: chunks of 18 rows whose bands
     * start mid-input, in both time phases */
    const ds_conv_geom big_strided = ds_backend_conv_geom_of(1, 2, 200, 250, 2, 5, 6, 2, 3, 2, 2);
    /* output channels a multiple of 8: the CPU's tile kernels */
    const ds_conv_geom tiled[] = {
        ds_backend_conv_geom_of(2, 1, 40, 30, 8, 7, 9, 2, 2, 3, 4),    /* first layer */
        ds_backend_conv_geom_of(2, 3, 30, 25, 16, 5, 7, 1, 2, 2, 3),   /* second layer */
        ds_backend_conv_geom_of(1, 2, 120, 90, 8, 5, 5, 1, 1, 2, 2),   /* several chunks */
    };
    const int nsmall = (int)(sizeof small / sizeof small[0]);
    const int ntiled = (int)(sizeof tiled / sizeof tiled[0]);

    printf("conv2d\n");
    for (int i = 0; i < nsmall; i++)
        conv_grad_check(&small[i], i);
    for (int i = 0; i < nsmall; i++)
        conv_ref_check(&small[i], i, 0);
    conv_ref_check(&small[4], nsmall + 2, 5);
    conv_ref_check(&big, nsmall, 40);
    conv_ref_check(&big_strided, nsmall + 1, 61);
    for (int i = 0; i < ntiled; i++)
        conv_ref_check(&tiled[i], nsmall + 3 + i, 2 * i);
    conv_grad_check(&tiled[0], nsmall + 3);

    /* 1-D convolutions over time with "same" padding (Jasper, Wav2Letter+):
     * dilated at stride 1 (the banded path on the CPU, its taps dh rows
     * apart, untiled and tiled), dilated and strided (conv_dilated.inc's
     * im2col), strided, undilated; ho = ceil(t / stride) */
    const ds_conv_geom one_d[] = {
        ds_backend_conv1d_geom(2, 3, 17, 4, 3, 1, 2),    /* Jasper's epilogue: dilation 2 */
        ds_backend_conv1d_geom(2, 2, 23, 3, 5, 2, 3),    /* dilated and strided */
        ds_backend_conv1d_geom(3, 4, 19, 5, 11, 2, 1),   /* Jasper's prologue: k 11, stride 2 */
        ds_backend_conv1d_geom(1, 2, 40, 16, 7, 1, 4),   /* dilated, co a multiple of 8 */
    };
    for (int i = 0; i < (int)(sizeof one_d / sizeof one_d[0]); i++) {
        const ds_conv_geom *g = &one_d[i];
        T_CHECK(g->ho == (g->hi + g->sh - 1) / g->sh && g->wo == 1,
                "conv1d g%d: same padding gives ho %d for t %d stride %d", i, g->ho, g->hi, g->sh);
        conv_grad_check(g, 20 + i);
        conv_ref_check(g, 20 + i, 0);
    }
    /* a step's shorter utterances keep the layer's dilation */
    const ds_conv_geom shorter = ds_backend_conv_geom_resized(&one_d[1], 1, 9);
    T_CHECK(shorter.dh == 3 && shorter.ho == 5, "conv1d resized: dh %d ho %d (3, 5)", shorter.dh,
            shorter.ho);
    /* the CPU's work is bounded whatever the length (a chunk of output rows
     * at a time): the same for an input 10x longer, and there a small part
     * of what a full im2col would take */
    if (strcmp(be->name, "cpu") == 0) {
        ds_conv_geom longer = big;
        longer.hi = 10 * big.hi;
        longer.ho = (longer.hi + 2 * longer.ph - longer.kh) / longer.sh + 1;
        const size_t got = be->ops(DS_F64)->conv2d_work(ctx, &big, 1);
        const size_t im2col = (size_t)longer.ci * longer.kh * longer.kw * longer.ho * longer.wo;
        T_CHECK(got == be->ops(DS_F64)->conv2d_work(ctx, &longer, 1) && 10 * got < im2col,
                "conv2d_work %zu: grows with the length, or near a full im2col (%zu)", got,
                im2col);
    }

    /* ho one short of what the geometry implies must be refused */
    ds_conv_geom bad = small[1];
    bad.ho--;
    const ds_ops *op = be->ops(DS_F64);
    void *X = up(DS_F64, NULL, conv_nx(&small[1])), *W = up(DS_F64, NULL, conv_nw(&bad));
    void *B = up(DS_F64, NULL, bad.co), *Y = up(DS_F64, NULL, conv_ny(&bad));
    void *work = up(DS_F64, NULL, op->conv2d_work(ctx, &small[1], 1));
    T_CHECK(op->conv2d_fwd(ctx, &bad, X, W, B, Y, work) == DS_ERR_ARG,
            "conv2d_fwd accepted ho that does not match the geometry");
    drop(X), drop(W), drop(B), drop(Y), drop(work);
}

static long conv_searches(void)
{
    ds_backend_counters c;
    be->counters(ctx, &c);
    return c.searches;
}

/* Forward, and backward with dx or without (want_dx 0), of g in work
 * against the naive loops; dx, dw, db start from random values. */
static void conv_step_check(ds_dtype t, const ds_conv_geom *g, int want_dx, void *work,
                            double tol, const char *what)
{
    const size_t nx = conv_nx(g), nw = conv_nw(g), ny = conv_ny(g);
    double *x = rnd(nx, -1, 1), *w = rnd(nw, -1, 1), *b = rnd(g->co, -1, 1);
    double *dy = rnd(ny, -1, 1), *y = t_zeros(ny), *yref = t_zeros(ny);
    double *dx = rnd(nx, -1, 1), *dw = rnd(nw, -1, 1), *db = rnd(g->co, -1, 1);
    double *rx = dup(dx, nx), *rw = dup(dw, nw), *rb = dup(db, g->co);
    char line[96];

    conv_fwd_in(t, g, x, w, b, y, work);
    conv_naive(g, x, w, b, yref);
    snprintf(line, sizeof line, "%s n=%d hi=%d y", what, g->n, g->hi);
    check_close(line, y, yref, ny, tol);
    conv_bwd_in(t, g, x, w, dy, want_dx ? dx : NULL, dw, db, work);
    conv_naive_bwd(g, x, w, dy, rx, rw, rb);
    if (want_dx) {
        snprintf(line, sizeof line, "%s n=%d hi=%d dx", what, g->n, g->hi);
        check_close(line, dx, rx, nx, tol);
    }
    snprintf(line, sizeof line, "%s n=%d hi=%d dw", what, g->n, g->hi);
    check_close(line, dw, rw, nw, tol);
    snprintf(line, sizeof line, "%s n=%d hi=%d db", what, g->n, g->hi);
    check_close(line, db, rb, g->co, tol);
    free(x), free(w), free(b), free(dy), free(y), free(yref);
    free(dx), free(dw), free(db), free(rx), free(rw), free(rb);
}

/* A layer planned once, by conv2d_work for its largest batch and length as
 * the model does at start-up, then run at smaller batches and lengths in
 * that one work buffer, as the steps of a run with real lengths are: each
 * against the naive loops, and no algorithm search (the counters' searches:
 * cuDNN's Find on the GPU, which blocks the host) after start-up, where the
 * GPU must have searched. A first layer, planned without dx, runs its
 * backward without dx and on the GPU refuses one with dx. */
static void conv_plan_check(ds_dtype t, double tol)
{
    const ds_ops *op = be->ops(t);
    const int gpu = strcmp(be->name, "cpu") != 0;
    /* a DeepSpeech2-like second layer, small: 3 utterances of at most 40 frames */
    const ds_conv_geom plan = ds_backend_conv_geom_of(3, 4, 40, 21, 8, 11, 5, 2, 1, 5, 2);
    const ds_conv_geom first = ds_backend_conv_geom_of(3, 1, 44, 23, 4, 11, 5, 2, 2, 5, 2);
    /* the planned shape itself, then shorter batches and utterances (one frame too) */
    const int nh[][2] = {{3, 40}, {1, 40}, {3, 17}, {2, 33}, {1, 1}, {2, 26}, {3, 39}};
    const int nshapes = (int)(sizeof nh / sizeof nh[0]);
    const char *what = t == DS_F64 ? "plan f64" : "plan f32";

    const long s0 = conv_searches();
    void *work = up(t, NULL, op->conv2d_work(ctx, &plan, 1));
    void *work1 = up(t, NULL, op->conv2d_work(ctx, &first, 0));
    const long s1 = conv_searches();
    for (int k = 0; k < nshapes; k++) {
        const ds_conv_geom g = ds_backend_conv_geom_resized(&plan, nh[k][0], nh[k][1]);
        conv_step_check(t, &g, 1, work, tol, what);
    }
    for (int k = 0; k < nshapes; k++) {
        const ds_conv_geom g = ds_backend_conv_geom_resized(&first, nh[k][0], nh[k][1] + 4);
        conv_step_check(t, &g, 0, work1, tol, what);
    }
    const long s2 = conv_searches();
    printf("  %-36s %ld searches at start-up, %ld in %d steps\n", what, s1 - s0, s2 - s1,
           2 * nshapes);
    T_CHECK(s2 == s1, "%s: %ld algorithm searches after start-up, over %d smaller shapes", what,
            s2 - s1, 2 * nshapes);
    T_CHECK(!gpu || s1 > s0, "%s: conv2d_work made no algorithm search on %s", what, be->name);

    /* dx on the layer planned without it: refused on the GPU (no search) */
    if (gpu) {
        const ds_conv_geom g = ds_backend_conv_geom_resized(&first, 2, 30);
        void *X = up(t, NULL, conv_nx(&g)), *W = up(t, NULL, conv_nw(&g));
        void *DY = up(t, NULL, conv_ny(&g)), *DX = up(t, NULL, conv_nx(&g));
        void *DW = up(t, NULL, conv_nw(&g)), *DB = up(t, NULL, g.co);
        const ds_status st = op->conv2d_bwd(ctx, &g, X, W, DY, DX, DW, DB, work1);
        T_CHECK(st == DS_ERR_ARG, "%s: conv2d_bwd with dx on a layer planned without dx: %s",
                what, ds_status_name(st));
        T_CHECK(conv_searches() == s2, "%s: the refused conv2d_bwd searched", what);
        drop(X), drop(W), drop(DY), drop(DX), drop(DW), drop(DB);
    }
    drop(work), drop(work1);
}

static void test_conv_plan(void)
{
    printf("conv2d on a start-up plan\n");
    conv_plan_check(DS_F64, EXACT_TOL);
    conv_plan_check(DS_F32, F32_TOL);
}

/* ---- BatchNorm ---- */

struct bn_case {
    const char *name;
    ds_view v;
    const int *len;
    int train;
    double eps, momentum;
    double *x, *gamma, *beta, *rm, *rv;   /* rm, rv: running stats before the call */
    double *r, *y;                        /* loss weights, scratch output */
};

static size_t bn_size(const ds_view *v) { return (size_t)v->n * v->c * v->p; }

static size_t bn_at(const ds_view *v, int i, int ch, long p)
{
    return (size_t)(i * v->sn + ch * v->sc + p * v->sp);
}

static int bn_real(const ds_view *v, const int *len, int i, long p)
{
    return p / v->p_per_t < len[i];
}

static double bn_count(const ds_view *v, const int *len)
{
    double n = 0;
    for (int i = 0; i < v->n; i++)
        for (long p = 0; p < v->p; p++)
            n += bn_real(v, len, i, p);
    return n;
}

/* BatchNorm through the backend in type t. y holds the output's initial
 * contents on entry (to see padding overwritten) and the output on return.
 * stats [4c] (or NULL) gets save_mean, save_invstd, run_mean, run_var. With
 * dy, backward too: dx (or NULL), dgamma, dbeta [c] accumulate. */
static void bn_run(ds_dtype t, const struct bn_case *c, double *y, double *stats,
                   const double *dy, double *dx, double *dgamma, double *dbeta)
{
    const ds_ops *op = be->ops(t);
    const ds_view *v = &c->v;
    const size_t n = bn_size(v), C = v->c;
    void *count = t_scalar(be, ctx, bn_count(v, c->len));
    int *len = up_len(c->len, v->n);
    void *X = up(t, c->x, n), *Y = up(t, y, n), *G = up(t, c->gamma, C);
    void *B = up(t, c->beta, C), *RM = up(t, c->rm, C), *RV = up(t, c->rv, C);
    void *SM = up(t, NULL, C), *SI = up(t, NULL, C), *MOM = up(t, NULL, 2 * C);

    if (c->train) {
        t_must(op->bn_moments(ctx, v, len, X, MOM), "bn_moments");
        t_must(op->bn_fwd_train(ctx, v, len, count, X, MOM, G, B, c->eps, c->momentum, Y, SM,
                              SI, RM, RV), "bn_fwd_train");
    } else {
        t_must(op->bn_fwd_eval(ctx, v, len, X, G, B, RM, RV, c->eps, Y), "bn_fwd_eval");
    }
    down(t, Y, y, n);
    if (stats) {
        down(t, SM, stats, C), down(t, SI, stats + C, C);
        down(t, RM, stats + 2 * C, C), down(t, RV, stats + 3 * C, C);
    }
    if (dy) {
        void *DY = up(t, dy, n), *DX = dx ? up(t, dx, n) : NULL;
        void *DG = up(t, dgamma, C), *DB = up(t, dbeta, C);
        if (c->train) {
            t_must(op->bn_bwd_moments(ctx, v, len, DY, X, SM, SI, MOM), "bn_bwd_moments");
            t_must(op->bn_bwd_train(ctx, v, len, count, DY, X, G, SM, SI, MOM, DX, DG, DB),
                 "bn_bwd_train");
        } else {
            t_must(op->bn_bwd_eval(ctx, v, len, DY, X, G, RM, RV, c->eps, DX, DG, DB),
                 "bn_bwd_eval");
        }
        if (dx)
            down(t, DX, dx, n);
        down(t, DG, dgamma, C), down(t, DB, dbeta, C);
        drop(DY), drop(DX), drop(DG), drop(DB);
    }
    drop(len), drop(X), drop(Y), drop(G), drop(B), drop(RM), drop(RV);
    drop(SM), drop(SI), drop(MOM), drop(count);
}

static double bn_loss(void *arg)
{
    struct bn_case *c = arg;
    bn_run(DS_F64, c, c->y, NULL, NULL, NULL, NULL, NULL);
    return dot(c->y, c->r, bn_size(&c->v));
}

/* dx, dgamma, dbeta of sum(y * r) against finite differences; in train mode
 * every evaluation recomputes the batch statistics. r is non-zero at padding
 * too, where it must have no effect. Padding positions of dx get nothing. */
static void bn_grad_check(struct bn_case *c)
{
    const ds_view *v = &c->v;
    size_t n = bn_size(v), C = v->c;
    double *dx0 = rnd(n, -1, 1), *dg0 = rnd(C, -1, 1), *db0 = rnd(C, -1, 1);
    double *dx = dup(dx0, n), *dg = dup(dg0, C), *db = dup(db0, C);
    double *fx = t_zeros(n), *fg = t_zeros(C), *fb = t_zeros(C);
    char what[96];

    bn_run(DS_F64, c, c->y, NULL, c->r, dx, dg, db);
    sub(dx, dx0, n), sub(dg, dg0, C), sub(db, db0, C);
    int touched = 0;
    for (int i = 0; i < v->n; i++)
        for (int ch = 0; ch < v->c; ch++)
            for (long p = 0; p < v->p; p++)
                touched += !bn_real(v, c->len, i, p) && dx[bn_at(v, i, ch, p)] != 0;
    T_CHECK(touched == 0, "bn %s: dx changed at %d padding positions", c->name, touched);

    t_fd_grad(bn_loss, c, c->x, n, FD_H, fx);
    t_fd_grad(bn_loss, c, c->gamma, C, FD_H, fg);
    t_fd_grad(bn_loss, c, c->beta, C, FD_H, fb);
    snprintf(what, sizeof what, "bn %s dx", c->name);
    check_grad(what, dx, fx, n);
    snprintf(what, sizeof what, "bn %s dgamma", c->name);
    check_grad(what, dg, fg, C);
    snprintf(what, sizeof what, "bn %s dbeta", c->name);
    check_grad(what, db, fb, C);
    free(dx0), free(dg0), free(db0), free(dx), free(dg), free(db);
    free(fx), free(fg), free(fb);
}

/* Per-channel mean and biased variance over real positions, two-pass. */
static void bn_hand_stats(const struct bn_case *c, int ch, double *mean, double *var)
{
    const ds_view *v = &c->v;
    double s = 0, q = 0, cnt = bn_count(v, c->len);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < v->n; i++)
            for (long p = 0; p < v->p; p++) {
                if (!bn_real(v, c->len, i, p))
                    continue;
                double a = c->x[bn_at(v, i, ch, p)];
                if (pass == 0)
                    s += a;
                else
                    q += (a - s / cnt) * (a - s / cnt);
            }
    *mean = s / cnt;
    *var = q / cnt;
}

/* y and, in train mode, the saved and running statistics against a hand
 * computation; padding of y exactly zero although y started non-zero. */
static void bn_fwd_check(struct bn_case *c)
{
    const ds_view *v = &c->v;
    size_t n = bn_size(v), C = v->c;
    double *y = t_zeros(n), *yref = t_zeros(n), *st = t_zeros(4 * C), *stref = t_zeros(4 * C);
    double cnt = bn_count(v, c->len);
    char what[96];

    for (size_t e = 0; e < n; e++)
        y[e] = 7;
    bn_run(DS_F64, c, y, st, NULL, NULL, NULL, NULL);
    for (int ch = 0; ch < v->c; ch++) {
        double mean, var, scale;
        bn_hand_stats(c, ch, &mean, &var);
        stref[ch] = mean;
        stref[C + ch] = 1 / sqrt(var + c->eps);
        stref[2 * C + ch] = (1 - c->momentum) * c->rm[ch] + c->momentum * mean;
        stref[3 * C + ch] = (1 - c->momentum) * c->rv[ch] + c->momentum * var * cnt / (cnt - 1);
        if (!c->train)
            mean = c->rm[ch], var = c->rv[ch];
        scale = c->gamma[ch] / sqrt(var + c->eps);
        for (int i = 0; i < v->n; i++)
            for (long p = 0; p < v->p; p++) {
                size_t e = bn_at(v, i, ch, p);
                yref[e] = bn_real(v, c->len, i, p) ? (c->x[e] - mean) * scale + c->beta[ch] : 0;
            }
    }
    int nonzero = 0;
    for (int i = 0; i < v->n; i++)
        for (int ch = 0; ch < v->c; ch++)
            for (long p = 0; p < v->p; p++)
                nonzero += !bn_real(v, c->len, i, p) && y[bn_at(v, i, ch, p)] != 0;
    T_CHECK(nonzero == 0, "bn %s: y non-zero at %d padding positions", c->name, nonzero);
    snprintf(what, sizeof what, "bn %s y vs hand", c->name);
    check_close(what, y, yref, n, EXACT_TOL);
    if (c->train) {
        snprintf(what, sizeof what, "bn %s save_mean/invstd vs hand", c->name);
        check_close(what, st, stref, 2 * C, EXACT_TOL);
        snprintf(what, sizeof what, "bn %s run_mean vs hand", c->name);
        check_close(what, st + 2 * C, stref + 2 * C, C, EXACT_TOL);
        snprintf(what, sizeof what, "bn %s run_var (unbiased) vs hand", c->name);
        check_close(what, st + 3 * C, stref + 3 * C, C, EXACT_TOL);
    }
    free(y), free(yref), free(st), free(stref);
}

/* Wild values of x and dy at padding positions change nothing anywhere. */
static void bn_padding_check(struct bn_case *c)
{
    const ds_view *v = &c->v;
    size_t n = bn_size(v), C = v->c;
    double *y1 = t_zeros(n), *y2 = t_zeros(n), *st1 = t_zeros(4 * C), *st2 = t_zeros(4 * C);
    double *dx1 = t_zeros(n), *dx2 = t_zeros(n), *g1 = t_zeros(2 * C), *g2 = t_zeros(2 * C);
    double *x = c->x, *x2 = dup(x, n), *dy2 = dup(c->r, n);
    int npad = 0;

    for (int i = 0; i < v->n; i++)
        for (int ch = 0; ch < v->c; ch++)
            for (long p = 0; p < v->p; p++)
                if (!bn_real(v, c->len, i, p)) {
                    x2[bn_at(v, i, ch, p)] = 100 + ds_rng_range(&rng, 0, 50);
                    dy2[bn_at(v, i, ch, p)] = ds_rng_range(&rng, -50, 50);
                    npad++;
                }
    T_CHECK(npad > 0, "bn %s: the case has no padding", c->name);
    bn_run(DS_F64, c, y1, st1, c->r, dx1, g1, g1 + C);
    c->x = x2;
    bn_run(DS_F64, c, y2, st2, dy2, dx2, g2, g2 + C);
    c->x = x;
    T_CHECK(t_max_abs_diff(y1, y2, n) == 0 && t_max_abs_diff(st1, st2, 4 * C) == 0,
            "bn %s: padding values of x changed the forward", c->name);
    T_CHECK(t_max_abs_diff(dx1, dx2, n) == 0 && t_max_abs_diff(g1, g2, 2 * C) == 0,
            "bn %s: padding values of x or dy changed the backward", c->name);
    free(y1), free(y2), free(st1), free(st2), free(dx1), free(dx2), free(g1), free(g2);
    free(x2), free(dy2);
}

/* float32 against float64, forward and backward. */
static void bn_f32_check(struct bn_case *c)
{
    size_t n = bn_size(&c->v), C = c->v.c;
    double *y = t_zeros(n), *dx = t_zeros(n), *g = t_zeros(2 * C);
    double *y32 = t_zeros(n), *dx32 = t_zeros(n), *g32 = t_zeros(2 * C);
    char what[96];

    bn_run(DS_F64, c, y, NULL, c->r, dx, g, g + C);
    bn_run(DS_F32, c, y32, NULL, c->r, dx32, g32, g32 + C);
    snprintf(what, sizeof what, "bn %s y dx dgamma/beta f32/f64", c->name);
    check_close(what, y32, y, n, F32_TOL);
    check_close(what, dx32, dx, n, F32_TOL);
    check_close(what, g32, g, 2 * C, F32_TOL);
    free(y), free(dx), free(g), free(y32), free(dx32), free(g32);
}

static void bn_case_run(const char *name, ds_view v, const int *len, int train)
{
    size_t n = bn_size(&v), C = v.c;
    struct bn_case c = {.name = name, .v = v, .len = len, .train = train, .eps = 1e-5,
                        .momentum = 0.1};
    /* x off-centre so the mean matters; gamma away from 0; running var > 0 */
    c.x = rnd(n, -1, 2), c.gamma = rnd(C, 0.5, 1.5), c.beta = rnd(C, -0.5, 0.5);
    c.rm = rnd(C, -0.5, 0.5), c.rv = rnd(C, 0.5, 2), c.r = rnd(n, -1, 1), c.y = t_zeros(n);
    bn_fwd_check(&c);
    bn_padding_check(&c);
    bn_grad_check(&c);
    bn_f32_check(&c);
    free(c.x), free(c.gamma), free(c.beta), free(c.rm), free(c.rv), free(c.r), free(c.y);
}

static void test_bn(void)
{
    /* conv map [N=3][C=2][T=5][F=3] and sequence [T=7][N=3][C=4] */
    const int N = 3, C = 2, T = 5, F = 3, ST = 7, SC = 4;
    const ds_view conv = {N, C, T * F, (long)C * T * F, (long)T * F, 1, F};
    const ds_view seq = {N, SC, ST, SC, 1, (long)N * SC, 1};
    const int conv_len[] = {5, 2, 4}, seq_len[] = {7, 3, 5};

    printf("batchnorm\n");
    bn_case_run("conv train", conv, conv_len, 1);
    bn_case_run("conv eval", conv, conv_len, 0);
    bn_case_run("seq train", seq, seq_len, 1);
    bn_case_run("seq eval", seq, seq_len, 0);
}

/* ---- lookahead ---- */

struct la_case {
    int t, n, h, k;
    double *x, *w, *r, *y;
};

static void la_fwd(ds_dtype dt, const struct la_case *c, double *y)
{
    const ds_ops *op = be->ops(dt);
    size_t n = (size_t)c->t * c->n * c->h;
    void *X = up(dt, c->x, n), *W = up(dt, c->w, (size_t)c->h * c->k), *Y = up(dt, NULL, n);
    t_must(op->lookahead_fwd(ctx, c->t, c->n, c->h, c->k, X, W, Y), "lookahead_fwd");
    down(dt, Y, y, n);
    drop(X), drop(W), drop(Y);
}

/* dx (or NULL), dw accumulate onto their contents. The workspace
 * [lookahead_work(n, h)] starts as NaN, so reading it before writing shows. */
static void la_bwd(ds_dtype dt, const struct la_case *c, const double *dy, double *dx,
                   double *dw)
{
    const ds_ops *op = be->ops(dt);
    size_t n = (size_t)c->t * c->n * c->h, nw = (size_t)c->h * c->k;
    size_t nwork = op->lookahead_work(c->n, c->h);
    double *poison = t_zeros(nwork);
    for (size_t i = 0; i < nwork; i++)
        poison[i] = NAN;
    void *X = up(dt, c->x, n), *W = up(dt, c->w, nw), *DY = up(dt, dy, n);
    void *DX = dx ? up(dt, dx, n) : NULL, *DW = up(dt, dw, nw), *WORK = up(dt, poison, nwork);
    t_must(op->lookahead_bwd(ctx, c->t, c->n, c->h, c->k, X, W, DY, DX, DW, WORK), "lookahead_bwd");
    if (dx)
        down(dt, DX, dx, n);
    down(dt, DW, dw, nw);
    drop(X), drop(W), drop(DY), drop(DX), drop(DW), drop(WORK);
    free(poison);
}

static double la_loss(void *arg)
{
    struct la_case *c = arg;
    la_fwd(DS_F64, c, c->y);
    return dot(c->y, c->r, (size_t)c->t * c->n * c->h);
}

static void la_check(int t, int n, int h, int k)
{
    size_t nx = (size_t)t * n * h, nw = (size_t)h * k;
    struct la_case c = {.t = t, .n = n, .h = h, .k = k};
    c.x = rnd(nx, -1, 1), c.w = rnd(nw, -1, 1), c.r = rnd(nx, -1, 1), c.y = t_zeros(nx);
    double *yref = t_zeros(nx), *y32 = t_zeros(nx);
    double *dx0 = rnd(nx, -1, 1), *dw0 = rnd(nw, -1, 1), *dx = dup(dx0, nx), *dw = dup(dw0, nw);
    double *fx = t_zeros(nx), *fw = t_zeros(nw), *dx32 = dup(dx0, nx), *dw32 = dup(dw0, nw);
    char what[64];

    /* naive: each output element summed tap by tap */
    for (int s = 0; s < t; s++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < h; j++)
                for (int q = 0; q < k; q++)
                    if (s + q < t)
                        yref[((size_t)s * n + i) * h + j] +=
                            c.w[j * k + q] * c.x[((size_t)(s + q) * n + i) * h + j];
    la_fwd(DS_F64, &c, c.y);
    snprintf(what, sizeof what, "lookahead t%d k%d y vs naive", t, k);
    check_close(what, c.y, yref, nx, EXACT_TOL);
    la_fwd(DS_F32, &c, y32);
    snprintf(what, sizeof what, "lookahead t%d k%d y f32 vs f64", t, k);
    check_close(what, y32, c.y, nx, F32_TOL);

    la_bwd(DS_F64, &c, c.r, dx, dw);
    la_bwd(DS_F32, &c, c.r, dx32, dw32);
    snprintf(what, sizeof what, "lookahead t%d k%d dx dw f32 vs f64", t, k);
    check_close(what, dx32, dx, nx, F32_TOL);
    check_close(what, dw32, dw, nw, F32_TOL);
    sub(dx, dx0, nx), sub(dw, dw0, nw);
    t_fd_grad(la_loss, &c, c.x, nx, FD_H, fx);
    t_fd_grad(la_loss, &c, c.w, nw, FD_H, fw);
    snprintf(what, sizeof what, "lookahead t%d k%d dx", t, k);
    check_grad(what, dx, fx, nx);
    snprintf(what, sizeof what, "lookahead t%d k%d dw", t, k);
    check_grad(what, dw, fw, nw);
    free(c.x), free(c.w), free(c.r), free(c.y), free(yref), free(y32);
    free(dx0), free(dw0), free(dx), free(dw), free(fx), free(fw), free(dx32), free(dw32);
}

static void test_lookahead(void)
{
    printf("lookahead\n");
    la_check(7, 2, 3, 3);
    la_check(3, 2, 4, 5);   /* context longer than the sequence */
    la_check(6, 1, 2, 1);   /* a per-feature scale */
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    T_CHECK(be->ops(DS_F64) && be->ops(DS_F32), "%s backend lacks float64 or float32 ops",
            be->name);
    if (!be->ops(DS_F64) || !be->ops(DS_F32))
        return t_finish(__FILE__);
    T_OK(be->ctx_create(0, NULL, &ctx));
    ds_rng_seed(&rng, 20240611);

    test_conv();
    test_conv_plan();
    test_bn();
    test_lookahead();

    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
