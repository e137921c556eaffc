/* pt_zip.c - torch.save's zip container through libzip (pt_zip.h). */
#include "pt_zip.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "file.h"
#include "file_input.h"

#define PT_ALIGN 64            /* torch's writer aligns record data to 64 bytes */
#define PT_LOCAL_HEADER 30     /* fixed part of a zip local file header */
#define PT_PAD_ID 0x4246       /* extra field "FB", as torch names its padding */
#define PT_NAME_MAX 1024

struct ds_pt_zip_writer {
    zip_t *z;
    char path[PT_NAME_MAX], tmp[PT_NAME_MAX + 8], prefix[256];
    uint64_t offset;                  /* where the next local header will start */
    uint8_t pad[PT_ALIGN + 4];        /* zeros: every record's padding field */
};

static const char *zip_err_text(int code, char *buf, size_t cap)
{
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    snprintf(buf, cap, "%s", zip_error_strerror(&e));
    zip_error_fini(&e);
    return buf;
}

ds_status ds_pt_zip_create(const char *path, const char *prefix, ds_pt_zip_writer **out)
{
    char msg[256];
    int err = 0;
    *out = NULL;
    ds_pt_zip_writer *w = calloc(1, sizeof *w);
    if (!w)
        return DS_FAIL(DS_ERR_MEM, "%s: zip writer", path);
    if (snprintf(w->path, sizeof w->path, "%s", path) >= (int)sizeof w->path ||
        snprintf(w->prefix, sizeof w->prefix, "%s", prefix) >= (int)sizeof w->prefix) {
        free(w);
        return DS_FAIL(DS_ERR_ARG, "%s: path or record folder too long", path);
    }
    /* libzip writes our temporary name (through its own) on close, which
     * must not exist before (ZIP_EXCL); ds_file_commit then fsyncs it and
     * renames it over path */
    ds_status st = ds_file_tmp_name(path, "zip", w->tmp, sizeof w->tmp);
    if (st != DS_OK) {
        free(w);
        return st;
    }
    w->z = zip_open(w->tmp, ZIP_CREATE | ZIP_EXCL, &err);
    if (!w->z) {
        free(w);
        return DS_FAIL(DS_ERR_IO, "%s: cannot create the zip (%s)", path,
                       zip_err_text(err, msg, sizeof msg));
    }
    *out = w;
    return DS_OK;
}

/* Bytes of padding that put the data of a record named full (local header
 * at w->offset, the padding field's 4-byte header included) on PT_ALIGN. */
static size_t pad_for(const ds_pt_zip_writer *w, size_t name_len)
{
    uint64_t data_at = w->offset + PT_LOCAL_HEADER + name_len + 4;
    return (size_t)((PT_ALIGN - data_at % PT_ALIGN) % PT_ALIGN);
}

