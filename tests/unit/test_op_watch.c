/* test_op_watch.c - the deadline thread of mpi/op_watch.c (what bounds the
 * NCCL transport's waits) on a fake backend whose queue the test moves by
 * hand: events are numbered as they are recorded, and every event up to
 * `passed` has passed. Checked: finished operations are retired in order; an
 * operation that has started and does not finish fires expire within the
 * timeout, naming it; one that has not started yet (its queue is still busy
 * with the compute it waits on) never does; a reported asynchronous error
 * fires at once with its message; a full ring makes start wait, and gives
 * up with an error after the timeout. Runs anywhere: no GPU, no MPI. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "op_watch.h"
#include "testutil.h"

/* ---- the fake queue ---- */

struct ds_event {
    long seq;   /* 0: never recorded (passed, as a CUDA event is) */
};

static atomic_long recorded, passed;

static ds_status f_event_create(ds_ctx *c, ds_event **out)
{
    (void)c;
    *out = calloc(1, sizeof **out);
    return *out ? DS_OK : DS_FAIL(DS_ERR_MEM, "fake event");
}
static void f_event_destroy(ds_ctx *c, ds_event *e) { (void)c, free(e); }
static ds_status f_event_record(ds_ctx *c, ds_event *e)
{
    (void)c;
    e->seq = ++recorded;
    return DS_OK;
}
static ds_status f_event_query(ds_event *e, int *done)
{
    *done = e->seq <= passed;
    return DS_OK;
}

static const ds_backend fake = {.name = "fake", .event_create = f_event_create,
                                .event_destroy = f_event_destroy, .event_record = f_event_record,
                                .event_query = f_event_query};

/* ---- what the watch reports ---- */

typedef struct {
    pthread_mutex_t mu;
    int fired;
    char what[200], error[200];
    double waited, at;    /* waited as reported; seconds since the test's t0 */
    int fail_async;       /* poll_error reports a failure */
} report;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double t0;

static void on_expire(void *user, const char *what, double waited_s, const char *error)
{
    report *r = user;
    pthread_mutex_lock(&r->mu);
    r->fired++;
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->error, sizeof r->error, "%s", error ? error : "");
    r->waited = waited_s;
    r->at = now_s() - t0;
    pthread_mutex_unlock(&r->mu);
}

static int on_poll(void *user, char *msg, size_t size)
{
    report *r = user;
    if (!r->fail_async)
        return 0;
    snprintf(msg, size, "ncclRemoteError: a peer went away");
    return 1;
}

static ds_op_watch *open_watch(report *r, int capacity, double timeout_s)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    const ds_op_watch_cfg c = {.be = &fake, .capacity = capacity, .timeout_s = timeout_s,
                               .poll_ms = 2, .poll_error = on_poll, .expire = on_expire, .user = r};
    ds_op_watch *w = NULL;
    ds_status st = ds_op_watch_create(&c, &w);
    T_CHECK(st == DS_OK, "ds_op_watch_create: %s", ds_status_last_error());
    t0 = now_s();
    return w;
}

