/* ranks.c - what a run does across ranks: rank 0's weights broadcast, the
 * reducer and the model's hooks into it (gradient buckets, synchronised
 * BatchNorm), the per-step gathering of metrics, and parameter checksums. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "choice_agree.h"
#include "file.h"
#include "rank_agree.h"
#include "train_run.h"

enum { GATHERED = 4 };   /* per rank: step ms, loss, infinite count, stop signal */

static ds_status hook_ready(void *user, size_t place)
{
    return ds_reduce_ready(((run_ranks *)user)->dist.reducer, place);
}

/* Synchronised BatchNorm: the moments summed over ranks by the transport;
 * the counts are known from the global batch. */
static ds_status hook_bn(void *user, void *mom, size_t len, ds_dtype dt)
{
    return ds_reduce_sum(((run_ranks *)user)->dist.reducer, mom, len, dt, "BatchNorm moments");
}

/* Rank 0's start-up choices for all; this rank's differences said. */
static ds_status hook_choices(void *user, ds_choice *c, int n)
{
    const run_state *r = user;
    ds_choice_verdict v;
    DS_TRY(ds_choice_agree(r->o->world, c, n, &v));
    if (v.changed)
        fprintf(stderr, "rank %d: %d start-up choices differ from rank 0's, which it runs: %s\n",
                r->ranks.rank, v.changed, v.note);
    if (v.ranks_changed)
        ds_log_print("start-up choices: %d of %d ranks would have chosen otherwise; every rank runs "
                     "rank 0's\n", v.ranks_changed, r->ranks.ranks);
    return DS_OK;
}

const ds_model_hooks *ds_ranks_create_hooks(run_state *r, ds_model_hooks *h)
{
    if (r->ranks.ranks == 1 || !r->o->world)
        return NULL;
    *h = (ds_model_hooks){.choices_agree = hook_choices, .user = r};
    return h;
}

enum { CHOICES_LISTED = 12 };   /* more are counted per choice */

void ds_ranks_log_choices(const run_state *r)
{
    const ds_backend *be = r->m.be;
    const int n = be->choices_get ? be->choices_get(r->m.ctx, NULL, 0) : 0;
    ds_choice *c = n > 0 ? calloc((size_t)n, sizeof *c) : NULL;
    if (!c)
        return;
    be->choices_get(r->m.ctx, c, n);
    ds_log_print("start-up choices (%d%s):\n", n, r->ranks.ranks > 1 ? ", rank 0's on every rank" : "");
    for (int i = 0; i < n && n <= CHOICES_LISTED; i++)
        ds_log_print("  %s: %s\n", c[i].what, c[i].how);
    for (int i = 0; i < n && n > CHOICES_LISTED; i++) {   /* each distinct how, counted */
        int seen = 0, count = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(c[j].how, c[i].how);
        for (int j = i; j < n && !seen; j++)
            count += !strcmp(c[j].how, c[i].how);
        if (!seen)
            ds_log_print("  %s: %d\n", c[i].how, count);
    }
    free(c);
}

ds_status ds_ranks_bcast_bytes(void *world, void *bytes, size_t count, ds_dtype dt)
{
    const size_t total = count * ds_dtype_size(dt), piece = (size_t)1 << 28;   /* int counts */
    for (size_t at = 0; at < total; at += piece)
        DS_TRY(ds_world_bcast(world, (char *)bytes + at,
                              (int)(total - at < piece ? total - at : piece), MPI_BYTE,
                              "rank 0's weights and state"));
    return DS_OK;
}

/* Rank 0's initial weights, so every rank starts identical: sent as they
 * are stored (float32 master weights as float32), never as doubles. */
static ds_status broadcast_params(run_state *r)
{
    return ds_model_share_params(r->m.model, ds_ranks_bcast_bytes, r->o->world);
}

