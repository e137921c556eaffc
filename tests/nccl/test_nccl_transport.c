/* test_nccl_transport.c - the NCCL transport against the MPI transport on
 * the GPU, through mpi/reduce.c as training uses it.
 *
 * One gradient buffer of N elements (9 buckets, the last one short) and
 * one BatchNorm-sized buffer, on the GPU, with guard elements on either
 * side, are filled with each rank's inputs and reduced by a reducer over
 * the MPI transport (staged through pinned host memory) and by one over the
 * NCCL transport, four steps each: the buckets handed over in three parts
 * as backward would, a sum_now of the moments between two of them, finish,
 * then the results read back on the compute context (so the compute
 * stream's wait for the communication stream is what orders the read).
 * FP32 and FP64; random inputs, and small integers whose sum is exact.
 *   - 1 or 2 ranks: NCCL equals MPI bit for bit (one addition per element,
 *     and IEEE addition is commutative); 1 rank: both equal the inputs;
 *   - more ranks: within rounding (relative 1e-6 FP32, 1e-14 FP64);
 *   - integer inputs: every transport gives the exact sum;
 *   - guard elements untouched;
 *   - the NCCL transport's step makes no blocking read (backend counters);
 *   - its timing reports every bucket, and from the second step on the
 *     device times of an earlier step (reduce_ms > 0 with 2 ranks or more).
 * With --stall (2 ranks or more): after two steps the last rank stops
 * taking part (it sleeps, its communicator alive), and the others wait on
 * the GPU: the transport's watch must end the job within --timeout 5,
 * naming the rank, the bucket and the operation (tests/nccl/test_nccl_timeout.sh
 * checks the message and the time).
 *
 * usage: mpiexec -np N test_nccl_transport [--stall]
 * Prints "skipped: ..." and exits 77 without a CUDA device or NCCL, or when
 * this node has fewer GPUs than ranks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reduce.h"
#include "testutil.h"
#include "world.h"

enum { N = 300007, BUCKET = 36000, C2 = 2 * 96, GUARD = 64, STEPS = 4 };
#define SENTINEL (-7.0)

typedef struct {
    ds_world *w;
    const ds_backend *be;
    ds_ctx *ctx;
    ds_dtype dt;
    int integer;           /* inputs are small integers */
    void *grads, *mom;     /* backend: [GUARD + N + GUARD], [GUARD + C2 + GUARD] */
    double *in, *in_mom;   /* host inputs of this rank, with guards */
    unsigned char *out[2][STEPS], *out_mom[2][STEPS];   /* [transport][step] raw results */
} run;

static size_t es(const run *r) { return ds_dtype_size(r->dt); }

/* This rank's inputs for step s, guards around them. */
static void make_inputs(run *r, int s)
{
    ds_rng g;
    ds_rng_seed(&g, 1000u * (unsigned)s + 17u * (unsigned)r->w->rank + (unsigned)r->dt + 1);
    for (int i = 0; i < GUARD; i++)
        r->in[i] = r->in[GUARD + N + i] = r->in_mom[i] = r->in_mom[GUARD + C2 + i] = SENTINEL;
    for (int i = 0; i < N; i++)
        r->in[GUARD + i] = r->integer ? (double)((r->w->rank + 1) * (i % 61 + 1) * (s + 1))
                                      : ds_rng_range(&g, -1, 1) * (s + 1);
    for (int i = 0; i < C2; i++)
        r->in_mom[GUARD + i] = r->integer ? (double)((r->w->rank + 1) * (i + 1))
                                          : ds_rng_range(&g, 0, 100);
}

/* doubles -> dt bytes and back */
static void pack(const run *r, const double *x, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) {
        if (r->dt == DS_F32)
            ((float *)out)[i] = (float)x[i];
        else
            ((double *)out)[i] = x[i];
    }
}

static double at(const run *r, const unsigned char *raw, size_t i)
{
    return r->dt == DS_F32 ? ((const float *)raw)[i] : ((const double *)raw)[i];
}

