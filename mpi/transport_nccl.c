/* transport_nccl.c - the NCCL transport (transport.h): every bucket is
 * summed by ncclAllReduce on a communication stream of the transport's own
 * context, which waits on the device for the bucket's event. BatchNorm's
 * sums (sum_now) have a communicator, a stream (context) and a watch of
 * their own, so that a sum never queues behind the buckets in flight: the
 * compute stream waits for each sum, and behind the buckets it would stop
 * overlapping backward with communication at every BatchNorm. The host
 * queues and goes on: it never waits in the step.
 *
 *   compute: bwd [ready k] bwd [sum_ready] <wait sum_done ........> bwd [end] <wait done> optimizer
 *   comm:                 <wait ready k> [start k] allreduce k ........ [end k] k+1 [done]
 *   sum:                       <wait sum_ready> allreduce [sum_done]
 *
 * ([x] an event recorded, <wait x> a wait on the device, bwd backward.) The
 * sum of moments runs while bucket k's allreduce is still in flight; before,
 * it waited on the comm stream for k (and every bucket queued before it),
 * and backward with it.
 *
 * Two communicators at once. NCCL collectives block on the GPU until the
 * peers take part, so concurrent communicators can deadlock in two ways:
 *   - order: a wait cycle across ranks. Every operation of both
 *     communicators is queued by the one thread that runs the step, in
 *     program order, and the program is the same on every rank (same
 *     model, same buckets, same BatchNorm layers), so each communicator
 *     sees its collectives in the same order on every rank, and every
 *     device-side wait (ready k, sum_ready, sum_done, grads_done) points at
 *     work queued earlier in that same order: no cycle can form. This is
 *     also what NCCL asks of host launch order (NCCL_LAUNCH_ORDER_IMPLICIT,
 *     2.26 on: with it set, NCCL orders the two communicators' kernels by
 *     host order, which stays deadlock-free here; with CUDA 12.3 on, a
 *     sum then waits only for the launch of the bucket queued before it,
 *     not for its end, so most of the overlap stays);
 *   - residency: a kernel spinning for its peers while the kernel those
 *     peers wait for cannot be scheduled. On a rank, at most one collective
 *     of each communicator runs at a time (each has one in-order stream):
 *     the gradients' (NCCL's channel count of blocks, at most 32 on
 *     today's GPUs) and one sum, capped at SUM_CTAS blocks (sums are a few
 *     thousand elements, latency-bound), far fewer than a GPU's SMs
 *     (108 on an A100, 132 on an H100); compute kernels between them wait
 *     on nothing remote and always finish. Nothing in the step makes the
 *     device synchronise (no allocation, no free, no default stream).
 *     NCCL connects a communicator lazily, at its first collective of a
 *     kind; the sums' is step 0's forward, before any bucket is queued.
 *
 * Bounded waits. As the host does not wait, the deadline is kept by two
 * threads (op_watch.h), one per stream, since a watch times the oldest
 * unfinished operation of one in-order queue: every collective is
 * bracketed by two events on its stream, and each watch polls the oldest
 * unfinished one, and its communicator's ncclCommGetAsyncError, every
 * POLL_MS. A collective that has started (its stream reached it: the
 * bucket was ready and the ones before it are done; the compute stream
 * reached the sum) and has not finished --timeout seconds later, or an
 * asynchronous NCCL error, ends the job: a message naming this rank, the
 * bucket (or the BatchNorm sum) and the operation, ncclCommAbort of both
 * communicators (nccl_comm.h), MPI_Abort. So a dead or stopped peer ends
 * every rank within the timeout, wherever the host happens to block
 * (reading a step's metrics, a checkpoint's copy), without a host wait in
 * the step. The host itself waits only where non-blocking NCCL says a call
 * is still being queued (ncclInProgress: set-up, and a first collective
 * while NCCL connects), polling against the same timeout (nccl_comm.h).
 *
 * Timing. Timed CUDA events mark, per step, the begin and the end of
 * backward on the compute stream, each bucket's start and end on the
 * communication stream, and the start and end of each sum queued between
 * begin and finish (backward's; the first SUM_TIMED) on the sum stream.
 * Reading them must not wait, so finish reports the device times of the
 * latest earlier step whose reduction had completed when finish was called
 * (usually the step before; zeros until one has): backward_ms from begin
 * to the end of backward; reduce_ms the buckets' device time; hidden_ms
 * the part of it before backward ended; wait_ms how long the compute
 * stream's optimizer waited for the last bucket after backward ended;
 * started_early the buckets that started before it ended; sums and sum_ms
 * that step's sums and their device time; buckets_beside_sums the buckets
 * whose allreduce was in flight while a sum ran (0 when sums wait behind
 * the buckets). buckets is the current step's. */
