/* kernel_profile.cu - --profile kernels on the GPU through CUPTI's activity
 * API (no nvprof or nsys): every kernel launched between start and stop,
 * with the innermost named range it was launched in.
 *
 * start: preallocates the activity buffers and the host-range table,
 *   registers the buffer callbacks (once per process), enables the activity
 *   kinds CONCURRENT_KERNEL (name, start/end, grid/block, registers, shared
 *   memory, correlation id), EXTERNAL_CORRELATION, and RUNTIME and DRIVER
 *   (an external correlation record is made only for an API record);
 * range_push/pop while it runs: cuptiActivityPush/PopExternalCorrelationId
 *   with one id per distinct range name (kind CUSTOM0), so each kernel's
 *   launch call carries the id of the innermost range open on the launching
 *   thread; and the range's host timestamps (cuptiGetTimestamp, the clock of
 *   the kernel records) for the trace;
 * stop: waits for the device, flushes every buffer (FLUSH_FORCED), disables
 *   the kinds, joins kernels to ranges by correlation id, sums per (kernel,
 *   range): launches, total, max, mean theoretical occupancy; sorts by total,
 *   longest first; writes the Chrome/Perfetto trace when asked.
 *
 * Occupancy is the theoretical one of each launch (occupancy_achieved 0):
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor needs the kernel's function
 * pointer, which a record of a library's kernel (cuDNN, cuBLASLt) lacks, so
 * it is computed from the launch's block size, registers per thread and
 * shared memory against the device's limits: warps and blocks per SM,
 * registers (allocated per warp in units of 256, warps placed in 4 SM
 * partitions), shared memory (the carveout the launch executed with, 128-byte
 * units plus the per-block reservation). Achieved occupancy would need the
 * CUPTI Range Profiler (a replayed pass per kernel, counters that need
 * profiling permission): not done.
 *
 * CUPTI's activity API is per process: one profile at a time, on one context.
 * The buffer callbacks may run on a CUPTI thread: the records they parse go
 * into the profile under its lock. Every CUPTI call is checked (DS_CUPTI);
 * range_push/pop return nothing, so their first failure is kept and
 * returned by stop. */
#ifdef DS_HAVE_CUPTI

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <cxxabi.h>

#include "cuda_ctx.h"

#include <cupti.h>

