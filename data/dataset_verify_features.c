/* dataset_verify_features.c - step 5 of ds_dataset_verify: /features read
 * in full, a slice of whole chunks at a time (real files are tens of GB),
 * every value finite, and /stats/mean and /stats/std those of the stored
 * values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "dataset_verify_impl.h"
#include "h5_io.h"
#include "half.h"

#define SLICE_BYTES ((size_t)8 << 20)   /* /features is read this much at a time */
#define PROGRESS_S 5.0                  /* seconds between progress lines */

typedef struct {
    ds_dataset_verify_ctx *c;
    hid_t ds, mt;                /* /features, and the type it is read as */
    size_t cols, esize;          /* n_features; bytes per value read */
    hsize_t chunk_rows;
    void *buf;                   /* [slice rows][cols] */
    long cur;                    /* c->frames[cur] is the next utterance at or past the row */
    double *sum, *sumsq;         /* [cols] over rows of utterances */
    long long counted;           /* rows summed */
    double last_progress;
} scan;

const char *ds_dataset_verify_row_name(const ds_dataset_verify_ctx *c, int64_t row, char *buf, size_t cap)
{
    long lo = 0, hi = c->d->n;   /* the last span starting at or before row */
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        if (c->frames[mid].start <= row)
            lo = mid;
        else
            hi = mid;
    }
    const ds_dataset_verify_span *s = &c->frames[lo];
    if (row >= s->start && row < s->start + s->len)
        snprintf(buf, cap, "utterance %ld (id %s) frame %lld", s->utt, c->d->ids[s->utt],
                 (long long)(row - s->start));
    else
        snprintf(buf, cap, "row %lld (in no utterance)", (long long)row);
    return buf;
}

/* Rows [r0, r0 + rows) into s->buf; on failure HDF5's reason goes to why
 * [256] (taken before any other HDF5 call clears it). */
static int read_rows(const scan *s, hsize_t r0, hsize_t rows, char *why)
{
    hsize_t start[2] = {r0, 0}, count[2] = {rows, s->cols};
    hid_t file = H5Dget_space(s->ds), mem = H5Screate_simple(2, count, NULL);
    int ok = file >= 0 && mem >= 0
             && H5Sselect_hyperslab(file, H5S_SELECT_SET, start, NULL, count, NULL) >= 0
             && H5Dread(s->ds, s->mt, mem, file, H5P_DEFAULT, s->buf) >= 0;
    if (!ok)
        ds_h5_reason(why, 256);
    if (mem >= 0)
        H5Sclose(mem);
    if (file >= 0)
        H5Sclose(file);
    return ok;
}

/* Rows [r0, r0 + rows) into s->buf; on failure finds the first chunk that
 * cannot be read, to name its rows and utterance. */
static ds_status read_slice(scan *s, hsize_t r0, hsize_t rows)
{
    char why[1024], where[600];
    if (read_rows(s, r0, rows, why))
        return DS_OK;
    for (hsize_t a = r0; a < r0 + rows; a += s->chunk_rows) {
        const hsize_t n = r0 + rows - a < s->chunk_rows ? r0 + rows - a : s->chunk_rows;
        if (!read_rows(s, a, n, why))
            return DS_FAIL(DS_ERR_IO, "%s: dataset /features: rows [%llu, %llu) unreadable: %s "
                           "(the first row is %s)", s->c->path,
                           (unsigned long long)a, (unsigned long long)(a + n), why,
                           ds_dataset_verify_row_name(s->c, (int64_t)a, where, sizeof where));
    }
    return DS_FAIL(DS_ERR_IO, "%s: dataset /features: rows [%llu, %llu) unreadable at once (%s), "
                   "but readable chunk by chunk", s->c->path, (unsigned long long)r0,
                   (unsigned long long)(r0 + rows), why);
}

/* Value k of the slice as float; *bad when it is NaN or infinite. */
static float value(const scan *s, size_t k, int *bad)
{
    if (s->esize == 2) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)s->buf + 2 * k, sizeof h);
        *bad = (h & 0x7c00) == 0x7c00;   /* exponent all ones */
        return *bad ? 0 : ds_half_f32_from_f16(h);
    }
    float v = ((const float *)s->buf)[k];
    *bad = !isfinite(v);
    return v;
}

/* Checks and sums the slice's rows [r0, r0 + rows). */
static ds_status check_slice(scan *s, hsize_t r0, hsize_t rows)
{
    const ds_dataset_verify_ctx *c = s->c;
    for (hsize_t r = 0; r < rows; r++) {
        const int64_t row = (int64_t)(r0 + r);
        while (s->cur < c->d->n && row >= c->frames[s->cur].start + c->frames[s->cur].len)
            s->cur++;
        const int in_utt = s->cur < c->d->n && row >= c->frames[s->cur].start;
        for (size_t j = 0; j < s->cols; j++) {
            int bad;
            const size_t k = (size_t)r * s->cols + j;
            const double v = value(s, k, &bad);
            if (bad) {
                char where[600];
                float f = s->esize == 2 ? ds_half_f32_from_f16(((const uint16_t *)s->buf)[k])
                                        : ((const float *)s->buf)[k];
                return DS_FAIL(DS_ERR_NUM, "%s: dataset /features: %s feature %zu is %s (row %lld)",
                               c->path, ds_dataset_verify_row_name(c, row, where, sizeof where), j,
                               isnan(f) ? "nan" : f > 0 ? "inf" : "-inf", (long long)row);
            }
            if (in_utt) {
                s->sum[j] += v;
                s->sumsq[j] += v * v;
            }
        }
        s->counted += in_utt;
    }
    return DS_OK;
}

