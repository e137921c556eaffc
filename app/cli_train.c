/* cli_train.c - `dstrain train`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "file.h"
#include "flags.h"
#include "model.h"
#include "rank_agree.h"
#include "loader.h"
#include "train.h"

enum {
    O_MODEL = 256, O_CONFIG, O_SYNTH, O_SYNTH_UTTS, O_MAX_FRAMES, O_TRAIN, O_VAL, O_DEVICE,
    O_PRECISION, O_BATCH, O_STEPS, O_EPOCHS, O_SEED, O_OPTIMIZER, O_LR, O_MOMENTUM,
    O_NO_NESTEROV, O_WD, O_SCHEDULE, O_ANNEAL, O_POLY, O_WARMUP, O_MAX_NORM, O_LOG, O_PRINT,
    O_MIN_DUR, O_MAX_DUR, O_NORM, O_SPECAUG, O_CKPT_DIR, O_CKPT_EVERY, O_ALLREDUCE,
    O_BUCKET, O_CHECK_SYNC, O_LOCAL_BN, O_TIMEOUT, O_DETERMINISTIC, O_TF32, O_LOSS_SCALE,
    O_SCALE_WINDOW, O_REDUCE_DTYPE, O_CKPT_ERROR, O_MAX_BAD, O_KEEP, O_RESUME, O_PROGRESS,
    O_CKPT_WRITE, O_VAL_EVERY, O_LOADER_THREADS, O_PREFETCH, O_BUCKET_FRAMES,
    O_CPU_BIND, O_RNN_ALGO, O_CUDA_GRAPHS, O_CUDA_GRAPHS_MAX
};

/* The options of dstrain train: its --help and its part of docs/cli.md
 * (flags.h). */
