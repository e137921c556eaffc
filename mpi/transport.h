/* transport.h - how the reducer moves gradient buckets and small sums
 * between ranks. One implementation per way of talking:
 *   MPI  (transport_mpi.c): a communication thread blocked in MPI_Allreduce,
 *        staging device memory through pinned host buffers when the backend
 *        is not the CPU;
 *   NCCL (transport_nccl.c, built with the CUDA backend and NCCL):
 *        ncclAllReduce on a communication stream that waits on each bucket's
 *        event; the host never waits in the step.
 * Buckets are ranges [lo, hi) of the flat gradient buffer given at creation.
 * Counts are elements. */
#ifndef DS_TRANSPORT_H
#define DS_TRANSPORT_H

#include "backend.h"
#include "reduce_timing.h"
#include "world.h"

typedef struct ds_transport ds_transport;

typedef struct {
    /* A step begins: no bucket is in flight. */
    ds_status (*begin)(ds_transport *t);
    /* Bucket k, grads [lo, hi), is final once the work recorded by ready
     * (on the compute context) completes; its sum may start then. Buckets
     * arrive in order k = 0, 1, ... */
    ds_status (*bucket_ready)(ds_transport *t, int k, size_t lo, size_t hi, ds_event *ready);
    /* Every bucket handed over is summed and visible to work queued on the
     * compute context from now on; timing of the step into *timing. */
    ds_status (*finish)(ds_transport *t, int buckets, ds_reduce_timing *timing);
    /* Sums buf [count] of dt (backend memory) across ranks in place, after the
     * work queued so far on the compute context and before any queued later
     * (synchronised BatchNorm's moments). count <= the creation's sum_capacity. */
    ds_status (*sum_now)(ds_transport *t, void *buf, size_t count, ds_dtype dt, const char *what);
    void (*destroy)(ds_transport *t);
} ds_transport_ops;

struct ds_transport {
    const ds_transport_ops *ops;
};

/* What a transport is created over. */
typedef struct {
    ds_world *world;
    const ds_backend *be;
    ds_ctx *ctx;               /* the compute context the gradients are made on */
    int device;                /* its device, for the transport's own contexts */
    ds_dtype dt;               /* gradients' dtype */
    void *grads;               /* [n] backend memory */
    size_t n;
    size_t bucket_elems;       /* largest bucket */
    size_t sum_capacity;       /* largest sum_now, elements of any dtype up to 8 bytes */
    int force_staging;         /* stage through host buffers even on the CPU (tests) */
    ds_dtype wire;             /* the dtype buckets are summed in on the wire (dt: as they are) */
} ds_transport_cfg;

ds_status ds_transport_mpi_create(const ds_transport_cfg *c, ds_transport **out);
#ifdef DS_HAVE_NCCL
/* In the program: looks the transport up in the CUDA plugin
 * (transport_nccl_load.c), which exports it as ds_transport_nccl_open. */
ds_status ds_transport_nccl_create(const ds_transport_cfg *c, ds_transport **out);
/* The "nccl:" line of `dstrain version`: the plugin's, or why it has none. */
void ds_transport_nccl_describe(char *buf, size_t size);
#endif

#endif
