/* test_optim.c - the optimizer: learning-rate schedules, global-norm
 * clipping and the skip of a non-finite step (decided on the backend, inside
 * ds_optim_update, without touching the gradients), name parsing, and one or
 * two update steps worked out by hand (the long trajectories are checked
 * against torch.optim by optim_torch_check).
 *
 * usage: test_optim [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "optim.h"
#include "testutil.h"

static const ds_backend *be;
static ds_ctx *ctx;

/* Relative agreement; want == 0 demands exactly 0. */
static int close_to(double got, double want, double tol)
{
    return want == 0 ? got == 0 : fabs(got - want) <= tol * fabs(want);
}

/* Rounds x [n] to what a buffer of dt holds, so host sums see the same values. */
static void round_to(ds_dtype dt, double *x, size_t n)
{
    for (size_t i = 0; dt == DS_F32 && i < n; i++)
        x[i] = (float)x[i];
}

/* ---- learning-rate schedules ---- */

/* The defaults with schedule kind at base rate lr. */
static ds_optim_cfg lr_cfg(ds_lr_kind kind, double lr)
{
    ds_optim_cfg c = ds_optim_defaults();
    c.schedule = kind;
    c.lr = lr;
    return c;
}

static void check_lr(const ds_optim_cfg *c, long step, int epoch, double want, const char *what)
{
    double got = ds_optim_lr(c, step, epoch);
    T_CHECK(close_to(got, want, 1e-15), "%s: lr(step %ld, epoch %d) = %.17g, want %.17g", what,
            step, epoch, got, want);
}

static void test_lr_constant(void)
{
    ds_optim_cfg c = lr_cfg(DS_LR_CONSTANT, 0.25);
    c.warmup_steps = 0;
    check_lr(&c, 0, 0, 0.25, "constant");
    check_lr(&c, 12345, 0, 0.25, "constant");
    check_lr(&c, 7, 9, 0.25, "constant");
}

/* deepspeech.pytorch divides lr by anneal at the end of every epoch. */
static void test_lr_anneal(void)
{
    ds_optim_cfg c = lr_cfg(DS_LR_ANNEAL, 0.1);
    c.anneal = 1.1;
    check_lr(&c, 0, 0, 0.1, "anneal");
    check_lr(&c, 5000, 0, 0.1, "anneal");   /* the step does not matter */
    check_lr(&c, 10, 1, 0.1 / 1.1, "anneal");
    check_lr(&c, 10, 2, 0.1 / 1.21, "anneal");
    check_lr(&c, 10, 3, 0.1 / 1.331, "anneal");
    c.lr = 0.3;
    c.anneal = 2;
    check_lr(&c, 0, 3, 0.0375, "anneal 2");
    check_lr(&c, 0, 10, 0.3 / 1024, "anneal 2");
}

static void test_lr_poly(void)
{
    ds_optim_cfg c = lr_cfg(DS_LR_POLY, 0.2);
    c.total_steps = 100;
    c.poly_power = 2;
    check_lr(&c, 0, 0, 0.2, "poly^2");
    check_lr(&c, 50, 0, 0.05, "poly^2");
    check_lr(&c, 50, 7, 0.05, "poly^2");   /* the epoch does not matter */
    check_lr(&c, 90, 0, 0.002, "poly^2");
    check_lr(&c, 100, 0, 0, "poly^2");
    check_lr(&c, 130, 0, 0, "poly^2 past the end");
    c.poly_power = 1;
    check_lr(&c, 25, 0, 0.15, "poly^1");
    check_lr(&c, 99, 0, 0.002, "poly^1");
    check_lr(&c, 100, 0, 0, "poly^1");
    check_lr(&c, 250, 0, 0, "poly^1 past the end");
    c.poly_power = 0.5;
    check_lr(&c, 75, 0, 0.1, "poly^0.5");
    check_lr(&c, 100, 0, 0, "poly^0.5");
}

