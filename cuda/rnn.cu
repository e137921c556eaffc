/* rnn.cu - one recurrent layer (LSTM, GRU, tanh or ReLU RNN), one or two
 * directions, on cuDNN's RNN API (v8/v9: cudnnRNNForward,
 * cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8). CPU twin:
 * cpu/rnn.inc; contract: ds_rnn_desc / ds_rnn_layout in backend.h.
 *
 * The layer's weight span IS cuDNN's weight space: rnn_plan reads where
 * cuDNN keeps each gate's matrix and bias (cudnnGetRNNWeightParams), checks
 * that the G gates of each PyTorch tensor (w_ih, w_hh, b_ih, b_hh) lie back
 * to back as PyTorch stacks them, and reports the first gate's offset.
 *
 * cuDNN concatenates the two directions ([t][n][dirs*hidden], "cat" below);
 * the model wants them summed, and rnn_bwd is not given y, so the
 * concatenated output lives in the reserve after cuDNN's own part:
 *   reserve: [cuDNN reserve, 256-byte units][y_cat  max_t*max_n*dirs*hidden]
 *   work:    [cuDNN work,    256-byte units][dy_cat max_t*max_n*dirs*hidden,
 *             256-byte units][lengths int32 [max_n]: cuDNN's copy when some
 *             lengths had to be clamped]
 *
 * Lengths: cuDNN has documented sequences of length 0 (and past maxSeqLength)
 * as bad parameters, so a length outside [1, t] reaches cuDNN clamped into
 * it; our kernels mask with the true lengths, and since dy_cat is zero past
 * the true length, an utterance of length 0 run as length 1 adds nothing to
 * dw, and its dx is zeroed as padding.
 *
 * The 16-bit tables: x, y, w, the weight gradient and dx in FP16 or BF16,
 * mathPrec FP32, tensor-op math. cuDNN may keep each step's hidden state
 * (and the gates in the reserve) in the data type: that rounding happens
 * inside its calls, once per step, and is cuDNN's. Of our kernels, the sum
 * of the directions widens, adds in float and rounds once; the others copy
 * or zero.
 * BF16 recurrent layers need cuDNN 9.13 or later (earlier releases take no
 * BF16 RNN data) on compute capability 8.0 or later: rnn_plan refuses them
 * otherwise, saying so. */
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "ops_cuda.h"

/* Bytes rounded up to whole 256-byte units. */
static size_t rnn_round(size_t bytes)
{
    return (bytes + DS_ALIGN_BYTES - 1) / DS_ALIGN_BYTES * DS_ALIGN_BYTES;
}

/* One layer's cuDNN set-up for the run's limits. The same type serves both
 * dtype tables; a plan never crosses from one to the other. */
struct ds_rnn_plan {
    ds_rnn_desc d;
    int gates;                           /* G: LSTM 4, GRU 3, plain RNN 1 */
    cudnnRNNDescriptor_t rnn;
    cudnnDropoutDescriptor_t drop;       /* dropout 0, no state: a single layer has none */
    cudnnRNNDataDescriptor_t xd, yd;     /* reset per call for t, n and the lengths */
    cudnnTensorDescriptor_t hd, cd;      /* [dirs][n][hidden] */
    size_t weight_bytes;                 /* cuDNN's weight space = the span */
    size_t work_bytes, reserve_bytes;    /* cuDNN's own parts, for max_t x max_n */
    size_t work_cat, reserve_cat;        /* elements of T: where dy_cat / y_cat start */
    size_t work_len;                     /* elements of T: where the int32 lengths start */
    int *lens;                           /* host [max_n]: lengths as cuDNN gets them */
    double zero;                         /* paddingFill of the data descriptors: all bytes
                                          * 0, which is 0 read as any of the four types */
};

/* The host zero that pads cuDNN's outputs (paddingFill, read as the data
 * type of the descriptor). */
static void *rnn_fill(ds_rnn_plan *p) { return &p->zero; }

/* ---- kernels (grid-stride over the elements of a [t][n][width] tensor) ---- */

/* y[s][i][:] = sum over directions of y_cat[s][i][d*h : (d+1)*h] for s <
 * len[i], 0 past it. y [t][n][h], y_cat [t][n][dirs*h], len [n]. */
