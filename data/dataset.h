/* dataset.h - the HDF5 feature file: format "dstrain-features", version 2.
 *
 *   /features                  float16|float32 [total_frames][n_features], chunked
 *                              1024 x n_features, uncompressed, extendible in rows;
 *                              float16 is IEEE binary16 little-endian (h5py '<f2')
 *   /utterances/frame_offset   int64 [N]   first row of utterance i in /features
 *   /utterances/frames         int32 [N]   >= 1
 *   /utterances/label_offset   int64 [N]   first entry of utterance i in /labels
 *   /utterances/label_length   int32 [N]   >= 1
 *   /utterances/id             string [N]  e.g. 1089-134686-0000
 *   /utterances/transcript     string [N]  normalised text
 *   /labels                    uint8 [total_labels]  alphabet indices (1..28: never blank)
 *   /stats/mean, /stats/std    float32 [n_features]  per-feature mean and population
 *                              std over all frames, from the float32 values given
 *                              to the writer (before any float16 rounding)
 *   /stats/count               int64 [1]   frames summed
 *   /stats/sum, /stats/sumsq   float64 [n_features]  sum of x and of x^2 per feature:
 *                              merge adds these, so its stats match one writer's
 *   attributes on /: format (string), version (integer 2), sample_rate (integer Hz),
 *     window_size_s, window_stride_s (float64), window ("hamming"), n_fft (integer),
 *     feature_type (log-spectrogram | log-mel | mfcc), n_features (integer: also
 *     n_mels for log-mel, n_mfcc for mfcc), alphabet (the 29 symbols, see alphabet.h),
 *     attributes_crc32 (integer: CRC-32 of the others, h5seal.h; required from
 *     version 2, absent from version 1 files, which are still read)
 *
 * Strings are variable-length UTF-8 (fixed-length ones are read too). Offsets
 * need not be in order, but every utterance must lie inside /features and
 * /labels. /stats/count, sum and sumsq are needed by merge only.
 *
 * Every field is validated on open; a bad file gets an error naming the file
 * and the field. dataset_verify.h checks a whole file (every chunk read, the
 * fields against each other). Features are raw (see audio_features.h);
 * normalisation happens when batches are formed.
 */
#ifndef DS_DATASET_H
#define DS_DATASET_H

#include <stdint.h>
#include <stdio.h>

#include "dtype.h"
#include "audio_features.h"
#include "status.h"

#define DS_DATASET_FORMAT "dstrain-features"
#define DS_DATASET_VERSION 2   /* 2: attributes_crc32 (1 is still read) */

typedef struct {
    char path[1024];
    long n;                      /* utterances */
    long total_frames, total_labels;
    int n_features;
    ds_dtype feature_dtype;      /* DS_F16 or DS_F32 on disk */
    ds_feature_cfg feat;         /* from the attributes */
    int version;                 /* 1: attributes not sealed (read as they are), 2 */
    int64_t *frame_offset;       /* [n] */
    int32_t *frames;             /* [n] */
    int64_t *label_offset;       /* [n] */
    int32_t *label_length;       /* [n] */
    uint8_t *labels;             /* [total_labels], all in memory */
    char **ids, **transcripts;   /* [n] */
    float *mean, *std;           /* [n_features] from /stats */
    void *h5;                    /* private: open file and /features handle */
} ds_dataset;

/* Opens and validates path. Feature reads go through one HDF5 handle: call
 * ds_dataset_read from one thread at a time. */
ds_status ds_dataset_open(const char *path, ds_dataset **out);

/* What identifies d's content whatever its name: a CRC-32 of its utterance
 * count, every utterance's frames and label count, and every label (read
 * on open), as 8 hex digits in buf [cap >= 9]. Two files of the same count
 * of utterances but other recordings or transcripts differ here. */
void ds_dataset_fingerprint(const ds_dataset *d, char *buf, size_t cap);
void ds_dataset_close(ds_dataset *d);
/* Utterance i's features -> out [frames[i]][n_features] as float32. Fails,
 * naming the utterance id, if any value is NaN or infinite. */
ds_status ds_dataset_read(ds_dataset *d, long i, float *out);
/* `dstrain info FILE.h5`: utterances, hours, frames, feature type and size,
 * label statistics, a length histogram. */
void ds_dataset_describe(const ds_dataset *d, FILE *f);

/* ---- writing ---- */

typedef struct ds_dataset_writer ds_dataset_writer;

/* Writes to a new temporary file beside path (fileutil.h) and renames it
 * into place on close. feature_dtype
 * is DS_F16 or DS_F32. */
ds_status ds_writer_create(const char *path, const ds_feature_cfg *feat, ds_dtype feature_dtype,
                           ds_dataset_writer **out);
/* Appends one utterance: features [frames][dim], labels [n_labels] in 1..28.
 * Rejects non-finite features, naming id. */
ds_status ds_writer_add(ds_dataset_writer *w, const char *id, const char *transcript,
                        const uint8_t *labels, int n_labels, const float *features, int frames);
long ds_writer_count(const ds_dataset_writer *w);
/* Writes the index, /stats, the attributes; fsyncs; renames into place;
 * fsyncs the directory. Frees w also when it fails (the temporary file is
 * removed then). */
ds_status ds_writer_close(ds_dataset_writer *w);
/* Drops the temporary file and frees w (after a failure before close). */
void ds_writer_abort(ds_dataset_writer *w);

/* Concatenates valid feature files (e.g. per-rank parts of a parallel prep)
 * in order into out; their feature settings and dtype must agree. /stats is
 * recomputed from the parts' /stats/count, sum and sumsq. */
ds_status ds_dataset_merge(const char *const *parts, int n_parts, const char *out);

#endif
