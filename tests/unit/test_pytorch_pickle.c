/* test_pytorch_pickle.c - the state_dict pickles of pytorch/:
 *  - our writer's pickle read back by our reader: keys, dtypes, shapes,
 *    contiguous strides, storage keys and sizes (the end-to-end check with
 *    real torch is tests/peer/pytorch_export_check.py);
 *  - pickles written by PyTorch 1.13 (protocols 2 and 4, a bare state_dict
 *    with _metadata, a view with a storage offset and transposed strides, a
 *    float16 tensor; a Lightning-style dict with plain values, big ints,
 *    floats, bytes, sets, a tensor outside the state_dict) read as torch wrote them;
 *  - every prefix of each pickle refused cleanly, and 20000 random mutations
 *    of them either read or refused with a message naming the file: never a
 *    crash (run under ASan by scripts/sanitize.sh with the other unit tests);
 *  - dict keys nested 200000 deep compared without a stack overflow. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pt_dict.h"
#include "pt_pickle_read.h"
#include "pt_pickle_write.h"
#include "testutil.h"

#include "pytorch_pickles.inc"

static const ds_pt_tensor_ref *find_ref(const ds_pt_refs *r, const char *key)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->t[i].key, key))
            return &r->t[i];
    return NULL;
}

static int same_dims(const int64_t *a, const int64_t *b, int rank)
{
    for (int i = 0; i < rank; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static void writer_roundtrip(void)
{
    ds_pt_dict d = {0};
    void *data;
    const int64_t w[2] = {2, 3}, v[1] = {70000}, big[3] = {300, 2, 1};
    T_CHECK(ds_pt_dict_add(&d, "conv.seq_module.0.weight", DS_F32, 2, w, &data) == DS_OK, "add");
    T_CHECK(ds_pt_dict_add(&d, "bn.num_batches_tracked", DS_I64, 0, NULL, &data) == DS_OK, "add");
    T_CHECK(ds_pt_dict_add(&d, "long", DS_F64, 1, v, &data) == DS_OK, "add");
    T_CHECK(ds_pt_dict_add(&d, "h", DS_F16, 3, big, &data) == DS_OK, "add");
    T_CHECK(ds_pt_dict_add(&d, "h", DS_F16, 3, big, &data) == DS_ERR_ARG, "a key twice refused");
    ds_status_clear_error();
    unsigned char *p = NULL;
    size_t n = 0;
    ds_pt_refs r;
    T_CHECK(ds_pt_pickle_state_dict(&d, &p, &n) == DS_OK, "pickle: %s", ds_status_last_error());
    T_CHECK(n > 2 && p[0] == 0x80 && p[1] == 2 && p[n - 1] == '.', "protocol 2, ends with STOP");
    T_CHECK(ds_pt_unpickle_state_dict("ours", p, n, &r) == DS_OK, "read back: %s", ds_status_last_error());
    T_CHECK(r.n == d.n && !r.wrapped, "%d tensors back of %d", r.n, d.n);
    for (int i = 0; i < r.n && i < d.n; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        const ds_pt_tensor_ref *t = &r.t[i];
        int64_t stride = 1, ok_strides = 1;
        for (int k = t->rank - 1; k >= 0; k--) {
            ok_strides &= t->strides[k] == stride;
            stride *= t->dims[k];
        }
        T_CHECK(!strcmp(t->key, d.t[i].key) && t->dt == d.t[i].dt && t->rank == d.t[i].rank &&
                    same_dims(t->dims, d.t[i].dims, t->rank) && ok_strides && t->offset == 0 &&
                    !strcmp(t->storage, key) && (size_t)t->storage_numel == d.t[i].numel,
                "tensor %d (%s) read back as written", i, d.t[i].key);
    }
    ds_pt_refs_free(&r);
    free(p);
    ds_pt_dict_free(&d);
}

static void torch_state_dict(const char *name, const unsigned char *p, size_t n)
{
    ds_pt_refs r;
    if (ds_pt_unpickle_state_dict(name, p, n, &r) != DS_OK) {
        T_CHECK(0, "%s: %s", name, ds_status_last_error());
        ds_status_clear_error();
        return;
    }
    static const char *const keys[] = {"lin.weight", "bn.weight", "bn.bias", "bn.running_mean",
                                       "bn.running_var", "bn.num_batches_tracked", "view", "half"};
    T_CHECK(r.n == 8, "%s: %d tensors, 8 saved", name, r.n);
    for (int i = 0; i < r.n && i < 8; i++)
        T_CHECK(!strcmp(r.t[i].key, keys[i]), "%s: tensor %d is %s, %s saved", name, i, r.t[i].key,
                keys[i]);
    const ds_pt_tensor_ref *w = find_ref(&r, "lin.weight"), *c = find_ref(&r, "bn.num_batches_tracked");
    const ds_pt_tensor_ref *v = find_ref(&r, "view"), *h = find_ref(&r, "half");
    T_CHECK(w && w->dt == DS_F32 && w->rank == 2 && w->dims[0] == 2 && w->dims[1] == 3 &&
                w->strides[0] == 3 && w->strides[1] == 1 && w->storage_numel == 6,
            "%s: lin.weight float32 [2, 3]", name);
    T_CHECK(c && c->dt == DS_I64 && c->rank == 0 && c->storage_numel == 1,
            "%s: num_batches_tracked an int64 scalar", name);
    T_CHECK(v && v->dt == DS_F64 && v->rank == 2 && v->dims[0] == 4 && v->dims[1] == 2 &&
                v->strides[0] == 1 && v->strides[1] == 4 && v->offset == 2 && v->storage_numel == 12,
            "%s: the view: float64 [4, 2], strides (1, 4), offset 2 of 12", name);
    T_CHECK(h && h->dt == DS_F16 && h->rank == 1 && h->dims[0] == 3, "%s: half float16 [3]", name);
    ds_pt_refs_free(&r);
}

static void torch_lightning(const char *name, const unsigned char *p, size_t n)
{
    ds_pt_refs r;
    if (ds_pt_unpickle_state_dict(name, p, n, &r) != DS_OK) {
        T_CHECK(0, "%s: %s", name, ds_status_last_error());
        ds_status_clear_error();
        return;
    }
    T_CHECK(r.wrapped && r.n == 8 && find_ref(&r, "view") && !find_ref(&r, "exp_avg"),
            "%s: the \"state_dict\" entry's 8 tensors, nothing from beside it", name);
    ds_pt_refs_free(&r);
}

/* Every proper prefix is refused with a message; none reads. */
static void prefixes(const char *name, const unsigned char *p, size_t n)
{
    int read = 0, silent = 0;
    for (size_t k = 0; k < n; k++) {
        ds_pt_refs r;
        ds_status_clear_error();
        if (ds_pt_unpickle_state_dict(name, p, k, &r) == DS_OK) {
            read++;
            ds_pt_refs_free(&r);
        } else if (!strstr(ds_status_last_error(), name)) {
            silent++;
        }
    }
    ds_status_clear_error();
    T_CHECK(read == 0 && silent == 0, "%s: %zu prefixes: %d read, %d refused without naming it",
            name, n, read, silent);
}

