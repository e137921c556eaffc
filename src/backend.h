/* backend.h - the seam between the model and the hardware.
 *
 * A backend (cpu/, cuda/) owns all tensor memory and runs every op. The
 * core never dereferences a tensor pointer: it reaches memory only through
 * to_host / from_host and the ops. Ops take the backend's context first (a
 * stream on the GPU) and are queued in order on it; ds_backend.ops(dtype)
 * gives the op table for a compute dtype, or NULL when the backend lacks it.
 *
 * Rules for every op:
 *  - the shape of each tensor argument is given in brackets, and its role:
 *      compute  activations, working weights, their gradients (the table's dtype)
 *      stats    BatchNorm parameters, running statistics and moments
 *               (ds_backend_precision_roles(dtype).stats: FP32, or FP64 in fp64 runs)
 *      scalar   losses, norms, optimizer status (always FP64: accumulated in
 *               double, and tiny)
 *    a tensor without a role named is compute;
 *  - pointers named d* are gradients; parameter gradients accumulate (+=),
 *    input gradients too, unless the comment says "assigns";
 *  - NULL means "not wanted" only where the comment says so;
 *  - the per-batch scalars (BatchNorm's count, the loss norm, the gradient
 *    scale 1 / norm, dropout's step) are scalar-role [1] tensors in backend
 *    memory, not host arguments: the ops read them there, so that a step
 *    captured once per batch shape (a CUDA Graph) serves every batch of
 *    that shape once the host has uploaded its values;
 *  - lengths, labels and offsets are int32 arrays in backend memory; where a
 *    library needs lengths on the host too (cuDNN's RNN data descriptor) the
 *    op takes both, and they must agree;
 *  - counts and workspace sizes are elements of the tensor's dtype, never bytes;
 *  - no op allocates: every scratch region is sized once, at start-up, by a
 *    size query for the run's limits (largest batch and length), and passed in;
 *  - no op waits for the host or makes the host wait, except the ones named
 *    "blocking" in ds_backend.
 */
#ifndef DS_BACKEND_H
#define DS_BACKEND_H

#include <stddef.h>

#include "dtype.h"
#include "status.h"

typedef struct ds_ctx ds_ctx;             /* backend-private: stream, library handles */
typedef struct ds_event ds_event;         /* a point in a context's queue of work */
typedef struct ds_rnn_plan ds_rnn_plan;   /* backend-private: one recurrent layer's set-up */
typedef struct ds_graph ds_graph;         /* backend-private: captured work, replayed whole */

/* An activation seen as [n utterances][c channels][p positions] with element
 * strides; position p of utterance i is real when p / p_per_t < len[i] and
 * padding otherwise. Conv maps [N][C][T][F] are {N,C,T*F, C*T*F,T*F,1, F};
 * sequences [T][N][C] are {N,C,T, C,1,N*C, 1}. */
typedef struct {
    int n, c, p;
    long sn, sc, sp;
    int p_per_t;
} ds_view;

/* 2-D convolution, h is time and w is frequency:
 * x [n][ci][hi][wi], w [co][ci][kh][kw], b [co], y [n][co][ho][wo].
 * dh dilates time: the kernel's rows are dh frames apart (0 or 1: adjacent),
 * so ho = (hi + 2 ph - dh (kh - 1) - 1) / sh + 1. A 1-D convolution over
 * time (Jasper, Wav2Letter+) is wi = kw = 1 (ds_backend_conv1d_geom). */
typedef struct {
    int n, ci, hi, wi;
    int co, kh, kw;
    int sh, sw, ph, pw;
    int ho, wo;
    int dh;
} ds_conv_geom;

/* dh as the ops read it: at least 1. */
static inline int ds_backend_conv_dilation(const ds_conv_geom *g) { return g->dh > 1 ? g->dh : 1; }

/* The geometry of a convolution with its output size derived (0 where the
 * input is too small for the kernel). */
ds_conv_geom ds_backend_conv_geom_of(int n, int ci, int hi, int wi, int co, int kh, int kw, int sh, int sw,
                             int ph, int pw);

/* The same layer as g at n utterances of hi frames (a step's shape of a
 * layer planned at its largest, and the reverse). */
ds_conv_geom ds_backend_conv_geom_resized(const ds_conv_geom *g, int n, int hi);

/* A 1-D convolution over t frames, x [n][ci][t][1], w [co][ci][k][1], with
 * "same" padding: k odd, pad = dil (k - 1) / 2 frames each side, so
 * ho = ceil(t / stride). Frames a caller has zeroed past each utterance's
 * length (the mask op) then read as padding: the convolution covers the
 * real frames only. */
