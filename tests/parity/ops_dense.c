/* ops_dense.c - parity cases of hardtanh, mask, dropout, add, linear,
 * conv_to_seq and context (grouped as tests/unit/test_ops_dense.c groups
 * them; hardtanh, mask, dropout and add are the elementwise family,
 * cpu/elementwise.inc and cuda/elementwise.cu; conv_to_seq and context the
 * layout family). */
#include <math.h>
#include <stdio.h>

#include "parity.h"

/* ---- hardtanh ---- */

typedef struct {
    size_t n;
    double lo, hi;
} ht_arg;

/* buf: x [n], y [n]. */
static ds_status call_ht_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const ht_arg *a = arg;
    return s->ops->hardtanh_fwd(s->ctx, a->n, a->lo, a->hi, buf[0], buf[1]);
}

/* buf: x [n], clamped in place (y aliases x). */
static ds_status call_ht_fwd_inplace(const p_side *s, void *const *buf, const void *arg)
{
    const ht_arg *a = arg;
    return s->ops->hardtanh_fwd(s->ctx, a->n, a->lo, a->hi, buf[0], buf[0]);
}

/* buf: y [n], dy [n], dx [n]. */
static ds_status call_ht_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const ht_arg *a = arg;
    return s->ops->hardtanh_bwd(s->ctx, a->n, a->lo, a->hi, buf[0], buf[1], buf[2]);
}

static void hardtanh_case(const char *name, const ht_arg *a)
{
    double *x = p_rand(P_COMPUTE, a->n, -5, 25), *dy = p_rand(P_COMPUTE, a->n, -1, 1);
    double *dx0 = p_rand(P_COMPUTE, a->n, -1, 1), *y = p_vec(a->n);
    char variant[64];
    x[0] = a->lo, x[1] = isfinite(a->hi) ? a->hi : 1e4, x[2] = -0.0;
    for (size_t i = 0; i < a->n; i++)
        y[i] = x[i] < a->lo ? a->lo : x[i] > a->hi ? a->hi : x[i];

    p_case f = {"hardtanh_fwd", name, .call = call_ht_fwd, .arg = a};
    p_add(&f, "x", P_COMPUTE, P_IN, a->n, x);
    p_add(&f, "y", P_COMPUTE, P_OUT, a->n, NULL);
    p_run(&f);

    snprintf(variant, sizeof variant, "%s in place", name);
    p_case ip = {"hardtanh_fwd", variant, .call = call_ht_fwd_inplace, .arg = a};
    p_add(&ip, "x=y", P_COMPUTE, P_ACC, a->n, x);
    p_run(&ip);

    p_case b = {"hardtanh_bwd", name, .call = call_ht_bwd, .arg = a};
    p_add(&b, "y", P_COMPUTE, P_IN, a->n, y);
    p_add(&b, "dy", P_COMPUTE, P_IN, a->n, dy);
    p_add(&b, "dx", P_COMPUTE, P_ACC, a->n, dx0);
    p_run(&b);
    p_scratch_reset();
}

static void hardtanh_all(void)
{
    /* DeepSpeech2's clipped ReLU; x reaches past both ends, and holds the
     * ends themselves, where the gradient must stop */
    static const ht_arg small = {301, 0, 20}, big = {100003, 0, 20};
    hardtanh_case("n301 [0,20]", &small);
    hardtanh_case("n100003 [0,20]", &big);
    /* Jasper's ReLU: the same op with no upper clamp */
    static const ht_arg relu = {4099, 0, INFINITY};
    hardtanh_case("n4099 [0,inf) relu", &relu);
}

/* ---- mask ---- */

/* buf: len [n], x [view v] (padding zeroed in place). */
static ds_status call_mask(const p_side *s, void *const *buf, const void *arg)
{
    const p_ragged *a = arg;
    return s->ops->mask(s->ctx, &a->v, buf[0], buf[1]);
}

/* Random values everywhere, padding too: the op must zero exactly the
 * positions past each utterance's length. */
static void mask_case(const p_ragged *a)
{
    const size_t nx = (size_t)a->v.n * a->v.c * a->v.p;
    p_case m = {"mask", a->name, .call = call_mask, .arg = a};
    p_add_ints(&m, "len", a->v.n, a->len);
    p_add(&m, "x", P_COMPUTE, P_ACC, nx, p_rand(P_COMPUTE, nx, -1, 2));
    p_run(&m);
}

