/* pt_pickle_read.c - a pickle machine for torch.save's state_dicts
 * (pt_pickle_read.h). It runs the opcodes Python's pickle emits for dicts,
 * lists, tuples, numbers, strings and tensors, and knows four callables by
 * name; everything it builds lives in one arena freed at the end. */
#include "pt_pickle_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK (1u << 22)        /* values on the stack at once */
#define MAX_MEMO (1u << 24)         /* memo slots */
#define MAX_DICT (1u << 15)         /* entries of one dict (a state_dict has hundreds) */
/* A few hundred bytes of pickle can ask for unbounded work (equal keys
 * built as deep tuple DAGs, a big list turned into dicts or sets again and
 * again) or memory: both are budgeted, far above what a state_dict needs. */
#define MAX_WORK ((uint64_t)1 << 28)   /* key comparisons and items copied */
#define MAX_ARENA ((size_t)256 << 20)  /* bytes of values */

typedef enum {
    V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT, V_GLOBAL,
    V_STORAGE, V_TENSOR
} vkind;

static const char *const kind_name[] = {"None", "bool", "int", "float", "str", "bytes", "tuple",
                                        "list", "dict", "class or function", "storage", "tensor"};

typedef struct val val;
typedef struct {
    const val *storage;
    int64_t offset;
    int rank;
    int64_t dims[DS_PT_MAX_RANK], strides[DS_PT_MAX_RANK];
} tensor_view;

struct val {
    vkind kind;
    int64_t i;                /* BOOL, INT; STORAGE: numel */
    double f;                 /* FLOAT */
    const char *s;            /* STR, BYTES (len bytes, NUL after); GLOBAL "module.name";
                               * STORAGE: its key */
    size_t len;
    val **it;                 /* TUPLE, LIST: [n]; DICT: [2n] key, value, key, ... */
    size_t n, cap;
    ds_dtype dt;              /* STORAGE */
    tensor_view *t;           /* TENSOR */
};

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} chunk;

typedef struct {
    const char *file;
    const unsigned char *p;
    size_t n, at, op_at;
    val **stack;
    size_t sp, scap;
    size_t *marks;
    size_t nmarks, mcap;
    val **memo;
    size_t mcount;            /* slots allocated */
    size_t memo_len;          /* slots written: MEMOIZE's next one */
    chunk *arena;
    size_t arena_bytes;
    uint64_t work;            /* against MAX_WORK */
    int proto;
} um;

/* ---- messages and memory ---- */

static ds_status bad(um *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ds_status bad(um *u, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return DS_FAIL(DS_ERR_IO, "%s: data.pkl, byte %zu: %s", u->file, u->op_at, msg);
}

static void *alloc(um *u, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (!u->arena || u->arena->cap - u->arena->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        if (cap > MAX_ARENA - u->arena_bytes)
            return NULL;
        u->arena_bytes += cap;
        chunk *c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = u->arena;
        c->used = 0;
        c->cap = cap;
        u->arena = c;
    }
    void *p = u->arena->data + u->arena->used;
    u->arena->used += size;
    memset(p, 0, size);
    return p;
}

static val *new_val(um *u, vkind k)
{
    val *v = alloc(u, sizeof *v);
    if (v)
        v->kind = k;
    return v;
}

static ds_status oom(um *u) { return DS_FAIL(DS_ERR_MEM, "%s: data.pkl: reading the pickle", u->file); }

/* Appends x to the items of v (TUPLE, LIST, DICT). */
static ds_status add_item(um *u, val *v, val *x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 8;
        val **it = alloc(u, cap * sizeof *it);
        if (!it)
            return oom(u);
        if (v->n)
            memcpy(it, v->it, v->n * sizeof *it);
        v->it = it;
        v->cap = cap;
    }
    v->it[v->n++] = x;
    return DS_OK;
}

/* ---- the stream ---- */

static ds_status need(um *u, size_t k)
{
    if (u->n - u->at < k)
        return bad(u, "the pickle ends inside an opcode (truncated)");
    return DS_OK;
}

static uint64_t rd_le(um *u, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)u->p[u->at + i] << (8 * i);
    u->at += (size_t)bytes;
    return v;
}