ds_conv_geom ds_backend_conv1d_geom(int n, int ci, int t, int co, int k, int stride, int dil);

/* What a dropout mask is drawn for (dropout_mask.h): the same key, the same
 * mask, on every backend. */
typedef struct {
    unsigned long long seed;   /* the run's seed: the generator's key */
    const void *step;          /* [1] scalar (FP64) in backend memory: the optimizer step the
                                * forward pass belongs to, a whole number below 2^32 (a
                                * per-batch scalar: the ops read it there) */
    unsigned int layer;        /* the dropout site in the model (below 2^16) */
    unsigned int part;         /* which share of the batch (the rank): ranks draw apart */
    /* How elements are numbered: in runs of `run` elements, the k-th run
     * numbered from k * stride (a multiple of 4, at least run), so that an
     * element's draw does not depend on how far each run is padded (a conv
     * layer's [N][C][T][F]: one run per (n, c), T * F elements, numbered
     * as if T were 2^20). run 0: one run, numbered 0 .. n-1. */
    unsigned long long run, stride;
} ds_dropout_key;

typedef enum { DS_CELL_LSTM, DS_CELL_GRU, DS_CELL_RNN_TANH, DS_CELL_RNN_RELU } ds_cell;

int ds_backend_cell_gates(ds_cell cell);   /* LSTM 4, GRU 3, plain RNN 1 */

/* One recurrent layer: one or two directions over x [t][n][in], summed into
 * y [t][n][hidden]. Gates follow PyTorch: LSTM i,f,g,o; GRU r,z,n (the reset
 * gate applied to W_hn h + b_hn, as PyTorch and cuDNN do). Utterance i runs
 * over its first len[i] frames only (packed-sequence semantics): forward from
 * frame 0, the reverse direction from frame len[i]-1 down to 0; frames at or
 * past len[i] of y are zero. max_t and max_n are the run's limits, for which
 * the plan's reserve and work sizes hold. */
typedef struct {
    ds_cell cell;
    int dirs;               /* 1 or 2 */
    int in, hidden;
    int max_t, max_n;
} ds_rnn_desc;

enum { DS_RNN_W_IH, DS_RNN_W_HH, DS_RNN_B_IH, DS_RNN_B_HH, DS_RNN_TENSORS };

/* Where the backend wants a layer's weights, and the space its passes need.
 * The layer's weights are one span of the flat parameter buffer (its start
 * 256-byte aligned by the model), laid out as the backend's library wants it
 * (cuDNN's weight space is then a view of the flat buffer, never a copy):
 * tensor k of direction d, shaped as PyTorch's (w_ih [G*hidden][in], w_hh
 * [G*hidden][hidden], b_ih, b_hh [G*hidden]), starts offset[d][k] elements
 * into the span. The gradient buffer has the same layout. */
typedef struct {
    size_t span;                            /* elements of the weight span */
    size_t offset[2][DS_RNN_TENSORS];
    size_t reserve;                         /* elements kept from forward to backward */
    size_t work;                            /* elements of scratch, forward or backward */
} ds_rnn_layout;

/* Optimizer hyperparameters of one update (host values, the same every
 * step; the learning rate, which a schedule changes, is scal[DS_OPT_LR]). */
typedef struct {
    double momentum;          /* sgd; 0: plain SGD */
    int nesterov;             /* sgd */
    double beta1, beta2, eps; /* adamw */
    double weight_decay;
    double max_norm;          /* clip the global gradient norm to this; <= 0: never */
    double scale_window;      /* dynamic loss scaling: clean steps before the scale
                               * doubles (the scale halves on a skip); 0: it never changes */
    int decided;              /* 1: scal holds this step's verdict already (a second group
                               * of parameters): apply it, decide nothing */
} ds_opt_hparams;

/* The optimizer's scalars in backend memory (scalar role), read by the host
 * only after the step. The gradients are those of the loss times the loss
 * scale (1 without loss scaling): the update divides it out. */
