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
 * otherwise, saying so.
 *
 * The capturable path (ds_ctx_opts.capturable, --cuda-graphs; "uniform" in
 * the code). A step is captured as a CUDA Graph once per batch shape (n
 * utterances x t padded frames) and replayed for later batches of that
 * shape with other lengths; cuDNN takes the lengths from the host when the
 * data descriptor is set (cudnnSetRNNDataDescriptor), so a captured call of
 * the path above would replay the captured batch's lengths. Instead every
 * utterance runs all t frames, the lengths cuDNN gets (host, and device in
 * work) are t for all, and the real lengths are read only by our kernels,
 * from the device array len; the host lengths are not read at all. Each
 * direction is its own call on one UNIDIRECTIONAL descriptor (both
 * directions have the same shapes: one descriptor, one algorithm choice,
 * two weight spaces):
 *  - forward direction: x as given; the frames past an utterance's end come
 *    after its real ones, so they reach no real output;
 *  - reverse direction: the forward recurrence over xr, the x of each
 *    utterance reversed within its real frames (xr[s][i] = x[L-1-s][i] for
 *    s < L, 0 past it; L = len[i] clamped to [0, t]), its output reversed
 *    back the same way: y[s][i] = y_f[s][i] + y_r[L-1-s][i] (widened, added
 *    in that order, rounded once), 0 at s >= L;
 *  - backward: dy masked to 0 at s >= L (cuDNN's backward would otherwise
 *    carry it back into real frames through the recurrence) and reversed
 *    for the reverse direction; dx = dx_f + dx_r reversed back, 0 at
 *    padding; both directions' weight gradients added (WGRAD_MODE_ADD).
 *    An utterance of length 0 has every dy 0, so it adds exactly 0 to dw.
 * Layout (rnn_uni_sizes): the span is direction 0's unidirectional weight
 * space, then direction 1's from the next 256-byte boundary (offsets read
 * once from the unidirectional descriptor, checked against PyTorch's gate
 * stacking as above); the reserve holds each direction's cuDNN reserve, y_f,
 * y_r and xr (backward needs them); the work holds cuDNN's work (the calls
 * run one after another and share it), the lengths, dy_f, dy_r and dx_r.
 * Launches per call: forward 2 kernels + 1 cuDNN call per direction,
 * backward 2 kernels + 2 per direction. Padding frames are computed (from
 * whatever x holds there in the forward direction, from zeros in the
 * reverse one) and then discarded; in backward their gradients are exactly
 * 0 while every value there stays finite.
 *
 * Algorithm (--rnn-algo, ds_ctx_opts.rnn_algo): standard runs
 * CUDNN_RNN_ALGO_STANDARD, a few kernels per time step and direction, each
 * queued by the host; persist runs CUDNN_RNN_ALGO_PERSIST_STATIC, whose
 * kernel keeps the recurrent weights on chip and walks the time steps in
 * one launch; auto times both at the plan's largest shape and keeps the
 * faster (ties: standard). A candidate is tried first on lengths that
 * differ (as a batch's do; uniform: all max_t, as its calls run, on one
 * direction): one cuDNN refuses for this cell, size, type or
 * GPU is dropped, saying why (persist then runs standard: FP64 has no
 * persistent kernel, and a verification run must still run). The
 * work and reserve cover every candidate that ran, so that the choice of
 * another rank (rank 0's, choices_set) fits the buffers planned here; the
 * weight layout must be the same under each (it is checked). */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
    cudnnRNNAlgo_t algo;                 /* the one the descriptor runs */
    int n_ran;                           /* candidates that ran here, and their times */
    cudnnRNNAlgo_t ran[2];
    float ran_ms[2];                     /* forward + backward at the largest shape; < 0 untimed */
    ds_rnn_layout layout;                /* as planned: a later choice must keep its offsets */
    char note[160];                      /* candidates cuDNN refused here, and why */
    cudnnDataType_t dt;                  /* the table's data type: which T the plan was made for */
    double zero;                         /* paddingFill of the data descriptors: all bytes
                                          * 0, which is 0 read as any of the four types */
    /* The capturable path (ds_ctx_opts.capturable; "uniform" below): one
     * unidirectional cuDNN call per direction over the padded length. */
    int uniform;
    int cdirs;                           /* directions of the cuDNN descriptor: dirs, or 1
                                          * when uniform */
    size_t dir_at;                       /* uniform: elements of the span before direction
                                          * 1's weight space (256-byte units) */
    size_t res_at[2], y_at[2], xr_at;    /* uniform, elements of T into the reserve: each
                                          * direction's cuDNN reserve and its output
                                          * [t][n][hidden], the reversed x [t][n][in] */
    size_t dy_at[2], dxr_at;             /* uniform, elements of T into the work: the masked
                                          * and the reversed dy [t][n][hidden], the reverse
                                          * direction's dx [t][n][in] */
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

/* ---- the capturable path's kernels: every utterance runs the padded t
 * frames; len [n] (device) says which are real. L = len[i] clamped to
 * [0, t]: the real frames of utterance i (a length past t has all t real,
 * one of 0 or less none, as the mask of the other path reads them). ---- */

static __device__ __forceinline__ int rnn_real(const int *len, int i, int t)
{
    const int l = len[i];
    return l < 0 ? 0 : l > t ? t : l;
}

/* One pass over src [t][n][w] for the cuDNN calls that follow it:
 * fwd [t][n][w] (NULL: not written) = src, 0 at s >= L; rev [t][n][w]
 * (NULL: not written) = src reversed within each utterance, rev[s][i][:] =
 * src[L-1-s][i][:] for s < L and 0 past it (the reverse direction's real
 * frames first, so its padding comes after them and reaches no real
 * output); lens [n] = t, the uniform lengths cuDNN reads on the device.
 * total = t*n*w >= n elements (w = 1, src NULL: only the lengths). */
template <typename T>
__global__ void rnn_uni_split(size_t total, int t, int n, int w, const int *len, const T *src,
                              T *fwd, T *rev, int *lens)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        if (e < (size_t)n)
            lens[e] = t;
        if (!src)
            continue;
        const size_t row = e / w;                 /* s*n + i */
        const size_t j = e - row * w;
        const int s = (int)(row / n), i = (int)(row % n), L = rnn_real(len, i, t);
        if (fwd)
            fwd[e] = s < L ? src[e] : ds_round<T>(0);
        if (rev)
            rev[e] = s < L ? src[((size_t)(L - 1 - s) * n + i) * w + j] : ds_round<T>(0);
    }
}

