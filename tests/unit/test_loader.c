/* test_loader.c - the prefetching loader over a small feature file: coverage,
 * normalisation, padding, labels, determinism across prefetch depths,
 * SpecAugment, stopping mid-epoch, and errors raised in the thread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "loader.h"
#include "testutil.h"

#define N_UTT 23
#define MAX_T 60
#define MAX_L 12
#define BATCH 4

typedef struct {
    char dir[64], path[128];
    ds_dataset *d;
    ds_sampler *s;
    long utts[N_UTT];
    int frames[N_UTT];
    int max_frames, max_labels;
    /* raw [N_UTT][MAX_T * dim] features, read before any loader runs: the
     * loader thread owns ds_dataset_read while it runs */
    float *raw;
} fixture;

/* A feature file with N_UTT utterances of 1..MAX_T frames (one of 1 frame)
 * and 1..MAX_L labels; features far from mean 0 and sd 1 so that
 * normalisation shows. */
static ds_status write_file(const char *path, ds_rng *r)
{
    ds_feature_cfg feat = ds_feature_defaults();
    feat.type = DS_FEAT_LOGMEL;
    feat.n_mels = 10;
    const int dim = ds_feature_dim(&feat);
    ds_dataset_writer *w;
    DS_TRY(ds_dataset_writer_create(path, &feat, DS_F32, &w));
    static float x[MAX_T * 64];
    for (int i = 0; i < N_UTT; i++) {
        int frames = i == 5 ? 1 : ds_rng_int(r, 1, MAX_T), n_labels = ds_rng_int(r, 1, MAX_L);
        uint8_t labels[MAX_L];
        for (int m = 0; m < n_labels; m++)
            labels[m] = (uint8_t)ds_rng_int(r, 1, 28);
        for (int k = 0; k < frames * dim; k++)
            x[k] = (float)(3.0 + 2.0 * ds_rng_normal(r) + 0.1 * (k % dim));
        char id[32];
        snprintf(id, sizeof id, "utt-%03d", i);
        ds_status st = ds_dataset_writer_add(w, id, "text", labels, n_labels, x, frames);
        if (st != DS_OK) {
            ds_dataset_writer_abort(w);
            return st;
        }
    }
    return ds_dataset_writer_close(w);
}

static ds_status fixture_open(fixture *fx)
{
    strcpy(fx->dir, "/tmp/test_loader_XXXXXX");
    if (!mkdtemp(fx->dir))
        return DS_FAIL(DS_ERR_IO, "mkdtemp");
    snprintf(fx->path, sizeof fx->path, "%s/f.h5", fx->dir);
    ds_rng r;
    ds_rng_seed(&r, 2024);
    DS_TRY(write_file(fx->path, &r));
    DS_TRY(ds_dataset_open(fx->path, &fx->d));
    fx->max_frames = fx->max_labels = 0;
    for (long i = 0; i < fx->d->n; i++) {
        fx->utts[i] = i;
        fx->frames[i] = fx->d->frames[i];
        fx->max_frames = fx->frames[i] > fx->max_frames ? fx->frames[i] : fx->max_frames;
        int nl = fx->d->label_length[i];
        fx->max_labels = nl > fx->max_labels ? nl : fx->max_labels;
    }
    fx->raw = malloc(sizeof(float) * N_UTT * MAX_T * fx->d->n_features);
    if (!fx->raw)
        return DS_FAIL(DS_ERR_MEM, "raw features");
    for (long i = 0; i < fx->d->n; i++)
        DS_TRY(ds_dataset_read(fx->d, i, fx->raw + i * MAX_T * fx->d->n_features));
    return ds_sampler_create(fx->utts, fx->frames, fx->d->n, BATCH, 1, 9, &fx->s);
}

static void fixture_close(fixture *fx)
{
    free(fx->raw);
    ds_sampler_destroy(fx->s);
    ds_dataset_close(fx->d);
    unlink(fx->path);
    rmdir(fx->dir);
}

static ds_loader_cfg base_cfg(const fixture *fx, int depth)
{
    return (ds_loader_cfg){.data = fx->d, .sampler = fx->s, .rank = 0, .epoch = 1,
                           .batch = BATCH, .max_frames = fx->max_frames,
                           .max_labels = fx->max_labels, .norm = DS_NORM_UTTERANCE,
                           .seed = 5, .depth = depth};
}