/* Warm-up multiplies whichever schedule by (step+1)/warmup. */
static void test_lr_warmup(void)
{
    ds_optim_cfg c = lr_cfg(DS_LR_CONSTANT, 0.1);
    c.warmup_steps = 4;
    const double want[6] = {0.025, 0.05, 0.075, 0.1, 0.1, 0.1};
    for (int s = 0; s < 6; s++)
        check_lr(&c, s, 0, want[s], "warm-up constant");
    c.schedule = DS_LR_ANNEAL;
    c.anneal = 1.1;
    check_lr(&c, 1, 1, 0.1 / 1.1 * 0.5, "warm-up anneal");
    check_lr(&c, 4, 1, 0.1 / 1.1, "warm-up anneal");
    c.schedule = DS_LR_POLY;
    c.lr = 0.2;
    c.total_steps = 100;
    c.poly_power = 1;
    c.warmup_steps = 10;
    check_lr(&c, 0, 0, 0.02, "warm-up poly");
    check_lr(&c, 4, 0, 0.2 * 0.96 * 0.5, "warm-up poly");
    check_lr(&c, 10, 0, 0.18, "warm-up poly");
}

/* ---- clipping ----
 * Clipping happens inside the update now (ds_optim_update), and the
 * gradient buffer is left as it was. A plain SGD step (no momentum, no
 * weight decay, lr 1) from p = 0 leaves p = -(the gradient it applied), so
 * the update shows the clip factor at work; ds_optim_read gives the norm,
 * the factor, the skip flag and the step count. */

typedef struct {
    ds_optim_status s;
    double *applied;   /* [n]: -p after the step, the gradient as applied */
    int grads_kept;    /* the gradient buffer holds what was uploaded, bit for bit */
    int p_kept;        /* p is still 0 everywhere, bit for bit */
} clip_result;

/* Same values, NaN matching NaN. */
static int same_values(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i]))))
            return 0;
    return 1;
}

/* Plain SGD: no momentum, no weight decay, clipping at max_norm (0: none),
 * so an update from p = 0 at lr 1 leaves p = -(the gradient applied). */
static ds_optim_cfg plain_sgd(double max_norm)
{
    ds_optim_cfg c = ds_optim_defaults();
    c.momentum = 0, c.nesterov = 0, c.weight_decay = 0, c.max_grad_norm = max_norm;
    return c;
}

/* One update of p = 0 with grads g [n] and the given max norm; *r gets the
 * status and what was applied (r->applied [n] allocated by the caller). */
static ds_status clip_once(ds_dtype dt, const double *g, size_t n, double max, clip_result *r)
{
    ds_optim_cfg c = plain_sgd(max);
    ds_optim *o = NULL;
    void *gb = NULL, *pb = NULL;
    double *back = malloc(n * sizeof *back);
    ds_status st;
    DS_TRY_GOTO(st, back ? DS_OK : DS_FAIL(DS_ERR_MEM, "host copy"), done);
    DS_TRY_GOTO(st, t_new_real(be, ctx, dt, n, g, &gb), done);
    DS_TRY_GOTO(st, be->alloc(ctx, dt, n, &pb), done);
    DS_TRY_GOTO(st, ds_optim_create(&c, be, ctx, dt, n, &o), done);
    DS_TRY_GOTO(st, ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 1.0), done);
    DS_TRY_GOTO(st, ds_optim_read(o, &r->s), done);
    DS_TRY_GOTO(st, t_get_real(be, ctx, dt, n, gb, back), done);
    r->grads_kept = same_values(back, g, n);
    DS_TRY_GOTO(st, t_get_real(be, ctx, dt, n, pb, r->applied), done);
    r->p_kept = 1;
    for (size_t i = 0; i < n; i++) {
        r->p_kept &= r->applied[i] == 0 && !signbit(r->applied[i]);
        r->applied[i] = -r->applied[i];
    }
done:
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){gb, pb}, 2);
    free(back);
    return st;
}

enum { CLIP_N = 1001 };

/* Random gradient whose last element dominates the norm, so a sum that
 * misses the tail of the buffer is far off. */
