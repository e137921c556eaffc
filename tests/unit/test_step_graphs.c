/* test_step_graphs.c - captured training steps (--cuda-graphs).
 *
 * (a) The cache's policy (app/step_graphs.c), on a stand-in for a capturing
 *     backend that behaves as CUDA's stream capture does: work queued while
 *     capturing is recorded, not run, and runs at each launch of the graph.
 *     Every step's work must run exactly once; a shape's first step runs
 *     uncaptured, its second is captured, later ones replay; the least recently used graph goes when the cap is reached;
 *     a capture that fails (a refused call inside, or an invalidated end)
 *     runs that shape uncaptured from then on without trying again; an
 *     error outside a capture is returned.
 * (b) A capturable step gives the same numbers, bit for bit, on batches of
 *     one shape with other lengths and transcripts: on the cpu the
 *     capturable model (CTC bound = the limit) against the plain one; on
 *     cuda (make test_step_graphs_cuda, skips without a GPU) the captured
 *     and replayed step against the same step queued eagerly, in FP32, FP64
 *     and FP16, both made capturable, deterministic, and running the same
 *     start-up algorithms (the replay's model takes the eager one's), with
 *     a second eager run as the control (libraries that are not
 *     reproducible run to run would make any comparison moot). Steps run
 *     two in flight, each with its own learning rate and dropout step.
 *
 * usage: test_step_graphs [BACKEND]   (default $DSTRAIN_TEST_BACKEND, else cpu) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "optim.h"
#include "step_graphs.h"
#include "stepper.h"
#include "synthetic.h"
#include "testutil.h"

/* ---- (a) the policy, on a stand-in ---- */

enum { STAND_OPS = 64 };

/* The stand-in's device: a counter per shape the queued work adds to. */
static struct {
    int capturing, invalidated;
    int recorded[STAND_OPS], n_recorded;   /* shape ids the capture recorded */
    long done[8];                          /* work run per shape id */
    long begins, destroys, discards;
    int refuse_shape;                      /* a call refused inside a capture of this id; -1 */
    int invalidate_shape;                  /* capture_end fails for this id; -1 */
    int fail_shape;                        /* an error outside capture for this id; -1 */
    int bad_data_shape;                    /* a step error that is not the capture's, inside it */
} stand;

struct ds_graph {
    int ids[STAND_OPS], n;
};

static ds_status stand_begin(ds_ctx *c)
{
    (void)c;
    stand.capturing = 1, stand.invalidated = 0, stand.n_recorded = 0;
    stand.begins++;
    return DS_OK;
}

static ds_status stand_end(ds_ctx *c, ds_graph **out, size_t *bytes)
{
    (void)c;
    stand.capturing = 0;
    if (!out) {   /* dropped, as CUDA's is after a refused call */
        stand.discards++;
        return stand.invalidated ? DS_FAIL(DS_ERR_UNSUPPORTED, "capture invalidated") : DS_OK;
    }
    *out = NULL;
    if (stand.invalidated)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "capture invalidated");
    ds_graph *g = calloc(1, sizeof *g);
    if (!g)
        return DS_FAIL(DS_ERR_MEM, "stand-in graph");
    memcpy(g->ids, stand.recorded, sizeof g->ids);
    g->n = stand.n_recorded;
    *bytes = 100 * (size_t)(g->n ? g->ids[0] + 1 : 1);
    *out = g;
    return DS_OK;
}

static ds_status stand_launch(ds_ctx *c, ds_graph *g)
{
    (void)c;
    for (int i = 0; i < g->n; i++)
        stand.done[g->ids[i]]++;
    return DS_OK;
}

static void stand_destroy(ds_ctx *c, ds_graph *g)
{
    (void)c;
    stand.destroys++;
    free(g);
}

