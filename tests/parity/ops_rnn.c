/* ops_rnn.c - parity of the recurrent layer op: rnn_plan, rnn_fwd, rnn_bwd
 * for every cell, one and two directions.
 *
 * Each backend lays the weight span out as its library wants (offsets from
 * its own plan), so the span cannot be compared as one array: the same
 * logical weights (PyTorch-shaped tensors) are written into each side's
 * span through that side's layout, and dw is read back tensor by tensor
 * through it. Plans get limits above the call (max_t > t, max_n > n), the
 * lengths are ragged and unsorted, dy holds random values at padding (to be
 * ignored), and y, dx, the reserve and the workspace start as NaN. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parity.h"

typedef struct {
    char name[64];
    ds_rnn_desc d;
    int t, n;
    const int *len;                          /* [n], host */
    size_t count[DS_RNN_TENSORS];            /* elements of w_ih, w_hh, b_ih, b_hh */
    double *w[2][DS_RNN_TENSORS];            /* per direction, PyTorch shapes */
    double *dw0[2][DS_RNN_TENSORS];          /* dw's start, same shapes */
    double *x, *dy;                          /* [t][n][in], [t][n][hidden] */
} rnn_fix;

/* One side's results; stage names the op that failed, if one did. */
typedef struct {
    ds_rnn_layout lay;
    double *y, *dx, *dw[2][DS_RNN_TENSORS];
    long faults;              /* layout faults of the plan */
    const char *stage;
    char note[160];
} rnn_out;

static const char *const dw_names[2][DS_RNN_TENSORS] = {
    {"dw_ih.fwd", "dw_hh.fwd", "db_ih.fwd", "db_hh.fwd"},
    {"dw_ih.rev", "dw_hh.rev", "db_ih.rev", "db_hh.rev"},
};

static const char *cell_name(ds_cell c)
{
    switch (c) {
    case DS_CELL_LSTM: return "lstm";
    case DS_CELL_GRU: return "gru";
    case DS_CELL_RNN_TANH: return "rnn_tanh";
    default: return "rnn_relu";
    }
}

static rnn_fix rnn_fixture(ds_cell cell, int dirs, int in, int hidden, int t, int n,
                           const int *len)
{
    rnn_fix f = {.d = {cell, dirs, in, hidden, t + 2, n + 1}, .t = t, .n = n, .len = len};
    const size_t gh = (size_t)ds_backend_cell_gates(cell) * f.d.hidden;
    const double k = 1 / sqrt(f.d.hidden);   /* PyTorch's initial range */
    snprintf(f.name, sizeof f.name, "%s x%d %d>%d t%d n%d (max %dx%d)", cell_name(cell), dirs,
             in, hidden, t, n, f.d.max_t, f.d.max_n);
    f.count[DS_RNN_W_IH] = gh * f.d.in, f.count[DS_RNN_W_HH] = gh * f.d.hidden;
    f.count[DS_RNN_B_IH] = gh, f.count[DS_RNN_B_HH] = gh;
    for (int dir = 0; dir < dirs; dir++)
        for (int q = 0; q < DS_RNN_TENSORS; q++) {
            f.w[dir][q] = p_rand(P_COMPUTE, f.count[q], -k, k);
            f.dw0[dir][q] = p_rand(P_COMPUTE, f.count[q], -1, 1);
        }
    f.x = p_rand(P_COMPUTE, (size_t)t * n * f.d.in, -1, 1);
    f.dy = p_rand(P_COMPUTE, (size_t)t * n * f.d.hidden, -1, 1);
    return f;
}

/* Layout faults: tensors outside the span or overlapping one another. */
static long layout_faults(const rnn_fix *f, const ds_rnn_layout *lay)
{
    long bad = 0;
    for (int a = 0; a < f->d.dirs * DS_RNN_TENSORS; a++) {
        size_t a0 = lay->offset[a / DS_RNN_TENSORS][a % DS_RNN_TENSORS];
        size_t a1 = a0 + f->count[a % DS_RNN_TENSORS];
        bad += a1 > lay->span;
        for (int b = a + 1; b < f->d.dirs * DS_RNN_TENSORS; b++) {
            size_t b0 = lay->offset[b / DS_RNN_TENSORS][b % DS_RNN_TENSORS];
            size_t b1 = b0 + f->count[b % DS_RNN_TENSORS];
            bad += a0 < b1 && b0 < a1;
        }
    }
    return bad;
}

