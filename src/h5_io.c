/* h5_io.c - checked HDF5 helpers: whole datasets in and out by path; see
 * h5_io.h.
 * HDF5's own error stack printing is turned off; every
 * failure is reported through ds_status_fail with the file and object names. */
#include "h5_io.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "fault_seam.h"
#include "file.h"
#include "file_input.h"

static hid_t mem_type(ds_dtype t)
{
    switch (t) {
    case DS_F32: return H5T_NATIVE_FLOAT;
    case DS_F64: return H5T_NATIVE_DOUBLE;
    case DS_I32: return H5T_NATIVE_INT32;
    case DS_I64: return H5T_NATIVE_INT64;
    case DS_U8: return H5T_NATIVE_UINT8;
    default: return H5I_INVALID_HID;
    }
}

static const char *file_of(hid_t loc, char *buf, size_t cap)
{
    if (H5Fget_name(loc, buf, cap) < 0)
        snprintf(buf, cap, "(hdf5 object)");
    return buf;
}

static void quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* A stored type HDF5 converts to a native number without harm: an integer
 * of 1, 2, 4 or 8 bytes, or a float of 2, 4 or 8 bytes whose sign, exponent
 * and mantissa lie inside it. HDF5 1.10 overruns its own buffers converting
 * a damaged float type (63 bytes wide: found by tests/fuzz), so every read
 * of a number checks the type first. */
static int plain_number(hid_t ft)
{
    const size_t bytes = H5Tget_size(ft), bits = 8 * bytes;
    const H5T_class_t cls = H5Tget_class(ft);
    if (cls == H5T_INTEGER)
        return bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8;
    size_t spos, epos, esize, mpos, msize;
    return cls == H5T_FLOAT && (bytes == 2 || bytes == 4 || bytes == 8)
           && H5Tget_fields(ft, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos < bits
           && esize >= 1 && epos + esize <= bits && msize >= 1 && mpos + msize <= bits;
}

/* Object obj (a dataset or an attribute, whose type is type_of's) holds
 * numbers plain_number accepts: 1, else 0 (also when its type is unreadable). */
static int holds_numbers(hid_t obj, hid_t (*type_of)(hid_t))
{
    hid_t ft = type_of(obj);
    const int ok = ft >= 0 && plain_number(ft);
    if (ft >= 0)
        H5Tclose(ft);
    return ok;
}

/* Attribute a holds exactly one element (a scalar, or an array of one): a
 * read into one value must not be given an array. */
static int one_element(hid_t a)
{
    hid_t space = H5Aget_space(a);
    const int ok = space >= 0 && H5Sget_simple_extent_npoints(space) == 1;
    if (space >= 0)
        H5Sclose(space);
    return ok;
}

typedef struct {
    char *buf;
    size_t cap;
} reason_buf;

/* Walked upwards, entry 0 is the innermost call: the most specific reason. */
static herr_t innermost(unsigned n, const H5E_error2_t *e, void *p)
{
    reason_buf *r = p;
    if (n == 0 && e->desc)
        snprintf(r->buf, r->cap, "%s", e->desc);
    return 0;
}

const char *ds_h5_reason(char *buf, size_t cap)
{
    reason_buf r = {buf, cap};
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &r);
    if (!buf[0])
        snprintf(buf, cap, "HDF5 gave no reason");
    for (char *c = buf; (c = strchr(c, '\n'));)   /* a write failure's time ends in ctime's newline */
        *c = ' ';
    return buf;
}

/* HDF5 locks every file it opens; NFS and Lustre without locks refuse, and
 * the file looks damaged unless the reason says so. */
static const char *lock_hint(const char *why)
{
    return strstr(why, "lock") ? "; on a file system without locks (NFS, Lustre) set "
                                 "HDF5_USE_FILE_LOCKING=FALSE"
                               : "";
}

