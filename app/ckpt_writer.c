/* ckpt_writer.c - rank 0's checkpoint saves, written beside training; see
 * ckpt_writer.h.
 *
 * One thread per save, joined before the next save starts or when the save
 * is reported: the image is the only buffer the two share, and the main
 * thread touches it only when no thread runs. `finished` is the one field
 * read while the thread may run (by a non-blocking poll). */
#include "ckpt_writer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ds_ckpt_writer {
    ds_model *m;
    ds_optim *o;
    int async, keep;
    char dir[1024];
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

/* The write and the prune; the outcome into w->done. */
static void write_image(ds_ckpt_writer *w)
{
    ds_ckpt_done *d = &w->done;
    const double t0 = now_s();
    d->st = ds_ckpt_image_write(w->img, d->path);
    if (d->st == DS_OK && w->keep > 0)   /* old ones go only once the new one is in place */
        d->st = ds_checkpoint_prune(w->dir, w->keep, &d->removed);
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

ds_status ds_ckpt_writer_create(ds_model *m, ds_optim *o, int async, const char *dir, int keep,
                                ds_ckpt_writer **out)
{
    *out = NULL;
    ds_ckpt_writer *w = calloc(1, sizeof *w);
    if (!w)
        return DS_FAIL(DS_ERR_MEM, "checkpoint writer");
    *w = (ds_ckpt_writer){.m = m, .o = o, .async = async, .keep = keep};
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    ds_status st = ds_ckpt_image_create(m, o, &w->img);
    if (st != DS_OK) {
        free(w);
        return st;
    }
    *out = w;
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
    const double waited = now_s() - t0;
    if (w->pending)
        return DS_FAIL(DS_ERR_ARG, "checkpoint writer: the save of step %ld was not reported",
                       w->done.step);
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
    if (w->running && (wait || __atomic_load_n(&w->finished, __ATOMIC_ACQUIRE)))
        join(w);
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
    free(w);
}
