/* cli_bench.c - `dstrain bench`: every configuration (batch x precision x
 * mode) timed, printed as a table row as it finishes, and written as JSON
 * and CSV. Without a launcher, each configuration of a sweep runs in a fresh
 * process of this program (so an out-of-memory, or what one configuration
 * leaves behind, never touches the next), and --batch max searches the
 * largest batch that fits with such probes. Under mpiexec/srun every rank
 * runs the configurations in turn, in-process. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_report.h"
#include "cli.h"
#include "flags.h"
#include "cpu_isa.h"
#include "file.h"
#include "rank_agree.h"
#include "world.h"

extern char **environ;

#define MAX_LIST 64

typedef struct {
    ds_bench_cfg base;            /* everything but batch, precision and mode */
    int batches[MAX_LIST], n_batches, batch_max, max_bound;
    ds_dtype precs[4];
    int n_precs;
    ds_bench_mode modes[2];
    int n_modes;
    const char *out, *csv, *child_out;
    double timeout;
    int argc;
    char **argv;
} bench_args;

enum {
    O_MODEL = 256, O_CONFIG, O_SYNTH, O_MAX_FRAMES, O_DIST, O_DATA, O_DEVICE, O_BATCH, O_MAX_BATCH,
    O_PRECISION, O_MODE, O_TF32, O_DETERMINISTIC, O_MEM_LIMIT, O_SEED, O_WARMUP, O_STEPS,
    O_PROFILE, O_TRACE, O_ALLREDUCE, O_BUCKET, O_TIMEOUT, O_OUT, O_CSV, O_CHILD_OUT, O_BUCKET_FRAMES,
    O_CPU_BIND, O_RNN_ALGO, O_CUDA_GRAPHS, O_CUDA_GRAPHS_MAX
};

/* The options of dstrain bench: its --help and its part of docs/cli.md
 * (flags.h). */
