/* model.h - a speech network on one backend, DeepSpeech2's graph and the
 * stages other families take from it (config.h):
 *
 *   features [N][1][T][F]
 *   -> conv layers: Conv2d, mask padding, BatchNorm (real frames), Hardtanh(0,20)
 *   -> [T'][N][C*F'] (without conv layers: the frames, or DS1's context
 *      windows [T][N][(2C+1)F])
 *   -> FC layers before the RNN (DS1) with Hardtanh(0,20) and dropout
 *   -> RNN layers (BatchNorm on the input of all but the first; directions summed)
 *   -> lookahead conv + Hardtanh (unidirectional models)
 *   -> hidden FC layers with Hardtanh(0,20) and dropout
 *   -> BatchNorm (DS2), FC (DS1: with bias) -> logits [T'][N][classes] -> CTC
 *
 * Parameters, their gradients and BatchNorm running statistics each live in
 * one flat buffer of the backend, laid out in forward order (so the last
 * layers' gradients are a contiguous tail: reduction buckets are ranges).
 * In fp16/bf16 runs the flat buffer holds the 16-bit working copy, an FP32
 * master copy stands beside it, and BatchNorm's parameters and gradients
 * live apart in FP32 (the stats role; tensor group 1).
 * Every tensor starts 256-byte aligned; a recurrent layer's weights are one
 * span laid out as its backend wants (ds_rnn_layout). The host never sees
 * that placement: host copies (ds_model_get/put) are packed in table order,
 * and checkpoints and peer checks go by name.
 * Activations (compute dtype), BatchNorm moments (stats dtype) and losses
 * (scalar dtype) live in arenas sized at creation for the largest batch;
 * nothing is allocated by forward, loss or backward, and none of them waits
 * for the host.
 */
#ifndef DS_MODEL_H
#define DS_MODEL_H

#include <stdint.h>

#include "backend.h"
#include "batch.h"
#include "config.h"
#include "optim.h"

#define DS_MAX_RNN 32
/* Residual branches of the largest valid config: dense_residual's 1 + 2 +
 * ... + DS_MAX_RES, more than one per block of single layers. */
#define DS_MAX_RES_BRANCHES (DS_MAX_RES * (DS_MAX_RES + 1) / 2)
/* Tensors of the largest valid config: per conv layer weight, bias and BN
 * (4); per residual branch weight and BN (3); 2 per FC layer before the
 * RNN; per RNN layer BN (2) and 4 per direction; lookahead; 2 per hidden
 * FC; output BN, FC and its bias (4). */
#define DS_MAX_TENSORS (4 * DS_MAX_CONV + 3 * DS_MAX_RES_BRANCHES + 2 * DS_MAX_FC + \
                        10 * DS_MAX_RNN + 1 + 2 * DS_MAX_FC + 4)

/* A named tensor of a flat buffer. */
typedef struct {
    char name[48];
    int rank;
    int dims[4];
    size_t count;               /* elements */
    size_t offset;              /* in the packed host copy (ds_model_get/put): table order */
    size_t place;               /* in the backend's flat buffer, as the backend placed it */
    int group;                  /* 0: the compute flat buffer; 1: the stats-role buffer
                                 * (BatchNorm's parameters in fp16/bf16 runs) */
} ds_tensor;

typedef struct ds_model ds_model;

/* Limits the activation arena is sized for. */
typedef struct {
    int batch;            /* utterances per step */
    int frames;           /* input frames of the longest utterance */
    int label_len;        /* labels of the longest transcript */
} ds_model_limits;

ds_status ds_model_create(const ds_model_cfg *cfg, const ds_backend *be, ds_ctx *ctx,
                          ds_dtype dt, const ds_model_limits *lim, ds_model **out);
void ds_model_destroy(ds_model *m);

/* PyTorch-default initialisation from seed; BatchNorm gamma 1, beta 0,
 * running mean 0, running variance 1. */
ds_status ds_model_init_params(ds_model *m, uint64_t seed);

/* Copies the batch to the backend and derives each stage's lengths. Fails,
 * naming the utterance, when one is too short for the conv stack. */
ds_status ds_model_set_batch(ds_model *m, const ds_batch *b);
/* The global batch the current one is a share of (data parallelism):
 * lengths [n] input frames of every utterance of it, on every rank alike.
 * BatchNorm counts and the loss norm then cover all ranks. Reset by set_batch
 * to the local batch. Both calls upload these per-batch scalars to backend
 * memory (one queued copy), where the ops read them. */
ds_status ds_model_set_global_batch(ds_model *m, const int *lengths, int n);
/* train: BatchNorm uses (and updates) batch statistics, and dropout drops;
 * else running statistics, and no dropout. */
