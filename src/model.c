/* model.c - building a model: parameter tables, the activation arena,
 * initialisation, batch upload and host access. The passes are in
 * model_pass.c. */
#include "model_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "rng.h"

/* ---- tables ---- */

static int add_tensor(ds_tensor *tab, int *n, size_t *total, int rank, const int *dims,
                      const char *fmt, ...)
{
    ds_tensor *t = &tab[(*n)++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->rank = rank;
    t->count = 1;
    for (int i = 0; i < rank; i++) {
        t->dims[i] = dims[i];
        t->count *= (size_t)dims[i];
    }
    t->offset = *total;
    *total += t->count;
    return *n - 1;
}

#define PARAM(m, ...) add_tensor((m)->params, &(m)->n_params, &(m)->param_count, __VA_ARGS__)
#define STATE(m, ...) add_tensor((m)->state, &(m)->n_state, &(m)->state_count, __VA_ARGS__)

static void add_bn(ds_model *m, bn_layer *l, int c, const char *prefix)
{
    l->c = c;
    l->gamma = PARAM(m, 1, (int[]){c}, "%s.bn.weight", prefix);
    l->beta = PARAM(m, 1, (int[]){c}, "%s.bn.bias", prefix);
    l->run_mean = STATE(m, 1, (int[]){c}, "%s.bn.running_mean", prefix);
    l->run_var = STATE(m, 1, (int[]){c}, "%s.bn.running_var", prefix);
}

static void add_rnn(ds_model *m, int j, int in)
{
    static const char *dir_name[2] = {"fwd", "bwd"};
    rnn_layer *r = &m->rnn[j];
    const int gh = ds_cell_gates(m->cfg.cell) * m->cfg.hidden, h = m->cfg.hidden;
    r->in = in;
    r->has_bn = j > 0;
    if (r->has_bn) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "rnn.%d", j);
        add_bn(m, &r->bn, in, prefix);
    }
    for (int d = 0; d < ds_m_rnn_dirs(m); d++) {
        r->w_ih[d] = PARAM(m, 2, (int[]){gh, in}, "rnn.%d.%s.weight_ih", j, dir_name[d]);
        r->w_hh[d] = PARAM(m, 2, (int[]){gh, h}, "rnn.%d.%s.weight_hh", j, dir_name[d]);
        r->b_ih[d] = PARAM(m, 1, (int[]){gh}, "rnn.%d.%s.bias_ih", j, dir_name[d]);
        r->b_hh[d] = PARAM(m, 1, (int[]){gh}, "rnn.%d.%s.bias_hh", j, dir_name[d]);
    }
}

/* Fills the parameter and state tables from cfg; no memory is touched. */
static ds_status build_tables(ds_model *m)
{
    const ds_model_cfg *c = &m->cfg;
    if (c->rnn_layers > DS_MAX_RNN)
        return DS_FAIL(DS_ERR_ARG, "%s: %d rnn layers, at most %d", c->name, c->rnn_layers, DS_MAX_RNN);
    int ci = 1, f = c->n_features;
    for (int i = 0; i < c->n_conv; i++) {
        conv_layer *l = &m->conv[i];
        l->k = c->conv[i];
        l->ci = ci;
        l->co = l->k.channels;
        l->fi = f;
        l->fo = ds_window_out(f, l->k.kernel_freq, l->k.stride_freq, l->k.pad_freq);
        if (l->fo < 1)
            return DS_FAIL(DS_ERR_ARG, "%s: conv[%d] leaves no frequency bins (%d in, kernel %d)",
                           c->name, i, f, l->k.kernel_freq);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "conv.%d", i);
        l->w = PARAM(m, 4, (int[]){l->co, ci, l->k.kernel_time, l->k.kernel_freq}, "%s.weight", prefix);
        l->b = PARAM(m, 1, (int[]){l->co}, "%s.bias", prefix);
        add_bn(m, &l->bn, l->co, prefix);
        ci = l->co;
        f = l->fo;
    }
    int width = ci * f;
    for (int j = 0; j < c->rnn_layers; j++) {
        add_rnn(m, j, width);
        width = c->hidden;
    }
    m->la_w = -1;
    if (!c->bidirectional && c->lookahead > 0)
        m->la_w = PARAM(m, 2, (int[]){c->hidden, c->lookahead}, "lookahead.weight");
    for (int k = 0; k < c->n_fc; k++) {
        fc_layer *l = &m->fc[k];
        l->in = width;
        l->out = c->fc_hidden[k];
        l->w = PARAM(m, 2, (int[]){l->out, l->in}, "fc_hidden.%d.weight", k);
        l->b = PARAM(m, 1, (int[]){l->out}, "fc_hidden.%d.bias", k);
        width = l->out;
    }
    m->d_out = width;
    add_bn(m, &m->out_bn, width, "fc");
    m->out_w = PARAM(m, 2, (int[]){c->n_classes, width}, "fc.weight");
    return DS_OK;
}