/* ---- the stack ---- */

static ds_status push(um *u, val *v)
{
    if (!v)
        return oom(u);
    if (u->sp == u->scap) {
        if (u->scap >= MAX_STACK)
            return bad(u, "more than %u values on the stack", MAX_STACK);
        size_t cap = u->scap ? 2 * u->scap : 256;
        val **s = realloc(u->stack, cap * sizeof *s);
        if (!s)
            return oom(u);
        u->stack = s;
        u->scap = cap;
    }
    u->stack[u->sp++] = v;
    return DS_OK;
}

/* The floor of the stack: its mark's position, or 0. */
static size_t floor_of(const um *u) { return u->nmarks ? u->marks[u->nmarks - 1] : 0; }

static ds_status pop(um *u, val **out)
{
    if (u->sp <= floor_of(u))
        return bad(u, "pops an empty stack (or past a mark)");
    *out = u->stack[--u->sp];
    return DS_OK;
}

static ds_status top(um *u, val **out)
{
    if (u->sp <= floor_of(u))
        return bad(u, "needs a value on an empty stack");
    *out = u->stack[u->sp - 1];
    return DS_OK;
}

static ds_status mark(um *u)
{
    if (u->nmarks >= MAX_STACK)   /* marks are budgeted as the stack is */
        return bad(u, "more than %u marks at once", MAX_STACK);
    if (u->nmarks == u->mcap) {
        size_t cap = u->mcap ? 2 * u->mcap : 64;
        size_t *m = realloc(u->marks, cap * sizeof *m);
        if (!m)
            return oom(u);
        u->marks = m;
        u->mcap = cap;
    }
    u->marks[u->nmarks++] = u->sp;
    return DS_OK;
}

/* The values since the last mark, items [*count] (still on the stack),
 * and the mark removed: the caller drops them with u->sp = *base. */
static ds_status since_mark(um *u, size_t *base, size_t *count)
{
    if (!u->nmarks)
        return bad(u, "needs a MARK and there is none");
    *base = u->marks[--u->nmarks];
    *count = u->sp - *base;
    return DS_OK;
}

/* ---- values ---- */

static ds_status push_str(um *u, vkind k, size_t len)
{
    DS_TRY(need(u, len));
    val *v = new_val(u, k);
    char *s = v ? alloc(u, len + 1) : NULL;
    if (!s)
        return oom(u);
    memcpy(s, u->p + u->at, len);
    u->at += len;
    v->s = s;
    v->len = len;
    return push(u, v);
}

/* Python's == for dict keys; tuples nested deeper than any real key are
 * taken as unequal rather than followed (no unbounded recursion). */
static int val_equal(const val *a, const val *b, int depth, uint64_t *work)
{
    ++*work;
    if (a == b)
        return 1;
    if (a->kind != b->kind)
        return (a->kind == V_INT || a->kind == V_BOOL) && (b->kind == V_INT || b->kind == V_BOOL) &&
               a->i == b->i;
    switch (a->kind) {
    case V_NONE: return 1;
    case V_BOOL:
    case V_INT: return a->i == b->i;
    case V_FLOAT: return a->f == b->f;
    case V_STR:
    case V_BYTES:
    case V_GLOBAL: return a->len == b->len && !memcmp(a->s, b->s, a->len);
    case V_TUPLE:
        if (a->n != b->n || depth > 32 || *work > MAX_WORK)
            return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!val_equal(a->it[i], b->it[i], depth + 1, work))
                return 0;
        return 1;
    default: return 0;
    }
}

/* d[k] = x, replacing an equal key as a Python dict does. */
static ds_status dict_set(um *u, val *d, val *k, val *x)
{
    if (d->kind != V_DICT)
        return bad(u, "sets an item of a %s, not of a dict", kind_name[d->kind]);
    if (k->kind == V_LIST || k->kind == V_DICT || k->kind == V_TENSOR)
        return bad(u, "a %s as a dict key", kind_name[k->kind]);
    for (size_t i = 0; i < d->n; i += 2) {
        if (val_equal(d->it[i], k, 0, &u->work)) {
            d->it[i + 1] = x;
            return DS_OK;
        }
        if (u->work > MAX_WORK)
            return bad(u, "more work than any state_dict needs (dict keys compared %llu times)",
                       (unsigned long long)u->work);
    }
    if (d->n / 2 >= MAX_DICT)   /* keys are compared one by one: bounded work */
        return bad(u, "a dict of more than %u entries", MAX_DICT);
    DS_TRY(add_item(u, d, k));
    return add_item(u, d, x);
}

