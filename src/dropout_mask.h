/* dropout_mask.h - which elements dropout keeps, from a counter-based
 * generator (Philox4x32-10, Salmon et al. 2011) keyed by the run's seed and
 * counted by (step, layer, part, position): any element's draw is computed
 * on its own, in any order, by any thread, on the CPU or the GPU alike, so
 * both backends drop the same elements and a resumed run draws what the
 * uninterrupted one drew. One definition for the CPU ops and the CUDA
 * kernels. */
#ifndef DS_DROPOUT_MASK_H
#define DS_DROPOUT_MASK_H

#include <stdint.h>

#include "backend.h"

#ifndef DS_HOST_DEVICE
#ifdef __CUDACC__
#define DS_HOST_DEVICE __host__ __device__
#else
#define DS_HOST_DEVICE
#endif
#endif

/* One Philox4x32-10 block: out [4] from counter ctr [4] and key k [2]. */
static inline DS_HOST_DEVICE void ds_dropout_philox(const uint32_t ctr[4], const uint32_t k[2],
                                                   uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = k[0], k1 = k[1];
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;   /* the Weyl sequence bumps the key between rounds */
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Numbers one mask draws for: 2^48 Philox blocks of 4 (the block's low 32
 * bits in the first counter word, its high 16 beside the layer's). */
#define DS_DROPOUT_MAX_ELEMS ((uint64_t)1 << 50)

/* The time stride a conv layer's runs are numbered with (ds_dropout_key):
 * frames past 2^20 would share numbers with the next run. */
#define DS_DROPOUT_RUN_FRAMES ((uint64_t)1 << 20)

/* The threshold a draw is compared with: floor(p * 2^24), p in [0, 1). */
static inline DS_HOST_DEVICE uint32_t ds_dropout_threshold(double p)
{
    return (uint32_t)(p * 16777216.0);
}

/* The step a mask is drawn for, from key's step in backend memory (host
 * memory on the CPU, device memory in a kernel): read when the op runs, so
 * a captured op draws the step then uploaded. A whole number below 2^32 is
 * itself; anything else (a fraction truncated, a NaN, out of range) maps
 * the same way on every backend. */
static inline DS_HOST_DEVICE uint32_t ds_dropout_step(const ds_dropout_key *key)
{
    const double s = *(const double *)key->step;
    return s >= 0 && s < 4294967296.0 ? (uint32_t)s : 0;
}

/* The four draws of block b (numbers 4b .. 4b+3) at step, 24 bits each:
 * number e is dropped when draws[e % 4] < threshold, a probability of
 * threshold/2^24 (p within 2^-24). Blocks count to 2^48 (below 2^32, the
 * draws of a mask numbered before runs existed). */
static inline DS_HOST_DEVICE void ds_dropout_draws(const ds_dropout_key *key, uint32_t step,
                                                   uint64_t b, uint32_t draws[4])
{
    const uint32_t ctr[4] = {(uint32_t)b, key->layer | (uint32_t)(b >> 32) << 16, step,
                             key->part};
    const uint32_t k[2] = {(uint32_t)key->seed, (uint32_t)(key->seed >> 32)};
    ds_dropout_philox(ctr, k, draws);
    for (int j = 0; j < 4; j++)
        draws[j] >>= 8;
}

/* Whether element e is kept at step (numbered by key's runs). */
static inline DS_HOST_DEVICE int ds_dropout_keeps(const ds_dropout_key *key, uint32_t step,
                                                  uint32_t threshold, uint64_t e)
{
    const uint64_t num = key->run ? e / key->run * key->stride + e % key->run : e;
    uint32_t d[4];
    ds_dropout_draws(key, step, num / 4, d);
    return d[num % 4] >= threshold;
}

/* Walking a mask of n elements in groups of up to 4 that share a Philox
 * block: groups [runs * per_run]; group g is run g / per_run's elements
 * from 4 * (g % per_run), at most 4 and within the run. */
typedef struct {
    uint64_t run, runs, per_run;
} ds_dropout_walk;

/* 0 when key's numbering cannot hold n elements (runs that do not divide n,
 * a stride below the run or not a multiple of 4, numbers past 2^50, a
 * layer past 2^16). */
static inline DS_HOST_DEVICE int ds_dropout_walk_of(const ds_dropout_key *key, uint64_t n,
                                                    ds_dropout_walk *w)
{
    w->run = key->run ? key->run : n;
    w->runs = w->run ? n / w->run : 0;
    w->per_run = (w->run + 3) / 4;
    if (key->layer >= (1u << 16))   /* the counter word beside the block's high bits */
        return 0;
    if (!key->run)
        return n <= DS_DROPOUT_MAX_ELEMS;
    return n % key->run == 0 && key->stride >= key->run && key->stride % 4 == 0 &&
           (w->runs == 0 || (w->runs - 1) <= (DS_DROPOUT_MAX_ELEMS - key->run) / key->stride);
}

/* Group g's Philox block; *first its first element, *count (1-4) how many. */
static inline DS_HOST_DEVICE uint64_t ds_dropout_group(const ds_dropout_key *key,
                                                       const ds_dropout_walk *w, uint64_t g,
                                                       uint64_t *first, int *count)
{
    const uint64_t k = g / w->per_run, j = 4 * (g % w->per_run);
    *first = k * w->run + j;
    *count = w->run - j < 4 ? (int)(w->run - j) : 4;
    return (key->run ? k * (key->stride / 4) : 0) + j / 4;
}

#endif
