/* op_watch.c - a deadline for queued operations (NCCL collectives); see
 * op_watch.h: a ring of event pairs and one polling thread. */
#include "op_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    ds_event *start, *end;
    double seen;              /* when the thread first saw start passed (s); 0: not yet */
    char what[160];
} watch_slot;

struct ds_op_watch {
    ds_op_watch_cfg c;
    watch_slot *slot;         /* [capacity] */
    long head, tail;          /* operations [head, tail) are watched, oldest first */
    int reserved;             /* start called for slot tail, end not yet */
    int stop, fired;
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, space_cv;   /* an operation to watch; a slot freed */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits on cv (a CLOCK_MONOTONIC condition) for at most ms milliseconds. */
static void wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, double ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(ms * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(cv, mu, &ts);
}

/* One look at the oldest watched operation, with the lock held on entry
 * and exit. Returns 0 to go on watching, 1 when it has fired. */
static int look(ds_op_watch *w)
{
    const ds_op_watch_cfg *c = &w->c;
    watch_slot *s = &w->slot[w->head % c->capacity];
    pthread_mutex_unlock(&w->mu);
    int ended = 0, started = 0;
    char err[512] = "";
    ds_status st = c->be->event_query(s->end, &ended);
    if (st == DS_OK && !ended)
        st = c->be->event_query(s->start, &started);
    if (st != DS_OK) {   /* the message is this thread's */
        snprintf(err, sizeof err, "%s", ds_status_last_error());
        ds_status_clear_error();
    } else if (!ended && c->poll_error && !c->poll_error(c->user, err, sizeof err)) {
        err[0] = '\0';
    }
    const double now = now_s();
    pthread_mutex_lock(&w->mu);
    if (ended) {
        w->head++;
        pthread_cond_broadcast(&w->space_cv);
        return 0;
    }
    if (started && s->seen == 0)
        s->seen = now;
    const double waited = s->seen > 0 ? now - s->seen : 0;
    if (!err[0] && !(c->timeout_s > 0 && s->seen > 0 && waited > c->timeout_s))
        return 0;
    w->fired = 1;
    char what[sizeof s->what];
    memcpy(what, s->what, sizeof what);
    pthread_cond_broadcast(&w->space_cv);
    pthread_mutex_unlock(&w->mu);
    c->expire(c->user, what, waited, err[0] ? err : NULL);
    pthread_mutex_lock(&w->mu);
    return 1;
}

static void *watch_thread(void *arg)
{
    ds_op_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        if (w->head == w->tail) {
            pthread_cond_wait(&w->work_cv, &w->mu);
            continue;
        }
        const long head = w->head;
        if (look(w))
            break;
        if (w->head == head)   /* nothing finished: look again after a while */
            wait_ms(&w->work_cv, &w->mu, w->c.poll_ms);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

ds_status ds_op_watch_start(ds_op_watch *w, const char *what)
{
    const ds_op_watch_cfg *c = &w->c;
    pthread_mutex_lock(&w->mu);
    if (w->reserved) {
        pthread_mutex_unlock(&w->mu);
        return DS_FAIL(DS_ERR_ARG, "operation watch: %s started before the last one ended", what);
    }
    const double t0 = now_s();
    while (!w->fired && w->tail - w->head >= c->capacity) {
        if (c->timeout_s > 0 && now_s() - t0 > c->timeout_s) {
            const char *oldest = w->slot[w->head % c->capacity].what;
            pthread_mutex_unlock(&w->mu);
            return DS_FAIL(DS_ERR_MPI, "%d queued operations have not finished in %g s "
                           "(the oldest: %s); %s cannot be queued", c->capacity, c->timeout_s,
                           oldest, what);
        }
        wait_ms(&w->space_cv, &w->mu, 100);
    }
    if (w->fired) {
        pthread_mutex_unlock(&w->mu);
        return DS_FAIL(DS_ERR_MPI, "%s: an earlier operation on this queue timed out or failed", what);
    }
    watch_slot *s = &w->slot[w->tail % c->capacity];
    s->seen = 0;
    snprintf(s->what, sizeof s->what, "%s", what);
    w->reserved = 1;
    pthread_mutex_unlock(&w->mu);
    return c->be->event_record(c->ctx, s->start);
}

ds_status ds_op_watch_end(ds_op_watch *w)
{
    pthread_mutex_lock(&w->mu);
    const int reserved = w->reserved;
    watch_slot *s = &w->slot[w->tail % w->c.capacity];
    pthread_mutex_unlock(&w->mu);
    if (!reserved)
        return DS_FAIL(DS_ERR_ARG, "operation watch: end without start");
    ds_status st = w->c.be->event_record(w->c.ctx, s->end);
    pthread_mutex_lock(&w->mu);
    w->reserved = 0;
    if (st == DS_OK) {
        w->tail++;
        pthread_cond_signal(&w->work_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return st;
}

int ds_op_watch_in_flight(ds_op_watch *w)
{
    pthread_mutex_lock(&w->mu);
    const int n = (int)(w->tail - w->head);
    pthread_mutex_unlock(&w->mu);
    return n;
}

void ds_op_watch_destroy(ds_op_watch *w)
{
    if (!w)
        return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->work_cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
    }
    for (int k = 0; w->slot && k < w->c.capacity; k++) {
        if (w->slot[k].start)
            w->c.be->event_destroy(w->c.ctx, w->slot[k].start);
        if (w->slot[k].end)
            w->c.be->event_destroy(w->c.ctx, w->slot[k].end);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work_cv);
    pthread_cond_destroy(&w->space_cv);
    free(w->slot);
    free(w);
}

static ds_status init_sync(ds_op_watch *w)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC))
        return DS_FAIL(DS_ERR_MEM, "operation watch: condition attributes");
    int rc = pthread_mutex_init(&w->mu, NULL);
    rc = rc ? rc : pthread_cond_init(&w->work_cv, &ca);
    rc = rc ? rc : pthread_cond_init(&w->space_cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc ? DS_FAIL(DS_ERR_MEM, "operation watch: %s", strerror(rc)) : DS_OK;
}

ds_status ds_op_watch_create(const ds_op_watch_cfg *c, ds_op_watch **out)
{
    *out = NULL;
    if (!c->be || c->capacity < 1 || !c->expire || !(c->poll_ms > 0))
        return DS_FAIL(DS_ERR_ARG, "operation watch: capacity %d, poll every %g ms%s", c->capacity,
                       c->poll_ms, c->expire ? "" : ", no expire callback");
    ds_op_watch *w = calloc(1, sizeof *w);
    if (!w)
        return DS_FAIL(DS_ERR_MEM, "operation watch");
    w->c = *c;
    ds_status st = init_sync(w);
    if (st != DS_OK) {
        free(w);
        return st;
    }
    w->slot = calloc((size_t)c->capacity, sizeof *w->slot);
    if (!w->slot)
        st = DS_FAIL(DS_ERR_MEM, "operation watch: %d slots", c->capacity);
    for (int k = 0; st == DS_OK && k < c->capacity; k++) {
        st = c->be->event_create(c->ctx, &w->slot[k].start);
        if (st == DS_OK)
            st = c->be->event_create(c->ctx, &w->slot[k].end);
    }
    if (st == DS_OK && (errno = pthread_create(&w->thread, NULL, watch_thread, w)) != 0)
        st = DS_FAIL(DS_ERR_MEM, "operation watch: cannot start its thread: %s", strerror(errno));
    w->thread_started = st == DS_OK;
    if (st != DS_OK) {
        ds_op_watch_destroy(w);
        return st;
    }
    *out = w;
    return DS_OK;
}
