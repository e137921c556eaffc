/* bench/allreduce.c - gradient-reduction bandwidth: `bench_allreduce`.
 *
 * Measures the bucketed gradient reducer of mpi/reduce.c over a range of
 * buffer sizes, with either transport: --transport mpi (a communication
 * thread summing buckets with MPI_Allreduce on the world's grad_comm; host
 * memory on the CPU, staged through pinned host buffers with --device cuda)
 * or --transport nccl (ncclAllReduce per bucket on a communication stream,
 * GPU memory, one GPU per rank); or, with --op mpi, one plain in-place
 * MPI_Allreduce of the whole buffer from the main thread, for comparison.
 * The conventions are those of nccl-tests: sizes from -b to -e bytes
 * multiplied by -f, -w warm-up and -n timed iterations per size, one table
 * row per size with a units line and a #wrong column, and an average bus
 * bandwidth at the end.
 *
 * Inputs are built so the exact result is known: element i on rank r is
 * (r + 1) * ((i % 64) + 1), so the sum over n ranks is
 * n (n + 1) / 2 * ((i % 64) + 1), a small integer that float and double
 * hold exactly, whatever order the ranks' values are added in. The reduction
 * sums in place, so the buffer is refilled before every iteration.
 *
 * One iteration, on every rank: refill (not timed: written on the host,
 * copied to the backend's buffer and waited for); barrier on the main
 * communicator (not timed); then, timed, either
 *   reducer: ds_reduce_begin, ds_reduce_ready(r, 0), ds_reduce_finish
 *            (the whole buffer handed over at once, cut into --bucket-mb
 *            buckets), then the backend's sync of the compute context (with
 *            NCCL, finish only makes the compute stream wait: the sync is
 *            where the host sees the sums done), or
 *   mpi:     MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM) of the whole buffer.
 * After the last iteration every element is checked (copied back to the
 * host). The reducer, and with NCCL its communicator, is made once per size,
 * outside the timed iterations.
 *
 * Columns (rank 0 prints):
 *   size     bytes reduced: count x the element size (a size that is not a
 *            multiple of the element size is rounded down, as nccl-tests)
 *   count    elements
 *   type     float | double
 *   buckets  buckets the reducer cut the buffer into (-: --op mpi)
 *   time     mean time of one timed iteration on a rank, the largest over
 *            the ranks, microseconds
 *   algbw    size / time, GB/s (GB = 10^9 bytes)
 *   busbw    algbw x 2 (n - 1) / n, n ranks: the bandwidth a ring allreduce
 *            needs on each link, comparable across rank counts (nccl-tests)
 *   #wrong   elements that differ from the exact sum after the last
 *            iteration, plus guard elements (64 on either side of the
 *            buffer) that the reduction changed, summed over the ranks
 * The exit status is 1 when any #wrong is not 0. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "flags.h"
#include "dtype.h"
#include "reduce.h"
#include "world.h"

#define PROG "bench_allreduce"
#define PATTERN 64         /* element i carries (i % PATTERN) + 1 */
#define GUARD 64           /* sentinel elements on either side of the buffer */
#define SENTINEL (-7.0)    /* never a sum: every sum is positive */

typedef enum { OP_REDUCER, OP_MPI } bench_op;

typedef struct {
    size_t min_bytes, max_bytes;
    long factor, iters, warmup;
    ds_dtype dt;
    double bucket_mb;
    bench_op op;
    ds_reduce_kind transport;
    const char *device;     /* backend: cpu | cuda */
    double timeout_s;
} bench_opts;

static int g_rank = 0;

/* ---- options (flags.h): parsed by every rank alike, said by rank 0 ---- */

enum { O_MIN = 256, O_MAX, O_FACTOR, O_ITERS, O_WARMUP, O_TYPE, O_BUCKET, O_OP, O_TRANSPORT,
       O_DEVICE, O_TIMEOUT };

