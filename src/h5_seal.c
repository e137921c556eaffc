/* h5_seal.c - a checksum over an HDF5 object's attributes; see h5_seal.h. */
#include "h5_seal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "h5_io.h"

/* An attribute larger than this is damage, not something we wrote (the
 * largest of ours, a model config, is under 64 KiB). */
#define SEAL_MAX_BYTES ((hsize_t)1 << 24)

typedef struct {
    uLong crc;
    const char *path;
    ds_status st;
} digest;

/* v into the sum as 8 little-endian bytes (the same on any host) */
static void add_u64(digest *d, uint64_t v)
{
    unsigned char b[8];
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)(v >> (8 * k));
    d->crc = crc32(d->crc, b, sizeof b);
}

/* What decides how the stored bytes read: a flipped bit in a type's byte
 * order or exponent bias, or in a shape, changes the value read while the
 * bytes stay the same. Summed as a description (class, size, order,
 * precision and the class's own fields; rank and dimensions), not HDF5's
 * encoding, so the sum does not depend on the HDF5 version. */
static void add_layout(digest *d, hid_t t, hid_t s)
{
    const H5T_class_t cls = H5Tget_class(t);
    add_u64(d, (uint64_t)cls);
    add_u64(d, H5Tget_size(t));
    if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        H5T_pad_t lsb = H5T_PAD_ERROR, msb = H5T_PAD_ERROR;
        H5Tget_pad(t, &lsb, &msb);
        add_u64(d, (uint64_t)H5Tget_order(t));
        add_u64(d, H5Tget_precision(t));
        add_u64(d, (uint64_t)H5Tget_offset(t));
        add_u64(d, (uint64_t)lsb);
        add_u64(d, (uint64_t)msb);
    }
    if (cls == H5T_INTEGER)
        add_u64(d, (uint64_t)H5Tget_sign(t));
    if (cls == H5T_FLOAT) {
        size_t f[5] = {0, 0, 0, 0, 0};
        H5Tget_fields(t, &f[0], &f[1], &f[2], &f[3], &f[4]);
        for (int k = 0; k < 5; k++)
            add_u64(d, f[k]);
        add_u64(d, H5Tget_ebias(t));
        add_u64(d, (uint64_t)H5Tget_norm(t));
        add_u64(d, (uint64_t)H5Tget_inpad(t));
    }
    if (cls == H5T_STRING) {
        add_u64(d, (uint64_t)H5Tget_strpad(t));
        add_u64(d, (uint64_t)H5Tget_cset(t));
    }
    hsize_t dims[H5S_MAX_RANK];
    const int rank = H5Sget_simple_extent_dims(s, dims, NULL);
    add_u64(d, (uint64_t)H5Sget_simple_extent_type(s));
    add_u64(d, (uint64_t)rank);
    for (int k = 0; k < rank; k++)
        add_u64(d, dims[k]);
}

/* name, type and shape, then the attribute's bytes as stored (read in its
 * own file type, so HDF5 converts nothing and the sum is the same on any
 * host). */
static herr_t add_attr(hid_t loc, const char *name, const H5A_info_t *info, void *p)
{
    (void)info;
    digest *d = p;
    if (!strcmp(name, DS_H5_SEAL_ATTR))
        return 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    hid_t s = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    const hssize_t points = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    const size_t size = t >= 0 ? H5Tget_size(t) : 0;
    /* a damaged shape may claim more points than any size can multiply */
    const int huge = points > 0 && size > 0 && (hsize_t)points > SEAL_MAX_BYTES / size;
    const hsize_t bytes = points >= 0 && !huge ? (hsize_t)points * size : SEAL_MAX_BYTES + 1;
    void *buf = NULL;
    if (t < 0 || points < 0 || size == 0)
        d->st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: cannot read its type or shape", d->path, name);
    else if (H5Tis_variable_str(t) != 0 || H5Tdetect_class(t, H5T_VLEN) != 0)
        d->st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: variable-length, which a checksum cannot cover",
                        d->path, name);
    else if (bytes > SEAL_MAX_BYTES || H5Aget_storage_size(a) != bytes)
        d->st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: claims %llu bytes, stores %llu (damaged)",
                        d->path, name, (unsigned long long)bytes,
                        (unsigned long long)H5Aget_storage_size(a));
    else if (!(buf = malloc(bytes ? bytes : 1)))
        d->st = DS_FAIL(DS_ERR_MEM, "%s: attribute %s: %llu bytes", d->path, name,
                        (unsigned long long)bytes);
    else if (H5Aread(a, t, buf) < 0)
        d->st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: read failed", d->path, name);
    else {
        d->crc = crc32(d->crc, (const Bytef *)name, (uInt)strlen(name) + 1);
        add_layout(d, t, s);
        d->crc = crc32(d->crc, buf, (uInt)bytes);
    }
    free(buf);
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return d->st == DS_OK ? 0 : -1;
}

static ds_status attrs_crc(hid_t loc, const char *path, uint32_t *out)
{
    digest d = {.crc = crc32(0L, Z_NULL, 0), .path = path, .st = DS_OK};
    hsize_t at = 0;
    if (H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &at, add_attr, &d) < 0 && d.st == DS_OK)
        d.st = DS_FAIL(DS_ERR_IO, "%s: cannot list the attributes", path);
    *out = (uint32_t)d.crc;
    return d.st;
}

ds_status ds_h5_seal_attrs(hid_t loc)
{
    char path[256];
    if (H5Fget_name(loc, path, sizeof path) < 0)
        snprintf(path, sizeof path, "(hdf5 object)");
    uint32_t crc;
    DS_TRY(attrs_crc(loc, path, &crc));
    return ds_h5_write_attr_i64(loc, DS_H5_SEAL_ATTR, (int64_t)crc);
}

ds_status ds_h5_check_attrs(hid_t loc, const char *path, int required, int *sealed)
{
    if (sealed)
        *sealed = 0;
    const htri_t there = H5Aexists(loc, DS_H5_SEAL_ATTR);
    if (there < 0)   /* a damaged attribute table: never read as "no seal" */
        return DS_FAIL(DS_ERR_IO, "%s: cannot look up attribute %s (corrupted)", path,
                       DS_H5_SEAL_ATTR);
    if (!there)
        return required ? DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing (corrupted)", path,
                                  DS_H5_SEAL_ATTR)
                        : DS_OK;
    int64_t stored;
    uint32_t crc;
    DS_TRY(ds_h5_read_attr_i64(loc, DS_H5_SEAL_ATTR, &stored));
    DS_TRY(attrs_crc(loc, path, &crc));
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION   /* fuzzing: what the seal guards is read */
    if (stored != (int64_t)crc)
        return DS_FAIL(DS_ERR_IO,
                       "%s: attributes: checksum mismatch (corrupted): stored %08llx, computed %08x",
                       path, (unsigned long long)stored, crc);
#endif
    if (sealed)
        *sealed = 1;
    return DS_OK;
}