static const ds_flag train_flags[] = {
    DS_FLAG_SECTION("model and data"),
    DS_FLAG_ARG(O_MODEL, "model", "PRESET", "tiny",
                "model preset: a name from `configs/`, as tiny or ds2 (`dstrain info` lists them)"),
    DS_FLAG_ARG(O_CONFIG, "config", "FILE", NULL,
                "model config JSON instead of a preset (see `configs/`)"),
    DS_FLAG_ARG(O_TRAIN, "train", "H5", NULL, "training features (`dstrain prep`); or --synthetic"),
    DS_FLAG_ARG(O_VAL, "val", "H5", NULL,
                "validation features: loss, WER and CER after every epoch, each rank scoring "
                "its share"),
    DS_FLAG_ARG(O_VAL_EVERY, "val-every", "N", "0",
                "validate every N steps too (with --val); 0: only at the end of every epoch"),
    DS_FLAG_ARG(O_MIN_DUR, "min-duration", "S", "0", "skip utterances shorter than S seconds"),
    DS_FLAG_ARG(O_MAX_DUR, "max-duration", "S", "no limit",
                "skip utterances longer than S seconds"),
    DS_FLAG_ARG(O_LOADER_THREADS, "loader-threads", "N", "2",
                "reader threads of each rank's data loader (read, convert, normalise, augment "
                "batches ahead of the step); the batches are the same bits whatever N"),
    DS_FLAG_ARG(O_PREFETCH, "prefetch", "N", "4",
                "batch buffers of each rank's loader, the one the step holds included (>= 2); "
                "each holds batch x longest utterance x features floats"),
    DS_FLAG_ARG(O_NORM, "norm", "N", "utterance",
                "feature normalisation when batches are formed: utterance (as deepspeech.pytorch) "
                "| global | none"),
    DS_FLAG_SWITCH(O_SPECAUG, "spec-augment",
                   "SpecAugment: 2 frequency masks of up to 27 bins, 2 time masks of up to 40 "
                   "frames"),
    DS_FLAG_SWITCH(O_SYNTH, "synthetic",
                   "train on generated speech-shaped data instead of --train (no data files "
                   "needed)"),
    DS_FLAG_ARG(O_SYNTH_UTTS, "synthetic-utts", "N", "1024", "utterances in a synthetic epoch"),
    DS_FLAG_ARG(O_MAX_FRAMES, "max-frames", "T", "400",
                "longest synthetic utterance in 10 ms frames"),
    DS_FLAG_ARG(O_BUCKET_FRAMES, "bucket-frames", "N", "0",
                DS_CLI_BUCKET_FRAMES_HELP),
    DS_FLAG_SECTION("run"),
    DS_FLAG_ARG(O_DEVICE, "device", "cpu|cuda", "cpu", "backend"),
    DS_FLAG_ARG(O_CPU_BIND, "cpu-bind", "gpu|none", "gpu", DS_CLI_CPU_BIND_HELP),
    DS_FLAG_ARG(O_RNN_ALGO, "rnn-algo", "standard|auto|persist", "standard", DS_CLI_RNN_ALGO_HELP),
    DS_FLAG_SWITCH(O_CUDA_GRAPHS, "cuda-graphs", DS_CLI_CUDA_GRAPHS_HELP),
    DS_FLAG_ARG(O_CUDA_GRAPHS_MAX, "cuda-graphs-max", "N", "32", DS_CLI_CUDA_GRAPHS_MAX_HELP),
    {.name = "precision", .has_arg = 1, .metavar = "P", .def = "fp32", .id = O_PRECISION,
     .help = "compute type: fp32 | fp16 | bf16 | fp64. fp16 and bf16 keep FP32 master weights, "
             "optimizer state and BatchNorm (parameters and statistics), CTC in FP64 inside; "
             "fp16 defaults to dynamic loss scaling. On the cpu they are emulated: 16-bit "
             "storage, FP32 arithmetic, each op's output rounded once",
     .more = "On the GPU: cuDNN and cuBLASLt in 16 bits with FP32 accumulation (tensor cores), "
             "our kernels widen to FP32 and round each output once (`cuda/README.md`); bf16 RNNs "
             "need cuDNN 9.13 or later."},
    DS_FLAG_SWITCH(O_DETERMINISTIC, "deterministic",
                   "only algorithms that give the same bits run to run (cuda: cuDNN convolution "
                   "algorithms chosen by heuristic rather than timing, so every run picks the "
                   "same; the cpu always is)"),
    DS_FLAG_SWITCH(O_TF32, "tf32",
                   "let fp32 matrix products, convolutions and RNNs use TF32 tensor cores (cuda, "
                   "Ampere and later; about 3 decimal digits fewer)"),
    DS_FLAG_ARG(O_BATCH, "batch", "B", "8", "utterances per step and rank"),
    DS_FLAG_ARG(O_STEPS, "steps", "N", "100 on synthetic data, else --epochs",
                "stop after N steps"),
    DS_FLAG_ARG(O_EPOCHS, "epochs", "N", "1",
                "passes over the data; synthetic: over --synthetic-utts utterances"),
    DS_FLAG_ARG(O_SEED, "seed", "S", "1",
                "seed of the initial weights and the data; same seed, same numbers"),
    DS_FLAG_SECTION("optimizer"),
    DS_FLAG_ARG(O_OPTIMIZER, "optimizer", "sgd|adamw", "sgd",
                "sgd: Nesterov momentum 0.9, as deepspeech.pytorch; adamw: decoupled weight "
                "decay"),
    DS_FLAG_ARG(O_LR, "lr", "X", "3e-4", "learning rate"),
    DS_FLAG_ARG(O_MOMENTUM, "momentum", "X", "0.9", "sgd momentum"),
    DS_FLAG_SWITCH(O_NO_NESTEROV, "no-nesterov", "plain momentum instead of Nesterov"),
    DS_FLAG_ARG(O_WD, "weight-decay", "X", "1e-5", "weight decay, decoupled for adamw"),
    DS_FLAG_ARG(O_SCHEDULE, "lr-schedule", "S", "anneal",
                "constant | anneal (lr / A^epoch) | poly (lr x (1 - step / steps)^P)"),
    DS_FLAG_ARG(O_ANNEAL, "anneal", "A", "1.1", "per-epoch anneal factor"),
    DS_FLAG_ARG(O_POLY, "poly-power", "P", "1", "power of the polynomial decay"),
    DS_FLAG_ARG(O_WARMUP, "warmup", "N", "0: none", "linear warm-up over the first N steps"),
    DS_FLAG_ARG(O_MAX_NORM, "max-norm", "X", "400", "clip the global gradient norm; 0: off"),
    DS_FLAG_ARG(O_LOSS_SCALE, "loss-scale", "S|dynamic", "dynamic for fp16, else 1: none",
                "multiply the loss by S before backward and divide the gradients by it in the "
                "update; dynamic: start at 65536, x2 after --loss-scale-window clean steps, x0.5 "
                "and skip the step on Inf/NaN, never below 1"),
    DS_FLAG_ARG(O_SCALE_WINDOW, "loss-scale-window", "N", "2000",
                "clean steps before a dynamic scale doubles"),
    DS_FLAG_ARG(O_MAX_BAD, "max-bad-steps", "K", "100",
                "stop after K consecutive steps skipped for a non-finite loss or gradient, naming "
                "them; 0: never. A skipped step leaves the parameters as they were on every rank"),
    DS_FLAG_SECTION("ranks (`mpiexec -np N` / `srun`; --batch is per rank, the global batch is N x B)"),
    DS_FLAG_ARG(O_ALLREDUCE, "allreduce", "mpi|nccl", "nccl with --device cuda where built in, else mpi",
                "gradient reduction across ranks (nccl: `--device cuda`, one GPU per rank; mpi "
                "stages through the host: for ranks that share a GPU, or a build without NCCL)"),
    DS_FLAG_ARG(O_BUCKET, "bucket-mb", "M", "25",
                "gradient bucket size in MiB, reduced as backward finishes it"),
    DS_FLAG_ARG(O_REDUCE_DTYPE, "reduce-dtype", "P", "the --precision's",
                "fp32 | fp16 | bf16 | fp64: sum gradients across ranks in this type"),
    DS_FLAG_ARG(O_CHECK_SYNC, "check-sync", "K", "0",
                "compare parameter checksums across ranks every K steps and stop naming the ranks "
                "that differ; 0: off"),
    DS_FLAG_SWITCH(O_LOCAL_BN, "local-bn",
                   "BatchNorm statistics per rank instead of synchronised (synchronised: N ranks x "
                   "B = 1 rank x N*B)"),
    DS_FLAG_ARG(O_TIMEOUT, "timeout", "S", "300",
                "end the job when a rank waits on others for S seconds; 0: wait for ever, no "
                "watchdog"),
    DS_FLAG_SECTION("checkpoints"),
    DS_FLAG_ARG(O_CKPT_DIR, "checkpoint-dir", "D", NULL,
                "write `D/step-NNNNNNNN.h5` (parameters, BatchNorm and optimizer state, position "
                "in the data, options; all checksummed) at the end of every epoch and of the "
                "run; D and its parents are created and test-written before the first step"),
    DS_FLAG_ARG(O_CKPT_EVERY, "checkpoint-every", "N", "0",
                "every N steps too; 0: only at the end of every epoch and of the run"),
    DS_FLAG_ARG(O_RESUME, "resume", "auto|PATH", NULL,
                "go on from a checkpoint, exactly where it was made: auto takes the newest in "
                "--checkpoint-dir that validates (a damaged one is reported, file and dataset, "
                "and the one before it tried; none yet: start at step 0); a checkpoint of a "
                "different model, precision, optimizer, seed, data or global batch is refused, "
                "naming each difference. The rank count may change if the global batch stays "
                "the same"),
    DS_FLAG_ARG(O_KEEP, "keep", "K", "0: all",
                "keep only this run's K newest `step-*.h5`; old ones go only after the new one "
                "is in place, another run's never"),
    DS_FLAG_ARG(O_CKPT_WRITE, "checkpoint-write", "W", "background",
                "background | sync: background copies the checkpoint into host memory at the step "
                "boundary (training waits only for that copy) and writes, checksums and fsyncs "
                "it in a thread while training goes on, one save in flight at most; a stop "
                "signal and the run's end wait for it. sync writes it before the next step"),
    DS_FLAG_ARG(O_CKPT_ERROR, "checkpoint-error", "E", "stop",
                "stop | continue: what a failed save (full disk) does: end the run, or warn and "
                "train on; either way the previous checkpoint stays whole"),
    DS_FLAG_SECTION("output"),
    DS_FLAG_ARG(O_LOG, "log", "FILE.jsonl", NULL,
                "one JSON object per step (`{\"step\":...}`), per validation "
                "(`{\"eval\":\"val\",...}`) and per checkpoint (`{\"checkpoint\":...}`: its "
                "stall and write time)"),
    DS_FLAG_ARG(O_PRINT, "print-every", "K", "10",
                "a console line with the batch's greedy CER every K steps; 0: only at the end"),
    DS_FLAG_ARG(O_PROGRESS, "progress", "auto|bar|lines", "auto",
                "bar: a progress bar redrawn in place on the console (epoch, step, loss, "
                "utterances per second, time left); lines: only the --print-every lines, for "
                "logs and pipes; auto: bar when the output is a terminal and no MPI or Slurm "
                "launcher started the run (under mpiexec every rank's output looks like a "
                "terminal, so launchers' users choose: scripts/demo.sh does)"),
    DS_FLAG_END};