static const ds_flag allreduce_flags[] = {
    DS_FLAG_SECTION("sizes and iterations (nccl-tests' letters)"),
    DS_FLAG_ARG_SHORT(O_MIN, 'b', "minbytes", "B", "8",
                      "smallest size in bytes (K, M, G: x 1024)"),
    DS_FLAG_ARG_SHORT(O_MAX, 'e', "maxbytes", "B", "128M", "largest size in bytes (K, M, G: x 1024)"),
    DS_FLAG_ARG_SHORT(O_FACTOR, 'f', "stepfactor", "F", "2",
                      "size multiplication factor, an integer >= 2"),
    DS_FLAG_ARG_SHORT(O_ITERS, 'n', "iters", "N", "20", "timed iterations per size, >= 1"),
    DS_FLAG_ARG_SHORT(O_WARMUP, 'w', "warmup_iters", "W", "5",
                      "warm-up iterations per size, not timed"),
    DS_FLAG_ARG_SHORT(O_TYPE, 'd', "datatype", "T", "float", "float or double"),
    DS_FLAG_SECTION("what is timed"),
    DS_FLAG_ARG(O_BUCKET, "bucket-mb", "M", "25",
                "reducer bucket size, MiB (2^20 bytes), may be fractional"),
    DS_FLAG_ARG(O_OP, "op", "OP", "reducer",
                "reducer: mpi/reduce.c's reducer; mpi: one MPI_Allreduce of the whole buffer "
                "(host memory)"),
    DS_FLAG_ARG(O_TRANSPORT, "transport", "T", "mpi",
                "the reducer's transport: mpi or nccl (one GPU per rank)"),
    DS_FLAG_ARG(O_DEVICE, "device", "D", "cpu for `--transport mpi`, cuda for nccl",
                "cpu or cuda, where the buffer lives"),
    DS_FLAG_ARG(O_TIMEOUT, "timeout", "S", "300",
                "watchdog: abort when a rank waits on the others longer than S seconds; 0: none"),
    DS_FLAG_END};

static const ds_flag_cmd allreduce_cmd = {
    .name = PROG, .program = PROG,
    .usage = "[mpiexec -np N] " PROG " [options]",
    .about = "Sums a buffer across ranks with dstrain's bucketed gradient reducer (or plain "
             "MPI_Allreduce) for sizes from -b to -e bytes and reports time and bandwidth.",
    .flags = allreduce_flags};

/* Bytes with an optional K, M or G suffix (powers of 1024): optarg. */
static int parse_bytes(const ds_flags *fl, size_t *out)
{
    const char *s = optarg;
    char *end = NULL;
    errno = 0;
    unsigned long long v = (s[0] >= '0' && s[0] <= '9') ? strtoull(s, &end, 10) : 0;
    if (!(s[0] >= '0' && s[0] <= '9') || errno || end == s)
        return ds_flags_bad(fl, "expected bytes, e.g. 8, 64K, 128M, 1G");
    unsigned long long mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ULL << 10; end++; break;
    case 'm': case 'M': mul = 1ULL << 20; end++; break;
    case 'g': case 'G': mul = 1ULL << 30; end++; break;
    default: break;
    }
    if (*end || v == 0 || v > (unsigned long long)SIZE_MAX / mul)
        return ds_flags_bad(fl, "expected a positive number of bytes, e.g. 8, 64K, 128M, 1G");
    *out = (size_t)(v * mul);
    return 0;
}