static const val *dict_get(const val *d, const char *key)
{
    for (size_t i = 0; i < d->n; i += 2)
        if (d->it[i]->kind == V_STR && !strcmp(d->it[i]->s, key))
            return d->it[i + 1];
    return NULL;
}

/* A tuple of the count values at base of the stack. */
static ds_status make_seq(um *u, vkind k, size_t base, size_t count)
{
    val *v = new_val(u, k);
    if (!v)
        return oom(u);
    for (size_t i = 0; i < count; i++)
        DS_TRY(add_item(u, v, u->stack[base + i]));
    u->sp = base;
    return push(u, v);
}

static ds_status tuple_n(um *u, size_t count)
{
    if (u->sp - floor_of(u) < count)
        return bad(u, "builds a tuple of %zu from fewer values", count);
    return make_seq(u, V_TUPLE, u->sp - count, count);
}

/* ---- what REDUCE and BINPERSID may build ---- */

static int is_int(const val *v) { return v->kind == V_INT || v->kind == V_BOOL; }

/* ('storage', torch.<T>Storage, key, location, numel) */
static ds_status persistent_id(um *u, const val *pid)
{
    if (pid->kind != V_TUPLE || pid->n != 5 || pid->it[0]->kind != V_STR ||
        strcmp(pid->it[0]->s, "storage"))
        return bad(u, "a persistent id other than ('storage', class, key, location, numel)");
    const val *cls = pid->it[1], *key = pid->it[2], *numel = pid->it[4];
    if (cls->kind != V_GLOBAL || strncmp(cls->s, "torch.", 6) || key->kind != V_STR ||
        pid->it[3]->kind != V_STR || !is_int(numel) || numel->i < 0)
        return bad(u, "a malformed storage persistent id");
    val *v = new_val(u, V_STORAGE);
    if (!v)
        return oom(u);
    if (!ds_pt_storage_dtype(cls->s + 6, &v->dt))
        return bad(u, "storage class %s: only float32, float64, float16, bfloat16, int64, "
                      "int32 and uint8 storages are read", cls->s);
    v->s = key->s;
    v->len = key->len;
    v->i = numel->i;
    return push(u, v);
}

static ds_status int_tuple(um *u, const val *t, const char *what, int64_t *out, int *rank)
{
    if (t->kind != V_TUPLE || t->n > DS_PT_MAX_RANK)
        return bad(u, "tensor %s is not a tuple of at most %d ints", what, DS_PT_MAX_RANK);
    for (size_t i = 0; i < t->n; i++) {
        if (!is_int(t->it[i]) || t->it[i]->i < 0)
            return bad(u, "tensor %s holds a %s or a negative number", what, kind_name[t->it[i]->kind]);
        out[i] = t->it[i]->i;
    }
    *rank = (int)t->n;
    return DS_OK;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]) */
static ds_status rebuild_tensor(um *u, const val *a)
{
    int rank = 0, srank = 0;
    if (a->kind != V_TUPLE || a->n < 6 || a->n > 7 || a->it[0]->kind != V_STORAGE ||
        !is_int(a->it[1]) || a->it[1]->i < 0)
        return bad(u, "_rebuild_tensor_v2 with arguments other than (storage, offset, size, "
                      "stride, requires_grad, hooks)");
    val *v = new_val(u, V_TENSOR);
    tensor_view *t = v ? alloc(u, sizeof *t) : NULL;
    if (!t)
        return oom(u);
    v->t = t;
    t->storage = a->it[0];
    t->offset = a->it[1]->i;
    DS_TRY(int_tuple(u, a->it[2], "size", t->dims, &rank));
    DS_TRY(int_tuple(u, a->it[3], "stride", t->strides, &srank));
    if (rank != srank)
        return bad(u, "tensor with %d sizes and %d strides", rank, srank);
    t->rank = rank;
    return push(u, v);
}

