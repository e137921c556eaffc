/* sampler.c - the order of utterances in global batches, the same on every
 * rank; see sampler.h. */
#include "sampler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

struct ds_sampler {
    long n;                  /* utterances */
    int batch, ranks;
    long global;             /* ranks * batch */
    long n_batches;          /* ceil(n / global) */
    uint64_t seed;
    long *sorted;            /* [n] dataset indices by (frames, index) */
    /* The permutation of the last epoch asked for: take is called once per
     * batch, and recomputing the shuffle each time would cost O(batches^2)
     * per epoch. The cache is guarded so concurrent takes stay safe. */
    pthread_mutex_t lock;
    int cached_epoch, have_cache;
    long *order;             /* [n_batches] global batch at position k */
};

typedef struct {
    int frames;
    long utt;
} sort_key;

static int cmp_key(const void *pa, const void *pb)
{
    const sort_key *a = pa, *b = pb;
    if (a->frames != b->frames)
        return a->frames < b->frames ? -1 : 1;
    return (a->utt > b->utt) - (a->utt < b->utt);
}

/* keys [n] from utts [n] and frames [n], sorted; the index breaks ties so the
 * order is the same on every rank whatever qsort does with equal keys. */
static ds_status sort_utts(const long *utts, const int *frames, long n, long *sorted /* [n] */)
{
    sort_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys)
        return DS_FAIL(DS_ERR_MEM, "sampler: %ld sort keys", n);
    for (long i = 0; i < n; i++)
        keys[i] = (sort_key){frames[i], utts[i]};
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    for (long i = 0; i < n; i++)
        sorted[i] = keys[i].utt;
    free(keys);
    return DS_OK;
}

ds_status ds_sampler_create(const long *utts, const int *frames, long n, int batch, int ranks,
                            uint64_t seed, ds_sampler **out)
{
    *out = NULL;
    if (n < 0 || batch < 1 || ranks < 1 || (n > 0 && (!utts || !frames)))
        return DS_FAIL(DS_ERR_ARG, "sampler: %ld utterances, batch %d, ranks %d", n, batch, ranks);
    ds_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "sampler");
    s->n = n;
    s->batch = batch;
    s->ranks = ranks;
    s->global = (long)batch * ranks;
    s->n_batches = (n + s->global - 1) / s->global;
    s->seed = seed;
    s->sorted = malloc((size_t)(n ? n : 1) * sizeof *s->sorted);
    s->order = malloc((size_t)(s->n_batches ? s->n_batches : 1) * sizeof *s->order);
    if (!s->sorted || !s->order) {
        free(s->sorted);
        free(s->order);
        free(s);
        return DS_FAIL(DS_ERR_MEM, "sampler: %ld utterances", n);
    }
    ds_status st = sort_utts(utts, frames, n, s->sorted);
    int rc = st == DS_OK ? pthread_mutex_init(&s->lock, NULL) : 0;
    if (st != DS_OK || rc != 0) {
        free(s->sorted);
        free(s->order);
        free(s);
        return st != DS_OK ? st : DS_FAIL(DS_ERR_MEM, "sampler: mutex init failed (%d)", rc);
    }
    *out = s;
    return DS_OK;
}

void ds_sampler_destroy(ds_sampler *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s->sorted);
    free(s->order);
    free(s);
}

long ds_sampler_batches(const ds_sampler *s) { return s->n_batches; }

long ds_sampler_steps(const ds_sampler *s)
{
    const long rest = s->n % s->global;   /* the short batch's utterances, if any */
    return s->n / s->global + (rest > (long)(s->ranks - 1) * s->batch);
}
int ds_sampler_batch(const ds_sampler *s) { return s->batch; }
int ds_sampler_ranks(const ds_sampler *s) { return s->ranks; }

/* The shuffle's seed: depends on the seed and the epoch only, so every rank
 * and every split of the same global batch size draws the same order. */
static uint64_t epoch_seed(uint64_t seed, int epoch)
{
    uint64_t x = seed ^ 0x243f6a8885a308d3ULL;   /* keep epoch seeds apart from the plain seed */
    x ^= (uint64_t)(uint32_t)epoch * 0x9e3779b97f4a7c15ULL;
    x ^= x >> 31;
    return x * 0xd6e8feb86659fd93ULL;
}

/* order [n_batches] = Fisher-Yates permutation of 0..n_batches-1 for epoch. */
static void shuffle_order(const ds_sampler *s, int epoch, long *order)
{
    ds_rng r;
    ds_rng_seed(&r, epoch_seed(s->seed, epoch));
    for (long i = 0; i < s->n_batches; i++)
        order[i] = i;
    for (long i = s->n_batches - 1; i > 0; i--) {
        long j = (long)(ds_rng_next(&r) % (uint64_t)(i + 1));
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* The global batch at position k of epoch, from the cached permutation;
 * -1 (recorded) if the cache's lock fails. */
static long global_batch(const ds_sampler *cs, int epoch, long k)
{
    /* The cache is private state behind a const handle: the object itself was
     * allocated non-const in create, so writing through it is defined. */
    ds_sampler *s = (ds_sampler *)cs;
    int rc = pthread_mutex_lock(&s->lock);
    if (rc != 0) {
        DS_FAIL(DS_ERR_ARG, "sampler: mutex lock failed (%d)", rc);
        return -1;
    }
    if (!s->have_cache || s->cached_epoch != epoch) {
        shuffle_order(s, epoch, s->order);
        s->cached_epoch = epoch;
        s->have_cache = 1;
    }
    long g = s->order[k];
    rc = pthread_mutex_unlock(&s->lock);
    if (rc != 0) {
        DS_FAIL(DS_ERR_ARG, "sampler: mutex unlock failed (%d)", rc);
        return -1;
    }
    return g;
}

int ds_sampler_whole(const ds_sampler *s, int epoch, long k)
{
    long g = global_batch(s, epoch, k);
    if (g < 0)
        return -1;
    /* the last rank's share starts inside the data */
    return g * s->global + (long)(s->ranks - 1) * s->batch < s->n;
}

int ds_sampler_take(const ds_sampler *s, int epoch, long k, int rank, long *out)
{
    if (k < 0 || k >= s->n_batches || rank < 0 || rank >= s->ranks)
        return 0;
    long g = global_batch(s, epoch, k);
    if (g < 0)
        return -1;
    long start = g * s->global + (long)rank * s->batch;
    long end = start + s->batch < s->n ? start + s->batch : s->n;
    int count = 0;
    for (long p = start; p < end; p++)
        out[count++] = s->sorted[p];
    return count;
}