ds_status ds_pt_zip_add(ds_pt_zip_writer *w, const char *name, const void *data, size_t len)
{
    char full[PT_NAME_MAX];
    if (snprintf(full, sizeof full, "%s/%s", w->prefix, name) >= (int)sizeof full)
        return DS_FAIL(DS_ERR_ARG, "%s: record name %s too long", w->path, name);
    zip_source_t *src = zip_source_buffer(w->z, len ? data : "", len, 0);
    if (!src)
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s", w->path, full, zip_strerror(w->z));
    zip_int64_t idx = zip_file_add(w->z, full, src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
        zip_source_free(src);
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s", w->path, full, zip_strerror(w->z));
    }
    const size_t pad = pad_for(w, strlen(full));
    if (zip_set_file_compression(w->z, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0 ||
        zip_file_extra_field_set(w->z, (zip_uint64_t)idx, PT_PAD_ID, ZIP_EXTRA_FIELD_NEW, w->pad,
                                 (zip_uint16_t)pad, ZIP_FL_LOCAL) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s", w->path, full, zip_strerror(w->z));
    w->offset += PT_LOCAL_HEADER + strlen(full) + 4 + pad + len;
    return DS_OK;
}

ds_status ds_pt_zip_close(ds_pt_zip_writer *w)
{
    ds_status st = DS_OK;
    if (zip_close(w->z) != 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: writing the zip: %s", w->path, zip_strerror(w->z));
        zip_discard(w->z);
        unlink(w->tmp);
    } else {
        st = ds_file_commit(w->tmp, w->path);
    }
    free(w);
    return st;
}

void ds_pt_zip_discard(ds_pt_zip_writer *w)
{
    if (!w)
        return;
    zip_discard(w->z);
    free(w);
}

/* ---- reading ---- */

struct ds_pt_zip_reader {
    zip_t *z;
    char path[PT_NAME_MAX], prefix[256];
    uint64_t file_size;
};

static ds_status find_prefix(ds_pt_zip_reader *r)
{
    zip_int64_t n = zip_get_num_entries(r->z, 0);
    if (n < 1)
        return DS_FAIL(DS_ERR_IO, "%s: an empty zip, not a torch.save file", r->path);
    const char *first = zip_get_name(r->z, 0, ZIP_FL_ENC_RAW);
    if (!first)
        return DS_FAIL(DS_ERR_IO, "%s: record 0: %s", r->path, zip_strerror(r->z));
    const char *slash = strchr(first, '/');
    if (!slash || slash == first || (size_t)(slash - first) >= sizeof r->prefix)
        return DS_FAIL(DS_ERR_IO, "%s: first record \"%s\" is not in a folder: not a torch.save "
                                  "file", r->path, first);
    memcpy(r->prefix, first, (size_t)(slash - first));
    r->prefix[slash - first] = '\0';
    return DS_OK;
}

ds_status ds_pt_zip_open(const char *path, ds_pt_zip_reader **out)
{
    char msg[256];
    struct stat sb;
    int err = 0;
    *out = NULL;
    if (stat(path, &sb) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    DS_TRY(ds_file_require_regular(path, "PyTorch file"));   /* a FIFO: said as such */
    ds_pt_zip_reader *r = calloc(1, sizeof *r);
    if (!r)
        return DS_FAIL(DS_ERR_MEM, "%s: zip reader", path);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->file_size = (uint64_t)sb.st_size;
    r->z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!r->z) {
        free(r);
        return DS_FAIL(DS_ERR_IO, "%s: not a readable zip, so not a torch.save file of PyTorch 1.6 or later (%s)", path,
                       zip_err_text(err, msg, sizeof msg));
    }
    ds_status st = find_prefix(r);
    if (st != DS_OK) {
        ds_pt_zip_close_reader(r);
        return st;
    }
    *out = r;
    return DS_OK;
}

int ds_pt_zip_has(ds_pt_zip_reader *r, const char *name)
{
    char full[PT_NAME_MAX];
    if (snprintf(full, sizeof full, "%s/%s", r->prefix, name) >= (int)sizeof full)
        return 0;
    return zip_name_locate(r->z, full, ZIP_FL_ENC_RAW) >= 0;
}

/* The record's size, checked against max and against what the file can hold. */
static ds_status record_size(ds_pt_zip_reader *r, zip_int64_t idx, const char *full, size_t max,
                             size_t *len)
{
    zip_stat_t zs;
    if (zip_stat_index(r->z, (zip_uint64_t)idx, 0, &zs) != 0)
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s", r->path, full, zip_strerror(r->z));
    if (!(zs.valid & ZIP_STAT_SIZE) || !(zs.valid & ZIP_STAT_COMP_SIZE))
        return DS_FAIL(DS_ERR_IO, "%s: record %s: size unknown", r->path, full);
    if (zs.size > max)
        return DS_FAIL(DS_ERR_IO, "%s: record %s holds %llu bytes, more than the %zu expected",
                       r->path, full, (unsigned long long)zs.size, max);
    /* a damaged directory can claim any size: none beyond what the file
     * (deflate at most 1032:1) could hold is allocated */
    if (zs.comp_size > r->file_size || zs.size / 1032 > zs.comp_size + 1)
        return DS_FAIL(DS_ERR_IO, "%s: record %s claims %llu bytes from %llu in a file of %llu: "
                                  "the zip is damaged", r->path, full,
                       (unsigned long long)zs.size, (unsigned long long)zs.comp_size,
                       (unsigned long long)r->file_size);
    *len = (size_t)zs.size;
    return DS_OK;
}

/* Reads exactly len bytes of f into buf, then to the end, so that libzip
 * checks the CRC. */
static ds_status read_all(ds_pt_zip_reader *r, zip_file_t *f, const char *full, char *buf, size_t len)
{
    size_t got = 0;
    char probe[1];
    while (got < len) {
        zip_int64_t k = zip_fread(f, buf + got, len - got);
        if (k < 0)
            return DS_FAIL(DS_ERR_IO, "%s: record %s: %s (the zip is damaged)", r->path, full,
                           zip_file_strerror(f));
        if (k == 0)
            return DS_FAIL(DS_ERR_IO, "%s: record %s ends after %zu of %zu bytes (the zip is "
                                      "damaged)", r->path, full, got, len);
        got += (size_t)k;
    }
    zip_int64_t k = zip_fread(f, probe, sizeof probe);
    if (k != 0)
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s (the zip is damaged)", r->path, full,
                       k < 0 ? zip_file_strerror(f) : "longer than its directory entry says");
    return DS_OK;
}

ds_status ds_pt_zip_read(ds_pt_zip_reader *r, const char *name, const char *what, size_t max,
                         void **data, size_t *len)
{
    char full[PT_NAME_MAX + 160];
    *data = NULL;
    *len = 0;
    /* full: the record's name in messages, with what it holds */
    if (snprintf(full, PT_NAME_MAX, "%s/%s", r->prefix, name) >= PT_NAME_MAX)
        return DS_FAIL(DS_ERR_ARG, "%s: record name %s too long", r->path, name);
    zip_int64_t idx = zip_name_locate(r->z, full, ZIP_FL_ENC_RAW);
    if (what)
        snprintf(full + strlen(full), sizeof full - strlen(full), " (%s)", what);
    if (idx < 0)
        return DS_FAIL(DS_ERR_IO, "%s: record %s is missing", r->path, full);
    size_t n = 0;
    DS_TRY(record_size(r, idx, full, max, &n));
    char *buf = malloc(n ? n : 1);
    if (!buf)
        return DS_FAIL(DS_ERR_MEM, "%s: record %s (%zu bytes)", r->path, full, n);
    zip_file_t *f = zip_fopen_index(r->z, (zip_uint64_t)idx, 0);
    if (!f) {
        free(buf);
        return DS_FAIL(DS_ERR_IO, "%s: record %s: %s", r->path, full, zip_strerror(r->z));
    }
    ds_status st = read_all(r, f, full, buf, n);
    if (zip_fclose(f) != 0 && st == DS_OK)
        st = DS_FAIL(DS_ERR_IO, "%s: record %s: closing it failed (the zip is damaged)", r->path, full);
    if (st != DS_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = n;
    return DS_OK;
}


void ds_pt_zip_close_reader(ds_pt_zip_reader *r)
{
    if (!r)
        return;
    zip_discard(r->z);   /* read-only: nothing to write */
    free(r);
}