/* Random byte changes: read or refused with the file named, never a crash. */
static void mutations(const char *name, const unsigned char *p, size_t n, int count)
{
    unsigned char *m = malloc(n);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int read = 0, silent = 0;
    for (int k = 0; k < count && m; k++) {
        memcpy(m, p, n);
        for (int j = 0; j < 1 + k % 4; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            m[(s >> 33) % n] = (unsigned char)(s >> 13);
        }
        ds_pt_refs r;
        ds_status_clear_error();
        if (ds_pt_unpickle_state_dict(name, m, n, &r) == DS_OK) {
            read++;
            ds_pt_refs_free(&r);
        } else if (!strstr(ds_status_last_error(), name)) {
            silent++;
        }
    }
    ds_status_clear_error();
    printf("%s: %d mutations, %d still read\n", name, count, read);
    T_CHECK(m && silent == 0, "%s: %d refused without naming it", name, silent);
    free(m);
}

/* Two equal tuples nested 200000 deep as keys of one dict: compared without
 * following them all the way (no stack overflow), then refused as no
 * state_dict. */
static void deep_keys(void)
{
    enum { DEPTH = 200000 };
    size_t n = 0;
    unsigned char *p = malloc(2 * DEPTH + 16);
    if (!p) {
        T_CHECK(0, "memory");
        return;
    }
    p[n++] = 0x80, p[n++] = 2, p[n++] = '}';          /* PROTO 2, EMPTY_DICT */
    for (int k = 0; k < 2; k++) {
        p[n++] = 'N';                                   /* None */
        memset(p + n, 0x85, DEPTH);                     /* TUPLE1, DEPTH times */
        n += DEPTH;
        p[n++] = 'N', p[n++] = 's';                     /* value None, SETITEM */
    }
    p[n++] = '.';
    ds_pt_refs r;
    ds_status_clear_error();
    T_CHECK(ds_pt_unpickle_state_dict("deep", p, n, &r) == DS_ERR_ARG &&
                strstr(ds_status_last_error(), "without tensors"),
            "deeply nested keys: %s", ds_status_last_error());
    ds_status_clear_error();
    free(p);
}

int main(void)
{
    deep_keys();
    writer_roundtrip();
    torch_state_dict("torch_p2", torch_p2, sizeof torch_p2);
    torch_state_dict("torch_p4", torch_p4, sizeof torch_p4);
    torch_lightning("torch_light2", torch_light2, sizeof torch_light2);
    torch_lightning("torch_light4", torch_light4, sizeof torch_light4);
    prefixes("torch_p2", torch_p2, sizeof torch_p2);
    prefixes("torch_light4", torch_light4, sizeof torch_light4);
    mutations("torch_p2", torch_p2, sizeof torch_p2, 5000);
    mutations("torch_p4", torch_p4, sizeof torch_p4, 5000);
    mutations("torch_light2", torch_light2, sizeof torch_light2, 5000);
    mutations("torch_light4", torch_light4, sizeof torch_light4, 5000);
    return t_finish("test_pytorch_pickle");
}