/* On the BatchNorm cases' views (p_ragged_views). */
static void mask_all(void)
{
    p_ragged r[P_RAGGED];
    p_ragged_views(r);
    for (int i = 0; i < P_RAGGED; i++)
        mask_case(&r[i]);
}

/* ---- dropout and the residual sum ---- */

typedef struct {
    size_t n;
    double p;
    double step;          /* the key's step, in a scalar buffer of the case */
    ds_dropout_key key;   /* step: set per side to that buffer */
} drop_arg;

/* a's key reading its step in the side's buffer step [1] (backend memory). */
static ds_dropout_key drop_key_at(const drop_arg *a, const void *step)
{
    ds_dropout_key k = a->key;
    k.step = step;
    return k;
}

/* buf: x [n], y [n], step [1]. */
static ds_status call_drop_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const drop_arg *a = arg;
    const ds_dropout_key k = drop_key_at(a, buf[2]);
    return s->ops->dropout_fwd(s->ctx, a->n, a->p, &k, buf[0], buf[1]);
}

/* buf: x [n], dropped in place (y aliases x), step [1]. */
static ds_status call_drop_fwd_inplace(const p_side *s, void *const *buf, const void *arg)
{
    const drop_arg *a = arg;
    const ds_dropout_key k = drop_key_at(a, buf[1]);
    return s->ops->dropout_fwd(s->ctx, a->n, a->p, &k, buf[0], buf[0]);
}

/* buf: dy [n], dx [n], step [1]. */
static ds_status call_drop_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const drop_arg *a = arg;
    const ds_dropout_key k = drop_key_at(a, buf[2]);
    return s->ops->dropout_bwd(s->ctx, a->n, a->p, &k, buf[0], buf[1]);
}

/* buf: x [n], y [n]. */
static ds_status call_add(const p_side *s, void *const *buf, const void *arg)
{
    const drop_arg *a = arg;
    return s->ops->add(s->ctx, a->n, buf[0], buf[1]);
}

/* Both sides draw the mask from the key: a single element kept on one side
 * and dropped on the other is an error of order one, far past any tolerance. */
static void dropout_case(const char *name, const drop_arg *a)
{
    double *x = p_rand(P_COMPUTE, a->n, -2, 2), *dy = p_rand(P_COMPUTE, a->n, -1, 1);
    double *dx0 = p_rand(P_COMPUTE, a->n, -1, 1);
    char variant[64];

    p_case f = {"dropout_fwd", name, .call = call_drop_fwd, .arg = a};
    p_add(&f, "x", P_COMPUTE, P_IN, a->n, x);
    p_add(&f, "y", P_COMPUTE, P_OUT, a->n, NULL);
    p_add(&f, "step", P_SCALAR, P_IN, 1, &a->step);   /* a per-batch scalar */
    p_run(&f);

    snprintf(variant, sizeof variant, "%s in place", name);
    p_case ip = {"dropout_fwd", variant, .call = call_drop_fwd_inplace, .arg = a};
    p_add(&ip, "x=y", P_COMPUTE, P_ACC, a->n, x);
    p_add(&ip, "step", P_SCALAR, P_IN, 1, &a->step);
    p_run(&ip);

    p_case b = {"dropout_bwd", name, .call = call_drop_bwd, .arg = a};
    p_add(&b, "dy", P_COMPUTE, P_IN, a->n, dy);
    p_add(&b, "dx", P_COMPUTE, P_ACC, a->n, dx0);
    p_add(&b, "step", P_SCALAR, P_IN, 1, &a->step);
    p_run(&b);

    p_case s = {"add", name, .call = call_add, .arg = a};
    p_add(&s, "x", P_COMPUTE, P_IN, a->n, x);
    p_add(&s, "y", P_COMPUTE, P_ACC, a->n, dx0);
    p_run(&s);
    p_scratch_reset();
}

