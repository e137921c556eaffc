/* dataset_read.c - ds_dataset_open, ds_dataset_read, ds_dataset_close: see
 * dataset.h. Every check names the file and the field; checks of one
 * utterance also name its index and id. */
#include "dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "alphabet.h"
#include "dataset_impl.h"
#include "h5_io.h"
#include "h5_seal.h"
#include "h5_lock.h"
#include "half.h"

/* The /utterances arrays, all [N]; the first sets N. */
static const char *const index_fields[] = {
    "utterances/frame_offset", "utterances/frames", "utterances/label_offset",
    "utterances/label_length", "utterances/id",     "utterances/transcript",
};
#define N_INDEX_FIELDS (sizeof index_fields / sizeof index_fields[0])

/* ---- attributes ---- */

static ds_status check_str_attr(hid_t f, const char *path, const char *name, const char *want)
{
    char buf[256];
    DS_TRY(ds_h5_read_attr_str(f, name, buf, sizeof buf));
    if (strcmp(buf, want) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is \"%s\", expected \"%s\"", path, name, buf, want);
    return DS_OK;
}

/* Integer attribute name in [lo, INT_MAX] -> *out. */
static ds_status read_int_attr(hid_t f, const char *path, const char *name, int lo, int *out)
{
    int64_t v;
    DS_TRY(ds_h5_read_attr_i64(f, name, &v));
    if (v < lo || v > INT_MAX)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is %lld, expected at least %d", path, name,
                       (long long)v, lo);
    *out = (int)v;
    return DS_OK;
}

/* A window length in seconds: finite, in (0, 10]. */
static ds_status read_seconds_attr(hid_t f, const char *path, const char *name, double *out)
{
    DS_TRY(ds_h5_read_attr_f64(f, name, out));
    if (!(*out > 0 && *out <= 10))
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is %g, expected seconds in (0, 10]", path, name,
                       *out);
    return DS_OK;
}

static ds_status read_type_attr(hid_t f, const char *path, ds_feature_type *out)
{
    char buf[64];
    DS_TRY(ds_h5_read_attr_str(f, "feature_type", buf, sizeof buf));
    for (int t = DS_FEAT_SPECTROGRAM; t <= DS_FEAT_MFCC; t++)
        if (strcmp(buf, ds_feature_type_name((ds_feature_type)t)) == 0) {
            *out = (ds_feature_type)t;
            return DS_OK;
        }
    return DS_FAIL(DS_ERR_IO, "%s: attribute feature_type \"%s\" is not a known feature type", path,
                   buf);
}

/* n_features sets the filterbank: n_mels for log-mel, n_mfcc for mfcc (whose
 * own bank is always DS_MFCC_N_MELS filters). */
static void set_filterbank(ds_feature_cfg *c, int n_features)
{
    if (c->type == DS_FEAT_LOGMEL)
        c->n_mels = n_features;
    if (c->type == DS_FEAT_MFCC) {
        c->n_mels = DS_MFCC_N_MELS;
        c->n_mfcc = n_features;
    }
}

static ds_status read_feature_attrs(ds_dataset *d, hid_t f)
{
    ds_feature_cfg c = ds_feature_defaults();
    int n_fft;
    DS_TRY(read_type_attr(f, d->path, &c.type));
    DS_TRY(read_int_attr(f, d->path, "sample_rate", 1, &c.sample_rate));
    DS_TRY(read_seconds_attr(f, d->path, "window_size_s", &c.window_size_s));
    DS_TRY(read_seconds_attr(f, d->path, "window_stride_s", &c.window_stride_s));
    DS_TRY(read_int_attr(f, d->path, "n_fft", 1, &n_fft));
    DS_TRY(read_int_attr(f, d->path, "n_features", 1, &d->n_features));
    set_filterbank(&c, d->n_features);
    if (ds_feature_n_fft(&c) != n_fft)
        return DS_FAIL(DS_ERR_IO, "%s: attribute n_fft is %d, but sample_rate and window_size_s give %d",
                       d->path, n_fft, ds_feature_n_fft(&c));
    if (ds_feature_dim(&c) != d->n_features)
        return DS_FAIL(DS_ERR_IO, "%s: attribute n_features is %d, but feature_type %s gives %d",
                       d->path, d->n_features, ds_feature_type_name(c.type), ds_feature_dim(&c));
    d->feat = c;
    return DS_OK;
}

