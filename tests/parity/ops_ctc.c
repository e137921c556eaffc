/* ops_ctc.c - parity cases of the loss: ctc_loss, argmax (greedy decoding)
 * and loss_total (grouped as tests/unit/test_ctc.c and the peer check
 * ctc_vs_torch group them). Losses are doubles for every dtype (scalar
 * role); logits and their gradients compute role. */
#include <math.h>

#include "parity.h"

/* ---- CTC ---- */

typedef struct {
    int t, n, c, blank, max_label_len;
    double grad_scale;
} ctc_arg;

/* buf: logits [t][n][c], len [n], labels [sum label_len], label_off [n],
 * label_len [n], grad_scale [1] (scalar), loss_scale [1] (scalar, or NULL),
 * loss [n] (scalar), dlogits [t][n][c] (or NULL). */
static ds_status call_ctc(const p_side *s, void *const *buf, const void *arg)
{
    const ctc_arg *a = arg;
    void *work;
    DS_TRY(p_scratch(s, s->ops->ctc_work(a->t, a->n, a->c, a->max_label_len), &work));
    ds_status st = s->ops->ctc_loss(s->ctx, a->t, a->n, a->c, a->blank, buf[0], buf[1], buf[2],
                                    buf[3], buf[4], a->max_label_len, buf[5], buf[6], buf[7],
                                    buf[8], work);
    p_release(s, work);
    return st;
}

static void ctc_all(void)
{
    /* 6 utterances of at most t=8 frames, 6 classes, blank 0:
     *   0: 8 frames, 1 2 2 3      (needs 5)
     *   1: 5 frames, 4 4 4        (needs exactly 5)
     *   2: 1 frame,  5
     *   3: 7 frames, no labels
     *   4: 3 frames, 2 2 2        (needs 5: impossible, loss +inf, no gradient)
     *   5: 2 frames, 3 1 4        (more labels than frames: impossible) */
    static const int len[] = {8, 5, 1, 7, 3, 2};
    static const int labels[] = {1, 2, 2, 3, 4, 4, 4, 5, 2, 2, 2, 3, 1, 4};
    static const int label_off[] = {0, 4, 7, 8, 8, 11};
    static const int label_len[] = {4, 3, 1, 0, 3, 3};
    /* max_label_len above the longest (4): the limit the work was sized for */
    static const ctc_arg a = {8, 6, 6, 0, 5, 0.37};
    const size_t nl = (size_t)a.t * a.n * a.c;
    double *logits = p_rand(P_COMPUTE, nl, -4, 4), scale = 1024;

    for (int with_grad = 1; with_grad >= 0; with_grad--) {
        p_case c = {"ctc_loss", with_grad ? "t8 n6 c6 +dlogits, 2 impossible"
                                          : "t8 n6 c6 loss only, 2 impossible",
                    .call = call_ctc, .arg = &a};
        p_add(&c, "logits", P_COMPUTE, P_IN, nl, logits);
        p_add_ints(&c, "len", a.n, len);
        p_add_ints(&c, "labels", sizeof labels / sizeof labels[0], labels);
        p_add_ints(&c, "label_off", a.n, label_off);
        p_add_ints(&c, "label_len", a.n, label_len);
        p_add(&c, "grad_scale", P_SCALAR, P_IN, 1, &a.grad_scale);
        p_add(&c, "loss_scale", P_SCALAR, P_NULL, 1, NULL);
        p_add(&c, "loss", P_SCALAR, P_OUT, a.n, NULL);
        p_add(&c, "dlogits", P_COMPUTE, with_grad ? P_OUT : P_NULL, nl, NULL);
        p_run(&c);
    }
    {   /* the loss scale read from backend memory (dynamic loss scaling) */
        p_case c = {"ctc_loss", "t8 n6 c6 +dlogits, loss scale 1024", .call = call_ctc, .arg = &a};
        p_add(&c, "logits", P_COMPUTE, P_IN, nl, logits);
        p_add_ints(&c, "len", a.n, len);
        p_add_ints(&c, "labels", sizeof labels / sizeof labels[0], labels);
        p_add_ints(&c, "label_off", a.n, label_off);
        p_add_ints(&c, "label_len", a.n, label_len);
        p_add(&c, "grad_scale", P_SCALAR, P_IN, 1, &a.grad_scale);
        p_add(&c, "loss_scale", P_SCALAR, P_IN, 1, &scale);
        p_add(&c, "loss", P_SCALAR, P_OUT, a.n, NULL);
        p_add(&c, "dlogits", P_COMPUTE, P_OUT, nl, NULL);
        p_run(&c);
    }
    p_scratch_reset();
}

