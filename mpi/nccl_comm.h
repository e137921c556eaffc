/* nccl_comm.h - an NCCL communicator over the ranks of a world, and the way
 * out when it fails or hangs. Built only with the CUDA backend and NCCL.
 *
 * Set-up: the ranks first compare their GPUs (host name and PCI bus id,
 * over MPI), so that two ranks on one GPU, which NCCL refuses, get the same
 * clear error on every rank; rank 0 calls ncclGetUniqueId and broadcasts it
 * over MPI; every rank calls ncclCommInitRankConfig on its device with a
 * non-blocking configuration and polls ncclCommGetAsyncError until the
 * communicator is ready, for at most the world's --timeout.
 *
 * Every NCCL call goes through DS_NCCL, which waits (polling, bounded by
 * the timeout) while non-blocking NCCL is still queueing the call
 * (ncclInProgress) and turns a failure into a ds_status naming the call,
 * what it was for, file and line, and NCCL's own last message. When a wait
 * runs out, or an operation fails where the other ranks are left waiting,
 * ds_nccl_fatal prints which rank waited in which operation, calls
 * ncclCommAbort on every communicator this process has open (the NCCL
 * transport has two: gradient buckets, and BatchNorm's sums) and MPI_Abort:
 * the job ends, it never hangs. */
#ifndef DS_NCCL_COMM_H
#define DS_NCCL_COMM_H

#include <nccl.h>
#include <stddef.h>

#include "world.h"

typedef struct {
    ds_world *world;
    int device;
    ncclComm_t comm;    /* NULL until ready */
} ds_nccl;

/* n->comm on device for every rank of w. Collective over w. */
ds_status ds_nccl_open(ds_world *w, int device, ds_nccl *n);
/* The same for a communicator of one use: name is NCCL's commName (in its
 * logs; a literal), max_ctas caps the thread blocks (channels) one of its
 * collectives takes on the GPU (0: NCCL's choice). Every rank passes the same. */
ds_status ds_nccl_open_as(ds_world *w, int device, const char *name, int max_ctas, ds_nccl *n);
/* ncclCommFinalize (bounded by the timeout) and ncclCommDestroy; ncclCommAbort
 * when the communicator has failed or does not finish. Safe twice. */
void ds_nccl_close(ds_nccl *n);

/* r is what call returned; see above. what: "the allreduce of gradient bucket 3". */
ds_status ds_nccl_settle(ds_nccl *n, ncclResult_t r, const char *call, const char *what,
                         const char *file, int line);
/* Returns at once, unless another thread is ending the job (ds_nccl_fatal):
 * then it never returns, so that no call reaches an aborted communicator. */
void ds_nccl_guard(void);
#define DS_NCCL(n, call, what)                                                                 \
    ds_nccl_settle((n), (ds_nccl_guard(), (call)), #call, (what), __FILE__, __LINE__)

/* 1 with a message in msg [size] when the communicator has failed
 * asynchronously (ncclCommGetAsyncError), else 0. Any thread. */
int ds_nccl_async_error(ds_nccl *n, char *msg, size_t size);

/* Prints "dstrain: " why "; aborting the NCCL communicator and ending the
 * job", then ncclCommAbort of n's communicator and of every other one open
 * in this process, and MPI_Abort. Any thread; the first caller ends the
 * job, a second one waits for it. */
void ds_nccl_fatal(ds_nccl *n, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* "nccl:     2.28.9 (compiled 2.28.9)": the library found at run time
 * (ncclGetVersion) and the header compiled against. */
void ds_nccl_describe(char *buf, size_t size);

#endif
