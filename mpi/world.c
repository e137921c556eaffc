/* world.c - the ranks of a job: MPI set-up, local rank, watchdog; see world.h.
 * The watchdog is a thread that wakes twice a second
 * and aborts the job when the main thread or the communication thread has
 * been waiting on other ranks longer than the timeout: a dead or hung rank
 * ends the job with a message instead of a hang.
 *
 * The message names the rank that is stuck, not only the wait of the rank
 * that gave up: before aborting, the watchdog calls the roll on a
 * communicator of its own. Every rank's watchdog answers (twice a second)
 * whether its rank is waiting and in what; a rank frozen, dead or stuck in
 * a system call does not answer within ROLL_CALL_S, and one that answers
 * "not waiting" is the one the others wait for. */
#include "world.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "half.h"
#include "log.h"

enum { SLOT_MAIN, SLOT_OTHER, SLOTS };
enum { TAG_ASK = 7301, TAG_ANSWER = 7302 };
#define ROLL_CALL_S 3.0

/* One rank's answer to a roll call. */
typedef struct {
    int waiting;       /* either thread is waiting on other ranks */
    double waited;     /* seconds, the longer wait */
    char what[96];     /* that wait's operation, or the last one */
} roll_answer;

static struct {
    pthread_t thread, main_thread;
    pthread_mutex_t mu;
    int running, stop;
    double timeout_s;
    int rank;
    int waiting[SLOTS];
    double since[SLOTS];
    char what[SLOTS][128];
    MPI_Comm roll;   /* the watchdogs' own communicator */
    int size;
    const char *hosts;   /* [size][DS_WORLD_HOST], the world's */
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .roll = MPI_COMM_NULL};