/* out[s][i][:] = a[s][i][:] + b[L-1-s][i][:] for s < L (dirs 2: widened,
 * forward + reverse in that order, rounded once; one direction: a), 0 past
 * L. a, out [t][n][w] (the same tensor for dx, read and written in place
 * per element), b [t][n][w] (the reverse direction's output, unread for one
 * direction). Forward: y from both directions' outputs; backward: dx. */
template <typename T>
__global__ void rnn_uni_merge(size_t total, int t, int n, int w, int dirs, const int *len,
                              const T *a, const T *b, T *out)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t row = e / w;
        const size_t j = e - row * w;
        const int s = (int)(row / n), i = (int)(row % n), L = rnn_real(len, i, t);
        ds_math_t<T> v = 0;
        if (s < L) {
            v = ds_wide(a[e]);
            if (dirs == 2)
                v += ds_wide(b[((size_t)(L - 1 - s) * n + i) * w + j]);
        }
        out[e] = ds_round<T>(v);
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

/* The RNN descriptor set for algorithm a (again, when it exists). */
template <typename T> static ds_status rnn_set_algo(ds_ctx *c, ds_rnn_plan *p, cudnnRNNAlgo_t a)
{
    const ds_rnn_desc *d = &p->d;
    DS_CUDNN(cudnnSetRNNDescriptor_v8(
        p->rnn, a, rnn_mode(d->cell), CUDNN_RNN_DOUBLE_BIAS,
        p->cdirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
        ds_dtype_traits<T>::cudnn, ds_dtype_traits<T>::cudnn_compute, ds_cudnn_math<T>(c), d->in,
        d->hidden, d->hidden /* no projection */, 1, p->drop, CUDNN_RNN_PADDED_IO_ENABLED));
    p->algo = a;
    return DS_OK;
}

/* Create every descriptor the plan keeps and set the RNN descriptor. */
template <typename T> static ds_status rnn_describe(ds_ctx *c, ds_rnn_plan *p)
{
    DS_CUDNN(cudnnCreateRNNDescriptor(&p->rnn));
    DS_CUDNN(cudnnCreateDropoutDescriptor(&p->drop));
    DS_CUDNN(cudnnCreateRNNDataDescriptor(&p->xd));
    DS_CUDNN(cudnnCreateRNNDataDescriptor(&p->yd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&p->hd));
    DS_CUDNN(cudnnCreateTensorDescriptor(&p->cd));
    /* With dropout 0 no random state is drawn or read: no state buffer
     * (as PyTorch's set_no_dropout does). */
    DS_CUDNN(cudnnSetDropoutDescriptor(p->drop, c->dnn, 0.0f, nullptr, 0, 0));
    return rnn_set_algo<T>(c, p, CUDNN_RNN_ALGO_STANDARD);
}

/* The data descriptors for t frames x n utterances with the lengths in
 * p->lens (host [n]), and the state descriptors [cdirs][n][hidden]. */
template <typename T> static ds_status rnn_describe_data(ds_rnn_plan *p, int t, int n)
{
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    const ds_rnn_desc *d = &p->d;
    void *fill = rnn_fill(p);
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, t, n,
                                       d->in, p->lens, fill));
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->yd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, t, n,
                                       p->cdirs * d->hidden, p->lens, fill));
    const int dim[3] = {p->cdirs, n, d->hidden}, str[3] = {n * d->hidden, d->hidden, 1};
    DS_CUDNN(cudnnSetTensorNdDescriptor(p->hd, dt, 3, dim, str));
    DS_CUDNN(cudnnSetTensorNdDescriptor(p->cd, dt, 3, dim, str));
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
 * temporary one is allocated here (start-up only) and freed before returning.
 * Uniform: the unidirectional descriptor's one direction, read once; the
 * reverse direction's space is the same layout dir_at elements further. */
template <typename T> static ds_status rnn_offsets(ds_ctx *c, const ds_rnn_plan *p,
                                                   ds_rnn_layout *lay)
{
    void *ws = nullptr;
    cudnnTensorDescriptor_t md = nullptr, bd = nullptr;
    ds_status st = rnn_scratch(p->weight_bytes, &ws, &md, &bd);
    for (int dir = 0; st == DS_OK && dir < p->cdirs; dir++)
        st = rnn_direction<T>(c, p, (const char *)ws, dir, md, bd, lay->offset[dir]);
    for (int k = 0; st == DS_OK && p->uniform && p->d.dirs == 2 && k < DS_RNN_TENSORS; k++)
        lay->offset[1][k] = lay->offset[0][k] + p->dir_at;
    if (bd)
        (void)cudnnDestroyTensorDescriptor(bd);
    if (md)
        (void)cudnnDestroyTensorDescriptor(md);
    if (ws && cudaFree(ws) != cudaSuccess && st == DS_OK)
        st = DS_FAIL(DS_ERR_BACKEND, "rnn plan: cudaFree of the temporary weight space");
    return st;
}

