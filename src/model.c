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

/* Appends a tensor to tab; its packed host offset follows the previous ones.
 * Returns its index, or -1 with the error recorded when the table is full. */
static int add_tensor(ds_tensor *tab, int *n, size_t *total, int rank, const int *dims,
                      const char *fmt, ...)
{
    if (*n >= DS_MAX_TENSORS) {
        DS_FAIL(DS_ERR_ARG, "the model has more than %d tensors", DS_MAX_TENSORS);
        return -1;
    }
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
#define STAT(m, ...) add_tensor((m)->stats, &(m)->n_stats, &(m)->stats_count, __VA_ARGS__)

static void add_bn(ds_model *m, bn_layer *l, int c, const char *prefix)
{
    l->c = c;
    l->gamma = PARAM(m, 1, (int[]){c}, "%s.bn.weight", prefix);
    l->beta = PARAM(m, 1, (int[]){c}, "%s.bn.bias", prefix);
    l->run_mean = STAT(m, 1, (int[]){c}, "%s.bn.running_mean", prefix);
    l->run_var = STAT(m, 1, (int[]){c}, "%s.bn.running_var", prefix);
}

/* Layer j's BatchNorm (j > 0), then its weight span: per direction w_ih,
 * w_hh, b_ih, b_hh, in the order of ds_rnn_layout's offsets. */
static void add_rnn(ds_model *m, int j, int in)
{
    static const char *dir_name[2] = {"fwd", "bwd"};
    rnn_layer *r = &m->rnn[j];
    const int gh = ds_backend_cell_gates(m->cfg.cell) * m->cfg.hidden, h = m->cfg.hidden;
    r->in = in;
    r->has_bn = j > 0;
    if (r->has_bn) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "rnn.%d", j);
        add_bn(m, &r->bn, in, prefix);
    }
    r->first_w = m->n_params;
    for (int dir = 0; dir < ds_m_rnn_dirs(m); dir++) {
        PARAM(m, 2, (int[]){gh, in}, "rnn.%d.%s.weight_ih", j, dir_name[dir]);
        PARAM(m, 2, (int[]){gh, h}, "rnn.%d.%s.weight_hh", j, dir_name[dir]);
        PARAM(m, 1, (int[]){gh}, "rnn.%d.%s.bias_ih", j, dir_name[dir]);
        PARAM(m, 1, (int[]){gh}, "rnn.%d.%s.bias_hh", j, dir_name[dir]);
    }
    for (int i = r->first_w; i < m->n_params; i++)
        m->span_of[i] = j;
}

/* An FC layer of in -> out with its bias, named prefix.weight / .bias. */
static void add_fc(ds_model *m, fc_layer *l, int in, int out, int site, const char *prefix)
{
    l->in = in;
    l->out = out;
    l->site = site;
    l->w = PARAM(m, 2, (int[]){out, in}, "%s.weight", prefix);
    l->b = PARAM(m, 1, (int[]){out}, "%s.bias", prefix);
}

/* The residual branches into layer i (none but at a block's last layer). */
static void add_residuals(ds_model *m, int i)
{
    conv_layer *l = &m->conv[i];
    int src[DS_MAX_RES];
    l->n_res = ds_config_residual_sources(&m->cfg, i, src);
    for (int r = 0; r < l->n_res; r++) {
        res_branch *b = &l->res[r];
        b->src = src[r];
        b->w = PARAM(m, 4, (int[]){l->co, m->conv[src[r]].co, 1, 1}, "conv.%d.res.%d.weight", i, r);
        char prefix[40];
        snprintf(prefix, sizeof prefix, "conv.%d.res.%d", i, r);
        add_bn(m, &b->bn, l->co, prefix);
    }
}