/* Rank r's host for the watchdog's messages. */
static const char *wd_host(int r)
{
    return wd.hosts && r >= 0 && r < wd.size ? wd.hosts + (size_t)r * DS_WORLD_HOST : "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This rank's answer, from the slots (wd.mu held): the longest wait under
 * way, else the main thread's last one. */
static roll_answer my_answer(void)
{
    roll_answer a = {0};
    const double t = now_s();
    int pick = SLOT_MAIN;
    for (int s = 0; s < SLOTS; s++)
        if (wd.waiting[s] && (!a.waiting || t - wd.since[s] > a.waited)) {
            a.waiting = 1;
            a.waited = t - wd.since[s];
            pick = s;
        }
    snprintf(a.what, sizeof a.what, "%s", wd.what[pick]);
    return a;
}

/* Answers every roll call waiting for this rank (wd.mu not held). */
static void answer_roll_calls(void)
{
    int flag = 1;
    while (wd.roll != MPI_COMM_NULL && flag) {
        MPI_Status st;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, wd.roll, &flag, &st) != MPI_SUCCESS || !flag)
            return;
        int ask;
        if (MPI_Recv(&ask, 1, MPI_INT, st.MPI_SOURCE, TAG_ASK, wd.roll, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        pthread_mutex_lock(&wd.mu);
        roll_answer a = my_answer();
        pthread_mutex_unlock(&wd.mu);
        MPI_Request rq;   /* small: delivered eagerly; never waited on */
        if (MPI_Isend(&a, (int)sizeof a, MPI_BYTE, st.MPI_SOURCE, TAG_ANSWER, wd.roll, &rq) == MPI_SUCCESS)
            MPI_Request_free(&rq);
    }
}

/* Asks every other rank and waits up to ROLL_CALL_S for the answers (still
 * answering others, who may be asking at the same time); then writes to
 * out [cap] which ranks did not answer and which were not waiting. */
static void roll_call(char *out, size_t cap)
{
    const int n = wd.size;
    MPI_Request *rq = calloc((size_t)n, sizeof *rq);
    roll_answer *ans = calloc((size_t)n, sizeof *ans);
    int *got = calloc((size_t)n, sizeof *got);
    static int ask = 1;
    out[0] = '\0';
    if (!rq || !ans || !got || wd.roll == MPI_COMM_NULL) {
        free(rq), free(ans), free(got);
        return;
    }
    for (int r = 0; r < n; r++) {
        rq[r] = MPI_REQUEST_NULL;
        if (r == wd.rank)
            continue;
        MPI_Request sq;
        if (MPI_Isend(&ask, 1, MPI_INT, r, TAG_ASK, wd.roll, &sq) == MPI_SUCCESS)
            MPI_Request_free(&sq);
        MPI_Irecv(&ans[r], (int)sizeof ans[r], MPI_BYTE, r, TAG_ANSWER, wd.roll, &rq[r]);
    }
    const double until = now_s() + ROLL_CALL_S;
    int missing = n - 1;
    while (missing > 0 && now_s() < until) {
        for (int r = 0; r < n; r++) {
            int done = 0;
            if (r != wd.rank && !got[r] && MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
                got[r] = 1, missing--;
        }
        answer_roll_calls();
        usleep(20 * 1000);
    }
    size_t len = 0;
    for (int r = 0; r < n && len < cap; r++)
        if (r != wd.rank && !got[r])
            len += (size_t)snprintf(out + len, cap - len,
                                    "; rank %d on %s does not answer (stopped, dead, cut off, or "
                                    "stuck outside dstrain's waits)", r, wd_host(r));
    for (int r = 0; r < n && len < cap; r++)
        if (r != wd.rank && got[r] && !ans[r].waiting)
            len += (size_t)snprintf(out + len, cap - len,
                                    "; rank %d on %s answers but is not waiting on the others "
                                    "(busy; last wait: %s)", r, wd_host(r),
                                    ans[r].what[0] ? ans[r].what : "none");
    if (len == 0)
        snprintf(out, cap, "; every rank answers and waits (a collective that cannot complete)");
    /* outstanding receives are left: the job ends now */
    free(rq), free(ans), free(got);
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(500 * 1000);
        answer_roll_calls();
        pthread_mutex_lock(&wd.mu);
        if (wd.stop) {
            pthread_mutex_unlock(&wd.mu);
            return NULL;
        }
        for (int s = 0; s < SLOTS; s++) {
            double waited = now_s() - wd.since[s];
            if (wd.waiting[s] && waited > wd.timeout_s) {
                char what[128], who[2048];
                snprintf(what, sizeof what, "%s", wd.what[s]);
                pthread_mutex_unlock(&wd.mu);
                roll_call(who, sizeof who);
                fprintf(stderr,
                        "dstrain: rank %d on %s waited %.0f s in %s for the other ranks (--timeout "
                        "%g)%s; ending the job\n",
                        wd.rank, wd_host(wd.rank), waited, what, wd.timeout_s, who);
                fflush(stderr);
                MPI_Abort(MPI_COMM_WORLD, 3);
                _exit(3);   /* if MPI_Abort itself cannot reach the launcher */
            }
        }
        pthread_mutex_unlock(&wd.mu);
    }
}

static int slot_of_caller(void)
{
    return pthread_equal(pthread_self(), wd.main_thread) ? SLOT_MAIN : SLOT_OTHER;
}

void ds_world_wait_begin(ds_world *w, const char *what)
{
    (void)w;
    int s = slot_of_caller();
    pthread_mutex_lock(&wd.mu);
    wd.waiting[s] = 1;
    wd.since[s] = now_s();
    snprintf(wd.what[s], sizeof wd.what[s], "%s", what);
    pthread_mutex_unlock(&wd.mu);
}

void ds_world_wait_end(ds_world *w)
{
    (void)w;
    int s = slot_of_caller();
    pthread_mutex_lock(&wd.mu);
    wd.waiting[s] = 0;
    pthread_mutex_unlock(&wd.mu);
}

ds_status ds_world_check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return DS_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return DS_FAIL(DS_ERR_MPI, "%s: %s", call, msg);
}

/* MPI has no 16-bit floats: F16 and BF16 travel as 2-byte types of their
 * own (distinct handles, so the sum knows which) and are summed by an op of
 * ours: both widened to float, added, rounded to nearest even. The float
 * sum is rounded twice (to float, then to 16 bits), yet it is the exact
 * sum rounded once: two p-bit numbers added in q >= 2p + 2 bits round the
 * same either way (Figueroa), and float has 24 >= 2 x 11 + 2 (F16) and
 * 2 x 8 + 2 (BF16). The same bits as widening to double, about 2.3 times
 * faster (13M pairs: 72 against 171 ms for F16 on an AMD EPYC Zen 5).
 * Addition commutes exactly, so every rank gets the same bits. */
static MPI_Datatype mpi_f16 = MPI_DATATYPE_NULL, mpi_bf16 = MPI_DATATYPE_NULL;
static MPI_Op mpi_half_sum = MPI_OP_NULL;

static void half_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    if (*type == mpi_bf16)
        for (int i = 0; i < *len; i++)
            b[i] = ds_half_bf16_from_f32(ds_half_f32_from_bf16(a[i]) + ds_half_f32_from_bf16(b[i]));
    else
        for (int i = 0; i < *len; i++)
            b[i] = ds_half_f16_from_f32(ds_half_f32_from_f16(a[i]) + ds_half_f32_from_f16(b[i]));
}

