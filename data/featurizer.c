/* featurizer.c - audio to feature frames with FFTW; see featurizer.h.
 * All arithmetic is in double; only the
 * output is float. */
#include "featurizer.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Added to the mel energies before the log so that silence stays finite. */
#define DS_LOGMEL_FLOOR 1e-6

/* FFTW's planner (and fftw_destroy_plan) share global state: every call into
 * them goes through this lock. fftw_execute on distinct plans is safe. */
static pthread_mutex_t fftw_plan_lock = PTHREAD_MUTEX_INITIALIZER;

struct ds_featurizer {
    ds_feature_cfg cfg;
    int n_fft, hop, pad, n_bins, dim;
    int n_mels;             /* filterbank size in use: 0 for the spectrogram */
    double *window;         /* [n_fft] */
    double *frame;          /* [n_fft], fftw_malloc'd: the plan's input */
    fftw_complex *spec;     /* [n_bins], fftw_malloc'd: the plan's output */
    fftw_plan plan;
    double *power;          /* [n_bins] |X|^2 */
    double *mel_w;          /* [n_mels][n_bins] triangle weights */
    int *mel_lo, *mel_hi;   /* [n_mels] bins with non-zero weight: [lo, hi) */
    double *logmel;         /* [n_mels] */
    double *dct;            /* [n_mfcc][n_mels] orthonormal DCT-II rows */
};

static ds_status check_cfg(const ds_feature_cfg *c)
{
    int n_fft = ds_feature_n_fft(c), hop = ds_feature_hop(c);
    if (c->type != DS_FEAT_SPECTROGRAM && c->type != DS_FEAT_LOGMEL && c->type != DS_FEAT_MFCC)
        return DS_FAIL(DS_ERR_ARG, "unknown feature type %d", (int)c->type);
    if (c->sample_rate <= 0 || n_fft < 2 || hop < 1)
        return DS_FAIL(DS_ERR_ARG,
                       "features: sample rate %d Hz, window %g s, stride %g s give n_fft %d and "
                       "hop %d (need n_fft >= 2, hop >= 1)",
                       c->sample_rate, c->window_size_s, c->window_stride_s, n_fft, hop);
    if (c->type == DS_FEAT_LOGMEL && c->n_mels < 1)
        return DS_FAIL(DS_ERR_ARG, "features: n_mels %d, need at least 1", c->n_mels);
    if (c->type == DS_FEAT_MFCC && (c->n_mfcc < 1 || c->n_mfcc > DS_MFCC_N_MELS))
        return DS_FAIL(DS_ERR_ARG, "features: n_mfcc %d, need 1..%d", c->n_mfcc, DS_MFCC_N_MELS);
    return DS_OK;
}

/* Symmetric Hamming window w [n]. */
static void make_window(double *w, int n)
{
    for (int i = 0; i < n; i++)
        w[i] = 0.54 - 0.46 * cos(2.0 * M_PI * i / (n - 1));
}

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }

static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

/* The triangle weights of features.h into f->mel_w [n_mels][n_bins], with
 * each filter's non-zero range so that applying it skips the zeros. */
static ds_status make_filterbank(ds_featurizer *f)
{
    int m_n = f->n_mels, nb = f->n_bins;
    double *edge = malloc((size_t)(m_n + 2) * sizeof *edge);   /* [n_mels + 2] Hz */
    if (!edge)
        return DS_FAIL(DS_ERR_MEM, "features: mel edges [%d]", m_n + 2);
    double top = hz_to_mel(f->cfg.sample_rate / 2.0);
    for (int i = 0; i < m_n + 2; i++)
        edge[i] = mel_to_hz(top * i / (m_n + 1));
    for (int m = 0; m < m_n; m++) {
        double *w = f->mel_w + (size_t)m * nb;
        f->mel_lo[m] = nb;
        f->mel_hi[m] = 0;
        for (int k = 0; k < nb; k++) {
            double hz = (double)k * f->cfg.sample_rate / f->n_fft;
            double up = (hz - edge[m]) / (edge[m + 1] - edge[m]);
            double down = (edge[m + 2] - hz) / (edge[m + 2] - edge[m + 1]);
            w[k] = fmax(0.0, fmin(up, down));
            if (w[k] > 0) {
                f->mel_lo[m] = k < f->mel_lo[m] ? k : f->mel_lo[m];
                f->mel_hi[m] = k + 1;
            }
        }
    }
    free(edge);
    return DS_OK;
}

