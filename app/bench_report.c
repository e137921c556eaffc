/* bench_report.c - a benchmark result as a JSON object (the one form every
 * output is made from: the table, the JSON file, the CSV), and what
 * reproduces it (host, devices, library versions, revision, command). */
#include <cjson/cJSON.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_report.h"
#include "file.h"
#include "build_info.h"
#include "cli.h"
#include "cpu_isa.h"
#include "reduce.h"

char *openblas_get_config(void);
int openblas_get_num_threads(void);

static const char *mode_name(ds_bench_mode m) { return m == DS_BENCH_FORWARD ? "forward" : "train"; }

const char *ds_bench_precision_name(ds_dtype t)
{
    switch (t) {
    case DS_F64: return "fp64";
    case DS_F16: return "fp16";
    case DS_BF16: return "bf16";
    default: return "fp32";
    }
}

static cJSON *numbers(const double *x, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(x[i]));
    return a;
}

static cJSON *pair(double a, double b)
{
    const double x[2] = {a, b};
    return numbers(x, 2);
}

static void add_layers(cJSON *o, const ds_bench_result *r, double step_ms)
{
    if (!r->n_layers && !r->n_phases)
        return;
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int i = 0; i < r->n_layers; i++) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "name", r->layers[i].name);
        cJSON_AddNumberToObject(l, "fwd_ms", r->layers[i].ms[0]);
        cJSON_AddNumberToObject(l, "bwd_ms", r->layers[i].ms[1]);
        cJSON_AddNumberToObject(l, "share", (r->layers[i].ms[0] + r->layers[i].ms[1]) / step_ms);
        cJSON_AddItemToArray(layers, l);
    }
    cJSON *phases = cJSON_AddArrayToObject(o, "phases");
    for (int i = 0; i < r->n_phases; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "name", r->phases[i].name);
        cJSON_AddNumberToObject(p, "ms", r->phases[i].ms[0]);
        cJSON_AddNumberToObject(p, "share", r->phases[i].ms[0] / step_ms);
        cJSON_AddItemToArray(phases, p);
    }
}

/* Where a step's time goes between the host and the device: the host's
 * enqueue time and the main thread's CPU use always; launches and summed
 * kernel time per step with --profile kernels (null otherwise), and then
 * "bound": "host" when queueing a step takes at least as long as its
 * kernels run, else "device". The kernel time sums every kernel of the
 * process, NCCL's too, which overlap the step's own: the verdict is one
 * rank's (gpu-check's timing runs one). */
/* "graphs": what --cuda-graphs did over the run (warm-up included): the
 * shapes captured, the steps replayed and run uncaptured, evictions and
 * the graphs' memory; null when steps were not captured. With graphs, the
 * kernels CUPTI counts (launches_per_step) are the graph's, while the host
 * launches one graph a step. */
static void add_graphs(cJSON *o, const ds_bench_result *r)
{
    if (!r->graphs_on) {
        cJSON_AddNullToObject(o, "graphs");
        return;
    }
    const ds_step_graph_stats *g = &r->graphs;
    cJSON *j = cJSON_AddObjectToObject(o, "graphs");
    cJSON_AddNumberToObject(j, "captured", (double)g->captures);
    cJSON_AddNumberToObject(j, "replayed_steps", (double)g->replays);
    cJSON_AddNumberToObject(j, "uncaptured_steps", (double)g->eager);
    cJSON_AddNumberToObject(j, "failed_shapes", g->failed_shapes);
    cJSON_AddNumberToObject(j, "evicted", (double)g->evictions);
    cJSON_AddNumberToObject(j, "held", g->held);
    cJSON_AddNumberToObject(j, "bytes_peak", (double)g->bytes_peak);
}