static const char *rnn_algo_name(cudnnRNNAlgo_t a)
{
    switch (a) {
    case CUDNN_RNN_ALGO_STANDARD: return "STANDARD";
    case CUDNN_RNN_ALGO_PERSIST_STATIC: return "PERSIST_STATIC";
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC: return "PERSIST_DYNAMIC";
    default: return "?";
    }
}

/* The algorithms a plan may run under the context's --rnn-algo, in order
 * of preference (auto: on a tie; persist: the first that runs). */
static int rnn_candidates(const ds_ctx *c, cudnnRNNAlgo_t out[2])
{
    switch (c->opts.rnn_algo) {
    case DS_RNN_ALGO_PERSIST:
        out[0] = CUDNN_RNN_ALGO_PERSIST_STATIC;
        out[1] = CUDNN_RNN_ALGO_STANDARD;
        return 2;
    case DS_RNN_ALGO_AUTO:
        out[0] = CUDNN_RNN_ALGO_STANDARD;
        out[1] = CUDNN_RNN_ALGO_PERSIST_STATIC;
        return 2;
    default: out[0] = CUDNN_RNN_ALGO_STANDARD; return 1;
    }
}

/* Start-up buffers for trying a candidate at the plan's largest shape (cuDNN
 * reads and writes them; their values do not matter for the time). */
struct rnn_trial {
    char *mem;
    void *x, *ycat, *dycat, *dx, *w, *dw, *reserve, *work;
    int *len;
    size_t work_bytes, reserve_bytes;
    size_t total;   /* bytes of mem */
};

template <typename T> static ds_status rnn_trial_alloc(const ds_rnn_plan *p, size_t work, size_t reserve,
                                                       rnn_trial *tr)
{
    const ds_rnn_desc *d = &p->d;
    const size_t nx = rnn_round((size_t)d->max_t * d->max_n * d->in * sizeof(T));
    const size_t ny = rnn_round((size_t)d->max_t * d->max_n * p->cdirs * d->hidden * sizeof(T));
    const size_t nw = rnn_round(p->weight_bytes), nr = rnn_round(reserve), nk = rnn_round(work);
    const size_t nl = rnn_round((size_t)d->max_n * sizeof(int));
    const size_t total = 2 * nx + 2 * ny + 2 * nw + nr + nk + nl;
    tr->total = total;
    const cudaError_t e = cudaMalloc((void **)&tr->mem, total);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        tr->mem = nullptr;
        return DS_FAIL(e == cudaErrorMemoryAllocation ? DS_ERR_MEM : DS_ERR_BACKEND,
                       "rnn plan: %zu bytes to try the algorithms at %d x %d (--rnn-algo standard "
                       "tries none): %s", total, d->max_t, d->max_n, cudaGetErrorString(e));
    }
    char *q = tr->mem;
    tr->x = q, q += nx;
    tr->dx = q, q += nx;
    tr->ycat = q, q += ny;
    tr->dycat = q, q += ny;
    tr->w = q, q += nw;
    tr->dw = q, q += nw;
    tr->reserve = q, q += nr;
    tr->work = q, q += nk;
    tr->len = (int *)q;
    tr->work_bytes = work;
    tr->reserve_bytes = reserve;
    return DS_OK;
}

/* The trial's buffers zeroed and its lengths (host [max_n]) copied, on the
 * context's stream (a non-blocking one: the legacy stream's copies would
 * not be ordered before cuDNN's reads), finished before returning. */
static ds_status rnn_trial_fill(ds_ctx *c, const rnn_trial *tr, size_t total, const int *lens, int n)
{
    DS_CUDA(cudaMemsetAsync(tr->mem, 0, total, c->stream));
    DS_CUDA(cudaMemcpyAsync(tr->len, lens, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->stream));
    DS_CUDA(cudaStreamSynchronize(c->stream));
    return DS_OK;
}

/* One forward and backward under the descriptor's algorithm on lengths
 * that differ (len_host [max_n], tr->len its device copy): a cuDNN status,
 * so that a refusal is an answer about the candidate, not an error. */
static cudnnStatus_t rnn_trial_step(ds_ctx *c, ds_rnn_plan *p, const rnn_trial *tr)
{
    cudnnStatus_t s = cudnnRNNForward(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, tr->len, p->xd, tr->x,
                                      p->yd, tr->ycat, p->hd, nullptr, nullptr, p->cd, nullptr, nullptr,
                                      p->weight_bytes, tr->w, tr->work_bytes, tr->work,
                                      tr->reserve_bytes, tr->reserve);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnRNNBackwardData_v8(c->dnn, p->rnn, tr->len, p->yd, tr->ycat, tr->dycat, p->xd, tr->dx,
                                    p->hd, nullptr, nullptr, nullptr, p->cd, nullptr, nullptr, nullptr,
                                    p->weight_bytes, tr->w, tr->work_bytes, tr->work,
                                    tr->reserve_bytes, tr->reserve);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnRNNBackwardWeights_v8(c->dnn, p->rnn, CUDNN_WGRAD_MODE_ADD, tr->len, p->xd, tr->x,
                                       p->hd, nullptr, p->yd, tr->ycat, p->weight_bytes, tr->dw,
                                       tr->work_bytes, tr->work, tr->reserve_bytes, tr->reserve);
    return s;
}

