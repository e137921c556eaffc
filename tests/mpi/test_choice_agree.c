/* test_choice_agree.c - every rank runs rank 0's start-up choices
 * (choice_agree.h), over real MPI ranks:
 *  - a rank whose timing picked another algorithm for one shape gets rank
 *    0's table, says which choice it would have run, and every rank counts
 *    one rank changed;
 *  - a rank listing fewer choices, or a choice for another shape, is named
 *    in the same error on every rank (none waits for it);
 *  - the model's creation (ds_model_create_hooked) asks the backend for its
 *    choices after conv2d_work, passes them through the hook and sets what
 *    comes back before sizing the work: a CPU backend given per-rank
 *    choices (the CPU itself has none) must be handed rank 0's.
 *
 * usage: mpiexec -np N test_choice_agree (N >= 3 for every case) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choice_agree.h"
#include "config.h"
#include "model.h"
#include "testutil.h"

enum { N = 5 };

/* Rank rank's table: the same shapes; rank `odd` picks another algorithm for entry 2. */
static void table(ds_choice *c, int rank, int odd)
{
    for (int i = 0; i < N; i++) {
        c[i] = (ds_choice){.code = {i, 0}};
        snprintf(c[i].what, sizeof c[i].what, "conv fp16 32x1x1700x161 layer %d %s", i / 2,
                 i % 2 ? "bwd-filter" : "fwd");
        snprintf(c[i].how, sizeof c[i].how, "ALGO_%d, tensor op", i);
    }
    if (rank == odd) {
        c[2].code[0] = 7;
        snprintf(c[2].how, sizeof c[2].how, "FFT_TILING, tensor op");
    }
}

static int case_one_differs(ds_world *w)
{
    ds_choice c[N], want[N];
    table(c, w->rank, 1);
    table(want, 0, 1);
    ds_choice_verdict v;
    T_OK(ds_choice_agree(w, c, N, &v));
    T_CHECK(!memcmp(c, want, sizeof c), "rank %d: the table after agreement is not rank 0's", w->rank);
    const int odd = w->rank == 1;
    T_CHECK(v.changed == odd, "rank %d: %d choices changed", w->rank, v.changed);
    T_CHECK(v.ranks_changed == (w->size > 1), "rank %d: %d ranks changed", w->rank, v.ranks_changed);
    if (odd)
        T_CHECK(strstr(v.note, "layer 1 fwd") && strstr(v.note, "would have run FFT_TILING") &&
                strstr(v.note, "runs rank 0's ALGO_2"), "rank 1's note: %s", v.note);
    else
        T_CHECK(!v.note[0], "rank %d: a note without a change: %s", w->rank, v.note);
    return 0;
}

static int case_same(ds_world *w)
{
    ds_choice c[N];
    table(c, w->rank, -1);
    ds_choice_verdict v;
    T_OK(ds_choice_agree(w, c, N, &v));
    T_CHECK(v.changed == 0 && v.ranks_changed == 0, "rank %d: equal tables: %d changed, %d ranks",
            w->rank, v.changed, v.ranks_changed);
    return 0;
}

/* rank `who` lists n_who choices, or (what) renames entry 3: every rank fails, naming it */
static int case_refused(ds_world *w, int who, int n_who, int rename, const char *must)
{
    if (w->size <= who)
        return 0;
    ds_choice c[N];
    table(c, w->rank, -1);
    if (rename && w->rank == who)
        snprintf(c[3].what, sizeof c[3].what, "conv fp16 16x1x800x161 layer 1 bwd-filter");
    ds_choice_verdict v;
    ds_status_clear_error();
    const ds_status st = ds_choice_agree(w, c, w->rank == who ? n_who : N, &v);
    T_CHECK(st == DS_ERR_ARG, "rank %d: status %d, not DS_ERR_ARG (%s)", w->rank, st, must);
    T_CHECK(strstr(ds_status_last_error(), must), "rank %d: '%s' does not say '%s'", w->rank,
            ds_status_last_error(), must);
    ds_status_clear_error();
    return 0;
}

/* ---- the model's creation, on a CPU backend that has choices ---- */

static int g_rank;
static ds_choice g_set[N];
static int g_set_n = -1, g_get_calls;

static int fake_get(ds_ctx *ctx, ds_choice *out, int max)
{
    (void)ctx;
    g_get_calls++;
    ds_choice c[N];
    table(c, g_rank, 2);   /* rank 2 would choose otherwise */
    for (int i = 0; i < N && i < max; i++)
        out[i] = c[i];
    return N;
}

static ds_status fake_set(ds_ctx *ctx, const ds_choice *in, int n)
{
    (void)ctx;
    g_set_n = n;
    memcpy(g_set, in, (size_t)(n < N ? n : N) * sizeof *in);
    return DS_OK;
}

static ds_status hook(void *user, ds_choice *c, int n)
{
    ds_choice_verdict v;
    return ds_choice_agree(user, c, n, &v);
}

static int case_model(ds_world *w)
{
    ds_backend be = *ds_backend_get("cpu");
    be.choices_get = fake_get;
    be.choices_set = fake_set;
    g_rank = w->rank;
    ds_ctx *ctx = NULL;
    T_OK(be.ctx_create(0, NULL, &ctx));
    ds_model_cfg cfg;
    T_OK(ds_config_preset("tiny", &cfg));
    const ds_model_limits lim = {.batch = 2, .frames = 100, .label_len = 10};
    const ds_model_hooks h = {.choices_agree = hook, .user = w};
    ds_model *m = NULL;
    T_OK(ds_model_create_hooked(&cfg, &be, ctx, DS_F32, &lim, &h, &m));
    ds_choice want[N];
    table(want, 0, 2);
    T_CHECK(g_get_calls == 2 && g_set_n == N && !memcmp(g_set, want, sizeof want),
            "rank %d: the model set %d choices after %d gets, %s rank 0's", w->rank, g_set_n,
            g_get_calls, g_set_n == N && !memcmp(g_set, want, sizeof want) ? "" : "not");
    ds_model_destroy(m);
    /* without the hook nothing is asked or set */
    g_get_calls = 0, g_set_n = -1;
    T_OK(ds_model_create(&cfg, &be, ctx, DS_F32, &lim, &m));
    T_CHECK(g_get_calls == 0 && g_set_n == -1, "rank %d: no hook, yet %d gets and a set of %d",
            w->rank, g_get_calls, g_set_n);
    ds_model_destroy(m);
    be.ctx_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    ds_world w;
    T_OK(ds_world_init(&w, 0, 60));
    case_one_differs(&w);
    case_same(&w);
    case_refused(&w, 2, N - 1, 0, "rank 2 made 4 start-up choices (algorithms) and rank 0 made 5");
    case_refused(&w, 1, N, 1, "rank 1's start-up choice 3 is for another shape than rank 0's");
    case_model(&w);
    int failed = t_failures, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm);
    if (w.rank == 0)
        printf("%d ranks: choice agreement %s\n", w.size, any ? "FAILED" : "ok");
    ds_world_finalize(&w);
    return any ? 1 : t_finish(__FILE__);
}