/* 0: run; 1: --help done; 2: bad usage (said). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const char *const types[] = {"float", "double", NULL};
    static const char *const ops[] = {"reducer", "mpi", NULL};
    static const char *const transports[] = {"mpi", "nccl", NULL};
    static const char *const devices[] = {"cpu", "cuda", NULL};
    *o = (bench_opts){.min_bytes = 8, .max_bytes = 128u << 20, .factor = 2, .iters = 20,
                      .warmup = 5, .dt = DS_F32, .bucket_mb = 25, .op = OP_REDUCER,
                      .transport = DS_REDUCE_MPI, .timeout_s = 300};
    ds_flags fl;
    int c, bad = 0, k;
    if ((c = ds_flags_begin(&fl, &allreduce_cmd, argc, argv)) != DS_FLAGS_GO)
        return c == 0 ? 1 : 2;
    while (!bad && (c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_MIN: bad = parse_bytes(&fl, &o->min_bytes); break;
        case O_MAX: bad = parse_bytes(&fl, &o->max_bytes); break;
        case O_FACTOR: bad = ds_flags_int(&fl, 2, 1 << 20, &o->factor); break;
        case O_ITERS: bad = ds_flags_int(&fl, 1, 1 << 24, &o->iters); break;
        case O_WARMUP: bad = ds_flags_int(&fl, 0, 1 << 24, &o->warmup); break;
        case O_TYPE:
            if (!(bad = ds_flags_choice(&fl, types, &k)))
                o->dt = k ? DS_F64 : DS_F32;
            break;
        case O_BUCKET: bad = ds_flags_num(&fl, 1e-6, 1e5, &o->bucket_mb); break;
        case O_TIMEOUT: bad = ds_flags_num(&fl, 0, 1e7, &o->timeout_s); break;
        case O_OP:
            if (!(bad = ds_flags_choice(&fl, ops, &k)))
                o->op = k ? OP_MPI : OP_REDUCER;
            break;
        case O_TRANSPORT:
            if (!(bad = ds_flags_choice(&fl, transports, &k)))
                o->transport = k ? DS_REDUCE_NCCL : DS_REDUCE_MPI;
            break;
        case O_DEVICE:
            if (!(bad = ds_flags_choice(&fl, devices, &k)))
                o->device = devices[k];
            break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if ((c = ds_flags_done(&fl, bad, argc, argv)) != 0)
        return c;
    if (!o->device)
        o->device = o->transport == DS_REDUCE_NCCL ? "cuda" : "cpu";
    if (o->transport == DS_REDUCE_NCCL && strcmp(o->device, "cuda"))
        return ds_flags_error(&fl, "--transport nccl sums GPU memory: it needs --device cuda, not "
                              "--device %s", o->device);
    if (o->op == OP_MPI && (o->transport != DS_REDUCE_MPI || strcmp(o->device, "cpu")))
        return ds_flags_error(&fl, "--op mpi is one MPI_Allreduce of host memory: it takes neither "
                              "--transport nccl nor --device cuda");
    const size_t es = ds_dtype_size(o->dt);
    if (o->min_bytes > o->max_bytes)
        return ds_flags_error(&fl, "-b %zu is larger than -e %zu", o->min_bytes, o->max_bytes);
    if (o->max_bytes < es)
        return ds_flags_error(&fl, "-e %zu: smaller than one %s element (%zu bytes)", o->max_bytes,
                              o->dt == DS_F32 ? "float" : "double", es);
    if (o->op == OP_MPI && o->max_bytes / es > INT_MAX)
        return ds_flags_error(&fl, "-e %zu: more than %d elements, the most one MPI_Allreduce "
                              "call takes", o->max_bytes, INT_MAX);
    if (o->op == OP_REDUCER && o->bucket_mb * 1048576.0 < (double)es)
        return ds_flags_error(&fl, "--bucket-mb %g: smaller than one element (%zu bytes)",
                              o->bucket_mb, es);
    return 0;
}

/* ---- errors: every message names the program, the rank and the call ---- */

