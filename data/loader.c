/* loader.c - see loader.h.
 *
 * One producer thread per loader fills a ring of `depth` batch buffers in
 * epoch order; the caller consumes them in the same order. Ring state, under
 * `lock`:
 *   first  the oldest slot in use (the one next returns or holds),
 *   used   slots in use: ready ones plus the one the caller holds,
 *   held   1 while the caller holds slot `first` (until its next call).
 * The producer fills slot (first + used) % depth outside the lock: a release
 * moves first and used together, so that slot stays the producer's. The
 * producer only reads the dataset and the sampler; the caller only reads the
 * slots the producer has published. */
#include "loader.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

struct ds_loader {
    ds_loader_cfg cfg;
    int f;                        /* features per frame */
    ds_batch *ring;               /* [depth] */
    long *take;                   /* [cfg.batch] the producer's current take */
    long *other;                  /* [cfg.batch] another rank's take, for the global lengths */
    pthread_mutex_t lock;
    pthread_cond_t ready_cv;      /* producer -> caller: a batch, the end or an error */
    pthread_cond_t free_cv;       /* caller -> producer: a slot released, or stop */
    int first, used, held;
    long *slot_k;                 /* [depth] the global batch index each slot holds */
    long held_k;                  /* that of the batch the caller holds (or held last) */
    int done, stop;
    ds_status err;                /* the producer's failure, re-raised by next */
    char msg[1024];               /* its message: ds_last_error is thread-local */
    pthread_t thread;
};

/* x [count] -> (x - mean) / std over all values, std unbiased (n - 1) as
 * torch's Tensor.std() in deepspeech.pytorch. Where torch would divide by
 * zero or NaN (one value, or all equal) only the mean is subtracted. */
static void normalize_utterance(float *x, size_t count)
{
    if (count == 0)
        return;
    double sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += x[i];
    double mean = sum / (double)count, ss = 0;
    for (size_t i = 0; i < count; i++)   /* two passes: no cancellation */
        ss += (x[i] - mean) * (x[i] - mean);
    double sd = count > 1 ? sqrt(ss / (double)(count - 1)) : 0;
    float m = (float)mean, inv = sd > 0 ? (float)(1.0 / sd) : 1.0f;
    for (size_t i = 0; i < count; i++)
        x[i] = (x[i] - m) * inv;
}

/* x [frames][dim], mean [dim], std [dim]; a zero std only centres. */
static void normalize_global(float *x, int frames, int dim, const float *mean, const float *std)
{
    for (int t = 0; t < frames; t++) {
        float *row = x + (size_t)t * dim;
        for (int j = 0; j < dim; j++) {
            float c = row[j] - mean[j];
            row[j] = std[j] > 0 ? c / std[j] : c;
        }
    }
}

void ds_normalize(float *x, int frames, int dim, ds_norm norm, const float *mean, const float *std)
{
    if (norm == DS_NORM_UTTERANCE)
        normalize_utterance(x, (size_t)frames * dim);
    else if (norm == DS_NORM_GLOBAL && mean && std)
        normalize_global(x, frames, dim, mean, std);
}

/* ---- augmentation ---- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* The masks of batch k depend on (seed, epoch, k, rank) only, never on the
 * prefetch depth or on timing. */
static void aug_rng(const ds_loader_cfg *c, long k, ds_rng *r)
{
    uint64_t h = mix64(c->seed ^ 0x5bd1e9955bd1e995ULL);
    h = mix64(h ^ (uint64_t)(uint32_t)c->epoch);
    h = mix64(h ^ (uint64_t)k);
    h = mix64(h ^ (uint64_t)(uint32_t)c->rank);
    ds_rng_seed(r, h);
}

/* SpecAugment on x [len][dim] (the real frames only): masks set to 0, the
 * mean after normalisation. Width 0 is a possible draw, hence "up to". */
static void spec_augment(const ds_specaug *a, ds_rng *r, float *x, int len, int dim)
{
    for (int m = 0; m < a->freq_masks; m++) {
        int w = ds_rng_int(r, 0, a->freq_width < dim ? a->freq_width : dim);
        int f0 = ds_rng_int(r, 0, dim - w);
        for (int t = 0; t < len; t++)
            memset(x + (size_t)t * dim + f0, 0, (size_t)w * sizeof *x);
    }
    for (int m = 0; m < a->time_masks; m++) {
        int w = ds_rng_int(r, 0, a->time_width < len ? a->time_width : len);
        int t0 = ds_rng_int(r, 0, len - w);
        memset(x + (size_t)t0 * dim, 0, (size_t)w * dim * sizeof *x);
    }
}

/* ---- the producer ---- */

