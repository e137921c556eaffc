/* ops_optim.c - parity cases of the optimizer: sumsq, sgd_step, adamw_step
 * (grouped as tests/unit/test_optim.c and the peer check optim_vs_torch
 * group them). Optimizer scalars are doubles for every dtype (scalar role);
 * parameters and moments master role, gradients compute. */
#include <math.h>

#include "parity.h"

/* ---- the optimizer ---- */

/* scal [DS_OPT_BUFFER] as a step finds it: the sum of squares of g [n]
 * from sumsq (g made at loss scale `scale`), NaN where the step assigns,
 * steps taken, clean steps since the scale changed, steps skipped so far;
 * the learning rate is each case's (opt_with_lr). */
static double *opt_scalars_at(const double *g, size_t n, double steps, double scale, double clean)
{
    double *scal = p_nans(DS_OPT_BUFFER), s = 0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * g[i];
    scal[DS_OPT_SUMSQ] = s;
    scal[DS_OPT_STEPS] = steps;
    scal[DS_OPT_SCALE] = scale;
    scal[DS_OPT_CLEAN] = clean;
    scal[DS_OPT_SKIPS] = 2;
    return scal;
}

/* The same without loss scaling (scale 1). */
static double *opt_scalars(const double *g, size_t n, double steps)
{
    return opt_scalars_at(g, n, steps, 1, 0);
}

typedef struct {
    size_t n;
    ds_opt_hparams h;
    int work;              /* the update also writes the working copy w */
    double lr;             /* the update's learning rate: scal[DS_OPT_LR] */
} opt_arg;

/* A copy of scal [DS_OPT_BUFFER] with the case's learning rate in it. */
static double *opt_with_lr(const double *scal, double lr)
{
    double *s = p_vec(DS_OPT_BUFFER);
    for (int i = 0; i < DS_OPT_BUFFER; i++)
        s[i] = scal[i];
    s[DS_OPT_LR] = lr;
    return s;
}

/* buf: x [n], scal [DS_OPT_BUFFER] (scalar). */
static ds_status call_sumsq(const p_side *s, void *const *buf, const void *arg)
{
    const opt_arg *a = arg;
    return s->ops->sumsq(s->ctx, a->n, buf[0], buf[1]);
}

static void sumsq_big(void)
{
    /* 2^20 + 3: a tail after any power-of-two blocking */
    static const opt_arg a = {.n = (1u << 20) + 3};
    double *x = p_rand(P_COMPUTE, a.n, -1, 1), *scal = p_rand(P_SCALAR, DS_OPT_BUFFER, 0, 5);
    scal[DS_OPT_SUMSQ] = 1.5;   /* sumsq adds to it */
    p_case c = {"sumsq", "n1048579", .call = call_sumsq, .arg = &a};
    p_add(&c, "x", P_COMPUTE, P_IN, a.n, x);
    p_add(&c, "scal", P_SCALAR, P_ACC, DS_OPT_BUFFER, scal);
    p_run(&c);
    p_scratch_reset();
}

static void sumsq_all(void)
{
    static const opt_arg a = {.n = 1000};
    double *x = p_rand(P_COMPUTE, a.n, -1, 1), *xinf = p_vec(a.n);
    /* only SUMSQ changes: the others must come back as they went */
    double *scal = p_rand(P_SCALAR, DS_OPT_BUFFER, 0, 5);
    scal[DS_OPT_SUMSQ] = 1.5;   /* sumsq adds to it */
    for (size_t i = 0; i < a.n; i++)
        xinf[i] = x[i];
    xinf[a.n / 2] = -INFINITY;
    for (int bad = 0; bad <= 1; bad++) {
        p_case c = {"sumsq", bad ? "n1000 with -inf" : "n1000", .call = call_sumsq, .arg = &a};
        p_add(&c, "x", P_COMPUTE, P_IN, a.n, bad ? xinf : x);
        p_add(&c, "scal", P_SCALAR, P_ACC, DS_OPT_BUFFER, scal);
        p_run(&c);
    }
    p_scratch_reset();
}

/* buf: p [n] (master), g [n], v [n] (master, or NULL), w [n] (or NULL),
 * scal [DS_OPT_BUFFER]. */
