/* ckpt_writer.h - rank 0's checkpoint saves, off the training's critical
 * path: a save waits for the one before it (at most one in flight), copies
 * the checkpoint out of the backend (the stall training sees), and writes,
 * checksums, fsyncs, renames and prunes it in a background thread while
 * training goes on. Synchronous (the write at once) where asked. Private to
 * the app layer. */
#ifndef DS_CKPT_WRITER_H
#define DS_CKPT_WRITER_H

#include "checkpoint.h"
#include "file.h"

typedef struct ds_ckpt_writer ds_ckpt_writer;

/* How a save ended. */
typedef struct {
    long step;
    char path[DS_PATH_MAX + 32];
    ds_status st;          /* DS_OK: written and committed (and pruned) */
    char msg[1024];        /* its error, when st != DS_OK */
    double take_s;         /* the copy out of the backend: training waited for it */
    double wait_s;         /* training's wait for the save before it, at its start */
    double write_s;        /* build, write, fsync, rename, prune: beside training when async */
    int removed;           /* older checkpoints pruned after it */
    int fatal;             /* the folder was replaced under the run: stop, whatever the policy */
} ds_ckpt_done;

/* For m and o (both outlive the writer); dir: the checkpoint folder's real
 * path and dir_id its identity (ds_file_dir_resolve), checked before every
 * write; keep: this run's newest checkpoints kept in dir after each save
 * (0: all). The image memory is allocated here. */
ds_status ds_ckpt_writer_create(ds_model *m, ds_optim *o, int async, const char *dir,
                                const ds_file_id *dir_id, int keep, ds_ckpt_writer **out);
/* The run the saves belong to: run_id, and the steps of its checkpoints
 * already in the folder, newest first (a resumed run's). Pruning removes
 * only these and the ones written since; a checkpoint of another run at a
 * save's name is not overwritten (that save fails). Before the first save. */
ds_status ds_ckpt_writer_claim(ds_ckpt_writer *w, const char *run_id, const long *steps, size_t n);
/* Waits for the save in flight (its outcome is then ready for
 * ds_ckpt_writer_poll; a wait there, before this call, counts in this
 * save's wait_s too), copies the checkpoint of info's step out of the
 * backend and starts writing it to path (async) or writes it at once. An
 * error here is the copy's (or the thread's start); the write's comes from
 * ds_ckpt_writer_poll. */
ds_status ds_ckpt_writer_save(ds_ckpt_writer *w, const char *path, const ds_ckpt_info *info);
/* 1 with *done when a save has ended and not been reported yet; wait: block
 * until the one in flight ends. 0 when there is nothing to report. */
int ds_ckpt_writer_poll(ds_ckpt_writer *w, int wait, ds_ckpt_done *done);
/* Waits for the save in flight (its outcome is dropped: poll first to have
 * it) and frees everything. NULL is a no-op. */
void ds_ckpt_writer_destroy(ds_ckpt_writer *w);

#endif
