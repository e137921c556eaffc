/* loader.c - batches for one rank, read and padded by reader threads; see
 * loader.h.
 *
 * cfg.threads reader threads fill a ring of `depth` batch buffers; the
 * caller consumes them in epoch order. Batches are numbered by sequence:
 * seq is the q-th batch the epoch delivers (the sampler's whole batches
 * only), and lives in slot seq % depth. Under `lock`:
 *   next_k    the next global batch a reader claims (claims go in order, so
 *             seq order is the sampler's order whatever the timing),
 *   next_seq  the seq the next claim gets,
 *   out       the seq the caller's next ds_loader_next returns (or holds
 *             while held = 1),
 *   ready[s]  slot s holds a finished batch: that of seq out when
 *             s = out % depth, as no other seq in use maps there,
 *   end_seq   the epoch's batch count once the claims ran out, else -1,
 *   err_seq   the seq whose making failed first (the lowest), else -1.
 * A reader fills its slot outside the lock; seq may take slot seq % depth
 * once the caller has released seq - depth (seq < out + depth, counting
 * the held slot as in use). Each batch's content depends on (seed, epoch,
 * k, rank) only, never on which reader made it. */
#include "loader.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

/* One reader thread and its own buffers. */
typedef struct {
    ds_loader *l;
    long *take;                   /* [cfg.batch] its batch's utterances */
    long *other;                  /* [cfg.batch] another rank's take, for the global lengths */
    size_t *row;                  /* [cfg.batch] where each lies in raw */
    void *raw;                    /* [cfg.batch * max_frames * f] stored rows (float16 or float32) */
    pthread_t thread;
    int started;
} ds_reader;

struct ds_loader {
    ds_loader_cfg cfg;            /* depth and threads resolved */
    int f;                        /* features per frame */
    ds_batch *ring;               /* [depth] */
    long *slot_k;                 /* [depth] the global batch index each slot holds */
    int *ready;                   /* [depth] 1: the slot's batch is made */
    ds_reader *readers;           /* [threads] */
    pthread_mutex_t lock;
    pthread_cond_t ready_cv;      /* readers -> caller: a batch, the end or an error */
    pthread_cond_t free_cv;       /* caller -> readers: a slot released, or stop */
    long next_k, next_seq, out, end_seq, err_seq;
    int held;
    long held_k;                  /* the global batch the caller holds (or held last) */
    int stop;
    ds_status err;                /* the failure at err_seq, re-raised by next */
    char msg[1024];               /* its message: ds_status_last_error is thread-local */
};

/* GCC/Clang vector extensions: 4 float lanes, one SSE2 register on baseline
 * x86-64 and one NEON register on aarch64 (wider types would be split and
 * spilled there). */
typedef float f32x4 __attribute__((vector_size(16)));

#define NORM_BLOCK 256   /* values per float block sum: 16 lanes x 16 values */

/* Sum of x [n] - c, or of (x - c)^2 (squares): 16 float lanes (4 registers)
 * over blocks of NORM_BLOCK values, each block's total added in double. A
 * lane adds 16 values, so a block's rounding error stays near float's 6e-8
 * times a few, where a float running sum over a 270,000-value utterance
 * would drift by 1e-4. Inlined twice with squares constant. */
static inline double block_sum(const float *x, size_t n, float c, int squares)
{
    const f32x4 cv = {c, c, c, c};
    double total = 0;
    size_t k = 0;
    for (; k + NORM_BLOCK <= n; k += NORM_BLOCK) {
        f32x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (size_t m = k; m < k + NORM_BLOCK; m += 16) {
            f32x4 u0, u1, u2, u3;
            memcpy(&u0, x + m, sizeof u0);
            memcpy(&u1, x + m + 4, sizeof u1);
            memcpy(&u2, x + m + 8, sizeof u2);
            memcpy(&u3, x + m + 12, sizeof u3);
            u0 -= cv;
            u1 -= cv;
            u2 -= cv;
            u3 -= cv;
            if (squares) {
                u0 *= u0;
                u1 *= u1;
                u2 *= u2;
                u3 *= u3;
            }
            a0 += u0;
            a1 += u1;
            a2 += u2;
            a3 += u3;
        }
        const f32x4 a = (a0 + a1) + (a2 + a3);
        total += (double)((a[0] + a[1]) + (a[2] + a[3]));
    }
    for (; k < n; k++) {
        const double v = (double)x[k] - c;
        total += squares ? v * v : v;
    }
    return total;
}

