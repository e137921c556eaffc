/* sampler.h - the order of utterances, the same on every rank.
 *
 * Utterances are sorted by length and cut into global batches of
 * ranks * batch consecutive utterances (the last may be short); each epoch
 * the order of the global batches is shuffled with a seed shared by all
 * ranks; rank r takes the r-th slice of batch utterances of each global batch.
 * So an epoch's union over ranks is the whole set, with no overlap, and the
 * global batches do not depend on how they are split across ranks.
 *
 * Sorting is by (frames, dataset index), so ties do not depend on qsort.
 * Global batch g holds sorted positions [g*R*B, (g+1)*R*B) (clipped to n);
 * rank r takes [g*R*B + r*B, g*R*B + (r+1)*B) of those, so with a short last
 * batch the higher ranks get fewer utterances or none. The epoch's order of
 * global batches is a Fisher-Yates shuffle seeded from (seed, epoch) only: for
 * a fixed R*B it is the same for any R. */
#ifndef DS_SAMPLER_H
#define DS_SAMPLER_H

#include <stdint.h>

#include "status.h"

typedef struct ds_sampler ds_sampler;

/* utts [n]: dataset indices to draw from; frames [n]: their lengths. */
ds_status ds_sampler_create(const long *utts, const int *frames, long n, int batch, int ranks,
                            uint64_t seed, ds_sampler **out);
void ds_sampler_destroy(ds_sampler *s);
long ds_sampler_batches(const ds_sampler *s);          /* global batches per epoch */
/* The steps of an epoch: the global batches in which every rank has an
 * utterance (the loader skips a short last batch that leaves a rank none). */
long ds_sampler_steps(const ds_sampler *s);
/* 1 when every rank has an utterance in the k-th global batch of epoch (the
 * loader trains on it), 0 when it is the short one that leaves a rank none;
 * -1 on a failure (recorded). */
int ds_sampler_whole(const ds_sampler *s, int epoch, long k);
int ds_sampler_batch(const ds_sampler *s);             /* B: utterances per rank */
int ds_sampler_ranks(const ds_sampler *s);             /* R */
/* The utterances (dataset indices) rank takes from the k-th global batch of
 * epoch, shortest first: writes out [<= batch], returns how many (0 is
 * possible for the short last batch, and for k or rank out of range).
 * Thread-safe: the epoch's shuffle is cached under a mutex; -1 (with the
 * error recorded) only if that mutex fails. */
int ds_sampler_take(const ds_sampler *s, int epoch, long k, int rank, long *out);

#endif