static ds_status reduce(um *u, const val *f, const val *a)
{
    if (f->kind != V_GLOBAL)
        return bad(u, "calls a %s", kind_name[f->kind]);
    if (a->kind != V_TUPLE)
        return bad(u, "calls %s with a %s of arguments", f->s, kind_name[a->kind]);
    const char *name = f->s;
    if (!strcmp(name, "torch._utils._rebuild_tensor_v2"))
        return rebuild_tensor(u, a);
    if (!strcmp(name, "torch._utils._rebuild_parameter")) {   /* (tensor, requires_grad, hooks) */
        if (a->n != 3 || a->it[0]->kind != V_TENSOR)
            return bad(u, "_rebuild_parameter without a tensor");
        return push(u, a->it[0]);
    }
    if (!strcmp(name, "collections.OrderedDict")) {           /* () or ([(k, v), ...],) */
        val *d = new_val(u, V_DICT);
        if (!d)
            return oom(u);
        if (a->n == 1 && (a->it[0]->kind == V_LIST || a->it[0]->kind == V_TUPLE)) {
            for (size_t i = 0; i < a->it[0]->n; i++) {
                const val *kv = a->it[0]->it[i];
                if (kv->kind != V_TUPLE || kv->n != 2)
                    return bad(u, "OrderedDict from items that are not pairs");
                DS_TRY(dict_set(u, d, kv->it[0], kv->it[1]));
            }
        } else if (a->n != 0) {
            return bad(u, "OrderedDict with %zu arguments", a->n);
        }
        return push(u, d);
    }
    if (!strcmp(name, "_codecs.encode") && a->n == 2 && a->it[0]->kind == V_STR) {
        val *b = new_val(u, V_BYTES);   /* protocol 2's bytes (their text, not re-encoded) */
        if (!b)
            return oom(u);
        b->s = a->it[0]->s;
        b->len = a->it[0]->len;
        return push(u, b);
    }
    if ((!strcmp(name, "builtins.set") || !strcmp(name, "builtins.frozenset") ||
         !strcmp(name, "__builtin__.set") || !strcmp(name, "__builtin__.frozenset")) &&
        a->n <= 1) {
        val *s = new_val(u, V_LIST);   /* a set's members, as a list */
        if (!s)
            return oom(u);
        u->work += a->n == 1 ? a->it[0]->n : 0;
        if (u->work > MAX_WORK)
            return bad(u, "more work than any state_dict needs (a set of %zu members)",
                       a->it[0]->n);
        for (size_t i = 0; a->n == 1 && i < a->it[0]->n; i++)
            DS_TRY(add_item(u, s, a->it[0]->it[i]));
        return push(u, s);
    }
    return bad(u, "an object made by %s: only tensors, OrderedDicts and plain values (numbers, "
                  "strings, lists, tuples, dicts) are read", name);
}

/* ---- opcodes ---- */

static ds_status op_global(um *u, int stack_form)
{
    val *v = new_val(u, V_GLOBAL);
    if (!v)
        return oom(u);
    const char *module, *name;
    size_t ml, nl;
    if (stack_form) {
        val *n = NULL, *m = NULL;
        DS_TRY(pop(u, &n));
        DS_TRY(pop(u, &m));
        if (n->kind != V_STR || m->kind != V_STR)
            return bad(u, "STACK_GLOBAL of a %s and a %s", kind_name[m->kind], kind_name[n->kind]);
        module = m->s, ml = m->len, name = n->s, nl = n->len;
    } else {
        const unsigned char *end = u->p + u->n, *p = u->p + u->at;
        const unsigned char *e1 = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *e2 = e1 ? memchr(e1 + 1, '\n', (size_t)(end - e1 - 1)) : NULL;
        if (!e2)
            return bad(u, "GLOBAL without its two lines (truncated)");
        module = (const char *)p, ml = (size_t)(e1 - p);
        name = (const char *)e1 + 1, nl = (size_t)(e2 - e1 - 1);
        u->at = (size_t)(e2 + 1 - u->p);
    }
    char *s = alloc(u, ml + nl + 2);
    if (!s)
        return oom(u);
    memcpy(s, module, ml);
    s[ml] = '.';
    memcpy(s + ml + 1, name, nl);
    if (strlen(s) != ml + nl + 1)
        return bad(u, "a class name with a NUL byte");
    v->s = s;
    v->len = ml + nl + 1;
    return push(u, v);
}