/* Rows j < n_mfcc of the orthonormal DCT-II of size n_mels into f->dct. */
static void make_dct(ds_featurizer *f)
{
    int m_n = f->n_mels;
    for (int j = 0; j < f->cfg.n_mfcc; j++) {
        double s = sqrt((j == 0 ? 1.0 : 2.0) / m_n);
        for (int m = 0; m < m_n; m++)
            f->dct[(size_t)j * m_n + m] = s * cos(M_PI * j * (m + 0.5) / m_n);
    }
}

/* Buffers sized from the checked configuration; fftw_malloc for the plan's
 * arrays so that they have the alignment FFTW's SIMD code prefers. */
static ds_status alloc_buffers(ds_featurizer *f)
{
    size_t nb = (size_t)f->n_bins, nm = (size_t)f->n_mels;
    f->window = malloc((size_t)f->n_fft * sizeof *f->window);
    f->frame = fftw_malloc((size_t)f->n_fft * sizeof *f->frame);
    f->spec = fftw_malloc(nb * sizeof *f->spec);
    f->power = malloc(nb * sizeof *f->power);
    if (!f->window || !f->frame || !f->spec || !f->power)
        return DS_FAIL(DS_ERR_MEM, "features: buffers for n_fft %d", f->n_fft);
    if (nm == 0)
        return DS_OK;
    f->mel_w = malloc(nm * nb * sizeof *f->mel_w);
    f->mel_lo = malloc(nm * sizeof *f->mel_lo);
    f->mel_hi = malloc(nm * sizeof *f->mel_hi);
    f->logmel = malloc(nm * sizeof *f->logmel);
    f->dct = malloc((size_t)f->cfg.n_mfcc * nm * sizeof *f->dct);
    if (!f->mel_w || !f->mel_lo || !f->mel_hi || !f->logmel || !f->dct)
        return DS_FAIL(DS_ERR_MEM, "features: filterbank of %zu filters x %zu bins", nm, nb);
    return DS_OK;
}

static ds_status make_plan(ds_featurizer *f)
{
    if (pthread_mutex_lock(&fftw_plan_lock) != 0)
        return DS_FAIL(DS_ERR_BACKEND, "features: cannot take the FFTW planner lock");
    /* FFTW_ESTIMATE does not touch the arrays while planning. */
    f->plan = fftw_plan_dft_r2c_1d(f->n_fft, f->frame, f->spec, FFTW_ESTIMATE);
    pthread_mutex_unlock(&fftw_plan_lock);
    if (!f->plan)
        return DS_FAIL(DS_ERR_BACKEND, "features: FFTW could not plan a real DFT of size %d",
                       f->n_fft);
    return DS_OK;
}

ds_status ds_featurizer_create(const ds_feature_cfg *c, ds_featurizer **out)
{
    *out = NULL;
    DS_TRY(check_cfg(c));
    ds_featurizer *f = calloc(1, sizeof *f);
    if (!f)
        return DS_FAIL(DS_ERR_MEM, "features: featurizer");
    f->cfg = *c;
    f->n_fft = ds_feature_n_fft(c);
    f->hop = ds_feature_hop(c);
    f->pad = f->n_fft / 2;
    f->n_bins = f->n_fft / 2 + 1;
    f->dim = ds_feature_dim(c);
    f->n_mels = c->type == DS_FEAT_LOGMEL ? c->n_mels : c->type == DS_FEAT_MFCC ? DS_MFCC_N_MELS : 0;
    ds_status st;
    DS_TRY_GOTO(st, alloc_buffers(f), fail);
    make_window(f->window, f->n_fft);
    if (f->n_mels > 0) {
        DS_TRY_GOTO(st, make_filterbank(f), fail);
        make_dct(f);
    }
    DS_TRY_GOTO(st, make_plan(f), fail);
    *out = f;
    return DS_OK;
fail:
    ds_featurizer_destroy(f);
    return st;
}