static const ds_flag bench_flags[] = {
    DS_FLAG_SECTION("what"),
    DS_FLAG_ARG(O_MODEL, "model", "PRESET", "tiny",
                "model preset: a name from `configs/`, as tiny or ds2 (`dstrain info` lists them)"),
    DS_FLAG_ARG(O_CONFIG, "config", "FILE", NULL, "model config JSON instead of a preset"),
    DS_FLAG_SWITCH(O_SYNTH, "synthetic", "generated speech-shaped batches (the default)"),
    DS_FLAG_ARG(O_MAX_FRAMES, "max-frames", "T", "400; 1700 with `--length-dist librispeech`",
                "longest synthetic utterance, 10 ms frames"),
    DS_FLAG_ARG(O_BUCKET_FRAMES, "bucket-frames", "N", "0",
                DS_CLI_BUCKET_FRAMES_HELP),
    DS_FLAG_ARG(O_DIST, "length-dist", "D", "read",
                "read | librispeech: how synthetic lengths spread (read: most near 3/4 of "
                "--max-frames; librispeech: mostly 12 to 17 seconds)"),
    DS_FLAG_ARG(O_DATA, "data", "H5", NULL,
                "batches from a feature file (`dstrain prep`) instead"),
    DS_FLAG_ARG(O_DEVICE, "device", "cpu|cuda", "cpu", "backend"),
    DS_FLAG_ARG(O_CPU_BIND, "cpu-bind", "gpu|none", "gpu", DS_CLI_CPU_BIND_HELP),
    DS_FLAG_ARG(O_RNN_ALGO, "rnn-algo", "standard|auto|persist", "standard", DS_CLI_RNN_ALGO_HELP),
    DS_FLAG_SWITCH(O_CUDA_GRAPHS, "cuda-graphs",
                   DS_CLI_CUDA_GRAPHS_HELP ". Train steps only; --profile kernels then has no "
                   "layer ranges, --profile layers is refused"),
    DS_FLAG_ARG(O_CUDA_GRAPHS_MAX, "cuda-graphs-max", "N", "32", DS_CLI_CUDA_GRAPHS_MAX_HELP),
    DS_FLAG_ARG(O_BATCH, "batch", "LIST|max", "8",
                "utterances per step and rank, e.g. `1,2,4,8`; max: the powers of two up to the "
                "largest batch that fits, and that one"),
    DS_FLAG_ARG(O_MAX_BATCH, "max-batch", "N", "1024", "the largest batch `--batch max` tries"),
    DS_FLAG_ARG(O_PRECISION, "precision", "LIST", "fp32", "comma-separated, of fp32, fp16, bf16 and fp64 (as `fp32,fp16`)"),
    DS_FLAG_ARG(O_MODE, "mode", "LIST", "train",
                "train (forward, loss, backward, update) and/or forward (forward and loss, "
                "BatchNorm in training mode)"),
    DS_FLAG_SWITCH(O_TF32, "tf32", "fp32 products may use TF32 tensor cores (cuda)"),
    DS_FLAG_SWITCH(O_DETERMINISTIC, "deterministic",
                   "only algorithms that give the same bits run to run"),
    DS_FLAG_ARG(O_MEM_LIMIT, "mem-limit", "MIB", NULL,
                "fail allocations past MIB of backend memory, as a smaller device would (to try "
                "`--batch max`)"),
    DS_FLAG_ARG(O_SEED, "seed", "S", "1", "seed of the weights and the synthetic data"),
    DS_FLAG_SECTION("timing"),
    DS_FLAG_ARG(O_WARMUP, "warmup", "N", "10",
                "untimed steps first (at least 1: it starts the clock)"),
    DS_FLAG_ARG(O_STEPS, "steps", "N", "50", "timed steps"),
    DS_FLAG_ARG(O_PROFILE, "profile", "P", "none",
                "none | layers: each layer's forward and backward time (CUDA events on the GPU, "
                "the clock on the CPU) | kernels (cuda): also the top kernels (CUPTI) by layer"),
    DS_FLAG_ARG(O_TRACE, "trace", "FILE", NULL,
                "with --profile: a Chrome/Perfetto trace of the timed steps"),
    DS_FLAG_SECTION("ranks"),
    DS_FLAG_ARG(O_ALLREDUCE, "allreduce", "mpi|nccl", "nccl with --device cuda where built in, else mpi",
                "gradient reduction"),
    DS_FLAG_ARG(O_BUCKET, "bucket-mb", "M", "25", "gradient bucket size in MiB"),
    DS_FLAG_ARG(O_TIMEOUT, "timeout", "S", "300",
                "end the job when a rank waits on others for S seconds; 0: wait for ever, no "
                "watchdog"),
    DS_FLAG_SECTION("output"),
    DS_FLAG_ARG(O_OUT, "out", "FILE.json", NULL,
                "results: one object per configuration, and the environment"),
    DS_FLAG_ARG(O_CSV, "csv", "FILE.csv", NULL, "the same results, one row each"),
    /* a sweep's fresh process writes its result here for its parent */
    {.name = "child-out", .has_arg = 1, .metavar = "FILE", .id = O_CHILD_OUT, .hidden = 1,
     .help = "(internal) where a configuration run in a fresh process writes its result"},
    DS_FLAG_END};

const ds_flag_cmd ds_cli_bench_cmd = {
    .name = "bench",
    .run = ds_cli_bench,
    .summary = "time training steps: batch sizes, precisions, layers, kernels",
    .usage = "dstrain bench --model PRESET [--synthetic | --data H5] [options]",
    .about = "Times training steps per configuration (each batch x precision x mode): samples/s "
             "(median, mean and 95% interval), step time, audio seconds per second, the model's "
             "FLOP/s and its share of the device's peak, peak memory; with --profile, where the "
             "time goes. Under mpiexec/srun every rank runs; the batch is per rank.",
    .flags = bench_flags};

/* "a,b,c" split in place into at most max items; returns how many, -1 when
 * there are more. */
static int split(char *s, char **item, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max)
            return -1;
        item[n++] = tok;
    }
    return n;
}

