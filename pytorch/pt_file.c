/* pt_file.c - torch.save files of state_dicts (pt_file.h). */
#include "pt_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pt_pickle_read.h"
#include "pt_pickle_write.h"
#include "pt_zip.h"

#define PT_PREFIX "archive"
#define MAX_PICKLE ((size_t)64 << 20)      /* data.pkl of a state_dict is kilobytes */
#define MAX_STORAGE ((size_t)1 << 40)

ds_status ds_pt_save(const char *path, const ds_pt_dict *d)
{
    unsigned char *pkl = NULL;
    size_t pkl_len = 0;
    ds_pt_zip_writer *w = NULL;
    char name[32];
    DS_TRY(ds_pt_pickle_state_dict(d, &pkl, &pkl_len));
    ds_status st;
    DS_TRY_GOTO(st, ds_pt_zip_create(path, PT_PREFIX, &w), fail);
    DS_TRY_GOTO(st, ds_pt_zip_add(w, "data.pkl", pkl, pkl_len), fail);
    DS_TRY_GOTO(st, ds_pt_zip_add(w, "byteorder", "little", 6), fail);
    for (int i = 0; i < d->n; i++) {
        snprintf(name, sizeof name, "data/%d", i);
        DS_TRY_GOTO(st, ds_pt_zip_add(w, name, d->t[i].data,
                                      d->t[i].numel * ds_dtype_size(d->t[i].dt)), fail);
    }
    DS_TRY_GOTO(st, ds_pt_zip_add(w, "version", "3\n", 2), fail);
    st = ds_pt_zip_close(w);   /* reads pkl and the tensors: free them after */
    free(pkl);
    return st;
fail:
    ds_pt_zip_discard(w);
    free(pkl);
    return st;
}

/* ---- reading ---- */

/* Storages read so far (tensors may share one). */
typedef struct {
    char *key;
    void *data;
    size_t bytes;
} storage;

typedef struct {
    ds_pt_zip_reader *z;
    const char *path;
    storage *s;
    int n;
} loader;

static ds_status check_header(loader *l)
{
    void *data = NULL;
    size_t len = 0;
    if (!ds_pt_zip_has(l->z, "data.pkl"))
        return DS_FAIL(DS_ERR_IO, "%s: a zip without data.pkl: not a torch.save file", l->path);
    if (!ds_pt_zip_has(l->z, "byteorder"))
        return DS_OK;   /* written before torch 2.1: little-endian */
    DS_TRY(ds_pt_zip_read(l->z, "byteorder", NULL, 16, &data, &len));
    int little = len == 6 && !memcmp(data, "little", 6);
    free(data);
    if (!little)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "%s: byteorder is not \"little\": big-endian "
                                           "torch.save files are not read", l->path);
    return DS_OK;
}

/* The bytes of the storage of r (read once). */
static ds_status get_storage(loader *l, const ds_pt_tensor_ref *r, const storage **out)
{
    const size_t es = ds_dtype_size(r->dt);
    if ((uint64_t)r->storage_numel > MAX_STORAGE / es)
        return DS_FAIL(DS_ERR_IO, "%s: key %s: storage %s of %lld elements", l->path, r->key,
                       r->storage, (long long)r->storage_numel);
    const size_t bytes = (size_t)r->storage_numel * es;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->s[i].key, r->storage)) {
            /* a storage shared by tensors must be claimed alike: the views are
             * checked against this claim, the bytes were read for the first */
            if (l->s[i].bytes != bytes)
                return DS_FAIL(DS_ERR_IO, "%s: key %s: storage %s claimed as %zu bytes, earlier "
                               "as %zu", l->path, r->key, r->storage, bytes, l->s[i].bytes);
            *out = &l->s[i];
            return DS_OK;
        }
    storage *s = realloc(l->s, (size_t)(l->n + 1) * sizeof *s);
    if (!s)
        return DS_FAIL(DS_ERR_MEM, "%s: storages", l->path);
    l->s = s;
    storage *n = &l->s[l->n];
    char name[300];
    if (snprintf(name, sizeof name, "data/%s", r->storage) >= (int)sizeof name)
        return DS_FAIL(DS_ERR_IO, "%s: key %s: storage name too long", l->path, r->key);
    if (!ds_pt_zip_has(l->z, name))
        return DS_FAIL(DS_ERR_IO, "%s: key %s: its storage record %s is missing", l->path, r->key,
                       name);
    char what[200];
    snprintf(what, sizeof what, "key %s", r->key);
    DS_TRY(ds_pt_zip_read(l->z, name, what, bytes, &n->data, &n->bytes));
    if (n->bytes != bytes) {
        free(n->data);
        return DS_FAIL(DS_ERR_IO, "%s: key %s: storage %s holds %zu bytes, its %lld %s elements "
                                  "need %zu", l->path, r->key, name, n->bytes,
                       (long long)r->storage_numel, ds_pt_dtype_name(r->dt), bytes);
    }
    n->key = strdup(r->storage);
    if (!n->key) {
        free(n->data);
        return DS_FAIL(DS_ERR_MEM, "%s: storages", l->path);
    }
    *out = &l->s[l->n++];
    return DS_OK;
}

