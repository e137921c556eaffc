/* bench_run.c - one benchmark configuration: a run opened as training opens
 * it, warm-up steps, then timed steps, each from one collect to the next:
 * train steps are pipelined as in training (step k+1 is queued before step k
 * is read), forward steps read their loss before the next. Synthetic batches
 * are drawn before the clock starts, so drawing them is not timed. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "file.h"
#include "train_run.h"

#define POOL 4             /* synthetic global batches, used in turn */
#define RANGE_SLOTS 4096   /* timed ranges per step at most */

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

typedef struct {
    const ds_bench_cfg *c;
    ds_bench_result *res;
    run_state r;
    ds_batch global[POOL], share[POOL];
    int n_pool;
    ds_range_time *ranges;        /* [RANGE_SLOTS] */
    FILE *trace;                  /* --trace on a backend without a kernel profiler */
    char trace_tmp[4200];         /* where it is written until complete */
    double t_timed0;              /* when the timed steps began */
    double cpu_timed0;            /* the main thread's CPU time then */
    int trace_events;
} bench_state;

/* ---- batches ---- */

/* The pool's global batches [n_pool] of global utterances, lengths drawn
 * from --length-dist; LibriSpeech lengths formed as the sampler forms
 * batches, from a sorted sample (ds_synthetic_sorted_lengths), as
 * bench/pytorch_ds2.py forms them. */
static ds_status draw_globals(bench_state *s, ds_rng *rng, int global, int labels, int cap_t)
{
    const ds_train_opts *o = &s->c->run;
    int *sorted = NULL;
    ds_status st = DS_OK;
    if (s->c->dist == DS_LEN_LIBRISPEECH) {
        sorted = malloc((size_t)s->n_pool * global * sizeof *sorted);
        st = sorted ? ds_synthetic_sorted_lengths(rng, &o->model, global, s->n_pool, o->max_frames,
                                                  s->c->dist, sorted)
                    : DS_FAIL(DS_ERR_MEM, "bench: %d x %d lengths", s->n_pool, global);
    }
    for (int k = 0; st == DS_OK && k < s->n_pool; k++) {
        st = ds_batch_alloc(&s->global[k], global, cap_t, o->model.n_features, global * labels);
        if (st == DS_OK)
            st = sorted ? ds_synthetic_batch_of(rng, &o->model, global, sorted + (size_t)k * global,
                                                &s->global[k])
                        : ds_synthetic_batch_dist(rng, &o->model, global, o->max_frames, s->c->dist,
                                                  &s->global[k]);
    }
    free(sorted);
    return st;
}

static ds_status draw_pool(bench_state *s)
{
    const ds_train_opts *o = &s->c->run;
    ds_rng rng;
    ds_rng_seed(&rng, o->seed ^ 0xbe4cULL);
    const int global = o->batch * s->r.ranks.ranks,
              labels = ds_synthetic_max_labels(&o->model, o->max_frames);
    s->n_pool = s->c->warmup + s->c->steps + 1 < POOL ? s->c->warmup + s->c->steps + 1 : POOL;
    /* room for a bucket's rounding (--bucket-frames) */
    const int cap_t = ds_batch_round_frames(o->max_frames, ds_train_round_frames(o));
    DS_TRY(draw_globals(s, &rng, global, labels, cap_t));
    for (int k = 0; k < s->n_pool; k++) {
        if (s->r.ranks.ranks == 1) {
            DS_TRY(ds_train_round_batch(o, &s->global[k]));
            continue;
        }
        DS_TRY(ds_batch_alloc(&s->share[k], o->batch, cap_t, o->model.n_features, global * labels));
        DS_TRY(ds_batch_alloc_global(&s->share[k], global));
        DS_TRY(ds_batch_slice(&s->global[k], s->r.ranks.rank * o->batch, o->batch, &s->share[k]));
        DS_TRY(ds_train_round_batch(o, &s->share[k]));
        s->share[k].n_global = global;
        memcpy(s->share[k].global_lengths, s->global[k].lengths, (size_t)global * sizeof(int));
    }
    return DS_OK;
}

/* Step k's batch (this rank's share); *global_b the whole global batch when
 * it is known (synthetic), else NULL. */
