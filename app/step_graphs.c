/* step_graphs.c - captured training steps per batch shape, least recently
 * used evicted; see step_graphs.h. */
#include "step_graphs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

enum { SEEN_MAX = 64 };

typedef struct {
    ds_step_shape sh;
    ds_graph *graph;
    size_t bytes;
    long used;   /* the step counter when last launched: the smallest goes first */
} held_graph;

struct ds_step_graphs {
    const ds_backend *be;
    ds_ctx *ctx;
    int cap, max_failed;
    held_graph *held;        /* [cap], the first `n_held` in use */
    int n_held;
    ds_step_shape *failed;   /* [max_failed], the first `n_failed` in use */
    int n_failed, failed_next;
    ds_step_shape seen[SEEN_MAX];   /* shapes run once, uncaptured: the next is captured */
    int n_seen, seen_next;          /* in use; where the next goes once all are */
    long clock;
    ds_step_graph_stats st;
};

ds_status ds_step_graphs_create(const ds_backend *be, ds_ctx *ctx, int cap, int max_failed,
                                ds_step_graphs **out)
{
    *out = NULL;
    if (!be->capture_begin || !be->capture_end || !be->graph_launch || !be->graph_destroy)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "the %s backend captures no steps (--cuda-graphs is for "
                       "--device cuda)", be->name);
    if (cap < 1 || max_failed < 0)
        return DS_FAIL(DS_ERR_ARG, "step graphs: %d graphs held, %d failed shapes remembered", cap,
                       max_failed);
    ds_step_graphs *g = calloc(1, sizeof *g);
    if (!g)
        return DS_FAIL(DS_ERR_MEM, "step graphs");
    *g = (ds_step_graphs){.be = be, .ctx = ctx, .cap = cap, .max_failed = max_failed};
    g->held = calloc((size_t)cap, sizeof *g->held);
    g->failed = calloc((size_t)(max_failed ? max_failed : 1), sizeof *g->failed);
    if (!g->held || !g->failed) {
        ds_step_graphs_destroy(g);
        return DS_FAIL(DS_ERR_MEM, "step graphs: room for %d graphs", cap);
    }
    *out = g;
    return DS_OK;
}

void ds_step_graphs_destroy(ds_step_graphs *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_held; i++)
        g->be->graph_destroy(g->ctx, g->held[i].graph);
    free(g->held);
    free(g->failed);
    free(g);
}

static int same(ds_step_shape a, ds_step_shape b) { return a.n == b.n && a.t == b.t; }

static held_graph *find_held(ds_step_graphs *g, ds_step_shape sh)
{
    for (int i = 0; i < g->n_held; i++)
        if (same(g->held[i].sh, sh))
            return &g->held[i];
    return NULL;
}

static int listed(const ds_step_shape *list, int n, ds_step_shape sh)
{
    for (int i = 0; i < n; i++)
        if (same(list[i], sh))
            return 1;
    return 0;
}

/* The first step of a shape runs uncaptured, so that what the libraries set
 * up lazily on a first call (cuDNN's and cuBLAS's kernels and plans) is set
 * up outside a capture; 1 when sh has had that step. */
static int warmed(ds_step_graphs *g, ds_step_shape sh)
{
    if (listed(g->seen, g->n_seen, sh))
        return 1;
    if (g->n_seen < SEEN_MAX)
        g->seen[g->n_seen++] = sh;
    else {   /* the oldest forgotten: it runs a first step again when it comes back */
        if (g->seen_next == 0)
            ds_log_print("--cuda-graphs: more than %d batch shapes: a shape forgotten before it "
                         "comes back is never captured (--bucket-frames keeps the shapes few)\n",
                         SEEN_MAX);
        g->seen[g->seen_next++ % SEEN_MAX] = sh;
    }
    return 0;
}

