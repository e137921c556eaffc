/* test_dataset.c - the HDF5 feature file: writer -> reader round trip of
 * every index field, the features (exact in float32, to half precision in
 * float16), ids, transcripts and /stats; a merge of parts equals one writer;
 * the writer's rejections, abort and the reader's describe. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alphabet.h"
#include "dataset.h"
#include "file.h"
#include "half.h"
#include "testutil.h"

#define N_UTTS 5
/* lengths across the 1024-row chunks of /features */
static const int utt_frames[N_UTTS] = {1, 7, 1500, 300, 2049};
static const int utt_labels[N_UTTS] = {1, 3, 40, 12, 60};

typedef struct {
    ds_feature_cfg feat;
    int nf;
    float *x[N_UTTS];          /* [utt_frames[i]][nf] */
    uint8_t *labels[N_UTTS];   /* [utt_labels[i]] */
    char id[N_UTTS][32], text[N_UTTS][96];
} corpus;

static char dir[] = "/tmp/dstrain_test_dataset_XXXXXX";

static const char *path_of(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Temporary files of the output name in the test's folder (file.h's
 * DEST.XXXXXX.tmp). */
static int count_tmp(const char *name)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += ds_file_tmp_is_of(e->d_name, name);
    if (d)
        closedir(d);
    return n;
}

static void make_corpus(corpus *c, ds_feature_cfg feat, uint64_t seed)
{
    ds_rng r;
    ds_rng_seed(&r, seed);
    c->feat = feat;
    c->nf = ds_feature_dim(&feat);
    for (int i = 0; i < N_UTTS; i++) {
        size_t n = (size_t)utt_frames[i] * c->nf;
        c->x[i] = malloc(n * sizeof *c->x[i]);
        for (size_t k = 0; k < n; k++)   /* per-feature offsets and scales, one subnormal-ish tail */
            c->x[i][k] = (float)(3.0 * (k % c->nf) - 4 + (1 + k % 3) * ds_rng_normal(&r))
                         * (k % 97 == 5 ? 1e-6f : 1.0f);
        c->labels[i] = malloc((size_t)utt_labels[i]);
        int len = 0;
        for (int k = 0; k < utt_labels[i]; k++) {
            c->labels[i][k] = (uint8_t)ds_rng_int(&r, 1, DS_ALPHABET_SIZE - 1);
            if (len < (int)sizeof c->text[i] - 1)
                c->text[i][len++] = ds_alphabet[c->labels[i][k]];
        }
        c->text[i][len] = '\0';
        snprintf(c->id[i], sizeof c->id[i], i == 3 ? "spk-\xc3\xbc-%04d" : "spk-%04d", i);
    }
}

static void free_corpus(corpus *c)
{
    for (int i = 0; i < N_UTTS; i++) {
        free(c->x[i]);
        free(c->labels[i]);
    }
}

/* Utterances [lo, hi) of c into path. */
static ds_status write_range(const corpus *c, const char *path, ds_dtype dt, int lo, int hi)
{
    ds_dataset_writer *w;
    DS_TRY(ds_dataset_writer_create(path, &c->feat, dt, &w));
    for (int i = lo; i < hi; i++) {
        ds_status st = ds_dataset_writer_add(w, c->id[i], c->text[i], c->labels[i], utt_labels[i], c->x[i],
                                             utt_frames[i]);
        if (st != DS_OK) {
            ds_dataset_writer_abort(w);
            return st;
        }
    }
    T_CHECK(ds_dataset_writer_count(w) == hi - lo, "writer count %ld", ds_dataset_writer_count(w));
    return ds_dataset_writer_close(w);
}

/* Index, labels, ids, transcripts of d against utterances [lo, hi) of c. */
static void check_index(const corpus *c, const ds_dataset *d, int lo, int hi)
{
    int64_t fo = 0, lo_off = 0;
    T_CHECK(d->n == hi - lo, "n %ld, expected %d", d->n, hi - lo);
    for (int i = lo; i < hi && d->n == hi - lo; i++) {
        long k = i - lo;
        /* each utterance starts a chunk (dataset.h: chunk layout) */
        fo = (fo + DS_DATASET_ALIGN_ROWS - 1) / DS_DATASET_ALIGN_ROWS * DS_DATASET_ALIGN_ROWS;
        T_CHECK(d->frame_offset[k] == fo && d->frames[k] == utt_frames[i],
                "utt %d: frame_offset %lld frames %d, expected %lld %d", i,
                (long long)d->frame_offset[k], d->frames[k], (long long)fo, utt_frames[i]);
        T_CHECK(d->label_offset[k] == lo_off && d->label_length[k] == utt_labels[i],
                "utt %d: label_offset %lld length %d", i, (long long)d->label_offset[k],
                d->label_length[k]);
        T_CHECK(memcmp(d->labels + lo_off, c->labels[i], (size_t)utt_labels[i]) == 0,
                "utt %d: labels differ", i);
        T_CHECK(strcmp(d->ids[k], c->id[i]) == 0, "utt %d: id '%s'", i, d->ids[k]);
        T_CHECK(strcmp(d->transcripts[k], c->text[i]) == 0, "utt %d: transcript '%s'", i,
                d->transcripts[k]);
        fo += utt_frames[i];
        lo_off += utt_labels[i];
    }
    T_CHECK(d->total_frames == fo && d->total_labels == lo_off, "totals %ld %ld", d->total_frames,
            d->total_labels);
}