/* A failure some ranks may not share leaves the others waiting: end the job. */
static void fatal(ds_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fatal(ds_world *w, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char why[1100];
    snprintf(why, sizeof why, PROG ": %s", msg);
    ds_world_abort(w, why);
}

static void mpi_check(ds_world *w, int rc, const char *call)
{
    if (ds_world_check(rc, call) != DS_OK)
        fatal(w, "%s", ds_status_last_error());
}

/* 1 when every rank's ok is 1. */
static int all_ok(ds_world *w, int ok)
{
    int n = ok != 0;
    if (ds_world_allreduce_sum(w, &n, 1, MPI_INT, "MPI_Allreduce(ok)") != DS_OK)
        fatal(w, "%s", ds_status_last_error());
    return n == w->size;
}

/* ---- data ---- */

/* base [-GUARD, count + GUARD): the pattern of rank `rank` in [0, count),
 * sentinels around it when guards. */
static void fill(void *base, ds_dtype dt, size_t count, int rank, int guards)
{
    const double scale = rank + 1;
    if (dt == DS_F32) {
        float *x = base;
        for (size_t i = 0; i < count; i++)
            x[i] = (float)(scale * (double)(i % PATTERN + 1));
        if (guards)
            for (size_t g = 1; g <= GUARD; g++)
                x[-(ptrdiff_t)g] = x[count + g - 1] = (float)SENTINEL;
    } else {
        double *x = base;
        for (size_t i = 0; i < count; i++)
            x[i] = scale * (double)(i % PATTERN + 1);
        if (guards)
            for (size_t g = 1; g <= GUARD; g++)
                x[-(ptrdiff_t)g] = x[count + g - 1] = SENTINEL;
    }
}

/* Elements of [0, count) that are not the exact sum over `ranks`, and guard
 * elements that are no longer the sentinel. */
static long long count_wrong(const void *base, ds_dtype dt, size_t count, int ranks)
{
    const double total = (double)ranks * (ranks + 1) / 2;
    long long wrong = 0;
    if (dt == DS_F32) {
        const float *x = base;
        for (size_t i = 0; i < count; i++)
            wrong += x[i] != (float)(total * (double)(i % PATTERN + 1));
        for (size_t g = 1; g <= GUARD; g++)
            wrong += (x[-(ptrdiff_t)g] != (float)SENTINEL) + (x[count + g - 1] != (float)SENTINEL);
    } else {
        const double *x = base;
        for (size_t i = 0; i < count; i++)
            wrong += x[i] != total * (double)(i % PATTERN + 1);
        for (size_t g = 1; g <= GUARD; g++)
            wrong += (x[-(ptrdiff_t)g] != SENTINEL) + (x[count + g - 1] != SENTINEL);
    }
    return wrong;
}

/* ---- the measurement ---- */

typedef struct {
    size_t bytes, count;
    int buckets;         /* 0: --op mpi */
    double time_us;      /* mean per timed iteration, max over ranks */
    long long wrong;     /* summed over ranks */
} bench_row;

static const char *type_name(ds_dtype dt) { return dt == DS_F32 ? "float" : "double"; }

/* Where a run's numbers live: host [-GUARD, max + GUARD) is written and
 * checked on the host; mem, the backend's copy, is what is reduced. */
typedef struct {
    const ds_backend *be;
    ds_ctx *ctx;
    int device;
    char *host, *host_buf;   /* host_buf = host + GUARD elements */
    void *mem, *buf;         /* buf = mem + GUARD elements */
} bench_mem;

static void bench_check(ds_world *w, ds_status st, const char *call, const bench_row *row,
                        const char *tn, long it)
{
    if (st != DS_OK)
        fatal(w, "%s (%zu B, %s, iteration %ld): %s: %s", call, row->bytes, tn, it,
              ds_status_name(st), ds_status_last_error());
}

/* Writes iteration it's inputs into the backend's buffer and waits for the copy. */
static void refill(ds_world *w, const bench_opts *o, const bench_mem *m, size_t count, long it,
                   const bench_row *row)
{
    const char *tn = type_name(o->dt);
    fill(m->host_buf, o->dt, count, g_rank, it == 0);
    /* the guards once; after that the reduction must leave them alone */
    ds_status st = it == 0 ? m->be->from_host(m->ctx, o->dt, count + 2 * GUARD, m->host, m->mem)
                           : m->be->from_host(m->ctx, o->dt, count, m->host_buf, m->buf);
    bench_check(w, st, "from_host", row, tn, it);
    bench_check(w, m->be->sync(m->ctx), "sync", row, tn, it);
}

/* Runs one size on every rank; 0 when a rank could not set it up (reported). */
static int run_size(ds_world *w, const bench_opts *o, const bench_mem *m, size_t count,
                    size_t bucket_elems, bench_row *row)
{
    const ds_backend *be = m->be;
    void *buf = m->buf;
    const size_t es = ds_dtype_size(o->dt);
    const char *tn = type_name(o->dt);
    const MPI_Datatype mt = ds_world_type(o->dt);
    *row = (bench_row){.bytes = count * es, .count = count};
    ds_reduce *r = NULL;
    int ok = 1;
    if (o->op == OP_REDUCER) {
        const ds_reduce_cfg rc = {.world = w, .kind = o->transport, .be = be, .ctx = m->ctx,
                                  .device = m->device, .dt = o->dt, .grads = buf, .n = count,
                                  .bucket_elems = bucket_elems};
        ds_status st = ds_reduce_create(&rc, &r);
        if (st != DS_OK) {
            fprintf(stderr, PROG ": rank %d: ds_reduce_create (%zu B, %s, buckets of %zu elements) "
                    "failed: %s: %s\n", g_rank, row->bytes, tn, bucket_elems, ds_status_name(st),
                    ds_status_last_error());
            ok = 0;
        }
    }
    if (!all_ok(w, ok)) {
        ds_reduce_destroy(r);
        return 0;
    }
    if (r)
        row->buckets = ds_reduce_buckets(r);

    double timed = 0;
    for (long it = 0; it < o->warmup + o->iters; it++) {
        refill(w, o, m, count, it, row);
        mpi_check(w, MPI_Barrier(w->comm), "MPI_Barrier");
        const double t0 = MPI_Wtime();
        if (r) {
            ds_status st = ds_reduce_begin(r);
            if (st == DS_OK)
                st = ds_reduce_ready(r, 0);
            if (st == DS_OK)
                st = ds_reduce_finish(r, NULL);
            bench_check(w, st, "ds_reduce_finish", row, tn, it);
            bench_check(w, be->sync(m->ctx), "sync after the reduction", row, tn, it);
        } else {
            mpi_check(w, MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, mt, MPI_SUM, w->comm),
                      "MPI_Allreduce(buffer)");
        }
        const double t1 = MPI_Wtime();
        if (it >= o->warmup)
            timed += t1 - t0;
    }
    ds_reduce_destroy(r);

    bench_check(w, be->to_host(m->ctx, o->dt, count + 2 * GUARD, m->mem, m->host), "to_host", row,
                tn, o->warmup + o->iters);
    long long wrong = count_wrong(m->host_buf, o->dt, count, w->size);
    double mean_us = timed / (double)o->iters * 1e6;
    mpi_check(w, MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, w->comm),
              "MPI_Allreduce(#wrong)");
    mpi_check(w, MPI_Allreduce(MPI_IN_PLACE, &mean_us, 1, MPI_DOUBLE, MPI_MAX, w->comm),
              "MPI_Allreduce(time)");
    row->wrong = wrong;
    row->time_us = mean_us;
    return 1;
}