/* Once per process, after MPI_Init. */
static ds_status half_types_init(void)
{
    if (mpi_half_sum != MPI_OP_NULL)
        return DS_OK;
    DS_TRY(ds_world_check(MPI_Type_contiguous(1, MPI_UINT16_T, &mpi_f16), "MPI_Type_contiguous"));
    DS_TRY(ds_world_check(MPI_Type_commit(&mpi_f16), "MPI_Type_commit"));
    DS_TRY(ds_world_check(MPI_Type_contiguous(1, MPI_UINT16_T, &mpi_bf16), "MPI_Type_contiguous"));
    DS_TRY(ds_world_check(MPI_Type_commit(&mpi_bf16), "MPI_Type_commit"));
    return ds_world_check(MPI_Op_create(half_sum, 1, &mpi_half_sum), "MPI_Op_create");
}

/* Every rank's host name and device, on every rank; the node count. */
static ds_status gather_hosts(ds_world *w)
{
    char mine[DS_WORLD_HOST] = "";
    if (gethostname(mine, sizeof mine - 1) != 0)
        snprintf(mine, sizeof mine, "(unnamed)");
    w->hosts = calloc((size_t)w->size, DS_WORLD_HOST);
    w->devices = calloc((size_t)w->size, sizeof *w->devices);
    if (!w->hosts || !w->devices)
        return DS_FAIL(DS_ERR_MEM, "host names of %d ranks", w->size);
    DS_TRY(ds_world_check(MPI_Allgather(mine, DS_WORLD_HOST, MPI_CHAR, w->hosts, DS_WORLD_HOST,
                                        MPI_CHAR, MPI_COMM_WORLD), "MPI_Allgather (host names)"));
    DS_TRY(ds_world_check(MPI_Allgather(&w->device, 1, MPI_INT, w->devices, 1, MPI_INT,
                                        MPI_COMM_WORLD), "MPI_Allgather (devices)"));
    w->nodes = 0;
    for (int r = 0; r < w->size; r++) {
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = strcmp(ds_world_host(w, q), ds_world_host(w, r)) != 0;
        w->nodes += first;
    }
    return DS_OK;
}

const char *ds_world_host(const ds_world *w, int rank)
{
    return w->hosts && rank >= 0 && rank < w->size ? w->hosts + (size_t)rank * DS_WORLD_HOST : "?";
}

/* Appends to out [cap] at *len, never past cap. */
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(out + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len += n > 0 ? (size_t)n : 0;
}

void ds_world_layout(const ds_world *w, int gpus_named, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    put(out, cap, &len, "%d node%s:", w->nodes, w->nodes == 1 ? "" : "s");
    for (int r = 0; r < w->size; r++) {
        const char *h = ds_world_host(w, r);
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = strcmp(ds_world_host(w, q), h) != 0;
        if (!first)
            continue;
        int mine = 0;
        for (int q = r; q < w->size; q++)
            mine += !strcmp(ds_world_host(w, q), h);
        put(out, cap, &len, "%s %s rank%s", r ? "," : "", h, mine > 1 ? "s" : "");
        for (int q = r; q < w->size;) {   /* the host's ranks as ranges */
            if (strcmp(ds_world_host(w, q), h)) {
                q++;
                continue;
            }
            int e = q;
            while (e + 1 < w->size && !strcmp(ds_world_host(w, e + 1), h))
                e++;
            put(out, cap, &len, q == e ? " %d" : " %d-%d", q, e);
            q = e + 1;
        }
        int gpus = 0;
        for (int q = r; q < w->size; q++)
            gpus += gpus_named && !strcmp(ds_world_host(w, q), h) && w->devices[q] >= 0;
        if (gpus) {
            put(out, cap, &len, " (GPU%s", gpus > 1 ? "s" : "");
            for (int q = r, k = 0; q < w->size; q++)
                if (!strcmp(ds_world_host(w, q), h) && w->devices[q] >= 0)
                    put(out, cap, &len, "%s%d", k++ ? "," : " ", w->devices[q]);
            put(out, cap, &len, ")");
        }
    }
    if (len >= cap && cap > 4)
        memcpy(out + cap - 4, "...", 4);
}

