/* test_read_amplification.c - bytes the process reads per byte of features
 * the loader delivers (issue 27: 1,024-row chunks straddling utterances read
 * 1.83x). An epoch of LibriSpeech-length utterances (800-1700 frames, 161
 * float16 features, 40 MB: five times the 8 MB chunk cache) through the
 * loader, counted by /proc/self/io's rchar, twice:
 *   - written by dstrain's writer (chunks of DS_DATASET_ALIGN_ROWS rows, each
 *     utterance starting one): the reads must stay within the layout's own
 *     bound, 1 + padding rows / feature rows + 1% for HDF5's metadata (its
 *     chunk index, read once and cached);
 *   - the same utterances in the earlier layout (back to back, 1024-row
 *     chunks; a version 1 file built here with HDF5 directly): that bound
 *     must fail there, so the check above is one that can fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "alphabet.h"
#include "dataset.h"
#include "h5_io.h"
#include "half.h"
#include "loader.h"
#include "testutil.h"

#define N_UTT 100
#define MIN_T 800
#define MAX_T 1700
#define N_LABELS 20
#define OLD_CHUNK_ROWS 1024
#define METADATA_ALLOWANCE 0.01

typedef struct {
    int frames[N_UTT];
    float *x[N_UTT];   /* [frames][dim] */
    uint8_t labels[N_LABELS];
    ds_feature_cfg feat;
    int dim;
} corpus;

static void make_corpus(corpus *c)
{
    ds_rng r;
    ds_rng_seed(&r, 1027);
    c->feat = ds_feature_defaults();
    c->dim = ds_feature_dim(&c->feat);
    for (int m = 0; m < N_LABELS; m++)
        c->labels[m] = (uint8_t)(1 + m % 28);
    for (int i = 0; i < N_UTT; i++) {
        c->frames[i] = ds_rng_int(&r, MIN_T, MAX_T);
        c->x[i] = malloc(sizeof(float) * (size_t)c->frames[i] * c->dim);
        if (!c->x[i])
            t_must(DS_FAIL(DS_ERR_MEM, "features"), "make_corpus");
        for (long k = 0; k < (long)c->frames[i] * c->dim; k++)
            c->x[i][k] = (float)(ds_rng_next(&r) >> 41) * (4.0f / 8388608.0f);
    }
}

static ds_status write_new(const corpus *c, const char *path)
{
    ds_dataset_writer *w;
    DS_TRY(ds_dataset_writer_create(path, &c->feat, DS_F16, &w));
    for (int i = 0; i < N_UTT; i++) {
        char id[32];
        snprintf(id, sizeof id, "utt-%03d", i);
        ds_status st = ds_dataset_writer_add(w, id, "", c->labels, N_LABELS, c->x[i], c->frames[i]);
        if (st != DS_OK) {
            ds_dataset_writer_abort(w);
            return st;
        }
    }
    return ds_dataset_writer_close(w);
}

/* The index and stats of the earlier layout: utterances back to back. */
static ds_status write_old_index(const corpus *c, hid_t f)
{
    int64_t fo[N_UTT], lo[N_UTT];
    int32_t nl[N_UTT];
    char ids[N_UTT][16];
    const char *idp[N_UTT], *texts[N_UTT];
    static uint8_t labels[N_UTT * N_LABELS];
    int64_t at = 0;
    for (int i = 0; i < N_UTT; i++) {
        fo[i] = at;
        at += c->frames[i];
        lo[i] = (int64_t)i * N_LABELS;
        nl[i] = N_LABELS;
        snprintf(ids[i], sizeof ids[i], "utt-%03d", i);
        idp[i] = ids[i];
        texts[i] = "";
        memcpy(labels + i * N_LABELS, c->labels, N_LABELS);
    }
    hsize_t n = N_UTT, n_lab = N_UTT * N_LABELS, dim = (hsize_t)c->dim;
    float *stats = calloc(2 * (size_t)c->dim, sizeof *stats);   /* mean 0, std 0: unused here */
    if (!stats)
        return DS_FAIL(DS_ERR_MEM, "stats");
    ds_status st = ds_h5_write(f, "utterances/frame_offset", DS_I64, 1, &n, fo);
    if (st == DS_OK)
        st = ds_h5_write(f, "utterances/frames", DS_I32, 1, &n, c->frames);
    if (st == DS_OK)
        st = ds_h5_write(f, "utterances/label_offset", DS_I64, 1, &n, lo);
    if (st == DS_OK)
        st = ds_h5_write(f, "utterances/label_length", DS_I32, 1, &n, nl);
    if (st == DS_OK)
        st = ds_h5_write_strings(f, "utterances/id", N_UTT, idp);
    if (st == DS_OK)
        st = ds_h5_write_strings(f, "utterances/transcript", N_UTT, texts);
    if (st == DS_OK)
        st = ds_h5_write(f, "labels", DS_U8, 1, &n_lab, labels);
    if (st == DS_OK)
        st = ds_h5_write(f, "stats/mean", DS_F32, 1, &dim, stats);
    if (st == DS_OK)
        st = ds_h5_write(f, "stats/std", DS_F32, 1, &dim, stats + c->dim);
    free(stats);
    return st;
}

