/* test_ops_rnn.c - the recurrent layer op (rnn_plan / rnn_fwd / rnn_bwd) of
 * a backend, for every cell type, one and two directions, on ragged batches:
 *  - the layout: every tensor inside the span, none overlapping, each one
 *    256-byte aligned on the CPU;
 *  - forward against a naive per-utterance loop run once per direction and
 *    summed, with y, the reserve and the workspace poisoned (NaN) before the
 *    call and NaN in the span's gaps: y must come out finite, exactly 0 at
 *    padding;
 *  - backward in FP64 against central finite differences of sum(y * r) for
 *    dx and every weight tensor of every direction, read through the span
 *    layout; dx poisoned before the call (it is assigned), dw pre-filled
 *    with a known value (it accumulates) and its gaps left alone;
 *  - values of x and dy at padding frames change nothing;
 *  - FP32 against FP64, forward and backward;
 *  - calls beyond the plan's limits are refused.
 * One plan per cell and direction count, made for limits larger than most
 * calls: t < max_t and n < max_n, and t = max_t, n = max_n.
 *
 * usage: test_ops_rnn [BACKEND [CELL]]   BACKEND default $DSTRAIN_TEST_BACKEND,
 *        else cpu; CELL (lstm, gru, rnn_tanh, rnn_relu) runs that cell only.
 *        Each cell's seconds are printed. DSTRAIN_TEST_RNN_ALGO (standard,
 *        auto, persist: --rnn-algo) sets the context's recurrent algorithm,
 *        so every check above holds the persistent kernels to the standard
 *        one's bounds; with persist, each FP32 plan must run PERSIST_STATIC
 *        (FP64 has no persistent kernel: it runs standard).
 *        DSTRAIN_TEST_RNN_CAPTURABLE=1 sets the context's capturable option
 *        (--cuda-graphs): every check above holds the capturable path to the
 *        same bounds; on a backend that captures (capture_begin) each call is
 *        also given host lengths of t for every utterance, which that path
 *        must not read, and each case's forward and backward are captured
 *        once with other lengths and replayed on the case's own: y, dx and dw
 *        as the direct calls gave; a ReLU cell must be refused there (its
 *        padding frames' unbounded states can overflow). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "testutil.h"

enum { IN = 5, HID = 4, MAX_T = 8, MAX_N = 5 };
#define FD_H 1e-6
#define FD_TOL 1e-6      /* analytic against finite differences (FP64) */
#define EXACT_TOL 1e-12  /* FP64 op against the FP64 naive loops */
#define F32_TOL 1e-5     /* FP32 op against the FP64 op */

static const char *const CELL_NAME[] = {"lstm", "gru", "rnn_tanh", "rnn_relu"};
static const char *const W_NAME[DS_RNN_TENSORS] = {"w_ih", "w_hh", "b_ih", "b_hh"};
static const char *const DIR_NAME[2] = {"fwd", "rev"};

/* A call: t frames of n utterances with lengths len [n]. */
typedef struct {
    int t, n;
    int len[MAX_N];
    const char *what;
} len_set;

static const len_set SETS[] = {
    /* at the plan's limits, unsorted, two at max_t and one of length 1 */
    {MAX_T, MAX_N, {8, 5, 1, 8, 3}, "t = max_t, n = max_n"},
    /* below both limits, sorted as the trainer batches them */
    {6, 3, {6, 4, 1}, "t < max_t, n < max_n"},
    /* the longest utterance shorter than t, and an empty one */
    {7, 4, {3, 5, 0, 1}, "longest < t, one empty"},
};
#define N_SETS ((int)(sizeof SETS / sizeof SETS[0]))

static const ds_backend *be;
static ds_ctx *ctx;
static int capturable;   /* DSTRAIN_TEST_RNN_CAPTURABLE, on a backend that captures */

/* Device buffers are sized one past the limits, so a backend that wrongly
 * accepts a call beyond them does not write out of bounds. */
#define CAP_TN ((size_t)(MAX_T + 1) * (MAX_N + 1))

/* One plan (cell, directions) in one dtype, and its buffers. */
typedef struct {
    ds_dtype dt;
    const ds_ops *op;
    ds_rnn_desc d;
    ds_rnn_plan *plan;
    ds_rnn_layout lay;
    void *x, *w, *y, *dy, *dx, *dw, *reserve, *work, *len;
} dev;

/* A case: one plan in FP64 (and one in FP32), one call shape, host values. */
typedef struct {
    ds_cell cell;
    int dirs;
    size_t count[DS_RNN_TENSORS];   /* elements of each tensor of a direction */
    dev d64, d32;
    len_set s;
    size_t nx, ny;
    double *x, *r;                  /* x [t][n][in], r = dy [t][n][hid] */
    double *w[2][DS_RNN_TENSORS];   /* host tensors of each direction */
    double *span;                   /* the FP64 span: the tensors, NaN in the gaps */
} fix;

static const char *cname(const fix *f) { return CELL_NAME[f->cell]; }

/* ---- helpers ---- */

static ds_status fill(const dev *v, void *buf, size_t n, double value)
{
    double *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return DS_FAIL(DS_ERR_MEM, "fill");
    for (size_t i = 0; i < n; i++)
        h[i] = value;
    ds_status st = t_put_real(be, ctx, v->dt, n, h, buf);
    free(h);
    return st;
}

