/* evaluate.c - loss, WER and CER of a model over a feature file; see
 * evaluate.h. */
#include "evaluate.h"

#include <math.h>
#include <stdlib.h>

ds_status ds_evaluate(ds_model *m, ds_dataset *d, const long *keep, long n, int batch,
                      ds_norm norm, ds_eval_result *out)
{
    *out = (ds_eval_result){0};
    int *frames = malloc((size_t)(n ? n : 1) * sizeof *frames);
    if (!frames)
        return DS_FAIL(DS_ERR_MEM, "eval index");
    int max_frames = 1, max_labels = 1;
    for (long i = 0; i < n; i++) {
        frames[i] = d->frames[keep[i]];
        max_frames = frames[i] > max_frames ? frames[i] : max_frames;
        max_labels = d->label_length[keep[i]] > max_labels ? d->label_length[keep[i]] : max_labels;
    }
    const ds_model_limits lim = {batch, max_frames, max_labels};
    ds_sampler *s = NULL;
    ds_loader *l = NULL;
    ds_score_batch *sc = NULL;
    double loss_sum = 0;
    ds_status st = ds_sampler_create(keep, frames, n, batch, 1, 0, &s);
    if (st == DS_OK)
        st = ds_score_batch_create(ds_model_config(m), &lim, &sc);
    ds_loader_cfg lc = {.data = d, .sampler = s, .batch = batch, .max_frames = max_frames,
                        .max_labels = max_labels, .norm = norm, .depth = 2};
    if (st == DS_OK)
        st = ds_loader_start(&lc, &l);
    const ds_batch *b = NULL;
    while (st == DS_OK && (st = ds_loader_next(l, &b)) == DS_OK && b) {
        ds_loss loss = {0};
        st = ds_model_set_batch(m, b);
        if (st == DS_OK)
            st = ds_model_forward(m, 0);
        if (st == DS_OK)
            st = ds_model_loss(m, 0);
        if (st == DS_OK)
            st = ds_model_read_loss(m, &loss, NULL);
        if (st == DS_OK)
            st = ds_score_batch_add(sc, m, b, &out->score);
        loss_sum += loss.loss * b->n;
        out->n_infinite += loss.n_infinite;
    }
    long finite = out->score.utterances - out->n_infinite;
    out->loss = finite > 0 ? loss_sum / finite : NAN;
    if (l)
        ds_loader_stop(l);
    ds_score_batch_destroy(sc);
    ds_sampler_destroy(s);
    free(frames);
    return st;
}

/* The utterances of the single-rank evaluation's batches k = rank, rank +
 * size, ...: whole batches, so each is formed exactly as one rank forms it
 * (ds_evaluate sorts them by length and cuts them by batch again: every
 * batch but the longest, which comes last, is full). mine [n]; *m_n. */
static ds_status my_batches(const ds_dataset *d, const long *keep, long n, int batch, int rank,
                            int size, long *mine, long *m_n)
{
    *m_n = 0;
    int *frames = malloc((size_t)(n ? n : 1) * sizeof *frames);
    if (!frames)
        return DS_FAIL(DS_ERR_MEM, "eval index");
    for (long i = 0; i < n; i++)
        frames[i] = d->frames[keep[i]];
    ds_sampler *s = NULL;
    ds_status st = n > 0 ? ds_sampler_create(keep, frames, n, batch, 1, 0, &s) : DS_OK;
    for (long k = rank; st == DS_OK && s && k < ds_sampler_batches(s); k += size) {
        const int got = ds_sampler_take(s, 0, k, 0, mine + *m_n);
        if (got < 0)
            st = DS_FAIL(DS_ERR_ARG, "eval: batch %ld of the validation set", k);
        else
            *m_n += got;
    }
    ds_sampler_destroy(s);
    free(frames);
    return st;
}

ds_status ds_evaluate_ranks(ds_model *m, ds_dataset *d, const long *keep, long n, int batch,
                            ds_norm norm, ds_world *w, ds_eval_result *out)
{
    if (!w || w->size <= 1)
        return ds_evaluate(m, d, keep, n, batch, norm, out);
    *out = (ds_eval_result){0};
    long *mine = malloc((size_t)(n ? n : 1) * sizeof *mine), m_n = 0;
    ds_eval_result part = {0};
    ds_status st = mine ? my_batches(d, keep, n, batch, w->rank, w->size, mine, &m_n)
                        : DS_FAIL(DS_ERR_MEM, "eval shard");
    if (st == DS_OK && m_n > 0)
        st = ds_evaluate(m, d, mine, m_n, batch, norm, &part);
    free(mine);
    /* every rank reaches the sums, a failed one too: the others must not wait */
    const long finite = part.score.utterances - part.n_infinite;
    long counts[7] = {part.score.char_edits, part.score.chars, part.score.word_edits,
                      part.score.words, part.score.utterances, part.n_infinite, st != DS_OK};
    double loss_sum = finite > 0 && isfinite(part.loss) ? part.loss * (double)finite : 0;
    ds_status sum = ds_world_allreduce_sum(w, counts, 7, MPI_LONG, "the validation counts");
    if (sum == DS_OK)
        sum = ds_world_allreduce_sum(w, &loss_sum, 1, MPI_DOUBLE, "the validation loss");
    if (st != DS_OK)
        return st;
    DS_TRY(sum);
    if (counts[6])
        return DS_FAIL(DS_ERR_IO, "validation failed on %ld other rank(s) (see their message)",
                       counts[6]);
    out->score = (ds_score){.char_edits = counts[0], .chars = counts[1], .word_edits = counts[2],
                            .words = counts[3], .utterances = counts[4]};
    out->n_infinite = counts[5];
    const long all_finite = counts[4] - counts[5];
    out->loss = all_finite > 0 ? loss_sum / (double)all_finite : NAN;
    return DS_OK;
}
