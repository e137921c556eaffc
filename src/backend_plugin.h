/* backend_plugin.h - the CUDA backend as a plugin (libdstrain_cuda.so),
 * loaded with dlopen the first time `--device cuda` (or `dstrain version`)
 * asks for it, so that the CPU path needs none of the CUDA libraries and a
 * CUDA library that cannot be loaded is an error that says why, not the
 * dynamic loader's one line before main.
 *
 * The plugin holds cuda/ and the NCCL transport (mpi/transport_nccl.c,
 * mpi/nccl_comm.c), built with hidden symbols but for its entries (marked
 * DS_PLUGIN_EXPORT); what it uses of the program (status, log, the CPU-side
 * helpers) it takes from the program itself, which is linked whole and
 * exports its symbols (CMakeLists.txt: dstrain_plugin_host). */
#ifndef DS_BACKEND_PLUGIN_H
#define DS_BACKEND_PLUGIN_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DS_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The file name of the plugin, found (in this order) at $DSTRAIN_CUDA_PLUGIN
 * when set, beside the program, or in the build folder it was built in. */
#define DS_BACKEND_PLUGIN_FILE "libdstrain_cuda.so"

/* The CUDA backend, loaded at the first call (thread-safe); NULL when this
 * build has none or it could not be loaded: ds_backend_plugin_error says why. */
const ds_backend *ds_backend_plugin_cuda(void);

/* The plugin's exported `name` (loading it if needed); NULL when it is not
 * loaded or has no such symbol. */
void *ds_backend_plugin_symbol(const char *name);

/* Why the CUDA backend is not there: one sentence naming the file and the
 * cause, with what to do; "" when it loaded or was never asked for. */
const char *ds_backend_plugin_error(void);

/* 1 when the CUDA backend is loaded already; never loads it (a CPU run's
 * `nccl:` description must not map the CUDA libraries). */
int ds_backend_plugin_loaded(void);

/* What the plugin exports beside ds_cuda_backend, for the loader to refuse
 * one from another build by name: its version and revision (build_info.h)
 * and the sizes of the seam's structures it fills (a dirty tree's revision
 * does not change when they do). */
#define DS_BACKEND_PLUGIN_STAMP_SYMBOL "ds_cuda_plugin_stamp"
#define DS_BACKEND_PLUGIN_SEAM_SYMBOL "ds_cuda_plugin_seam_sizes"
#define DS_BACKEND_PLUGIN_SEAM_SIZES 3
#define DS_BACKEND_PLUGIN_SEAM {sizeof(ds_backend), sizeof(ds_ops), sizeof(ds_dropout_key)}

#ifdef __cplusplus
}
#endif

#endif
