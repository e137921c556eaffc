/* train.c - the step and the epoch loop over synthetic data or HDF5 feature
 * files, with validation and checkpoints at the end of each epoch. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "evaluate.h"
#include "filter.h"
#include "score.h"
#include "synthetic.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int multi(const ds_dist *d) { return d && d->world && d->world->size > 1; }

ds_status ds_train_step(ds_model *m, ds_optim *o, const ds_batch *b, double lr, ds_dist *d,
                        ds_step_metrics *out)
{
    ds_loss loss;
    DS_TRY(ds_model_set_batch(m, b));
    double sums[2] = {b->n, 0};
    if (multi(d)) {   /* the loss and its gradient are averaged over the global batch */
        DS_TRY(ds_world_allreduce_sum(d->world, sums, 1, MPI_DOUBLE, "the global batch size"));
        ds_model_set_loss_norm(m, sums[0]);
    }
    DS_TRY(ds_model_zero_grad(m));
    DS_TRY(ds_model_forward(m, 1));
    DS_TRY(ds_model_loss(m, 1, &loss, NULL));
    if (d && d->reducer)
        ds_reducer_begin(d->reducer);
    DS_TRY(ds_model_backward(m));
    if (d && d->reducer)
        DS_TRY(ds_reducer_finish(d->reducer, &d->timing));
    DS_TRY(ds_optim_clip(o, ds_model_grads(m), &out->grad_norm));   /* global: grads are summed */
    sums[0] = loss.loss;
    sums[1] = loss.n_infinite;
    if (multi(d))
        DS_TRY(ds_world_allreduce_sum(d->world, sums, 2, MPI_DOUBLE, "the loss"));
    out->loss = sums[0];
    out->n_infinite = (int)sums[1];
    out->lr = lr;
    out->skipped = !isfinite(out->grad_norm) || !isfinite(out->loss);
    if (!out->skipped)
        DS_TRY(ds_optim_step(o, ds_model_params(m), ds_model_grads(m), lr));
    return DS_OK;
}

typedef struct {
    const ds_train_opts *o;
    ds_optim_cfg ocfg;
    long per_epoch, total;
    const ds_backend *be;
    ds_ctx *ctx;
    ds_model *model;
    ds_optim *optim;
    ds_scorer *scorer;
    ds_log log;
    ds_feature_cfg feat;
    /* HDF5 data */
    ds_dataset *train, *val;
    long *keep, n_keep, *val_keep, n_val;
    ds_filter_stats fs;
    ds_sampler *sampler;
    ds_loader *loader;
    /* synthetic data: every rank draws the same global batch and takes its share */
    ds_rng rng;
    ds_batch synth_global, synth;
    long synth_left;
    /* ranks */
    ds_dist dist;
    int rank, ranks;
    double *rank_ms;            /* [ranks] step times, gathered */
} run_state;

static void run_close(run_state *r)
{
    ds_log_close(&r->log);
    if (r->loader)
        ds_loader_stop(r->loader);
    if (r->sampler)
        ds_sampler_destroy(r->sampler);
    free(r->keep);
    free(r->val_keep);
    if (r->train)
        ds_dataset_close(r->train);
    if (r->val)
        ds_dataset_close(r->val);
    ds_batch_free(&r->synth);
    ds_batch_free(&r->synth_global);
    ds_reducer_destroy(r->dist.reducer);
    free(r->rank_ms);
    ds_scorer_destroy(r->scorer);
    ds_optim_destroy(r->optim);
    ds_model_destroy(r->model);
    if (r->ctx)
        r->be->ctx_destroy(r->ctx);
}

/* Opens a feature file for the model and keeps what it can train on. */
static ds_status open_split(run_state *r, const char *path, ds_dataset **d, long **keep, long *n,
                            ds_filter_stats *fs)
{
    const ds_train_opts *o = r->o;
    DS_TRY(ds_dataset_open(path, d));
    if ((*d)->n_features != o->model.n_features)
        return DS_FAIL(DS_ERR_ARG, "%s: %d features per frame, model %s expects %d", path,
                       (*d)->n_features, o->model.name, o->model.n_features);
    DS_TRY(ds_dataset_filter(*d, &o->model, o->min_duration, o->max_duration, keep, n, fs));
    ds_print("%s: %ld of %ld utterances kept (dropped: %ld too short for CTC, %ld outside the "
             "duration limits)\n",
             path, fs->kept, (*d)->n, fs->ctc_impossible, fs->too_short + fs->too_long);
    if (*n == 0)
        return DS_FAIL(DS_ERR_ARG, "%s: no utterance left to use", path);
    return DS_OK;
}