/* Median of three timed steps of the descriptor's algorithm, ms. */
static ds_status rnn_trial_time(ds_ctx *c, ds_rnn_plan *p, const rnn_trial *tr, float *ms)
{
    cudaEvent_t e[2];
    DS_CUDA(cudaEventCreate(&e[0]));
    DS_CUDA(cudaEventCreate(&e[1]));
    float t[3] = {0, 0, 0};
    ds_status st = DS_OK;
    for (int r = 0; r < 3 && st == DS_OK; r++) {
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        if (cudaEventRecord(e[0], c->stream) != cudaSuccess ||
            (s = rnn_trial_step(c, p, tr)) != CUDNN_STATUS_SUCCESS || cudaEventRecord(e[1], c->stream) != cudaSuccess ||
            cudaEventSynchronize(e[1]) != cudaSuccess || cudaEventElapsedTime(&t[r], e[0], e[1]) != cudaSuccess)
            st = DS_FAIL(DS_ERR_BACKEND, "rnn plan: timing %s: %s / %s", rnn_algo_name(p->algo),
                         cudnnGetErrorString(s), cudaGetErrorString(cudaGetLastError()));
    }
    (void)cudaEventDestroy(e[0]);
    (void)cudaEventDestroy(e[1]);
    const float lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
    *ms = t[2] < lo ? lo : t[2] > hi ? hi : t[2];
    return st;
}

/* Lengths that differ, as a batch's do: max_t, then shorter ones (at least
 * 1). Uniform: max_t for all, as every call of that path runs. */
static void rnn_trial_lengths(ds_rnn_plan *p)
{
    const ds_rnn_desc *d = &p->d;
    for (int i = 0; i < d->max_n; i++) {
        const int step = p->uniform ? 0 : d->max_t / 8 > 0 ? d->max_t / 8 : 1;
        const int l = d->max_t - (i % 4) * step;
        p->lens[i] = l < 1 ? 1 : l;
    }
}

/* The candidates of --rnn-algo tried at the largest shape on lengths that
 * differ; those cuDNN refuses dropped (why in p's note); auto keeps the
 * fastest of the rest, persist the first that runs (untimed). The
 * descriptor is left on the choice. */
template <typename T> static ds_status rnn_choose(ds_ctx *c, ds_rnn_plan *p, char *note, size_t note_size)
{
    cudnnRNNAlgo_t cand[2];
    /* --deterministic: untimed, the first that runs, so that every run picks the same */
    const int n = rnn_candidates(c, cand),
              timed = c->opts.rnn_algo == DS_RNN_ALGO_AUTO && !c->opts.deterministic;
    note[0] = 0;
    p->n_ran = 0;
    if (n == 1 && cand[0] == CUDNN_RNN_ALGO_STANDARD) {   /* today's path: nothing to try */
        p->ran[0] = CUDNN_RNN_ALGO_STANDARD, p->ran_ms[0] = -1, p->n_ran = 1;
        return rnn_set_algo<T>(c, p, CUDNN_RNN_ALGO_STANDARD);
    }
    const ds_rnn_desc *d = &p->d;
    rnn_trial_lengths(p);
    DS_TRY(rnn_describe_data<T>(p, d->max_t, d->max_n));
    /* every candidate's spaces, for one set of buffers that fits them all */
    size_t work = 0, reserve = 0, wb = 0;
    cudnnStatus_t ok[2];
    for (int k = 0; k < n; k++) {
        size_t w1 = 0, r1 = 0;
        DS_TRY(rnn_set_algo<T>(c, p, cand[k]));
        ok[k] = cudnnGetRNNWeightSpaceSize(c->dnn, p->rnn, &wb);
        if (ok[k] == CUDNN_STATUS_SUCCESS)
            ok[k] = cudnnGetRNNTempSpaceSizes(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd, &w1, &r1);
        p->weight_bytes = wb > p->weight_bytes ? wb : p->weight_bytes;
        work = w1 > work ? w1 : work;
        reserve = r1 > reserve ? r1 : reserve;
    }
    rnn_trial tr = {};
    DS_TRY(rnn_trial_alloc<T>(p, work, reserve, &tr));
    ds_status st = rnn_trial_fill(c, &tr, tr.total, p->lens, d->max_n);
    size_t used = 0;
    for (int k = 0; k < n && st == DS_OK && (timed || p->n_ran == 0); k++) {
        st = rnn_set_algo<T>(c, p, cand[k]);
        cudnnStatus_t s = ok[k];
        if (st == DS_OK && s == CUDNN_STATUS_SUCCESS)
            s = rnn_trial_step(c, p, &tr);
        if (st == DS_OK && s == CUDNN_STATUS_SUCCESS && cudaStreamSynchronize(c->stream) != cudaSuccess)
            st = DS_FAIL(DS_ERR_BACKEND, "rnn plan: trying %s: %s", rnn_algo_name(cand[k]),
                         cudaGetErrorString(cudaGetLastError()));
        if (st != DS_OK)
            break;
        if (s != CUDNN_STATUS_SUCCESS) {   /* cuDNN's answer for this candidate: dropped */
            (void)cudaGetLastError();      /* not left for a later op's launch check */
            const int w = snprintf(note + used, note_size - used, "%s%s: %s", used ? "; " : "",
                                   rnn_algo_name(cand[k]), cudnnGetErrorString(s));
            used += w > 0 && (size_t)w < note_size - used ? (size_t)w : 0;
            continue;
        }
        float ms = -1;
        if (timed)
            st = rnn_trial_time(c, p, &tr, &ms);
        p->ran[p->n_ran] = cand[k];
        p->ran_ms[p->n_ran++] = ms;
    }
    if (cudaFree(tr.mem) != cudaSuccess && st == DS_OK)
        st = DS_FAIL(DS_ERR_BACKEND, "rnn plan: cudaFree of the trial buffers");
    DS_TRY(st);
    if (p->n_ran == 0)   /* even the standard algorithm refused the trial */
        return DS_FAIL(DS_ERR_BACKEND, "rnn plan: cuDNN runs none of --rnn-algo %s's algorithms for the %s "
                       "layer (in %d, hidden %d, %d direction(s), %d x %d) here: %s",
                       timed ? "auto" : "persist", rnn_cell_name(d->cell), d->in, d->hidden, d->dirs,
                       d->max_t, d->max_n, note);
    int best = 0;
    for (int k = 1; k < p->n_ran; k++)
        if (p->ran_ms[k] < p->ran_ms[best])
            best = k;
    return rnn_set_algo<T>(c, p, p->ran[best]);
}

