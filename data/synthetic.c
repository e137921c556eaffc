/* synthetic.c - speech-shaped random batches for tests, benchmarks and the
 * demo; see synthetic.h. */
#include "synthetic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define TEMPLATE_SEED 0x5eed5eedULL    /* the synthetic "language" is the same in every run */
#define NOISE 0.5

int ds_synthetic_symbol_frames(const ds_model_cfg *cfg) { return 4 * ds_config_time_stride(cfg); }

int ds_synthetic_max_labels(const ds_model_cfg *cfg, int max_frames)
{
    return max_frames / ds_synthetic_symbol_frames(cfg) + 1;
}

/* Template value of symbol s (0 = silence) at feature j: a fixed pseudo-random
 * pattern, recomputed rather than stored so the generator needs no state. */
static float template_value(int s, int j)
{
    ds_rng r;
    ds_rng_seed(&r, TEMPLATE_SEED ^ ((uint64_t)s << 32) ^ (uint64_t)j);
    return s == 0 ? 0.0f : (float)(1.5 * ds_rng_normal(&r));
}

static int draw_length(ds_rng *rng, int max_frames, int min_frames)
{
    /* read speech: most utterances near 3/4 of the longest, a tail of short ones */
    double frac = 0.72 + 0.18 * ds_rng_normal(rng);
    frac = frac < 0.25 ? 0.25 : (frac > 1.0 ? 1.0 : frac);
    int t = (int)(frac * max_frames);
    return t < min_frames ? min_frames : t;
}

/* LibriSpeech-like seconds: 85% near 14 s, 15% spread over 1.5-12 s; drawn
 * again until the length fits (a cut would pile utterances up at the limit). */
static int draw_librispeech(ds_rng *rng, int max_frames, int min_frames)
{
    for (int tries = 0; tries < 64; tries++) {
        double s = ds_rng_uniform(rng) < 0.85 ? 14.0 + 1.6 * ds_rng_normal(rng)
                                              : 1.5 + 10.5 * ds_rng_uniform(rng);
        int t = (int)(s * 100);
        if (t >= min_frames && t <= max_frames)
            return t;
    }
    return max_frames;   /* a limit far below the corpus's lengths */
}

/* tmpl [classes][f] from template_value. */
static void speak(ds_rng *rng, const ds_model_cfg *cfg, const float *tmpl, int t, int sym,
                  const int *labels, int n_labels, float *x /* [t][f] */)
{
    const int f = cfg->n_features;
    int pos = 0;
    for (int k = 0; k <= n_labels; k++) {
        /* a symbol takes sym frames on average; silence fills the rest evenly */
        int end = k == n_labels ? t : (int)((double)(k + 1) * t / (n_labels + 1));
        int start_sym = end - sym > pos ? end - sym : pos;
        for (int s = pos; s < end; s++) {
            int label = (k < n_labels && s >= start_sym) ? labels[k] : 0;
            for (int j = 0; j < f; j++)
                x[(size_t)s * f + j] = tmpl[(size_t)label * f + j] + (float)(NOISE * ds_rng_normal(rng));
        }
        pos = end;
    }
}

ds_status ds_synthetic_batch(ds_rng *rng, const ds_model_cfg *cfg, int n, int max_frames,
                             ds_batch *b)
{
    return ds_synthetic_batch_dist(rng, cfg, n, max_frames, DS_LEN_READ, b);
}

/* One length from dist, at least two symbols' frames. */
static int draw_dist(ds_rng *rng, const ds_model_cfg *cfg, int max_frames, ds_length_dist dist)
{
    const int lo = 2 * ds_synthetic_symbol_frames(cfg);
    return dist == DS_LEN_LIBRISPEECH ? draw_librispeech(rng, max_frames, lo)
                                      : draw_length(rng, max_frames, lo);
}

static ds_status check_room(const ds_model_cfg *cfg, int n, int max_frames, const ds_batch *b)
{
    const int sym = ds_synthetic_symbol_frames(cfg), f = cfg->n_features;
    if (n > b->cap_n || max_frames > b->cap_t || f != b->f)
        return DS_FAIL(DS_ERR_ARG, "synthetic batch %d x %d x %d exceeds its buffers", n, max_frames, f);
    if (max_frames < 2 * sym)
        return DS_FAIL(DS_ERR_ARG, "synthetic utterances need at least %d frames for %s, got %d",
                       2 * sym, cfg->name, max_frames);
    return DS_OK;
}