ds_status ds_world_init(ds_world *w, int visible_gpus, double timeout_s)
{
    memset(w, 0, sizeof *w);
    w->comm = w->grad_comm = w->node_comm = MPI_COMM_NULL;
    int provided = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        DS_TRY(ds_world_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
    else
        MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        return DS_FAIL(DS_ERR_MPI, "the MPI library gives thread level %d, dstrain needs "
                                   "MPI_THREAD_MULTIPLE for its communication thread", provided);
    DS_TRY(half_types_init());
    MPI_Comm local;
    DS_TRY(ds_world_check(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank), "MPI_Comm_rank"));
    DS_TRY(ds_world_check(MPI_Comm_size(MPI_COMM_WORLD, &w->size), "MPI_Comm_size"));
    DS_TRY(ds_world_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank,
                                         MPI_INFO_NULL, &local), "MPI_Comm_split_type"));
    MPI_Comm_rank(local, &w->local_rank);
    MPI_Comm_size(local, &w->local_size);
    w->node_comm = local;
    MPI_Comm_set_errhandler(w->node_comm, MPI_ERRORS_RETURN);
    DS_TRY(ds_device_bind(w->local_rank, w->local_size, visible_gpus, 0, &w->binding));
    w->device = w->binding.device;
    if (w->binding.warning[0] && w->local_rank == 0)   /* it describes the node: once per node */
        fprintf(stderr, "dstrain: rank %d: warning: %s\n", w->rank, w->binding.warning);
    DS_TRY(ds_world_check(MPI_Comm_dup(MPI_COMM_WORLD, &w->comm), "MPI_Comm_dup"));
    DS_TRY(ds_world_check(MPI_Comm_dup(MPI_COMM_WORLD, &w->grad_comm), "MPI_Comm_dup"));
    MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(w->grad_comm, MPI_ERRORS_RETURN);
    ds_log_set_print_rank(w->rank);
    DS_TRY(gather_hosts(w));
    w->timeout_s = timeout_s;
    wd.main_thread = pthread_self();
    wd.rank = w->rank;
    wd.timeout_s = timeout_s;
    wd.stop = 0;
    wd.size = w->size;
    wd.hosts = w->hosts;
    if (timeout_s > 0 && w->size > 1) {
        DS_TRY(ds_world_check(MPI_Comm_dup(MPI_COMM_WORLD, &wd.roll), "MPI_Comm_dup"));
        MPI_Comm_set_errhandler(wd.roll, MPI_ERRORS_RETURN);
        if (pthread_create(&wd.thread, NULL, watchdog, NULL) != 0)
            return DS_FAIL(DS_ERR_MPI, "cannot start the watchdog thread");
        wd.running = 1;
    }
    return DS_OK;
}

void ds_world_finalize(ds_world *w)
{
    if (wd.running) {
        pthread_mutex_lock(&wd.mu);
        wd.stop = 1;
        pthread_mutex_unlock(&wd.mu);
        pthread_join(wd.thread, NULL);
        wd.running = 0;
    }
    if (wd.roll != MPI_COMM_NULL)
        MPI_Comm_free(&wd.roll);
    if (w->comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->comm);
    if (w->grad_comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->grad_comm);
    if (w->node_comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->node_comm);
    wd.hosts = NULL;
    free(w->hosts);
    free(w->devices);
    w->hosts = NULL;
    w->devices = NULL;
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Finalize();
}

void ds_world_abort(ds_world *w, const char *why)
{
    fprintf(stderr, "dstrain: rank %d on %s: %s; ending the job\n", w->rank,
            ds_world_host(w, w->rank), why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

ds_status ds_world_allreduce_sum(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what)
{
    ds_world_wait_begin(w, what);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, t, ds_world_sum_op(t), w->comm);
    ds_world_wait_end(w);
    return ds_world_check(rc, what);
}

ds_status ds_world_bcast(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what)
{
    ds_world_wait_begin(w, what);
    int rc = MPI_Bcast(buf, count, t, 0, w->comm);
    ds_world_wait_end(w);
    return ds_world_check(rc, what);
}

MPI_Datatype ds_world_type(int t)
{
    switch ((ds_dtype)t) {
    case DS_F32: return MPI_FLOAT;
    case DS_F64: return MPI_DOUBLE;
    case DS_F16: return mpi_f16;
    case DS_BF16: return mpi_bf16;
    case DS_I32: return MPI_INT32_T;
    case DS_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op ds_world_sum_op(MPI_Datatype t)
{
    return t != MPI_DATATYPE_NULL && (t == mpi_f16 || t == mpi_bf16) ? mpi_half_sum : MPI_SUM;
}
