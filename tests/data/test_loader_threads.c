/* test_loader_threads.c - the loader's batches are bit for bit the same
 * whatever its reader threads and prefetch depth (issue 27: N readers), over
 * a float16 file written by dstrain's writer (chunk-aligned layout), with
 * per-utterance normalisation and SpecAugment on, on rank 1 of 2 (global
 * lengths too); a resume (first_batch) and a failure mid-epoch (an utterance
 * over max_frames) come out the same too. The batched read's union,
 * per-utterance and overlapping cases against ds_dataset_read. Then the
 * float16 widening: every
 * finite binary16 value through the file and back, exactly; ctest runs this
 * program twice, the second time with DSTRAIN_CPU_ISA=baseline (the
 * portable path instead of F16C). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "half.h"
#include "loader.h"
#include "testutil.h"

#define N_UTT 61
#define MIN_T 20
#define MAX_T 300
#define MAX_L 30
#define BATCH 3
#define RANKS 2
#define CAP (1L << 24)   /* floats an epoch's dump may take */

typedef struct {
    char dir[64], path[128];
    ds_dataset *d;
    ds_sampler *s;
    int max_frames, max_labels;
} fixture;

/* N_UTT utterances of MIN_T..MAX_T frames, 161 features as float16. */
static ds_status write_file(const char *path)
{
    const ds_feature_cfg feat = ds_feature_defaults();
    const int dim = ds_feature_dim(&feat);
    ds_rng r;
    ds_rng_seed(&r, 27);
    float *x = malloc(sizeof *x * MAX_T * (size_t)dim);   /* [MAX_T][dim] */
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "features");
    ds_dataset_writer *w;
    ds_status st = ds_dataset_writer_create(path, &feat, DS_F16, &w);
    for (int i = 0; st == DS_OK && i < N_UTT; i++) {
        const int frames = ds_rng_int(&r, MIN_T, MAX_T), n_labels = ds_rng_int(&r, 1, MAX_L);
        uint8_t labels[MAX_L];
        for (int m = 0; m < n_labels; m++)
            labels[m] = (uint8_t)ds_rng_int(&r, 1, 28);
        for (long k = 0; k < (long)frames * dim; k++)
            x[k] = (float)(2.5 + 1.5 * ds_rng_normal(&r) + 0.01 * (k % dim));
        char id[32];
        snprintf(id, sizeof id, "utt-%03d", i);
        st = ds_dataset_writer_add(w, id, "text", labels, n_labels, x, frames);
        if (st != DS_OK)
            ds_dataset_writer_abort(w);
    }
    free(x);
    return st == DS_OK ? ds_dataset_writer_close(w) : st;
}

static ds_status fixture_open(fixture *fx)
{
    strcpy(fx->dir, "/tmp/test_loader_threads_XXXXXX");
    if (!mkdtemp(fx->dir))
        return DS_FAIL(DS_ERR_IO, "mkdtemp");
    snprintf(fx->path, sizeof fx->path, "%s/f.h5", fx->dir);
    DS_TRY(write_file(fx->path));
    DS_TRY(ds_dataset_open(fx->path, &fx->d));
    long utts[N_UTT];
    int frames[N_UTT];
    fx->max_frames = fx->max_labels = 0;
    for (long i = 0; i < fx->d->n; i++) {
        utts[i] = i;
        frames[i] = fx->d->frames[i];
        fx->max_frames = frames[i] > fx->max_frames ? frames[i] : fx->max_frames;
        fx->max_labels = fx->d->label_length[i] > fx->max_labels ? fx->d->label_length[i]
                                                                  : fx->max_labels;
    }
    return ds_sampler_create(utts, frames, fx->d->n, BATCH, RANKS, 11, &fx->s);
}

static ds_loader_cfg cfg_of(const fixture *fx, int threads, int depth)
{
    return (ds_loader_cfg){.data = fx->d, .sampler = fx->s, .rank = 1, .epoch = 2,
                           .batch = BATCH, .max_frames = fx->max_frames,
                           .max_labels = fx->max_labels, .norm = DS_NORM_UTTERANCE,
                           .aug = {2, 27, 2, 40}, .seed = 7, .depth = depth, .threads = threads,
                           .timeout_s = 60};
}

/* What an epoch delivered, in order: every batch's index, shape, lengths,
 * global lengths, labels and features, appended to out [CAP] as floats.
 * *n_batches; *err the status that ended it. Returns the floats written. */
