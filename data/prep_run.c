/* prep_run.c - features of a range of utterances into one feature file.
 * Utterances are processed in chunks: the threads compute a chunk's
 * features in parallel, then the main thread writes them in order, so the
 * file does not depend on the number of threads. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alphabet.h"
#include "audio.h"
#include "prep.h"

#define CHUNK_PER_THREAD 16
#define MAX_REPORTED 10

typedef enum { R_OK, R_BAD_AUDIO, R_BAD_TEXT, R_NON_FINITE, R_FATAL } outcome;

typedef struct {
    outcome what;
    char *text;             /* normalised transcript */
    uint8_t *labels;        /* [n_labels] */
    int n_labels;
    float *features;        /* [frames][dim] */
    int frames;
    double seconds;
    char msg[600];
} result;

typedef struct {
    const ds_prep_item *items;   /* the chunk */
    result *res;
    long n;
    int index, stride;           /* this worker takes items index, index+stride, ... */
    const ds_prep_opts *o;
    ds_featurizer *fz;
    ds_transcript_stats unknown;
} worker;

static void fail_with(result *r, outcome what)
{
    r->what = what;
    snprintf(r->msg, sizeof r->msg, "%s", ds_status_last_error());
    ds_status_clear_error();
}

static void labels_of(result *r)
{
    int n = (int)strlen(r->text);
    int *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    r->labels = malloc((size_t)(n ? n : 1));
    if (!tmp || !r->labels) {
        free(tmp);
        r->what = R_FATAL;
        snprintf(r->msg, sizeof r->msg, "out of memory for labels");
        return;
    }
    r->n_labels = ds_alphabet_text_to_labels(r->text, tmp, n);
    for (int i = 0; i < r->n_labels; i++)
        r->labels[i] = (uint8_t)tmp[i];
    free(tmp);
}

static void features_of(worker *w, const ds_prep_item *it, result *r)
{
    float *audio = NULL;
    long n = 0;
    if (ds_audio_read_max(it->audio, w->o->feat.sample_rate, w->o->max_duration_s, &audio, &n) !=
        DS_OK)
        return fail_with(r, R_BAD_AUDIO);
    const int dim = ds_feature_dim(&w->o->feat);
    r->frames = (int)ds_feature_frames(&w->o->feat, n);
    r->seconds = (double)n / w->o->feat.sample_rate;
    r->features = malloc((size_t)r->frames * dim * sizeof *r->features);
    if (!r->features || ds_featurizer_run(w->fz, audio, n, r->features) != DS_OK) {
        free(audio);
        return fail_with(r, R_BAD_AUDIO);
    }
    free(audio);
    for (size_t k = 0; k < (size_t)r->frames * dim; k++)
        if (!isfinite(r->features[k])) {
            r->what = R_NON_FINITE;
            snprintf(r->msg, sizeof r->msg, "%s: NaN or infinite feature at frame %zu", it->audio,
                     k / dim);
            return;
        }
}

static void process(worker *w, const ds_prep_item *it, result *r)
{
    int skip = 0;
    r->text = strdup(it->text);
    if (!r->text) {
        r->what = R_FATAL;
        snprintf(r->msg, sizeof r->msg, "out of memory");
        return;
    }
    if (ds_transcript_normalize(r->text, w->o->on_unknown, it->id, &w->unknown, &skip) != DS_OK)
        return fail_with(r, R_FATAL);
    if (skip || !*r->text) {
        r->what = R_BAD_TEXT;
        snprintf(r->msg, sizeof r->msg, "%s: transcript %s", it->id,
                 skip ? "has characters outside the alphabet" : "is empty after normalisation");
        return;
    }
    labels_of(r);
    if (r->what == R_OK)
        features_of(w, it, r);
}

static void *work(void *arg)
{
    worker *w = arg;
    for (long i = w->index; i < w->n; i += w->stride)
        process(w, &w->items[i], &w->res[i]);
    return NULL;
}

static void free_result(result *r)
{
    free(r->text);
    free(r->labels);
    free(r->features);
    memset(r, 0, sizeof *r);
}

