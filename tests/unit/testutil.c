/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"

int t_failures, t_passes;

void t_must(ds_status s, const char *what)
{
    if (s == DS_OK)
        return;
    fprintf(stderr, "FATAL %s: %s: %s\n", what, ds_status_name(s), ds_status_last_error());
    exit(1);
}

double *t_zeros(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        t_must(DS_ERR_MEM, "calloc");
    return p;
}

int t_finish(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, t_passes, t_failures);
    return t_failures ? 1 : 0;
}

const ds_backend *t_backend(const char *name)
{
    const char *env = getenv("DSTRAIN_TEST_BACKEND");
    if (!name || !*name)
        name = env && *env ? env : "cpu";
    const ds_backend *be = ds_backend_get(name);
#ifdef DS_HAVE_CUDA_BACKEND
    if (!be && !strcmp(name, "cuda")) {   /* built, and its plugin would not load: a failure */
        fprintf(stderr, "FAIL: --device cuda: %s\n", ds_backend_missing(name));
        exit(1);
    }
#endif
    if (!be) {
        printf("skipped: backend %s not built\n", name);
        fflush(stdout);
        exit(T_SKIP_CODE);
    }
    if (be->device_count() < 1) {
        printf("skipped: backend %s has no device here\n", name);
        fflush(stdout);
        exit(T_SKIP_CODE);
    }
    return be;
}

double t_rel_err(const double *a, const double *b, size_t n)
{
    double d = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        na += a[i] * a[i];
        nb += b[i] * b[i];
    }
    double den = fmax(sqrt(na), sqrt(nb));
    return den > 0 ? sqrt(d) / den : 0;
}

double t_max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

void t_fill_uniform(ds_rng *r, double *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ds_rng_range(r, lo, hi);
}

void t_fd_grad(double (*loss)(void *arg), void *arg, double *x, size_t n, double h, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = loss(arg);
        x[i] = keep - h;
        double lm = loss(arg);
        x[i] = keep;
        g[i] = (lp - lm) / (2 * h);
    }
}

/* A host staging buffer for count elements of dt (at least one). */
static ds_status stage_new(ds_dtype dt, size_t count, void **out)
{
    *out = malloc((count ? count : 1) * ds_dtype_size(dt));
    return *out ? DS_OK : DS_FAIL(DS_ERR_MEM, "host buffer: %zu elements", count);
}

ds_status t_put_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const double *src, void *dst)
{
    void *tmp;
    DS_TRY(stage_new(dt, count, &tmp));
    ds_status st = ds_convert(dt, tmp, DS_F64, src, count);
    if (st == DS_OK)
        st = be->from_host(ctx, dt, count, tmp, dst);
    free(tmp);
    return st;
}

ds_status t_new_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const double *src, void **out)
{
    DS_TRY(be->alloc(ctx, dt, count ? count : 1, out));
    return t_put_real(be, ctx, dt, count, src, *out);
}

ds_status t_new_int(const ds_backend *be, ds_ctx *ctx, size_t count, const int *src, void **out)
{
    DS_TRY(be->alloc(ctx, DS_I32, count ? count : 1, out));
    return be->from_host(ctx, DS_I32, count, src, *out);
}

ds_status t_get_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const void *src, double *dst)
{
    void *tmp;
    DS_TRY(stage_new(dt, count, &tmp));
    ds_status st = be->to_host(ctx, dt, count, src, tmp);
    if (st == DS_OK)
        st = ds_convert(DS_F64, dst, dt, tmp, count);
    free(tmp);
    return st;
}

void *t_scalar(const ds_backend *be, ds_ctx *ctx, double value)
{
    void *p = NULL;
    t_must(be->alloc(ctx, DS_F64, 1, &p), "alloc a scalar");
    t_must(be->from_host(ctx, DS_F64, 1, &value, p), "upload a scalar");
    return p;
}

void t_release_all(const ds_backend *be, ds_ctx *ctx, void *const *bufs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (bufs[i])
            be->release(ctx, bufs[i]);
}
