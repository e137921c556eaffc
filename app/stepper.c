/* stepper.c - one training step queued on the backend, its metrics read
 * later; see stepper.h. Each launched step copies its loss and optimizer
 * scalars into one of two pinned host slots and records an event there;
 * collecting waits on that event only. */
#include "stepper.h"

#include <stdlib.h>
#include <time.h>

#include "fault_seam.h"
#include "log.h"

enum { SLOTS = 2, SLOT_DOUBLES = DS_LOSS_SCALARS + DS_OPT_SCALARS };

struct ds_stepper {
    ds_model *m;
    ds_optim *o;
    ds_optim_bufs groups[2];        /* what the optimizer updates (ds_model_optim_bufs) */
    int n_groups;
    ds_dist d;
    const ds_backend *be;
    ds_ctx *ctx;
    double *host;                   /* [SLOTS][SLOT_DOUBLES] pinned */
    ds_event *ev[SLOTS];
    ds_reduce_timing timing[SLOTS];
    double launch_ms[SLOTS];
    long launched, collected;
    int poison;                     /* DS_POISON_*: the next step's fault (fault tests) */
    ds_step_graphs *graphs;         /* --cuda-graphs: the captured steps; NULL: eager */
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

ds_status ds_stepper_create(ds_model *m, ds_optim *o, const ds_dist *d, ds_stepper **out)
{
    *out = NULL;
    ds_stepper *s = calloc(1, sizeof *s);
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "stepper");
    *s = (ds_stepper){.m = m, .o = o, .d = d ? *d : (ds_dist){0}, .ctx = ds_model_ctx(m)};
    s->be = ds_model_backend(m);
    s->n_groups = ds_model_optim_bufs(m, s->groups);
    ds_model_set_loss_scale(m, ds_optim_loss_scale(o));   /* decided on the backend, step by step */
    ds_status st = s->be->host_alloc(s->ctx, SLOTS * SLOT_DOUBLES * sizeof(double), (void **)&s->host);
    for (int k = 0; st == DS_OK && k < SLOTS; k++)
        st = s->be->event_create(s->ctx, &s->ev[k]);
    if (st != DS_OK) {
        ds_stepper_destroy(s);
        return st;
    }
    *out = s;
    return DS_OK;
}

void ds_stepper_destroy(ds_stepper *s)
{
    if (!s)
        return;
    ds_step_graphs_destroy(s->graphs);
    for (int k = 0; k < SLOTS; k++)
        if (s->ev[k])
            s->be->event_destroy(s->ctx, s->ev[k]);
    if (s->host)
        s->be->host_release(s->ctx, s->host);
    free(s);
}

int ds_stepper_pending(const ds_stepper *s) { return (int)(s->launched - s->collected); }

void ds_stepper_poison_next(ds_stepper *s, int kind) { s->poison = kind; }

ds_status ds_stepper_capture(ds_stepper *s, int max_graphs, char *why, size_t why_size)
{
    why[0] = 0;
    if (s->d.reducer) {   /* MPI's reduction runs on host threads; NCCL's is not captured yet */
        snprintf(why, why_size, "%d ranks reduce their gradients between the step's parts, which "
                 "are not captured yet: the steps run uncaptured", s->d.world ? s->d.world->size : 2);
        return DS_OK;
    }
    DS_TRY(ds_step_graphs_create(s->be, s->ctx, max_graphs, 64, &s->graphs));
    ds_model_set_capturable(s->m, 1);
    return DS_OK;
}

int ds_stepper_graph_stats(const ds_stepper *s, ds_step_graph_stats *out)
{
    *out = (ds_step_graph_stats){0};
    if (!s->graphs)
        return 0;
    ds_step_graphs_stats(s->graphs, out);
    return 1;
}

/* The batch's upload and the step's learning rate, into the "data" range
 * a profiler shows: host copies, outside any captured step. */
static ds_status upload(ds_stepper *s, const ds_batch *b, double lr)
{
    DS_TRY(ds_model_set_batch(s->m, b));
    if (b->n_global > 0)   /* BatchNorm counts and the loss norm span every rank */
        DS_TRY(ds_model_set_global_batch(s->m, b->global_lengths, b->n_global));
    DS_TRY(ds_optim_set_lr(s->o, lr));
    DS_TRY(ds_model_train_batch_ok(s->m));   /* a replay makes no check of its own */
    return ds_model_zero_grad(s->m);
}

/* each phase inside a named range (NVTX on the GPU) */
#define PHASE(s, name, call) DS_RANGED((s)->be, (s)->ctx, (name), (call))