/* One step through reducer red; results into out, out_mom. */
static ds_status one_step(run *r, ds_reducer *red, int s, int nccl, unsigned char *out,
                          unsigned char *out_mom, int stall)
{
    const ds_backend *be = r->be;
    make_inputs(r, s);
    unsigned char *tmp = out;   /* used as packing space before the result lands */
    pack(r, r->in, GUARD * 2 + N, tmp);
    DS_TRY(be->from_host(r->ctx, r->dt, GUARD * 2 + N, tmp, r->grads));
    pack(r, r->in_mom, GUARD * 2 + C2, out_mom);
    DS_TRY(be->from_host(r->ctx, r->dt, GUARD * 2 + C2, out_mom, r->mom));
    DS_TRY(be->sync(r->ctx));
    if (stall && r->w->rank == r->w->size - 1) {
        fprintf(stderr, "test_nccl_transport: rank %d stops taking part at step %d\n", r->w->rank, s);
        for (;;)
            pause();
    }
    ds_backend_counters c0, c1;
    be->counters(r->ctx, &c0);
    void *m = ds_elem(r->mom, r->dt, GUARD);
    ds_reduce_timing t = {0};
    DS_TRY(ds_reducer_begin(red));
    DS_TRY(ds_reducer_ready(red, N - N / 4));
    DS_TRY(ds_reducer_sum(red, m, C2, r->dt, "BatchNorm moments"));
    DS_TRY(ds_reducer_ready(red, N / 3));
    DS_TRY(ds_reducer_finish(red, &t));
    be->counters(r->ctx, &c1);
    if (nccl) {
        T_CHECK(c1.to_host == c0.to_host, "NCCL step made %ld blocking reads", c1.to_host - c0.to_host);
        T_CHECK(t.buckets == ds_reducer_buckets(red), "timing: %d of %d buckets", t.buckets,
                ds_reducer_buckets(red));
        /* one rank's allreduce in place does nothing: its time may round to 0 */
        T_CHECK(t.reduce_ms >= 0 && t.hidden_ms >= 0 && t.wait_ms >= 0 && t.backward_ms >= 0 &&
                (s == 0 || r->w->size == 1 || t.reduce_ms > 0),
                "step %d: device times of an earlier step: reduce %g, hidden %g, wait %g, "
                "backward %g ms", s, t.reduce_ms, t.hidden_ms, t.wait_ms, t.backward_ms);
    }
    DS_TRY(be->to_host(r->ctx, r->dt, GUARD * 2 + N, r->grads, out));
    return be->to_host(r->ctx, r->dt, GUARD * 2 + C2, r->mom, out_mom);
}

/* STEPS steps through a reducer of kind kind; 1 when it could be made. */
static int run_transport(run *r, ds_reduce_kind kind, int stall)
{
    const int k = kind == DS_REDUCE_NCCL;
    const ds_reducer_cfg rc = {.world = r->w, .kind = kind, .be = r->be, .ctx = r->ctx,
                               .device = r->w->device < 0 ? 0 : r->w->device, .dt = r->dt,
                               .grads = ds_elem(r->grads, r->dt, GUARD), .n = N,
                               .bucket_elems = BUCKET, .sum_capacity = C2};
    ds_reducer *red = NULL;
    ds_status st = ds_reducer_create(&rc, &red);
    if (st != DS_OK && strstr(ds_last_error(), "refuses two ranks on one GPU")) {
        if (r->w->rank == 0)
            printf("skipped: %s\n", ds_last_error());
        fflush(stdout);
        ds_world_finalize(r->w);
        exit(T_SKIP_CODE);
    }
    T_CHECK(st == DS_OK, "reducer (%s): %s", k ? "nccl" : "mpi", ds_last_error());
    if (st != DS_OK)
        return 0;
    T_CHECK(ds_reducer_buckets(red) == (N + BUCKET - 1) / BUCKET, "%d buckets", ds_reducer_buckets(red));
    for (int s = 0; s < STEPS && st == DS_OK; s++) {
        st = one_step(r, red, s, k, r->out[k][s], r->out_mom[k][s], stall && k && s == 2);
        T_CHECK(st == DS_OK, "%s step %d: %s", k ? "nccl" : "mpi", s, ds_last_error());
    }
    ds_reducer_destroy(red);
    return st == DS_OK;
}

/* NCCL's results against MPI's and the exact ones. */
static void compare(run *r)
{
    const int ranks = r->w->size;
    const char *tn = ds_dtype_name(r->dt), *kind = r->integer ? "integer" : "random";
    const double tol = r->dt == DS_F32 ? 1e-6 : 1e-14;
    const double tri = ranks * (ranks + 1) / 2.0;
    for (int s = 0; s < STEPS; s++) {
        const unsigned char *a = r->out[0][s], *b = r->out[1][s];
        const unsigned char *am = r->out_mom[0][s], *bm = r->out_mom[1][s];
        long guards = 0, exact_bad = 0;
        double num = 0, den = 0;
        for (size_t i = 0; i < GUARD; i++)
            for (int k = 0; k < 2; k++) {
                const unsigned char *x = r->out[k][s], *xm = r->out_mom[k][s];
                guards += (at(r, x, i) != SENTINEL) + (at(r, x, GUARD + N + i) != SENTINEL);
                guards += (at(r, xm, i) != SENTINEL) + (at(r, xm, GUARD + C2 + i) != SENTINEL);
            }
        for (size_t i = 0; i < N; i++) {
            const double x = at(r, a, GUARD + i), y = at(r, b, GUARD + i);
            num += (x - y) * (x - y);
            den += x * x;
            if (r->integer)
                exact_bad += (x != tri * (i % 61 + 1) * (s + 1)) + (y != tri * (i % 61 + 1) * (s + 1));
        }
        for (size_t i = 0; i < C2 && r->integer; i++)
            exact_bad += (at(r, am, GUARD + i) != tri * (i + 1)) + (at(r, bm, GUARD + i) != tri * (i + 1));
        T_CHECK(guards == 0, "%s %s step %d: %ld guard elements changed", tn, kind, s, guards);
        T_CHECK(exact_bad == 0, "%s %s step %d: %ld sums not exact", tn, kind, s, exact_bad);
        const size_t bytes = (GUARD * 2 + N) * es(r), mbytes = (GUARD * 2 + C2) * es(r);
        if (ranks <= 2) {
            T_CHECK(!memcmp(a, b, bytes), "%s %s step %d: NCCL and MPI gradients differ (rel %.3g)",
                    tn, kind, s, den > 0 ? sqrt(num / den) : 0.0);
            T_CHECK(!memcmp(am, bm, mbytes), "%s %s step %d: NCCL and MPI moments differ", tn, kind, s);
        } else {
            T_CHECK(den > 0 && sqrt(num / den) <= tol, "%s %s step %d: NCCL vs MPI relative %.3g > %g",
                    tn, kind, s, den > 0 ? sqrt(num / den) : 0.0, tol);
        }
        if (ranks == 1) {   /* the sum of one rank is its input */
            make_inputs(r, s);
            long moved = 0;
            for (size_t i = 0; i < N; i++)
                moved += at(r, a, GUARD + i) != (r->dt == DS_F32 ? (double)(float)r->in[GUARD + i]
                                                                 : r->in[GUARD + i]);
            T_CHECK(moved == 0, "%s %s step %d: one rank's sum changed %ld elements", tn, kind, s, moved);
        }
    }
}