static ds_status check_take(const ds_loader *l, const long *take /* [n] */, int n, int *t_max)
{
    const ds_dataset *d = l->cfg.data;
    *t_max = 0;
    for (int j = 0; j < n; j++) {
        long i = take[j];
        if (i < 0 || i >= d->n)
            return DS_FAIL(DS_ERR_ARG, "sampler gave utterance %ld of a %ld-utterance file", i, d->n);
        if (d->frames[i] > l->cfg.max_frames)
            return DS_FAIL(DS_ERR_ARG, "utterance %s: %d frames, more than max_frames %d",
                           d->ids[i], (int)d->frames[i], l->cfg.max_frames);
        if (d->label_length[i] > l->cfg.max_labels)
            return DS_FAIL(DS_ERR_ARG, "utterance %s: %d labels, more than max_labels %d",
                           d->ids[i], (int)d->label_length[i], l->cfg.max_labels);
        *t_max = d->frames[i] > *t_max ? d->frames[i] : *t_max;
    }
    return DS_OK;
}

/* Utterance i's labels -> b's slot j, appended after *off labels. */
static void copy_labels(const ds_dataset *d, long i, ds_batch *b, int j, int *off)
{
    const uint8_t *src = d->labels + d->label_offset[i];
    int len = d->label_length[i];
    for (int m = 0; m < len; m++)
        b->labels[*off + m] = src[m];
    b->label_off[j] = *off;
    b->label_len[j] = len;
    *off += len;
}

/* Global batch k's take [n] -> b: read, pad, normalise, augment, labels. */
static ds_status fill_batch(ds_loader *l, long k, const long *take, int n, ds_batch *b)
{
    ds_dataset *d = l->cfg.data;
    const int f = l->f;
    int t_max, off = 0;
    DS_TRY(check_take(l, take, n, &t_max));
    ds_rng r;
    aug_rng(&l->cfg, k, &r);
    b->n = n;
    b->t = t_max;
    for (int j = 0; j < n; j++) {
        long i = take[j];
        int len = d->frames[i];
        float *x = b->features + (size_t)j * t_max * f;   /* [t_max][f] */
        DS_TRY(ds_dataset_read(d, i, x));
        memset(x + (size_t)len * f, 0, (size_t)(t_max - len) * f * sizeof *x);
        ds_normalize(x, len, f, l->cfg.norm, d->mean, d->std);
        spec_augment(&l->cfg.aug, &r, x, len, f);
        b->lengths[j] = len;
        copy_labels(d, i, b, j, &off);
    }
    return DS_OK;
}

static ds_status lock(ds_loader *l)
{
    int rc = pthread_mutex_lock(&l->lock);
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_mutex_lock: %s", strerror(rc)) : DS_OK;
}

static ds_status unlock(ds_loader *l)
{
    int rc = pthread_mutex_unlock(&l->lock);
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_mutex_unlock: %s", strerror(rc)) : DS_OK;
}

/* Waits for a free slot -> *slot, or *stopped when the caller stops. */
static ds_status wait_slot(ds_loader *l, int *slot, int *stopped)
{
    DS_TRY(lock(l));
    int rc = 0;
    while (rc == 0 && l->used == l->cfg.depth && !l->stop)
        rc = pthread_cond_wait(&l->free_cv, &l->lock);
    *stopped = l->stop;
    *slot = (l->first + l->used) % l->cfg.depth;
    DS_TRY(unlock(l));
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_cond_wait: %s", strerror(rc)) : DS_OK;
}

static ds_status publish(ds_loader *l)
{
    DS_TRY(lock(l));
    l->used++;
    int rc = pthread_cond_signal(&l->ready_cv);
    DS_TRY(unlock(l));
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_cond_signal: %s", strerror(rc)) : DS_OK;
}

/* Every rank's share of global batch k, from the sampler all ranks share:
 * the frames of all its utterances into b's global lengths (ranks > 1).
 * *whole = 0 when some rank's share is empty: every rank skips that batch
 * alike, so no rank waits in a step the others do not take. */
static ds_status global_share(ds_loader *l, long k, ds_batch *b, int *whole)
{
    const int ranks = ds_sampler_ranks(l->cfg.sampler);
    *whole = 1;
    b->n_global = 0;
    for (int r = 0; r < ranks && *whole; r++) {
        int n = ds_sampler_take(l->cfg.sampler, l->cfg.epoch, k, r, l->other);
        if (n < 0)
            return DS_ERR_ARG;   /* recorded by the sampler */
        *whole = n > 0;
        for (int j = 0; ranks > 1 && j < n; j++)
            b->global_lengths[b->n_global++] = l->cfg.data->frames[l->other[j]];
    }
    return DS_OK;
}

