/* checkpoint.h - model checkpoints in HDF5 (format "dstrain-checkpoint", 1):
 *   /params/<name>   every parameter, shaped as the model's table (model dtype)
 *   /state/<name>    BatchNorm running statistics
 *   attributes: format, version, config (model JSON), dtype, step, epoch, and
 *   the features and normalisation the model was trained on.
 * Written to a temporary name, fsynced, renamed, directory fsynced. Optimizer
 * state, RNG state, checksums and keep-K come with the reliability issue. */
#ifndef DS_CHECKPOINT_H
#define DS_CHECKPOINT_H

#include <hdf5.h>

#include "input_spec.h"
#include "model.h"

typedef struct {
    long step;
    int epoch;
    ds_feature_cfg feat;   /* how inputs were made */
    ds_norm norm;
} ds_ckpt_info;

ds_status ds_checkpoint_save(const char *path, ds_model *m, const ds_ckpt_info *info);
/* The configuration and info stored in path, to build the model it needs. */
ds_status ds_checkpoint_read_config(const char *path, ds_model_cfg *cfg, ds_dtype *dt,
                                    ds_ckpt_info *info);
/* Loads parameters and state into m, whose table must match name for name. */
ds_status ds_checkpoint_load(const char *path, ds_model *m);

/* Removes all but the keep newest (highest step) step-NNNNNNNN.h5 in dir;
 * other files are left alone. *removed counts what went. */
ds_status ds_checkpoint_prune(const char *dir, int keep, int *removed);

/* /group/<name> for every tensor of buffer which (DS_PARAMS, DS_GRADS,
 * DS_BN_STATS) in the model's dtype. */
ds_status ds_checkpoint_write_tensors(hid_t file, ds_model *m, const char *group, int which);

#endif
