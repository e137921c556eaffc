/* model_pass.c - forward, CTC loss and backward of the model (model.h).
 * Every layer's forward output is zero at padding frames, so a following
 * Hardtanh(0, 20) backward passes no gradient there either. */
#include "model_impl.h"

#include "convert.h"
#include "dropout_mask.h"
#include "fault_seam.h"

#include <math.h>
#include <stdio.h>

/* Conv maps [N][C][T][F] and sequences [T][N][C] as ds_view. */
static ds_view conv_view(int n, int c, int t, int f)
{
    return (ds_view){n, c, t * f, (long)c * t * f, (long)t * f, 1, f};
}

static ds_view seq_view(int n, int c, int t)
{
    return (ds_view){n, c, t, c, 1, (long)n * c, 1};
}

/* The count of BatchNorm slot (DS_M_COUNT + stage, or DS_M_SEQ_COUNT),
 * checked on its host copy: the ops read the uploaded one, which a GPU
 * could not check without making the host wait. */
static ds_status bn_count_ok(const ds_model *m, int slot)
{
    const double count = slot == DS_M_SEQ_COUNT ? m->seq_count : m->count[slot - DS_M_COUNT];
    if (count < 2)
        return DS_FAIL(DS_ERR_ARG, "BatchNorm in training needs 2 or more real positions per "
                                   "channel, the batch has %.0f", count);
    return DS_OK;
}

/* slot: the layer's count among the per-batch scalars (DS_M_*). */
static ds_status bn_forward(ds_model *m, const bn_layer *l, const ds_view *v, const int *len,
                            int slot, const void *x, void *y)
{
    const ds_ops *op = m->op;
    if (!m->train)
        return op->bn_fwd_eval(m->ctx, v, len, x, ds_m_param(m, l->gamma), ds_m_param(m, l->beta),
                               ds_m_bn_stat(m, l->run_mean), ds_m_bn_stat(m, l->run_var),
                               m->cfg.bn_eps, y);
    DS_TRY(op->bn_moments(m->ctx, v, len, x, ds_m_bna(m, l->mom)));
    if (m->hooks.bn_reduce)
        DS_TRY(m->hooks.bn_reduce(m->hooks.user, ds_m_bna(m, l->mom), 2 * (size_t)l->c, m->roles.stats));
    DS_TRY(bn_count_ok(m, slot));
    return op->bn_fwd_train(m->ctx, v, len, ds_m_batch_scalar(m, slot), x, ds_m_bna(m, l->mom),
                            ds_m_param(m, l->gamma), ds_m_param(m, l->beta), m->cfg.bn_eps,
                            m->cfg.bn_momentum, y, ds_m_bna(m, l->mean), ds_m_bna(m, l->invstd),
                            ds_m_bn_stat(m, l->run_mean), ds_m_bn_stat(m, l->run_var));
}

static ds_status bn_backward(ds_model *m, const bn_layer *l, const ds_view *v, const int *len,
                             int slot, const void *x, const void *dy, void *dx)
{
    const ds_ops *op = m->op;
    void *dgamma = ds_m_grad(m, l->gamma), *dbeta = ds_m_grad(m, l->beta);
    if (!m->train)
        return op->bn_bwd_eval(m->ctx, v, len, dy, x, ds_m_param(m, l->gamma),
                               ds_m_bn_stat(m, l->run_mean), ds_m_bn_stat(m, l->run_var),
                               m->cfg.bn_eps, dx, dgamma, dbeta);
    DS_TRY(op->bn_bwd_moments(m->ctx, v, len, dy, x, ds_m_bna(m, l->mean), ds_m_bna(m, l->invstd),
                              ds_m_bna(m, l->dmom)));
    if (m->hooks.bn_reduce)
        DS_TRY(m->hooks.bn_reduce(m->hooks.user, ds_m_bna(m, l->dmom), 2 * (size_t)l->c, m->roles.stats));
    DS_TRY(bn_count_ok(m, slot));
    return op->bn_bwd_train(m->ctx, v, len, ds_m_batch_scalar(m, slot), dy, x,
                            ds_m_param(m, l->gamma), ds_m_bna(m, l->mean), ds_m_bna(m, l->invstd),
                            ds_m_bna(m, l->dmom), dx, dgamma, dbeta);
}

