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
 *     device times of an earlier step (reduce_ms > 0 with 2 ranks or more)
 *     and its one sum between begin and finish;
 *   - overlap (NCCL only): a BatchNorm sum does not queue behind a gradient
 *     bucket in flight. Bucket 0 is handed with a ready event recorded on a
 *     side stream behind a host function that sleeps DELAY_MS on the last
 *     rank, so its allreduce cannot finish on any rank before then; the sum
 *     queued after it must be on the compute stream within QUICK_MS (a
 *     sum behind the bucket takes DELAY_MS), the sleep still running;
 *     then the step finishes and every sum is exact, and the step's timing
 *     (read one step later) counts the sum and, on the other ranks, bucket
 *     0 in flight beside it. At 1 rank the ordering half is checked;
 *   - order (NCCL only, 2 ranks or more): a BatchNorm sum sums what the
 *     compute stream's work queued before it leaves in the buffer: a copy
 *     queued there behind a host function that sleeps ORDER_MS, sum_now
 *     called at once, and the sum read back is exact (at 1 rank an in-place
 *     allreduce is the identity, so the order cannot show: skipped, said).
 * With --stall (2 ranks or more): after two steps the last rank stops
 * taking part (it sleeps, its communicator alive), and the others wait on
 * the GPU: the transport's watch must end the job within --timeout 5,
 * naming the rank, the bucket and the operation (tests/nccl/test_nccl_timeout.sh
 * checks the message and the time). The stalled step queues buckets only,
 * so that one watch alone can fire; --stall-sum stalls in a BatchNorm sum
 * alone instead, which the sums' own watch must end the same way.
 *
 * usage: mpiexec -np N test_nccl_transport [--stall | --stall-sum]
 * Prints "skipped: ..." and exits 77 without a CUDA device or NCCL, or when
 * this node has fewer GPUs than ranks. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reduce.h"
#include "testutil.h"
#include "transport.h"
#include "world.h"

enum { N = 300007, BUCKET = 36000, C2 = 2 * 96, GUARD = 64, STEPS = 4 };
enum { DELAY_MS = 400, QUICK_MS = 200 };   /* the overlap case */
enum { ORDER_MS = 300 };                    /* the order case */
enum { STALL_BUCKETS = 1, STALL_SUM = 2 };
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
static ds_status one_step(run *r, ds_reduce *red, int s, int nccl, unsigned char *out,
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
    void *m = ds_elem(r->mom, r->dt, GUARD);
    if (stall == STALL_SUM) {   /* the others wait in the sum alone */
        DS_TRY(ds_reduce_sum(red, m, C2, r->dt, "BatchNorm moments"));
        return be->to_host(r->ctx, r->dt, GUARD * 2 + C2, r->mom, out_mom);
    }
    ds_backend_counters c0, c1;
    be->counters(r->ctx, &c0);
    ds_reduce_timing t = {0};
    DS_TRY(ds_reduce_begin(red));
    DS_TRY(ds_reduce_ready(red, N - N / 4));
    if (!stall)   /* a stalled step waits in buckets alone: one watch can fire */
        DS_TRY(ds_reduce_sum(red, m, C2, r->dt, "BatchNorm moments"));
    DS_TRY(ds_reduce_ready(red, N / 3));
    DS_TRY(ds_reduce_finish(red, &t));
    be->counters(r->ctx, &c1);
    if (nccl) {
        T_CHECK(c1.to_host == c0.to_host, "NCCL step made %ld blocking reads", c1.to_host - c0.to_host);
        T_CHECK(t.buckets == ds_reduce_buckets(red), "timing: %d of %d buckets", t.buckets,
                ds_reduce_buckets(red));
        /* one rank's allreduce in place does nothing: its time may round to 0 */
        T_CHECK(t.reduce_ms >= 0 && t.hidden_ms >= 0 && t.wait_ms >= 0 && t.backward_ms >= 0 &&
                (s == 0 || r->w->size == 1 || t.reduce_ms > 0),
                "step %d: device times of an earlier step: reduce %g, hidden %g, wait %g, "
                "backward %g ms", s, t.reduce_ms, t.hidden_ms, t.wait_ms, t.backward_ms);
        /* the step read had one sum between begin and finish (none read at step 0) */
        T_CHECK(t.sums == (s > 0) && t.buckets_beside_sums <= t.buckets,
                "step %d: timing of an earlier step: %d sums, %g ms, %d buckets beside them", s,
                t.sums, t.sum_ms, t.buckets_beside_sums);
    }
    DS_TRY(be->to_host(r->ctx, r->dt, GUARD * 2 + N, r->grads, out));
    return be->to_host(r->ctx, r->dt, GUARD * 2 + C2, r->mom, out_mom);
}