static ds_status next_batch(bench_state *s, long k, const ds_batch **b, const ds_batch **global_b)
{
    if (s->n_pool) {
        const int i = (int)(k % s->n_pool);
        *global_b = &s->global[i];
        *b = s->r.ranks.ranks == 1 ? &s->global[i] : &s->share[i];
        return DS_OK;
    }
    *global_b = NULL;
    DS_TRY(ds_train_data_next_batch(&s->r.data, b));
    if (!*b) {   /* the epoch ran out: begin another */
        DS_TRY(ds_train_data_epoch_begin(&s->r.data, &s->r.pos, (int)(k + 1)));
        DS_TRY(ds_train_data_next_batch(&s->r.data, b));
        if (!*b)
            return DS_FAIL(DS_ERR_ARG, "the data gives no batch of %d", s->c->run.batch);
    }
    return DS_OK;
}

/* What the timed steps processed: frames, audio and FLOPs of the global batch. */
static void count_batch(bench_state *s, const ds_batch *b, const ds_batch *global_b)
{
    const int *len = global_b ? global_b->lengths : b->n_global ? b->global_lengths : b->lengths;
    const int n = global_b ? global_b->n : b->n_global ? b->n_global : b->n;
    long frames = 0;
    for (int i = 0; i < n; i++)
        frames += len[i];
    s->res->frames_per_step += frames;
    long own = 0;
    for (int i = 0; i < b->n; i++)
        own += b->lengths[i];
    s->res->pad_share += b->n && b->t ? 1.0 - (double)own / ((double)b->n * b->t) : 0;
    s->res->audio_s += frames * s->r.data.feat.window_stride_s;
    s->res->flops_per_step += ds_bench_flops(&s->c->run.model, len, n, s->c->mode);
}

/* ---- layers ---- */

/* "conv fwd 2" -> layer "conv 2", forward; names without fwd/bwd are phases. */
static int layer_of(const char *name, char *layer, size_t size, int *bwd)
{
    const char *p = strstr(name, " fwd");
    *bwd = 0;
    if (!p) {
        p = strstr(name, " bwd");
        *bwd = 1;
    }
    if (!p)
        return 0;
    snprintf(layer, size, "%.*s%s", (int)(p - name), name, p + 4);
    return 1;
}

/* Adds ms to column k of the entry named name of list [*n] (cap at most),
 * appending it when new; names past cap are dropped. */
static void add_time(ds_bench_time *list, int *n, int cap, const char *name, int k, double ms)
{
    int i = 0;
    while (i < *n && strcmp(list[i].name, name))
        i++;
    if (i == *n) {
        if (i == cap)
            return;
        list[i] = (ds_bench_time){0};
        snprintf(list[i].name, sizeof list[i].name, "%s", name);
        ++*n;
    }
    list[i].ms[k] += ms;
}

static void trace_range(bench_state *s, const ds_range_time *t, double step_at_ms)
{
    fprintf(s->trace, "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
            "\"pid\":1,\"tid\":%d}", s->trace_events++ ? ",\n" : "", t->name,
            t->depth ? "layer" : "phase", (step_at_ms + t->start_ms) * 1e3,
            (t->end_ms - t->start_ms) * 1e3, 1 + t->depth);
}

/* Adds one step's timed ranges: layers (fwd/bwd pairs) and phases. */
static ds_status read_ranges(bench_state *s, double step_at_ms)
{
    const ds_backend *be = s->r.m.be;
    int n, lost;
    DS_TRY(be->range_times(s->r.m.ctx, s->ranges, RANGE_SLOTS, &n, &lost));
    if (lost)
        return DS_FAIL(DS_ERR_ARG, "--profile layers: %d ranges of one step were not timed", lost);
    for (int i = 0; i < n; i++) {
        const ds_range_time *t = &s->ranges[i];
        char layer[48];
        int bwd;
        ds_bench_result *res = s->res;
        const double ms = t->end_ms - t->start_ms;
        if (layer_of(t->name, layer, sizeof layer, &bwd))
            add_time(res->layers, &res->n_layers, DS_BENCH_LAYERS, layer, bwd, ms);
        else if (t->depth > 0)   /* inside a phase, not a layer pair: the CTC loss */
            add_time(res->layers, &res->n_layers, DS_BENCH_LAYERS, t->name, 0, ms);
        else
            add_time(res->phases, &res->n_phases, DS_BENCH_PHASES, t->name, 0, ms);
        if (s->trace)
            trace_range(s, t, step_at_ms);
    }
    return DS_OK;
}

/* ---- steps ---- */