enum {
    DS_OPT_SUMSQ,      /* sum of squared (scaled) gradients: written by sumsq */
    DS_OPT_NORM,       /* the global gradient norm, unscaled */
    DS_OPT_CLIP,       /* the clip factor (1: not clipped; 0: skipped) */
    DS_OPT_SKIPPED,    /* 1 when the norm was not finite and nothing was updated */
    DS_OPT_STEPS,      /* updates applied so far (AdamW's bias correction counts them) */
    DS_OPT_SCALE,      /* the loss scale the next backward uses (set by the host at start) */
    DS_OPT_SCALE_USED, /* the loss scale of the step just decided */
    DS_OPT_CLEAN,      /* clean steps since the scale last changed */
    DS_OPT_SKIPS,      /* steps skipped so far */
    DS_OPT_GAIN,       /* what the update multiplies the gradients by: clip / scale */
    DS_OPT_SCALARS,    /* the scalars above: a step's status and a checkpoint's */
    /* Past them, in the same buffer: the learning rate of the next update,
     * queued by the host with each step (a schedule changes it), so that a
     * step captured once reads it from memory; not checkpointed (the
     * schedule gives it). */
    DS_OPT_LR = DS_OPT_SCALARS,
    DS_OPT_BUFFER      /* elements of the optimizer's scalar buffer */
};

/* The loss of a batch in backend memory (scalar role). */
enum {
    DS_LOSS_MEAN,        /* sum of the utterance losses but +inf ones / the loss norm */
    DS_LOSS_INFINITE,    /* utterances without a valid alignment (zero_infinity; a NaN
                            loss is not one of them: it makes the mean NaN) */
    DS_LOSS_SCALARS
};

