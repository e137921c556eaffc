/* harness.c - host scratch, side memory, comparison and the case runner of
 * the parity harness (parity.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "parity.h"

/* ---- host scratch ---- */

static void **scratch;
static size_t scratch_n, scratch_cap;

void p_fatal(ds_status s, const char *what)
{
    fprintf(stderr, "parity: fatal: %s: %s: %s\n", what, ds_status_name(s), ds_status_last_error());
    exit(2);
}

static void *keep(void *p)
{
    if (!p)
        p_fatal(DS_ERR_MEM, "host scratch");
    if (scratch_n == scratch_cap) {
        scratch_cap = scratch_cap ? 2 * scratch_cap : 64;
        void **grown = realloc(scratch, scratch_cap * sizeof *grown);
        if (!grown)
            p_fatal(DS_ERR_MEM, "host scratch list");
        scratch = grown;
    }
    scratch[scratch_n++] = p;
    return p;
}

double *p_vec(size_t n) { return keep(calloc(n ? n : 1, sizeof(double))); }

int *p_ivec(size_t n) { return keep(calloc(n ? n : 1, sizeof(int))); }

double *p_nans(size_t n)
{
    double *p = p_vec(n);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

void p_round(p_role r, double *x, size_t n)
{
    const ds_dtype t = p_dtype(&P.test, r);
    if (t == DS_F64 || n == 0)
        return;
    void *tmp = malloc(n * ds_dtype_size(t));
    if (!tmp)
        p_fatal(DS_ERR_MEM, "rounding buffer");
    ds_status st = ds_convert(t, tmp, DS_F64, x, n);
    if (st == DS_OK)
        st = ds_convert(DS_F64, x, t, tmp, n);
    free(tmp);
    if (st != DS_OK)
        p_fatal(st, "rounding to the tested dtype");
}

double *p_rand(p_role r, size_t n, double lo, double hi)
{
    double *p = p_vec(n);
    for (size_t i = 0; i < n; i++)
        p[i] = ds_rng_range(&P.rng, lo, hi);
    p_round(r, p, n);
    return p;
}

void p_scratch_reset(void)
{
    for (size_t i = 0; i < scratch_n; i++)
        free(scratch[i]);
    scratch_n = 0;
}

ds_view p_map_view(int n, int c, int t, int f)
{
    return (ds_view){n, c, t * f, (long)c * t * f, (long)t * f, 1, f};
}

ds_view p_seq_view(int n, int c, int t)
{
    return (ds_view){n, c, t, c, 1, (long)n * c, 1};
}

size_t p_at(const ds_view *v, int i, int ch, long p)
{
    return (size_t)(i * v->sn + ch * v->sc + p * v->sp);
}

void p_ragged_views(p_ragged out[P_RAGGED])
{
    /* conv maps: 3 utterances of t=6 frames x f=4 bins, one of a single frame */
    static const int map_len[] = {6, 3, 1};
    /* sequences: unsorted lengths, none reaching t=8 */
    static const int seq_len[] = {5, 7, 1, 4};
    /* model-sized: the conv map after the first layer, the sequence of a layer */
    static const int big_map_len[] = {50, 31, 1, 44};
    static const int big_seq_len[] = {23, 60, 1, 57, 40, 60, 12, 33};
    out[0] = (p_ragged){"map n3 c2 t6 f4", p_map_view(3, 2, 6, 4), map_len};
    out[1] = (p_ragged){"seq t8 n4 c5", p_seq_view(4, 5, 8), seq_len};
    out[2] = (p_ragged){"map n4 c16 t50 f41", p_map_view(4, 16, 50, 41), big_map_len};
    out[3] = (p_ragged){"seq t60 n8 c96", p_seq_view(8, 96, 60), big_seq_len};
}

/* ---- side memory ---- */

ds_dtype p_dtype(const p_side *s, p_role r)
{
    switch (r) {
    case P_COMPUTE: return s->roles.compute;
    case P_MASTER: return s->roles.master;
    case P_STATS: return s->roles.stats;
    case P_SCALAR: return s->roles.scalar;
    case P_INT: return DS_I32;
    }
    return DS_F64;
}

/* A host staging buffer of n elements of t (at least one). */
static ds_status stage(ds_dtype t, size_t n, void **out)
{
    *out = malloc((n ? n : 1) * ds_dtype_size(t));
    return *out ? DS_OK : DS_FAIL(DS_ERR_MEM, "staging buffer of %zu elements", n);
}

ds_status p_put(const p_side *s, p_role r, size_t n, const double *h, void *dst)
{
    const ds_dtype t = p_dtype(s, r);
    void *tmp;
    if (n == 0)
        return DS_OK;
    DS_TRY(stage(t, n, &tmp));
    ds_status st = ds_convert(t, tmp, DS_F64, h, n);
    if (st == DS_OK)
        st = s->be->from_host(s->ctx, t, n, tmp, dst);
    /* from_host may queue the copy; the host buffer is free once it returns */
    free(tmp);
    return st;
}

ds_status p_upload(const p_side *s, p_role r, size_t n, const double *h, void **out)
{
    DS_TRY(s->be->alloc(s->ctx, p_dtype(s, r), n ? n : 1, out));
    return h ? p_put(s, r, n, h, *out) : DS_OK;
}

ds_status p_upload_ints(const p_side *s, size_t n, const int *h, void **out)
{
    DS_TRY(s->be->alloc(s->ctx, DS_I32, n ? n : 1, out));
    return n ? s->be->from_host(s->ctx, DS_I32, n, h, *out) : DS_OK;
}

ds_status p_download(const p_side *s, p_role r, size_t n, const void *d, double *h)
{
    const ds_dtype t = p_dtype(s, r);
    void *tmp;
    if (n == 0)
        return DS_OK;
    DS_TRY(stage(t, n, &tmp));
    ds_status st = s->be->to_host(s->ctx, t, n, d, tmp);
    if (st == DS_OK)
        st = ds_convert(DS_F64, h, t, tmp, n);
    free(tmp);
    return st;
}

ds_status p_poison(const p_side *s, p_role r, size_t n, void *dst)
{
    double *nan = malloc((n ? n : 1) * sizeof *nan);
    if (!nan)
        return DS_FAIL(DS_ERR_MEM, "poison buffer");
    for (size_t i = 0; i < n; i++)
        nan[i] = NAN;
    ds_status st = p_put(s, r, n, nan, dst);
    free(nan);
    return st;
}

ds_status p_scratch(const p_side *s, size_t n, void **out)
{
    DS_TRY(s->be->alloc(s->ctx, p_dtype(s, P_COMPUTE), n ? n : 1, out));
    return p_poison(s, P_COMPUTE, n, *out);
}

void p_release(const p_side *s, void *d)
{
    if (d)
        s->be->release(s->ctx, d);
}

/* ---- comparison ---- */

/* Whether a value that should be non-finite (an impossible alignment's
 * +inf, a skipped step's norm) came out the same. */
static int same_nonfinite(double got, double ref)
{
    return isnan(ref) ? isnan(got) : got == ref;
}

/* Elements beyond tolerance, counted once the norm check has failed: off by
 * more than tol relative to the element, or to the output's rms where the
 * element is small (so tiny reference values do not count every rounding). */
static long count_beyond(const double *got, const double *ref, size_t n, double tol,
                         double rms)
{
    long k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && isfinite(got[i]) &&
            fabs(got[i] - ref[i]) > tol * (rms > 0 ? fmax(fabs(ref[i]), rms) : 1))
            k++;
    return k;
}

