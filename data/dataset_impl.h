/* dataset_impl.h - private to data/dataset_*.c: the open file's HDF5
 * handles and the writer entry points that merge builds on. */
#ifndef DS_DATASET_IMPL_H
#define DS_DATASET_IMPL_H

#include <hdf5.h>

#include "dataset.h"
#include "file_input.h"

/* /features chunks of the files written now: DS_DATASET_ALIGN_ROWS frames x
 * n_features (dataset.h), every utterance starting a chunk. Files of the
 * 1024-row layout are still read. */
#define DS_DATASET_CHUNK_ROWS DS_DATASET_ALIGN_ROWS
#define DS_DATASET_CHUNK_CACHE (8u << 20)     /* bytes of chunk cache on /features */

/* What ds_dataset.h points to. */
typedef struct {
    hid_t file;
    hid_t features;   /* /features */
    hid_t half;       /* binary16 memory type for float16 files, else -1 */
    int fd;           /* the file itself, read-only: its size and identity are watched */
    ds_file_input_id id;   /* what it was when opened */
    char fingerprint[16];  /* ds_dataset_fingerprint's, computed on open */
} ds_dataset_h5;

static inline hid_t ds_dataset_file(const ds_dataset *d)
{
    return ((const ds_dataset_h5 *)d->h5)->file;
}

/* The index against itself, as `prep --verify` checks it (part of its
 * step 4, dataset_verify_index.c): no two utterances sharing a row of
 * /features or an entry of /labels, /stats/count (when present) the
 * utterances' frames and /stats/sum the mean. Reads no features: time
 * proportional to the index (a sort of its offsets).
 * ds_dataset_open runs it, so train, eval and info refuse a forged index. */
ds_status ds_dataset_check_index(ds_dataset *d);

/* ds_dataset_writer_add without the statistics: merge adds its parts' sums instead. */
ds_status ds_dataset_writer_append(ds_dataset_writer *w, const char *id, const char *transcript,
                                   const uint8_t *labels, int n_labels, const float *features, int frames);
/* Adds count frames' per-feature sums sum [n_features] and sumsq [n_features]. */
void ds_dataset_writer_add_sums(ds_dataset_writer *w, int64_t count, const double *sum, const double *sumsq);

#endif