typedef struct ds_ops {
    /* ---- scratch sizes (elements of the table's dtype) ---- */
    /* conv2d_work runs at start-up, once per layer, for the run's largest
     * geometry of it: a GPU backend chooses its algorithms there (timed,
     * once per layer; a step's smaller geometries reuse them, never timing)
     * and the size covers every smaller geometry of the layer. want_dx: 0
     * when the layer's conv2d_bwd never asks for dx (the first layer, whose
     * input is the features): its backward-data algorithm is not chosen,
     * and a conv2d_bwd with dx on such a layer may be refused (DS_ERR_ARG). */
    size_t (*conv2d_work)(ds_ctx *, const ds_conv_geom *g, int want_dx);
    size_t (*lookahead_work)(int n, int h);
    size_t (*ctc_work)(int t, int n, int c, int max_label_len);

    /* ---- convolution ---- */
    /* y = conv(x, w) + b (assigns). work [conv2d_work(g)]. */
    ds_status (*conv2d_fwd)(ds_ctx *, const ds_conv_geom *g, const void *x, const void *w,
                            const void *b, void *y, void *work);
    /* dx (NULL: not wanted), dw, db accumulate. x [n][ci][hi][wi], dy [n][co][ho][wo]. */
    ds_status (*conv2d_bwd)(ds_ctx *, const ds_conv_geom *g, const void *x, const void *w,
                            const void *dy, void *dx, void *dw, void *db, void *work);

    /* ---- padding ---- */
    /* Zero the padding positions of x (view v, len [v.n]). */
    ds_status (*mask)(ds_ctx *, const ds_view *v, const int *len, void *x);

    /* ---- BatchNorm over real positions only (padding neither counts nor
     * receives output: y is zero there). count [1] (scalar) = number of real
     * positions per channel, across every rank whose moments were summed:
     * the host knows it from the lengths and uploads it with the batch. It
     * must be > 0 (the model asks for 2 or more): the cpu backend returns
     * DS_ERR_ARG otherwise; the cuda backend, which would have to wait for
     * the device to see it, gives NaN or infinite statistics. gamma, beta,
     * dgamma, dbeta, save_mean, save_invstd, run_mean, run_var [c] and mom
     * [2*c] are stats role. ---- */
    /* mom [2*c]: sum of x, then sum of x^2, per channel (assigns). */
    ds_status (*bn_moments)(ds_ctx *, const ds_view *v, const int *len, const void *x,
                            void *mom);
    /* Batch statistics from mom and count [1] (scalar); biased variance
     * normalises, unbiased variance enters the running estimate:
     * r = (1-momentum)*r + momentum*stat. x, y share view v (y assigns). */
    ds_status (*bn_fwd_train)(ds_ctx *, const ds_view *v, const int *len,
                              const void *count /* [1] scalar */, const void *x,
                              const void *mom, const void *gamma, const void *beta, double eps,
                              double momentum, void *y, void *save_mean, void *save_invstd,
                              void *run_mean, void *run_var);
    ds_status (*bn_fwd_eval)(ds_ctx *, const ds_view *v, const int *len, const void *x,
                             const void *gamma, const void *beta, const void *run_mean,
                             const void *run_var, double eps, void *y);
    /* mom [2*c]: sum of dy, then sum of dy*xhat, per channel (assigns). */
    ds_status (*bn_bwd_moments)(ds_ctx *, const ds_view *v, const int *len, const void *dy,
                                const void *x, const void *save_mean,
                                const void *save_invstd, void *mom);
    /* dy, x, dx (NULL: not wanted) share view v; count [1] (scalar) as in
     * bn_fwd_train; mom [2*c] from bn_bwd_moments; dx, dgamma, dbeta accumulate. */
    ds_status (*bn_bwd_train)(ds_ctx *, const ds_view *v, const int *len,
                              const void *count /* [1] scalar */, const void *dy,
                              const void *x, const void *gamma, const void *save_mean,
                              const void *save_invstd, const void *mom, void *dx,
                              void *dgamma, void *dbeta);
    ds_status (*bn_bwd_eval)(ds_ctx *, const ds_view *v, const int *len, const void *dy,
                             const void *x, const void *gamma, const void *run_mean,
                             const void *run_var, double eps, void *dx, void *dgamma,
                             void *dbeta);

    /* ---- elementwise ---- */
    /* y = clamp(x, lo, hi) over [n]; y may alias x (assigns). */
    ds_status (*hardtanh_fwd)(ds_ctx *, size_t n, double lo, double hi, const void *x,
                              void *y);
    /* dx += dy where lo < y < hi. y, dy, dx [n]. */
    ds_status (*hardtanh_bwd)(ds_ctx *, size_t n, double lo, double hi, const void *y,
                              const void *dy, void *dx);

    /* Dropout: element e of [n] is kept when its draw for key (dropout_mask.h)
     * clears p, in [0, 1). y = kept ? x / (1 - p) : 0 (assigns; y may alias x).
     * The key's step is read in backend memory when the op runs, so a
     * captured step serves every step. */
    ds_status (*dropout_fwd)(ds_ctx *, size_t n, double p, const ds_dropout_key *key,
                             const void *x, void *y);
    /* dx += kept ? dy / (1 - p) : 0, kept as dropout_fwd drew it with this key
     * and the step then in its buffer. dy, dx [n]. */
    ds_status (*dropout_bwd)(ds_ctx *, size_t n, double p, const ds_dropout_key *key,
                             const void *dy, void *dx);
    /* y += x over [n]: a residual connection's sum forward, and its gradient
     * passed back. */
    ds_status (*add)(ds_ctx *, size_t n, const void *x, void *y);

    /* ---- dense ---- */
    /* y = x w^T + b (assigns). x [m][k], w [o][k], b [o] or NULL, y [m][o]. */
    ds_status (*linear_fwd)(ds_ctx *, int m, int k, int o, const void *x, const void *w,
                            const void *b, void *y);
    /* dx [m][k] (NULL: not wanted), dw [o][k], db [o] (NULL: no bias) accumulate. */
    ds_status (*linear_bwd)(ds_ctx *, int m, int k, int o, const void *x, const void *w,
                            const void *dy, void *dx, void *dw, void *db);

    /* ---- layout ---- */
    /* y[t][i][ch*f + j] = x[i][ch][t][j] (assigns). x [n][c][t][f], y [t][n][c*f]. */
    ds_status (*conv_to_seq)(ds_ctx *, int n, int c, int t, int f, const void *x, void *y);
    /* dx [n][c][t][f] += rearranged dy [t][n][c*f]. */
    ds_status (*conv_to_seq_bwd)(ds_ctx *, int n, int c, int t, int f, const void *dy,
                                 void *dx);

    /* Context windows over real frames: y[s][i][j*f + k] = x[i][s + j - c][k]
     * for j in [0, 2c], 0 where s + j - c is outside [0, len[i]) and in every
     * frame s >= len[i] (assigns). x [n][t][f] (a batch's features), y
     * [t][n][(2c+1)*f], len [n]. */
    ds_status (*context_fwd)(ds_ctx *, int n, int t, int f, int c, const int *len,
                             const void *x, void *y);
    /* dx [n][t][f] += each window's gradient, dy [t][n][(2c+1)*f], summed back
     * onto the real frames it copied. */
    ds_status (*context_bwd)(ds_ctx *, int n, int t, int f, int c, const int *len,
                             const void *dy, void *dx);

    /* ---- lookahead (depthwise future-context conv, no bias) ---- */
    /* y[s][i][j] = sum_k w[j][k] * x[s+k][i][j], x taken as 0 for s+k >= t (assigns).
     * x, y [t][n][h], w [h][k]. */
    ds_status (*lookahead_fwd)(ds_ctx *, int t, int n, int h, int k, const void *x,
                               const void *w, void *y);
    /* dx [t][n][h] (NULL: not wanted), dw [h][k] accumulate. work [lookahead_work(n, h)]. */
    ds_status (*lookahead_bwd)(ds_ctx *, int t, int n, int h, int k, const void *x,
                               const void *w, const void *dy, void *dx, void *dw, void *work);

    /* ---- recurrent layer (ds_rnn_desc: both directions in one call) ---- */
    /* Once per layer at start-up: the backend's set-up (cuDNN descriptors) and
     * its layout (ds_rnn_layout). Released with rnn_plan_destroy. */
    ds_status (*rnn_plan)(ds_ctx *, const ds_rnn_desc *d, ds_rnn_plan **plan,
                          ds_rnn_layout *layout);
    void (*rnn_plan_destroy)(ds_ctx *, ds_rnn_plan *plan);
    /* x [t][n][in], w [layout.span], y [t][n][hidden] (assigns: directions
     * summed, zero past len), reserve [layout.reserve] (kept for rnn_bwd),
     * work [layout.work]. len_host [n] on the host and len [n] in backend
     * memory hold the same lengths; t <= max_t, n <= max_n. */
    ds_status (*rnn_fwd)(ds_ctx *, ds_rnn_plan *plan, int t, int n, const int *len_host,
                         const int *len, const void *x, const void *w, void *y,
                         void *reserve, void *work);
    /* Once after each rnn_fwd on the same x, w and reserve: backward may
     * overwrite the reserve (cuDNN's backward-data does, for ReLU cells), so
     * a second backward needs a new forward. dy [t][n][hidden] (frames past
     * len ignored); dx [t][n][in] assigns; dw [layout.span] accumulates, in
     * the layout of w. */
    ds_status (*rnn_bwd)(ds_ctx *, ds_rnn_plan *plan, int t, int n, const int *len_host,
                         const int *len, const void *x, const void *w, const void *dy,
                         void *dx, void *dw, void *reserve, void *work);

    /* ---- CTC (log_softmax folded in) ---- */
    /* logits [t][n][c]; len [n] frames; labels concatenated, utterance i at
     * labels[label_off[i] .. + label_len[i]]. loss [n] (scalar) gets
     * -log p(labels|x), +inf when no alignment exists. dlogits [t][n][c]
     * (NULL: loss only) is assigned grad_scale[0] * loss_scale[0] * d loss_i /
     * d logits, zero past len[i] and for utterances with infinite loss
     * (zero_infinity). grad_scale [1] (scalar: the batch's 1 / loss norm,
     * set per batch) and loss_scale [1] (scalar; NULL: 1; the optimizer's
     * verdicts change it: dynamic loss scaling) are read in backend memory.
     * work [ctc_work(...)]. Labels outside [0, c) or equal to blank, and
     * lengths outside their bounds: the cpu backend returns DS_ERR_ARG; the
     * cuda backend, which would have to wait for the device to see them,
     * gives that utterance a NaN loss and NaN dlogits (the step's finite
     * check then skips the step). Data reach here checked: the loader
     * refuses a file whose labels are not alphabet symbols. */
    ds_status (*ctc_loss)(ds_ctx *, int t, int n, int c, int blank, const void *logits,
                          const int *len, const int *labels, const int *label_off,
                          const int *label_len, int max_label_len,
                          const void *grad_scale /* [1] scalar */, const void *loss_scale,
                          void *loss, void *dlogits, void *work);
    /* Best path per frame: best[s][i] = the class of the largest logits[s][i][:]
     * (ties to the lower index), for greedy decoding without copying the
     * logits. logits [t][n][c], best [t][n] int32 (assigns). */
    ds_status (*argmax)(ds_ctx *, int t, int n, int c, const void *logits, int *best);
    /* loss [n] (scalar) -> out [DS_LOSS_SCALARS] (scalar, assigns): the finite
     * losses summed in order and divided by norm [1] (scalar, set per batch,
     * read in backend memory), and the infinite ones counted. */
    ds_status (*loss_total)(ds_ctx *, int n, const void *norm /* [1] scalar */,
                            const void *loss, void *out);

    /* ---- optimizer (flat buffers of n elements) ---- */
    /* scal [DS_OPT_BUFFER] (scalar) in every optimizer op.
     * scal[DS_OPT_SUMSQ] += sum of x^2, accumulated in double (so groups of
     * parameters add up to one global norm). */
    ds_status (*sumsq)(ds_ctx *, size_t n, const void *x, void *scal);
    /* One update, deciding from scal in backend memory (ds_opt_decide in
     * opt_decide.h): norm = sqrt(sumsq) / scale; not finite -> nothing
     * changes, scal[DS_OPT_SKIPPED] = 1 and scal[DS_OPT_CLIP] = 0;
     * else the gradient is scaled by clip = max_norm / (norm + 1e-6) when
     * max_norm > 0 and norm > max_norm (as torch's clip_grad_norm_) and
     * divided by the scale, the update applied and scal[DS_OPT_STEPS]
     * incremented; with h->scale_window > 0 the scale then halves on a skip
     * and doubles after that many clean steps (h->decided: the verdict in
     * scal stands, as decided by the step's first group). g [n] (compute) is
     * read, not changed; p [n] and the moments (master role: FP32, FP64 in
     * fp64 runs); w [n] (compute; NULL: none) gets the updated p rounded to
     * the compute dtype, the working copy forward reads.
     * lr is scal[DS_OPT_LR].
     * PyTorch SGD: g' = g + wd*p; v = momentum*v + g'; p -= lr*(nesterov ?
     * g' + momentum*v : v); v [n] (NULL when momentum is 0). */
    ds_status (*sgd_step)(ds_ctx *, size_t n, const ds_opt_hparams *h, void *p, const void *g,
                          void *v, void *w, void *scal);
    /* PyTorch AdamW, step counted from 1: p *= 1 - lr*wd; m, v moments [n];
     * p -= lr * mhat / (sqrt(vhat) + eps). */
    ds_status (*adamw_step)(ds_ctx *, size_t n, const ds_opt_hparams *h, void *p,
                            const void *g, void *m, void *v, void *w, void *scal);
} ds_ops;