static ds_status alloc_rank_buffers(run_state *r)
{
    r->ranks.gathered = calloc((size_t)r->ranks.ranks * GATHERED, sizeof *r->ranks.gathered);
    r->ranks.sync_sums = calloc((size_t)r->ranks.ranks, sizeof *r->ranks.sync_sums);
    /* a host copy of the parameters as stored only for runs that check
     * (--check-sync), and here, before the first step, not at the first check */
    size_t bytes = 0;
    for (int k = 0; k < 2 && r->o->check_sync > 0; k++) {
        void *dev;
        ds_dtype dt;
        size_t span;
        DS_TRY(ds_model_flat_group(r->m.model, DS_PARAMS, k, &dev, &dt, &span));
        bytes += span * ds_dtype_size(dt);
    }
    r->ranks.sync_bytes = bytes;
    if (r->o->check_sync > 0 && !(r->ranks.sync_host = malloc(bytes ? bytes : 1)))
        return DS_FAIL(DS_ERR_MEM, "parameter checksum buffer (%zu bytes)", bytes);
    if (!r->ranks.gathered || !r->ranks.sync_sums)
        return DS_FAIL(DS_ERR_MEM, "per-rank buffers for %d ranks", r->ranks.ranks);
    return DS_OK;
}

/* The largest sum apart from the buckets: BatchNorm's moments, and in
 * fp16/bf16 runs BatchNorm's parameter gradients. */
static size_t sum_capacity(ds_model *m)
{
    size_t n, moments = ds_model_bn_moments_max(m);
    ds_model_bn_param_grads(m, &n);
    return n > moments ? n : moments;
}

ds_status ds_ranks_setup(run_state *r)
{
    const ds_train_opts *o = r->o;
    if (r->ranks.ranks == 1)
        return DS_OK;
    DS_TRY(alloc_rank_buffers(r));
    DS_TRY(broadcast_params(r));   /* fp16/bf16: the master copy, and the working copy from it */
    const ds_dtype dt = ds_model_dtype(r->m.model);
    const size_t bucket = (size_t)(o->bucket_mb * 1024 * 1024) / ds_dtype_size(dt);
    const ds_reduce_cfg rc = {.world = o->world, .kind = o->allreduce,
                              .be = r->m.be, .ctx = r->m.ctx,
                              .device = o->world->device < 0 ? 0 : o->world->device, .dt = dt,
                              .grads = ds_model_grads(r->m.model),
                              .n = ds_model_param_span(r->m.model),
                              .bucket_elems = bucket ? bucket : 1,
                              .sum_capacity = sum_capacity(r->m.model),
                              .force_staging = getenv("DSTRAIN_STAGE_ALLREDUCE") != NULL,
                              .wire = o->reduce_dtype, .wire_set = o->reduce_dtype_set};
    DS_TRY(ds_reduce_create(&rc, &r->ranks.dist.reducer));
    r->ranks.dist.world = o->world;
    const ds_model_hooks h = {.grad_ready = hook_ready, .bn_reduce = o->local_bn ? NULL : hook_bn,
                              .user = &r->ranks};
    ds_model_set_hooks(r->m.model, &h);
    char layout[1024];
    ds_world_layout(o->world, strcmp(o->device, "cpu") != 0, layout, sizeof layout);
    ds_log_print("ranks on %s\n", layout);
    ds_log_print("%d ranks, gradients in %d buckets of up to %.1f MiB summed by %s, %s BatchNorm\n",
             r->ranks.ranks, ds_reduce_buckets(r->ranks.dist.reducer), o->bucket_mb,
             ds_reduce_kind_name(o->allreduce), o->local_bn ? "per-rank" : "synchronised");
    return DS_OK;
}