/* The buckets still in flight, then (fp16/bf16) BatchNorm's parameter
 * gradients, which live apart from the flat buffer in the stats dtype. */
static ds_status reduce_rest(ds_stepper *s, ds_reduce *red, ds_reduce_timing *t)
{
    size_t n;
    void *bn_grads = ds_model_bn_param_grads(s->m, &n);
    DS_TRY(ds_reduce_finish(red, t));
    return bn_grads ? ds_reduce_sum(red, bn_grads, n, ds_model_roles(s->m).stats,
                                    "BatchNorm parameter gradients")
                    : DS_OK;
}

/* Forward, loss, backward with the reduction around it, update: the part
 * of a step a graph captures. */
static ds_status queue_compute(ds_stepper *s, ds_reduce_timing *t)
{
    ds_model *m = s->m;
    ds_reduce *red = s->d.reducer;
    PHASE(s, "forward", ds_model_forward(m, 1));
    if (s->poison == DS_POISON_LOSS)
        DS_TRY(ds_model_poison_logits(m));
    PHASE(s, "loss", ds_model_loss(m, 1));
    if (s->poison == DS_POISON_GRAD)
        DS_TRY(ds_model_poison_dlogits(m));
    if (red)
        DS_TRY(ds_reduce_begin(red));
    PHASE(s, "backward", ds_model_backward(m));
    if (red)
        PHASE(s, "reduction", reduce_rest(s, red, t));
    /* grads are summed over ranks: the norm, clip and skip are global */
    PHASE(s, "optimizer", ds_optim_apply(s->o, s->groups, s->n_groups));
    return DS_OK;
}

typedef struct {
    ds_stepper *s;
    ds_reduce_timing *t;
} compute_arg;

static ds_status queue_compute_cb(void *user)
{
    const compute_arg *a = user;
    return queue_compute(a->s, a->t);
}

/* The upload, then the rest captured or replayed per shape (--cuda-graphs;
 * a poisoned step, a fault test's, runs uncaptured), else queued. */
static ds_status queue_step(ds_stepper *s, const ds_batch *b, double lr, ds_reduce_timing *t)
{
    PHASE(s, "data", upload(s, b, lr));
    const int poisoned = s->poison != DS_POISON_NONE;
    ds_status st;
    if (s->graphs && !poisoned) {
        compute_arg a = {s, t};
        st = ds_step_graphs_run(s->graphs, (ds_step_shape){b->n, b->t}, queue_compute_cb, &a);
    } else {
        st = queue_compute(s, t);
    }
    s->poison = DS_POISON_NONE;
    return st;
}

ds_status ds_stepper_launch(ds_stepper *s, const ds_batch *b, double lr)
{
    if (ds_stepper_pending(s) >= SLOTS)
        return DS_FAIL(DS_ERR_ARG, "%d steps launched and not collected", SLOTS);
    const int k = (int)(s->launched % SLOTS);
    const double t0 = now_ms();
    s->timing[k] = (ds_reduce_timing){0};
    DS_TRY(queue_step(s, b, lr, &s->timing[k]));
    double *slot = s->host + (size_t)k * SLOT_DOUBLES;   /* scalars are FP64 */
    DS_TRY(s->be->to_host_async(s->ctx, DS_F64, DS_LOSS_SCALARS, ds_model_loss_scalars(s->m), slot));
    DS_TRY(s->be->to_host_async(s->ctx, DS_F64, DS_OPT_SCALARS, ds_optim_scalars(s->o),
                                slot + DS_LOSS_SCALARS));
    DS_TRY(s->be->event_record(s->ctx, s->ev[k]));
    s->launch_ms[k] = now_ms() - t0;
    s->launched++;
    return DS_OK;
}

ds_status ds_stepper_collect(ds_stepper *s, ds_step_out *out)
{
    if (ds_stepper_pending(s) < 1)
        return DS_FAIL(DS_ERR_ARG, "no launched step to collect");
    const int k = (int)(s->collected % SLOTS);
    const double t0 = now_ms();
    DS_TRY(s->be->event_sync(s->ev[k]));
    const double *slot = s->host + (size_t)k * SLOT_DOUBLES;
    *out = (ds_step_out){.loss = slot[DS_LOSS_MEAN], .n_infinite = (int)slot[DS_LOSS_INFINITE],
                         .opt = ds_optim_status_of(slot + DS_LOSS_SCALARS),
                         .timing = s->timing[k], .launch_ms = s->launch_ms[k],
                         .wait_ms = now_ms() - t0};
    s->collected++;
    return DS_OK;
}