/* The next region of a buffer: its start in elements of es bytes, *at (bytes
 * so far) moved past it in whole 256-byte units. */
static size_t rnn_take(size_t *at, size_t bytes, size_t es)
{
    const size_t first = *at / es;
    *at += rnn_round(bytes);
    return first;
}

/* The uniform path's layout from cuDNN's sizes for one direction (weight,
 * work and reserve bytes of the unidirectional descriptor), elements of es
 * bytes; a second direction's regions are empty for one direction:
 *   span:    [direction 0's weight space, 256-byte units][direction 1's]
 *   reserve: [cuDNN reserve 0][cuDNN reserve 1][y_f][y_r [t][n][hidden]]
 *            [xr [t][n][in]]                (each region in 256-byte units)
 *   work:    [cuDNN work, both calls'][lengths int32 [max_n]][dy_f][dy_r
 *            [t][n][hidden]][dx_r [t][n][in]] */
static void rnn_uni_sizes(ds_rnn_plan *p, size_t es, ds_rnn_layout *lay)
{
    const ds_rnn_desc *d = &p->d;
    const size_t two = d->dirs == 2, tn = (size_t)d->max_t * d->max_n;
    const size_t ny = tn * d->hidden * es, nx = tn * d->in * es;
    size_t r = 0, k = 0;
    p->res_at[0] = rnn_take(&r, p->reserve_bytes, es);
    p->res_at[1] = rnn_take(&r, two * p->reserve_bytes, es);
    p->y_at[0] = rnn_take(&r, ny, es);
    p->y_at[1] = rnn_take(&r, two * ny, es);
    p->xr_at = rnn_take(&r, two * nx, es);
    (void)rnn_take(&k, p->work_bytes, es);
    p->work_len = rnn_take(&k, (size_t)d->max_n * sizeof(int), es);
    p->dy_at[0] = rnn_take(&k, ny, es);
    p->dy_at[1] = rnn_take(&k, two * ny, es);
    p->dxr_at = rnn_take(&k, two * nx, es);
    p->dir_at = rnn_round(p->weight_bytes) / es;
    lay->span = two * p->dir_at + p->weight_bytes / es;
    lay->reserve = r / es;
    lay->work = k / es;
}

/* Weight space, and work and reserve for max_t x max_n (every length max_t)
 * under every candidate that ran (the largest of each), the descriptor left
 * on the chosen one. */
template <typename T> static ds_status rnn_sizes(ds_ctx *c, ds_rnn_plan *p, ds_rnn_layout *lay)
{
    const ds_rnn_desc *d = &p->d;
    const cudnnDataType_t dt = ds_dtype_traits<T>::cudnn;
    const cudnnRNNAlgo_t chosen = p->algo;
    for (int i = 0; i < d->max_n; i++)
        p->lens[i] = d->max_t;
    DS_CUDNN(cudnnSetRNNDataDescriptor(p->xd, dt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                       d->max_t, d->max_n, d->in, p->lens, rnn_fill(p)));
    p->work_bytes = p->reserve_bytes = 0;
    for (int k = 0; k < p->n_ran; k++) {
        size_t wb = 0, work = 0, reserve = 0;
        DS_TRY(rnn_set_algo<T>(c, p, p->ran[k]));
        DS_CUDNN(cudnnGetRNNWeightSpaceSize(c->dnn, p->rnn, &wb));
        if (k > 0 && wb != p->weight_bytes)
            return DS_FAIL(DS_ERR_BACKEND, "rnn plan: cuDNN's weight space is %zu bytes under %s and "
                           "%zu under %s", wb, rnn_algo_name(p->ran[k]), p->weight_bytes,
                           rnn_algo_name(p->ran[0]));
        p->weight_bytes = wb;
        DS_CUDNN(cudnnGetRNNTempSpaceSizes(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd, &work,
                                           &reserve));
        p->work_bytes = work > p->work_bytes ? work : p->work_bytes;
        p->reserve_bytes = reserve > p->reserve_bytes ? reserve : p->reserve_bytes;
    }
    DS_TRY(rnn_set_algo<T>(c, p, chosen));
    if (p->weight_bytes == 0 || p->weight_bytes % sizeof(T))
        return DS_FAIL(DS_ERR_BACKEND, "rnn plan: cuDNN's weight space of %zu bytes is not a "
                       "whole number of %zu-byte elements", p->weight_bytes, sizeof(T));
    if (p->uniform) {
        rnn_uni_sizes(p, sizeof(T), lay);
        return DS_OK;
    }
    const size_t cat = (size_t)d->max_t * d->max_n * d->dirs * d->hidden;
    p->reserve_cat = rnn_round(p->reserve_bytes) / sizeof(T);
    p->work_cat = rnn_round(p->work_bytes) / sizeof(T);
    p->work_len = p->work_cat + rnn_round(cat * sizeof(T)) / sizeof(T);
    lay->span = p->weight_bytes / sizeof(T);
    lay->reserve = p->reserve_cat + cat;
    lay->work = p->work_len + rnn_round((size_t)d->max_n * sizeof(int)) / sizeof(T);
    return DS_OK;
}