static void add_host_share(cJSON *o, const ds_bench_result *r, double step_ms)
{
    cJSON_AddNumberToObject(o, "host_enqueue_ms", r->host_enqueue_ms);
    cJSON_AddNumberToObject(o, "main_thread_cpu_share", step_ms > 0 ? r->main_cpu_ms / step_ms : 0);
    const int counted = r->kernel_launches >= 0 && r->n_steps > 0;
    if (counted) {
        cJSON_AddNumberToObject(o, "launches_per_step", (double)r->kernel_launches / r->n_steps);
        cJSON_AddNumberToObject(o, "kernel_ms_per_step", r->kernel_ms / r->n_steps);
        cJSON_AddStringToObject(o, "bound", r->host_enqueue_ms >= r->kernel_ms / r->n_steps ? "host"
                                                                                          : "device");
    } else {
        cJSON_AddNullToObject(o, "launches_per_step");
        cJSON_AddNullToObject(o, "kernel_ms_per_step");
        cJSON_AddNullToObject(o, "bound");
    }
}

static void add_kernels(cJSON *o, const ds_bench_result *r, int steps)
{
    if (!r->n_kernels)
        return;
    cJSON *ks = cJSON_AddArrayToObject(o, "kernels");
    for (int i = 0; i < r->n_kernels; i++) {
        const ds_kernel_stat *k = &r->kernels[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", k->name);
        cJSON_AddStringToObject(j, "range", k->range);
        cJSON_AddNumberToObject(j, "launches", (double)k->launches);
        cJSON_AddNumberToObject(j, "total_ms", k->total_ms);
        cJSON_AddNumberToObject(j, "ms_per_step", k->total_ms / steps);
        cJSON_AddNumberToObject(j, "max_ms", k->max_ms);
        if (k->occupancy >= 0) {
            cJSON_AddNumberToObject(j, "occupancy", k->occupancy);
            cJSON_AddStringToObject(j, "occupancy_kind", k->occupancy_achieved ? "achieved" : "theoretical");
        }
        cJSON_AddItemToArray(ks, j);
    }
}

cJSON *ds_bench_result_json(const ds_bench_cfg *c, const ds_bench_result *r)
{
    cJSON *o = cJSON_CreateObject();
    char cfg[DS_CONFIG_JSON_MAX];
    cJSON_AddStringToObject(o, "model", c->run.model.name);
    cJSON_AddStringToObject(o, "device", c->run.device);
    cJSON_AddStringToObject(o, "precision", ds_bench_precision_name(c->run.precision));
    cJSON_AddStringToObject(o, "mode", mode_name(c->mode));
    cJSON_AddStringToObject(o, "impl", "dstrain");
    cJSON_AddNumberToObject(o, "batch", c->run.batch);
    cJSON_AddNumberToObject(o, "ranks", r->ranks);
    cJSON_AddNumberToObject(o, "global_batch", r->global_batch);
    cJSON_AddStringToObject(o, "status", r->status == DS_OK ? "ok" : r->status == DS_ERR_MEM ? "oom" : "error");
    if (r->status != DS_OK)
        cJSON_AddStringToObject(o, "error", r->error);
    cJSON_AddNumberToObject(o, "warmup", c->warmup);
    cJSON_AddNumberToObject(o, "steps", c->steps);
    if (r->status == DS_OK && r->n_steps > 0) {
        double *rate = malloc((size_t)r->n_steps * sizeof *rate);
        for (int i = 0; rate && i < r->n_steps; i++)
            rate[i] = r->global_batch / (r->step_ms[i] / 1e3);
        const ds_bench_stats ms = ds_bench_stats_of(r->step_ms, r->n_steps);
        const ds_bench_stats sps = rate ? ds_bench_stats_of(rate, r->n_steps) : (ds_bench_stats){0};
        free(rate);
        double total_ms = 0;
        for (int i = 0; i < r->n_steps; i++)
            total_ms += r->step_ms[i];
        cJSON_AddNumberToObject(o, "samples_per_s", sps.median);
        cJSON_AddNumberToObject(o, "samples_per_s_mean", sps.mean);
        cJSON_AddItemToObject(o, "samples_per_s_ci95", pair(sps.lo, sps.hi));
        cJSON_AddNumberToObject(o, "samples_per_s_per_rank", sps.median / r->ranks);
        cJSON_AddNumberToObject(o, "step_ms", ms.median);
        cJSON_AddNumberToObject(o, "step_ms_mean", ms.mean);
        cJSON_AddItemToObject(o, "step_ms_ci95", pair(ms.lo, ms.hi));
        cJSON_AddItemToObject(o, "step_ms_all", numbers(r->step_ms, r->n_steps));
        cJSON_AddNumberToObject(o, "audio_s_per_s", r->audio_s / (total_ms / 1e3));
        cJSON_AddNumberToObject(o, "frames_per_step", r->frames_per_step);
        cJSON_AddNumberToObject(o, "pad_share", r->pad_share);
        cJSON_AddNumberToObject(o, "flops_per_step", r->flops_per_step);
        cJSON_AddNumberToObject(o, "flop_per_s", r->flops_per_step / (ms.median / 1e3));
        cJSON_AddNumberToObject(o, "peak_mem_bytes", (double)r->mem_bytes);
        add_host_share(o, r, ms.mean);
        add_graphs(o, r);
        cJSON *ch = cJSON_AddArrayToObject(o, "choices");   /* the algorithms that ran */
        for (int i = 0; i < r->n_choices; i++) {
            cJSON *c = cJSON_CreateObject();
            cJSON_AddStringToObject(c, "what", r->choices[i].what);
            cJSON_AddStringToObject(c, "how", r->choices[i].how);
            cJSON_AddItemToArray(ch, c);
        }
        add_layers(o, r, ms.mean);   /* shares of the mean step: layers are means too */
        add_kernels(o, r, r->n_steps);
    }
    if (r->peak_flops > 0)
        ds_bench_set_peak(o, r->peak_flops, r->peak_how);
    if (ds_config_to_json(&c->run.model, cfg, sizeof cfg) == DS_OK) {
        cJSON *m = cJSON_Parse(cfg);
        if (m)
            cJSON_AddItemToObject(o, "model_config", m);
    }
    cJSON *run = cJSON_AddObjectToObject(o, "config");
    cJSON_AddStringToObject(run, "data", c->run.train_path ? c->run.train_path : "synthetic");
    cJSON_AddStringToObject(run, "length_dist", c->dist == DS_LEN_LIBRISPEECH ? "librispeech" : "read");
    /* how the batches' utterances were put together: a file's by the sampler
     * (sorted), LibriSpeech lengths as it would (ds_synthetic_sorted_lengths) */
    cJSON_AddStringToObject(run, "batch_formation",
                            c->run.train_path || c->dist == DS_LEN_LIBRISPEECH ? "sorted" : "random");
    cJSON_AddNumberToObject(run, "max_frames", c->run.max_frames);
    cJSON_AddNumberToObject(run, "bucket_frames", c->run.bucket_frames);
    cJSON_AddNumberToObject(run, "seed", (double)c->run.seed);
    cJSON_AddBoolToObject(run, "tf32", c->run.compute.tf32);
    cJSON_AddStringToObject(run, "rnn_algo", DS_CLI_RNN_ALGO_NAMES[c->run.compute.rnn_algo]);
    cJSON_AddStringToObject(run, "cpu_bind", c->run.no_cpu_bind ? "none" : "gpu");
    cJSON_AddBoolToObject(run, "cuda_graphs", c->run.compute.capturable);
    cJSON_AddBoolToObject(run, "deterministic", c->run.compute.deterministic);
    cJSON_AddNumberToObject(run, "mem_limit_bytes", (double)c->run.compute.mem_limit);
    cJSON_AddStringToObject(run, "optimizer", c->run.optim.kind == DS_OPT_ADAMW ? "adamw" : "sgd");
    cJSON_AddStringToObject(run, "allreduce", c->run.allreduce == DS_REDUCE_NCCL ? "nccl" : "mpi");
    cJSON_AddNumberToObject(run, "bucket_mb", c->run.bucket_mb);
    cJSON_AddStringToObject(run, "profile", c->profile == DS_PROFILE_KERNELS ? "kernels"
                                            : c->profile == DS_PROFILE_LAYERS ? "layers" : "none");
    return o;
}

void ds_bench_set_peak(cJSON *o, double peak, const char *how)
{
    const cJSON *ranks = cJSON_GetObjectItem(o, "ranks"), *fps = cJSON_GetObjectItem(o, "flop_per_s");
    cJSON_DeleteItemFromObject(o, "peak_flop_per_s");
    cJSON_DeleteItemFromObject(o, "peak_source");
    cJSON_DeleteItemFromObject(o, "peak_fraction");
    cJSON_AddNumberToObject(o, "peak_flop_per_s", peak);
    cJSON_AddStringToObject(o, "peak_source", how);
    if (cJSON_IsNumber(fps) && cJSON_IsNumber(ranks) && peak > 0)   /* every device's peak */
        cJSON_AddNumberToObject(o, "peak_fraction", fps->valuedouble / (peak * ranks->valuedouble));
}

/* ---- what reproduces a run ---- */

static void first_line(const char *path, const char *key, char *out, size_t size)
{
    FILE *f = fopen(path, "r");
    char line[512];
    snprintf(out, size, "unknown");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) {
            const char *v = strchr(line, ':');
            if (v) {
                v += 1 + strspn(v + 1, " \t");
                snprintf(out, size, "%.*s", (int)strcspn(v, "\n"), v);
            }
            break;
        }
    fclose(f);
}

