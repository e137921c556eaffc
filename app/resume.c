/* resume.c - --resume auto|PATH: the checkpoint to go on from, checked
 * against this run and loaded on every rank. Rank 0 chooses (with auto: the
 * newest that validates, a damaged one reported and passed over for the one
 * before it), reads it, and sends the others what it holds: the file is read
 * once, however many ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "file.h"
#include "file_input.h"
#include "kv_text.h"
#include "rank_agree.h"
#include "run_config.h"
#include "train_run.h"

/* A checkpoint of a dstrain before the fingerprint sampled the features
 * records the index part alone (ds_dataset_index_fingerprint): when that
 * matches, this run's lines with the checkpoint's value in its place, so
 * that the rest is compared as usual (NULL: not such a checkpoint; free
 * it). The features themselves cannot be compared: said in a note. */
static char *as_older_fingerprint(const run_state *r, const char *path, const char *was)
{
    char was_fp[32], now_fp[16], index_fp[16];
    static const char key[] = "data_fingerprint";
    size_t at_len = 0;
    /* the key's own line: its text inside a value (a --train path) is not it */
    const char *at = ds_kv_find(r->loop.run_config, key, sizeof key - 1, &at_len);
    if (!r->data.train || !at || !ds_kv_value_of(was, key, was_fp, sizeof was_fp))
        return NULL;
    ds_dataset_fingerprint(r->data.train, now_fp, sizeof now_fp);
    ds_dataset_index_fingerprint(r->data.train, index_fp, sizeof index_fp);
    if (!strcmp(was_fp, now_fp) || strcmp(was_fp, index_fp) || at_len != strlen(was_fp))
        return NULL;
    char *now = strdup(r->loop.run_config);
    if (!now)
        return NULL;
    memcpy(now + (at - r->loop.run_config), was_fp, at_len);
    ds_log_print("resume: %s was written by a dstrain whose data_fingerprint covered the "
                 "utterances' lengths and labels only: those match %s; its features' content "
                 "cannot be compared\n", path, r->o->train_path);
    return now;
}

/* A different run's checkpoint is refused with what differs; allowed
 * differences are printed. */
static ds_status same_run(run_state *r, const char *path, const ds_ckpt_info *info)
{
    if (!info->has_resume)
        return DS_FAIL(DS_ERR_ARG, "%s: holds no optimizer state or position (written by dstrain "
                       "%s, or not by a training run): cannot resume from it exactly", path,
                       info->version);
    char why[2048], notes[2048];
    char *older = as_older_fingerprint(r, path, info->run_config);
    const int differ = ds_run_config_diff(info->run_config, older ? older : r->loop.run_config,
                                          why, sizeof why, notes, sizeof notes);
    free(older);
    if (differ)
        return DS_FAIL(DS_ERR_ARG, "%s: made by a different run, it cannot be resumed by this one: "
                       "%s%s", path, why, strstr(why, "data_fingerprint") ? " (data_fingerprint: "
                       "the utterances' lengths and labels and a sample of the features: the "
                       "training data are not those the checkpoint was trained on)" : "");
    if (notes[0])
        ds_log_print("resume: options changed since %s: %s\n", path, notes);
    return DS_OK;
}

/* Checks and loads path into this rank's model and optimizer; sets where
 * the loop starts. *foreign: it failed as another run's checkpoint, not as
 * a damaged one. */
static ds_status take(run_state *r, const char *path, int *foreign)
{
    ds_model_cfg cfg;
    ds_dtype dt;
    ds_ckpt_info info;
    *foreign = 0;
    /* a FIFO or device would block HDF5's open for ever */
    DS_TRY(ds_file_require_regular(path, "checkpoint to resume (--resume)"));
    DS_TRY(ds_checkpoint_read_config(path, &cfg, &dt, &info));
    ds_status st = same_run(r, path, &info);
    if (st != DS_OK) {
        *foreign = 1;
        return st;
    }
    DS_TRY(ds_checkpoint_load_resume(path, r->m.model, r->m.optim));
    r->pos.start_step = r->pos.saved_step = r->pos.tried_step = info.step;   /* not saved again */
    r->pos.tried_ended = info.next_epoch > info.epoch;
    r->pos.start_epoch = info.next_epoch;
    r->pos.start_batch = info.next_batch;
    r->pos.bad_run = info.bad_run;
    memcpy(r->data.rng.s, info.rng, sizeof r->data.rng.s);
    memcpy(r->loop.run_id, info.run_id, sizeof r->loop.run_id);   /* the run goes on as itself */
    return DS_OK;
}

/* Rank 0: --resume auto's choice -> path ("" when the directory has no
 * checkpoint yet). Damaged ones are reported and passed over. */