/* /stats/mean and /stats/std against the stored values: float16 rounds each
 * value by at most 2^-11 of it, which moves mean and std by at most 2^-11 of
 * |mean| + std; four times that is allowed. */
static ds_status check_stats(const scan *s)
{
    const ds_dataset *d = s->c->d;
    if (!s->counted)
        return DS_OK;
    for (size_t j = 0; j < s->cols; j++) {
        const double n = (double)s->counted, mean = s->sum[j] / n;
        const double var = s->sumsq[j] / n - mean * mean, std = sqrt(var > 0 ? var : 0);
        const double tol = 2e-3 * (fabs(mean) + std) + 1e-6;
        if (fabs(d->mean[j] - mean) > tol)
            return DS_FAIL(DS_ERR_IO, "%s: dataset /stats/mean: feature %zu is %g, but the mean of "
                           "/features is %g", s->c->path, j, d->mean[j], mean);
        if (fabs(d->std[j] - std) > tol)
            return DS_FAIL(DS_ERR_IO, "%s: dataset /stats/std: feature %zu is %g, but the std of "
                           "/features is %g", s->c->path, j, d->std[j], std);
    }
    return DS_OK;
}

static void progress(scan *s, hsize_t done, hsize_t total)
{
    const double now = ds_dataset_verify_now();
    if (!s->c->progress || now - s->last_progress < PROGRESS_S)
        return;
    s->last_progress = now;
    const double gib = (double)s->cols * (double)s->esize / (double)(1u << 30);
    fprintf(s->c->progress, "verify: %s: %.0f%% of /features read (%.2f of %.2f GiB), %.0f s\n",
            s->c->path, 100.0 * (double)done / (double)total, gib * (double)done,
            gib * (double)total, now - s->c->t0);
    fflush(s->c->progress);
}

/* Rows per chunk of /features (1024 when it is not chunked). */
static hsize_t chunk_rows(hid_t ds)
{
    hsize_t dims[2] = {1024, 0};
    hid_t dcpl = H5Dget_create_plist(ds);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 2, dims) == 2
        && dims[0] > 0) {
        H5Pclose(dcpl);
        return dims[0];
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return 1024;
}

static ds_status scan_all(scan *s)
{
    const hsize_t total = (hsize_t)s->c->d->total_frames;
    const size_t chunk_bytes = (size_t)s->chunk_rows * s->cols * s->esize;
    const hsize_t chunks = chunk_bytes < SLICE_BYTES ? SLICE_BYTES / chunk_bytes : 1;
    const hsize_t step = s->chunk_rows * chunks;   /* whole chunks, about SLICE_BYTES */
    s->buf = malloc((size_t)(step < total ? step : total) * s->cols * s->esize + 1);
    if (!s->buf)
        return DS_FAIL(DS_ERR_MEM, "%s: dataset /features: a slice of %llu rows", s->c->path,
                       (unsigned long long)step);
    s->last_progress = ds_dataset_verify_now();
    for (hsize_t r0 = 0; r0 < total; r0 += step) {
        const hsize_t rows = total - r0 < step ? total - r0 : step;
        DS_TRY(read_slice(s, r0, rows));
        DS_TRY(check_slice(s, r0, rows));
        progress(s, r0 + rows, total);
    }
    return check_stats(s);
}

ds_status ds_dataset_verify_features(ds_dataset_verify_ctx *c)
{
    scan s = {.c = c, .ds = -1, .mt = -1, .cols = (size_t)c->d->n_features};
    char why[1024];
    ds_status st = DS_OK;
    s.ds = H5Dopen2(ds_dataset_file(c->d), "features", H5P_DEFAULT);
    if (s.ds < 0)
        return DS_FAIL(DS_ERR_IO, "%s: dataset /features: cannot open (%s)", c->path,
                       ds_h5_reason(why, sizeof why));
    if (c->d->feature_dtype == DS_F16) {   /* raw halves, widened here as the loader does */
        s.esize = 2;
        DS_TRY_GOTO(st, ds_h5_half_type(&s.mt), close);
    } else {
        s.esize = sizeof(float);
        s.mt = H5Tcopy(H5T_NATIVE_FLOAT);
    }
    s.chunk_rows = chunk_rows(s.ds);
    s.sum = calloc(s.cols, sizeof *s.sum);
    s.sumsq = calloc(s.cols, sizeof *s.sumsq);
    if (s.mt < 0 || !s.sum || !s.sumsq)
        st = DS_FAIL(DS_ERR_MEM, "%s: dataset /features: sums of %zu features", c->path, s.cols);
    else
        st = scan_all(&s);
    c->sum->datasets++;
    c->sum->bytes += (long long)H5Dget_storage_size(s.ds);
    ds_dataset_verify_note_unchecked(c->sum, s.ds, "features");
close:
    free(s.buf);
    free(s.sum);
    free(s.sumsq);
    if (s.mt >= 0)
        H5Tclose(s.mt);
    H5Dclose(s.ds);
    return st;
}
