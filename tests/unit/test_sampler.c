/* test_sampler.c - the length-sorted, shuffled-by-batch sampler: coverage,
 * determinism, independence of the rank split, contiguity of global batches. */
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "testutil.h"

#define MAX_N 400

typedef struct {
    long n;
    long utts[MAX_N];    /* dataset indices: not 0..n-1, to catch mix-ups */
    int frames[MAX_N];   /* few distinct values: many ties */
    long pos[3 * MAX_N + 8];   /* utterance -> sorted position, from the test's own sort */
} corpus;

static int cmp_pair(const void *pa, const void *pb)
{
    const long *a = pa, *b = pb;   /* {frames, utt} */
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

static void make_corpus(corpus *c, long n, uint64_t seed)
{
    ds_rng r;
    ds_rng_seed(&r, seed);
    c->n = n;
    long pairs[MAX_N][2];
    for (long i = 0; i < n; i++) {
        c->utts[i] = 3 * (n - 1 - i) + 5;   /* descending, so sorting must move them */
        c->frames[i] = ds_rng_int(&r, 20, 40);
        pairs[i][0] = c->frames[i];
        pairs[i][1] = c->utts[i];
    }
    qsort(pairs, (size_t)n, sizeof pairs[0], cmp_pair);
    for (long p = 0; p < n; p++)
        c->pos[pairs[p][1]] = p;
}

static int frames_of(const corpus *c, long utt)
{
    for (long i = 0; i < c->n; i++)
        if (c->utts[i] == utt)
            return c->frames[i];
    return -1;
}

/* Every utterance once per epoch over all ranks and batches; takes <= B and
 * shortest first; the global batches are contiguous runs of the sorted order. */
static int check_cover(const corpus *c, int ranks, int batch)
{
    ds_sampler *s;
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, batch, ranks, 42, &s));
    long rb = (long)ranks * batch, nb = ds_sampler_batches(s);
    T_CHECK(nb == (c->n + rb - 1) / rb, "n %ld R %d B %d: %ld batches", c->n, ranks, batch, nb);
    long out[64];
    for (int epoch = 0; epoch < 3; epoch++) {
        int seen[3 * MAX_N + 8] = {0};
        long steps = 0;   /* batches in which every rank has an utterance */
        for (long k = 0; k < nb; k++) {
            long lo = -1, hi = -1, count = 0;
            int all = 1;
            for (int r = 0; r < ranks; r++) {
                int m = ds_sampler_take(s, epoch, k, r, out);
                T_CHECK(m >= 0 && m <= batch, "take of %d > B %d", m, batch);
                all = all && m > 0;
                for (int j = 0; j < m; j++) {
                    seen[out[j]]++;
                    long p = c->pos[out[j]];
                    lo = lo < 0 || p < lo ? p : lo;
                    hi = p > hi ? p : hi;
                    count++;
                    if (j > 0)
                        T_CHECK(frames_of(c, out[j - 1]) <= frames_of(c, out[j]), "take not sorted");
                }
            }
            /* contiguous and aligned: positions [g*R*B, g*R*B + count) */
            T_CHECK(count > 0 && hi - lo + 1 == count && lo % rb == 0,
                    "R %d B %d batch %ld: positions %ld..%ld for %ld utterances", ranks, batch, k,
                    lo, hi, count);
            steps += all;
            T_CHECK(ds_sampler_whole(s, epoch, k) == all, "n %ld R %d B %d batch %ld: whole %d, takes say %d",
                    c->n, ranks, batch, k, ds_sampler_whole(s, epoch, k), all);
        }
        /* what an epoch of training takes: the loader skips a batch that leaves a rank none */
        T_CHECK(ds_sampler_steps(s) == steps, "n %ld R %d B %d: %ld steps per epoch, counted %ld",
                c->n, ranks, batch, ds_sampler_steps(s), steps);
        for (long i = 0; i < c->n; i++)
            T_CHECK(seen[c->utts[i]] == 1, "n %ld R %d B %d epoch %d: utterance %ld seen %d times",
                    c->n, ranks, batch, epoch, c->utts[i], seen[c->utts[i]]);
    }
    T_CHECK(ds_sampler_take(s, 0, nb, 0, out) == 0, "k past the end");
    T_CHECK(ds_sampler_take(s, 0, 0, ranks, out) == 0, "rank past the end");
    ds_sampler_destroy(s);
    return 0;
}