#include "transport.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_plugin.h"
#include "nccl_comm.h"
#include "op_watch.h"

#define POLL_MS 2.0            /* the watch thread's look at the queue */
#define WATCH_MAX 16384        /* collectives in flight at most (events are made once) */
#define SUM_WATCH 256          /* sums in flight at most (the compute stream waits for each) */
#define SUM_CTAS 2             /* thread blocks of one sum: small, and beside a bucket's */
#define SUM_TIMED 64           /* sums timed per step (one per BatchNorm layer); more are counted */

typedef struct {
    cudaEvent_t begin, backward_end;   /* compute stream */
    cudaEvent_t *start, *end;          /* [nb] communication stream, per bucket */
    cudaEvent_t sum_start[SUM_TIMED], sum_end[SUM_TIMED];   /* sum stream, per sum in the step */
    int buckets;                       /* of the step recorded and not yet read; 0: none */
    int sums;                          /* sum_now calls between begin and finish */
} step_clock;

typedef struct {
    ds_transport base;
    ds_transport_cfg c;
    ds_nccl nccl, sum_nccl;            /* gradient buckets; sum_now alone */
    ncclDataType_t type;               /* of the wire */
    void *wire;                        /* [bucket_elems] of c.wire (--reduce-dtype), or NULL */
    ds_ctx *comm_ctx, *sum_ctx;        /* the communication and sum streams' contexts */
    cudaStream_t comm, sum, compute;
    ds_event *grads_done;              /* comm: after the step's last bucket */
    ds_event *sum_ready, *sum_done;    /* compute, sum: around one sum_now */
    ds_op_watch *watch, *sum_watch;    /* one per stream: each times its oldest operation */
    int nb, handed, in_step;           /* in_step: between begin and finish */
    long steps;
    step_clock clock[2];               /* by step parity: one recorded while one is read */
    ds_reduce_timing last;             /* device times of the latest step read */
} nccl_transport;

#define CUDA_TRY(call)                                                                        \
    do {                                                                                      \
        cudaError_t ds_e_ = (call);                                                           \
        if (ds_e_ != cudaSuccess)                                                             \
            return DS_FAIL(DS_ERR_BACKEND, "%s: %s (%s)", #call, cudaGetErrorString(ds_e_),    \
                           cudaGetErrorName(ds_e_));                                          \
    } while (0)

static int nccl_type(ds_dtype dt, ncclDataType_t *out)
{
    switch (dt) {
    case DS_F32: *out = ncclFloat32; return 1;
    case DS_F64: *out = ncclFloat64; return 1;
    case DS_F16: *out = ncclFloat16; return 1;
    case DS_BF16: *out = ncclBfloat16; return 1;
    case DS_I32: *out = ncclInt32; return 1;
    case DS_I64: *out = ncclInt64; return 1;
    default: return 0;
    }
}

/* A collective that could not be queued leaves the other ranks waiting in
 * it: the job ends here, naming the operation. */
static ds_status or_end_job(nccl_transport *t, ds_status st, const char *what)
{
    if (st != DS_OK)
        ds_nccl_fatal(&t->nccl, "rank %d: queueing %s failed: %s", t->c.world->rank, what,
                      ds_status_last_error());
    return st;
}

/* ---- timing: read without waiting ---- */

static int elapsed(cudaEvent_t a, cudaEvent_t b, double *ms)
{
    float f = 0;
    if (cudaEventElapsedTime(&f, a, b) != cudaSuccess)
        return 0;
    *ms = f;
    return 1;
}

