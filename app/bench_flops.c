/* bench_flops.c - the model's FLOPs per step (bench.h gives the formula). */
#include "bench.h"

static int window_out(int n, int k, int s, int p) { return n + 2 * p < k ? 0 : (n + 2 * p - k) / s + 1; }

/* A residual branch's 1x1 conv from layer src's channels into layer i's. */
static double residual_fwd(const ds_model_cfg *cfg, int i, int t, int fo)
{
    int src[DS_MAX_RES];
    const int n = ds_config_residual_sources(cfg, i, src);
    double f = 0;
    for (int r = 0; r < n; r++)
        f += 2.0 * cfg->conv[i].channels * t * fo * cfg->conv[src[r]].channels;
    return f;
}

/* Forward FLOPs of one utterance of t input frames; *first_conv gets the
 * first conv's share (its backward has no input gradient). */
static double utterance_fwd(const ds_model_cfg *cfg, int t, double *first_conv)
{
    double f = 0;
    int fi = cfg->n_features, ci = 1;
    for (int i = 0; i < cfg->n_conv; i++) {
        const ds_conv_cfg *c = &cfg->conv[i];
        t = ds_config_conv_frames(c, t);
        const int fo = window_out(fi, c->kernel_freq, c->stride_freq, c->pad_freq);
        const double conv = 2.0 * c->channels * t * fo * ci * c->kernel_time * c->kernel_freq;
        if (i == 0)
            *first_conv = conv;
        f += conv + residual_fwd(cfg, i, t, fo);
        fi = fo;
        ci = c->channels;
    }
    const int G = ds_backend_cell_gates(cfg->cell), H = cfg->hidden, dirs = cfg->bidirectional ? 2 : 1;
    /* the sequence input: conv maps flattened, or frames with their context */
    int in = cfg->n_conv ? ci * fi : (2 * cfg->context + 1) * cfg->n_features;
    for (int k = 0; k < cfg->n_fc_pre; k++) {
        const double fc = 2.0 * t * in * cfg->fc_pre[k];
        if (k == 0 && !cfg->n_conv)
            *first_conv = fc;   /* the first layer on the features: no input gradient */
        f += fc;
        in = cfg->fc_pre[k];
    }
    for (int j = 0; j < cfg->rnn_layers; j++) {
        f += (double)dirs * t * 2.0 * G * H * (in + H);
        in = H;   /* no RNN (Jasper, Wav2Letter+): the sequence input goes on */
    }
    if (cfg->lookahead > 0)
        f += 2.0 * t * H * cfg->lookahead;
    for (int k = 0; k < cfg->n_fc; k++) {
        f += 2.0 * t * in * cfg->fc_hidden[k];
        in = cfg->fc_hidden[k];
    }
    return f + 2.0 * t * in * cfg->n_classes;
}

double ds_bench_flops(const ds_model_cfg *cfg, const int *lengths, int n, ds_bench_mode mode)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        double first = 0, fwd = utterance_fwd(cfg, lengths[i], &first);
        total += mode == DS_BENCH_FORWARD ? fwd : fwd + 2 * fwd - first;
    }
    return total;
}
