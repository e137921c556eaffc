/* rank_agree.c - the ranks' options compared before any collective depends
 * on them; see rank_agree.h. Each rank writes what must match as lines
 * "key=value", the value optionally followed by a tab and what to show for
 * it (a file's path and node): the value alone is compared. Keys starting
 * with '.' are carried, not compared. */
#include "rank_agree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_info.h"
#include "cli.h"
#include "kv_text.h"

enum {
    RECORD_MAX = 96 * 1024,   /* a rank's lines: four paths of PATH_MAX, escaped, fit */
    WHY_MAX = 720,            /* the differences named in the message (its buffer is 1 KiB) */
    SHOWN_MAX = 150,          /* one rank's value in the message, a long path cut in the middle */
    LISTED = 4                /* ranks named per option; more are counted */
};

static int refused;

int ds_rank_agree_refused(void) { return refused; }

void ds_rank_agree_refused_by_all(void) { refused = 1; }

/* The first option whose line did not fit the record, for the message
 * (one caller, the main thread). */
static char full_at[64];

/* key=value[TAB shown]: the value from fmt, whole however long (cut, two
 * values that differ past the cut would compare equal); shown (NULL: the
 * value) is what the message says for it. A value there is no memory for
 * fails the record as full. */
static void line(ds_kv_text *t, const char *key, const char *shown, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void line(ds_kv_text *t, const char *key, const char *shown, const char *fmt, ...)
{
    char small[512], *v = small;
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (v = malloc((size_t)n + 1)))
        vsnprintf(v, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0 || !v)
        t->full = 1;
    else {
        ds_kv_put(t, "%s=", key);
        ds_kv_put_str(t, v);
        if (shown) {
            ds_kv_put(t, "\t");
            ds_kv_put_str(t, shown);
        }
        ds_kv_put(t, "\n");
    }
    if (v != small)
        free(v);
    if (t->full && !full_at[0])
        snprintf(full_at, sizeof full_at, "%s", key);
}

/* The model as its name and a 64-bit FNV-1a hash of its config's JSON:
 * any layer, size or setting that differs shows. */
static void model_line(ds_kv_text *t, const ds_model_cfg *m)
{
    static char json[DS_CONFIG_JSON_MAX];   /* one caller, the main thread */
    if (ds_config_to_json(m, json, sizeof json) != DS_OK) {
        ds_status_clear_error();   /* said here, compared as it is */
        line(t, "--model/--config", NULL, "%s (its config cannot be written out)", m->name);
        return;
    }
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = json; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    line(t, "--model/--config", NULL, "%s (config hash %016llx)", m->name, (unsigned long long)h);
}

/* What makes a data file this one: its content's fingerprint (shown with
 * its path and node: a node-local copy is the usual cause), its feature
 * settings and its utterances. */
static void data_lines(ds_kv_text *t, const char *flag, const char *path, const char *host,
                       const ds_dataset *d, long kept)
{
    char key[64], fp[16], shown[DS_PATH_MAX + 160];
    ds_dataset_fingerprint(d, fp, sizeof fp);
    snprintf(shown, sizeof shown, "fingerprint %s of %s on %s", fp, path, host);
    snprintf(key, sizeof key, "%s content", flag);
    line(t, key, shown, "%s", fp);
    const ds_feature_cfg *f = &d->feat;
    snprintf(key, sizeof key, "%s features", flag);
    char bands[48] = "";   /* the settings that shape this kind alone */
    if (f->type == DS_FEAT_LOGMEL)
        snprintf(bands, sizeof bands, ", %d mels", f->n_mels);
    else if (f->type == DS_FEAT_MFCC)
        snprintf(bands, sizeof bands, ", %d mfcc", f->n_mfcc);
    line(t, key, NULL, "%s %d per frame, %d Hz, window %g s, stride %g s%s",
         ds_feature_type_name(f->type), d->n_features, f->sample_rate, f->window_size_s,
         f->window_stride_s, bands);
    snprintf(key, sizeof key, "%s utterances", flag);
    line(t, key, NULL, "%ld, %ld kept", d->n, kept);
}

/* The binary: its version and revision, and how it was built. */
static void binary_lines(ds_kv_text *t)
{
    line(t, "dstrain version", NULL, "%s", "dstrain " DSTRAIN_VERSION " (" DSTRAIN_GIT_REV ")");
    line(t, "dstrain build", NULL, "%s",
         DSTRAIN_BUILD_TYPE ", " DSTRAIN_C_COMPILER ", CUDA " DSTRAIN_CUDA_TOOLKIT
         " " DSTRAIN_CUDA_ARCHS ", cuBLAS " DSTRAIN_CUBLAS ", cuDNN " DSTRAIN_CUDNN_VERSION
         ", NCCL " DSTRAIN_NCCL_VERSION);
}