static void clip_grads(ds_dtype dt, double *g)
{
    ds_rng r;
    ds_rng_seed(&r, 77);
    t_fill_uniform(&r, g, CLIP_N, -1, 1);
    g[CLIP_N - 1] = 40;
    round_to(dt, g, CLIP_N);
}

static double host_norm(const double *g, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * g[i];
    return sqrt(s);
}

static int test_clip_scales(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double tol = dt == DS_F64 ? 1e-14 : 1e-7;
    double g[CLIP_N], out[CLIP_N], want[CLIP_N];
    clip_result r = {.applied = out};
    clip_grads(dt, g);
    double ref = host_norm(g, CLIP_N);

    T_OK(clip_once(dt, g, CLIP_N, 4 * ref, &r));
    T_CHECK(close_to(r.s.grad_norm, ref, tol), "%s: norm %.17g, direct sum %.17g", dn,
            r.s.grad_norm, ref);
    T_CHECK(r.s.clip == 1 && !r.s.skipped && r.s.steps == 1,
            "%s: below max norm: clip %.17g, skipped %d, steps %ld", dn, r.s.clip, r.s.skipped,
            r.s.steps);
    T_CHECK(same_values(out, g, CLIP_N), "%s: gradient scaled below max norm", dn);
    T_CHECK(r.grads_kept, "%s: the gradient buffer changed", dn);

    const double max = ref / 4, factor = max / (ref + 1e-6);   /* torch's factor */
    T_OK(clip_once(dt, g, CLIP_N, max, &r));
    T_CHECK(close_to(r.s.grad_norm, ref, tol), "%s: norm before clipping %.17g, want %.17g", dn,
            r.s.grad_norm, ref);
    T_CHECK(close_to(r.s.clip, factor, tol), "%s: clip factor %.17g, want %.17g", dn, r.s.clip,
            factor);
    T_CHECK(!r.s.skipped && r.s.steps == 1, "%s: clipped step skipped %d, steps %ld", dn,
            r.s.skipped, r.s.steps);
    T_CHECK(r.grads_kept, "%s: clipping changed the gradient buffer", dn);
    double after = host_norm(out, CLIP_N);
    T_CHECK(close_to(after, max, 1e-6), "%s: clipped norm %.17g, want ~%.17g", dn, after, max);
    for (int i = 0; i < CLIP_N; i++)
        want[i] = g[i] * factor;
    double e = t_rel_err(out, want, CLIP_N);
    T_CHECK(e <= (dt == DS_F64 ? 1e-14 : 1e-6), "%s: clipped update rel err %.3g", dn, e);
    printf("%s clip: norm rel err %.2e, factor rel err %.2e, clipped update rel err %.2e\n", dn,
           fabs(r.s.grad_norm - ref) / ref, fabs(r.s.clip - factor) / factor, e);
    return 0;
}

/* max_grad_norm <= 0 turns clipping off; the norm is still measured. */
static int test_clip_off(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    double g[CLIP_N], out[CLIP_N];
    clip_result r = {.applied = out};
    clip_grads(dt, g);
    double ref = host_norm(g, CLIP_N);
    const double maxes[2] = {0, -1};
    for (int k = 0; k < 2; k++) {
        T_OK(clip_once(dt, g, CLIP_N, maxes[k], &r));
        T_CHECK(close_to(r.s.grad_norm, ref, dt == DS_F64 ? 1e-14 : 1e-7),
                "%s max %g: norm %.17g, want %.17g", dn, maxes[k], r.s.grad_norm, ref);
        T_CHECK(r.s.clip == 1 && !r.s.skipped && r.s.steps == 1,
                "%s max %g: clip %.17g, skipped %d, steps %ld", dn, maxes[k], r.s.clip,
                r.s.skipped, r.s.steps);
        T_CHECK(same_values(out, g, CLIP_N), "%s max %g: gradient scaled", dn, maxes[k]);
        T_CHECK(r.grads_kept, "%s max %g: the gradient buffer changed", dn, maxes[k]);
    }
    return 0;
}