ds_status ds_synthetic_batch_dist(ds_rng *rng, const ds_model_cfg *cfg, int n, int max_frames,
                                  ds_length_dist dist, ds_batch *b)
{
    DS_TRY(check_room(cfg, n, max_frames, b));
    for (int i = 0; i < n; i++)   /* drawn in place: batch_of reads each before it writes it */
        b->lengths[i] = draw_dist(rng, cfg, max_frames, dist);
    return ds_synthetic_batch_of(rng, cfg, n, b->lengths, b);
}

static int cmp_int(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

ds_status ds_synthetic_sorted_lengths(ds_rng *rng, const ds_model_cfg *cfg, int global, int pool,
                                      int max_frames, ds_length_dist dist, int *out)
{
    if (global < 1 || pool < 1)
        return DS_FAIL(DS_ERR_ARG, "sorted synthetic batches: %d of %d", pool, global);
    if (max_frames < 2 * ds_synthetic_symbol_frames(cfg))
        return DS_FAIL(DS_ERR_ARG, "synthetic utterances need at least %d frames for %s, got %d",
                       2 * ds_synthetic_symbol_frames(cfg), cfg->name, max_frames);
    const long batches = (long)DS_SYNTHETIC_SORT_SAMPLE * pool, n = batches * global;
    int *all = malloc((size_t)n * sizeof *all);
    if (!all)
        return DS_FAIL(DS_ERR_MEM, "sorted synthetic batches: %ld lengths", n);
    for (long i = 0; i < n; i++)
        all[i] = draw_dist(rng, cfg, max_frames, dist);
    qsort(all, (size_t)n, sizeof *all, cmp_int);
    for (int k = 0; k < pool; k++) {
        const long at = (long)((k + 0.5) * batches / pool) * global;
        memcpy(out + (size_t)k * global, all + at, (size_t)global * sizeof *out);
    }
    free(all);
    return DS_OK;
}

ds_status ds_synthetic_batch_of(ds_rng *rng, const ds_model_cfg *cfg, int n, const int *lengths,
                                ds_batch *b)
{
    const int sym = ds_synthetic_symbol_frames(cfg), f = cfg->n_features;
    int t = 0;
    for (int i = 0; i < n; i++) {
        if (lengths[i] < 2 * sym)
            return DS_FAIL(DS_ERR_ARG, "synthetic utterance %d: %d frames, under the %d two "
                           "symbols take in %s", i, lengths[i], 2 * sym, cfg->name);
        t = lengths[i] > t ? lengths[i] : t;
    }
    DS_TRY(check_room(cfg, n, t, b));
    b->n = n;
    b->t = t;
    for (int i = 0; i < n; i++)
        b->lengths[i] = lengths[i];
    memset(b->features, 0, (size_t)n * b->t * f * sizeof(float));
    float tmpl[cfg->n_classes * f];   /* small: classes x features */
    for (int s = 0; s < cfg->n_classes; s++)
        for (int j = 0; j < f; j++)
            tmpl[s * f + j] = template_value(s, j);
    int off = 0;
    for (int i = 0; i < n; i++) {
        int max_l = b->lengths[i] / (2 * sym);   /* half the frames carry symbols */
        int l = ds_rng_int(rng, max_l > 1 ? max_l / 2 + 1 : 1, max_l > 1 ? max_l : 1);
        if (off + l > b->cap_labels)
            return DS_FAIL(DS_ERR_ARG, "synthetic labels exceed the batch's %d", b->cap_labels);
        b->label_off[i] = off;
        b->label_len[i] = l;
        for (int k = 0; k < l; k++)
            b->labels[off + k] = ds_rng_int(rng, 1, cfg->n_classes - 1);
        speak(rng, cfg, tmpl, b->lengths[i], sym, &b->labels[off], l, &b->features[(size_t)i * b->t * f]);
        off += l;
    }
    return DS_OK;
}