#define DS_CUPTI(call)                                                                        \
    do {                                                                                      \
        CUptiResult ds_u_ = (call);                                                           \
        if (ds_u_ != CUPTI_SUCCESS)                                                           \
            return cupti_fail(ds_u_, #call, __FILE__, __LINE__);                              \
    } while (0)

static ds_status cupti_fail(CUptiResult r, const char *call, const char *file, int line)
{
    const char *msg = nullptr;
    if (cuptiGetResultString(r, &msg) != CUPTI_SUCCESS || !msg)
        msg = "unknown CUPTI error";
    return ds_status_fail(r == CUPTI_ERROR_OUT_OF_MEMORY ? DS_ERR_MEM : DS_ERR_BACKEND, file, line,
                   "%s: %s (CUPTI error %d)", call, msg, (int)r);
}

namespace {

constexpr size_t BUF_BYTES = 8u << 20;   /* one activity buffer */
constexpr int BUFS_UP_FRONT = 4;
constexpr int MAX_NAMES = 1024;          /* distinct range names; ids 1..MAX_NAMES */
constexpr int MAX_HOST_RANGES = 1 << 16; /* host ranges kept for the trace */
constexpr int MAX_DEPTH = 64;
constexpr auto EXT_KIND = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

const CUpti_ActivityKind KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

struct kernel_rec {
    int name;                    /* index into kernel_names */
    uint64_t start, end;         /* ns, CUPTI's clock */
    uint32_t correlation, stream, device;
    int grid[3], block[3];
    int regs, smem;              /* per thread; static + dynamic bytes per block */
    uint32_t smem_executed;      /* the SM's shared memory carveout of the launch */
};

struct host_range {
    int name;                    /* range id, 1-based */
    int depth;
    uint64_t start, end;         /* end 0: still open at stop */
};

}   // namespace

struct ds_cuda_kprof {
    ds_ctx *ctx;
    cudaDeviceProp prop;
    uint64_t t0;                 /* CUPTI timestamp at start */
    int kinds_on;                /* KINDS enabled so far */

    /* filled by the buffer callbacks (any thread), under lock */
    std::mutex lock;
    std::vector<uint8_t *> pool; /* free activity buffers */
    std::vector<kernel_rec> kernels;
    std::unordered_map<const char *, int> kernel_name_of;   /* CUPTI's name -> index */
    std::vector<std::string> kernel_names;                  /* demangled */
    std::unordered_map<uint32_t, uint64_t> range_of;        /* correlation id -> range id */
    size_t dropped = 0;
    ds_status err = DS_OK;       /* first failure, from push/pop or a callback */

    /* the ranges: the launching (host) thread only */
    char names[MAX_NAMES][48];
    int n_names = 0;
    host_range *host = nullptr;  /* [MAX_HOST_RANGES] */
    int n_host = 0;
    long host_lost = 0;
    int depth = 0;               /* ranges opened since start and still open */
    int open[MAX_DEPTH];         /* their host_range index, -1: not kept */
    bool pushed[MAX_DEPTH];      /* an external id was pushed for them */
};

/* The profile the buffer callbacks fill: one per process. */
static std::mutex g_lock;
static ds_cuda_kprof *g_prof;

static void keep_error(ds_cuda_kprof *p, CUptiResult r, const char *call)
{
    std::lock_guard<std::mutex> g(p->lock);
    if (p->err == DS_OK)
        p->err = cupti_fail(r, call, __FILE__, __LINE__);
}

static uint8_t *new_buffer(void) { return (uint8_t *)aligned_alloc(8, BUF_BYTES); }

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    uint8_t *b = nullptr;
    {
        std::lock_guard<std::mutex> g(g_lock);
        if (g_prof) {
            std::lock_guard<std::mutex> h(g_prof->lock);
            if (!g_prof->pool.empty()) {
                b = g_prof->pool.back();
                g_prof->pool.pop_back();
            }
        }
    }
    if (!b)
        b = new_buffer();   /* NULL: CUPTI drops the records, counted at stop */
    *buffer = b;
    *size = b ? BUF_BYTES : 0;
    *max_records = 0;   /* as many as fit */
}

/* The name of a kernel as a C++ programmer wrote it (the mangled one when
 * it does not demangle: a C kernel, or a library's odd symbol). */
static std::string demangle(const char *name)
{
    if (!name)
        return "(unnamed kernel)";
    int status = 0;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string s = status == 0 && d ? d : name;
    free(d);
    return s;
}

/* Parses one buffer into p (p->lock held). */
static void parse_buffer(ds_cuda_kprof *p, uint8_t *buffer, size_t valid)
{
    CUpti_Activity *r = nullptr;
    for (;;) {
        CUptiResult st = cuptiActivityGetNextRecord(buffer, valid, &r);
        if (st == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break;
        if (st != CUPTI_SUCCESS) {
            if (p->err == DS_OK)
                p->err = cupti_fail(st, "cuptiActivityGetNextRecord", __FILE__, __LINE__);
            break;
        }
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const auto *k = (const CUpti_ActivityKernel10 *)r;
            auto it = p->kernel_name_of.find(k->name);
            int name;
            if (it == p->kernel_name_of.end()) {
                name = (int)p->kernel_names.size();
                p->kernel_names.push_back(demangle(k->name));
                p->kernel_name_of.emplace(k->name, name);
            } else {
                name = it->second;
            }
            p->kernels.push_back(kernel_rec{name, k->start, k->end, k->correlationId, k->streamId,
                                            k->deviceId, {k->gridX, k->gridY, k->gridZ},
                                            {k->blockX, k->blockY, k->blockZ}, k->registersPerThread,
                                            k->staticSharedMemory + k->dynamicSharedMemory,
                                            k->sharedMemoryExecuted});
        } else if (r->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
            const auto *x = (const CUpti_ActivityExternalCorrelation *)r;
            if (x->externalKind == EXT_KIND)
                p->range_of[x->correlationId] = x->externalId;
        }
    }
}

