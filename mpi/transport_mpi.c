/* transport_mpi.c - the MPI transport (transport.h). A communication thread
 * (rather than MPI_Iallreduce from the main thread) because MPI only makes
 * progress inside MPI calls, and backward makes none for long stretches: a
 * thread blocked in MPI_Allreduce progresses its bucket while backward
 * computes. When the gradients are not host memory (any backend but the CPU,
 * or force_staging) each bucket is staged: the thread waits for its event,
 * copies it into a pinned host buffer on a context of its own, sums it
 * there and copies it back. */
#include "transport.h"

#include "convert.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    size_t lo, hi;
    ds_event *ready;
} bucket;

typedef struct {
    ds_transport base;
    ds_transport_cfg c;
    MPI_Datatype type;
    int staged;
    ds_ctx *comm_ctx;           /* the thread's copies (staged only) */
    void *wire_buf;             /* host [bucket_elems] of the wire dtype, when it is not dt */
    void *stage, *sum_stage;    /* pinned host: one bucket; one sum_now (staged only) */
    bucket *q;                  /* [nb] the step's buckets */
    int nb;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    int handed, done, stop;     /* buckets [0, handed) given to the thread, [0, done) summed */
    double t_begin;
    double *start, *end;        /* [nb] per bucket, ms since t_begin */
    ds_status err;
    char msg[512];
} mpi_transport;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sums grads [lo, hi) across ranks, through the staging buffer if needed. */
static ds_status sum_bucket(mpi_transport *t, int k)
{
    const bucket *b = &t->q[k];
    const ds_backend *be = t->c.be;
    const size_t count = b->hi - b->lo;
    void *dev = ds_elem(t->c.grads, t->c.dt, b->lo);
    void *buf = t->staged ? t->stage : dev, *sum = t->wire_buf ? t->wire_buf : buf;
    char what[64];
    snprintf(what, sizeof what, "the allreduce of gradient bucket %d", k);
    if (t->staged) {
        DS_TRY(be->event_sync(b->ready));
        DS_TRY(be->to_host(t->comm_ctx, t->c.dt, count, dev, buf));
    }
    if (sum != buf)   /* --reduce-dtype: on the wire, and summed, in another dtype */
        DS_TRY(ds_convert(t->c.wire, sum, t->c.dt, buf, count));
    ds_world_wait_begin(t->c.world, what);
    int rc = MPI_Allreduce(MPI_IN_PLACE, sum, (int)count, t->type, ds_world_sum_op(t->type),
                           t->c.world->grad_comm);
    ds_world_wait_end(t->c.world);
    DS_TRY(ds_world_check(rc, what));
    if (sum != buf)
        DS_TRY(ds_convert(t->c.dt, buf, t->c.wire, sum, count));
    if (!t->staged)
        return DS_OK;
    DS_TRY(be->from_host(t->comm_ctx, t->c.dt, count, buf, dev));
    return be->sync(t->comm_ctx);
}

static void *comm_thread(void *arg)
{
    mpi_transport *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stop && t->done == t->handed)
            pthread_cond_wait(&t->work_cv, &t->mu);
        if (t->stop)
            break;
        int k = t->done;
        t->start[k] = now_ms() - t->t_begin;
        pthread_mutex_unlock(&t->mu);
        ds_status st = sum_bucket(t, k);
        pthread_mutex_lock(&t->mu);
        t->end[k] = now_ms() - t->t_begin;
        if (st != DS_OK && t->err == DS_OK) {   /* the message is thread-local: keep it */
            t->err = st;
            snprintf(t->msg, sizeof t->msg, "%s (bucket %d)", ds_status_last_error(), k);
            ds_status_clear_error();
        }
        t->done++;
        pthread_cond_signal(&t->done_cv);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static ds_status mpi_begin(ds_transport *base)
{
    mpi_transport *t = (mpi_transport *)base;
    pthread_mutex_lock(&t->mu);
    t->handed = t->done = 0;
    t->t_begin = now_ms();
    pthread_mutex_unlock(&t->mu);
    return DS_OK;
}

static ds_status mpi_bucket_ready(ds_transport *base, int k, size_t lo, size_t hi, ds_event *ready)
{
    mpi_transport *t = (mpi_transport *)base;
    if (k != t->handed || k >= t->nb || hi > t->c.n || lo >= hi)
        return DS_FAIL(DS_ERR_ARG, "gradient bucket %d [%zu, %zu) handed out of order (next %d of %d)",
                       k, lo, hi, t->handed, t->nb);
    pthread_mutex_lock(&t->mu);
    t->q[k] = (bucket){lo, hi, ready};
    t->handed++;
    pthread_cond_signal(&t->work_cv);
    pthread_mutex_unlock(&t->mu);
    return DS_OK;
}