/* What a context has done, for tests and memory reports. */
typedef struct {
    long allocs;              /* alloc and host_alloc calls */
    long to_host;             /* blocking device-to-host reads */
    size_t bytes_in_use, bytes_peak;   /* backend memory (alloc) */
    long searches;            /* timed algorithm searches (cuDNN's Find; none on the
                               * CPU): conv2d_work's only, never inside a step */
} ds_backend_counters;

/* How a context computes, chosen once per run. */
typedef struct {
    int deterministic;    /* only algorithms that give bitwise-equal results run to run */
    int tf32;             /* FP32 matrix products and convolutions may use TF32 tensor cores */
    size_t mem_limit;     /* bytes of backend memory (alloc, and the CPU's scratch) this
                           * process may hold; 0: what the device has. An allocation past it
                           * fails as out of memory (bench --batch max is tested with it). */
    int rnn_algo;         /* DS_RNN_ALGO_*: which recurrent algorithms a GPU's rnn_plan may
                           * run (the CPU has one) */
    int capturable;       /* --cuda-graphs: every op reads what changes from one batch of a
                           * shape to the next from backend memory, never from host
                           * arguments, so that a step captured once per shape replays right
                           * for every batch of that shape (a GPU's recurrent layer then runs
                           * one call per direction over the padded length, ignoring the
                           * host lengths; the CPU, which captures nothing, is unchanged) */
} ds_ctx_opts;

