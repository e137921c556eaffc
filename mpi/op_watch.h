/* op_watch.h - a deadline for operations the host queues and never waits
 * for: NCCL collectives on a communication stream. The step does not block
 * on them, so no blocking call can carry the timeout; a thread does.
 *
 * Each operation is bracketed by two events recorded on one context:
 * ds_op_watch_start before it is queued, ds_op_watch_end after. A context
 * is one in-order queue, so operations finish in the order they were
 * queued, and only the oldest unfinished one is timed: its clock starts
 * when the thread first sees its start event passed (the operation is
 * running, that is waiting on the other ranks) and stops when its end
 * event has passed. When an operation has run longer than timeout_s, or
 * poll_error reports a failure while operations are in flight, the thread
 * calls expire once, naming the operation; in dstrain expire ends the job
 * and never returns.
 *
 * Slots, and their events, are created once. start waits for a free slot
 * only when capacity operations are in flight (the device is far behind
 * the host); that wait is bounded by the timeout too. */
#ifndef DS_OP_WATCH_H
#define DS_OP_WATCH_H

#include <stddef.h>

#include "backend.h"

typedef struct ds_op_watch ds_op_watch;

typedef struct {
    const ds_backend *be;
    ds_ctx *ctx;              /* where the operations and their events are queued */
    int capacity;             /* operations in flight at once, at most (>= 1) */
    double timeout_s;         /* longest an operation may run; <= 0: no limit */
    double poll_ms;           /* how often the thread looks while operations are in flight */
    /* 1 with a message in msg [size] when the operations have failed (NCCL's
     * asynchronous error), else 0. NULL: nothing to poll. From the thread. */
    int (*poll_error)(void *user, char *msg, size_t size);
    /* From the thread, once: the operation what has run waited_s seconds
     * past its start without finishing (error NULL), or has failed (error
     * the message). If it returns, the thread stops watching. */
    void (*expire)(void *user, const char *what, double waited_s, const char *error);
    void *user;
} ds_op_watch_cfg;

ds_status ds_op_watch_create(const ds_op_watch_cfg *c, ds_op_watch **out);
/* Stops the thread; operations still in flight are no longer watched. */
void ds_op_watch_destroy(ds_op_watch *w);

/* The next operation, named what in messages ("the allreduce of gradient
 * bucket 3"), is about to be queued on the context: records its start event. */
ds_status ds_op_watch_start(ds_op_watch *w, const char *what);
/* It is queued: records its end event and watches it from now on. */
ds_status ds_op_watch_end(ds_op_watch *w);

/* Operations watched and not yet seen finished (tests). */
int ds_op_watch_in_flight(ds_op_watch *w);

#endif