/* The run: the model, its numbers and the steps, and every option that
 * changes which collectives run when (a rank that validates, saves, prints
 * or checks at other steps sends other messages at that step). */
static void run_lines(ds_kv_text *t, const ds_train_opts *o)
{
    const ds_optim_cfg *c = &o->optim;
    char a[40];
    model_line(t, &o->model);
    line(t, "--precision", NULL, "%s", ds_dtype_name(o->precision));
    line(t, "--device", NULL, "%s", o->device);
    line(t, "--deterministic", NULL, "%s", o->compute.deterministic ? "on" : "off");
    line(t, "--tf32", NULL, "%s", o->compute.tf32 ? "on" : "off");
    line(t, "--rnn-algo", NULL, "%s", DS_CLI_RNN_ALGO_NAMES[o->compute.rnn_algo]);
    line(t, "--cuda-graphs", NULL, "%s", o->compute.capturable ? "on" : "off");
    line(t, "--cuda-graphs-max", NULL, "%d", o->graphs_max);
    /* the binding exchanges the node's CPU lists: every rank of a node takes part or none */
    line(t, "--cpu-bind", NULL, "%s", o->no_cpu_bind ? "none" : "gpu");
    line(t, "--batch", NULL, "%d", o->batch);
    line(t, "--steps", NULL, "%ld", o->steps);
    line(t, "--epochs", NULL, "%d", o->epochs);
    line(t, "--seed", NULL, "%llu", (unsigned long long)o->seed);
    line(t, "--optimizer", NULL, "%s", ds_optim_kind_name(c->kind));
    line(t, "--lr", NULL, "%s", ds_kv_num(c->lr, a, sizeof a));
    line(t, "--momentum", NULL, "%s", ds_kv_num(c->momentum, a, sizeof a));
    line(t, "--no-nesterov", NULL, "%s", c->nesterov ? "Nesterov momentum" : "plain momentum");
    line(t, "--weight-decay", NULL, "%s", ds_kv_num(c->weight_decay, a, sizeof a));
    line(t, "--lr-schedule", NULL, "%s", ds_optim_lr_schedule_name(c->schedule));
    line(t, "--anneal", NULL, "%s", ds_kv_num(c->anneal, a, sizeof a));
    line(t, "--poly-power", NULL, "%s", ds_kv_num(c->poly_power, a, sizeof a));
    line(t, "--warmup", NULL, "%ld", c->warmup_steps);
    line(t, "--max-norm", NULL, "%s", ds_kv_num(c->max_grad_norm, a, sizeof a));
    if (c->loss_scale_window > 0)
        line(t, "--loss-scale", NULL, "dynamic from %s", ds_kv_num(c->loss_scale, a, sizeof a));
    else
        line(t, "--loss-scale", NULL, "%s", ds_kv_num(c->loss_scale, a, sizeof a));
    line(t, "--loss-scale-window", NULL, "%ld", c->loss_scale_window);
    line(t, "--max-bad-steps", NULL, "%ld", o->max_bad_steps);
    line(t, "--allreduce", NULL, "%s", ds_reduce_kind_name(o->allreduce));
    line(t, "--bucket-mb", NULL, "%s", ds_kv_num(o->bucket_mb, a, sizeof a));
    line(t, "--reduce-dtype", NULL, "%s", ds_dtype_name(o->reduce_dtype));
    line(t, "--check-sync", NULL, "%ld", o->check_sync);
    line(t, "--local-bn", NULL, "%s", o->local_bn ? "per-rank BatchNorm" : "synchronised BatchNorm");
    line(t, "--print-every", NULL, "%d", o->print_every);
}

