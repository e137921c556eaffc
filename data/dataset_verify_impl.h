/* dataset_verify_impl.h - private to data/dataset_verify*.c: the state one
 * verification passes between its steps. */
#ifndef DS_DATASET_VERIFY_IMPL_H
#define DS_DATASET_VERIFY_IMPL_H

#include <hdf5.h>
#include <stdint.h>

#include "dataset.h"
#include "dataset_verify.h"
#include "h5_io.h"   /* ds_h5_reason: why the last HDF5 call failed */

/* One utterance's range in /features or /labels; sorted by start. */
typedef struct {
    int64_t start, len;
    long utt;
} ds_dataset_verify_span;

typedef struct {
    const char *path;
    ds_dataset *d;                 /* opened, and validated, by the loader */
    ds_dataset_verify_span *frames;        /* [d->n] by frame_offset */
    FILE *progress;                /* NULL: quiet */
    double t0;                     /* ds_dataset_verify_now() at the start */
    ds_dataset_verify_summary *sum;
} ds_dataset_verify_ctx;

/* Seconds on a monotonic clock. */
double ds_dataset_verify_now(void);
/* Adds name (no leading '/') to the summary's datasets stored without a
 * Fletcher32 checksum, if ds is one. */
void ds_dataset_verify_note_unchecked(ds_dataset_verify_summary *s, hid_t ds, const char *name);
/* "utterance I (id ID) frame F" or "row R (in no utterance)" for row of
 * /features, into buf [cap]; needs c->frames. */
const char *ds_dataset_verify_row_name(const ds_dataset_verify_ctx *c, int64_t row, char *buf, size_t cap);

/* Step 4 (dataset_verify_index.c): sets c->frames and the summary's counts. */
ds_status ds_dataset_verify_index(ds_dataset_verify_ctx *c);
/* Step 5 (dataset_verify_features.c). */
ds_status ds_dataset_verify_features(ds_dataset_verify_ctx *c);

#endif
