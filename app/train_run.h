/* train_run.h - the state of one training run, shared by the parts of the
 * loop (train.c), its data (train_data.c) and its ranks (ranks.c). Private
 * to the app layer. */
#ifndef DS_TRAIN_RUN_H
#define DS_TRAIN_RUN_H

#include "dir_lock.h"
#include "filter.h"
#include "progress.h"
#include "rng.h"
#include "score.h"
#include "stepper.h"
#include "train.h"

/* A launched step whose metrics the host has not read yet. Its batch is
 * only read when the step is finished before the next batch is drawn. */
typedef struct {
    const ds_batch *b;           /* NULL: none pending */
    int global_n, frames, epoch;
    long step;
    double lr;
} ds_launched;

typedef struct {
    const ds_train_opts *o;
    ds_optim_cfg ocfg;
    long per_epoch, total;
    const ds_backend *be;
    ds_ctx *ctx;
    ds_model *model;
    ds_optim *optim;
    ds_stepper *stepper;
    ds_launched pending;        /* the loop reads each step after launching the next */
    ds_scorer *scorer;
    ds_log log;
    ds_dir_lock ckpt_lock;      /* rank 0: the checkpoint folder, held for the run */
    struct ds_ckpt_writer *ckpt;  /* rank 0 with --checkpoint-dir: saves beside training */
    ds_feature_cfg feat;
    /* HDF5 data */
    ds_dataset *train, *val;
    long *keep, n_keep, *val_keep, n_val;
    ds_filter_stats fs;
    ds_sampler *sampler;
    ds_loader *loader;
    /* synthetic data: every rank draws the same global batch and takes its share */
    ds_rng rng;
    ds_batch synth_global, synth;
    long synth_left;
    /* ranks */
    ds_dist dist;
    int rank, ranks;
    double *gathered;           /* [ranks][4] step time, loss, n_inf, stop signal of every rank */
    int stop_signal;            /* agreed by every rank: stop after the step read last */
    long bad_run;               /* consecutive steps skipped for a non-finite gradient */
    long saved_step;            /* the step of the last checkpoint written or resumed; -1: none */
    long tried_step;            /* the step of the last save tried or resumed (a failed one
                                 * is not retried, one step is saved once) */
    long validated_step;        /* the step the last validation followed; -1: none */
    int tried_ended;            /* that save goes on at the next epoch (its epoch validated) */
    char run_config[4096];      /* the options as key=value lines (run_config.h), for checkpoints */
    /* where the run starts (0 unless resumed) and where it is in its epoch */
    long start_step, start_batch;
    int start_epoch;
    long batch_pos;             /* global batches of the epoch drawn so far (the next one's index) */
    ds_progress progress;       /* the bar (rank 0, --progress bar) */
    unsigned char *sync_host;   /* [sync_bytes] the master parameters as stored, for --check-sync */
    size_t sync_bytes;
    uint64_t *sync_sums;        /* [ranks] their checksums */
} run_state;

/* train.c: the backend, data, model, optimizer, stepper and ranks of a run
 * of o, every buffer planned (dstrain bench times steps on one of these);
 * close frees what open made, also after a failed open. */
ds_status ds_train_run_open(const ds_train_opts *o, run_state *r);
void ds_train_run_close(run_state *r);

/* train_data.c */
ds_status ds_train_data_open(run_state *r, ds_model_limits *lim);
ds_status ds_train_data_epoch_begin(run_state *r, int epoch);
/* The next batch of the epoch, or NULL at its end. */
ds_status ds_train_data_next_batch(run_state *r, const ds_batch **b);
/* Whether the epoch has no batch left to train on, without drawing one: a
 * checkpoint made then goes on at the next epoch's first batch. */
int ds_train_data_epoch_exhausted(const run_state *r, int epoch);
void ds_train_data_close(run_state *r);

/* resume.c: --resume: finds (auto) or takes the checkpoint, checks that it
 * was made by the same run, loads the model and optimizer on every rank and
 * sets where the loop starts. */
ds_status ds_resume_run(run_state *r);

/* ranks.c */
ds_status ds_ranks_setup(run_state *r);
/* Rank 0's bytes [count] of dt to every rank of world (a ds_world *), in
 * pieces MPI's int counts take: the share callback of ds_model_share_params
 * and ds_model_share_state. */
ds_status ds_ranks_bcast_bytes(void *world, void *bytes, size_t count, ds_dtype dt);
/* Every rank sees the files rank 0 does: the checkpoint folder (a token
 * file rank 0 writes there is read by each rank) and the training data (its
 * content fingerprint); refused, naming each rank and node that does not.
 * After rank 0 has readied the folder; all ranks call it. */
ds_status ds_ranks_check_shared(run_state *r);
void ds_ranks_close(run_state *r);
/* Every rank's step time, loss and infinite count into s (one allgather). */
ds_status ds_ranks_gather_metrics(run_state *r, const ds_step_out *out, ds_step_metrics *s, int global_n);
/* Stops the run, naming the ranks whose parameters differ from rank 0's. */
ds_status ds_ranks_check_sync(run_state *r, long step);

/* stop_signal.c: after ds_stop_signals_install, SIGTERM or SIGUSR1 only
 * records itself; ds_stop_signal returns its number (0: none). The run
 * agrees on it across ranks with the step's metrics and stops. */
void ds_stop_signals_install(void);
int ds_stop_signal(void);

/* fault.c: DSTRAIN_FAULT=exit|hang|inf|nan|slow|stop|killsave:RANK:STEP[-LAST]
 * makes that rank exit, hang or sleep 0.5 s before that step (steps count
 * from 1), raise SIGUSR1 there (stop), die by SIGKILL 4 KiB into the write
 * of that step's checkpoint (killsave; in the background writer's thread
 * unless --checkpoint-write sync),
 * or gives that step of s (on that rank) a NaN loss (nan) or an Inf in its
 * gradients (inf) through the fault seam (fault_seam.h), for each of the
 * steps STEP..LAST, for the tests of what the other ranks do then (slow: of
 * what bench times). Returns 1 where nan or inf was asked for at this step
 * (s NULL: nothing is poisoned), else 0. */
int ds_fault_inject(int rank, long step, ds_stepper *s);
/* killsave: called by rank 0's save of step (no save in flight then); arms
 * the SIGKILL for that step's write. */
void ds_fault_arm_save(long step);

#endif