static int parse_list(const char *flag, const char *arg, bench_args *a)
{
    char buf[1024], *item[MAX_LIST];
    snprintf(buf, sizeof buf, "%s", arg);
    const int n = split(buf, item, MAX_LIST);
    if (n <= 0) {
        fprintf(stderr, "dstrain bench: --%s %s: expected a comma-separated list of up to %d\n", flag,
                arg, MAX_LIST);
        return -1;
    }
    double v;
    for (int i = 0; i < n; i++) {
        if (!strcmp(flag, "batch")) {
            if (!strcmp(item[i], "max") && n == 1) {
                a->batch_max = 1;
                a->n_batches = 0;
                return 0;
            }
            if (ds_cli_count("bench", "batch", item[i], 1, 1e6, &v))
                return -1;
            a->batches[i] = (int)v;
            a->batch_max = 0;
        } else if (!strcmp(flag, "precision")) {
            if (n > 4) {
                fprintf(stderr, "dstrain bench: --precision %s: at most the four precisions\n", arg);
                return -1;
            }
            if (ds_cli_precision("bench", "precision", item[i], &a->precs[i]))
                return -1;
        } else if (n <= 2 && (!strcmp(item[i], "train") || !strcmp(item[i], "forward"))) {
            a->modes[i] = item[i][0] == 't' ? DS_BENCH_TRAIN : DS_BENCH_FORWARD;
        } else {
            fprintf(stderr, "dstrain bench: --mode %s: expected train, forward or train,forward\n", arg);
            return -1;
        }
    }
    if (!strcmp(flag, "batch"))
        a->n_batches = n;
    else if (!strcmp(flag, "precision"))
        a->n_precs = n;
    else
        a->n_modes = n;
    return 0;
}

