/* pt_layout.h - dstrain's tensors under deepspeech.pytorch's names and
 * shapes (SeanNaren/deepspeech.pytorch, deepspeech_pytorch/model.py,
 * class DeepSpeech), in its state_dict order:
 *
 *   conv.seq_module.{3i}.weight, .bias                 Conv2d i
 *   conv.seq_module.{3i+1}.weight, .bias, .running_mean, .running_var,
 *                   .num_batches_tracked               its BatchNorm2d
 *     (stock: i = 0, 1, so 0, 1, 3, 4; index 3i+2 is the Hardtanh)
 *   rnns.{j}.batch_norm.module.*                       BatchNorm1d of layer j >= 1
 *   rnns.{j}.rnn.{weight_ih,weight_hh,bias_ih,bias_hh}_l0[_reverse]
 *   lookahead.0.conv.weight                            unidirectional models
 *   fc.0.module.0.*                                    the output BatchNorm1d
 *   fc.0.module.1.weight                               the output Linear (no bias)
 *
 * What differs, and how it is converted:
 *   conv weights: dstrain [out][in][time][freq]; deepspeech.pytorch feeds
 *     [N][1][freq][time], so its Conv2d weight is [out][in][freq][time]
 *     (the last two axes swapped);
 *   lookahead: dstrain [hidden][context]; a depthwise Conv1d's weight is
 *     [hidden][1][context] (same order, one more axis);
 *   num_batches_tracked: dstrain keeps no such counter; every BatchNorm runs
 *     once per training step, so export writes the checkpoint's step and
 *     import takes the largest one as the step.
 * The rest is alike: the conv output is flattened channel-major (feature
 * c * F' + f) on both sides, bidirectional outputs are summed, LSTM/GRU
 * weights use PyTorch's gate order, Lookahead + Hardtanh(0, 20) computes
 * y[t][h] = sum_k w[h][k] x[t+k][h] with zeros past the end, as dstrain's
 * lookahead op. */
#ifndef DS_PT_LAYOUT_H
#define DS_PT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef enum {
    DS_PT_SAME,        /* same shape, same order */
    DS_PT_CONV,        /* [out][in][time][freq] <-> [out][in][freq][time] */
    DS_PT_LOOKAHEAD,   /* [hidden][k] <-> [hidden][1][k] */
    DS_PT_COUNTER      /* num_batches_tracked: int64 [], no dstrain tensor */
} ds_pt_kind;

typedef struct {
    char key[96];               /* deepspeech.pytorch's state_dict key */
    ds_pt_kind kind;
    const ds_tensor *src;       /* the dstrain tensor (NULL for DS_PT_COUNTER) */
    int which;                  /* DS_PARAMS or DS_BN_STATS: the host copy src is in */
    int rank;                   /* the PyTorch shape */
    int64_t dims[4];
    size_t count;               /* its elements */
} ds_pt_entry;

/* BatchNorm layers at most: conv, RNN input and output ones. */
#define DS_PT_MAX_ENTRIES (DS_MAX_TENSORS + DS_MAX_CONV + DS_MAX_RNN + 1)

/* Whether cfg is of a family deepspeech.pytorch cannot build (DS1's graph:
 * context windows, FC layers before the RNN, no conv layers, an output FC
 * with a bias or without BatchNorm; Jasper's and Wav2Letter+'s: no RNN,
 * conv layers with residuals, ReLU, dropout, dilation or no bias): its
 * state_dict keys are then dstrain's own tensor names, unchanged in shape. */
int ds_pt_own_names(const ds_model_cfg *cfg);

/* The entries of m in state_dict order (e [DS_PT_MAX_ENTRIES]), every
 * dstrain tensor in exactly one: deepspeech.pytorch's keys, or dstrain's own
 * names (ds_pt_own_names). A DeepSpeech2 model with hidden FC layers
 * (fc_hidden) is refused, naming the layer: deepspeech.pytorch has none. */
ds_status ds_pt_layout(const ds_model *m, ds_pt_entry *e, int *n);

/* dst [e->count] in PyTorch's order = src [e->src->count] in dstrain's, and
 * back. Not for DS_PT_COUNTER. */
void ds_pt_to_torch(const ds_pt_entry *e, const double *src, double *dst);
void ds_pt_from_torch(const ds_pt_entry *e, const double *src, double *dst);

/* What stock deepspeech.pytorch (DeepSpeech with its configs' options:
 * rnn_type lstm|gru|rnn, hidden_size, hidden_layers, lookahead_context, 161
 * spectrogram features, 29 labels) cannot build of cfg: one line per
 * difference into buf [cap] (empty when it can); returns how many. */
int ds_pt_stock_notes(const ds_model_cfg *cfg, char *buf, size_t cap);

#endif