/* A NaN or Inf gradient: the norm says so, the step is skipped, nothing is
 * updated or scaled and no step is counted. */
static int test_clip_nonfinite(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double bad[3] = {NAN, INFINITY, -INFINITY};
    double g[CLIP_N], out[CLIP_N];
    clip_result r = {.applied = out};
    for (int k = 0; k < 3; k++) {
        clip_grads(dt, g);
        g[500] = bad[k];
        T_OK(clip_once(dt, g, CLIP_N, 1.0, &r));
        T_CHECK(!isfinite(r.s.grad_norm), "%s grad %g: norm %g, want non-finite", dn, bad[k],
                r.s.grad_norm);
        T_CHECK(r.s.skipped && r.s.steps == 0, "%s grad %g: skipped %d, steps %ld", dn, bad[k],
                r.s.skipped, r.s.steps);
        T_CHECK(r.p_kept, "%s grad %g: parameters were updated", dn, bad[k]);
        T_CHECK(r.grads_kept, "%s grad %g: the gradient buffer changed", dn, bad[k]);
    }
    return 0;
}

/* ---- update steps worked out by hand ---- */

static ds_status read_one(ds_dtype dt, const void *buf, double *x)
{
    return t_get_real(be, ctx, dt, 1, buf, x);
}

/* SGD, Nesterov momentum 0.9, weight decay 0.1, lr 0.5; p = 1, grads 2 then -1:
 * d = 2.1, v = 2.1, p = 1 - 0.5 * (2.1 + 0.9 * 2.1) = -0.995;
 * d = -1 - 0.0995 = -1.0995, v = 1.89 - 1.0995 = 0.7905,
 * p = -0.995 - 0.5 * (-1.0995 + 0.9 * 0.7905) = -0.800975. */
static int test_sgd_by_hand(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double tol = dt == DS_F64 ? 1e-15 : 1e-6;
    ds_optim_cfg c = ds_optim_defaults();
    c.kind = DS_OPT_SGD;
    c.momentum = 0.9;
    c.nesterov = 1;
    c.weight_decay = 0.1;
    const double g[2] = {2, -1}, p_want[2] = {-0.995, -0.800975}, v_want[2] = {2.1, 0.7905};
    double one = 1, p, v;
    void *pb, *gb;
    ds_optim *o;
    T_OK(t_new_real(be, ctx, dt, 1, &one, &pb));
    T_OK(be->alloc(ctx, dt, 1, &gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    for (int s = 0; s < 2; s++) {
        T_OK(t_put_real(be, ctx, dt, 1, &g[s], gb));
        T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.5));
        T_OK(read_one(dt, pb, &p));
        T_OK(read_one(dt, ds_optim_slot(o, 0), &v));
        T_CHECK(close_to(p, p_want[s], tol), "%s sgd step %d: p %.17g, want %g", dn, s, p,
                p_want[s]);
        T_CHECK(close_to(v, v_want[s], tol), "%s sgd step %d: v %.17g, want %g", dn, s, v,
                v_want[s]);
    }
    ds_optim_status os;
    T_OK(ds_optim_read(o, &os));
    T_CHECK(os.steps == 2 && !os.skipped && os.clip == 1 && close_to(os.grad_norm, 1, tol),
            "%s sgd: %ld steps taken, skipped %d, clip %g, last norm %.17g", dn, os.steps,
            os.skipped, os.clip, os.grad_norm);
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    return 0;
}

/* Dynamic loss scaling, worked by hand: plain SGD, lr 1, from p = 0, window
 * 3, scale 1024. Each step uploads its true gradient times the scale the
 * optimizer said the next step uses, as backward would make it. Steps 1-3
 * are clean (the 3rd doubles the scale to 2048), step 4 overflows (skipped,
 * back to 1024), step 5 is clean again. p moves by the true gradient only. */