/* ---- the report (rank 0) ---- */

static void print_header(ds_world *w, const bench_opts *o, const bench_mem *m,
                         size_t bucket_elems)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS)
        snprintf(lib, sizeof lib, "unknown");
    lib[strcspn(lib, "\n,")] = 0;
    double load[3];
    int n_load = getloadavg(load, 3);
    printf("# " PROG ": in-place sum across %d ranks, %s, op %s, device %s\n", w->size,
           type_name(o->dt), o->op == OP_REDUCER ? "reducer" : "mpi", o->device);
    char nccl[256];
    ds_reduce_describe(nccl, sizeof nccl);
    if (o->op == OP_REDUCER && o->transport == DS_REDUCE_NCCL)
        printf("# reducer: mpi/reduce.c, transport nccl: one ncclAllReduce per bucket on a "
               "communication stream, buffers on GPU %d of each rank\n# %s\n", m->device, nccl);
    else if (o->op == OP_REDUCER)
        printf("# reducer: mpi/reduce.c, transport mpi: communication thread, one MPI_Allreduce "
               "per bucket on grad_comm, %s\n", strcmp(o->device, "cpu")
               ? "staged through pinned host buffers from the GPU" : "host memory");
    if (o->op == OP_REDUCER)
        printf("# bucket %g MiB = %zu elements; timed: ds_reduce_begin, ds_reduce_ready(0), "
               "ds_reduce_finish, sync of the compute context\n", o->bucket_mb, bucket_elems);
    else
        printf("# mpi: one MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) of the whole buffer from the main "
               "thread\n");
    printf("# sizes %zu .. %zu B x %ld, warm-up %ld, iterations %ld; each iteration refills the "
           "buffer and passes a barrier (neither timed)\n", o->min_bytes, o->max_bytes, o->factor,
           o->warmup, o->iters);
    printf("# %s; %d rank(s) on this node; %ld cores online", lib, w->local_size,
           sysconf(_SC_NPROCESSORS_ONLN));
    if (n_load == 3)
        printf(", load average %.2f %.2f %.2f (at the start)\n", load[0], load[1], load[2]);
    else
        printf(", load average unknown\n");
    printf("#\n");
    printf("#%11s %12s %8s %8s %12s %9s %9s %8s\n", "size", "count", "type", "buckets", "time",
           "algbw", "busbw", "#wrong");
    printf("#%11s %12s %8s %8s %12s %9s %9s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
           "(GB/s)", "");
    fflush(stdout);
}