/* *enqueue_ms: the host's time up to the loss's read, which waits. */
static ds_status forward_step(bench_state *s, const ds_batch *b, double *enqueue_ms)
{
    ds_model *m = s->r.m.model;
    ds_loss loss;
    const double t0 = now_ms();
    DS_TRY(ds_model_set_batch(m, b));
    if (b->n_global > 0)
        DS_TRY(ds_model_set_global_batch(m, b->global_lengths, b->n_global));
    DS_RANGED(s->r.m.be, s->r.m.ctx, "forward", ds_model_forward(m, 1));
    DS_RANGED(s->r.m.be, s->r.m.ctx, "loss", ds_model_loss(m, 0));
    *enqueue_ms = now_ms() - t0;
    return ds_model_read_loss(m, &loss, NULL);   /* waits for the step */
}

/* Whether layer ranges are timed: with a profile, unless steps are
 * captured (a replay has no ranges; --profile layers is refused then). */
static int bench_ranges(const ds_bench_cfg *c)
{
    return c->profile != DS_PROFILE_NONE && !c->run.compute.capturable;
}

/* Steps 0..total-1; step k (k >= warmup) takes from the end of step k-1 to
 * its own end. Train steps: launching k+1 before reading k, as training
 * does, so the time between two reads is one step of the queue. */
static ds_status run_steps(bench_state *s)
{
    const ds_bench_cfg *c = s->c;
    const ds_backend *be = s->r.m.be;
    const long total = c->warmup + c->steps;
    const int pipelined = c->mode == DS_BENCH_TRAIN && c->profile == DS_PROFILE_NONE;
    const int ranges = bench_ranges(c);
    double t_prev = now_ms();
    for (long k = 0; k <= total; k++) {
        const int timed = k >= c->warmup && k < total;
        if (k == c->warmup) {   /* the profilers start with the first timed step */
            if (ranges)
                DS_TRY(be->range_timing(s->r.m.ctx, RANGE_SLOTS));
            if (c->profile == DS_PROFILE_KERNELS)
                DS_TRY(be->kernel_profile_start(s->r.m.ctx));
            s->t_timed0 = now_ms();
            s->cpu_timed0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        }
        const ds_batch *b = NULL, *gb = NULL;
        if (k < total || pipelined)   /* a pipelined run queues one step past the last */
            DS_TRY(next_batch(s, k, &b, &gb));
        if (k < total && ds_fault_inject(s->r.ranks.rank, k + 1, NULL))
            return DS_FAIL(DS_ERR_ARG, "DSTRAIN_FAULT=inf and nan are for dstrain train");
        const double step_at = now_ms() - s->t_timed0;
        double enqueue_ms = 0;
        if (c->mode == DS_BENCH_FORWARD) {
            if (k < total)
                DS_TRY(forward_step(s, b, &enqueue_ms));
        } else {
            const double t0 = now_ms();
            if (b)
                DS_TRY(ds_stepper_launch(s->r.m.stepper, b, ds_optim_lr(&s->r.m.ocfg, k, 0)));
            enqueue_ms = now_ms() - t0;
            ds_step_out out;
            if (ds_stepper_pending(s->r.m.stepper) > (pipelined ? 1 : 0))
                DS_TRY(ds_stepper_collect(s->r.m.stepper, &out));
        }
        if (k == total)
            break;
        const double t = now_ms();   /* step k (pipelined: the queue's step) is done */
        if (timed) {
            s->res->step_ms[s->res->n_steps++] = t - t_prev;
            s->res->host_enqueue_ms += enqueue_ms;
            if (k == total - 1)
                s->res->main_cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - s->cpu_timed0;
            count_batch(s, b, gb);
            if (ranges)
                DS_TRY(read_ranges(s, step_at));
        }
        t_prev = t;
    }
    while (ds_stepper_pending(s->r.m.stepper) > 0) {
        ds_step_out out;
        DS_TRY(ds_stepper_collect(s->r.m.stepper, &out));
    }
    return DS_OK;
}