/* Whether element e of the span belongs to no tensor. */
static int in_gap(const fix *f, const ds_rnn_layout *lay, size_t e)
{
    for (int dir = 0; dir < f->dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            if (e >= lay->offset[dir][k] && e < lay->offset[dir][k] + f->count[k])
                return 0;
    return 1;
}

/* The span of layout lay holding the host tensors, gap_value elsewhere. */
static void build_span(const fix *f, const ds_rnn_layout *lay, double gap_value, double *span)
{
    for (size_t e = 0; e < lay->span; e++)
        span[e] = gap_value;
    for (int dir = 0; dir < f->dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            memcpy(span + lay->offset[dir][k], f->w[dir][k], f->count[k] * sizeof(double));
}

static int is_pad(const fix *f, int s, int i) { return s >= f->s.len[i]; }

static int count_nonfinite(const double *a, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(a[i]);
    return bad;
}

/* ---- set-up ---- */

static ds_status dev_init(fix *f, dev *v, ds_dtype dt)
{
    memset(v, 0, sizeof *v);
    v->dt = dt;
    v->op = be->ops(dt);
    v->d = (ds_rnn_desc){f->cell, f->dirs, IN, HID, MAX_T, MAX_N};
    DS_TRY(v->op->rnn_plan(ctx, &v->d, &v->plan, &v->lay));
    DS_TRY(be->alloc(ctx, dt, CAP_TN * IN, &v->x));
    DS_TRY(be->alloc(ctx, dt, v->lay.span, &v->w));
    DS_TRY(be->alloc(ctx, dt, CAP_TN * HID, &v->y));
    DS_TRY(be->alloc(ctx, dt, CAP_TN * HID, &v->dy));
    DS_TRY(be->alloc(ctx, dt, CAP_TN * IN, &v->dx));
    DS_TRY(be->alloc(ctx, dt, v->lay.span, &v->dw));
    DS_TRY(be->alloc(ctx, dt, v->lay.reserve ? v->lay.reserve : 1, &v->reserve));
    DS_TRY(be->alloc(ctx, dt, v->lay.work ? v->lay.work : 1, &v->work));
    return be->alloc(ctx, DS_I32, MAX_N + 1, &v->len);
}

static void dev_free(dev *v)
{
    t_release_all(be, ctx, (void *[]){v->x, v->w, v->y, v->dy, v->dx, v->dw, v->reserve, v->work,
                                      v->len}, 9);
    if (v->plan)
        v->op->rnn_plan_destroy(ctx, v->plan);
}

static ds_status fix_init(fix *f, ds_cell cell, int dirs, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    f->cell = cell;
    f->dirs = dirs;
    const size_t gh = (size_t)ds_backend_cell_gates(cell) * HID;
    const size_t count[DS_RNN_TENSORS] = {gh * IN, gh * HID, gh, gh};
    memcpy(f->count, count, sizeof count);
    DS_TRY(dev_init(f, &f->d64, DS_F64));
    DS_TRY(dev_init(f, &f->d32, DS_F32));
    ds_rng rng;
    ds_rng_seed(&rng, seed);
    f->x = malloc(CAP_TN * IN * sizeof(double));
    f->r = malloc(CAP_TN * HID * sizeof(double));
    f->span = malloc(f->d64.lay.span * sizeof(double));
    if (!f->x || !f->r || !f->span)
        return DS_FAIL(DS_ERR_MEM, "host buffers");
    for (int dir = 0; dir < dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            f->w[dir][k] = malloc(count[k] * sizeof(double));
            if (!f->w[dir][k])
                return DS_FAIL(DS_ERR_MEM, "host weights");
            t_fill_uniform(&rng, f->w[dir][k], count[k], -0.5, 0.5);
        }
    return DS_OK;
}

/* New x and r for call shape s. */
static void fix_set(fix *f, const len_set *s, uint64_t seed)
{
    f->s = *s;
    f->nx = (size_t)s->t * s->n * IN;
    f->ny = (size_t)s->t * s->n * HID;
    ds_rng rng;
    ds_rng_seed(&rng, seed);
    t_fill_uniform(&rng, f->x, f->nx, -1, 1);
    t_fill_uniform(&rng, f->r, f->ny, -1, 1);
    build_span(f, &f->d64.lay, NAN, f->span);
}

static void fix_free(fix *f)
{
    dev_free(&f->d64);
    dev_free(&f->d32);
    free(f->x);
    free(f->r);
    free(f->span);
    for (int dir = 0; dir < 2; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++)
            free(f->w[dir][k]);
}

/* ---- the passes ---- */

/* The host lengths of a call: the case's; under capturable, which must
 * not read them (a replayed graph keeps the captured batch's), t for every
 * utterance. */
static const int *host_lengths(const fix *f)
{
    static int full[MAX_N];
    if (!capturable)
        return f->s.len;
    for (int i = 0; i < f->s.n; i++)
        full[i] = f->s.t;
    return full;
}

/* Uploads x, the span (NaN in its gaps) and the lengths; poisons y and,
 * when poison, the reserve and the workspace. */
static ds_status fwd_inputs(fix *f, dev *v, int poison)
{
    double *span = malloc(v->lay.span * sizeof *span);
    if (!span)
        return DS_FAIL(DS_ERR_MEM, "span");
    if (v->dt == DS_F64) {   /* f->span may hold a finite-difference perturbation */
        memcpy(span, f->span, v->lay.span * sizeof *span);
        for (size_t e = 0; e < v->lay.span; e++)
            if (in_gap(f, &v->lay, e))
                span[e] = NAN;
    } else {
        build_span(f, &v->lay, NAN, span);
    }
    ds_status st = t_put_real(be, ctx, v->dt, v->lay.span, span, v->w);
    free(span);
    DS_TRY(st);
    DS_TRY(t_put_real(be, ctx, v->dt, f->nx, f->x, v->x));
    DS_TRY(be->from_host(ctx, DS_I32, (size_t)f->s.n, f->s.len, v->len));
    DS_TRY(fill(v, v->y, f->ny, NAN));
    if (poison) {   /* cuDNN's workspace is megabytes: not once per finite difference */
        DS_TRY(fill(v, v->reserve, v->lay.reserve, NAN));
        DS_TRY(fill(v, v->work, v->lay.work, NAN));
    }
    return DS_OK;
}

static ds_status fwd_call(fix *f, dev *v)
{
    return v->op->rnn_fwd(ctx, v->plan, f->s.t, f->s.n, host_lengths(f), v->len, v->x, v->w,
                          v->y, v->reserve, v->work);
}

/* fwd_inputs, then the forward pass. */
static ds_status fwd_poisoned(fix *f, dev *v, int poison)
{
    DS_TRY(fwd_inputs(f, v, poison));
    return fwd_call(f, v);
}

/* The forward with its reserve and workspace poisoned (NaN) first. */
static ds_status fwd(fix *f, dev *v)
{
    return fwd_poisoned(f, v, 1);
}

/* dy = r, dx poisoned, dw pre-filled with dw0 everywhere (gaps included)
 * unless keep_dw, workspace poisoned. */
static ds_status bwd_inputs(fix *f, dev *v, const double *r, double dw0, int keep_dw)
{
    DS_TRY(t_put_real(be, ctx, v->dt, f->ny, r, v->dy));
    DS_TRY(fill(v, v->dx, f->nx, NAN));
    if (!keep_dw)
        DS_TRY(fill(v, v->dw, v->lay.span, dw0));
    return fill(v, v->work, v->lay.work, NAN);
}

static ds_status bwd_call(fix *f, dev *v)
{
    return v->op->rnn_bwd(ctx, v->plan, f->s.t, f->s.n, host_lengths(f), v->len, v->x, v->w,
                          v->dy, v->dx, v->dw, v->reserve, v->work);
}

/* After fwd: bwd_inputs, then the backward pass. */
static ds_status bwd(fix *f, dev *v, const double *r, double dw0, int keep_dw)
{
    DS_TRY(bwd_inputs(f, v, r, dw0, keep_dw));
    return bwd_call(f, v);
}

/* ---- the naive reference: each utterance alone, matrix-vector loops ---- */

static double sig(double v) { return 1 / (1 + exp(-v)); }

/* One step of one utterance: px = W_ih x + b_ih, ph = W_hh h + b_hh. */
static void ref_cell(ds_cell cell, const double *px, const double *ph, double *h, double *c)
{
    const int H = HID;
    for (int j = 0; j < H; j++) {
        if (cell == DS_CELL_LSTM) {
            double ig = sig(px[j] + ph[j]), fg = sig(px[H + j] + ph[H + j]);
            double gg = tanh(px[2 * H + j] + ph[2 * H + j]);
            double og = sig(px[3 * H + j] + ph[3 * H + j]);
            c[j] = fg * c[j] + ig * gg;
            h[j] = og * tanh(c[j]);
        } else if (cell == DS_CELL_GRU) {
            double r = sig(px[j] + ph[j]), z = sig(px[H + j] + ph[H + j]);
            double n = tanh(px[2 * H + j] + r * ph[2 * H + j]);
            h[j] = (1 - z) * n + z * h[j];
        } else {
            double p = px[j] + ph[j];
            h[j] = cell == DS_CELL_RNN_TANH ? tanh(p) : fmax(p, 0);
        }
    }
}

/* Direction dir alone (dir 1 runs from frame len-1 down to 0), added into y. */
static void ref_direction(const fix *f, int dir, double *y)
{
    const int GH = ds_backend_cell_gates(f->cell) * HID, N = f->s.n;
    const double *w_ih = f->w[dir][DS_RNN_W_IH], *w_hh = f->w[dir][DS_RNN_W_HH];
    const double *b_ih = f->w[dir][DS_RNN_B_IH], *b_hh = f->w[dir][DS_RNN_B_HH];
    double px[4 * HID], ph[4 * HID];
    for (int i = 0; i < N; i++) {
        double h[HID] = {0}, c[HID] = {0};
        for (int k = 0; k < f->s.len[i]; k++) {
            int s = dir ? f->s.len[i] - 1 - k : k;
            const double *x = f->x + ((size_t)s * N + i) * IN;
            for (int q = 0; q < GH; q++) {
                px[q] = b_ih[q];
                ph[q] = b_hh[q];
                for (int m = 0; m < IN; m++)
                    px[q] += w_ih[q * IN + m] * x[m];
                for (int m = 0; m < HID; m++)
                    ph[q] += w_hh[q * HID + m] * h[m];
            }
            ref_cell(f->cell, px, ph, h, c);
            for (int j = 0; j < HID; j++)
                y[((size_t)s * N + i) * HID + j] += h[j];
        }
    }
}

static void ref_forward(const fix *f, double *y)
{
    memset(y, 0, f->ny * sizeof *y);
    for (int dir = 0; dir < f->dirs; dir++)
        ref_direction(f, dir, y);
}

/* ---- checks ---- */

/* The layout of dev v: tensors inside the span, disjoint, aligned on the CPU. */
static void check_layout(const fix *f, const dev *v)
{
    const char *dn = ds_dtype_name(v->dt);
    const size_t esize = ds_dtype_size(v->dt);
    const int cpu = strcmp(be->name, "cpu") == 0;
    size_t sum = 0;
    int inside = 1, disjoint = 1, aligned = 1;
    for (int dir = 0; dir < f->dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            const size_t a = v->lay.offset[dir][k], a_end = a + f->count[k];
            sum += f->count[k];
            inside &= a_end <= v->lay.span;
            aligned &= a * esize % 256 == 0;
            for (int d2 = 0; d2 < f->dirs; d2++)
                for (int k2 = 0; k2 < DS_RNN_TENSORS; k2++) {
                    if (d2 == dir && k2 == k)
                        continue;
                    const size_t b = v->lay.offset[d2][k2], b_end = b + f->count[k2];
                    disjoint &= a_end <= b || b_end <= a;
                }
        }
    T_CHECK(inside, "%s x%d %s: a tensor reaches past the span of %zu", cname(f), f->dirs, dn,
            v->lay.span);
    T_CHECK(disjoint, "%s x%d %s: tensors overlap in the span", cname(f), f->dirs, dn);
    T_CHECK(v->lay.span >= sum, "%s x%d %s: span %zu < %zu weights", cname(f), f->dirs, dn,
            v->lay.span, sum);
    if (cpu)
        T_CHECK(aligned, "%s x%d %s: a tensor offset is not 256-byte aligned", cname(f), f->dirs,
                dn);
    printf("%-8s x%d %s layout: span %zu for %zu weights, reserve %zu, work %zu%s\n", cname(f),
           f->dirs, dn, v->lay.span, sum, v->lay.reserve, v->lay.work,
           cpu ? ", offsets 256-byte aligned" : "");
}

/* Forward against the reference; nothing left of the poison; padding 0. */
static ds_status check_forward(fix *f, double *y_out)
{
    double *ref = malloc(f->ny * sizeof *ref);
    DS_TRY(fwd(f, &f->d64));
    DS_TRY(t_get_real(be, ctx, DS_F64, f->ny, f->d64.y, y_out));
    ref_forward(f, ref);
    const int bad = count_nonfinite(y_out, f->ny);
    T_CHECK(bad == 0, "%s x%d {%s}: %d outputs not written (NaN)", cname(f), f->dirs, f->s.what,
            bad);
    const double e = t_rel_err(y_out, ref, f->ny);
    T_CHECK(e < EXACT_TOL, "%s x%d {%s}: forward vs naive rel err %.3g", cname(f), f->dirs,
            f->s.what, e);
    int pad_ok = 1;
    for (int s = 0; s < f->s.t; s++)
        for (int i = 0; i < f->s.n; i++)
            for (int j = 0; j < HID; j++)
                if (is_pad(f, s, i) && y_out[((size_t)s * f->s.n + i) * HID + j] != 0)
                    pad_ok = 0;
    T_CHECK(pad_ok, "%s x%d {%s}: padding outputs are not 0", cname(f), f->dirs, f->s.what);
    printf("  forward vs naive rel err %.2e\n", e);
    free(ref);
    return DS_OK;
}

static double loss_fn(void *arg)
{
    fix *f = arg;
    double *y = malloc(f->ny * sizeof *y), l = 0;
    if (!y || fwd_poisoned(f, &f->d64, 0) != DS_OK || t_get_real(be, ctx, DS_F64, f->ny, f->d64.y, y) != DS_OK) {
        t_failures++;
        fprintf(stderr, "FAIL: forward in loss: %s\n", ds_status_last_error());
        free(y);
        return NAN;
    }
    for (size_t k = 0; k < f->ny; k++)
        l += y[k] * f->r[k];
    free(y);
    return l;
}

#define DW0 0.5   /* what dw holds before backward */

/* Backward against finite differences. dx was NaN before the call: it must
 * be assigned. dw held DW0: the gradient is what was added to it, and the
 * gaps of the span keep DW0. dx_out [nx] and dw_out [span] get dx and dw - DW0. */
static ds_status check_grads(fix *f, double *dx_out, double *dw_out)
{
    const ds_rnn_layout *lay = &f->d64.lay;
    DS_TRY(fwd(f, &f->d64));
    DS_TRY(bwd(f, &f->d64, f->r, DW0, 0));
    DS_TRY(t_get_real(be, ctx, DS_F64, f->nx, f->d64.dx, dx_out));
    DS_TRY(t_get_real(be, ctx, DS_F64, lay->span, f->d64.dw, dw_out));

    const int bad = count_nonfinite(dx_out, f->nx);
    T_CHECK(bad == 0, "%s x%d {%s}: %d elements of dx not assigned (NaN)", cname(f), f->dirs,
            f->s.what, bad);
    int gaps_kept = 1;
    for (size_t e = 0; e < lay->span; e++) {
        if (in_gap(f, lay, e))
            gaps_kept &= dw_out[e] == DW0;
        dw_out[e] -= DW0;
    }
    T_CHECK(gaps_kept, "%s x%d {%s}: backward wrote into the gaps of the dw span", cname(f),
            f->dirs, f->s.what);

    double *fd = malloc(f->nx * sizeof *fd);
    t_fd_grad(loss_fn, f, f->x, f->nx, FD_H, fd);
    double e = t_rel_err(dx_out, fd, f->nx);
    T_CHECK(e < FD_TOL, "%s x%d {%s}: dx rel err %.3g", cname(f), f->dirs, f->s.what, e);
    free(fd);
    printf("  dx        fd rel err %.2e\n", e);
    for (int dir = 0; dir < f->dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            const size_t off = lay->offset[dir][k], n = f->count[k];
            fd = malloc(n * sizeof *fd);
            t_fd_grad(loss_fn, f, f->span + off, n, FD_H, fd);
            e = t_rel_err(dw_out + off, fd, n);
            double nrm = 0;
            for (size_t q = 0; q < n; q++)
                nrm += fd[q] * fd[q];
            T_CHECK(nrm > 0, "%s x%d {%s}: %s %s: finite differences are all zero", cname(f),
                    f->dirs, f->s.what, DIR_NAME[dir], W_NAME[k]);
            T_CHECK(e < FD_TOL, "%s x%d {%s}: d%s %s rel err %.3g", cname(f), f->dirs, f->s.what,
                    W_NAME[k], DIR_NAME[dir], e);
            printf("  d%-4s %s fd rel err %.2e\n", W_NAME[k], DIR_NAME[dir], e);
            free(fd);
        }
    return DS_OK;
}

/* A second forward and backward onto the same dw add the gradient again;
 * dx, assigned, comes out the same. (Backward runs once per forward: it may
 * consume the reserve, backend.h.) */
static ds_status check_accumulates(fix *f, const double *dx1, const double *g1)
{
    const ds_rnn_layout *lay = &f->d64.lay;
    double *dx = malloc(f->nx * sizeof *dx), *dw = malloc(lay->span * sizeof *dw);
    double *want = malloc(lay->span * sizeof *want);
    DS_TRY(fwd(f, &f->d64));
    DS_TRY(bwd(f, &f->d64, f->r, DW0, 0));
    DS_TRY(fwd(f, &f->d64));
    DS_TRY(bwd(f, &f->d64, f->r, 0, 1));
    DS_TRY(t_get_real(be, ctx, DS_F64, f->nx, f->d64.dx, dx));
    DS_TRY(t_get_real(be, ctx, DS_F64, lay->span, f->d64.dw, dw));
    T_CHECK(memcmp(dx, dx1, f->nx * sizeof *dx) == 0,
            "%s x%d {%s}: dx of a second backward differs (not assigned?)", cname(f), f->dirs,
            f->s.what);
    for (size_t e = 0; e < lay->span; e++) {
        want[e] = in_gap(f, lay, e) ? 0 : 2 * g1[e];
        dw[e] -= DW0;
    }
    const double e = t_rel_err(dw, want, lay->span);
    T_CHECK(e < 1e-14, "%s x%d {%s}: two backwards give dw0 + %.17g x the gradient (rel %.3g)",
            cname(f), f->dirs, f->s.what, 2.0, e);
    free(dx);
    free(dw);
    free(want);
    return DS_OK;
}

/* Wild values of x and dy at padding frames change neither y nor any
 * gradient; dx at padding is exactly 0. */
static ds_status check_padding(fix *f, const double *y0, const double *dx0, const double *g0)
{
    const ds_rnn_layout *lay = &f->d64.lay;
    ds_rng rng;
    ds_rng_seed(&rng, 7);
    double *keep = malloc(f->nx * sizeof *keep), *r2 = malloc(f->ny * sizeof *r2);
    double *y = malloc(f->ny * sizeof *y), *dx = malloc(f->nx * sizeof *dx);
    double *dw = malloc(lay->span * sizeof *dw);
    int npad = 0;
    memcpy(keep, f->x, f->nx * sizeof *keep);
    memcpy(r2, f->r, f->ny * sizeof *r2);
    for (int s = 0; s < f->s.t; s++)
        for (int i = 0; i < f->s.n; i++) {
            if (!is_pad(f, s, i))
                continue;
            npad++;
            for (int m = 0; m < IN; m++)
                f->x[((size_t)s * f->s.n + i) * IN + m] = ds_rng_range(&rng, -50, 50);
            for (int j = 0; j < HID; j++)
                r2[((size_t)s * f->s.n + i) * HID + j] = ds_rng_range(&rng, -50, 50);
        }
    T_CHECK(npad > 0, "{%s}: the case has no padding", f->s.what);
    DS_TRY(fwd(f, &f->d64));
    DS_TRY(t_get_real(be, ctx, DS_F64, f->ny, f->d64.y, y));
    T_CHECK(memcmp(y, y0, f->ny * sizeof *y) == 0, "%s x%d {%s}: padding x changes y", cname(f),
            f->dirs, f->s.what);
    DS_TRY(bwd(f, &f->d64, r2, DW0, 0));
    DS_TRY(t_get_real(be, ctx, DS_F64, f->nx, f->d64.dx, dx));
    DS_TRY(t_get_real(be, ctx, DS_F64, lay->span, f->d64.dw, dw));
    for (size_t e = 0; e < lay->span; e++)
        dw[e] -= DW0;
    int pad_zero = 1;
    for (int s = 0; s < f->s.t; s++)
        for (int i = 0; i < f->s.n; i++)
            for (int m = 0; m < IN && is_pad(f, s, i); m++) {
                size_t at = ((size_t)s * f->s.n + i) * IN + m;
                pad_zero &= dx[at] == 0;
                dx[at] = dx0[at];   /* compared apart: the reference may hold anything there */
            }
    T_CHECK(pad_zero, "%s x%d {%s}: dx at padding is not 0", cname(f), f->dirs, f->s.what);
    double ex = t_rel_err(dx, dx0, f->nx), ew = t_rel_err(dw, g0, lay->span);
    T_CHECK(ex < 1e-14 && ew < 1e-14, "%s x%d {%s}: padding x or dy changes dx (rel %.3g) or dw "
            "(rel %.3g)", cname(f), f->dirs, f->s.what, ex, ew);
    memcpy(f->x, keep, f->nx * sizeof *keep);
    free(keep);
    free(r2);
    free(y);
    free(dx);
    free(dw);
    return DS_OK;
}

/* Under capturable: the FP64 forward and backward captured once while the
 * device lengths (and the host ones) are t for every utterance, then
 * replayed on this case's lengths and inputs, with y, dx, the reserve and
 * the workspace poisoned and dw at DW0 first: y and dx as the direct calls
 * gave them (y0, dx0), dw - DW0 as g0. A path that kept the captured
 * lengths, or read the host's, would run every utterance over t frames. */
static ds_status check_graph(fix *f, const double *y0, const double *dx0, const double *g0)
{
    dev *v = &f->d64;
    const ds_rnn_layout *lay = &v->lay;
    const int *full = host_lengths(f);
    ds_graph *g = NULL;
    size_t bytes = 0;
    DS_TRY(fwd_inputs(f, v, 1));
    DS_TRY(bwd_inputs(f, v, f->r, DW0, 0));
    DS_TRY(be->from_host(ctx, DS_I32, (size_t)f->s.n, full, v->len));
    DS_TRY(be->capture_begin(ctx));
    ds_status st = fwd_call(f, v);
    if (st == DS_OK)
        st = bwd_call(f, v);
    const ds_status end = be->capture_end(ctx, &g, &bytes);   /* called whatever st is */
    T_CHECK(st == DS_OK && end == DS_OK, "%s x%d {%s}: forward and backward not captured: %s",
            cname(f), f->dirs, f->s.what, ds_status_last_error());
    if (st != DS_OK || end != DS_OK) {
        be->graph_destroy(ctx, g);
        ds_status_clear_error();
        return DS_OK;
    }
    double *y = malloc(f->ny * sizeof *y), *dx = malloc(f->nx * sizeof *dx);
    double *dw = malloc(lay->span * sizeof *dw);
    st = y && dx && dw ? DS_OK : DS_FAIL(DS_ERR_MEM, "graph check");
    if (st == DS_OK)
        st = fwd_inputs(f, v, 1);   /* the case's lengths back in v->len */
    if (st == DS_OK)
        st = bwd_inputs(f, v, f->r, DW0, 0);
    if (st == DS_OK)
        st = be->graph_launch(ctx, g);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, f->ny, v->y, y);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, f->nx, v->dx, dx);
    if (st == DS_OK)
        st = t_get_real(be, ctx, DS_F64, lay->span, v->dw, dw);
    be->graph_destroy(ctx, g);
    if (st == DS_OK) {
        for (size_t e = 0; e < lay->span; e++)
            dw[e] -= DW0;
        const double ew = t_rel_err(dw, g0, lay->span);
        T_CHECK(memcmp(y, y0, f->ny * sizeof *y) == 0, "%s x%d {%s}: the replayed graph's y "
                "differs from the direct call's", cname(f), f->dirs, f->s.what);
        T_CHECK(memcmp(dx, dx0, f->nx * sizeof *dx) == 0, "%s x%d {%s}: the replayed graph's dx "
                "differs from the direct call's", cname(f), f->dirs, f->s.what);
        T_CHECK(ew < 1e-14, "%s x%d {%s}: the replayed graph's dw differs from the direct "
                "call's (rel %.3g)", cname(f), f->dirs, f->s.what, ew);
        printf("  captured with lengths of t (%zu bytes), replayed: dw rel err %.2e\n", bytes,
               ew);
    }
    free(y);
    free(dx);
    free(dw);
    return st;
}

