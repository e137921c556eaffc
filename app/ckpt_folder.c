/* ckpt_folder.c - a checkpoint folder holds one run's story: the run's
 * identity (random at a fresh start, kept by every resume, stored in each
 * checkpoint), which checkpoints in the folder are the run's (pruning
 * removes only those), and a fresh run refused where another run's
 * checkpoints lie. Rank 0; see train_run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "ckpt_writer.h"
#include "rank_agree.h"
#include "train_run.h"

enum { NAMED = 3 };   /* checkpoints named in a message; the rest counted */

/* "step-A.h5, step-B.h5 and 4 more" of steps [n] into out [cap]. */
static void name_some(const long *steps, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t k = 0; k < n && k < NAMED && len < cap; k++)
        len += (size_t)snprintf(out + len, cap - len, "%sstep-%08ld.h5", k ? ", " : "", steps[k]);
    if (n > NAMED && len < cap)
        snprintf(out + len, cap - len, " and %zu more", n - NAMED);
}

/* steps [n] of the folder split by run: ours (run_id's) first, others
 * after; *n_ours how many are ours. Order kept (newest first). */
static void split_by_run(const char *dir, const char *run_id, long *steps, size_t n,
                         size_t *n_ours)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char path[DS_PATH_MAX + 32], id[DS_RUN_ID_LEN + 1];
        snprintf(path, sizeof path, "%s/step-%08ld.h5", dir, steps[i]);
        /* one that cannot be read is nobody's: kept, never pruned */
        const int mine = run_id[0] && ds_checkpoint_read_run_id(path, id) == DS_OK &&
                         !strcmp(id, run_id);
        ds_status_clear_error();
        if (mine) {
            const long s = steps[i];
            memmove(steps + k + 1, steps + k, (i - k) * sizeof *steps);
            steps[k++] = s;
        }
    }
    *n_ours = k;
}

/* Rank 0's part of ds_ckpt_folder_claim. */
static ds_status claim(run_state *r)
{
    const char *dir = r->loop.ckpt_dir;
    const int resumed = r->pos.start_step > 0;
    if (resumed && !r->loop.run_id[0])   /* a checkpoint from before run identities */
        ds_log_print("note: the checkpoint resumed from has no run identity (an older dstrain): "
                     "this run takes a new one, and leaves that run's checkpoints where they are\n");
    if (!r->loop.run_id[0])
        DS_TRY(ds_checkpoint_new_run_id(r->loop.run_id));
    long *steps;
    size_t n, n_ours = 0;
    DS_TRY(ds_checkpoint_list(dir, &steps, &n));
    split_by_run(dir, r->loop.run_id, steps, n, &n_ours);
    char names[256];
    name_some(steps + n_ours, n - n_ours, names, sizeof names);
    ds_status st = DS_OK;
    if (!resumed && n > 0)
        st = DS_FAIL(DS_ERR_ARG, "%s holds %zu checkpoint%s of another run (%s; or files of "
                     "that name that are not checkpoints): a fresh run there would overwrite and "
                     "prune them; give --resume auto to continue that run, or another "
                     "--checkpoint-dir to start afresh (move away a stray file)", dir, n,
                     n == 1 ? "" : "s", names);
    else if (n > n_ours)
        ds_log_print("note: %s also holds %zu checkpoint%s not of this run (%s): left alone, never "
                     "pruned or overwritten\n", dir, n - n_ours, n - n_ours == 1 ? "" : "s", names);
    if (st == DS_OK)
        st = ds_ckpt_writer_claim(r->loop.ckpt, r->loop.run_id, steps, n_ours);
    free(steps);
    return st;
}

ds_status ds_ckpt_folder_claim(run_state *r)
{
    ds_status st = r->ranks.rank == 0 && r->loop.ckpt ? claim(r) : DS_OK;
    if (r->ranks.ranks <= 1)
        return st;
    int ok = st == DS_OK;   /* every rank ends on rank 0's refusal, saying why */
    DS_TRY(ds_world_bcast(r->o->world, &ok, 1, MPI_INT, "the checkpoint folder's verdict"));
    if (!ok)   /* every rank ends here, saying why: none is left waiting */
        ds_rank_agree_refused_by_all();
    if (ok || r->ranks.rank == 0)
        return st;
    return DS_FAIL(DS_ERR_ARG, "rank 0 refused the checkpoint folder (see its message)");
}
