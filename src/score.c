/* score.c - greedy decoding of a batch and its error counts; see score.h. */
#include "score.h"

#include <stdlib.h>

#include "alphabet.h"
#include "decode.h"

struct ds_score_batch {
    int *best;           /* [T'][N] best class per frame */
    int *labels;         /* [T'] decoded */
    char *ref, *hyp;     /* texts */
    int max_text;
};

ds_status ds_score_batch_create(const ds_model_cfg *cfg, const ds_model_limits *lim, ds_score_batch **out)
{
    if (cfg->n_classes != DS_ALPHABET_SIZE)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "scoring needs the %d-symbol alphabet, %s has %d classes",
                       DS_ALPHABET_SIZE, cfg->name, cfg->n_classes);
    ds_score_batch *s = calloc(1, sizeof *s);
    const int t = ds_model_config_out_frames(cfg, lim->frames);
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "scorer");
    s->max_text = (t > lim->label_len ? t : lim->label_len) + 1;
    s->best = malloc((size_t)t * lim->batch * sizeof *s->best);
    s->labels = malloc((size_t)s->max_text * sizeof *s->labels);
    s->ref = malloc((size_t)s->max_text + 1);
    s->hyp = malloc((size_t)s->max_text + 1);
    if (!s->best || !s->labels || !s->ref || !s->hyp) {
        ds_score_batch_destroy(s);
        return DS_FAIL(DS_ERR_MEM, "scorer buffers");
    }
    *out = s;
    return DS_OK;
}

void ds_score_batch_destroy(ds_score_batch *s)
{
    if (!s)
        return;
    free(s->best);
    free(s->labels);
    free(s->ref);
    free(s->hyp);
    free(s);
}

ds_status ds_score_batch_add(ds_score_batch *s, ds_model *m, const ds_batch *b, ds_score *acc)
{
    const int *len = ds_model_out_lengths(m);
    DS_TRY(ds_model_best_path(m, s->best));   /* argmax on the backend: no logits copied */
    for (int i = 0; i < b->n; i++) {
        int n = ds_decode_collapse(s->best + i, len[i], b->n, DS_BLANK, s->labels);
        ds_alphabet_labels_to_text(s->labels, n, s->hyp);
        ds_alphabet_labels_to_text(b->labels + b->label_off[i], b->label_len[i], s->ref);
        int chars, words;
        int ce = ds_decode_char_edits(s->ref, s->hyp, &chars);
        int we = ds_decode_word_edits(s->ref, s->hyp, &words);
        if (ce < 0 || we < 0)
            return DS_FAIL(DS_ERR_MEM, "edit distance");
        acc->char_edits += ce;
        acc->chars += chars;
        acc->word_edits += we;
        acc->words += words;
        acc->utterances++;
    }
    return DS_OK;
}