/* The context's plans, in the order made: its start-up choices list them. */
static ds_status rnn_register(ds_ctx *c, ds_rnn_plan *p)
{
    if (c->n_rnn_plans == c->cap_rnn_plans) {
        const int cap = c->cap_rnn_plans ? 2 * c->cap_rnn_plans : 16;
        ds_rnn_plan **a = (ds_rnn_plan **)realloc(c->rnn_plans, (size_t)cap * sizeof *a);
        if (!a)
            return DS_FAIL(DS_ERR_MEM, "rnn plan: the context's list of %d plans", cap);
        c->rnn_plans = a, c->cap_rnn_plans = cap;
    }
    c->rnn_plans[c->n_rnn_plans++] = p;
    return DS_OK;
}

static void rnn_unregister(ds_ctx *c, const ds_rnn_plan *p)
{
    for (int i = 0; c && i < c->n_rnn_plans; i++)
        if (c->rnn_plans[i] == p) {
            memmove(&c->rnn_plans[i], &c->rnn_plans[i + 1], (size_t)(c->n_rnn_plans - i - 1) * sizeof *c->rnn_plans);
            c->n_rnn_plans--;
            return;
        }
}

template <typename T> void cuda_rnn_plan_destroy(ds_ctx *c, ds_rnn_plan *p)
{
    if (!p)
        return;
    rnn_unregister(c, p);
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
    /* The capturable path computes the padding frames' states too (their
     * gradients are exactly zero while the states stay finite). A ReLU
     * cell's state is unbounded: over a long padding tail it can overflow
     * (16 bits soon, FP32 with a recurrent gain past about 2), and 0 x inf
     * then puts NaN into the weight gradient, skipping step after step.
     * Tanh, GRU and LSTM states stay bounded. */
    if (c->opts.capturable && d->cell == DS_CELL_RNN_RELU)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--cuda-graphs runs a recurrent layer over its padding "
                       "frames too, where a ReLU cell's unbounded state can overflow: ReLU recurrent "
                       "layers run without --cuda-graphs");
    ds_rnn_plan *p = (ds_rnn_plan *)calloc(1, sizeof *p);
    if (!p)
        return DS_FAIL(DS_ERR_MEM, "rnn plan");
    p->d = *d;
    p->dt = ds_dtype_traits<T>::cudnn;
    p->gates = ds_backend_cell_gates(d->cell);
    p->uniform = c->opts.capturable != 0;
    p->cdirs = p->uniform ? 1 : d->dirs;
    p->lens = (int *)calloc((size_t)d->max_n, sizeof(int));
    ds_rnn_layout lay = {};   /* offset[1][*] stays 0 for one direction */
    ds_status st = p->lens ? DS_OK : DS_FAIL(DS_ERR_MEM, "rnn plan: %d lengths", d->max_n);
    if (st == DS_OK)
        st = rnn_describe<T>(c, p);
    if (st == DS_OK)
        st = rnn_choose<T>(c, p, p->note, sizeof p->note);
    if (st == DS_OK)
        st = rnn_sizes<T>(c, p, &lay);
    if (st == DS_OK)
        st = rnn_offsets<T>(c, p, &lay);
    if (st == DS_OK)
        st = rnn_register(c, p);
    if (st != DS_OK) {
        cuda_rnn_plan_destroy<T>(c, p);
        return st;
    }
    p->layout = lay;
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
 * Uniform: every length t (len_host unread), the device copy at the same
 * place in work. len [n] device, len_host [n] host, work [layout.work]. */
template <typename T>
static ds_status rnn_setup(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len_host,
                           const int *len, void *work, rnn_call *call)
{
    const ds_rnn_desc *d = &p->d;
    bool clamped = false;
    for (int i = 0; i < n; i++) {   /* uniform: len_host is not read */
        const int l = p->uniform ? t : len_host[i], k = l < 1 ? 1 : l > t ? t : l;
        clamped |= k != l;
        p->lens[i] = k;
    }
    DS_TRY(rnn_describe_data<T>(p, t, n));
    DS_CUDNN(cudnnGetRNNTempSpaceSizes(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, p->xd,
                                       &call->work_bytes, &call->reserve_bytes));
    if (call->work_bytes > p->work_bytes || call->reserve_bytes > p->reserve_bytes)
        return DS_FAIL(DS_ERR_BACKEND,
                       "rnn: cuDNN wants %zu work and %zu reserve bytes for %d x %d, more than "
                       "the %zu and %zu planned for %d x %d",
                       call->work_bytes, call->reserve_bytes, t, n, p->work_bytes,
                       p->reserve_bytes, d->max_t, d->max_n);
    call->dev_len = len;
    if (clamped || p->uniform) {   /* uniform: t for every utterance, written there by the
                                    * call's first kernel (rnn_uni_split) */
        int *out = (int *)((T *)work + p->work_len);
        if (clamped) {
            rnn_clamp_lengths<<<ds_cuda_grid(c, (size_t)n), DS_CUDA_BLOCK, 0, c->stream>>>(
                n, t, len, out);
            DS_LAUNCHED();
        }
        call->dev_len = out;
    }
    return DS_OK;
}