static ds_status memo_put(um *u, uint64_t idx)
{
    val *v = NULL;
    DS_TRY(top(u, &v));
    if (idx >= MAX_MEMO)
        return bad(u, "memo slot %llu (at most %u are kept)", (unsigned long long)idx, MAX_MEMO);
    if (idx >= u->mcount) {
        size_t cap = u->mcount ? u->mcount : 256;
        while (cap <= idx)
            cap *= 2;
        val **m = realloc(u->memo, cap * sizeof *m);
        if (!m)
            return oom(u);
        memset(m + u->mcount, 0, (cap - u->mcount) * sizeof *m);
        u->memo = m;
        u->mcount = cap;
    }
    if (!u->memo[idx])
        u->memo_len++;
    u->memo[idx] = v;
    return DS_OK;
}

static ds_status memo_get(um *u, uint64_t idx)
{
    if (idx >= u->mcount || !u->memo[idx])
        return bad(u, "memo slot %llu read before it was written", (unsigned long long)idx);
    return push(u, u->memo[idx]);
}

static ds_status op_int(um *u, int bytes, int is_signed)
{
    DS_TRY(need(u, (size_t)bytes));
    uint64_t raw = rd_le(u, bytes);
    val *v = new_val(u, V_INT);
    if (!v)
        return oom(u);
    if (is_signed && bytes < 8 && (raw >> (8 * bytes - 1)) & 1)
        raw |= ~UINT64_C(0) << (8 * bytes);   /* sign-extend */
    v->i = (int64_t)raw;
    return push(u, v);
}

static ds_status op_long1(um *u)
{
    DS_TRY(need(u, 1));
    int len = u->p[u->at++];
    if (len > 8)
        return bad(u, "an integer of %d bytes (more than 64 bits)", len);
    if (len == 0) {
        val *v = new_val(u, V_INT);
        return push(u, v);
    }
    return op_int(u, len, 1);
}

static ds_status op_float(um *u)
{
    DS_TRY(need(u, 8));
    uint64_t raw = 0;
    for (int i = 0; i < 8; i++)   /* big-endian */
        raw = raw << 8 | u->p[u->at + i];
    u->at += 8;
    val *v = new_val(u, V_FLOAT);
    if (!v)
        return oom(u);
    memcpy(&v->f, &raw, sizeof v->f);
    return push(u, v);
}

static ds_status op_sized(um *u, vkind k, int len_bytes)
{
    DS_TRY(need(u, (size_t)len_bytes));
    uint64_t len = rd_le(u, len_bytes);
    if (len > u->n - u->at)
        return bad(u, "a string of %llu bytes past the end of the pickle", (unsigned long long)len);
    return push_str(u, k, (size_t)len);
}

/* The container below the count values at base (after since_mark, or the
 * single value of APPEND / the pair of SETITEM): it must sit above the
 * current mark. */
static ds_status container(um *u, size_t base, const char *what, val **out)
{
    if (base == 0 || base - 1 < floor_of(u))
        return bad(u, "%s without a container below its values", what);
    *out = u->stack[base - 1];
    return DS_OK;
}

static ds_status op_append(um *u, int many)
{
    size_t base = 0, count = 1;
    val *list = NULL;
    if (many)
        DS_TRY(since_mark(u, &base, &count));
    else if (u->sp < floor_of(u) + 2)
        return bad(u, "APPEND without a list and a value");
    else
        base = u->sp - 1;
    DS_TRY(container(u, base, "APPEND", &list));
    if (list->kind != V_LIST)
        return bad(u, "APPEND to a %s", kind_name[list->kind]);
    for (size_t i = 0; i < count; i++)
        DS_TRY(add_item(u, list, u->stack[base + i]));
    u->sp = base;
    return DS_OK;
}