static double sum_of(const float *x, size_t n) { return block_sum(x, n, 0.0f, 0); }
static double squares_about(const float *x, size_t n, float c) { return block_sum(x, n, c, 1); }

/* x [n] = (x - m) * inv, in float. */
static void scale(float *x, size_t n, float m, float inv)
{
    const f32x4 mv = {m, m, m, m}, iv = {inv, inv, inv, inv};
    size_t k = 0;
    for (; k + 4 <= n; k += 4) {
        f32x4 u;
        memcpy(&u, x + k, sizeof u);
        u = (u - mv) * iv;
        memcpy(x + k, &u, sizeof u);
    }
    for (; k < n; k++)
        x[k] = (x[k] - m) * inv;
}

/* x [count] -> (x - mean) / std over all values, std unbiased (n - 1) as
 * torch's Tensor.std() in deepspeech.pytorch; two passes (no cancellation).
 * Where torch would divide by zero or NaN (one value, or all equal) only
 * the mean is subtracted. */
static void normalize_utterance(float *x, size_t count)
{
    if (count == 0)
        return;
    const double mean = sum_of(x, count) / (double)count;
    const float m = (float)mean;
    /* squares about the float mean m: they exceed those about the exact one
     * by n (m - mean)^2, some 1e-14 of them, nothing */
    const double ss = squares_about(x, count, m);
    const double sd = count > 1 ? sqrt(ss / (double)(count - 1)) : 0;
    scale(x, count, m, sd > 0 ? (float)(1.0 / sd) : 1.0f);
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

void ds_loader_normalize(float *x, int frames, int dim, ds_norm norm, const float *mean, const float *std)
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

/* ---- a reader: one batch ---- */

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

/* Every rank's share of global batch k (the sampler all ranks share): the
 * frames of all its utterances -> b's global lengths (ranks > 1). other
 * [cfg.batch] is scratch. */
static ds_status global_lengths(const ds_loader *l, long k, ds_batch *b, long *other)
{
    const int ranks = ds_sampler_ranks(l->cfg.sampler);
    b->n_global = 0;
    for (int r = 0; ranks > 1 && r < ranks; r++) {
        int n = ds_sampler_take(l->cfg.sampler, l->cfg.epoch, k, r, other);
        if (n < 0)
            return DS_ERR_ARG;   /* recorded by the sampler */
        for (int j = 0; j < n; j++)
            b->global_lengths[b->n_global++] = l->cfg.data->frames[other[j]];
    }
    return DS_OK;
}

/* Global batch k's take [n] -> b: one read of all its rows into the
 * reader's staging buffer, then per utterance widen (with the finiteness
 * check), pad, normalise, augment, labels. */
static ds_status fill_batch(ds_reader *rd, long k, int n, ds_batch *b)
{
    const ds_loader *l = rd->l;
    ds_dataset *d = l->cfg.data;
    const int f = l->f;
    const size_t esize = ds_dtype_size(d->feature_dtype);
    int t_max, off = 0;
    DS_TRY(check_take(l, rd->take, n, &t_max));
    DS_TRY(global_lengths(l, k, b, rd->other));
    DS_TRY(ds_dataset_read_raw(d, rd->take, n, rd->raw, rd->row));
    ds_rng r;
    aug_rng(&l->cfg, k, &r);
    /* a bucket's length (--bucket-frames), within the buffers' room */
    const int t_pad = ds_batch_round_frames(t_max, l->cfg.round_frames);
    t_max = t_pad <= b->cap_t ? t_pad : t_max;
    b->n = n;
    b->t = t_max;
    for (int j = 0; j < n; j++) {
        long i = rd->take[j];
        int len = d->frames[i];
        float *x = b->features + (size_t)j * t_max * f;   /* [t_max][f] */
        DS_TRY(ds_dataset_widen(d, i, (const char *)rd->raw + rd->row[j] * f * esize, x));
        memset(x + (size_t)len * f, 0, (size_t)(t_max - len) * f * sizeof *x);
        ds_loader_normalize(x, len, f, l->cfg.norm, d->mean, d->std);
        spec_augment(&l->cfg.aug, &r, x, len, f);
        b->lengths[j] = len;
        copy_labels(d, i, b, j, &off);
    }
    return DS_OK;
}

/* ---- a reader: claiming, publishing ---- */

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

/* Records failure st at seq (under the lock): the lowest seq's failure is
 * the one the caller meets, after the batches before it. */
static void record_error(ds_loader *l, long seq, ds_status st)
{
    if (l->err_seq >= 0 && l->err_seq <= seq)
        return;
    l->err_seq = seq;
    l->err = st;
    snprintf(l->msg, sizeof l->msg, "%s", ds_status_last_error());
}

/* Under the lock: the next global batch every rank has a share of -> *k,
 * its seq -> *seq and rd's take -> *n; *seq = -1 when the epoch has no more
 * (end_seq set) or a failure or a stop ends the claims. A short global
 * batch that leaves some rank's take empty is skipped by every rank alike,
 * so no rank waits in a step the others do not take. */
static ds_status claim(ds_reader *rd, long *k, long *seq, int *n)
{
    ds_loader *l = rd->l;
    const long n_batches = ds_sampler_batches(l->cfg.sampler);
    *seq = -1;
    while (!l->stop && l->err_seq < 0 && l->next_k < n_batches) {
        const long kk = l->next_k++;
        const int whole = ds_sampler_whole(l->cfg.sampler, l->cfg.epoch, kk);
        const int got = whole > 0 ? ds_sampler_take(l->cfg.sampler, l->cfg.epoch, kk, l->cfg.rank,
                                                    rd->take)
                                  : whole;
        if (got < 0) {   /* recorded by the sampler */
            record_error(l, l->next_seq, DS_ERR_ARG);
            break;
        }
        if (whole == 0)
            continue;
        *k = kk;
        *seq = l->next_seq++;
        *n = got;
        return DS_OK;
    }
    if (l->end_seq < 0 && l->next_k >= n_batches)
        l->end_seq = l->next_seq;
    return DS_OK;
}

/* Under the lock: waits until seq's slot is free (the caller released
 * seq - depth) or a stop; *stopped then. */
static ds_status wait_free(ds_loader *l, long seq, int *stopped)
{
    int rc = 0;
    while (rc == 0 && seq >= l->out + l->cfg.depth && !l->stop)
        rc = pthread_cond_wait(&l->free_cv, &l->lock);
    *stopped = l->stop;
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_cond_wait: %s", strerror(rc)) : DS_OK;
}

/* Under the lock: batch seq (global batch k) made, or failed with st. */
static ds_status publish(ds_loader *l, long seq, long k, ds_status st)
{
    const int slot = (int)(seq % l->cfg.depth);
    if (st == DS_OK) {
        l->slot_k[slot] = k;
        l->ready[slot] = 1;
    } else {
        record_error(l, seq, st);
    }
    int rc = pthread_cond_broadcast(&l->ready_cv);
    return rc ? DS_FAIL(DS_ERR_ARG, "loader: pthread_cond_broadcast: %s", strerror(rc)) : DS_OK;
}

/* Claims, waits for the slot and fills it, until the claims end. A failure
 * of the lock itself ends the reader with the failure recorded as best it
 * can be. */
static ds_status read_batches(ds_reader *rd)
{
    ds_loader *l = rd->l;
    for (;;) {
        long k = 0, seq;
        int n = 0, stopped = 0;
        DS_TRY(lock(l));
        ds_status st = claim(rd, &k, &seq, &n);
        if (st == DS_OK && seq >= 0)
            st = wait_free(l, seq, &stopped);
        if (st == DS_OK && seq < 0)
            st = pthread_cond_broadcast(&l->ready_cv) == 0 ? DS_OK   /* the end, or the failure */
                 : DS_FAIL(DS_ERR_ARG, "loader: pthread_cond_broadcast failed");
        DS_TRY(unlock(l));
        if (st != DS_OK || seq < 0 || stopped)
            return st;
        ds_status made = fill_batch(rd, k, n, &l->ring[seq % l->cfg.depth]);
        DS_TRY(lock(l));
        st = publish(l, seq, k, made);
        DS_TRY(unlock(l));
        DS_TRY(st);
    }
}

static void *reader_main(void *arg)
{
    ds_reader *rd = arg;
    ds_loader *l = rd->l;
    ds_status st = read_batches(rd);
    if (st == DS_OK)
        return NULL;
    /* a lock or condition failed: nobody else can be told; stop the epoch
     * where it stands (the fields are set and the caller woken even if the
     * lock is broken, the best that can be done) */
    int rc = pthread_mutex_lock(&l->lock);
    record_error(l, l->out, st);
    if (pthread_cond_broadcast(&l->ready_cv) != 0)
        fprintf(stderr, "loader: pthread_cond_broadcast failed\n");
    if (rc == 0 && pthread_mutex_unlock(&l->lock) != 0)
        fprintf(stderr, "loader: pthread_mutex_unlock failed\n");
    return NULL;
}

/* ---- the caller's side ---- */

/* cfg with 0 for depth and threads resolved to the defaults. */
static ds_loader_cfg resolved(const ds_loader_cfg *c)
{
    ds_loader_cfg r = *c;
    r.depth = c->depth ? c->depth : DS_LOADER_DEFAULT_DEPTH;
    r.threads = c->threads ? c->threads : DS_LOADER_DEFAULT_THREADS;
    return r;
}

static ds_status check_cfg(const ds_loader_cfg *c)
{
    if (!c->data || !c->sampler)
        return DS_FAIL(DS_ERR_ARG, "loader: no dataset or sampler");
    if (c->first_batch < 0)
        return DS_FAIL(DS_ERR_ARG, "loader: first batch %ld", c->first_batch);
    if (c->depth < 2 || c->threads < 1 || c->threads > 256 || c->batch < 1 || c->max_frames < 1
        || c->max_labels < 0)
        return DS_FAIL(DS_ERR_ARG, "loader: depth %d (>= 2), threads %d (1..256), batch %d, "
                       "max_frames %d, max_labels %d", c->depth, c->threads, c->batch,
                       c->max_frames, c->max_labels);
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
    for (int t = 0; l->readers && t < l->cfg.threads; t++) {
        free(l->readers[t].take);
        free(l->readers[t].other);
        free(l->readers[t].row);
        free(l->readers[t].raw);
    }
    free(l->readers);
    free(l->ring);
    free(l->slot_k);
    free(l->ready);
    free(l);
}

/* A reader's buffers: its take, another rank's, the rows, and a staging
 * buffer that holds a full batch as stored. */
static ds_status alloc_reader(ds_loader *l, ds_reader *rd)
{
    const ds_loader_cfg *c = &l->cfg;
    const size_t esize = ds_dtype_size(c->data->feature_dtype);
    const size_t raw = (size_t)c->batch * (size_t)c->max_frames * (size_t)l->f * esize;
    rd->l = l;
    rd->take = malloc((size_t)c->batch * sizeof *rd->take);
    rd->other = malloc((size_t)c->batch * sizeof *rd->other);
    rd->row = malloc((size_t)c->batch * sizeof *rd->row);
    rd->raw = malloc(raw);
    if (!rd->take || !rd->other || !rd->row || !rd->raw)
        return DS_FAIL(DS_ERR_MEM, "loader: a reader's staging buffer of %zu bytes", raw);
    return DS_OK;
}

static ds_status alloc_buffers(ds_loader *l)
{
    const ds_loader_cfg *c = &l->cfg;
    l->ring = calloc((size_t)c->depth, sizeof *l->ring);
    l->slot_k = calloc((size_t)c->depth, sizeof *l->slot_k);
    l->ready = calloc((size_t)c->depth, sizeof *l->ready);
    l->readers = calloc((size_t)c->threads, sizeof *l->readers);
    if (!l->ring || !l->slot_k || !l->ready || !l->readers)
        return DS_FAIL(DS_ERR_MEM, "loader: ring of %d, %d readers", c->depth, c->threads);
    for (int s = 0; s < c->depth; s++) {
        DS_TRY(ds_batch_alloc(&l->ring[s], c->batch, ds_batch_round_frames(c->max_frames, c->round_frames),
                              l->f, c->batch * c->max_labels));
        DS_TRY(ds_batch_alloc_global(&l->ring[s], c->batch * ds_sampler_ranks(c->sampler)));
    }
    for (int t = 0; t < c->threads; t++)
        DS_TRY(alloc_reader(l, &l->readers[t]));
    return DS_OK;
}

static void stop_readers(ds_loader *l);

/* Mutex, conditions and threads; on failure undoes what it made. */
static ds_status start_threads(ds_loader *l)
{
    int rc = pthread_mutex_init(&l->lock, NULL);
    if (rc)
        return DS_FAIL(DS_ERR_MEM, "loader: pthread_mutex_init: %s", strerror(rc));
    if ((rc = pthread_cond_init(&l->ready_cv, NULL)) != 0)
        goto no_ready;
    if ((rc = pthread_cond_init(&l->free_cv, NULL)) != 0)
        goto no_free;
    for (int t = 0; t < l->cfg.threads; t++) {
        if ((rc = pthread_create(&l->readers[t].thread, NULL, reader_main, &l->readers[t])) != 0)
            goto no_thread;
        l->readers[t].started = 1;
    }
    return DS_OK;
no_thread:
    stop_readers(l);   /* those started */
    pthread_cond_destroy(&l->free_cv);
no_free:
    pthread_cond_destroy(&l->ready_cv);
no_ready:
    pthread_mutex_destroy(&l->lock);
    return DS_FAIL(DS_ERR_MEM, "loader: starting %d reader threads: %s", l->cfg.threads,
                   strerror(rc));
}

ds_status ds_loader_start(const ds_loader_cfg *cfg, ds_loader **out)
{
    *out = NULL;
    const ds_loader_cfg c = resolved(cfg);
    DS_TRY(check_cfg(&c));
    ds_loader *l = calloc(1, sizeof *l);
    if (!l)
        return DS_FAIL(DS_ERR_MEM, "loader");
    l->cfg = c;
    l->f = c.data->n_features;
    l->held_k = -1;
    l->next_k = c.first_batch;
    l->end_seq = l->err_seq = -1;
    ds_status st = alloc_buffers(l);
    if (st == DS_OK)
        st = start_threads(l);
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

/* Under the lock: whether next has something to return for seq out: its
 * batch, its failure, or the end. */
static int settled(const ds_loader *l)
{
    return l->ready[l->out % l->cfg.depth] || l->err_seq == l->out
           || (l->end_seq >= 0 && l->out >= l->end_seq);
}

ds_status ds_loader_next(ds_loader *l, const ds_batch **out)
{
    *out = NULL;
    DS_TRY(lock(l));
    int rc = 0;
    if (l->held) {   /* the previous batch goes back to the readers */
        l->ready[l->out % l->cfg.depth] = 0;
        l->out++;
        l->held = 0;
        rc = pthread_cond_broadcast(&l->free_cv);
    }
    struct timespec until;
    deadline(l->cfg.timeout_s, &until);
    while (rc == 0 && !settled(l))
        rc = l->cfg.timeout_s > 0 ? pthread_cond_timedwait(&l->ready_cv, &l->lock, &until)
                                  : pthread_cond_wait(&l->ready_cv, &l->lock);
    /* batches made before a failure come first: the error surfaces where
     * its batch would have */
    const int slot = (int)(l->out % l->cfg.depth);
    if (rc == 0 && l->ready[slot]) {
        l->held = 1;
        *out = &l->ring[slot];
        l->held_k = l->slot_k[slot];
    }
    const ds_status err = l->err_seq == l->out ? l->err : DS_OK;
    const long after = l->held_k;
    DS_TRY(unlock(l));
    if (rc == ETIMEDOUT)
        return DS_FAIL(DS_ERR_IO, "%s: no batch read in %g s (--timeout; epoch %d, after global "
                       "batch %ld): the file system stalls or the reader is stuck",
                       l->cfg.data->path, l->cfg.timeout_s, l->cfg.epoch, after);
    if (rc)
        return DS_FAIL(DS_ERR_ARG, "loader: pthread_cond: %s", strerror(rc));
    if (!*out && err != DS_OK)
        return DS_FAIL(err, "loader thread: %s", l->msg);   /* msg is final once err_seq is out */
    return DS_OK;
}

/* Sets stop, wakes the readers and joins those started; 0 when a join failed
 * (a reader may still use the buffers). */
static int join_readers(ds_loader *l)
{
    int rc = pthread_mutex_lock(&l->lock);
    l->stop = 1;
    int rc_b = pthread_cond_broadcast(&l->free_cv);
    if (rc == 0)
        rc = pthread_mutex_unlock(&l->lock);
    if (rc || rc_b)
        fprintf(stderr, "loader: signalling stop: %s\n", strerror(rc ? rc : rc_b));
    int joined = 1;
    for (int t = 0; t < l->cfg.threads; t++) {
        if (!l->readers[t].started)
            continue;
        int rc_j = pthread_join(l->readers[t].thread, NULL);
        if (rc_j) {
            fprintf(stderr, "loader: pthread_join: %s\n", strerror(rc_j));
            joined = 0;
        }
        l->readers[t].started = 0;
    }
    return joined;
}

static void stop_readers(ds_loader *l) { (void)join_readers(l); }

void ds_loader_stop(ds_loader *l)
{
    if (!l)
        return;
    if (!join_readers(l))   /* a reader may still use the buffers: leak them rather */
        return;
    pthread_cond_destroy(&l->free_cv);
    pthread_cond_destroy(&l->ready_cv);
    pthread_mutex_destroy(&l->lock);
    free_buffers(l);
}
