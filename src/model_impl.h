/* model_impl.h - the model's private layout, shared by model.c (building,
 * parameters) and model_pass.c (forward, loss, backward). Offsets are
 * elements into the activation arena (act, compute dtype), its gradient twin
 * (dact), the BatchNorm arena (bna, stats dtype) or the scalar arena (sca). */
#ifndef DS_MODEL_IMPL_H
#define DS_MODEL_IMPL_H

#include "model.h"

#define HARDTANH_LO 0.0
#define HARDTANH_HI 20.0

typedef struct {
    int gamma, beta;            /* parameter indices */
    int run_mean, run_var;      /* running-statistics indices */
    int c;                      /* channels */
    size_t mean, invstd;        /* bna [c]: batch statistics kept for backward */
    size_t mom, dmom;           /* bna [2c]: forward and backward moments */
} bn_layer;

/* A residual branch into a block's last layer: 1x1 conv (no bias) and
 * BatchNorm of an earlier layer's output, added before the activation. */
typedef struct {
    int src;                    /* the conv layer whose output it reads */
    int w;                      /* parameter index, [co][c_src][1][1] */
    bn_layer bn;
    size_t a, z;                /* act [B][co][T][fo]: conv output, BN output */
    size_t da;                  /* dact: grad of the conv output */
} res_branch;

/* conv (bias optional) -> mask -> BN -> + residual branches -> activation
 * (clamp to [0, hi]) -> dropout in training. */
typedef struct {
    ds_conv_cfg k;
    int ci, co, fi, fo;         /* channels and frequency bins in / out */
    int w, b;                   /* parameter indices (b -1: no bias) */
    bn_layer bn;
    double hi;                  /* 20 (clipped ReLU) or infinity (ReLU) */
    int site;                   /* the layer's number in dropout's key */
    size_t a, y;                /* act [B][co][T][fo]: conv output, activation */
    size_t o;                   /* act: output after dropout (o == y: no dropout) */
    size_t da, dbn, dy, dout;   /* dact: grads of conv output, pre-activation sum, activation,
                                 * output (dout == dy: no dropout) */
    int n_res;
    res_branch res[DS_MAX_RES];
} conv_layer;

typedef struct {
    int in;                     /* input features */
    int has_bn;
    bn_layer bn;
    int first_w;                /* parameter index of the first tensor of the weight span */
    ds_rnn_plan *plan;
    ds_rnn_layout layout;
    size_t span;                /* flat-buffer offset of the weight span */
    size_t z, y;                /* act: BN output [T][B][in], layer output [T][B][H] */
    size_t reserve;             /* act [layout.reserve]: kept from forward to backward */
    size_t dz, dy;              /* dact */
} rnn_layer;

/* A fully connected layer with Hardtanh(0, 20) (DS1's clipped ReLU) and, in
 * training, dropout: x -> linear -> a = clamp -> mask -> y = dropout(a).
 * Without dropout y is a (one buffer), as in DeepSpeech2's hidden layers. */
typedef struct {
    int in, out, w, b;
    int site;                   /* the layer's number in dropout's key */
    size_t a, y;                /* act [T][B][out]: activation, output (a == y: no dropout) */
    size_t da, dy, dpre;        /* dact: grads of a, of the output, of the pre-activation */
} fc_layer;

/* The per-batch scalars, one region of sca (scalar role, FP64) uploaded by
 * one from_host whenever the host's values change (set_batch,
 * set_global_batch; dropout's step, set before the batch by
 * ds_model_set_dropout_key, goes with it): the ops read them there, not as
 * arguments, so that a step captured once per batch shape serves every
 * batch of that shape. */
enum {
    DS_M_COUNT = 0,                   /* + s: count[s], conv stage s in 1..n_conv (0 unused) */
    DS_M_SEQ_COUNT = DS_MAX_CONV + 1, /* seq_count */
    DS_M_GRAD_SCALE,                  /* 1 / loss_norm: what ctc_loss scales dlogits by */
    DS_M_LOSS_NORM,                   /* loss_norm: what loss_total divides by */
    DS_M_DROPOUT_STEP,                /* drop_step: the step dropout's masks are drawn for */
    DS_M_BATCH_SCALARS
};

struct ds_model {
    ds_model_cfg cfg;
    const ds_backend *be;
    ds_ctx *ctx;
    const ds_ops *op;
    ds_dtype dt;                       /* compute: activations, weights, gradients */
    ds_roles roles;
    ds_model_limits lim;
    int t_max[DS_MAX_CONV + 1];        /* frames after each conv stage at the limits */

    ds_tensor params[DS_MAX_TENSORS], stats[DS_MAX_TENSORS];
    int span_of[DS_MAX_TENSORS];       /* RNN layer whose weight span holds param i, or -1 */
    int n_params, n_stats;
    size_t param_count, stats_count;   /* sums of the tensors' counts */
    size_t param_span, stats_span;     /* flat-buffer elements, alignment included */
    void *p, *g;                       /* flat params, grads [param_span] compute */
    void *pm;                          /* master copy [param_span] master; NULL: p is it */
    void *bp, *bg;                     /* fp16/bf16: BN params, grads [bn_param_span] stats */
    size_t bn_param_span;              /* 0: BN params live in p (stats dtype == compute) */
    void *rs;                          /* BN running statistics [stats_span] stats dtype */