static ds_status op_setitems(um *u, int many)
{
    size_t base = 0, count = 2;
    val *d = NULL;
    if (many)
        DS_TRY(since_mark(u, &base, &count));
    else if (u->sp < floor_of(u) + 3)
        return bad(u, "SETITEM without a dict, key and value");
    else
        base = u->sp - 2;
    if (count % 2)
        return bad(u, "SETITEMS with an odd number of values");
    DS_TRY(container(u, base, "SETITEMS", &d));
    for (size_t i = 0; i < count; i += 2)
        DS_TRY(dict_set(u, d, u->stack[base + i], u->stack[base + i + 1]));
    u->sp = base;
    return DS_OK;
}

static ds_status op_build(um *u)
{
    val *state = NULL, *obj = NULL;
    DS_TRY(pop(u, &state));
    DS_TRY(top(u, &obj));
    /* an OrderedDict's attributes (a state_dict's _metadata): not needed */
    if (obj->kind == V_DICT && (state->kind == V_DICT || state->kind == V_NONE))
        return DS_OK;
    return bad(u, "BUILD of a %s: only dicts' attributes are read", kind_name[obj->kind]);
}

static ds_status op_call(um *u, int code)
{
    val *a = NULL, *b = NULL;
    if (code == 'R') {               /* REDUCE */
        DS_TRY(pop(u, &a));
        DS_TRY(pop(u, &b));
        return reduce(u, b, a);
    }
    if (code == 'Q') {               /* BINPERSID */
        DS_TRY(pop(u, &a));
        return persistent_id(u, a);
    }
    /* NEWOBJ: cls, args */
    DS_TRY(pop(u, &a));
    DS_TRY(pop(u, &b));
    return bad(u, "an object of class %s: only tensors, OrderedDicts and plain values are read",
               b->kind == V_GLOBAL ? b->s : "?");
}

