/* dataset_write.c - ds_dataset_writer: frames go to the chunked /features as
 * they come (float16 converted here, see src/half.h); the index,
 * labels, ids and transcripts grow in memory and are written at close with
 * the statistics and the attributes. */
#include "dataset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alphabet.h"
#include "dataset_impl.h"
#include "file.h"
#include "h5_io.h"
#include "h5_seal.h"
#include "half.h"

#define F16_MAX 65504.0f
#define PATH_CAP 1024

struct ds_dataset_writer {
    char path[PATH_CAP], tmp[PATH_CAP + 8];
    ds_feature_cfg feat;
    ds_dtype dtype;
    int n_features;
    hid_t file, features, file_type;
    int broken;                    /* a write to the file failed: close refuses */
    long n, cap;                   /* utterances, capacity of the index arrays */
    int64_t total_frames, total_labels, labels_cap;
    int64_t *frame_offset;         /* [cap] */
    int32_t *frames;               /* [cap] */
    int64_t *label_offset;         /* [cap] */
    int32_t *label_length;         /* [cap] */
    char **ids, **transcripts;     /* [cap] */
    uint8_t *labels;               /* [labels_cap] */
    int64_t stat_count;            /* frames summed into sum, sumsq */
    double *sum, *sumsq;           /* [n_features] */
    uint16_t *stage;               /* [stage_cap]: float16 rows on their way to the file */
    size_t stage_cap;
    float *zeros;                  /* [(DS_DATASET_ALIGN_ROWS - 1) * n_features]: padding rows */
};

/* ---- create / abort ---- */

static void release(ds_dataset_writer *w)
{
    if (w->features >= 0)
        H5Dclose(w->features);
    if (w->file_type >= 0)
        H5Tclose(w->file_type);
    if (w->file >= 0)
        H5Fclose(w->file);
    for (long i = 0; i < w->n; i++) {
        free(w->ids[i]);
        free(w->transcripts[i]);
    }
    free(w->frame_offset);
    free(w->frames);
    free(w->label_offset);
    free(w->label_length);
    free(w->ids);
    free(w->transcripts);
    free(w->labels);
    free(w->sum);
    free(w->sumsq);
    free(w->stage);
    free(w->zeros);
    free(w);
}

static ds_status check_create_args(const char *path, const ds_feature_cfg *feat, ds_dtype dt)
{
    if (dt != DS_F16 && dt != DS_F32)
        return DS_FAIL(DS_ERR_ARG, "%s: features are stored as float16 or float32, not %s", path,
                       ds_dtype_name(dt));
    if (ds_feature_dim(feat) < 1 || ds_feature_n_fft(feat) < 1)
        return DS_FAIL(DS_ERR_ARG, "%s: feature settings give %d features, n_fft %d", path,
                       ds_feature_dim(feat), ds_feature_n_fft(feat));
    if (strlen(path) >= PATH_CAP)
        return DS_FAIL(DS_ERR_ARG, "%s: path too long", path);
    return DS_OK;
}

static ds_status open_file(ds_dataset_writer *w)
{
    DS_TRY(ds_h5_create_tmp(w->path, "feature file", w->tmp, sizeof w->tmp, &w->file));
    if (w->dtype == DS_F16)
        DS_TRY(ds_h5_half_type(&w->file_type));
    else if ((w->file_type = H5Tcopy(H5T_IEEE_F32LE)) < 0)
        return DS_FAIL(DS_ERR_IO, "%s: float32 type", w->tmp);
    return ds_h5_create_rows(w->file, "features", w->file_type, (hsize_t)w->n_features,
                             DS_DATASET_CHUNK_ROWS, DS_DATASET_CHUNK_CACHE, &w->features);
}

ds_status ds_dataset_writer_create(const char *path, const ds_feature_cfg *feat, ds_dtype feature_dtype,
                                   ds_dataset_writer **out)
{
    *out = NULL;
    DS_TRY(check_create_args(path, feat, feature_dtype));
    ds_dataset_writer *w = calloc(1, sizeof *w);
    if (!w)
        return DS_FAIL(DS_ERR_MEM, "%s: writer", path);
    w->file = w->features = w->file_type = -1;
    snprintf(w->path, sizeof w->path, "%s", path);
    w->feat = *feat;
    w->dtype = feature_dtype;
    w->n_features = ds_feature_dim(feat);
    w->sum = calloc((size_t)w->n_features, sizeof *w->sum);
    w->sumsq = calloc((size_t)w->n_features, sizeof *w->sumsq);
    w->zeros = calloc((size_t)(DS_DATASET_ALIGN_ROWS - 1) * w->n_features, sizeof *w->zeros);
    ds_status st = DS_OK;
    if (!w->sum || !w->sumsq || !w->zeros) {
        st = DS_FAIL(DS_ERR_MEM, "%s: statistics of %d features", path, w->n_features);
        goto free_writer;
    }
    /* a tmp file there already may be another writer's (its lock fails our create) */
    const int existed = access(w->tmp, F_OK) == 0;
    DS_TRY_GOTO(st, open_file(w), remove_tmp);
    *out = w;
    return DS_OK;
remove_tmp:   /* a create that failed writing (full disk) leaves the file it made */
    if (w->file >= 0 || !existed)
        unlink(w->tmp);
free_writer:
    release(w);
    return st;
}