/* Grid-stride launch sizes for a [t][n][w] tensor. */
static size_t rnn_elems(int t, int n, int w) { return (size_t)t * n * w; }

/* The uniform forward (rnn_setup done): the reverse direction's input
 * built, each direction one cuDNN call over all t frames, their outputs
 * summed. len [n] device; x [t][n][in], w [span], y [t][n][hidden], reserve
 * [layout.reserve], work [layout.work]. */
template <typename T>
static ds_status rnn_uni_fwd(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len,
                             const T *x, const T *w, T *y, T *reserve, T *work,
                             const rnn_call *call)
{
    const int D = p->d.dirs, in = p->d.in, H = p->d.hidden;
    int *lens = (int *)(work + p->work_len);   /* = call->dev_len: [n] of t */
    T *xr = reserve + p->xr_at;                /* [t][n][in], kept for backward's weights */
    /* two directions: xr and the lengths; one: the lengths only (w 1, no source) */
    const bool two = D == 2;
    const size_t nx = two ? rnn_elems(t, n, in) : (size_t)n;
    rnn_uni_split<T><<<ds_cuda_grid(c, nx), DS_CUDA_BLOCK, 0, c->stream>>>(
        nx, t, n, two ? in : 1, len, two ? x : nullptr, nullptr, two ? xr : nullptr, lens);
    DS_LAUNCHED();
    for (int dir = 0; dir < D; dir++)
        DS_CUDNN(cudnnRNNForward(c->dnn, p->rnn, CUDNN_FWD_MODE_TRAINING, call->dev_len, p->xd,
                                 dir ? xr : x, p->yd, reserve + p->y_at[dir], p->hd, nullptr,
                                 nullptr, p->cd, nullptr, nullptr, p->weight_bytes,
                                 w + dir * p->dir_at, call->work_bytes, work,
                                 call->reserve_bytes, reserve + p->res_at[dir]));
    const size_t ny = rnn_elems(t, n, H);
    rnn_uni_merge<T><<<ds_cuda_grid(c, ny), DS_CUDA_BLOCK, 0, c->stream>>>(
        ny, t, n, H, D, len, reserve + p->y_at[0], reserve + p->y_at[1], y);
    DS_LAUNCHED();
    return DS_OK;
}

/* The uniform backward (rnn_setup done): dy masked (and reversed for the
 * reverse direction), each direction's data then weight gradient over all
 * t frames, dx = both directions' (the reverse one's reversed back), zero at
 * padding. len [n] device; x [t][n][in], w, dw [span], dy [t][n][hidden], dx
 * [t][n][in], reserve [layout.reserve] (forward's), work [layout.work]. */
template <typename T>
static ds_status rnn_uni_bwd(ds_ctx *c, ds_rnn_plan *p, int t, int n, const int *len,
                             const T *x, const T *w, const T *dy, T *dx, T *dw, T *reserve,
                             T *work, const rnn_call *call)
{
    const int D = p->d.dirs, in = p->d.in, H = p->d.hidden;
    int *lens = (int *)(work + p->work_len);   /* = call->dev_len: [n] of t */
    T *dyd[2] = {work + p->dy_at[0], work + p->dy_at[1]};   /* [t][n][hidden] each */
    T *dxd[2] = {dx, work + p->dxr_at};                     /* [t][n][in] each */
    const T *xd[2] = {x, reserve + p->xr_at};               /* [t][n][in] each */
    const size_t ny = rnn_elems(t, n, H), nx = rnn_elems(t, n, in);
    /* dy past the real frames must be 0 before cuDNN's backward: the
     * recurrence would carry it back into real frames */
    rnn_uni_split<T><<<ds_cuda_grid(c, ny), DS_CUDA_BLOCK, 0, c->stream>>>(
        ny, t, n, H, len, dy, dyd[0], D == 2 ? dyd[1] : nullptr, lens);
    DS_LAUNCHED();
    for (int dir = 0; dir < D; dir++) {
        const T *wd = w + dir * p->dir_at, *yd = reserve + p->y_at[dir];
        T *res = reserve + p->res_at[dir];
        /* data first: it leaves in the reserve what the weight gradient reads */
        DS_CUDNN(cudnnRNNBackwardData_v8(c->dnn, p->rnn, call->dev_len, p->yd, yd, dyd[dir],
                                         p->xd, dxd[dir], p->hd, nullptr, nullptr, nullptr,
                                         p->cd, nullptr, nullptr, nullptr, p->weight_bytes, wd,
                                         call->work_bytes, work, call->reserve_bytes, res));
        DS_CUDNN(cudnnRNNBackwardWeights_v8(c->dnn, p->rnn, CUDNN_WGRAD_MODE_ADD, call->dev_len,
                                            p->xd, xd[dir], p->hd, nullptr, p->yd, yd,
                                            p->weight_bytes, dw + dir * p->dir_at,
                                            call->work_bytes, work, call->reserve_bytes, res));
    }
    rnn_uni_merge<T><<<ds_cuda_grid(c, nx), DS_CUDA_BLOCK, 0, c->stream>>>(
        nx, t, n, in, D, len, dx, dxd[1], dx);
    DS_LAUNCHED();
    return DS_OK;
}