ds_status ds_h5_create(const char *path, hid_t *out)
{
    quiet();
    *out = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (*out >= 0)
        return DS_OK;
    char why[1024];
    ds_h5_reason(why, sizeof why);   /* before lock_hint reads it */
    return DS_FAIL(DS_ERR_IO, "%s: cannot create HDF5 file (%s)%s", path, why, lock_hint(why));
}

ds_status ds_h5_create_tmp(const char *path, const char *what, char *tmp, size_t cap, hid_t *out)
{
    quiet();
    char why[1024];
    struct stat sb;
    for (int k = 0; k < 16; k++) {
        DS_TRY(ds_file_tmp_name(path, what, tmp, cap));
        errno = 0;
        *out = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
        if (*out >= 0)
            return DS_OK;
        const int err = errno;
        ds_h5_reason(why, sizeof why);
        /* taken since ds_file_tmp_name looked: another name; otherwise the file,
         * if there, is the one this call created: removed */
        if (err == EEXIST || strstr(why, "File exists"))
            continue;
        if (lstat(tmp, &sb) == 0 && S_ISREG(sb.st_mode))
            unlink(tmp);
        break;
    }
    return DS_FAIL(DS_ERR_IO, "%s: cannot create the %s (%s)%s", tmp, what, why, lock_hint(why));
}

ds_status ds_h5_open(const char *path, int writable, hid_t *out)
{
    *out = -1;
    if (!writable)   /* an input: a FIFO or a device would block HDF5's open for ever */
        DS_TRY(ds_file_require_regular(path, "HDF5 file"));
    quiet();
    *out = H5Fopen(path, writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*out >= 0)
        return DS_OK;
    char why[1024];
    ds_h5_reason(why, sizeof why);   /* before lock_hint reads it */
    return DS_FAIL(DS_ERR_IO, "%s: cannot open as HDF5 (%s): missing, truncated, not HDF5, or "
                   "locked%s", path, why, lock_hint(why));
}

/* The core driver's image allocations, served from mb's buffer: grown as
 * the file grows, never shrunk or freed with the file, so a second file
 * built in it touches no fresh page (a 1 GB checkpoint's image otherwise
 * costs a page fault per 4 KiB, every save). */
static void *membuf_grow(ds_h5_membuf *mb, size_t size)
{
    if (size > mb->cap) {
        void *p = realloc(mb->buf, size);
        if (!p)
            return NULL;
        mb->buf = p;
        mb->cap = size;
    }
    return mb->buf;
}

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    return membuf_grow(udata, size ? size : 1);
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)ptr;   /* always mb's buffer: one file at a time lives in it */
    (void)op;
    return membuf_grow(udata, size ? size : 1);
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    (void)ptr, (void)op, (void)udata;   /* kept for the next file */
    return 0;
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op,
                          void *udata)
{
    (void)op, (void)udata;
    return memcpy(dest, src, size);
}

static void *udata_same(void *udata) { return udata; }   /* the fapl's copies share mb */
static herr_t udata_keep(void *udata) { (void)udata; return 0; }

ds_status ds_h5_create_mem(const char *name, ds_h5_membuf *mb, hid_t *out)
{
    quiet();
    H5FD_file_image_callbacks_t cb = {image_malloc, image_memcpy, image_realloc, image_free,
                                      udata_same, udata_keep, mb};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* grown 1 MiB at a time, never written to disk by HDF5 */
    *out = fapl < 0 || H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) < 0 ||
                   H5Pset_file_image_callbacks(fapl, &cb) < 0
               ? H5I_INVALID_HID
               : H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (fapl >= 0)
        H5Pclose(fapl);
    return *out < 0 ? DS_FAIL(DS_ERR_IO, "%s: cannot create an HDF5 file in memory", name) : DS_OK;
}

void ds_h5_membuf_free(ds_h5_membuf *mb)
{
    free(mb->buf);
    mb->buf = NULL;
    mb->cap = 0;
}

/* The whole of buf [n bytes] into path (created or truncated), every
 * short write retried, every failure naming path and errno's reason. */