/* One step's work for shape id: recorded while capturing, else run. */
static ds_status stand_work(void *user)
{
    const int id = *(const int *)user;
    if (stand.capturing) {
        if (id == stand.refuse_shape) {
            stand.invalidated = 1;
            return DS_FAIL(DS_ERR_BACKEND, "a refused call (shape %d)", id);
        }
        if (id == stand.invalidate_shape)
            stand.invalidated = 1;
        if (id == stand.bad_data_shape)
            return DS_FAIL(DS_ERR_ARG, "bad data in the step (shape %d)", id);
        stand.recorded[stand.n_recorded++] = id;
        return DS_OK;
    }
    if (id == stand.fail_shape)
        return DS_FAIL(DS_ERR_ARG, "the step itself failed (shape %d)", id);
    stand.done[id]++;
    return DS_OK;
}

static ds_step_shape shape_of(int id) { return (ds_step_shape){.n = 4, .t = 100 + 32 * id}; }

static ds_status stand_step(ds_step_graphs *g, int id)
{
    return ds_step_graphs_run(g, shape_of(id), stand_work, &id);
}

static int check_policy(void)
{
    ds_backend be = *t_backend("cpu");
    be.capture_begin = stand_begin;
    be.capture_end = stand_end;
    be.graph_launch = stand_launch;
    be.graph_destroy = stand_destroy;
    memset(&stand, 0, sizeof stand);
    stand.refuse_shape = 4, stand.invalidate_shape = 5, stand.fail_shape = 6, stand.bad_data_shape = 7;

    ds_step_graphs *g;
    T_CHECK(ds_step_graphs_create(t_backend("cpu"), NULL, 2, 8, &g) == DS_ERR_UNSUPPORTED,
            "a backend without capture is refused");
    ds_status_clear_error();
    T_OK(ds_step_graphs_create(&be, NULL, 2, 8, &g));
    ds_step_graph_stats s;
    /* 1 1 2 2 1: each shape's first step uncaptured, its second captured
     * and launched, the fifth a replay */
    const int seq[] = {1, 1, 2, 2, 1};
    for (int i = 0; i < 5; i++)
        T_OK(stand_step(g, seq[i]));
    ds_step_graphs_stats(g, &s);
    T_CHECK(stand.done[1] == 3 && stand.done[2] == 2, "work run %ld and %ld times, expected 3 and 2",
            stand.done[1], stand.done[2]);
    T_CHECK(s.captures == 2 && s.replays == 3 && s.eager == 2 && s.held == 2 && stand.begins == 2,
            "captures %ld replays %ld uncaptured %ld held %d begins %ld: expected 2 3 2 2 2", s.captures,
            s.replays, s.eager, s.held, stand.begins);
    T_CHECK(s.bytes == 500 && s.bytes_peak == 500, "bytes %zu peak %zu, expected 500 500", s.bytes,
            s.bytes_peak);
    /* 3 3: at its capture 2 is the least recently used (1 ran last) and goes */
    T_OK(stand_step(g, 3));
    T_OK(stand_step(g, 3));
    T_OK(stand_step(g, 1));   /* still held: no capture */
    ds_step_graphs_stats(g, &s);
    T_CHECK(s.evictions == 1 && stand.destroys == 1 && s.captures == 3 && stand.begins == 3,
            "after shape 3: evictions %ld destroys %ld captures %ld begins %ld, expected 1 1 3 3",
            s.evictions, stand.destroys, s.captures, stand.begins);
    T_CHECK(s.bytes == 600 && s.bytes_peak == 600, "bytes %zu peak %zu, expected 600 600 (1 and 3 held)",
            s.bytes, s.bytes_peak);
    /* 2 again: warmed already, so captured at once, and 3 (older than 1) goes */
    T_OK(stand_step(g, 2));
    T_OK(stand_step(g, 1));
    ds_step_graphs_stats(g, &s);
    T_CHECK(s.captures == 4 && s.evictions == 2 && stand.begins == 4 && s.eager == 3,
            "captures %ld evictions %ld uncaptured %ld, expected 4, 2 and 3", s.captures, s.evictions, s.eager);
    T_CHECK(stand.done[1] == 5 && stand.done[2] == 3 && stand.done[3] == 2,
            "work run %ld %ld %ld times, expected 5 3 2", stand.done[1], stand.done[2], stand.done[3]);
    /* a refused call inside, and an invalidated end: run uncaptured, tried once */
    for (int id = 4; id <= 5; id++)
        for (int k = 0; k < 3; k++)
            T_OK(stand_step(g, id));
    ds_step_graphs_stats(g, &s);
    T_CHECK(stand.done[4] == 3 && stand.done[5] == 3, "uncaptured work ran %ld and %ld times, expected 3",
            stand.done[4], stand.done[5]);
    T_CHECK(s.failed_shapes == 2 && s.eager == 9 && stand.begins == 6 && s.captures == 4,
            "failed %d uncaptured %ld begins %ld captures %ld: expected 2 9 6 4", s.failed_shapes, s.eager,
            stand.begins, s.captures);
    T_CHECK(stand.discards == 1, "%ld captures dropped, expected 1 (the refused call's)", stand.discards);
    /* a failure of the step itself inside a capture (bad data, not the
     * capture's): the capture is dropped and the error returned; the shape
     * is not marked as one that cannot be captured */
    T_OK(stand_step(g, 7));
    T_CHECK(stand_step(g, 7) == DS_ERR_ARG, "the step's own error inside a capture is returned");
    ds_status_clear_error();
    ds_step_graphs_stats(g, &s);
    T_CHECK(s.failed_shapes == 2 && stand.discards == 2 && !stand.capturing,
            "after bad data: failed %d (expected 2), dropped %ld (expected 2), capturing %d", s.failed_shapes,
            stand.discards, stand.capturing);
    /* an error of the step outside any capture reaches the caller */
    T_CHECK(stand_step(g, 6) == DS_ERR_ARG, "the uncaptured step's error is returned");
    ds_status_clear_error();
    ds_step_graphs_destroy(g);
    T_CHECK(stand.destroys == 4, "%ld graphs destroyed, expected 4 (2 evicted, 2 held)", stand.destroys);
    return 0;
}

