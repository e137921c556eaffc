/* train.h - the training step and the loop around it. */
#ifndef DS_TRAIN_H
#define DS_TRAIN_H

#include <stdint.h>

#include "file.h"
#include "batch.h"
#include "config.h"
#include "loader.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "reduce.h"
#include "stepper.h"
#include "world.h"

typedef struct {
    ds_model_cfg model;
    const char *device;        /* "cpu" | "cuda" */
    ds_dtype precision;
    ds_ctx_opts compute;       /* --deterministic, --tf32 */
    int batch;                 /* utterances per step */
    long steps;                /* stop after this many steps, 0: after epochs */
    int epochs;
    uint64_t seed;
    ds_optim_cfg optim;
    const char *log_path;
    int print_every;           /* console line every K steps (and the CER) */
    int progress;              /* a progress bar on rank 0's terminal (progress.h) */
    /* data: HDF5 feature files, or synthetic when train_path is NULL */
    const char *train_path, *val_path;
    long val_every;               /* validate every val_every steps too; 0: at epoch ends only */
    int loader_threads, prefetch; /* the loader's readers and batch buffers; 0: its defaults */
    double min_duration, max_duration;   /* seconds; max <= 0: no limit */
    ds_norm norm;
    ds_specaug aug;
    int synthetic_utts;        /* utterances in a synthetic epoch */
    int max_frames;            /* longest synthetic utterance */
    int bucket_frames;         /* each batch padded to a multiple of this many output
                                * frames (ds_train_round_frames); 0: to its longest */
    /* checkpoints */
    const char *checkpoint_dir;   /* NULL: none */
    long checkpoint_every;        /* steps; 0: at the end of each epoch */
    int checkpoint_continue;      /* a failed save warns and training goes on */
    int checkpoint_keep;          /* newest checkpoints kept; 0: all */
    int checkpoint_sync;          /* 1: written before the next step; 0: in the background */
    long max_bad_steps;           /* stop after this many consecutive skipped steps; 0: never */
    const char *resume;           /* "auto": the newest valid checkpoint in checkpoint_dir
                                   * (none yet: start afresh); a path: that one; NULL: none */
    /* data parallelism: batch is per rank, the global batch is ranks x batch */
    ds_world *world;              /* NULL: one process */
    ds_reduce_kind allreduce;
    ds_dtype reduce_dtype;        /* with reduce_dtype_set: gradients are summed across ranks in this dtype */
    int reduce_dtype_set;         /* 0 (zeroed options): summed in the precision */
    double bucket_mb;             /* gradient bucket size (MiB) */
    long check_sync;              /* compare parameter checksums every K steps, 0: never */
    int local_bn;                 /* 1: BatchNorm statistics per rank (not synchronised) */
    int graphs_max;               /* --cuda-graphs-max: captured step shapes held at most
                                   * (with compute.capturable, --cuda-graphs) */
    int no_cpu_bind;              /* 1: --cpu-bind none; 0 (zeroed options): a GPU rank's threads
                                   * go to the CPUs nearest its GPU (cpu_binding.h) */
} ds_train_opts;

typedef struct {
    long steps, skipped;                  /* the step reached (counted from 1), steps skipped */
    long start_step, total;               /* where this process began (a resume), where the run ends */
    double first_loss, last_loss;
    double last_cer;                      /* of the last printed training batch */
    double val_cer, val_wer, val_loss;    /* after the last epoch; < 0 without --val */
    double mean_step_ms, samples_per_s;   /* steps after the first (warm) */
    size_t mem_in_use, mem_peak;          /* backend memory (bytes) after the run, at its peak */
    int stop_signal;                      /* SIGTERM/SIGUSR1 ended the run early; 0: it ran out */
    char stop_checkpoint[DS_PATH_MAX + 32];           /* written when it stopped; "" without --checkpoint-dir */
} ds_train_result;

/* dstrain train's exit status when SIGTERM or SIGUSR1 stopped it after a
 * step (checkpoint written): EX_TEMPFAIL, "try again", for a requeue. */
#define DS_EXIT_PREEMPTED 75

ds_status ds_train(const ds_train_opts *o, ds_train_result *res);

#endif
