/* world.c - see world.h. The watchdog is a thread that wakes twice a second
 * and aborts the job when the main thread or the communication thread has
 * been waiting on other ranks longer than the timeout: a dead or hung rank
 * ends the job with a message instead of a hang. */
#include "world.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "half.h"
#include "log.h"

enum { SLOT_MAIN, SLOT_OTHER, SLOTS };

static struct {
    pthread_t thread, main_thread;
    pthread_mutex_t mu;
    int running, stop;
    double timeout_s;
    int rank;
    int waiting[SLOTS];
    double since[SLOTS];
    char what[SLOTS][128];
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(500 * 1000);
        pthread_mutex_lock(&wd.mu);
        if (wd.stop) {
            pthread_mutex_unlock(&wd.mu);
            return NULL;
        }
        for (int s = 0; s < SLOTS; s++) {
            double waited = now_s() - wd.since[s];
            if (wd.waiting[s] && waited > wd.timeout_s) {
                fprintf(stderr,
                        "dstrain: rank %d waited %.0f s in %s for the other ranks (--timeout %g): "
                        "a rank has died or hangs; ending the job\n",
                        wd.rank, waited, wd.what[s], wd.timeout_s);
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

ds_status ds_mpi_check(int rc, const char *call)
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
 * ours: both widened to double (exact for F16), added, rounded once to
 * nearest even. Addition commutes exactly, so every rank gets the same bits. */
static MPI_Datatype mpi_f16 = MPI_DATATYPE_NULL, mpi_bf16 = MPI_DATATYPE_NULL;
static MPI_Op mpi_half_sum = MPI_OP_NULL;

static void half_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    const uint16_t *a = in;
    uint16_t *b = inout;
    if (*type == mpi_bf16)
        for (int i = 0; i < *len; i++)
            b[i] = ds_bf16_from_f64((double)ds_f32_from_bf16(a[i]) + ds_f32_from_bf16(b[i]));
    else
        for (int i = 0; i < *len; i++)
            b[i] = ds_f16_from_f64((double)ds_f32_from_f16(a[i]) + ds_f32_from_f16(b[i]));
}

/* Once per process, after MPI_Init. */
static ds_status half_types_init(void)
{
    if (mpi_half_sum != MPI_OP_NULL)
        return DS_OK;
    DS_TRY(ds_mpi_check(MPI_Type_contiguous(1, MPI_UINT16_T, &mpi_f16), "MPI_Type_contiguous"));
    DS_TRY(ds_mpi_check(MPI_Type_commit(&mpi_f16), "MPI_Type_commit"));
    DS_TRY(ds_mpi_check(MPI_Type_contiguous(1, MPI_UINT16_T, &mpi_bf16), "MPI_Type_contiguous"));
    DS_TRY(ds_mpi_check(MPI_Type_commit(&mpi_bf16), "MPI_Type_commit"));
    return ds_mpi_check(MPI_Op_create(half_sum, 1, &mpi_half_sum), "MPI_Op_create");
}

ds_status ds_world_init(ds_world *w, int visible_gpus, double timeout_s)
{
    memset(w, 0, sizeof *w);
    w->comm = w->grad_comm = MPI_COMM_NULL;
    int provided = 0, initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
        DS_TRY(ds_mpi_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread"));
    else
        MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        return DS_FAIL(DS_ERR_MPI, "the MPI library gives thread level %d, dstrain needs "
                                   "MPI_THREAD_MULTIPLE for its communication thread", provided);
    DS_TRY(half_types_init());
    MPI_Comm local;
    DS_TRY(ds_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank), "MPI_Comm_rank"));
    DS_TRY(ds_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &w->size), "MPI_Comm_size"));
    DS_TRY(ds_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank,
                                         MPI_INFO_NULL, &local), "MPI_Comm_split_type"));
    MPI_Comm_rank(local, &w->local_rank);
    MPI_Comm_size(local, &w->local_size);
    MPI_Comm_free(&local);
    DS_TRY(ds_bind_device(w->local_rank, w->local_size, visible_gpus, 0, &w->binding));
    w->device = w->binding.device;
    if (w->binding.warning[0] && w->local_rank == 0)   /* it describes the node: once per node */
        fprintf(stderr, "dstrain: rank %d: warning: %s\n", w->rank, w->binding.warning);
    DS_TRY(ds_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &w->comm), "MPI_Comm_dup"));
    DS_TRY(ds_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &w->grad_comm), "MPI_Comm_dup"));
    MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(w->grad_comm, MPI_ERRORS_RETURN);
    ds_set_print_rank(w->rank);
    w->timeout_s = timeout_s;
    wd.main_thread = pthread_self();
    wd.rank = w->rank;
    wd.timeout_s = timeout_s;
    wd.stop = 0;
    if (timeout_s > 0 && w->size > 1) {
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
    if (w->comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->comm);
    if (w->grad_comm != MPI_COMM_NULL)
        MPI_Comm_free(&w->grad_comm);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Finalize();
}

void ds_world_abort(ds_world *w, const char *why)
{
    fprintf(stderr, "dstrain: rank %d: %s; ending the job\n", w->rank, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

ds_status ds_world_allreduce_sum(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what)
{
    ds_world_wait_begin(w, what);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, t, ds_mpi_sum_op(t), w->comm);
    ds_world_wait_end(w);
    return ds_mpi_check(rc, what);
}

ds_status ds_world_bcast(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what)
{
    ds_world_wait_begin(w, what);
    int rc = MPI_Bcast(buf, count, t, 0, w->comm);
    ds_world_wait_end(w);
    return ds_mpi_check(rc, what);
}

MPI_Datatype ds_mpi_type(int t)
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

MPI_Op ds_mpi_sum_op(MPI_Datatype t)
{
    return t != MPI_DATATYPE_NULL && (t == mpi_f16 || t == mpi_bf16) ? mpi_half_sum : MPI_SUM;
}
