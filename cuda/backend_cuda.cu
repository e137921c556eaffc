/* backend_cuda.cu - the CUDA backend: device memory, pinned host memory,
 * copies, events and counters on a context's stream, and the op tables.
 * Every op of a context is queued on its stream; the host waits only in the
 * calls the seam names blocking (to_host, sync, event_sync). */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cuda_ctx.h"   /* first of the CUDA headers: see dtype_traits.cuh */
#include "ops_cuda.h"

#include <nvtx3/nvToolsExt.h>
#ifdef DS_HAVE_CUPTI
#include <cupti.h>
#endif

#include "backend_plugin.h"
#include "build_info.h"

extern "C" const ds_ops ds_cuda_ops_f32, ds_cuda_ops_f64, ds_cuda_ops_f16, ds_cuda_ops_bf16;

/* cuBLASLt's workspace per context: what NVIDIA recommends for Hopper. */
#define LT_WORK_BYTES (32u << 20)

/* ---- memory accounting: sizes of live device allocations, process-wide ---- */
namespace {
struct alloc_table {
    std::mutex lock;
    struct entry { void *p; size_t bytes; } *e = nullptr;
    size_t n = 0, cap = 0;
    std::atomic<long> allocs{0}, to_host{0};
    size_t in_use = 0, peak = 0;
    size_t reserved = 0;   /* allocations under way past the memory-limit check */
} mem;
}   // namespace

static bool note_alloc(void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(mem.lock);
    if (mem.n == mem.cap) {
        size_t cap = mem.cap ? 2 * mem.cap : 256;
        auto *e = (alloc_table::entry *)realloc(mem.e, cap * sizeof(alloc_table::entry));
        if (!e)
            return false;
        mem.e = e;
        mem.cap = cap;
    }
    mem.e[mem.n++] = {p, bytes};
    mem.in_use += bytes;
    if (mem.in_use > mem.peak)
        mem.peak = mem.in_use;
    mem.allocs++;
    return true;
}

static void note_release(void *p)
{
    std::lock_guard<std::mutex> g(mem.lock);
    for (size_t i = 0; i < mem.n; i++)
        if (mem.e[i].p == p) {
            mem.in_use -= mem.e[i].bytes;
            mem.e[i] = mem.e[--mem.n];
            return;
        }
}

/* Every entry point may run on another host thread (the reducer's comm
 * thread): make the context's device current there. */
#define USE_DEVICE(c) DS_CUDA(cudaSetDevice((c)->device))

static int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();   /* no driver or no device: not sticky */
        return 0;
    }
    return n;
}

static ds_status cuda_device_pci_bus_id(int device, char *buf, size_t size)
{
    DS_CUDA(cudaDeviceGetPCIBusId(buf, (int)size, device));
    return DS_OK;
}

/* The convolutions' choices, then the recurrent layers' (cuda_ctx.h). */
static int cuda_choices_get(ds_ctx *c, ds_choice *out, int max)
{
    const int nc = ds_cuda_conv_choices_get(c, out, max);
    const int at = nc < max ? nc : max;
    return nc + ds_cuda_rnn_choices_get(c, out ? out + at : nullptr, out ? max - at : 0);
}

static ds_status cuda_choices_set(ds_ctx *c, const ds_choice *in, int n)
{
    const int nc = ds_cuda_conv_choices_get(c, nullptr, 0);
    if (n < nc)
        return DS_FAIL(DS_ERR_ARG, "%d start-up choices given, %d convolutions' made here", n, nc);
    DS_TRY(ds_cuda_conv_choices_set(c, in, nc));
    return ds_cuda_rnn_choices_set(c, in + nc, n - nc);
}

static ds_status no_device(int device, int count, cudaError_t why)
{
    if (count == 0)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "no CUDA device: %s (run with --device cpu, or on a "
                       "machine with an NVIDIA GPU and its driver)",
                       why == cudaSuccess ? "the driver sees none" : cudaGetErrorString(why));
    return DS_FAIL(DS_ERR_ARG, "no CUDA device %d: %d visible (CUDA_VISIBLE_DEVICES=%s)", device,
                   count, getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
}