/* Fills the parameter and statistics tables from cfg; no memory is touched. */
static ds_status build_tables(ds_model *m)
{
    const ds_model_cfg *c = &m->cfg;
    if (c->rnn_layers < 0 || c->rnn_layers > DS_MAX_RNN)
        return DS_FAIL(DS_ERR_ARG, "%s: %d rnn layers, need 0..%d", c->name, c->rnn_layers, DS_MAX_RNN);
    for (int i = 0; i < DS_MAX_TENSORS; i++)
        m->span_of[i] = -1;
    int ci = 1, f = c->n_features;
    for (int i = 0; i < c->n_conv; i++) {
        conv_layer *l = &m->conv[i];
        l->k = c->conv[i];
        l->ci = ci;
        l->co = l->k.channels;
        l->fi = f;
        l->fo = ds_window_out(f, l->k.kernel_freq, l->k.stride_freq, l->k.pad_freq);
        l->hi = l->k.relu ? INFINITY : HARDTANH_HI;
        l->site = 2 * DS_MAX_FC + i;
        if (l->fo < 1)
            return DS_FAIL(DS_ERR_ARG, "%s: conv[%d] leaves no frequency bins (%d in, kernel %d)",
                           c->name, i, f, l->k.kernel_freq);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "conv.%d", i);
        l->w = PARAM(m, 4, (int[]){l->co, ci, l->k.kernel_time, l->k.kernel_freq}, "%s.weight", prefix);
        l->b = l->k.no_bias ? -1 : PARAM(m, 1, (int[]){l->co}, "%s.bias", prefix);
        add_bn(m, &l->bn, l->co, prefix);
        add_residuals(m, i);
        ci = l->co;
        f = l->fo;
    }
    /* the sequence input: conv maps flattened, or frames (with their context) */
    int width = c->n_conv ? ci * f : (2 * c->context + 1) * c->n_features;
    m->s0_width = width;
    for (int k = 0; k < c->n_fc_pre; k++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "fc_pre.%d", k);
        add_fc(m, &m->fc_pre[k], width, c->fc_pre[k], k, prefix);
        width = c->fc_pre[k];
    }
    for (int j = 0; j < c->rnn_layers; j++) {
        add_rnn(m, j, width);
        width = c->hidden;
    }
    m->la_w = -1;
    if (!c->bidirectional && c->lookahead > 0)
        m->la_w = PARAM(m, 2, (int[]){c->hidden, c->lookahead}, "lookahead.weight");
    for (int k = 0; k < c->n_fc; k++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "fc_hidden.%d", k);
        add_fc(m, &m->fc[k], width, c->fc_hidden[k], DS_MAX_FC + k, prefix);
        width = c->fc_hidden[k];
    }
    m->d_out = width;
    if (c->out_bn)
        add_bn(m, &m->out_bn, width, "fc");
    m->out_w = PARAM(m, 2, (int[]){c->n_classes, width}, "fc.weight");
    m->out_b = c->out_bias ? PARAM(m, 1, (int[]){c->n_classes}, "fc.bias") : -1;
    return m->out_w < 0 || (c->out_bias && m->out_b < 0) ? DS_ERR_ARG : DS_OK;   /* a full table recorded its error */
}

/* ---- placement: where each tensor lives in the flat buffers ---- */

/* The backend's plan and layout of every recurrent layer, for the limits. */
static ds_status plan_rnn_layers(ds_model *m)
{
    const int T = m->t_max[m->cfg.n_conv];
    for (int j = 0; j < m->cfg.rnn_layers; j++) {
        rnn_layer *r = &m->rnn[j];
        const ds_rnn_desc d = {m->cfg.cell, ds_m_rnn_dirs(m), r->in, m->cfg.hidden, T, m->lim.batch};
        DS_TRY(m->op->rnn_plan(m->ctx, &d, &r->plan, &r->layout));
    }
    return DS_OK;
}

/* A recurrent layer's tensor k of direction dir, checked against its span. */
static ds_status place_in_span(ds_model *m, int i)
{
    rnn_layer *r = &m->rnn[m->span_of[i]];
    const int slot = i - r->first_w, dir = slot / DS_RNN_TENSORS, k = slot % DS_RNN_TENSORS;
    const size_t at = r->layout.offset[dir][k];
    if (at + m->params[i].count > r->layout.span)
        return DS_FAIL(DS_ERR_ARG, "%s backend placed %s at %zu, past its layer's span of %zu",
                       m->be->name, m->params[i].name, at, r->layout.span);
    m->params[i].place = r->span + at;
    return DS_OK;
}

/* BatchNorm's weight and bias (its running statistics are the stats table). */
static int is_bn_param(const ds_tensor *t) { return strstr(t->name, ".bn.") != NULL; }

/* Forward order, every tensor aligned; a recurrent layer's weights as its
 * span. When the stats dtype is not the compute dtype (fp16, bf16),
 * BatchNorm's parameters go to their own buffer in the stats dtype. */
static ds_status place_tensors(ds_model *m)
{
    const int apart = m->roles.stats != m->dt;
    size_t at = 0;
    m->bn_param_span = 0;
    for (int i = 0; i < m->n_params; i++) {
        if (apart && is_bn_param(&m->params[i])) {
            m->params[i].group = 1;
            m->params[i].place = m->bn_param_span;
            m->bn_param_span += ds_backend_align_elems(m->roles.stats, m->params[i].count);
            continue;
        }
        if (m->span_of[i] < 0) {
            m->params[i].place = at;
            at += ds_backend_align_elems(m->dt, m->params[i].count);
            continue;
        }
        rnn_layer *r = &m->rnn[m->span_of[i]];
        if (i == r->first_w) {
            r->span = at;
            at += ds_backend_align_elems(m->dt, r->layout.span);
        }
        DS_TRY(place_in_span(m, i));
    }
    m->param_span = at;
    at = 0;
    for (int i = 0; i < m->n_stats; i++) {
        m->stats[i].place = at;
        at += ds_backend_align_elems(m->roles.stats, m->stats[i].count);
    }
    m->stats_span = at;
    return DS_OK;
}