ds_status ds_model_forward(ds_model *m, int train);
/* Dropout's key for the passes that follow (dropout_mask.h): the run's seed,
 * the step they belong to (counted as the optimizer counts, so a resumed
 * run draws the masks the uninterrupted one drew) and this rank's part of
 * the batch. Each dropout layer adds its own number. Unset: all zero. The
 * step is a per-batch scalar the ops read in backend memory: it is
 * recorded here and uploaded by the next ds_model_set_batch (or
 * set_global_batch), so set the key before the batch; a training forward
 * whose step was set after the batch's upload fails. */
void ds_model_set_dropout_key(ds_model *m, uint64_t seed, uint32_t step, uint32_t part);

typedef struct {
    double loss;          /* sum of finite utterance losses / the batch (global) size */
    int n_infinite;       /* utterances without a valid alignment (zeroed) */
} ds_loss;

/* CTC on the logits of the last forward, and its total, in backend memory;
 * with want_grad the logits gradient is kept for ds_model_backward. */
ds_status ds_model_loss(ds_model *m, int want_grad);
/* Blocking: the last loss on the host; losses [N] (may be NULL) gets each
 * utterance's loss (+inf where no alignment exists). */
ds_status ds_model_read_loss(ds_model *m, ds_loss *out, double *losses);
/* The last loss in backend memory: [DS_LOSS_SCALARS] of the scalar dtype. */
const void *ds_model_loss_scalars(ds_model *m);
/* Accumulates parameter gradients of the last loss into the grad buffer. */
ds_status ds_model_backward(ds_model *m);
ds_status ds_model_zero_grad(ds_model *m);

/* ---- data parallelism ---- */

/* Calls from the passes to the layer that spans ranks. grad_ready: every
 * gradient from place to the end of the flat buffer is final once the work
 * queued so far completes (backward goes last layer first). bn_reduce: sums a
 * BatchNorm layer's moments mom [len] (stats dtype, backend memory) across
 * ranks, in queue order (synchronised BatchNorm; the counts are known from
 * ds_model_set_global_batch). Either may be NULL. */
typedef struct {
    ds_status (*grad_ready)(void *user, size_t place);
    ds_status (*bn_reduce)(void *user, void *mom, size_t len, ds_dtype dt);
    /* At creation (ds_model_create_hooked), once the backend has made its
     * start-up choices (ds_choice) and before the work they need is sized:
     * replaces c [n] by the choices to run (rank 0's), collectively. */
    ds_status (*choices_agree)(void *user, ds_choice *c, int n);
    void *user;
} ds_model_hooks;

void ds_model_set_hooks(ds_model *m, const ds_model_hooks *h);

/* The same with hooks in place from the start (h NULL: none), so that
 * h->choices_agree decides the backend's start-up choices. */
ds_status ds_model_create_hooked(const ds_model_cfg *cfg, const ds_backend *be, ds_ctx *ctx,
                                 ds_dtype dt, const ds_model_limits *lim, const ds_model_hooks *h,
                                 ds_model **out);

/* Loss scaling: the logits gradient of every later ds_model_loss is
 * multiplied by scale [1] (scalar role, backend memory, read when the loss
 * runs: the optimizer's verdicts change it). NULL: 1. */
void ds_model_set_loss_scale(ds_model *m, const void *scale);

/* on: every later step is queued so that, captured once for a batch shape
 * (utterances x padded frames), it serves every batch of that shape: the
 * only host value left that changes with the batch, the CTC tables' bound
 * (the longest transcript), becomes the model's limit. The losses and
 * gradients are the same bit for bit (the bound is a stride, test_model's
 * capturable case). The backend's context must be capturable too
 * (ds_ctx_opts.capturable: the GPU's recurrent layers). */
void ds_model_set_capturable(ds_model *m, int on);

/* The host's checks of a training step on the batch set (BatchNorm's
 * counts of 2 or more, dropout's step set before the batch): the forward
 * makes them too, but a replayed step (a CUDA Graph) runs no forward on the
 * host, so the stepper makes them with every upload. */
ds_status ds_model_train_batch_ok(const ds_model *m);

/* ---- inspection (host copies; for tests, checkpoints, decoding) ---- */
int ds_model_n_params(const ds_model *m);
const ds_tensor *ds_model_param(const ds_model *m, int i);
int ds_model_n_bn_stats(const ds_model *m);
const ds_tensor *ds_model_bn_stat(const ds_model *m, int i);
/* Parameters (and running statistics): the sum of the tensors' counts. */
size_t ds_model_param_count(const ds_model *m);
size_t ds_model_bn_stats_count(const ds_model *m);
/* Elements of the flat parameter (and gradient) buffer, alignment included. */
size_t ds_model_param_span(const ds_model *m);
ds_dtype ds_model_dtype(const ds_model *m);      /* the compute dtype */
ds_roles ds_model_roles(const ds_model *m);
const ds_model_cfg *ds_model_config(const ds_model *m);
ds_ctx *ds_model_ctx(ds_model *m);
const ds_backend *ds_model_backend(const ds_model *m);
/* Largest BatchNorm moment vector (2 x channels): what synchronised BatchNorm sums. */
size_t ds_model_bn_moments_max(const ds_model *m);