template <typename T>
__global__ void rnn_sum_dirs(size_t total, int n, int h, int dirs, const int *len,
                             const T *ycat, T *y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t row = e / h;                 /* s*n + i */
        const size_t j = e - row * h;
        const int s = (int)(row / n), i = (int)(row % n);
        ds_math_t<T> v = 0;
        if (s < len[i]) {
            const T *src = ycat + row * dirs * h + j;
            v = ds_wide(src[0]);
            if (dirs == 2)
                v += ds_wide(src[h]);   /* forward + reverse, the CPU's order */
        }
        y[e] = ds_round<T>(v);
    }
}

/* dy_cat[s][i][d*h + j] = dy[s][i][j] for every direction d, 0 past len[i]
 * (the contract ignores dy there). dy [t][n][h], dy_cat [t][n][dirs*h]. */
template <typename T>
__global__ void rnn_split_dy(size_t total, int n, int h, int dirs, const int *len, const T *dy,
                             T *dycat)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t row = e / h;
        const size_t j = e - row * h;
        const int s = (int)(row / n), i = (int)(row % n);
        const T v = s < len[i] ? dy[e] : ds_round<T>(0);
        T *dst = dycat + row * dirs * h + j;
        dst[0] = v;
        if (dirs == 2)
            dst[h] = v;
    }
}

/* dx[s][i][:] = 0 for s >= len[i]; real frames untouched. dx [t][n][w]. */
template <typename T>
__global__ void rnn_zero_padding(size_t total, int n, int w, const int *len, T *dx)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t row = e / w;
        const int s = (int)(row / n), i = (int)(row % n);
        if (s >= len[i])
            dx[e] = ds_round<T>(0);
    }
}

/* out[i] = len[i] clamped to [1, t]: what cuDNN accepts. len, out [n]. */
static __global__ void rnn_clamp_lengths(int n, int t, const int *len, int *out)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int l = len[i];
        out[i] = l < 1 ? 1 : l > t ? t : l;
    }
}

/* ---- plan ---- */

static const char *rnn_cell_name(ds_cell c)
{
    switch (c) {
    case DS_CELL_LSTM: return "LSTM";
    case DS_CELL_GRU: return "GRU";
    case DS_CELL_RNN_TANH: return "tanh RNN";
    default: return "ReLU RNN";
    }
}

static ds_status rnn_check_desc(const ds_rnn_desc *d)
{
    if (d->cell != DS_CELL_LSTM && d->cell != DS_CELL_GRU && d->cell != DS_CELL_RNN_TANH &&
        d->cell != DS_CELL_RNN_RELU)
        return DS_FAIL(DS_ERR_ARG, "rnn: unknown cell %d", (int)d->cell);
    if (d->dirs < 1 || d->dirs > 2 || d->in < 1 || d->hidden < 1 || d->max_t < 1 ||
        d->max_n < 1)
        return DS_FAIL(DS_ERR_ARG, "rnn: %d directions, in=%d hidden=%d, limits t=%d n=%d",
                       d->dirs, d->in, d->hidden, d->max_t, d->max_n);
    return DS_OK;
}

static cudnnRNNMode_t rnn_mode(ds_cell c)
{
    switch (c) {
    case DS_CELL_LSTM: return CUDNN_LSTM;
    case DS_CELL_GRU: return CUDNN_GRU;
    case DS_CELL_RNN_TANH: return CUDNN_RNN_TANH;
    default: return CUDNN_RNN_RELU;
    }
}

/* Create every descriptor the plan keeps and set the RNN descriptor. */
template <typename T> static ds_status rnn_describe(ds_ctx *c, ds_rnn_plan *p)
{
    const ds_rnn_desc *d = &p->d;
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    DS_CUDNN(cudnnCreateRNNDescriptor(&p->rnn));
    DS_CUDNN(cudnnCreateDropoutDescriptor(&p->drop));
    DS_CUDNN(cudnnCreateRNNDataDescriptor(&p->xd));
    DS_CUDNN(cudnnCreateRNNDataDescriptor(&p->yd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&p->hd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&p->cd));
    /* With dropout 0 no random state is drawn or read: no state buffer
     * (as PyTorch's set_no_dropout does). */
    DS_CUDNN(cudnnSetDropoutDescriptor(p->drop, c->dnn, 0.0f, nullptr, 0, 0));
    DS_CUDNN(cudnnSetRNNDescriptor_v8(
        p->rnn, CUDNN_RNN_ALGO_STANDARD, rnn_mode(d->cell), CUDNN_RNN_DOUBLE_BIAS,
        d->dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, dt,
        ds_dtype_traits<T>::cudnn_compute,
        ds_cudnn_math<T>(c), d->in, d->hidden, d->hidden /* no projection */, 1, p->drop,
        CUDNN_RNN_PADDED_IO_ENABLED));
    return DS_OK;
}

