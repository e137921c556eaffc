/* nccl_comm.c - an NCCL communicator over a world's ranks, and its way out;
 * see nccl_comm.h. */
#include "nccl_comm.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend_plugin.h"

/* How often the host looks at a communicator it waits for. */
#define POLL_US 200
/* Longest ncclCommAbort and MPI_Abort get before SIGALRM ends the process. */
#define ABORT_GRACE_S 20

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *last_error(const ds_nccl *n)
{
    const char *s = ncclGetLastError(n->comm);
    return s && *s ? s : "no further detail from NCCL";
}

/* Set once the job is ending: the communicator may be aborted under us. */
static atomic_int ending;

/* The communicators open in this process, so that ending the job aborts
 * all of them: a peer blocked in a collective of any of them must be
 * released, whichever one failed. open_mu is held to add or remove an
 * entry, to abort them (ds_nccl_fatal), and around each look at a
 * communicator's state from a polling thread (query), so that an abort
 * from one watch thread never frees a communicator another is reading. */
#define OPEN_MAX 8
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static ncclComm_t open_comms[OPEN_MAX];

static ds_status remember(ncclComm_t comm)
{
    pthread_mutex_lock(&open_mu);
    int k = 0;
    while (k < OPEN_MAX && open_comms[k])
        k++;
    if (k < OPEN_MAX)
        open_comms[k] = comm;
    pthread_mutex_unlock(&open_mu);
    return k < OPEN_MAX ? DS_OK
                        : DS_FAIL(DS_ERR_ARG, "more than %d NCCL communicators open at once", OPEN_MAX);
}

static void forget(ncclComm_t comm)
{
    pthread_mutex_lock(&open_mu);
    for (int k = 0; k < OPEN_MAX; k++)
        if (open_comms[k] == comm)
            open_comms[k] = NULL;
    pthread_mutex_unlock(&open_mu);
}

void ds_nccl_guard(void)
{
    if (atomic_load(&ending))
        for (;;)
            pause();   /* another thread is ending the job */
}

/* ncclCommGetAsyncError, and on a failure NCCL's last message into msg
 * [size] (if msg), under open_mu: ds_nccl_fatal aborts under it, after
 * setting ending, so the communicator is still whole here, or this never
 * returns. */
static ncclResult_t query(const ds_nccl *n, ncclResult_t *r, char *msg, size_t size)
{
    pthread_mutex_lock(&open_mu);
    if (atomic_load(&ending)) {
        pthread_mutex_unlock(&open_mu);
        ds_nccl_guard();
    }
    ncclResult_t q = ncclCommGetAsyncError(n->comm, r);
    if (msg && (q != ncclSuccess || (*r != ncclSuccess && *r != ncclInProgress)))
        snprintf(msg, size, "%s", last_error(n));
    pthread_mutex_unlock(&open_mu);
    return q;
}

void ds_nccl_fatal(ds_nccl *n, const char *fmt, ...)
{
    if (atomic_exchange(&ending, 1))
        for (;;)
            pause();   /* another thread is ending the job */
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dstrain: %s; aborting the NCCL communicator and ending the job\n", why);
    fflush(stderr);
    alarm(ABORT_GRACE_S);   /* should either call hang, SIGALRM ends this process */
    ncclComm_t failed = n ? n->comm : NULL;
    pthread_mutex_lock(&open_mu);   /* no query reads one while it is aborted */
    if (failed)
        (void)ncclCommAbort(failed);
    for (int k = 0; k < OPEN_MAX; k++)   /* the others: their kernels may wait on a peer too */
        if (open_comms[k] && open_comms[k] != failed)
            (void)ncclCommAbort(open_comms[k]);
    pthread_mutex_unlock(&open_mu);
    MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

ds_status ds_nccl_settle(ds_nccl *n, ncclResult_t r, const char *call, const char *what,
                         const char *file, int line)
{
    const double t0 = now_s(), timeout = n->world->timeout_s;
    while (r == ncclInProgress && n->comm) {
        const double waited = now_s() - t0;
        if (timeout > 0 && waited > timeout)
            ds_nccl_fatal(n, "rank %d waited %.0f s in %s (%s) for the other ranks (--timeout %g): "
                          "a rank has died, hangs or stopped participating",
                          n->world->rank, waited, what, call, timeout);
        usleep(POLL_US);
        ncclResult_t q = query(n, &r, NULL, 0);
        if (q != ncclSuccess)
            r = q;
    }
    if (r == ncclSuccess)
        return DS_OK;
    return ds_status_fail(DS_ERR_MPI, file, line, "%s (%s) on rank %d: %s: %s", call, what, n->world->rank,
                   ncclGetErrorString(r), last_error(n));
}

int ds_nccl_async_error(ds_nccl *n, char *msg, size_t size)
{
    ncclResult_t r = ncclSuccess;
    char detail[512];
    ncclResult_t q = query(n, &r, detail, sizeof detail);
    if (q != ncclSuccess)
        r = q;
    if (r == ncclSuccess || r == ncclInProgress)
        return 0;
    snprintf(msg, size, "NCCL reports %s: %s", ncclGetErrorString(r), detail);
    return 1;
}

/* What each rank says about its GPU, for the shared-device check. */
typedef struct {
    int ok;
    char host[MPI_MAX_PROCESSOR_NAME];
    char bus[32];
} gpu_id;

/* Every rank on its own GPU, or the same error on every rank. */
static ds_status check_distinct_gpus(ds_world *w, int device)
{
    gpu_id me = {0};
    int len = 0;
    cudaError_t e = cudaDeviceGetPCIBusId(me.bus, sizeof me.bus, device);
    me.ok = e == cudaSuccess && MPI_Get_processor_name(me.host, &len) == MPI_SUCCESS;
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    gpu_id *all = calloc((size_t)w->size, sizeof *all);
    if (!all)
        return DS_FAIL(DS_ERR_MEM, "GPU list of %d ranks", w->size);
    ds_world_wait_begin(w, "comparing the ranks' GPUs");
    int rc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, w->comm);
    ds_world_wait_end(w);
    ds_status st = ds_world_check(rc, "MPI_Allgather of the ranks' GPUs");
    for (int a = 0; st == DS_OK && a < w->size; a++) {
        if (!all[a].ok) {
            st = a == w->rank
                ? DS_FAIL(DS_ERR_BACKEND, "cudaDeviceGetPCIBusId(device %d): %s", device,
                          cudaGetErrorString(e))
                : DS_FAIL(DS_ERR_BACKEND, "rank %d cannot name its GPU (see its message)", a);
            break;
        }
        for (int b = a + 1; st == DS_OK && b < w->size; b++)
            if (!strcmp(all[a].host, all[b].host) && !strcmp(all[a].bus, all[b].bus))
                st = DS_FAIL(DS_ERR_ARG,
                             "ranks %d and %d are both on GPU %s of %s, and NCCL refuses two ranks "
                             "on one GPU: give each rank its own (one visible GPU per rank, e.g. "
                             "srun --gpus-per-task=1, or at most as many ranks per node as GPUs) or "
                             "use --allreduce mpi", a, b, all[a].bus, all[a].host);
    }
    free(all);
    return st;
}