static void cuda_ctx_destroy(ds_ctx *c);

static ds_status ctx_open(ds_ctx *c)
{
    USE_DEVICE(c);
    cudaDeviceProp prop;
    DS_CUDA(cudaGetDeviceProperties(&prop, c->device));
    c->sms = prop.multiProcessorCount;
    DS_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    DS_CUBLAS(cublasLtCreate(&c->lt));
    c->lt_work_bytes = LT_WORK_BYTES;
    DS_CUDA(cudaMalloc(&c->lt_work, c->lt_work_bytes));
    DS_CUDA(cudaMalloc((void **)&c->partials, DS_CUDA_PARTIALS * sizeof(double)));
    DS_CUDNN(cudnnCreate(&c->dnn));
    DS_CUDNN(cudnnSetStream(c->dnn, c->stream));
    /* a switch of the 16-bit gradient investigation (tests/gpu/f16_switches.sh),
     * not an option: the tensor-op math is the product's */
    const char *m = getenv("DSTRAIN_CUDNN_NARROW_MATH");
    c->narrow_math = m && !strcmp(m, "default") ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
    return ds_cuda_fp32_family_check();
}

static ds_status cuda_ctx_create(int device, const ds_ctx_opts *opts, ds_ctx **out)
{
    *out = nullptr;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        count = 0;
    }
    if (device < 0 || device >= count)
        return no_device(device, count, e);
    ds_ctx *c = (ds_ctx *)calloc(1, sizeof *c);
    if (!c)
        return DS_FAIL(DS_ERR_MEM, "cuda context");
    c->device = device;
    if (opts)
        c->opts = *opts;
    ds_status st = ctx_open(c);
    if (st != DS_OK) {
        cuda_ctx_destroy(c);
        return st;
    }
    *out = c;
    return DS_OK;
}

/* Teardown reports nothing: a failure here has no one to tell. */
static void cuda_ctx_destroy(ds_ctx *c)
{
    if (!c)
        return;
    (void)cudaSetDevice(c->device);
    if (c->stream)
        (void)cudaStreamSynchronize(c->stream);
#ifdef DS_HAVE_CUPTI
    ds_cuda_kprof_free(c);
#endif
    ds_cuda_ranges_free(c);
    ds_cuda_conv_cache_free(c);
    ds_cuda_uploads_free(c);
    if (c->dnn)
        (void)cudnnDestroy(c->dnn);
    if (c->lt)
        (void)cublasLtDestroy(c->lt);
    (void)cudaFree(c->lt_work);
    (void)cudaFree(c->partials);
    if (c->stream)
        (void)cudaStreamDestroy(c->stream);
    free(c->rnn_plans);   /* the list only: each plan is its model's to destroy */
    free(c);
}

/* Takes bytes out of c's memory limit (ds_ctx_opts.mem_limit; 0: none)
 * before cudaMalloc; given back by unreserve once the allocation is noted or
 * has failed. The limit is on what the process holds through alloc, all
 * contexts together (the counters' bytes_in_use). */
static ds_status reserve(ds_ctx *c, size_t count, ds_dtype t, size_t bytes)
{
    if (c->opts.mem_limit == 0)
        return DS_OK;
    std::lock_guard<std::mutex> g(mem.lock);
    if (mem.in_use + mem.reserved + bytes > c->opts.mem_limit)
        return DS_FAIL(DS_ERR_MEM,
                       "out of memory under the limit: %zu elements of %s (%.1f MiB) would take "
                       "dstrain's GPU memory to %.1f MiB, past the memory limit of %.1f MiB "
                       "(mem_limit)",
                       count, ds_dtype_name(t), bytes / 1048576.0,
                       (mem.in_use + mem.reserved + bytes) / 1048576.0,
                       c->opts.mem_limit / 1048576.0);
    mem.reserved += bytes;
    return DS_OK;
}