static ds_status open_data(run_state *r, ds_model_limits *lim)
{
    const ds_train_opts *o = r->o;
    if (!o->train_path) {
        r->feat = ds_feature_defaults();
        lim->frames = o->max_frames;
        lim->label_len = ds_synthetic_max_labels(&o->model, o->max_frames);
        ds_rng_seed(&r->rng, o->seed ^ 0xda7aULL);
        const int global = o->batch * r->ranks;
        r->per_epoch = (o->synthetic_utts + global - 1) / global;
        DS_TRY(ds_batch_alloc(&r->synth_global, global, o->max_frames, o->model.n_features,
                              global * lim->label_len));
        return ds_batch_alloc(&r->synth, o->batch, o->max_frames, o->model.n_features,
                              o->batch * lim->label_len);
    }
    DS_TRY(open_split(r, o->train_path, &r->train, &r->keep, &r->n_keep, &r->fs));
    r->feat = r->train->feat;
    lim->frames = r->fs.max_frames;
    lim->label_len = r->fs.max_labels;
    if (o->val_path) {
        ds_filter_stats vs;
        DS_TRY(open_split(r, o->val_path, &r->val, &r->val_keep, &r->n_val, &vs));
        lim->frames = vs.max_frames > lim->frames ? vs.max_frames : lim->frames;
        lim->label_len = vs.max_labels > lim->label_len ? vs.max_labels : lim->label_len;
    }
    int *frames = malloc((size_t)r->n_keep * sizeof *frames);
    if (!frames)
        return DS_FAIL(DS_ERR_MEM, "sampler index");
    for (long i = 0; i < r->n_keep; i++)
        frames[i] = r->train->frames[r->keep[i]];
    ds_status st = ds_sampler_create(r->keep, frames, r->n_keep, o->batch, r->ranks, o->seed,
                                     &r->sampler);
    free(frames);
    r->per_epoch = st == DS_OK ? ds_sampler_batches(r->sampler) : 0;
    return st;
}

static void hook_ready(void *user, size_t offset)
{
    ds_reducer_ready(((run_state *)user)->dist.reducer, offset);
}

/* Synchronised BatchNorm: moments and counts summed over ranks. */
static ds_status hook_bn(void *user, void *mom, size_t len, double *count)
{
    run_state *r = user;
    MPI_Datatype t = ds_mpi_type(ds_model_dtype(r->model));
    DS_TRY(ds_world_allreduce_sum(r->o->world, mom, (int)len, t, "BatchNorm moments"));
    return ds_world_allreduce_sum(r->o->world, count, 1, MPI_DOUBLE, "BatchNorm counts");
}

/* Rank 0's initial weights, so every rank starts identical. */
static ds_status broadcast_params(run_state *r)
{
    const size_t n = ds_model_param_count(r->model);
    double *host = malloc(n * sizeof *host);
    if (!host)
        return DS_FAIL(DS_ERR_MEM, "parameter broadcast");
    ds_status st = ds_model_get(r->model, DS_PARAMS, host);
    for (size_t at = 0; st == DS_OK && at < n; at += 1 << 26)   /* MPI counts are int */
        st = ds_world_bcast(r->o->world, host + at, (int)(n - at < (1 << 26) ? n - at : 1 << 26),
                            MPI_DOUBLE, "the initial weights");
    if (st == DS_OK)
        st = ds_model_put(r->model, DS_PARAMS, host);
    free(host);
    return st;
}

static ds_status setup_ranks(run_state *r)
{
    const ds_train_opts *o = r->o;
    if (r->ranks == 1)
        return DS_OK;
    DS_TRY(broadcast_params(r));
    const size_t elem = ds_dtype_size(o->precision);
    size_t bucket = (size_t)(o->bucket_mb * 1024 * 1024) / elem;
    DS_TRY(ds_reducer_create(o->world, o->allreduce, r->be, r->ctx, o->precision,
                             ds_model_grads(r->model), ds_model_param_count(r->model),
                             bucket ? bucket : 1, &r->dist.reducer));
    r->dist.world = o->world;
    const ds_model_hooks h = {.grad_ready = hook_ready, .bn_reduce = o->local_bn ? NULL : hook_bn,
                              .user = r};
    ds_model_set_hooks(r->model, &h);
    r->rank_ms = calloc((size_t)r->ranks, sizeof *r->rank_ms);
    if (!r->rank_ms)
        return DS_FAIL(DS_ERR_MEM, "step times");
    ds_print("%d ranks, gradients in %d buckets of up to %.1f MiB, %s BatchNorm\n", r->ranks,
             ds_reducer_buckets(r->dist.reducer), o->bucket_mb, o->local_bn ? "per-rank" : "synchronised");
    return DS_OK;
}