static ds_status produce_epoch(ds_loader *l)
{
    const long n_batches = ds_sampler_batches(l->cfg.sampler);
    for (long k = l->cfg.first_batch; k < n_batches; k++) {
        int n = ds_sampler_take(l->cfg.sampler, l->cfg.epoch, k, l->cfg.rank, l->take);
        if (n < 0)
            return DS_ERR_ARG;   /* recorded by the sampler */
        int slot, stopped, whole;
        DS_TRY(wait_slot(l, &slot, &stopped));
        if (stopped)
            return DS_OK;
        DS_TRY(global_share(l, k, &l->ring[slot], &whole));
        if (!whole)
            continue;            /* the short batch leaves some rank without utterances */
        DS_TRY(fill_batch(l, k, l->take, n, &l->ring[slot]));
        l->slot_k[slot] = k;   /* the slot is the producer's until published */
        DS_TRY(publish(l));
    }
    return DS_OK;
}

static void *producer_main(void *arg)
{
    ds_loader *l = arg;
    ds_status st = produce_epoch(l);
    /* If the lock itself fails there is nobody to tell: the fields are still
     * set and the caller woken, which is the best that can be done. */
    int rc = pthread_mutex_lock(&l->lock);
    if (st != DS_OK) {
        l->err = st;
        snprintf(l->msg, sizeof l->msg, "%s", ds_last_error());
    }
    l->done = 1;
    if (pthread_cond_broadcast(&l->ready_cv) != 0)
        fprintf(stderr, "loader: pthread_cond_broadcast failed\n");
    if (rc == 0 && pthread_mutex_unlock(&l->lock) != 0)
        fprintf(stderr, "loader: pthread_mutex_unlock failed\n");
    return NULL;
}

/* ---- the caller's side ---- */

static ds_status check_cfg(const ds_loader_cfg *c)
{
    if (!c->data || !c->sampler)
        return DS_FAIL(DS_ERR_ARG, "loader: no dataset or sampler");
    if (c->first_batch < 0)
        return DS_FAIL(DS_ERR_ARG, "loader: first batch %ld", c->first_batch);
    if (c->depth < 2 || c->batch < 1 || c->max_frames < 1 || c->max_labels < 0)
        return DS_FAIL(DS_ERR_ARG, "loader: depth %d (>= 2), batch %d, max_frames %d, max_labels %d",
                       c->depth, c->batch, c->max_frames, c->max_labels);
    if (ds_sampler_batch(c->sampler) > c->batch)
        return DS_FAIL(DS_ERR_ARG, "loader: buffers of %d utterances for a sampler batch of %d",
                       c->batch, ds_sampler_batch(c->sampler));
    if (c->rank < 0 || c->rank >= ds_sampler_ranks(c->sampler))
        return DS_FAIL(DS_ERR_ARG, "loader: rank %d of %d", c->rank, ds_sampler_ranks(c->sampler));
    if (c->norm == DS_NORM_GLOBAL && (!c->data->mean || !c->data->std))
        return DS_FAIL(DS_ERR_ARG, "loader: global normalisation needs /stats in %s", c->data->path);
    const ds_specaug *a = &c->aug;
    if (a->freq_masks < 0 || a->freq_width < 0 || a->time_masks < 0 || a->time_width < 0)
        return DS_FAIL(DS_ERR_ARG, "loader: negative SpecAugment setting");
    return DS_OK;
}

static void free_buffers(ds_loader *l)
{
    if (l->ring)
        for (int s = 0; s < l->cfg.depth; s++)
            ds_batch_free(&l->ring[s]);
    free(l->ring);
    free(l->take);
    free(l->other);
    free(l->slot_k);
    free(l);
}

static ds_status alloc_buffers(ds_loader *l)
{
    const ds_loader_cfg *c = &l->cfg;
    l->ring = calloc((size_t)c->depth, sizeof *l->ring);
    l->take = malloc((size_t)c->batch * sizeof *l->take);
    l->other = malloc((size_t)c->batch * sizeof *l->other);
    l->slot_k = malloc((size_t)c->depth * sizeof *l->slot_k);
    if (!l->ring || !l->take || !l->other || !l->slot_k)
        return DS_FAIL(DS_ERR_MEM, "loader: ring of %d", c->depth);
    for (int s = 0; s < c->depth; s++) {
        DS_TRY(ds_batch_alloc(&l->ring[s], c->batch, c->max_frames, l->f, c->batch * c->max_labels));
        DS_TRY(ds_batch_alloc_global(&l->ring[s], c->batch * ds_sampler_ranks(c->sampler)));
    }
    return DS_OK;
}