/* x [t][n][in], w [span], y [t][n][hidden] (assigned), reserve [layout.reserve],
 * work [layout.work]; len_host [n] host, len [n] device. Under capturable
 * (uniform) len_host is not read: a replayed graph runs on the lengths in
 * len, whatever batch the host lengths of its capture were. */
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
    if (p->uniform)
        return rnn_uni_fwd<T>(c, p, t, n, len, (const T *)x, (const T *)w, (T *)y, (T *)reserve,
                              (T *)work, &call);
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
 * (padding ignored), dx [t][n][in] assigned, dw [span] accumulates. Under
 * capturable (uniform) len_host is not read, as in forward. */
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
    if (p->uniform)
        return rnn_uni_bwd<T>(c, p, t, n, len, (const T *)x, (const T *)w, (const T *)dy,
                              (T *)dx, (T *)dw, (T *)reserve, (T *)work, &call);
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

/* ---- start-up choices: every rank runs rank 0's algorithm ---- */

static const char *rnn_dt_name(cudnnDataType_t dt)
{
    switch (dt) {
    case CUDNN_DATA_DOUBLE: return "fp64";
    case CUDNN_DATA_HALF: return "fp16";
    case CUDNN_DATA_BFLOAT16: return "bf16";
    default: return "fp32";
    }
}

static void rnn_choice_of(const ds_rnn_plan *p, ds_choice *out)
{
    const ds_rnn_desc *d = &p->d;
    *out = ds_choice{};
    snprintf(out->what, sizeof out->what, "rnn %s %s in%d h%d x%d t%d n%d%s", rnn_cell_name(d->cell),
             rnn_dt_name(p->dt), d->in, d->hidden, d->dirs, d->max_t, d->max_n,
             p->uniform ? " capturable" : "");
    size_t used = (size_t)snprintf(out->how, sizeof out->how, "%s", rnn_algo_name(p->algo));
    int timed = 0;
    for (int k = 0; k < p->n_ran && used < sizeof out->how; k++)
        if (p->ran_ms[k] >= 0)
            used += (size_t)snprintf(out->how + used, sizeof out->how - used, "%s%s %.2f ms",
                                     timed++ ? ", " : " (", rnn_algo_name(p->ran[k]), p->ran_ms[k]);
    if (timed && used < sizeof out->how)
        used += (size_t)snprintf(out->how + used, sizeof out->how - used, ")");
    if (p->note[0] && used < sizeof out->how)   /* what cuDNN refused here */
        snprintf(out->how + used, sizeof out->how - used, "; refused %.60s", p->note);
    out->code[0] = (int)p->algo;
}

int ds_cuda_rnn_choices_get(ds_ctx *c, ds_choice *out, int max)
{
    for (int i = 0; out && i < c->n_rnn_plans && i < max; i++)
        rnn_choice_of(c->rnn_plans[i], &out[i]);
    return c->n_rnn_plans;
}

/* Plan p run under algorithm a, which ran here at start-up; the weight
 * layout the model placed must stay as it is. */
template <typename T> static ds_status rnn_impose(ds_ctx *c, ds_rnn_plan *p, cudnnRNNAlgo_t a)
{
    const cudnnRNNAlgo_t planned = p->algo;
    DS_TRY(rnn_set_algo<T>(c, p, a));
    ds_rnn_layout lay = p->layout;
    ds_status st = rnn_offsets<T>(c, p, &lay);
    if (st == DS_OK && memcmp(lay.offset, p->layout.offset, sizeof lay.offset))
        st = DS_FAIL(DS_ERR_BACKEND, "rnn: cuDNN lays the weights out otherwise under %s than under the "
                     "planned %s", rnn_algo_name(a), rnn_algo_name(planned));
    if (st != DS_OK)
        (void)rnn_set_algo<T>(c, p, planned);   /* the plan stays as it was */
    return st;
}

ds_status ds_cuda_rnn_choices_set(ds_ctx *c, const ds_choice *in, int n)
{
    if (n != c->n_rnn_plans)
        return DS_FAIL(DS_ERR_ARG, "rnn: %d choices given for the %d recurrent layers planned here", n,
                       c->n_rnn_plans);
    for (int i = 0; i < n; i++) {
        ds_rnn_plan *p = c->rnn_plans[i];
        ds_choice mine;
        rnn_choice_of(p, &mine);
        if (strncmp(mine.what, in[i].what, sizeof mine.what))
            return DS_FAIL(DS_ERR_ARG, "rnn: the choice given for %.96s is for %.96s", mine.what, in[i].what);
        const cudnnRNNAlgo_t a = (cudnnRNNAlgo_t)in[i].code[0];
        if (a == p->algo)
            continue;
        int ran = 0;
        for (int k = 0; k < p->n_ran; k++)
            ran |= p->ran[k] == a;
        if (!ran)
            return DS_FAIL(DS_ERR_ARG, "rnn: rank 0 runs %s for %.96s, which did not run here%s%s (the "
                           "ranks need the same --rnn-algo and GPUs that run it)", rnn_algo_name(a), mine.what,
                           p->note[0] ? ": " : "", p->note);
        switch (p->dt) {
        case CUDNN_DATA_DOUBLE: DS_TRY(rnn_impose<double>(c, p, a)); break;
        case CUDNN_DATA_HALF: DS_TRY(rnn_impose<__half>(c, p, a)); break;
        case CUDNN_DATA_BFLOAT16: DS_TRY(rnn_impose<__nv_bfloat16>(c, p, a)); break;
        default: DS_TRY(rnn_impose<float>(c, p, a)); break;
        }
    }
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