static ds_status run_open(const ds_train_opts *o, run_state *r)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    r->rank = o->world ? o->world->rank : 0;
    r->ranks = o->world ? o->world->size : 1;
    r->be = ds_backend_get(o->device);
    if (!r->be)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--device %s: this build has no such backend%s", o->device,
                       strcmp(o->device, "cuda") ? "" : " (configure with the CUDA toolkit present)");
    ds_model_limits lim = {.batch = o->batch};
    DS_TRY(open_data(r, &lim));
    r->total = o->steps > 0 ? o->steps : r->per_epoch * (o->epochs > 0 ? o->epochs : 1);
    r->ocfg = o->optim;
    if (r->ocfg.total_steps <= 0)
        r->ocfg.total_steps = r->total;
    DS_TRY(r->be->ctx_create(0, &r->ctx));
    DS_TRY(ds_model_create(&o->model, r->be, r->ctx, o->precision, &lim, &r->model));
    DS_TRY(ds_model_init_params(r->model, o->seed));
    DS_TRY(setup_ranks(r));
    DS_TRY(ds_optim_create(&r->ocfg, r->be, r->ctx, o->precision,
                           ds_model_param_count(r->model), &r->optim));
    DS_TRY(ds_scorer_create(&o->model, &lim, &r->scorer));
    if (r->rank != 0)   /* rank 0 writes the log and the checkpoints */
        return DS_OK;
    if (o->checkpoint_dir && mkdir(o->checkpoint_dir, 0777) != 0 && errno != EEXIST)
        return DS_FAIL(DS_ERR_IO, "%s: cannot create the checkpoint directory", o->checkpoint_dir);
    return ds_log_open(&r->log, o->log_path);
}

static ds_status epoch_begin(run_state *r, int epoch)
{
    const ds_train_opts *o = r->o;
    if (!r->train) {
        r->synth_left = r->per_epoch;
        return DS_OK;
    }
    ds_loader_cfg lc = {.data = r->train, .sampler = r->sampler, .rank = r->rank, .epoch = epoch,
                        .batch = o->batch,
                        .max_frames = r->fs.max_frames, .max_labels = r->fs.max_labels,
                        .norm = o->norm, .aug = o->aug, .seed = o->seed, .depth = 3};
    return ds_loader_start(&lc, &r->loader);
}

/* The next batch of the epoch, or NULL at its end. */
static ds_status next_batch(run_state *r, const ds_batch **b)
{
    if (r->train)
        return ds_loader_next(r->loader, b);
    *b = NULL;
    if (r->synth_left-- <= 0)
        return DS_OK;
    const int B = r->o->batch;
    DS_TRY(ds_synthetic_batch(&r->rng, &r->o->model, B * r->ranks, r->o->max_frames, &r->synth_global));
    if (r->ranks == 1) {
        *b = &r->synth_global;
        return DS_OK;
    }
    DS_TRY(ds_batch_slice(&r->synth_global, r->rank * B, B, &r->synth));
    *b = &r->synth;
    return DS_OK;
}

static ds_status save_checkpoint(run_state *r, long step, int epoch)
{
    if (r->rank != 0)
        return DS_OK;
    char path[1024];
    snprintf(path, sizeof path, "%s/step-%08ld.h5", r->o->checkpoint_dir, step);
    ds_ckpt_info info = {.step = step, .epoch = epoch, .feat = r->feat, .norm = r->o->norm};
    DS_TRY(ds_checkpoint_save(path, r->model, &info));
    ds_print("checkpoint %s\n", path);
    return DS_OK;
}