/* The test's own normalisation of x [frames][dim], in double. */
static void ref_normalize(float *x, int frames, int dim, ds_norm norm, const ds_dataset *d)
{
    long n = (long)frames * dim;
    if (norm == DS_NORM_UTTERANCE && n > 1) {
        double s = 0, ss = 0;
        for (long k = 0; k < n; k++)
            s += x[k];
        double mean = s / n;
        for (long k = 0; k < n; k++)
            ss += (x[k] - mean) * (x[k] - mean);
        double sd = sqrt(ss / (n - 1));   /* torch.std(): unbiased */
        for (long k = 0; k < n; k++)
            x[k] = (float)((x[k] - mean) / sd);
    } else if (norm == DS_NORM_GLOBAL) {
        for (long k = 0; k < n; k++)
            x[k] = (float)((x[k] - (double)d->mean[k % dim]) / d->std[k % dim]);
    }
}

/* Checks batch b against utterances take [n]: lengths, padding, labels and
 * features (which must equal the reference or, with augmentation, 0). */
static int check_batch(const fixture *fx, const ds_batch *b, const long *take, int n, ds_norm norm,
                       int *seen, long *masked)
{
    const int f = fx->d->n_features;
    int t_max = 0;
    for (int j = 0; j < n; j++)
        t_max = fx->d->frames[take[j]] > t_max ? fx->d->frames[take[j]] : t_max;
    T_CHECK(b->n == n && b->t == t_max && b->f == f, "batch %d x %d x %d, want %d x %d x %d", b->n,
            b->t, b->f, n, t_max, f);
    if (b->n != n || b->t != t_max)
        return 1;
    static float ref[MAX_T * 64];
    for (int j = 0; j < n; j++) {
        long i = take[j];
        int len = fx->d->frames[i], nl = fx->d->label_length[i];
        seen[i]++;
        T_CHECK(b->lengths[j] == len, "%s: length %d, want %d", fx->d->ids[i], b->lengths[j], len);
        memcpy(ref, fx->raw + i * MAX_T * f, sizeof(float) * len * f);
        ref_normalize(ref, len, f, norm, fx->d);
        const float *x = b->features + (size_t)j * b->t * f;
        int bad = 0, pad = 0;
        for (long k = 0; k < (long)len * f; k++) {
            if (x[k] == 0.0f && ref[k] != 0.0f)
                (*masked)++;
            else if (fabsf(x[k] - ref[k]) > 1e-5f * (1.0f + fabsf(ref[k])))
                bad++;
        }
        for (long k = (long)len * f; k < (long)b->t * f; k++)
            pad += x[k] != 0.0f;
        T_CHECK(bad == 0, "%s: %d features differ from the reference", fx->d->ids[i], bad);
        T_CHECK(pad == 0, "%s: %d padding values are not 0", fx->d->ids[i], pad);
        int lab_ok = b->label_len[j] == nl;
        for (int m = 0; lab_ok && m < nl; m++)
            lab_ok = b->labels[b->label_off[j] + m] == fx->d->labels[fx->d->label_offset[i] + m];
        T_CHECK(lab_ok, "%s: labels differ", fx->d->ids[i]);
        T_CHECK(j == 0 || b->label_off[j] == b->label_off[j - 1] + b->label_len[j - 1],
                "label_off not consecutive");
    }
    return 0;
}

/* One epoch through the loader checked batch by batch against the sampler. */
static int run_epoch_checked(const fixture *fx, ds_loader_cfg cfg, long *masked)
{
    int seen[N_UTT] = {0};
    long take[BATCH], k = 0, batches = 0;
    ds_loader *l;
    const ds_batch *b;
    *masked = 0;
    T_OK(ds_loader_start(&cfg, &l));
    for (;;) {
        T_OK(ds_loader_next(l, &b));
        if (!b)
            break;
        int n = 0;
        while (k < ds_sampler_batches(fx->s) && n == 0)
            n = ds_sampler_take(fx->s, cfg.epoch, k++, cfg.rank, take);
        check_batch(fx, b, take, n, cfg.norm, seen, masked);
        batches++;
    }
    T_OK(ds_loader_next(l, &b));   /* stays at the end */
    T_CHECK(b == NULL, "a batch after the end of the epoch");
    ds_loader_stop(l);
    T_CHECK(batches == ds_sampler_batches(fx->s), "%ld batches, want %ld", batches,
            ds_sampler_batches(fx->s));
    for (int i = 0; i < N_UTT; i++)
        T_CHECK(seen[i] == 1, "norm %d: utterance %d seen %d times", cfg.norm, i, seen[i]);
    return 0;
}

/* One epoch's batches, copied out in order: features, lengths and labels
 * concatenated into out [cap]; returns the count of floats written. */
static long epoch_dump(ds_loader_cfg cfg, float *out, long cap)
{
    ds_loader *l;
    const ds_batch *b;
    long m = 0;
    if (ds_loader_start(&cfg, &l) != DS_OK)
        return -1;
    while (ds_loader_next(l, &b) == DS_OK && b) {
        long nf = (long)b->n * b->t * b->f, nl = b->label_off[b->n - 1] + b->label_len[b->n - 1];
        if (m + nf + b->n + nl + 2 > cap)
            break;
        out[m++] = (float)b->t;
        memcpy(out + m, b->features, nf * sizeof *out);
        m += nf;
        for (int j = 0; j < b->n; j++)
            out[m++] = (float)b->lengths[j];
        for (long q = 0; q < nl; q++)
            out[m++] = (float)b->labels[q];
    }
    ds_loader_stop(l);
    return m;
}

