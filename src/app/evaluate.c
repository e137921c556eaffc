/* evaluate.c - see evaluate.h. */
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
    ds_scorer *sc = NULL;
    double loss_sum = 0;
    ds_status st = ds_sampler_create(keep, frames, n, batch, 1, 0, &s);
    if (st == DS_OK)
        st = ds_scorer_create(ds_model_config(m), &lim, &sc);
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
            st = ds_scorer_add(sc, m, b, &out->score);
        loss_sum += loss.loss * b->n;
        out->n_infinite += loss.n_infinite;
    }
    long finite = out->score.utterances - out->n_infinite;
    out->loss = finite > 0 ? loss_sum / finite : NAN;
    if (l)
        ds_loader_stop(l);
    ds_scorer_destroy(sc);
    ds_sampler_destroy(s);
    free(frames);
    return st;
}