void ds_featurizer_destroy(ds_featurizer *f)
{
    if (!f)
        return;
    if (f->plan) {
        /* Destroying a plan also touches the planner's shared state. */
        int locked = pthread_mutex_lock(&fftw_plan_lock) == 0;
        fftw_destroy_plan(f->plan);
        if (locked)
            pthread_mutex_unlock(&fftw_plan_lock);
    }
    fftw_free(f->frame);
    fftw_free(f->spec);
    free(f->window);
    free(f->power);
    free(f->mel_w);
    free(f->mel_lo);
    free(f->mel_hi);
    free(f->logmel);
    free(f->dct);
    free(f);
}

/* Index into audio [n] of padded position i - pad, reflected at both ends
 * without repeating the edge sample; needs pad < n (checked by the caller). */
static long reflect_index(long i, long n)
{
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i;
}

/* Windows frame t of audio [n] into f->frame, transforms it and leaves
 * |X[k]|^2 in f->power [n_bins]. */
static void frame_power(ds_featurizer *f, const float *audio, long n, long t)
{
    long start = t * f->hop - f->pad;
    if (start >= 0 && start + f->n_fft <= n) {
        for (int i = 0; i < f->n_fft; i++)
            f->frame[i] = f->window[i] * audio[start + i];
    } else {
        for (int i = 0; i < f->n_fft; i++)
            f->frame[i] = f->window[i] * audio[reflect_index(start + i, n)];
    }
    fftw_execute(f->plan);
    for (int k = 0; k < f->n_bins; k++)
        f->power[k] = f->spec[k][0] * f->spec[k][0] + f->spec[k][1] * f->spec[k][1];
}

/* f->logmel [n_mels] from f->power. */
static void apply_logmel(ds_featurizer *f)
{
    for (int m = 0; m < f->n_mels; m++) {
        const double *w = f->mel_w + (size_t)m * f->n_bins;
        double e = 0;
        for (int k = f->mel_lo[m]; k < f->mel_hi[m]; k++)
            e += w[k] * f->power[k];
        f->logmel[m] = log(e + DS_LOGMEL_FLOOR);
    }
}

/* One frame's features into out [dim]. */
static void emit_frame(ds_featurizer *f, float *out)
{
    if (f->cfg.type == DS_FEAT_SPECTROGRAM) {
        for (int k = 0; k < f->n_bins; k++)
            out[k] = (float)log1p(sqrt(f->power[k]));
        return;
    }
    apply_logmel(f);
    if (f->cfg.type == DS_FEAT_LOGMEL) {
        for (int m = 0; m < f->n_mels; m++)
            out[m] = (float)f->logmel[m];
        return;
    }
    for (int j = 0; j < f->cfg.n_mfcc; j++) {
        const double *row = f->dct + (size_t)j * f->n_mels;
        double c = 0;
        for (int m = 0; m < f->n_mels; m++)
            c += row[m] * f->logmel[m];
        out[j] = (float)c;
    }
}

ds_status ds_featurizer_run(ds_featurizer *f, const float *audio, long n, float *out)
{
    long min = ds_feature_min_samples(&f->cfg);
    if (n < min)
        return DS_FAIL(DS_ERR_ARG,
                       "features: audio of %ld samples is too short; the centred window needs "
                       "at least %ld (%.1f ms at %d Hz)",
                       n, min, 1000.0 * min / f->cfg.sample_rate, f->cfg.sample_rate);
    long frames = ds_feature_frames(&f->cfg, n);
    for (long t = 0; t < frames; t++) {
        frame_power(f, audio, n, t);
        emit_frame(f, out + (size_t)t * f->dim);
    }
    return DS_OK;
}