/* r's view stays inside its storage: every index it reaches, the largest
 * offset + sum (dims - 1) * strides included, is below storage_numel. */
static ds_status check_view(loader *l, const ds_pt_tensor_ref *r)
{
    const uint64_t n = (uint64_t)r->storage_numel;
    uint64_t last = (uint64_t)r->offset;
    for (int i = 0; i < r->rank; i++) {
        const uint64_t span = (uint64_t)(r->dims[i] - 1), stride = (uint64_t)r->strides[i];
        if (stride && span > n / stride)
            return DS_FAIL(DS_ERR_IO, "%s: key %s: dimension %d (%lld, stride %lld) runs past its "
                                      "storage of %lld", l->path, r->key, i, (long long)r->dims[i],
                           (long long)r->strides[i], (long long)r->storage_numel);
        last += span * stride;
    }
    if (last >= n)
        return DS_FAIL(DS_ERR_IO, "%s: key %s: the tensor reaches element %llu of a storage of "
                                  "%lld", l->path, r->key, (unsigned long long)last,
                       (long long)r->storage_numel);
    return DS_OK;
}

/* Row-major strides (those of dimensions of size 1 do not matter). */
static int contiguous(const ds_pt_tensor_ref *r)
{
    int64_t expect = 1;
    for (int i = r->rank - 1; i >= 0; i--) {
        if (r->dims[i] != 1 && r->strides[i] != expect)
            return 0;
        expect *= r->dims[i];
    }
    return 1;
}

/* The tensor r of its storage s, copied contiguous (any non-negative strides
 * inside the storage: views, transposes and expanded tensors too). */
static ds_status gather(loader *l, const ds_pt_tensor_ref *r, const storage *s, ds_pt_dict *d)
{
    void *dst;
    size_t numel;
    const size_t es = ds_dtype_size(r->dt);
    /* an expanded view (stride 0) may claim far more elements than its
     * storage holds: no tensor of a model is larger than MAX_STORAGE */
    DS_TRY(ds_pt_numel(r->dims, r->rank, MAX_STORAGE / es, r->key, &numel));
    if (numel > 0)
        DS_TRY(check_view(l, r));
    if (!s)   /* shapes only */
        return ds_pt_dict_add(d, r->key, r->dt, r->rank, r->dims, NULL);
    DS_TRY(ds_pt_dict_add(d, r->key, r->dt, r->rank, r->dims, &dst));
    if (numel == 0)
        return DS_OK;
    const char *src = s->data;
    if (contiguous(r)) {   /* as torch.save writes a state_dict's tensors */
        memcpy(dst, src + (size_t)r->offset * es, numel * es);
        return DS_OK;
    }
    int64_t idx[DS_PT_MAX_RANK] = {0};
    for (size_t e = 0; e < numel; e++) {
        int64_t at = r->offset;
        for (int i = 0; i < r->rank; i++)
            at += idx[i] * r->strides[i];
        memcpy((char *)dst + e * es, src + (size_t)at * es, es);
        for (int i = r->rank - 1; i >= 0 && ++idx[i] == r->dims[i]; i--)
            idx[i] = 0;
    }
    return DS_OK;
}

