/* synthetic.h - speech-shaped random batches for tests, benchmarks and the
 * demo without data. Each symbol of the alphabet has a fixed random spectral
 * template; an utterance is its label sequence "spoken" as runs of noisy
 * template frames. Lengths spread like read speech, labels always fit CTC
 * after the conv stack's striding, and a model can learn the mapping. */
#ifndef DS_SYNTHETIC_H
#define DS_SYNTHETIC_H

#include "batch.h"
#include "config.h"
#include "rng.h"

/* Frames per spoken symbol for cfg (4 output frames after striding). */
int ds_synthetic_symbol_frames(const ds_model_cfg *cfg);
/* Longest transcript a batch of max_frames may carry. */
int ds_synthetic_max_labels(const ds_model_cfg *cfg, int max_frames);

/* How utterance lengths spread. */
typedef enum {
    DS_LEN_READ,          /* most near 3/4 of max_frames, a tail of short ones */
    DS_LEN_LIBRISPEECH    /* seconds as LibriSpeech's training segments roughly spread
                           * (most 12-17 s, mean about 13 s, a tail down to 1.5 s: an
                           * approximation, not the corpus's histogram), cut at max_frames */
} ds_length_dist;

/* Fills b (allocated for n utterances of max_frames) with n utterances of at
 * most max_frames frames, drawn from rng (lengths as DS_LEN_READ). */
ds_status ds_synthetic_batch(ds_rng *rng, const ds_model_cfg *cfg, int n, int max_frames,
                             ds_batch *b);
/* The same with lengths drawn from dist (10 ms frames). */
ds_status ds_synthetic_batch_dist(ds_rng *rng, const ds_model_cfg *cfg, int n, int max_frames,
                                  ds_length_dist dist, ds_batch *b);
/* The same with the given lengths [n] (each at most b's cap_t). */
ds_status ds_synthetic_batch_of(ds_rng *rng, const ds_model_cfg *cfg, int n, const int *lengths,
                                ds_batch *b);

/* Batches formed as the sampler forms them (data/sampler.h): a large sample
 * of DS_SYNTHETIC_SORT_SAMPLE x pool x global lengths drawn from dist,
 * sorted, and cut into batches of global consecutive lengths; batch k of
 * the pool is the one at quantile (k + 1/2) / pool of that order, so the
 * pool spans the distribution and each batch's padding is what a sorted
 * corpus's is. out [pool][global]. bench/benchlib.py's
 * sorted_bucket_lengths does the same (the same rule, not the same draws). */
#define DS_SYNTHETIC_SORT_SAMPLE 64
ds_status ds_synthetic_sorted_lengths(ds_rng *rng, const ds_model_cfg *cfg, int global, int pool,
                                      int max_frames, ds_length_dist dist, int *out);

#endif