/* The FP32 table (its own plan and layout) against FP64, forward and backward. */
static ds_status check_f32(fix *f, const double *y64, const double *dx64, const double *g64)
{
    dev *v = &f->d32;
    const ds_rnn_layout *l32 = &v->lay, *l64 = &f->d64.lay;
    double *y = malloc(f->ny * sizeof *y), *dx = malloc(f->nx * sizeof *dx);
    double *dw = malloc(l32->span * sizeof *dw);
    DS_TRY(fwd(f, v));
    DS_TRY(bwd(f, v, f->r, DW0, 0));
    DS_TRY(t_get_real(be, ctx, DS_F32, f->ny, v->y, y));
    DS_TRY(t_get_real(be, ctx, DS_F32, f->nx, v->dx, dx));
    DS_TRY(t_get_real(be, ctx, DS_F32, l32->span, v->dw, dw));
    const double ey = t_rel_err(y, y64, f->ny), ex = t_rel_err(dx, dx64, f->nx);
    T_CHECK(ey < F32_TOL, "%s x%d {%s}: fp32 vs fp64 forward rel err %.3g", cname(f), f->dirs,
            f->s.what, ey);
    T_CHECK(ex < F32_TOL, "%s x%d {%s}: fp32 vs fp64 dx rel err %.3g", cname(f), f->dirs,
            f->s.what, ex);
    double ew = 0;
    for (int dir = 0; dir < f->dirs; dir++)
        for (int k = 0; k < DS_RNN_TENSORS; k++) {
            double *g = dw + l32->offset[dir][k];
            for (size_t q = 0; q < f->count[k]; q++)
                g[q] -= (float)DW0;
            double e = t_rel_err(g, g64 + l64->offset[dir][k], f->count[k]);
            T_CHECK(e < F32_TOL, "%s x%d {%s}: fp32 vs fp64 d%s %s rel err %.3g", cname(f),
                    f->dirs, f->s.what, W_NAME[k], DIR_NAME[dir], e);
            ew = e > ew ? e : ew;
        }
    printf("  fp32 vs fp64 rel err: y %.2e, dx %.2e, worst dw %.2e\n", ey, ex, ew);
    free(y);
    free(dx);
    free(dw);
    return DS_OK;
}