/* ---- (b) the same numbers, captured or not ---- */

enum { STEPS = 6, N = 3 };

typedef struct {
    ds_ctx *ctx;
    ds_model *m;
    ds_optim *o;
    ds_stepper *s;
} run;

static ds_choice g_choices[64];
static int g_n_choices = -1;

/* The replay's model runs the eager one's start-up algorithms. */
static ds_status take_choices(void *user, ds_choice *c, int n)
{
    (void)user;
    if (n != g_n_choices)
        return DS_FAIL(DS_ERR_ARG, "%d start-up choices, the eager model made %d", n, g_n_choices);
    memcpy(c, g_choices, (size_t)n * sizeof *c);
    return DS_OK;
}

static ds_status keep_choices(void *user, ds_choice *c, int n)
{
    (void)user;
    if (n > 64)
        return DS_FAIL(DS_ERR_ARG, "%d start-up choices", n);
    memcpy(g_choices, c, (size_t)n * sizeof *c);
    g_n_choices = n;
    return DS_OK;
}

/* kind 0: plain; 1: capturable, eager; 2: capturable, captured. take: the
 * start-up algorithms of the run opened before with take 0. */
static ds_status open_run(const ds_backend *be, const ds_model_cfg *cfg, ds_dtype dt,
                          const ds_model_limits *lim, int kind, int take, run *r)
{
    const int gpu = be->capture_begin != NULL;
    ds_ctx_opts opts = {.deterministic = 1, .capturable = gpu && kind > 0};
    DS_TRY(be->ctx_create(0, &opts, &r->ctx));
    const ds_model_hooks h = {.choices_agree = take ? take_choices : keep_choices};
    DS_TRY(ds_model_create_hooked(cfg, be, r->ctx, dt, lim, &h, &r->m));
    DS_TRY(ds_model_init_params(r->m, 11));
    ds_optim_cfg oc = ds_optim_defaults();
    oc.kind = DS_OPT_ADAMW;
    if (dt == DS_F16)
        oc.loss_scale = 1024, oc.loss_scale_window = 2;   /* dynamic: the scale changes on the device */
    DS_TRY(ds_model_optim_create(r->m, &oc, &r->o));
    DS_TRY(ds_stepper_create(r->m, r->o, NULL, &r->s));
    if (kind == 2) {
        char why[256];
        DS_TRY(ds_stepper_capture(r->s, 2, why, sizeof why));
        if (why[0])
            return DS_FAIL(DS_ERR_ARG, "steps not captured: %s", why);
    } else if (kind == 1) {
        ds_model_set_capturable(r->m, 1);
    }
    return DS_OK;
}

