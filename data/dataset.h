/* dataset.h - the HDF5 feature file: format "dstrain-features", version 2.
 *
 *   /features                  float16|float32 [total_frames][n_features], chunked
 *                              64 x n_features (files written before: 1024 x n_features,
 *                              still read), Fletcher-32 checksummed, extendible in rows;
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
 *     attributes_crc32 (integer: CRC-32 of the others, h5_seal.h; required from
 *     version 2, absent from version 1 files, which are still read)
 *
 * Strings are variable-length UTF-8 (fixed-length ones are read too). Offsets
 * need not be in order, but every utterance must lie inside /features and
 * /labels. /stats/count, sum and sumsq are needed by merge only.
 *
 * Chunk layout (a writer's choice, not a reader's requirement): dstrain writes
 * utterances in index order, each starting at a multiple of
 * DS_DATASET_ALIGN_ROWS, the rows between one's end and the next one's start
 * zero and part of no utterance (fewer than DS_DATASET_ALIGN_ROWS each). So a
 * chunk holds rows of one utterance only, and reading an utterance reads its
 * own chunks and nothing else: bytes read per feature byte are at most
 * 1 + (DS_DATASET_ALIGN_ROWS - 1) / frames (2.6% for LibriSpeech's mean of
 * 1,230 frames, half that on average), where 1024-row chunks straddling
 * utterances read up to twice the features. Files written before this
 * layout (utterances back to back, 1024-row chunks) are read alike.
 *
 * Every field is validated on open; a bad file gets an error naming the file
 * and the field. dataset_verify.h checks a whole file (every chunk read, the
 * fields against each other). Features are raw (see featurizer.h);
 * normalisation happens when batches are formed.
 */
#ifndef DS_DATASET_H
#define DS_DATASET_H

#include <stdint.h>
#include <stdio.h>

#include "dtype.h"
#include "featurizer.h"
#include "status.h"

#define DS_DATASET_FORMAT "dstrain-features"
#define DS_DATASET_VERSION 2   /* 2: attributes_crc32 (1 is still read) */
/* Rows per /features chunk, and the row every utterance starts at a multiple
 * of, in files dstrain writes: 64 rows of 161 float16 features are 20 KiB, a
 * read the file system serves whole, and the padding a utterance brings is
 * under 64 rows (0.64 s). Smaller chunks cut the padding further but give
 * HDF5 more chunks to look up and checksum per utterance. */
#define DS_DATASET_ALIGN_ROWS 64

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

/* Opens and validates path: a regular file (a FIFO or device is refused
 * before it is opened), every field, and the index against itself as
 * `prep --verify` checks it (no two utterances sharing a row or a label,
 * /stats/count the utterances' frames: time proportional to the index). Feature reads go through one HDF5 handle,
 * serialised by ds_h5_lock where the HDF5 build is not thread-safe
 * (h5_lock.h), so threads may share it. */
ds_status ds_dataset_open(const char *path, ds_dataset **out);

/* What identifies d's content whatever its name, as 8 hex digits in buf
 * [cap >= 9]: a CRC-32 of its utterance count, every utterance's frames and
 * label count, every label, and a sample of its features (the stored bytes
 * of 4 rows from the middle of each of 64 utterances spread over the index:
 * one or two /features chunks each, at most 2.5 MiB of a 161-feature
 * float16 file, read by ds_dataset_fingerprint_features). Two files of
 * the same utterances' lengths and transcripts but other recordings differ
 * here; a copy of a file, wherever it lies, does not. Before
 * ds_dataset_fingerprint_features: the index part alone. */
void ds_dataset_fingerprint(const ds_dataset *d, char *buf, size_t cap);
/* Reads the sample of the features the fingerprint covers (train does,
 * for --train and --val, on open). */
ds_status ds_dataset_fingerprint_features(ds_dataset *d);
/* The form checkpoints before the sampled features recorded: the index
 * part alone (an older checkpoint is compared with this). */
void ds_dataset_index_fingerprint(const ds_dataset *d, char *buf, size_t cap);
/* Whether d's file is still what was opened (file_input.h): the same size
 * through its descriptor, and its path still naming that file (device and
 * inode). Checked at each epoch's start; every read checks the size (a
 * file truncated under a run would read as zeros past its end). */
ds_status ds_dataset_check_unchanged(const ds_dataset *d);
void ds_dataset_close(ds_dataset *d);
/* Utterance i's features -> out [frames[i]][n_features] as float32. Fails,
 * naming the utterance id, if any value is NaN or infinite. */
ds_status ds_dataset_read(ds_dataset *d, long i, float *out);

/* The batched read: the rows of utterances idx [n] as stored (float16 bit
 * patterns or float32, d->feature_dtype) -> raw [sum of their frames][n_features],
 * utterance idx[j] from row row[j] [n] of raw on. One HDF5 read (a union of
 * the utterances' row ranges) when no two ranges overlap, else one per
 * utterance. Takes ds_h5_lock (h5_lock.h) around its HDF5 calls: any number
 * of threads may call it, and ds_dataset_widen, on one d at once. */
ds_status ds_dataset_read_raw(ds_dataset *d, const long *idx, int n, void *raw, size_t *row);
/* Utterance i's stored rows raw [frames[i]][n_features] (from
 * ds_dataset_read_raw) -> out [frames[i]][n_features] float32, vectorised (F16C
 * where the CPU has it); fails, naming the utterance id, frame and feature,
 * if any value is NaN or infinite. */
ds_status ds_dataset_widen(const ds_dataset *d, long i, const void *raw, float *out);
/* `dstrain info FILE.h5`: utterances, hours, frames, feature type and size,
 * label statistics, a length histogram. */
void ds_dataset_describe(const ds_dataset *d, FILE *f);

/* ---- writing ---- */

typedef struct ds_dataset_writer ds_dataset_writer;

/* Writes to a new temporary file beside path (file.h) and renames it
 * into place on close. feature_dtype
 * is DS_F16 or DS_F32. */
ds_status ds_dataset_writer_create(const char *path, const ds_feature_cfg *feat, ds_dtype feature_dtype,
                                   ds_dataset_writer **out);
/* Appends one utterance: features [frames][dim], labels [n_labels] in 1..28.
 * Rejects non-finite features, naming id. */
ds_status ds_dataset_writer_add(ds_dataset_writer *w, const char *id, const char *transcript,
                                const uint8_t *labels, int n_labels, const float *features, int frames);
long ds_dataset_writer_count(const ds_dataset_writer *w);
/* Writes the index, /stats, the attributes; fsyncs; renames into place;
 * fsyncs the directory. Frees w also when it fails (the temporary file is
 * removed then). */
ds_status ds_dataset_writer_close(ds_dataset_writer *w);
/* Drops the temporary file and frees w (after a failure before close). */
void ds_dataset_writer_abort(ds_dataset_writer *w);

/* Concatenates valid feature files (e.g. per-rank parts of a parallel prep)
 * in order into out; their feature settings and dtype must agree. /stats is
 * recomputed from the parts' /stats/count, sum and sumsq. */
ds_status ds_dataset_merge(const char *const *parts, int n_parts, const char *out);

#endif