/* Calls beyond the plan's limits, and bad descriptions, are refused. */
static void check_refusals(fix *f)
{
    dev *v = &f->d64;
    const int ones[MAX_N + 1] = {1, 1, 1, 1, 1, 1};
    ds_status st;
    T_CHECK(be->from_host(ctx, DS_I32, MAX_N + 1, ones, v->len) == DS_OK, "lengths");
    st = v->op->rnn_fwd(ctx, v->plan, MAX_T + 1, 1, ones, v->len, v->x, v->w, v->y, v->reserve,
                        v->work);
    T_CHECK(st == DS_ERR_ARG, "%s x%d: rnn_fwd with t = max_t + 1 gave %s", cname(f), f->dirs,
            ds_status_name(st));
    st = v->op->rnn_fwd(ctx, v->plan, 1, MAX_N + 1, ones, v->len, v->x, v->w, v->y, v->reserve,
                        v->work);
    T_CHECK(st == DS_ERR_ARG, "%s x%d: rnn_fwd with n = max_n + 1 gave %s", cname(f), f->dirs,
            ds_status_name(st));
    st = v->op->rnn_bwd(ctx, v->plan, MAX_T + 1, 1, ones, v->len, v->x, v->w, v->dy, v->dx, v->dw,
                        v->reserve, v->work);
    T_CHECK(st == DS_ERR_ARG, "%s x%d: rnn_bwd with t = max_t + 1 gave %s", cname(f), f->dirs,
            ds_status_name(st));
    ds_status_clear_error();
}