/* One opcode; *done at STOP. */
static ds_status step(um *u, int *done)
{
    size_t base = 0, count = 0;
    val *v = NULL;
    u->op_at = u->at;
    DS_TRY(need(u, 1));
    const int code = u->p[u->at++];
    switch (code) {
    case 0x80:                                       /* PROTO */
        DS_TRY(need(u, 1));
        u->proto = u->p[u->at++];
        if (u->proto < 2 || u->proto > 5)
            return bad(u, "pickle protocol %d (2 to 5 are read)", u->proto);
        return DS_OK;
    case 0x95: DS_TRY(need(u, 8)); u->at += 8; return DS_OK;   /* FRAME: a hint */
    case '.': *done = 1; return DS_OK;               /* STOP */
    case '(': return mark(u);                        /* MARK */
    case '0': return pop(u, &v);                     /* POP */
    case '1': DS_TRY(since_mark(u, &base, &count)); u->sp = base; return DS_OK;   /* POP_MARK */
    case '2': DS_TRY(top(u, &v)); return push(u, v); /* DUP */
    case 'N': return push(u, new_val(u, V_NONE));
    case 0x88:                                       /* NEWTRUE */
    case 0x89:                                       /* NEWFALSE */
        v = new_val(u, V_BOOL);
        if (v)
            v->i = code == 0x88;
        return push(u, v);
    case 'J': return op_int(u, 4, 1);                /* BININT */
    case 'K': return op_int(u, 1, 0);                /* BININT1 */
    case 'M': return op_int(u, 2, 0);                /* BININT2 */
    case 0x8a: return op_long1(u);                   /* LONG1 */
    case 'G': return op_float(u);                    /* BINFLOAT */
    case 'X': return op_sized(u, V_STR, 4);          /* BINUNICODE */
    case 0x8c: return op_sized(u, V_STR, 1);         /* SHORT_BINUNICODE */
    case 0x8d: return op_sized(u, V_STR, 8);         /* BINUNICODE8 */
    case 'B': return op_sized(u, V_BYTES, 4);        /* BINBYTES */
    case 'C': return op_sized(u, V_BYTES, 1);        /* SHORT_BINBYTES */
    case 0x8e: return op_sized(u, V_BYTES, 8);       /* BINBYTES8 */
    case 'T': return op_sized(u, V_BYTES, 4);        /* BINSTRING */
    case 'U': return op_sized(u, V_BYTES, 1);        /* SHORT_BINSTRING */
    case ')': return push(u, new_val(u, V_TUPLE));   /* EMPTY_TUPLE */
    case 't': DS_TRY(since_mark(u, &base, &count)); return make_seq(u, V_TUPLE, base, count);
    case 0x85: return tuple_n(u, 1);                 /* TUPLE1 */
    case 0x86: return tuple_n(u, 2);                 /* TUPLE2 */
    case 0x87: return tuple_n(u, 3);                 /* TUPLE3 */
    case ']': return push(u, new_val(u, V_LIST));    /* EMPTY_LIST */
    case 0x8f: return push(u, new_val(u, V_LIST));   /* EMPTY_SET, as a list */
    case 'l': DS_TRY(since_mark(u, &base, &count)); return make_seq(u, V_LIST, base, count);
    case 0x91: DS_TRY(since_mark(u, &base, &count)); return make_seq(u, V_LIST, base, count);
    case 'a': return op_append(u, 0);                /* APPEND */
    case 'e': return op_append(u, 1);                /* APPENDS */
    case 0x90: return op_append(u, 1);               /* ADDITEMS (to a set, kept as a list) */
    case '}': return push(u, new_val(u, V_DICT));    /* EMPTY_DICT */
    case 'd':                                        /* DICT */
        DS_TRY(since_mark(u, &base, &count));
        if (count % 2)
            return bad(u, "DICT of an odd number of values");
        if (!(v = new_val(u, V_DICT)))
            return oom(u);
        for (size_t i = 0; i < count; i += 2)
            DS_TRY(dict_set(u, v, u->stack[base + i], u->stack[base + i + 1]));
        u->sp = base;
        return push(u, v);
    case 's': return op_setitems(u, 0);              /* SETITEM */
    case 'u': return op_setitems(u, 1);              /* SETITEMS */
    case 'c': return op_global(u, 0);                /* GLOBAL */
    case 0x93: return op_global(u, 1);               /* STACK_GLOBAL */
    case 'q': DS_TRY(need(u, 1)); return memo_put(u, rd_le(u, 1));   /* BINPUT */
    case 'r': DS_TRY(need(u, 4)); return memo_put(u, rd_le(u, 4));   /* LONG_BINPUT */
    case 0x94: return memo_put(u, u->memo_len);     /* MEMOIZE */
    case 'h': DS_TRY(need(u, 1)); return memo_get(u, rd_le(u, 1));   /* BINGET */
    case 'j': DS_TRY(need(u, 4)); return memo_get(u, rd_le(u, 4));   /* LONG_BINGET */
    case 'R':                                        /* REDUCE */
    case 'Q':                                        /* BINPERSID */
    case 0x81: return op_call(u, code);              /* NEWOBJ */
    case 'b': return op_build(u);                    /* BUILD */
    default:
        return bad(u, "opcode 0x%02x%s%c%s is not one torch.save writes for a state_dict", code,
                   code >= 0x20 && code < 0x7f ? " ('" : "", code >= 0x20 && code < 0x7f ? code : ' ',
                   code >= 0x20 && code < 0x7f ? "')" : "");
    }
}

/* ---- the state_dict ---- */

static int has_tensor(const val *d)
{
    for (size_t i = 1; i < d->n; i += 2)
        if (d->it[i]->kind == V_TENSOR)
            return 1;
    return 0;
}

/* "a, b, c" of the first string keys of d, for messages. */
static const char *key_list(const val *d, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < d->n && at + 1 < cap; i += 2) {
        const val *k = d->it[i];
        int w = snprintf(buf + at, cap - at, "%s%s", i ? ", " : "",
                         k->kind == V_STR ? k->s : kind_name[k->kind]);
        if (w < 0 || (size_t)w >= cap - at) {
            if (cap > 4)
                snprintf(buf + cap - 4, 4, "...");
            break;
        }
        at += (size_t)w;
    }
    return buf;
}

