/* feature.c - how a model's inputs are made: features and normalisation;
 * see feature.h. */
#include "feature.h"

#include <math.h>
#include <string.h>

ds_feature_cfg ds_feature_defaults(void)
{
    ds_feature_cfg c = {
        .type = DS_FEAT_SPECTROGRAM,
        .sample_rate = 16000,
        .window_size_s = 0.02,
        .window_stride_s = 0.01,
        .n_mels = 80,
        .n_mfcc = 26,
    };
    return c;
}

const char *ds_feature_type_name(ds_feature_type t)
{
    switch (t) {
    case DS_FEAT_SPECTROGRAM: return "log-spectrogram";
    case DS_FEAT_LOGMEL: return "log-mel";
    case DS_FEAT_MFCC: return "mfcc";
    }
    return "unknown";
}

ds_status ds_feature_type_parse(const char *s, ds_feature_type *out)
{
    static const ds_feature_type all[] = {DS_FEAT_SPECTROGRAM, DS_FEAT_LOGMEL, DS_FEAT_MFCC};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(s, ds_feature_type_name(all[i])) == 0) {
            *out = all[i];
            return DS_OK;
        }
    }
    return DS_FAIL(DS_ERR_ARG, "unknown feature type '%s' (log-spectrogram, log-mel or mfcc)",
                   s ? s : "(null)");
}

/* (int)(x) as deepspeech.pytorch's int(): truncation of the same double product. */
int ds_feature_n_fft(const ds_feature_cfg *c) { return (int)(c->sample_rate * c->window_size_s); }

int ds_feature_hop(const ds_feature_cfg *c) { return (int)(c->sample_rate * c->window_stride_s); }

int ds_feature_dim(const ds_feature_cfg *c)
{
    switch (c->type) {
    case DS_FEAT_SPECTROGRAM: return ds_feature_n_fft(c) / 2 + 1;
    case DS_FEAT_LOGMEL: return c->n_mels;
    case DS_FEAT_MFCC: return c->n_mfcc;
    }
    return 0;
}

long ds_feature_min_samples(const ds_feature_cfg *c) { return ds_feature_n_fft(c) / 2 + 1; }

static int same_seconds(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(a); }

ds_status ds_feature_check_same(const char *a_what, const ds_feature_cfg *a, const char *b_what,
                                const ds_feature_cfg *b)
{
    if (a->type == b->type && a->sample_rate == b->sample_rate &&
        same_seconds(a->window_size_s, b->window_size_s) &&
        same_seconds(a->window_stride_s, b->window_stride_s) &&
        ds_feature_dim(a) == ds_feature_dim(b))
        return DS_OK;
    return DS_FAIL(DS_ERR_ARG, "%s: features %s, %d per frame, %d Hz, window %g s, stride %g s; "
                   "%s: %s, %d per frame, %d Hz, window %g s, stride %g s: not the same kind",
                   b_what, ds_feature_type_name(b->type), ds_feature_dim(b), b->sample_rate,
                   b->window_size_s, b->window_stride_s, a_what, ds_feature_type_name(a->type),
                   ds_feature_dim(a), a->sample_rate, a->window_size_s, a->window_stride_s);
}

long ds_feature_frames(const ds_feature_cfg *c, long n_samples)
{
    int n_fft = ds_feature_n_fft(c), hop = ds_feature_hop(c);
    if (hop < 1 || n_samples < ds_feature_min_samples(c))
        return 0;
    return 1 + (n_samples + 2 * (long)(n_fft / 2) - n_fft) / hop;
}

const char *ds_feature_norm_name(ds_norm n)
{
    return n == DS_NORM_UTTERANCE ? "utterance" : n == DS_NORM_GLOBAL ? "global" : "none";
}

ds_status ds_feature_norm_parse(const char *s, ds_norm *out)
{
    if (s && strcmp(s, "utterance") == 0)
        *out = DS_NORM_UTTERANCE;
    else if (s && strcmp(s, "global") == 0)
        *out = DS_NORM_GLOBAL;
    else if (s && strcmp(s, "none") == 0)
        *out = DS_NORM_NONE;
    else
        return DS_FAIL(DS_ERR_ARG, "normalisation '%s': expected utterance, global or none",
                       s ? s : "(null)");
    return DS_OK;
}