static int parse_bench(int argc, char **argv, bench_args *a)
{
    const char *preset = NULL, *config = NULL;
    int c, bad = 0, have_frames = 0, synthetic = 0, pick = 0, have_allreduce = 0;
    double v;
    *a = (bench_args){.n_batches = 1, .batches = {8}, .max_bound = 1024, .n_precs = 1,
                      .precs = {DS_F32}, .n_modes = 1, .modes = {DS_BENCH_TRAIN}, .timeout = 300,
                      .argc = argc, .argv = argv};
    ds_bench_cfg *b = &a->base;
    *b = (ds_bench_cfg){.warmup = 10, .steps = 50, .dist = DS_LEN_READ,
                        .run = {.device = "cpu", .precision = DS_F32, .batch = 8, .synthetic_utts = 1 << 30,
                                .max_frames = 400, .seed = 1, .optim = ds_optim_defaults(),
                                .bucket_mb = 25, .graphs_max = 32}};
    b->run.optim.max_grad_norm = 400;
    ds_flags fl;
    if ((c = ds_flags_begin(&fl, &ds_cli_bench_cmd, argc, argv)) != DS_FLAGS_GO)
        return c == 0 ? -1 : c;   /* -1: --help, done */
    while (!bad && (c = ds_flags_next(&fl)) != -1) {
        switch (c) {
        case O_MODEL: preset = optarg; break;
        case O_CONFIG: config = optarg; break;
        case O_SYNTH: synthetic = 1; break;
        case O_MAX_FRAMES:
            bad = ds_cli_count("bench", "max-frames", optarg, 1, 1e6, &v);
            b->run.max_frames = (int)v;
            have_frames = 1;
            break;
        case O_BUCKET_FRAMES:
            bad = ds_cli_count("bench", "bucket-frames", optarg, 0, 4096, &v);
            b->run.bucket_frames = (int)v;
            break;
        case O_DIST:   /* in ds_len_dist's order */
            bad = ds_cli_choice("bench", "length-dist", optarg,
                                (const char *const[]){"read", "librispeech", NULL}, &pick);
            b->dist = (ds_length_dist)pick;
            break;
        case O_DATA: b->run.train_path = optarg; break;
        case O_DEVICE: b->run.device = optarg; break;
        case O_RNN_ALGO:
            bad = ds_cli_choice("bench", "rnn-algo", optarg, DS_CLI_RNN_ALGO_NAMES, &b->run.compute.rnn_algo);
            break;
        case O_CUDA_GRAPHS: b->run.compute.capturable = 1; break;
        case O_CUDA_GRAPHS_MAX:
            bad = ds_cli_count("bench", "cuda-graphs-max", optarg, 1, 4096, &v);
            b->run.graphs_max = (int)v;
            break;
        case O_CPU_BIND: {
            int on = 1;
            bad = ds_cli_choice("bench", "cpu-bind", optarg, DS_CLI_CPU_BIND_NAMES, &on);
            b->run.no_cpu_bind = !on;
            break;
        }
        case O_BATCH: bad = parse_list("batch", optarg, a); break;
        case O_MAX_BATCH: bad = ds_cli_count("bench", "max-batch", optarg, 1, 1e6, &v); a->max_bound = (int)v; break;
        case O_PRECISION: bad = parse_list("precision", optarg, a); break;
        case O_MODE: bad = parse_list("mode", optarg, a); break;
        case O_TF32: b->run.compute.tf32 = 1; break;
        case O_DETERMINISTIC: b->run.compute.deterministic = 1; break;
        case O_MEM_LIMIT:
            bad = ds_cli_num("bench", "mem-limit", optarg, 1, 1e9, &v);
            b->run.compute.mem_limit = (size_t)(v * 1048576);
            break;
        case O_SEED: bad = ds_cli_count("bench", "seed", optarg, 0, 1.8e19, &v); b->run.seed = (uint64_t)v; break;
        case O_WARMUP: bad = ds_cli_count("bench", "warmup", optarg, 1, 1e9, &v); b->warmup = (int)v; break;
        case O_STEPS: bad = ds_cli_count("bench", "steps", optarg, 1, 1e9, &v); b->steps = (int)v; break;
        case O_PROFILE:   /* in ds_bench_profile's order */
            bad = ds_cli_choice("bench", "profile", optarg,
                                (const char *const[]){"none", "layers", "kernels", NULL}, &pick);
            b->profile = (ds_bench_profile)pick;
            break;
        case O_TRACE: b->trace_path = optarg; break;
        case O_ALLREDUCE:
            bad = ds_reduce_kind_parse(optarg, &b->run.allreduce) != DS_OK;
            have_allreduce = 1;
            if (bad)
                fprintf(stderr, "dstrain bench: %s\n", ds_status_last_error());
            break;
        case O_BUCKET: bad = ds_cli_num("bench", "bucket-mb", optarg, 1e-6, 1e5, &b->run.bucket_mb); break;
        case O_TIMEOUT: bad = ds_cli_num("bench", "timeout", optarg, 0, 1e7, &a->timeout); break;
        case O_OUT: a->out = optarg; break;
        case O_CSV: a->csv = optarg; break;
        case O_CHILD_OUT: a->child_out = optarg; break;
        default: return ds_flags_unhandled(&fl, c);
        }
    }
    if (bad)
        return 2;
    if (optind < argc) {
        fprintf(stderr, "dstrain bench: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if ((preset && config) || (synthetic && b->run.train_path)) {
        fprintf(stderr, "dstrain bench: give --model or --config, and --synthetic or --data, not both\n");
        return 2;
    }
    if (ds_cli_graphs_device("bench", &b->run.compute, b->run.device))
        return 2;
    if (b->run.compute.capturable && b->profile == DS_PROFILE_LAYERS) {
        fprintf(stderr, "dstrain bench: --profile layers times ranges inside the step, which a "
                "captured step (--cuda-graphs) does not replay: give one of them\n");
        return 2;
    }
    if (b->trace_path && b->profile == DS_PROFILE_NONE) {
        fprintf(stderr, "dstrain bench: --trace needs --profile layers or kernels\n");
        return 2;
    }
    /* outputs refused before the benchmark runs, not after it */
    const char *out_what[] = {"results (--out)", "CSV (--csv)", "trace (--trace)"};
    const char *outs[] = {a->out, a->csv, b->trace_path};
    /* ... and none of them is one of its inputs, by any name */
    const char *in_what[] = {"model config (--config)", "features (--data)"};
    const char *ins[] = {config, b->run.train_path};
    for (int k = 0; k < 3; k++)
        if (outs[k]) {
            ds_status st = ds_file_output_ok(outs[k], out_what[k]);
            if (st == DS_OK)
                st = ds_file_refuse_output_over_input("bench", out_what[k], outs[k], in_what, ins, 2);
            if (st != DS_OK)
                return ds_cli_fail("bench", st);
        }
    if (b->dist == DS_LEN_LIBRISPEECH && !have_frames)
        b->run.max_frames = 1700;
    b->run.reduce_dtype = DS_F32;   /* set per precision */
    if (!have_allreduce)
        b->run.allreduce = ds_reduce_default(b->run.device);
    return ds_cli_load_model("bench", preset, config, &b->run.model);
}

/* ---- one configuration ---- */

static ds_bench_cfg config_of(const bench_args *a, int batch, ds_dtype prec, ds_bench_mode mode)
{
    ds_bench_cfg c = a->base;
    c.run.batch = batch;
    c.run.precision = c.run.reduce_dtype = prec;
    c.run.reduce_dtype_set = 1;
    c.mode = mode;
    /* fp16 trains with a dynamic loss scale, as dstrain train does */
    c.run.optim.loss_scale = prec == DS_F16 ? 65536 : 1;
    c.run.optim.loss_scale_window = prec == DS_F16 ? 2000 : 0;
    return c;
}

static cJSON *error_result(const ds_bench_cfg *c, const char *why);

/* Runs c here; the result as JSON, or after printing the failure NULL (a
 * child: the failure as a result, for its parent's table). */
static cJSON *run_here(const ds_bench_cfg *c, int measure_peak, int child)
{
    ds_bench_cfg cc = *c;
    cc.measure_peak = measure_peak;
    ds_bench_result res;
    ds_status st = ds_bench_run(&cc, &res);
    if (st != DS_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s: %.480s", ds_status_name(st), ds_status_last_error());
        ds_cli_fail("bench", st);
        ds_bench_result_free(&res);
        return child ? error_result(c, why) : NULL;
    }
    cJSON *o = ds_bench_result_json(&cc, &res);
    ds_bench_result_free(&res);
    return o;
}

static cJSON *error_result(const ds_bench_cfg *c, const char *why)
{
    ds_bench_result res = {.status = DS_ERR_BACKEND, .ranks = 1, .global_batch = c->run.batch};
    snprintf(res.error, sizeof res.error, "%s", why);
    return ds_bench_result_json(c, &res);
}

static cJSON *read_child(const char *path)
{
    char *text;
    if (ds_file_read_text(path, (size_t)1 << 26, "a probe's result", &text) != DS_OK) {
        ds_status_clear_error();   /* the caller says how the probe ended */
        return NULL;
    }
    cJSON *doc = cJSON_Parse(text), *results = cJSON_GetObjectItem(doc, "results");
    free(text);
    cJSON *o = cJSON_IsArray(results) ? cJSON_DetachItemFromArray(results, 0) : NULL;
    cJSON_Delete(doc);
    return o;
}

/* Runs c in a fresh process of this program (its console output dropped,
 * its errors shown); warmup/steps < 0: c's. */
static cJSON *run_child(const bench_args *a, const ds_bench_cfg *c, int warmup, int steps)
{
    char tmp[] = "/tmp/dstrain-bench-XXXXXX", batch[16], w[16], s[16];
    int fd = mkstemp(tmp);
    if (fd < 0)
        return error_result(c, "cannot create a temporary file in /tmp");
    close(fd);
    snprintf(batch, sizeof batch, "%d", c->run.batch);
    snprintf(w, sizeof w, "%d", warmup > 0 ? warmup : c->warmup);
    snprintf(s, sizeof s, "%d", steps > 0 ? steps : c->steps);
    const char *extra[] = {"--batch", batch, "--precision", ds_bench_precision_name(c->run.precision),
                           "--mode", c->mode == DS_BENCH_FORWARD ? "forward" : "train",
                           "--warmup", w, "--steps", s, "--child-out", tmp};
    const int n_extra = sizeof extra / sizeof extra[0];
    char **argv = calloc((size_t)(a->argc + n_extra + 3), sizeof *argv);
    if (!argv) {
        unlink(tmp);
        return error_result(c, "out of memory starting a probe");
    }
    int k = 0;
    argv[k++] = "dstrain";
    argv[k++] = "bench";
    for (int i = 1; i < a->argc; i++)
        argv[k++] = a->argv[i];
    for (int i = 0; i < n_extra; i++)
        argv[k++] = (char *)extra[i];
    if (warmup > 0)   /* a probe: only whether it fits */
        argv[k++] = "--profile=none";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ), status = 0;
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    char why[256];
    cJSON *o = NULL;
    if (rc != 0) {
        snprintf(why, sizeof why, "cannot start a fresh process: %s", strerror(rc));
    } else if (waitpid(pid, &status, 0) < 0) {
        snprintf(why, sizeof why, "waiting for the fresh process: %s", strerror(errno));
    } else if (!(o = read_child(tmp))) {
        if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "the process was killed by signal %d", WTERMSIG(status));
        else
            snprintf(why, sizeof why, "the process exited with status %d and no result",
                     WEXITSTATUS(status));
    }
    unlink(tmp);
    return o ? o : error_result(c, why);
}