/* x as stored in dt: itself, or rounded to the nearest float16. */
static float stored(float x, ds_dtype dt)
{
    return dt == DS_F32 ? x : ds_half_f32_from_f16(ds_half_f16_from_f32(x));
}

/* Features of d against c: bit-exact in float32, rounded to nearest in float16. */
static void check_features(const corpus *c, ds_dataset *d, int lo, int hi)
{
    float *buf = malloc((size_t)2049 * c->nf * sizeof *buf);
    for (int i = lo; i < hi; i++) {
        ds_status st = ds_dataset_read(d, i - lo, buf);
        T_CHECK(st == DS_OK, "read %d: %s", i, ds_status_last_error());
        size_t n = (size_t)utt_frames[i] * c->nf, bad = 0, far = 0;
        for (size_t k = 0; k < n && st == DS_OK; k++) {
            double want = c->x[i][k];
            bad += buf[k] != stored(c->x[i][k], d->feature_dtype);
            far += fabs(buf[k] - want) > fabs(want) * 0x1p-11 + 0x1p-25;   /* half an ulp */
        }
        T_CHECK(bad == 0 && far == 0, "utt %d (%s): %zu of %zu values differ, %zu by over half "
                "an ulp", i, ds_dtype_name(d->feature_dtype), bad, n, far);
    }
    free(buf);
}

/* Every half survives half -> float -> half; float -> half rounds to nearest
 * even, checked against the compiler's _Float16 where it has one. */
static void check_half(void)
{
    size_t bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ds_half_f32_from_f16((uint16_t)h);
        int nan = ((h >> 10) & 31) == 31 && (h & 0x3ff);
        bad += nan ? !isnan(f) || (ds_half_f16_from_f32(f) & 0x7c00) != 0x7c00
                   : ds_half_f16_from_f32(f) != h;
    }
    T_CHECK(bad == 0, "%zu halves do not round trip", bad);
#ifdef __FLT16_MAX__
    ds_rng r;
    ds_rng_seed(&r, 5);
    bad = 0;
    for (int k = 0; k < 2000000; k++) {
        uint32_t bits = (uint32_t)ds_rng_next(&r);
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isnan(f))
            continue;
        _Float16 want = (_Float16)f;
        uint16_t wb;
        memcpy(&wb, &want, sizeof wb);
        bad += ds_half_f16_from_f32(f) != wb;
    }
    T_CHECK(bad == 0, "%zu of 2e6 random floats round differently from _Float16", bad);
#endif
    T_CHECK(ds_half_f16_from_f32(7.9999f) == 0x4800 && ds_half_f16_from_f32(65519.0f) == 0x7bff
                && ds_half_f16_from_f32(65520.0f) == 0x7c00 && ds_half_f16_from_f32(0x1p-25f) == 0
                && ds_half_f16_from_f32(0x1.8p-25f) == 1,
            "rounding at the edges");
}

/* /stats against a two-pass computation over utterances [lo, hi). */
static void check_stats(const corpus *c, const ds_dataset *d, int lo, int hi)
{
    for (int j = 0; j < c->nf; j++) {
        double s = 0, ss = 0, n = 0;
        for (int i = lo; i < hi; i++)
            for (int t = 0; t < utt_frames[i]; t++) {
                s += c->x[i][(size_t)t * c->nf + j];
                n++;
            }
        double mean = s / n;
        for (int i = lo; i < hi; i++)
            for (int t = 0; t < utt_frames[i]; t++) {
                double v = c->x[i][(size_t)t * c->nf + j] - mean;
                ss += v * v;
            }
        double sd = sqrt(ss / n);
        T_CHECK(fabs(d->mean[j] - mean) <= 1e-6 * fabs(mean) + 1e-6, "feature %d: mean %.9g vs %.9g",
                j, d->mean[j], mean);
        T_CHECK(fabs(d->std[j] - sd) <= 1e-6 * sd + 1e-6, "feature %d: std %.9g vs %.9g", j,
                d->std[j], sd);
    }
}