/* Means per timed step; the kernel profile and the peak. */
static ds_status finish(bench_state *s)
{
    ds_bench_result *res = s->res;
    const ds_backend *be = s->r.m.be;
    const int n = res->n_steps;
    res->frames_per_step /= n;
    res->pad_share /= n;
    res->flops_per_step /= n;
    res->host_enqueue_ms /= n;
    res->main_cpu_ms /= n;
    for (int i = 0; i < res->n_layers; i++)
        for (int k = 0; k < 2; k++)
            res->layers[i].ms[k] /= n;
    for (int i = 0; i < res->n_phases; i++)
        res->phases[i].ms[0] /= n;
    if (s->c->profile == DS_PROFILE_KERNELS) {
        ds_kernel_stat all;
        DS_TRY(be->kernel_profile_stop(s->r.m.ctx, s->c->trace_path, res->kernels, DS_BENCH_KERNELS,
                                       &res->n_kernels, &all));
        res->kernel_launches = all.launches;
        res->kernel_ms = all.total_ms;
    }
    if (bench_ranges(s->c))
        DS_TRY(be->range_timing(s->r.m.ctx, 0));
    res->graphs_on = ds_stepper_graph_stats(s->r.m.stepper, &res->graphs);
    const int nc = be->choices_get ? be->choices_get(s->r.m.ctx, NULL, 0) : 0;
    if (nc > 0 && (res->choices = calloc((size_t)nc, sizeof *res->choices)))
        res->n_choices = be->choices_get(s->r.m.ctx, res->choices, nc);
    ds_backend_counters cnt;
    be->counters(s->r.m.ctx, &cnt);
    res->mem_bytes = cnt.bytes_in_use;
    if (s->c->measure_peak)
        res->peak_flops = be->peak_flops(s->r.m.ctx, s->c->run.precision, s->c->run.compute.tf32,
                                         res->peak_how, sizeof res->peak_how);
    return DS_OK;
}

static ds_status bench(bench_state *s)
{
    const ds_bench_cfg *c = s->c;
    DS_TRY(ds_train_run_open(&c->run, &s->r));
    if (c->profile == DS_PROFILE_KERNELS && !s->r.m.be->kernel_profile_start)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--profile kernels: the %s backend has no kernel "
                       "profiler (--profile layers times its layers)", s->r.m.be->name);
    s->res->ranks = s->r.ranks.ranks;
    s->res->global_batch = c->run.batch * s->r.ranks.ranks;
    if (!c->run.train_path)
        DS_TRY(draw_pool(s));
    if (c->run.train_path)
        DS_TRY(ds_train_data_epoch_begin(&s->r.data, &s->r.pos, 0));
    if (c->profile == DS_PROFILE_LAYERS && c->trace_path && s->r.ranks.rank == 0) {
        DS_TRY(ds_file_open_tmp(c->trace_path, "trace", s->trace_tmp, sizeof s->trace_tmp,
                                &s->trace));
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", s->trace);
    }
    DS_TRY(run_steps(s));
    if (s->trace) {
        FILE *f = s->trace;
        s->trace = NULL;
        fputs("\n]}\n", f);
        DS_TRY(ds_file_close_commit(f, s->trace_tmp, c->trace_path, "trace"));
    }
    return finish(s);
}

ds_status ds_bench_run(const ds_bench_cfg *c, ds_bench_result *res)
{
    *res = (ds_bench_result){.status = DS_OK, .kernel_launches = -1, .kernel_ms = -1};
    if (c->warmup < 1 || c->steps < 1)
        return DS_FAIL(DS_ERR_ARG, "bench: --warmup must be 1 or more (it starts the clock) and "
                       "--steps 1 or more");
    res->step_ms = calloc((size_t)c->steps, sizeof *res->step_ms);
    bench_state s = {.c = c, .res = res};
    s.ranges = calloc(RANGE_SLOTS, sizeof *s.ranges);
    if (!res->step_ms || !s.ranges) {
        free(s.ranges);
        return DS_FAIL(DS_ERR_MEM, "bench: step times");
    }
    ds_status st = bench(&s);
    if (st == DS_ERR_MEM) {   /* did not fit: a result, not a failure */
        res->status = DS_ERR_MEM;
        snprintf(res->error, sizeof res->error, "%s", ds_status_last_error());
        ds_status_clear_error();
        st = DS_OK;
    }
    if (s.trace)   /* a run that failed leaves no half trace */
        ds_file_abandon(s.trace, s.trace_tmp);
    for (int k = 0; k < POOL; k++) {
        ds_batch_free(&s.global[k]);
        ds_batch_free(&s.share[k]);
    }
    free(s.ranges);
    ds_train_run_close(&s.r);
    return st;
}

void ds_bench_result_free(ds_bench_result *res)
{
    free(res->step_ms);
    res->step_ms = NULL;
    free(res->choices);
    res->choices = NULL;
    res->n_choices = 0;
}
