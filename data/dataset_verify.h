/* dataset_verify.h - a whole feature file checked end to end, for a user
 * about to start a long job (`dstrain prep --verify`, `dstrain info`).
 *
 * In order, stopping at the first problem (the error names the file, the
 * dataset and the element or utterance):
 *   1. the file: present, a regular file, HDF5, opens (not truncated);
 *   2. every dataset but /features read in full through HDF5's checksum
 *      filter (Fletcher32 on every dataset dstrain writes);
 *   3. the loader's own validation (ds_dataset_open: attributes, dtype,
 *      index lengths, each utterance inside /features and /labels, frames
 *      and labels >= 1, its labels in the alphabet, /stats finite);
 *   4. the index against itself: at least one utterance, ids present, no two
 *      utterances sharing a row of /features or an entry of /labels, every
 *      entry of /labels in 1..28, each transcript spelling exactly its
 *      labels, /stats/count, sum and sumsq (when present) agreeing with the
 *      frames and /stats/mean;
 *   5. /features read in full in bounded slices (every chunk's checksum),
 *      every value finite, and /stats/mean and /stats/std those of the
 *      stored features (within float16 rounding).
 * Offsets out of index order, rows of /features or entries of /labels in no
 * utterance, and features of std 0 are allowed by the format: counted in
 * the summary, not errors.
 */
#ifndef DS_DATASET_VERIFY_H
#define DS_DATASET_VERIFY_H

#include <stdio.h>

#include "status.h"

typedef struct {
    long utterances;
    long long frames, labels;        /* rows of /features, entries of /labels */
    int n_features;
    const char *dtype;               /* of /features on disk: "float16" or "float32" */
    int datasets;                    /* datasets read in full */
    long long bytes;                 /* their stored bytes */
    double seconds;
    int in_order;                    /* utterances stored one after another in index order */
    long long unused_frames, unused_labels;   /* in no utterance */
    int constant_features;           /* /stats/std exactly 0 */
    char unchecked[512];             /* datasets stored without a checksum, ", "-separated */
    int unsealed;                    /* a version 1 file: its attributes carry no checksum */
} ds_dataset_verify_summary;

/* Steps 1-5 on path. progress (may be NULL): a line every ~5 s while
 * /features is read, with the percentage read. *out is filled on success. */
ds_status ds_dataset_verify(const char *path, FILE *progress, ds_dataset_verify_summary *out);
/* "verified: PATH: ..." and a "  note: ..." line per allowed oddity. */
void ds_dataset_verify_print(const char *path, const ds_dataset_verify_summary *s, FILE *f);

#endif