size_t ds_config_param_count(const ds_model_cfg *cfg)
{
    ds_model *m = calloc(1, sizeof *m);
    if (!m)
        return 0;
    m->cfg = *cfg;
    size_t n = build_tables(m) == DS_OK ? m->param_count : 0;
    free(m);
    return n;
}

int ds_config_out_frames(const ds_model_cfg *cfg, int t)
{
    for (int i = 0; i < cfg->n_conv && t > 0; i++)
        t = ds_window_out(t, cfg->conv[i].kernel_time, cfg->conv[i].stride_time, cfg->conv[i].pad_time);
    return t;
}

/* ---- the activation arena ---- */

static size_t take(size_t *cursor, size_t count)
{
    size_t at = *cursor;
    *cursor += (count + 15) / 16 * 16;   /* keep every tensor 64-byte aligned */
    return at;
}

static void plan_bn(bn_layer *l, size_t *act)
{
    l->mean = take(act, l->c);
    l->invstd = take(act, l->c);
    l->mom = take(act, 2 * (size_t)l->c);
    l->dmom = take(act, 2 * (size_t)l->c);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Assigns arena offsets for the largest batch; returns the scratch size. */
static size_t plan_arena(ds_model *m)
{
    const size_t B = (size_t)m->lim.batch, H = (size_t)m->cfg.hidden;
    size_t *act = &m->act_count, *dact = &m->dact_count, work = 0;
    m->t_max[0] = m->lim.frames;
    m->x0 = take(act, B * m->t_max[0] * m->cfg.n_features);
    for (int i = 0; i < m->cfg.n_conv; i++) {
        conv_layer *l = &m->conv[i];
        m->t_max[i + 1] = ds_window_out(m->t_max[i], l->k.kernel_time, l->k.stride_time, l->k.pad_time);
        size_t map = B * l->co * m->t_max[i + 1] * l->fo;
        l->a = take(act, map);
        l->y = take(act, map);
        plan_bn(&l->bn, act);
        l->da = take(dact, map);
        l->dbn = take(dact, map);
        l->dy = take(dact, map);
        ds_conv_geom g = {(int)B, l->ci, m->t_max[i], l->fi, l->co, l->k.kernel_time,
                          l->k.kernel_freq, l->k.stride_time, l->k.stride_freq, l->k.pad_time,
                          l->k.pad_freq, m->t_max[i + 1], l->fo};
        work = max_size(work, m->op->conv2d_work(&g));
    }
    const size_t T = (size_t)m->t_max[m->cfg.n_conv];
    m->s0 = take(act, T * B * m->rnn[0].in);
    m->ds0 = take(dact, T * B * m->rnn[0].in);
    for (int j = 0; j < m->cfg.rnn_layers; j++) {
        rnn_layer *r = &m->rnn[j];
        ds_rnn_geom g = {m->cfg.cell, (int)T, (int)B, r->in, (int)H, 0};
        if (r->has_bn) {
            r->z = take(act, T * B * r->in);
            plan_bn(&r->bn, act);
            r->dz = take(dact, T * B * r->in);
        }
        r->y = take(act, T * B * H);
        r->dy = take(dact, T * B * H);
        for (int d = 0; d < ds_m_rnn_dirs(m); d++)
            r->saved[d] = take(act, m->op->rnn_saved(&g));
        work = max_size(work, m->op->rnn_work(&g));
    }
    if (m->la_w >= 0) {
        m->la_y = take(act, T * B * H);
        m->la_dy = take(dact, T * B * H);
        m->la_dpre = take(dact, T * B * H);
    }
    for (int k = 0; k < m->cfg.n_fc; k++) {
        fc_layer *l = &m->fc[k];
        l->y = take(act, T * B * l->out);
        l->dy = take(dact, T * B * l->out);
        l->dpre = take(dact, T * B * l->out);
    }
    m->out_z = take(act, T * B * m->d_out);
    plan_bn(&m->out_bn, act);
    m->out_dz = take(dact, T * B * m->d_out);
    m->logits = take(act, T * B * m->cfg.n_classes);
    m->dlogits = take(dact, T * B * m->cfg.n_classes);
    m->losses = take(act, B);
    work = max_size(work, m->op->ctc_work((int)T, (int)B, m->cfg.n_classes, m->lim.label_len));
    m->work = take(act, work);
    return work;
}

/* ---- create / destroy ---- */

static ds_status check_limits(const ds_model_cfg *cfg, const ds_model_limits *lim)
{
    if (lim->batch < 1 || lim->frames < 1 || lim->label_len < 0)
        return DS_FAIL(DS_ERR_ARG, "model limits: batch %d, frames %d, labels %d must be positive",
                       lim->batch, lim->frames, lim->label_len);
    if (ds_config_out_frames(cfg, lim->frames) < 1)
        return DS_FAIL(DS_ERR_ARG, "%s: %d input frames leave no output frames", cfg->name,
                       lim->frames);
    return DS_OK;
}

static ds_status alloc_buffers(ds_model *m)
{
    const ds_backend *be = m->be;
    const size_t len_count = (size_t)(m->cfg.n_conv + 1) * m->lim.batch;
    const size_t label_cap = (size_t)m->lim.batch * (m->lim.label_len + 1);
    DS_TRY(be->alloc(m->ctx, m->dt, m->param_count, &m->p));
    DS_TRY(be->alloc(m->ctx, m->dt, m->param_count, &m->g));
    DS_TRY(be->alloc(m->ctx, m->dt, m->state_count ? m->state_count : 1, &m->s));
    DS_TRY(be->alloc(m->ctx, m->dt, m->act_count, &m->act));
    DS_TRY(be->alloc(m->ctx, m->dt, m->dact_count, &m->dact));
    DS_TRY(be->alloc(m->ctx, DS_I32, len_count, (void **)&m->d_len));
    DS_TRY(be->alloc(m->ctx, DS_I32, label_cap, (void **)&m->d_labels));
    DS_TRY(be->alloc(m->ctx, DS_I32, (size_t)m->lim.batch, (void **)&m->d_label_off));
    DS_TRY(be->alloc(m->ctx, DS_I32, (size_t)m->lim.batch, (void **)&m->d_label_len));
    m->h_len = calloc(len_count, sizeof *m->h_len);
    const size_t T = (size_t)m->t_max[m->cfg.n_conv], B = (size_t)m->lim.batch;
    m->stage_count = max_size((size_t)m->lim.frames * B * m->cfg.n_features, T * B * m->cfg.n_classes);
    m->stage = malloc(m->stage_count * ds_dtype_size(m->dt));
    if (!m->h_len || !m->stage)
        return DS_FAIL(DS_ERR_MEM, "host staging of %zu elements", m->stage_count);
    return DS_OK;
}

ds_status ds_model_create(const ds_model_cfg *cfg, const ds_backend *be, ds_ctx *ctx,
                          ds_dtype dt, const ds_model_limits *lim, ds_model **out)
{
    *out = NULL;
    DS_TRY(check_limits(cfg, lim));
    const ds_ops *op = be->ops(dt);
    if (!op)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the %s backend has no %s ops", be->name, ds_dtype_name(dt));
    ds_model *m = calloc(1, sizeof *m);
    if (!m)
        return DS_FAIL(DS_ERR_MEM, "model");
    m->cfg = *cfg;
    m->be = be;
    m->ctx = ctx;
    m->op = op;
    m->dt = dt;
    m->lim = *lim;
    ds_status st;
    DS_TRY_GOTO(st, build_tables(m), fail);
    m->work_count = plan_arena(m);
    DS_TRY_GOTO(st, alloc_buffers(m), fail);
    *out = m;
    return DS_OK;
fail:
    ds_model_destroy(m);
    return st;
}

void ds_model_destroy(ds_model *m)
{
    if (!m)
        return;
    void *bufs[] = {m->p, m->g, m->s, m->act, m->dact, m->d_len, m->d_labels, m->d_label_off,
                    m->d_label_len};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            m->be->release(m->ctx, bufs[i]);
    free(m->h_len);
    free(m->stage);
    free(m);
}

/* ---- initialisation ---- */

/* Fan-in bound of PyTorch's defaults: kaiming_uniform(a=sqrt(5)) for conv and
 * linear weights and their biases, 1/sqrt(hidden) for recurrent layers. */
static double init_bound(const ds_model *m, const ds_tensor *t)
{
    if (strstr(t->name, "rnn.") == t->name && !strstr(t->name, ".bn."))
        return 1.0 / sqrt((double)m->cfg.hidden);
    if (t->rank >= 2) {
        size_t fan_in = t->count / (size_t)t->dims[0];
        return 1.0 / sqrt((double)fan_in);
    }
    return 0;   /* biases: set from their weight below */
}

ds_status ds_model_init_params(ds_model *m, uint64_t seed)
{
    double *host = malloc(max_size(m->param_count, m->state_count) * sizeof *host);
    if (!host)
        return DS_FAIL(DS_ERR_MEM, "host copy of %zu parameters", m->param_count);
    ds_rng rng;
    ds_rng_seed(&rng, seed);
    double bound = 0;
    for (int i = 0; i < m->n_params; i++) {
        const ds_tensor *t = &m->params[i];
        double fill = -1;   /* -1: uniform in +-bound */
        if (strstr(t->name, ".bn.weight"))
            fill = 1;
        else if (strstr(t->name, ".bn.bias"))
            fill = 0;
        else if (t->rank >= 2 || strstr(t->name, "rnn.") == t->name)
            bound = init_bound(m, t);    /* a bias keeps its weight's bound */
        for (size_t k = 0; k < t->count; k++)
            host[t->offset + k] = fill >= 0 ? fill : ds_rng_range(&rng, -bound, bound);
    }
    ds_status st = ds_model_put(m, DS_PARAMS, host);
    for (int i = 0; st == DS_OK && i < m->n_state; i++) {
        const ds_tensor *t = &m->state[i];
        double v = strstr(t->name, "running_var") ? 1.0 : 0.0;
        for (size_t k = 0; k < t->count; k++)
            host[t->offset + k] = v;
    }
    if (st == DS_OK)
        st = ds_model_put(m, DS_BN_STATS, host);
    free(host);
    return st;
}

/* ---- host access ---- */

static ds_status buffer_of(ds_model *m, int which, void **buf, size_t *count)
{
    switch (which) {
    case DS_PARAMS: *buf = m->p; *count = m->param_count; return DS_OK;
    case DS_GRADS: *buf = m->g; *count = m->param_count; return DS_OK;
    case DS_BN_STATS: *buf = m->s; *count = m->state_count; return DS_OK;
    }
    return DS_FAIL(DS_ERR_ARG, "no model buffer %d", which);
}

/* Copies buffer which to (to_host) or from host doubles through a staging
 * copy in the model's dtype. */
static ds_status transfer(ds_model *m, int which, int to_host, double *host)
{
    void *buf = NULL;
    size_t n = 0;
    DS_TRY(buffer_of(m, which, &buf, &n));
    void *tmp = malloc(n * ds_dtype_size(m->dt) + 1);
    if (!tmp)
        return DS_FAIL(DS_ERR_MEM, "host copy of %zu elements", n);
    ds_status st;
    if (to_host) {
        st = m->be->to_host(m->ctx, m->dt, n, buf, tmp);
        if (st == DS_OK)
            st = ds_convert(DS_F64, host, m->dt, tmp, n);
    } else {
        st = ds_convert(m->dt, tmp, DS_F64, host, n);
        if (st == DS_OK)
            st = m->be->from_host(m->ctx, m->dt, n, tmp, buf);
    }
    free(tmp);
    return st;
}

ds_status ds_model_get(ds_model *m, int which, double *host) { return transfer(m, which, 1, host); }

ds_status ds_model_put(ds_model *m, int which, const double *host)
{
    return transfer(m, which, 0, (double *)host);   /* only read when copying to the backend */
}

/* ---- the batch ---- */

static ds_status stage_lengths(ds_model *m, const ds_batch *b)
{
    const int B = m->lim.batch;
    m->t[0] = b->t;
    memset(m->count, 0, sizeof m->count);
    for (int i = 0; i < b->n; i++) {
        if (b->lengths[i] < 1 || b->lengths[i] > b->t)
            return DS_FAIL(DS_ERR_ARG, "batch utterance %d: length %d outside 1..%d", i,
                           b->lengths[i], b->t);
        m->h_len[i] = b->lengths[i];
    }
    for (int s = 0; s < m->cfg.n_conv; s++) {
        const ds_conv_cfg *k = &m->conv[s].k;
        m->t[s + 1] = ds_window_out(m->t[s], k->kernel_time, k->stride_time, k->pad_time);
        for (int i = 0; i < b->n; i++) {
            int l = ds_window_out(m->h_len[s * B + i], k->kernel_time, k->stride_time, k->pad_time);
            if (l < 1)
                return DS_FAIL(DS_ERR_ARG, "batch utterance %d (%d frames) is too short for conv[%d]",
                               i, b->lengths[i], s);
            m->h_len[(s + 1) * B + i] = l;
            m->count[s + 1] += (double)l * m->conv[s].fo;
        }
    }
    m->seq_count = 0;
    for (int i = 0; i < b->n; i++)
        m->seq_count += m->h_len[m->cfg.n_conv * B + i];
    return DS_OK;
}

ds_status ds_model_set_batch(ds_model *m, const ds_batch *b)
{
    if (b->n < 1 || b->n > m->lim.batch || b->t > m->lim.frames || b->f != m->cfg.n_features)
        return DS_FAIL(DS_ERR_ARG,
                       "batch of %d x %d frames x %d features does not fit the model (%d x %d x %d)",
                       b->n, b->t, b->f, m->lim.batch, m->lim.frames, m->cfg.n_features);
    m->n = b->n;
    m->have_dlogits = 0;
    m->loss_norm = 0;
    m->max_label = ds_batch_max_label(b);
    if (m->max_label > m->lim.label_len)
        return DS_FAIL(DS_ERR_ARG, "batch has a transcript of %d labels, the model was sized for %d",
                       m->max_label, m->lim.label_len);
    DS_TRY(stage_lengths(m, b));
    const size_t nf = (size_t)b->n * b->t * b->f;
    DS_TRY(ds_convert(m->dt, m->stage, DS_F32, b->features, nf));
    DS_TRY(m->be->from_host(m->ctx, m->dt, nf, m->stage, ds_m_act(m, m->x0)));
    DS_TRY(m->be->from_host(m->ctx, DS_I32, (size_t)(m->cfg.n_conv + 1) * m->lim.batch, m->h_len,
                            m->d_len));
    int total = b->n ? b->label_off[b->n - 1] + b->label_len[b->n - 1] : 0;
    if (total > m->lim.batch * (m->lim.label_len + 1))
        return DS_FAIL(DS_ERR_ARG, "batch holds %d labels, more than the model's capacity", total);
    DS_TRY(m->be->from_host(m->ctx, DS_I32, (size_t)total, b->labels, m->d_labels));
    DS_TRY(m->be->from_host(m->ctx, DS_I32, (size_t)b->n, b->label_off, m->d_label_off));
    DS_TRY(m->be->from_host(m->ctx, DS_I32, (size_t)b->n, b->label_len, m->d_label_len));
    return DS_OK;
}

/* ---- data parallelism ---- */

void ds_model_set_hooks(ds_model *m, const ds_model_hooks *h) { m->hooks = *h; }

void ds_model_set_loss_norm(ds_model *m, double utterances) { m->loss_norm = utterances; }

/* ---- accessors ---- */

int ds_model_n_params(const ds_model *m) { return m->n_params; }
const ds_tensor *ds_model_param(const ds_model *m, int i) { return &m->params[i]; }
int ds_model_n_bn_stats(const ds_model *m) { return m->n_state; }
const ds_tensor *ds_model_bn_stat(const ds_model *m, int i) { return &m->state[i]; }
size_t ds_model_param_count(const ds_model *m) { return m->param_count; }
size_t ds_model_bn_stats_count(const ds_model *m) { return m->state_count; }
ds_dtype ds_model_dtype(const ds_model *m) { return m->dt; }
const ds_model_cfg *ds_model_config(const ds_model *m) { return &m->cfg; }
void *ds_model_params(ds_model *m) { return m->p; }
void *ds_model_grads(ds_model *m) { return m->g; }
void *ds_model_bn_stats(ds_model *m) { return m->s; }
int ds_model_batch_out_frames(const ds_model *m) { return m->t[m->cfg.n_conv]; }
const int *ds_model_out_lengths(const ds_model *m)
{
    return m->h_len + (size_t)m->cfg.n_conv * m->lim.batch;
}

ds_status ds_model_logits(ds_model *m, double *host)
{
    const size_t n = (size_t)ds_model_batch_out_frames(m) * m->n * m->cfg.n_classes;
    DS_TRY(m->be->to_host(m->ctx, m->dt, n, ds_m_act(m, m->logits), m->stage));
    return ds_convert(DS_F64, host, m->dt, m->stage, n);
}