/* Dropout's key for the layer numbered site, this pass's seed and part,
 * and the step as the ops read it: in the per-batch scalars, uploaded with
 * the batch. */
static ds_dropout_key drop_key(ds_model *m, int site)
{
    ds_dropout_key key = m->drop;
    key.step = ds_m_batch_scalar(m, DS_M_DROPOUT_STEP);
    key.layer = (unsigned)site;
    return key;
}

/* Conv layer i's key: its output [N][C][T][F] numbered by (n, c) runs of
 * T * F elements, as if T were DS_DROPOUT_RUN_FRAMES, so a frame's draw
 * does not depend on how far the batch is padded (a bucket's rounding). */
static ds_dropout_key conv_drop_key(ds_model *m, int i)
{
    ds_dropout_key key = drop_key(m, m->conv[i].site);
    key.run = (unsigned long long)m->t[i + 1] * m->conv[i].fo;
    key.stride = DS_DROPOUT_RUN_FRAMES * (unsigned long long)m->conv[i].fo;
    return key;
}

/* Where conv layer l's output is in this pass (after dropout in training
 * with dropout, else the activation), and its gradient. */
static int conv_dropping(const ds_model *m, const conv_layer *l) { return m->train && l->k.dropout > 0; }
static void *conv_out(ds_model *m, const conv_layer *l)
{
    return ds_m_act(m, conv_dropping(m, l) ? l->o : l->y);
}
static void *conv_dout(ds_model *m, const conv_layer *l)
{
    return ds_m_dact(m, conv_dropping(m, l) ? l->dout : l->dy);
}

static void *param_or_null(ds_model *m, int i) { return i >= 0 ? ds_m_param(m, i) : NULL; }
static void *grad_or_null(ds_model *m, int i) { return i >= 0 ? ds_m_grad(m, i) : NULL; }

/* A layer's work inside a named range (NVTX on the GPU), so a profiler
 * shows the layers by name: "conv fwd 1", "rnn bwd 3", ... (i < 0: no number). */
static const char *range_name(char *buf, size_t size, const char *what, int i)
{
    if (i >= 0)
        snprintf(buf, size, "%s%d", what, i + 1);
    else
        snprintf(buf, size, "%s", what);
    return buf;
}

#define IN_RANGE(m, what, i, call)                                                            \
    do {                                                                                      \
        char rn_[48];                                                                         \
        DS_RANGED((m)->be, (m)->ctx, range_name(rn_, sizeof rn_, (what), (i)), (call));       \
    } while (0)

/* ---- forward ---- */

/* y += BN_r(conv1x1_r(source r's output)) for every residual branch of layer i. */
static ds_status res_forward(ds_model *m, int i, const ds_view *v, const int *len, void *y)
{
    const conv_layer *l = &m->conv[i];
    for (int r = 0; r < l->n_res; r++) {
        const res_branch *b = &l->res[r];
        const ds_conv_geom g = ds_m_conv_geom(m, i, r, m->n, m->t);
        void *a = ds_m_act(m, b->a), *z = ds_m_act(m, b->z);
        /* the source is zero at padding frames, so is its 1x1 conv: no mask */
        DS_TRY(m->op->conv2d_fwd(m->ctx, &g, conv_out(m, &m->conv[b->src]), ds_m_param(m, b->w),
                                 NULL, a, ds_m_act(m, m->work)));
        DS_TRY(bn_forward(m, &b->bn, v, len, DS_M_COUNT + i + 1, a, z));
        DS_TRY(m->op->add(m->ctx, (size_t)v->n * v->sn, z, y));
    }
    return DS_OK;
}