const ds_flag_cmd ds_cli_train_cmd = {
    .name = "train",
    .run = ds_cli_train,
    .summary = "train a model on feature files or synthetic data",
    .usage = "dstrain train [--model PRESET | --config FILE] (--train H5 [--val H5] | --synthetic) "
             "[options]\n"
             "mpiexec -np N dstrain train ...    (data-parallel: a rank per GPU, or on the cpu)",
    .flags = train_flags};

static int num(const char *flag, const char *s, double lo, double hi, double *out)
{
    return ds_cli_num("train", flag, s, lo, hi, out);
}

static int count(const char *flag, const char *s, double lo, double hi, double *out)
{
    return ds_cli_count("train", flag, s, lo, hi, out);
}

static int parse_precision(const char *flag, const char *s, ds_dtype *out)
{
    return ds_cli_precision("train", flag, s, out);
}

/* --progress auto: a bar on a terminal, unless a launcher started the run
 * (Open MPI gives every rank a terminal, whatever mpiexec's own output is). */
static int auto_progress(void)
{
    static const char *const launched[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                           "SLURM_PROCID", NULL};
    for (int i = 0; launched[i]; i++)
        if (getenv(launched[i]))
            return 0;
    return isatty(STDOUT_FILENO);
}

static int parse_train(int argc, char **argv, ds_train_opts *o, int *synthetic, double *timeout)
{
    const char *preset = NULL, *config = NULL;
    double v;
    int c, bad = 0;
    *o = (ds_train_opts){.device = "cpu", .precision = DS_F32, .batch = 8, .steps = 0,
                         .epochs = 0, .synthetic_utts = 1024, .max_frames = 400, .seed = 1,
                         .optim = ds_optim_defaults(), .print_every = 10, .bucket_mb = 25,
                         .max_bad_steps = 100, .progress = 2 /* auto */, .graphs_max = 32};
    *timeout = 300;
    long steps = -1;   /* -1: not given */
    double loss_scale = -1, window = 2000;   /* -1: not given; 0: dynamic */
    int have_window = 0;
    ds_dtype reduce_dtype = DS_F32;
    int have_reduce = 0, have_allreduce = 0;
    ds_flags fl;
    if ((c = ds_flags_begin(&fl, &ds_cli_train_cmd, argc, argv)) != DS_FLAGS_GO)
        return c == 0 ? -1 : c;   /* -1: --help, done */
    while (!bad && (c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_MODEL: preset = optarg; break;
        case O_CONFIG: config = optarg; break;
        case O_SYNTH: *synthetic = 1; break;
        case O_SYNTH_UTTS: bad = count("synthetic-utts", optarg, 1, 1e9, &v); o->synthetic_utts = (int)v; break;
        case O_MAX_FRAMES: bad = count("max-frames", optarg, 1, 1e6, &v); o->max_frames = (int)v; break;
        case O_BUCKET_FRAMES:
            bad = count("bucket-frames", optarg, 0, 4096, &v);
            o->bucket_frames = (int)v;
            break;
        case O_RNN_ALGO:
            bad = ds_cli_choice("train", "rnn-algo", optarg, DS_CLI_RNN_ALGO_NAMES, &o->compute.rnn_algo);
            break;
        case O_CUDA_GRAPHS: o->compute.capturable = 1; break;
        case O_CUDA_GRAPHS_MAX:
            bad = count("cuda-graphs-max", optarg, 1, 4096, &v);
            o->graphs_max = (int)v;
            break;
        case O_CPU_BIND: {
            int on = 1;
            bad = ds_cli_choice("train", "cpu-bind", optarg, DS_CLI_CPU_BIND_NAMES, &on);
            o->no_cpu_bind = !on;
            break;
        }
        case O_TRAIN: o->train_path = optarg; break;
        case O_VAL: o->val_path = optarg; break;
        case O_MIN_DUR: bad = num("min-duration", optarg, 0, 1e6, &o->min_duration); break;
        case O_MAX_DUR: bad = num("max-duration", optarg, 0, 1e6, &o->max_duration); break;
        case O_NORM: bad = ds_feature_norm_parse(optarg, &o->norm) != DS_OK; break;
        case O_SPECAUG: o->aug = (ds_specaug){2, 27, 2, 40}; break;
        case O_CKPT_DIR: o->checkpoint_dir = optarg; break;
        case O_MAX_BAD: bad = count("max-bad-steps", optarg, 0, 1e12, &v); o->max_bad_steps = (long)v; break;
        case O_KEEP: bad = count("keep", optarg, 0, 1e6, &v); o->checkpoint_keep = (int)v; break;
        case O_RESUME: o->resume = optarg; break;
        case O_CKPT_ERROR:
            bad = ds_cli_choice("train", "checkpoint-error", optarg,
                                (const char *const[]){"stop", "continue", NULL},
                                &o->checkpoint_continue);
            break;
        case O_CKPT_EVERY: bad = count("checkpoint-every", optarg, 0, 1e12, &v); o->checkpoint_every = (long)v; break;
        case O_CKPT_WRITE:
            bad = ds_cli_choice("train", "checkpoint-write", optarg,
                                (const char *const[]){"background", "sync", NULL},
                                &o->checkpoint_sync);
            break;
        case O_LOADER_THREADS: bad = count("loader-threads", optarg, 1, 256, &v); o->loader_threads = (int)v; break;
        case O_PREFETCH: bad = count("prefetch", optarg, 2, 1024, &v); o->prefetch = (int)v; break;
        case O_VAL_EVERY: bad = count("val-every", optarg, 0, 1e12, &v); o->val_every = (long)v; break;
        case O_ALLREDUCE:
            bad = ds_reduce_kind_parse(optarg, &o->allreduce) != DS_OK;
            have_allreduce = 1;
            break;
        case O_BUCKET: bad = num("bucket-mb", optarg, 1e-6, 1e5, &o->bucket_mb); break;
        case O_CHECK_SYNC: bad = count("check-sync", optarg, 0, 1e12, &v); o->check_sync = (long)v; break;
        case O_LOCAL_BN: o->local_bn = 1; break;
        case O_TIMEOUT: bad = num("timeout", optarg, 0, 1e7, timeout); break;
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION: bad = parse_precision("precision", optarg, &o->precision); break;
        case O_REDUCE_DTYPE:
            bad = parse_precision("reduce-dtype", optarg, &reduce_dtype);
            have_reduce = 1;
            break;
        case O_DETERMINISTIC: o->compute.deterministic = 1; break;
        case O_TF32: o->compute.tf32 = 1; break;
        case O_BATCH: bad = count("batch", optarg, 1, 1e6, &v); o->batch = (int)v; break;
        case O_STEPS: bad = count("steps", optarg, 1, 1e12, &v); steps = (long)v; break;
        case O_EPOCHS: bad = count("epochs", optarg, 1, 1e6, &v); o->epochs = (int)v; break;
        case O_SEED: bad = count("seed", optarg, 0, 1.8e19, &v); o->seed = (uint64_t)v; break;
        case O_OPTIMIZER: bad = ds_optim_parse_kind(optarg, &o->optim.kind) != DS_OK; break;
        case O_LR: bad = num("lr", optarg, 0, 1e3, &o->optim.lr); break;
        case O_MOMENTUM: bad = num("momentum", optarg, 0, 1, &o->optim.momentum); break;
        case O_NO_NESTEROV: o->optim.nesterov = 0; break;
        case O_WD: bad = num("weight-decay", optarg, 0, 1e3, &o->optim.weight_decay); break;
        case O_SCHEDULE: bad = ds_optim_parse_schedule(optarg, &o->optim.schedule) != DS_OK; break;
        case O_ANNEAL: bad = num("anneal", optarg, 1e-6, 1e6, &o->optim.anneal); break;
        case O_POLY: bad = num("poly-power", optarg, 0, 100, &o->optim.poly_power); break;
        case O_WARMUP: bad = count("warmup", optarg, 0, 1e12, &v); o->optim.warmup_steps = (long)v; break;
        case O_MAX_NORM: bad = num("max-norm", optarg, 0, 1e12, &o->optim.max_grad_norm); break;
        case O_LOSS_SCALE:
            if (!strcmp(optarg, "dynamic"))
                loss_scale = 0;
            else
                bad = num("loss-scale", optarg, 1, 1e30, &loss_scale);
            break;
        case O_SCALE_WINDOW:
            bad = count("loss-scale-window", optarg, 1, 1e12, &window);
            have_window = 1;
            break;
        case O_LOG: o->log_path = optarg; break;
        case O_PRINT: bad = count("print-every", optarg, 0, 2147483647, &v); o->print_every = (int)v; break;
        case O_PROGRESS:
            bad = ds_cli_choice("train", "progress", optarg,
                                (const char *const[]){"lines", "bar", "auto", NULL}, &o->progress);
            break;
        default: return ds_flags_unhandled(&fl, c);
        }
        if (bad && (c == O_OPTIMIZER || c == O_SCHEDULE || c == O_NORM || c == O_ALLREDUCE))
            fprintf(stderr, "dstrain train: %s\n", ds_status_last_error());
    }
    if (bad)
        return 2;
    if (optind < argc) {
        fprintf(stderr, "dstrain train: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (ds_cli_graphs_device("train", &o->compute, o->device))
        return 2;
    if (preset && config) {
        fprintf(stderr, "dstrain train: give --model or --config, not both\n");
        return 2;
    }
    if (o->train_path && *synthetic) {
        fprintf(stderr, "dstrain train: give --train or --synthetic, not both\n");
        return 2;
    }
    if (o->resume && !*o->resume) {
        fprintf(stderr, "dstrain train: --resume needs auto or a checkpoint path\n");
        return 2;
    }
    if (o->val_path && !o->train_path) {
        fprintf(stderr, "dstrain train: --val needs --train\n");
        return 2;
    }
    if (o->val_every > 0 && !o->val_path) {
        fprintf(stderr, "dstrain train: --val-every %ld needs --val (the features to validate on)\n",
                o->val_every);
        return 2;
    }
    if (o->progress == 2)
        o->progress = auto_progress();
    o->reduce_dtype = have_reduce ? reduce_dtype : o->precision;
    o->reduce_dtype_set = 1;
    if (!have_allreduce)
        o->allreduce = ds_reduce_default(o->device);
    /* fp16 needs a loss scale (small gradients flush to zero): dynamic unless set */
    if (loss_scale < 0)
        loss_scale = o->precision == DS_F16 ? 0 : 1;
    if (have_window && loss_scale > 0) {
        fprintf(stderr, "dstrain train: --loss-scale-window applies to a dynamic scale; this run's is "
                        "%g (add --loss-scale dynamic, or leave the window out)\n", loss_scale);
        return 2;
    }
    o->optim.loss_scale = loss_scale > 0 ? loss_scale : 65536;
    o->optim.loss_scale_window = loss_scale > 0 ? 0 : (long)window;
    /* synthetic runs default to 100 steps; data runs to --epochs (1) */
    o->steps = steps >= 0 ? steps : (o->epochs > 0 || o->train_path ? 0 : 100);
    /* the log is not the config either (train.c checks it against the data) */
    const char *cfg_what[] = {"model config (--config)"}, *cfg_in[] = {config};
    const ds_status over = ds_file_refuse_output_over_input("train", "metrics log (--log)",
                                                            o->log_path, cfg_what, cfg_in, 1);
    if (over != DS_OK)
        return ds_cli_fail("train", over);
    return ds_cli_load_model("train", preset, config, &o->model);
}

/* Ends the job when a rank fails while others may be waiting on it. */
static int fail_ranks(ds_world *w, ds_status st)
{
    /* refused by all: every rank came to the same verdict, which rank 0
     * says once; none waits, none is killed. One rank's own failure names
     * the rank and its host (a file missing on one node). */
    const int by_all = w->size > 1 && ds_rank_agree_refused();
    int rc = 1;
    if (w->size > 1 && !by_all)
        fprintf(stderr, "dstrain train: rank %d on %s: %s: %s\n", w->rank, ds_world_host(w, w->rank),
                ds_status_name(st), ds_status_last_error());
    else if (!by_all || w->rank == 0)
        rc = ds_cli_fail("train", st);
    if (w->size > 1 && !by_all)
        ds_world_abort(w, "training failed (see above)");
    ds_world_finalize(w);
    return rc;
}

int ds_cli_train(int argc, char **argv)
{
    ds_train_opts o;
    int synthetic = 0;
    double timeout;
    int rc = parse_train(argc, argv, &o, &synthetic, &timeout);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!synthetic && !o.train_path) {
        fprintf(stderr, "dstrain train: no data: pass --train FILE.h5 (from dstrain prep) or "
                        "--synthetic\n");
        return 2;
    }
    /* the device is decided once, here, from the devices the backend sees */
    const ds_backend *be = ds_backend_get(o.device);
    ds_world world;
    ds_status st = ds_world_init(&world, be ? be->device_count() : 0, timeout);
    if (st == DS_OK && o.allreduce == DS_REDUCE_NCCL)   /* NCCL refuses ranks sharing a device */
        st = ds_device_bind(world.local_rank, world.local_size, world.binding.visible_devices, 1,
                            &world.binding);
    if (st != DS_OK)
        return fail_ranks(&world, st);
    o.world = &world;
    ds_log_print("dstrain train: %s, %zu parameters, %s on %s, %d rank%s x batch %d, seed %llu\n",
             o.model.name, ds_model_config_param_count(&o.model), ds_dtype_name(o.precision), o.device,
             world.size, world.size > 1 ? "s" : "", o.batch, (unsigned long long)o.seed);
    ds_train_result r;
    st = ds_train(&o, &r);
    if (st != DS_OK)
        return fail_ranks(&world, st);
    if (r.stop_signal) {   /* a scheduler's SIGTERM or SIGUSR1: saved, exit "try again" */
        ds_log_print("stopped by %s after step %ld: %s%s\n", strsignal(r.stop_signal), r.steps,
                 r.stop_checkpoint[0] ? "checkpoint " : "nothing saved (no --checkpoint-dir)",
                 r.stop_checkpoint);
        ds_world_finalize(&world);
        return DS_EXIT_PREEMPTED;
    }
    if (r.steps == r.start_step && r.start_step > 0) {   /* resumed a run already complete */
        ds_log_print("nothing to train: the checkpoint is at step %ld and this run ends at step %ld "
                 "(raise --epochs or --steps to train on)\n", r.start_step, r.total);
        ds_world_finalize(&world);
        return 0;
    }
    ds_log_print("done: %ld steps, loss %.4f -> %.4f", r.steps, ds_log_printable(r.first_loss),
             ds_log_printable(r.last_loss));
    if (r.last_cer >= 0)
        ds_log_print(", batch CER %.3f", r.last_cer);
    if (r.steps > 1)
        ds_log_print(", %.1f ms/step, %.1f utt/s", r.mean_step_ms, r.samples_per_s);
    ds_log_print("%s\n", r.skipped ? " (some steps skipped)" : "");
    if (r.val_cer >= 0)
        ds_log_print("validation: WER %.3f  CER %.3f  loss %.4f\n", r.val_wer, r.val_cer, r.val_loss);
    ds_log_print("%s memory: %.1f MiB in use, %.1f MiB at peak\n", o.device, r.mem_in_use / 1048576.0,
             r.mem_peak / 1048576.0);
    ds_world_finalize(&world);
    return 0;
}
