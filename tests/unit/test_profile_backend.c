/* test_profile_backend.c - a backend's side of `dstrain bench`: the memory
 * limit, range timing (--profile layers), the peak rate and, where the
 * backend has one, the kernel profile (--profile kernels), on one training
 * step of the tiny preset.
 *
 *  mem_limit      a context made with ds_ctx_opts.mem_limit refuses, with
 *                 DS_ERR_MEM and a message naming the limit, an allocation
 *                 that would take the process's backend memory past it; one
 *                 under it succeeds, and released memory counts again;
 *  range timing   one step with timing on: every range has end >= start;
 *                 each range of depth 1 lies inside the depth-0 range it was
 *                 opened in (the phases "forward", "backward", ... hold the
 *                 layers "conv fwd 1", "rnn bwd 1", ...); nothing lost; a
 *                 second read gives nothing; with 3 slots, 3 ranges and the
 *                 rest counted lost; timing off, range_times refuses;
 *  peak_flops     > 0 with a description (on the GPU for every dtype, 16-bit
 *                 above FP32 and TF32 above FP32);
 *  kernel profile (backends that have one; the CUDA backend must) one step:
 *                 > 0 kernels, each with launches > 0, 0 < max <= total,
 *                 occupancy in [0, 1] (or < 0: unknown), longest total first,
 *                 and every kernel inside a named range; the Chrome trace
 *                 parses as JSON (cJSON), holds one kernel event per launch,
 *                 each with its range, and the "forward" range.
 *
 * usage: test_profile_backend [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu;
 * CUDA without a GPU: "skipped: ..." and exit 77) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "stepper.h"
#include "synthetic.h"
#include "testutil.h"

#define BATCH 4
#define FRAMES 120
#define SLOTS 4096
#define MAX_KERNELS 1024

static const ds_backend *be;

static int test_mem_limit(void)
{
    const size_t mib = 1 << 20;
    ds_backend_counters c0, c1;
    be->counters(NULL, &c0);
    const ds_ctx_opts opts = {.mem_limit = c0.bytes_in_use + 16 * mib};
    ds_ctx *ctx;
    T_OK(be->ctx_create(0, &opts, &ctx));
    be->counters(ctx, &c1);   /* what the context itself took (the CPU's scratch) */
    T_CHECK(c1.bytes_in_use < opts.mem_limit, "the context alone holds %zu bytes of a %zu limit",
            c1.bytes_in_use, opts.mem_limit);
    const size_t room = opts.mem_limit - c1.bytes_in_use;
    void *a = NULL, *b = NULL;
    T_OK(be->alloc(ctx, DS_F32, room / 2 / sizeof(float), &a));
    ds_status_clear_error();
    ds_status st = be->alloc(ctx, DS_F32, room / sizeof(float), &b);
    printf("mem_limit %.1f MiB: %.1f MiB allocated, %.1f MiB more -> %s: %s\n",
           opts.mem_limit / (double)mib, room / 2.0 / mib, room / (double)mib, ds_status_name(st),
           st == DS_OK ? "" : ds_status_last_error());
    T_CHECK(st == DS_ERR_MEM, "an allocation past the limit gave %s", ds_status_name(st));
    T_CHECK(st == DS_OK || strstr(ds_status_last_error(), "limit"), "the message does not name the limit: %s",
            ds_status_last_error());
    if (st == DS_OK)
        be->release(ctx, b);
    b = NULL;
    ds_status_clear_error();
    ds_backend_counters c2;
    be->counters(ctx, &c2);
    T_CHECK(c2.bytes_in_use <= opts.mem_limit, "%zu bytes in use past the %zu limit", c2.bytes_in_use,
            opts.mem_limit);
    be->release(ctx, a);
    /* released memory counts again: most of the room fits at once */
    T_OK(be->alloc(ctx, DS_F32, (room - mib) / sizeof(float), &b));
    be->release(ctx, b);
    be->ctx_destroy(ctx);
    return 0;
}

typedef struct {
    ds_ctx *ctx;
    ds_model_cfg cfg;
    ds_model *m;
    ds_optim *o;
    ds_stepper *s;
    ds_batch bt;
    ds_rng rng;
} rig;

