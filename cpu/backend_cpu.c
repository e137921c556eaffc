/* backend_cpu.c - the CPU backend: host memory and the float32/float64 op
 * tables of the instruction set chosen (cpu_isa.h), and the float16/bfloat16
 * ones that emulate a GPU's storage (ops_half.inc). It is the reference
 * every other backend is checked against.
 * Every op runs to completion when called, so events are always complete
 * and the asynchronous copies are plain copies. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "convert.h"
#include "cpu_isa.h"
#include "cpu_ctx.h"

char *openblas_get_config(void);   /* OpenBLAS: version, target and threading */
int openblas_get_num_threads(void);

struct ds_event { int recorded; };

static void note_in_use(long delta);

/* Process-wide: every context of this backend together. */
static struct {
    atomic_long allocs, to_host;
    atomic_size_t in_use, peak;
} counts;

/* Each allocation carries its size in the alignment unit before its data,
 * for the memory counters. */
static size_t round_up(size_t bytes) { return (bytes + DS_ALIGN_BYTES - 1) / DS_ALIGN_BYTES * DS_ALIGN_BYTES; }

static int cpu_device_count(void) { return 1; }

static ds_status cpu_ctx_create(int device, const ds_ctx_opts *opts, ds_ctx **out)
{
    /* every CPU op is deterministic and computes in its own dtype: only the limit matters */
    if (device != 0)
        return DS_FAIL(DS_ERR_ARG, "the cpu backend has one device, 0; asked for %d", device);
    DS_TRY(ds_cpu_isa_select());   /* DSTRAIN_CPU_ISA refused: said here, before any op */
    *out = calloc(1, sizeof **out);
    if (!*out)
        return DS_FAIL(DS_ERR_MEM, "cpu context");
    (*out)->mem_limit = opts ? opts->mem_limit : 0;
    return DS_OK;
}

static void cpu_ctx_destroy(ds_ctx *c)
{
    if (!c)
        return;
    for (int k = 0; k < DS_CPU_SCRATCH_SLOTS; k++) {
        free(c->scratch[k]);
        note_in_use(-(long)(c->scratch_cap[k] * sizeof(float)));
    }
    ds_range_log_free(&c->ranges);
    free(c);
}

/* An allocation of bytes more would take the process past c's limit. */
static int over_limit(const ds_ctx *c, size_t bytes)
{
    return c->mem_limit > 0 && atomic_load(&counts.in_use) + bytes > c->mem_limit;
}

/* Growth is an allocation like any other: counted, and in the memory in use. */
float *ds_cpu_scratch(ds_ctx *c, int k, size_t count)
{
    if (count <= c->scratch_cap[k])
        return c->scratch[k];
    const size_t bytes = round_up(count * sizeof(float));
    if (over_limit(c, bytes - c->scratch_cap[k] * sizeof(float)))
        return NULL;
    float *p = aligned_alloc(DS_ALIGN_BYTES, bytes);
    if (!p)
        return NULL;
    free(c->scratch[k]);
    note_in_use((long)bytes - (long)(c->scratch_cap[k] * sizeof(float)));
    atomic_fetch_add(&counts.allocs, 1);
    c->scratch[k] = p;
    c->scratch_cap[k] = bytes / sizeof(float);
    return p;
}

static void note_in_use(long delta)
{
    size_t now = atomic_fetch_add(&counts.in_use, (size_t)delta) + (size_t)delta;
    size_t peak = atomic_load(&counts.peak);
    while (now > peak && !atomic_compare_exchange_weak(&counts.peak, &peak, now))
        ;
}

static ds_status cpu_alloc(ds_ctx *c, ds_dtype t, size_t count, void **out)
{
    const size_t bytes = round_up(count * ds_dtype_size(t));
    if (over_limit(c, bytes))
        return DS_FAIL(DS_ERR_MEM, "out of memory: %zu elements of %s (%.1f MiB) would take the "
                       "process past its limit of %.1f MiB (--mem-limit)", count, ds_dtype_name(t),
                       bytes / 1048576.0, c->mem_limit / 1048576.0);
    char *base = aligned_alloc(DS_ALIGN_BYTES, DS_ALIGN_BYTES + bytes);
    if (!base)
        return DS_FAIL(DS_ERR_MEM, "cannot allocate %zu elements of %s (%zu bytes)", count,
                       ds_dtype_name(t), bytes);
    memcpy(base, &bytes, sizeof bytes);
    memset(base + DS_ALIGN_BYTES, 0, bytes);
    atomic_fetch_add(&counts.allocs, 1);
    note_in_use((long)bytes);
    *out = base + DS_ALIGN_BYTES;
    return DS_OK;
}