/* STEPS steps through a reducer of kind kind; 1 when it could be made. */
static int run_transport(run *r, ds_reduce_kind kind, int stall)
{
    const int k = kind == DS_REDUCE_NCCL;
    const ds_reduce_cfg rc = {.world = r->w, .kind = kind, .be = r->be, .ctx = r->ctx,
                              .device = r->w->device < 0 ? 0 : r->w->device, .dt = r->dt,
                              .grads = ds_elem(r->grads, r->dt, GUARD), .n = N,
                              .bucket_elems = BUCKET, .sum_capacity = C2};
    ds_reduce *red = NULL;
    ds_status st = ds_reduce_create(&rc, &red);
    if (st != DS_OK && strstr(ds_status_last_error(), "refuses two ranks on one GPU")) {
        if (r->w->rank == 0)
            printf("skipped: %s\n", ds_status_last_error());
        fflush(stdout);
        ds_world_finalize(r->w);
        exit(T_SKIP_CODE);
    }
    T_CHECK(st == DS_OK, "reducer (%s): %s", k ? "nccl" : "mpi", ds_status_last_error());
    if (st != DS_OK)
        return 0;
    T_CHECK(ds_reduce_buckets(red) == (N + BUCKET - 1) / BUCKET, "%d buckets", ds_reduce_buckets(red));
    for (int s = 0; s < STEPS && st == DS_OK; s++) {
        st = one_step(r, red, s, k, r->out[k][s], r->out_mom[k][s], k && s == 2 ? stall : 0);
        T_CHECK(st == DS_OK, "%s step %d: %s", k ? "nccl" : "mpi", s, ds_status_last_error());
    }
    ds_reduce_destroy(red);
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
            long moved = 0, first = -1;
            for (size_t i = 0; i < N; i++) {
                const double want = r->dt == DS_F32 ? (double)(float)r->in[GUARD + i] : r->in[GUARD + i];
                if (at(r, a, GUARD + i) != want && first < 0)
                    first = (long)i;
                moved += at(r, a, GUARD + i) != want;
            }
            T_CHECK(moved == 0, "%s %s step %d: one rank's sum changed %ld elements (the first, %ld: "
                    "%.17g in, %.17g out)", tn, kind, s, moved, first,
                    first < 0 ? 0.0 : r->in[GUARD + first], first < 0 ? 0.0 : at(r, a, GUARD + first));
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

/* ---- overlap: a BatchNorm sum beside a gradient bucket in flight ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A host function on a stream: holds back what is queued after it there
 * for *(const int *)arg milliseconds. */
static const int delay_ms = DELAY_MS, order_ms = ORDER_MS;
static void CUDART_CB hold_stream(void *arg)
{
    usleep(*(const int *)arg * 1000);
}

typedef struct {
    ds_world *w;
    const ds_backend *be;
    ds_ctx *ctx, *side;            /* compute; the side stream bucket 0's event is on */
    ds_event *ready0, *ready;      /* side: bucket 0; compute: the other buckets */
    ds_transport *t;
    void *grads, *mom;             /* backend [N], [C2] F64 */
    double *in, *in_mom;           /* host [N], [C2] */
} overlap;

/* Inputs of step s: small integers, so that every sum is exact. */
static double ov_grad(int rank, size_t i, int s)
{
    return (double)((rank + 1) * (int)(i % 61 + 1) * (s + 1));
}

static double ov_mom(int rank, size_t i, int s)
{
    return (double)((rank + 1) * (int)(i + 1) * (s + 2));
}

/* Step s through the transport; with delay, bucket 0 is held back on the
 * last rank and the sum must not wait for it. timing: as finish gives it. */
static ds_status overlap_step(overlap *o, int s, int delay, ds_reduce_timing *timing)
{
    const ds_backend *be = o->be;
    const int rank = o->w->rank, last = o->w->size - 1;
    const int nb = (N + BUCKET - 1) / BUCKET;
    for (size_t i = 0; i < N; i++)
        o->in[i] = ov_grad(rank, i, s);
    for (size_t i = 0; i < C2; i++)
        o->in_mom[i] = ov_mom(rank, i, s);
    DS_TRY(be->from_host(o->ctx, DS_F64, N, o->in, o->grads));
    DS_TRY(be->from_host(o->ctx, DS_F64, C2, o->in_mom, o->mom));
    DS_TRY(be->sync(o->ctx));
    cudaStream_t side = (cudaStream_t)be->native_queue(o->side);
    DS_TRY(o->t->ops->begin(o->t));
    if (delay && rank == last) {
        cudaError_t e = cudaLaunchHostFunc(side, hold_stream, (void *)&delay_ms);
        if (e != cudaSuccess)
            return DS_FAIL(DS_ERR_BACKEND, "cudaLaunchHostFunc on the side stream: %s",
                           cudaGetErrorString(e));
    }
    DS_TRY(be->event_record(o->side, o->ready0));
    DS_TRY(o->t->ops->bucket_ready(o->t, 0, N - BUCKET, N, o->ready0));   /* as reduce.c: last first */
    DS_TRY(o->t->ops->sum_now(o->t, o->mom, C2, DS_F64, "BatchNorm moments"));
    if (delay) {
        const double t0 = now_ms();
        DS_TRY(be->sync(o->ctx));
        const double took = now_ms() - t0;
        T_CHECK(took < QUICK_MS, "rank %d: the sum reached the compute stream after %.0f ms, with "
                "gradient bucket 0 held back %d ms on rank %d: it waited behind the bucket",
                rank, took, DELAY_MS, last);
        if (rank == last) {   /* the bucket had not even started: its event is behind the sleep */
            cudaError_t q = cudaStreamQuery(side);
            T_CHECK(q == cudaErrorNotReady, "rank %d: bucket 0's side stream was %s %.0f ms after "
                    "it was held back %d ms", rank, q == cudaSuccess ? "done" : cudaGetErrorString(q),
                    took, DELAY_MS);
            if (q != cudaSuccess && q != cudaErrorNotReady)
                return DS_FAIL(DS_ERR_BACKEND, "cudaStreamQuery(side): %s", cudaGetErrorString(q));
        }
    }
    DS_TRY(be->event_record(o->ctx, o->ready));
    for (int k = 1; k < nb; k++) {
        const size_t hi = N - (size_t)k * BUCKET, lo = hi > BUCKET ? hi - BUCKET : 0;
        DS_TRY(o->t->ops->bucket_ready(o->t, k, lo, hi, o->ready));
    }
    DS_TRY(o->t->ops->finish(o->t, nb, timing));
    /* read on the compute context: after the buckets (the transport's wait) */
    DS_TRY(be->to_host(o->ctx, DS_F64, N, o->grads, o->in));
    DS_TRY(be->to_host(o->ctx, DS_F64, C2, o->mom, o->in_mom));
    const double tri = o->w->size * (o->w->size + 1) / 2.0;
    long bad = 0, bad_mom = 0;
    for (size_t i = 0; i < N; i++)
        bad += o->in[i] != tri * ov_grad(0, i, s);
    for (size_t i = 0; i < C2; i++)
        bad_mom += o->in_mom[i] != tri * ov_mom(0, i, s);
    T_CHECK(bad == 0 && bad_mom == 0, "overlap step %d%s: %ld gradients and %ld moments not the "
            "exact sum", s, delay ? " (bucket 0 held back)" : "", bad, bad_mom);
    return DS_OK;
}

/* Step 0 connects both communicators, step 1 holds bucket 0 back, step 2
 * reads step 1's timing. */
static ds_status overlap_steps(overlap *o)
{
    ds_reduce_timing t[3] = {{0}};
    for (int s = 0; s < 3; s++)
        DS_TRY(overlap_step(o, s, s == 1, &t[s]));
    const ds_reduce_timing *r = &t[2];   /* step 1's device times */
    T_CHECK(r->sums == 1 && r->sum_ms >= 0 && (o->w->size == 1 || r->sum_ms > 0),
            "rank %d: timing of the held-back step: %d sums in %g ms (1 sum expected)",
            o->w->rank, r->sums, r->sum_ms);
    if (o->w->rank != o->w->size - 1)   /* here bucket 0 ran, waiting, while the sum ran */
        T_CHECK(r->buckets_beside_sums >= 1,
                "rank %d: timing of the held-back step: %d buckets beside the sum (bucket 0 was in "
                "flight while it ran)", o->w->rank, r->buckets_beside_sums);
    printf("rank %d: held-back step: sum %.3f ms beside %d bucket(s); reduce %.3f ms, hidden "
           "%.3f ms, %d of %d started early\n", o->w->rank, r->sum_ms, r->buckets_beside_sums,
           r->reduce_ms, r->hidden_ms, r->started_early, t[1].buckets);
    return DS_OK;
}

/* ---- order: a BatchNorm sum after the compute stream's earlier work ---- */

/* sum_now must sum what the work queued before it on the compute stream
 * leaves in the buffer (its sum stream waits for sum_ready, recorded on the
 * compute stream), not what the buffer holds when the host calls it. Every
 * rank fills the C2 moments with SENTINEL and synchronises, then queues on
 * the compute stream a host function that sleeps ORDER_MS and a copy of
 * rank + 1 into every moment, and calls sum_now at once: the sum read back
 * must be n(n+1)/2 at every element. Without that wait the allreduce sums
 * the SENTINELs while the compute stream sleeps, and the copy then
 * overwrites them: rank + 1 is read back. The copy's event, queried after
 * sum_now returned, shows that it was still pending when the sum was queued
 * (else the case proves nothing). At 1 rank the allreduce in place is the
 * identity and both orders give rank + 1 = 1: not checked. */
static ds_status sum_order_with(overlap *o, void *src)
{
    const ds_backend *be = o->be;
    const int rank = o->w->rank, n = o->w->size;
    cudaStream_t compute = (cudaStream_t)be->native_queue(o->ctx);
    for (size_t i = 0; i < C2; i++)
        o->in_mom[i] = rank + 1;
    DS_TRY(be->from_host(o->ctx, DS_F64, C2, o->in_mom, src));
    for (size_t i = 0; i < C2; i++)
        o->in_mom[i] = SENTINEL;
    DS_TRY(be->from_host(o->ctx, DS_F64, C2, o->in_mom, o->mom));
    DS_TRY(be->sync(o->ctx));
    /* compute: <sleep ORDER_MS> copy [ready] [sum_ready] <wait sum_done> */
    cudaError_t e = cudaLaunchHostFunc(compute, hold_stream, (void *)&order_ms);
    if (e != cudaSuccess)
        return DS_FAIL(DS_ERR_BACKEND, "cudaLaunchHostFunc on the compute stream: %s",
                       cudaGetErrorString(e));
    e = cudaMemcpyAsync(o->mom, src, C2 * sizeof(double), cudaMemcpyDeviceToDevice, compute);
    if (e != cudaSuccess)
        return DS_FAIL(DS_ERR_BACKEND, "cudaMemcpyAsync on the compute stream: %s",
                       cudaGetErrorString(e));
    DS_TRY(be->event_record(o->ctx, o->ready));
    DS_TRY(o->t->ops->sum_now(o->t, o->mom, C2, DS_F64, "BatchNorm moments"));
    int copied = 1;
    DS_TRY(be->event_query(o->ready, &copied));
    T_CHECK(!copied, "rank %d: order case: the copy held back %d ms had already run when sum_now "
            "returned: the case shows nothing", rank, ORDER_MS);
    DS_TRY(be->sync(o->ctx));
    DS_TRY(be->to_host(o->ctx, DS_F64, C2, o->mom, o->in_mom));
    const double tri = n * (n + 1) / 2.0;
    long bad = 0, own = 0;
    for (size_t i = 0; i < C2; i++) {
        bad += o->in_mom[i] != tri;
        own += o->in_mom[i] == rank + 1;
    }
    T_CHECK(bad == 0, "rank %d: order case: %ld of %d moments not %g, the sum of rank + 1 copied "
            "in on the compute stream before sum_now (%ld hold this rank's %d: the sum ran before "
            "the copy)", rank, bad, C2, tri, own, rank + 1);
    return DS_OK;
}

static ds_status sum_order(overlap *o)
{
    if (o->w->size < 2) {
        printf("rank %d: order case skipped: at 1 rank an in-place allreduce is the identity, so a "
               "sum that ran before the compute stream's copy could not show\n", o->w->rank);
        return DS_OK;
    }
    void *src = NULL;   /* [C2] F64: rank + 1 */
    DS_TRY(o->be->alloc(o->ctx, DS_F64, C2, &src));
    const ds_status st = sum_order_with(o, src);
    o->be->release(o->ctx, src);
    return st;
}

static void overlap_case(ds_world *w, const ds_backend *be, ds_ctx *ctx)
{
    const int device = w->device < 0 ? 0 : w->device;
    overlap o = {.w = w, .be = be, .ctx = ctx};
    ds_status st = be->ctx_create(device, NULL, &o.side);
    if (st == DS_OK)
        st = be->event_create(o.side, &o.ready0);
    if (st == DS_OK)
        st = be->event_create(ctx, &o.ready);
    if (st == DS_OK)
        st = be->alloc(ctx, DS_F64, N, &o.grads);
    if (st == DS_OK)
        st = be->alloc(ctx, DS_F64, C2, &o.mom);
    o.in = malloc(N * sizeof *o.in);
    o.in_mom = malloc(C2 * sizeof *o.in_mom);
    if (st == DS_OK && (!o.in || !o.in_mom))
        st = DS_FAIL(DS_ERR_MEM, "host buffers");
    const ds_transport_cfg tc = {.world = w, .be = be, .ctx = ctx, .device = device, .dt = DS_F64,
                                 .grads = o.grads, .n = N, .bucket_elems = BUCKET,
                                 .sum_capacity = C2, .wire = DS_F64};
    if (st == DS_OK)
        st = ds_transport_nccl_create(&tc, &o.t);
    if (st == DS_OK)
        st = overlap_steps(&o);
    T_CHECK(st == DS_OK, "overlap case: %s", ds_status_last_error());
    if (st == DS_OK) {
        st = sum_order(&o);
        T_CHECK(st == DS_OK, "order case: %s", ds_status_last_error());
    }
    if (o.t)
        o.t->ops->destroy(o.t);
    free(o.in);
    free(o.in_mom);
    if (o.grads)
        be->release(ctx, o.grads);
    if (o.mom)
        be->release(ctx, o.mom);
    if (o.ready)
        be->event_destroy(ctx, o.ready);
    if (o.ready0)
        be->event_destroy(o.side, o.ready0);
    if (o.side)
        be->ctx_destroy(o.side);
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
    const int stall = argc < 2 ? 0 : !strcmp(argv[1], "--stall") ? STALL_BUCKETS
                                   : !strcmp(argv[1], "--stall-sum") ? STALL_SUM : -1;
    if (stall < 0) {
        fprintf(stderr, "usage: test_nccl_transport [--stall | --stall-sum]\n");
        return 2;
    }
    const ds_backend *be = ds_backend_get("cuda");
    const int gpus = be ? be->device_count() : 0;
    ds_world w;
    if (ds_world_init(&w, gpus, stall ? 5 : 120) != DS_OK) {
        fprintf(stderr, "test_nccl_transport: %s\n", ds_status_last_error());
        return 1;
    }
    char nccl[256];
    ds_reduce_describe(nccl, sizeof nccl);
    if (strstr(nccl, "not built"))
        skip(&w, "no CUDA device (this build has no NCCL transport)");
    if (!be) {   /* built with NCCL, and the CUDA plugin would not load: a failure */
        fprintf(stderr, "test_nccl_transport: --device cuda: %s\n", ds_backend_missing("cuda"));
        ds_world_finalize(&w);
        return 1;
    }
    if (!be || gpus == 0)
        skip(&w, "no CUDA device");
    if (gpus > 1 && w.local_size > gpus) {
        char why[128];
        snprintf(why, sizeof why, "%d ranks on this node need as many GPUs, %d visible", w.local_size,
                 gpus);
        skip(&w, why);
    }
    if (stall && w.size < 2)
        skip(&w, "--stall and --stall-sum need 2 ranks or more");
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
    if (!stall)
        overlap_case(&w, be, ctx);
    be->ctx_destroy(ctx);
    int failed = t_failures, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm);
    if (w.rank == 0)
        printf("test_nccl_transport (%d rank%s%s): ", w.size, w.size > 1 ? "s" : "",
               stall == STALL_SUM ? ", --stall-sum" : stall ? ", --stall" : "");
    int rc = w.rank == 0 ? t_finish("") : 0;
    ds_world_finalize(&w);
    return any ? 1 : rc;
}
