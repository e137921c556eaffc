/* device_binding.h - which GPU a rank uses, decided once, in one place, from
 * the rank's place on its node and the number of devices it sees. Pure (no
 * MPI, no CUDA) so that every rule is a table test.
 *
 * Rules:
 *  - no visible device: device -1, the CPU (not an error here: the caller
 *    decides whether it needs a GPU);
 *  - exactly one: device 0, whatever the local rank: the launcher bound one
 *    GPU to each rank (CUDA_VISIBLE_DEVICES per rank, Slurm --gpus-per-task);
 *  - otherwise local_rank % visible_devices. With more ranks on the node than
 *    devices, ranks share devices: a warning for the MPI transport, an error
 *    for NCCL, which refuses two ranks on one device. The verdict depends only
 *    on the node's numbers, so every rank of the node reaches the same one
 *    (none is left waiting for a rank that gave up). */
#ifndef DS_DEVICE_BINDING_H
#define DS_DEVICE_BINDING_H

#include "status.h"

typedef struct {
    int device;            /* index among the visible devices; -1: none (CPU) */
    int visible_devices;   /* as given */
    int shared;            /* some ranks of this node share a device */
    int ranks_on_device;   /* local ranks bound to this rank's device, itself included */
    char warning[400];     /* "" or a line to print once (ranks share devices over MPI) */
} ds_binding;

/* *out = the binding of local rank local_rank of local_size on its node,
 * which sees visible_devices GPUs; nccl: the gradients go through NCCL.
 * DS_ERR_ARG for impossible arguments and for NCCL with shared devices. */
ds_status ds_device_bind(int local_rank, int local_size, int visible_devices, int nccl,
                         ds_binding *out);

#endif
