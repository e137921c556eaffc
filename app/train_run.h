/* train_run.h - the state of one training run, in parts by job: the model
 * and backend, the data (train_data.c), the ranks (ranks.c), the position
 * (resume.c, the loop) and the loop's own (train.c). Private to the app
 * layer. */
#ifndef DS_TRAIN_RUN_H
#define DS_TRAIN_RUN_H

#include "checkpoint.h"
#include "dir_lock.h"
#include "file.h"
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

/* The backend, model, optimizer and stepper of a run: train.c opens and
 * closes them; the loop, the ranks, resume and bench step or read them. */
typedef struct {
    const ds_backend *be;
    ds_ctx *ctx;
    ds_model *model;
    ds_optim *optim;
    ds_stepper *stepper;
    ds_optim_cfg ocfg;          /* the options' schedule, its total steps filled in */
} run_model;

/* The run's data: train_data.c owns it (synthetic batches, or HDF5
 * feature files through the sampler and the prefetching loader). */
typedef struct {
    const ds_train_opts *o;     /* the options, this rank and the ranks (read only): */
    int rank, ranks;            /* set by ds_train_data_open */
    ds_feature_cfg feat;
    long per_epoch;             /* global batches (steps) of an epoch */
    /* HDF5 data */
    ds_dataset *train, *val;
    long *keep, n_keep, *val_keep, n_val;
    ds_filter_stats fs;
    ds_sampler *sampler;
    ds_loader *loader;
    /* synthetic data: every rank draws the same global batch and takes its share */
    ds_rng rng;                 /* also checkpointed and resumed */
    ds_batch synth_global, synth;
    long synth_left;
    long batch_pos;             /* global batches of the epoch drawn so far (the next one's index) */
} run_data;

/* What the ranks share: ranks.c owns it. */
typedef struct {
    ds_dist dist;
    int rank, ranks;
    double *gathered;           /* [ranks][4] step time, loss, n_inf, stop signal of every rank */
    int stop_signal;            /* agreed by every rank: stop after the step read last */
    unsigned char *sync_host;   /* [sync_bytes] the master parameters as stored, for --check-sync */
    size_t sync_bytes;
    uint64_t *sync_sums;        /* [ranks] their checksums */
} run_ranks;

/* Where the run is: resume.c sets it from a checkpoint (0 and -1 unless
 * resumed); the loop moves it on as it saves, validates and skips steps. */
typedef struct {
    /* where the run starts */
    long start_step, start_batch;
    int start_epoch;
    long bad_run;               /* consecutive steps skipped for a non-finite gradient */
    long saved_step;            /* the step of the last checkpoint written or resumed; -1: none */
    long tried_step;            /* the step of the last save tried or resumed (a failed one
                                 * is not retried, one step is saved once) */
    int tried_ended;            /* that save goes on at the next epoch (its epoch validated) */
    long validated_step;        /* the step the last validation followed; -1: none */
} run_position;

/* The loop's own: train.c. */
typedef struct {
    long total;                 /* the run's steps */
    ds_launched pending;        /* the loop reads each step after launching the next */
    ds_score_batch *scorer;
    ds_log log;
    ds_dir_lock ckpt_lock;      /* rank 0: the checkpoint folder, held for the run */
    char *ckpt_dir;             /* rank 0: --checkpoint-dir's real path, resolved once at start */
    ds_file_id ckpt_dir_id;     /* ... and the folder it was then (a swap stops the run) */
    char run_id[DS_RUN_ID_LEN + 1]; /* rank 0: this run's identity, kept by resumes */
    struct ds_ckpt_writer *ckpt;  /* rank 0 with --checkpoint-dir: saves beside training */
    char run_config[DS_RUN_CONFIG_MAX]; /* the options as key=value lines (run_config.h), for checkpoints */
    ds_progress progress;       /* the bar (rank 0, --progress bar) */
} run_loop;

/* One run, its parts by job. */
typedef struct {
    const ds_train_opts *o;     /* the run's options, read by every part */
    run_model m;                /* train.c opens it; all step or read it */
    run_data data;              /* train_data.c */
    run_ranks ranks;            /* ranks.c */
    run_position pos;           /* resume.c sets it, the loop moves it on */
    run_loop loop;              /* train.c */
} run_state;

/* train.c: the backend, data, model, optimizer, stepper and ranks of a run
 * of o, every buffer planned (dstrain bench times steps on one of these);
 * close frees what open made, also after a failed open. */