static ds_status read_attrs(ds_dataset *d, hid_t f)
{
    int64_t version;
    int sealed;
    /* before any attribute is believed; version 1 files carry no seal */
    DS_TRY(ds_h5_check_attrs(f, d->path, 0, &sealed));
    DS_TRY(check_str_attr(f, d->path, "format", DS_DATASET_FORMAT));
    DS_TRY(ds_h5_read_attr_i64(f, "version", &version));
    if (version != 1 && version != DS_DATASET_VERSION)
        return DS_FAIL(DS_ERR_IO, "%s: attribute version is %lld; this build reads versions 1 "
                       "and %d", d->path, (long long)version, DS_DATASET_VERSION);
    if (version >= 2 && !sealed)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing (corrupted)", d->path,
                       DS_H5_SEAL_ATTR);
    d->version = (int)version;
    DS_TRY(check_str_attr(f, d->path, "alphabet", ds_alphabet));
    DS_TRY(check_str_attr(f, d->path, "window", "hamming"));
    return read_feature_attrs(d, f);
}

/* ---- /features ---- */

/* IEEE binary16 or binary32 (either byte order) -> DS_F16 / DS_F32. */
static ds_status feature_dtype(ds_dataset *d, ds_dataset_h5 *h)
{
    hid_t t = H5Dget_type(h->features);
    if (t < 0)
        return DS_FAIL(DS_ERR_IO, "%s: features: cannot read its dtype", d->path);
    size_t spos, epos, esize, mpos, msize, bytes = H5Tget_size(t);
    H5T_class_t cls = H5Tget_class(t);
    int fields = cls == H5T_FLOAT && H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0;
    ds_status st = DS_OK;
    if (fields && bytes == 2 && esize == 5 && msize == 10) {
        d->feature_dtype = DS_F16;
        st = ds_h5_half_type(&h->half);
    }
    else if (fields && bytes == 4 && esize == 8 && msize == 23)
        d->feature_dtype = DS_F32;
    else
        st = DS_FAIL(DS_ERR_IO, "%s: features: dtype is %s of %zu bits, expected float16 or float32",
                     d->path, cls == H5T_FLOAT ? "float" : cls == H5T_INTEGER ? "integer" : "non-number",
                     bytes * 8);
    H5Tclose(t);
    return st;
}

