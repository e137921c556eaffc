/* reduce.h - gradient reduction across ranks, overlapped with backward.
 *
 * The flat gradient buffer [n] is cut into buckets of at most bucket_elems
 * elements from its end: bucket 0 holds the last parameters (the output
 * layer, whose gradients backward finishes first). As backward reports that
 * every gradient from some offset to the end is final (ds_reduce_ready),
 * the reducer records an event on the compute context and hands each bucket
 * lying wholly in that range to the transport (transport.h), which sums it
 * across ranks once the event has passed, while backward goes on.
 * ds_reduce_finish makes the sums visible to the work queued after it on
 * the compute context: the MPI transport's host waits for them, the NCCL
 * transport's compute stream does (the host goes on). The sum is not
 * scaled: the loss is already divided by the global batch. */
#ifndef DS_REDUCE_H
#define DS_REDUCE_H

#include <stddef.h>

#include "backend.h"
#include "reduce_timing.h"
#include "world.h"

typedef enum { DS_REDUCE_MPI, DS_REDUCE_NCCL } ds_reduce_kind;

ds_status ds_reduce_kind_parse(const char *s, ds_reduce_kind *out);   /* mpi | nccl */
const char *ds_reduce_kind_name(ds_reduce_kind k);                   /* mpi | nccl */
/* The reduction a run on device gets unless it names one: NCCL on "cuda"
 * where it is built in (the card's design: no staging through the host),
 * else MPI. */
ds_reduce_kind ds_reduce_default(const char *device);

/* "nccl:     RUN (compiled BUILT)..." or "nccl:     not built ...", for --version. */
void ds_reduce_describe(char *buf, size_t size);

typedef struct ds_reduce ds_reduce;

typedef struct {
    ds_world *world;
    ds_reduce_kind kind;
    const ds_backend *be;
    ds_ctx *ctx;              /* the compute context */
    int device;
    ds_dtype dt;              /* the gradients' dtype (compute role) */
    void *grads;              /* [n] backend memory */
    size_t n;
    size_t bucket_elems;
    size_t sum_capacity;      /* largest ds_reduce_sum (BatchNorm moments) */
    int force_staging;        /* MPI: stage through host buffers even on the CPU (tests) */
    ds_dtype wire;            /* with wire_set: the dtype buckets are summed in across ranks */
    int wire_set;             /* 0 (as a zeroed config has it): summed in dt */
} ds_reduce_cfg;

ds_status ds_reduce_create(const ds_reduce_cfg *c, ds_reduce **out);
void ds_reduce_destroy(ds_reduce *r);
int ds_reduce_buckets(const ds_reduce *r);

/* Starts a step. */
ds_status ds_reduce_begin(ds_reduce *r);
/* grads [offset, n) are final once the work queued so far completes: hands
 * over every bucket now complete. */
ds_status ds_reduce_ready(ds_reduce *r, size_t offset);
/* Every bucket summed before the work queued next on the compute context
 * (MPI: the host waits; NCCL: the compute stream waits); t (may be NULL)
 * gets the step's timing (NCCL: an earlier step's device times, see
 * transport_nccl.c). */
ds_status ds_reduce_finish(ds_reduce *r, ds_reduce_timing *t);
/* Sums buf [count] of dt (backend memory) across ranks in queue order
 * (synchronised BatchNorm's moments), through the same transport. */
ds_status ds_reduce_sum(ds_reduce *r, void *buf, size_t count, ds_dtype dt, const char *what);

#endif