static ds_status epoch_end(run_state *r, long step, int epoch, ds_train_result *res)
{
    if (r->loader) {
        ds_loader_stop(r->loader);
        r->loader = NULL;
    }
    if (r->val) {
        ds_eval_result ev;
        DS_TRY(ds_evaluate(r->model, r->val, r->val_keep, r->n_val, r->o->batch, r->o->norm, &ev));
        res->val_cer = ds_score_cer(&ev.score);
        res->val_wer = ds_score_wer(&ev.score);
        res->val_loss = ev.loss;
        char line[512];
        snprintf(line, sizeof line,
                 "{\"eval\":\"val\",\"epoch\":%d,\"step\":%ld,\"loss\":%.10g,\"wer\":%.6f,"
                 "\"cer\":%.6f,\"utterances\":%ld,\"n_inf\":%ld}",
                 epoch, step, ev.loss, res->val_wer, res->val_cer, ev.score.utterances, ev.n_infinite);
        DS_TRY(ds_log_raw(&r->log, line));
        ds_print("epoch %d  val loss %.4f  WER %.3f  CER %.3f  (%ld utterances)\n", epoch, ev.loss,
                 res->val_wer, res->val_cer, ev.score.utterances);
    }
    if (r->o->checkpoint_dir && r->o->checkpoint_every <= 0)
        DS_TRY(save_checkpoint(r, step, epoch));
    return DS_OK;
}

static void print_step(long total, const ds_step_metrics *s)
{
    ds_print("step %6ld/%ld  epoch %d  loss %8.4f  cer %5.3f  lr %.3g  |g| %8.3f  %6.1f ms  "
             "%7.1f utt/s%s\n",
             s->step, total, s->epoch, s->loss, s->cer, s->lr, s->grad_norm, s->step_ms,
             s->samples_per_s, s->skipped ? "  (skipped: non-finite gradient)" : "");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Per-rank step times (min, median, max), the global rate and the reduction's
 * timing into s. */
static ds_status rank_metrics(run_state *r, ds_step_metrics *s, int global_n)
{
    s->ranks = r->ranks;
    s->samples_per_s = global_n / (s->step_ms / 1e3);
    if (r->ranks == 1)
        return DS_OK;
    ds_world *w = r->o->world;
    ds_world_wait_begin(w, "gathering step times");
    int rc = MPI_Allgather(&s->step_ms, 1, MPI_DOUBLE, r->rank_ms, 1, MPI_DOUBLE, w->comm);
    ds_world_wait_end(w);
    if (rc != MPI_SUCCESS)
        return DS_FAIL(DS_ERR_MPI, "MPI_Allgather of step times failed");
    qsort(r->rank_ms, (size_t)r->ranks, sizeof *r->rank_ms, cmp_double);
    s->step_ms_min = r->rank_ms[0];
    s->step_ms_max = r->rank_ms[r->ranks - 1];
    s->step_ms_median = r->ranks % 2 ? r->rank_ms[r->ranks / 2]
                                     : (r->rank_ms[r->ranks / 2 - 1] + r->rank_ms[r->ranks / 2]) / 2;
    s->samples_per_s = global_n / (s->step_ms_max / 1e3);
    const ds_reduce_timing *t = &r->dist.timing;
    s->buckets = t->buckets;
    s->buckets_early = t->started_early;
    s->backward_ms = t->backward_ms;
    s->reduce_ms = t->reduce_ms;
    s->reduce_hidden_ms = t->hidden_ms;
    s->reduce_wait_ms = t->wait_ms;
    return DS_OK;
}

/* Stops the run, naming the ranks whose parameters differ from rank 0's. */
static ds_status check_sync(run_state *r, long step)
{
    const size_t n = ds_model_param_count(r->model);
    double *host = malloc(n * sizeof *host);
    uint64_t *all = calloc((size_t)r->ranks, sizeof *all);
    ds_status st = host && all ? ds_model_get(r->model, DS_PARAMS, host) : DS_FAIL(DS_ERR_MEM, "checksum");
    uint64_t h = 1469598103934665603ULL;   /* FNV-1a over the bytes: any difference shows */
    for (size_t i = 0; st == DS_OK && i < n * sizeof *host; i++)
        h = (h ^ ((const unsigned char *)host)[i]) * 1099511628211ULL;
    if (st == DS_OK) {
        ds_world_wait_begin(r->o->world, "comparing parameter checksums");
        if (MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, r->o->world->comm) != MPI_SUCCESS)
            st = DS_FAIL(DS_ERR_MPI, "MPI_Allgather of parameter checksums failed");
        ds_world_wait_end(r->o->world);
    }
    char differ[256] = "";
    for (int k = 1; st == DS_OK && k < r->ranks; k++)
        if (all[k] != all[0] && strlen(differ) < sizeof differ - 16)
            snprintf(differ + strlen(differ), sizeof differ - strlen(differ), "%s%d", *differ ? ", " : "", k);
    if (st == DS_OK && *differ)
        st = DS_FAIL(DS_ERR_NUM, "after step %ld the parameters of rank(s) %s differ from rank 0's", step,
                     differ);
    free(host);
    free(all);
    return st;
}