/* The step recorded in clk into t->last, if the device is done with it. */
static void read_clock(nccl_transport *t, step_clock *clk)
{
    const int nb = clk->buckets, ns = clk->sums < SUM_TIMED ? clk->sums : SUM_TIMED;
    /* each stream is in order; the compute stream waited for every sum */
    if (nb == 0 || cudaEventQuery(clk->backward_end) != cudaSuccess ||
        cudaEventQuery(clk->end[nb - 1]) != cudaSuccess ||
        (ns > 0 && cudaEventQuery(clk->sum_end[ns - 1]) != cudaSuccess))
        return;
    ds_reduce_timing r = {0};
    double s, e, last_end = 0, ss[SUM_TIMED], se[SUM_TIMED];
    if (!elapsed(clk->begin, clk->backward_end, &r.backward_ms))
        return;
    for (int j = 0; j < ns; j++) {
        if (!elapsed(clk->begin, clk->sum_start[j], &ss[j]) ||
            !elapsed(clk->begin, clk->sum_end[j], &se[j]))
            return;
        r.sum_ms += se[j] - ss[j];
    }
    for (int k = 0; k < nb; k++) {
        if (!elapsed(clk->begin, clk->start[k], &s) || !elapsed(clk->begin, clk->end[k], &e))
            return;
        r.reduce_ms += e - s;
        if (s < r.backward_ms) {
            r.started_early++;
            r.hidden_ms += (e < r.backward_ms ? e : r.backward_ms) - s;
        }
        last_end = e > last_end ? e : last_end;
        int beside = 0;   /* the bucket's allreduce and a sum ran at once */
        for (int j = 0; j < ns && !beside; j++)
            beside = s < se[j] && ss[j] < e;
        r.buckets_beside_sums += beside;
    }
    r.wait_ms = last_end > r.backward_ms ? last_end - r.backward_ms : 0;
    r.sums = clk->sums;
    t->last = r;
    clk->buckets = 0;
}

/* ---- the transport ---- */

static ds_status nccl_begin(ds_transport *base)
{
    nccl_transport *t = (nccl_transport *)base;
    step_clock *clk = &t->clock[t->steps % 2];
    read_clock(t, clk);   /* before it is recorded again */
    clk->buckets = 0;
    clk->sums = 0;
    t->handed = 0;
    t->in_step = 1;
    CUDA_TRY(cudaSetDevice(t->c.device));
    CUDA_TRY(cudaEventRecord(clk->begin, t->compute));
    return DS_OK;
}

/* Queues the allreduce of bucket k once ready has passed. */
static ds_status queue_bucket(nccl_transport *t, int k, size_t lo, size_t hi, ds_event *ready,
                              const char *what)
{
    step_clock *clk = &t->clock[t->steps % 2];
    const ds_backend *be = t->c.be;
    void *p = ds_elem(t->c.grads, t->c.dt, lo), *sum = t->wire ? t->wire : p;
    DS_TRY(be->event_wait(t->comm_ctx, ready));
    /* --reduce-dtype: summed in the wire's dtype; one buffer serves every
     * bucket, as the communication stream runs them in turn */
    if (t->wire)
        DS_TRY(be->convert(t->comm_ctx, t->c.wire, sum, t->c.dt, p, hi - lo));
    DS_TRY(ds_op_watch_start(t->watch, what));
    CUDA_TRY(cudaEventRecord(clk->start[k], t->comm));
    DS_TRY(DS_NCCL(&t->nccl, ncclAllReduce(sum, sum, hi - lo, t->type, ncclSum, t->nccl.comm, t->comm),
                   what));
    CUDA_TRY(cudaEventRecord(clk->end[k], t->comm));
    DS_TRY(ds_op_watch_end(t->watch));
    return t->wire ? be->convert(t->comm_ctx, t->c.dt, p, t->c.wire, sum, hi - lo) : DS_OK;
}