static ds_status mpi_finish(ds_transport *base, int buckets, ds_reduce_timing *timing)
{
    mpi_transport *t = (mpi_transport *)base;
    const double backward_end = now_ms() - t->t_begin, wait0 = now_ms();
    pthread_mutex_lock(&t->mu);
    while (t->done < t->handed)
        pthread_cond_wait(&t->done_cv, &t->mu);
    const int done = t->done;
    ds_status err = t->err;
    pthread_mutex_unlock(&t->mu);
    if (err != DS_OK)
        return DS_FAIL(err, "%s", t->msg);
    if (done != buckets)
        return DS_FAIL(DS_ERR_ARG, "reduction finished with %d of %d buckets handed over", done, buckets);
    *timing = (ds_reduce_timing){.buckets = done, .backward_ms = backward_end,
                                 .wait_ms = now_ms() - wait0};
    for (int k = 0; k < done; k++) {
        timing->reduce_ms += t->end[k] - t->start[k];
        if (t->start[k] < backward_end) {
            timing->started_early++;
            timing->hidden_ms += (t->end[k] < backward_end ? t->end[k] : backward_end) - t->start[k];
        }
    }
    return DS_OK;
}

static ds_status mpi_sum_now(ds_transport *base, void *buf, size_t count, ds_dtype dt,
                             const char *what)
{
    mpi_transport *t = (mpi_transport *)base;
    const MPI_Datatype type = ds_world_type(dt);
    if (type == MPI_DATATYPE_NULL || count > t->c.sum_capacity)
        return DS_FAIL(DS_ERR_ARG, "%s: %zu elements of %s (capacity %zu)", what, count,
                       ds_dtype_name(dt), t->c.sum_capacity);
    if (!t->staged)
        return ds_world_allreduce_sum(t->c.world, buf, (int)count, type, what);
    /* to_host waits for the compute context's queue; from_host is queued before later work */
    DS_TRY(t->c.be->to_host(t->c.ctx, dt, count, buf, t->sum_stage));
    DS_TRY(ds_world_allreduce_sum(t->c.world, t->sum_stage, (int)count, type, what));
    return t->c.be->from_host(t->c.ctx, dt, count, t->sum_stage, buf);
}

static void mpi_destroy(ds_transport *base)
{
    mpi_transport *t = (mpi_transport *)base;
    if (!t)
        return;
    if (t->thread_started) {
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_signal(&t->work_cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->work_cv);
    pthread_cond_destroy(&t->done_cv);
    if (t->stage)
        t->c.be->host_release(t->comm_ctx, t->stage);
    if (t->sum_stage)
        t->c.be->host_release(t->c.ctx, t->sum_stage);
    if (t->comm_ctx)
        t->c.be->ctx_destroy(t->comm_ctx);
    free(t->q);
    free(t->start);
    free(t->end);
    free(t->wire_buf);
    free(t);
}

static const ds_transport_ops mpi_ops = {
    .begin = mpi_begin,
    .bucket_ready = mpi_bucket_ready,
    .finish = mpi_finish,
    .sum_now = mpi_sum_now,
    .destroy = mpi_destroy,
};

/* The staging contexts and buffers: sized once here, never per step. */
static ds_status open_staging(mpi_transport *t)
{
    const ds_backend *be = t->c.be;
    DS_TRY(be->ctx_create(t->c.device, NULL, &t->comm_ctx));
    DS_TRY(be->host_alloc(t->comm_ctx, t->c.bucket_elems * ds_dtype_size(t->c.dt), &t->stage));
    return be->host_alloc(t->c.ctx, (t->c.sum_capacity ? t->c.sum_capacity : 1) * sizeof(double),
                          &t->sum_stage);
}

ds_status ds_transport_mpi_create(const ds_transport_cfg *c, ds_transport **out)
{
    *out = NULL;
    if (ds_world_type(c->dt) == MPI_DATATYPE_NULL || ds_world_type(c->wire) == MPI_DATATYPE_NULL ||
        c->bucket_elems < 1 || c->bucket_elems > (size_t)1 << 30)
        return DS_FAIL(DS_ERR_ARG, "MPI gradient reduction: dtype %s summed as %s, bucket of %zu elements",
                       ds_dtype_name(c->dt), ds_dtype_name(c->wire), c->bucket_elems);
    mpi_transport *t = calloc(1, sizeof *t);
    if (!t)
        return DS_FAIL(DS_ERR_MEM, "MPI transport");
    t->base.ops = &mpi_ops;
    t->c = *c;
    t->type = ds_world_type(c->wire);
    t->staged = c->force_staging || strcmp(c->be->name, "cpu") != 0;
    t->nb = (int)((c->n + c->bucket_elems - 1) / c->bucket_elems);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->work_cv, NULL);
    pthread_cond_init(&t->done_cv, NULL);
    t->q = calloc((size_t)t->nb, sizeof *t->q);
    t->start = calloc((size_t)t->nb, sizeof *t->start);
    t->end = calloc((size_t)t->nb, sizeof *t->end);
    if (c->wire != c->dt)
        t->wire_buf = malloc(c->bucket_elems * ds_dtype_size(c->wire));
    ds_status st = t->q && t->start && t->end && (c->wire == c->dt || t->wire_buf)
                       ? DS_OK : DS_FAIL(DS_ERR_MEM, "MPI transport buckets");
    if (st == DS_OK && t->staged)
        st = open_staging(t);
    if (st == DS_OK && pthread_create(&t->thread, NULL, comm_thread, t) != 0)
        st = DS_FAIL(DS_ERR_MPI, "cannot start the communication thread");
    t->thread_started = st == DS_OK;
    if (st != DS_OK) {
        mpi_destroy(&t->base);
        return st;
    }
    *out = &t->base;
    return DS_OK;
}