static int check_norms(const fixture *fx)
{
    long masked;
    const ds_norm norms[] = {DS_NORM_UTTERANCE, DS_NORM_GLOBAL, DS_NORM_NONE};
    for (int q = 0; q < 3; q++) {
        ds_loader_cfg cfg = base_cfg(fx, 2);
        cfg.norm = norms[q];
        run_epoch_checked(fx, cfg, &masked);
        T_CHECK(masked == 0, "norm %d: %ld values zeroed without augmentation", norms[q], masked);
    }
    return 0;
}

/* Where x [len][dim] is 0 but ref is not, the whole real row or column is
 * 0: masks are full rows or columns and cover real frames only. */
static long mask_shape_errors(const float *x, int len, int dim)
{
    long errors = 0;
    for (int t = 0; t < len; t++)
        for (int j = 0; j < dim; j++) {
            if (x[(size_t)t * dim + j] != 0.0f)
                continue;
            int row = 1, col = 1;
            for (int q = 0; q < dim; q++)
                row &= x[(size_t)t * dim + q] == 0.0f;
            for (int q = 0; q < len; q++)
                col &= x[(size_t)q * dim + j] == 0.0f;
            errors += !row && !col;
        }
    return errors;
}

static long epoch_mask_errors(ds_loader_cfg cfg)
{
    ds_loader *l;
    const ds_batch *b;
    long errors = 0;
    if (ds_loader_start(&cfg, &l) != DS_OK)
        return -1;
    while (ds_loader_next(l, &b) == DS_OK && b)
        for (int j = 0; j < b->n; j++)
            errors += mask_shape_errors(b->features + (size_t)j * b->t * b->f, b->lengths[j], b->f);
    ds_loader_stop(l);
    return errors;
}

static int check_depth_and_augment(const fixture *fx)
{
    const long cap = 200000;
    float *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    T_CHECK(a && b, "out of memory");
    ds_loader_cfg cfg = base_cfg(fx, 2);
    long na = epoch_dump(cfg, a, cap);
    cfg.depth = 4;
    long nb = epoch_dump(cfg, b, cap);
    T_CHECK(na > 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0, "depth 2 and 4 differ");

    cfg.aug = (ds_specaug){.freq_masks = 2, .freq_width = 3, .time_masks = 2, .time_width = 5};
    long masked;
    run_epoch_checked(fx, cfg, &masked);   /* real values are the reference or masked; padding 0 */
    T_CHECK(masked > 0, "SpecAugment masked nothing");
    T_CHECK(epoch_mask_errors(cfg) == 0, "zeros that are not whole mask rows or columns");
    na = epoch_dump(cfg, a, cap);
    cfg.depth = 2;
    nb = epoch_dump(cfg, b, cap);
    T_CHECK(na > 0 && na == nb && memcmp(a, b, na * sizeof *a) == 0,
            "SpecAugment with one seed differs between runs (depth 4 and 2)");
    cfg.seed = 6;
    nb = epoch_dump(cfg, b, cap);
    T_CHECK(na == nb && memcmp(a, b, na * sizeof *a) != 0, "seeds 5 and 6: same masks");
    free(a);
    free(b);
    return 0;
}

/* Stops right after start, after one and two batches, and at the end;
 * repeated so a race has chances to show (under the sanitizers). */
static int check_stop(const fixture *fx)
{
    for (int rep = 0; rep < 20; rep++)
        for (int after = 0; after < 4; after++) {
            ds_loader_cfg cfg = base_cfg(fx, 2 + rep % 3);
            ds_loader *l;
            const ds_batch *b = NULL;
            T_OK(ds_loader_start(&cfg, &l));
            for (int k = 0; k < (after == 3 ? 1000 : after); k++) {
                T_OK(ds_loader_next(l, &b));
                if (!b)
                    break;
            }
            ds_loader_stop(l);
        }
    T_CHECK(1, "stopped cleanly");
    return 0;
}

/* Whether msg names an utterance over the limit (frames or labels). */
static int names_offender(const fixture *fx, const char *msg, int frames_short, int limit)
{
    for (long i = 0; i < fx->d->n; i++) {
        int v = frames_short ? fx->d->frames[i] : fx->d->label_length[i];
        char id[64];
        snprintf(id, sizeof id, "%s:", fx->d->ids[i]);
        if (v > limit && strstr(msg, id))
            return 1;
    }
    return 0;
}