/* "name:   text" lines of a backend's describe() into obj, by name. */
static void add_described(cJSON *obj, const char *lines)
{
    const char *p = lines;
    while (*p) {
        const size_t len = strcspn(p, "\n"), key = strcspn(p, ":");
        if (key < len) {
            char k[32], v[512];
            snprintf(k, sizeof k, "%.*s", (int)key, p);
            const char *val = p + key + 1 + strspn(p + key + 1, " ");
            snprintf(v, sizeof v, "%.*s", (int)(p + len - val), val);
            cJSON_AddStringToObject(obj, k, v);
        }
        p += len + (p[len] == '\n');
    }
}

void ds_bench_cpu_model(char *out, size_t size)
{
    first_line("/proc/cpuinfo", "model name", out, size);
}

void ds_bench_env_add_nodes(cJSON *env, const char *hosts, const char *cpus, int n)
{
    cJSON *nodes = cJSON_AddArrayToObject(env, "nodes");
    int count = 0;
    for (int r = 0; r < n; r++) {
        const char *h = hosts + (size_t)r * DS_BENCH_HOST;
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = strcmp(hosts + (size_t)q * DS_BENCH_HOST, h) != 0;
        if (!first)
            continue;
        count++;
        cJSON *node = cJSON_CreateObject();
        cJSON_AddStringToObject(node, "host", h);
        cJSON_AddStringToObject(node, "cpu", cpus + (size_t)r * DS_BENCH_CPU);
        cJSON *ranks = cJSON_AddArrayToObject(node, "ranks");
        for (int q = r; q < n; q++)
            if (!strcmp(hosts + (size_t)q * DS_BENCH_HOST, h))
                cJSON_AddItemToArray(ranks, cJSON_CreateNumber(q));
        cJSON_AddItemToArray(nodes, node);
    }
    cJSON_AddNumberToObject(env, "node_count", count);
}

