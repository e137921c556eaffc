/* transport_nccl_load.c - the NCCL transport's entries in the program. The
 * transport itself (transport_nccl.c, nccl_comm.c) links NCCL and lives in
 * the CUDA plugin with the backend (src/backend_plugin.h); these look it up
 * there, so that a run without --allreduce nccl never loads NCCL. */
#include <stdio.h>

#include "backend_plugin.h"
#include "transport.h"

typedef ds_status (*nccl_open_fn)(const ds_transport_cfg *c, ds_transport **out);
typedef void (*nccl_describe_fn)(char *buf, size_t size);

ds_status ds_transport_nccl_create(const ds_transport_cfg *c, ds_transport **out)
{
    *out = NULL;
    nccl_open_fn open = (nccl_open_fn)ds_backend_plugin_symbol("ds_transport_nccl_open");
    if (!open)
        return DS_FAIL(DS_ERR_UNSUPPORTED, "--allreduce nccl: the NCCL transport is in the CUDA "
                       "plugin, which is not there: %s", ds_backend_missing("cuda")[0]
                           ? ds_backend_missing("cuda") : "it has no ds_transport_nccl_open");
    return open(c, out);
}

void ds_transport_nccl_describe(char *buf, size_t size)
{
    /* only a loaded plugin: a CPU run (bench's environment record) maps no CUDA library */
    nccl_describe_fn describe = ds_backend_plugin_loaded()
        ? (nccl_describe_fn)ds_backend_plugin_symbol("ds_nccl_describe") : NULL;
    if (describe)
        describe(buf, size);
    else
        snprintf(buf, size, "nccl:     built into the CUDA plugin, which this run has not loaded");
}