static int status_is(const cJSON *o, const char *s)
{
    const cJSON *x = cJSON_GetObjectItem(o, "status");
    return cJSON_IsString(x) && !strcmp(x->valuestring, s);
}

/* Does batch b fit? One warm-up and one timed step in a fresh process;
 * -1 when the probe failed for another reason than memory (printed). */
static int fits(const bench_args *a, const ds_bench_cfg *c0, int b)
{
    ds_bench_cfg c = *c0;
    c.run.batch = b;
    cJSON *o = run_child(a, &c, 1, 1);
    const int ok = status_is(o, "ok") ? 1 : status_is(o, "oom") ? 0 : -1;
    const cJSON *err = cJSON_GetObjectItem(o, "error");
    printf("# batch %d: %s\n", b, ok == 1 ? "fits" : ok == 0 ? "does not fit" : "failed");
    if (ok < 0)
        fprintf(stderr, "dstrain bench: probe of batch %d: %s\n", b,
                cJSON_IsString(err) ? err->valuestring : "?");
    fflush(stdout);
    cJSON_Delete(o);
    return ok;
}

/* The largest batch up to a->max_bound that fits: doubling, then halving
 * the gap. 0 when not even 1 fits, -1 when a probe failed. */
static int search_max(const bench_args *a, const ds_bench_cfg *c)
{
    int ok = 0, bad = 0, f;
    for (int b = 1; b <= a->max_bound; b *= 2) {
        if ((f = fits(a, c, b)) < 0)
            return -1;
        if (!f) {
            bad = b;
            break;
        }
        ok = b;
    }
    if (!bad) {
        if (ok < a->max_bound && (f = fits(a, c, a->max_bound)) != 0)
            return f < 0 ? -1 : a->max_bound;
        return ok;
    }
    while (bad - ok > 1) {
        const int mid = ok + (bad - ok) / 2;
        if ((f = fits(a, c, mid)) < 0)
            return -1;
        *(f ? &ok : &bad) = mid;
    }
    return ok;
}