void ds_dataset_writer_abort(ds_dataset_writer *w)
{
    if (!w)
        return;
    char tmp[sizeof w->tmp];
    memcpy(tmp, w->tmp, sizeof tmp);
    release(w);
    unlink(tmp);
}

long ds_dataset_writer_count(const ds_dataset_writer *w) { return w->n; }

/* ---- appending ---- */

/* Room for one more utterance and n_labels more labels. */
static ds_status grow(ds_dataset_writer *w, int n_labels)
{
    if (w->n == w->cap) {
        const size_t cap = w->cap ? 2 * (size_t)w->cap : 1024;
        int64_t *fo = realloc(w->frame_offset, cap * sizeof *fo);
        if (fo)
            w->frame_offset = fo;
        int32_t *fr = realloc(w->frames, cap * sizeof *fr);
        if (fr)
            w->frames = fr;
        int64_t *lo = realloc(w->label_offset, cap * sizeof *lo);
        if (lo)
            w->label_offset = lo;
        int32_t *ll = realloc(w->label_length, cap * sizeof *ll);
        if (ll)
            w->label_length = ll;
        char **ids = realloc(w->ids, cap * sizeof *ids);
        if (ids)
            w->ids = ids;
        char **texts = realloc(w->transcripts, cap * sizeof *texts);
        if (texts)
            w->transcripts = texts;
        if (!fo || !fr || !lo || !ll || !ids || !texts)
            return DS_FAIL(DS_ERR_MEM, "%s: index of %zu utterances", w->path, cap);
        w->cap = (long)cap;
    }
    if (w->total_labels + n_labels > w->labels_cap) {
        int64_t cap = w->labels_cap ? 2 * w->labels_cap : 65536;
        while (cap < w->total_labels + n_labels)
            cap *= 2;
        uint8_t *l = realloc(w->labels, (size_t)cap);
        if (!l)
            return DS_FAIL(DS_ERR_MEM, "%s: %lld labels", w->path, (long long)cap);
        w->labels = l;
        w->labels_cap = cap;
    }
    return DS_OK;
}

/* Appends features [frames][n_features] to /features, as float16 through
 * the staging buffer when the file stores float16. */
static ds_status append_rows(ds_dataset_writer *w, const float *features, int frames)
{
    const size_t count = (size_t)frames * (size_t)w->n_features;
    const void *rows = features;
    hid_t mem_type = H5T_NATIVE_FLOAT;
    if (w->dtype == DS_F16) {
        if (count > w->stage_cap) {
            uint16_t *p = realloc(w->stage, count * sizeof *p);
            if (!p)
                return DS_FAIL(DS_ERR_MEM, "%s: staging %zu values", w->path, count);
            w->stage = p;
            w->stage_cap = count;
        }
        ds_half_f16_from_f32_n(w->stage, features, count);
        rows = w->stage;
        mem_type = w->file_type;
    }
    ds_status st = ds_h5_append_rows(w->features, mem_type, (hsize_t)w->total_frames,
                                     (hsize_t)frames, (hsize_t)w->n_features, rows);
    if (st != DS_OK)
        w->broken = 1;
    return st;
}

/* Zero rows from total_frames up to the next multiple of DS_DATASET_ALIGN_ROWS,
 * so that the next utterance starts a chunk (dataset.h: chunk layout). They
 * are written, not left to the fill value, so the file says what it holds. */
static ds_status pad_to_chunk(ds_dataset_writer *w)
{
    const int64_t gap = (DS_DATASET_ALIGN_ROWS - w->total_frames % DS_DATASET_ALIGN_ROWS)
                        % DS_DATASET_ALIGN_ROWS;
    if (gap == 0)
        return DS_OK;
    DS_TRY(append_rows(w, w->zeros, (int)gap));   /* +0.0 in either dtype */
    w->total_frames += gap;
    return DS_OK;
}