void ds_ranks_close(run_ranks *k)
{
    ds_reduce_destroy(k->dist.reducer);
    k->dist.reducer = NULL;
    free(k->gathered);
    free(k->sync_host);
    free(k->sync_sums);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ds_status ds_ranks_gather_metrics(run_ranks *k, ds_world *world, const ds_step_out *out,
                                  ds_step_metrics *s, int global_n)
{
    s->ranks = k->ranks;
    s->loss = out->loss;
    s->n_infinite = out->n_infinite;
    s->samples_per_s = global_n / (s->step_ms / 1e3);
    k->stop_signal = ds_stop_signal();   /* any rank's, below, when there are more */
    if (k->ranks == 1)
        return DS_OK;
    const double mine[GATHERED] = {s->step_ms, out->loss, out->n_infinite, ds_stop_signal()};
    ds_world *w = world;
    ds_world_wait_begin(w, "gathering step metrics");
    int rc = MPI_Allgather(mine, GATHERED, MPI_DOUBLE, k->gathered, GATHERED, MPI_DOUBLE, w->comm);
    ds_world_wait_end(w);
    DS_TRY(ds_world_check(rc, "MPI_Allgather of step metrics"));
    s->loss = 0;
    s->n_infinite = 0;
    for (int i = 0; i < k->ranks; i++) {   /* the global loss: every rank's share, in rank order */
        s->loss += k->gathered[i * GATHERED + 1];
        s->n_infinite += (int)k->gathered[i * GATHERED + 2];
        if (k->gathered[i * GATHERED + 3] != 0)   /* any rank signalled: all stop together */
            k->stop_signal = (int)k->gathered[i * GATHERED + 3];
        k->gathered[i] = k->gathered[i * GATHERED];   /* step times to the front, for sorting */
    }
    qsort(k->gathered, (size_t)k->ranks, sizeof *k->gathered, cmp_double);
    const double *t = k->gathered;
    s->step_ms_min = t[0];
    s->step_ms_max = t[k->ranks - 1];
    s->step_ms_median = k->ranks % 2 ? t[k->ranks / 2] : (t[k->ranks / 2 - 1] + t[k->ranks / 2]) / 2;
    s->samples_per_s = global_n / (s->step_ms_max / 1e3);
    s->buckets = out->timing.buckets;
    s->buckets_early = out->timing.started_early;
    s->backward_ms = out->timing.backward_ms;
    s->reduce_ms = out->timing.reduce_ms;
    s->reduce_hidden_ms = out->timing.hidden_ms;
    s->reduce_wait_ms = out->timing.wait_ms;
    s->bn_sums = out->timing.sums;
    s->bn_sum_ms = out->timing.sum_ms;
    s->buckets_beside_bn_sums = out->timing.buckets_beside_sums;
    return DS_OK;
}

ds_status ds_ranks_check_sync(run_state *r, long step)
{
    /* each group's master copy as stored (no conversion; the gaps between
     * tensors are zeros on every rank) */
    size_t at = 0;
    for (int k = 0; k < 2; k++) {
        void *dev;
        ds_dtype dt;
        size_t span;
        DS_TRY(ds_model_flat_group(r->m.model, DS_PARAMS, k, &dev, &dt, &span));
        if (dev)
            DS_TRY(r->m.be->to_host(r->m.ctx, dt, span, dev, r->ranks.sync_host + at));
        at += span * ds_dtype_size(dt);
    }
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a over the bytes: any difference shows */
    for (size_t i = 0; i < r->ranks.sync_bytes; i++)
        h = (h ^ r->ranks.sync_host[i]) * 1099511628211ULL;
    ds_world_wait_begin(r->o->world, "comparing parameter checksums");
    int rc = MPI_Allgather(&h, 1, MPI_UINT64_T, r->ranks.sync_sums, 1, MPI_UINT64_T,
                           r->o->world->comm);
    ds_world_wait_end(r->o->world);
    DS_TRY(ds_world_check(rc, "MPI_Allgather of parameter checksums"));
    char differ[256] = "";
    for (int k = 1; k < r->ranks.ranks; k++)
        if (r->ranks.sync_sums[k] != r->ranks.sync_sums[0] && strlen(differ) < sizeof differ - 16)
            snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%s%d", *differ ? ", " : "", k);
    if (*differ)
        return DS_FAIL(DS_ERR_NUM, "after step %ld the parameters of rank(s) %s differ from rank 0's",
                       step, differ);
    return DS_OK;
}

enum { HOST = 64, TOKEN = 64, NAME = 4200 };

/* Rank 0: a token file in the checkpoint folder, its name and content. */
static ds_status write_token(const char *dir, char *name, char *value)
{
    char base[NAME];
    int fd;
    snprintf(base, sizeof base, "%s/.dstrain-shared", dir);
    DS_TRY(ds_file_tmp_create(base, "shared-folder token", name, NAME, &fd));
    snprintf(value, TOKEN, "%s %ld", name + strlen(base), (long)getpid());
    const ssize_t n = (ssize_t)strlen(value);
    const int ok = write(fd, value, (size_t)n) == n;
    close(fd);
    if (!ok) {
        unlink(name);
        return DS_FAIL(DS_ERR_IO, "%s: cannot write the shared-folder token", name);
    }
    return DS_OK;
}

/* Whether file name holds exactly value. */
static int token_seen(const char *name, const char *value)
{
    char got[TOKEN + 1] = "";
    FILE *f = fopen(name, "rb");
    if (!f)
        return 0;
    const size_t n = fread(got, 1, TOKEN, f);
    fclose(f);
    got[n] = '\0';
    return !strcmp(got, value);
}

ds_status ds_ranks_check_shared(run_state *r)
{
    const ds_train_opts *o = r->o;
    /* the data's sameness is the ranks' agreement's (rank_agree.c), before this */
    if (r->ranks.ranks <= 1 || !o->checkpoint_dir)
        return DS_OK;
    ds_world *w = o->world;
    char name[NAME] = "", value[TOKEN] = "";
    ds_status st = r->ranks.rank == 0 ? write_token(o->checkpoint_dir, name, value) : DS_OK;
    int ok0 = st == DS_OK;
    DS_TRY(ds_world_bcast(w, &ok0, 1, MPI_INT, "the shared-folder token"));
    if (!ok0) {   /* every rank knows: rank 0 says why, once */
        ds_rank_agree_refused_by_all();
        return r->ranks.rank == 0 ? st : DS_FAIL(DS_ERR_IO, "rank 0 could not write in the "
                                                 "checkpoint folder (see its message)");
    }
    DS_TRY(ds_world_bcast(w, name, NAME, MPI_CHAR, "the shared-folder token"));
    DS_TRY(ds_world_bcast(w, value, TOKEN, MPI_CHAR, "the shared-folder token"));
    /* per rank: the folder unseen; and its host's name */
    int *bad = calloc((size_t)r->ranks.ranks, sizeof *bad);
    unsigned char *hosts = calloc((size_t)r->ranks.ranks, HOST);
    if (!bad || !hosts) {
        free(bad);
        free(hosts);
        return DS_FAIL(DS_ERR_MEM, "shared-file check of %d ranks", r->ranks.ranks);
    }
    bad[r->ranks.rank] = r->ranks.rank != 0 && !token_seen(name, value);
    if (bad[r->ranks.rank])
        gethostname((char *)hosts + (size_t)r->ranks.rank * HOST, HOST - 1);
    st = ds_world_allreduce_sum(w, bad, r->ranks.ranks, MPI_INT, "the shared-file check");
    if (st == DS_OK)
        st = ds_world_allreduce_sum(w, hosts, r->ranks.ranks * HOST, MPI_UNSIGNED_CHAR,
                                    "the shared-file check");
    if (r->ranks.rank == 0)
        unlink(name);
    char why[2048] = "";
    size_t len = 0;
    for (int k = 0; st == DS_OK && k < r->ranks.ranks && len < sizeof why - 1; k++)
        if (bad[k])
            len += (size_t)snprintf(why + len, sizeof why - len, "%srank %d on %s does not see "
                                    "the checkpoint folder %s that rank 0 writes to (a node-local "
                                    "disk?)", len ? "; " : "", k,
                                    (const char *)hosts + (size_t)k * HOST, o->checkpoint_dir);
    free(bad);
    free(hosts);
    DS_TRY(st);
    if (why[0]) {   /* the same verdict on every rank: said once, by rank 0 */
        ds_rank_agree_refused_by_all();
        return DS_FAIL(DS_ERR_IO, "the ranks do not share their checkpoint folder: %s. Every "
                       "rank must see the one folder rank 0 writes to", why);
    }
    return DS_OK;
}
