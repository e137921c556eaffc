/* stepper.h - one training step, queued on the backend without waiting on it,
 * and its metrics read by the host afterwards (after the next step has been
 * launched, or at once where the caller needs them: printing, checkpoints).
 * Nothing here allocates after ds_stepper_create. */
#ifndef DS_STEPPER_H
#define DS_STEPPER_H

#include "batch.h"
#include "model.h"
#include "optim.h"
#include "reduce.h"
#include "step_graphs.h"
#include "world.h"

/* The ranks a step spans; world NULL or of size 1, reducer NULL: one process. */
typedef struct {
    ds_world *world;
    ds_reduce *reducer;
} ds_dist;

/* What the host learns of a step. */
typedef struct {
    double loss;                  /* this rank's share: sum of its finite losses / global batch */
    int n_infinite;               /* this rank's utterances without an alignment */
    ds_optim_status opt;          /* gradient norm, clip, skipped (same on every rank) */
    ds_reduce_timing timing;      /* of the gradient reduction (ranks > 1) */
    double launch_ms, wait_ms;    /* host time queueing the step, and waiting for its metrics */
} ds_step_out;

typedef struct ds_stepper ds_stepper;

/* d may be NULL (one process). */
ds_status ds_stepper_create(ds_model *m, ds_optim *o, const ds_dist *d, ds_stepper **out);
void ds_stepper_destroy(ds_stepper *s);
/* Queues one optimisation step on b: forward, CTC, backward (gradients
 * reduced across ranks as they become final), clip and update decided on the
 * backend, and the copy of the step's scalars to the host. At most two steps
 * may be launched and not yet collected. */
ds_status ds_stepper_launch(ds_stepper *s, const ds_batch *b, double lr);
/* The metrics of the oldest launched step not yet collected (waits for it). */
ds_status ds_stepper_collect(ds_stepper *s, ds_step_out *out);
/* Steps launched and not yet collected. */
int ds_stepper_pending(const ds_stepper *s);

/* --cuda-graphs: from the next launch on, each batch shape's step (forward
 * to update; the upload stays outside) is captured once and replayed, at
 * most max_graphs held (step_graphs.h), and the model queues its steps so
 * that a replay is right for every batch of the shape
 * (ds_model_set_capturable; the context must have been made capturable).
 * Where steps cannot be captured (ranks that reduce their gradients) *why
 * says so and the steps stay uncaptured; "" when they will be captured.
 * An error for a backend that captures nothing (the CPU). */
ds_status ds_stepper_capture(ds_stepper *s, int max_graphs, char *why, size_t why_size);
/* 1 and *out filled when steps are captured (ds_stepper_capture), else 0. */
int ds_stepper_graph_stats(const ds_stepper *s, ds_step_graph_stats *out);

#endif
