/* dataset_verify.c - ds_dataset_verify, see dataset_verify.h: the file
 * checks (step 1), every small dataset read through the checksum filter
 * (step 2), the loader's validation (step 3), then the index and /features
 * steps of dataset_verify_index.c and dataset_verify_features.c. */
#include "dataset_verify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dataset_verify_impl.h"

#define SLICE_BYTES ((size_t)8 << 20)   /* step 2 reads at most this much at a time */

double ds_dataset_verify_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- step 1: the file ---- */

/* HDF5 looks for its signature at byte 0, then 512, 1024, 2048, ... (after
 * a user block). */
static ds_status find_signature(const char *path, int fd, long long size)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (long long at = 0; at + 8 <= size; at = at ? 2 * at : 512) {
        unsigned char b[8];
        ssize_t got = pread(fd, b, sizeof b, (off_t)at);
        if (got < 0)
            return DS_FAIL(DS_ERR_IO, "%s: read at byte %lld: %s", path, at, strerror(errno));
        if (got == (ssize_t)sizeof b && memcmp(b, sig, sizeof sig) == 0)
            return DS_OK;
    }
    return DS_FAIL(DS_ERR_IO, "%s: not an HDF5 file (no HDF5 signature in its %lld bytes)", path,
                   size);
}

/* Step 1, leaving the file open in *out. */
static ds_status open_checked(const char *path, hid_t *out)
{
    *out = -1;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return DS_FAIL(DS_ERR_IO, "%s: not a regular file", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ds_status st = find_signature(path, fd, (long long)sb.st_size);
    close(fd);
    DS_TRY(st);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* errors are reported through ds_status_fail */
    *out = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*out < 0) {
        char why[1024];
        return DS_FAIL(DS_ERR_IO, "%s: HDF5 cannot open it: %s (%lld bytes on disk: truncated, "
                       "damaged or locked)", path, ds_h5_reason(why, sizeof why),
                       (long long)sb.st_size);
    }
    return DS_OK;
}

/* ---- step 2: every dataset but /features read in full ---- */

typedef struct {
    const char *path;
    ds_dataset_verify_summary *sum;
    ds_status st;
} visit_ctx;

void ds_dataset_verify_note_unchecked(ds_dataset_verify_summary *s, hid_t ds, const char *name)
{
    hid_t dcpl = H5Dget_create_plist(ds);
    unsigned flags;
    size_t nv = 0;
    int has = dcpl >= 0 && H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &nv, NULL, 0,
                                                NULL, NULL) >= 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (has)
        return;
    size_t used = strlen(s->unchecked);
    snprintf(s->unchecked + used, sizeof s->unchecked - used, "%s/%s", used ? ", " : "", name);
}

/* Rows [r0, r0 + rows) of ds (dims [rank]; rank 0: the one element) into
 * buf as mt; variable-length data is freed again at once. On failure HDF5's
 * reason goes to why [256], taken before another HDF5 call clears it. */
static herr_t read_rows(hid_t ds, hid_t mt, hid_t space, int rank, const hsize_t *dims, hsize_t r0,
                        hsize_t rows, void *buf, char *why)
{
    hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK] = {0};
    memcpy(count, dims, (size_t)rank * sizeof *count);
    start[0] = r0;
    count[0] = rows;
    hid_t mspace = rank ? H5Screate_simple(rank, count, NULL) : H5Scopy(space);
    herr_t rc = mspace < 0 ? -1 : rank ? H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL,
                                                             count, NULL) : 0;
    if (rc >= 0)
        rc = H5Dread(ds, mt, mspace, space, H5P_DEFAULT, buf);
    if (rc >= 0 && (H5Tdetect_class(mt, H5T_VLEN) > 0 || H5Tis_variable_str(mt) > 0))
        rc = H5Dvlen_reclaim(mt, mspace, H5P_DEFAULT, buf);
    if (rc < 0)
        ds_h5_reason(why, 256);
    if (mspace >= 0)
        H5Sclose(mspace);
    return rc;
}

/* Reads ds (named name) in full, SLICE_BYTES at a time along its first
 * dimension, so that HDF5 checks every chunk's checksum. */
static ds_status read_whole(visit_ctx *v, hid_t ds, const char *name)
{
    char why[1024];
    ds_status st = DS_OK;
    hid_t ft = H5Dget_type(ds), space = H5Dget_space(ds);
    hid_t mt = ft < 0 ? -1 : H5Tget_native_type(ft, H5T_DIR_DEFAULT);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    hsize_t dims[H5S_MAX_RANK] = {0};
    if (mt < 0 || rank < 0 || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: dataset /%s: cannot read its type or shape (%s)", v->path,
                     name, ds_h5_reason(why, sizeof why));
        goto close;
    }
    size_t row = H5Tget_size(mt);   /* bytes of one index of the first dimension */
    for (int k = 1; k < rank; k++)
        row *= dims[k];
    const hsize_t n = rank ? dims[0] : 1, step = row && SLICE_BYTES / row ? SLICE_BYTES / row : 1;
    const size_t per = row / H5Tget_size(mt);   /* elements per index of the first dimension */
    void *buf = malloc((size_t)(step < n ? step : n) * row + 1);
    if (!buf) {
        st = DS_FAIL(DS_ERR_MEM, "%s: dataset /%s: %zu bytes of buffer", v->path, name, row);
        goto close;
    }
    for (hsize_t r0 = 0; r0 < n && row && st == DS_OK; r0 += step) {
        const hsize_t rows = n - r0 < step ? n - r0 : step;
        if (read_rows(ds, mt, space, rank, dims, r0, rows, buf, why) < 0)
            st = DS_FAIL(DS_ERR_IO, "%s: dataset /%s: elements [%llu, %llu) of %llu unreadable: %s",
                         v->path, name,
                         (unsigned long long)(r0 * per), (unsigned long long)((r0 + rows) * per),
                         (unsigned long long)(n * per), why);
    }
    free(buf);
    if (st == DS_OK) {
        v->sum->datasets++;
        v->sum->bytes += (long long)H5Dget_storage_size(ds);
        ds_dataset_verify_note_unchecked(v->sum, ds, name);
    }