/* The sorted lengths spread at most as much as within a global batch: the
 * largest max-min over windows of rb consecutive sorted lengths. */
static int check_spread(const corpus *c, int ranks, int batch)
{
    int sorted[MAX_N];
    for (long i = 0; i < c->n; i++)
        sorted[c->pos[c->utts[i]]] = c->frames[i];
    long rb = (long)ranks * batch;
    int bound = 0;
    for (long p = 0; p < c->n; p++) {
        long e = p + rb - 1 < c->n ? p + rb - 1 : c->n - 1;
        bound = sorted[e] - sorted[p] > bound ? sorted[e] - sorted[p] : bound;
    }
    ds_sampler *s;
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, batch, ranks, 7, &s));
    long out[64];
    for (long k = 0; k < ds_sampler_batches(s); k++) {
        int lo = 1 << 30, hi = -1;
        for (int r = 0; r < ranks; r++) {
            int m = ds_sampler_take(s, 3, k, r, out);
            for (int j = 0; j < m; j++) {
                int f = frames_of(c, out[j]);
                lo = f < lo ? f : lo;
                hi = f > hi ? f : hi;
            }
        }
        T_CHECK(hi - lo <= bound, "batch %ld: spread %d > %d", k, hi - lo, bound);
    }
    ds_sampler_destroy(s);
    return 0;
}

/* The whole epoch's takes of rank 0 of a sampler, concatenated into
 * out [n]; returns how many. */
static long epoch_takes(const ds_sampler *s, int epoch, int ranks, long *out)
{
    long m = 0;
    for (long k = 0; k < ds_sampler_batches(s); k++)
        for (int r = 0; r < ranks; r++)
            m += ds_sampler_take(s, epoch, k, r, out + m);
    return m;
}

static int check_determinism(const corpus *c)
{
    ds_sampler *a, *b, *other;
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 4, 1, 1234, &a));
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 4, 1, 1234, &b));
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 4, 1, 99, &other));
    static long ea[MAX_N], eb[MAX_N], e1[MAX_N];
    for (int epoch = 0; epoch < 4; epoch++) {
        long na = epoch_takes(a, epoch, 1, ea);
        /* b asked in a different epoch order: the cache must not leak state */
        epoch_takes(b, epoch + 1, 1, eb);
        long nb = epoch_takes(b, epoch, 1, eb);
        T_CHECK(na == c->n && nb == c->n && memcmp(ea, eb, sizeof(long) * na) == 0,
                "same seed, epoch %d: different orders", epoch);
        epoch_takes(a, epoch + 1, 1, e1);
        T_CHECK(memcmp(ea, e1, sizeof(long) * na) != 0, "epochs %d and %d: same order", epoch,
                epoch + 1);
        epoch_takes(other, epoch, 1, e1);
        T_CHECK(memcmp(ea, e1, sizeof(long) * na) != 0, "seeds 1234 and 99: same order");
    }
    ds_sampler_destroy(a);
    ds_sampler_destroy(b);
    ds_sampler_destroy(other);
    return 0;
}

/* A global batch of 24 split 1, 2, 3, 4, 6, 8, 12 and 24 ways: every
 * split's rank-ordered union of takes is the one rank's global batch, in
 * every epoch (issue 34: the sampler's batches the same for any rank count). */