static ds_status nccl_bucket_ready(ds_transport *base, int k, size_t lo, size_t hi, ds_event *ready)
{
    nccl_transport *t = (nccl_transport *)base;
    if (k != t->handed || k >= t->nb || hi > t->c.n || lo >= hi)
        return DS_FAIL(DS_ERR_ARG, "gradient bucket %d [%zu, %zu) handed out of order (next %d of %d)",
                       k, lo, hi, t->handed, t->nb);
    char what[160];
    snprintf(what, sizeof what, "the NCCL allreduce of gradient bucket %d (%zu %s elements from %zu)",
             k, hi - lo, ds_dtype_name(t->c.dt), lo);
    DS_TRY(or_end_job(t, queue_bucket(t, k, lo, hi, ready, what), what));
    t->handed++;
    return DS_OK;
}

/* The compute stream waits for every bucket on the device; the host goes on. */
static ds_status nccl_finish(ds_transport *base, int buckets, ds_reduce_timing *timing)
{
    nccl_transport *t = (nccl_transport *)base;
    if (t->handed != buckets)
        return DS_FAIL(DS_ERR_ARG, "reduction finished with %d of %d buckets handed over", t->handed,
                       buckets);
    step_clock *clk = &t->clock[t->steps % 2];
    CUDA_TRY(cudaEventRecord(clk->backward_end, t->compute));
    DS_TRY(or_end_job(t, t->c.be->event_record(t->comm_ctx, t->grads_done), "the gradients' end event"));
    DS_TRY(t->c.be->event_wait(t->c.ctx, t->grads_done));
    clk->buckets = buckets;
    t->in_step = 0;
    t->steps++;
    read_clock(t, &t->clock[t->steps % 2]);   /* the step before this one */
    *timing = t->last;
    timing->buckets = buckets;   /* the rest is the step read */
    return DS_OK;
}

/* On the sum stream and communicator: after the compute stream's work so
 * far (sum_ready), before its later work (sum_done), beside the buckets. */
static ds_status queue_sum(nccl_transport *t, void *buf, size_t count, ncclDataType_t type,
                           const char *what)
{
    const ds_backend *be = t->c.be;
    step_clock *clk = &t->clock[t->steps % 2];
    const int timed = t->in_step && clk->sums < SUM_TIMED;
    DS_TRY(be->event_record(t->c.ctx, t->sum_ready));
    DS_TRY(be->event_wait(t->sum_ctx, t->sum_ready));
    DS_TRY(ds_op_watch_start(t->sum_watch, what));
    if (timed)
        CUDA_TRY(cudaEventRecord(clk->sum_start[clk->sums], t->sum));
    DS_TRY(DS_NCCL(&t->sum_nccl,
                   ncclAllReduce(buf, buf, count, type, ncclSum, t->sum_nccl.comm, t->sum), what));
    if (timed)
        CUDA_TRY(cudaEventRecord(clk->sum_end[clk->sums], t->sum));
    clk->sums += t->in_step;
    DS_TRY(ds_op_watch_end(t->sum_watch));
    DS_TRY(be->event_record(t->sum_ctx, t->sum_done));
    return be->event_wait(t->c.ctx, t->sum_done);
}

/* In the compute stream's order: after the work queued so far, before any
 * queued later; not behind the buckets queued on the comm stream. */
static ds_status nccl_sum_now(ds_transport *base, void *buf, size_t count, ds_dtype dt,
                              const char *what)
{
    nccl_transport *t = (nccl_transport *)base;
    ncclDataType_t type;
    if (!nccl_type(dt, &type) || count > t->c.sum_capacity)
        return DS_FAIL(DS_ERR_ARG, "%s: %zu elements of %s (capacity %zu)", what, count,
                       ds_dtype_name(dt), t->c.sum_capacity);
    char op[160];
    snprintf(op, sizeof op, "the NCCL allreduce of %s (%zu %s elements)", what, count,
             ds_dtype_name(dt));
    ds_status st = queue_sum(t, buf, count, type, op);
    if (st != DS_OK)
        ds_nccl_fatal(&t->sum_nccl, "rank %d: queueing %s failed: %s", t->c.world->rank, op,
                      ds_status_last_error());
    return st;
}