cJSON *ds_bench_env_json(int argc, char **argv, const char *device)
{
    cJSON *env = cJSON_CreateObject();
    char buf[4096], host[256] = "unknown";
    gethostname(host, sizeof host);
    cJSON_AddStringToObject(env, "host", host);
    first_line("/proc/cpuinfo", "model name", buf, sizeof buf);
    cJSON_AddStringToObject(env, "cpu", buf);
    cJSON_AddNumberToObject(env, "cpus_online", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddNumberToObject(env, "threads", openblas_get_num_threads());
    /* the CPU ops' instruction set: which path ran, and why */
    cJSON_AddStringToObject(env, "cpu_isa", ds_cpu_isa_name(ds_cpu_isa_chosen()));
    ds_cpu_isa_describe(buf, sizeof buf);
    cJSON_AddStringToObject(env, "cpu_isa_why", buf);
    cJSON *v = cJSON_AddObjectToObject(env, "versions");
    cJSON_AddStringToObject(v, "dstrain", DSTRAIN_VERSION);
    cJSON_AddStringToObject(v, "compiler", DSTRAIN_C_COMPILER);
    cJSON_AddStringToObject(v, "build_type", DSTRAIN_BUILD_TYPE);
    cJSON_AddStringToObject(v, "openblas", openblas_get_config());
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(buf, sizeof buf, "%u.%u.%u", maj, min, rel);
    cJSON_AddStringToObject(v, "hdf5", buf);
    int len = 0;
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
        mpi[strcspn(mpi, "\n,")] = '\0';
        cJSON_AddStringToObject(v, "mpi", mpi);
    }
    ds_reduce_describe(buf, sizeof buf);
    add_described(v, buf);
    const ds_backend *be = ds_backend_get(device);
    cJSON_AddStringToObject(env, "device", device);
    if (be && strcmp(device, "cpu")) {   /* versions, architectures, the GPU */
        be->describe(buf, sizeof buf);
        add_described(v, buf);
        const cJSON *gpu = cJSON_GetObjectItem(v, "gpu");
        cJSON_AddStringToObject(env, "device_name", cJSON_IsString(gpu) ? gpu->valuestring : "unknown");
    } else {
        first_line("/proc/cpuinfo", "model name", buf, sizeof buf);
        cJSON_AddStringToObject(env, "device_name", buf);
    }
    cJSON_AddStringToObject(env, "git", DSTRAIN_GIT_REV);
    buf[0] = '\0';
    for (int i = 0; i < argc; i++) {
        size_t at = strlen(buf);
        snprintf(buf + at, sizeof buf - at, "%s%s", i ? " " : "", argv[i]);
    }
    cJSON_AddStringToObject(env, "command", buf);
    time_t now = time(NULL);
    struct tm tm;
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    cJSON_AddStringToObject(env, "date", buf);
    return env;
}