static int alloc_run(run *r)
{
    const size_t n = GUARD * 2 + N, nm = GUARD * 2 + C2;
    T_OK(r->be->alloc(r->ctx, r->dt, n, &r->grads));
    T_OK(r->be->alloc(r->ctx, r->dt, nm, &r->mom));
    r->in = malloc(n * sizeof *r->in);
    r->in_mom = malloc(nm * sizeof *r->in_mom);
    int ok = r->in && r->in_mom;
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < STEPS; s++) {
            ok = ok && (r->out[k][s] = malloc(n * es(r))) && (r->out_mom[k][s] = malloc(nm * es(r)));
        }
    T_CHECK(ok, "host buffers");
    return ok ? 0 : 1;
}

static void free_run(run *r)
{
    r->be->release(r->ctx, r->grads);
    r->be->release(r->ctx, r->mom);
    free(r->in);
    free(r->in_mom);
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < STEPS; s++) {
            free(r->out[k][s]);
            free(r->out_mom[k][s]);
        }
}

static void skip(ds_world *w, const char *why)
{
    if (w->rank == 0)
        printf("skipped: %s\n", why);
    fflush(stdout);
    ds_world_finalize(w);
    exit(T_SKIP_CODE);
}

int main(int argc, char **argv)
{
    const int stall = argc > 1 && !strcmp(argv[1], "--stall");
    const ds_backend *be = ds_backend_get("cuda");
    const int gpus = be ? be->device_count() : 0;
    ds_world w;
    if (ds_world_init(&w, gpus, stall ? 5 : 120) != DS_OK) {
        fprintf(stderr, "test_nccl_transport: %s\n", ds_last_error());
        return 1;
    }
    char nccl[256];
    ds_reduce_describe(nccl, sizeof nccl);
    if (strstr(nccl, "not built"))
        skip(&w, "no CUDA device (this build has no NCCL transport)");
    if (!be || gpus == 0)
        skip(&w, "no CUDA device");
    if (gpus > 1 && w.local_size > gpus) {
        char why[128];
        snprintf(why, sizeof why, "%d ranks on this node need as many GPUs, %d visible", w.local_size,
                 gpus);
        skip(&w, why);
    }
    if (stall && w.size < 2)
        skip(&w, "--stall needs 2 ranks or more");
    ds_ctx *ctx = NULL;
    T_OK(be->ctx_create(w.device < 0 ? 0 : w.device, NULL, &ctx));
    const ds_dtype types[] = {DS_F32, DS_F64};
    for (int d = 0; d < 2; d++)
        for (int integer = 0; integer < 2; integer++) {
            if (stall && (d || integer))
                continue;
            run r = {.w = &w, .be = be, .ctx = ctx, .dt = types[d], .integer = integer};
            if (alloc_run(&r))
                break;
            if (!stall && !run_transport(&r, DS_REDUCE_MPI, 0))
                break;
            const int ok = run_transport(&r, DS_REDUCE_NCCL, stall);
            if (ok && !stall)
                compare(&r);
            free_run(&r);
        }
    be->ctx_destroy(ctx);
    int failed = t_failures, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm);
    if (w.rank == 0)
        printf("test_nccl_transport (%d rank%s%s): ", w.size, w.size > 1 ? "s" : "",
               stall ? ", --stall" : "");
    int rc = w.rank == 0 ? t_finish("") : 0;
    ds_world_finalize(&w);
    return any ? 1 : rc;
}
