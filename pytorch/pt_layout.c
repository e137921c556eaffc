/* pt_layout.c - dstrain <-> deepspeech.pytorch names and shapes, and the
 * other families under dstrain's own names (pt_layout.h). */
#include "pt_layout.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const ds_model *m;
    ds_pt_entry *e;
    int n;
    ds_status st;
} builder;

/* The dstrain tensor named name, and which host copy holds it. */
static const ds_tensor *find(const ds_model *m, const char *name, int *which)
{
    for (int i = 0; i < ds_model_n_params(m); i++)
        if (!strcmp(ds_model_param(m, i)->name, name)) {
            *which = DS_PARAMS;
            return ds_model_param(m, i);
        }
    for (int i = 0; i < ds_model_n_bn_stats(m); i++)
        if (!strcmp(ds_model_bn_stat(m, i)->name, name)) {
            *which = DS_BN_STATS;
            return ds_model_bn_stat(m, i);
        }
    return NULL;
}

/* Appends key (a format) for dstrain tensor ds_name (NULL: a counter). */
static void add(builder *b, ds_pt_kind kind, const char *ds_name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(builder *b, ds_pt_kind kind, const char *ds_name, const char *fmt, ...)
{
    if (b->st != DS_OK)
        return;
    if (b->n >= DS_PT_MAX_ENTRIES) {
        b->st = DS_FAIL(DS_ERR_ARG, "more than %d deepspeech.pytorch tensors", DS_PT_MAX_ENTRIES);
        return;
    }
    ds_pt_entry *e = &b->e[b->n++];
    memset(e, 0, sizeof *e);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->key, sizeof e->key, fmt, ap);
    va_end(ap);
    e->kind = kind;
    e->count = 1;
    if (kind == DS_PT_COUNTER)
        return;
    e->src = find(b->m, ds_name, &e->which);
    if (!e->src) {
        b->st = DS_FAIL(DS_ERR_ARG, "the model has no tensor %s for %s", ds_name, e->key);
        return;
    }
    const int *d = e->src->dims;
    if (kind == DS_PT_CONV && e->src->rank == 4) {
        e->rank = 4;
        int64_t t[4] = {d[0], d[1], d[3], d[2]};
        memcpy(e->dims, t, sizeof t);
    } else if (kind == DS_PT_LOOKAHEAD && e->src->rank == 2) {
        e->rank = 3;
        int64_t t[3] = {d[0], 1, d[1]};
        memcpy(e->dims, t, sizeof t);
    } else if (kind == DS_PT_SAME) {
        e->rank = e->src->rank;
        for (int i = 0; i < e->rank; i++)
            e->dims[i] = d[i];
    } else {
        b->st = DS_FAIL(DS_ERR_ARG, "%s: rank %d does not suit %s", ds_name, e->src->rank, e->key);
        return;
    }
    e->count = e->src->count;
}

/* BatchNorm dstrain prefix.bn.* as key_prefix.{weight,...,num_batches_tracked}. */
static void add_bn(builder *b, const char *ds_prefix, const char *key_prefix)
{
    static const char *const part[] = {"weight", "bias", "running_mean", "running_var"};
    char name[128];
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof name, "%s.bn.%s", ds_prefix, part[k]);
        add(b, DS_PT_SAME, name, "%s.%s", key_prefix, part[k]);
    }
    add(b, DS_PT_COUNTER, NULL, "%s.num_batches_tracked", key_prefix);
}

static void add_conv(builder *b, int i)
{
    char ds[32], key[48];
    snprintf(ds, sizeof ds, "conv.%d.weight", i);
    add(b, DS_PT_CONV, ds, "conv.seq_module.%d.weight", 3 * i);
    snprintf(ds, sizeof ds, "conv.%d.bias", i);
    add(b, DS_PT_SAME, ds, "conv.seq_module.%d.bias", 3 * i);
    snprintf(ds, sizeof ds, "conv.%d", i);
    snprintf(key, sizeof key, "conv.seq_module.%d", 3 * i + 1);
    add_bn(b, ds, key);
}