/* The dict of tensors that is the state_dict: top itself, or its
 * "state_dict" entry. */
static ds_status find_state_dict(um *u, const val *top, const val **sd, int *wrapped)
{
    char keys[256];
    u->op_at = u->n;
    if (top->kind != V_DICT)
        return DS_FAIL(DS_ERR_ARG, "%s: holds a %s, not a state_dict (a dict of tensors, as "
                                   "torch.save(model.state_dict(), F) writes)", u->file,
                       kind_name[top->kind]);
    const val *inner = dict_get(top, "state_dict");
    *wrapped = inner != NULL;
    *sd = inner ? inner : top;
    if (inner && inner->kind != V_DICT)
        return DS_FAIL(DS_ERR_ARG, "%s: its \"state_dict\" entry is a %s, not a dict of tensors",
                       u->file, kind_name[inner->kind]);
    if (!inner && !has_tensor(top))
        return DS_FAIL(DS_ERR_ARG, "%s: a dict without tensors and without a \"state_dict\" "
                                   "entry (keys: %s): not a state_dict", u->file,
                       key_list(top, keys, sizeof keys));
    if ((*sd)->n == 0)
        return DS_FAIL(DS_ERR_ARG, "%s: the state_dict is empty", u->file);
    return DS_OK;
}

static ds_status copy_refs(um *u, const val *sd, int wrapped, ds_pt_refs *out)
{
    const char *where = wrapped ? "state_dict entry" : "key";
    out->t = calloc(sd->n / 2, sizeof *out->t);
    if (!out->t)
        return oom(u);
    out->wrapped = wrapped;
    for (size_t i = 0; i < sd->n; i += 2) {
        const val *k = sd->it[i], *v = sd->it[i + 1];
        if (k->kind != V_STR)
            return DS_FAIL(DS_ERR_ARG, "%s: a %s of the state_dict is a %s, not a string",
                           u->file, where, kind_name[k->kind]);
        if (v->kind != V_TENSOR)
            return DS_FAIL(DS_ERR_ARG, "%s: %s %s is a %s, not a tensor", u->file, where, k->s,
                           kind_name[v->kind]);
        ds_pt_tensor_ref *r = &out->t[out->n++];
        const tensor_view *t = v->t;
        r->key = strdup(k->s);
        r->storage = strdup(t->storage->s);
        if (!r->key || !r->storage)
            return oom(u);
        r->dt = t->storage->dt;
        r->storage_numel = t->storage->i;
        r->offset = t->offset;
        r->rank = t->rank;
        memcpy(r->dims, t->dims, sizeof r->dims);
        memcpy(r->strides, t->strides, sizeof r->strides);
    }
    return DS_OK;
}

static ds_status run(um *u)
{
    int done = 0;
    while (!done)
        DS_TRY(step(u, &done));
    if (u->sp < 1)
        return bad(u, "STOP on an empty stack");
    return DS_OK;
}

ds_status ds_pt_unpickle_state_dict(const char *file, const unsigned char *p, size_t n,
                                    ds_pt_refs *out)
{
    um u = {.file = file, .p = p, .n = n};
    const val *sd = NULL;
    int wrapped = 0;
    memset(out, 0, sizeof *out);
    ds_status st = run(&u);
    if (st == DS_OK)
        st = find_state_dict(&u, u.stack[u.sp - 1], &sd, &wrapped);
    if (st == DS_OK)
        st = copy_refs(&u, sd, wrapped, out);
    if (st != DS_OK)
        ds_pt_refs_free(out);
    free(u.stack);
    free(u.marks);
    free(u.memo);
    while (u.arena) {
        chunk *c = u.arena->next;
        free(u.arena);
        u.arena = c;
    }
    return st;
}

void ds_pt_refs_free(ds_pt_refs *r)
{
    for (int i = 0; r->t && i < r->n; i++) {
        free(r->t[i].key);
        free(r->t[i].storage);
    }
    free(r->t);
    memset(r, 0, sizeof *r);
}