static void check_bad_plans(void)
{
    const ds_ops *op = be->ops(DS_F64);
    const ds_rnn_desc bad[] = {
        {DS_CELL_LSTM, 0, IN, HID, MAX_T, MAX_N},
        {DS_CELL_LSTM, 3, IN, HID, MAX_T, MAX_N},
        {DS_CELL_GRU, 1, 0, HID, MAX_T, MAX_N},
        {DS_CELL_GRU, 1, IN, 0, MAX_T, MAX_N},
        {DS_CELL_RNN_TANH, 2, IN, HID, 0, MAX_N},
        {DS_CELL_RNN_RELU, 2, IN, HID, MAX_T, 0},
        {(ds_cell)7, 1, IN, HID, MAX_T, MAX_N},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ds_rnn_plan *p = NULL;
        ds_rnn_layout lay;
        ds_status st = op->rnn_plan(ctx, &bad[i], &p, &lay);
        T_CHECK(st == DS_ERR_ARG && p == NULL, "bad description %zu accepted (%s)", i,
                ds_status_name(st));
        if (p)
            op->rnn_plan_destroy(ctx, p);
    }
    ds_status_clear_error();
}

/* Under capturable, a ReLU layer is refused, saying why: the capturable
 * path computes the padding frames' unbounded states. */