/* Model-sized: 29 classes, up to 150 frames and 60 labels with repeats. */
static void ctc_big(void)
{
    static const int len[] = {150, 97, 1, 128};
    static const int label_len[] = {41, 25, 1, 60};
    static const ctc_arg a = {150, 4, 29, 0, 64, 1.0 / 4};
    int *labels = p_ivec(41 + 25 + 1 + 60), *label_off = p_ivec(a.n);
    for (int i = 0, at = 0; i < a.n; at += label_len[i++]) {
        label_off[i] = at;
        for (int k = 0; k < label_len[i]; k++)   /* every 10th a repeat */
            labels[at + k] = k % 10 == 9 ? labels[at + k - 1] : ds_rng_int(&P.rng, 1, a.c - 1);
    }
    const size_t nl = (size_t)a.t * a.n * a.c;
    double *logits = p_rand(P_COMPUTE, nl, -4, 4);
    p_case c = {"ctc_loss", "t150 n4 c29 +dlogits", .call = call_ctc, .arg = &a};
    p_add(&c, "logits", P_COMPUTE, P_IN, nl, logits);
    p_add_ints(&c, "len", a.n, len);
    p_add_ints(&c, "labels", 41 + 25 + 1 + 60, labels);
    p_add_ints(&c, "label_off", a.n, label_off);
    p_add_ints(&c, "label_len", a.n, label_len);
    p_add(&c, "grad_scale", P_SCALAR, P_IN, 1, &a.grad_scale);
    p_add(&c, "loss_scale", P_SCALAR, P_NULL, 1, NULL);
    p_add(&c, "loss", P_SCALAR, P_OUT, a.n, NULL);
    p_add(&c, "dlogits", P_COMPUTE, P_OUT, nl, NULL);
    p_run(&c);
    p_scratch_reset();
}

/* ---- argmax (greedy decoding) ---- */

typedef struct {
    int t, n, c;
} am_arg;

/* buf: logits [t][n][c], best [t][n] (int, assigned). */
static ds_status call_argmax(const p_side *s, void *const *buf, const void *arg)
{
    const am_arg *a = arg;
    return s->ops->argmax(s->ctx, a->t, a->n, a->c, buf[0], buf[1]);
}

static void argmax_all(void)
{
    static const am_arg a = {37, 5, 29}, wide = {3, 2, 300};
    const am_arg *cases[] = {&a, &wide};
    const char *names[] = {"t37 n5 c29, ties", "t3 n2 c300"};
    for (int k = 0; k < 2; k++) {
        const am_arg *x = cases[k];
        const size_t nl = (size_t)x->t * x->n * x->c;
        double *logits = p_rand(P_COMPUTE, nl, -4, 4);
        for (int j = 0; j < x->c; j++)   /* a tied frame: the lowest class wins */
            logits[j] = 1;
        logits[(size_t)x->c + 3] = logits[(size_t)x->c + 7] = 9;   /* a tie of two maxima */
        p_case c = {"argmax", names[k], .call = call_argmax, .arg = x};
        p_add(&c, "logits", P_COMPUTE, P_IN, nl, logits);
        p_add_ints(&c, "best", (size_t)x->t * x->n, NULL);
        p_run(&c);
    }
    p_scratch_reset();
}

/* ---- loss_total ---- */

typedef struct {
    int n;
    double norm;
} lt_arg;

/* buf: norm [1] (scalar), loss [n] (scalar), out [DS_LOSS_SCALARS] (scalar). */
static ds_status call_loss_total(const p_side *s, void *const *buf, const void *arg)
{
    const lt_arg *a = arg;
    return s->ops->loss_total(s->ctx, a->n, buf[0], buf[1], buf[2]);
}

static void loss_total_case(const char *name, const lt_arg *a, const double *loss)
{
    p_case c = {"loss_total", name, .call = call_loss_total, .arg = a};
    p_add(&c, "norm", P_SCALAR, P_IN, 1, &a->norm);   /* the batch's, in backend memory */
    p_add(&c, "loss", P_SCALAR, P_IN, a->n, loss);
    p_add(&c, "out", P_SCALAR, P_OUT, DS_LOSS_SCALARS, NULL);
    p_run(&c);
}

static void loss_total_all(void)
{
    static const lt_arg a = {7, 4.5}, all_inf = {3, 3};
    double *loss = p_rand(P_SCALAR, a.n, 0, 30), *inf = p_vec(all_inf.n);
    loss[2] = loss[5] = INFINITY;
    for (int i = 0; i < all_inf.n; i++)
        inf[i] = INFINITY;
    loss_total_case("n7, 2 infinite", &a, loss);
    loss_total_case("n3, all infinite", &all_inf, inf);
    p_scratch_reset();
}

void p_ctc_cases(void)
{
    ctc_all();
    ctc_big();
    argmax_all();
    loss_total_all();
}
