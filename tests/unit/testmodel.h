/* testmodel.h - model set-up shared by the model-level tests and peer_dump. */
#ifndef DS_TESTMODEL_H
#define DS_TESTMODEL_H

#include "model.h"
#include "rng.h"

/* Moves BatchNorm gamma/beta and running statistics off their identity
 * initialisation (gamma in [0.5, 1.5], beta in [-0.5, 0.5], running mean
 * ~ N(0, 0.2^2), running variance in [0.5, 1.5]) so checks exercise them. */
ds_status t_perturb_bn(ds_model *m, ds_rng *rng);

/* Where the model placed its parameters in the flat buffer: counts of
 * tensors whose place is not DS_ALIGN_BYTES-aligned (recurrent weights apart:
 * inside their layer's span the backend places them, aligned on the CPU),
 * that reach past ds_model_param_span, that overlap the next one, and whose
 * packed host offset is not the sum of the counts before it; count_sum sums
 * the counts (ds_model_param_count should equal it). */
typedef struct {
    int misaligned, misaligned_rnn, outside, overlapping, bad_offset;
    size_t count_sum;
} t_placement;

ds_status t_check_placement(const ds_model *m, t_placement *out);

/* Elements of the flat DS_PARAMS or DS_GRADS buffer that belong to no
 * tensor (alignment padding, gaps in a recurrent span) and are not 0: the
 * optimizer and the gradient reduction run over the whole span, so they
 * must stay 0. Blocking. */
ds_status t_flat_gap_nonzero(const ds_backend *be, ds_model *m, int which, size_t *nonzero);

/* The loss of a model at host parameters params (packed, DS_PARAMS order):
 * the function t_fd_grad differentiates. The first failure is kept in st
 * and every later call returns NaN. */
typedef struct {
    ds_model *m;
    int train;          /* BatchNorm in training mode */
    double *params;     /* host copy that t_fd_grad perturbs */
    ds_status st;
} t_loss_arg;

double t_model_loss(void *arg);

#endif