size_t ds_model_config_param_count(const ds_model_cfg *cfg)
{
    ds_model *m = calloc(1, sizeof *m);
    if (!m)
        return 0;
    m->cfg = *cfg;
    size_t n = build_tables(m) == DS_OK ? m->param_count : 0;
    free(m);
    return n;
}

int ds_model_config_out_frames(const ds_model_cfg *cfg, int t)
{
    for (int i = 0; i < cfg->n_conv && t > 0; i++)
        t = ds_config_conv_frames(&cfg->conv[i], t);
    return t;
}

/* ---- the arenas ---- */

/* A region of count elements of dtype t at *cursor, every region aligned. */
static size_t take(size_t *cursor, ds_dtype t, size_t count)
{
    size_t at = *cursor;
    *cursor += ds_backend_align_elems(t, count);
    return at;
}

static void plan_bn(ds_model *m, bn_layer *l)
{
    const ds_dtype st = m->roles.stats;
    l->mean = take(&m->bna_count, st, l->c);
    l->invstd = take(&m->bna_count, st, l->c);
    l->mom = take(&m->bna_count, st, 2 * (size_t)l->c);
    l->dmom = take(&m->bna_count, st, 2 * (size_t)l->c);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Frames after each conv stage at the limits. */
static void plan_frames(ds_model *m)
{
    m->t_max[0] = m->lim.frames;
    for (int i = 0; i < m->cfg.n_conv; i++)
        m->t_max[i + 1] = ds_m_conv_frames(m, i, m->t_max[i]);
}

/* An FC layer's activations for rows = frames x batch; the activation and
 * its gradient apart from the output only when dropout stands between. */
static void plan_fc(ds_model *m, fc_layer *l, size_t rows)
{
    size_t *act = &m->act_count, *dact = &m->dact_count;
    l->y = take(act, m->dt, rows * l->out);
    l->dy = take(dact, m->dt, rows * l->out);
    l->dpre = take(dact, m->dt, rows * l->out);
    l->a = l->y, l->da = l->dy;
    if (m->cfg.dropout > 0) {
        l->a = take(act, m->dt, rows * l->out);
        l->da = take(dact, m->dt, rows * l->out);
    }
}

/* The work conv layer i and its residual branches need at the largest
 * batch and length: the backend makes its start-up choices for them here
 * (conv2d_work). As conv_backward (model_pass.c): the first layer's input,
 * the features, gets no gradient, so its backward never asks for dx. */
static size_t conv_work(ds_model *m, int i)
{
    ds_conv_geom g = ds_m_conv_geom(m, i, -1, m->lim.batch, m->t_max);
    size_t work = m->op->conv2d_work(m->ctx, &g, i > 0);
    for (int r = 0; r < m->conv[i].n_res; r++) {
        g = ds_m_conv_geom(m, i, r, m->lim.batch, m->t_max);
        work = max_size(work, m->op->conv2d_work(m->ctx, &g, 1));
    }
    return work;
}

/* Conv layer i's activations and its branches'; returns the work it needs. */
static size_t plan_conv(ds_model *m, int i)
{
    conv_layer *l = &m->conv[i];
    size_t *act = &m->act_count, *dact = &m->dact_count;
    const ds_dtype dt = m->dt;
    const size_t map = (size_t)m->lim.batch * l->co * m->t_max[i + 1] * l->fo;
    l->a = take(act, dt, map);
    l->y = take(act, dt, map);
    plan_bn(m, &l->bn);
    l->da = take(dact, dt, map);
    l->dbn = take(dact, dt, map);
    l->dy = take(dact, dt, map);
    l->o = l->y, l->dout = l->dy;
    if (l->k.dropout > 0) {
        l->o = take(act, dt, map);
        l->dout = take(dact, dt, map);
    }
    for (int r = 0; r < l->n_res; r++) {
        res_branch *b = &l->res[r];
        b->a = take(act, dt, map);
        b->z = take(act, dt, map);
        plan_bn(m, &b->bn);
        b->da = take(dact, dt, map);
    }
    return conv_work(m, i);
}

/* Assigns arena offsets for the largest batch, scratch included. */
static void plan_arenas(ds_model *m)
{
    const size_t B = (size_t)m->lim.batch, H = (size_t)m->cfg.hidden;
    const ds_dtype dt = m->dt;
    size_t *act = &m->act_count, *dact = &m->dact_count, work = 0;
    m->x0 = take(act, dt, B * m->t_max[0] * m->cfg.n_features);
    for (int i = 0; i < m->cfg.n_conv; i++)
        work = max_size(work, plan_conv(m, i));
    const size_t T = (size_t)m->t_max[m->cfg.n_conv];
    m->s0 = take(act, dt, T * B * m->s0_width);
    m->ds0 = take(dact, dt, T * B * m->s0_width);
    for (int k = 0; k < m->cfg.n_fc_pre; k++)
        plan_fc(m, &m->fc_pre[k], T * B);
    for (int j = 0; j < m->cfg.rnn_layers; j++) {
        rnn_layer *r = &m->rnn[j];
        if (r->has_bn) {
            r->z = take(act, dt, T * B * r->in);
            plan_bn(m, &r->bn);
            r->dz = take(dact, dt, T * B * r->in);
        }
        r->y = take(act, dt, T * B * H);
        r->dy = take(dact, dt, T * B * H);
        r->reserve = take(act, dt, r->layout.reserve);
        work = max_size(work, r->layout.work);
    }
    if (m->la_w >= 0) {
        m->la_y = take(act, dt, T * B * H);
        m->la_dy = take(dact, dt, T * B * H);
        m->la_dpre = take(dact, dt, T * B * H);
        work = max_size(work, m->op->lookahead_work((int)B, (int)H));
    }
    for (int k = 0; k < m->cfg.n_fc; k++)
        plan_fc(m, &m->fc[k], T * B);
    if (m->cfg.out_bn) {
        m->out_z = take(act, dt, T * B * m->d_out);
        plan_bn(m, &m->out_bn);
        m->out_dz = take(dact, dt, T * B * m->d_out);
    }
    m->logits = take(act, dt, T * B * m->cfg.n_classes);
    m->dlogits = take(dact, dt, T * B * m->cfg.n_classes);
    m->losses = take(&m->sca_count, m->roles.scalar, B);
    m->loss_total = take(&m->sca_count, m->roles.scalar, DS_LOSS_SCALARS);
    m->batch_sca = take(&m->sca_count, m->roles.scalar, DS_M_BATCH_SCALARS);
    work = max_size(work, m->op->ctc_work((int)T, (int)B, m->cfg.n_classes, m->lim.label_len));
    m->work = take(act, dt, work);
}

/* ---- create / destroy ---- */

static ds_status check_limits(const ds_model_cfg *cfg, const ds_model_limits *lim)
{
    if (lim->batch < 1 || lim->frames < 1 || lim->label_len < 0)
        return DS_FAIL(DS_ERR_ARG, "model limits: batch %d, frames %d, labels %d must be positive",
                       lim->batch, lim->frames, lim->label_len);
    if (ds_model_config_out_frames(cfg, lim->frames) < 1)
        return DS_FAIL(DS_ERR_ARG, "%s: %d input frames leave no output frames", cfg->name,
                       lim->frames);
    return DS_OK;
}

/* Host staging: the largest of the flat buffers, the input batch and the
 * logits, in their dtypes, and the losses. */
static size_t stage_bytes(const ds_model *m)
{
    const size_t T = (size_t)m->t_max[m->cfg.n_conv], B = (size_t)m->lim.batch;
    const size_t in = (size_t)m->lim.frames * B * m->cfg.n_features;
    size_t bytes = max_size(m->param_span, max_size(in, T * B * m->cfg.n_classes)) * ds_dtype_size(m->dt);
    bytes = max_size(bytes, m->param_span * ds_dtype_size(m->roles.master));
    bytes = max_size(bytes, max_size(m->stats_span, m->bn_param_span) * ds_dtype_size(m->roles.stats));
    return max_size(bytes, (B + DS_LOSS_SCALARS) * ds_dtype_size(m->roles.scalar));
}

static ds_status alloc_buffers(ds_model *m)
{
    const ds_backend *be = m->be;
    const size_t len_count = (size_t)(m->cfg.n_conv + 1) * m->lim.batch;
    const size_t label_cap = (size_t)m->lim.batch * (m->lim.label_len + 1);
    DS_TRY(be->alloc(m->ctx, m->dt, m->param_span, &m->p));
    DS_TRY(be->alloc(m->ctx, m->dt, m->param_span, &m->g));
    if (m->roles.master != m->dt)
        DS_TRY(be->alloc(m->ctx, m->roles.master, m->param_span, &m->pm));
    if (m->bn_param_span) {
        DS_TRY(be->alloc(m->ctx, m->roles.stats, m->bn_param_span, &m->bp));
        DS_TRY(be->alloc(m->ctx, m->roles.stats, m->bn_param_span, &m->bg));
    }
    DS_TRY(be->alloc(m->ctx, m->roles.stats, m->stats_span, &m->rs));
    DS_TRY(be->alloc(m->ctx, m->dt, m->act_count, &m->act));
    DS_TRY(be->alloc(m->ctx, m->dt, m->dact_count, &m->dact));
    DS_TRY(be->alloc(m->ctx, m->roles.stats, m->bna_count, &m->bna));
    DS_TRY(be->alloc(m->ctx, m->roles.scalar, m->sca_count, &m->sca));
    DS_TRY(be->alloc(m->ctx, DS_I32, len_count, (void **)&m->d_len));
    DS_TRY(be->alloc(m->ctx, DS_I32, label_cap, (void **)&m->d_labels));
    DS_TRY(be->alloc(m->ctx, DS_I32, (size_t)m->lim.batch, (void **)&m->d_label_off));
    DS_TRY(be->alloc(m->ctx, DS_I32, (size_t)m->lim.batch, (void **)&m->d_label_len));
    DS_TRY(be->alloc(m->ctx, DS_I32, (size_t)m->t_max[m->cfg.n_conv] * m->lim.batch,
                     (void **)&m->d_best));
    DS_TRY(be->host_alloc(m->ctx, len_count * sizeof *m->h_len, (void **)&m->h_len));
    DS_TRY(be->host_alloc(m->ctx, DS_M_BATCH_SCALARS * sizeof *m->h_sca, (void **)&m->h_sca));
    memset(m->h_sca, 0, DS_M_BATCH_SCALARS * sizeof *m->h_sca);   /* as uploaded: nothing yet */
    m->stage_bytes = stage_bytes(m);
    return be->host_alloc(m->ctx, m->stage_bytes, &m->stage);
}

/* The backend's table for the compute dtype, and its stats dtype's when
 * BatchNorm's parameters are kept apart (their optimizer group runs on it). */
static ds_status check_precision(const ds_backend *be, ds_dtype dt, const ds_ops **op)
{
    *op = be->ops(dt);
    if (!*op)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the %s backend has no %s ops", be->name, ds_dtype_name(dt));
    const ds_dtype stats = ds_backend_precision_roles(dt).stats;
    if (!be->ops(stats))
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the %s backend has no %s ops for BatchNorm's parameters",
                       be->name, ds_dtype_name(stats));
    return DS_OK;
}