static void check_relu_refused(int dirs)
{
    const ds_ops *op = be->ops(DS_F32);
    const ds_rnn_desc d = {DS_CELL_RNN_RELU, dirs, IN, HID, MAX_T, MAX_N};
    ds_rnn_plan *p = NULL;
    ds_rnn_layout lay;
    const ds_status st = op->rnn_plan(ctx, &d, &p, &lay);
    T_CHECK(st == DS_ERR_UNSUPPORTED && !p && strstr(ds_status_last_error(), "--cuda-graphs"),
            "rnn_relu x%d under capturable: %s, %s", dirs, ds_status_name(st), ds_status_last_error());
    if (p)
        op->rnn_plan_destroy(ctx, p);
    ds_status_clear_error();
    printf("rnn_relu x%d: refused under capturable, as it must be\n", dirs);
}

static ds_status run_set(fix *f)
{
    const ds_rnn_layout *lay = &f->d64.lay;
    double *y = malloc(f->ny * sizeof *y), *dx = malloc(f->nx * sizeof *dx);
    double *g = malloc(lay->span * sizeof *g);
    printf("%-8s x%d {%s} t %d n %d, lengths", cname(f), f->dirs, f->s.what, f->s.t, f->s.n);
    for (int i = 0; i < f->s.n; i++)
        printf(" %d", f->s.len[i]);
    printf("\n");
    DS_TRY(check_forward(f, y));
    DS_TRY(check_grads(f, dx, g));
    DS_TRY(check_accumulates(f, dx, g));
    DS_TRY(check_padding(f, y, dx, g));
    if (capturable)
        DS_TRY(check_graph(f, y, dx, g));
    DS_TRY(check_f32(f, y, dx, g));
    free(y);
    free(dx);
    free(g);
    return DS_OK;
}

