/* batch.c - host batch buffers. */
#include "batch.h"

#include <stdlib.h>
#include <string.h>

ds_status ds_batch_alloc(ds_batch *b, int cap_n, int cap_t, int f, int cap_labels)
{
    memset(b, 0, sizeof *b);
    b->features = calloc((size_t)cap_n * cap_t * f, sizeof *b->features);
    b->lengths = calloc((size_t)cap_n, sizeof(int));
    b->labels = calloc((size_t)cap_labels + 1, sizeof(int));
    b->label_off = calloc((size_t)cap_n, sizeof(int));
    b->label_len = calloc((size_t)cap_n, sizeof(int));
    if (!b->features || !b->lengths || !b->labels || !b->label_off || !b->label_len) {
        ds_batch_free(b);
        return DS_FAIL(DS_ERR_MEM, "batch of %d x %d x %d", cap_n, cap_t, f);
    }
    b->cap_n = cap_n;
    b->cap_t = cap_t;
    b->cap_labels = cap_labels;
    b->f = f;
    return DS_OK;
}

ds_status ds_batch_alloc_global(ds_batch *b, int cap)
{
    free(b->global_lengths);
    b->global_lengths = calloc((size_t)(cap > 0 ? cap : 1), sizeof(int));
    b->cap_global = b->global_lengths ? cap : 0;
    return b->global_lengths ? DS_OK : DS_FAIL(DS_ERR_MEM, "global batch of %d lengths", cap);
}

void ds_batch_free(ds_batch *b)
{
    free(b->global_lengths);
    free(b->features);
    free(b->lengths);
    free(b->labels);
    free(b->label_off);
    free(b->label_len);
    memset(b, 0, sizeof *b);
}

int ds_batch_max_label(const ds_batch *b)
{
    int m = 0;
    for (int i = 0; i < b->n; i++)
        m = b->label_len[i] > m ? b->label_len[i] : m;
    return m;
}

ds_status ds_batch_slice(const ds_batch *src, int first, int n, ds_batch *dst)
{
    if (first < 0 || n < 0 || first + n > src->n || n > dst->cap_n || src->f != dst->f)
        return DS_FAIL(DS_ERR_ARG, "batch slice [%d, %d) of %d utterances", first, first + n, src->n);
    int t = 0, labels = 0;
    for (int i = first; i < first + n; i++) {
        t = src->lengths[i] > t ? src->lengths[i] : t;
        labels += src->label_len[i];
    }
    if (t > dst->cap_t || labels > dst->cap_labels)
        return DS_FAIL(DS_ERR_ARG, "batch slice of %d frames and %d labels exceeds its buffers", t, labels);
    dst->n = n;
    dst->t = t;
    memset(dst->features, 0, (size_t)n * t * dst->f * sizeof *dst->features);
    int off = 0;
    for (int i = 0; i < n; i++) {
        const int s = first + i;
        for (int k = 0; k < src->lengths[s]; k++)
            memcpy(&dst->features[((size_t)i * t + k) * dst->f],
                   &src->features[((size_t)s * src->t + k) * src->f], (size_t)src->f * sizeof(float));
        dst->lengths[i] = src->lengths[s];
        dst->label_off[i] = off;
        dst->label_len[i] = src->label_len[s];
        memcpy(&dst->labels[off], &src->labels[src->label_off[s]], (size_t)src->label_len[s] * sizeof(int));
        off += src->label_len[s];
    }
    return DS_OK;
}

int ds_batch_round_frames(int t, int multiple)
{
    return multiple < 2 ? t : (t + multiple - 1) / multiple * multiple;
}

ds_status ds_batch_pad_to(ds_batch *b, int t)
{
    if (t < b->t || t > b->cap_t)
        return DS_FAIL(DS_ERR_ARG, "batch of %d frames padded to %d (room for %d)", b->t, t, b->cap_t);
    if (t == b->t)
        return DS_OK;
    const size_t f = (size_t)b->f, old = (size_t)b->t;
    /* the last utterance first: its new rows lie past every older one's */
    for (int i = b->n - 1; i >= 0; i--) {
        float *to = b->features + (size_t)i * t * f;
        memmove(to, b->features + (size_t)i * old * f, old * f * sizeof *to);
        memset(to + old * f, 0, ((size_t)t - old) * f * sizeof *to);
    }
    b->t = t;
    return DS_OK;
}