static void dropout_all(void)
{
    /* sizes not a multiple of 4 (a Philox block's last elements), a large
     * step and layer, Jasper's 0.2 and DS1's 0.05 */
    static const drop_arg small = {1001, 0.2, 7, {.seed = 20240611u, .layer = 3, .part = 1}};
    static const drop_arg big = {100003, 0.05, 123456789u, {.seed = 0xfedcba9876543210ull,
                                                            .layer = 40, .part = 63}};
    /* a conv layer's numbering: runs of 1001, 2^36 apart (blocks past 2^32) */
    static const drop_arg runs = {4 * 1001, 0.2, 3, {.seed = 99u, .layer = 17, .part = 0,
                                                     .run = 1001, .stride = 1ull << 36}};
    dropout_case("n1001 p0.2", &small);
    dropout_case("n100003 p0.05", &big);
    dropout_case("runs 4x1001 p0.2", &runs);
}

/* ---- linear ---- */

typedef struct {
    int m, k, o;
} lin_arg;

/* buf: x [m][k], w [o][k], b [o] (or NULL), y [m][o]. */
static ds_status call_lin_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const lin_arg *a = arg;
    return s->ops->linear_fwd(s->ctx, a->m, a->k, a->o, buf[0], buf[1], buf[2], buf[3]);
}

/* buf: x [m][k], w [o][k], dy [m][o], dx [m][k] (or NULL), dw [o][k], db [o] (or NULL). */
static ds_status call_lin_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const lin_arg *a = arg;
    return s->ops->linear_bwd(s->ctx, a->m, a->k, a->o, buf[0], buf[1], buf[2], buf[3], buf[4],
                              buf[5]);
}

/* Forward with and without bias; backward with bias, without, and without dx. */
static void linear_case(const char *name, const lin_arg *pa)
{
    const lin_arg a = *pa;
    const size_t nx = (size_t)a.m * a.k, nw = (size_t)a.o * a.k, ny = (size_t)a.m * a.o;
    double *x = p_rand(P_COMPUTE, nx, -1, 1), *w = p_rand(P_COMPUTE, nw, -1, 1);
    double *b = p_rand(P_COMPUTE, a.o, -1, 1), *dy = p_rand(P_COMPUTE, ny, -1, 1);
    double *dx0 = p_rand(P_COMPUTE, nx, -1, 1), *dw0 = p_rand(P_COMPUTE, nw, -1, 1);
    double *db0 = p_rand(P_COMPUTE, a.o, -1, 1);
    struct {
        char name[64];
        int bias, dx;
    } v[] = {{"", 1, 1}, {"", 0, 1}, {"", 1, 0}};
    snprintf(v[0].name, sizeof v[0].name, "%s bias", name);
    snprintf(v[1].name, sizeof v[1].name, "%s no bias", name);
    snprintf(v[2].name, sizeof v[2].name, "%s dx=NULL", name);

    for (int bias = 1; bias >= 0; bias--) {
        p_case f = {"linear_fwd", v[1 - bias].name, .call = call_lin_fwd, .arg = pa};
        p_add(&f, "x", P_COMPUTE, P_IN, nx, x);
        p_add(&f, "w", P_COMPUTE, P_IN, nw, w);
        p_add(&f, "b", P_COMPUTE, bias ? P_IN : P_NULL, a.o, b);
        p_add(&f, "y", P_COMPUTE, P_OUT, ny, NULL);
        p_run(&f);
    }
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        p_case c = {"linear_bwd", v[i].name, .call = call_lin_bwd, .arg = pa};
        p_add(&c, "x", P_COMPUTE, P_IN, nx, x);
        p_add(&c, "w", P_COMPUTE, P_IN, nw, w);
        p_add(&c, "dy", P_COMPUTE, P_IN, ny, dy);
        p_add(&c, "dx", P_COMPUTE, v[i].dx ? P_ACC : P_NULL, nx, dx0);
        p_add(&c, "dw", P_COMPUTE, P_ACC, nw, dw0);
        p_add(&c, "db", P_COMPUTE, v[i].bias ? P_ACC : P_NULL, a.o, db0);
        p_run(&c);
    }
    p_scratch_reset();
}

static void linear_all(void)
{
    /* m = t*n rows of a sequence, k features, o outputs; then the model's
     * output layer (29 characters) */
    static const lin_arg small = {23, 19, 7}, big = {400, 192, 29};
    linear_case("m23 k19 o7", &small);
    linear_case("m400 k192 o29", &big);
}

/* ---- conv_to_seq ---- */

typedef struct {
    int n, c, t, f;
} cts_arg;

