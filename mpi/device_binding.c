/* device_binding.c - which GPU a rank uses, from its place on its node; see
 * device_binding.h. */
#include "device_binding.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Devices and ranks listed by name in a message before "...". */
enum { LIST_DEVICES = 4, LIST_RANKS = 4 };

/* Local ranks bound to device d: d, d + visible, ... below local_size. */
static int ranks_on(int d, int local_size, int visible)
{
    return (local_size - d + visible - 1) / visible;
}

/* Appends printf-style text to buf [cap] at *len, truncating safely. */
__attribute__((format(printf, 4, 5)))
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* buf [cap] = "device 0: local ranks 0, 2; device 1: local ranks 1, 3" for
 * the devices that more than one rank shares. */
static void describe_sharing(char *buf, size_t cap, int local_size, int visible)
{
    size_t len = 0;
    int listed = 0;
    buf[0] = '\0';
    for (int d = 0; d < visible; d++) {
        if (ranks_on(d, local_size, visible) < 2)
            continue;
        if (listed++ == LIST_DEVICES) {
            append(buf, cap, &len, "; ...");
            return;
        }
        append(buf, cap, &len, "%sdevice %d: local ranks %d", listed > 1 ? "; " : "", d, d);
        for (int r = d + visible, k = 1; r < local_size; r += visible, k++) {
            if (k == LIST_RANKS) {
                append(buf, cap, &len, ", ...");
                break;
            }
            append(buf, cap, &len, ", %d", r);
        }
    }
}

static ds_status check_args(int local_rank, int local_size, int visible_devices, ds_binding *out)
{
    if (!out)
        return DS_FAIL(DS_ERR_ARG, "device binding: no result to fill");
    if (local_size < 1)
        return DS_FAIL(DS_ERR_ARG, "device binding: %d ranks on this node; there must be at least one",
                       local_size);
    if (local_rank < 0 || local_rank >= local_size)
        return DS_FAIL(DS_ERR_ARG, "device binding: local rank %d is outside 0..%d (%d ranks on this node)",
                       local_rank, local_size - 1, local_size);
    if (visible_devices < 0)
        return DS_FAIL(DS_ERR_ARG, "device binding: %d visible devices; the count cannot be negative",
                       visible_devices);
    return DS_OK;
}

ds_status ds_device_bind(int local_rank, int local_size, int visible_devices, int nccl,
                         ds_binding *out)
{
    DS_TRY(check_args(local_rank, local_size, visible_devices, out));
    memset(out, 0, sizeof *out);
    out->visible_devices = visible_devices;
    out->ranks_on_device = 1;
    if (visible_devices == 0) {
        out->device = -1;
        return DS_OK;
    }
    if (visible_devices == 1)   /* the launcher gave this rank its own GPU */
        return DS_OK;
    out->device = local_rank % visible_devices;
    out->ranks_on_device = ranks_on(out->device, local_size, visible_devices);
    out->shared = local_size > visible_devices;
    if (!out->shared)
        return DS_OK;
    char who[256];   /* bounded by LIST_DEVICES and LIST_RANKS */
    describe_sharing(who, sizeof who, local_size, visible_devices);
    if (nccl)
        return DS_FAIL(DS_ERR_ARG,
                       "%d ranks on this node but %d visible GPUs: ranks would share devices (%s), "
                       "and NCCL refuses two ranks on one device; start at most %d ranks per node "
                       "(mpiexec --map-by ppr:%d:node, srun --ntasks-per-node=%d) or use "
                       "--allreduce mpi",
                       local_size, visible_devices, who, visible_devices, visible_devices,
                       visible_devices);
    snprintf(out->warning, sizeof out->warning,
             "%d ranks on this node share %d visible GPUs (%s): each shares its GPU's memory "
             "and time; start at most %d ranks per node for one GPU each",
             local_size, visible_devices, who, visible_devices);
    return DS_OK;
}