static ds_status conv_forward(ds_model *m, int i, const void *x)
{
    const conv_layer *l = &m->conv[i];
    const ds_conv_geom g = ds_m_conv_geom(m, i, -1, m->n, m->t);
    const ds_view v = conv_view(m->n, l->co, m->t[i + 1], l->fo);
    const size_t n = (size_t)v.n * v.sn;
    const int *len = ds_m_len(m, i + 1);
    void *a = ds_m_act(m, l->a), *y = ds_m_act(m, l->y);
    DS_TRY(m->op->conv2d_fwd(m->ctx, &g, x, ds_m_param(m, l->w), param_or_null(m, l->b), a,
                             ds_m_act(m, m->work)));
    DS_TRY(m->op->mask(m->ctx, &v, len, a));
    DS_TRY(bn_forward(m, &l->bn, &v, len, DS_M_COUNT + i + 1, a, y));
    DS_TRY(res_forward(m, i, &v, len, y));
    DS_TRY(m->op->hardtanh_fwd(m->ctx, n, HARDTANH_LO, l->hi, y, y));
    if (!conv_dropping(m, l))
        return DS_OK;
    const ds_dropout_key key = conv_drop_key(m, i);
    return m->op->dropout_fwd(m->ctx, n, l->k.dropout, &key, y, ds_m_act(m, l->o));
}

/* x [T][N][in] -> rnn[j].y [T][N][H], through the input BN for j > 0. */
static ds_status rnn_forward(ds_model *m, int j, const void *x)
{
    const rnn_layer *r = &m->rnn[j];
    const int T = ds_model_batch_out_frames(m);
    const int *len = ds_m_len(m, m->cfg.n_conv);
    const void *rin = x;
    if (r->has_bn) {
        const ds_view v = seq_view(m->n, r->in, T);
        DS_TRY(bn_forward(m, &r->bn, &v, len, DS_M_SEQ_COUNT, x, ds_m_act(m, r->z)));
        rin = ds_m_act(m, r->z);
    }
    return m->op->rnn_fwd(m->ctx, r->plan, T, m->n, ds_model_out_lengths(m), len, rin,
                          ds_elem(m->p, m->dt, r->span), ds_m_act(m, r->y), ds_m_act(m, r->reserve),
                          ds_m_act(m, m->work));
}

/* Where FC layer l's output is in this pass: after dropout in training with
 * dropout, else the activation (one buffer without dropout). */
static int fc_dropping(const ds_model *m) { return m->train && m->cfg.dropout > 0; }
static void *fc_out(ds_model *m, const fc_layer *l) { return ds_m_act(m, fc_dropping(m) ? l->y : l->a); }

/* x [T][N][in] -> linear -> clamp -> mask -> dropout (training) -> its output. */
static ds_status fc_forward(ds_model *m, const fc_layer *l, const void *x)
{
    const int T = ds_model_batch_out_frames(m);
    const size_t rows = (size_t)T * m->n;
    const ds_view v = seq_view(m->n, l->out, T);
    void *a = ds_m_act(m, l->a);
    DS_TRY(m->op->linear_fwd(m->ctx, (int)rows, l->in, l->out, x, ds_m_param(m, l->w),
                             ds_m_param(m, l->b), a));
    DS_TRY(m->op->hardtanh_fwd(m->ctx, rows * l->out, HARDTANH_LO, HARDTANH_HI, a, a));
    DS_TRY(m->op->mask(m->ctx, &v, ds_m_len(m, m->cfg.n_conv), a));
    if (!fc_dropping(m))
        return DS_OK;
    const ds_dropout_key key = drop_key(m, l->site);
    return m->op->dropout_fwd(m->ctx, rows * l->out, m->cfg.dropout, &key, a, ds_m_act(m, l->y));
}

/* Lookahead and hidden FC layers; returns the input of the output BN. */
static ds_status head_forward(ds_model *m, const void **x)
{
    const int T = ds_model_batch_out_frames(m), H = m->cfg.hidden;
    const size_t rows = (size_t)T * m->n;
    if (m->la_w >= 0) {
        void *y = ds_m_act(m, m->la_y);
        DS_TRY(m->op->lookahead_fwd(m->ctx, T, m->n, H, m->cfg.lookahead, *x,
                                    ds_m_param(m, m->la_w), y));
        DS_TRY(m->op->hardtanh_fwd(m->ctx, rows * H, HARDTANH_LO, HARDTANH_HI, y, y));
        *x = y;
    }
    for (int k = 0; k < m->cfg.n_fc; k++) {
        DS_TRY(fc_forward(m, &m->fc[k], *x));
        *x = fc_out(m, &m->fc[k]);
    }
    return DS_OK;
}