/* --rnn-algo: standard (0, zeroed options): cuDNN's standard algorithm;
 * auto: the standard and the persistent one timed per layer at start-up,
 * the faster kept (under --deterministic: untimed, standard first);
 * persist: the persistent one where cuDNN runs it for the layer, else the
 * standard one (FP64 has none), said in the start-up choices. */
enum { DS_RNN_ALGO_STANDARD, DS_RNN_ALGO_AUTO, DS_RNN_ALGO_PERSIST };

/* One timed range (--profile layers): when it opened and closed on the
 * context's queue, in ms after the first range timed since timing was
 * switched on or last read. */
typedef struct {
    char name[48];
    int depth;                /* 0: outermost (a phase of a step); 1: a layer inside it */
    double start_ms, end_ms;
} ds_range_time;

/* One kernel's totals over a profiled span (--profile kernels). */
typedef struct {
    char name[128];           /* demangled, cut to fit */
    char range[48];           /* the innermost named range it was launched in; "" none */
    long launches;
    double total_ms, max_ms;
    double occupancy;         /* mean achieved occupancy (0..1) where the profiler measures
                               * it, else the theoretical one from the launch; < 0: unknown */
    int occupancy_achieved;   /* 1: occupancy was measured, 0: theoretical */
} ds_kernel_stat;

/* One start-up choice of a backend: an algorithm for one direction of one
 * layer's shape (cuDNN's convolution algorithms). Named, so that a log says
 * which layer it is and ranks can check that they list the same ones. */
typedef struct {
    char what[96];   /* the layer's shape and direction: "conv fp16 32x1x1700x161 k41x11 s2x2 fwd" */
    char how[128];   /* the choice in words: "IMPLICIT_PRECOMP_GEMM, tensor op" */
    int code[2];     /* the backend's own codes (algorithm, math type) */
} ds_choice;

