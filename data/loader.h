/* loader.h - batches from a feature file for one rank: reader threads read,
 * normalise, optionally augment (SpecAugment) and pad the next batches into
 * reusable host buffers while the step runs. Each batch is one HDF5 read
 * (data/dataset.h: ds_dataset_read_raw); the batches come out in the
 * sampler's order and bit for bit the same whatever the threads and depth. */
#ifndef DS_LOADER_H
#define DS_LOADER_H

#include <stdint.h>

#include "batch.h"
#include "dataset.h"
#include "feature.h"
#include "sampler.h"

/* SpecAugment after normalisation, masks set to 0 (the mean): freq_masks
 * masks of a width drawn uniformly in [0, freq_width] bins at a uniform start,
 * over the real frames; then time_masks masks of [0, min(time_width, length)]
 * frames inside the real frames. Padding stays 0. */
typedef struct {
    int freq_masks, freq_width;   /* masks of up to freq_width bins */
    int time_masks, time_width;   /* masks of up to time_width frames */
} ds_specaug;                     /* all 0: off */

typedef struct {
    ds_dataset *data;
    const ds_sampler *sampler;
    int rank;
    int epoch;
    int batch;                    /* per rank: buffer capacity */
    int max_frames, max_labels;   /* buffer capacity: longest utterance and transcript */
    int round_frames;             /* a batch padded to a multiple of this many frames
                                   * (--bucket-frames; < 2: to its longest) */
    ds_norm norm;
    ds_specaug aug;
    uint64_t seed;                /* augmentation draws depend on (seed, epoch, k, rank) only */
    int depth;                    /* batch buffers (>= 2), the one the caller holds
                                   * included; 0: DS_LOADER_DEFAULT_DEPTH */
    int threads;                  /* reader threads (>= 1); 0: DS_LOADER_DEFAULT_THREADS */
    long first_batch;             /* start at this global batch of the epoch (a resume) */
    double timeout_s;             /* ds_loader_next waits at most this long; <= 0: for ever */
} ds_loader_cfg;

/* Two readers: while one waits on HDF5 (its calls are serialised, by the
 * library when thread-safe, else by ds_h5_lock) the other widens, normalises
 * and augments, which is most of a batch's CPU; a rank of a GPU job has a
 * core or two to spare beside the thread driving the GPU, rarely more. */
#define DS_LOADER_DEFAULT_THREADS 2
/* Four buffers: the one the step holds, one being filled by each of the two
 * readers, and one ready in reserve for a step that comes early. Each costs
 * batch x max_frames x n_features floats (ds2, batch 32, 17 s: 35 MB). */
#define DS_LOADER_DEFAULT_DEPTH 4

typedef struct ds_loader ds_loader;

/* Starts cfg->threads reader threads (checks at start whether HDF5 is
 * thread-safe: if not, their reads are serialised by ds_h5_lock and a line on
 * stderr says so, once per process) on cfg->epoch's batches for cfg->rank: the sampler's
 * global batches k = 0, 1, ... in order, skipping on every rank alike a short
 * global batch that leaves some rank's take empty. Each batch carries the
 * lengths of its whole global batch (ds_batch.global_lengths, ranks > 1). The ring of depth batches (batch x max_frames x n_features,
 * batch * max_labels labels) and each reader's staging buffer (batch x
 * max_frames x n_features as stored) are allocated here, nothing per batch.
 * Other threads may read data meanwhile (ds_dataset_read takes ds_h5_lock);
 * data and sampler must outlive the loader. */
ds_status ds_loader_start(const ds_loader_cfg *cfg, ds_loader **out);
/* Blocks until the next batch is ready; valid until the following call, which
 * hands it back to the thread. *out = NULL at the end of the epoch (and on
 * every later call). An error in the thread (a read failure; an utterance
 * over max_frames or max_labels, named by id) comes back here, with its
 * message, after the batches made before it; later calls repeat it. A wait
 * over cfg->timeout_s (a stalled file system) is an error naming the file,
 * the epoch and the batch. */
ds_status ds_loader_next(ds_loader *l, const ds_batch **out);
/* The epoch's global batch index (the sampler's k) of the batch the last
 * ds_loader_next returned; -1 before the first. A checkpoint resumes at
 * the one after it. */
long ds_loader_batch_index(const ds_loader *l);
/* Stops the threads (also mid-epoch or after an error), joins them and
 * frees the buffers. NULL is a no-op. */
void ds_loader_stop(ds_loader *l);

/* Normalises x [frames][dim] in place (used by the loader and transcribe);
 * mean [dim] and std [dim] are read for DS_NORM_GLOBAL only. Per utterance:
 * mean and unbiased std (torch's Tensor.std()) from float sums of 16 lanes
 * over blocks of 256 values, the blocks added in double, two passes; the
 * scaling in float. */
void ds_loader_normalize(float *x, int frames, int dim, ds_norm norm, const float *mean, const float *std);

#endif