static ds_status write_old_attrs(const corpus *c, hid_t f)
{
    DS_TRY(ds_h5_write_attr_str(f, "format", DS_DATASET_FORMAT));
    DS_TRY(ds_h5_write_attr_i64(f, "version", 1));   /* unsealed: no attributes_crc32 */
    DS_TRY(ds_h5_write_attr_i64(f, "sample_rate", c->feat.sample_rate));
    DS_TRY(ds_h5_write_attr_f64(f, "window_size_s", c->feat.window_size_s));
    DS_TRY(ds_h5_write_attr_f64(f, "window_stride_s", c->feat.window_stride_s));
    DS_TRY(ds_h5_write_attr_str(f, "window", "hamming"));
    DS_TRY(ds_h5_write_attr_i64(f, "n_fft", ds_feature_n_fft(&c->feat)));
    DS_TRY(ds_h5_write_attr_str(f, "feature_type", ds_feature_type_name(c->feat.type)));
    DS_TRY(ds_h5_write_attr_i64(f, "n_features", c->dim));
    return ds_h5_write_attr_str(f, "alphabet", ds_alphabet);
}

/* The same utterances as dstrain wrote them before chunk alignment. */
static ds_status write_old(const corpus *c, const char *path)
{
    hid_t f, ds, half;
    DS_TRY(ds_h5_create(path, &f));
    DS_TRY(ds_h5_half_type(&half));
    DS_TRY(ds_h5_create_rows(f, "features", half, (hsize_t)c->dim, OLD_CHUNK_ROWS, 8u << 20, &ds));
    uint16_t *h = malloc(sizeof *h * MAX_T * (size_t)c->dim);
    ds_status st = h ? DS_OK : DS_FAIL(DS_ERR_MEM, "staging");
    hsize_t at = 0;
    for (int i = 0; st == DS_OK && i < N_UTT; i++) {
        ds_half_f16_from_f32_n(h, c->x[i], (size_t)c->frames[i] * c->dim);
        st = ds_h5_append_rows(ds, half, at, (hsize_t)c->frames[i], (hsize_t)c->dim, h);
        at += (hsize_t)c->frames[i];
    }
    free(h);
    H5Dclose(ds);
    H5Tclose(half);
    if (st == DS_OK)
        st = write_old_index(c, f);
    if (st == DS_OK)
        st = write_old_attrs(c, f);
    ds_status closed = ds_h5_close(f);
    return st != DS_OK ? st : closed;
}

static long long rchar(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char key[64];
    unsigned long long v;
    long long out = -1;
    while (f && fscanf(f, "%63[^:]: %llu\n", key, &v) == 2)
        if (strcmp(key, "rchar") == 0)
            out = (long long)v;
    if (f)
        fclose(f);
    return out;
}

/* One epoch of path through the loader (2 readers, batch 4, shuffled):
 * bytes read (rchar) per feature byte delivered -> *amp, and the layout's
 * padding rows per feature row -> *padding. */
static ds_status measure(const char *path, double *amp, double *padding)
{
    ds_dataset *d;
    DS_TRY(ds_dataset_open(path, &d));
    long utts[N_UTT];
    int frames[N_UTT], longest = 0;
    long long rows = 0, padded = 0;
    for (long i = 0; i < d->n; i++) {
        utts[i] = i;
        frames[i] = d->frames[i];
        longest = frames[i] > longest ? frames[i] : longest;
        rows += frames[i];
        padded += (frames[i] + DS_DATASET_ALIGN_ROWS - 1) / DS_DATASET_ALIGN_ROWS * DS_DATASET_ALIGN_ROWS;
    }
    ds_sampler *s;
    ds_status st = ds_sampler_create(utts, frames, d->n, 4, 1, 3, &s);
    ds_loader_cfg c = {.data = d, .sampler = s, .batch = 4, .max_frames = longest,
                       .max_labels = N_LABELS, .norm = DS_NORM_UTTERANCE, .threads = 2};
    ds_loader *l = NULL;
    long long delivered = 0, before = rchar();
    if (st == DS_OK)
        st = ds_loader_start(&c, &l);
    const ds_batch *b;
    while (st == DS_OK && (st = ds_loader_next(l, &b)) == DS_OK && b)
        for (int j = 0; j < b->n; j++)
            delivered += b->lengths[j];
    ds_loader_stop(l);
    const long long read = rchar() - before;
    *amp = (double)read / ((double)delivered * d->n_features * 2);
    *padding = (double)(padded - rows) / (double)rows;
    T_CHECK(delivered == rows, "%s: %lld frames delivered of %lld", path, delivered, rows);
    ds_sampler_destroy(s);
    ds_dataset_close(d);
    return st;
}

int main(void)
{
    char dir[] = "/tmp/test_read_amplification_XXXXXX", new_path[128], old_path[128];
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(new_path, sizeof new_path, "%s/new.h5", dir);
    snprintf(old_path, sizeof old_path, "%s/old.h5", dir);
    static corpus c;
    make_corpus(&c);
    T_OK(write_new(&c, new_path));
    T_OK(write_old(&c, old_path));
    T_CHECK(rchar() >= 0, "no /proc/self/io here: nothing to measure with");
    double amp_new, amp_old, padding, unused;
    T_OK(measure(new_path, &amp_new, &padding));
    T_OK(measure(old_path, &amp_old, &unused));
    const double bound = 1.0 + padding + METADATA_ALLOWANCE;
    printf("read amplification: chunk-aligned layout %.4f (bound %.4f: padding %.4f + metadata "
           "%.2f), 1024-row chunks %.4f\n", amp_new, bound, padding, METADATA_ALLOWANCE, amp_old);
    T_CHECK(amp_new >= 1.0 && amp_new <= bound,
            "the chunk-aligned layout read %.4f bytes per feature byte, outside [1, %.4f]", amp_new,
            bound);
    T_CHECK(amp_old > bound, "1024-row chunks read %.4f bytes per feature byte, within the bound "
            "%.4f: the check above could not tell whole-chunk reads apart", amp_old, bound);
    for (int i = 0; i < N_UTT; i++)
        free(c.x[i]);
    unlink(new_path);
    unlink(old_path);
    rmdir(dir);
    return t_finish(__FILE__);
}