/* A too-small max_frames or max_labels fails in the thread and surfaces
 * from next naming the utterance; stop after it is clean. */
static int check_error(const fixture *fx, int frames_short)
{
    ds_loader_cfg cfg = base_cfg(fx, 2);
    if (frames_short)
        cfg.max_frames = fx->max_frames - 1;
    else
        cfg.max_labels = fx->max_labels - 1;
    ds_loader *l;
    const ds_batch *b;
    T_OK(ds_loader_start(&cfg, &l));
    ds_status st;
    int batches = 0;
    ds_status_clear_error();
    while ((st = ds_loader_next(l, &b)) == DS_OK && b)
        batches++;
    T_CHECK(st == DS_ERR_ARG, "no error from the thread (%d batches)", batches);
    T_CHECK(names_offender(fx, ds_status_last_error(), frames_short,
                           frames_short ? cfg.max_frames : cfg.max_labels),
            "message '%s' names no utterance over the limit", ds_status_last_error());
    ds_status_clear_error();
    T_CHECK(ds_loader_next(l, &b) == DS_ERR_ARG && b == NULL, "error not sticky");
    ds_status_clear_error();
    ds_loader_stop(l);
    return 0;
}

/* The utterance whose length and labels batch slot j has, or -1; random
 * labels make them unique in the fixture. */
static long identify(const fixture *fx, const ds_batch *b, int j)
{
    for (long i = 0; i < fx->d->n; i++) {
        int same = b->label_len[j] == fx->d->label_length[i] && b->lengths[j] == fx->d->frames[i];
        for (int m = 0; same && m < b->label_len[j]; m++)
            same = b->labels[b->label_off[j] + m] == fx->d->labels[fx->d->label_offset[i] + m];
        if (same)
            return i;
    }
    return -1;
}

/* Ranks 0 and 1 of 2 together see every utterance once. */
static int check_two_ranks(const fixture *fx)
{
    ds_sampler *s2;
    T_OK(ds_sampler_create(fx->utts, fx->frames, fx->d->n, 3, 2, 9, &s2));
    int seen[N_UTT] = {0};
    for (int r = 0; r < 2; r++) {
        ds_loader_cfg cfg = base_cfg(fx, 3);
        cfg.sampler = s2;
        cfg.rank = r;
        ds_loader *l;
        const ds_batch *b;
        T_OK(ds_loader_start(&cfg, &l));
        while (ds_loader_next(l, &b) == DS_OK && b)
            for (int j = 0; j < b->n; j++) {
                long i = identify(fx, b, j);
                T_CHECK(i >= 0, "rank %d: a batch slot matches no utterance", r);
                if (i >= 0)
                    seen[i]++;
            }
        ds_loader_stop(l);
    }
    for (int i = 0; i < N_UTT; i++)
        T_CHECK(seen[i] == 1, "two ranks: utterance %d seen %d times", i, seen[i]);
    ds_sampler_destroy(s2);
    return 0;
}

static int check_args(const fixture *fx)
{
    ds_norm n;
    T_CHECK(ds_feature_norm_parse("utterance", &n) == DS_OK && n == DS_NORM_UTTERANCE, "utterance");
    T_CHECK(ds_feature_norm_parse("global", &n) == DS_OK && n == DS_NORM_GLOBAL, "global");
    T_CHECK(ds_feature_norm_parse("none", &n) == DS_OK && n == DS_NORM_NONE, "none");
    T_CHECK(ds_feature_norm_parse("Global", &n) == DS_ERR_ARG, "Global accepted");
    ds_status_clear_error();
    ds_loader *l = (ds_loader *)fx;
    ds_loader_cfg cfg = base_cfg(fx, 1);
    T_CHECK(ds_loader_start(&cfg, &l) == DS_ERR_ARG && l == NULL, "depth 1 accepted");
    ds_status_clear_error();
    cfg = base_cfg(fx, 2);
    cfg.batch = BATCH - 1;
    T_CHECK(ds_loader_start(&cfg, &l) == DS_ERR_ARG, "buffers smaller than the sampler's batch");
    ds_status_clear_error();
    cfg = base_cfg(fx, 2);
    cfg.rank = 1;
    T_CHECK(ds_loader_start(&cfg, &l) == DS_ERR_ARG, "rank 1 of 1 accepted");
    ds_status_clear_error();
    ds_loader_stop(NULL);
    return 0;
}

int main(void)
{
    static fixture fx;
    T_OK(fixture_open(&fx));
    check_args(&fx);
    check_norms(&fx);
    check_depth_and_augment(&fx);
    check_stop(&fx);
    check_error(&fx, 1);
    check_error(&fx, 0);
    check_two_ranks(&fx);
    fixture_close(&fx);
    return t_finish("test_loader");
}