/* ---- the sweep ---- */

typedef struct {
    cJSON *results;
    double cpu_peak[2];           /* sgemm, dgemm; 0: not yet measured */
    char cpu_how[2][160];
    int rank;
    char *hosts, *cpus;           /* rank 0: [ranks][DS_BENCH_HOST], [ranks][DS_BENCH_CPU] */
    int ranks;
} sweep;

/* The CPU's GEMM rate, measured once per run in this process (the children
 * of a sweep leave it to their parent). */
static void cpu_peak(sweep *w, cJSON *o, ds_dtype prec)
{
    const int d = prec == DS_F64;
    if (!w->cpu_peak[d]) {
        const ds_backend *cpu = ds_backend_get("cpu");
        ds_ctx *ctx;
        if (cpu->ctx_create(0, NULL, &ctx) != DS_OK)
            return;
        w->cpu_peak[d] = cpu->peak_flops(ctx, prec, 0, w->cpu_how[d], sizeof w->cpu_how[d]);
        cpu->ctx_destroy(ctx);
    }
    ds_bench_set_peak(o, w->cpu_peak[d], w->cpu_how[d]);
}

static void add_result(sweep *w, const bench_args *a, cJSON *o, ds_dtype prec, int from_child)
{
    if (from_child && !strcmp(a->base.run.device, "cpu") && status_is(o, "ok"))
        cpu_peak(w, o, prec);
    if (w->rank == 0 && !a->child_out) {
        ds_bench_table_row(stdout, o);
        fflush(stdout);
    }
    cJSON_AddItemToArray(w->results, o);
}