/* The fault tests' kill -9 in the middle of a write (ds_h5_fault_kill_after). */
static size_t kill_after;

void ds_h5_fault_kill_after(size_t bytes) { kill_after = bytes; }

static long slow_writes_ms;   /* set by the main thread, read by the writer's */

void ds_h5_fault_slow_writes(double seconds)
{
    __atomic_store_n(&slow_writes_ms, (long)(seconds * 1e3), __ATOMIC_RELAXED);
}

/* buf [n bytes] into a new temporary file beside path, committed over path. */
static ds_status write_all(const char *path, const unsigned char *buf, size_t n)
{
    char tmp[4200];
    int fd;
    DS_TRY(ds_file_tmp_create(path, "HDF5 file", tmp, sizeof tmp, &fd));
    ds_status st = DS_OK;
    const long slow = __atomic_load_n(&slow_writes_ms, __ATOMIC_RELAXED);
    if (slow > 0) {
        const struct timespec nap = {slow / 1000, slow % 1000 * 1000000L};
        nanosleep(&nap, NULL);
    }
    for (size_t done = 0; st == DS_OK && done < n;) {
        if (kill_after && done >= kill_after) {
            fsync(fd);   /* the part written is on disk, as a real crash could leave it */
            raise(SIGKILL);
        }
        const size_t piece = kill_after && n - done > kill_after - done ? kill_after - done : n - done;
        ssize_t w = write(fd, buf + done, piece);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno == EINTR)
            continue;
        else
            st = DS_FAIL(DS_ERR_IO, "%s: write of %zu bytes at %zu: %s", tmp, n - done, done,
                         w < 0 ? strerror(errno) : "no progress");
    }
    if (close(fd) != 0 && st == DS_OK)
        st = DS_FAIL(DS_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (st != DS_OK) {
        unlink(tmp);
        return st;
    }
    return ds_file_commit(tmp, path);   /* removes tmp if it fails */
}

ds_status ds_h5_save_mem(hid_t file, ds_h5_membuf *mb, const char *path)
{
    ds_status st = DS_OK;
    /* flushed, the whole file is the first n bytes of mb's buffer: written
     * from there, with no copy of the image */
    ssize_t n = H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(file, NULL, 0);
    if (n < 0 || (size_t)n > mb->cap)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot take the in-memory HDF5 image", path);
    if (st == DS_OK)
        st = write_all(path, mb->buf, (size_t)n);
    /* closing an in-memory file touches no disk */
    if (H5Fclose(file) < 0 && st == DS_OK)
        st = DS_FAIL(DS_ERR_IO, "%s: cannot close the in-memory HDF5 file", path);
    return st;
}

ds_status ds_h5_close(hid_t file)
{
    return H5Fclose(file) < 0 ? DS_FAIL(DS_ERR_IO, "cannot close HDF5 file") : DS_OK;
}

int ds_h5_exists(hid_t loc, const char *name)
{
    /* H5Lexists needs every parent to exist, so walk the path. */
    char part[512];
    const char *p = name;
    while (1) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - name) : strlen(name);
        if (n >= sizeof part)
            return 0;
        memcpy(part, name, n);
        part[n] = '\0';
        if (H5Lexists(loc, part, H5P_DEFAULT) <= 0)
            return 0;
        if (!slash)
            return 1;
        p = slash + 1;
    }
}

/* Creation properties that checksum a dataset (Fletcher32, verified by HDF5
 * on every read): chunked, whole rows per chunk up to 256 MiB. Empty
 * datasets stay contiguous (H5P_DEFAULT); -1 on failure. */
static hid_t checksummed(int rank, const hsize_t *dims, size_t elem)
{
    hsize_t chunk[DS_H5_MAX_RANK], row = elem;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0)
            return H5P_DEFAULT;
        chunk[i] = dims[i];
        if (i > 0)
            row *= dims[i];
    }
    if (rank > 0) {
        const hsize_t rows = ((hsize_t)256 << 20) / (row ? row : 1);
        chunk[0] = rows < 1 ? 1 : rows < dims[0] ? rows : dims[0];
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0 || (rank > 0 && H5Pset_chunk(dcpl, rank, chunk) < 0) ||
        (rank > 0 && H5Pset_fletcher32(dcpl) < 0)) {
        if (dcpl >= 0)
            H5Pclose(dcpl);
        return -1;
    }
    return dcpl;
}

