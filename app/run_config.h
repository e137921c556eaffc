/* run_config.h - a training run's configuration as key=value lines, stored
 * in its checkpoints, and the comparison a resume makes against it. */
#ifndef DS_RUN_CONFIG_H
#define DS_RUN_CONFIG_H

#include <stddef.h>

#include "train.h"

/* Every option of o that shapes the run, one "key=value" line each, the
 * model's configuration flattened under "model."; data is "synthetic" or the
 * feature file, utterances how many of it are trained on, features what
 * makes an input frame, data_fingerprint (NULL: none, synthetic data) the
 * training file's content (ds_dataset_fingerprint). */
ds_status ds_run_config_text(const ds_train_opts *o, int ranks, const char *features,
                             long utterances, const char *data_fingerprint, char *buf, size_t cap);

/* Compares the lines of a checkpoint's run (was) with this run's (now).
 * Keys an exact resume depends on (the model, precision, optimizer, global
 * batch, seed, data and its order) must match: each difference goes into
 * why as "key: A in the checkpoint, B now" and counts in the return. Other
 * differences (the learning rate, the steps, the ranks at the same global
 * batch, ...) are allowed and go into notes the same way. */
int ds_run_config_diff(const char *was, const char *now, char *why, size_t why_cap, char *notes,
                       size_t notes_cap);

#endif
