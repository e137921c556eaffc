/* evaluate.h - loss, WER and CER of a model over a feature file (greedy
 * decoding, BatchNorm in eval mode). */
#ifndef DS_EVALUATE_H
#define DS_EVALUATE_H

#include "dataset.h"
#include "loader.h"
#include "model.h"
#include "score.h"
#include "world.h"

typedef struct {
    ds_score score;
    double loss;          /* mean CTC loss per utterance (finite ones) */
    long n_infinite;
} ds_eval_result;

/* Utterances keep [n] of d, in batches of at most batch (the model's limit). */
ds_status ds_evaluate(ds_model *m, ds_dataset *d, const long *keep, long n, int batch,
                      ds_norm norm, ds_eval_result *out);

/* ds_evaluate shared across the ranks of w (NULL or one rank: the same):
 * the batches one rank would form are dealt out whole, batch k to rank
 * k mod size, and the counts summed, so every rank gets exactly the
 * single-rank WER and CER (the loss to rounding: its sum's order differs).
 * Every rank must call it, with the same model, data and keep. */
ds_status ds_evaluate_ranks(ds_model *m, ds_dataset *d, const long *keep, long n, int batch,
                            ds_norm norm, ds_world *w, ds_eval_result *out);

#endif
