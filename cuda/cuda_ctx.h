/* cuda_ctx.h - the CUDA backend's context, its checked-call macros and the
 * launch helpers every op family (one .cu file each) shares. Private to cuda/.
 *
 * Every CUDA, cuBLAS(Lt) and cuDNN call goes through DS_CUDA / DS_CUBLAS /
 * DS_CUDNN, which return a ds_status naming the file, the line, the call and
 * the library's message; every kernel launch is followed by DS_LAUNCHED(). */
#ifndef DS_CUDA_CTX_H
#define DS_CUDA_CTX_H

#include <cstddef>

#include "dtype_traits.cuh"   /* first: it sets how cuda_fp16.h / cuda_bf16.h are read */

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

extern "C" {
#include "backend.h"
#include "range_log.h"
}

struct ds_cuda_conv_cache;   /* conv.cu: the algorithm chosen for each shape */
struct ds_cuda_uploads;      /* upload_ring.cu: pinned staging of host-to-device copies */
struct ds_cuda_kprof;        /* kernel_profile.cu: a CUPTI kernel profile in progress */

struct ds_ctx {
    int device;
    int sms;                        /* multiprocessors: sizes grid-stride launches */
    ds_ctx_opts opts;               /* deterministic, tf32, mem_limit (cuda_alloc) */
    cudaStream_t stream;            /* every op of this context is queued here */
    cublasLtHandle_t lt;
    void *lt_work;                  /* cuBLASLt workspace [lt_work_bytes] */
    size_t lt_work_bytes;
    cudnnHandle_t dnn;
    ds_cuda_conv_cache *conv;       /* owned by conv.cu; freed by ds_cuda_conv_cache_free */
    double *partials;               /* [DS_CUDA_PARTIALS] per-block sums of the deterministic
                                     * two-pass reductions (sumsq, BatchNorm moments, bias
                                     * gradients; split by reduce_split.h); one at a time */
    ds_cuda_uploads *uploads;       /* owned by upload_ring.cu */
    /* --profile layers (range_timing.cu): the shared slot bookkeeping and a
     * pair of timing events per slot, [2*k] its start, [2*k+1] its end */
    ds_range_log ranges;
    cudaEvent_t *range_events;
    ds_status range_err;            /* the first failure inside range_push/pop (which
                                     * return nothing): reported by range_times */
    ds_cuda_kprof *kprof;           /* non-NULL while a kernel profile runs on this context */
    ds_rnn_plan **rnn_plans;        /* [n_rnn_plans] the recurrent plans made here, in order
                                     * (rnn.cu: their algorithms are start-up choices) */
    int n_rnn_plans, cap_rnn_plans;
    cudnnMathType_t narrow_math;    /* cuDNN's math for FP16/BF16 data: tensor ops, unless the
                                     * 16-bit investigation's DSTRAIN_CUDNN_NARROW_MATH=default
                                     * (issue 34, item 6) asks for cuDNN's default math */
};

/* Blocks of a two-pass reduction at most: the size of ds_ctx.partials. */
#define DS_CUDA_PARTIALS 1024

struct ds_event {
    cudaEvent_t e;
    int device;
};

void ds_cuda_conv_cache_free(ds_ctx *c);
/* conv.cu: cudnnFind* calls made on c so far (the counters' searches; 0 for NULL). */
long ds_cuda_conv_searches(const ds_ctx *c);
/* The start-up choices (ds_backend.choices_get / choices_set): conv.cu's
 * plans' algorithms, then rnn.cu's, each in the order made. get returns how
 * many there are, set takes exactly those. */
int ds_cuda_conv_choices_get(ds_ctx *ctx, ds_choice *out, int max);
ds_status ds_cuda_conv_choices_set(ds_ctx *ctx, const ds_choice *in, int n);
int ds_cuda_rnn_choices_get(ds_ctx *ctx, ds_choice *out, int max);
ds_status ds_cuda_rnn_choices_set(ds_ctx *ctx, const ds_choice *in, int n);

/* fp32_family.cu: base (the FP16 or BF16 table t) with the op families
 * DSTRAIN_CUDA_FP32_OPS names (rnn, conv) run in FP32; base when unset. */
const ds_ops *ds_cuda_fp32_family(ds_dtype t, const ds_ops *base);
/* DS_ERR_ARG when DSTRAIN_CUDA_FP32_OPS names something else (a typo would
 * run the baseline as if it were the switched run). */
ds_status ds_cuda_fp32_family_check(void);

/* graph.cu: the backend's capture_begin, capture_end, graph_launch and
 * graph_destroy (backend.h). */
ds_status ds_cuda_capture_begin(ds_ctx *c);
ds_status ds_cuda_capture_end(ds_ctx *c, ds_graph **out, size_t *bytes);
ds_status ds_cuda_graph_launch(ds_ctx *c, ds_graph *g);
void ds_cuda_graph_destroy(ds_ctx *c, ds_graph *g);