static void unreserve(ds_ctx *c, size_t bytes)
{
    if (c->opts.mem_limit == 0)
        return;
    std::lock_guard<std::mutex> g(mem.lock);
    mem.reserved -= bytes;
}

static ds_status cuda_alloc(ds_ctx *c, ds_dtype t, size_t count, void **out)
{
    USE_DEVICE(c);
    const size_t bytes = ds_backend_align_elems(t, count ? count : 1) * ds_dtype_size(t);
    DS_TRY(reserve(c, count, t, bytes));
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        unreserve(c, bytes);
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        std::lock_guard<std::mutex> g(mem.lock);
        return DS_FAIL(e == cudaErrorMemoryAllocation ? DS_ERR_MEM : DS_ERR_BACKEND,
                       "out of GPU memory on device %d: %zu elements of %s (%.1f MiB) do not fit; "
                       "dstrain holds %.1f MiB, %.1f of %.1f MiB free (%s)",
                       c->device, count, ds_dtype_name(t), bytes / 1048576.0,
                       mem.in_use / 1048576.0, free_b / 1048576.0, total_b / 1048576.0,
                       cudaGetErrorString(e));
    }
    /* zeroed, as the seam promises; the memset is queued before any use */
    e = cudaMemsetAsync(p, 0, bytes, c->stream);
    const bool noted = e == cudaSuccess && note_alloc(p, bytes);
    unreserve(c, bytes);
    if (!noted) {
        (void)cudaFree(p);
        DS_CUDA(e);
        return DS_FAIL(DS_ERR_MEM, "memory table");
    }
    *out = p;
    return DS_OK;
}

static void cuda_release(ds_ctx *c, void *p)
{
    if (!p)
        return;
    (void)cudaSetDevice(c->device);
    /* queued work may still read p: cudaFree waits for the device */
    note_release(p);
    (void)cudaFree(p);
}

static ds_status cuda_host_alloc(ds_ctx *c, size_t bytes, void **out)
{
    USE_DEVICE(c);
    DS_CUDA(cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocPortable));
    mem.allocs++;
    return DS_OK;
}

static void cuda_host_release(ds_ctx *c, void *p)
{
    (void)c;
    if (p)
        (void)cudaFreeHost(p);
}

static ds_status cuda_zero(ds_ctx *c, ds_dtype t, size_t count, void *p)
{
    USE_DEVICE(c);
    if (count)
        DS_CUDA(cudaMemsetAsync(p, 0, count * ds_dtype_size(t), c->stream));
    return DS_OK;
}

static ds_status cuda_to_host(ds_ctx *c, ds_dtype t, size_t count, const void *src, void *host)
{
    USE_DEVICE(c);
    mem.to_host++;
    if (count)
        DS_CUDA(cudaMemcpyAsync(host, src, count * ds_dtype_size(t), cudaMemcpyDeviceToHost,
                                c->stream));
    DS_CUDA(cudaStreamSynchronize(c->stream));
    return DS_OK;
}

static ds_status cuda_to_host_async(ds_ctx *c, ds_dtype t, size_t count, const void *src,
                                    void *host)
{
    USE_DEVICE(c);
    if (count)
        DS_CUDA(cudaMemcpyAsync(host, src, count * ds_dtype_size(t), cudaMemcpyDeviceToHost,
                                c->stream));
    return DS_OK;
}

/* The seam lets the caller reuse host at once, and the step must not wait
 * for the one before it: staged through the context's upload ring. */
static ds_status cuda_from_host(ds_ctx *c, ds_dtype t, size_t count, const void *host, void *dst)
{
    USE_DEVICE(c);
    return ds_cuda_upload(c, host, count * ds_dtype_size(t), dst);
}

static ds_status cuda_copy(ds_ctx *c, ds_dtype t, size_t count, const void *src, void *dst)
{
    USE_DEVICE(c);
    if (count)
        DS_CUDA(cudaMemcpyAsync(dst, src, count * ds_dtype_size(t), cudaMemcpyDefault, c->stream));
    return DS_OK;
}