/* Every batch of one precision and mode. */
static int sweep_one(sweep *w, const bench_args *a, ds_dtype prec, ds_bench_mode mode, int spawn)
{
    int batches[MAX_LIST + 32], n = 0;
    ds_bench_cfg c = config_of(a, a->batch_max ? 1 : a->batches[0], prec, mode);
    if (a->batch_max) {
        const int max = search_max(a, &c);
        if (max < 0)
            return 1;
        printf("# largest batch that fits: %d (%s, %s)\n", max, ds_bench_precision_name(prec),
               mode == DS_BENCH_TRAIN ? "train" : "forward");
        for (int b = 1; b < max; b *= 2)
            batches[n++] = b;
        if (max > 0)
            batches[n++] = max;
    } else {
        memcpy(batches, a->batches, (size_t)a->n_batches * sizeof *batches);
        n = a->n_batches;
    }
    for (int i = 0; i < n; i++) {
        c.run.batch = batches[i];
        cJSON *o = spawn ? run_child(a, &c, -1, -1) : run_here(&c, strcmp(c.run.device, "cpu") || !a->child_out,
                                                                 a->child_out != NULL);
        if (!o)
            return 1;
        add_result(w, a, o, prec, spawn);
    }
    return 0;
}

/* Launched by mpiexec or srun (a fresh process of ours would join the job). */
static int launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") ||
           getenv("PMI_SIZE");
}

/* Every rank's host and CPU model, on rank 0 (w->hosts, w->cpus): the
 * results say which machines they were measured on. world NULL: this one. */
static ds_status gather_nodes(sweep *w, const ds_world *world)
{
    char host[DS_BENCH_HOST] = "", cpu[DS_BENCH_CPU] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "unknown");
    ds_bench_cpu_model(cpu, sizeof cpu);
    w->ranks = world ? world->size : 1;
    if (w->rank == 0) {
        w->hosts = calloc((size_t)w->ranks, DS_BENCH_HOST);
        w->cpus = calloc((size_t)w->ranks, DS_BENCH_CPU);
        if (!w->hosts || !w->cpus)
            return DS_FAIL(DS_ERR_MEM, "host names of %d ranks", w->ranks);
    }
    if (!world) {
        memcpy(w->hosts, host, sizeof host);
        memcpy(w->cpus, cpu, sizeof cpu);
        return DS_OK;
    }
    DS_TRY(ds_world_check(MPI_Gather(host, DS_BENCH_HOST, MPI_CHAR, w->hosts, DS_BENCH_HOST, MPI_CHAR, 0,
                                     world->comm), "MPI_Gather (host names)"));
    return ds_world_check(MPI_Gather(cpu, DS_BENCH_CPU, MPI_CHAR, w->cpus, DS_BENCH_CPU, MPI_CHAR, 0,
                                     world->comm), "MPI_Gather (CPU models)");
}