ds_status ds_dataset_writer_append(ds_dataset_writer *w, const char *id, const char *transcript,
                                   const uint8_t *labels, int n_labels, const float *features, int frames)
{
    if (w->broken)
        return DS_FAIL(DS_ERR_IO, "%s: an earlier write failed", w->tmp);
    DS_TRY(grow(w, n_labels));
    char *id_copy = strdup(id), *text_copy = strdup(transcript ? transcript : "");
    ds_status st = DS_OK;
    if (!id_copy || !text_copy) {
        st = DS_FAIL(DS_ERR_MEM, "%s: utterance %s", w->path, id);
        goto free_strings;
    }
    DS_TRY_GOTO(st, pad_to_chunk(w), free_strings);
    DS_TRY_GOTO(st, append_rows(w, features, frames), free_strings);
    w->frame_offset[w->n] = w->total_frames;
    w->frames[w->n] = frames;
    w->label_offset[w->n] = w->total_labels;
    w->label_length[w->n] = n_labels;
    w->ids[w->n] = id_copy;
    w->transcripts[w->n] = text_copy;
    memcpy(w->labels + w->total_labels, labels, (size_t)n_labels);
    w->n++;
    w->total_frames += frames;
    w->total_labels += n_labels;
    return DS_OK;
free_strings:
    free(id_copy);
    free(text_copy);
    return st;
}

void ds_dataset_writer_add_sums(ds_dataset_writer *w, int64_t count, const double *sum, const double *sumsq)
{
    for (int j = 0; j < w->n_features; j++) {
        w->sum[j] += sum[j];
        w->sumsq[j] += sumsq[j];
    }
    w->stat_count += count;
}

/* labels [n_labels] in 1..28, features [frames][n_features] finite and in
 * range of the stored type. */
static ds_status check_utterance(const ds_dataset_writer *w, const char *id, const uint8_t *labels,
                                 int n_labels, const float *features, int frames)
{
    if (!id || !*id)
        return DS_FAIL(DS_ERR_ARG, "%s: utterance %ld has no id", w->path, w->n);
    if (frames < 1 || n_labels < 1)
        return DS_FAIL(DS_ERR_ARG, "%s: utterance %s has %d frames and %d labels (at least 1 each)",
                       w->path, id, frames, n_labels);
    for (int k = 0; k < n_labels; k++)
        if (labels[k] < 1 || labels[k] >= DS_ALPHABET_SIZE)
            return DS_FAIL(DS_ERR_ARG, "%s: utterance %s: label %d at position %d is outside 1..%d",
                           w->path, id, labels[k], k, DS_ALPHABET_SIZE - 1);
    const size_t count = (size_t)frames * (size_t)w->n_features;
    const float limit = w->dtype == DS_F16 ? F16_MAX : INFINITY;
    for (size_t k = 0; k < count; k++)
        if (!(fabsf(features[k]) <= limit))
            return DS_FAIL(DS_ERR_NUM, "%s: utterance %s: feature value %g at frame %zu, feature %zu "
                           "cannot be stored as %s", w->path, id, features[k],
                           k / (size_t)w->n_features, k % (size_t)w->n_features,
                           ds_dtype_name(w->dtype));
    return DS_OK;
}

ds_status ds_dataset_writer_add(ds_dataset_writer *w, const char *id, const char *transcript,
                                const uint8_t *labels, int n_labels, const float *features, int frames)
{
    DS_TRY(check_utterance(w, id, labels, n_labels, features, frames));
    DS_TRY(ds_dataset_writer_append(w, id, transcript, labels, n_labels, features, frames));
    const int nf = w->n_features;
    for (int t = 0; t < frames; t++) {
        const float *row = features + (size_t)t * nf;
        for (int j = 0; j < nf; j++) {
            w->sum[j] += row[j];
            w->sumsq[j] += (double)row[j] * row[j];
        }
    }
    w->stat_count += frames;
    return DS_OK;
}

/* ---- closing ---- */