/* Writes or counts one result; R_FATAL ends the run. */
static ds_status take(ds_dataset_writer *wr, const ds_prep_item *it, result *r, ds_prep_stats *st)
{
    long *counter = NULL;
    switch (r->what) {
    case R_OK:
        st->written++;
        st->seconds += r->seconds;
        return ds_dataset_writer_add(wr, it->id, r->text, r->labels, r->n_labels, r->features, r->frames);
    case R_FATAL: return DS_FAIL(DS_ERR_ARG, "%s", r->msg);
    case R_BAD_AUDIO: counter = &st->bad_audio; break;
    case R_BAD_TEXT: counter = &st->bad_text; break;
    case R_NON_FINITE: counter = &st->non_finite; break;
    }
    if ((*counter)++ < MAX_REPORTED)
        fprintf(stderr, "prep: skipped %s: %s\n", it->id, r->msg);
    return DS_OK;
}

static void progress(const ds_prep_opts *o, long done, long total, double seconds, double t0)
{
    if (o->progress < 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double wall = ts.tv_sec + ts.tv_nsec / 1e9 - t0;
    if (o->progress > 0) {
        int bar = total ? (int)(30 * done / total) : 30;
        fprintf(stderr, "\rprep: [%-30.*s] %ld/%ld utterances, %.2f h of audio, %.0f s", bar,
                "##############################", done, total, seconds / 3600, wall);
        if (done == total)
            fputc('\n', stderr);
    } else if (total && (done == total || (10 * done / total) != (10 * (done - 1) / total))) {
        fprintf(stderr, "prep: %ld/%ld utterances (%ld%%), %.2f h of audio, %.0f s\n", done, total,
                100 * done / total, seconds / 3600, wall);
    }
}

static ds_status run_chunk(worker *ws, int threads, const ds_prep_item *items, result *res, long n)
{
    pthread_t tid[threads];
    for (int t = 0; t < threads; t++) {
        ws[t].items = items;
        ws[t].res = res;
        ws[t].n = n;
        if (pthread_create(&tid[t], NULL, work, &ws[t]) != 0) {
            for (int k = 0; k < t; k++)
                pthread_join(tid[k], NULL);
            return DS_FAIL(DS_ERR_MEM, "prep: cannot start worker thread %d", t);
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    return DS_OK;
}

ds_status ds_prep_run(const ds_prep_list *l, long begin, long end, const char *out,
                      const ds_prep_opts *o, ds_prep_stats *st)
{
    const int threads = o->threads > 0 ? o->threads : 1;
    const long chunk = (long)threads * CHUNK_PER_THREAD;
    memset(st, 0, sizeof *st);
    worker ws[threads];
    memset(ws, 0, sizeof ws);
    result *res = calloc((size_t)chunk, sizeof *res);
    ds_dataset_writer *wr = NULL;
    ds_status s = res ? DS_OK : DS_FAIL(DS_ERR_MEM, "prep results");
    for (int t = 0; s == DS_OK && t < threads; t++) {
        ws[t] = (worker){.index = t, .stride = threads, .o = o};
        s = ds_featurizer_create(&o->feat, &ws[t].fz);
    }
    if (s == DS_OK)
        s = ds_dataset_writer_create(out, &o->feat, o->dtype, &wr);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const double t0 = ts.tv_sec + ts.tv_nsec / 1e9;
    for (long at = begin; s == DS_OK && at < end; at += chunk) {
        long n = end - at < chunk ? end - at : chunk;
        s = run_chunk(ws, threads, &l->items[at], res, n);
        for (long i = 0; i < n; i++) {
            if (s == DS_OK)
                s = take(wr, &l->items[at + i], &res[i], st);
            free_result(&res[i]);
        }
        progress(o, at + n - begin, end - begin, st->seconds, t0);
    }
    for (int t = 0; t < threads; t++) {
        ds_transcript_stats_merge(&st->unknown, &ws[t].unknown);
        if (ws[t].fz)
            ds_featurizer_destroy(ws[t].fz);
    }
    if (s == DS_OK)
        s = ds_dataset_writer_close(wr);
    else if (wr)
        ds_dataset_writer_abort(wr);
    free(res);
    return s;
}