/* The backend's start-up choices made here, then the ones h->choices_agree
 * gives (rank 0's) run instead, before the arenas size the work they need. */
static ds_status agree_choices(ds_model *m)
{
    const ds_backend *be = m->be;
    if (!m->hooks.choices_agree || !be->choices_get || !be->choices_set)
        return DS_OK;
    for (int i = 0; i < m->cfg.n_conv; i++)
        (void)conv_work(m, i);   /* a failed choice stays recorded for the layer's ops */
    const int n = be->choices_get(m->ctx, NULL, 0);
    ds_choice *c = calloc(n > 0 ? (size_t)n : 1, sizeof *c);
    if (!c)
        return DS_FAIL(DS_ERR_MEM, "model: %d start-up choices", n);
    be->choices_get(m->ctx, c, n);
    ds_status st = m->hooks.choices_agree(m->hooks.user, c, n);
    if (st == DS_OK)
        st = be->choices_set(m->ctx, c, n);
    free(c);
    return st;
}

ds_status ds_model_create(const ds_model_cfg *cfg, const ds_backend *be, ds_ctx *ctx,
                          ds_dtype dt, const ds_model_limits *lim, ds_model **out)
{
    return ds_model_create_hooked(cfg, be, ctx, dt, lim, NULL, out);
}

