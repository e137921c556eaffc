/* dataset_merge.c - ds_dataset_merge: each part is validated by
 * ds_dataset_open, copied utterance by utterance (offsets are rebased as the
 * writer appends), and /stats is recomputed from the parts' /stats/count,
 * /stats/sum and /stats/sumsq, never from the stored (possibly float16)
 * features. */
#include "dataset.h"

#include <stdlib.h>

#include "dataset_impl.h"
#include "h5_io.h"

/* b's feature settings and dtype are a's. */
static ds_status check_compatible(const ds_dataset *a, const ds_dataset *b)
{
    DS_TRY(ds_feature_check_same(a->path, &a->feat, b->path, &b->feat));
    if (a->feature_dtype != b->feature_dtype)
        return DS_FAIL(DS_ERR_ARG, "%s: features are %s but %s's are %s", b->path,
                       ds_dtype_name(b->feature_dtype), a->path, ds_dtype_name(a->feature_dtype));
    return DS_OK;
}

/* Adds part d's /stats sums to w, after checking they cover its frames. */
static ds_status add_part_sums(ds_dataset_writer *w, const ds_dataset *d)
{
    const hid_t f = ds_dataset_file(d);
    const size_t nf = (size_t)d->n_features;
    int64_t count, frames = 0;
    for (long i = 0; i < d->n; i++)
        frames += d->frames[i];
    double *s = malloc(2 * nf * sizeof *s);   /* sum [nf], then sumsq [nf] */
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "%s: stats of %zu features", d->path, nf);
    ds_status st;
    DS_TRY_GOTO(st, ds_h5_read(f, "stats/count", DS_I64, 1, &count), free_sums);
    DS_TRY_GOTO(st, ds_h5_read(f, "stats/sum", DS_F64, nf, s), free_sums);
    DS_TRY_GOTO(st, ds_h5_read(f, "stats/sumsq", DS_F64, nf, s + nf), free_sums);
    if (count != frames) {
        st = DS_FAIL(DS_ERR_IO, "%s: stats/count is %lld but the utterances hold %lld frames",
                     d->path, (long long)count, (long long)frames);
        goto free_sums;
    }
    ds_dataset_writer_add_sums(w, count, s, s + nf);
free_sums:
    free(s);
    return st;
}

static ds_status append_part(ds_dataset_writer *w, ds_dataset *d)
{
    int32_t longest = 1;
    for (long i = 0; i < d->n; i++)
        longest = d->frames[i] > longest ? d->frames[i] : longest;
    float *x = malloc((size_t)longest * (size_t)d->n_features * sizeof *x);   /* [longest][nf] */
    if (!x)
        return DS_FAIL(DS_ERR_MEM, "%s: %d frames", d->path, longest);
    ds_status st = DS_OK;
    for (long i = 0; i < d->n && st == DS_OK; i++) {
        st = ds_dataset_read(d, i, x);
        if (st == DS_OK)
            st = ds_dataset_writer_append(w, d->ids[i], d->transcripts[i], d->labels + d->label_offset[i],
                                          d->label_length[i], x, d->frames[i]);
    }
    free(x);
    return st == DS_OK ? add_part_sums(w, d) : st;
}

/* Appends part k (compatible with first) to w. */
static ds_status merge_part(ds_dataset_writer *w, const ds_dataset *first, const char *path)
{
    ds_dataset *d;
    DS_TRY(ds_dataset_open(path, &d));
    ds_status st = check_compatible(first, d);
    if (st == DS_OK)
        st = append_part(w, d);
    ds_dataset_close(d);
    return st;
}

ds_status ds_dataset_merge(const char *const *parts, int n_parts, const char *out)
{
    if (n_parts < 1)
        return DS_FAIL(DS_ERR_ARG, "%s: nothing to merge", out);
    ds_dataset *first;
    ds_dataset_writer *w;
    DS_TRY(ds_dataset_open(parts[0], &first));
    ds_status st;
    DS_TRY_GOTO(st, ds_dataset_writer_create(out, &first->feat, first->feature_dtype, &w), close_first);
    DS_TRY_GOTO(st, append_part(w, first), abort_writer);
    for (int k = 1; k < n_parts; k++)
        DS_TRY_GOTO(st, merge_part(w, first, parts[k]), abort_writer);
    ds_dataset_close(first);
    return ds_dataset_writer_close(w);
abort_writer:
    ds_dataset_writer_abort(w);
close_first:
    ds_dataset_close(first);
    return st;
}