void p_compare(p_verdict *v, const char *name, const double *got, const double *ref, size_t n,
               double tol)
{
    double d2 = 0, r2 = 0, amax = 0;
    long wrong = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(ref[i])) {
            wrong += !same_nonfinite(got[i], ref[i]);
            continue;
        }
        finite++;
        if (!isfinite(got[i])) {   /* NaN: never written (or a real NaN) */
            wrong++;
            continue;
        }
        double d = got[i] - ref[i];
        d2 += d * d;
        r2 += ref[i] * ref[i];
        amax = fmax(amax, fabs(got[i]));
    }
    /* norm-wise relative error; where the reference is all zeros (a zeroed
     * gradient, padding) every element must be within tol of zero instead */
    double err = r2 > 0 ? sqrt(d2) / sqrt(r2) : amax;
    if (wrong)
        err = NAN;
    int ok = wrong == 0 && err <= tol;
    if (!ok && !wrong)
        wrong = count_beyond(got, ref, n, tol, finite ? sqrt(r2 / (double)finite) : 0);
    double ratio = isnan(err) ? INFINITY : err / tol;
    if (!v->worst || ratio > v->ratio) {
        v->worst = name;
        v->err = err;
        v->ratio = ratio;
    }
    v->wrong += wrong;
    v->fail |= !ok;
    if (v->nlines < P_MAX_TENSORS)
        snprintf(v->lines[v->nlines++], sizeof v->lines[0],
                 "%-12s %9zu elements  rel err %9.2e  wrong %ld%s", name, n, err, wrong,
                 r2 > 0 || n == 0 ? "" : "  (reference all zero: absolute)");
}

