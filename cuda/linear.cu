/* linear.cu - the fully connected layer through cuBLASLt (twin of
 * cpu/linear.inc).
 *
 * Row-major x [m][k] is column-major k x m with leading dimension k, so every
 * product below is written in cuBLASLt's column-major terms:
 *   forward  y^T (o x m)  = w^T-as-stored (op T of k x o) * x^T (k x m), + b per row
 *   dx       dx^T (k x m) += w (k x o as stored) * dy^T (o x m)
 *   dw       dw^T (k x o) += x^T (k x m) * dy (op T of o x m)
 * The bias of the forward pass rides in the epilogue where cuBLASLt has an
 * algorithm for it; the bias gradient is our kernel, since cuBLASLt's BGRAD
 * epilogues assign the bias gradient and the contract accumulates it.
 *
 * The 16-bit tables: A, B, C and the bias in T, FP32 compute on tensor cores
 * (CUBLAS_COMPUTE_32F), float alpha and beta; cuBLASLt rounds each output
 * element once, after the bias (epilogue) or the accumulation into C (beta
 * 1). Without an epilogue algorithm the bias is added by add_bias_rows to
 * the already rounded product: a second rounding (the float and double
 * tables do the same with their own types). The bias gradient sums in
 * double and rounds once; its rows are split over several blocks
 * (reduce_split.h) when the columns are too few to fill the device. */
#include <cstdint>

#include "ops_cuda.h"
#include "partials.cuh"
#include "reduce_split.h"

namespace {

/* The descriptors of one matmul, destroyed on every path out. */
struct lt_descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    lt_descs() = default;
    lt_descs(const lt_descs &) = delete;
    lt_descs &operator=(const lt_descs &) = delete;
    ~lt_descs()
    {
        if (pref)
            (void)cublasLtMatmulPreferenceDestroy(pref);
        if (c)
            (void)cublasLtMatrixLayoutDestroy(c);
        if (b)
            (void)cublasLtMatrixLayoutDestroy(b);
        if (a)
            (void)cublasLtMatrixLayoutDestroy(a);
        if (op)
            (void)cublasLtMatmulDescDestroy(op);
    }
};

/* The alignment a pointer really has (a power of two, at most the 256 bytes
 * cuBLASLt assumes by default): the heuristic must not pick kernels that
 * need more than the buffers offer. */
uint32_t align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a & (al - 1)))
        al >>= 1;
    return al;
}

/* One product in column-major terms: C (rows x cols, ldc) = op(A) op(B) +
 * beta C, with op(A) rows x inner and op(B) inner x cols, A and B stored as
 * the ops say (A: rows x inner when ta is N, inner x rows when T). bias [rows]
 * or NULL: tried through CUBLASLT_EPILOGUE_BIAS; *bias_done tells whether it
 * was added (false: no algorithm had the epilogue, the caller adds it).
 * Matrices and bias of type T (ds_dtype_traits<T>::lt_data), alpha and beta
 * of its scale type (lt_scale: float for the 16-bit types). */
