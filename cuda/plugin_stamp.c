/* plugin_stamp.c - the CUDA plugin's build stamp, which the loader
 * (src/backend_plugin.c) compares with its own before it takes the seam. */
#include "backend_plugin.h"
#include "build_info.h"

DS_PLUGIN_EXPORT const char ds_cuda_plugin_stamp[] = DSTRAIN_VERSION " " DSTRAIN_GIT_REV;
DS_PLUGIN_EXPORT const size_t ds_cuda_plugin_seam_sizes[DS_BACKEND_PLUGIN_SEAM_SIZES] =
    DS_BACKEND_PLUGIN_SEAM;