/* DSTRAIN_FAULT=exit|hang:RANK:STEP makes that rank exit or hang before
 * that step: for the tests of what the other ranks do then. */
static void inject_fault(const run_state *r, long step)
{
    const char *f = getenv("DSTRAIN_FAULT");
    char kind[8];
    int rank;
    long at;
    if (!f || sscanf(f, "%7[a-z]:%d:%ld", kind, &rank, &at) != 3 || rank != r->rank || at != step)
        return;
    fprintf(stderr, "dstrain: rank %d: injected fault (%s) at step %ld\n", rank, kind, step);
    if (!strcmp(kind, "exit"))
        _exit(7);
    for (;;)
        pause();
}

/* One step on b with its metrics, console line and log line. */
static ds_status run_step(run_state *r, const ds_batch *b, int global_n, long step, int epoch,
                          ds_train_result *res)
{
    const ds_train_opts *o = r->o;
    ds_step_metrics s = {.step = step + 1, .epoch = epoch, .cer = -1, .batch = global_n,
                         .frames = b->t};
    inject_fault(r, step + 1);
    double t0 = now_ms();
    DS_TRY(ds_train_step(r->model, r->optim, b, ds_optim_lr(&r->ocfg, step, epoch), &r->dist, &s));
    s.step_ms = now_ms() - t0;
    DS_TRY(rank_metrics(r, &s, global_n));
    const int report = o->print_every > 0 && ((step + 1) % o->print_every == 0 || step + 1 == r->total);
    if (report) {   /* CER of this rank's batch, from the logits of this step's forward */
        ds_score sc = {0};
        DS_TRY(ds_scorer_add(r->scorer, r->model, b, &sc));
        s.cer = res->last_cer = ds_score_cer(&sc);
    }
    DS_TRY(ds_log_step(&r->log, &s));
    if (report)
        print_step(r->total, &s);
    if (step == 0)
        res->first_loss = s.loss;
    else
        res->mean_step_ms += s.step_ms;   /* a sum until the end */
    res->last_loss = s.loss;
    res->skipped += s.skipped;
    res->steps = step + 1;
    if (o->check_sync > 0 && r->ranks > 1 && (step + 1) % o->check_sync == 0)
        DS_TRY(check_sync(r, step + 1));
    if (o->checkpoint_dir && o->checkpoint_every > 0 && (step + 1) % o->checkpoint_every == 0)
        DS_TRY(save_checkpoint(r, step + 1, epoch));
    return DS_OK;
}

/* Every rank learns whether all have a batch (a short last global batch can
 * leave one empty: then the epoch ends for all) and the global batch size. */
static ds_status agree_on_batch(run_state *r, const ds_batch *b, int *global_n)
{
    int v[2] = {b ? 0 : 1, b ? b->n : 0};
    if (r->ranks > 1)
        DS_TRY(ds_world_allreduce_sum(r->o->world, v, 2, MPI_INT, "the next batch"));
    *global_n = v[0] ? 0 : v[1];
    return DS_OK;
}

ds_status ds_train(const ds_train_opts *o, ds_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->val_cer = res->val_wer = res->val_loss = res->last_cer = -1;
    run_state r;
    ds_status st;
    DS_TRY_GOTO(st, run_open(o, &r), out);
    long step = 0;
    for (int epoch = 0; step < r.total; epoch++) {
        const ds_batch *b;
        DS_TRY_GOTO(st, epoch_begin(&r, epoch), out);
        while (step < r.total) {
            int global_n;
            DS_TRY_GOTO(st, next_batch(&r, &b), out);
            DS_TRY_GOTO(st, agree_on_batch(&r, b, &global_n), out);
            if (!global_n)
                break;
            DS_TRY_GOTO(st, run_step(&r, b, global_n, step, epoch, res), out);
            step++;
        }
        DS_TRY_GOTO(st, epoch_end(&r, step, epoch, res), out);
    }
    if (res->steps > 1) {
        res->mean_step_ms /= res->steps - 1;
        res->samples_per_s = o->batch * r.ranks / (res->mean_step_ms / 1e3);
    }
out:
    run_close(&r);
    return st;
}