/* Output BatchNorm (where the model has it) and the output FC:
 * x [T][N][d_out] -> logits [T][N][classes]. */
static ds_status out_forward(ds_model *m, const void *x)
{
    const int T = ds_model_batch_out_frames(m);
    if (m->cfg.out_bn) {
        const ds_view v = seq_view(m->n, m->d_out, T);
        DS_TRY(bn_forward(m, &m->out_bn, &v, ds_m_len(m, m->cfg.n_conv), DS_M_SEQ_COUNT, x,
                          ds_m_act(m, m->out_z)));
        x = ds_m_act(m, m->out_z);
    }
    return m->op->linear_fwd(m->ctx, T * m->n, m->d_out, m->cfg.n_classes, x,
                             ds_m_param(m, m->out_w), param_or_null(m, m->out_b),
                             ds_m_act(m, m->logits));
}

/* The batch's features [N][1][T][F] as the sequence s0 [T][N][s0_width]:
 * the last conv layer's maps flattened, DS1's context windows, or the
 * frames themselves. */
static ds_status front_forward(ds_model *m, const void *x)
{
    const int T = ds_model_batch_out_frames(m);
    void *s0 = ds_m_act(m, m->s0);
    if (m->cfg.n_conv) {
        const conv_layer *last = &m->conv[m->cfg.n_conv - 1];
        return m->op->conv_to_seq(m->ctx, m->n, last->co, T, last->fo, x, s0);
    }
    if (m->cfg.context)
        return m->op->context_fwd(m->ctx, m->n, T, m->cfg.n_features, m->cfg.context,
                                  ds_m_len(m, 0), x, s0);
    return m->op->conv_to_seq(m->ctx, m->n, 1, T, m->cfg.n_features, x, s0);
}

/* The step is only recorded: the batch's upload carries it (set_batch,
 * set_global_batch), so the key must be set before them. */
void ds_model_set_dropout_key(ds_model *m, uint64_t seed, uint32_t step, uint32_t part)
{
    m->drop = (ds_dropout_key){.seed = seed, .part = part};
    m->drop_step = step;
}

/* Training draws the step the batch's upload carried: a key set after it
 * would draw the previous one. */
static ds_status drop_step_ok(const ds_model *m)
{
    if (m->h_sca[DS_M_DROPOUT_STEP] != m->drop_step)
        return DS_FAIL(DS_ERR_ARG, "dropout's step %u was set after the batch (uploaded: %.0f): "
                       "ds_model_set_dropout_key goes before ds_model_set_batch",
                       (unsigned)m->drop_step, m->h_sca[DS_M_DROPOUT_STEP]);
    return DS_OK;
}

ds_status ds_model_train_batch_ok(const ds_model *m)
{
    DS_TRY(drop_step_ok(m));
    for (int i = 0; i < m->cfg.n_conv; i++)   /* every conv layer has its BatchNorm */
        DS_TRY(bn_count_ok(m, DS_M_COUNT + i + 1));
    int seq_bn = m->cfg.out_bn;
    for (int j = 0; j < m->cfg.rnn_layers; j++)
        seq_bn |= m->rnn[j].has_bn;
    return seq_bn ? bn_count_ok(m, DS_M_SEQ_COUNT) : DS_OK;
}

ds_status ds_model_forward(ds_model *m, int train)
{
    if (train)
        DS_TRY(drop_step_ok(m));
    m->train = train;
    m->have_dlogits = 0;
    const void *x = ds_m_act(m, m->x0);
    for (int i = 0; i < m->cfg.n_conv; i++) {
        IN_RANGE(m, "conv fwd ", i, conv_forward(m, i, x));
        x = conv_out(m, &m->conv[i]);
    }
    IN_RANGE(m, m->cfg.n_conv || !m->cfg.context ? "conv_to_seq fwd" : "context fwd", -1,
             front_forward(m, x));
    x = ds_m_act(m, m->s0);
    for (int k = 0; k < m->cfg.n_fc_pre; k++) {
        IN_RANGE(m, "fc_pre fwd ", k, fc_forward(m, &m->fc_pre[k], x));
        x = fc_out(m, &m->fc_pre[k]);
    }
    for (int j = 0; j < m->cfg.rnn_layers; j++) {
        IN_RANGE(m, "rnn fwd ", j, rnn_forward(m, j, x));
        x = ds_m_act(m, m->rnn[j].y);
    }
    if (m->la_w >= 0 || m->cfg.n_fc > 0)
        IN_RANGE(m, "lookahead+fc fwd", -1, head_forward(m, &x));
    IN_RANGE(m, "output fwd", -1, out_forward(m, x));
    return DS_OK;
}

