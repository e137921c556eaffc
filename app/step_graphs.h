/* step_graphs.h - a run's captured training steps (--cuda-graphs), one per
 * batch shape: the first step of a shape runs uncaptured (the libraries'
 * lazy set-up happens there, outside any capture), the second is captured
 * (ds_backend capture_begin / capture_end) and launched, later ones replay it. At most
 * `cap` graphs are held, the least recently used one destroyed to make room.
 * A shape whose capture failed runs eagerly from then on, said once with the
 * reason. Nothing here allocates after ds_step_graphs_create. */
#ifndef DS_STEP_GRAPHS_H
#define DS_STEP_GRAPHS_H

#include <stddef.h>

#include "backend.h"

/* What a captured step is specialised to: everything else it reads from
 * backend memory (ds_ctx_opts.capturable, ds_model_set_capturable). */
typedef struct {
    int n;   /* utterances */
    int t;   /* padded frames */
} ds_step_shape;

typedef struct {
    long captures;      /* graphs captured (an evicted shape met again counts again) */
    long replays;       /* steps run by launching a held graph, its first launch included */
    long eager;         /* steps run uncaptured: each shape's first, and every step of a
                         * shape whose capture failed */
    long evictions;     /* graphs destroyed to stay within the cap */
    int failed_shapes;  /* shapes that run eagerly */
    int held;           /* graphs held now */
    size_t bytes;       /* device memory the held graphs took when made (backend's measure) */
    size_t bytes_peak;
} ds_step_graph_stats;

typedef struct ds_step_graphs ds_step_graphs;

/* be must have capture (capture_begin non-NULL); cap >= 1 graphs held at
 * most; up to max_failed shapes remembered as failed (past that, a failed
 * shape is tried again each time it comes back). */
ds_status ds_step_graphs_create(const ds_backend *be, ds_ctx *ctx, int cap, int max_failed,
                                ds_step_graphs **out);
void ds_step_graphs_destroy(ds_step_graphs *g);

/* Queues one step of shape sh: queue(user) queues its work (everything
 * between the batch's upload and the read of its results: nothing in it may
 * wait for the device, allocate, or copy from host memory it does not own
 * for good). A held graph is launched; a new shape is captured from
 * queue(user) and then launched at its second step (its first runs
 * queue(user) uncaptured); a failed shape runs queue(user) uncaptured.
 * An error of queue(user) outside a capture, or of the backend, is returned. */
ds_status ds_step_graphs_run(ds_step_graphs *g, ds_step_shape sh, ds_status (*queue)(void *user),
                             void *user);

void ds_step_graphs_stats(const ds_step_graphs *g, ds_step_graph_stats *out);

#endif