ds_status ds_h5_write(hid_t loc, const char *name, ds_dtype t, int rank, const hsize_t *dims,
                      const void *data)
{
    char fn[256];
    hid_t mt = mem_type(t);
    if (mt == H5I_INVALID_HID)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "%s: %s: dtype %s cannot be stored", file_of(loc, fn, sizeof fn),
                       name, ds_dtype_name(t));
    ds_status st = DS_OK;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE), space = -1, ds = -1, dcpl = -1;
    if (lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s: link property list", file_of(loc, fn, sizeof fn), name);
        goto close_lcpl;
    }
    space = H5Screate_simple(rank, dims, NULL);
    if (space < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s: dataspace", file_of(loc, fn, sizeof fn), name);
        goto close_lcpl;
    }
    dcpl = checksummed(rank, dims, H5Tget_size(mt));
    ds = dcpl < 0 ? -1 : H5Dcreate2(loc, name, mt, space, lcpl, dcpl, H5P_DEFAULT);
    if (ds < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s: cannot create dataset", file_of(loc, fn, sizeof fn), name);
        goto close_space;
    }
    if (H5Dwrite(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: write failed", file_of(loc, fn, sizeof fn), name);
    H5Dclose(ds);
close_space:
    H5Sclose(space);
    if (dcpl >= 0 && dcpl != H5P_DEFAULT)
        H5Pclose(dcpl);
close_lcpl:
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return st;
}

ds_status ds_h5_write_f64_as(hid_t loc, const char *name, ds_dtype t, int rank,
                             const hsize_t *dims, const double *data)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    void *tmp = malloc(n * ds_dtype_size(t) + 1);
    if (!tmp)
        return DS_FAIL(DS_ERR_MEM, "%s: staging %zu elements", name, n);
    ds_status st = ds_convert(t, tmp, DS_F64, data, n);
    if (st == DS_OK)
        st = ds_h5_write(loc, name, t, rank, dims, tmp);
    free(tmp);
    return st;
}

/* Dataset ds [dims of rank] holds at most 256 times its file's bytes (+ 64
 * KiB): more, and the file is damaged. The readers allocate for a whole
 * extent before HDF5 reads it, and a few header bytes can claim 2^40
 * elements: a 24 KB feature file made `dstrain info` take 24 GB before
 * this (found after tests/fuzz). 256 is more than compression gives data. */
static int fits_in_file(hid_t ds, int rank, const hsize_t *dims)
{
    hid_t file = H5Iget_file_id(ds), type = H5Dget_type(ds);
    hsize_t file_bytes = 0;
    double bytes = type >= 0 ? (double)H5Tget_size(type) : 0;
    int ok = file >= 0 && bytes > 0 && H5Fget_filesize(file, &file_bytes) >= 0;
    for (int i = 0; i < rank; i++)
        bytes *= (double)dims[i];   /* in double: the product cannot wrap */
    ok = ok && bytes <= ((double)file_bytes + 65536.0) * 256.0;
    if (type >= 0)
        H5Tclose(type);
    if (file >= 0)
        H5Fclose(file);   /* the ID H5Iget_file_id made; the file stays open */
    return ok;
}