static ds_status open_features(ds_dataset *d, ds_dataset_h5 *h)
{
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(ds_h5_shape(h->file, "features", &rank, dims));
    if (rank != 2)
        return DS_FAIL(DS_ERR_IO, "%s: features: rank %d, expected [total_frames][n_features]",
                       d->path, rank);
    if (dims[1] != (hsize_t)d->n_features)
        return DS_FAIL(DS_ERR_IO, "%s: features has %llu columns but attribute n_features is %d",
                       d->path, (unsigned long long)dims[1], d->n_features);
    d->total_frames = (long)dims[0];
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (dapl < 0
        || H5Pset_chunk_cache(dapl, 521, DS_DATASET_CHUNK_CACHE, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
        if (dapl >= 0)
            H5Pclose(dapl);
        return DS_FAIL(DS_ERR_IO, "%s: features: access properties", d->path);
    }
    h->features = H5Dopen2(h->file, "features", dapl);
    H5Pclose(dapl);
    if (h->features < 0)
        return DS_FAIL(DS_ERR_IO, "%s: features: cannot open", d->path);
    return feature_dtype(d, h);
}

/* ---- /utterances and /labels ---- */

/* Checks that every index array is 1-D and as long as the first: *n. */
static ds_status index_length(const ds_dataset *d, hid_t f, long *n)
{
    for (size_t k = 0; k < N_INDEX_FIELDS; k++) {
        int rank;
        hsize_t dims[DS_H5_MAX_RANK];
        DS_TRY(ds_h5_shape(f, index_fields[k], &rank, dims));
        if (rank != 1)
            return DS_FAIL(DS_ERR_IO, "%s: %s: rank %d, expected 1", d->path, index_fields[k], rank);
        if (k == 0)
            *n = (long)dims[0];
        else if (dims[0] != (hsize_t)*n)
            return DS_FAIL(DS_ERR_IO, "%s: %s has %llu entries but %s has %ld (index lengths differ)",
                           d->path, index_fields[k], (unsigned long long)dims[0], index_fields[0], *n);
    }
    return DS_OK;
}

static ds_status read_labels(ds_dataset *d, hid_t f)
{
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(ds_h5_shape(f, "labels", &rank, dims));
    if (rank != 1)
        return DS_FAIL(DS_ERR_IO, "%s: labels: rank %d, expected 1", d->path, rank);
    d->total_labels = (long)dims[0];
    d->labels = malloc(dims[0] ? dims[0] : 1);
    if (!d->labels)
        return DS_FAIL(DS_ERR_MEM, "%s: labels: %ld entries", d->path, d->total_labels);
    return ds_h5_read(f, "labels", DS_U8, (size_t)dims[0], d->labels);
}

/* What one utterance's index entry costs in memory once read: its offsets
 * and lengths (8 + 4 + 8 + 4 bytes), two string pointers, and two strings of
 * at least a byte with the allocator's and HDF5's overhead (about 24 each). */
#define INDEX_BYTES_PER_UTT (24.0 + 16.0 + 2 * 24.0)

/* The index a file's few header bytes claim must fit what the file could
 * hold (ds_h5_shape's 256 x its bytes), counted in memory: index arrays of
 * uint8 on disk, sparse, once claimed 60 million utterances of a 2 MB file
 * and took 2.5 GB before any entry was read. */
static ds_status check_index_budget(const ds_dataset *d, hid_t f, long n)
{
    hsize_t file_bytes = 0;
    if (H5Fget_filesize(f, &file_bytes) < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot read the file's size", d->path);
    const double need = (double)n * INDEX_BYTES_PER_UTT, cap = ((double)file_bytes + 65536.0) * 256.0;
    if (need <= cap)
        return DS_OK;
    return DS_FAIL(DS_ERR_IO, "%s: /utterances claims %ld utterances, %.0f MiB of index in memory, "
                   "from a file of %.1f MiB (at most 256 x the file): damaged", d->path, n,
                   need / 1048576.0, (double)file_bytes / 1048576.0);
}

static ds_status read_index(ds_dataset *d, hid_t f)
{
    long n = 0;
    DS_TRY(index_length(d, f, &n));
    DS_TRY(check_index_budget(d, f, n));
    size_t m = n ? (size_t)n : 1;
    d->frame_offset = malloc(m * sizeof *d->frame_offset);
    d->frames = malloc(m * sizeof *d->frames);
    d->label_offset = malloc(m * sizeof *d->label_offset);
    d->label_length = malloc(m * sizeof *d->label_length);
    d->ids = calloc(m, sizeof *d->ids);
    d->transcripts = calloc(m, sizeof *d->transcripts);
    if (!d->frame_offset || !d->frames || !d->label_offset || !d->label_length || !d->ids
        || !d->transcripts)
        return DS_FAIL(DS_ERR_MEM, "%s: index of %ld utterances", d->path, n);
    d->n = n;
    DS_TRY(ds_h5_read(f, index_fields[0], DS_I64, (size_t)n, d->frame_offset));
    DS_TRY(ds_h5_read(f, index_fields[1], DS_I32, (size_t)n, d->frames));
    DS_TRY(ds_h5_read(f, index_fields[2], DS_I64, (size_t)n, d->label_offset));
    DS_TRY(ds_h5_read(f, index_fields[3], DS_I32, (size_t)n, d->label_length));
    DS_TRY(ds_h5_read_strings(f, index_fields[4], (size_t)n, d->ids));
    DS_TRY(ds_h5_read_strings(f, index_fields[5], (size_t)n, d->transcripts));
    return read_labels(d, f);
}

/* Utterance i's rows of /features and entries of /labels lie inside them,
 * and its labels are alphabet symbols other than the blank. */
static ds_status check_utterance(const ds_dataset *d, long i)
{
    const char *id = d->ids[i];
    int64_t fo = d->frame_offset[i], lo = d->label_offset[i];
    int32_t nf = d->frames[i], nl = d->label_length[i];
    if (nf < 1)
        return DS_FAIL(DS_ERR_IO, "%s: utterances/frames: utterance %ld (%s) has %d frames", d->path,
                       i, id, nf);
    if (fo < 0 || fo > d->total_frames - nf)
        return DS_FAIL(DS_ERR_IO, "%s: utterances/frame_offset: utterance %ld (%s) offsets past the "
                       "end: %d rows from row %lld of %ld in features", d->path, i, id, nf,
                       (long long)fo, d->total_frames);
    if (nl < 1)
        return DS_FAIL(DS_ERR_IO, "%s: utterances/label_length: utterance %ld (%s) has %d labels",
                       d->path, i, id, nl);
    if (lo < 0 || lo > d->total_labels - nl)
        return DS_FAIL(DS_ERR_IO, "%s: utterances/label_offset: utterance %ld (%s) offsets past the "
                       "end: %d entries from entry %lld of %ld in labels", d->path, i, id, nl,
                       (long long)lo, d->total_labels);
    for (int32_t k = 0; k < nl; k++) {
        int v = d->labels[lo + k];
        if (v < 1 || v >= DS_ALPHABET_SIZE)
            return DS_FAIL(DS_ERR_IO, "%s: labels: utterance %ld (%s) has label %d at position %d, "
                           "outside the alphabet 1..%d", d->path, i, id, v, k, DS_ALPHABET_SIZE - 1);
    }
    return DS_OK;
}

static ds_status read_stats(ds_dataset *d, hid_t f)
{
    const size_t nf = (size_t)d->n_features;
    if (!ds_h5_exists(f, "stats"))
        return DS_FAIL(DS_ERR_IO, "%s: stats is missing (stats/mean and stats/std)", d->path);
    d->mean = malloc(nf * sizeof *d->mean);
    d->std = malloc(nf * sizeof *d->std);
    if (!d->mean || !d->std)
        return DS_FAIL(DS_ERR_MEM, "%s: stats of %zu features", d->path, nf);
    DS_TRY(ds_h5_read(f, "stats/mean", DS_F32, nf, d->mean));
    DS_TRY(ds_h5_read(f, "stats/std", DS_F32, nf, d->std));
    for (size_t j = 0; j < nf; j++)
        if (!isfinite(d->mean[j]) || !isfinite(d->std[j]) || d->std[j] < 0)
            return DS_FAIL(DS_ERR_IO, "%s: stats: feature %zu has mean %g, std %g", d->path, j,
                           d->mean[j], d->std[j]);
    return DS_OK;
}

static ds_status validate(ds_dataset *d, ds_dataset_h5 *h)
{
    DS_TRY(read_attrs(d, h->file));
    DS_TRY(open_features(d, h));
    DS_TRY(read_index(d, h->file));
    for (long i = 0; i < d->n; i++)
        DS_TRY(check_utterance(d, i));
    return read_stats(d, h->file);
}

/* The fingerprint's index part: the utterance count, every utterance's
 * frames and label count, and every label (all read on open). */
static uLong index_crc(const ds_dataset *d)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const int64_t n = d->n;
    crc = crc32(crc, (const Bytef *)&n, sizeof n);
    for (long i = 0; i < d->n; i++) {   /* fixed-size little-endian fields, whatever the host */
        const int32_t v[2] = {d->frames[i], d->label_length[i]};
        unsigned char b[8];
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 4; j++)
                b[4 * k + j] = (unsigned char)((uint32_t)v[k] >> (8 * j));
        crc = crc32(crc, b, sizeof b);
    }
    for (long off = 0; off < d->total_labels;) {   /* uInt-sized pieces */
        const long piece = d->total_labels - off < (1L << 30) ? d->total_labels - off : (1L << 30);
        crc = crc32(crc, d->labels + off, (uInt)piece);
        off += piece;
    }
    return crc;
}