static ds_status rig_open(rig *r)
{
    memset(r, 0, sizeof *r);
    DS_TRY(be->ctx_create(0, NULL, &r->ctx));
    DS_TRY(ds_config_preset("tiny", &r->cfg));
    const ds_model_limits lim = {.batch = BATCH, .frames = FRAMES,
                                 .label_len = ds_synthetic_max_labels(&r->cfg, FRAMES)};
    const ds_optim_cfg oc = ds_optim_defaults();
    ds_rng_seed(&r->rng, 7);
    DS_TRY(ds_model_create(&r->cfg, be, r->ctx, DS_F32, &lim, &r->m));
    DS_TRY(ds_model_init_params(r->m, 1));
    DS_TRY(ds_model_optim_create(r->m, &oc, &r->o));
    DS_TRY(ds_stepper_create(r->m, r->o, NULL, &r->s));
    return ds_batch_alloc(&r->bt, BATCH, FRAMES, r->cfg.n_features, BATCH * lim.label_len);
}

static ds_status rig_step(rig *r)
{
    DS_TRY(ds_synthetic_batch(&r->rng, &r->cfg, BATCH, FRAMES, &r->bt));
    DS_TRY(ds_stepper_launch(r->s, &r->bt, 1e-4));
    ds_step_out out;
    return ds_stepper_collect(r->s, &out);
}

static void rig_close(rig *r)
{
    ds_batch_free(&r->bt);
    if (r->s)
        ds_stepper_destroy(r->s);
    if (r->o)
        ds_optim_destroy(r->o);
    if (r->m)
        ds_model_destroy(r->m);
    if (r->ctx)
        be->ctx_destroy(r->ctx);
}

/* The index of the range range i was opened in (the last one before it, one
 * level out), -1 at depth 0. */
static int parent_of(const ds_range_time *t, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (t[j].depth == t[i].depth - 1)
            return j;
    return -1;
}

static int test_range_timing(rig *r)
{
    static ds_range_time t[SLOTS];
    int n = -1, lost = -1;
    T_OK(be->range_timing(r->ctx, SLOTS));
    T_OK(rig_step(r));
    T_OK(be->range_times(r->ctx, t, SLOTS, &n, &lost));
    printf("range timing: %d ranges, %d lost\n", n, lost);
    T_CHECK(n > 0 && lost == 0, "%d ranges timed, %d lost", n, lost);
    int forward = -1, backward = -1, conv_in_forward = 0, rnn_in_backward = 0, bad = 0;
    const double eps = 1e-4;   /* ms: the events' float rounding */
    for (int i = 0; i < n; i++) {
        const ds_range_time *x = &t[i];
        if (x->depth == 0 || i < 12)
            printf("  %*s%-26s %9.3f .. %9.3f ms\n", 2 * x->depth, "", x->name, x->start_ms, x->end_ms);
        if (!(x->end_ms >= x->start_ms) || !isfinite(x->start_ms) || x->start_ms < -eps) {
            if (bad++ < 5)
                T_CHECK(0, "range %d '%s': %g .. %g ms", i, x->name, x->start_ms, x->end_ms);
            continue;
        }
        if (x->depth == 0) {
            if (!strcmp(x->name, "forward"))
                forward = i;
            if (!strcmp(x->name, "backward"))
                backward = i;
            continue;
        }
        const int p = parent_of(t, i);
        if (p < 0 || t[p].start_ms > x->start_ms + eps || x->end_ms > t[p].end_ms + eps) {
            if (bad++ < 5)
                T_CHECK(0, "range %d '%s' (depth %d, %g .. %g ms) is not inside '%s' (%g .. %g ms)", i,
                        x->name, x->depth, x->start_ms, x->end_ms, p < 0 ? "(none)" : t[p].name,
                        p < 0 ? 0 : t[p].start_ms, p < 0 ? 0 : t[p].end_ms);
            continue;
        }
        if (p == forward && !strncmp(x->name, "conv fwd", 8))
            conv_in_forward++;
        if (p == backward && !strncmp(x->name, "rnn bwd", 7))
            rnn_in_backward++;
    }
    T_CHECK(bad == 0, "%d ranges out of order or outside their phase", bad);
    T_CHECK(forward >= 0 && backward > forward, "phases: forward at %d, backward at %d", forward, backward);
    T_CHECK(conv_in_forward > 0 && rnn_in_backward > 0,
            "layers inside their phase: %d conv fwd in forward, %d rnn bwd in backward", conv_in_forward,
            rnn_in_backward);
    T_CHECK(n > 0 && t[0].start_ms == 0, "the first range starts at %g ms, not 0", n > 0 ? t[0].start_ms : 0);

    /* read again: the slots were freed, nothing new closed */
    T_OK(be->range_times(r->ctx, t, SLOTS, &n, &lost));
    T_CHECK(n == 0 && lost == 0, "a second read gave %d ranges, %d lost", n, lost);

    /* 3 slots for a step of many ranges: 3 timed, the rest lost */
    T_OK(be->range_timing(r->ctx, 3));
    T_OK(rig_step(r));
    T_OK(be->range_times(r->ctx, t, SLOTS, &n, &lost));
    printf("range timing with 3 slots: %d ranges, %d lost\n", n, lost);
    T_CHECK(n == 3 && lost > 0, "3 slots: %d ranges, %d lost", n, lost);
    for (int i = 0; i < n; i++)
        T_CHECK(t[i].end_ms >= t[i].start_ms, "3 slots: range %d '%s' %g .. %g", i, t[i].name,
                t[i].start_ms, t[i].end_ms);

    T_OK(be->range_timing(r->ctx, 0));
    ds_status_clear_error();
    T_CHECK(be->range_times(r->ctx, t, SLOTS, &n, &lost) != DS_OK, "range_times with timing off succeeded");
    ds_status_clear_error();
    T_OK(rig_step(r));   /* and steps still run with it off */
    return 0;
}