close:
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    if (space >= 0)
        H5Sclose(space);
    return st;
}

static herr_t visit_one(hid_t g, const char *name, const H5L_info_t *info, void *p)
{
    visit_ctx *v = p;
    if (info->type != H5L_TYPE_HARD || !strcmp(name, "features"))   /* /features: step 5 */
        return 0;
    char why[1024];
    hid_t obj = H5Oopen(g, name, H5P_DEFAULT);
    if (obj < 0) {
        v->st = DS_FAIL(DS_ERR_IO, "%s: /%s: cannot open (%s)", v->path, name,
                        ds_h5_reason(why, sizeof why));
        return -1;
    }
    if (H5Iget_type(obj) == H5I_DATASET)
        v->st = read_whole(v, obj, name);
    H5Oclose(obj);
    return v->st == DS_OK ? 0 : -1;
}

static ds_status read_small_datasets(const char *path, hid_t f, ds_dataset_verify_summary *sum)
{
    visit_ctx v = {path, sum, DS_OK};
    char why[1024];
    if (H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, visit_one, &v) < 0 && v.st == DS_OK)
        v.st = DS_FAIL(DS_ERR_IO, "%s: cannot list its groups and datasets (%s)", path,
                       ds_h5_reason(why, sizeof why));
    return v.st;
}

/* ---- all steps ---- */

static ds_status verify_steps(ds_dataset_verify_ctx *c)
{
    hid_t f;
    DS_TRY(open_checked(c->path, &f));
    ds_status st = read_small_datasets(c->path, f, c->sum);
    H5Fclose(f);
    DS_TRY(st);
    DS_TRY(ds_dataset_open(c->path, &c->d));
    c->sum->utterances = c->d->n;
    c->sum->frames = c->d->total_frames;
    c->sum->labels = c->d->total_labels;
    c->sum->n_features = c->d->n_features;
    c->sum->dtype = ds_dtype_name(c->d->feature_dtype);
    c->sum->unsealed = c->d->version < 2;
    DS_TRY(ds_dataset_verify_index(c));
    return ds_dataset_verify_features(c);
}

ds_status ds_dataset_verify(const char *path, FILE *progress, ds_dataset_verify_summary *out)
{
    ds_status_clear_error();   /* a top-level operation: its first failure is the message */
    ds_dataset_verify_summary sum;
    memset(&sum, 0, sizeof sum);
    ds_dataset_verify_ctx c = {.path = path, .progress = progress, .t0 = ds_dataset_verify_now(), .sum = &sum};
    ds_status st = verify_steps(&c);
    ds_dataset_close(c.d);
    free(c.frames);
    sum.seconds = ds_dataset_verify_now() - c.t0;
    if (st == DS_OK)
        *out = sum;
    return st;
}

void ds_dataset_verify_print(const char *path, const ds_dataset_verify_summary *s, FILE *f)
{
    fprintf(f, "verified: %s: %ld utterances, %lld frames of %d %s features, %lld labels; "
            "%d datasets read in full (%.2f MiB) in %.2f s: every checksum matches, features "
            "finite, index, labels, transcripts and stats consistent\n",
            path, s->utterances, s->frames, s->n_features, s->dtype, s->labels, s->datasets,
            (double)s->bytes / (1 << 20), s->seconds);
    if (s->unsealed)
        fprintf(f, "  note: a version 1 file: its attributes (the feature settings: type, rate, "
                "window, stride) carry no checksum, so a change to them cannot be seen; `dstrain "
                "prep` again writes version 2, which seals them\n");
    if (s->unchecked[0])
        fprintf(f, "  note: stored without a checksum, so only the consistency checks guard them: "
                "%s\n", s->unchecked);
    if (!s->in_order)
        fprintf(f, "  note: utterances are not stored one after another in index order "
                "(allowed)\n");
    if (s->unused_frames || s->unused_labels)
        fprintf(f, "  note: %lld rows of /features and %lld entries of /labels belong to no "
                "utterance\n", s->unused_frames, s->unused_labels);
    if (s->constant_features)
        fprintf(f, "  note: %d features have std 0 (global normalisation leaves them unscaled)\n",
                s->constant_features);
}
