/* batch.h - one rank's batch on the host: padded features, lengths, labels. */
#ifndef DS_BATCH_H
#define DS_BATCH_H

#include "status.h"

typedef struct {
    int n, t, f;            /* utterances, padded frames, features per frame */
    float *features;        /* [n][t][f], zero past each utterance's length */
    int *lengths;           /* [n] frames */
    int *labels;            /* all utterances' labels, concatenated */
    int *label_off;         /* [n] first label of utterance i */
    int *label_len;         /* [n] */
    /* data parallelism: the global batch this one is a rank's share of, the
     * same on every rank; n_global 0: the batch is the whole global batch */
    int n_global;
    int *global_lengths;    /* [n_global] frames of every utterance, all ranks */
    int cap_n, cap_t, cap_labels, cap_global;
} ds_batch;

/* Buffers for up to cap_n utterances of cap_t frames of f features and
 * cap_labels labels in all. */
ds_status ds_batch_alloc(ds_batch *b, int cap_n, int cap_t, int f, int cap_labels);
/* Room for the lengths of a global batch of up to cap utterances. */
ds_status ds_batch_alloc_global(ds_batch *b, int cap);
void ds_batch_free(ds_batch *b);
/* dst = utterances [first, first + n) of src (dst has room for them):
 * a rank's share of a global batch, padded to the share's longest. */
ds_status ds_batch_slice(const ds_batch *src, int first, int n, ds_batch *dst);
/* Largest label_len of the batch. */
int ds_batch_max_label(const ds_batch *b);

/* Bucket rounding (--bucket-frames): t rounded up to a multiple of
 * `multiple` frames (t itself when multiple < 2). */
int ds_batch_round_frames(int t, int multiple);
/* b padded in place to t frames (t >= b->t, t <= b->cap_t): each
 * utterance's frames moved to the wider rows, zeros past its length. */
ds_status ds_batch_pad_to(ds_batch *b, int t);

#endif