/* How far into its storage r reaches: its last element's index + 1, 0 when
 * it is empty. After check_view (nothing wraps). */
static uint64_t view_reach(const ds_pt_tensor_ref *r)
{
    uint64_t last = (uint64_t)r->offset;
    for (int i = 0; i < r->rank; i++) {
        if (r->dims[i] == 0)
            return 0;
        last += (uint64_t)(r->dims[i] - 1) * (uint64_t)r->strides[i];
    }
    return last + 1;
}

/* A storage is read whole, so the tensors that view it must reach most of
 * it: a shared flat buffer (cuDNN's RNN weights) is covered by its views,
 * while a 4-element view of a deflated 750-million-float storage once made
 * a 3 MB file take 3 GB. Storage of refs->t[i], its views checked. */
static ds_status check_storage_used(loader *l, const ds_pt_refs *refs, int i)
{
    const ds_pt_tensor_ref *r = &refs->t[i];
    uint64_t reach = 0;
    for (int k = 0; k < refs->n; k++)
        if (!strcmp(refs->t[k].storage, r->storage)) {
            const uint64_t v = view_reach(&refs->t[k]);
            reach = v > reach ? v : reach;
        }
    const uint64_t n = (uint64_t)r->storage_numel;
    if (n <= 2 * reach + 65536)
        return DS_OK;
    return DS_FAIL(DS_ERR_IO, "%s: key %s: storage %s holds %llu elements, its tensors reach "
                   "%llu of them: refused (a view cannot pull in a storage far larger than "
                   "itself)", l->path, r->key, r->storage, (unsigned long long)n,
                   (unsigned long long)reach);
}

static ds_status load_tensors(loader *l, const ds_pt_refs *refs, int shapes_only, ds_pt_dict *d)
{
    for (int i = 0; i < refs->n; i++) {   /* every view inside its storage first */
        size_t numel;
        const ds_pt_tensor_ref *r = &refs->t[i];
        DS_TRY(ds_pt_numel(r->dims, r->rank, MAX_STORAGE / ds_dtype_size(r->dt), r->key, &numel));
        if (numel > 0)
            DS_TRY(check_view(l, r));
    }
    for (int i = 0; i < refs->n; i++) {
        const storage *s = NULL;
        if (!shapes_only) {
            DS_TRY(check_storage_used(l, refs, i));
            DS_TRY(get_storage(l, &refs->t[i], &s));
        }
        DS_TRY(gather(l, &refs->t[i], s, d));
    }
    return DS_OK;
}

ds_status ds_pt_load(const char *path, int shapes_only, ds_pt_dict *d, int *wrapped)
{
    loader l = {.path = path};
    ds_pt_refs refs = {0};
    void *pkl = NULL;
    size_t pkl_len = 0;
    memset(d, 0, sizeof *d);
    DS_TRY(ds_pt_zip_open(path, &l.z));
    ds_status st;
    DS_TRY_GOTO(st, check_header(&l), out);
    DS_TRY_GOTO(st, ds_pt_zip_read(l.z, "data.pkl", "the pickle", MAX_PICKLE, &pkl, &pkl_len), out);
    DS_TRY_GOTO(st, ds_pt_unpickle_state_dict(path, pkl, pkl_len, &refs), out);
    if (wrapped)
        *wrapped = refs.wrapped;
    st = load_tensors(&l, &refs, shapes_only, d);
out:
    if (st != DS_OK)
        ds_pt_dict_free(d);
    for (int i = 0; i < l.n; i++) {
        free(l.s[i].key);
        free(l.s[i].data);
    }
    free(l.s);
    free(pkl);
    ds_pt_refs_free(&refs);
    ds_pt_zip_close_reader(l.z);
    return st;
}