    conv_layer conv[DS_MAX_CONV];
    fc_layer fc_pre[DS_MAX_FC];        /* between the input and the RNN (DS1) */
    rnn_layer rnn[DS_MAX_RNN];
    fc_layer fc[DS_MAX_FC];
    int la_w;                          /* lookahead weight index, -1 when absent */
    size_t la_y, la_dy, la_dpre;
    bn_layer out_bn;
    int out_w, out_b;                  /* output FC weight, bias (-1: none) */
    int s0_width;                      /* features per frame of the sequence input s0 */
    ds_dropout_key drop;               /* dropout's seed and part (site and the step's
                                        * buffer, DS_M_DROPOUT_STEP, set per layer) */
    size_t x0, s0, ds0, out_z, out_dz, logits, dlogits, work;
    size_t losses, loss_total;         /* sca [B], [DS_LOSS_SCALARS] */
    size_t batch_sca;                  /* sca [DS_M_BATCH_SCALARS]: the per-batch scalars */
    int d_out;                         /* features entering the output BatchNorm */

    void *act, *dact, *bna, *sca;
    size_t act_count, dact_count, bna_count, sca_count;
    int *d_len;                        /* backend int32 [n_conv+1][B]: lengths per stage */
    int *d_labels, *d_label_off, *d_label_len;
    int *d_best;                /* [T'][N] best class per output frame (greedy decoding) */

    /* the current batch */
    int n, max_label;
    int capturable;                    /* ds_model_set_capturable: the CTC bound is the limit */
    int t[DS_MAX_CONV + 1];
    int *h_len;                        /* host [n_conv+1][B], from the backend */
    /* the host copies of the per-batch scalars, for checks on the host */
    double count[DS_MAX_CONV + 1];     /* real positions per channel after conv stage s (global) */
    double seq_count;                  /* real frames of the sequence part (global) */
    int train, have_dlogits;
    double loss_norm;                  /* utterances the loss is averaged over (global) */
    uint32_t drop_step;                /* dropout's step (ds_model_set_dropout_key) */
    double *h_sca;                     /* host [DS_M_BATCH_SCALARS], from the backend: their
                                        * upload's staging */
    ds_model_hooks hooks;
    const void *loss_scale;            /* sca-like [1] scalar, the optimizer's; NULL: 1 */
    void *stage;                       /* host staging from the backend, stage_bytes */
    size_t stage_bytes;
};

static inline void *ds_m_act(ds_model *m, size_t off) { return ds_elem(m->act, m->dt, off); }
static inline void *ds_m_dact(ds_model *m, size_t off) { return ds_elem(m->dact, m->dt, off); }
static inline void *ds_m_bna(ds_model *m, size_t off) { return ds_elem(m->bna, m->roles.stats, off); }
static inline void *ds_m_sca(ds_model *m, size_t off) { return ds_elem(m->sca, m->roles.scalar, off); }
/* Slot k (DS_M_*) of the per-batch scalars, in backend memory. */
static inline void *ds_m_batch_scalar(ds_model *m, int k) { return ds_m_sca(m, m->batch_sca + (size_t)k); }
static inline void *ds_m_param(ds_model *m, int i)
{
    const ds_tensor *t = &m->params[i];
    return t->group ? ds_elem(m->bp, m->roles.stats, t->place) : ds_elem(m->p, m->dt, t->place);
}
static inline void *ds_m_grad(ds_model *m, int i)
{
    const ds_tensor *t = &m->params[i];
    return t->group ? ds_elem(m->bg, m->roles.stats, t->place) : ds_elem(m->g, m->dt, t->place);
}
static inline void *ds_m_bn_stat(ds_model *m, int i) { return ds_elem(m->rs, m->roles.stats, m->stats[i].place); }
static inline int *ds_m_len(ds_model *m, int stage) { return m->d_len + (size_t)stage * m->lim.batch; }
static inline int ds_m_rnn_dirs(const ds_model *m) { return m->cfg.bidirectional ? 2 : 1; }

/* Conv layer i's geometry for n utterances with t [n_conv+1] frames per
 * stage (the batch's m->t, or the limits' m->t_max); r >= 0: its residual
 * branch r, 1x1 over the source's maps, which have the block's shape. */
static inline ds_conv_geom ds_m_conv_geom(const ds_model *m, int i, int r, int n, const int *t)
{
    const conv_layer *l = &m->conv[i];
    if (r >= 0)
        return (ds_conv_geom){n, m->conv[l->res[r].src].co, t[i + 1], l->fo, l->co, 1, 1, 1, 1,
                              0, 0, t[i + 1], l->fo, 1};
    return (ds_conv_geom){n, l->ci, t[i], l->fi, l->co, l->k.kernel_time, l->k.kernel_freq,
                          l->k.stride_time, l->k.stride_freq, l->k.pad_time, l->k.pad_freq,
                          t[i + 1], l->fo, l->k.dilation_time};
}

/* Frames after conv layer i for t frames in (0: too short). */
static inline int ds_m_conv_frames(const ds_model *m, int i, int t) { return ds_config_conv_frames(&m->cfg.conv[i], t); }

/* Output size of a strided window: (in + 2 pad - k) / stride + 1, or 0. */
static inline int ds_window_out(int in, int k, int stride, int pad)
{
    return in + 2 * pad < k ? 0 : (in + 2 * pad - k) / stride + 1;
}

#endif
