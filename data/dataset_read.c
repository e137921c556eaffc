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
#include <zlib.h>

#include "alphabet.h"
#include "dataset_impl.h"
#include "h5io.h"
#include "h5seal.h"
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

void ds_dataset_fingerprint(const ds_dataset *d, char *buf, size_t cap)
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
    snprintf(buf, cap, "%08lx", (unsigned long)crc & 0xffffffffUL);
}

ds_status ds_dataset_open(const char *path, ds_dataset **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: %s", path, strerror(errno));
    ds_dataset *d = calloc(1, sizeof *d);
    ds_dataset_h5 *h = calloc(1, sizeof *h);
    if (!d || !h) {
        free(d);
        free(h);
        return DS_FAIL(DS_ERR_MEM, "%s: dataset handle", path);
    }
    h->file = h->features = h->half = -1;
    d->h5 = h;
    ds_status st = DS_OK;
    if (strlen(path) >= sizeof d->path) {
        st = DS_FAIL(DS_ERR_ARG, "%s: path longer than %zu", path, sizeof d->path - 1);
        goto close_dataset;
    }
    strcpy(d->path, path);
    DS_TRY_GOTO(st, ds_h5_open(path, 0, &h->file), close_dataset);
    DS_TRY_GOTO(st, validate(d, h), close_dataset);
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

/* Rows [row0, row0 + rows) of float16 /features -> out [rows][cols] as
 * float: the raw halves are read into the back half of out and widened
 * front to back, each value read before its bytes are overwritten. */
static ds_status read_half_rows(const ds_dataset_h5 *h, hsize_t row0, size_t rows, size_t cols,
                                float *out)
{
    const size_t n = rows * cols;
    unsigned char *raw = (unsigned char *)out + n * sizeof(uint16_t);   /* [n] halves */
    DS_TRY(ds_h5_read_rows(h->features, h->half, row0, rows, cols, raw));
    for (size_t k = 0; k < n; k++) {
        uint16_t v;
        memcpy(&v, raw + k * sizeof v, sizeof v);
        out[k] = ds_f32_from_f16(v);
    }
    return DS_OK;
}

ds_status ds_dataset_read(ds_dataset *d, long i, float *out)
{
    if (i < 0 || i >= d->n)
        return DS_FAIL(DS_ERR_ARG, "%s: utterance %ld out of range (%ld utterances)", d->path, i, d->n);
    const ds_dataset_h5 *h = d->h5;
    const size_t rows = (size_t)d->frames[i], cols = (size_t)d->n_features;
    const hsize_t row0 = (hsize_t)d->frame_offset[i];
    if (d->feature_dtype == DS_F16)
        DS_TRY(read_half_rows(h, row0, rows, cols, out));
    else
        DS_TRY(ds_h5_read_rows(h->features, H5T_NATIVE_FLOAT, row0, rows, cols, out));
    for (size_t k = 0; k < rows * cols; k++)
        if (!isfinite(out[k]))
            return DS_FAIL(DS_ERR_NUM, "%s: features: utterance %ld (%s) holds %s at frame %zu, "
                           "feature %zu", d->path, i, d->ids[i], isnan(out[k]) ? "NaN" : "Inf",
                           k / cols, k % cols);
    return DS_OK;
}