static void destroy_clock(step_clock *clk, int nb)
{
    if (clk->begin)
        (void)cudaEventDestroy(clk->begin);
    if (clk->backward_end)
        (void)cudaEventDestroy(clk->backward_end);
    for (int k = 0; k < nb; k++) {
        if (clk->start && clk->start[k])
            (void)cudaEventDestroy(clk->start[k]);
        if (clk->end && clk->end[k])
            (void)cudaEventDestroy(clk->end[k]);
    }
    for (int j = 0; j < SUM_TIMED; j++) {
        if (clk->sum_start[j])
            (void)cudaEventDestroy(clk->sum_start[j]);
        if (clk->sum_end[j])
            (void)cudaEventDestroy(clk->sum_end[j]);
    }
    free(clk->start);
    free(clk->end);
}

static void nccl_destroy(ds_transport *base)
{
    nccl_transport *t = (nccl_transport *)base;
    if (!t)
        return;
    const ds_backend *be = t->c.be;
    /* what is queued finishes; the watches still bound it */
    if (t->comm_ctx)
        (void)be->sync(t->comm_ctx);
    if (t->sum_ctx)
        (void)be->sync(t->sum_ctx);
    ds_op_watch_destroy(t->watch);
    ds_op_watch_destroy(t->sum_watch);
    /* in the same order on every rank: finalizing takes the peers */
    ds_nccl_close(&t->sum_nccl);
    ds_nccl_close(&t->nccl);
    (void)cudaSetDevice(t->c.device);
    for (int i = 0; i < 2; i++)
        destroy_clock(&t->clock[i], t->nb);
    if (t->grads_done)
        be->event_destroy(t->comm_ctx, t->grads_done);
    if (t->sum_done)
        be->event_destroy(t->sum_ctx, t->sum_done);
    if (t->sum_ready)
        be->event_destroy(t->c.ctx, t->sum_ready);
    if (t->wire)
        be->release(t->comm_ctx, t->wire);
    if (t->comm_ctx)
        be->ctx_destroy(t->comm_ctx);
    if (t->sum_ctx)
        be->ctx_destroy(t->sum_ctx);
    free(t);
}

static const ds_transport_ops nccl_ops = {
    .begin = nccl_begin,
    .bucket_ready = nccl_bucket_ready,
    .finish = nccl_finish,
    .sum_now = nccl_sum_now,
    .destroy = nccl_destroy,
};

static ds_status open_clock(step_clock *clk, int nb)
{
    CUDA_TRY(cudaEventCreate(&clk->begin));
    CUDA_TRY(cudaEventCreate(&clk->backward_end));
    clk->start = calloc((size_t)nb, sizeof *clk->start);
    clk->end = calloc((size_t)nb, sizeof *clk->end);
    if (!clk->start || !clk->end)
        return DS_FAIL(DS_ERR_MEM, "timing events for %d buckets", nb);
    for (int k = 0; k < nb; k++) {
        CUDA_TRY(cudaEventCreate(&clk->start[k]));
        CUDA_TRY(cudaEventCreate(&clk->end[k]));
    }
    for (int j = 0; j < SUM_TIMED; j++) {
        CUDA_TRY(cudaEventCreate(&clk->sum_start[j]));
        CUDA_TRY(cudaEventCreate(&clk->sum_end[j]));
    }
    return DS_OK;
}

static int watch_error(void *user, char *msg, size_t size)
{
    return ds_nccl_async_error(&((nccl_transport *)user)->nccl, msg, size);
}

static int sum_watch_error(void *user, char *msg, size_t size)
{
    return ds_nccl_async_error(&((nccl_transport *)user)->sum_nccl, msg, size);
}

static void expired(nccl_transport *t, ds_nccl *n, const char *what, double waited_s,
                    const char *error)
{
    const ds_world *w = t->c.world;
    if (error)
        ds_nccl_fatal(n, "rank %d: %s failed: %s", w->rank, what, error);
    ds_nccl_fatal(n, "rank %d waited %.0f s in %s for the other ranks (--timeout %g): a rank "
                  "has died, hangs or stopped participating", w->rank, waited_s, what, w->timeout_s);
}

static void watch_expired(void *user, const char *what, double waited_s, const char *error)
{
    nccl_transport *t = user;
    expired(t, &t->nccl, what, waited_s, error);
}