/* A free slot, the least recently used graph destroyed when all are taken. */
static held_graph *make_room(ds_step_graphs *g)
{
    if (g->n_held < g->cap)
        return &g->held[g->n_held++];
    held_graph *lru = &g->held[0];
    for (int i = 1; i < g->n_held; i++)
        if (g->held[i].used < lru->used)
            lru = &g->held[i];
    g->be->graph_destroy(g->ctx, lru->graph);
    g->st.bytes -= lru->bytes;
    g->st.evictions++;
    *lru = (held_graph){0};
    return lru;
}

/* The shape's step runs eagerly from now on; said once, with why. */
static void mark_failed(ds_step_graphs *g, ds_step_shape sh, const char *why)
{
    ds_log_print("--cuda-graphs: steps of %d utterances x %d frames run uncaptured: %s\n", sh.n, sh.t,
                 why);
    if (g->n_failed < g->max_failed)
        g->failed[g->n_failed++] = sh;
    else if (g->max_failed > 0)   /* the oldest forgotten: tried (and said) again if it comes back */
        g->failed[g->failed_next++ % g->max_failed] = sh;
    g->st.failed_shapes++;
}

/* Whether a failure of the step inside a capture is the capture's (a call
 * refused while capturing, a library that cannot be captured): the shape
 * then runs uncaptured. Others (bad data, no memory) are the step's own, and
 * the uncaptured step would fail the same way: they are returned. */
static int capture_failure(ds_status st) { return st == DS_ERR_UNSUPPORTED || st == DS_ERR_BACKEND; }

/* queue(user) captured into a graph for sh, held; NULL with *why set when
 * the capture failed (nothing of it ran). A failure of the step that is
 * not the capture's is returned, the capture ended and dropped. */
static ds_status capture(ds_step_graphs *g, ds_step_shape sh, ds_status (*queue)(void *),
                         void *user, held_graph **out, char *why, size_t why_size)
{
    *out = NULL;
    ds_status st = g->be->capture_begin(g->ctx);
    if (st != DS_OK) {
        snprintf(why, why_size, "%s", ds_status_last_error());
        ds_status_clear_error();
        return DS_OK;
    }
    const ds_status qst = queue(user);
    if (qst != DS_OK) {
        char msg[512];   /* the innermost failure's message: the call that was refused */
        snprintf(msg, sizeof msg, "%s", ds_status_last_error());
        ds_status_clear_error();
        (void)g->be->capture_end(g->ctx, NULL, NULL);   /* ended, dropped, nothing made */
        ds_status_clear_error();
        if (!capture_failure(qst))
            return DS_FAIL(qst, "%s", msg);
        snprintf(why, why_size, "%s", msg);
        return DS_OK;
    }
    ds_graph *graph = NULL;
    size_t bytes = 0;
    if (g->be->capture_end(g->ctx, &graph, &bytes) != DS_OK) {
        snprintf(why, why_size, "%s", ds_status_last_error());
        ds_status_clear_error();
        return DS_OK;
    }
    held_graph *h = make_room(g);
    *h = (held_graph){.sh = sh, .graph = graph, .bytes = bytes};
    g->st.captures++;
    g->st.bytes += bytes;
    if (g->st.bytes > g->st.bytes_peak)
        g->st.bytes_peak = g->st.bytes;
    *out = h;
    return DS_OK;
}

ds_status ds_step_graphs_run(ds_step_graphs *g, ds_step_shape sh, ds_status (*queue)(void *user),
                             void *user)
{
    g->clock++;
    held_graph *h = find_held(g, sh);
    if (!h && !listed(g->failed, g->n_failed, sh) && warmed(g, sh)) {
        char why[512] = "";
        DS_TRY(capture(g, sh, queue, user, &h, why, sizeof why));
        if (!h)
            mark_failed(g, sh, why[0] ? why : "the backend gave no reason");
    }
    if (!h) {   /* a first step, or a shape that failed */
        g->st.eager++;
        return queue(user);
    }
    h->used = g->clock;
    g->st.replays++;
    return g->be->graph_launch(g->ctx, h->graph);
}

void ds_step_graphs_stats(const ds_step_graphs *g, ds_step_graph_stats *out)
{
    *out = g->st;
    out->held = g->n_held;
}