/* The recurrent algorithm of the context's plans (the backend's start-up
 * choices, its last two: this fixture's FP64 and FP32 plans), printed;
 * under persist the FP32 plan must run PERSIST_STATIC. */
static void check_algorithm(const fix *f, int algo)
{
    const int n = be->choices_get ? be->choices_get(ctx, NULL, 0) : 0;
    if (n < 2)
        return;   /* the CPU: one algorithm */
    ds_choice *c = calloc((size_t)n, sizeof *c);
    if (!c)
        return;
    be->choices_get(ctx, c, n);
    for (int i = n - 2; i < n; i++)
        printf("  %s x%d: %s: %s\n", cname(f), f->dirs, c[i].what, c[i].how);
    if (algo == DS_RNN_ALGO_PERSIST)
        T_CHECK(strstr(c[n - 1].what, "fp32") && strncmp(c[n - 1].how, "PERSIST_STATIC", 14) == 0,
                "%s x%d under --rnn-algo persist: %s runs %s", cname(f), f->dirs, c[n - 1].what, c[n - 1].how);
    free(c);
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    printf("backend %s\n", be->name);
    T_CHECK(be->ops(DS_F64) && be->ops(DS_F32), "%s backend lacks float64 or float32 ops",
            be->name);
    if (!be->ops(DS_F64) || !be->ops(DS_F32))
        return t_finish(__FILE__);
    ds_ctx_opts opts = {0};
    const char *algo = getenv("DSTRAIN_TEST_RNN_ALGO");
    static const char *const ALGO[] = {"standard", "auto", "persist"};
    for (int a = 0; algo && a < 3; a++)
        if (!strcmp(algo, ALGO[a]))
            opts.rnn_algo = a;
    T_CHECK(!algo || !strcmp(algo, ALGO[opts.rnn_algo]), "DSTRAIN_TEST_RNN_ALGO=%s: not one of standard, "
            "auto, persist", algo);
    printf("recurrent algorithm: %s\n", ALGO[opts.rnn_algo]);
    const char *cap = getenv("DSTRAIN_TEST_RNN_CAPTURABLE");
    opts.capturable = cap && strcmp(cap, "") && strcmp(cap, "0");
    capturable = opts.capturable && be->capture_begin;
    printf("capturable: %s\n", !opts.capturable ? "no" : capturable ? "yes, replays checked"
           : "set (the backend captures nothing)");
    T_OK(be->ctx_create(0, &opts, &ctx));
    check_bad_plans();
    const char *only = argc > 2 ? argv[2] : NULL;
    int known = !only;
    uint64_t seed = 1;
    for (int cell = DS_CELL_LSTM; cell <= DS_CELL_RNN_RELU; cell++) {
        const int run = !only || strcmp(only, CELL_NAME[cell]) == 0;
        known |= run;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int dirs = 1; dirs <= 2; dirs++) {
            fix f;
            if (!run) {   /* the seeds stay those of a full run */
                seed += 1 + N_SETS;
                continue;
            }
            if (capturable && cell == DS_CELL_RNN_RELU) {   /* refused: its padding states overflow */
                check_relu_refused(dirs);
                continue;
            }
            T_OK(fix_init(&f, (ds_cell)cell, dirs, seed++));
            check_algorithm(&f, opts.rnn_algo);
            check_layout(&f, &f.d64);
            check_layout(&f, &f.d32);
            check_refusals(&f);
            for (int s = 0; s < N_SETS; s++) {
                fix_set(&f, &SETS[s], seed++);
                T_OK(run_set(&f));
            }
            fix_free(&f);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (run)
            printf("%s: %.2f s\n", CELL_NAME[cell],
                   (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    T_CHECK(known, "no cell named %s (lstm, gru, rnn_tanh, rnn_relu)", only);
    be->ctx_destroy(ctx);
    return t_finish(__FILE__);
}