/* *ok: whether tensor descriptor m holds a row-major [rows][cols] matrix of
 * dt (a bias: cols 1), however many unit dimensions cuDNN wraps it in. */
static ds_status rnn_shape_is(cudnnTensorDescriptor_t m, cudnnDataType_t dt, int rows, int cols,
                              bool *ok)
{
    int nb = 0, dim[CUDNN_DIM_MAX], str[CUDNN_DIM_MAX];
    cudnnDataType_t got;
    DS_CUDNN(cudnnGetTensorNdDescriptor(m, CUDNN_DIM_MAX, &got, &nb, dim, str));
    *ok = false;
    if (got != dt || nb < 1 || nb > CUDNN_DIM_MAX)
        return DS_OK;
    /* match the dimensions of extent > 1, outermost first, and their strides */
    const int want_dim[2] = {rows, cols}, want_str[2] = {cols, 1};
    int w = 0;
    for (int k = 0; k < nb; k++) {
        if (dim[k] == 1)
            continue;
        while (w < 2 && want_dim[w] == 1)
            w++;
        if (w == 2 || dim[k] != want_dim[w] || str[k] != want_str[w])
            return DS_OK;
        w++;
    }
    while (w < 2 && want_dim[w] == 1)
        w++;
    *ok = w == 2;
    return DS_OK;
}

/* Elements from ws to a, or SIZE_MAX when a is not a whole element inside it. */
template <typename T> static size_t rnn_elem_at(const char *ws, size_t bytes, const void *a)
{
    const char *q = (const char *)a;
    if (!q || q < ws || q >= ws + bytes || (size_t)(q - ws) % sizeof(T))
        return SIZE_MAX;
    return (size_t)(q - ws) / sizeof(T);
}

/* Where one gate's matrix and bias sit (elements from the weight space's
 * start), their shapes checked. id: cuDNN's linLayerID (0..G-1 input side,
 * G..2G-1 recurrent side). */
template <typename T>
static ds_status rnn_gate(ds_ctx *c, const ds_rnn_plan *p, const char *ws, int dir, int id,
                          cudnnTensorDescriptor_t md, cudnnTensorDescriptor_t bd, size_t *m_at,
                          size_t *b_at)
{
    const ds_rnn_desc *d = &p->d;
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    const int cols = id < p->gates ? d->in : d->hidden;
    void *ma = nullptr, *ba = nullptr;
    DS_CUDNN(cudnnGetRNNWeightParams(c->dnn, p->rnn, dir, p->weight_bytes, ws, id, md, &ma, bd,
                                     &ba));
    *m_at = rnn_elem_at<T>(ws, p->weight_bytes, ma);
    *b_at = rnn_elem_at<T>(ws, p->weight_bytes, ba);
    bool m_ok = false, b_ok = false;
    if (*m_at != SIZE_MAX && *b_at != SIZE_MAX) {   /* a missing tensor has no shape to read */
        DS_TRY(rnn_shape_is(md, dt, d->hidden, cols, &m_ok));
        DS_TRY(rnn_shape_is(bd, dt, d->hidden, 1, &b_ok));
    }
    if (!m_ok || !b_ok)
        return DS_FAIL(DS_ERR_BACKEND,
                       "cuDNN's weight layout for %s (in %d, hidden %d) is not PyTorch's: "
                       "direction %d linLayerID %d is not a [%d][%d] matrix and a [%d] bias "
                       "inside the weight space",
                       rnn_cell_name(d->cell), d->in, d->hidden, dir, id, d->hidden, cols,
                       d->hidden);
    return DS_OK;
}

