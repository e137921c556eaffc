/* ctc_torch_check.c - compares our ctc_loss with PyTorch's on the cases
 * written by tests/peer/ctc_cases.py (see there for the file layout).
 *
 * usage: ctc_torch_check CASES.h5 [BACKEND]
 *        (BACKEND: default $DSTRAIN_TEST_BACKEND, else cpu)
 *
 * For every case, in FP64 and FP32 logits: the pattern of infinite losses
 * must match, and the finite losses (FP64 in both, the scalar role) and the
 * gradient must agree within a relative error (2-norm of the difference over
 * the larger 2-norm) of 1e-9 in FP64 and 1e-4 in FP32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "h5_io.h"
#include "testutil.h"

/* One case as read from the file, host side. */
typedef struct {
    int t, n, c, blank, total, max_label_len;
    double scale;
    double *logits, *loss, *grad;        /* torch: [t][n][c], [n], [t][n][c] */
    int *len, *labels, *off, *lab_len;
} ctc_case;

static const ds_backend *be;
static ds_ctx *ctx;

static void free_case(ctc_case *k)
{
    free(k->logits);
    free(k->loss);
    free(k->grad);
    free(k->len);
    free(k->labels);
    free(k->off);
    free(k->lab_len);
    memset(k, 0, sizeof *k);
}

/* Dimensions of dataset name of group g, which must have the given rank. */
static ds_status read_dims(hid_t g, const char *name, int want_rank, hsize_t dims[DS_H5_MAX_RANK])
{
    int rank;
    DS_TRY(ds_h5_shape(g, name, &rank, dims));
    return rank == want_rank ? DS_OK : DS_FAIL(DS_ERR_IO, "%s: rank %d, want %d", name, rank,
                                                 want_rank);
}

/* Case group g into k. */
static ds_status read_case(hid_t g, ctc_case *k)
{
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(read_dims(g, "logits", 3, dims));
    k->t = (int)dims[0];
    k->n = (int)dims[1];
    k->c = (int)dims[2];
    DS_TRY(read_dims(g, "labels", 1, dims));
    k->total = (int)dims[0];
    size_t tnc = (size_t)k->t * k->n * k->c;
    int *blank;
    double *scale;
    DS_TRY(ds_h5_read_new(g, "blank", DS_I32, 1, (void **)&blank));
    k->blank = *blank;
    free(blank);
    DS_TRY(ds_h5_read_new(g, "grad_scale", DS_F64, 1, (void **)&scale));
    k->scale = *scale;
    free(scale);
    DS_TRY(ds_h5_read_new(g, "logits", DS_F64, tnc, (void **)&k->logits));
    DS_TRY(ds_h5_read_new(g, "loss", DS_F64, (size_t)k->n, (void **)&k->loss));
    DS_TRY(ds_h5_read_new(g, "grad", DS_F64, tnc, (void **)&k->grad));
    DS_TRY(ds_h5_read_new(g, "len", DS_I32, (size_t)k->n, (void **)&k->len));
    DS_TRY(ds_h5_read_new(g, "labels", DS_I32, (size_t)k->total, (void **)&k->labels));
    DS_TRY(ds_h5_read_new(g, "label_off", DS_I32, (size_t)k->n, (void **)&k->off));
    DS_TRY(ds_h5_read_new(g, "label_len", DS_I32, (size_t)k->n, (void **)&k->lab_len));
    k->max_label_len = 0;
    for (int i = 0; i < k->n; i++)
        k->max_label_len = k->lab_len[i] > k->max_label_len ? k->lab_len[i] : k->max_label_len;
    return DS_OK;
}

/* Our loss [n] and gradient [t][n][c] for case k in dtype dt. */
static ds_status run_ours(ds_dtype dt, const ctc_case *k, double *loss, double *grad)
{
    const ds_ops *ops = be->ops(dt);
    size_t tnc = (size_t)k->t * k->n * k->c;
    void *x = NULL, *len = NULL, *lab = NULL, *off = NULL, *ll = NULL, *lo = NULL, *g = NULL,
         *w = NULL, *scale = t_scalar(be, ctx, k->scale);   /* the batch's, in backend memory */
    ds_status st;
    DS_TRY_GOTO(st, t_new_real(be, ctx, dt, tnc, k->logits, &x), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, k->n, k->len, &len), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, k->total, k->labels, &lab), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, k->n, k->off, &off), out);
    DS_TRY_GOTO(st, t_new_int(be, ctx, k->n, k->lab_len, &ll), out);
    DS_TRY_GOTO(st, be->alloc(ctx, DS_F64, k->n, &lo), out);   /* losses: scalar role */
    DS_TRY_GOTO(st, be->alloc(ctx, dt, tnc, &g), out);
    size_t ws = ops->ctc_work(k->t, k->n, k->c, k->max_label_len);
    DS_TRY_GOTO(st, be->alloc(ctx, dt, ws ? ws : 1, &w), out);
    DS_TRY_GOTO(st, ops->ctc_loss(ctx, k->t, k->n, k->c, k->blank, x, len, lab, off, ll,
                                  k->max_label_len, scale, NULL, lo, g, w), out);
    DS_TRY_GOTO(st, t_get_real(be, ctx, DS_F64, k->n, lo, loss), out);
    DS_TRY_GOTO(st, t_get_real(be, ctx, dt, tnc, g, grad), out);
