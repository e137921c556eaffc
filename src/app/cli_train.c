/* cli_train.c - `dstrain train`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"
#include "loader.h"
#include "train.h"

static void train_usage(FILE *f)
{
    fprintf(f,
        "usage: dstrain train [--model PRESET | --config FILE] (--train H5 [--val H5] | --synthetic) [options]\n"
        "\n"
        "model and data:\n"
        "  --model PRESET        model preset: tiny, small, ds2, ds2-large, ds2-medium (default tiny)\n"
        "  --config FILE         model config JSON (see configs/)\n"
        "  --train H5            training features (dstrain prep); or --synthetic\n"
        "  --val H5              validation features: loss, WER and CER after every epoch\n"
        "  --min-duration S      skip utterances shorter than S seconds (default 0)\n"
        "  --max-duration S      skip utterances longer than S seconds (default: no limit)\n"
        "  --norm N              feature normalisation: utterance | global | none (default utterance)\n"
        "  --spec-augment        SpecAugment: 2 frequency masks of up to 27 bins, 2 time masks\n"
        "                        of up to 40 frames\n"
        "  --synthetic           train on generated speech-shaped data (no data files needed)\n"
        "  --synthetic-utts N    utterances in a synthetic epoch (default 1024)\n"
        "  --max-frames T        longest synthetic utterance in 10 ms frames (default 400)\n"
        "run:\n"
        "  --device cpu|cuda     backend (default cpu)\n"
        "  --precision P         fp32 | fp16 | bf16 | fp64 (default fp32); fp16 and bf16 keep\n"
        "                        FP32 master weights and BatchNorm; on the cpu they are emulated\n"
        "                        (16-bit storage, FP32 arithmetic)\n"
        "  --deterministic       only algorithms that give the same bits run to run (cuda: cuDNN\n"
        "                        convolution algorithms; the cpu always is)\n"
        "  --tf32                let fp32 matrix products and convolutions use TF32 tensor cores\n"
        "                        (cuda, Ampere and later; about 3 decimal digits fewer)\n"
        "  --batch B             utterances per step (default 8)\n"
        "  --steps N             stop after N steps (default: 100 on synthetic data, else --epochs)\n"
        "  --epochs N            passes over the data (default 1; synthetic: of --synthetic-utts)\n"
        "  --seed S              seed of the initial weights and the data (default 1)\n"
        "optimizer:\n"
        "  --optimizer sgd|adamw (default sgd, Nesterov momentum 0.9, as deepspeech.pytorch)\n"
        "  --lr X                learning rate (default 3e-4)\n"
        "  --momentum X          sgd momentum (default 0.9)\n"
        "  --no-nesterov         plain momentum instead of Nesterov\n"
        "  --weight-decay X      (default 1e-5; decoupled for adamw)\n"
        "  --lr-schedule S       constant | anneal (lr / A^epoch) | poly (default anneal)\n"
        "  --anneal A            per-epoch anneal factor (default 1.1)\n"
        "  --poly-power P        power of the polynomial decay (default 1)\n"
        "  --warmup N            linear warm-up over the first N steps (default 0)\n"
        "  --max-norm X          clip the global gradient norm (default 400; 0 = off)\n"
        "  --loss-scale S|dynamic  multiply the loss by S before backward and divide the\n"
        "                        gradients by it; dynamic: start at 65536, x2 after\n"
        "                        --loss-scale-window clean steps, x0.5 and skip the step on\n"
        "                        Inf/NaN (default: dynamic for fp16, else 1 = none)\n"
        "  --loss-scale-window N clean steps before a dynamic scale doubles (default 2000)\n"
        "  --max-bad-steps K     stop after K consecutive steps skipped for a non-finite loss\n"
        "                        or gradient (default 100; 0: never)\n"
        "ranks (mpiexec -np N / srun; --batch is per rank, the global batch is N x B):\n"
        "  --allreduce mpi|nccl  gradient reduction (default mpi; nccl: --device cuda, one GPU per rank)\n"
        "  --bucket-mb M         gradient bucket size in MiB, reduced as backward finishes it (25)\n"
        "  --reduce-dtype P      fp32 | fp16 | bf16 | fp64: sum gradients across ranks in this\n"
        "                        type (default: the --precision's)\n"
        "  --check-sync K        compare parameter checksums across ranks every K steps (0: off)\n"
        "  --local-bn            BatchNorm statistics per rank instead of synchronised\n"
        "  --timeout S           end the job when a rank waits on others for S seconds\n"
        "                        (default 300; 0: wait for ever, no watchdog)\n"
        "checkpoints:\n"
        "  --checkpoint-dir D    write DIR/step-NNNNNNNN.h5: parameters, BatchNorm state,\n"
        "                        optimizer state, position in the data, options (all checksummed)\n"
        "  --checkpoint-every N  every N steps too (default 0: only at the end of every epoch\n"
        "                        and of the run)\n"
        "  --resume auto|PATH    go on from a checkpoint, exactly where it was made: auto takes\n"
        "                        the newest in --checkpoint-dir that validates (a damaged one is\n"
        "                        reported and the one before it tried; none yet: start at step\n"
        "                        0); a checkpoint of a different model, precision, optimizer,\n"
        "                        seed, data or global batch is refused, saying what differs.\n"
        "                        The rank count may change if the global batch stays the same\n"
        "  --keep K              keep only the K newest checkpoints (default 0: all)\n"
        "  --checkpoint-error E  stop (default) | continue: what a failed save (full disk) does;\n"
        "                        either way the previous checkpoint stays whole\n"
        "output:\n"
        "  --log FILE.jsonl      one JSON object per step\n"
        "  --print-every K       console line (with the batch CER) every K steps (default 10;\n"
        "                        0: only at the end)\n"
        "  --help                this text\n");
}

enum {
    O_MODEL = 256, O_CONFIG, O_SYNTH, O_SYNTH_UTTS, O_MAX_FRAMES, O_TRAIN, O_VAL, O_DEVICE,
    O_PRECISION, O_BATCH, O_STEPS, O_EPOCHS, O_SEED, O_OPTIMIZER, O_LR, O_MOMENTUM,
    O_NO_NESTEROV, O_WD, O_SCHEDULE, O_ANNEAL, O_POLY, O_WARMUP, O_MAX_NORM, O_LOG, O_PRINT,
    O_HELP, O_MIN_DUR, O_MAX_DUR, O_NORM, O_SPECAUG, O_CKPT_DIR, O_CKPT_EVERY, O_ALLREDUCE,
    O_BUCKET, O_CHECK_SYNC, O_LOCAL_BN, O_TIMEOUT, O_DETERMINISTIC, O_TF32, O_LOSS_SCALE,
    O_SCALE_WINDOW, O_REDUCE_DTYPE, O_CKPT_ERROR, O_MAX_BAD, O_KEEP, O_RESUME
};

static const struct option train_options[] = {
    {"model", 1, 0, O_MODEL}, {"config", 1, 0, O_CONFIG}, {"synthetic", 0, 0, O_SYNTH},
    {"synthetic-utts", 1, 0, O_SYNTH_UTTS}, {"max-frames", 1, 0, O_MAX_FRAMES},
    {"train", 1, 0, O_TRAIN}, {"val", 1, 0, O_VAL}, {"device", 1, 0, O_DEVICE},
    {"precision", 1, 0, O_PRECISION}, {"batch", 1, 0, O_BATCH}, {"steps", 1, 0, O_STEPS},
    {"epochs", 1, 0, O_EPOCHS}, {"seed", 1, 0, O_SEED}, {"optimizer", 1, 0, O_OPTIMIZER},
    {"lr", 1, 0, O_LR}, {"momentum", 1, 0, O_MOMENTUM}, {"no-nesterov", 0, 0, O_NO_NESTEROV},
    {"weight-decay", 1, 0, O_WD}, {"lr-schedule", 1, 0, O_SCHEDULE}, {"anneal", 1, 0, O_ANNEAL},
    {"poly-power", 1, 0, O_POLY}, {"warmup", 1, 0, O_WARMUP}, {"max-norm", 1, 0, O_MAX_NORM},
    {"log", 1, 0, O_LOG}, {"print-every", 1, 0, O_PRINT}, {"help", 0, 0, O_HELP},
    {"min-duration", 1, 0, O_MIN_DUR}, {"max-duration", 1, 0, O_MAX_DUR}, {"norm", 1, 0, O_NORM},
    {"spec-augment", 0, 0, O_SPECAUG}, {"checkpoint-dir", 1, 0, O_CKPT_DIR},
    {"checkpoint-every", 1, 0, O_CKPT_EVERY}, {"allreduce", 1, 0, O_ALLREDUCE},
    {"bucket-mb", 1, 0, O_BUCKET}, {"check-sync", 1, 0, O_CHECK_SYNC}, {"local-bn", 0, 0, O_LOCAL_BN},
    {"timeout", 1, 0, O_TIMEOUT}, {"deterministic", 0, 0, O_DETERMINISTIC},
    {"tf32", 0, 0, O_TF32}, {"loss-scale", 1, 0, O_LOSS_SCALE},
    {"loss-scale-window", 1, 0, O_SCALE_WINDOW}, {"reduce-dtype", 1, 0, O_REDUCE_DTYPE},
    {"checkpoint-error", 1, 0, O_CKPT_ERROR}, {"max-bad-steps", 1, 0, O_MAX_BAD},
    {"keep", 1, 0, O_KEEP}, {"resume", 1, 0, O_RESUME},
    {0, 0, 0, 0}};

static int num(const char *flag, const char *s, double lo, double hi, double *out)
{
    return ds_cli_num("train", flag, s, lo, hi, out);
}

static int parse_precision(const char *flag, const char *s, ds_dtype *out)
{
    return ds_cli_precision("train", flag, s, out);
}

static int parse_train(int argc, char **argv, ds_train_opts *o, int *synthetic, double *timeout)
{
    const char *preset = NULL, *config = NULL;
    double v;
    int c, bad = 0;
    *o = (ds_train_opts){.device = "cpu", .precision = DS_F32, .batch = 8, .steps = 0,
                         .epochs = 0, .synthetic_utts = 1024, .max_frames = 400, .seed = 1,
                         .optim = ds_optim_defaults(), .print_every = 10, .bucket_mb = 25,
                         .max_bad_steps = 100};
    *timeout = 300;
    long steps = -1;   /* -1: not given */
    double loss_scale = -1, window = 2000;   /* -1: not given; 0: dynamic */
    int have_window = 0;
    ds_dtype reduce_dtype = DS_F32;
    int have_reduce = 0;
    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "", train_options, NULL)) != -1) {
        switch (c) {
        case O_MODEL: preset = optarg; break;
        case O_CONFIG: config = optarg; break;
        case O_SYNTH: *synthetic = 1; break;
        case O_SYNTH_UTTS: bad = num("synthetic-utts", optarg, 1, 1e9, &v); o->synthetic_utts = (int)v; break;
        case O_MAX_FRAMES: bad = num("max-frames", optarg, 1, 1e6, &v); o->max_frames = (int)v; break;
        case O_TRAIN: o->train_path = optarg; break;
        case O_VAL: o->val_path = optarg; break;
        case O_MIN_DUR: bad = num("min-duration", optarg, 0, 1e6, &o->min_duration); break;
        case O_MAX_DUR: bad = num("max-duration", optarg, 0, 1e6, &o->max_duration); break;
        case O_NORM: bad = ds_norm_parse(optarg, &o->norm) != DS_OK; break;
        case O_SPECAUG: o->aug = (ds_specaug){2, 27, 2, 40}; break;
        case O_CKPT_DIR: o->checkpoint_dir = optarg; break;
        case O_MAX_BAD: bad = num("max-bad-steps", optarg, 0, 1e12, &v); o->max_bad_steps = (long)v; break;
        case O_KEEP: bad = num("keep", optarg, 0, 1e6, &v); o->checkpoint_keep = (int)v; break;
        case O_RESUME: o->resume = optarg; break;
        case O_CKPT_ERROR:
            bad = ds_cli_choice("train", "checkpoint-error", optarg,
                                (const char *const[]){"stop", "continue", NULL},
                                &o->checkpoint_continue);
            break;
        case O_CKPT_EVERY: bad = num("checkpoint-every", optarg, 0, 1e12, &v); o->checkpoint_every = (long)v; break;
        case O_ALLREDUCE: bad = ds_reduce_kind_parse(optarg, &o->allreduce) != DS_OK; break;
        case O_BUCKET: bad = num("bucket-mb", optarg, 1e-6, 1e5, &o->bucket_mb); break;
        case O_CHECK_SYNC: bad = num("check-sync", optarg, 0, 1e12, &v); o->check_sync = (long)v; break;
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
        case O_BATCH: bad = num("batch", optarg, 1, 1e6, &v); o->batch = (int)v; break;
        case O_STEPS: bad = num("steps", optarg, 1, 1e12, &v); steps = (long)v; break;
        case O_EPOCHS: bad = num("epochs", optarg, 1, 1e6, &v); o->epochs = (int)v; break;
        case O_SEED: bad = num("seed", optarg, 0, 1.8e19, &v); o->seed = (uint64_t)v; break;
        case O_OPTIMIZER: bad = ds_optim_parse_kind(optarg, &o->optim.kind) != DS_OK; break;
        case O_LR: bad = num("lr", optarg, 0, 1e3, &o->optim.lr); break;
        case O_MOMENTUM: bad = num("momentum", optarg, 0, 1, &o->optim.momentum); break;
        case O_NO_NESTEROV: o->optim.nesterov = 0; break;
        case O_WD: bad = num("weight-decay", optarg, 0, 1e3, &o->optim.weight_decay); break;
        case O_SCHEDULE: bad = ds_optim_parse_schedule(optarg, &o->optim.schedule) != DS_OK; break;
        case O_ANNEAL: bad = num("anneal", optarg, 1e-6, 1e6, &o->optim.anneal); break;
        case O_POLY: bad = num("poly-power", optarg, 0, 100, &o->optim.poly_power); break;
        case O_WARMUP: bad = num("warmup", optarg, 0, 1e12, &v); o->optim.warmup_steps = (long)v; break;
        case O_MAX_NORM: bad = num("max-norm", optarg, 0, 1e12, &o->optim.max_grad_norm); break;
        case O_LOSS_SCALE:
            if (!strcmp(optarg, "dynamic"))
                loss_scale = 0;
            else
                bad = num("loss-scale", optarg, 1, 1e30, &loss_scale);
            break;
        case O_SCALE_WINDOW:
            bad = num("loss-scale-window", optarg, 1, 1e12, &window);
            have_window = 1;
            break;
        case O_LOG: o->log_path = optarg; break;
        case O_PRINT: bad = num("print-every", optarg, 0, 1e12, &v); o->print_every = (int)v; break;
        case O_HELP: train_usage(stdout); exit(0);
        default: train_usage(stderr); return 2;
        }
        if (bad && (c == O_OPTIMIZER || c == O_SCHEDULE || c == O_NORM || c == O_ALLREDUCE))
            fprintf(stderr, "dstrain train: %s\n", ds_last_error());
    }
    if (bad)
        return 2;
    if (optind < argc) {
        fprintf(stderr, "dstrain train: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
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
    o->reduce_dtype = have_reduce ? reduce_dtype : o->precision;
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
    return ds_cli_load_model(preset, config, &o->model);
}

/* Ends the job when a rank fails while others may be waiting on it. */
static int fail_ranks(ds_world *w, ds_status st)
{
    int rc = ds_cli_fail("train", st);
    if (w->size > 1)
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
        return rc;
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
        st = ds_bind_device(world.local_rank, world.local_size, world.binding.visible_devices, 1,
                            &world.binding);
    if (st != DS_OK)
        return fail_ranks(&world, st);
    o.world = &world;
    ds_print("dstrain train: %s, %zu parameters, %s on %s, %d rank%s x batch %d, seed %llu\n",
             o.model.name, ds_config_param_count(&o.model), ds_dtype_name(o.precision), o.device,
             world.size, world.size > 1 ? "s" : "", o.batch, (unsigned long long)o.seed);
    ds_train_result r;
    st = ds_train(&o, &r);
    if (st != DS_OK)
        return fail_ranks(&world, st);
    if (r.stop_signal) {   /* a scheduler's SIGTERM or SIGUSR1: saved, exit "try again" */
        ds_print("stopped by %s after step %ld: %s%s\n", strsignal(r.stop_signal), r.steps,
                 r.stop_checkpoint[0] ? "checkpoint " : "nothing saved (no --checkpoint-dir)",
                 r.stop_checkpoint);
        ds_world_finalize(&world);
        return DS_EXIT_PREEMPTED;
    }
    ds_print("done: %ld steps, loss %.4f -> %.4f", r.steps, r.first_loss, r.last_loss);
    if (r.last_cer >= 0)
        ds_print(", batch CER %.3f", r.last_cer);
    if (r.steps > 1)
        ds_print(", %.1f ms/step, %.1f utt/s", r.mean_step_ms, r.samples_per_s);
    ds_print("%s\n", r.skipped ? " (some steps skipped)" : "");
    if (r.val_cer >= 0)
        ds_print("validation: WER %.3f  CER %.3f  loss %.4f\n", r.val_wer, r.val_cer, r.val_loss);
    ds_print("%s memory: %.1f MiB in use, %.1f MiB at peak\n", o.device, r.mem_in_use / 1048576.0,
             r.mem_peak / 1048576.0);
    ds_world_finalize(&world);
    return 0;
}
