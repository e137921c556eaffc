/* optim.c - optimizers, learning-rate schedules and gradient clipping; see
 * optim.h. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A group of parameters updated by the ops of its gradients' dtype. */
typedef struct {
    const ds_ops *op;
    size_t n;
    void *slot[2];      /* sgd: momentum in slot 0; adamw: first and second moments (master role) */
} opt_group;

enum { MAX_GROUPS = 2 };

struct ds_optim {
    ds_optim_cfg cfg;
    const ds_backend *be;
    ds_ctx *ctx;
    opt_group g[MAX_GROUPS];
    int groups;
    void *scal;         /* backend [DS_OPT_BUFFER], scalar role (FP64) */
    double host[DS_OPT_SCALARS];
};

ds_optim_cfg ds_optim_defaults(void)
{
    return (ds_optim_cfg){.kind = DS_OPT_SGD, .lr = 3e-4, .momentum = 0.9, .nesterov = 1,
                          .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-5,
                          .schedule = DS_LR_ANNEAL, .anneal = 1.1, .poly_power = 1.0,
                          .total_steps = 0, .warmup_steps = 0, .max_grad_norm = 400,
                          .loss_scale = 1, .loss_scale_window = 0};
}

const char *ds_optim_kind_name(ds_opt_kind k) { return k == DS_OPT_SGD ? "sgd" : "adamw"; }

const char *ds_optim_lr_schedule_name(ds_lr_kind k)
{
    return k == DS_LR_CONSTANT ? "constant" : k == DS_LR_ANNEAL ? "anneal" : "poly";
}

ds_status ds_optim_parse_kind(const char *s, ds_opt_kind *out)
{
    if (!strcmp(s, "sgd"))
        *out = DS_OPT_SGD;
    else if (!strcmp(s, "adamw"))
        *out = DS_OPT_ADAMW;
    else
        return DS_FAIL(DS_ERR_ARG, "--optimizer %s: expected sgd or adamw", s);
    return DS_OK;
}

ds_status ds_optim_parse_schedule(const char *s, ds_lr_kind *out)
{
    for (int k = DS_LR_CONSTANT; k <= DS_LR_POLY; k++)
        if (!strcmp(s, ds_optim_lr_schedule_name((ds_lr_kind)k))) {
            *out = (ds_lr_kind)k;
            return DS_OK;
        }
    return DS_FAIL(DS_ERR_ARG, "--lr-schedule %s: expected constant, anneal or poly", s);
}

double ds_optim_lr(const ds_optim_cfg *c, long step, int epoch)
{
    double lr = c->lr;
    switch (c->schedule) {
    case DS_LR_CONSTANT: break;
    case DS_LR_ANNEAL: lr /= pow(c->anneal, epoch); break;
    case DS_LR_POLY: {
        double left = c->total_steps > 0 ? 1.0 - (double)step / c->total_steps : 1.0;
        lr *= pow(left > 0 ? left : 0, c->poly_power);
        break;
    }
    }
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        lr *= (double)(step + 1) / c->warmup_steps;
    return lr;
}

ds_status ds_optim_add_group(ds_optim *o, ds_dtype dt, size_t n)
{
    if (o->groups == MAX_GROUPS)
        return DS_FAIL(DS_ERR_ARG, "optimizer: at most %d groups of parameters", MAX_GROUPS);
    opt_group *g = &o->g[o->groups];
    g->op = o->be->ops(dt);
    if (!g->op)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "optimizer: no %s ops on %s", ds_dtype_name(dt),
                       o->be->name);
    g->n = n;
    o->groups++;
    const ds_dtype master = ds_backend_precision_roles(dt).master;
    const int slots = ds_optim_slots(o);
    for (int i = 0; i < slots; i++)
        DS_TRY(o->be->alloc(o->ctx, master, n, &g->slot[i]));
    return DS_OK;
}

ds_status ds_optim_create(const ds_optim_cfg *c, const ds_backend *be, ds_ctx *ctx, ds_dtype dt,
                          size_t n, ds_optim **out)
{
    *out = NULL;
    ds_optim *o = calloc(1, sizeof *o);
    if (!o)
        return DS_FAIL(DS_ERR_MEM, "optimizer");
    *o = (ds_optim){.cfg = *c, .be = be, .ctx = ctx};
    ds_status st;
    DS_TRY_GOTO(st, ds_optim_add_group(o, dt, n), fail);
    DS_TRY_GOTO(st, be->alloc(ctx, DS_F64, DS_OPT_BUFFER, &o->scal), fail);
    o->host[DS_OPT_SCALE] = c->loss_scale;   /* the rest start at 0 */
    DS_TRY_GOTO(st, be->from_host(ctx, DS_F64, DS_OPT_SCALARS, o->host, o->scal), fail);
    *out = o;
    return DS_OK;
fail:
    ds_optim_destroy(o);
    return st;
}

