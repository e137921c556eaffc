/* score.h - greedy decoding of a batch and its error counts (WER, CER). */
#ifndef DS_SCORE_H
#define DS_SCORE_H

#include "batch.h"
#include "model.h"

typedef struct {
    long char_edits, chars, word_edits, words;
    long utterances;
} ds_score;

typedef struct ds_score_batch ds_score_batch;

/* Buffers for batches of up to lim (allocated once, outside the step). */
ds_status ds_score_batch_create(const ds_model_cfg *cfg, const ds_model_limits *lim, ds_score_batch **out);
void ds_score_batch_destroy(ds_score_batch *s);
/* Decodes the logits of m's last forward and adds the batch's counts to acc. */
ds_status ds_score_batch_add(ds_score_batch *s, ds_model *m, const ds_batch *b, ds_score *acc);

static inline double ds_score_cer(const ds_score *s) { return s->chars ? (double)s->char_edits / s->chars : 0; }
static inline double ds_score_wer(const ds_score *s) { return s->words ? (double)s->word_edits / s->words : 0; }

#endif