static long epoch_dump(ds_loader_cfg cfg, float *out, long *n_batches, ds_status *err)
{
    ds_loader *l;
    *n_batches = 0;
    *err = ds_loader_start(&cfg, &l);
    if (*err != DS_OK)
        return 0;
    long at = 0;
    const ds_batch *b;
    while ((*err = ds_loader_next(l, &b)) == DS_OK && b) {
        const long feats = (long)b->n * b->t * b->f;
        int labels = 0;
        for (int j = 0; j < b->n; j++)
            labels += b->label_len[j];
        if (at + 4 + 2L * b->n + b->n_global + labels + feats > CAP)
            break;
        out[at++] = (float)ds_loader_batch_index(l);
        out[at++] = (float)b->n;
        out[at++] = (float)b->t;
        out[at++] = (float)b->n_global;
        for (int j = 0; j < b->n; j++) {
            out[at++] = (float)b->lengths[j];
            out[at++] = (float)b->label_len[j];
        }
        for (int j = 0; j < b->n_global; j++)
            out[at++] = (float)b->global_lengths[j];
        for (int j = 0; j < labels; j++)
            out[at++] = (float)b->labels[j];
        memcpy(out + at, b->features, (size_t)feats * sizeof *out);
        at += feats;
        (*n_batches)++;
    }
    ds_loader_stop(l);
    return at;
}

/* Every (threads, depth) against one reader at depth 2, bit for bit. */
static void check_same_batches(const fixture *fx, ds_loader_cfg base, const char *what,
                               long min_batches)
{
    static const int runs[][2] = {{2, 2}, {2, 6}, {4, 6}, {3, 3}, {8, 2}, {0, 0}};
    float *ref = malloc(CAP * sizeof *ref), *got = malloc(CAP * sizeof *got);
    T_CHECK(ref && got, "memory");
    if (!ref || !got)
        goto out;
    long nb_ref, nb;
    ds_status err_ref, err;
    base.threads = 1;
    base.depth = 2;
    const long n_ref = epoch_dump(base, ref, &nb_ref, &err_ref);
    char msg_ref[512];
    snprintf(msg_ref, sizeof msg_ref, "%s", err_ref == DS_OK ? "" : ds_status_last_error());
    ds_status_clear_error();
    T_CHECK(nb_ref >= min_batches, "%s: only %ld batches", what, nb_ref);
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        base.threads = runs[r][0];
        base.depth = runs[r][1];
        const long n = epoch_dump(base, got, &nb, &err);
        const char *msg = err == DS_OK ? "" : ds_status_last_error();
        T_CHECK(n == n_ref && nb == nb_ref && memcmp(ref, got, (size_t)n * sizeof *got) == 0,
                "%s: %d threads, depth %d: %ld batches (%ld floats) differ from 1 thread, depth 2's "
                "%ld (%ld)", what, runs[r][0], runs[r][1], nb, n, nb_ref, n_ref);
        T_CHECK(err == err_ref && strcmp(msg, msg_ref) == 0,
                "%s: %d threads, depth %d ended with %s (%s), 1 thread with %s (%s)", what,
                runs[r][0], runs[r][1], ds_status_name(err), msg, ds_status_name(err_ref), msg_ref);
        ds_status_clear_error();
    }
out:
    free(ref);
    free(got);
}

/* Utterances over max_frames fail their batches: the batches before the
 * first (in epoch order) come first, then the error naming it, whatever the
 * threads, though readers may meet later failing batches first. max_frames
 * is the 10th-longest length: the longest few batches fail. */