void p_maybe_inject(const char *op, double *got, size_t n)
{
    if (!P.inject || P.injected || strcmp(P.inject, op) != 0 || n == 0)
        return;
    /* the largest finite element, off by 1e-3 of itself: a small fault, yet
     * far outside the float32 tolerance norm-wise */
    size_t at = 0;
    for (size_t i = 1; i < n; i++)
        if (isfinite(got[i]) && (!isfinite(got[at]) || fabs(got[i]) > fabs(got[at])))
            at = i;
    got[at] = got[at] != 0 && isfinite(got[at]) ? got[at] * (1 + 1e-3) : 1e-3;
    P.injected = 1;
    printf("# injected: %s output element %zu changed by 1e-3 relative\n", op, at);
}

/* ---- the runner ---- */

/* Runs c on side s; out[i] gets the final contents of each P_OUT and P_ACC
 * tensor (NULL for the others). */
static ds_status side_run(const p_side *s, const p_case *c, double **out)
{
    void *buf[P_MAX_TENSORS] = {0};
    ds_status st = DS_OK;
    for (int i = 0; i < c->nt && st == DS_OK; i++) {
        const p_tensor *t = &c->t[i];
        out[i] = NULL;
        if (t->kind == P_NULL)
            continue;
        if (t->role == P_INT)   /* an int output starts at -1: no class, no length */
            st = p_upload_ints(s, t->n, t->kind == P_OUT ? p_minus_ones(t->n) : t->ints, &buf[i]);
        else
            st = p_upload(s, t->role, t->n, t->kind == P_OUT ? p_nans(t->n) : t->init, &buf[i]);
    }
    if (st == DS_OK)
        st = c->call(s, buf, c->arg);
    for (int i = 0; i < c->nt && st == DS_OK; i++) {
        const p_tensor *t = &c->t[i];
        if (t->kind != P_OUT && t->kind != P_ACC)
            continue;
        out[i] = p_vec(t->n);
        st = p_download(s, t->role, t->n, buf[i], out[i]);
    }
    for (int i = 0; i < c->nt; i++)
        p_release(s, buf[i]);
    return st;
}

void p_run(const p_case *c)
{
    const double tol = p_tolerance(c->op, c->variant);
    double *got[P_MAX_TENSORS], *ref[P_MAX_TENSORS];
    p_verdict v = {0};
    if (!p_has_op(c->op)) {
        snprintf(v.note, sizeof v.note, "%s is missing from the table", c->op);
        v.fail = 1;
        p_report(c->op, c->variant, &v, tol);
        return;
    }
    ds_status st = side_run(&P.ref, c, ref);
    if (st != DS_OK)
        p_fatal(st, c->op);
    st = side_run(&P.test, c, got);
    if (st != DS_OK) {
        snprintf(v.note, sizeof v.note, "%s: %s", ds_status_name(st), ds_status_last_error());
        ds_status_clear_error();
        v.fail = 1;
    }
    for (int i = 0; i < c->nt && st == DS_OK; i++) {
        if (!got[i])
            continue;
        p_maybe_inject(c->op, got[i], c->t[i].n);
        p_compare(&v, c->t[i].name, got[i], ref[i], c->t[i].n, tol);
    }
    p_report(c->op, c->variant, &v, tol);
}

void p_add(p_case *c, const char *name, p_role r, p_kind k, size_t n, const double *init)
{
    if (c->nt == P_MAX_TENSORS)
        p_fatal(DS_ERR_ARG, "too many tensors in a case");
    c->t[c->nt++] = (p_tensor){.name = name, .role = r, .kind = k, .n = n, .init = init};
}

void p_add_ints(p_case *c, const char *name, size_t n, const int *v)
{
    if (c->nt == P_MAX_TENSORS)
        p_fatal(DS_ERR_ARG, "too many tensors in a case");
    c->t[c->nt++] = (p_tensor){.name = name, .role = P_INT, .kind = v ? P_IN : P_OUT, .n = n,
                               .ints = v};
}

int *p_minus_ones(size_t n)
{
    int *v = p_ivec(n);
    for (size_t i = 0; i < n; i++)
        v[i] = -1;
    return v;
}