/* The data each rank opened, and where the run saves and resumes. */
static void data_and_checkpoint_lines(ds_kv_text *t, const run_state *r, const char *host)
{
    const ds_train_opts *o = r->o;
    char a[40], b[40];
    if (!o->train_path) {
        line(t, "--train/--synthetic", NULL, "--synthetic");
        line(t, "--synthetic-utts", NULL, "%d", o->synthetic_utts);
        line(t, "--max-frames", NULL, "%d", o->max_frames);
    } else {
        line(t, "--train/--synthetic", NULL, "--train");
        data_lines(t, "--train", o->train_path, host, r->data.train, r->data.n_keep);
        line(t, "--min-duration/--max-duration", NULL, "%s, %s",
             ds_kv_num(o->min_duration, a, sizeof a), ds_kv_num(o->max_duration, b, sizeof b));
        line(t, "--spec-augment", NULL, "%d x %d bins, %d x %d frames", o->aug.freq_masks,
             o->aug.freq_width, o->aug.time_masks, o->aug.time_width);
    }
    line(t, "--norm", NULL, "%s", ds_feature_norm_name(o->norm));
    line(t, "--val", o->val_path ? o->val_path : "none", "%s", o->val_path ? "given" : "none");
    if (o->val_path)
        data_lines(t, "--val", o->val_path, host, r->data.val, r->data.n_val);
    line(t, "--val-every", NULL, "%ld", o->val_every);
    line(t, "--checkpoint-dir", o->checkpoint_dir ? o->checkpoint_dir : "none", "%s",
         o->checkpoint_dir ? "given" : "none");
    line(t, "--checkpoint-every", NULL, "%ld", o->checkpoint_every);
    const int automatic = o->resume && !strcmp(o->resume, "auto");
    line(t, "--resume", o->resume ? o->resume : "none", "%s",
         !o->resume ? "none" : automatic ? "auto" : "a checkpoint");
}

/* Every rank's lines (mine [len]) into all, recs[k] the start of rank k's. */
static ds_status exchange(ds_world *w, const char *mine, char **all, char **recs)
{
    const int n = w->size, len = (int)strlen(mine) + 1;
    int *lens = calloc((size_t)n, sizeof *lens), *at = calloc((size_t)n, sizeof *at);
    ds_status st = DS_OK;
    if (!lens || !at) {
        st = DS_FAIL(DS_ERR_MEM, "the options of %d ranks", n);
        goto free_counts;
    }
    ds_world_wait_begin(w, "comparing the ranks' options");
    int rc = MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, w->comm);
    ds_world_wait_end(w);
    DS_TRY_GOTO(st, ds_world_check(rc, "MPI_Allgather of the lengths of the ranks' options"),
                free_counts);
    long total = 0;
    for (int k = 0; k < n; k++) {
        at[k] = (int)total;
        total += lens[k] > 0 && lens[k] <= RECORD_MAX ? lens[k] : 0;
        if (lens[k] <= 0 || lens[k] > RECORD_MAX) {   /* not ours: another program's protocol */
            st = DS_FAIL(DS_ERR_MPI, "rank %d sent %d bytes of options, not a dstrain of this "
                         "version's: run one dstrain binary on every rank", k, lens[k]);
            goto free_counts;
        }
    }
    *all = malloc((size_t)total);
    if (!*all) {
        st = DS_FAIL(DS_ERR_MEM, "the options of %d ranks (%ld bytes)", n, total);
        goto free_counts;
    }
    ds_world_wait_begin(w, "comparing the ranks' options");
    rc = MPI_Allgatherv(mine, len, MPI_CHAR, *all, lens, at, MPI_CHAR, w->comm);
    ds_world_wait_end(w);
    DS_TRY_GOTO(st, ds_world_check(rc, "MPI_Allgatherv of the ranks' options"), free_counts);
    for (int k = 0; k < n; k++) {
        recs[k] = *all + at[k];
        recs[k][lens[k] - 1] = '\0';
    }
free_counts:
    free(lens);
    free(at);
    return st;
}

/* key's value in rec (the line "key=value[TAB shown]"): its start, length
 * and what to show for it [*slen]; NULL when rec has no such key. */
static const char *value_of(const char *rec, const char *key, size_t klen, size_t *vlen,
                            const char **shown, size_t *slen)
{
    size_t n = 0;
    const char *v = ds_kv_find(rec, key, klen, &n);
    if (!v)
        return NULL;
    const char *tab = memchr(v, '\t', n);
    *vlen = tab ? (size_t)(tab - v) : n;
    *shown = tab ? tab + 1 : v;
    *slen = tab ? (size_t)(v + n - tab - 1) : n;
    return v;
}

/* "rank K has VALUE" into t, a value over SHOWN_MAX cut in its middle. */
static void put_rank(ds_kv_text *t, int k, const char *shown, size_t slen)
{
    if (slen <= SHOWN_MAX)
        ds_kv_put(t, "rank %d has %.*s", k, (int)slen, shown);
    else
        ds_kv_put(t, "rank %d has %.*s...%.*s", k, SHOWN_MAX / 2, shown, SHOWN_MAX / 2,
            shown + slen - SHOWN_MAX / 2);
}