ds_status ds_h5_shape(hid_t loc, const char *name, int *rank, hsize_t dims[DS_H5_MAX_RANK])
{
    char fn[256];
    if (!ds_h5_exists(loc, name))
        return DS_FAIL(DS_ERR_IO, "%s: dataset %s is missing", file_of(loc, fn, sizeof fn), name);
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0)
        return DS_FAIL(DS_ERR_IO, "%s: %s: cannot open dataset", file_of(loc, fn, sizeof fn), name);
    ds_status st = DS_OK;
    hid_t space = H5Dget_space(ds);
    int r = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (r < 0 || r > DS_H5_MAX_RANK)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: bad dataspace (rank %d)", file_of(loc, fn, sizeof fn), name, r);
    else if (H5Sget_simple_extent_dims(space, dims, NULL) < 0 || !fits_in_file(ds, r, dims))
        st = DS_FAIL(DS_ERR_IO, "%s: %s: its shape claims more data than the file holds (damaged)",
                     file_of(loc, fn, sizeof fn), name);
    else
        *rank = r;
    if (space >= 0)
        H5Sclose(space);
    H5Dclose(ds);
    return st;
}

ds_status ds_h5_read(hid_t loc, const char *name, ds_dtype t, size_t count, void *data)
{
    char fn[256];
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(ds_h5_shape(loc, name, &rank, dims));
    size_t have = 1;
    for (int i = 0; i < rank; i++)
        have *= dims[i];
    if (have != count)
        return DS_FAIL(DS_ERR_IO, "%s: %s holds %zu elements, expected %zu", file_of(loc, fn, sizeof fn),
                       name, have, count);
    hid_t mt = mem_type(t);
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    if (ds < 0)
        return DS_FAIL(DS_ERR_IO, "%s: %s: cannot open dataset", file_of(loc, fn, sizeof fn), name);
    ds_status st = DS_OK;
    if (!holds_numbers(ds, H5Dget_type))
        st = DS_FAIL(DS_ERR_IO, "%s: %s: not stored as a plain integer or float type (corrupted)",
                     file_of(loc, fn, sizeof fn), name);
    else if (count && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: read failed (checksum mismatch: corrupted; or truncated, or wrong type)",
                     file_of(loc, fn, sizeof fn), name);
    H5Dclose(ds);
    return st;
}

ds_status ds_h5_read_new(hid_t loc, const char *name, ds_dtype t, size_t count, void **out)
{
    *out = malloc((count ? count : 1) * ds_dtype_size(t));
    if (!*out)
        return DS_FAIL(DS_ERR_MEM, "%s: %zu elements", name, count);
    return ds_h5_read(loc, name, t, count, *out);
}

static ds_status write_attr(hid_t loc, const char *name, hid_t type, const void *value)
{
    char fn[256];
    if (H5Aexists(loc, name) > 0 && H5Adelete(loc, name) < 0)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s: cannot replace", file_of(loc, fn, sizeof fn), name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    ds_status st = DS_OK;
    if (a < 0 || H5Awrite(a, type, value) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: cannot write", file_of(loc, fn, sizeof fn), name);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(space);
    return st;
}

ds_status ds_h5_write_attr_str(hid_t loc, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    ds_status st = write_attr(loc, name, type, value);
    H5Tclose(type);
    return st;
}

ds_status ds_h5_write_attr_f64(hid_t loc, const char *name, double value)
{
    return write_attr(loc, name, H5T_NATIVE_DOUBLE, &value);
}

ds_status ds_h5_read_attr_f64(hid_t loc, const char *name, double *value)
{
    char fn[256];
    if (H5Aexists(loc, name) <= 0)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing", file_of(loc, fn, sizeof fn), name);
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    ds_status st = DS_OK;
    if (a < 0 || !one_element(a) || !holds_numbers(a, H5Aget_type)
        || H5Aread(a, H5T_NATIVE_DOUBLE, value) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: not a number", file_of(loc, fn, sizeof fn), name);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

ds_status ds_h5_read_attr_whole(hid_t loc, const char *name, long lo, long hi, long *value)
{
    char fn[256];
    double v;
    DS_TRY(ds_h5_read_attr_f64(loc, name, &v));
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v))
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is %g, expected a whole number in [%ld, %ld]",
                       file_of(loc, fn, sizeof fn), name, v, lo, hi);
    *value = (long)v;
    return DS_OK;
}