/* range_timing.cu: the backend's range_timing / range_times, and what
 * range_push / range_pop do while timing is on. */
ds_status ds_cuda_range_timing(ds_ctx *c, int capacity);
ds_status ds_cuda_range_times(ds_ctx *c, ds_range_time *out, int max, int *n, int *lost);
void ds_cuda_range_time_push(ds_ctx *c, const char *name);
void ds_cuda_range_time_pop(ds_ctx *c);
void ds_cuda_ranges_free(ds_ctx *c);   /* ctx_destroy */

/* peak.cu: the backend's peak_flops. */
double ds_cuda_peak_flops(ds_ctx *c, ds_dtype t, int tf32, char *how, size_t how_size);

/* kernel_profile.cu: the backend's kernel_profile_start / stop (built with
 * CUPTI: DS_HAVE_CUPTI; without it the backend has none and these are not
 * defined), and what range_push / range_pop do while a profile runs. */
#ifdef DS_HAVE_CUPTI
ds_status ds_cuda_kernel_profile_start(ds_ctx *c);
ds_status ds_cuda_kernel_profile_stop(ds_ctx *c, const char *trace_path, ds_kernel_stat *out,
                                      int max, int *n, ds_kernel_stat *all);
void ds_cuda_kprof_push(ds_ctx *c, const char *name);
void ds_cuda_kprof_pop(ds_ctx *c);
void ds_cuda_kprof_free(ds_ctx *c);
#endif

/* Queues a copy of host [bytes] to dst on c's stream without waiting for the
 * work queued before it; host may be reused when the call returns. */
ds_status ds_cuda_upload(ds_ctx *c, const void *host, size_t bytes, void *dst);
void ds_cuda_uploads_free(ds_ctx *c);

#define DS_CUDA(call)                                                                         \
    do {                                                                                      \
        cudaError_t ds_e_ = (call);                                                           \
        if (ds_e_ != cudaSuccess)                                                             \
            return DS_FAIL(ds_e_ == cudaErrorMemoryAllocation ? DS_ERR_MEM : DS_ERR_BACKEND,  \
                           "%s: %s (%s)", #call, cudaGetErrorString(ds_e_),                   \
                           cudaGetErrorName(ds_e_));                                          \
    } while (0)

#define DS_CUBLAS(call)                                                                       \
    do {                                                                                      \
        cublasStatus_t ds_b_ = (call);                                                        \
        if (ds_b_ != CUBLAS_STATUS_SUCCESS)                                                   \
            return DS_FAIL(ds_b_ == CUBLAS_STATUS_ALLOC_FAILED ? DS_ERR_MEM : DS_ERR_BACKEND,  \
                           "%s: %s", #call, cublasLtGetStatusString(ds_b_));                  \
    } while (0)

#define DS_CUDNN(call)                                                                        \
    do {                                                                                      \
        cudnnStatus_t ds_d_ = (call);                                                         \
        if (ds_d_ != CUDNN_STATUS_SUCCESS)                                                    \
            return DS_FAIL(ds_d_ == CUDNN_STATUS_ALLOC_FAILED ? DS_ERR_MEM : DS_ERR_BACKEND,   \
                           "%s: %s", #call, cudnnGetErrorString(ds_d_));                      \
    } while (0)

/* After every <<<...>>>: a bad launch configuration is reported here, a fault
 * inside the kernel at the next synchronising call. */
#define DS_LAUNCHED() DS_CUDA(cudaGetLastError())

/* Threads per block of the elementwise and reduction kernels. */
#define DS_CUDA_BLOCK 256

/* Blocks for a grid-stride loop over n elements: enough to fill the device,
 * never more than the work needs (at least 1, so a launch is always valid). */
static inline unsigned ds_cuda_grid(const ds_ctx *c, size_t n, int block = DS_CUDA_BLOCK)
{
    size_t want = (n + block - 1) / block;
    size_t cap = (size_t)c->sms * 32;
    if (want > cap)
        want = cap;
    return want ? (unsigned)want : 1u;
}

/* The math cuDNN may use for T: FP32 runs FMA only (no TF32) unless the run
 * asked for --tf32, then cuDNN's default (TF32 allowed, never FP16); FP64 is
 * exact whatever cuDNN picks (as PyTorch sets it); FP16 and BF16 data on
 * tensor cores (with FP32 compute: ds_dtype_traits<T>::cudnn_compute). */
template <typename T> static inline cudnnMathType_t ds_cudnn_math(const ds_ctx *c)
{
    if (ds_dtype_traits<T>::narrow)
        return c->narrow_math;
    return sizeof(T) == 4 && !c->opts.tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

#endif