void ds_dataset_index_fingerprint(const ds_dataset *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%08lx", index_crc(d) & 0xffffffffUL);
}

static hid_t raw_type(const ds_dataset *d);

/* The fingerprint's content part, added to crc: the stored bytes of
 * FP_ROWS rows from the middle of each of FP_SAMPLES utterances spread
 * evenly over the index (all of them in a smaller file). Each sample reads
 * one /features chunk, or two where its rows straddle chunks: at most 128
 * chunks (2.5 MiB of 161 float16 features in 64-row chunks), whatever the
 * file's size. Not on open: `prep --verify` reads every chunk itself, and
 * names a damaged one better. Rows, not chunks, are hashed: the same values in another
 * chunk layout give the same fingerprint. */
#define FP_SAMPLES 64
#define FP_ROWS 4
static ds_status content_crc(ds_dataset *d, uLong *crc)
{
    const ds_dataset_h5 *h = d->h5;
    const size_t cols = (size_t)d->n_features, esize = ds_dtype_size(d->feature_dtype);
    void *buf = malloc(FP_ROWS * cols * esize);
    if (!buf)
        return DS_FAIL(DS_ERR_MEM, "%s: %zu bytes for the fingerprint's rows", d->path,
                       FP_ROWS * cols * esize);
    const long samples = d->n < FP_SAMPLES ? d->n : FP_SAMPLES;
    ds_status st = DS_OK;
    ds_h5_lock();
    for (long k = 0; k < samples && st == DS_OK; k++) {
        const long i = (long)((double)k * (double)d->n / (double)samples);
        const int64_t rows = d->frames[i] < FP_ROWS ? d->frames[i] : FP_ROWS;
        const int64_t row0 = d->frame_offset[i] + (d->frames[i] - rows) / 2;
        st = ds_h5_read_rows(h->features, raw_type(d), (hsize_t)row0, (hsize_t)rows, cols, buf);
        if (st == DS_OK)
            *crc = crc32(*crc, buf, (uInt)((size_t)rows * cols * esize));
    }
    ds_h5_unlock();
    free(buf);
    return st;
}

