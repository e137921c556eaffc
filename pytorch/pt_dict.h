/* pt_dict.h - a PyTorch state_dict on the host: named tensors in order,
 * each contiguous (row-major) in little-endian elements of one dtype, as
 * torch.save stores them. The storage classes torch names in its pickles
 * (torch.FloatStorage, ...) map to our dtypes here. */
#ifndef DS_PT_DICT_H
#define DS_PT_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "status.h"

#define DS_PT_MAX_RANK 8

typedef struct {
    char *key;                      /* the state_dict key (owned) */
    ds_dtype dt;                    /* DS_F32, DS_F64, DS_F16, DS_BF16, DS_I64, DS_I32 or DS_U8 */
    int rank;                       /* 0: a scalar (num_batches_tracked) */
    int64_t dims[DS_PT_MAX_RANK];
    size_t numel;                   /* product of dims (1 for rank 0) */
    void *data;                     /* [numel] of dt, row-major (owned) */
} ds_pt_tensor;

typedef struct {
    ds_pt_tensor *t;                /* [n] in state_dict order */
    int n, cap;
} ds_pt_dict;

/* Appends key with shape dims [rank] and dtype dt; *data gets its zeroed
 * [numel] elements to fill. data NULL: the entry's shape only, its data
 * left NULL (nothing allocated). A key already present is refused. */
ds_status ds_pt_dict_add(ds_pt_dict *d, const char *key, ds_dtype dt, int rank,
                         const int64_t *dims, void **data);
/* The tensor named key, or NULL. */
const ds_pt_tensor *ds_pt_dict_find(const ds_pt_dict *d, const char *key);
void ds_pt_dict_free(ds_pt_dict *d);

/* Elements of dims [rank] (1 for rank 0); 0 with DS_ERR_ARG recorded when a
 * dimension is negative or the product passes max (what names it). */
ds_status ds_pt_numel(const int64_t *dims, int rank, size_t max, const char *what, size_t *out);

/* torch's storage class for dt ("FloatStorage", ...), or NULL. */
const char *ds_pt_storage_class(ds_dtype dt);
/* The dtype of storage class name ("FloatStorage"): 1, or 0 when not one we read. */
int ds_pt_storage_dtype(const char *name, ds_dtype *out);
/* torch's name of dt for messages: "float32", "float16", "int64", ... */
const char *ds_pt_dtype_name(ds_dtype dt);
/* "[2, 3, 4]" ("[]" for rank 0) into buf [cap]; returns buf. */
const char *ds_pt_shape_str(const int64_t *dims, int rank, char *buf, size_t cap);

#endif