/* Mutex, conditions and thread; on failure undoes what it made. */
static ds_status start_thread(ds_loader *l)
{
    int rc = pthread_mutex_init(&l->lock, NULL);
    if (rc)
        return DS_FAIL(DS_ERR_MEM, "loader: pthread_mutex_init: %s", strerror(rc));
    if ((rc = pthread_cond_init(&l->ready_cv, NULL)) != 0)
        goto no_ready;
    if ((rc = pthread_cond_init(&l->free_cv, NULL)) != 0)
        goto no_free;
    if ((rc = pthread_create(&l->thread, NULL, producer_main, l)) != 0)
        goto no_thread;
    return DS_OK;
no_thread:
    pthread_cond_destroy(&l->free_cv);
no_free:
    pthread_cond_destroy(&l->ready_cv);
no_ready:
    pthread_mutex_destroy(&l->lock);
    return DS_FAIL(DS_ERR_MEM, "loader: starting the thread: %s", strerror(rc));
}

ds_status ds_loader_start(const ds_loader_cfg *cfg, ds_loader **out)
{
    *out = NULL;
    DS_TRY(check_cfg(cfg));
    ds_loader *l = calloc(1, sizeof *l);
    if (!l)
        return DS_FAIL(DS_ERR_MEM, "loader");
    l->cfg = *cfg;
    l->f = cfg->data->n_features;
    l->held_k = -1;
    ds_status st = alloc_buffers(l);
    if (st == DS_OK)
        st = start_thread(l);
    if (st != DS_OK) {
        free_buffers(l);
        return st;
    }
    *out = l;
    return DS_OK;
}

/* now + seconds on the clock pthread_cond_timedwait measures (realtime). */
static void deadline(double seconds, struct timespec *t)
{
    clock_gettime(CLOCK_REALTIME, t);
    if (seconds <= 0)
        return;
    const double whole = floor(seconds);
    t->tv_sec += (time_t)whole;
    t->tv_nsec += (long)((seconds - whole) * 1e9);
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

long ds_loader_batch_index(const ds_loader *l) { return l->held_k; }

ds_status ds_loader_next(ds_loader *l, const ds_batch **out)
{
    *out = NULL;
    DS_TRY(lock(l));
    int rc = 0;
    if (l->held) {   /* the previous batch goes back to the producer */
        l->first = (l->first + 1) % l->cfg.depth;
        l->used--;
        l->held = 0;
        rc = pthread_cond_signal(&l->free_cv);
    }
    struct timespec until;
    deadline(l->cfg.timeout_s, &until);
    while (rc == 0 && l->used == 0 && !l->done)
        rc = l->cfg.timeout_s > 0 ? pthread_cond_timedwait(&l->ready_cv, &l->lock, &until)
                                  : pthread_cond_wait(&l->ready_cv, &l->lock);
    /* batches made before a failure come first: the error surfaces where
     * its batch would have */
    if (rc == 0 && l->used > 0) {
        l->held = 1;
        *out = &l->ring[l->first];
        l->held_k = l->slot_k[l->first];
    }
    ds_status err = l->err;
    const long after = l->held_k;
    DS_TRY(unlock(l));
    if (rc == ETIMEDOUT)
        return DS_FAIL(DS_ERR_IO, "%s: no batch read in %g s (--timeout; epoch %d, after global "
                       "batch %ld): the file system stalls or the reader is stuck",
                       l->cfg.data->path, l->cfg.timeout_s, l->cfg.epoch, after);
    if (rc)
        return DS_FAIL(DS_ERR_ARG, "loader: pthread_cond: %s", strerror(rc));
    if (!*out && err != DS_OK)
        return DS_FAIL(err, "loader thread: %s", l->msg);   /* msg is final once done */
    return DS_OK;
}

void ds_loader_stop(ds_loader *l)
{
    if (!l)
        return;
    int rc = pthread_mutex_lock(&l->lock);
    l->stop = 1;
    int rc_b = pthread_cond_broadcast(&l->free_cv);
    if (rc == 0)
        rc = pthread_mutex_unlock(&l->lock);
    if (rc || rc_b)
        fprintf(stderr, "loader: signalling stop: %s\n", strerror(rc ? rc : rc_b));
    int rc_j = pthread_join(l->thread, NULL);
    if (rc_j) {   /* the thread may still use the buffers: leak them rather */
        fprintf(stderr, "loader: pthread_join: %s\n", strerror(rc_j));
        return;
    }
    pthread_cond_destroy(&l->free_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_mutex_destroy(&l->lock);
    free_buffers(l);
}
