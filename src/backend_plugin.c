/* backend_plugin.c - loading the CUDA backend's plugin, and saying why it
 * did not load; see backend_plugin.h. */
#include "backend_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "address_space.h"
#include "build_info.h"

#ifdef DS_HAVE_CUDA_BACKEND
#include "cuda_plugin_build.h"   /* generated: where it was built, the libraries it links */
#endif

/* Room past the libraries' own span: their constructors allocate as they
 * load (cuBLASLt's crashed with ~18 MiB left past its segments, and loaded
 * with ~45 MiB; measured on a CUDA 13 build), and the backend's context
 * needs its own on top. */
#define CONSTRUCTOR_ROOM (128ULL << 20)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *handle;
static const ds_backend *cuda;
static char why[8192];   /* room for two paths and the loader's message */

#ifdef DS_HAVE_CUDA_BACKEND

/* The folder of the running program, with its trailing '/'; "" if unknown. */
static void program_dir(char *buf, size_t size)
{
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    buf[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash && (size_t)(slash - exe + 2) <= size)
        snprintf(buf, size, "%.*s/", (int)(slash - exe), exe);
}

/* Picks the plugin's path (see backend_plugin.h); 0 (with why) when none exists. */
static int find_plugin(char *path, size_t size)
{
    const char *env = getenv("DSTRAIN_CUDA_PLUGIN");
    if (env && *env) {
        /* its real path: dlopen of a name without a '/' would search the
         * library folders, not the file checked here */
        char real[PATH_MAX];
        snprintf(path, size, "%s", realpath(env, real) ? real : env);
        if (access(path, R_OK) == 0)
            return 1;
        snprintf(why, sizeof why, "DSTRAIN_CUDA_PLUGIN=%s: cannot read it (%m); unset it to use "
                 "the " DS_BACKEND_PLUGIN_FILE " beside the program", env);
        return 0;
    }
    char dir[PATH_MAX];
    program_dir(dir, sizeof dir);
    snprintf(path, size, "%s" DS_BACKEND_PLUGIN_FILE, dir);
    if (dir[0] && access(path, R_OK) == 0)
        return 1;
    snprintf(path, size, "%s", DSTRAIN_CUDA_PLUGIN_BUILT);
    if (access(path, R_OK) == 0)
        return 1;
    snprintf(why, sizeof why, "the CUDA backend's plugin " DS_BACKEND_PLUGIN_FILE " is neither "
             "beside the program (%s) nor where it was built (%s): copy it beside the program, "
             "or set DSTRAIN_CUDA_PLUGIN to its path", dir[0] ? dir : "unknown folder",
             DSTRAIN_CUDA_PLUGIN_BUILT);
    return 0;
}

/* The span the plugin and the CUDA libraries it links take when mapped, and
 * the largest of them by name (for the message); libraries not found where
 * they were at build time count nothing. A file cut short is named in why
 * (returns 0): loading it would end in SIGBUS. */