static int test_loss_scale_dynamic(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    ds_optim_cfg c = plain_sgd(0);
    c.loss_scale = 1024, c.loss_scale_window = 3;
    const double g_true[5] = {2, -1, 0.5, INFINITY, 1};
    const double used[5] = {1024, 1024, 1024, 2048, 1024}, next[5] = {1024, 1024, 2048, 1024, 1024};
    const double p_want[5] = {-2, -1, -1.5, -1.5, -2.5};
    const long skips[5] = {0, 0, 0, 1, 1};
    void *pb, *gb;
    ds_optim *o;
    double p, dev_scale;
    T_OK(be->alloc(ctx, dt, 1, &pb));
    T_OK(be->alloc(ctx, dt, 1, &gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    for (int s = 0; s < 5; s++) {
        const double g = g_true[s] * used[s];
        ds_optim_status os;
        T_OK(t_put_real(be, ctx, dt, 1, &g, gb));
        T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 1.0));
        T_OK(ds_optim_read(o, &os));
        T_OK(read_one(dt, pb, &p));
        T_OK(t_get_real(be, ctx, DS_F64, 1, ds_optim_loss_scale(o), &dev_scale));
        T_CHECK(os.loss_scale == used[s] && os.next_scale == next[s] && dev_scale == next[s],
                "%s step %d: scale used %g then %g (device %g), want %g then %g", dn, s + 1,
                os.loss_scale, os.next_scale, dev_scale, used[s], next[s]);
        T_CHECK(os.skipped == (s == 3) && os.skips == skips[s],
                "%s step %d: skipped %d, %ld so far, want %d, %ld", dn, s + 1, os.skipped, os.skips,
                s == 3, skips[s]);
        T_CHECK(p == p_want[s], "%s step %d: p %.17g, want %g (the unscaled gradient)", dn, s + 1,
                p, p_want[s]);
        if (!os.skipped)
            T_CHECK(os.grad_norm == fabs(g_true[s]), "%s step %d: norm %.17g, want %g (unscaled)",
                    dn, s + 1, os.grad_norm, fabs(g_true[s]));
    }
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    return 0;
}

/* A static scale never changes, even on a skip; a dynamic one stops halving
 * at 1. */
static int test_loss_scale_static_and_floor(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double scales[2] = {512, 1};
    const long windows[2] = {0, 5};
    for (int k = 0; k < 2; k++) {
        ds_optim_cfg c = plain_sgd(0);
        c.loss_scale = scales[k], c.loss_scale_window = windows[k];
        const double inf = INFINITY;
        void *pb, *gb;
        ds_optim *o;
        ds_optim_status os;
        T_OK(be->alloc(ctx, dt, 1, &pb));
        T_OK(be->alloc(ctx, dt, 1, &gb));
        T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
        for (int s = 0; s < 3; s++) {
            T_OK(t_put_real(be, ctx, dt, 1, &inf, gb));
            T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 1.0));
        }
        T_OK(ds_optim_read(o, &os));
        T_CHECK(os.skipped && os.skips == 3 && os.steps == 0 && os.next_scale == scales[k],
                "%s %s scale %g: after 3 overflows skipped %d, %ld skips, %ld steps, scale %g",
                dn, windows[k] ? "dynamic" : "static", scales[k], os.skipped, os.skips, os.steps,
                os.next_scale);
        ds_optim_destroy(o);
        t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    }
    return 0;
}

/* Two groups (as fp16 runs keep BatchNorm apart): plain SGD, lr 1, from 0,
 * gradients 2 and 1: one global norm sqrt(5), one step counted, both groups
 * moved by their own gradient; and a call that leaves a group out fails. */