ds_status ds_h5_read_attr_str(hid_t loc, const char *name, char *buf, size_t cap)
{
    char fn[256];
    if (H5Aexists(loc, name) <= 0)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing", file_of(loc, fn, sizeof fn), name);
    ds_status st = DS_OK;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t ft = a < 0 ? -1 : H5Aget_type(a);
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING || !one_element(a)) {
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: not a string", file_of(loc, fn, sizeof fn), name);
        goto close;
    }
    if (H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(ft));   /* h5py writes UTF-8; HDF5 will not convert */
        if (H5Aread(a, mt, &s) < 0 || !s)
            st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: unreadable", file_of(loc, fn, sizeof fn), name);
        else {
            snprintf(buf, cap, "%s", s);
            H5free_memory(s);
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(ft);
        if (n + 1 > cap) {
            st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: longer than %zu", file_of(loc, fn, sizeof fn), name,
                         cap - 1);
            goto close;
        }
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        H5Tset_cset(mt, H5Tget_cset(ft));
        memset(buf, 0, n + 1);
        if (H5Aread(a, mt, buf) < 0)
            st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: unreadable", file_of(loc, fn, sizeof fn), name);
        H5Tclose(mt);
    }
close:
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

/* ---- integer attributes, binary16, string arrays, growing 2-D row arrays ---- */

ds_status ds_h5_write_attr_i64(hid_t loc, const char *name, int64_t value)
{
    return write_attr(loc, name, H5T_NATIVE_INT64, &value);
}

ds_status ds_h5_read_attr_i64(hid_t loc, const char *name, int64_t *value)
{
    char fn[256];
    if (H5Aexists(loc, name) <= 0)
        return DS_FAIL(DS_ERR_IO, "%s: attribute %s is missing", file_of(loc, fn, sizeof fn), name);
    ds_status st = DS_OK;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t ft = a < 0 ? -1 : H5Aget_type(a);
    hid_t space = a < 0 ? -1 : H5Aget_space(a);
    if (ft < 0 || space < 0 || H5Tget_class(ft) != H5T_INTEGER || !plain_number(ft)
        || H5Sget_simple_extent_npoints(space) != 1)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: not a single integer", file_of(loc, fn, sizeof fn),
                     name);
    else if (H5Aread(a, H5T_NATIVE_INT64, value) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: attribute %s: unreadable", file_of(loc, fn, sizeof fn), name);
    if (space >= 0)
        H5Sclose(space);
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return st;
}

ds_status ds_h5_half_type(hid_t *out)
{
    /* sign bit 15, exponent bits 10..14 (bias 15), mantissa bits 0..9 */
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return DS_FAIL(DS_ERR_IO, "float16 type: cannot copy float32");
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0
        || H5Tset_precision(t, 16) < 0 || H5Tset_norm(t, H5T_NORM_IMPLIED) < 0) {
        H5Tclose(t);
        return DS_FAIL(DS_ERR_IO, "float16 type: cannot set its fields");
    }
    *out = t;
    return DS_OK;
}

/* A variable-length string type of character set cset (HDF5 does not
 * convert between character sets, so memory must match the file). */
static hid_t vlen_str(H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, cset) < 0)) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

ds_status ds_h5_write_strings(hid_t loc, const char *name, size_t n, const char *const *strs)
{
    char fn[256];
    ds_status st = DS_OK;
    hsize_t dim = n;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    hid_t type = vlen_str(H5T_CSET_UTF8);
    hid_t space = H5Screate_simple(1, &dim, NULL);
    hid_t ds = -1;
    if (lcpl < 0 || type < 0 || space < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s: string type or dataspace", file_of(loc, fn, sizeof fn), name);
        goto close_all;
    }
    ds = H5Dcreate2(loc, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (ds < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: cannot create dataset", file_of(loc, fn, sizeof fn), name);
    else if (n && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, strs) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: write failed", file_of(loc, fn, sizeof fn), name);
close_all:
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    return st;
}

static void free_strings(char **s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i]);
        s[i] = NULL;
    }
}