/* Backend buffers, for the optimizer and gradient reduction. */
void *ds_model_params(ds_model *m);        /* [param_span] compute dtype: what forward reads */
void *ds_model_grads(ds_model *m);         /* [param_span] compute dtype */
/* fp16/bf16: BatchNorm's parameter gradients, [*n] in the stats role, summed
 * across ranks apart from the flat buffer; NULL and 0 in other runs. */
void *ds_model_bn_param_grads(ds_model *m, size_t *n);
/* The optimizer's groups (b [2]): group 0 the flat buffer's parameters
 * (master copy, gradients, and the working copy when the master stands
 * apart); in fp16/bf16 runs group 1, BatchNorm's parameters. Returns how many. */
int ds_model_optim_bufs(ds_model *m, ds_optim_bufs *b);
/* An optimizer over every group of m. */
ds_status ds_model_optim_create(ds_model *m, const ds_optim_cfg *c, ds_optim **out);

/* Host copies as double, packed in table order (ds_tensor.offset):
 * [param_count] for DS_PARAMS and DS_GRADS, [bn_stats_count] for DS_BN_STATS.
 * DS_PARAMS reads the master copy; putting them sets the working copy too.
 * Blocking. */
ds_status ds_model_get(ds_model *m, int which, double *host);
/* The parameters as they are stored (each group's master copy in its own
 * dtype, gaps included) through share(user, bytes [count] of dt, count):
 * staged to the host, passed to share (which may replace them: a
 * broadcast), and put back; the working copy is then rounded from the
 * master where one stands apart. No copy in doubles: rank 0's weights go
 * to every rank at the size they have. */
ds_status ds_model_share_params(ds_model *m,
                                ds_status (*share)(void *user, void *bytes, size_t count, ds_dtype dt),
                                void *user);
/* The rest of what a resume restores, the same way: BatchNorm's running
 * statistics, each of o's slots (in its parameter group's dtype) and o's
 * scalars (as doubles). */
ds_status ds_model_share_state(ds_model *m, ds_optim *o,
                               ds_status (*share)(void *user, void *bytes, size_t count, ds_dtype dt),
                               void *user);
/* Group k (0 or 1) of buffer which as the backend holds it, for a copy
 * without conversion (checkpoint images): *buf in backend memory (NULL when
 * the group has no tensors), its dtype, *span [elements] (gaps included;
 * a tensor's elements start at its place). Parameters: the master copy. */
ds_status ds_model_flat_group(ds_model *m, int which, int k, void **buf, ds_dtype *dt,
                              size_t *span);
ds_status ds_model_put(ds_model *m, int which, const double *host);
/* Optimizer slot i of o (made by ds_model_optim_create) packed as DS_PARAMS
 * [param_count]: checkpoints hold it in table order, whatever the backend's
 * placement. Blocking. */
ds_status ds_model_get_optim_slot(ds_model *m, ds_optim *o, int slot, double *host);
ds_status ds_model_put_optim_slot(ds_model *m, ds_optim *o, int slot, const double *host);
enum { DS_PARAMS, DS_GRADS, DS_BN_STATS };

/* Output frames of the current batch, and per utterance. */
int ds_model_batch_out_frames(const ds_model *m);
const int *ds_model_out_lengths(const ds_model *m);     /* host [N] */

/* Recurrent layer j (0-based) as the last pass ran it, to run it again
 * alone (test_rnn_rerun): pointers into the model's backend memory, valid
 * until its next pass; dy and dx once a backward has run. */
typedef struct {
    ds_rnn_desc desc;       /* as the layer was planned (the run's limits) */
    int t, n;               /* the last batch's output frames and utterances */
    const int *len_host;    /* [n] host: the layer's lengths */
    const int *len;         /* [n] backend memory: the same */
    const void *x;          /* [t][n][in] the layer's input, after its BatchNorm if any */
    const void *y;          /* [t][n][hidden] its output */
    const void *dy;         /* [t][n][hidden] the gradient at its output */
    const void *dx;         /* [t][n][in] the gradient at its input (before that BatchNorm) */
    int first_param;        /* its weights: ds_model_param first_param + d * DS_RNN_TENSORS + k,
                             * tensor k (DS_RNN_W_IH ..) of direction d */
} ds_model_rnn_layer;
ds_status ds_model_rnn_io(ds_model *m, int j, ds_model_rnn_layer *out);
/* Logits of the last forward as double: [T'][N][classes]. */
ds_status ds_model_logits(ds_model *m, double *host);
/* The best class of every output frame of the last forward, computed on the
 * backend so only [T'][N] ints cross to the host: host [T'][N]. */
ds_status ds_model_best_path(ds_model *m, int *host);

/* Output frames for in_frames input frames (0 if too short). */
int ds_model_config_out_frames(const ds_model_cfg *cfg, int in_frames);
/* Number of parameters of a configuration, without building it. */
size_t ds_model_config_param_count(const ds_model_cfg *cfg);

#endif