static int test_peak(rig *r)
{
    const int gpu = strcmp(be->name, "cpu") != 0;
    const struct { ds_dtype t; int tf32; } cases[] = {{DS_F32, 0}, {DS_F32, 1}, {DS_F64, 0}, {DS_F16, 0},
                                                      {DS_BF16, 0}};
    double rate[5] = {0};
    for (int i = 0; i < (gpu ? 5 : 1); i++) {
        char how[400] = "";
        rate[i] = be->peak_flops(r->ctx, cases[i].t, cases[i].tf32, how, sizeof how);
        printf("peak %s%s: %.1f TFLOP/s: %s\n", ds_dtype_name(cases[i].t), cases[i].tf32 ? " (tf32)" : "",
               rate[i] / 1e12, how);
        T_CHECK(rate[i] > 0 && isfinite(rate[i]) && how[0], "peak %s%s: %g (%s)", ds_dtype_name(cases[i].t),
                cases[i].tf32 ? " tf32" : "", rate[i], how);
    }
    if (gpu) {
        T_CHECK(rate[3] > rate[0] && rate[4] > rate[0], "16-bit peaks %g, %g not above FP32's %g", rate[3],
                rate[4], rate[0]);
        T_CHECK(rate[1] > rate[0], "TF32 peak %g not above FP32's %g", rate[1], rate[0]);
    }
    return 0;
}

/* The trace file: JSON, a kernel event per launch with its range, the ranges. */
static void check_trace(const char *path, long launches)
{
    FILE *f = fopen(path, "rb");
    T_CHECK(f != NULL, "trace %s not written", path);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    const size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    T_CHECK(text && got == (size_t)size, "trace %s: read %zu of %ld bytes", path, got, size);
    if (!text)
        return;
    text[got] = '\0';
    cJSON *root = cJSON_Parse(text);
    T_CHECK(root != NULL, "trace %s is not JSON (near: %.60s)", path,
            cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(text);
    if (!root)
        return;
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    const cJSON *unit = cJSON_GetObjectItemCaseSensitive(root, "displayTimeUnit");
    T_CHECK(cJSON_IsArray(events), "trace: no traceEvents array");
    T_CHECK(cJSON_IsString(unit) && !strcmp(unit->valuestring, "ms"), "trace: displayTimeUnit not \"ms\"");
    long kernels = 0, ranges = 0, forward = 0, bad = 0, no_range = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X"))
            continue;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        if (!cJSON_IsString(name) || !cJSON_IsString(cat) || !cJSON_IsNumber(ts) || !cJSON_IsNumber(dur) ||
            dur->valuedouble < 0 || !cJSON_IsNumber(pid) || !cJSON_IsNumber(tid)) {
            bad++;
            continue;
        }
        if (!strcmp(cat->valuestring, "kernel")) {
            kernels++;
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            const cJSON *range = cJSON_GetObjectItemCaseSensitive(args, "range");
            if (!cJSON_IsString(range) || !range->valuestring[0])
                no_range++;
        } else if (!strcmp(cat->valuestring, "range")) {
            ranges++;
            forward += !strcmp(name->valuestring, "forward");
        }
    }
    printf("trace %s: %ld kernel events, %ld ranges\n", path, kernels, ranges);
    T_CHECK(bad == 0, "trace: %ld complete events lack name, cat, ts, dur >= 0, pid or tid", bad);
    T_CHECK(kernels == launches, "trace: %ld kernel events for %ld launches", kernels, launches);
    T_CHECK(no_range == 0, "trace: %ld kernel events without a range", no_range);
    T_CHECK(ranges > 0 && forward == 1, "trace: %ld ranges, %ld named forward", ranges, forward);
    cJSON_Delete(root);
}

