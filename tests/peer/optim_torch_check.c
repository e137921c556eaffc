/* optim_torch_check.c - runs our optimizer on the trajectories written by
 * tests/peer/optim_cases.py (see there for the file layout) and compares
 * them with torch.optim's.
 *
 * usage: optim_torch_check CASES.h5
 *
 * usage: optim_torch_check CASES.h5 [BACKEND]
 *        (BACKEND: default $DSTRAIN_TEST_BACKEND, else cpu)
 *
 * Every step goes as in training: ds_optim_update at the case's lr, which
 * measures the global norm and clips (when the case clips) on the backend.
 * After each step the parameters must agree with torch's within a relative
 * error (2-norm of the difference over the larger 2-norm) of 1e-12 in FP64
 * and 1e-5 in FP32, and so must the gradient norm (ds_optim_read) and the
 * clip factor (torch's max_norm / (norm + 1e-6) when the norm exceeds
 * max_norm, else 1). The gradient buffer must come back unchanged. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "h5_io.h"
#include "optim.h"
#include "testutil.h"

/* One case as read from the file, host side. */
typedef struct {
    char name[64];
    int n, k;
    ds_optim_cfg cfg;
    double *params0;    /* [n] */
    double *grads;      /* [k][n], before clipping */
    double *lr;         /* [k] */
    double *params;     /* [k][n], torch's after each step */
    double *norms;      /* [k] */
} optim_case;

/* Worst errors over all cases, per dtype. */
typedef struct {
    double param_rel, norm_rel, clip_rel;
} errs;

static const ds_backend *be;
static ds_ctx *ctx;

static void free_case(optim_case *c)
{
    free(c->params0);
    free(c->grads);
    free(c->lr);
    free(c->params);
    free(c->norms);
    memset(c, 0, sizeof *c);
}

/* The optimizer settings stored as attributes of group g. */
static ds_status read_cfg(hid_t g, optim_case *c)
{
    char kind[16];
    double nesterov;
    ds_optim_cfg *o = &c->cfg;
    *o = ds_optim_defaults();
    o->schedule = DS_LR_CONSTANT;   /* the case gives the lr of every step */
    DS_TRY(ds_h5_read_attr_str(g, "name", c->name, sizeof c->name));
    DS_TRY(ds_h5_read_attr_str(g, "kind", kind, sizeof kind));
    DS_TRY(ds_optim_parse_kind(kind, &o->kind));
    DS_TRY(ds_h5_read_attr_f64(g, "momentum", &o->momentum));
    DS_TRY(ds_h5_read_attr_f64(g, "nesterov", &nesterov));
    o->nesterov = nesterov != 0;
    DS_TRY(ds_h5_read_attr_f64(g, "beta1", &o->beta1));
    DS_TRY(ds_h5_read_attr_f64(g, "beta2", &o->beta2));
    DS_TRY(ds_h5_read_attr_f64(g, "eps", &o->eps));
    DS_TRY(ds_h5_read_attr_f64(g, "weight_decay", &o->weight_decay));
    return ds_h5_read_attr_f64(g, "max_grad_norm", &o->max_grad_norm);
}

/* Case group g into c. */
static ds_status read_case(hid_t g, optim_case *c)
{
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(ds_h5_shape(g, "grads", &rank, dims));
    if (rank != 2)
        return DS_FAIL(DS_ERR_IO, "grads: rank %d, want 2", rank);
    c->k = (int)dims[0];
    c->n = (int)dims[1];
    DS_TRY(read_cfg(g, c));
    size_t kn = (size_t)c->k * c->n;
    DS_TRY(ds_h5_read_new(g, "params0", DS_F64, (size_t)c->n, (void **)&c->params0));
    DS_TRY(ds_h5_read_new(g, "grads", DS_F64, kn, (void **)&c->grads));
    DS_TRY(ds_h5_read_new(g, "lr", DS_F64, (size_t)c->k, (void **)&c->lr));
    DS_TRY(ds_h5_read_new(g, "params", DS_F64, kn, (void **)&c->params));
    return ds_h5_read_new(g, "norms", DS_F64, (size_t)c->k, (void **)&c->norms);
}

/* Our trajectory for case c in dtype dt: params [k][n], norms [k] and clip
 * factors [k]. *grads_changed counts steps whose gradient buffer changed. */
static ds_status run_ours(ds_dtype dt, const optim_case *c, double *params, double *norms,
                          double *clips, int *grads_changed)
{
    size_t n = (size_t)c->n;
    void *p = NULL, *g = NULL;
    ds_optim *o = NULL;
    ds_optim_status os = {0};
    double *sent = malloc(n * sizeof *sent), *back = malloc(n * sizeof *back);
    ds_status st;
    *grads_changed = 0;
    DS_TRY_GOTO(st, sent && back ? DS_OK : DS_FAIL(DS_ERR_MEM, "host copies"), out);
    DS_TRY_GOTO(st, t_new_real(be, ctx, dt, n, c->params0, &p), out);
    DS_TRY_GOTO(st, be->alloc(ctx, dt, n, &g), out);
    DS_TRY_GOTO(st, ds_optim_create(&c->cfg, be, ctx, dt, n, &o), out);
    for (int s = 0; s < c->k; s++) {
        DS_TRY_GOTO(st, t_put_real(be, ctx, dt, n, c->grads + s * n, g), out);
        DS_TRY_GOTO(st, t_get_real(be, ctx, dt, n, g, sent), out);   /* as rounded to dt */
        DS_TRY_GOTO(st, ds_optim_update(o, &(ds_optim_bufs){p, g, NULL}, 1, c->lr[s]), out);
        DS_TRY_GOTO(st, ds_optim_read(o, &os), out);
        norms[s] = os.grad_norm;
        clips[s] = os.clip;
        DS_TRY_GOTO(st, t_get_real(be, ctx, dt, n, p, params + s * n), out);
        DS_TRY_GOTO(st, t_get_real(be, ctx, dt, n, g, back), out);
        *grads_changed += memcmp(sent, back, n * sizeof *back) != 0;
    }
    if (os.steps != c->k || os.skipped)
        st = DS_FAIL(DS_ERR_ARG, "steps taken %ld (skipped %d), want %d", os.steps, os.skipped,
                     c->k);
out:
    ds_optim_destroy(o);
    t_release_all(be, ctx, (void *[]){p, g}, 2);
    free(sent);
    free(back);
    return st;
}