/* ---- loss ---- */

ds_status ds_model_loss(ds_model *m, int want_grad)
{
    const int T = ds_model_batch_out_frames(m);
    if (want_grad)   /* backward accumulates into dact: start it from zero */
        DS_TRY(m->be->zero(m->ctx, m->dt, m->dact_count, m->dact));
    IN_RANGE(m, "ctc loss", -1,
             m->op->ctc_loss(m->ctx, T, m->n, m->cfg.n_classes, 0, ds_m_act(m, m->logits),
                             ds_m_len(m, m->cfg.n_conv), m->d_labels, m->d_label_off,
                             m->d_label_len, m->capturable ? m->lim.label_len : m->max_label,
                             ds_m_batch_scalar(m, DS_M_GRAD_SCALE),
                             m->loss_scale, ds_m_sca(m, m->losses),
                             want_grad ? ds_m_dact(m, m->dlogits) : NULL, ds_m_act(m, m->work)));
    DS_TRY(m->op->loss_total(m->ctx, m->n, ds_m_batch_scalar(m, DS_M_LOSS_NORM),
                             ds_m_sca(m, m->losses), ds_m_sca(m, m->loss_total)));
    m->have_dlogits = want_grad;
    return DS_OK;
}

const void *ds_model_loss_scalars(ds_model *m) { return ds_m_sca(m, m->loss_total); }

/* value into the first element of the compute-role buffer at dst */
static ds_status poison_first(ds_model *m, double value, void *dst)
{
    DS_TRY(ds_convert(m->dt, m->stage, DS_F64, &value, 1));
    return m->be->from_host(m->ctx, m->dt, 1, m->stage, dst);
}

ds_status ds_model_poison_dlogits(ds_model *m)
{
    if (!m->have_dlogits)
        return DS_FAIL(DS_ERR_ARG, "poison_dlogits: the last loss kept no gradient");
    return poison_first(m, INFINITY, ds_m_dact(m, m->dlogits));
}

ds_status ds_model_poison_logits(ds_model *m)
{
    return poison_first(m, NAN, ds_m_act(m, m->logits));
}

ds_status ds_model_read_loss(ds_model *m, ds_loss *out, double *losses)
{
    double *host = m->stage;   /* scalars are FP64 in every precision */
    DS_TRY(m->be->to_host(m->ctx, DS_F64, DS_LOSS_SCALARS, ds_m_sca(m, m->loss_total), host));
    out->loss = host[DS_LOSS_MEAN];
    out->n_infinite = (int)host[DS_LOSS_INFINITE];
    return losses ? m->be->to_host(m->ctx, DS_F64, (size_t)m->n, ds_m_sca(m, m->losses), losses)
                  : DS_OK;
}

/* ---- backward ---- */

/* Gradients from parameter first to the end of the buffer are final once
 * the work queued so far completes. */
static ds_status ready(ds_model *m, int first)
{
    /* BatchNorm's parameters may live apart (group 1): the flat buffer's
     * final tail starts at its first tensor from here on */
    while (first < m->n_params && m->params[first].group)
        first++;
    const size_t place = first < m->n_params ? m->params[first].place : m->param_span;
    return m->hooks.grad_ready ? m->hooks.grad_ready(m->hooks.user, place) : DS_OK;
}

/* The gradient of l's output (dy) back through dropout and the clamp into
 * dpre, then the linear layer: dx (NULL: not wanted), dw, db. */
