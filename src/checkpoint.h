/* checkpoint.h - checkpoints in HDF5 (format "dstrain-checkpoint", 3):
 *   /params/<name>        every parameter, master role (FP32; FP64 in fp64 runs)
 *   /state/<name>         BatchNorm running statistics
 *   /optim/slot<i>/<name> the optimizer's state, laid out as /params
 *                         (sgd: momentum; adamw: both moments)
 *   /optim/scalars        [DS_OPT_SCALARS] its scalars: updates, skips, the
 *                         loss scale and its clean-step count, ...
 *   attributes: format, version, dstrain_version, config (model JSON), dtype,
 *   step, epoch, the features and normalisation the model was trained on, and
 *   for a resume: next_epoch, next_batch (where the sample order goes on),
 *   bad_run, rng (the synthetic data's generator) and run_config (every
 *   training option, key=value lines); attributes_crc32, the CRC-32 of all
 *   the others (h5_seal.h).
 * Every dataset carries HDF5's Fletcher32 checksum. Written whole in memory,
 * then to a temporary name, fsynced, renamed, directory fsynced: from an
 * image copied out of the backend first, so that the write may run beside
 * training (ds_ckpt_image). Version 2
 * files (no attributes_crc32) still resume; version 1 files (parameters
 * only) still load for eval and transcribe. */
#ifndef DS_CHECKPOINT_H
#define DS_CHECKPOINT_H

#include <hdf5.h>
#include <stdint.h>

#include "feature.h"
#include "model.h"
#include "optim.h"

#define DS_CKPT_FORMAT "dstrain-checkpoint"
#define DS_CKPT_VERSION 3   /* 3: attributes sealed (h5_seal.h); 2: resume state; 1: parameters */
#define DS_RUN_ID_LEN 32          /* a run's identity: hex digits, random at a fresh start */
#define DS_RUN_CONFIG_MAX 32768   /* a run's options as key=value lines (Jasper 10x5's 53 layers included) */

typedef struct {
    long step;
    int epoch;
    ds_feature_cfg feat;   /* how inputs were made */
    ds_norm norm;
    /* what an exact resume needs besides the tensors (dstrain train) */
    int has_resume;        /* read: the file holds the optimizer and the fields below */
    int next_epoch;        /* the run goes on in this epoch ... */
    long next_batch;       /* ... at this global batch of its order */
    long bad_run;          /* consecutive skipped steps before it */
    uint64_t rng[4];       /* the synthetic data's generator (every rank draws alike) */
    char run_config[DS_RUN_CONFIG_MAX]; /* the training options, key=value lines */
    char run_id[DS_RUN_ID_LEN + 1]; /* the run that wrote it, kept across resumes ("" before ids) */
    char version[64];      /* read: the dstrain that wrote it */
} ds_ckpt_info;

/* Writes m (and o's state with info's resume fields; o NULL: the model
 * only) to path: an image taken and written at once. */
ds_status ds_checkpoint_save(const char *path, ds_model *m, ds_optim *o, const ds_ckpt_info *info);

/* A checkpoint in two halves (ckpt_image.c), for a save beside
 * training: the take copies what a checkpoint holds out of the backend into
 * host memory (pinned where the backend has it), in the dtypes it is kept
 * in, and blocks until the copy is whole; the write builds and commits the
 * file from that copy alone and may run in another thread while m trains on
 * (it reads m's tables and configuration, never its buffers). One image is
 * taken again for every save; m and o must outlive it. */
typedef struct ds_ckpt_image ds_ckpt_image;
/* Sized for m and o (o NULL: the model only); nothing copied yet. */
ds_status ds_ckpt_image_create(ds_model *m, ds_optim *o, ds_ckpt_image **out);
ds_status ds_ckpt_image_take(ds_ckpt_image *img, ds_optim *o, const ds_ckpt_info *info);
/* Builds the file in a buffer the image keeps from one write to the next. */
ds_status ds_ckpt_image_write(ds_ckpt_image *img, const char *path);
const ds_ckpt_info *ds_ckpt_image_info(const ds_ckpt_image *img);
void ds_ckpt_image_free(ds_ckpt_image *img);
/* The configuration and info stored in path, to build the model it needs. */
ds_status ds_checkpoint_read_config(const char *path, ds_model_cfg *cfg, ds_dtype *dt,
                                    ds_ckpt_info *info);
/* Loads parameters and state into m, whose table must match name for name;
 * every value is checked (finite; running variances positive). */
ds_status ds_checkpoint_load(const char *path, ds_model *m);
/* Loads what ds_checkpoint_load does and o's slots and scalars, for an exact
 * resume; a file without them (version 1, or saved without an optimizer)
 * is refused, saying so. */
ds_status ds_checkpoint_load_resume(const char *path, ds_model *m, ds_optim *o);

/* Reads and checks every optimizer dataset of path (checksums, finite
 * values) for a model shaped as m: *slots how many slots it holds, -1 when
 * it has no optimizer state. For `dstrain info`. */
ds_status ds_checkpoint_check_optim(const char *path, ds_model *m, int *slots);

/* v [n], named by what in errors ("FILE: dataset X"), usable as model
 * state: every value finite, and a running variance (variance 1) positive,
 * as BatchNorm divides by its square root. For every loaded tensor: from a
 * checkpoint, or imported. */
ds_status ds_checkpoint_check_state_values(const char *what, const double *v, size_t n, int variance);

/* The steps of the step-NNNNNNNN.h5 files in dir, newest first: *steps
 * [*count] (free it). */
ds_status ds_checkpoint_list(const char *dir, long **steps, size_t *count);

/* A fresh run's identity into id [DS_RUN_ID_LEN + 1]: random hex. */
ds_status ds_checkpoint_new_run_id(char *id);
/* The identity of the run that wrote path into id [DS_RUN_ID_LEN + 1]: ""
 * for a checkpoint written before runs had one; an error when path cannot
 * be opened as HDF5. */
ds_status ds_checkpoint_read_run_id(const char *path, char *id);

/* Pruning that keeps a folder's other runs whole: ours [n] are the steps
 * of run_id's checkpoints in dir, ours[0] the one just written, then the
 * rest in the order they go last (newest kept). Removes ours[keep..n), each
 * only while its file still carries run_id; ours[0] is never removed (keep
 * below 1 counts as 1), nor any file of another run. *removed counts what
 * went. */
ds_status ds_checkpoint_prune(const char *dir, int keep, const long *ours, size_t n,
                              const char *run_id, int *removed);

/* Removes every step-NNNNNNNN.h5.tmp in dir: a save cut short (SIGKILL, a
 * node lost) leaves one, never chosen by a resume. Call it before a run's
 * first save. *removed counts what went. */
ds_status ds_checkpoint_remove_partial(const char *dir, int *removed);

/* /group/<name> for every tensor of buffer which (DS_PARAMS, DS_GRADS,
 * DS_BN_STATS) in the model's dtype. */
ds_status ds_checkpoint_write_tensors(hid_t file, ds_model *m, const char *group, int which);

#endif