static ds_status cuda_sync(ds_ctx *c)
{
    USE_DEVICE(c);
    DS_CUDA(cudaStreamSynchronize(c->stream));
    return DS_OK;
}

static ds_status cuda_event_create(ds_ctx *c, ds_event **out)
{
    USE_DEVICE(c);
    ds_event *e = (ds_event *)calloc(1, sizeof *e);
    if (!e)
        return DS_FAIL(DS_ERR_MEM, "event");
    e->device = c->device;
    cudaError_t r = cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming);
    if (r != cudaSuccess) {
        free(e);
        DS_CUDA(r);
    }
    *out = e;
    return DS_OK;
}

static void cuda_event_destroy(ds_ctx *c, ds_event *e)
{
    (void)c;
    if (!e)
        return;
    (void)cudaSetDevice(e->device);
    (void)cudaEventDestroy(e->e);
    free(e);
}

static ds_status cuda_event_record(ds_ctx *c, ds_event *e)
{
    USE_DEVICE(c);
    DS_CUDA(cudaEventRecord(e->e, c->stream));
    return DS_OK;
}

static ds_status cuda_event_wait(ds_ctx *c, ds_event *e)
{
    USE_DEVICE(c);
    DS_CUDA(cudaStreamWaitEvent(c->stream, e->e, 0));
    return DS_OK;
}

static ds_status cuda_event_sync(ds_event *e)
{
    DS_CUDA(cudaSetDevice(e->device));
    DS_CUDA(cudaEventSynchronize(e->e));
    return DS_OK;
}

static ds_status cuda_event_query(ds_event *e, int *done)
{
    DS_CUDA(cudaSetDevice(e->device));
    cudaError_t r = cudaEventQuery(e->e);
    if (r == cudaErrorNotReady) {
        *done = 0;
        return DS_OK;
    }
    DS_CUDA(r);
    *done = 1;
    return DS_OK;
}

static void cuda_counters(ds_ctx *c, ds_backend_counters *out)
{
    std::lock_guard<std::mutex> g(mem.lock);
    *out = ds_backend_counters{mem.allocs.load(), mem.to_host.load(), mem.in_use, mem.peak,
                               ds_cuda_conv_searches(c)};
}

static const ds_ops *cuda_ops(ds_dtype t)
{
    switch (t) {
    case DS_F32: return &ds_cuda_ops_f32;
    case DS_F64: return &ds_cuda_ops_f64;
    case DS_F16: return ds_cuda_fp32_family(DS_F16, &ds_cuda_ops_f16);
    case DS_BF16: return ds_cuda_fp32_family(DS_BF16, &ds_cuda_ops_bf16);
    default: return nullptr;
    }
}

static void version_text(int v, int div_major, int div_minor, char *out, size_t n)
{
    snprintf(out, n, "%d.%d.%d", v / div_major, v % div_major / div_minor, v % div_minor);
}

/* Versions compiled against and found at run time, the architectures built,
 * and the devices this process sees. */
static void cuda_describe(char *buf, size_t size)
{
    int rt = 0, drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    char rt_s[32], drv_s[32], cudart_c[32], lt_c[32], lt_r[32], dnn_c[32], dnn_r[32];
    version_text(rt, 1000, 10, rt_s, sizeof rt_s);
    version_text(drv, 1000, 10, drv_s, sizeof drv_s);
    version_text(CUDART_VERSION, 1000, 10, cudart_c, sizeof cudart_c);
    version_text(CUBLAS_VERSION, 10000, 100, lt_c, sizeof lt_c);
    version_text((int)cublasLtGetVersion(), 10000, 100, lt_r, sizeof lt_r);
    version_text(CUDNN_VERSION, 10000, 100, dnn_c, sizeof dnn_c);
    version_text((int)cudnnGetVersion(), 10000, 100, dnn_r, sizeof dnn_r);
    int n = cuda_device_count();
    char dev[400] = "no CUDA device visible";
    if (n > 0) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            snprintf(dev, sizeof dev, "%d device%s, 0: %s (sm_%d%d, %.1f GiB)", n, n > 1 ? "s" : "",
                     p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0);
    }
    char cupti[96] = "not built in (no kernel profile: CMake found no CUPTI)";