/* Each key of rank 0's whose value another rank has otherwise: "KEY differs
 * between ranks: rank 0 has A, rank 2 has B" into why (those that fit) and
 * a line each into all; returns how many keys differ, *left those that did
 * not fit in why. */
static int compare(char **recs, int n, ds_kv_text *why, ds_kv_text *all, int *left)
{
    int differ = 0;
    *left = 0;
    for (const char *p = recs[0]; *p;) {
        const char *end = strchr(p, '\n'), *eq = memchr(p, '=', end ? (size_t)(end - p) : strlen(p));
        if (eq && *p != '.') {
            const size_t klen = (size_t)(eq - p);
            size_t v0len, s0len, vlen, slen;
            const char *s0, *s, *v0 = value_of(recs[0], p, klen, &v0len, &s0, &s0len);
            int ranks[LISTED], listed = 0, more = 0;
            for (int k = 1; k < n; k++) {
                const char *v = value_of(recs[k], p, klen, &vlen, &s, &slen);
                if (v && (vlen != v0len || strncmp(v, v0, vlen)))   /* absent: another key says so */
                    listed < LISTED ? (void)(ranks[listed++] = k) : (void)more++;
            }
            if (listed) {
                char one[1024];
                ds_kv_text o = {one, sizeof one, 0, 0};
                ds_kv_put(&o, "%.*s differs between ranks: ", (int)klen, p);
                put_rank(&o, 0, s0, s0len);
                for (int i = 0; i < listed; i++) {
                    value_of(recs[ranks[i]], p, klen, &vlen, &s, &slen);
                    ds_kv_put(&o, ", ");
                    put_rank(&o, ranks[i], s, slen);
                }
                if (more)
                    ds_kv_put(&o, " (and %d more rank%s)", more, more == 1 ? "" : "s");
                differ++;
                ds_kv_put(all, "  %s\n", one);
                if (!o.full && why->len + o.len + 2 < why->cap)
                    ds_kv_put(why, "%s%s", why->len ? "; " : "", one);
                else
                    ++*left;
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
    return differ;
}

/* Every rank's lines compared: DS_OK, or the run refused on this rank as
 * on every other. Differences past the message's room are counted there,
 * and rank 0 lists them all (list [cap]) before. */
static ds_status verdict(char **recs, const ds_world *w, char *list, size_t cap)
{
    char why[WHY_MAX] = "";
    ds_kv_text t = {why, sizeof why, 0, 0}, all = {list, cap, 0, 0};
    list[0] = '\0';
    int left = 0;
    const int differ = compare(recs, w->size, &t, &all, &left);
    if (!differ)
        return DS_OK;
    refused = 1;   /* every rank has the same lines, and comes to the same verdict */
    char more[96] = "";
    if (left) {
        snprintf(more, sizeof more, "; and %d more (rank 0 lists all %d above)", left, differ);
        if (w->rank == 0) {
            fprintf(stderr, "dstrain: the ranks' options differ in %d places:\n%s", differ,
                    list);
            fflush(stderr);
        }
    }
    return DS_FAIL(DS_ERR_ARG, "the ranks were started with different options: %s%s. Give every "
                   "rank the same options and data (all %d ranks refuse the run; rank 0 says so "
                   "for them)", why, more, w->size);
}

ds_status ds_rank_agree_train(const run_state *r)
{
    const ds_train_opts *o = r->o;
    if (!o->world || o->world->size <= 1)
        return DS_OK;
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char *mine = malloc(RECORD_MAX), *all = NULL, **recs = calloc((size_t)o->world->size,
                                                                     sizeof *recs);
    ds_status st = DS_OK;
    if (!mine || !recs) {   /* this rank ends the job: the others wait at the exchange */
        st = DS_FAIL(DS_ERR_MEM, "the options to compare across %d ranks", o->world->size);
        goto free_records;
    }
    ds_kv_text t = {mine, RECORD_MAX, 0, 0};
    full_at[0] = '\0';
    line(&t, ".host", NULL, "%s", host);
    binary_lines(&t);
    run_lines(&t, o);
    data_and_checkpoint_lines(&t, r, host);
    if (t.full) {
        st = DS_FAIL(DS_ERR_ARG, "the options to compare across ranks are over %d bytes, "
                     "from %s on: give it a shorter value", RECORD_MAX, full_at);
        goto free_records;
    }
    DS_TRY_GOTO(st, exchange(o->world, mine, &all, recs), free_records);
    st = verdict(recs, o->world, mine, RECORD_MAX);   /* mine's room for the list */
free_records:
    free(mine);
    free(all);
    free(recs);
    return st;
}