template <typename T>
ds_status lt_gemm(ds_ctx *ctx, cublasOperation_t ta, cublasOperation_t tb, uint64_t rows,
                  uint64_t cols, uint64_t inner, const T *A, int64_t lda, const T *B,
                  int64_t ldb, ds_scale_t<T> beta, T *C, int64_t ldc, const T *bias,
                  bool *bias_done)
{
    typedef ds_dtype_traits<T> tr;
    const cudaDataType_t dt = tr::lt_data;
    lt_descs d;
    DS_CUBLAS(cublasLtMatmulDescCreate(&d.op, tr::lt_compute(ctx->opts.tf32), tr::lt_scale));
    int32_t opa = ta, opb = tb;
    DS_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    DS_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* stored shapes: the transposed operand is kept the other way round */
    DS_CUBLAS(cublasLtMatrixLayoutCreate(&d.a, dt, ta == CUBLAS_OP_N ? rows : inner,
                                         ta == CUBLAS_OP_N ? inner : rows, lda));
    DS_CUBLAS(cublasLtMatrixLayoutCreate(&d.b, dt, tb == CUBLAS_OP_N ? inner : cols,
                                         tb == CUBLAS_OP_N ? cols : inner, ldb));
    DS_CUBLAS(cublasLtMatrixLayoutCreate(&d.c, dt, rows, cols, ldc));

    DS_CUBLAS(cublasLtMatmulPreferenceCreate(&d.pref));
    uint64_t ws = ctx->lt_work_bytes;
    DS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    const uint32_t al_a = align_of(A), al_b = align_of(B), al_c = align_of(C);
    DS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    DS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    DS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    DS_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));

    cublasLtMatmulHeuristicResult_t res = {};
    int found = 0;
    *bias_done = false;
    if (bias) {
        /* the heuristic reads the bias pointer for its alignment */
        uint32_t epi = CUBLASLT_EPILOGUE_BIAS;   /* bias of D's type: the default */
        DS_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                 sizeof epi));
        DS_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof bias));
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx->lt, d.op, d.a, d.b, d.c, d.c,
                                                           d.pref, 1, &res, &found);
        if (st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
            *bias_done = true;
        } else {
            /* no algorithm with the epilogue (FP64 may have none): plain product */
            found = 0;
            epi = CUBLASLT_EPILOGUE_DEFAULT;
            DS_CUBLAS(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                     sizeof epi));
        }
    }
    if (!*bias_done) {
        DS_CUBLAS(cublasLtMatmulAlgoGetHeuristic(ctx->lt, d.op, d.a, d.b, d.c, d.c, d.pref, 1,
                                                 &res, &found));
        if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS)
            return DS_FAIL(DS_ERR_BACKEND,
                           "cuBLASLt has no algorithm for a %s %llux%llux%llu product "
                           "(op %c%c, ld %lld %lld %lld, alignment %u %u %u)",
                           tr::name, (unsigned long long)rows,
                           (unsigned long long)cols, (unsigned long long)inner,
                           ta == CUBLAS_OP_N ? 'N' : 'T', tb == CUBLAS_OP_N ? 'N' : 'T',
                           (long long)lda, (long long)ldb, (long long)ldc, al_a, al_b, al_c);
    }
    const ds_scale_t<T> one = 1;
    DS_CUBLAS(cublasLtMatmul(ctx->lt, d.op, &one, A, d.a, B, d.b, &beta, C, d.c, C, d.c,
                             &res.algo, ctx->lt_work, ctx->lt_work_bytes, ctx->stream));
    return DS_OK;
}

/* y [m][o]: y[i][j] = (assign ? 0 : y[i][j]) + (b ? b[j] : 0), b [o] or NULL. */
template <typename T>
__global__ void add_bias_rows(size_t m, int o, const T *__restrict__ b, bool assign,
                              T *__restrict__ y)
{
    const size_t total = m * (size_t)o;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        ds_math_t<T> v = assign ? ds_math_t<T>(0) : ds_wide(y[e]);
        if (b)
            v += ds_wide(b[e % (size_t)o]);
        y[e] = ds_round<T>(v);
    }
}

/* Column sums of the bias gradient: a block of DB_COLS columns x DB_LANES row
 * lanes over a slice of the rows; lane r sums the slice's rows r,
 * r+DB_LANES, ... in double, then the lanes are added in a fixed tree, and
 * the slices of a column in a fixed order, so the result does not depend on
 * timing. DB_MIN_ROWS: fewest rows a block is given when the rows are split
 * (4096 elements of a full tile). */
constexpr int DB_COLS = 32, DB_LANES = 16, DB_MIN_ROWS = 4096 / DB_COLS;

/* Pass 1: dy [m][o]; block b = tile * split + s sums columns [tile *
 * DB_COLS, + DB_COLS) over rows [s * per, (s + 1) * per). split 1: db [o]
 * += the sums; else part [o][split] at (col, s) = the sums. */
template <typename T>
__global__ void bias_grad(int m, int o, int split, long per, const T *__restrict__ dy,
                          double *__restrict__ part, T *__restrict__ db)
{
    __shared__ double acc[DB_LANES][DB_COLS + 1];
    const int tile = (int)(blockIdx.x / (unsigned)split), sl = (int)(blockIdx.x % (unsigned)split);
    const int col = tile * DB_COLS + threadIdx.x;
    const long r0 = (long)sl * per, r1 = r0 + per < m ? r0 + per : m;
    double s = 0;
    if (col < o)
        for (long r = r0 + threadIdx.y; r < r1; r += DB_LANES)
            s += (double)ds_wide(dy[(size_t)r * o + col]);
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int half = DB_LANES / 2; half > 0; half /= 2) {
        if ((int)threadIdx.y < half)
            acc[threadIdx.y][threadIdx.x] += acc[threadIdx.y + half][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && col < o) {
        if (split == 1)
            db[col] = ds_round<T>((double)ds_wide(db[col]) + acc[0][threadIdx.x]);
        else
            part[(size_t)col * split + sl] = acc[0][threadIdx.x];
    }
}


}   // namespace

