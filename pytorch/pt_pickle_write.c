/* pt_pickle_write.c - a state_dict's pickle, protocol 2 (pt_pickle_write.h).
 * The opcodes are the ones Python's pickle emits for torch.save of an
 * OrderedDict of CPU tensors; memo slot 0 holds collections.OrderedDict and
 * slot 1 torch._utils._rebuild_tensor_v2. */
#include "pt_pickle_write.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {   /* the opcodes written (pickletools' names) */
    OP_PROTO = 0x80, OP_GLOBAL = 'c', OP_BINPUT = 'q', OP_BINGET = 'h', OP_EMPTY_TUPLE = ')',
    OP_REDUCE = 'R', OP_MARK = '(', OP_TUPLE = 't', OP_BINPERSID = 'Q', OP_BININT1 = 'K',
    OP_BININT2 = 'M', OP_BININT = 'J', OP_LONG1 = 0x8a, OP_NEWFALSE = 0x89,
    OP_BINUNICODE = 'X', OP_SETITEMS = 'u', OP_STOP = '.'
};
#define BATCH 1000   /* items per SETITEMS, as pickle's _batch_setitems */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    int failed;
} buf;

static void put(buf *b, const void *src, size_t len)
{
    if (b->failed)
        return;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, len);
    b->n += len;
}

static void op(buf *b, int code)
{
    unsigned char c = (unsigned char)code;
    put(b, &c, 1);
}

static void le(buf *b, uint64_t v, int bytes)
{
    unsigned char c[8];
    for (int i = 0; i < bytes; i++)
        c[i] = (unsigned char)(v >> (8 * i));
    put(b, c, (size_t)bytes);
}

/* The shortest of BININT1, BININT2, BININT, LONG1 (two's complement, as
 * pickle.encode_long) that holds v. */
static void put_int(buf *b, int64_t v)
{
    if (v >= 0 && v < 256) {
        op(b, OP_BININT1);
        le(b, (uint64_t)v, 1);
    } else if (v >= 0 && v < 65536) {
        op(b, OP_BININT2);
        le(b, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(b, OP_BININT);
        le(b, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        int n = 1;
        while (n < 8 && !(v >= -(INT64_C(1) << (8 * n - 1)) && v < (INT64_C(1) << (8 * n - 1))))
            n++;
        op(b, OP_LONG1);
        le(b, (uint64_t)n, 1);
        le(b, (uint64_t)v, n);
    }
}

static void put_str(buf *b, const char *s)
{
    op(b, OP_BINUNICODE);
    le(b, (uint64_t)strlen(s), 4);
    put(b, s, strlen(s));
}

static void put_global(buf *b, const char *module, const char *name)
{
    op(b, OP_GLOBAL);
    put(b, module, strlen(module));
    put(b, "\n", 1);
    put(b, name, strlen(name));
    put(b, "\n", 1);
}

/* A tuple of ints: EMPTY_TUPLE for none, else MARK ... TUPLE. */
static void put_int_tuple(buf *b, const int64_t *v, int n)
{
    if (n == 0) {
        op(b, OP_EMPTY_TUPLE);
        return;
    }
    op(b, OP_MARK);
    for (int i = 0; i < n; i++)
        put_int(b, v[i]);
    op(b, OP_TUPLE);
}

/* _rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict()). */
static void put_tensor(buf *b, const ds_pt_tensor *t, int index, int first)
{
    int64_t stride[DS_PT_MAX_RANK];
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        stride[i] = s;
        s *= t->dims[i] > 0 ? t->dims[i] : 1;
    }
    char key[24];
    snprintf(key, sizeof key, "%d", index);
    if (first) {
        put_global(b, "torch._utils", "_rebuild_tensor_v2");
        op(b, OP_BINPUT);
        le(b, 1, 1);
    } else {
        op(b, OP_BINGET);
        le(b, 1, 1);
    }
    op(b, OP_MARK);
    op(b, OP_MARK);             /* the persistent id */
    put_str(b, "storage");
    put_global(b, "torch", ds_pt_storage_class(t->dt));
    put_str(b, key);
    put_str(b, "cpu");
    put_int(b, (int64_t)t->numel);
    op(b, OP_TUPLE);
    op(b, OP_BINPERSID);
    put_int(b, 0);              /* storage offset */
    put_int_tuple(b, t->dims, t->rank);
    put_int_tuple(b, stride, t->rank);
    op(b, OP_NEWFALSE);         /* requires_grad */
    op(b, OP_BINGET);           /* backward hooks: OrderedDict() */
    le(b, 0, 1);
    op(b, OP_EMPTY_TUPLE);
    op(b, OP_REDUCE);
    op(b, OP_TUPLE);
    op(b, OP_REDUCE);
}

ds_status ds_pt_pickle_state_dict(const ds_pt_dict *d, unsigned char **out, size_t *len)
{
    buf b = {0};
    *out = NULL;
    *len = 0;
    for (int i = 0; i < d->n; i++)
        if (!ds_pt_storage_class(d->t[i].dt))
            return DS_FAIL(DS_ERR_ARG, "tensor %s: no torch storage for %s", d->t[i].key,
                           ds_dtype_name(d->t[i].dt));
    op(&b, OP_PROTO);
    le(&b, 2, 1);
    put_global(&b, "collections", "OrderedDict");
    op(&b, OP_BINPUT);
    le(&b, 0, 1);
    op(&b, OP_EMPTY_TUPLE);
    op(&b, OP_REDUCE);
    for (int i = 0; i < d->n; i++) {
        if (i % BATCH == 0)
            op(&b, OP_MARK);
        put_str(&b, d->t[i].key);
        put_tensor(&b, &d->t[i], i, i == 0);
        if (i % BATCH == BATCH - 1 || i == d->n - 1)
            op(&b, OP_SETITEMS);
    }
    op(&b, OP_STOP);
    if (b.failed) {
        free(b.p);
        return DS_FAIL(DS_ERR_MEM, "the state_dict's pickle (%zu bytes)", b.n);
    }
    *out = b.p;
    *len = b.n;
    return DS_OK;
}