static void close_run(const ds_backend *be, run *r)
{
    ds_stepper_destroy(r->s);
    ds_optim_destroy(r->o);
    ds_model_destroy(r->m);
    if (r->ctx)
        be->ctx_destroy(r->ctx);
    memset(r, 0, sizeof *r);
}

/* Batch k: two shapes (T and T - 40 frames, the longest utterance at the
 * padded length) in turn, the other lengths and the transcripts drawn anew. */
static ds_status batch_k(const ds_model_cfg *cfg, int k, int T, ds_batch *b)
{
    ds_rng rng;
    ds_rng_seed(&rng, 100 + (uint64_t)k);
    const int t = k % 2 ? T - 40 : T;
    int len[N];
    for (int i = 0; i < N; i++)
        len[i] = i == k % N ? t : t / 2 + (int)(ds_rng_uniform(&rng) * (t / 2));
    return ds_synthetic_batch_of(&rng, cfg, N, len, b);
}

static int same_bits(const double *a, const double *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i])) {
            *at = i;
            return 0;
        }
    return 1;
}

/* What a run's steps gave: per step the loss and the optimizer's verdict,
 * then the parameters and BatchNorm statistics. */
typedef struct {
    double loss[STEPS], norm[STEPS], scale[STEPS];
    int skipped[STEPS];
    double *p, *st;
    size_t np, ns;
} outcome;

/* STEPS steps on r as training runs them: step k + 1 launched before step
 * k is collected (two in flight: an upload queued behind a running step),
 * a learning rate and a dropout step of its own each. */
static ds_status run_steps(run *r, const ds_model_cfg *cfg, int T, ds_batch *bt, outcome *o,
                           int *labels_differ)
{
    int prev_max = -1;
    for (int k = 0; k <= STEPS; k++) {
        if (k < STEPS) {
            DS_TRY(batch_k(cfg, k, T, bt));   /* uploaded at launch: bt is free again after */
            const int ml = ds_batch_max_label(bt);
            *labels_differ |= prev_max >= 0 && ml != prev_max;
            prev_max = ml;
            ds_model_set_dropout_key(r->m, 9, (uint32_t)k + 1, 0);
            DS_TRY(ds_stepper_launch(r->s, bt, 1e-3 * (1 + 0.25 * k)));
        }
        if (k > 0) {
            ds_step_out so;
            DS_TRY(ds_stepper_collect(r->s, &so));
            o->loss[k - 1] = so.loss, o->norm[k - 1] = so.opt.grad_norm;
            o->scale[k - 1] = so.opt.loss_scale, o->skipped[k - 1] = so.opt.skipped;
        }
    }
    o->np = ds_model_param_count(r->m), o->ns = ds_model_bn_stats_count(r->m);
    o->p = t_zeros(o->np), o->st = t_zeros(o->ns);
    DS_TRY(ds_model_get(r->m, DS_PARAMS, o->p));
    return ds_model_get(r->m, DS_BN_STATS, o->st);
}

/* 1 when a and b are the same bit for bit; else says where, as what. */
static int same_outcome(const char *dn, const char *what, const outcome *a, const outcome *b)
{
    const int failed = t_failures;
    for (int k = 0; k < STEPS; k++)
        T_CHECK(!memcmp(&a->loss[k], &b->loss[k], sizeof a->loss[k]) && a->norm[k] == b->norm[k] &&
                    a->skipped[k] == b->skipped[k] && a->scale[k] == b->scale[k],
                "%s, %s, step %d: loss %.17g vs %.17g, norm %.17g vs %.17g, skipped %d vs %d", dn, what,
                k + 1, a->loss[k], b->loss[k], a->norm[k], b->norm[k], a->skipped[k], b->skipped[k]);
    size_t at = 0;
    T_CHECK(same_bits(a->p, b->p, a->np, &at), "%s, %s: parameter %zu after %d steps: %.17g vs %.17g",
            dn, what, at, STEPS, a->p[at], b->p[at]);
    T_CHECK(same_bits(a->st, b->st, a->ns, &at), "%s, %s: BatchNorm statistic %zu after %d steps: "
            "%.17g vs %.17g", dn, what, at, STEPS, a->st[at], b->st[at]);
    return t_failures == failed;
}