static int test_two_groups(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    ds_optim_cfg c = plain_sgd(0);
    const double g[2] = {2, 1};
    void *p[2], *gb[2];
    ds_optim *o;
    double got[2];
    ds_optim_status os;
    for (int k = 0; k < 2; k++) {
        T_OK(be->alloc(ctx, dt, 1, &p[k]));
        T_OK(t_new_real(be, ctx, dt, 1, &g[k], &gb[k]));
    }
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    T_OK(ds_optim_add_group(o, dt, 1));
    const ds_optim_bufs b[2] = {{p[0], gb[0], NULL}, {p[1], gb[1], NULL}};
    T_CHECK(ds_optim_update(o, b, 1, 1.0) == DS_ERR_ARG, "%s: an update leaving a group out ran", dn);
    T_OK(ds_optim_update(o, b, 2, 1.0));
    T_OK(ds_optim_read(o, &os));
    for (int k = 0; k < 2; k++)
        T_OK(read_one(dt, p[k], &got[k]));
    T_CHECK(got[0] == -2 && got[1] == -1, "%s two groups: p %g, %g, want -2, -1", dn, got[0], got[1]);
    T_CHECK(close_to(os.grad_norm, sqrt(5.0), dt == DS_F64 ? 1e-15 : 1e-7) && os.steps == 1,
            "%s two groups: norm %.17g (want sqrt 5), %ld steps (want 1)", dn, os.grad_norm, os.steps);
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){p[0], p[1], gb[0], gb[1]}, 4);
    return 0;
}

/* The AdamW of the worked example below: betas 0.9, 0.999, eps 1e-8, wd 0.5. */
static ds_optim_cfg adamw_by_hand_cfg(void)
{
    ds_optim_cfg c = ds_optim_defaults();
    c.kind = DS_OPT_ADAMW;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = 0.5;
    return c;
}

/* AdamW's first step, lr 0.1, wd 0.5; p = 2, g = -3: decay to 1.9, m = -0.3,
 * v = 0.009, mhat = -3, sqrt(vhat) = 3, p = 1.9 + 0.1 * 3 / (3 + eps). */
static int test_adamw_by_hand(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double tol = dt == DS_F64 ? 1e-15 : 1e-6;
    ds_optim_cfg c = adamw_by_hand_cfg();
    double p = 2, g = -3, m, v;
    void *pb, *gb;
    ds_optim *o;
    T_OK(t_new_real(be, ctx, dt, 1, &p, &pb));
    T_OK(t_new_real(be, ctx, dt, 1, &g, &gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.1));
    T_OK(read_one(dt, pb, &p));
    T_OK(read_one(dt, ds_optim_slot(o, 0), &m));
    T_OK(read_one(dt, ds_optim_slot(o, 1), &v));
    double p_want = 1.9 + 0.1 * 3 / (3 + 1e-8);
    T_CHECK(close_to(p, p_want, tol), "%s adamw: p %.17g, want %.17g", dn, p, p_want);
    T_CHECK(close_to(m, -0.3, tol), "%s adamw: m %.17g, want -0.3", dn, m);
    T_CHECK(close_to(v, 0.009, tol), "%s adamw: v %.17g, want 0.009", dn, v);
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    return 0;
}

/* A skipped update (NaN gradient) changes neither the parameters nor the
 * optimizer state nor the step count: the AdamW step after it is the first
 * one (bias correction of step 1), as worked out by hand above, and an SGD
 * momentum buffer is left alone. */
