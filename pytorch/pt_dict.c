/* pt_dict.c - a PyTorch state_dict on the host; see pt_dict.h. */
#include "pt_dict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torch.save files are little-endian; pt_dict stores tensors in host order"
#endif

ds_status ds_pt_numel(const int64_t *dims, int rank, size_t max, const char *what, size_t *out)
{
    size_t n = 1;
    *out = 0;
    if (rank < 0 || rank > DS_PT_MAX_RANK)
        return DS_FAIL(DS_ERR_ARG, "%s: %d dimensions, at most %d are read", what, rank,
                       DS_PT_MAX_RANK);
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return DS_FAIL(DS_ERR_ARG, "%s: dimension %d is %lld", what, i, (long long)dims[i]);
        if (dims[i] > 0 && n > max / (size_t)dims[i])
            return DS_FAIL(DS_ERR_ARG, "%s: more than %zu elements", what, max);
        n *= (size_t)dims[i];
    }
    *out = n;
    return DS_OK;
}

ds_status ds_pt_dict_add(ds_pt_dict *d, const char *key, ds_dtype dt, int rank,
                         const int64_t *dims, void **data)
{
    size_t numel;
    if (data)
        *data = NULL;
    if (ds_pt_dict_find(d, key))
        return DS_FAIL(DS_ERR_ARG, "state_dict key %s appears twice", key);
    DS_TRY(ds_pt_numel(dims, rank, SIZE_MAX / 16, key, &numel));
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        ds_pt_tensor *t = realloc(d->t, (size_t)cap * sizeof *t);
        if (!t)
            return DS_FAIL(DS_ERR_MEM, "state_dict of %d tensors", cap);
        d->t = t;
        d->cap = cap;
    }
    ds_pt_tensor *t = &d->t[d->n];
    memset(t, 0, sizeof *t);
    t->key = strdup(key);
    t->data = data ? calloc(numel ? numel : 1, ds_dtype_size(dt)) : NULL;
    if (!t->key || (data && !t->data)) {
        free(t->key);
        free(t->data);
        return DS_FAIL(DS_ERR_MEM, "tensor %s (%zu elements)", key, numel);
    }
    t->dt = dt;
    t->rank = rank;
    if (rank > 0)
        memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->numel = numel;
    d->n++;
    if (data)
        *data = t->data;
    return DS_OK;
}

const ds_pt_tensor *ds_pt_dict_find(const ds_pt_dict *d, const char *key)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->t[i].key, key))
            return &d->t[i];
    return NULL;
}

void ds_pt_dict_free(ds_pt_dict *d)
{
    for (int i = 0; i < d->n; i++) {
        free(d->t[i].key);
        free(d->t[i].data);
    }
    free(d->t);
    memset(d, 0, sizeof *d);
}

static const struct {
    ds_dtype dt;
    const char *storage, *name;
} pt_types[] = {
    {DS_F32, "FloatStorage", "float32"},  {DS_F64, "DoubleStorage", "float64"},
    {DS_F16, "HalfStorage", "float16"},   {DS_BF16, "BFloat16Storage", "bfloat16"},
    {DS_I64, "LongStorage", "int64"},     {DS_I32, "IntStorage", "int32"},
    {DS_U8, "ByteStorage", "uint8"},
};
#define N_PT_TYPES (sizeof pt_types / sizeof pt_types[0])

const char *ds_pt_storage_class(ds_dtype dt)
{
    for (size_t i = 0; i < N_PT_TYPES; i++)
        if (pt_types[i].dt == dt)
            return pt_types[i].storage;
    return NULL;
}

int ds_pt_storage_dtype(const char *name, ds_dtype *out)
{
    for (size_t i = 0; i < N_PT_TYPES; i++)
        if (!strcmp(pt_types[i].storage, name)) {
            *out = pt_types[i].dt;
            return 1;
        }
    return 0;
}

const char *ds_pt_dtype_name(ds_dtype dt)
{
    for (size_t i = 0; i < N_PT_TYPES; i++)
        if (pt_types[i].dt == dt)
            return pt_types[i].name;
    return "unknown";
}

const char *ds_pt_shape_str(const int64_t *dims, int rank, char *buf, size_t cap)
{
    size_t at = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    for (int i = 0; i <= rank && at < cap; i++) {
        int n = i == rank ? snprintf(buf + at, cap - at, "%s]", rank ? "" : "[")
                          : snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "[", (long long)dims[i]);
        if (n < 0)
            break;
        at += (size_t)n;
    }
    return buf;
}