static double busbw_of(const bench_row *row, int ranks, double *algbw)
{
    *algbw = row->time_us > 0 ? (double)row->bytes / (row->time_us * 1e-6) / 1e9 : 0;
    return *algbw * 2.0 * (ranks - 1) / ranks;
}

static void print_row(const bench_opts *o, const bench_row *row, int ranks)
{
    double algbw, busbw = busbw_of(row, ranks, &algbw);
    char buckets[16];
    if (row->buckets)
        snprintf(buckets, sizeof buckets, "%d", row->buckets);
    else
        snprintf(buckets, sizeof buckets, "-");
    printf("%12zu %12zu %8s %8s %12.2f %9.3f %9.3f %8lld\n", row->bytes, row->count,
           type_name(o->dt), buckets, row->time_us, algbw, busbw, row->wrong);
    fflush(stdout);
}

/* The backend's context and buffer and the host's copy; 0 when this rank
 * could not make them (reported). */
static int open_mem(ds_world *w, const bench_opts *o, bench_mem *m, size_t max_count)
{
    const size_t es = ds_dtype_size(o->dt), n = max_count + 2 * GUARD;
    ds_status st;
    if (!m->be) {
        fprintf(stderr, PROG ": rank %d: --device %s: %s\n", g_rank, o->device,
                ds_backend_missing(o->device));
        return 0;
    }
    if (o->transport == DS_REDUCE_NCCL &&   /* NCCL refuses ranks sharing a device */
        (st = ds_device_bind(w->local_rank, w->local_size, w->binding.visible_devices, 1,
                             &w->binding)) != DS_OK) {
        fprintf(stderr, PROG ": rank %d: %s\n", g_rank, ds_status_last_error());
        return 0;
    }
    if ((st = m->be->ctx_create(m->device, NULL, &m->ctx)) != DS_OK) {
        fprintf(stderr, PROG ": rank %d: ctx_create (%s, device %d) failed: %s: %s\n", g_rank,
                o->device, m->device, ds_status_name(st), ds_status_last_error());
        return 0;
    }
    if ((st = m->be->alloc(m->ctx, o->dt, n, &m->mem)) != DS_OK) {
        fprintf(stderr, PROG ": rank %d: alloc (%s, %zu %s elements) failed: %s: %s\n", g_rank,
                o->device, n, type_name(o->dt), ds_status_name(st), ds_status_last_error());
        return 0;
    }
    m->host = malloc(n * es);
    if (!m->host) {
        fprintf(stderr, PROG ": rank %d: malloc (%zu %s elements) failed\n", g_rank, n,
                type_name(o->dt));
        return 0;
    }
    m->buf = (char *)m->mem + GUARD * es;
    m->host_buf = m->host + GUARD * es;
    return 1;
}