static unsigned long long libraries_span(const char *plugin, char *parts, size_t size)
{
    int cut;
    unsigned long long total = ds_address_space_elf_span(plugin, &cut);
    if (cut) {
        snprintf(why, sizeof why, "%s is cut short (its segments pass the end of the file: a copy "
                 "or a build that did not finish): build it again or copy it whole; --device cpu "
                 "runs without it", plugin);
        return 0;
    }
    char list[] = DSTRAIN_CUDA_PLUGIN_LIBS;   /* ';'-separated paths */
    size_t used = 0;
    parts[0] = '\0';
    for (char *save = NULL, *lib = strtok_r(list, ";", &save); lib; lib = strtok_r(NULL, ";", &save)) {
        char real[PATH_MAX];
        const char *file = realpath(lib, real) ? real : lib;
        const unsigned long long span = ds_address_space_elf_span(file, &cut);
        if (cut) {
            snprintf(why, sizeof why, "%s, which the CUDA backend links, is cut short (its segments "
                     "pass the end of the file: an install that did not finish): install it again; "
                     "--device cpu runs without it", file);
            return 0;
        }
        total += span;
        const char *base = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
        if (span >= (16ULL << 20) && used < size) {
            const int n = snprintf(parts + used, size - used, "%s%s %llu MiB", used ? ", " : "", base,
                                   span >> 20);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return total;
}

/* 0 (with why) when a file is cut short, or, under an address-space limit,
 * when the libraries cannot fit beside what is mapped. Checked before
 * dlopen: the loader maps a file cut short and the process dies of SIGBUS;
 * short of the libraries' span it fails, and a little past it a
 * constructor crashed the process. */
static int libraries_fit(const char *plugin)
{
    char parts[512];
    const unsigned long long span = libraries_span(plugin, parts, sizeof parts);
    if (!span)
        return why[0] == '\0';   /* cut short: said; unreadable: dlopen will say */
    const unsigned long long lim = ds_address_space_limit(), mapped = ds_address_space_mapped();
    if (!lim || !mapped)
        return 1;
    const unsigned long long need = span + CONSTRUCTOR_ROOM;
    if (mapped + need <= lim)
        return 1;
    snprintf(why, sizeof why, "the address-space limit (ulimit -v) is %llu MiB and %llu MiB is mapped, "
             "but loading the CUDA backend (%s) takes about %llu MiB more (%s, and %llu MiB for "
             "their start-up): raise the limit to at least %llu MiB (ulimit -v %llu), or run with "
             "--device cpu, which needs none of them", lim >> 20, mapped >> 20, plugin, need >> 20,
             parts[0] ? parts : "its libraries", CONSTRUCTOR_ROOM >> 20, (mapped + need) >> 20,
             (mapped + need) / 1024 + 1);
    return 0;
}

/* The loader's message, with what it means and what to do. */
static void explain_dlerror(const char *plugin, const char *err)
{
    const char *hint = "";
    char lib[256] = "";
    const char *colon = strchr(err, ':');
    if (colon && (size_t)(colon - err) < sizeof lib)
        snprintf(lib, sizeof lib, "%.*s", (int)(colon - err), err);
    char more[1024] = "";
    if (strstr(err, "cannot open shared object file")) {
        const char *ld = getenv("LD_LIBRARY_PATH");
        snprintf(more, sizeof more, "the dynamic loader did not find %s (LD_LIBRARY_PATH=%s, and "
                 "the folders of /etc/ld.so.conf): install it, or add its folder to "
                 "LD_LIBRARY_PATH; this build was linked against CUDA %s, cuBLAS %s, cuDNN %s, "
                 "NCCL %s", lib[0] ? lib : "a library", ld && *ld ? ld : "unset",
                 DSTRAIN_CUDA_TOOLKIT, DSTRAIN_CUBLAS, DSTRAIN_CUDNN_VERSION, DSTRAIN_NCCL_VERSION);
        hint = more;
    } else if (strstr(err, "failed to map segment") || strstr(err, "annot allocate memory")) {
        const unsigned long long lim = ds_address_space_limit();
        if (lim)
            snprintf(more, sizeof more, "the address-space limit (ulimit -v) is %llu MiB, with %llu "
                     "MiB mapped: too little to map %s; raise or lift the limit",
                     lim >> 20, ds_address_space_mapped() >> 20, lib[0] ? lib : "it");
        else
            snprintf(more, sizeof more, "the system refused the memory to map %s (a memory limit "
                     "of the job or its cgroup, or vm.overcommit_memory=2)", lib[0] ? lib : "it");
        hint = more;
    } else if (strstr(err, "undefined symbol: ds_")) {
        snprintf(more, sizeof more, "the plugin needs a symbol of dstrain's that this program "
                 "does not export: a program not linked as a plugin host (CMakeLists.txt: "
                 "dstrain_plugin_host), or a plugin from another build");
        hint = more;
    } else if (strstr(err, "undefined symbol") || strstr(err, "version `")) {
        snprintf(more, sizeof more, "a CUDA library found at run time is older than the one this "
                 "build was linked against (CUDA %s, cuBLAS %s, cuDNN %s, NCCL %s), or the plugin "
                 "comes from another build", DSTRAIN_CUDA_TOOLKIT, DSTRAIN_CUBLAS,
                 DSTRAIN_CUDNN_VERSION, DSTRAIN_NCCL_VERSION);
        hint = more;
    }
    snprintf(why, sizeof why, "cannot load the CUDA backend from %s: %s%s%s; --device cpu runs "
             "without it", plugin, err, hint[0] ? ": " : "", hint);
}

/* 1 when the plugin is this build's (same version, revision and seam sizes). */
static int same_build(const char *plugin)
{
    const char *stamp = dlsym(handle, DS_BACKEND_PLUGIN_STAMP_SYMBOL);
    const size_t *seam = dlsym(handle, DS_BACKEND_PLUGIN_SEAM_SYMBOL);
    const char *mine = DSTRAIN_VERSION " " DSTRAIN_GIT_REV;
    const size_t sizes[DS_BACKEND_PLUGIN_SEAM_SIZES] = DS_BACKEND_PLUGIN_SEAM;
    if (stamp && seam && !strcmp(stamp, mine) && !memcmp(seam, sizes, sizeof sizes))
        return 1;
    snprintf(why, sizeof why, "%s comes from another build (%s, seam of %zu/%zu/%zu bytes) than "
             "this program (%s, %zu/%zu/%zu bytes): use the plugin built with it", plugin,
             stamp ? stamp : "no build stamp", seam ? seam[0] : 0, seam ? seam[1] : 0,
             seam ? seam[2] : 0, mine, sizes[0], sizes[1], sizes[2]);
    return 0;
}

static void load(void)
{
    char plugin[PATH_MAX];
    if (!find_plugin(plugin, sizeof plugin) || !libraries_fit(plugin))
        return;
    handle = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *err = dlerror();
        explain_dlerror(plugin, err ? err : "unknown error");
        return;
    }
    const ds_backend *be = same_build(plugin) ? dlsym(handle, "ds_cuda_backend") : NULL;
    __atomic_store_n(&cuda, be, __ATOMIC_RELEASE);   /* ds_backend_plugin_loaded reads it unlocked */
    if (!be) {   /* not ours: closed, nothing of it kept */
        if (!why[0])
            snprintf(why, sizeof why, "%s has no ds_cuda_backend: not a dstrain CUDA plugin", plugin);
        dlclose(handle);
        handle = NULL;
    }
}

#else

static void load(void)
{
    snprintf(why, sizeof why, "this build has no CUDA backend (configure with the CUDA toolkit, "
             "cuBLAS and cuDNN present)");
}

#endif

const ds_backend *ds_backend_plugin_cuda(void)
{
    pthread_once(&once, load);
    return cuda;
}

void *ds_backend_plugin_symbol(const char *name)
{
    return ds_backend_plugin_cuda() ? dlsym(handle, name) : NULL;
}

const char *ds_backend_plugin_error(void)
{
    pthread_once(&once, load);   /* asked before any load: the answer after one */
    return cuda ? "" : why;
}

int ds_backend_plugin_loaded(void)
{
    /* the once has run when handle or why is set; read after it alone */
    return __atomic_load_n(&cuda, __ATOMIC_ACQUIRE) != NULL;
}
