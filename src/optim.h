/* optim.h - optimizers, learning-rate schedules and gradient clipping over
 * the model's flat parameter and gradient buffers (the update itself runs
 * on the backend: ds_ops.sgd_step / adamw_step). */
#ifndef DS_OPTIM_H
#define DS_OPTIM_H

#include "backend.h"

typedef enum { DS_OPT_SGD, DS_OPT_ADAMW } ds_opt_kind;
typedef enum { DS_LR_CONSTANT, DS_LR_ANNEAL, DS_LR_POLY } ds_lr_kind;

typedef struct {
    ds_opt_kind kind;
    double lr;
    double momentum;          /* sgd */
    int nesterov;             /* sgd */
    double beta1, beta2, eps; /* adamw */
    double weight_decay;
    ds_lr_kind schedule;
    double anneal;            /* DS_LR_ANNEAL: lr / anneal^epoch (deepspeech.pytorch: 1.1) */
    double poly_power;        /* DS_LR_POLY: lr * (1 - step/total_steps)^power */
    long total_steps;
    long warmup_steps;        /* linear warm-up over the first steps, 0: none */
    double max_grad_norm;     /* clip the global norm to this, <= 0: no clipping */
    double loss_scale;        /* the loss is multiplied by this before backward (1: none) */
    long loss_scale_window;   /* dynamic: x2 after this many clean steps, x0.5 and skip on
                               * Inf/NaN; 0: the scale stays as set */
} ds_optim_cfg;

/* deepspeech.pytorch's defaults: SGD, lr 3e-4, Nesterov momentum 0.9,
 * weight decay 1e-5, anneal 1.1 per epoch, max norm 400. */
ds_optim_cfg ds_optim_defaults(void);
ds_status ds_optim_parse_kind(const char *s, ds_opt_kind *out);
ds_status ds_optim_parse_schedule(const char *s, ds_lr_kind *out);
const char *ds_optim_kind_name(ds_opt_kind k);
const char *ds_optim_lr_schedule_name(ds_lr_kind k);

/* Learning rate at step (counted from 0) in epoch (from 0). */
double ds_optim_lr(const ds_optim_cfg *c, long step, int epoch);

typedef struct ds_optim ds_optim;

/* An optimizer for n parameters whose gradients are of dtype dt (the
 * compute role); master weights and optimizer state are in dt's master role
 * (FP32 for fp32, fp16 and bf16; FP64 for fp64). */
ds_status ds_optim_create(const ds_optim_cfg *c, const ds_backend *be, ds_ctx *ctx, ds_dtype dt,
                          size_t n, ds_optim **out);
/* A second group of n parameters with gradients of dtype dt (16-bit runs:
 * BatchNorm's, kept in the stats role), updated with the first under one
 * global norm and one verdict. */
ds_status ds_optim_add_group(ds_optim *o, ds_dtype dt, size_t n);
void ds_optim_destroy(ds_optim *o);

/* One group's buffers for an update. */
typedef struct {
    void *params;        /* [n] master role: what the update changes */
    const void *grads;   /* [n] read, not changed */
    void *work;          /* [n] compute role: the working copy the update also
                          * writes (16-bit runs); NULL: params are the working copy */
} ds_optim_bufs;

/* Queues one update of every group (b [groups], groups as many as the
 * optimizer was made for: a mismatch is an error) at learning rate lr: the
 * global gradient norm over all groups, clipping to max_grad_norm, the skip
 * on a non-finite norm and the loss scale are decided on the backend, from
 * backend memory; the host does not wait. */
ds_status ds_optim_update(ds_optim *o, const ds_optim_bufs *b, int groups, double lr);
/* ds_optim_update in its two halves: set_lr queues the copy of lr into the
 * optimizer's scalars (scal[DS_OPT_LR]), apply queues the update reading it
 * there. A captured step (CUDA Graph) holds apply only: the copy, from host
 * memory the graph would read again at each replay, is queued before it. */
ds_status ds_optim_set_lr(ds_optim *o, double lr);
ds_status ds_optim_apply(ds_optim *o, const ds_optim_bufs *b, int groups);

typedef struct {
    double grad_norm;     /* before clipping, unscaled */
    double clip;          /* factor applied to the gradients (1: none) */
    int skipped;          /* the norm was not finite: nothing was updated */
    long steps;           /* updates applied so far */
    double loss_scale;    /* the scale this step's loss was multiplied by */
    double next_scale;    /* the scale the next step uses */
    long skips;           /* steps skipped so far */
} ds_optim_status;

/* The status after the last update, in backend memory: [DS_OPT_SCALARS] of
 * the scalar dtype, for a copy the host reads later. */
const void *ds_optim_scalars(const ds_optim *o);
/* Decodes such a copy (host doubles [DS_OPT_SCALARS]). */
ds_optim_status ds_optim_status_of(const double *scal);
/* Blocking read of the status. */
ds_status ds_optim_read(ds_optim *o, ds_optim_status *out);
/* The loss scale in backend memory ([1], scalar role): what the next
 * backward multiplies the loss by (ds_model_set_loss_scale). */
const void *ds_optim_loss_scale(const ds_optim *o);
/* Optimizer state for checkpoints: slot 0 and 1 (momentum / Adam moments). */
void *ds_optim_slot(ds_optim *o, int i);
/* Slot i of group g ([n] of that group, master role), NULL where the
 * optimizer keeps none (sgd without momentum; adamw has two). */
void *ds_optim_group_slot(ds_optim *o, int g, int i);
ds_opt_kind ds_optim_kind(const ds_optim *o);
int ds_optim_slots(const ds_optim *o);   /* per group: 0, 1 or 2 */
/* Every scalar of the optimizer's state (steps, skips, loss scale and its
 * clean-step count, ...): host doubles [DS_OPT_SCALARS], blocking. Setting
 * them is how a resumed run continues exactly where the checkpoint left. */
ds_status ds_optim_get_scalars(ds_optim *o, double *host);
ds_status ds_optim_set_scalars(ds_optim *o, const double *host);

#endif
