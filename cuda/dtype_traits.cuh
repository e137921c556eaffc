/* dtype_traits.cuh - what each element type T of a CUDA op table (float,
 * double, __half, __nv_bfloat16) means to our kernels and to the libraries:
 * the types of the other buffer roles, the cuDNN and cuBLASLt names, and the
 * two conversions every kernel goes through. Private to cuda/; cuda_ctx.h
 * includes it before any CUDA library header.
 *
 * The rule of the 16-bit tables (as cpu/ops_half.inc emulates them):
 * a kernel widens each 16-bit element it reads to float (exact), computes in
 * float (accumulating in double where the float32 kernel does), and rounds
 * each element it writes once, to nearest even. So implicit conversions and
 * arithmetic on __half / __nv_bfloat16 are switched off below: a kernel that
 * forgets to widen does not compile, rather than computing in 16 bits. For
 * float and double both conversions are the identity, so those tables run
 * exactly the arithmetic they ran before these traits existed. */
#ifndef DS_DTYPE_TRAITS_CUH
#define DS_DTYPE_TRAITS_CUH

#if (defined(__CUDA_FP16_H__) || defined(__CUDA_BF16_H__)) &&                                 \
    !(defined(__CUDA_NO_HALF_CONVERSIONS__) && defined(__CUDA_NO_BFLOAT16_CONVERSIONS__))
#error "dtype_traits.cuh must be included before cuda_fp16.h / cuda_bf16.h (cublasLt.h includes them)"
#endif
#ifndef __CUDA_NO_HALF_OPERATORS__
#define __CUDA_NO_HALF_OPERATORS__
#endif
#ifndef __CUDA_NO_HALF2_OPERATORS__
#define __CUDA_NO_HALF2_OPERATORS__
#endif
#ifndef __CUDA_NO_HALF_CONVERSIONS__
#define __CUDA_NO_HALF_CONVERSIONS__
#endif
#ifndef __CUDA_NO_BFLOAT16_OPERATORS__
#define __CUDA_NO_BFLOAT16_OPERATORS__
#endif
#ifndef __CUDA_NO_BFLOAT162_OPERATORS__
#define __CUDA_NO_BFLOAT162_OPERATORS__
#endif
#ifndef __CUDA_NO_BFLOAT16_CONVERSIONS__
#define __CUDA_NO_BFLOAT16_CONVERSIONS__
#endif

#include <type_traits>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

/* Per element type T:
 *   math     what kernels compute in (float for the 16-bit types, else T)
 *   stats    BatchNorm parameters, running statistics, moments (stats role)
 *   master   master weights and optimizer moments (master role)
 *   scale    alpha/beta of cuDNN and cuBLASLt calls (host values)
 *   narrow   a 16-bit type
 *   cudnn    cuDNN's data type of T's tensors
 *   cudnn_compute  cuDNN's compute type (convolution descriptor, RNN mathPrec)
 *   lt_data, lt_scale  cuBLASLt's matrix and scale types
 *   name     as ds_dtype_name prints it */
template <typename T> struct ds_dtype_traits;

template <> struct ds_dtype_traits<float> {
    typedef float math, stats, master, scale;
    static constexpr bool narrow = false;
    static constexpr cudnnDataType_t cudnn = CUDNN_DATA_FLOAT;
    static constexpr cudnnDataType_t cudnn_compute = CUDNN_DATA_FLOAT;
    static constexpr cudaDataType_t lt_data = CUDA_R_32F, lt_scale = CUDA_R_32F;
    static constexpr const char *name = "float32";
    /* TF32 tensor cores only when the run asked for them */
    static cublasComputeType_t lt_compute(bool tf32)
    {
        return tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    }
};

template <> struct ds_dtype_traits<double> {
    typedef double math, stats, master, scale;
    static constexpr bool narrow = false;
    static constexpr cudnnDataType_t cudnn = CUDNN_DATA_DOUBLE;
    static constexpr cudnnDataType_t cudnn_compute = CUDNN_DATA_DOUBLE;
    static constexpr cudaDataType_t lt_data = CUDA_R_64F, lt_scale = CUDA_R_64F;
    static constexpr const char *name = "float64";
    static cublasComputeType_t lt_compute(bool) { return CUBLAS_COMPUTE_64F; }
};

/* The 16-bit types: products on tensor cores with FP32 accumulation
 * (CUBLAS_COMPUTE_32F takes 16-bit inputs to tensor cores; only the
 * _PEDANTIC variant would forbid them), every scalar and statistic FP32. */
template <> struct ds_dtype_traits<__half> {
    typedef float math, stats, master, scale;
    static constexpr bool narrow = true;
    static constexpr cudnnDataType_t cudnn = CUDNN_DATA_HALF;
    static constexpr cudnnDataType_t cudnn_compute = CUDNN_DATA_FLOAT;
    static constexpr cudaDataType_t lt_data = CUDA_R_16F, lt_scale = CUDA_R_32F;
    static constexpr const char *name = "float16";
    static cublasComputeType_t lt_compute(bool) { return CUBLAS_COMPUTE_32F; }
};

template <> struct ds_dtype_traits<__nv_bfloat16> {
    typedef float math, stats, master, scale;
    static constexpr bool narrow = true;
    static constexpr cudnnDataType_t cudnn = CUDNN_DATA_BFLOAT16;
    static constexpr cudnnDataType_t cudnn_compute = CUDNN_DATA_FLOAT;
    static constexpr cudaDataType_t lt_data = CUDA_R_16BF, lt_scale = CUDA_R_32F;
    static constexpr const char *name = "bfloat16";
    static cublasComputeType_t lt_compute(bool) { return CUBLAS_COMPUTE_32F; }
};

template <typename T> using ds_math_t = typename ds_dtype_traits<T>::math;
template <typename T> using ds_stats_t = typename ds_dtype_traits<T>::stats;
template <typename T> using ds_master_t = typename ds_dtype_traits<T>::master;
template <typename T> using ds_scale_t = typename ds_dtype_traits<T>::scale;

/* x widened to its math type: exact for every T. */
__host__ __device__ inline float ds_wide(float x) { return x; }
__host__ __device__ inline double ds_wide(double x) { return x; }
__host__ __device__ inline float ds_wide(__half x) { return __half2float(x); }
__host__ __device__ inline float ds_wide(__nv_bfloat16 x) { return __bfloat162float(x); }

/* v (a float, double or integer value) rounded once to T, to nearest even:
 * a double goes straight to the 16-bit types (no detour through float,
 * whose rounding could make a second one). For float and double, the plain
 * conversion (T)v. */
template <typename T, typename V> __host__ __device__ inline T ds_round(V v)
{
    if constexpr (std::is_same_v<T, __half>) {
        if constexpr (std::is_same_v<V, double>)
            return __double2half(v);
        else
            return __float2half_rn((float)v);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        if constexpr (std::is_same_v<V, double>)
            return __double2bfloat16(v);
        else
            return __float2bfloat16_rn((float)v);
    } else {
        return (T)v;
    }
}

#endif