static void check_failure(const fixture *fx)
{
    ds_loader_cfg c = cfg_of(fx, 1, 2);
    int sorted[N_UTT];
    for (long i = 0; i < fx->d->n; i++) {   /* insertion sort: 61 values */
        long j = i;
        for (; j > 0 && sorted[j - 1] > fx->d->frames[i]; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = fx->d->frames[i];
    }
    c.max_frames = sorted[N_UTT - 10];
    long nb;
    ds_status err;
    float *buf = malloc(CAP * sizeof *buf);
    T_CHECK(buf != NULL, "memory");
    if (!buf)
        return;
    epoch_dump(c, buf, &nb, &err);
    free(buf);
    T_CHECK(err == DS_ERR_ARG && strstr(ds_status_last_error(), "more than max_frames"),
            "over max_frames: %s: %s", ds_status_name(err), ds_status_last_error());
    ds_status_clear_error();
    check_same_batches(fx, c, "a failure mid-epoch", 2);
}

/* Every finite binary16 value as a feature: read back exactly, through the
 * widening path this process uses (F16C, or portable with
 * DSTRAIN_CPU_ISA=baseline). A NaN is refused by the writer, so the
 * finiteness check itself is covered by dataset_bad_inputs. */
static int check_widening(const fixture *fx)
{
    const int dim = fx->d->n_features;
    const int frames = (63488 + dim - 1) / dim;   /* 2 x 31 x 1024 finite patterns */
    float *x = calloc((size_t)frames * dim, sizeof *x), *y = calloc((size_t)frames * dim, sizeof *y);
    char path[160];
    snprintf(path, sizeof path, "%s/halves.h5", fx->dir);
    T_CHECK(x && y, "memory");
    if (!x || !y)
        goto out;
    long k = 0;
    for (uint32_t v = 0; v < 65536; v++)
        if ((v & 0x7c00) != 0x7c00)
            x[k++] = ds_half_f32_from_f16((uint16_t)v);
    ds_dataset_writer *w;
    ds_dataset *d;
    const uint8_t label = 1;
    T_OK(ds_dataset_writer_create(path, &fx->d->feat, DS_F16, &w));
    T_OK(ds_dataset_writer_add(w, "halves", "a", &label, 1, x, frames));
    T_OK(ds_dataset_writer_close(w));
    T_OK(ds_dataset_open(path, &d));
    T_OK(ds_dataset_read(d, 0, y));
    long bad = 0;
    for (long m = 0; m < k; m++) {
        uint32_t a, b;
        memcpy(&a, &x[m], sizeof a);
        memcpy(&b, &y[m], sizeof b);
        bad += a != b;   /* bits: -0 and +0 apart */
    }
    const char *isa = getenv("DSTRAIN_CPU_ISA");
    T_CHECK(bad == 0, "%ld of %ld float16 values widened wrongly (DSTRAIN_CPU_ISA=%s)", bad, k,
            isa ? isa : "unset");
    ds_dataset_close(d);
out:
    free(x);
    free(y);
    return 0;
}

/* ds_dataset_read_raw's three ways (one union read of neighbours, one read
 * per utterance when spread out, in idx order when two overlap) each give
 * every utterance as ds_dataset_read does. */
static void check_batched_read(const fixture *fx)
{
    static const long sets[][4] = {{5, 6, 7, 8}, {8, 6, 7, 5}, {40, 2, 20, 59}, {3, 9, 3, 4}};
    const int dim = fx->d->n_features;
    uint16_t *raw = malloc(sizeof *raw * 4 * MAX_T * (size_t)dim);    /* [4 * MAX_T][dim] */
    float *x = malloc(sizeof *x * MAX_T * (size_t)dim), *y = malloc(sizeof *y * MAX_T * (size_t)dim);
    T_CHECK(raw && x && y, "memory");
    for (size_t s = 0; raw && x && y && s < sizeof sets / sizeof sets[0]; s++) {
        size_t row[4];
        T_CHECK(ds_dataset_read_raw(fx->d, sets[s], 4, raw, row) == DS_OK, "set %zu: %s", s,
                ds_status_last_error());
        for (int j = 0; j < 4; j++) {
            const long i = sets[s][j];
            T_CHECK(ds_dataset_widen(fx->d, i, raw + row[j] * dim, x) == DS_OK
                    && ds_dataset_read(fx->d, i, y) == DS_OK
                    && memcmp(x, y, sizeof *x * (size_t)fx->d->frames[i] * dim) == 0,
                    "set %zu: utterance %ld read in a batch differs from ds_dataset_read", s, i);
        }
    }
    free(raw);
    free(x);
    free(y);
}

int main(void)
{
    static fixture fx;
    T_OK(fixture_open(&fx));
    check_same_batches(&fx, cfg_of(&fx, 1, 2), "an epoch", 9);
    ds_loader_cfg resume = cfg_of(&fx, 1, 2);
    resume.first_batch = 5;
    check_same_batches(&fx, resume, "a resume at global batch 5", 4);
    check_failure(&fx);
    check_batched_read(&fx);
    check_widening(&fx);
    ds_sampler_destroy(fx.s);
    ds_dataset_close(fx.d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fx.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fx.dir);
    return t_finish(__FILE__);
}
