/* world.h - the ranks of a job: MPI set-up and shutdown, local rank,
 * device binding, rank-0 printing, and a watchdog on blocking waits. */
#ifndef DS_WORLD_H
#define DS_WORLD_H

#include <mpi.h>

#include "device_binding.h"
#include "status.h"

typedef struct {
    int rank, size;               /* in MPI_COMM_WORLD */
    int local_rank, local_size;   /* on this node (MPI_Comm_split_type SHARED) */
    int device;                   /* GPU to use (binding.device); -1: none visible */
    ds_binding binding;           /* how device was chosen, for the MPI transport; the
                                   * NCCL set-up re-checks with ds_device_bind(nccl = 1) */
    MPI_Comm comm;                /* main-thread collectives (BatchNorm moments, metrics) */
    MPI_Comm grad_comm;           /* the gradient reduction thread's collectives */
    MPI_Comm node_comm;           /* the ranks of this node (MPI_COMM_TYPE_SHARED) */
    double timeout_s;             /* watchdog: longest wait on other ranks, <= 0: none */
    char *hosts;                  /* [size][DS_WORLD_HOST] every rank's host name, gathered
                                   * at init: messages name the host beside the rank */
    int *devices;                 /* [size] every rank's device (-1: none) */
    int nodes;                    /* distinct host names */
} ds_world;

/* Bytes of one host name in ds_world.hosts, its NUL included (a longer
 * name is cut). */
#define DS_WORLD_HOST 64

/* MPI_Init_thread (MPI_THREAD_MULTIPLE), ranks, the device for visible_gpus
 * GPUs (ds_device_bind; local rank 0 of each node prints its warning once),
 * and the watchdog thread. Sets the print rank. */
ds_status ds_world_init(ds_world *w, int visible_gpus, double timeout_s);
/* The host rank runs on ("?" before init or for a rank out of range). */
const char *ds_world_host(const ds_world *w, int rank);
/* The ranks' layout over the nodes, once, for the run's start: "2 nodes:
 * node1 ranks 0-1 (GPUs 0,1), node2 ranks 2-3 (GPUs 0,1)" (gpus_named 0, a
 * CPU run: no GPUs named), hosts in the order of their first rank, written
 * into out [cap]. */
void ds_world_layout(const ds_world *w, int gpus_named, char *out, size_t cap);
/* Frees the communicators, stops the watchdog, MPI_Finalize. Safe twice. */
void ds_world_finalize(ds_world *w);
/* Ends every rank now (MPI_Abort) after printing why: for failures that
 * leave the other ranks waiting. */
void ds_world_abort(ds_world *w, const char *why) __attribute__((noreturn));

/* Brackets a blocking wait on other ranks: if one lasts longer than the
 * timeout the watchdog prints which wait (what) and aborts the job. */
void ds_world_wait_begin(ds_world *w, const char *what);
void ds_world_wait_end(ds_world *w);

/* Checked collectives on w->comm, bounded by the watchdog. */
ds_status ds_world_allreduce_sum(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what);
ds_status ds_world_bcast(ds_world *w, void *buf, int count, MPI_Datatype t, const char *what);

/* DS_OK, or the MPI error of rc recorded as "call: message". */
ds_status ds_world_check(int rc, const char *call);

/* MPI datatype of a dtype (float32, float64, float16, bfloat16, int32,
 * int64; the 16-bit floats once ds_world_init has run). */
MPI_Datatype ds_world_type(int ds_dtype_value);
/* The sum for MPI_Allreduce of type t: MPI_SUM, or ours for the 16-bit floats. */
MPI_Op ds_world_sum_op(MPI_Datatype t);

#endif