ds_status ds_dataset_fingerprint_features(ds_dataset *d)
{
    ds_dataset_h5 *h = d->h5;
    uLong crc = index_crc(d);
    DS_TRY(content_crc(d, &crc));
    snprintf(h->fingerprint, sizeof h->fingerprint, "%08lx", crc & 0xffffffffUL);
    return DS_OK;
}

void ds_dataset_fingerprint(const ds_dataset *d, char *buf, size_t cap)
{
    const ds_dataset_h5 *h = d->h5;
    if (h && h->fingerprint[0])
        snprintf(buf, cap, "%s", h->fingerprint);
    else
        ds_dataset_index_fingerprint(d, buf, cap);
}

/* The file's fd against what it was on open (file_input.h). */
ds_status ds_dataset_check_unchanged(const ds_dataset *d)
{
    const ds_dataset_h5 *h = d->h5;
    if (!h || h->fd < 0)
        return DS_OK;
    return ds_file_input_unchanged(h->fd, d->path, "feature file", &h->id);
}

/* What open does once the file is HDF5: every field validated, the index
 * against itself. */
static ds_status open_checked(ds_dataset *d, ds_dataset_h5 *h)
{
    DS_TRY(ds_h5_open(d->path, 0, &h->file));
    /* the path named the file whose descriptor is watched while HDF5 opened it */
    DS_TRY(ds_file_input_unchanged(h->fd, d->path, "feature file", &h->id));
    DS_TRY(validate(d, h));
    return ds_dataset_check_index(d);
}

ds_status ds_dataset_open(const char *path, ds_dataset **out)
{
    *out = NULL;
    ds_dataset *d = calloc(1, sizeof *d);
    ds_dataset_h5 *h = calloc(1, sizeof *h);
    if (!d || !h) {
        free(d);
        free(h);
        return DS_FAIL(DS_ERR_MEM, "%s: dataset handle", path);
    }
    h->file = h->features = h->half = -1;
    h->fd = -1;
    d->h5 = h;
    ds_status st = DS_OK;
    if (strlen(path) >= sizeof d->path) {
        st = DS_FAIL(DS_ERR_ARG, "%s: path longer than %zu", path, sizeof d->path - 1);
        goto close_dataset;
    }
    strcpy(d->path, path);
    /* a regular file, checked before HDF5 opens it (a FIFO would block it) */
    DS_TRY_GOTO(st, ds_file_open_input(path, "feature file", &h->fd), close_dataset);
    DS_TRY_GOTO(st, ds_file_input_identify(h->fd, path, "feature file", &h->id), close_dataset);
    DS_TRY_GOTO(st, open_checked(d, h), close_dataset);
    *out = d;
    return DS_OK;
close_dataset:
    ds_dataset_close(d);
    return st;
}

void ds_dataset_close(ds_dataset *d)
{
    if (!d)
        return;
    ds_dataset_h5 *h = d->h5;
    if (h && h->features >= 0)
        H5Dclose(h->features);
    if (h && h->half >= 0)
        H5Tclose(h->half);
    if (h && h->file >= 0)
        H5Fclose(h->file);
    if (h && h->fd >= 0)
        close(h->fd);
    for (long i = 0; i < d->n; i++) {
        free(d->ids ? d->ids[i] : NULL);
        free(d->transcripts ? d->transcripts[i] : NULL);
    }
    free(d->ids);
    free(d->transcripts);
    free(d->frame_offset);
    free(d->frames);
    free(d->label_offset);
    free(d->label_length);
    free(d->labels);
    free(d->mean);
    free(d->std);
    free(h);
    free(d);
}