ds_status ds_model_create_hooked(const ds_model_cfg *cfg, const ds_backend *be, ds_ctx *ctx,
                                 ds_dtype dt, const ds_model_limits *lim, const ds_model_hooks *h,
                                 ds_model **out)
{
    *out = NULL;
    const ds_ops *op;
    DS_TRY(check_limits(cfg, lim));
    DS_TRY(check_precision(be, dt, &op));
    ds_model *m = calloc(1, sizeof *m);
    if (!m)
        return DS_FAIL(DS_ERR_MEM, "model");
    *m = (ds_model){.cfg = *cfg, .be = be, .ctx = ctx, .op = op, .dt = dt,
                    .roles = ds_backend_precision_roles(dt), .lim = *lim};
    if (h)
        m->hooks = *h;
    ds_status st;
    DS_TRY_GOTO(st, build_tables(m), fail);
    plan_frames(m);
    DS_TRY_GOTO(st, plan_rnn_layers(m), fail);
    DS_TRY_GOTO(st, place_tensors(m), fail);
    DS_TRY_GOTO(st, agree_choices(m), fail);
    plan_arenas(m);
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
    for (int j = 0; j < m->cfg.rnn_layers && j < DS_MAX_RNN; j++)
        if (m->rnn[j].plan)
            m->op->rnn_plan_destroy(m->ctx, m->rnn[j].plan);
    void *bufs[] = {m->p, m->g, m->pm, m->bp, m->bg, m->rs, m->act, m->dact, m->bna, m->sca,
                    m->d_len, m->d_labels, m->d_label_off, m->d_label_len, m->d_best};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        m->be->release(m->ctx, bufs[i]);
    if (m->h_len)
        m->be->host_release(m->ctx, m->h_len);
    if (m->h_sca)
        m->be->host_release(m->ctx, m->h_sca);
    if (m->stage)
        m->be->host_release(m->ctx, m->stage);
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
    double *host = malloc(max_size(m->param_count, m->stats_count) * sizeof *host);
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
    for (int i = 0; st == DS_OK && i < m->n_stats; i++) {
        const ds_tensor *t = &m->stats[i];
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

/* Where one group of a table lives: its tensors are those of that group. */
typedef struct {
    const ds_tensor *tab;
    int n, group;
    void *buf;
    size_t span;
    ds_dtype dt;
} flat_buffer;

/* The buffers of which: [2] by group (a group without tensors has no buf).
 * Parameters are read from the master copy where it stands apart. */
static ds_status buffers_of(ds_model *m, int which, flat_buffer *b)
{
    const ds_dtype st = m->roles.stats;
    switch (which) {
    case DS_PARAMS:
        b[0] = (flat_buffer){m->params, m->n_params, 0, m->pm ? m->pm : m->p, m->param_span,
                             m->pm ? m->roles.master : m->dt};
        b[1] = (flat_buffer){m->params, m->n_params, 1, m->bp, m->bn_param_span, st};
        return DS_OK;
    case DS_GRADS:
        b[0] = (flat_buffer){m->params, m->n_params, 0, m->g, m->param_span, m->dt};
        b[1] = (flat_buffer){m->params, m->n_params, 1, m->bg, m->bn_param_span, st};
        return DS_OK;
    case DS_BN_STATS:
        b[0] = (flat_buffer){m->stats, m->n_stats, 0, m->rs, m->stats_span, st};
        b[1] = (flat_buffer){0};
        return DS_OK;
    }
    return DS_FAIL(DS_ERR_ARG, "no model buffer %d", which);
}

/* Copies one group of b to (to_host) or from packed host doubles, tensor by
 * tensor, through the staging buffer in the buffer's dtype dt (b->dt, or the
 * compute dtype for the working copy). Padding between tensors stays zero. */
static ds_status transfer_group(ds_model *m, const flat_buffer *b, void *buf, ds_dtype dt,
                                int to_host, double *host)
{
    if (to_host)
        DS_TRY(m->be->to_host(m->ctx, dt, b->span, buf, m->stage));
    else
        memset(m->stage, 0, b->span * ds_dtype_size(dt));
    for (int i = 0; i < b->n; i++) {
        const ds_tensor *t = &b->tab[i];
        if (t->group != b->group)
            continue;
        void *staged = ds_elem(m->stage, dt, t->place);
        if (to_host)
            DS_TRY(ds_convert(DS_F64, host + t->offset, dt, staged, t->count));
        else
            DS_TRY(ds_convert(dt, staged, DS_F64, host + t->offset, t->count));
    }
    return to_host ? DS_OK : m->be->from_host(m->ctx, dt, b->span, m->stage, buf);
}

static ds_status transfer(ds_model *m, int which, int to_host, double *host)
{
    flat_buffer b[2] = {{0}};
    DS_TRY(buffers_of(m, which, b));
    for (int k = 0; k < 2; k++)
        if (b[k].buf)
            DS_TRY(transfer_group(m, &b[k], b[k].buf, b[k].dt, to_host, host));
    /* new master weights: the working copy forward reads, rounded once */
    if (!to_host && which == DS_PARAMS && m->pm)
        DS_TRY(transfer_group(m, &b[0], m->p, m->dt, 0, host));
    return DS_OK;
}

ds_status ds_model_get(ds_model *m, int which, double *host) { return transfer(m, which, 1, host); }

ds_status ds_model_flat_group(ds_model *m, int which, int k, void **buf, ds_dtype *dt, size_t *span)
{
    flat_buffer b[2] = {{0}};
    DS_TRY(buffers_of(m, which, b));
    if (k < 0 || k > 1)
        return DS_FAIL(DS_ERR_ARG, "no parameter group %d", k);
    *buf = b[k].span ? b[k].buf : NULL;
    *dt = b[k].dt;
    *span = *buf ? b[k].span : 0;
    return DS_OK;
}

ds_status ds_model_share_params(ds_model *m,
                                ds_status (*share)(void *user, void *bytes, size_t count, ds_dtype dt),
                                void *user)
{
    flat_buffer b[2] = {{0}};
    DS_TRY(buffers_of(m, DS_PARAMS, b));
    for (int k = 0; k < 2; k++) {
        if (!b[k].buf || !b[k].span)
            continue;
        DS_TRY(m->be->to_host(m->ctx, b[k].dt, b[k].span, b[k].buf, m->stage));
        DS_TRY(share(user, m->stage, b[k].span, b[k].dt));
        DS_TRY(m->be->from_host(m->ctx, b[k].dt, b[k].span, m->stage, b[k].buf));
    }
    /* the working copy forward reads, rounded once from the new master */
    if (m->pm)
        DS_TRY(m->be->convert(m->ctx, m->dt, m->p, m->roles.master, m->pm, m->param_span));
    return DS_OK;
}

/* buf [span] of dt staged to the host, shared, and put back. */
static ds_status share_buffer(ds_model *m, void *buf, size_t span, ds_dtype dt,
                              ds_status (*share)(void *, void *, size_t, ds_dtype), void *user)
{
    if (!buf || !span)
        return DS_OK;
    DS_TRY(m->be->to_host(m->ctx, dt, span, buf, m->stage));
    DS_TRY(share(user, m->stage, span, dt));
    return m->be->from_host(m->ctx, dt, span, m->stage, buf);
}

ds_status ds_model_share_state(ds_model *m, ds_optim *o,
                               ds_status (*share)(void *user, void *bytes, size_t count, ds_dtype dt),
                               void *user)
{
    flat_buffer s[2] = {{0}}, p[2] = {{0}};
    DS_TRY(buffers_of(m, DS_BN_STATS, s));
    DS_TRY(share_buffer(m, s[0].buf, s[0].span, s[0].dt, share, user));
    DS_TRY(buffers_of(m, DS_PARAMS, p));
    for (int slot = 0; slot < ds_optim_slots(o); slot++)
        for (int k = 0; k < 2; k++)
            if (p[k].buf)
                DS_TRY(share_buffer(m, ds_optim_group_slot(o, k, slot), p[k].span, p[k].dt, share,
                                    user));
    double sc[DS_OPT_SCALARS];
    DS_TRY(ds_optim_get_scalars(o, sc));
    DS_TRY(share(user, sc, DS_OPT_SCALARS, DS_F64));
    return ds_optim_set_scalars(o, sc);
}

/* Slot i of o lies over each group of the parameters as their master copy
 * does: the same placement, so the same packing. */
static ds_status transfer_slot(ds_model *m, ds_optim *o, int slot, int to_host, double *host)
{
    flat_buffer b[2] = {{0}};
    DS_TRY(buffers_of(m, DS_PARAMS, b));
    for (int k = 0; k < 2; k++) {
        if (!b[k].buf)
            continue;
        void *buf = ds_optim_group_slot(o, k, slot);
        if (!buf)
            return DS_FAIL(DS_ERR_ARG, "optimizer has no slot %d for parameter group %d", slot, k);
        DS_TRY(transfer_group(m, &b[k], buf, b[k].dt, to_host, host));
    }
    return DS_OK;
}

ds_status ds_model_get_optim_slot(ds_model *m, ds_optim *o, int slot, double *host)
{
    return transfer_slot(m, o, slot, 1, host);
}

ds_status ds_model_put_optim_slot(ds_model *m, ds_optim *o, int slot, const double *host)
{
    return transfer_slot(m, o, slot, 0, (double *)host);   /* only read */
}

ds_status ds_model_put(ds_model *m, int which, const double *host)
{
    return transfer(m, which, 0, (double *)host);   /* only read when copying to the backend */
}

/* ---- the batch ---- */


/* The per-batch scalars from their host copies into backend memory: one
 * queued copy from pinned staging, neither an allocation nor a wait. */
static ds_status upload_batch_scalars(ds_model *m)
{
    double *h = m->h_sca;
    for (int s = 0; s <= DS_MAX_CONV; s++)
        h[DS_M_COUNT + s] = m->count[s];
    h[DS_M_SEQ_COUNT] = m->seq_count;
    h[DS_M_GRAD_SCALE] = 1.0 / m->loss_norm;
    h[DS_M_LOSS_NORM] = m->loss_norm;
    h[DS_M_DROPOUT_STEP] = m->drop_step;
    return m->be->from_host(m->ctx, DS_F64, DS_M_BATCH_SCALARS, h, ds_m_batch_scalar(m, 0));
}

/* BatchNorm counts (real positions per channel after each conv stage, real
 * frames of the sequence part) and the loss norm of utterances lengths [n],
 * on the host and, uploaded, in backend memory where the ops read them. */
static ds_status set_counts(ds_model *m, const int *lengths, int n)
{
    if (n < 1)
        return DS_FAIL(DS_ERR_ARG, "a batch of %d utterances: the loss norm must be positive", n);
    memset(m->count, 0, sizeof m->count);
    m->seq_count = 0;
    for (int i = 0; i < n; i++) {
        int l = lengths[i];
        for (int s = 0; s < m->cfg.n_conv; s++) {
            l = ds_m_conv_frames(m, s, l);
            if (l < 1)
                return DS_FAIL(DS_ERR_ARG, "batch utterance %d (%d frames) is too short for conv[%d]",
                               i, lengths[i], s);
            m->count[s + 1] += (double)l * m->conv[s].fo;
        }
        m->seq_count += l;
    }
    m->loss_norm = n;
    return upload_batch_scalars(m);
}

/* Every stage's lengths of the local batch into h_len. */
static ds_status stage_lengths(ds_model *m, const ds_batch *b)
{
    const int B = m->lim.batch;
    m->t[0] = b->t;
    for (int i = 0; i < b->n; i++) {
        if (b->lengths[i] < 1 || b->lengths[i] > b->t)
            return DS_FAIL(DS_ERR_ARG, "batch utterance %d: length %d outside 1..%d", i,
                           b->lengths[i], b->t);
        m->h_len[i] = b->lengths[i];
    }
    for (int s = 0; s < m->cfg.n_conv; s++) {
        m->t[s + 1] = ds_m_conv_frames(m, s, m->t[s]);
        for (int i = 0; i < b->n; i++)
            m->h_len[(s + 1) * B + i] = ds_m_conv_frames(m, s, m->h_len[s * B + i]);
    }
    return set_counts(m, b->lengths, b->n);
}

ds_status ds_model_set_batch(ds_model *m, const ds_batch *b)
{
    if (b->n < 1 || b->n > m->lim.batch || b->t > m->lim.frames || b->f != m->cfg.n_features)
        return DS_FAIL(DS_ERR_ARG,
                       "batch of %d x %d frames x %d features does not fit the model (%d x %d x %d)",
                       b->n, b->t, b->f, m->lim.batch, m->lim.frames, m->cfg.n_features);
    m->n = b->n;
    m->have_dlogits = 0;
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

ds_status ds_model_set_global_batch(ds_model *m, const int *lengths, int n)
{
    if (n < m->n)
        return DS_FAIL(DS_ERR_ARG, "global batch of %d utterances, smaller than this rank's %d", n, m->n);
    return set_counts(m, lengths, n);
}

/* ---- data parallelism ---- */

void ds_model_set_hooks(ds_model *m, const ds_model_hooks *h) { m->hooks = *h; }

void ds_model_set_loss_scale(ds_model *m, const void *scale) { m->loss_scale = scale; }

void ds_model_set_capturable(ds_model *m, int on) { m->capturable = on != 0; }

/* ---- accessors ---- */

int ds_model_n_params(const ds_model *m) { return m->n_params; }
const ds_tensor *ds_model_param(const ds_model *m, int i) { return &m->params[i]; }
int ds_model_n_bn_stats(const ds_model *m) { return m->n_stats; }
const ds_tensor *ds_model_bn_stat(const ds_model *m, int i) { return &m->stats[i]; }
size_t ds_model_param_count(const ds_model *m) { return m->param_count; }
size_t ds_model_bn_stats_count(const ds_model *m) { return m->stats_count; }
size_t ds_model_param_span(const ds_model *m) { return m->param_span; }
ds_dtype ds_model_dtype(const ds_model *m) { return m->dt; }
ds_roles ds_model_roles(const ds_model *m) { return m->roles; }
const ds_model_cfg *ds_model_config(const ds_model *m) { return &m->cfg; }
ds_ctx *ds_model_ctx(ds_model *m) { return m->ctx; }
void *ds_model_params(ds_model *m) { return m->p; }
void *ds_model_grads(ds_model *m) { return m->g; }

void *ds_model_bn_param_grads(ds_model *m, size_t *n)
{
    *n = m->bn_param_span;
    return m->bg;
}

int ds_model_optim_bufs(ds_model *m, ds_optim_bufs *b)
{
    b[0] = (ds_optim_bufs){m->pm ? m->pm : m->p, m->g, m->pm ? m->p : NULL};
    if (!m->bn_param_span)
        return 1;
    b[1] = (ds_optim_bufs){m->bp, m->bg, NULL};
    return 2;
}

ds_status ds_model_optim_create(ds_model *m, const ds_optim_cfg *c, ds_optim **out)
{
    DS_TRY(ds_optim_create(c, m->be, m->ctx, m->dt, m->param_span, out));
    if (m->bn_param_span) {
        ds_status st = ds_optim_add_group(*out, m->roles.stats, m->bn_param_span);
        if (st != DS_OK) {
            ds_optim_destroy(*out);
            *out = NULL;
            return st;
        }
    }
    return DS_OK;
}
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

ds_status ds_model_best_path(ds_model *m, int *host)
{
    const int T = ds_model_batch_out_frames(m);
    DS_TRY(m->op->argmax(m->ctx, T, m->n, m->cfg.n_classes, ds_m_act(m, m->logits), m->d_best));
    return m->be->to_host(m->ctx, DS_I32, (size_t)T * m->n, m->d_best, host);
}

const ds_backend *ds_model_backend(const ds_model *m) { return m->be; }

size_t ds_model_bn_moments_max(const ds_model *m)
{
    size_t c = m->out_bn.c;
    for (int i = 0; i < m->cfg.n_conv; i++)
        c = max_size(c, (size_t)m->conv[i].bn.c);
    for (int j = 1; j < m->cfg.rnn_layers; j++)
        c = max_size(c, (size_t)m->rnn[j].bn.c);
    return 2 * c;
}