static int round_trip(const corpus *c, ds_dtype dt, const char *name)
{
    ds_dataset *d;
    T_OK(write_range(c, path_of(name), dt, 0, N_UTTS));
    T_CHECK(access(path_of(name), F_OK) == 0, "%s missing", name);
    T_CHECK(count_tmp(name) == 0, "a temporary file of %s left behind", name);
    T_OK(ds_dataset_open(path_of(name), &d));
    T_CHECK(d->feature_dtype == dt, "dtype %s", ds_dtype_name(d->feature_dtype));
    T_CHECK(d->n_features == c->nf && d->feat.type == c->feat.type
                && d->feat.sample_rate == c->feat.sample_rate
                && d->feat.window_stride_s == c->feat.window_stride_s
                && ds_feature_dim(&d->feat) == c->nf,
            "feature settings differ");
    check_index(c, d, 0, N_UTTS);
    check_features(c, d, 0, N_UTTS);
    check_stats(c, d, 0, N_UTTS);
    ds_dataset_close(d);
    return 0;
}

/* merge(part [0,2), part [2,5)) equals one writer over [0,5). */
static int merge_equals_whole(const corpus *c, ds_dtype dt, const char *whole)
{
    char p0[256], p1[256];
    snprintf(p0, sizeof p0, "%s", path_of("part0.h5"));
    snprintf(p1, sizeof p1, "%s", path_of("part1.h5"));
    const char *parts[2] = {p0, p1};
    T_OK(write_range(c, parts[0], dt, 0, 2));
    T_OK(write_range(c, parts[1], dt, 2, N_UTTS));
    T_OK(ds_dataset_merge(parts, 2, path_of("merged.h5")));
    ds_dataset *m, *w;
    T_OK(ds_dataset_open(path_of("merged.h5"), &m));
    T_OK(ds_dataset_open(path_of(whole), &w));
    check_index(c, m, 0, N_UTTS);
    check_stats(c, m, 0, N_UTTS);
    T_CHECK(m->feature_dtype == dt, "merged dtype %s", ds_dtype_name(m->feature_dtype));
    size_t cap = (size_t)2049 * c->nf;
    float *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    for (long i = 0; i < m->n && m->n == w->n; i++) {
        T_OK(ds_dataset_read(m, i, a));
        T_OK(ds_dataset_read(w, i, b));
        T_CHECK(memcmp(a, b, (size_t)m->frames[i] * c->nf * sizeof *a) == 0,
                "utt %ld: merged features differ", i);
    }
    for (int j = 0; j < c->nf; j++)
        T_CHECK(fabsf(m->mean[j] - w->mean[j]) <= 1e-6f * fabsf(w->mean[j])
                    && fabsf(m->std[j] - w->std[j]) <= 1e-6f * w->std[j],
                "feature %d: merged stats %g %g vs %g %g", j, m->mean[j], m->std[j], w->mean[j],
                w->std[j]);
    free(a);
    free(b);
    ds_dataset_close(m);
    ds_dataset_close(w);
    unlink(parts[0]);
    unlink(parts[1]);
    unlink(path_of("merged.h5"));
    return 0;
}

static int merge_mismatch(const corpus *c)
{
    char p0[256], p1[256];
    snprintf(p0, sizeof p0, "%s", path_of("p32.h5"));
    snprintf(p1, sizeof p1, "%s", path_of("p16.h5"));
    const char *parts[2] = {p0, p1};
    T_OK(write_range(c, parts[0], DS_F32, 0, 2));
    T_OK(write_range(c, parts[1], DS_F16, 2, 3));
    ds_status_clear_error();
    ds_status st = ds_dataset_merge(parts, 2, path_of("bad_merge.h5"));
    T_CHECK(st != DS_OK && strstr(ds_status_last_error(), parts[1]) && strstr(ds_status_last_error(), "float16"),
            "dtype mismatch not reported: %s", ds_status_last_error());
    T_CHECK(access(path_of("bad_merge.h5"), F_OK) != 0, "failed merge left its output");
    T_CHECK(count_tmp("bad_merge.h5") == 0, "failed merge left its temp file");
    unlink(parts[0]);
    unlink(parts[1]);
    return 0;
}

/* Bad utterances are refused with their id named and leave the writer usable;
 * abort leaves nothing behind. */