static void CUPTIAPI buffer_completed(CUcontext cu, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid)
{
    (void)size;
    std::lock_guard<std::mutex> g(g_lock);
    ds_cuda_kprof *p = g_prof;
    if (!p) {
        free(buffer);
        return;
    }
    std::lock_guard<std::mutex> h(p->lock);
    try {
        if (buffer && valid > 0)
            parse_buffer(p, buffer, valid);
        if (buffer)
            p->pool.push_back(buffer);
    } catch (const std::bad_alloc &) {
        if (p->err == DS_OK)
            p->err = DS_FAIL(DS_ERR_MEM, "kernel profile: the records' tables");
        free(buffer);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(cu, stream, &dropped) == CUPTI_SUCCESS)
        p->dropped += dropped;
}

/* Disables what start enabled, flushes, forgets p; leaves c without a profile. */
static void teardown(ds_ctx *c, ds_cuda_kprof *p)
{
    /* the external ids still pushed by this thread */
    for (int d = std::min(p->depth, MAX_DEPTH) - 1; d >= 0; d--)
        if (p->pushed[d]) {
            uint64_t last = 0;
            (void)cuptiActivityPopExternalCorrelationId(EXT_KIND, &last);
            p->pushed[d] = false;
        }
    if (p->kinds_on > 0)
        (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (int i = p->kinds_on - 1; i >= 0; i--)
        (void)cuptiActivityDisable(KINDS[i]);
    p->kinds_on = 0;
    {
        std::lock_guard<std::mutex> g(g_lock);
        if (g_prof == p)
            g_prof = nullptr;
    }
    for (uint8_t *b : p->pool)
        free(b);
    free(p->host);
    c->kprof = nullptr;
    delete p;
}

void ds_cuda_kprof_free(ds_ctx *c)
{
    if (c->kprof)
        teardown(c, c->kprof);
}

static ds_status start_profile(ds_ctx *c, ds_cuda_kprof *p)
{
    DS_CUDA(cudaGetDeviceProperties(&p->prop, c->device));
    p->host = (host_range *)calloc(MAX_HOST_RANGES, sizeof *p->host);
    if (!p->host)
        return DS_FAIL(DS_ERR_MEM, "kernel profile: host range table");
    try {
        p->pool.reserve(64);
        p->kernels.reserve(1 << 16);
        p->range_of.reserve(1 << 16);
    } catch (const std::bad_alloc &) {
        return DS_FAIL(DS_ERR_MEM, "kernel profile: record tables");
    }
    for (int i = 0; i < BUFS_UP_FRONT; i++) {
        uint8_t *b = new_buffer();
        if (!b)
            return DS_FAIL(DS_ERR_MEM, "kernel profile: %d activity buffers of %zu MiB",
                           BUFS_UP_FRONT, BUF_BYTES >> 20);
        p->pool.push_back(b);
    }
    static bool registered = false;
    if (!registered) {
        DS_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
        registered = true;
    }
    DS_CUPTI(cuptiGetTimestamp(&p->t0));
    {
        std::lock_guard<std::mutex> g(g_lock);
        g_prof = p;
    }
    for (CUpti_ActivityKind k : KINDS) {
        DS_CUPTI(cuptiActivityEnable(k));
        p->kinds_on++;
    }
    return DS_OK;
}

ds_status ds_cuda_kernel_profile_start(ds_ctx *c)
{
    if (c->kprof)
        return DS_FAIL(DS_ERR_ARG, "kernel_profile_start: a profile already runs on this context");
    {
        std::lock_guard<std::mutex> g(g_lock);
        if (g_prof)
            return DS_FAIL(DS_ERR_ARG, "kernel_profile_start: a profile already runs on another "
                           "context of this process (CUPTI's activity API is per process)");
    }
    DS_CUDA(cudaSetDevice(c->device));
    ds_cuda_kprof *p = new (std::nothrow) ds_cuda_kprof;
    if (!p)
        return DS_FAIL(DS_ERR_MEM, "kernel profile");
    p->ctx = c;
    ds_status st = start_profile(c, p);
    if (st != DS_OK) {
        teardown(c, p);
        return st;
    }
    c->kprof = p;
    return DS_OK;
}

/* The id of a range name (1-based), interned on first use; names past the
 * table share the last id. */
static int range_id(ds_cuda_kprof *p, const char *name)
{
    for (int i = 0; i < p->n_names; i++)
        if (strncmp(p->names[i], name, sizeof p->names[i] - 1) == 0)
            return i + 1;
    if (p->n_names == MAX_NAMES)
        return MAX_NAMES;
    snprintf(p->names[p->n_names], sizeof p->names[0], "%s", name);
    return ++p->n_names;
}

void ds_cuda_kprof_push(ds_ctx *c, const char *name)
{
    ds_cuda_kprof *p = c->kprof;
    const int d = p->depth++;
    if (d >= MAX_DEPTH)
        return;
    p->open[d] = -1;
    p->pushed[d] = false;
    const int id = range_id(p, name);
    uint64_t now = 0;
    CUptiResult r = cuptiGetTimestamp(&now);
    if (r != CUPTI_SUCCESS)
        keep_error(p, r, "cuptiGetTimestamp");
    if (p->n_host < MAX_HOST_RANGES) {
        p->host[p->n_host] = host_range{id, d, now, 0};
        p->open[d] = p->n_host++;
    } else {
        p->host_lost++;
    }
    r = cuptiActivityPushExternalCorrelationId(EXT_KIND, (uint64_t)id);
    if (r == CUPTI_SUCCESS)
        p->pushed[d] = true;
    else
        keep_error(p, r, "cuptiActivityPushExternalCorrelationId");
}

void ds_cuda_kprof_pop(ds_ctx *c)
{
    ds_cuda_kprof *p = c->kprof;
    if (p->depth == 0)
        return;   /* a range opened before the profile began */
    const int d = --p->depth;
    if (d >= MAX_DEPTH)
        return;
    CUptiResult r;
    if (p->pushed[d]) {
        uint64_t last = 0;
        r = cuptiActivityPopExternalCorrelationId(EXT_KIND, &last);
        if (r != CUPTI_SUCCESS)
            keep_error(p, r, "cuptiActivityPopExternalCorrelationId");
        p->pushed[d] = false;
    }
    if (p->open[d] >= 0) {
        r = cuptiGetTimestamp(&p->host[p->open[d]].end);
        if (r != CUPTI_SUCCESS)
            keep_error(p, r, "cuptiGetTimestamp");
    }
}

/* Theoretical occupancy of a launch (0..1; < 0 unknown), as the CUDA
 * occupancy calculator computes it. */
static double theoretical_occupancy(const cudaDeviceProp &dp, const kernel_rec &k)
{
    const long threads = (long)k.block[0] * k.block[1] * k.block[2];
    const int warp = dp.warpSize > 0 ? dp.warpSize : 32;
    const int max_warps = dp.maxThreadsPerMultiProcessor / warp;
    if (threads <= 0 || max_warps <= 0)
        return -1;
    const long w = (threads + warp - 1) / warp;
    long blocks = std::min<long>(max_warps / w, dp.maxBlocksPerMultiProcessor);
    if (k.regs > 0) {
        const long per_warp = ((long)k.regs * warp + 255) / 256 * 256;
        const long warps = dp.regsPerMultiprocessor / per_warp / 4 * 4;   /* 4 SM partitions */
        blocks = std::min(blocks, warps / w);
    }
    const long smem_block = ((long)k.smem + (long)dp.reservedSharedMemPerBlock + 127) / 128 * 128;
    const long smem_sm = k.smem_executed > 0 ? (long)k.smem_executed : (long)dp.sharedMemPerMultiprocessor;
    if (smem_block > 0)
        blocks = std::min(blocks, smem_sm / smem_block);
    return std::min(1.0, (double)(blocks * w) / max_warps);
}

namespace {
struct agg {
    int name, range;
    long launches;
    uint64_t total_ns, max_ns;
    double occupancy_sum;
    long occupancy_n;
};

/* A trace file being written: the first failed fprintf is remembered. */
struct writer {
    FILE *f;
    const char *path;
    int err;   /* errno of the first failure, 0 none */
    void put(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
    {
        if (err)
            return;
        va_list ap;
        va_start(ap, fmt);
        if (vfprintf(f, fmt, ap) < 0)
            err = errno ? errno : EIO;
        va_end(ap);
    }
    void str(const char *s)   /* a JSON string */
    {
        put("\"");
        for (; *s && !err; s++) {
            const unsigned char ch = (unsigned char)*s;
            if (ch == '"' || ch == '\\')
                put("\\%c", ch);
            else if (ch < 0x20)
                put("\\u%04x", ch);
            else
                put("%c", ch);
        }
        put("\"");
    }
};
}   // namespace

static double us(uint64_t t, uint64_t t0) { return t >= t0 ? (t - t0) / 1e3 : -((t0 - t) / 1e3); }

/* The Chrome trace event format (chrome://tracing, ui.perfetto.dev): the
 * ranges on the host track (pid 0), the kernels on the GPU's (pid 1, a
 * thread per stream). */
static ds_status write_trace(const ds_cuda_kprof *p, const char *path,
                             const std::vector<int> &range_of_kernel,
                             const std::vector<double> &occupancy)
{
    writer w{fopen(path, "w"), path, 0};
    if (!w.f)
        return DS_FAIL(DS_ERR_IO, "kernel profile trace %s: %s", path, strerror(errno));
    w.put("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    w.put("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"host: "
          "ranges\"}},\n");
    w.put("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":");
    char gpu[320];
    snprintf(gpu, sizeof gpu, "GPU %d: %s: kernels", p->ctx->device, p->prop.name);
    w.str(gpu);
    w.put("}}");
    std::vector<uint32_t> streams;
    for (const kernel_rec &k : p->kernels)
        if (std::find(streams.begin(), streams.end(), k.stream) == streams.end())
            streams.push_back(k.stream);
    for (uint32_t s : streams)
        w.put(",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":"
              "\"stream %u\"}}", s, s);
    for (int i = 0; i < p->n_host && !w.err; i++) {
        const host_range &h = p->host[i];
        if (h.end == 0)
            continue;   /* still open at stop */
        w.put(",\n{\"name\":");
        w.str(p->names[h.name - 1]);
        w.put(",\"cat\":\"range\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":0,\"tid\":0,"
              "\"args\":{\"depth\":%d}}", us(h.start, p->t0), (h.end - h.start) / 1e3, h.depth);
    }
    for (size_t i = 0; i < p->kernels.size() && !w.err; i++) {
        const kernel_rec &k = p->kernels[i];
        w.put(",\n{\"name\":");
        w.str(p->kernel_names[k.name].c_str());
        w.put(",\"cat\":\"kernel\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%u,"
              "\"args\":{\"range\":", us(k.start, p->t0), k.end >= k.start ? (k.end - k.start) / 1e3 : 0.0,
              k.stream);
        w.str(range_of_kernel[i] > 0 ? p->names[range_of_kernel[i] - 1] : "");
        w.put(",\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d],\"registers_per_thread\":%d,"
              "\"shared_memory_bytes\":%d,\"theoretical_occupancy\":%.3f,\"correlation_id\":%u,"
              "\"device\":%u}}", k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1], k.block[2],
              k.regs, k.smem, occupancy[i], k.correlation, k.device);
    }
    w.put("\n]}\n");
    const int werr = w.err;
    if (fclose(w.f) != 0 && !w.err)
        w.err = errno ? errno : EIO;
    if (werr || w.err)
        return DS_FAIL(DS_ERR_IO, "kernel profile trace %s: %s", path, strerror(werr ? werr : w.err));
    return DS_OK;
}

static ds_status finish(ds_ctx *c, ds_cuda_kprof *p, const char *trace_path, ds_kernel_stat *out,
                        int max, int *n, ds_kernel_stat *all)
{
    DS_CUDA(cudaSetDevice(c->device));
    DS_CUDA(cudaDeviceSynchronize());   /* every stream: NCCL's and the uploads' too */
    /* ranges still open close now, for the trace */
    uint64_t now = 0;
    DS_CUPTI(cuptiGetTimestamp(&now));
    for (int d = 0; d < std::min(p->depth, MAX_DEPTH); d++) {
        if (p->pushed[d]) {
            uint64_t last = 0;
            DS_CUPTI(cuptiActivityPopExternalCorrelationId(EXT_KIND, &last));
            p->pushed[d] = false;
        }
        if (p->open[d] >= 0)
            p->host[p->open[d]].end = now;
    }
    DS_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    while (p->kinds_on > 0)
        DS_CUPTI(cuptiActivityDisable(KINDS[--p->kinds_on]));

    std::lock_guard<std::mutex> g(p->lock);
    if (p->err != DS_OK)
        return p->err;
    if (p->dropped > 0)
        return DS_FAIL(DS_ERR_BACKEND, "kernel profile: CUPTI dropped %zu activity records (no "
                       "buffer to put them in)", p->dropped);
    /* each kernel's range and occupancy, then the sums per (kernel, range) */
    std::vector<int> range_of_kernel(p->kernels.size());
    std::vector<double> occupancy(p->kernels.size());
    std::unordered_map<uint64_t, size_t> slot;
    std::vector<agg> sums;
    for (size_t i = 0; i < p->kernels.size(); i++) {
        const kernel_rec &k = p->kernels[i];
        auto it = p->range_of.find(k.correlation);
        const int range = it == p->range_of.end() ? 0 : (int)it->second;
        range_of_kernel[i] = range >= 1 && range <= p->n_names ? range : 0;
        occupancy[i] = theoretical_occupancy(p->prop, k);
        const uint64_t key = (uint64_t)k.name << 32 | (uint32_t)range_of_kernel[i];
        auto s = slot.find(key);
        if (s == slot.end()) {
            s = slot.emplace(key, sums.size()).first;
            sums.push_back(agg{k.name, range_of_kernel[i], 0, 0, 0, 0, 0});
        }
        agg &a = sums[s->second];
        const uint64_t dur = k.end >= k.start ? k.end - k.start : 0;
        a.launches++;
        a.total_ns += dur;
        a.max_ns = std::max(a.max_ns, dur);
        if (occupancy[i] >= 0) {
            a.occupancy_sum += occupancy[i];
            a.occupancy_n++;
        }
    }
    if (all) {   /* every kernel, the ones past max too: a step's launches and GPU time */
        snprintf(all->name, sizeof all->name, "all kernels");
        for (const agg &a : sums) {
            all->launches += a.launches;
            all->total_ms += a.total_ns / 1e6;
            all->max_ms = std::max(all->max_ms, a.max_ns / 1e6);
        }
        all->occupancy = -1;
    }
    std::sort(sums.begin(), sums.end(), [](const agg &a, const agg &b) {
        return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.launches > b.launches;
    });
    *n = 0;
    for (const agg &a : sums) {
        if (*n >= max)
            break;
        ds_kernel_stat &s = out[(*n)++];
        s = ds_kernel_stat{};
        snprintf(s.name, sizeof s.name, "%s", p->kernel_names[a.name].c_str());
        snprintf(s.range, sizeof s.range, "%s", a.range > 0 ? p->names[a.range - 1] : "");
        s.launches = a.launches;
        s.total_ms = a.total_ns / 1e6;
        s.max_ms = a.max_ns / 1e6;
        s.occupancy = a.occupancy_n ? a.occupancy_sum / a.occupancy_n : -1;
        s.occupancy_achieved = 0;
    }
    if (trace_path)
        DS_TRY(write_trace(p, trace_path, range_of_kernel, occupancy));
    return DS_OK;
}

ds_status ds_cuda_kernel_profile_stop(ds_ctx *c, const char *trace_path, ds_kernel_stat *out,
                                      int max, int *n, ds_kernel_stat *all)
{
    *n = 0;
    if (all)
        *all = ds_kernel_stat{};
    ds_cuda_kprof *p = c->kprof;
    if (!p)
        return DS_FAIL(DS_ERR_ARG, "kernel_profile_stop: no profile runs on this context");
    ds_status st;
    try {
        st = finish(c, p, trace_path, out, max, n, all);
    } catch (const std::bad_alloc &) {
        st = DS_FAIL(DS_ERR_MEM, "kernel profile: the records' tables");
    }
    teardown(c, p);
    return st;
}

#endif   // DS_HAVE_CUPTI
