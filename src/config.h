/* config.h - the architecture of a model, read from JSON (a file or a
 * compiled-in preset from configs/): DeepSpeech2's graph (conv, RNN, FC),
 * and the stages other families add to it: DS1's context windows, FC
 * layers before the RNN and dropout. */
#ifndef DS_CONFIG_H
#define DS_CONFIG_H

#include <stdio.h>

#include "backend.h"

#define DS_MAX_CONV 64          /* Jasper 10x5: prologue, 50 block layers, 2 epilogue */
#define DS_MAX_RES 16           /* residual branches into one block (dense: one per earlier block) */
#define DS_CONFIG_JSON_MAX 65536   /* ds_config_to_json's text of any accepted config fits */
#define DS_MAX_FC 8
#define DS_MAX_FC_SIZE 65536   /* units of one hidden FC layer (rnn.hidden: 16384) */

/* One conv layer; time is the first spatial axis, frequency the second.
 * conv -> mask -> BatchNorm -> (+ residual) -> activation -> dropout. Every
 * field that is zero keeps DeepSpeech2's layer. */
typedef struct {
    int channels;
    int kernel_time, kernel_freq;
    int stride_time, stride_freq;
    int pad_time, pad_freq;
    int dilation_time;          /* kernel rows this many frames apart; 0 or 1: adjacent */
    int no_bias;                /* 1: no conv bias (Jasper, Wav2Letter+: BatchNorm follows) */
    int relu;                   /* 1: ReLU; 0: Hardtanh(0, 20), the clipped ReLU */
    double dropout;             /* after the activation, in training */
    int block;                  /* residual block (1, 2, ...; a block is consecutive layers);
                                 * 0: none. The block's last layer adds a 1x1 conv + BN of
                                 * the block's input before its activation. */
} ds_conv_cfg;

typedef struct {
    char name[64];
    int n_features;                 /* features per input frame */
    int n_classes;                  /* output symbols, blank included */
    int n_conv;
    ds_conv_cfg conv[DS_MAX_CONV];
    ds_cell cell;
    int hidden, rnn_layers;         /* rnn_layers 0: no recurrence (Jasper, Wav2Letter+) */
    int bidirectional;              /* directions summed */
    int lookahead;                  /* context of the lookahead conv (unidirectional only), 0: none */
    int n_fc;
    int fc_hidden[DS_MAX_FC];       /* hidden FC sizes before the output layer */
    double bn_eps, bn_momentum;
    /* Beyond DeepSpeech2 (each default keeps its graph): */
    int context;                    /* frames each side stacked with each input frame (DS1's
                                     * 9; needs no conv layers), 0: none */
    int n_fc_pre;
    int fc_pre[DS_MAX_FC];          /* FC sizes between the input and the RNN (DS1's three) */
    double dropout;                 /* after every FC layer's activation, in training */
    int out_bn;                     /* BatchNorm before the output FC (DS2: 1) */
    int out_bias;                   /* the output FC has a bias (DS2: 0) */
    int dense_residual;             /* a block's residual sums 1x1 conv + BN of the input of
                                     * every block up to it (Jasper DR), not its own alone */
} ds_model_cfg;

/* Frames out of conv layer k for t in (0: too short): the kernel spans
 * dilation_time (kernel_time - 1) + 1 frames. */
static inline int ds_config_conv_frames(const ds_conv_cfg *k, int t)
{
    const int span = (k->dilation_time > 1 ? k->dilation_time : 1) * (k->kernel_time - 1) + 1;
    return t + 2 * k->pad_time < span ? 0 : (t + 2 * k->pad_time - span) / k->stride_time + 1;
}

/* The conv stack's time stride: input frames per output frame (1 without
 * conv layers). */
static inline int ds_config_time_stride(const ds_model_cfg *c)
{
    int s = 1;
    for (int i = 0; i < c->n_conv; i++)
        s *= c->conv[i].stride_time > 1 ? c->conv[i].stride_time : 1;
    return s;
}

/* The conv layers whose outputs the residual branches of layer i read, in
 * order, into src [DS_MAX_RES]; returns how many (0: i ends no block). At a
 * block's last layer: the input of its block, or with dense_residual the
 * input of every block up to it. */
int ds_config_residual_sources(const ds_model_cfg *c, int i, int *src);

/* Parses JSON text; source names it in errors (file name or preset). */
ds_status ds_config_parse(const char *json, const char *source, ds_model_cfg *out);
ds_status ds_config_load_file(const char *path, ds_model_cfg *out);
ds_status ds_config_preset(const char *name, ds_model_cfg *out);
/* Compiled-in JSON of a preset, or NULL. */
const char *ds_config_preset_json(const char *name);
/* Names of the presets, NULL-terminated. */
const char *ds_config_preset_name(int i);
/* Writes cfg as JSON into buf [cap]; returns DS_ERR_ARG if it does not fit. */
ds_status ds_config_to_json(const ds_model_cfg *cfg, char *buf, size_t cap);

const char *ds_config_cell_name(ds_cell c);

#endif