static ds_status call_sgd(const p_side *s, void *const *buf, const void *arg)
{
    const opt_arg *a = arg;
    return s->ops->sgd_step(s->ctx, a->n, &a->h, buf[0], buf[1], buf[2], buf[3], buf[4]);
}

static void sgd_case(const char *name, const opt_arg *a, const double *p, const double *g,
                     const double *v, const double *scal)
{
    p_case c = {"sgd_step", name, .call = call_sgd, .arg = a};
    p_add(&c, "p", P_MASTER, P_ACC, a->n, p);
    p_add(&c, "g", P_COMPUTE, P_IN, a->n, g);
    p_add(&c, "v", P_MASTER, a->h.momentum != 0 ? P_ACC : P_NULL, a->n, v);
    p_add(&c, "w", P_COMPUTE, a->work ? P_OUT : P_NULL, a->n, NULL);
    p_add(&c, "scal", P_SCALAR, P_ACC, DS_OPT_BUFFER, opt_with_lr(scal, a->lr));
    p_run(&c);
}

/* A copy of g [n] with one infinite element: a step that must be skipped. */
static double *with_inf(const double *g, size_t n)
{
    double *b = p_vec(n);
    for (size_t i = 0; i < n; i++)
        b[i] = g[i];
    b[n / 3] = INFINITY;
    return b;
}

static void sgd_all(void)
{
    enum { N = 500 };
    double *p = p_rand(P_MASTER, N, -1, 1), *g = p_rand(P_COMPUTE, N, -1, 1);
    double *v = p_rand(P_MASTER, N, -0.5, 0.5), *ginf = with_inf(g, N);
    double *scal = opt_scalars(g, N, 3), *scal_inf = opt_scalars(ginf, N, 3);
    const double norm = sqrt(scal[DS_OPT_SUMSQ]);
    const ds_opt_hparams base = {.weight_decay = 0.01};
    opt_arg a[6];
    for (int i = 0; i < 6; i++)
        a[i] = (opt_arg){N, base, 0, 0.1};
    a[1].h.momentum = 0.9;
    a[2].h.momentum = 0.9, a[2].h.nesterov = 1;
    a[3].h.momentum = 0.9, a[3].h.max_norm = 0.25 * norm;   /* clipped */
    a[4].h.momentum = 0.9, a[4].h.max_norm = 2 * norm;      /* under the limit: clip 1 */
    a[3].work = a[4].work = 1;   /* and the working copy written */
    a[5].h.momentum = 0.9, a[5].h.max_norm = 1;             /* non-finite: skipped */
    sgd_case("n500 plain (v=NULL)", &a[0], p, g, v, scal);
    sgd_case("n500 momentum 0.9", &a[1], p, g, v, scal);
    sgd_case("n500 nesterov 0.9", &a[2], p, g, v, scal);
    sgd_case("n500 momentum, clipped", &a[3], p, g, v, scal);
    sgd_case("n500 momentum, below max_norm", &a[4], p, g, v, scal);
    sgd_case("n500 inf in g: skipped", &a[5], p, ginf, v, scal_inf);
    /* loss scaling: g holds gradients times the scale, the update divides it out */
    opt_arg st = a[3], dyn = a[3], second = a[2];
    dyn.h.scale_window = 3;
    dyn.work = 0;   /* skipped cases below: the working copy is left alone */
    sgd_case("n500 clipped, static scale 1024", &st, p, g, v, opt_scalars_at(g, N, 3, 1024, 0));
    sgd_case("n500 clipped, dynamic: 3rd clean step doubles", &dyn, p, g, v,
             opt_scalars_at(g, N, 3, 1024, 2));
    sgd_case("n500 inf, dynamic: skipped, scale halves", &dyn, p, ginf, v,
             opt_scalars_at(ginf, N, 3, 1024, 2));
    sgd_case("n500 inf, dynamic at the floor: stays 1", &dyn, p, ginf, v,
             opt_scalars_at(ginf, N, 3, 1, 1));
    /* a second group: the verdict in scal (here gain 0.25) applies, nothing is decided */
    double *decided = opt_scalars(g, N, 3);
    decided[DS_OPT_SKIPPED] = 0, decided[DS_OPT_GAIN] = 0.25;
    second.h.decided = 1, second.work = 1;
    sgd_case("n500 nesterov, second group (decided)", &second, p, g, v, decided);
    p_scratch_reset();
}

