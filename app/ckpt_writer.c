/* ckpt_writer.c - rank 0's checkpoint saves, written beside training; see
 * ckpt_writer.h.
 *
 * One thread per save, joined before the next save starts or when the save
 * is reported: the image is the only buffer the two share, and the main
 * thread touches it only when no thread runs. `finished` is the one field
 * read while the thread may run (by a non-blocking poll). */
#include "ckpt_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct ds_ckpt_writer {
    ds_model *m;
    ds_optim *o;
    int async, keep;
    char *dir;            /* the folder's real path */
    ds_file_id dir_id;    /* and the folder it was at the start */
    char run_id[DS_RUN_ID_LEN + 1];
    long *ours;           /* [n_ours] this run's checkpoints in dir: the newest written first */
    size_t n_ours, cap_ours;
    double pre_wait;      /* a poll's wait for the save in flight, counted in the next save */
    ds_ckpt_image *img;
    pthread_t thread;
    int running;          /* a thread was started and not joined */
    int finished;         /* the thread is done with the image (atomic) */
    int pending;          /* a save ended and is not reported yet */
    ds_ckpt_done done;    /* the last save: written by the thread, read after the join */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* path moved to PATH.set-aside (or .set-aside.K), never over a file: the
 * name is into moved [cap]. */
static ds_status set_aside(const char *path, char *moved, size_t cap)
{
    for (int k = 0; k < 100; k++) {
        snprintf(moved, cap, k ? "%s.set-aside.%d" : "%s.set-aside", path, k);
        if (link(path, moved) == 0)   /* fails on a name taken: nothing replaced */
            return unlink(path) == 0 ? DS_OK
                                     : DS_FAIL(DS_ERR_IO, "%s: cannot set it aside: %s", path,
                                               strerror(errno));
        if (errno != EEXIST)
            return DS_FAIL(DS_ERR_IO, "%s: cannot set it aside as %s: %s", path, moved,
                           strerror(errno));
    }
    return DS_FAIL(DS_ERR_IO, "%s: cannot set it aside: 100 names taken", path);
}

/* The file at a save's name: this run's own is replaced; another run's is
 * never overwritten (the save fails); one that is no checkpoint of a known
 * run (unreadable: damaged, or a stray file; or written before runs had an
 * identity) is set aside, kept, and said. */
static ds_status not_anothers(const ds_ckpt_writer *w, const char *path)
{
    struct stat sb;
    char id[DS_RUN_ID_LEN + 1] = "", moved[DS_PATH_MAX + 64];
    if (lstat(path, &sb) != 0)
        return DS_OK;
    const int readable = ds_checkpoint_read_run_id(path, id) == DS_OK;
    ds_status_clear_error();
    if (readable && !strcmp(id, w->run_id))
        return DS_OK;
    if (readable && id[0])
        return DS_FAIL(DS_ERR_IO, "%s is there already and is another run's checkpoint (run %s): "
                       "not overwritten; move it away, or give this run another --checkpoint-dir",
                       path, id);
    DS_TRY(set_aside(path, moved, sizeof moved));
    ds_log_print("note: %s was there already and is %s: set aside as %s\n", path,
                 readable ? "a checkpoint of a dstrain before run identities"
                          : "not readable as a checkpoint",
                 moved);
    return DS_OK;
}

/* step, just written, goes first in this run's list. */
static void note_written(ds_ckpt_writer *w, long step)
{
    size_t k = 0;
    while (k < w->n_ours && w->ours[k] != step)
        k++;
    if (k == w->n_ours)   /* new: the list grows by one (room made at the save's start) */
        w->n_ours++;
    memmove(w->ours + 1, w->ours, k * sizeof *w->ours);
    w->ours[0] = step;
}

/* The write and the prune; the outcome into w->done. */
static void write_image(ds_ckpt_writer *w)
{
    ds_ckpt_done *d = &w->done;
    const double t0 = now_s();
    d->st = ds_file_dir_same(w->dir, &w->dir_id, "checkpoint directory");
    d->fatal = d->st != DS_OK;
    if (d->st == DS_OK)
        d->st = not_anothers(w, d->path);
    if (d->st == DS_OK)
        d->st = ds_ckpt_image_write(w->img, d->path);
    if (d->st == DS_OK && w->keep > 0) {   /* old ones go only once the new one is in place */
        note_written(w, d->step);
        d->st = ds_checkpoint_prune(w->dir, w->keep, w->ours, w->n_ours, w->run_id, &d->removed);
        if (w->n_ours > (size_t)w->keep)   /* gone, or not this run's after all */
            w->n_ours = (size_t)w->keep;
    }
    if (d->st != DS_OK)   /* ds_status_last_error is the thread's own */
        snprintf(d->msg, sizeof d->msg, "%s", ds_status_last_error());
    d->write_s = now_s() - t0;
}