static void add_rnn(builder *b, int j, int dirs)
{
    static const char *const part[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    static const char *const dir_name[] = {"fwd", "bwd"}, *const suffix[] = {"", "_reverse"};
    char ds[64], key[48];
    if (j > 0) {
        snprintf(ds, sizeof ds, "rnn.%d", j);
        snprintf(key, sizeof key, "rnns.%d.batch_norm.module", j);
        add_bn(b, ds, key);
    }
    for (int d = 0; d < dirs; d++)
        for (int k = 0; k < 4; k++) {
            snprintf(ds, sizeof ds, "rnn.%d.%s.%s", j, dir_name[d], part[k]);
            add(b, DS_PT_SAME, ds, "rnns.%d.rnn.%s_l0%s", j, part[k], suffix[d]);
        }
}

/* Every dstrain tensor, parameter or BatchNorm statistic, must have been
 * named exactly once. */
static ds_status check_cover(const ds_model *m, const ds_pt_entry *e, int n)
{
    const int np = ds_model_n_params(m), ns = ds_model_n_bn_stats(m);
    for (int i = 0; i < np + ns; i++) {
        const ds_tensor *t = i < np ? ds_model_param(m, i) : ds_model_bn_stat(m, i - np);
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen += e[k].src == t;
        if (seen != 1)
            return DS_FAIL(DS_ERR_ARG, "tensor %s has %d deepspeech.pytorch names", t->name, seen);
    }
    return DS_OK;
}

int ds_pt_own_names(const ds_model_cfg *c)
{
    int beyond_ds2 = c->context || c->n_fc_pre || !c->n_conv || !c->rnn_layers || !c->out_bn ||
                     c->out_bias || c->dense_residual;
    for (int i = 0; i < c->n_conv; i++) {   /* Jasper's and Wav2Letter+'s conv layers */
        const ds_conv_cfg *k = &c->conv[i];
        beyond_ds2 |= k->dilation_time > 1 || k->no_bias || k->relu || k->dropout > 0 || k->block;
    }
    return beyond_ds2;
}

ds_status ds_pt_layout(const ds_model *m, ds_pt_entry *e, int *n)
{
    const ds_model_cfg *c = ds_model_config(m);
    *n = 0;
    if (ds_pt_own_names(c)) {
        /* every tensor under its dstrain name, in table order: the names
         * bench/pytorch_ds2.py's DeepSpeech1 (and tests/peer/peer_model.py) take */
        builder b = {m, e, 0, DS_OK};
        for (int i = 0; i < ds_model_n_params(m); i++)
            add(&b, DS_PT_SAME, ds_model_param(m, i)->name, "%s", ds_model_param(m, i)->name);
        for (int i = 0; i < ds_model_n_bn_stats(m); i++)
            add(&b, DS_PT_SAME, ds_model_bn_stat(m, i)->name, "%s", ds_model_bn_stat(m, i)->name);
        *n = b.n;
        return b.st != DS_OK ? b.st : check_cover(m, e, b.n);
    }
    if (c->n_fc > 0)
        return DS_FAIL(DS_ERR_UNSUPPORTED,
                       "%s: fc_hidden.0 (a hidden FC layer of %d) has no counterpart in "
                       "deepspeech.pytorch's DeepSpeech (RNNs, then BatchNorm and the output "
                       "Linear): a model with hidden FC layers cannot be expressed there",
                       c->name, c->fc_hidden[0]);
    builder b = {m, e, 0, DS_OK};
    for (int i = 0; i < c->n_conv; i++)
        add_conv(&b, i);
    for (int j = 0; j < c->rnn_layers; j++)
        add_rnn(&b, j, c->bidirectional ? 2 : 1);
    if (!c->bidirectional && c->lookahead > 0)
        add(&b, DS_PT_LOOKAHEAD, "lookahead.weight", "lookahead.0.conv.weight");
    add_bn(&b, "fc", "fc.0.module.0");
    add(&b, DS_PT_SAME, "fc.weight", "fc.0.module.1.weight");
    DS_TRY(b.st);
    DS_TRY(check_cover(m, e, b.n));
    *n = b.n;
    return DS_OK;
}

/* [out][in][a][b] -> [out][in][b][a]; dims of the source. */
static void swap_last(const int *d, const double *src, double *dst)
{
    const size_t blocks = (size_t)d[0] * d[1], A = (size_t)d[2], B = (size_t)d[3];
    for (size_t o = 0; o < blocks; o++)
        for (size_t a = 0; a < A; a++)
            for (size_t k = 0; k < B; k++)
                dst[o * A * B + k * A + a] = src[o * A * B + a * B + k];
}

void ds_pt_to_torch(const ds_pt_entry *e, const double *src, double *dst)
{
    if (e->kind == DS_PT_CONV)
        swap_last(e->src->dims, src, dst);   /* [o][i][t][f] -> [o][i][f][t] */
    else if (e->kind != DS_PT_COUNTER)
        memcpy(dst, src, e->count * sizeof *dst);
}

void ds_pt_from_torch(const ds_pt_entry *e, const double *src, double *dst)
{
    if (e->kind == DS_PT_CONV) {
        const int *d = e->src->dims;        /* torch's [o][i][f][t] is dims o, i, f, t */
        const int t[4] = {d[0], d[1], d[3], d[2]};
        swap_last(t, src, dst);
    } else if (e->kind != DS_PT_COUNTER) {
        memcpy(dst, src, e->count * sizeof *dst);
    }
}

/* ---- stock deepspeech.pytorch ---- */

typedef struct {
    char *buf;
    size_t cap, at;
    int n;
} notes;

static void note(notes *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(notes *o, const char *fmt, ...)
{
    o->n++;
    if (o->at >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->buf + o->at, o->cap - o->at, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->at += (size_t)w;
    if (o->at + 1 < o->cap) {
        o->buf[o->at++] = '\n';
        o->buf[o->at] = '\0';
    }
}

/* deepspeech.pytorch's two convolutions (model.py), in dstrain's terms. */
static const ds_conv_cfg stock_conv[2] = {
    {.channels = 32, .kernel_time = 11, .kernel_freq = 41, .stride_time = 2, .stride_freq = 2,
     .pad_time = 5, .pad_freq = 20},
    {.channels = 32, .kernel_time = 11, .kernel_freq = 21, .stride_time = 1, .stride_freq = 2,
     .pad_time = 5, .pad_freq = 10},
};

/* The fields deepspeech.pytorch's convolutions have (a model with any of
 * the others set takes dstrain's own names: ds_pt_own_names). */
static int same_conv(const ds_conv_cfg *a, const ds_conv_cfg *b)
{
    return a->channels == b->channels && a->kernel_time == b->kernel_time &&
           a->kernel_freq == b->kernel_freq && a->stride_time == b->stride_time &&
           a->stride_freq == b->stride_freq && a->pad_time == b->pad_time &&
           a->pad_freq == b->pad_freq;
}

static int stock_convs(const ds_model_cfg *c)
{
    if (c->n_conv != 2)
        return 0;
    for (int i = 0; i < 2; i++)
        if (!same_conv(&c->conv[i], &stock_conv[i]))
            return 0;
    return 1;
}

int ds_pt_stock_notes(const ds_model_cfg *c, char *buf, size_t cap)
{
    notes o = {buf, cap, 0, 0};
    if (cap)
        buf[0] = '\0';
    if (ds_pt_own_names(c)) {
        note(&o, "a model of DS1's stages (context windows, FC layers before the RNN, an output "
                 "FC with a bias or without BatchNorm, no conv layers) or a convolution-only "
                 "one (Jasper, Wav2Letter+: no RNN, residual blocks, ReLU, dropout, dilation, "
                 "convs without bias) has no deepspeech.pytorch counterpart: its keys are "
                 "dstrain's own tensor names (bench/pytorch_ds2.py's twins, DeepSpeech1 and "
                 "the convolution-only one, load them by these names: load_dstrain)");
        return o.n;
    }
    if (!stock_convs(c))
        note(&o, "stock deepspeech.pytorch builds exactly two convolutions of 32 channels "
                 "(41x11 and 21x11 freq x time, stride 2x2 and 2x1, padding 20x5 and 10x5); "
                 "this model has %d conv layer%s, so its DeepSpeech.conv must be changed to "
                 "match (the keys go on as conv.seq_module.0, 1, 3, 4, 6, 7, ...)",
            c->n_conv, c->n_conv == 1 ? "" : "s");
    if (c->n_features != 161)
        note(&o, "stock deepspeech.pytorch sizes its first RNN for 161 spectrogram features "
                 "(16 kHz, 20 ms windows); this model takes %d", c->n_features);
    if (c->cell == DS_CELL_RNN_RELU)
        note(&o, "stock deepspeech.pytorch's rnn_type is lstm, gru or rnn (tanh); this model's "
                 "rnn_relu needs nn.RNN(nonlinearity='relu')");
    if (!c->bidirectional && c->lookahead <= 0)
        note(&o, "stock deepspeech.pytorch always puts a lookahead conv after unidirectional "
                 "RNNs (lookahead_context > 0); this model has none, so there is no "
                 "lookahead.0.conv.weight");
    if (c->n_classes != 29)
        note(&o, "stock deepspeech.pytorch's labels.json has 29 labels; this model has %d classes",
             c->n_classes);
    if (c->bn_eps != 1e-5)
        note(&o, "stock deepspeech.pytorch's BatchNorms use eps 1e-5; this model %g", c->bn_eps);
    return o.n;
}