static ds_status fc_backward(ds_model *m, const fc_layer *l, const void *x, void *dx)
{
    const size_t rows = (size_t)ds_model_batch_out_frames(m) * m->n;
    size_t da = l->dy;   /* the gradient of a: the output's, where no dropout ran */
    if (fc_dropping(m)) {
        const ds_dropout_key key = drop_key(m, l->site);
        DS_TRY(m->op->dropout_bwd(m->ctx, rows * l->out, m->cfg.dropout, &key,
                                  ds_m_dact(m, l->dy), ds_m_dact(m, l->da)));
        da = l->da;
    }
    DS_TRY(m->op->hardtanh_bwd(m->ctx, rows * l->out, HARDTANH_LO, HARDTANH_HI, ds_m_act(m, l->a),
                               ds_m_dact(m, da), ds_m_dact(m, l->dpre)));
    DS_TRY(m->op->linear_bwd(m->ctx, (int)rows, l->in, l->out, x, ds_m_param(m, l->w),
                             ds_m_dact(m, l->dpre), dx, ds_m_grad(m, l->w), ds_m_grad(m, l->b)));
    return ready(m, l->w);
}

/* The input of FC layer k before the RNN (k = n_fc_pre: of what follows
 * them) and where its gradient goes: the previous FC layer, or the sequence
 * input (no gradient wanted: NULL, where it is the features themselves). */
static void fc_pre_input(ds_model *m, int k, const void **x, void **dx)
{
    if (k > 0) {
        *x = fc_out(m, &m->fc_pre[k - 1]);
        *dx = ds_m_dact(m, m->fc_pre[k - 1].dy);
    } else {
        *x = ds_m_act(m, m->s0);
        *dx = m->cfg.n_conv ? ds_m_dact(m, m->ds0) : NULL;
    }
}

/* The input of RNN layer j (j = rnn_layers: of what follows the RNN) and
 * where its gradient goes: the previous RNN layer, or what precedes the RNN. */
static void rnn_input(ds_model *m, int j, const void **x, void **dx)
{
    if (j > 0) {
        *x = ds_m_act(m, m->rnn[j - 1].y);
        *dx = ds_m_dact(m, m->rnn[j - 1].dy);
    } else {
        fc_pre_input(m, m->cfg.n_fc_pre, x, dx);
    }
}

/* The tensor entering hidden FC k (k = n_fc: the output BatchNorm) and
 * where its gradient goes: the previous FC, the lookahead or the last RNN
 * (or what precedes it, in a model without one). */
static void head_input(ds_model *m, int k, const void **x, void **dx)
{
    if (k > 0) {
        *x = fc_out(m, &m->fc[k - 1]);
        *dx = ds_m_dact(m, m->fc[k - 1].dy);
    } else if (m->la_w >= 0) {
        *x = ds_m_act(m, m->la_y);
        *dx = ds_m_dact(m, m->la_dy);
    } else {
        rnn_input(m, m->cfg.rnn_layers, x, dx);
    }
}

/* Output FC and output BN: the gradient of their input into the last
 * hidden FC's, the lookahead's or the last RNN layer's dy. */
static ds_status out_backward(ds_model *m)
{
    const int T = ds_model_batch_out_frames(m);
    const void *x;
    void *dx;
    void *db = grad_or_null(m, m->out_b);
    head_input(m, m->cfg.n_fc, &x, &dx);
    if (!m->cfg.out_bn) {
        DS_TRY(m->op->linear_bwd(m->ctx, T * m->n, m->d_out, m->cfg.n_classes, x,
                                 ds_m_param(m, m->out_w), ds_m_dact(m, m->dlogits), dx,
                                 ds_m_grad(m, m->out_w), db));
        return ready(m, m->out_w);
    }
    DS_TRY(m->op->linear_bwd(m->ctx, T * m->n, m->d_out, m->cfg.n_classes, ds_m_act(m, m->out_z),
                             ds_m_param(m, m->out_w), ds_m_dact(m, m->dlogits),
                             ds_m_dact(m, m->out_dz), ds_m_grad(m, m->out_w), db));
    const ds_view v = seq_view(m->n, m->d_out, T);
    DS_TRY(bn_backward(m, &m->out_bn, &v, ds_m_len(m, m->cfg.n_conv), DS_M_SEQ_COUNT, x,
                       ds_m_dact(m, m->out_dz), dx));
    return ready(m, m->out_bn.gamma);
}

/* Hidden FCs and lookahead; leaves the gradient of the last RNN layer's
 * output in its dy. */