static int writer_rejects(const corpus *c)
{
    ds_dataset_writer *w;
    T_OK(ds_dataset_writer_create(path_of("reject.h5"), &c->feat, DS_F16, &w));
    float *x = malloc((size_t)4 * c->nf * sizeof *x);
    for (int k = 0; k < 4 * c->nf; k++)
        x[k] = 1.0f;
    uint8_t good[2] = {2, 28}, blank[2] = {2, 0};
    struct { const char *id; const uint8_t *labels; float bad; ds_status want; } cases[] = {
        {"nan-utt", good, NAN, DS_ERR_NUM},
        {"inf-utt", good, INFINITY, DS_ERR_NUM},
        {"huge-utt", good, 70000.0f, DS_ERR_NUM},   /* past float16's 65504 */
        {"blank-utt", blank, 1.0f, DS_ERR_ARG},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        x[5] = cases[k].bad;
        ds_status_clear_error();
        ds_status st = ds_dataset_writer_add(w, cases[k].id, "AB", cases[k].labels, 2, x, 4);
        T_CHECK(st == cases[k].want && strstr(ds_status_last_error(), cases[k].id),
                "%s: got %s: %s", cases[k].id, ds_status_name(st), ds_status_last_error());
    }
    x[5] = 1.0f;
    T_OK(ds_dataset_writer_add(w, "good-utt", "A ", good, 2, x, 4));
    ds_status_clear_error();
    T_OK(ds_dataset_writer_close(w));
    ds_dataset *d;
    T_OK(ds_dataset_open(path_of("reject.h5"), &d));
    T_CHECK(d->n == 1 && strcmp(d->ids[0], "good-utt") == 0 && d->total_frames == 4,
            "after rejections: %ld utterances", d->n);
    ds_dataset_close(d);
    unlink(path_of("reject.h5"));

    T_OK(ds_dataset_writer_create(path_of("aborted.h5"), &c->feat, DS_F32, &w));
    T_OK(ds_dataset_writer_add(w, "u", "AB", good, 2, x, 4));
    T_CHECK(count_tmp("aborted.h5") == 1, "no temp file while writing");
    ds_dataset_writer_abort(w);
    T_CHECK(count_tmp("aborted.h5") == 0 && access(path_of("aborted.h5"), F_OK) != 0,
            "abort left a file behind");
    free(x);
    return 0;
}

/* A writer given no utterances makes a valid empty file, and merging it in
 * changes nothing (a prep rank may get no utterances). */
static int empty_part(const corpus *c)
{
    char p0[256], p1[256];
    snprintf(p0, sizeof p0, "%s", path_of("empty.h5"));
    snprintf(p1, sizeof p1, "%s", path_of("some.h5"));
    ds_dataset_writer *w;
    T_OK(ds_dataset_writer_create(p0, &c->feat, DS_F16, &w));
    T_OK(ds_dataset_writer_close(w));
    ds_dataset *d;
    T_OK(ds_dataset_open(p0, &d));
    T_CHECK(d->n == 0 && d->total_frames == 0 && d->total_labels == 0, "empty file holds %ld", d->n);
    ds_dataset_close(d);
    T_OK(write_range(c, p1, DS_F16, 1, 3));
    const char *parts[3] = {p0, p1, p0};
    T_OK(ds_dataset_merge(parts, 3, path_of("with_empty.h5")));
    T_OK(ds_dataset_open(path_of("with_empty.h5"), &d));
    check_index(c, d, 1, 3);
    check_stats(c, d, 1, 3);
    ds_dataset_close(d);
    unlink(p0);
    unlink(p1);
    unlink(path_of("with_empty.h5"));
    return 0;
}

static int describe(const char *name)
{
    ds_dataset *d;
    T_OK(ds_dataset_open(path_of(name), &d));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ds_dataset_describe(d, f);
    fclose(f);
    printf("%s", text);
    T_CHECK(strstr(text, "utterances   5") && strstr(text, "float16") && strstr(text, "mfcc")
                && strstr(text, "frames       3857"),
            "describe output:\n%s", text);
    int bars = 0;
    for (char *p = text; (p = strstr(p, " - ")); p++)
        bars++;
    T_CHECK(bars == 10, "histogram has %d bins", bars);
    ds_status_clear_error();
    T_CHECK(ds_dataset_read(d, 5, NULL) == DS_ERR_ARG, "read past the last utterance");
    free(text);
    ds_dataset_close(d);
    return 0;
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    ds_feature_cfg mel = ds_feature_defaults(), mfcc = ds_feature_defaults();
    mel.type = DS_FEAT_LOGMEL;
    mel.n_mels = 8;
    mfcc.type = DS_FEAT_MFCC;
    mfcc.n_mfcc = 6;
    check_half();
    corpus a, b;
    make_corpus(&a, mel, 11);
    make_corpus(&b, mfcc, 12);
    int rc = round_trip(&a, DS_F32, "all32.h5") || round_trip(&b, DS_F16, "all16.h5")
             || merge_equals_whole(&a, DS_F32, "all32.h5") || merge_equals_whole(&b, DS_F16, "all16.h5")
             || merge_mismatch(&a) || empty_part(&b) || writer_rejects(&a) || describe("all16.h5");
    unlink(path_of("all32.h5"));
    unlink(path_of("all16.h5"));
    rmdir(dir);
    free_corpus(&a);
    free_corpus(&b);
    return rc ? rc : t_finish("test_dataset");
}