static void cpu_release(ds_ctx *c, void *p)
{
    (void)c;
    if (!p)
        return;
    char *base = (char *)p - DS_ALIGN_BYTES;
    size_t bytes;
    memcpy(&bytes, base, sizeof bytes);
    note_in_use(-(long)bytes);
    free(base);
}

static ds_status cpu_host_alloc(ds_ctx *c, size_t bytes, void **out)
{
    (void)c;
    *out = aligned_alloc(DS_ALIGN_BYTES, bytes ? round_up(bytes) : DS_ALIGN_BYTES);
    if (!*out)
        return DS_FAIL(DS_ERR_MEM, "cannot allocate %zu bytes of staging memory", bytes);
    atomic_fetch_add(&counts.allocs, 1);
    return DS_OK;
}

static void cpu_host_release(ds_ctx *c, void *p) { (void)c; free(p); }

static ds_status cpu_zero(ds_ctx *c, ds_dtype t, size_t count, void *p)
{
    (void)c;
    memset(p, 0, count * ds_dtype_size(t));
    return DS_OK;
}

static ds_status cpu_copy(ds_ctx *c, ds_dtype t, size_t count, const void *src, void *dst)
{
    (void)c;
    if (count)
        memmove(dst, src, count * ds_dtype_size(t));
    return DS_OK;
}

static ds_status cpu_convert(ds_ctx *c, ds_dtype dt, void *dst, ds_dtype st, const void *src,
                             size_t count)
{
    (void)c;
    return ds_convert(dt, dst, st, src, count);
}

static ds_status cpu_to_host(ds_ctx *c, ds_dtype t, size_t count, const void *src, void *host)
{
    atomic_fetch_add(&counts.to_host, 1);
    return cpu_copy(c, t, count, src, host);
}

static ds_status cpu_sync(ds_ctx *c) { (void)c; return DS_OK; }

static ds_status cpu_event_create(ds_ctx *c, ds_event **out)
{
    (void)c;
    *out = calloc(1, sizeof **out);
    return *out ? DS_OK : DS_FAIL(DS_ERR_MEM, "event");
}

static void cpu_event_destroy(ds_ctx *c, ds_event *e) { (void)c; free(e); }

static ds_status cpu_event_record(ds_ctx *c, ds_event *e)
{
    (void)c;
    e->recorded = 1;
    return DS_OK;
}

static ds_status cpu_event_wait(ds_ctx *c, ds_event *e) { (void)c, (void)e; return DS_OK; }

static ds_status cpu_event_sync(ds_event *e) { (void)e; return DS_OK; }

static ds_status cpu_event_query(ds_event *e, int *done)
{
    (void)e;
    *done = 1;
    return DS_OK;
}

static void cpu_counters(ds_ctx *c, ds_backend_counters *out)
{
    (void)c;
    *out = (ds_backend_counters){.allocs = atomic_load(&counts.allocs),
                                 .to_host = atomic_load(&counts.to_host),
                                 .bytes_in_use = atomic_load(&counts.in_use),
                                 .bytes_peak = atomic_load(&counts.peak)};
}

static const ds_ops *cpu_ops(ds_dtype t)
{
    switch (t) {
    case DS_F32:
    case DS_F64: return ds_cpu_isa_ops(t);
    case DS_F16: return &ds_cpu_ops_f16;
    case DS_BF16: return &ds_cpu_ops_bf16;
    default: return NULL;
    }
}

