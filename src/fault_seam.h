/* fault_seam.h - the fault-injection seam: test and fault-injection only,
 * not part of the API. The hooks by which DSTRAIN_FAULT (app/fault.c)
 * and the tests make a step fail as a diverged model, an FP16 overflow or a
 * killed checkpoint write would. Included only by fault.c, the files that
 * define these hooks (model_pass.c, h5_io.c, app/stepper.c) and tests. */
#ifndef DS_FAULT_SEAM_H
#define DS_FAULT_SEAM_H

#include <stddef.h>

#include "model.h"

/* The fault a step is given: none, a NaN logit before its loss (the loss and
 * its gradients follow) or an Inf in its logits gradient before backward (as
 * an FP16 overflow would). */
enum { DS_POISON_NONE, DS_POISON_LOSS, DS_POISON_GRAD };

/* model_pass.c: makes the logits gradient of the last loss +Inf at its
 * first element, as an FP16 overflow would. Queued; no host wait. */
ds_status ds_model_poison_dlogits(ds_model *m);
/* model_pass.c: makes the first logit of the last forward NaN (utterance 0,
 * frame 0), so the next loss is NaN and its gradients follow, as from a
 * diverged model. Queued; no host wait. */
ds_status ds_model_poison_logits(ds_model *m);

/* h5_io.c: the next file write stops the process with SIGKILL once bytes
 * (> 0) of it are written; 0: off. */
void ds_h5_fault_kill_after(size_t bytes);
/* h5_io.c: every later file write first sleeps seconds (a slow disk, so
 * that saves take longer than the steps between them); 0: off. */
void ds_h5_fault_slow_writes(double seconds);

/* app/stepper.c (app layer; declared here so that the seam is one
 * header): the next launched step on this rank gets fault kind
 * (DS_POISON_*); the reduction spreads it to every rank. */
struct ds_stepper;
void ds_stepper_poison_next(struct ds_stepper *s, int kind);

#endif