void ds_optim_destroy(ds_optim *o)
{
    if (!o)
        return;
    for (int k = 0; k < MAX_GROUPS; k++)
        for (int i = 0; i < 2; i++)
            if (o->g[k].slot[i])
                o->be->release(o->ctx, o->g[k].slot[i]);
    if (o->scal)
        o->be->release(o->ctx, o->scal);
    free(o);
}

ds_status ds_optim_set_lr(ds_optim *o, double lr)
{
    /* queued with the step (the host's value is copied at the call) */
    return o->be->from_host(o->ctx, DS_F64, 1, &lr, ds_elem(o->scal, DS_F64, DS_OPT_LR));
}

ds_status ds_optim_update(ds_optim *o, const ds_optim_bufs *b, int groups, double lr)
{
    DS_TRY(ds_optim_set_lr(o, lr));
    return ds_optim_apply(o, b, groups);
}

ds_status ds_optim_apply(ds_optim *o, const ds_optim_bufs *b, int groups)
{
    if (groups != o->groups)   /* a group left out would keep its gradients and never move */
        return DS_FAIL(DS_ERR_ARG, "optimizer made for %d groups of parameters, given %d", o->groups,
                       groups);
    const ds_optim_cfg *c = &o->cfg;
    ds_opt_hparams h = {.momentum = c->momentum, .nesterov = c->nesterov,
                        .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                        .weight_decay = c->weight_decay, .max_norm = c->max_grad_norm,
                        .scale_window = (double)c->loss_scale_window};
    /* one global norm: every group's squares added into one scalar */
    DS_TRY(o->be->zero(o->ctx, DS_F64, 1, ds_elem(o->scal, DS_F64, DS_OPT_SUMSQ)));
    for (int k = 0; k < o->groups; k++)
        DS_TRY(o->g[k].op->sumsq(o->ctx, o->g[k].n, b[k].grads, o->scal));
    for (int k = 0; k < o->groups; k++) {
        const opt_group *g = &o->g[k];
        h.decided = k > 0;   /* the first group decides for all */
        if (c->kind == DS_OPT_ADAMW)
            DS_TRY(g->op->adamw_step(o->ctx, g->n, &h, b[k].params, b[k].grads, g->slot[0],
                                     g->slot[1], b[k].work, o->scal));
        else
            DS_TRY(g->op->sgd_step(o->ctx, g->n, &h, b[k].params, b[k].grads, g->slot[0],
                                   b[k].work, o->scal));
    }
    return DS_OK;
}

const void *ds_optim_scalars(const ds_optim *o) { return o->scal; }

ds_optim_status ds_optim_status_of(const double *s)
{
    return (ds_optim_status){.grad_norm = s[DS_OPT_NORM], .clip = s[DS_OPT_CLIP],
                             .skipped = s[DS_OPT_SKIPPED] != 0, .steps = (long)s[DS_OPT_STEPS],
                             .loss_scale = s[DS_OPT_SCALE_USED], .next_scale = s[DS_OPT_SCALE],
                             .skips = (long)s[DS_OPT_SKIPS]};
}

ds_status ds_optim_read(ds_optim *o, ds_optim_status *out)
{
    DS_TRY(o->be->to_host(o->ctx, DS_F64, DS_OPT_SCALARS, o->scal, o->host));
    *out = ds_optim_status_of(o->host);
    return DS_OK;
}

const void *ds_optim_loss_scale(const ds_optim *o) { return ds_elem(o->scal, DS_F64, DS_OPT_SCALE); }

void *ds_optim_slot(ds_optim *o, int i) { return ds_optim_group_slot(o, 0, i); }

void *ds_optim_group_slot(ds_optim *o, int g, int i)
{
    return g >= 0 && g < o->groups && i >= 0 && i < 2 ? o->g[g].slot[i] : NULL;
}

ds_opt_kind ds_optim_kind(const ds_optim *o) { return o->cfg.kind; }

int ds_optim_slots(const ds_optim *o)
{
    return o->cfg.kind == DS_OPT_ADAMW ? 2 : (o->cfg.momentum != 0 ? 1 : 0);
}

ds_status ds_optim_get_scalars(ds_optim *o, double *host)
{
    return o->be->to_host(o->ctx, DS_F64, DS_OPT_SCALARS, o->scal, host);
}

ds_status ds_optim_set_scalars(ds_optim *o, const double *host)
{
    return o->be->from_host(o->ctx, DS_F64, DS_OPT_SCALARS, host, o->scal);
}