/* A span of layout lay (zeros between tensors) holding the tensors t. */
static ds_status put_span(const p_side *s, const rnn_fix *f, const ds_rnn_layout *lay,
                          double *const t[2][DS_RNN_TENSORS], void **span)
{
    const ds_dtype dt = p_dtype(s, P_COMPUTE);
    DS_TRY(p_upload(s, P_COMPUTE, lay->span, NULL, span));
    for (int dir = 0; dir < f->d.dirs; dir++)
        for (int q = 0; q < DS_RNN_TENSORS; q++)
            DS_TRY(p_put(s, P_COMPUTE, f->count[q], t[dir][q],
                         ds_elem(*span, dt, lay->offset[dir][q])));
    return DS_OK;
}

static ds_status get_span(const p_side *s, const rnn_fix *f, const ds_rnn_layout *lay,
                          const void *span, double *t[2][DS_RNN_TENSORS])
{
    const ds_dtype dt = p_dtype(s, P_COMPUTE);
    for (int dir = 0; dir < f->d.dirs; dir++)
        for (int q = 0; q < DS_RNN_TENSORS; q++) {
            t[dir][q] = p_vec(f->count[q]);
            DS_TRY(p_download(s, P_COMPUTE, f->count[q],
                              ds_elem((void *)span, dt, lay->offset[dir][q]), t[dir][q]));
        }
    return DS_OK;
}

/* The buffers of one side's forward and backward. */
typedef struct {
    ds_rnn_plan *plan;
    void *len, *x, *w, *y, *reserve, *work, *dy, *dx, *dw;
} rnn_bufs;

static ds_status rnn_forward(const p_side *s, const rnn_fix *f, rnn_bufs *b, rnn_out *o)
{
    const size_t ny = (size_t)f->t * f->n * f->d.hidden;
    o->stage = "rnn_fwd";
    DS_TRY(p_upload_ints(s, f->n, f->len, &b->len));
    DS_TRY(p_upload(s, P_COMPUTE, (size_t)f->t * f->n * f->d.in, f->x, &b->x));
    DS_TRY(put_span(s, f, &o->lay, f->w, &b->w));
    DS_TRY(p_upload(s, P_COMPUTE, ny, p_nans(ny), &b->y));
    DS_TRY(p_scratch(s, o->lay.reserve, &b->reserve));
    DS_TRY(p_scratch(s, o->lay.work, &b->work));
    DS_TRY(s->ops->rnn_fwd(s->ctx, b->plan, f->t, f->n, f->len, b->len, b->x, b->w, b->y,
                           b->reserve, b->work));
    o->y = p_vec(ny);
    return p_download(s, P_COMPUTE, ny, b->y, o->y);
}

static ds_status rnn_backward(const p_side *s, const rnn_fix *f, rnn_bufs *b, rnn_out *o)
{
    const size_t nx = (size_t)f->t * f->n * f->d.in;
    o->stage = "rnn_bwd";
    DS_TRY(p_upload(s, P_COMPUTE, (size_t)f->t * f->n * f->d.hidden, f->dy, &b->dy));
    DS_TRY(p_upload(s, P_COMPUTE, nx, p_nans(nx), &b->dx));
    DS_TRY(put_span(s, f, &o->lay, f->dw0, &b->dw));
    /* the workspace carries nothing from forward to backward */
    DS_TRY(p_poison(s, P_COMPUTE, o->lay.work, b->work));
    DS_TRY(s->ops->rnn_bwd(s->ctx, b->plan, f->t, f->n, f->len, b->len, b->x, b->w, b->dy,
                           b->dx, b->dw, b->reserve, b->work));
    o->dx = p_vec(nx);
    DS_TRY(p_download(s, P_COMPUTE, nx, b->dx, o->dx));
    return get_span(s, f, &o->lay, b->dw, o->dw);
}