/* ---- the table and the CSV ---- */

static double num_of(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(x) ? x->valuestring : "";
}

void ds_bench_table_head(FILE *f)
{
    fprintf(f, "%-10s %-6s %-5s %-7s %6s %5s %10s %15s %9s %9s %9s %7s %9s\n", "model", "device", "prec",
            "mode", "batch", "ranks", "samples/s", "(mean, 95% CI)", "step_ms", "audio_s/s",
            "GFLOP/s", "%peak", "mem_MiB");
}

void ds_bench_table_row(FILE *f, const cJSON *o)
{
    fprintf(f, "%-10s %-6s %-5s %-7s %6.0f %5.0f ", str_of(o, "model"), str_of(o, "device"),
            str_of(o, "precision"), str_of(o, "mode"), num_of(o, "batch"), num_of(o, "ranks"));
    if (strcmp(str_of(o, "status"), "ok")) {
        fprintf(f, "%s: %s\n", str_of(o, "status"), str_of(o, "error"));
        return;
    }
    const cJSON *ci = cJSON_GetObjectItem(o, "samples_per_s_ci95");
    char ci_s[64];
    snprintf(ci_s, sizeof ci_s, "%.3g±%.2g", num_of(o, "samples_per_s_mean"),
             cJSON_GetArraySize(ci) == 2
                 ? (cJSON_GetArrayItem(ci, 1)->valuedouble - cJSON_GetArrayItem(ci, 0)->valuedouble) / 2
                 : 0);
    const double frac = num_of(o, "peak_fraction");
    char peak_s[16] = "-";
    if (frac >= 0)
        snprintf(peak_s, sizeof peak_s, "%.1f", 100 * frac);
    fprintf(f, "%10.2f %15s %9.2f %9.1f %9.2f %7s %9.1f\n", num_of(o, "samples_per_s"), ci_s,
            num_of(o, "step_ms"), num_of(o, "audio_s_per_s"), num_of(o, "flop_per_s") / 1e9, peak_s,
            num_of(o, "peak_mem_bytes") / 1048576.0);
}