static int fired(report *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->fired;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Polls until cond holds or s seconds pass. */
#define WAIT_UNTIL(cond, s)                                                   \
    for (double t_end_ = now_s() + (s); !(cond) && now_s() < t_end_;)         \
        usleep(1000)

static ds_status queue_op(ds_op_watch *w, const char *what)
{
    DS_TRY(ds_op_watch_start(w, what));
    recorded++;   /* the operation itself takes a place in the queue */
    return ds_op_watch_end(w);
}

/* Operations that finish are retired in order; nothing fires. */
static void finished_ops_retire(void)
{
    report r;
    ds_op_watch *w = open_watch(&r, 4, 0.2);
    if (!w)
        return;
    passed = recorded;
    for (int k = 0; k < 3; k++)
        T_CHECK(queue_op(w, "op") == DS_OK, "queue op %d: %s", k, ds_status_last_error());
    T_CHECK(ds_op_watch_in_flight(w) == 3, "3 in flight, got %d", ds_op_watch_in_flight(w));
    passed = recorded - 4;   /* the first finished, the second is running */
    WAIT_UNTIL(ds_op_watch_in_flight(w) == 2, 2);
    T_CHECK(ds_op_watch_in_flight(w) == 2, "the finished one retired: %d in flight",
            ds_op_watch_in_flight(w));
    passed = recorded;
    WAIT_UNTIL(ds_op_watch_in_flight(w) == 0, 2);
    T_CHECK(ds_op_watch_in_flight(w) == 0, "all retired: %d in flight", ds_op_watch_in_flight(w));
    usleep(300 * 1000);   /* past the timeout: nothing in flight, nothing fires */
    T_CHECK(fired(&r) == 0, "fired %d times with every operation finished", fired(&r));
    ds_op_watch_destroy(w);
}

/* A running operation that never ends fires once, after the timeout, naming it. */
static void stuck_op_fires(void)
{
    report r;
    ds_op_watch *w = open_watch(&r, 4, 0.3);
    if (!w)
        return;
    passed = recorded;
    T_CHECK(queue_op(w, "the allreduce of gradient bucket 0") == DS_OK, "queue");
    T_CHECK(queue_op(w, "the allreduce of gradient bucket 1") == DS_OK, "queue");
    passed = recorded - 2;   /* bucket 0 done; bucket 1 started (its start event passed) */
    WAIT_UNTIL(fired(&r), 3);
    T_CHECK(r.fired == 1, "fired %d times", r.fired);
    T_CHECK(!strcmp(r.what, "the allreduce of gradient bucket 1"), "names the stuck operation: '%s'",
            r.what);
    T_CHECK(r.error[0] == '\0', "a timeout, not an error: '%s'", r.error);
    T_CHECK(r.waited > 0.3 && r.waited < 1.0, "waited %.3f s for a 0.3 s timeout", r.waited);
    T_CHECK(r.at >= 0.3 && r.at < 1.5, "fired %.3f s after the start", r.at);
    usleep(100 * 1000);
    T_CHECK(fired(&r) == 1, "fires once: %d", fired(&r));
    T_CHECK(ds_op_watch_start(w, "later") != DS_OK, "no operation is queued after it fired");
    ds_status_clear_error();
    ds_op_watch_destroy(w);
}

/* Not started (its queue waits on compute): never timed, however long. */
static void unstarted_op_waits(void)
{
    report r;
    ds_op_watch *w = open_watch(&r, 4, 0.1);
    if (!w)
        return;
    passed = recorded;
    recorded += 5;   /* compute the queue waits for, not yet done */
    T_CHECK(queue_op(w, "queued behind compute") == DS_OK, "queue");
    usleep(500 * 1000);
    T_CHECK(fired(&r) == 0, "an operation that never started fired ('%s')", r.what);
    passed = recorded;
    WAIT_UNTIL(ds_op_watch_in_flight(w) == 0, 2);
    T_CHECK(ds_op_watch_in_flight(w) == 0 && fired(&r) == 0, "finished without firing");
    ds_op_watch_destroy(w);
}

/* An asynchronous error fires at once, with its message, timeout or not. */
static void async_error_fires(void)
{
    report r;
    ds_op_watch *w = open_watch(&r, 4, 0);
    if (!w)
        return;
    passed = recorded;
    T_CHECK(queue_op(w, "the allreduce of BatchNorm moments") == DS_OK, "queue");
    usleep(50 * 1000);
    T_CHECK(fired(&r) == 0, "fired before any error");
    r.fail_async = 1;
    WAIT_UNTIL(fired(&r), 2);
    T_CHECK(r.fired == 1 && strstr(r.error, "ncclRemoteError"), "error reported: %d '%s'", r.fired,
            r.error);
    T_CHECK(!strcmp(r.what, "the allreduce of BatchNorm moments"), "names it: '%s'", r.what);
    T_CHECK(r.at < 1.0, "at once: %.3f s", r.at);
    ds_op_watch_destroy(w);
}

static void *finish_later(void *arg)
{
    (void)arg;
    usleep(150 * 1000);
    passed = recorded;
    return NULL;
}

/* A full ring: start waits for a slot, and gives up after the timeout. */
static void full_ring_waits(void)
{
    report r;
    ds_op_watch *w = open_watch(&r, 2, 0.4);
    if (!w)
        return;
    passed = recorded;
    recorded += 3;   /* the queue is busy elsewhere: nothing starts */
    T_CHECK(queue_op(w, "a") == DS_OK && queue_op(w, "b") == DS_OK, "two fit");
    pthread_t th;
    pthread_create(&th, NULL, finish_later, NULL);
    double s = now_s();
    T_CHECK(queue_op(w, "c") == DS_OK, "a slot frees: %s", ds_status_last_error());
    double took = now_s() - s;
    T_CHECK(took > 0.1 && took < 1.0, "waited %.3f s for the slot", took);
    pthread_join(th, NULL);
    passed = recorded;
    WAIT_UNTIL(ds_op_watch_in_flight(w) == 0, 2);
    recorded += 3;
    T_CHECK(queue_op(w, "d") == DS_OK && queue_op(w, "e") == DS_OK, "two fit again");
    s = now_s();
    ds_status st = queue_op(w, "f");
    took = now_s() - s;
    T_CHECK(st == DS_ERR_MPI && strstr(ds_status_last_error(), "the oldest: d"),
            "gives up naming the oldest: %s", ds_status_last_error());
    T_CHECK(took >= 0.4 && took < 1.5, "after the timeout: %.3f s", took);
    ds_status_clear_error();
    T_CHECK(fired(&r) == 0, "none of them started, so none fired");
    ds_op_watch_destroy(w);
}

int main(void)
{
    finished_ops_retire();
    stuck_op_fires();
    unstarted_op_waits();
    async_error_fires();
    full_ring_waits();
    const ds_op_watch_cfg bad = {.be = &fake, .capacity = 0, .poll_ms = 1, .expire = on_expire};
    ds_op_watch *w = NULL;
    T_CHECK(ds_op_watch_create(&bad, &w) == DS_ERR_ARG && !w, "capacity 0 refused");
    return t_finish("test_op_watch");
}
