/* upload_ring.cu - host-to-device copies that never wait for the stream.
 *
 * cudaMemcpyAsync waits for the stream's queued work when the source is
 * pageable, and a pinned source cannot be reused until its copy runs; either
 * way a step's upload would wait for the step before it. So each upload is
 * first copied on the host into a ring of pinned memory and the device copy
 * queued from there, with an event marking when that region is free again.
 * A region is reused only after the uploads of about two steps later, whose
 * events have long passed. The ring grows while the run warms up (first
 * steps) and then stays; uploads too large for it (parameters at start-up,
 * checkpoints) take the plain path and wait. */
#include <cstdlib>
#include <cstring>

#include "cuda_ctx.h"

enum { PENDING_MAX = 64 };                       /* uploads in flight at most */
static const size_t RING_MAX = 512u << 20;       /* pinned bytes at most */
static const size_t RING_UPLOAD_MAX = RING_MAX / 4;

struct ds_cuda_uploads {
    char *buf;                  /* pinned [cap] */
    size_t cap, head;           /* the next upload starts at head (or wraps to 0) */
    struct region {
        size_t lo, hi;
        cudaEvent_t done;
    } pend[PENDING_MAX];        /* in flight, oldest first from `first` */
    int first, count;
    cudaEvent_t events[PENDING_MAX];
};

static size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

static ds_status ring_open(ds_ctx *c)
{
    if (c->uploads)
        return DS_OK;
    ds_cuda_uploads *u = (ds_cuda_uploads *)calloc(1, sizeof *u);
    if (!u)
        return DS_FAIL(DS_ERR_MEM, "upload ring");
    c->uploads = u;
    for (int i = 0; i < PENDING_MAX; i++)
        DS_CUDA(cudaEventCreateWithFlags(&u->events[i], cudaEventDisableTiming));
    return DS_OK;
}

/* Waits for the oldest upload in flight and forgets it. */
static ds_status retire_oldest(ds_cuda_uploads *u)
{
    DS_CUDA(cudaEventSynchronize(u->pend[u->first].done));
    u->first = (u->first + 1) % PENDING_MAX;
    u->count--;
    return DS_OK;
}

static int overlaps(const ds_cuda_uploads *u, size_t lo, size_t hi)
{
    for (int k = 0; k < u->count; k++) {
        const auto &r = u->pend[(u->first + k) % PENDING_MAX];
        if (lo < r.hi && r.lo < hi)
            return 1;
    }
    return 0;
}

/* A ring of at least four uploads of this size: drains what is in flight,
 * then replaces the buffer (only while the run warms up). */
static ds_status grow(ds_ctx *c, ds_cuda_uploads *u, size_t bytes)
{
    while (u->count)
        DS_TRY(retire_oldest(u));
    size_t cap = 4 * bytes > 2 * u->cap ? 4 * bytes : 2 * u->cap;
    cap = cap > RING_MAX ? RING_MAX : cap;
    if (u->buf)
        DS_CUDA(cudaFreeHost(u->buf));
    u->buf = nullptr;
    u->cap = u->head = 0;
    DS_CUDA(cudaHostAlloc((void **)&u->buf, cap, cudaHostAllocPortable));
    u->cap = cap;
    return DS_OK;
}

ds_status ds_cuda_upload(ds_ctx *c, const void *host, size_t bytes, void *dst)
{
    if (bytes == 0)
        return DS_OK;
    if (bytes > RING_UPLOAD_MAX) {   /* rare and large: the plain copy, waited for */
        DS_CUDA(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, c->stream));
        DS_CUDA(cudaStreamSynchronize(c->stream));
        return DS_OK;
    }
    DS_TRY(ring_open(c));
    ds_cuda_uploads *u = c->uploads;
    const size_t need = round_up(bytes);
    if (4 * need > u->cap)
        DS_TRY(grow(c, u, need));
    size_t lo = u->head + need <= u->cap ? u->head : 0;
    while (u->count && (u->count == PENDING_MAX || overlaps(u, lo, lo + need)))
        DS_TRY(retire_oldest(u));
    memcpy(u->buf + lo, host, bytes);
    DS_CUDA(cudaMemcpyAsync(dst, u->buf + lo, bytes, cudaMemcpyHostToDevice, c->stream));
    const int slot = (u->first + u->count) % PENDING_MAX;
    u->pend[slot] = {lo, lo + need, u->events[slot]};
    DS_CUDA(cudaEventRecord(u->pend[slot].done, c->stream));
    u->count++;
    u->head = lo + need;
    return DS_OK;
}

void ds_cuda_uploads_free(ds_ctx *c)
{
    ds_cuda_uploads *u = c->uploads;
    if (!u)
        return;
    (void)cudaStreamSynchronize(c->stream);   /* no copy may still read the ring */
    for (int i = 0; i < PENDING_MAX; i++)
        if (u->events[i])
            (void)cudaEventDestroy(u->events[i]);
    if (u->buf)
        (void)cudaFreeHost(u->buf);
    free(u);
    c->uploads = nullptr;
}