static ds_status write_index(ds_dataset_writer *w)
{
    hsize_t n = (hsize_t)w->n, nl = (hsize_t)w->total_labels;
    DS_TRY(ds_h5_write(w->file, "utterances/frame_offset", DS_I64, 1, &n, w->frame_offset));
    DS_TRY(ds_h5_write(w->file, "utterances/frames", DS_I32, 1, &n, w->frames));
    DS_TRY(ds_h5_write(w->file, "utterances/label_offset", DS_I64, 1, &n, w->label_offset));
    DS_TRY(ds_h5_write(w->file, "utterances/label_length", DS_I32, 1, &n, w->label_length));
    DS_TRY(ds_h5_write_strings(w->file, "utterances/id", (size_t)w->n,
                               (const char *const *)w->ids));
    DS_TRY(ds_h5_write_strings(w->file, "utterances/transcript", (size_t)w->n,
                               (const char *const *)w->transcripts));
    return ds_h5_write(w->file, "labels", DS_U8, 1, &nl, w->labels);
}

/* /stats: population mean and std per feature, and the sums they come from. */
static ds_status write_stats(ds_dataset_writer *w)
{
    const int nf = w->n_features;
    float *ms = malloc(2 * (size_t)nf * sizeof *ms);
    if (!ms)
        return DS_FAIL(DS_ERR_MEM, "%s: stats", w->path);
    const double c = (double)w->stat_count;
    for (int j = 0; j < nf; j++) {
        double mean = c > 0 ? w->sum[j] / c : 0;
        double var = c > 0 ? w->sumsq[j] / c - mean * mean : 0;
        ms[j] = (float)mean;
        ms[nf + j] = (float)sqrt(var > 0 ? var : 0);
    }
    hsize_t dim = (hsize_t)nf, one = 1;
    ds_status st;
    DS_TRY_GOTO(st, ds_h5_write(w->file, "stats/mean", DS_F32, 1, &dim, ms), free_ms);
    DS_TRY_GOTO(st, ds_h5_write(w->file, "stats/std", DS_F32, 1, &dim, ms + nf), free_ms);
    DS_TRY_GOTO(st, ds_h5_write(w->file, "stats/count", DS_I64, 1, &one, &w->stat_count), free_ms);
    DS_TRY_GOTO(st, ds_h5_write(w->file, "stats/sum", DS_F64, 1, &dim, w->sum), free_ms);
    st = ds_h5_write(w->file, "stats/sumsq", DS_F64, 1, &dim, w->sumsq);
free_ms:
    free(ms);
    return st;
}

static ds_status write_attrs(ds_dataset_writer *w)
{
    const hid_t f = w->file;
    const ds_feature_cfg *c = &w->feat;
    DS_TRY(ds_h5_write_attr_str(f, "format", DS_DATASET_FORMAT));
    DS_TRY(ds_h5_write_attr_i64(f, "version", DS_DATASET_VERSION));
    DS_TRY(ds_h5_write_attr_i64(f, "sample_rate", c->sample_rate));
    DS_TRY(ds_h5_write_attr_f64(f, "window_size_s", c->window_size_s));
    DS_TRY(ds_h5_write_attr_f64(f, "window_stride_s", c->window_stride_s));
    DS_TRY(ds_h5_write_attr_str(f, "window", "hamming"));
    DS_TRY(ds_h5_write_attr_i64(f, "n_fft", ds_feature_n_fft(c)));
    DS_TRY(ds_h5_write_attr_str(f, "feature_type", ds_feature_type_name(c->type)));
    DS_TRY(ds_h5_write_attr_i64(f, "n_features", w->n_features));
    DS_TRY(ds_h5_write_attr_str(f, "alphabet", ds_alphabet));
    return ds_h5_seal_attrs(f);   /* last: it sums the attributes above */
}

/* Everything into the file, then the file closed. */
static ds_status finish_file(ds_dataset_writer *w)
{
    if (w->broken)
        return DS_FAIL(DS_ERR_IO, "%s: an earlier write failed", w->tmp);
    DS_TRY(write_index(w));
    DS_TRY(write_stats(w));
    DS_TRY(write_attrs(w));
    herr_t rc = H5Dclose(w->features);
    w->features = -1;
    if (rc < 0 || H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
        char why[1024];   /* HDF5 names the errno: "No space left on device" */
        return DS_FAIL(DS_ERR_IO, "%s: cannot write the file out (%s)", w->tmp,
                       ds_h5_reason(why, sizeof why));
    }
    hid_t f = w->file;
    w->file = -1;
    return ds_h5_close(f);
}

ds_status ds_dataset_writer_close(ds_dataset_writer *w)
{
    ds_status st;
    DS_TRY_GOTO(st, finish_file(w), remove_tmp);
    st = ds_file_commit(w->tmp, w->path);   /* removes the temporary file if it fails */
    release(w);
    return st;
remove_tmp:
    ds_dataset_writer_abort(w);
    return st;
}