static ds_status head_backward(ds_model *m)
{
    const int T = ds_model_batch_out_frames(m), H = m->cfg.hidden;
    const size_t rows = (size_t)T * m->n;
    const void *x;
    void *dx;
    for (int k = m->cfg.n_fc - 1; k >= 0; k--) {
        head_input(m, k, &x, &dx);
        DS_TRY(fc_backward(m, &m->fc[k], x, dx));
    }
    if (m->la_w >= 0) {   /* a lookahead follows a (unidirectional) RNN */
        const rnn_layer *last = &m->rnn[m->cfg.rnn_layers - 1];
        DS_TRY(m->op->hardtanh_bwd(m->ctx, rows * H, HARDTANH_LO, HARDTANH_HI, ds_m_act(m, m->la_y),
                                   ds_m_dact(m, m->la_dy), ds_m_dact(m, m->la_dpre)));
        DS_TRY(m->op->lookahead_bwd(m->ctx, T, m->n, H, m->cfg.lookahead, ds_m_act(m, last->y),
                                    ds_m_param(m, m->la_w), ds_m_dact(m, m->la_dpre),
                                    ds_m_dact(m, last->dy), ds_m_grad(m, m->la_w),
                                    ds_m_act(m, m->work)));
        DS_TRY(ready(m, m->la_w));
    }
    return DS_OK;
}

ds_status ds_model_rnn_io(ds_model *m, int j, ds_model_rnn_layer *out)
{
    if (j < 0 || j >= m->cfg.rnn_layers)
        return DS_FAIL(DS_ERR_ARG, "recurrent layer %d of %d", j, m->cfg.rnn_layers);
    const rnn_layer *r = &m->rnn[j];
    const void *x;
    void *dx;
    rnn_input(m, j, &x, &dx);
    *out = (ds_model_rnn_layer){
        .desc = {m->cfg.cell, ds_m_rnn_dirs(m), r->in, m->cfg.hidden, m->t_max[m->cfg.n_conv],
                 m->lim.batch},
        .t = ds_model_batch_out_frames(m), .n = m->n, .len_host = ds_model_out_lengths(m),
        .len = ds_m_len(m, m->cfg.n_conv),
        .x = r->has_bn ? ds_m_act(m, r->z) : x, .y = ds_m_act(m, r->y),
        .dy = ds_m_dact(m, r->dy), .dx = r->has_bn ? ds_m_dact(m, r->dz) : dx,
        .first_param = r->first_w};
    return DS_OK;
}

static ds_status rnn_backward(ds_model *m, int j)
{
    const rnn_layer *r = &m->rnn[j];
    const int T = ds_model_batch_out_frames(m);
    const int *len = ds_m_len(m, m->cfg.n_conv);
    const void *x;
    void *dx;
    rnn_input(m, j, &x, &dx);
    const void *rin = r->has_bn ? ds_m_act(m, r->z) : x;
    void *drin = r->has_bn ? ds_m_dact(m, r->dz) : dx;
    DS_TRY(m->op->rnn_bwd(m->ctx, r->plan, T, m->n, ds_model_out_lengths(m), len, rin,
                          ds_elem(m->p, m->dt, r->span), ds_m_dact(m, r->dy), drin,
                          ds_elem(m->g, m->dt, r->span), ds_m_act(m, r->reserve),
                          ds_m_act(m, m->work)));
    if (r->has_bn) {
        const ds_view v = seq_view(m->n, r->in, T);
        DS_TRY(bn_backward(m, &r->bn, &v, len, DS_M_SEQ_COUNT, x, drin, dx));
    }
    return ready(m, r->has_bn ? r->bn.gamma : r->first_w);
}

/* The gradient of the pre-activation sum (dbn) into each residual branch:
 * its BatchNorm, its 1x1 conv, and the source's output gradient (+=). */