ds_status ds_train_run_open(const ds_train_opts *o, run_state *r);
void ds_train_run_close(run_state *r);

/* train_data.c */
/* --bucket-frames in input frames: bucket_frames x the conv stack's time
 * stride, so a batch's output length is about a multiple of bucket_frames;
 * 0 when off. */
int ds_train_round_frames(const ds_train_opts *o);
/* b padded to a multiple of ds_train_round_frames(o) frames (its buffers
 * have room: allocated for the rounded max_frames). */
ds_status ds_train_round_batch(const ds_train_opts *o, ds_batch *b);
ds_status ds_train_data_open(run_data *d, const ds_train_opts *o, int rank, int ranks,
                             ds_model_limits *lim);
/* A resumed run's first epoch (pos) goes on where its checkpoint was made. */
ds_status ds_train_data_epoch_begin(run_data *d, const run_position *pos, int epoch);
/* The next batch of the epoch, or NULL at its end. */
ds_status ds_train_data_next_batch(run_data *d, const ds_batch **b);
/* Whether the epoch has no batch left to train on, without drawing one: a
 * checkpoint made then goes on at the next epoch's first batch. */
int ds_train_data_epoch_exhausted(const run_data *d, int epoch);
void ds_train_data_close(run_data *d);

/* resume.c: --resume: finds (auto) or takes the checkpoint, checks that it
 * was made by the same run (the loop's run_config), loads the model and
 * optimizer on every rank and sets where the loop starts (r->pos, and the
 * data's generator). */
ds_status ds_resume_run(run_state *r);

/* ckpt_folder.c: rank 0, after the resume: the run's identity (the resumed
 * checkpoint's, or a new one) and its checkpoints already in the folder,
 * handed to the writer; a fresh run in a folder holding checkpoints is
 * refused, naming them. */
ds_status ds_ckpt_folder_claim(run_state *r);

/* ranks.c: setup, check_sync and check_shared read the model, the options
 * and the data as well as r->ranks; close and gather_metrics only r->ranks. */
ds_status ds_ranks_setup(run_state *r);
/* The hooks the model is created with (ds_model_create_hooked): over
 * several ranks, every rank runs rank 0's start-up choices (choice_agree.h),
 * and a rank that would have chosen otherwise says so; NULL on one rank. */
const ds_model_hooks *ds_ranks_create_hooks(run_state *r, ds_model_hooks *h);
/* The backend's start-up choices (algorithms), on rank 0's console: each
 * one, or for many a count per choice. */
void ds_ranks_log_choices(const run_state *r);
/* Rank 0's bytes [count] of dt to every rank of world (a ds_world *), in
 * pieces MPI's int counts take: the share callback of ds_model_share_params
 * and ds_model_share_state. */
ds_status ds_ranks_bcast_bytes(void *world, void *bytes, size_t count, ds_dtype dt);
/* Every rank sees the checkpoint folder rank 0 writes to (a token file
 * rank 0 writes there is read by each rank); refused, naming each rank and
 * node that does not. The data is the ranks' agreement's (rank_agree.h).
 * After rank 0 has readied the folder; all ranks call it. */
ds_status ds_ranks_check_shared(run_state *r);
void ds_ranks_close(run_ranks *k);
/* Every rank's step time, loss and infinite count into s (one allgather
 * over world), and the stop signal any rank saw. */
ds_status ds_ranks_gather_metrics(run_ranks *k, ds_world *world, const ds_step_out *out,
                                  ds_step_metrics *s, int global_n);
/* Stops the run, naming the ranks whose parameters differ from rank 0's. */
ds_status ds_ranks_check_sync(run_state *r, long step);

/* stop_signal.c: after ds_stop_signals_install, SIGTERM or SIGUSR1 only
 * records itself; ds_stop_signal returns its number (0: none). The run
 * agrees on it across ranks with the step's metrics and stops. */
void ds_stop_signals_install(void);
int ds_stop_signal(void);

/* fault.c: DSTRAIN_FAULT=exit|hang|inf|nan|slow|stop|pause|killsave:RANK:STEP[-LAST]
 * makes that rank exit, hang or sleep 0.5 s before that step (steps count
 * from 1), raise SIGUSR1 there (stop), stop itself by SIGSTOP until a
 * SIGCONT (pause: a test changes the run's files meanwhile), die by SIGKILL 4 KiB into the write
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