/* Fails unless gate k of a stacked tensor starts at first + k*stride. */
static ds_status rnn_stacked(const ds_rnn_plan *p, const char *what, int dir, int k,
                             size_t at, size_t first, size_t stride)
{
    if (at == first + (size_t)k * stride)
        return DS_OK;
    return DS_FAIL(DS_ERR_BACKEND,
                   "cuDNN's weight layout for %s (in %d, hidden %d) is not PyTorch's: "
                   "direction %d gate %d of %s at element %zu, expected %zu (gates back to back)",
                   rnn_cell_name(p->d.cell), p->d.in, p->d.hidden, dir, k, what, at,
                   first + (size_t)k * stride);
}

/* offset[dir][*] of one direction, every gate checked against PyTorch's
 * stacking. ws: a weight space of weight_bytes (only its addresses are used). */
template <typename T>
static ds_status rnn_direction(ds_ctx *c, const ds_rnn_plan *p, const char *ws, int dir,
                               cudnnTensorDescriptor_t md, cudnnTensorDescriptor_t bd,
                               size_t off[DS_RNN_TENSORS])
{
    const int G = p->gates;
    const size_t H = (size_t)p->d.hidden, in = (size_t)p->d.in;
    const size_t span = p->weight_bytes / sizeof(T);
    for (int side = 0; side < 2; side++) {   /* 0: input (w_ih, b_ih), 1: recurrent */
        const int wk = side ? DS_RNN_W_HH : DS_RNN_W_IH, bk = side ? DS_RNN_B_HH : DS_RNN_B_IH;
        const size_t cols = side ? H : in;
        for (int k = 0; k < G; k++) {
            size_t m_at = SIZE_MAX, b_at = SIZE_MAX;
            DS_TRY(rnn_gate<T>(c, p, ws, dir, side * G + k, md, bd, &m_at, &b_at));
            if (k == 0)
                off[wk] = m_at, off[bk] = b_at;
            DS_TRY(rnn_stacked(p, side ? "w_hh" : "w_ih", dir, k, m_at, off[wk], H * cols));
            DS_TRY(rnn_stacked(p, side ? "b_hh" : "b_ih", dir, k, b_at, off[bk], H));
        }
        if (off[wk] + G * H * cols > span || off[bk] + G * H > span)
            return DS_FAIL(DS_ERR_BACKEND,
                           "cuDNN's weight layout for %s is not PyTorch's: direction %d's "
                           "tensors run past the weight space of %zu elements",
                           rnn_cell_name(p->d.cell), dir, span);
    }
    return DS_OK;
}

static ds_status rnn_scratch(size_t bytes, void **ws, cudnnTensorDescriptor_t *md,
                             cudnnTensorDescriptor_t *bd)
{
    const cudaError_t e = cudaMalloc(ws, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();   /* not left behind for a later op's launch check */
        *ws = nullptr;
        return DS_FAIL(e == cudaErrorMemoryAllocation ? DS_ERR_MEM : DS_ERR_BACKEND,
                       "rnn plan: cudaMalloc of a %zu-byte temporary weight space: %s", bytes,
                       cudaGetErrorString(e));
    }
    DS_CUDNN(cudnnCreateTensorDescriptor(md));
    DS_CUDNN(cudnnCreateTensorDescriptor(bd));
    return DS_OK;
}

/* The span's offsets: cuDNN reports addresses inside a weight space, so a
 * temporary one is allocated here (start-up only) and freed before returning. */
template <typename T> static ds_status rnn_offsets(ds_ctx *c, const ds_rnn_plan *p,
                                                   ds_rnn_layout *lay)
{
    void *ws = nullptr;
    cudnnTensorDescriptor_t md = nullptr, bd = nullptr;
    ds_status st = rnn_scratch(p->weight_bytes, &ws, &md, &bd);
    for (int dir = 0; st == DS_OK && dir < p->d.dirs; dir++)
        st = rnn_direction<T>(c, p, (const char *)ws, dir, md, bd, lay->offset[dir]);
    if (bd)
        (void)cudnnDestroyTensorDescriptor(bd);
    if (md)
        (void)cudnnDestroyTensorDescriptor(md);
    if (ws && cudaFree(ws) != cudaSuccess && st == DS_OK)
        st = DS_FAIL(DS_ERR_BACKEND, "rnn plan: cudaFree of the temporary weight space");
    return st;
}