/* ---- reading features ---- */

/* Where utterance idx[j] lies in /features and in the caller's raw buffer. */
typedef struct {
    hsize_t row0, rows;   /* rows of /features */
    int j;                /* position in idx */
} raw_span;

/* A batch is read as one union when its rows lie within this many times
 * their count of /features (neighbours: a sequential pass), else one read
 * per utterance; see read_raw_locked. */
#define UNION_SPAN 2

static int by_row0(const void *a, const void *b)
{
    const raw_span *x = a, *y = b;
    return x->row0 < y->row0 ? -1 : x->row0 > y->row0;
}

/* The memory type raw rows are read as: the stored one, so HDF5 converts
 * nothing (float16 stays bit patterns, widened by ds_dataset_widen). */
static hid_t raw_type(const ds_dataset *d)
{
    return d->feature_dtype == DS_F16 ? ((const ds_dataset_h5 *)d->h5)->half : H5T_NATIVE_FLOAT;
}

/* The union of spans [n] (sorted by row, disjoint) of /features -> raw
 * [sum of rows][cols] in one H5Dread: HDF5 fills the memory selection in
 * the file selection's row order. Caller holds ds_h5_lock. */
static ds_status read_union(const ds_dataset *d, const raw_span *s, int n, hsize_t total, void *raw)
{
    const ds_dataset_h5 *h = d->h5;
    const hsize_t cols = (hsize_t)d->n_features, mem_dims[2] = {total, cols};
    hid_t file = H5Dget_space(h->features), mem = H5Screate_simple(2, mem_dims, NULL);
    ds_status st = DS_OK;
    if (file < 0 || mem < 0 || H5Sselect_none(file) < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: /features: dataspaces for a batch of %d utterances", d->path, n);
        goto close_spaces;
    }
    for (int k = 0; k < n; k++) {
        const hsize_t start[2] = {s[k].row0, 0}, count[2] = {s[k].rows, cols};
        if (H5Sselect_hyperslab(file, H5S_SELECT_OR, start, NULL, count, NULL) < 0) {
            st = DS_FAIL(DS_ERR_IO, "%s: /features: selecting rows %llu..%llu", d->path,
                         (unsigned long long)s[k].row0, (unsigned long long)(s[k].row0 + s[k].rows));
            goto close_spaces;
        }
    }
    if (H5Dread(h->features, raw_type(d), mem, file, H5P_DEFAULT, raw) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: /features: reading the rows of %d utterances (from row %llu) "
                     "failed (checksum mismatch: corrupted; or truncated)", d->path, n,
                     (unsigned long long)s[0].row0);
close_spaces:
    if (mem >= 0)
        H5Sclose(mem);
    if (file >= 0)
        H5Sclose(file);
    return st;
}

/* Spans [n] sorted by row -> row [n] of each utterance in raw, in that
 * order; 0 when two spans share a row (a union would merge them). */
static int place_spans(const raw_span *s, int n, size_t *row, hsize_t *total)
{
    *total = 0;
    for (int k = 0; k < n; k++) {
        if (k > 0 && s[k].row0 < s[k - 1].row0 + s[k - 1].rows)
            return 0;
        row[s[k].j] = (size_t)*total;
        *total += s[k].rows;
    }
    return 1;
}

/* One read per span [n] (sorted by row: the disk is read forwards), each
 * to its row [n] of raw. Caller holds ds_h5_lock. */
static ds_status read_each(const ds_dataset *d, const raw_span *s, int n, void *raw,
                           const size_t *row)
{
    const ds_dataset_h5 *h = d->h5;
    const size_t cols = (size_t)d->n_features, esize = ds_dtype_size(d->feature_dtype);
    for (int k = 0; k < n; k++)
        DS_TRY(ds_h5_read_rows(h->features, raw_type(d), s[k].row0, s[k].rows, cols,
                               (char *)raw + row[s[k].j] * cols * esize));
    return DS_OK;
}

/* Rows [n] in idx order: overlapping spans are each read in full. */
static void place_in_order(const ds_dataset *d, const long *idx, int n, size_t *row)
{
    size_t at = 0;
    for (int j = 0; j < n; j++) {
        row[j] = at;
        at += (size_t)d->frames[idx[j]];
    }
}