static void cpu_describe(char *buf, size_t size)
{
    snprintf(buf, size, "cpu:      %s", openblas_get_config());
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Ops run as they are called, so the clock at push and pop times the range. */
static void cpu_range_push(ds_ctx *c, const char *name)
{
    if (!ds_range_log_on(&c->ranges))
        return;
    int k = ds_range_log_push(&c->ranges, name);
    if (k >= 0)   /* a range read while still open ends where it starts */
        c->ranges.slot[k].start_ms = c->ranges.slot[k].end_ms = now_ms();
}

static void cpu_range_pop(ds_ctx *c)
{
    if (!ds_range_log_on(&c->ranges))
        return;
    int k = ds_range_log_pop(&c->ranges);
    if (k >= 0)
        c->ranges.slot[k].end_ms = now_ms();
}

static ds_status cpu_range_timing(ds_ctx *c, int capacity)
{
    ds_range_log_free(&c->ranges);
    return capacity > 0 ? ds_range_log_init(&c->ranges, capacity) : DS_OK;
}

static ds_status cpu_range_times(ds_ctx *c, ds_range_time *out, int max, int *n, int *lost)
{
    if (!ds_range_log_on(&c->ranges))
        return DS_FAIL(DS_ERR_ARG, "range_times: range timing is off");
    ds_range_log_take(&c->ranges, out, max, n, lost);
    return DS_OK;
}

/* The BLAS's GEMM rate on the calling threads: square products big enough
 * to reach its peak, one to warm up, the best of three timed. FP16/BF16 are
 * emulated in float, so their peak is sgemm's. */
static double cpu_peak_flops(ds_ctx *c, ds_dtype t, int tf32, char *how, size_t how_size)
{
    (void)c, (void)tf32;
    const int dbl = t == DS_F64, n = dbl ? 1536 : 2048;
    const size_t elem = dbl ? sizeof(double) : sizeof(float), nn = (size_t)n * n;
    char *buf = calloc(3 * nn, elem);
    if (!buf) {
        snprintf(how, how_size, "not measured: no memory for %d x %d matrices", n, n);
        return 0;
    }
    for (size_t i = 0; i < 2 * nn; i++)   /* values that neither overflow nor denormalise */
        if (dbl)
            ((double *)buf)[i] = 1.0 / (1 + i % 7);
        else
            ((float *)buf)[i] = 1.0f / (1 + i % 7);
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        const double t0 = now_ms();
        if (dbl)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, (double *)buf, n,
                        (double *)buf + nn, n, 0, (double *)buf + 2 * nn, n);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, (float *)buf, n,
                        (float *)buf + nn, n, 0, (float *)buf + 2 * nn, n);
        const double rate = 2.0 * n * nn / ((now_ms() - t0) / 1e3);
        if (rep > 0 && rate > best)
            best = rate;
    }
    free(buf);
    snprintf(how, how_size, "%s %dx%dx%d measured (best of 3), %d thread%s", dbl ? "dgemm" : "sgemm",
             n, n, n, openblas_get_num_threads(), openblas_get_num_threads() == 1 ? "" : "s");
    return best;
}

static void *cpu_native_queue(ds_ctx *c) { (void)c; return NULL; }

const ds_backend ds_cpu_backend = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .ctx_create = cpu_ctx_create,
    .ctx_destroy = cpu_ctx_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .host_alloc = cpu_host_alloc,
    .host_release = cpu_host_release,
    .zero = cpu_zero,
    .to_host = cpu_to_host,
    .to_host_async = cpu_copy,
    .from_host = cpu_copy,
    .copy = cpu_copy,
    .convert = cpu_convert,
    .sync = cpu_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .counters = cpu_counters,
    .ops = cpu_ops,
    .describe = cpu_describe,
    .range_push = cpu_range_push,
    .range_pop = cpu_range_pop,
    .native_queue = cpu_native_queue,
    .range_timing = cpu_range_timing,
    .range_times = cpu_range_times,
    .peak_flops = cpu_peak_flops,
    .kernel_profile_start = NULL,   /* no kernels: --profile layers is the CPU's profile */
    .kernel_profile_stop = NULL,
    .device_pci_bus_id = NULL,   /* no device: the CPU path never binds */
    .choices_get = NULL,   /* one algorithm per op: nothing to choose, nothing to agree */
    .choices_set = NULL,
};