/* Weight space, and work and reserve for max_t x max_n (every length max_t). */
template <typename T> static ds_status rnn_sizes(ds_ctx *c, ds_rnn_plan *p, ds_rnn_layout *lay)
{
    const ds_rnn_desc *d = &p->d;
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    DS_CUDNN(cudnnGetRNNWeightSpaceSize(c->dnn, p->rnn, &p->weight_bytes));
    if (p->weight_bytes == 0 || p->weight_bytes % sizeof(T))
        return DS_FAIL(DS_ERR_BACKEND, "rnn plan: cuDNN's weight space of %zu bytes is not a "
                       "whole number of %zu-byte elements", p->weight_bytes, sizeof(T));
    for (int i = 0; i < d->max_n; i++)
        p->lens[i] = d->max_t;
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                       d->max_t, d->max_n, d->in, p->lens, rnn_fill(p)));
    DS_CUDNN(cudnnGetRNNTempSpaceSizes(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd,
                                       &p->work_bytes, &p->reserve_bytes));
    const size_t cat = (size_t)d->max_t * d->max_n * d->dirs * d->hidden;
    p->reserve_cat = rnn_round(p->reserve_bytes) / sizeof(T);
    p->work_cat = rnn_round(p->work_bytes) / sizeof(T);
    p->work_len = p->work_cat + rnn_round(cat * sizeof(T)) / sizeof(T);
    lay->span = p->weight_bytes / sizeof(T);
    lay->reserve = p->reserve_cat + cat;
    lay->work = p->work_len + rnn_round((size_t)d->max_n * sizeof(int)) / sizeof(T);
    return DS_OK;
}

template <typename T> void cuda_rnn_plan_destroy(ds_ctx *, ds_rnn_plan *p)
{
    if (!p)
        return;
    if (p->cd)
        (void)cudnnDestroyTensorDescriptor(p->cd);
    if (p->hd)
        (void)cudnnDestroyTensorDescriptor(p->hd);
    if (p->yd)
        (void)cudnnDestroyRNNDataDescriptor(p->yd);
    if (p->xd)
        (void)cudnnDestroyRNNDataDescriptor(p->xd);
    if (p->rnn)
        (void)cudnnDestroyRNNDescriptor(p->rnn);
    if (p->drop)
        (void)cudnnDestroyDropoutDescriptor(p->drop);
    free(p->lens);
    free(p);
}

/* BF16 recurrent layers: cuDNN took BF16 RNN data first in 9.13, and only
 * on compute capability 8.0 and later; refused with a message otherwise
 * (compiled against, and found at run time). Other types: nothing to check. */
template <typename T> static ds_status rnn_check_dtype(ds_ctx *c, const ds_rnn_desc *d)
{
    if (!std::is_same_v<T, __nv_bfloat16>)
        return DS_OK;
    const size_t need = 91300, have = cudnnGetVersion();
    int major = 0;
    DS_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device));
    if (CUDNN_VERSION < need || have < need || major < 8)
        return DS_FAIL(DS_ERR_UNSUPPORTED,
                       "bfloat16 %s layers need cuDNN 9.13 or later on a GPU of compute "
                       "capability 8.0 or later; this is cuDNN %zu.%zu.%zu (built against "
                       "%d.%d.%d) on compute capability %d.x: use --precision fp16 or fp32",
                       rnn_cell_name(d->cell), have / 10000, have % 10000 / 100, have % 100,
                       CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, major);
    return DS_OK;
}