static ds_status read_raw_locked(ds_dataset *d, const long *idx, int n, void *raw, size_t *row,
                                 raw_span *s)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* per thread: failures come back as messages */
    for (int j = 0; j < n; j++)
        s[j] = (raw_span){(hsize_t)d->frame_offset[idx[j]], (hsize_t)d->frames[idx[j]], j};
    qsort(s, (size_t)n, sizeof *s, by_row0);
    hsize_t total;
    if (!place_spans(s, n, row, &total)) {
        place_in_order(d, idx, n, row);
        return read_each(d, s, n, raw, row);
    }
    /* HDF5 (1.10) maps a union selection to chunks by visiting every chunk
     * of its bounding box: a batch of utterances spread over a 4,000-utterance
     * file read 7x slower as one union than utterance by utterance. */
    const hsize_t span = s[n - 1].row0 + s[n - 1].rows - s[0].row0;
    if (n > 1 && span > UNION_SPAN * total)
        return read_each(d, s, n, raw, row);
    return read_union(d, s, n, total, raw);
}

ds_status ds_dataset_read_raw(ds_dataset *d, const long *idx, int n, void *raw, size_t *row)
{
    for (int j = 0; j < n; j++)
        if (idx[j] < 0 || idx[j] >= d->n)
            return DS_FAIL(DS_ERR_ARG, "%s: utterance %ld out of range (%ld utterances)", d->path,
                           idx[j], d->n);
    if (n < 1)
        return DS_OK;
    raw_span *s = malloc((size_t)n * sizeof *s);   /* [n]: a batch's, small */
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "%s: a read of %d utterances", d->path, n);
    ds_h5_lock();
    ds_status st = read_raw_locked(d, idx, n, raw, row, s);
    ds_h5_unlock();
    free(s);
    /* HDF5 reads zeros past the end of a file cut short under it, and zero
     * chunks pass their checksums: the size after the read is what tells
     * (also the likeliest reason for a read that failed) */
    const ds_dataset_h5 *h = d->h5;
    if (h->fd < 0)
        return st;
    char why[1024];   /* the read's own failure, kept while the size is looked at */
    snprintf(why, sizeof why, "%s", st != DS_OK ? ds_status_last_error() : "");
    ds_status_clear_error();
    const ds_status size = ds_file_input_same_size(h->fd, d->path, "feature file", &h->id);
    if (size != DS_OK || st == DS_OK)   /* a changed size is the reason, not HDF5's */
        return size;
    return DS_FAIL(st, "%s", why);
}

/* ---- widening, with the finiteness check fused ---- */

/* GCC/Clang vector extensions: plain C that becomes SSE2 on baseline x86-64
 * and NEON on aarch64, 4 lanes (one register: wider types are split and
 * spilled there). */
typedef uint32_t u32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef float f32x4 __attribute__((vector_size(16)));

/* 4 binary16 patterns h -> dst [4] float, exactly (subnormals, Inf, NaN
 * too): the magnitude shifted into float's place and rebiased; subnormals
 * through a float subtraction, Inf/NaN get the rest of the exponent. */
static inline void widen4(u32x4 h, float *dst)
{
    const u32x4 mag = (h & 0x7fff) << 13, exp = mag & (0x1fu << 23);
    u32x4 o = mag + ((127u - 15u) << 23);
    const u32x4 special = (u32x4)(exp == (0x1fu << 23)), tiny = (u32x4)(exp == 0);
    o += special & ((128u - 16u) << 23);
    const u32x4 sub_bits = o + (1u << 23);
    f32x4 sub;
    memcpy(&sub, &sub_bits, sizeof sub);
    sub -= 6.103515625e-05f;   /* 2^-14: the float whose exponent was added */
    u32x4 sb;
    memcpy(&sb, &sub, sizeof sb);
    const u32x4 bits = (tiny & sb) | (~tiny & o) | ((h & 0x8000) << 16);
    memcpy(dst, &bits, sizeof bits);
}

/* src [n] binary16 -> dst [n] float; returns nonzero when some value is Inf
 * or NaN (all exponent bits set). */