static void sum_watch_expired(void *user, const char *what, double waited_s, const char *error)
{
    nccl_transport *t = user;
    expired(t, &t->sum_nccl, what, waited_s, error);
}

/* Everything sized once: the communicators, the streams' contexts, events,
 * the watches. Both communicators are made in the same order on every rank. */
static ds_status open_parts(nccl_transport *t)
{
    const ds_transport_cfg *c = &t->c;
    const ds_backend *be = c->be;
    DS_TRY(ds_nccl_open_as(c->world, c->device, "dstrain gradients", 0, &t->nccl));
    DS_TRY(ds_nccl_open_as(c->world, c->device, "dstrain BatchNorm sums", SUM_CTAS, &t->sum_nccl));
    DS_TRY(be->ctx_create(c->device, NULL, &t->comm_ctx));
    DS_TRY(be->ctx_create(c->device, NULL, &t->sum_ctx));
    t->comm = (cudaStream_t)be->native_queue(t->comm_ctx);
    t->sum = (cudaStream_t)be->native_queue(t->sum_ctx);
    t->compute = (cudaStream_t)be->native_queue(c->ctx);
    DS_TRY(be->event_create(t->comm_ctx, &t->grads_done));
    DS_TRY(be->event_create(t->sum_ctx, &t->sum_done));
    DS_TRY(be->event_create(c->ctx, &t->sum_ready));
    if (c->wire != c->dt)
        DS_TRY(be->alloc(t->comm_ctx, c->wire, c->bucket_elems, &t->wire));
    CUDA_TRY(cudaSetDevice(c->device));
    for (int i = 0; i < 2; i++)
        DS_TRY(open_clock(&t->clock[i], t->nb));
    const long cap = 3L * t->nb + 256;
    const ds_op_watch_cfg wc = {.be = be, .ctx = t->comm_ctx,
                                .capacity = (int)(cap < WATCH_MAX ? cap : WATCH_MAX),
                                .timeout_s = c->world->timeout_s, .poll_ms = POLL_MS,
                                .poll_error = watch_error, .expire = watch_expired, .user = t};
    DS_TRY(ds_op_watch_create(&wc, &t->watch));
    const ds_op_watch_cfg sc = {.be = be, .ctx = t->sum_ctx, .capacity = SUM_WATCH,
                                .timeout_s = c->world->timeout_s, .poll_ms = POLL_MS,
                                .poll_error = sum_watch_error, .expire = sum_watch_expired,
                                .user = t};
    return ds_op_watch_create(&sc, &t->sum_watch);
}

/* The plugin's entry (src/backend_plugin.h); the program calls it through
 * ds_transport_nccl_create (transport_nccl_load.c). */
DS_PLUGIN_EXPORT ds_status ds_transport_nccl_open(const ds_transport_cfg *c, ds_transport **out);
ds_status ds_transport_nccl_open(const ds_transport_cfg *c, ds_transport **out)
{
    *out = NULL;
    if (!c->be->native_queue || !c->be->native_queue(c->ctx))
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--allreduce nccl needs the CUDA backend (--device cuda), "
                       "and this run is on the %s backend: use --device cuda, or --allreduce mpi",
                       c->be->name);
    ncclDataType_t type, grads;
    if (!nccl_type(c->dt, &grads) || !nccl_type(c->wire, &type) || c->bucket_elems < 1 || c->n < 1)
        return DS_FAIL(DS_ERR_ARG, "NCCL gradient reduction: dtype %s summed as %s, %zu elements in "
                       "buckets of %zu", ds_dtype_name(c->dt), ds_dtype_name(c->wire), c->n,
                       c->bucket_elems);
    nccl_transport *t = calloc(1, sizeof *t);
    if (!t)
        return DS_FAIL(DS_ERR_MEM, "NCCL transport");
    t->base.ops = &nccl_ops;
    t->c = *c;
    t->type = type;
    t->nb = (int)((c->n + c->bucket_elems - 1) / c->bucket_elems);
    ds_status st = open_parts(t);
    if (st != DS_OK) {
        nccl_destroy(&t->base);
        return st;
    }
    *out = &t->base;
    return DS_OK;
}