static void close_mem(bench_mem *m)
{
    free(m->host);
    if (m->mem)
        m->be->release(m->ctx, m->mem);
    if (m->ctx)
        m->be->ctx_destroy(m->ctx);
}

int main(int argc, char **argv)
{
    /* MPI first, so that only rank 0 says what is wrong with the options;
     * ds_world_init below takes the watchdog timeout from them */
    int provided = 0;
    if (ds_world_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided),
                     "MPI_Init_thread") != DS_OK ||
        ds_world_check(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank") != DS_OK) {
        fprintf(stderr, PROG ": %s\n", ds_status_last_error());
        return 1;
    }
    ds_flags_quiet(g_rank != 0);
    bench_opts o;
    const int parsed = parse_args(argc, argv, &o);   /* the same on every rank */
    ds_flags_quiet(0);

    /* the device is chosen as dstrain train chooses it, from the GPUs visible */
    const ds_backend *be = parsed == 0 ? ds_backend_get(o.device) : NULL;
    const int gpus = be && !strcmp(o.device, "cuda") ? be->device_count() : 0;
    ds_world w;
    ds_status st = ds_world_init(&w, gpus, parsed == 0 ? o.timeout_s : 0);
    if (st != DS_OK) {
        fprintf(stderr, PROG ": ds_world_init failed: %s: %s\n", ds_status_name(st), ds_status_last_error());
        ds_world_finalize(&w);
        return 1;
    }
    if (parsed) {
        ds_world_finalize(&w);
        return parsed == 1 ? 0 : 2;
    }

    const size_t es = ds_dtype_size(o.dt);
    const size_t max_count = o.max_bytes / es;
    const double bucket_elems_d = floor(o.bucket_mb * 1048576.0 / (double)es);
    const size_t bucket_elems = bucket_elems_d > (double)SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)bucket_elems_d;
    bench_mem m = {.be = be, .device = w.device < 0 ? 0 : w.device};
    int ok = open_mem(&w, &o, &m, max_count);
    ok = all_ok(&w, ok);

    long long wrong_total = 0;
    double busbw_sum = 0;
    int rows = 0;
    if (ok) {
        if (g_rank == 0)
            print_header(&w, &o, &m, bucket_elems);
        for (size_t bytes = o.min_bytes;;) {
            const size_t count = bytes / es;
            if (count > 0) {   /* a size below one element has no row */
                bench_row row;
                if (!run_size(&w, &o, &m, count, bucket_elems, &row)) {
                    ok = 0;
                    break;
                }
                double algbw;
                busbw_sum += busbw_of(&row, w.size, &algbw);
                wrong_total += row.wrong;
                rows++;
                if (g_rank == 0)
                    print_row(&o, &row, w.size);
            }
            if (bytes > o.max_bytes / (size_t)o.factor)
                break;
            bytes *= (size_t)o.factor;
        }
    }
    if (ok && g_rank == 0) {
        printf("# #wrong total: %lld (%s)\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g GB/s over %d sizes\n", rows ? busbw_sum / rows : 0.0,
               rows);
        printf("#\n");
    }
    if (!ok && g_rank == 0)
        fprintf(stderr, PROG ": failed (see the messages above)\n");
    close_mem(&m);
    if (g_rank == 0 && fflush(stdout) != 0) {
        fprintf(stderr, PROG ": rank 0: writing the report: %s\n", strerror(errno));
        ok = 0;
    }
    ds_world_finalize(&w);
    return !ok ? 1 : wrong_total ? 1 : 0;
}