typedef struct ds_backend {
    const char *name;                  /* "cpu", "cuda" */
    /* Devices this backend can run on here (CPU: 1; CUDA: visible GPUs, 0 when none). */
    int (*device_count)(void);
    /* The PCI address of a device ("0000:3B:00.0"), for the CPUs nearest it
     * (cpu_binding.h). NULL where a backend has no devices (the CPU). */
    ds_status (*device_pci_bus_id)(int device, char *buf, size_t size);
    /* A context (stream, library handles) on device; opts NULL: defaults (all 0). */
    ds_status (*ctx_create)(int device, const ds_ctx_opts *opts, ds_ctx **out);
    void (*ctx_destroy)(ds_ctx *);
    ds_status (*alloc)(ds_ctx *, ds_dtype t, size_t count, void **out);   /* zeroed */
    void (*release)(ds_ctx *, void *p);
    /* Host memory the backend copies from and to fastest (pinned on a GPU). */
    ds_status (*host_alloc)(ds_ctx *, size_t bytes, void **out);
    void (*host_release)(ds_ctx *, void *p);
    ds_status (*zero)(ds_ctx *, ds_dtype t, size_t count, void *p);
    /* Blocking: returns when host holds the data (waits for queued work). */
    ds_status (*to_host)(ds_ctx *, ds_dtype t, size_t count, const void *src, void *host);
    /* Queued: host (from host_alloc) holds the data once an event recorded after it completes. */
    ds_status (*to_host_async)(ds_ctx *, ds_dtype t, size_t count, const void *src, void *host);
    /* Queued; host may be reused when the call returns. */
    ds_status (*from_host)(ds_ctx *, ds_dtype t, size_t count, const void *host, void *dst);
    ds_status (*copy)(ds_ctx *, ds_dtype t, size_t count, const void *src, void *dst);
    /* Queued: dst [count] of dt = src [count] of st, each element rounded once
     * to nearest even (F32, F64, F16, BF16); dst and src do not overlap. */
    ds_status (*convert)(ds_ctx *, ds_dtype dt, void *dst, ds_dtype st, const void *src,
                         size_t count);
    /* Blocking: waits for everything queued on the context. */
    ds_status (*sync)(ds_ctx *);
    /* Events: record marks the work queued so far on a context; wait makes
     * work queued later on another context wait for it (the host does not);
     * event_sync blocks the host until it has passed; query tells without waiting. */
    ds_status (*event_create)(ds_ctx *, ds_event **out);
    void (*event_destroy)(ds_ctx *, ds_event *e);
    ds_status (*event_record)(ds_ctx *, ds_event *e);
    ds_status (*event_wait)(ds_ctx *, ds_event *e);
    ds_status (*event_sync)(ds_event *e);
    ds_status (*event_query)(ds_event *e, int *done);
    void (*counters)(ds_ctx *, ds_backend_counters *out);
    const ds_ops *(*ops)(ds_dtype t);
    /* One line per library: versions compiled against and found at run time. */
    void (*describe)(char *buf, size_t size);
    /* Named ranges around a layer or a phase, for profilers (NVTX on the GPU);
     * pushes and pops nest. */
    void (*range_push)(ds_ctx *, const char *name);
    void (*range_pop)(ds_ctx *);
    /* The context's native queue, for a library that queues its own work in
     * order with the context's (NCCL): the cudaStream_t on the GPU; NULL on
     * the CPU, where work runs as it is called. */
    void *(*native_queue)(ds_ctx *);
    /* Range timing (--profile layers): with capacity > 0 every range pushed
     * from now on is timed on the queue (CUDA events on the GPU, the monotonic
     * clock on the CPU, where ops run as they are called) into capacity slots
     * allocated here, once; 0 switches it off and frees them. Ranges past
     * capacity are not timed (range_times says how many were lost). */
    ds_status (*range_timing)(ds_ctx *, int capacity);
    /* Blocking: the ranges opened since timing began or the last read, in
     * the order they opened, into out [max]; *n of them, *lost not timed; a
     * range still open comes back with end_ms = start_ms. The slots are free
     * again afterwards. A CUDA failure inside range_push/pop (which return
     * nothing) is returned here. */
    ds_status (*range_times)(ds_ctx *, ds_range_time *out, int max, int *n, int *lost);
    /* The device's peak rate for a compute dtype's matrix products, FLOP/s,
     * and in how the figure was found ("sgemm measured, 2 threads", "H100
     * dense FP16 tensor peak at 1980 MHz"). The CPU measures its BLAS GEMM on
     * the calling threads (about a second); the GPU computes it from the
     * device's SMs and clock. tf32: the GPU's FP32 products may use TF32. */
    double (*peak_flops)(ds_ctx *, ds_dtype t, int tf32, char *how, size_t how_size);
    /* Per-kernel profile (CUPTI on the GPU; both NULL where a backend has
     * none): start records every kernel the process launches from now on
     * (CUPTI is process-wide: NCCL's streams too), with the range it was
     * launched in; stop waits for the queued work, writes a Chrome/
     * Perfetto trace (JSON trace events: kernels and ranges) to trace_path
     * unless NULL, and gives the kernels' totals, longest total first, into
     * out [max] (*n of them), and into *all (NULL: not wanted) the launches
     * and time of every kernel, those past max included. */
    ds_status (*kernel_profile_start)(ds_ctx *);
    ds_status (*kernel_profile_stop)(ds_ctx *, const char *trace_path, ds_kernel_stat *out,
                                     int max, int *n, ds_kernel_stat *all);
    /* Start-up choices (both NULL where a backend makes none: the CPU).
     * choices_get: the ones made so far on ctx (conv2d_work's), in the order
     * made, into out [max] (NULL when max is 0); returns how many there are.
     * choices_set: run in [n] instead: the list choices_get gives (the same
     * n and what, in order) with another rank's codes; each shape's work
     * need is recomputed for them, so a later conv2d_work returns what they
     * need. DS_ERR_ARG, naming the choice, when the lists differ or a code
     * cannot run here. So that every rank runs rank 0's choices (a timed
     * search may pick differently on two GPUs of one job). */
    int (*choices_get)(ds_ctx *, ds_choice *out, int max);
    ds_status (*choices_set)(ds_ctx *, const ds_choice *in, int n);
    /* Capture (all NULL where a backend has none: the CPU, whose ops run as
     * they are called). capture_begin: work queued on ctx from now on (and
     * on contexts that wait on its events) is recorded, not run, until
     * capture_end, which gives it as a graph (*out) holding *bytes of device
     * memory of its own, to launch any number of times. A call inside that
     * cannot be captured fails there (its status says which); capture_end
     * must still be called, and then fails with DS_ERR_UNSUPPORTED saying
     * why, the context as before the capture and nothing of it run. out
     * NULL: the capture is ended and discarded (after a call inside it
     * failed), nothing instantiated. The graph reads and writes the
     * addresses its ops were given when it was captured, and every host
     * argument as it was then. *bytes is an estimate (the device's free
     * memory before and after). */
    ds_status (*capture_begin)(ds_ctx *);
    ds_status (*capture_end)(ds_ctx *, ds_graph **out, size_t *bytes);
    /* Queued: one replay of g on ctx, ordered with the context's other work. */
    ds_status (*graph_launch)(ds_ctx *, ds_graph *g);
    void (*graph_destroy)(ds_ctx *, ds_graph *g);
} ds_backend;