static int check_same(const ds_backend *be, ds_dtype dt)
{
    const int gpu = be->capture_begin != NULL;
    const char *dn = ds_dtype_name(dt);
    ds_model_cfg cfg;
    T_OK(ds_config_preset("tiny", &cfg));
    cfg.conv[0].dropout = 0.1;   /* the dropout step changes per step: read from memory */
    const int T = 160;
    const ds_model_limits lim = {N, T, ds_synthetic_max_labels(&cfg, T)};
    ds_batch bt;
    T_OK(ds_batch_alloc(&bt, N, T, cfg.n_features, N * lim.label_len));
    /* cpu: plain (a) against capturable (b); cuda: eager (a) against
     * captured (b), and a second eager run (c) as the control: if a and c
     * differ, the libraries are not reproducible here and a difference
     * between a and b would say nothing about the capture */
    const int kinds[3] = {gpu ? 1 : 0, gpu ? 2 : 1, 1};
    outcome o[3] = {0};
    int labels_differ = 0;
    for (int i = 0; i < (gpu ? 3 : 2); i++) {
        run r = {0};
        T_OK(open_run(be, &cfg, dt, &lim, kinds[i], i > 0, &r));
        T_OK(run_steps(&r, &cfg, T, &bt, &o[i], &labels_differ));
        if (i == 1 && gpu) {
            ds_step_graph_stats s;
            T_CHECK(ds_stepper_graph_stats(r.s, &s) && s.captures == 2 && s.replays == STEPS - 2 &&
                        s.eager == 2,
                    "%s: %ld captures, %ld replays, %ld uncaptured steps: expected 2, %d, 2", dn, s.captures,
                    s.replays, s.eager, STEPS - 2);
        }
        close_run(be, &r);
    }
    T_CHECK(labels_differ, "the batches' longest transcripts should differ (the CTC bound's case)");
    if (gpu && !same_outcome(dn, "two eager runs (the control)", &o[0], &o[2]))
        printf("%s: two uncaptured runs differ: the libraries are not reproducible run to run here, "
               "so the replay's comparison below says nothing about the capture\n", dn);
    if (same_outcome(dn, gpu ? "captured against eager" : "capturable against plain", &o[0], &o[1]))
        printf("%s: %d steps of two shapes, two in flight, %s: the same losses, parameters and "
               "statistics bit for bit\n", dn, STEPS,
               gpu ? "captured and replayed against eager" : "capturable against plain");
    for (int i = 0; i < 3; i++)
        free(o[i].p), free(o[i].st);
    ds_batch_free(&bt);
    return 0;
}

int main(int argc, char **argv)
{
    const ds_backend *be = t_backend(argc > 1 ? argv[1] : NULL);
    if (!be->capture_begin) {
        check_policy();
        /* steps on a backend that captures nothing are refused, by name */
        ds_model_cfg cfg;
        T_OK(ds_config_preset("tiny", &cfg));
        const ds_model_limits lim = {N, 160, ds_synthetic_max_labels(&cfg, 160)};
        run r = {0};
        T_OK(open_run(be, &cfg, DS_F32, &lim, 0, 0, &r));
        char why[64];
        T_CHECK(ds_stepper_capture(r.s, 2, why, sizeof why) == DS_ERR_UNSUPPORTED &&
                    strstr(ds_status_last_error(), "--device cuda"),
                "the %s backend's steps cannot be captured: %s", be->name, ds_status_last_error());
        ds_status_clear_error();
        close_run(be, &r);
        check_same(be, DS_F32);
        check_same(be, DS_F16);   /* the CPU's 16-bit emulation, dynamic loss scale */
        return t_finish(__FILE__);
    }
    const ds_dtype dts[] = {DS_F32, DS_F64, DS_F16};
    for (int i = 0; i < 3; i++)
        check_same(be, dts[i]);
    return t_finish(__FILE__);
}