static int test_kernel_profile(rig *r)
{
    if (!be->kernel_profile_start || !be->kernel_profile_stop) {
        T_CHECK(!be->kernel_profile_start && !be->kernel_profile_stop,
                "kernel_profile_start and _stop must both be set or both NULL");
        /* the CUDA backend has one when built with CUPTI, and this test wants it on a GPU */
        T_CHECK(!strcmp(be->name, "cpu"),
                "backend %s has no kernel profile: built without CUPTI (see CMake's 'CUPTI' line)",
                be->name);
        printf("kernel profile: none on backend %s\n", be->name);
        return 0;
    }
    static ds_kernel_stat k[MAX_KERNELS];
    char path[256];
    snprintf(path, sizeof path, "test_profile_backend_%s.trace.json", be->name);
    remove(path);
    int n = -1;
    T_OK(rig_step(r));   /* first-use costs (algorithm choice, library set-up) outside the profile */
    T_OK(be->kernel_profile_start(r->ctx));
    T_OK(rig_step(r));
    ds_kernel_stat all;
    T_OK(be->kernel_profile_stop(r->ctx, path, k, MAX_KERNELS, &n, &all));
    printf("kernel profile: %d kernels (kernel, range)\n", n);
    T_CHECK(n > 0 && n < MAX_KERNELS, "%d kernels", n);
    long launches = 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        const ds_kernel_stat *s = &k[i];
        launches += s->launches;
        if (i < 15)
            printf("  %8.3f ms %4ld x  max %7.3f  occ %5.2f%s  %-22s %.70s\n", s->total_ms, s->launches,
                   s->max_ms, s->occupancy, s->occupancy_achieved ? "a" : "t", s->range, s->name);
        const int ok = s->launches > 0 && s->total_ms > 0 && s->max_ms > 0 && s->max_ms <= s->total_ms + 1e-9 &&
                       s->name[0] && s->range[0] && s->occupancy <= 1 &&
                       !isnan(s->occupancy) && (i == 0 || k[i - 1].total_ms >= s->total_ms);
        if (!ok && bad++ < 5)
            T_CHECK(0, "kernel %d '%s' in range '%s': %ld launches, total %g, max %g ms, occupancy %g%s", i,
                    s->name, s->range, s->launches, s->total_ms, s->max_ms, s->occupancy,
                    i > 0 && k[i - 1].total_ms < s->total_ms ? " (not sorted by total)" : "");
    }
    T_CHECK(bad == 0, "%d kernels with a bad record", bad);
    double total = 0;
    for (int i = 0; i < n; i++)
        total += k[i].total_ms;
    /* every kernel was listed (n < MAX_KERNELS): the totals are their sums */
    T_CHECK(all.launches == launches && fabs(all.total_ms - total) <= 1e-9 * (1 + total),
            "all kernels: %ld launches and %g ms, the list sums to %ld and %g", all.launches,
            all.total_ms, launches, total);
    check_trace(path, launches);

    /* a second profile, no trace: the same kernels again */
    T_OK(be->kernel_profile_start(r->ctx));
    T_OK(rig_step(r));
    int n2 = -1;
    T_OK(be->kernel_profile_stop(r->ctx, NULL, k, MAX_KERNELS, &n2, NULL));
    T_CHECK(n2 > 0, "a second profile found %d kernels", n2);
    /* stop without start refuses */
    ds_status_clear_error();
    T_CHECK(be->kernel_profile_stop(r->ctx, NULL, k, MAX_KERNELS, &n2, NULL) != DS_OK,
            "kernel_profile_stop without a start succeeded");
    ds_status_clear_error();
    return 0;
}

int main(int argc, char **argv)
{
    be = t_backend(argc > 1 ? argv[1] : NULL);
    T_CHECK(be->range_timing && be->range_times && be->peak_flops,
            "backend %s lacks range_timing, range_times or peak_flops", be->name);
    if (t_failures)
        return t_finish("test_profile_backend");
    if (test_mem_limit())
        return t_finish("test_profile_backend");
    rig r;
    ds_status st = rig_open(&r);
    if (st != DS_OK) {
        T_CHECK(0, "set-up: %s: %s", ds_status_name(st), ds_status_last_error());
        rig_close(&r);
        return t_finish("test_profile_backend");
    }
    if (!test_range_timing(&r) && !test_peak(&r))
        test_kernel_profile(&r);
    rig_close(&r);
    return t_finish("test_profile_backend");
}