/* x [m][k], w [o][k], b [o] or NULL, y [m][o]: y = x w^T + b (assigns). */
template <typename T>
ds_status cuda_linear_fwd(ds_ctx *ctx, int m, int k, int o, const void *x, const void *w,
                          const void *b, void *y)
{
    if (m < 0 || k < 0 || o < 0)
        return DS_FAIL(DS_ERR_ARG, "linear_fwd: bad shape m=%d k=%d o=%d", m, k, o);
    if (m == 0 || o == 0)
        return DS_OK;
    const T *bias = (const T *)b;
    if (k == 0) {
        /* an empty product: y is the bias (or zero), which cuBLASLt may refuse to compute */
        add_bias_rows<T><<<ds_cuda_grid(ctx, (size_t)m * o), DS_CUDA_BLOCK, 0, ctx->stream>>>(
            (size_t)m, o, bias, true, (T *)y);
        DS_LAUNCHED();
        return DS_OK;
    }
    bool bias_done = false;
    DS_TRY(lt_gemm<T>(ctx, CUBLAS_OP_T, CUBLAS_OP_N, (uint64_t)o, (uint64_t)m, (uint64_t)k,
                      (const T *)w, k, (const T *)x, k, 0, (T *)y, o, bias, &bias_done));
    if (bias && !bias_done) {
        add_bias_rows<T><<<ds_cuda_grid(ctx, (size_t)m * o), DS_CUDA_BLOCK, 0, ctx->stream>>>(
            (size_t)m, o, bias, false, (T *)y);
        DS_LAUNCHED();
    }
    return DS_OK;
}

/* x [m][k], w [o][k], dy [m][o]; dx [m][k] (NULL: not wanted), dw [o][k],
 * db [o] (NULL: no bias) accumulate. */
template <typename T>
ds_status cuda_linear_bwd(ds_ctx *ctx, int m, int k, int o, const void *x, const void *w,
                          const void *dy, void *dx, void *dw, void *db)
{
    if (m < 0 || k < 0 || o < 0)
        return DS_FAIL(DS_ERR_ARG, "linear_bwd: bad shape m=%d k=%d o=%d", m, k, o);
    if (m == 0 || o == 0)
        return DS_OK;
    bool unused;
    if (k > 0) {
        if (dx)
            DS_TRY(lt_gemm<T>(ctx, CUBLAS_OP_N, CUBLAS_OP_N, (uint64_t)k, (uint64_t)m,
                              (uint64_t)o, (const T *)w, k, (const T *)dy, o, 1, (T *)dx, k,
                              nullptr, &unused));
        DS_TRY(lt_gemm<T>(ctx, CUBLAS_OP_N, CUBLAS_OP_T, (uint64_t)k, (uint64_t)o, (uint64_t)m,
                          (const T *)x, k, (const T *)dy, o, 1, (T *)dw, k, nullptr,
                          &unused));
    }
    if (db) {
        /* a block writes a partial per live column: o of them when one tile */
        const long tiles = (o + DB_COLS - 1) / DB_COLS, slots = o < DB_COLS ? o : DB_COLS;
        const ds_reduce_split sp =
            ds_reduce_split_of(tiles, m, ctx->sms, DS_CUDA_PARTIALS, slots, DB_MIN_ROWS);
        bias_grad<T><<<(unsigned)(tiles * sp.split), dim3(DB_COLS, DB_LANES), 0, ctx->stream>>>(
            m, o, (int)sp.split, sp.per, (const T *)dy, ctx->partials, (T *)db);
        DS_LAUNCHED();
        if (sp.split > 1) {
            ds_partials_add<T><<<(unsigned)o, 32, 0, ctx->stream>>>((int)sp.split, ctx->partials,
                                                                  (T *)db);
            DS_LAUNCHED();
        }
    }
    return DS_OK;
}

#define LINEAR_INSTANTIATE(T)                                                                 \
    template ds_status cuda_linear_fwd<T>(ds_ctx *, int, int, int, const void *, const void *, \
                                          const void *, void *);                               \
    template ds_status cuda_linear_bwd<T>(ds_ctx *, int, int, int, const void *, const void *, \
                                          const void *, void *, void *, void *);

LINEAR_INSTANTIATE(float)
LINEAR_INSTANTIATE(double)
LINEAR_INSTANTIATE(__half)
LINEAR_INSTANTIATE(__nv_bfloat16)