static int widen_portable(float *dst, const uint16_t *src, size_t n)
{
    u32x4 bad = {0};
    size_t k = 0;
    for (; k + 4 <= n; k += 4) {
        const u32x4 h = {src[k], src[k + 1], src[k + 2], src[k + 3]};
        bad |= (u32x4)((h & 0x7c00) == 0x7c00);
        widen4(h, dst + k);
    }
    int any = (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
    for (; k < n; k++) {
        any |= (src[k] & 0x7c00) == 0x7c00;
        dst[k] = ds_half_f32_from_f16(src[k]);
    }
    return any;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

/* The same with F16C's vcvtph2ps, 8 values an instruction. */
__attribute__((target("avx,f16c"))) static int widen_f16c(float *dst, const uint16_t *src, size_t n)
{
    const __m128i exp = _mm_set1_epi16(0x7c00);
    __m128i bad = _mm_setzero_si128();
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(src + k));
        bad = _mm_or_si128(bad, _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp));
        _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(h));
    }
    int any = _mm_movemask_epi8(bad) != 0;
    for (; k < n; k++) {
        any |= (src[k] & 0x7c00) == 0x7c00;
        dst[k] = ds_half_f32_from_f16(src[k]);
    }
    return any;
}

/* F16C unless the CPU lacks it or DSTRAIN_CPU_ISA=baseline forces the
 * portable path (as it does the CPU kernels', so both are testable here). */
static int use_f16c(void)
{
    static int cached = -1;   /* every thread computes the same; atomic, so no race */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *want = getenv("DSTRAIN_CPU_ISA");
        unsigned a, b, c = 0, d;   /* F16C from cpuid: clang's builtin does not name it */
        const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        v = f16c && __builtin_cpu_supports("avx") && !(want && strcmp(want, "baseline") == 0);
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
static int use_f16c(void) { return 0; }
#define widen_f16c widen_portable
#endif

/* src [n] float32 -> dst [n] (nothing to copy when they are one: ds_dataset_read
 * reads float32 rows in place); nonzero when some value is not finite. */
static int copy_f32(float *dst, const float *src, size_t n)
{
    u32x4 bad = {0};
    size_t k = 0;
    for (; k + 4 <= n; k += 4) {
        u32x4 b;
        memcpy(&b, src + k, sizeof b);
        bad |= (u32x4)((b & 0x7f800000u) == 0x7f800000u);
        if (dst != src)
            memcpy(dst + k, &b, sizeof b);
    }
    int any = (bad[0] | bad[1] | bad[2] | bad[3]) != 0;
    for (; k < n; k++) {
        any |= !isfinite(src[k]);
        dst[k] = src[k];
    }
    return any;
}

/* The first non-finite value of out [rows][cols], named. */
static ds_status not_finite(const ds_dataset *d, long i, const float *out, size_t count)
{
    const size_t cols = (size_t)d->n_features;
    size_t k = 0;
    while (k + 1 < count && isfinite(out[k]))
        k++;
    return DS_FAIL(DS_ERR_NUM, "%s: features: utterance %ld (%s) holds %s at frame %zu, feature %zu",
                   d->path, i, d->ids[i], isnan(out[k]) ? "NaN" : "Inf", k / cols, k % cols);
}

ds_status ds_dataset_widen(const ds_dataset *d, long i, const void *raw, float *out)
{
    const size_t count = (size_t)d->frames[i] * (size_t)d->n_features;
    int bad;
    if (d->feature_dtype == DS_F16)
        bad = use_f16c() ? widen_f16c(out, raw, count) : widen_portable(out, raw, count);
    else
        bad = copy_f32(out, raw, count);
    return bad ? not_finite(d, i, out, count) : DS_OK;
}

ds_status ds_dataset_read(ds_dataset *d, long i, float *out)
{
    if (i < 0 || i >= d->n)
        return DS_FAIL(DS_ERR_ARG, "%s: utterance %ld out of range (%ld utterances)", d->path, i, d->n);
    /* The raw rows go to the back half of out (float16) or all of it
     * (float32). Widening front to back, w = 4 or 8 values loaded before they
     * are stored, never overwrites a value not yet read: floats [k, k + w)
     * end at byte 4(k + w), halves not yet read start at 2n + 2(k + w), no
     * earlier while k + w <= n. */
    const size_t count = (size_t)d->frames[i] * (size_t)d->n_features;
    void *raw = d->feature_dtype == DS_F16 ? (void *)((uint16_t *)(void *)out + count) : (void *)out;
    size_t row;
    DS_TRY(ds_dataset_read_raw(d, &i, 1, raw, &row));
    return ds_dataset_widen(d, i, raw, out);
}