static void sgd_big(void)
{
    enum { N = 100003 };
    double *p = p_rand(P_MASTER, N, -1, 1), *g = p_rand(P_COMPUTE, N, -1, 1);
    double *v = p_rand(P_MASTER, N, -0.5, 0.5), *scal = opt_scalars(g, N, 3);
    opt_arg a = {N, {.momentum = 0.9, .nesterov = 1, .weight_decay = 0.01}, 0, 0.1};
    a.h.max_norm = 0.25 * sqrt(scal[DS_OPT_SUMSQ]);
    sgd_case("n100003 nesterov, clipped", &a, p, g, v, scal);
    p_scratch_reset();
}

/* buf: p [n], g [n], m [n], v [n] (p, m, v master), w [n] (or NULL),
 * scal [DS_OPT_BUFFER]. */
static ds_status call_adamw(const p_side *s, void *const *buf, const void *arg)
{
    const opt_arg *a = arg;
    return s->ops->adamw_step(s->ctx, a->n, &a->h, buf[0], buf[1], buf[2], buf[3], buf[4],
                              buf[5]);
}

static void adamw_case(const char *name, const opt_arg *a, const double *p, const double *g,
                       const double *m, const double *v, const double *scal)
{
    p_case c = {"adamw_step", name, .call = call_adamw, .arg = a};
    p_add(&c, "p", P_MASTER, P_ACC, a->n, p);
    p_add(&c, "g", P_COMPUTE, P_IN, a->n, g);
    p_add(&c, "m", P_MASTER, P_ACC, a->n, m);
    p_add(&c, "v", P_MASTER, P_ACC, a->n, v);
    p_add(&c, "w", P_COMPUTE, a->work ? P_OUT : P_NULL, a->n, NULL);
    p_add(&c, "scal", P_SCALAR, P_ACC, DS_OPT_BUFFER, opt_with_lr(scal, a->lr));
    p_run(&c);
}

static void adamw_all(void)
{
    enum { N = 500 };
    double *p = p_rand(P_MASTER, N, -1, 1), *g = p_rand(P_COMPUTE, N, -1, 1);
    double *m = p_rand(P_MASTER, N, -0.1, 0.1), *v = p_rand(P_MASTER, N, 0, 0.01);
    double *zero = p_vec(N), *ginf = with_inf(g, N);
    double *scal = opt_scalars(g, N, 4), *first = opt_scalars(g, N, 0);
    double *scal_inf = opt_scalars(ginf, N, 4);
    const ds_opt_hparams h = {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
    opt_arg a = {N, h, 1, 1e-3}, clip = {N, h, 0, 1e-3};
    clip.h.max_norm = 0.25 * sqrt(scal[DS_OPT_SUMSQ]);
    adamw_case("n500 first step (m=v=0)", &a, p, g, zero, zero, first);
    adamw_case("n500 step 5", &a, p, g, m, v, scal);
    adamw_case("n500 step 5, clipped", &clip, p, g, m, v, scal);
    adamw_case("n500 inf in g: skipped", &clip, p, ginf, m, v, scal_inf);
    opt_arg dyn = clip;
    dyn.h.scale_window = 2000;
    adamw_case("n500 step 5, clipped, dynamic scale 65536", &dyn, p, g, m, v,
               opt_scalars_at(g, N, 4, 65536, 17));
    p_scratch_reset();
}

static void adamw_big(void)
{
    enum { N = 100003 };
    double *p = p_rand(P_MASTER, N, -1, 1), *g = p_rand(P_COMPUTE, N, -1, 1);
    double *m = p_rand(P_MASTER, N, -0.1, 0.1), *v = p_rand(P_MASTER, N, 0, 0.01);
    double *scal = opt_scalars(g, N, 4);
    opt_arg a = {N, {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01}, 0, 1e-3};
    a.h.max_norm = 0.25 * sqrt(scal[DS_OPT_SUMSQ]);
    adamw_case("n100003 step 5, clipped", &a, p, g, m, v, scal);
    p_scratch_reset();
}

void p_optim_cases(void)
{
    sumsq_all();
    sumsq_big();
    sgd_all();
    sgd_big();
    adamw_all();
    adamw_big();
}