static int check_split_any(const corpus *c)
{
    static const int ranks[] = {1, 2, 3, 4, 6, 8, 12, 24};
    enum { G = 24 };
    ds_sampler *one;
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, G, 1, 17, &one));
    for (size_t r = 1; r < sizeof ranks / sizeof *ranks; r++) {
        ds_sampler *s;
        T_OK(ds_sampler_create(c->utts, c->frames, c->n, G / ranks[r], ranks[r], 17, &s));
        T_CHECK(ds_sampler_batches(s) == ds_sampler_batches(one) && ds_sampler_steps(s) <= ds_sampler_steps(one),
                "%d ranks: %ld batches (%ld steps), one rank %ld (%ld)", ranks[r], ds_sampler_batches(s),
                ds_sampler_steps(s), ds_sampler_batches(one), ds_sampler_steps(one));
        for (int epoch = 0; epoch < 2; epoch++)
            for (long k = 0; k < ds_sampler_batches(one); k++) {
                long g1[G], gs[G];
                int m1 = ds_sampler_take(one, epoch, k, 0, g1), ms = 0;
                for (int q = 0; q < ranks[r]; q++)
                    ms += ds_sampler_take(s, epoch, k, q, gs + ms);
                T_CHECK(m1 == ms && memcmp(g1, gs, sizeof(long) * m1) == 0,
                        "%d ranks, epoch %d batch %ld: the union of takes is not one rank's batch", ranks[r],
                        epoch, k);
            }
        ds_sampler_destroy(s);
    }
    ds_sampler_destroy(one);
    return 0;
}

/* Global batches of (R=1, B=8) = rank-ordered union of (R=2, B=4) and (R=4, B=2). */
static int check_split(const corpus *c)
{
    ds_sampler *s1, *s2, *s4;
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 8, 1, 5, &s1));
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 4, 2, 5, &s2));
    T_OK(ds_sampler_create(c->utts, c->frames, c->n, 2, 4, 5, &s4));
    T_CHECK(ds_sampler_batches(s1) == ds_sampler_batches(s2) &&
            ds_sampler_batches(s1) == ds_sampler_batches(s4), "batch counts differ");
    for (int epoch = 0; epoch < 3; epoch++)
        for (long k = 0; k < ds_sampler_batches(s1); k++) {
            long g1[8], g2[8], g4[8];
            int m1 = ds_sampler_take(s1, epoch, k, 0, g1), m2 = 0, m4 = 0;
            for (int r = 0; r < 2; r++)
                m2 += ds_sampler_take(s2, epoch, k, r, g2 + m2);
            for (int r = 0; r < 4; r++)
                m4 += ds_sampler_take(s4, epoch, k, r, g4 + m4);
            T_CHECK(m1 == m2 && m1 == m4 && memcmp(g1, g2, sizeof(long) * m1) == 0 &&
                    memcmp(g1, g4, sizeof(long) * m1) == 0,
                    "epoch %d batch %ld: splits disagree", epoch, k);
        }
    ds_sampler_destroy(s1);
    ds_sampler_destroy(s2);
    ds_sampler_destroy(s4);
    return 0;
}

static int check_args(void)
{
    long u[2] = {0, 1};
    int f[2] = {5, 6};
    ds_sampler *s = (ds_sampler *)&u;
    T_CHECK(ds_sampler_create(u, f, 2, 0, 1, 0, &s) == DS_ERR_ARG && s == NULL, "batch 0 accepted");
    ds_status_clear_error();
    T_CHECK(ds_sampler_create(u, f, 2, 1, 0, 0, &s) == DS_ERR_ARG, "ranks 0 accepted");
    ds_status_clear_error();
    T_CHECK(ds_sampler_create(u, f, -1, 1, 1, 0, &s) == DS_ERR_ARG, "n < 0 accepted");
    ds_status_clear_error();
    T_OK(ds_sampler_create(NULL, NULL, 0, 4, 2, 0, &s));
    T_CHECK(ds_sampler_batches(s) == 0, "empty sampler has batches");
    ds_sampler_destroy(s);
    return 0;
}

int main(void)
{
    static corpus c;
    const long sizes[] = {1, 7, 33, 100, 257};
    const int ranks[] = {1, 2, 4}, batches[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        make_corpus(&c, sizes[i], 11 + i);
        for (int r = 0; r < 3; r++)
            for (int b = 0; b < 3; b++) {
                check_cover(&c, ranks[r], batches[b]);
                check_spread(&c, ranks[r], batches[b]);
            }
    }
    make_corpus(&c, 203, 3);   /* 203 = 25 * 8 + 3: a short last global batch */
    check_determinism(&c);
    check_split(&c);
    check_split_any(&c);
    check_args();
    return t_finish("test_sampler");
}