/* Rank 0's unique id on every rank; ok says whether rank 0 could make one. */
static ds_status share_unique_id(ds_world *w, ncclUniqueId *id)
{
    struct {
        int ok;
        ncclUniqueId id;
    } msg = {0};
    ncclResult_t r = ncclSuccess;
    if (w->rank == 0) {
        r = ncclGetUniqueId(&msg.id);
        msg.ok = r == ncclSuccess;
    }
    DS_TRY(ds_world_bcast(w, &msg, (int)sizeof msg, MPI_BYTE, "the NCCL unique id"));
    if (!msg.ok)
        return w->rank == 0 ? DS_FAIL(DS_ERR_MPI, "ncclGetUniqueId: %s: %s", ncclGetErrorString(r),
                                      ncclGetLastError(NULL))
                            : DS_FAIL(DS_ERR_MPI, "rank 0 could not make the NCCL unique id "
                                      "(see its message)");
    *id = msg.id;
    return DS_OK;
}

ds_status ds_nccl_open(ds_world *w, int device, ds_nccl *n)
{
    return ds_nccl_open_as(w, device, NULL, 0, n);
}

ds_status ds_nccl_open_as(ds_world *w, int device, const char *name, int max_ctas, ds_nccl *n)
{
    *n = (ds_nccl){.world = w, .device = device};
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        (void)cudaGetLastError();   /* reported by check_distinct_gpus, on every rank */
    DS_TRY(check_distinct_gpus(w, device));
    ncclUniqueId id;
    DS_TRY(share_unique_id(w, &id));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;   /* the host polls, so that the timeout bounds every wait */
    if (name)
        cfg.commName = name;
    if (max_ctas > 0) {
        cfg.minCTAs = 1;
        cfg.maxCTAs = max_ctas;
    }
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, w->size, id, w->rank, &cfg);
    n->comm = comm;
    char what[128];
    snprintf(what, sizeof what, "setting up NCCL for %d ranks on device %d%s%s%s", w->size, device,
             name ? " (communicator " : "", name ? name : "", name ? ")" : "");
    ds_status st = comm ? remember(comm) : DS_OK;
    if (st == DS_OK)
        st = ds_nccl_settle(n, r, "ncclCommInitRankConfig", what, __FILE__, __LINE__);
    if (st != DS_OK)
        ds_nccl_close(n);
    return st;
}

void ds_nccl_close(ds_nccl *n)
{
    if (!n->comm)
        return;
    forget(n->comm);
    ds_nccl_guard();   /* ds_nccl_fatal may have aborted it before it was forgotten */
    (void)cudaSetDevice(n->device);
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(n->comm, &r) == ncclSuccess && r == ncclSuccess) {
        r = ncclCommFinalize(n->comm);   /* flushes what is queued; the peers take part */
        const double t0 = now_s(), timeout = n->world->timeout_s;
        while (r == ncclInProgress && !(timeout > 0 && now_s() - t0 > timeout)) {
            usleep(POLL_US);
            if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess)
                r = ncclInternalError;
        }
    }
    if (r == ncclSuccess)
        (void)ncclCommDestroy(n->comm);
    else
        (void)ncclCommAbort(n->comm);
    n->comm = NULL;
}

/* NCCL's version code: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after. */
static void version_text(int v, char *out, size_t size)
{
    if (v >= 10000)
        snprintf(out, size, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
    else
        snprintf(out, size, "%d.%d.%d", v / 1000, v % 1000 / 100, v % 100);
}

DS_PLUGIN_EXPORT void ds_nccl_describe(char *buf, size_t size)
{
    int v = 0;
    char run[32] = "not found", built[32];
    if (ncclGetVersion(&v) == ncclSuccess && v > 0)
        version_text(v, run, sizeof run);
    version_text(NCCL_VERSION_CODE, built, sizeof built);
    snprintf(buf, size, "nccl:     %s (compiled %s); --allreduce nccl with --device cuda", run, built);
}