/* Plan, forward, backward on side s. A failure leaves its op in o->stage. */
static ds_status rnn_side(const p_side *s, const rnn_fix *f, rnn_out *o)
{
    rnn_bufs b = {0};
    o->stage = "rnn_plan";
    ds_status st = s->ops->rnn_plan(s->ctx, &f->d, &b.plan, &o->lay);
    if (st != DS_OK)
        return st;
    o->faults = layout_faults(f, &o->lay);
    if (o->faults) {   /* writing the weights would overrun or mix tensors */
        snprintf(o->note, sizeof o->note, "layout: %ld tensors outside the span or overlapping",
                 o->faults);
        st = DS_ERR_BACKEND;
    }
    if (st == DS_OK)
        st = rnn_forward(s, f, &b, o);
    if (st == DS_OK)
        st = rnn_backward(s, f, &b, o);
    void *bufs[] = {b.len, b.x, b.w, b.y, b.reserve, b.work, b.dy, b.dx, b.dw};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        p_release(s, bufs[i]);
    s->ops->rnn_plan_destroy(s->ctx, b.plan);
    if (st == DS_OK)
        o->stage = NULL;
    return st;
}

/* The three table lines of one configuration. */
static void rnn_report(const rnn_fix *f, const rnn_out *ref, rnn_out *got)
{
    const double tol = p_tolerance("rnn_fwd", f->name);
    const char *ops[] = {"rnn_plan", "rnn_fwd", "rnn_bwd"};
    int failed_at = 3;   /* index of the op that failed on the tested side */
    for (int i = 0; i < 3 && got->stage; i++)
        if (strcmp(got->stage, ops[i]) == 0)
            failed_at = i;
    for (int i = 0; i < 3; i++) {
        p_verdict v = {0};
        if (i == 0)
            v.wrong = got->faults;
        if (i >= failed_at) {
            v.fail = 1;
            snprintf(v.note, sizeof v.note, "%s", i == failed_at ? got->note : "not run");
        } else if (i == 1) {
            p_maybe_inject("rnn_fwd", got->y, (size_t)f->t * f->n * f->d.hidden);
            p_compare(&v, "y", got->y, ref->y, (size_t)f->t * f->n * f->d.hidden, tol);
        } else if (i == 2) {
            p_maybe_inject("rnn_bwd", got->dx, (size_t)f->t * f->n * f->d.in);
            p_compare(&v, "dx", got->dx, ref->dx, (size_t)f->t * f->n * f->d.in, tol);
            for (int dir = 0; dir < f->d.dirs; dir++)
                for (int q = 0; q < DS_RNN_TENSORS; q++)
                    p_compare(&v, dw_names[dir][q], got->dw[dir][q], ref->dw[dir][q],
                              f->count[q], tol);
        }
        p_report(ops[i], f->name, &v, tol);
    }
}

static void rnn_case(ds_cell cell, int dirs, int in, int hidden, int t, int n, const int *len)
{
    rnn_fix f = rnn_fixture(cell, dirs, in, hidden, t, n, len);
    rnn_out ref = {0}, got = {0};
    if (!p_has_op("rnn_plan") || !p_has_op("rnn_plan_destroy") || !p_has_op("rnn_fwd") ||
        !p_has_op("rnn_bwd")) {
        got.stage = "rnn_plan";
        snprintf(got.note, sizeof got.note, "the table lacks an rnn op");
    } else {
        ds_status st = rnn_side(&P.ref, &f, &ref);
        if (st != DS_OK)
            p_fatal(st, ref.stage);
        st = rnn_side(&P.test, &f, &got);
        if (st != DS_OK && !got.note[0])
            snprintf(got.note, sizeof got.note, "%s: %s", ds_status_name(st), ds_status_last_error());
        ds_status_clear_error();
    }
    rnn_report(&f, &ref, &got);
    p_scratch_reset();
}

void p_rnn_cases(void)
{
    /* one utterance of a single frame, the longest not first */
    static const int len1[] = {4, 7, 1, 6};
    /* none reaching t: the last frame is padding for all */
    static const int len2[] = {5, 1, 3, 6};
    /* model-sized: 50 frames, one utterance of a single frame */
    static const int len3[] = {50, 23, 1, 47, 12, 50};
    const ds_cell cells[] = {DS_CELL_LSTM, DS_CELL_GRU, DS_CELL_RNN_TANH, DS_CELL_RNN_RELU};
    for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++) {
        rnn_case(cells[c], 1, 5, 6, 7, 4, len1);
        rnn_case(cells[c], 2, 5, 6, 7, 4, len2);
    }
    for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++)
        rnn_case(cells[c], 2, 96, 128, 50, 6, len3);
}