static ds_status choose(run_state *r, char *path, size_t cap)
{
    const char *dir = r->loop.ckpt_dir;   /* resolved at the start */
    long *steps;
    size_t n;
    path[0] = '\0';
    DS_TRY(ds_checkpoint_list(dir, &steps, &n));
    ds_status st = DS_OK;
    size_t i = 0;
    for (; i < n; i++) {
        int foreign;
        snprintf(path, cap, "%s/step-%08ld.h5", dir, steps[i]);
        st = take(r, path, &foreign);
        if (st == DS_OK || foreign)   /* another run's: resuming an older one is no cure */
            break;
        ds_log_print("resume: skipping %s: %s\n", path, ds_status_last_error());
        ds_status_clear_error();
        st = DS_OK;
    }
    if (st != DS_OK)
        path[0] = '\0';
    if (st == DS_OK && i == n && n > 0) {
        path[0] = '\0';
        st = DS_FAIL(DS_ERR_IO, "%s: none of its %zu checkpoints validates (see above: where the "
                     "reason is a lock, set HDF5_USE_FILE_LOCKING=FALSE; else move them away to "
                     "start afresh)", dir, n);
    }
    if (st == DS_OK && n == 0) {
        ds_log_print("resume: no checkpoint in %s yet: starting at step 0\n", dir);
        const char *restarts = getenv("SLURM_RESTART_COUNT");
        char *end = NULL;
        const long n_restarts = restarts ? strtol(restarts, &end, 10) : 0;
        if (restarts && (end == restarts || *end || n_restarts < 0))   /* not Slurm's count */
            ds_log_print("warning: SLURM_RESTART_COUNT=%s is not a count of restarts (a whole "
                     "number >= 0): ignored\n", restarts);
        else if (n_restarts > 0)   /* a requeue should find its predecessor's */
            ds_log_print("warning: this job was requeued (SLURM_RESTART_COUNT=%s) but %s holds no "
                     "checkpoint: if the run before wrote some, the folder is not the one it "
                     "wrote to (a node-local disk?); this run starts at step 0\n", restarts, dir);
    }
    free(steps);
    return st;
}

/* What rank 0 read from the checkpoint, sent to the others (who read no
 * file): the weights, BatchNorm's statistics, the optimizer's state and
 * the position. 64 ranks once read a 1 GB checkpoint 64 times. */
static ds_status send_resumed(run_state *r)
{
    ds_world *w = r->o->world;
    DS_TRY(ds_model_share_params(r->m.model, ds_ranks_bcast_bytes, w));
    DS_TRY(ds_model_share_state(r->m.model, r->m.optim, ds_ranks_bcast_bytes, w));
    long pos[6] = {r->pos.start_step, r->pos.tried_ended, r->pos.start_epoch,
                   r->pos.start_batch, r->pos.bad_run, 0};
    DS_TRY(ds_world_bcast(w, pos, 6, MPI_LONG, "the resumed position"));
    DS_TRY(ds_world_bcast(w, r->data.rng.s, (int)sizeof r->data.rng.s, MPI_BYTE,
                          "the resumed generator"));
    r->pos.start_step = r->pos.saved_step = r->pos.tried_step = pos[0];
    r->pos.tried_ended = (int)pos[1];
    r->pos.start_epoch = (int)pos[2];
    r->pos.start_batch = pos[3];
    r->pos.bad_run = pos[4];
    return DS_OK;
}

ds_status ds_resume_run(run_state *r)
{
    const ds_train_opts *o = r->o;
    char path[DS_PATH_MAX + 32] = "";
    ds_status st = DS_OK;
    const int automatic = !strcmp(o->resume, "auto");
    if (automatic && !o->checkpoint_dir)
        return DS_FAIL(DS_ERR_ARG, "--resume auto looks in --checkpoint-dir: give one");
    if (r->ranks.rank == 0) {
        if (automatic) {
            st = choose(r, path, sizeof path);
        } else {
            int foreign;
            if (strlen(o->resume) >= DS_PATH_MAX)   /* never a cut name: another file */
                st = DS_FAIL(DS_ERR_ARG, "--resume: path of %zu characters, over the limit of %d",
                             strlen(o->resume), DS_PATH_MAX - 1);
            else {
                snprintf(path, sizeof path, "%s", o->resume);
                st = take(r, path, &foreign);
            }
        }
    }
    int ok = st == DS_OK;   /* the others learn rank 0's verdict and its choice */
    if (r->ranks.ranks > 1) {
        DS_TRY(ds_world_bcast(o->world, &ok, 1, MPI_INT, "the resume verdict"));
        DS_TRY(ds_world_bcast(o->world, path, (int)sizeof path, MPI_CHAR, "the checkpoint to resume"));
    }
    if (!ok) {
        if (r->ranks.ranks > 1)   /* every rank ends here, saying why: none is left waiting */
            ds_rank_agree_refused_by_all();
        return r->ranks.rank == 0 ? st
                                  : DS_FAIL(DS_ERR_ARG, "rank 0 could not resume (see its message)");
    }
    if (r->ranks.ranks > 1 && path[0])   /* the file is read once, by rank 0 */
        DS_TRY(send_resumed(r));
    if (path[0])
        ds_log_print("resumed from %s: step %ld, epoch %d, global batch %ld of the epoch\n", path,
                 r->pos.start_step, r->pos.start_epoch, r->pos.start_batch);
    return DS_OK;
}