void ds_bench_print_layers(FILE *f, const cJSON *o)
{
    const cJSON *layers = cJSON_GetObjectItem(o, "layers"), *phases = cJSON_GetObjectItem(o, "phases");
    const cJSON *l;
    if (!cJSON_IsArray(layers))
        return;
    fprintf(f, "\n  %s batch %.0f %s %s: time per step by layer (%.2f ms per step)\n", str_of(o, "model"),
            num_of(o, "batch"), str_of(o, "precision"), str_of(o, "mode"), num_of(o, "step_ms"));
    fprintf(f, "  host: %.2f ms to queue a step, main thread %.0f%% busy", num_of(o, "host_enqueue_ms"),
            100 * num_of(o, "main_thread_cpu_share"));
    if (cJSON_IsString(cJSON_GetObjectItem(o, "bound")))
        fprintf(f, "; kernels: %.2f ms in %.0f launches per step: %s-bound", num_of(o, "kernel_ms_per_step"),
                num_of(o, "launches_per_step"), str_of(o, "bound"));
    fputc('\n', f);
    fprintf(f, "  %-28s %10s %10s %8s\n", "layer", "fwd_ms", "bwd_ms", "share%");
    cJSON_ArrayForEach(l, layers)
        fprintf(f, "  %-28s %10.3f %10.3f %8.1f\n", str_of(l, "name"), num_of(l, "fwd_ms"),
                num_of(l, "bwd_ms"), 100 * num_of(l, "share"));
    fprintf(f, "  %-28s %10s %10s %8s\n", "phase", "ms", "", "share%");
    cJSON_ArrayForEach(l, phases)
        fprintf(f, "  %-28s %10.3f %10s %8.1f\n", str_of(l, "name"), num_of(l, "ms"), "",
                100 * num_of(l, "share"));
    const cJSON *kernels = cJSON_GetObjectItem(o, "kernels");
    if (!cJSON_IsArray(kernels))
        return;
    fprintf(f, "\n  top kernels (ms per step, launches over all timed steps)\n");
    fprintf(f, "  %-60s %-24s %10s %9s %6s\n", "kernel", "range", "ms/step", "launches", "occ%");
    int shown = 0;
    cJSON_ArrayForEach(l, kernels) {
        if (shown++ == 20)
            break;
        const double occ = num_of(l, "occupancy");
        char occ_s[16] = "-";
        if (occ >= 0)
            snprintf(occ_s, sizeof occ_s, "%.1f", 100 * occ);
        fprintf(f, "  %-60.60s %-24.24s %10.3f %9.0f %6s\n", str_of(l, "name"), str_of(l, "range"),
                num_of(l, "ms_per_step"), num_of(l, "launches"), occ_s);
    }
}

static const char *const csv_cols[] = {
    "model", "device", "precision", "mode", "impl", "batch", "ranks", "global_batch", "status",
    "warmup", "steps", "samples_per_s", "samples_per_s_mean", "samples_per_s_per_rank", "step_ms",
    "step_ms_mean", "host_enqueue_ms", "launches_per_step", "kernel_ms_per_step",
    "audio_s_per_s", "frames_per_step", "flops_per_step", "flop_per_s",
    "peak_flop_per_s", "peak_fraction", "peak_mem_bytes", "error"};

ds_status ds_bench_write_csv(const char *path, const cJSON *results)
{
    char tmp[4200];
    FILE *f;
    DS_TRY(ds_file_open_tmp(path, "CSV", tmp, sizeof tmp, &f));
    const size_t n = sizeof csv_cols / sizeof csv_cols[0];
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? "," : "", csv_cols[i]);
    fputc('\n', f);
    const cJSON *o;
    cJSON_ArrayForEach(o, results) {
        for (size_t i = 0; i < n; i++) {
            const cJSON *x = cJSON_GetObjectItem(o, csv_cols[i]);
            if (i)
                fputc(',', f);
            if (cJSON_IsNumber(x))
                fprintf(f, "%.10g", x->valuedouble);
            else if (cJSON_IsString(x)) {   /* quoted, quotes doubled */
                fputc('"', f);
                for (const char *p = x->valuestring; *p; p++)
                    fputs(*p == '"' ? "\"\"" : (char[]){*p, 0}, f);
                fputc('"', f);
            }
        }
        fputc('\n', f);
    }
    return ds_file_close_commit(f, tmp, path, "CSV");
}

ds_status ds_bench_write_json(const char *path, const cJSON *doc)
{
    char *text = cJSON_Print(doc);
    if (!text)
        return DS_FAIL(DS_ERR_MEM, "bench: JSON text");
    char tmp[4200];
    FILE *f;
    ds_status st = ds_file_open_tmp(path, "results", tmp, sizeof tmp, &f);
    if (st != DS_OK) {
        free(text);
        return st;
    }
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return ds_file_close_commit(f, tmp, path, "results");
}