template <typename T>
ds_status cuda_rnn_plan(ds_ctx *c, const ds_rnn_desc *d, ds_rnn_plan **plan,
                        ds_rnn_layout *layout)
{
    *plan = nullptr;
    DS_TRY(rnn_check_desc(d));
    DS_CUDA(cudaSetDevice(c->device));   /* the temporary weight space goes there */
    DS_TRY(rnn_check_dtype<T>(c, d));
    ds_rnn_plan *p = (ds_rnn_plan *)calloc(1, sizeof *p);
    if (!p)
        return DS_FAIL(DS_ERR_MEM, "rnn plan");
    p->d = *d;
    p->gates = ds_backend_cell_gates(d->cell);
    p->lens = (int *)calloc((size_t)d->max_n, sizeof(int));
    ds_rnn_layout lay = {};   /* offset[1][*] stays 0 for one direction */
    ds_status st = p->lens ? DS_OK : DS_FAIL(DS_ERR_MEM, "rnn plan: %d lengths", d->max_n);
    if (st == DS_OK)
        st = rnn_describe<T>(c, p);
    if (st == DS_OK)
        st = rnn_sizes<T>(c, p, &lay);
    if (st == DS_OK)
        st = rnn_offsets<T>(c, p, &lay);
    if (st != DS_OK) {
        cuda_rnn_plan_destroy<T>(c, p);
        return st;
    }
    *plan = p;
    *layout = lay;
    return DS_OK;
}

/* ---- forward and backward ---- */

static ds_status rnn_fits(const ds_rnn_plan *p, int t, int n)
{
    if (t < 0 || n < 0 || t > p->d.max_t || n > p->d.max_n)
        return DS_FAIL(DS_ERR_ARG, "rnn: %d frames x %d utterances outside the plan's %d x %d",
                       t, n, p->d.max_t, p->d.max_n);
    return DS_OK;
}

/* One call's view of the buffers and cuDNN's sizes for it. */
struct rnn_call {
    const int *dev_len;                  /* [n] lengths in device memory as cuDNN gets them */
    size_t work_bytes, reserve_bytes;    /* what cuDNN asks for this t, n */
};

/* Set the data and state descriptors for t x n and len_host, check that
 * cuDNN's spaces fit the planned ones, and give cuDNN device lengths that
 * agree with the host ones (clamped into work when some needed it).
 * len [n] device, len_host [n] host, work [layout.work]. */
template <typename T>
static ds_status rnn_setup(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len_host,
                           const int *len, void *work, rnn_call *call)
{
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    const ds_rnn_desc *d = &p->d;
    bool clamped = false;
    for (int i = 0; i < n; i++) {
        const int l = len_host[i], k = l < 1 ? 1 : l > t ? t : l;
        clamped |= k != l;
        p->lens[i] = k;
    }
    void *fill = rnn_fill(p);
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, t, n,
                                       d->in, p->lens, fill));
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->yd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, t, n,
                                       d->dirs * d->hidden, p->lens, fill));
    const int dim[3] = {d->dirs, n, d->hidden}, str[3] = {n * d->hidden, d->hidden, 1};
    DS_CUDNN(cudnnSetTensorNdDescriptor(p->hd, dt, 3, dim, str));
    DS_CUDNN(cudnnSetTensorNdDescriptor(p->cd, dt, 3, dim, str));
    DS_CUDNN(cudnnGetRNNTempSpaceSizes(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd,
                                       &call->work_bytes, &call->reserve_bytes));
    if (call->work_bytes > p->work_bytes || call->reserve_bytes > p->reserve_bytes)
        return DS_FAIL(DS_ERR_BACKEND,
                       "rnn: cuDNN wants %zu work and %zu reserve bytes for %d x %d, more than "
                       "the %zu and %zu planned for %d x %d",
                       call->work_bytes, call->reserve_bytes, t, n, p->work_bytes,
                       p->reserve_bytes, d->max_t, d->max_n);
    call->dev_len = len;
    if (clamped) {
        int *out = (int *)((T *)work + p->work_len);
        rnn_clamp_lengths<<<ds_cuda_grid(c, (size_t)n), DS_CUDA_BLOCK, 0, c->stream>>>(n, t, len,
                                                                                      out);
        DS_LAUNCHED();
        call->dev_len = out;
    }
    return DS_OK;
}

/* x [t][n][in], w [span], y [t][n][hidden] (assigned), reserve [layout.reserve],
 * work [layout.work]; len_host [n] host, len [n] device. */