static int write_outputs(const bench_args *a, sweep *w)
{
    ds_status st = DS_OK;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "tool", "dstrain bench");
    cJSON_AddNumberToObject(doc, "schema", 1);
    if (!a->child_out) {
        cJSON *env = ds_bench_env_json(a->argc + 1, a->argv - 1, a->base.run.device);
        if (w->hosts)
            ds_bench_env_add_nodes(env, w->hosts, w->cpus, w->ranks);
        cJSON_AddItemToObject(doc, "env", env);
    }
    cJSON_AddItemReferenceToObject(doc, "results", w->results);
    if (a->child_out)
        st = ds_bench_write_json(a->child_out, doc);
    else if (a->out)
        st = ds_bench_write_json(a->out, doc);
    if (st == DS_OK && a->csv && !a->child_out)
        st = ds_bench_write_csv(a->csv, w->results);
    cJSON_Delete(doc);
    return st == DS_OK ? 0 : ds_cli_fail("bench", st);
}

int ds_cli_bench(int argc, char **argv)
{
    bench_args a;
    int rc = parse_bench(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    ds_world world;
    const int mpi = launched();
    if (mpi) {
        const ds_backend *be = ds_backend_get(a.base.run.device);
        ds_status st = ds_world_init(&world, be ? be->device_count() : 0, a.timeout);
        if (st == DS_OK && a.base.run.allreduce == DS_REDUCE_NCCL)
            st = ds_device_bind(world.local_rank, world.local_size, world.binding.visible_devices, 1,
                                &world.binding);
        if (st != DS_OK)
            return ds_cli_fail("bench", st);
        a.base.run.world = &world;
        if (a.batch_max) {
            fprintf(stderr, "dstrain bench: --batch max probes in fresh processes: run it without "
                            "mpiexec/srun, then pass the batch it finds\n");
            ds_world_finalize(&world);
            return 2;
        }
    }
    sweep w = {.results = cJSON_CreateArray(), .rank = mpi ? world.rank : 0};
    if (gather_nodes(&w, mpi ? &world : NULL) != DS_OK) {
        cJSON_Delete(w.results);
        rc = ds_cli_fail("bench", DS_ERR_MPI);
        if (mpi)
            ds_world_abort(&world, "bench failed (see above)");
        return rc;
    }
    const int configs = (a.batch_max ? 2 : a.n_batches) * a.n_precs * a.n_modes;
    const int spawn = !mpi && !a.child_out && configs > 1;
    if (w.rank == 0 && !a.child_out) {
        char on[64];   /* on the CPU: which instruction set its ops run */
        if (strcmp(a.base.run.device, "cpu"))
            snprintf(on, sizeof on, "%s", a.base.run.device);
        else
            snprintf(on, sizeof on, "cpu (%s ops)", ds_cpu_isa_name(ds_cpu_isa_chosen()));
        printf("# dstrain bench: %s on %s, %d warm-up + %d timed steps per configuration%s\n",
               a.base.run.model.name, on, a.base.warmup, a.base.steps,
               spawn ? ", each in a fresh process" : "");
        ds_bench_table_head(stdout);
    }
    rc = 0;
    for (int p = 0; !rc && p < a.n_precs; p++)
        for (int m = 0; !rc && m < a.n_modes; m++)
            rc = sweep_one(&w, &a, a.precs[p], a.modes[m], spawn);
    if (w.rank == 0) {
        const cJSON *o;
        if (!a.child_out)
            cJSON_ArrayForEach(o, w.results)
                ds_bench_print_layers(stdout, o);
        if (!rc)
            rc = write_outputs(&a, &w);
    }
    cJSON_Delete(w.results);
    free(w.hosts);
    free(w.cpus);
    if (mpi) {
        if (rc && world.size > 1 && !ds_rank_agree_refused())   /* refused by all: none waits */
            ds_world_abort(&world, "bench failed (see above)");
        ds_world_finalize(&world);
    }
    return rc;
}