/* Variable-length strings of dataset ds [n] -> malloc'd copies in out [n]. */
static int read_vlen_strings(hid_t ds, hid_t ft, size_t n, char **out)
{
    hid_t mt = vlen_str(H5Tget_cset(ft));
    char **raw = calloc(n ? n : 1, sizeof *raw);
    int ok = mt >= 0 && raw && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0;
    if (ok) {
        for (size_t i = 0; i < n && ok; i++)
            ok = (out[i] = strdup(raw[i] ? raw[i] : "")) != NULL;
        hid_t space = H5Dget_space(ds);
        if (space < 0 || H5Dvlen_reclaim(mt, space, H5P_DEFAULT, raw) < 0)
            ok = 0;
        if (space >= 0)
            H5Sclose(space);
    }
    free(raw);
    if (mt >= 0)
        H5Tclose(mt);
    return ok;
}

/* Fixed-length strings of dataset ds [n] -> malloc'd copies in out [n]. */
static int read_fixed_strings(hid_t ds, hid_t ft, size_t n, char **out)
{
    size_t len = H5Tget_size(ft);
    hid_t mt = H5Tcopy(H5T_C_S1);
    char *raw = calloc(n ? n : 1, len + 1);
    int ok = mt >= 0 && raw && len > 0 && H5Tset_size(mt, len + 1) >= 0
             && H5Tset_cset(mt, H5Tget_cset(ft)) >= 0
             && H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0;
    for (size_t i = 0; i < n && ok; i++)
        ok = (out[i] = strndup(raw + i * (len + 1), len)) != NULL;
    free(raw);
    if (mt >= 0)
        H5Tclose(mt);
    return ok;
}

ds_status ds_h5_read_strings(hid_t loc, const char *name, size_t n, char **out)
{
    char fn[256];
    int rank;
    hsize_t dims[DS_H5_MAX_RANK];
    DS_TRY(ds_h5_shape(loc, name, &rank, dims));
    if (rank != 1 || dims[0] != n)
        return DS_FAIL(DS_ERR_IO, "%s: %s: expected %zu strings, found rank %d [%llu]",
                       file_of(loc, fn, sizeof fn), name, n, rank,
                       rank ? (unsigned long long)dims[0] : 0ULL);
    memset(out, 0, n * sizeof *out);
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    hid_t ft = ds < 0 ? -1 : H5Dget_type(ds);
    ds_status st = DS_OK;
    if (ft < 0 || H5Tget_class(ft) != H5T_STRING)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: not a string dataset", file_of(loc, fn, sizeof fn), name);
    else if (!(H5Tis_variable_str(ft) > 0 ? read_vlen_strings(ds, ft, n, out)
                                           : read_fixed_strings(ds, ft, n, out))) {
        free_strings(out, n);
        st = DS_FAIL(DS_ERR_IO, "%s: %s: strings unreadable", file_of(loc, fn, sizeof fn), name);
    }
    if (ft >= 0)
        H5Tclose(ft);
    if (ds >= 0)
        H5Dclose(ds);
    return st;
}

/* "file: object" for messages about an open dataset. */
static const char *object_of(hid_t ds, char *buf, size_t cap)
{
    char fn[256], on[256];
    if (H5Iget_name(ds, on, sizeof on) < 0)
        snprintf(on, sizeof on, "(dataset)");
    snprintf(buf, cap, "%s: %s", file_of(ds, fn, sizeof fn), on);
    return buf;
}