template <typename T>
ds_status cuda_rnn_fwd(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len_host,
                       const int *len, const void *x, const void *w, void *y, void *reserve,
                       void *work)
{
    DS_TRY(rnn_fits(p, t, n));
    if (t == 0 || n == 0)
        return DS_OK;
    rnn_call call;
    DS_TRY(rnn_setup<T>(c, p, t, n, len_host, len, work, &call));
    T *ycat = (T *)reserve + p->reserve_cat;   /* [t][n][dirs*hidden] */
    DS_CUDNN(cudnnRNNForward(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, call.dev_len, p->xd, x,
                             p->yd, ycat, p->hd, nullptr, nullptr, p->cd, nullptr, nullptr,
                             p->weight_bytes, w, call.work_bytes, work, call.reserve_bytes,
                             reserve));
    const size_t total = (size_t)t * n * p->d.hidden;
    rnn_sum_dirs<T><<<ds_cuda_grid(c, total), DS_CUDA_BLOCK, 0, c->stream>>>(
        total, n, p->d.hidden, p->d.dirs, len, ycat, (T *)y);
    DS_LAUNCHED();
    return DS_OK;
}

/* After cuda_rnn_fwd on the same x, w, reserve and lengths. dy [t][n][hidden]
 * (padding ignored), dx [t][n][in] assigned, dw [span] accumulates. */
template <typename T>
ds_status cuda_rnn_bwd(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len_host,
                       const int *len, const void *x, const void *w, const void *dy, void *dx,
                       void *dw, void *reserve, void *work)
{
    DS_TRY(rnn_fits(p, t, n));
    if (t == 0 || n == 0)
        return DS_OK;
    rnn_call call;
    DS_TRY(rnn_setup<T>(c, p, t, n, len_host, len, work, &call));
    const int H = p->d.hidden, D = p->d.dirs;
    T *ycat = (T *)reserve + p->reserve_cat;   /* [t][n][dirs*hidden], from forward */
    T *dycat = (T *)work + p->work_cat;        /* [t][n][dirs*hidden] */
    const size_t ny = (size_t)t * n * H, nx = (size_t)t * n * p->d.in;
    rnn_split_dy<T><<<ds_cuda_grid(c, ny), DS_CUDA_BLOCK, 0, c->stream>>>(ny, n, H, D, len,
                                                                          (const T *)dy, dycat);
    DS_LAUNCHED();
    /* data first: it leaves in the reserve what the weight gradient reads */
    DS_CUDNN(cudnnRNNBackwardData_v8(c->dnn, p->rnn, call.dev_len, p->yd, ycat, dycat, p->xd, dx,
                                     p->hd, nullptr, nullptr, nullptr, p->cd, nullptr, nullptr,
                                     nullptr, p->weight_bytes, w, call.work_bytes, work,
                                     call.reserve_bytes, reserve));
    DS_CUDNN(cudnnRNNBackwardWeights_v8(c->dnn, p->rnn, CUDNN_WGRAD_MODE_ADD, call.dev_len, p->xd,
                                        x, p->hd, nullptr, p->yd, ycat, p->weight_bytes, dw,
                                        call.work_bytes, work, call.reserve_bytes, reserve));
    /* cuDNN need not write dx at padding: the contract wants zeros there */
    rnn_zero_padding<T><<<ds_cuda_grid(c, nx), DS_CUDA_BLOCK, 0, c->stream>>>(
        nx, n, p->d.in, len, (T *)dx);
    DS_LAUNCHED();
    return DS_OK;
}

#define RNN_INSTANTIATE(T)                                                                     \
    template ds_status cuda_rnn_plan<T>(ds_ctx *, const ds_rnn_desc *, ds_rnn_plan **,         \
                                        ds_rnn_layout *);                                      \
    template void cuda_rnn_plan_destroy<T>(ds_ctx *, ds_rnn_plan *);                           \
    template ds_status cuda_rnn_fwd<T>(ds_ctx *, ds_rnn_plan *, int, int, const int *,         \
                                       const int *, const void *, const void *, void *, void *, \
                                       void *);                                                \
    template ds_status cuda_rnn_bwd<T>(ds_ctx *, ds_rnn_plan *, int, int, const int *,         \
                                       const int *, const void *, const void *, const void *,   \
                                       void *, void *, void *, void *);

RNN_INSTANTIATE(float)
RNN_INSTANTIATE(double)
RNN_INSTANTIATE(__half)
RNN_INSTANTIATE(__nv_bfloat16)
