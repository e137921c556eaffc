/* h5_io.h - checked HDF5 helpers: whole datasets in and out by path, with
 * errors that name the file and the dataset. Paths may contain groups
 * ("params/conv.0.weight"); missing groups are created on write. */
#ifndef DS_H5_IO_H
#define DS_H5_IO_H

#include <stdint.h>

#include <hdf5.h>

#include "dtype.h"
#include "status.h"

#define DS_H5_MAX_RANK 8

/* The innermost message of HDF5's error stack (the most specific reason of
 * the last failure) into buf [cap]; "HDF5 gave no reason" when empty. */
const char *ds_h5_reason(char *buf, size_t cap);
ds_status ds_h5_create(const char *path, hid_t *out);              /* truncates */
/* A new HDF5 file at a temporary name beside path (file.h's
 * ds_file_tmp_name: tmp [cap] gets it), created exclusively (H5F_ACC_EXCL: never
 * through a file or link planted at the name); ds_file_commit moves it over
 * path once complete. what names the output in errors. */
ds_status ds_h5_create_tmp(const char *path, const char *what, char *tmp, size_t cap, hid_t *out);
ds_status ds_h5_open(const char *path, int writable, hid_t *out);
ds_status ds_h5_close(hid_t file);
/* A file that lives in memory (name only labels it), in mb's buffer, and
 * its image written by our own writes to a new temporary file beside path
 * and committed over path, which closes it: a full disk is a clean error
 * naming path (which keeps what it held), never an HDF5 file left
 * half-closed. The buffer grows with the file and is kept when it closes,
 * for the next file (one open file per buffer); ds_h5_membuf_free frees it. */
typedef struct {
    void *buf;   /* [cap] bytes */
    size_t cap;
} ds_h5_membuf;
ds_status ds_h5_create_mem(const char *name, ds_h5_membuf *mb, hid_t *out);
ds_status ds_h5_save_mem(hid_t file, ds_h5_membuf *mb, const char *path);
void ds_h5_membuf_free(ds_h5_membuf *mb);

/* Writes data [dims...] of element type t as dataset name. */
ds_status ds_h5_write(hid_t loc, const char *name, ds_dtype t, int rank,
                      const hsize_t *dims, const void *data);
/* Writes host doubles data [dims...] as a dataset stored in type t. */
ds_status ds_h5_write_f64_as(hid_t loc, const char *name, ds_dtype t, int rank,
                             const hsize_t *dims, const double *data);
/* Reads dataset name, which must hold exactly count elements, converting to t. */
ds_status ds_h5_read(hid_t loc, const char *name, ds_dtype t, size_t count, void *data);
/* Like ds_h5_read into a malloc'd *out [count] (freed by the caller). */
ds_status ds_h5_read_new(hid_t loc, const char *name, ds_dtype t, size_t count, void **out);
/* Rank and dimensions of dataset name. */
ds_status ds_h5_shape(hid_t loc, const char *name, int *rank, hsize_t dims[DS_H5_MAX_RANK]);
int ds_h5_exists(hid_t loc, const char *name);

ds_status ds_h5_write_attr_str(hid_t loc, const char *name, const char *value);
ds_status ds_h5_write_attr_f64(hid_t loc, const char *name, double value);
/* Reads a string attribute into buf [cap]. */
ds_status ds_h5_read_attr_str(hid_t loc, const char *name, char *buf, size_t cap);
ds_status ds_h5_read_attr_f64(hid_t loc, const char *name, double *value);
/* A whole number stored as an integer or a double attribute, in [lo, hi]
 * (both within +-DS_H5_WHOLE_MAX): NaN, a fraction or a value outside is an
 * error naming the attribute, never a cast out of range. */
#define DS_H5_WHOLE_MAX 9007199254740992L   /* 2^53: every whole number up to it is a double */
ds_status ds_h5_read_attr_whole(hid_t loc, const char *name, long lo, long hi, long *value);

/* ---- integer attributes, binary16, string arrays, growing 2-D row arrays ---- */

ds_status ds_h5_write_attr_i64(hid_t loc, const char *name, int64_t value);
/* Reads a single integer attribute; a float or string attribute is an error. */
ds_status ds_h5_read_attr_i64(hid_t loc, const char *name, int64_t *value);

/* *out = a new IEEE binary16 little-endian type (HDF5 1.10 predefines none;
 * h5py reads it as float16); HDF5 converts it to and from native float.
 * Close with H5Tclose. */
ds_status ds_h5_half_type(hid_t *out);

/* Writes strs [n] as a 1-D dataset of variable-length UTF-8 strings. */
ds_status ds_h5_write_strings(hid_t loc, const char *name, size_t n, const char *const *strs);
/* Reads a 1-D string dataset (variable or fixed length) of exactly n entries
 * into out [n], each a malloc'd copy; on failure none is left allocated. */
ds_status ds_h5_read_strings(hid_t loc, const char *name, size_t n, char **out);

/* *out = a new 2-D dataset [0][cols] of file type ft that grows in rows, in
 * chunks of chunk_rows x cols, uncompressed, with a chunk cache of
 * cache_bytes. Close with H5Dclose. */
ds_status ds_h5_create_rows(hid_t loc, const char *name, hid_t ft, hsize_t cols, hsize_t chunk_rows,
                            size_t cache_bytes, hid_t *out);
/* Extends the 2-D dataset ds to at + rows rows and writes data [rows][cols]
 * of memory type mt there. */
ds_status ds_h5_append_rows(hid_t ds, hid_t mt, hsize_t at, hsize_t rows, hsize_t cols,
                            const void *data);
/* Rows [row0, row0 + rows) of the 2-D dataset ds -> data [rows][cols] of memory type mt. */
ds_status ds_h5_read_rows(hid_t ds, hid_t mt, hsize_t row0, hsize_t rows, hsize_t cols, void *data);

#endif