ds_status ds_h5_create_rows(hid_t loc, const char *name, hid_t ft, hsize_t cols, hsize_t chunk_rows,
                            size_t cache_bytes, hid_t *out)
{
    char fn[256];
    ds_status st = DS_OK;
    hsize_t dims[2] = {0, cols}, maxdims[2] = {H5S_UNLIMITED, cols}, chunk[2] = {chunk_rows, cols};
    hid_t space = H5Screate_simple(2, dims, maxdims);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    if (space < 0 || lcpl < 0 || dcpl < 0 || dapl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0
        || H5Pset_chunk(dcpl, 2, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0   /* checked on read */
        || H5Pset_chunk_cache(dapl, 521, cache_bytes, H5D_CHUNK_CACHE_W0_DEFAULT) < 0) {
        st = DS_FAIL(DS_ERR_IO, "%s: %s: chunked layout", file_of(loc, fn, sizeof fn), name);
        goto close_props;
    }
    *out = H5Dcreate2(loc, name, ft, space, lcpl, dcpl, dapl);
    if (*out < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: %s: cannot create dataset", file_of(loc, fn, sizeof fn), name);
close_props:
    if (dapl >= 0)
        H5Pclose(dapl);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (lcpl >= 0)
        H5Pclose(lcpl);
    if (space >= 0)
        H5Sclose(space);
    return st;
}

/* Selects rows [row0, row0 + rows) of the 2-D dataset ds; *file and *mem are
 * the file and memory dataspaces, both closed on failure. */
static int select_rows(hid_t ds, hsize_t row0, hsize_t rows, hsize_t cols, hid_t *file, hid_t *mem)
{
    hsize_t start[2] = {row0, 0}, count[2] = {rows, cols};
    *file = H5Dget_space(ds);
    *mem = H5Screate_simple(2, count, NULL);
    if (*file >= 0 && *mem >= 0
        && H5Sselect_hyperslab(*file, H5S_SELECT_SET, start, NULL, count, NULL) >= 0)
        return 1;
    if (*file >= 0)
        H5Sclose(*file);
    if (*mem >= 0)
        H5Sclose(*mem);
    return 0;
}

ds_status ds_h5_append_rows(hid_t ds, hid_t mt, hsize_t at, hsize_t rows, hsize_t cols,
                            const void *data)
{
    char on[600];
    hsize_t dims[2] = {at + rows, cols};
    if (H5Dset_extent(ds, dims) < 0)
        return DS_FAIL(DS_ERR_IO, "%s: cannot extend to %llu rows", object_of(ds, on, sizeof on),
                       (unsigned long long)dims[0]);
    hid_t file, mem;
    if (!select_rows(ds, at, rows, cols, &file, &mem))
        return DS_FAIL(DS_ERR_IO, "%s: cannot select rows %llu..%llu", object_of(ds, on, sizeof on),
                       (unsigned long long)at, (unsigned long long)(at + rows));
    ds_status st = DS_OK;
    if (H5Dwrite(ds, mt, mem, file, H5P_DEFAULT, data) < 0) {
        char why[1024];
        ds_h5_reason(why, sizeof why);
        st = DS_FAIL(DS_ERR_IO, "%s: writing rows %llu..%llu failed (%s)", object_of(ds, on, sizeof on),
                     (unsigned long long)at, (unsigned long long)(at + rows), why);
    }
    H5Sclose(mem);
    H5Sclose(file);
    return st;
}

ds_status ds_h5_read_rows(hid_t ds, hid_t mt, hsize_t row0, hsize_t rows, hsize_t cols, void *data)
{
    char on[600];
    hid_t file, mem;
    quiet();   /* HDF5's error printing is per thread: the loader's too */
    if (!select_rows(ds, row0, rows, cols, &file, &mem))
        return DS_FAIL(DS_ERR_IO, "%s: cannot select rows %llu..%llu", object_of(ds, on, sizeof on),
                       (unsigned long long)row0, (unsigned long long)(row0 + rows));
    ds_status st = DS_OK;
    if (H5Dread(ds, mt, mem, file, H5P_DEFAULT, data) < 0)
        st = DS_FAIL(DS_ERR_IO, "%s: reading rows %llu..%llu failed (checksum mismatch: corrupted; or truncated)",
                     object_of(ds, on, sizeof on), (unsigned long long)row0,
                     (unsigned long long)(row0 + rows));
    H5Sclose(mem);
    H5Sclose(file);
    return st;
}