/* Runs call (a ds_status expression) inside the range name of backend be on
 * ctx, and returns its status from the enclosing function if it failed. */
#define DS_RANGED(be, ctx, name, call)                                                        \
    do {                                                                                      \
        (be)->range_push((ctx), (name));                                                      \
        ds_status ds_r_st_ = (call);                                                          \
        (be)->range_pop(ctx);                                                                 \
        if (ds_r_st_ != DS_OK)                                                                \
            return ds_r_st_;                                                                  \
    } while (0)

/* The backend named name ("cpu", "cuda"), or NULL when not built in or,
 * for cuda, when its plugin could not be loaded (src/backend_plugin.h). */
const ds_backend *ds_backend_get(const char *name);

/* Why ds_backend_get(name) is NULL, as a sentence for an error message
 * (the plugin's file and the loader's cause for cuda); "" when it is not. */
const char *ds_backend_missing(const char *name);

/* The dtype of each buffer role for a run's precision (the compute dtype):
 * fp32 {F32, F32, F32, F64}, fp64 all F64, fp16 {F16, F32, F32, F64},
 * bf16 {BF16, F32, F32, F64}. */
typedef struct {
    ds_dtype compute;   /* activations, working weights, gradients */
    ds_dtype master;    /* master weights and optimizer state */
    ds_dtype stats;     /* BatchNorm parameters, running statistics, moments */
    ds_dtype scalar;    /* losses, norms, optimizer status, loss scale */
} ds_roles;

ds_roles ds_backend_precision_roles(ds_dtype compute);

/* Alignment of every tensor in a flat buffer, and of every arena region. */
#define DS_ALIGN_BYTES 256
/* count elements of t rounded up to a whole number of DS_ALIGN_BYTES. */
size_t ds_backend_align_elems(ds_dtype t, size_t count);

#endif
