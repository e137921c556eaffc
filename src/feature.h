/* feature.h - how a model's inputs are made: the feature extraction
 * (type, rate, window) and the normalisation applied when batches are
 * formed. Feature files and checkpoints record both, so they are part of the
 * core; the extraction itself lives in data/featurizer.c. */
#ifndef DS_FEATURE_H
#define DS_FEATURE_H

#include "status.h"

/* Filterbank size behind MFCC features. */
#define DS_MFCC_N_MELS 40

typedef enum { DS_FEAT_SPECTROGRAM, DS_FEAT_LOGMEL, DS_FEAT_MFCC } ds_feature_type;

typedef struct {
    ds_feature_type type;
    int sample_rate;          /* 16000 */
    double window_size_s;     /* 0.02 -> n_fft = 320 */
    double window_stride_s;   /* 0.01 -> hop = 160 */
    int n_mels;               /* log-mel filterbank size, 80 (MFCC: DS_MFCC_N_MELS) */
    int n_mfcc;               /* 26, at most DS_MFCC_N_MELS */
} ds_feature_cfg;

/* log-spectrogram, 16000 Hz, 0.02 s, 0.01 s, n_mels 80, n_mfcc 26. */
ds_feature_cfg ds_feature_defaults(void);
const char *ds_feature_type_name(ds_feature_type t);   /* log-spectrogram | log-mel | mfcc */
ds_status ds_feature_type_parse(const char *s, ds_feature_type *out);
int ds_feature_n_fft(const ds_feature_cfg *c);
int ds_feature_hop(const ds_feature_cfg *c);
int ds_feature_dim(const ds_feature_cfg *c);            /* features per frame */
/* Frames of n samples: 1 + n / hop for even n_fft (see data/featurizer.h); 0 when n is
 * below ds_feature_min_samples. */
long ds_feature_frames(const ds_feature_cfg *c, long n_samples);
/* The shortest audio ds_featurizer_run accepts: n_fft/2 + 1 samples (161, 10 ms). */
long ds_feature_min_samples(const ds_feature_cfg *c);
/* DS_OK when b (b_what names it in the message) has a's feature settings
 * (type, rate, window, stride, features per frame); else DS_ERR_ARG saying
 * both: features of another kind of the same width (log-mel against MFCC)
 * would otherwise be taken silently. */
ds_status ds_feature_check_same(const char *a_what, const ds_feature_cfg *a, const char *b_what,
                                const ds_feature_cfg *b);

typedef enum { DS_NORM_UTTERANCE, DS_NORM_GLOBAL, DS_NORM_NONE } ds_norm;

/* utterance: deepspeech.pytorch's per-utterance normalisation, (x - mean) / std
 * over all values of the utterance's real frames, std unbiased (n - 1) as
 * torch's Tensor.std(); where torch would divide by 0 or NaN (one value, or
 * all equal) only the mean is subtracted. global: per feature with /stats of
 * the file (a zero std only centres). none: raw features. */
ds_status ds_feature_norm_parse(const char *s, ds_norm *out);   /* utterance|global|none */
const char *ds_feature_norm_name(ds_norm n);

#endif