static int test_skip_then_step(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    const double tol = dt == DS_F64 ? 1e-15 : 1e-6;
    ds_optim_cfg c = adamw_by_hand_cfg();
    double p = 2, g = -3, nan = NAN, m, v;
    void *pb, *gb;
    ds_optim *o;
    ds_optim_status os;
    T_OK(t_new_real(be, ctx, dt, 1, &p, &pb));
    T_OK(t_new_real(be, ctx, dt, 1, &nan, &gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.1));
    T_OK(ds_optim_read(o, &os));
    T_OK(read_one(dt, pb, &p));
    T_OK(read_one(dt, ds_optim_slot(o, 0), &m));
    T_OK(read_one(dt, ds_optim_slot(o, 1), &v));
    T_CHECK(os.skipped && os.steps == 0 && isnan(os.grad_norm),
            "%s adamw NaN: skipped %d, steps %ld, norm %g", dn, os.skipped, os.steps, os.grad_norm);
    T_CHECK(p == 2 && m == 0 && v == 0, "%s adamw NaN: p %g m %g v %g changed", dn, p, m, v);
    T_OK(t_put_real(be, ctx, dt, 1, &g, gb));
    T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.1));
    T_OK(ds_optim_read(o, &os));
    T_OK(read_one(dt, pb, &p));
    double p_want = 1.9 + 0.1 * 3 / (3 + 1e-8);
    T_CHECK(!os.skipped && os.steps == 1 && os.clip == 1 && close_to(os.grad_norm, 3, tol),
            "%s adamw after a skip: skipped %d, steps %ld, clip %g, norm %.17g", dn, os.skipped,
            os.steps, os.clip, os.grad_norm);
    T_CHECK(close_to(p, p_want, tol), "%s adamw after a skip: p %.17g, want %.17g", dn, p, p_want);
    ds_optim_destroy(o);

    /* SGD with momentum: v keeps its value through a skipped step */
    c = ds_optim_defaults();
    c.momentum = 0.9;
    c.nesterov = 0;
    c.weight_decay = 0;
    p = 1, g = 2;
    T_OK(t_put_real(be, ctx, dt, 1, &p, pb));
    T_OK(t_put_real(be, ctx, dt, 1, &g, gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, 1, &o));
    T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.5));     /* v = 2, p = 0 */
    double inf = INFINITY;
    T_OK(t_put_real(be, ctx, dt, 1, &inf, gb));
    T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 0.5));     /* skipped */
    T_OK(ds_optim_read(o, &os));
    T_OK(read_one(dt, pb, &p));
    T_OK(read_one(dt, ds_optim_slot(o, 0), &v));
    T_CHECK(os.skipped && os.steps == 1 && p == 0 && v == 2,
            "%s sgd Inf after a step: skipped %d, steps %ld, p %g (want 0), v %g (want 2)", dn,
            os.skipped, os.steps, p, v);
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    return 0;
}

/* An update neither allocates nor waits for the backend: the host reads the
 * status only when it asks (ds_optim_read, one blocking read). */
static int test_update_does_not_wait(ds_dtype dt)
{
    const char *dn = ds_dtype_name(dt);
    ds_optim_cfg c = ds_optim_defaults();
    c.kind = DS_OPT_ADAMW;
    c.max_grad_norm = 0.5;
    double g[CLIP_N];
    clip_grads(dt, g);
    void *pb, *gb;
    ds_optim *o;
    ds_optim_status os;
    ds_backend_counters before, after, read;
    T_OK(be->alloc(ctx, dt, CLIP_N, &pb));
    T_OK(t_new_real(be, ctx, dt, CLIP_N, g, &gb));
    T_OK(ds_optim_create(&c, be, ctx, dt, CLIP_N, &o));
    be->counters(ctx, &before);
    for (int s = 0; s < 3; s++)
        T_OK(ds_optim_update(o, &(ds_optim_bufs){pb, gb, NULL}, 1, 1e-3));
    be->counters(ctx, &after);
    T_OK(ds_optim_read(o, &os));
    be->counters(ctx, &read);
    T_CHECK(after.to_host == before.to_host && after.allocs == before.allocs,
            "%s: 3 updates made %ld blocking reads and %ld allocations", dn,
            after.to_host - before.to_host, after.allocs - before.allocs);
    T_CHECK(read.to_host == after.to_host + 1, "%s: ds_optim_read made %ld blocking reads", dn,
            read.to_host - after.to_host);
    T_CHECK(os.steps == 3 && os.clip < 1 && !os.skipped, "%s: steps %ld, clip %g, skipped %d", dn,
            os.steps, os.clip, os.skipped);
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){pb, gb}, 2);
    return 0;
}