/* Compares every step of our trajectory with torch's. */
static void compare(const optim_case *c, ds_dtype dt, double tol, const double *params,
                    const double *norms, const double *clips, errs *e)
{
    double worst = 0, worst_norm = 0, worst_clip = 0;
    int worst_step = 0, n_clipped = 0;
    for (int s = 0; s < c->k; s++) {
        size_t off = (size_t)s * c->n;
        double r = t_rel_err(params + off, c->params + off, (size_t)c->n);
        if (!(r <= worst)) {   /* NaN counts as worst */
            worst = r;
            worst_step = s;
        }
        double nr = fabs(norms[s] - c->norms[s]) / c->norms[s];
        worst_norm = nr > worst_norm || isnan(nr) ? nr : worst_norm;
        const double mx = c->cfg.max_grad_norm;
        const int clipped = mx > 0 && c->norms[s] > mx;
        const double want = clipped ? mx / (c->norms[s] + 1e-6) : 1;
        double cr = fabs(clips[s] - want) / want;
        worst_clip = cr > worst_clip || isnan(cr) ? cr : worst_clip;
        n_clipped += clipped;
    }
    e->param_rel = fmax(e->param_rel, worst);
    e->norm_rel = fmax(e->norm_rel, worst_norm);
    e->clip_rel = fmax(e->clip_rel, worst_clip);
    T_CHECK(worst_clip <= tol, "%s %s: clip factor rel err %.3g > %g", c->name,
            ds_dtype_name(dt), worst_clip, tol);
    T_CHECK(c->cfg.max_grad_norm <= 0 || n_clipped > 0, "%s: a clipping case that never clips",
            c->name);
    T_CHECK(worst <= tol, "%s %s: params rel err %.3g at step %d > %g", c->name,
            ds_dtype_name(dt), worst, worst_step, tol);
    T_CHECK(worst_norm <= tol, "%s %s: grad norm rel err %.3g > %g", c->name,
            ds_dtype_name(dt), worst_norm, tol);
}

static void check_case(const optim_case *c, ds_dtype dt, double tol, errs *e)
{
    size_t kn = (size_t)c->k * c->n;
    double *params = malloc(kn * sizeof *params), *norms = malloc(c->k * sizeof *norms);
    double *clips = malloc(c->k * sizeof *clips);
    if (!params || !norms || !clips) {
        T_CHECK(0, "%s: out of memory", c->name);
    } else {
        int changed = 0;
        ds_status st = run_ours(dt, c, params, norms, clips, &changed);
        T_CHECK(st == DS_OK, "%s %s: %s", c->name, ds_dtype_name(dt), ds_status_last_error());
        T_CHECK(changed == 0, "%s %s: the update changed the gradient buffer in %d steps",
                c->name, ds_dtype_name(dt), changed);
        if (st == DS_OK)
            compare(c, dt, tol, params, norms, clips, e);
    }
    free(params);
    free(norms);
    free(clips);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s CASES.h5 [BACKEND]\n", argv[0]);
        return 2;
    }
    be = t_backend(argc > 2 ? argv[2] : NULL);
    hid_t f;
    double num = 0;
    T_OK(be->ops(DS_F64) && be->ops(DS_F32)
             ? DS_OK
             : DS_FAIL(DS_ERR_UNSUPPORTED, "%s backend lacks float64 or float32 ops", be->name));
    T_OK(be->ctx_create(0, NULL, &ctx));
    T_OK(ds_h5_open(argv[1], 0, &f));
    T_OK(ds_h5_read_attr_f64(f, "num_cases", &num));
    T_CHECK(num >= 1, "%s holds no cases", argv[1]);

    errs e64 = {0, 0, 0}, e32 = {0, 0, 0};
    for (int i = 0; i < (int)num; i++) {
        char grp[32];
        snprintf(grp, sizeof grp, "case_%03d", i);
        optim_case c = {0};
        hid_t g = H5Gopen2(f, grp, H5P_DEFAULT);
        ds_status st = g < 0 ? DS_FAIL(DS_ERR_IO, "%s: no such group", grp) : read_case(g, &c);
        if (g >= 0)
            H5Gclose(g);
        T_CHECK(st == DS_OK, "%s: %s", grp, ds_status_last_error());
        if (st == DS_OK) {
            check_case(&c, DS_F64, 1e-12, &e64);
            check_case(&c, DS_F32, 1e-5, &e32);
        }
        free_case(&c);
    }
    printf("%d cases\n", (int)num);
    printf("float64: max params rel err %.3g, max grad norm rel err %.3g, max clip factor rel err "
           "%.3g\n", e64.param_rel, e64.norm_rel, e64.clip_rel);
    printf("float32: max params rel err %.3g, max grad norm rel err %.3g, max clip factor rel err "
           "%.3g\n", e32.param_rel, e32.norm_rel, e32.clip_rel);
    ds_h5_close(f);
    be->ctx_destroy(ctx);
    return t_finish("optim_torch_check");
}