/* buf: x [n][c][t][f], y [t][n][c*f]. */
static ds_status call_cts(const p_side *s, void *const *buf, const void *arg)
{
    const cts_arg *a = arg;
    return s->ops->conv_to_seq(s->ctx, a->n, a->c, a->t, a->f, buf[0], buf[1]);
}

/* buf: dy [t][n][c*f], dx [n][c][t][f]. */
static ds_status call_cts_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const cts_arg *a = arg;
    return s->ops->conv_to_seq_bwd(s->ctx, a->n, a->c, a->t, a->f, buf[0], buf[1]);
}

static void conv_to_seq_case(const char *name, const cts_arg *a)
{
    const size_t nx = (size_t)a->n * a->c * a->t * a->f;
    double *x = p_rand(P_COMPUTE, nx, -1, 1), *dy = p_rand(P_COMPUTE, nx, -1, 1);
    double *dx0 = p_rand(P_COMPUTE, nx, -1, 1);

    p_case f = {"conv_to_seq", name, .call = call_cts, .arg = a};
    p_add(&f, "x", P_COMPUTE, P_IN, nx, x);
    p_add(&f, "y", P_COMPUTE, P_OUT, nx, NULL);
    p_run(&f);

    p_case b = {"conv_to_seq_bwd", name, .call = call_cts_bwd, .arg = a};
    p_add(&b, "dy", P_COMPUTE, P_IN, nx, dy);
    p_add(&b, "dx", P_COMPUTE, P_ACC, nx, dx0);
    p_run(&b);
    p_scratch_reset();
}

static void conv_to_seq_all(void)
{
    static const cts_arg small = {3, 4, 7, 5}, big = {4, 16, 50, 41};
    conv_to_seq_case("n3 c4 t7 f5", &small);
    conv_to_seq_case("n4 c16 t50 f41", &big);
}


/* ---- context windows ---- */

typedef struct {
    int n, t, f, c;
    const int *len;    /* [n] */
} ctx_arg;

/* buf: len [n], x [n][t][f], y [t][n][(2c+1)*f]. */
static ds_status call_ctx_fwd(const p_side *s, void *const *buf, const void *arg)
{
    const ctx_arg *a = arg;
    return s->ops->context_fwd(s->ctx, a->n, a->t, a->f, a->c, buf[0], buf[1], buf[2]);
}

/* buf: len [n], dy [t][n][(2c+1)*f], dx [n][t][f]. */
static ds_status call_ctx_bwd(const p_side *s, void *const *buf, const void *arg)
{
    const ctx_arg *a = arg;
    return s->ops->context_bwd(s->ctx, a->n, a->t, a->f, a->c, buf[0], buf[1], buf[2]);
}

static void context_case(const char *name, const ctx_arg *a)
{
    const size_t nx = (size_t)a->n * a->t * a->f, ny = nx * (size_t)(2 * a->c + 1);
    p_case f = {"context_fwd", name, .call = call_ctx_fwd, .arg = a};
    p_add_ints(&f, "len", a->n, a->len);
    p_add(&f, "x", P_COMPUTE, P_IN, nx, p_rand(P_COMPUTE, nx, -1, 1));
    p_add(&f, "y", P_COMPUTE, P_OUT, ny, NULL);
    p_run(&f);

    p_case b = {"context_bwd", name, .call = call_ctx_bwd, .arg = a};
    p_add_ints(&b, "len", a->n, a->len);
    p_add(&b, "dy", P_COMPUTE, P_IN, ny, p_rand(P_COMPUTE, ny, -1, 1));
    p_add(&b, "dx", P_COMPUTE, P_ACC, nx, p_rand(P_COMPUTE, nx, -1, 1));
    p_run(&b);
    p_scratch_reset();
}

static void context_all(void)
{
    /* ragged lengths, one empty utterance and one of a frame; DS1's input:
     * 26 MFCC with 9 frames each side */
    static const int small_len[] = {7, 3, 0, 1}, ds1_len[] = {120, 75, 1, 119};
    static const ctx_arg small = {4, 7, 3, 2, small_len}, ds1 = {4, 120, 26, 9, ds1_len};
    context_case("n4 t7 f3 c2", &small);
    context_case("ds1 n4 t120 f26 c9", &ds1);
}

void p_dense_cases(void)
{
    hardtanh_all();
    linear_all();
    conv_to_seq_all();
    mask_all();        /* after: the cases before them draw what they drew before */
    dropout_all();
    context_all();
}
