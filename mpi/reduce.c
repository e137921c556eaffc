/* reduce.c - gradient reduction across ranks, overlapped with backward; see
 * reduce.h: bucket bookkeeping and events; the transport
 * moves the data. */
#include "reduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport.h"

struct ds_reduce {
    ds_reduce_cfg c;
    ds_transport *t;
    int nb, handed;
    ds_event **ev;              /* [nb] one per bucket, created once */
};

/* Bucket k covers [lo, hi): bucket 0 ends at n. */
static void bucket_range(const ds_reduce *r, int k, size_t *lo, size_t *hi)
{
    *hi = r->c.n - (size_t)k * r->c.bucket_elems;
    *lo = *hi > r->c.bucket_elems ? *hi - r->c.bucket_elems : 0;
}

ds_status ds_reduce_kind_parse(const char *s, ds_reduce_kind *out)
{
    if (!strcmp(s, "mpi"))
        *out = DS_REDUCE_MPI;
    else if (!strcmp(s, "nccl"))
        *out = DS_REDUCE_NCCL;
    else
        return DS_FAIL(DS_ERR_ARG, "--allreduce %s: expected mpi or nccl", s);
    return DS_OK;
}

const char *ds_reduce_kind_name(ds_reduce_kind k) { return k == DS_REDUCE_NCCL ? "nccl" : "mpi"; }

ds_reduce_kind ds_reduce_default(const char *device)
{
#ifdef DS_HAVE_NCCL
    if (device && !strcmp(device, "cuda"))
        return DS_REDUCE_NCCL;
#else
    (void)device;
#endif
    return DS_REDUCE_MPI;
}

static ds_status open_transport(ds_reduce *r)
{
    const ds_reduce_cfg *c = &r->c;
    const ds_transport_cfg tc = {.world = c->world, .be = c->be, .ctx = c->ctx, .device = c->device,
                                 .dt = c->dt, .grads = c->grads, .n = c->n,
                                 .bucket_elems = c->bucket_elems, .sum_capacity = c->sum_capacity,
                                 .force_staging = c->force_staging, .wire = c->wire_set ? c->wire : c->dt};
    if (c->kind == DS_REDUCE_MPI)
        return ds_transport_mpi_create(&tc, &r->t);
#ifdef DS_HAVE_NCCL
    return ds_transport_nccl_create(&tc, &r->t);
#else
    return DS_FAIL(DS_ERR_UNSUPPORTED, "--allreduce nccl needs the CUDA backend and the NCCL "
                                       "transport, which this build does not have (%s backend); "
                                       "use --allreduce mpi", c->be->name);
#endif
}

void ds_reduce_describe(char *buf, size_t size)
{
#ifdef DS_HAVE_NCCL
    ds_transport_nccl_describe(buf, size);
#else
    snprintf(buf, size, "nccl:     not built (needs the CUDA backend and NCCL at configure time): "
                        "--allreduce mpi only");
#endif
}

ds_status ds_reduce_create(const ds_reduce_cfg *c, ds_reduce **out)
{
    *out = NULL;
    if (c->bucket_elems < 1 || c->n < 1)
        return DS_FAIL(DS_ERR_ARG, "gradient reduction of %zu elements in buckets of %zu", c->n,
                       c->bucket_elems);
    ds_reduce *r = calloc(1, sizeof *r);
    if (!r)
        return DS_FAIL(DS_ERR_MEM, "reducer");
    r->c = *c;
    r->nb = (int)((c->n + c->bucket_elems - 1) / c->bucket_elems);
    r->ev = calloc((size_t)r->nb, sizeof *r->ev);
    ds_status st = r->ev ? DS_OK : DS_FAIL(DS_ERR_MEM, "reducer events");
    for (int k = 0; st == DS_OK && k < r->nb; k++)
        st = c->be->event_create(c->ctx, &r->ev[k]);
    if (st == DS_OK)
        st = open_transport(r);
    if (st != DS_OK) {
        ds_reduce_destroy(r);
        return st;
    }
    *out = r;
    return DS_OK;
}

void ds_reduce_destroy(ds_reduce *r)
{
    if (!r)
        return;
    if (r->t)
        r->t->ops->destroy(r->t);
    for (int k = 0; r->ev && k < r->nb; k++)
        if (r->ev[k])
            r->c.be->event_destroy(r->c.ctx, r->ev[k]);
    free(r->ev);
    free(r);
}

int ds_reduce_buckets(const ds_reduce *r) { return r->nb; }

ds_status ds_reduce_begin(ds_reduce *r)
{
    r->handed = 0;
    return r->t->ops->begin(r->t);
}

ds_status ds_reduce_ready(ds_reduce *r, size_t offset)
{
    size_t lo, hi;
    const int first = r->handed;
    while (r->handed < r->nb && (bucket_range(r, r->handed, &lo, &hi), lo >= offset))
        r->handed++;
    if (r->handed == first)
        return DS_OK;
    /* one event marks every bucket completed by the work queued so far */
    ds_event *ev = r->ev[first];
    DS_TRY(r->c.be->event_record(r->c.ctx, ev));
    for (int k = first; k < r->handed; k++) {
        bucket_range(r, k, &lo, &hi);
        DS_TRY(r->t->ops->bucket_ready(r->t, k, lo, hi, ev));
    }
    return DS_OK;
}

ds_status ds_reduce_finish(ds_reduce *r, ds_reduce_timing *t)
{
    ds_reduce_timing scratch;
    DS_TRY(ds_reduce_ready(r, 0));
    return r->t->ops->finish(r->t, r->nb, t ? t : &scratch);
}

ds_status ds_reduce_sum(ds_reduce *r, void *buf, size_t count, ds_dtype dt, const char *what)
{
    return r->t->ops->sum_now(r->t, buf, count, dt, what);
}