/* SGD without momentum keeps no state. */
static int test_sgd_no_slots(void)
{
    ds_optim_cfg c = ds_optim_defaults();
    c.momentum = 0;
    ds_optim *o;
    T_OK(ds_optim_create(&c, be, ctx, DS_F64, 8, &o));
    T_CHECK(ds_optim_slot(o, 0) == NULL && ds_optim_slot(o, 1) == NULL,
            "sgd without momentum allocated a slot");
    T_CHECK(ds_optim_slot(o, 2) == NULL && ds_optim_slot(o, -1) == NULL, "slot out of range");
    ds_optim_destroy(o);
    return 0;
}

/* ---- names and defaults ---- */

static void test_parse(void)
{
    const char *kinds[2] = {"sgd", "adamw"};
    for (int k = 0; k < 2; k++) {
        ds_opt_kind got = (ds_opt_kind)(1 - k);
        T_CHECK(ds_optim_parse_kind(kinds[k], &got) == DS_OK && got == (ds_opt_kind)k,
                "--optimizer %s not accepted", kinds[k]);
        T_CHECK(!strcmp(ds_optim_kind_name(got), kinds[k]), "kind name %s", kinds[k]);
    }
    const char *scheds[3] = {"constant", "anneal", "poly"};
    for (int k = 0; k < 3; k++) {
        ds_lr_kind got = (ds_lr_kind)((k + 1) % 3);
        T_CHECK(ds_optim_parse_schedule(scheds[k], &got) == DS_OK && got == (ds_lr_kind)k,
                "--lr-schedule %s not accepted", scheds[k]);
        T_CHECK(!strcmp(ds_optim_lr_schedule_name(got), scheds[k]), "schedule name %s", scheds[k]);
    }
    const char *bad[] = {"", "SGD", "adam", "sgd ", "adamw2", "constant"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ds_opt_kind k;
        T_CHECK(ds_optim_parse_kind(bad[i], &k) == DS_ERR_ARG, "--optimizer '%s' accepted", bad[i]);
    }
    const char *bad_sched[] = {"", "Poly", "linear", "polynomial", "anneal ", "sgd"};
    for (size_t i = 0; i < sizeof bad_sched / sizeof *bad_sched; i++) {
        ds_lr_kind k;
        T_CHECK(ds_optim_parse_schedule(bad_sched[i], &k) == DS_ERR_ARG,
                "--lr-schedule '%s' accepted", bad_sched[i]);
    }
    ds_status_clear_error();
}

/* deepspeech.pytorch's settings, as optim.h documents them. */
static void test_defaults(void)
{
    ds_optim_cfg c = ds_optim_defaults();
    T_CHECK(c.kind == DS_OPT_SGD && c.lr == 3e-4 && c.momentum == 0.9 && c.nesterov &&
                c.weight_decay == 1e-5 && c.schedule == DS_LR_ANNEAL && c.anneal == 1.1 &&
                c.max_grad_norm == 400 && c.warmup_steps == 0,
            "defaults differ from deepspeech.pytorch's");
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    T_CHECK(be->ops(DS_F64) && be->ops(DS_F32), "%s backend lacks float64 or float32 ops",
            be->name);
    if (!be->ops(DS_F64) || !be->ops(DS_F32))
        return t_finish("test_optim");
    T_OK(be->ctx_create(0, NULL, &ctx));

    test_lr_constant();
    test_lr_anneal();
    test_lr_poly();
    test_lr_warmup();
    const ds_dtype dts[2] = {DS_F64, DS_F32};
    for (int i = 0; i < 2; i++) {
        test_clip_scales(dts[i]);
        test_clip_off(dts[i]);
        test_clip_nonfinite(dts[i]);
        test_sgd_by_hand(dts[i]);
        test_loss_scale_dynamic(dts[i]);
        test_loss_scale_static_and_floor(dts[i]);
        test_two_groups(dts[i]);
        test_adamw_by_hand(dts[i]);
        test_skip_then_step(dts[i]);
        test_update_does_not_wait(dts[i]);
    }
    test_sgd_no_slots();
    test_parse();
    test_defaults();

    be->ctx_destroy(ctx);
    return t_finish("test_optim");
}