out:
    t_release_all(be, ctx, (void *[]){x, len, lab, off, ll, lo, g, w, scale}, 9);
    return st;
}

/* Worst errors over all cases, per dtype. */
typedef struct {
    double loss_rel, grad_rel, grad_abs;
} errs;

/* Relative error of the finite losses; counts infinities that disagree. */
static double loss_rel_err(const double *ours, const double *ref, int n, int *inf_mismatch)
{
    double d = 0, nr = 0, no = 0;
    *inf_mismatch = 0;
    for (int i = 0; i < n; i++) {
        if (isinf(ref[i]) || isinf(ours[i])) {
            *inf_mismatch += !(isinf(ref[i]) && isinf(ours[i]) && ours[i] > 0);
            continue;
        }
        d += (ours[i] - ref[i]) * (ours[i] - ref[i]);
        nr += ref[i] * ref[i];
        no += ours[i] * ours[i];
    }
    double den = fmax(sqrt(nr), sqrt(no));
    return den > 0 ? sqrt(d) / den : (d > 0 ? INFINITY : 0);   /* NaN gives NaN */
}

static int check_case(const char *grp, const ctc_case *k, ds_dtype dt, double tol, errs *e)
{
    size_t tnc = (size_t)k->t * k->n * k->c;
    double *loss = malloc(k->n * sizeof *loss), *grad = malloc((tnc ? tnc : 1) * sizeof *grad);
    if (!loss || !grad) {
        T_CHECK(0, "%s: out of memory", grp);
        free(loss);
        free(grad);
        return 1;
    }
    ds_status st = run_ours(dt, k, loss, grad);
    T_CHECK(st == DS_OK, "%s %s: ctc_loss: %s", grp, ds_dtype_name(dt), ds_status_last_error());
    if (st == DS_OK) {
        int bad_inf;
        double lr = loss_rel_err(loss, k->loss, k->n, &bad_inf);
        double gr = t_rel_err(grad, k->grad, tnc), ga = t_max_abs_diff(grad, k->grad, tnc);
        e->loss_rel = fmax(e->loss_rel, lr);
        e->grad_rel = fmax(e->grad_rel, gr);
        e->grad_abs = fmax(e->grad_abs, ga);
        T_CHECK(bad_inf == 0, "%s %s: %d infinite losses disagree", grp, ds_dtype_name(dt),
                bad_inf);
        T_CHECK(lr <= tol, "%s %s: loss rel err %.3g > %g", grp, ds_dtype_name(dt), lr, tol);
        T_CHECK(gr <= tol, "%s %s: grad rel err %.3g > %g", grp, ds_dtype_name(dt), gr, tol);
    }
    free(loss);
    free(grad);
    return 0;
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
        ctc_case k = {0};
        hid_t g = H5Gopen2(f, grp, H5P_DEFAULT);
        ds_status st = g < 0 ? DS_FAIL(DS_ERR_IO, "%s: no such group", grp) : read_case(g, &k);
        if (g >= 0)
            H5Gclose(g);
        T_CHECK(st == DS_OK, "%s: %s", grp, ds_status_last_error());
        if (st == DS_OK) {
            check_case(grp, &k, DS_F64, 1e-9, &e64);
            check_case(grp, &k, DS_F32, 1e-4, &e32);
        }
        free_case(&k);
    }
    printf("%d cases\n", (int)num);
    printf("float64: max loss rel err %.3g, max grad rel err %.3g, max grad abs err %.3g\n",
           e64.loss_rel, e64.grad_rel, e64.grad_abs);
    printf("float32: max loss rel err %.3g, max grad rel err %.3g, max grad abs err %.3g\n",
           e32.loss_rel, e32.grad_rel, e32.grad_abs);
    ds_h5_close(f);
    be->ctx_destroy(ctx);
    return t_finish("ctc_torch_check");
}
