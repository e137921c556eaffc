/* evaluate.h - loss, WER and CER of a model over a feature file (greedy
 * decoding, BatchNorm in eval mode). */
#ifndef DS_EVALUATE_H
#define DS_EVALUATE_H

#include "dataset.h"
#include "loader.h"
#include "model.h"
#include "score.h"

typedef struct {
    ds_score score;
    double loss;          /* mean CTC loss per utterance (finite ones) */
    long n_infinite;
} ds_eval_result;

/* Utterances keep [n] of d, in batches of at most batch (the model's limit). */
ds_status ds_evaluate(ds_model *m, ds_dataset *d, const long *keep, long n, int batch,
                      ds_norm norm, ds_eval_result *out);

#endif