static void *writer_main(void *arg)
{
    ds_ckpt_writer *w = arg;
    write_image(w);
    __atomic_store_n(&w->finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

ds_status ds_ckpt_writer_create(ds_model *m, ds_optim *o, int async, const char *dir,
                                const ds_file_id *dir_id, int keep, ds_ckpt_writer **out)
{
    *out = NULL;
    ds_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return DS_FAIL(DS_ERR_MEM, "checkpoint writer");
    *w = (ds_ckpt_writer){.m = m, .o = o, .async = async, .keep = keep, .dir_id = *dir_id};
    w->dir = strdup(dir);
    ds_status st = w->dir ? ds_ckpt_image_create(m, o, &w->img)
                          : DS_FAIL(DS_ERR_MEM, "checkpoint writer: the folder's name");
    if (st != DS_OK) {
        free(w->dir);
        free(w);
        return st;
    }
    *out = w;
    return DS_OK;
}

/* Room in this run's list for n steps. */
static ds_status ours_room(ds_ckpt_writer *w, size_t n)
{
    if (n <= w->cap_ours)
        return DS_OK;
    long *grown = realloc(w->ours, n * sizeof *grown);
    if (!grown)
        return DS_FAIL(DS_ERR_MEM, "checkpoint writer: a list of %zu steps", n);
    w->ours = grown;
    w->cap_ours = n;
    return DS_OK;
}

ds_status ds_ckpt_writer_claim(ds_ckpt_writer *w, const char *run_id, const long *steps, size_t n)
{
    snprintf(w->run_id, sizeof w->run_id, "%s", run_id);
    DS_TRY(ours_room(w, n + 1));
    memcpy(w->ours, steps, n * sizeof *steps);
    w->n_ours = n;
    return DS_OK;
}

/* Joins the thread in flight; its outcome becomes pending. */
static void join(ds_ckpt_writer *w)
{
    if (!w->running)
        return;
    int rc = pthread_join(w->thread, NULL);
    w->running = 0;
    w->pending = 1;
    if (rc != 0 && w->done.st == DS_OK) {   /* cannot happen with a joinable thread of ours */
        w->done.st = DS_ERR_IO;
        snprintf(w->done.msg, sizeof w->done.msg, "pthread_join: %s", strerror(rc));
    }
}

ds_status ds_ckpt_writer_save(ds_ckpt_writer *w, const char *path, const ds_ckpt_info *info)
{
    const double t0 = now_s();
    join(w);   /* at most one save in flight: its image is about to be reused */
    const double waited = now_s() - t0 + w->pre_wait;
    w->pre_wait = 0;
    if (w->pending)
        return DS_FAIL(DS_ERR_ARG, "checkpoint writer: the save of step %ld was not reported",
                       w->done.step);
    if (w->keep > 0)   /* the list's room for this save, made here: the thread allocates nothing */
        DS_TRY(ours_room(w, w->n_ours + 1));
    w->done = (ds_ckpt_done){.step = info->step, .wait_s = waited};
    snprintf(w->done.path, sizeof w->done.path, "%s", path);
    const double t1 = now_s();
    DS_TRY(ds_ckpt_image_take(w->img, w->o, info));
    w->done.take_s = now_s() - t1;
    if (!w->async) {
        write_image(w);
        w->pending = 1;
        return DS_OK;
    }
    w->finished = 0;
    int rc = pthread_create(&w->thread, NULL, writer_main, w);
    if (rc != 0)
        return DS_FAIL(DS_ERR_MEM, "%s: starting the checkpoint writer thread: %s", path,
                       strerror(rc));
    w->running = 1;
    return DS_OK;
}

int ds_ckpt_writer_poll(ds_ckpt_writer *w, int wait, ds_ckpt_done *done)
{
    if (w->running && (wait || __atomic_load_n(&w->finished, __ATOMIC_ACQUIRE))) {
        const double t0 = now_s();
        join(w);
        w->pre_wait += now_s() - t0;   /* training waited: the next save's figure counts it */
    }
    if (!w->pending)
        return 0;
    w->pending = 0;
    *done = w->done;
    return 1;
}

void ds_ckpt_writer_destroy(ds_ckpt_writer *w)
{
    if (!w)
        return;
    join(w);   /* a save started is finished: never a .tmp left by our own exit */
    ds_ckpt_image_free(w->img);
    free(w->ours);
    free(w->dir);
    free(w);
}
