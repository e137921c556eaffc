/* range_timing.cu - --profile layers on the GPU: every range pushed while
 * timing is on takes a slot of the context's ds_range_log (src/range_log.h)
 * and records that slot's start event on the context's stream; the pop
 * records its end event. Both events of every slot are created when timing
 * is switched on, never during a step; range_times waits for the stream and
 * turns the events into milliseconds after the first slot's start.
 *
 * range_push and range_pop return nothing: the first CUDA failure inside
 * them is kept in ds_ctx.range_err (its message recorded by DS_FAIL) and
 * returned by the next range_times. */
#include <cmath>
#include <cstdlib>

#include "cuda_ctx.h"

/* Frees the events of the first n slots' pairs and the log. */
static void free_events(ds_ctx *c, int n)
{
    if (c->range_events) {
        for (int i = 0; i < n; i++)
            (void)cudaEventDestroy(c->range_events[i]);
        free(c->range_events);
        c->range_events = nullptr;
    }
    ds_range_log_free(&c->ranges);
}

/* DS_CUDA's report without returning: for the calls inside push and pop. */
static void keep_error(ds_ctx *c, cudaError_t e, const char *call)
{
    if (c->range_err == DS_OK)
        c->range_err = DS_FAIL(e == cudaErrorMemoryAllocation ? DS_ERR_MEM : DS_ERR_BACKEND,
                               "range timing: %s: %s (%s)", call, cudaGetErrorString(e),
                               cudaGetErrorName(e));
}

ds_status ds_cuda_range_timing(ds_ctx *c, int capacity)
{
    DS_CUDA(cudaSetDevice(c->device));
    if (c->range_events)
        DS_CUDA(cudaStreamSynchronize(c->stream));   /* no event still queued is destroyed */
    free_events(c, 2 * c->ranges.cap);
    c->range_err = DS_OK;
    if (capacity <= 0)
        return DS_OK;
    if (capacity > (1 << 24))
        return DS_FAIL(DS_ERR_ARG, "range timing: %d slots (at most %d)", capacity, 1 << 24);
    DS_TRY(ds_range_log_init(&c->ranges, capacity));
    c->range_events = (cudaEvent_t *)calloc(2 * (size_t)capacity, sizeof(cudaEvent_t));
    if (!c->range_events) {
        ds_range_log_free(&c->ranges);
        return DS_FAIL(DS_ERR_MEM, "range timing: %d event pairs", capacity);
    }
    for (int i = 0; i < 2 * capacity; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&c->range_events[i], cudaEventDefault);
        if (e != cudaSuccess) {
            free_events(c, i);
            DS_CUDA(e);
        }
    }
    return DS_OK;
}

void ds_cuda_range_time_push(ds_ctx *c, const char *name)
{
    const int k = ds_range_log_push(&c->ranges, name);
    if (k < 0)
        return;
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaEventRecord(c->range_events[2 * k], c->stream);
    if (e != cudaSuccess)
        keep_error(c, e, "cudaEventRecord(start)");
}

void ds_cuda_range_time_pop(ds_ctx *c)
{
    const int k = ds_range_log_pop(&c->ranges);
    if (k < 0)
        return;
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaEventRecord(c->range_events[2 * k + 1], c->stream);
    if (e != cudaSuccess)
        keep_error(c, e, "cudaEventRecord(end)");
}

ds_status ds_cuda_range_times(ds_ctx *c, ds_range_time *out, int max, int *n, int *lost)
{
    *n = *lost = 0;
    if (!ds_range_log_on(&c->ranges))
        return DS_FAIL(DS_ERR_ARG, "range_times: range timing is off");
    if (c->range_err != DS_OK) {
        ds_status st = c->range_err;
        c->range_err = DS_OK;
        return st;
    }
    DS_CUDA(cudaSetDevice(c->device));
    DS_CUDA(cudaStreamSynchronize(c->stream));
    ds_range_log *l = &c->ranges;
    /* slots of ranges still open have no end yet: reported as ending where
     * they start (range_log_take then frees their slot; their pop times nothing) */
    for (int k = 0; k < l->used; k++) {
        bool open = false;
        for (int d = 0; d < l->depth && d < DS_RANGE_DEPTH; d++)
            open = open || l->open[d] == k;
        float start = 0, end = 0;
        if (k > 0)
            DS_CUDA(cudaEventElapsedTime(&start, c->range_events[0], c->range_events[2 * k]));
        if (open)
            end = start;
        else
            DS_CUDA(cudaEventElapsedTime(&end, c->range_events[0], c->range_events[2 * k + 1]));
        l->slot[k].start_ms = start;
        l->slot[k].end_ms = end;
    }
    ds_range_log_take(l, out, max, n, lost);
    return DS_OK;
}

/* For ctx_destroy: the events and the log, whatever state they are in. */
void ds_cuda_ranges_free(ds_ctx *c) { free_events(c, 2 * c->ranges.cap); }