static ds_status res_backward(ds_model *m, int i, const ds_view *v, const int *len)
{
    const conv_layer *l = &m->conv[i];
    for (int r = l->n_res - 1; r >= 0; r--) {
        const res_branch *b = &l->res[r];
        const conv_layer *src = &m->conv[b->src];
        const ds_conv_geom g = ds_m_conv_geom(m, i, r, m->n, m->t);
        DS_TRY(bn_backward(m, &b->bn, v, len, DS_M_COUNT + i + 1, ds_m_act(m, b->a),
                           ds_m_dact(m, l->dbn), ds_m_dact(m, b->da)));
        DS_TRY(m->op->conv2d_bwd(m->ctx, &g, conv_out(m, src), ds_m_param(m, b->w),
                                 ds_m_dact(m, b->da), conv_dout(m, src), ds_m_grad(m, b->w), NULL,
                                 ds_m_act(m, m->work)));
    }
    return DS_OK;
}

static ds_status conv_backward(ds_model *m, int i)
{
    const conv_layer *l = &m->conv[i];
    const ds_conv_geom g = ds_m_conv_geom(m, i, -1, m->n, m->t);
    const ds_view v = conv_view(m->n, l->co, m->t[i + 1], l->fo);
    const size_t n = (size_t)v.n * v.sn;
    const int *len = ds_m_len(m, i + 1);
    const void *x = i ? conv_out(m, &m->conv[i - 1]) : ds_m_act(m, m->x0);
    void *dx = i ? conv_dout(m, &m->conv[i - 1]) : NULL;   /* no gradient for features */
    if (conv_dropping(m, l)) {
        const ds_dropout_key key = conv_drop_key(m, i);
        DS_TRY(m->op->dropout_bwd(m->ctx, n, l->k.dropout, &key, ds_m_dact(m, l->dout),
                                  ds_m_dact(m, l->dy)));
    }
    DS_TRY(m->op->hardtanh_bwd(m->ctx, n, HARDTANH_LO, l->hi, ds_m_act(m, l->y),
                               ds_m_dact(m, l->dy), ds_m_dact(m, l->dbn)));
    DS_TRY(res_backward(m, i, &v, len));
    DS_TRY(bn_backward(m, &l->bn, &v, len, DS_M_COUNT + i + 1, ds_m_act(m, l->a),
                       ds_m_dact(m, l->dbn), ds_m_dact(m, l->da)));
    DS_TRY(m->op->conv2d_bwd(m->ctx, &g, x, ds_m_param(m, l->w), ds_m_dact(m, l->da), dx,
                             ds_m_grad(m, l->w), grad_or_null(m, l->b), ds_m_act(m, m->work)));
    return ready(m, l->w);
}

ds_status ds_model_backward(ds_model *m)
{
    if (!m->have_dlogits)
        return DS_FAIL(DS_ERR_ARG, "backward needs a forward and ds_model_loss(want_grad=1) first");
    IN_RANGE(m, "output bwd", -1, out_backward(m));
    if (m->la_w >= 0 || m->cfg.n_fc > 0)
        IN_RANGE(m, "lookahead+fc bwd", -1, head_backward(m));
    for (int j = m->cfg.rnn_layers - 1; j >= 0; j--)
        IN_RANGE(m, "rnn bwd ", j, rnn_backward(m, j));
    for (int k = m->cfg.n_fc_pre - 1; k >= 0; k--) {
        const void *x;
        void *dx;
        fc_pre_input(m, k, &x, &dx);
        IN_RANGE(m, "fc_pre bwd ", k, fc_backward(m, &m->fc_pre[k], x, dx));
    }
    if (!m->cfg.n_conv) {
        m->have_dlogits = 0;
        return DS_OK;   /* the features take no gradient */
    }
    const conv_layer *last = &m->conv[m->cfg.n_conv - 1];
    IN_RANGE(m, "conv_to_seq bwd", -1,
             m->op->conv_to_seq_bwd(m->ctx, m->n, last->co, ds_model_batch_out_frames(m),
                                    last->fo, ds_m_dact(m, m->ds0), conv_dout(m, last)));
    for (int i = m->cfg.n_conv - 1; i >= 0; i--)
        IN_RANGE(m, "conv bwd ", i, conv_backward(m, i));
    m->have_dlogits = 0;
    return DS_OK;
}

ds_status ds_model_zero_grad(ds_model *m)
{
    if (m->bg)
        DS_TRY(m->be->zero(m->ctx, m->roles.stats, m->bn_param_span, m->bg));
    return m->be->zero(m->ctx, m->dt, m->param_span, m->g);
}