#ifdef DS_HAVE_CUPTI
    uint32_t cupti_rt = 0;
    if (cuptiGetVersion(&cupti_rt) == CUPTI_SUCCESS)
        snprintf(cupti, sizeof cupti, "API %u (compiled %d); kernel profile", cupti_rt, CUPTI_API_VERSION);
    else
        snprintf(cupti, sizeof cupti, "not loadable (compiled API %d)", CUPTI_API_VERSION);
#endif
    snprintf(buf, size,
             "cuda:     runtime %s (compiled %s), driver %s; architectures built: sm_%s\n"
             "cublasLt: %s (compiled %s)\n"
             "cudnn:    %s (compiled %s)\n"
             "cupti:    %s\n"
             "gpu:      %s",
             rt ? rt_s : "not found", cudart_c, drv ? drv_s : "not found", DSTRAIN_CUDA_ARCHS,
             lt_r, lt_c, dnn_r, dnn_c, cupti, dev);
}

/* NVTX always (for nsys and ncu); while --profile layers times ranges, an
 * event pair per range (range_timing.cu); while a kernel profile runs, the
 * range's CUPTI external correlation id (kernel_profile.cu). Nothing here
 * allocates. */
static void cuda_range_push(ds_ctx *c, const char *name)
{
    nvtxRangePushA(name);
    if (ds_range_log_on(&c->ranges))
        ds_cuda_range_time_push(c, name);
#ifdef DS_HAVE_CUPTI
    if (c->kprof)
        ds_cuda_kprof_push(c, name);
#endif
}

static void cuda_range_pop(ds_ctx *c)
{
#ifdef DS_HAVE_CUPTI
    if (c->kprof)
        ds_cuda_kprof_pop(c);
#endif
    if (ds_range_log_on(&c->ranges))
        ds_cuda_range_time_pop(c);
    nvtxRangePop();
}

/* The stream every op of c is queued on, for NCCL (mpi/transport_nccl.c). */
static void *cuda_native_queue(ds_ctx *c) { return (void *)c->stream; }

// The plugin's entry: src/backend_plugin.c takes the seam by this name.
extern "C" DS_PLUGIN_EXPORT const ds_backend ds_cuda_backend = {
    .name = "cuda",
    .device_count = cuda_device_count,
    .device_pci_bus_id = cuda_device_pci_bus_id,
    .ctx_create = cuda_ctx_create,
    .ctx_destroy = cuda_ctx_destroy,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .host_alloc = cuda_host_alloc,
    .host_release = cuda_host_release,
    .zero = cuda_zero,
    .to_host = cuda_to_host,
    .to_host_async = cuda_to_host_async,
    .from_host = cuda_from_host,
    .copy = cuda_copy,
    .convert = cuda_convert,
    .sync = cuda_sync,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .counters = cuda_counters,
    .ops = cuda_ops,
    .describe = cuda_describe,
    .range_push = cuda_range_push,
    .range_pop = cuda_range_pop,
    .native_queue = cuda_native_queue,
    .range_timing = ds_cuda_range_timing,
    .range_times = ds_cuda_range_times,
    .peak_flops = ds_cuda_peak_flops,
#ifdef DS_HAVE_CUPTI
    .kernel_profile_start = ds_cuda_kernel_profile_start,
    .kernel_profile_stop = ds_cuda_kernel_profile_stop,
#else
    .kernel_profile_start = nullptr,   /* built without CUPTI (CMakeLists.txt) */
    .kernel_profile_stop = nullptr,
#endif
    .choices_get = cuda_choices_get,
    .choices_set = cuda_choices_set,
    .capture_begin = ds_cuda_capture_begin,
    .capture_end = ds_cuda_capture_end,
    .graph_launch = ds_cuda_graph_launch,
    .graph_destroy = ds_cuda_graph_destroy,
};
