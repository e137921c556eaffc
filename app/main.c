/* main.c - the dstrain command line: dispatches subcommands. */
#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <string.h>

#include "cli.h"

/* OpenMP threads spin a while before they sleep when they wait at a
 * barrier. libgomp's default spin is long: when other processes share the
 * cores, a spinning thread takes the core of the thread it waits for (the
 * small preset's step took 37 s instead of 0.3 s on 2 busy cores). A short
 * spin keeps the quiet machine's speed (318 ms, against 287 ms spinning
 * without end and 594 ms sleeping at once) and stays usable when the cores
 * are shared (0.8 s). libgomp reads the setting once, when it loads, so it
 * is set here and the program started again; a setting the user made is
 * left alone. */
static int spin_briefly(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return 0;
    return setenv("GOMP_SPINCOUNT", "1000", 1) == 0;
}

/* OpenBLAS 0.3.x takes a scratch buffer of BUFFER_SIZE (32 << 22 on x86-64
 * and arm64) plus a page for each thread, at its first call on the main
 * thread and when each of its worker threads starts (in its constructor,
 * before main). A failed mmap/malloc there is retried for ever: under
 * `ulimit -v` a worker spun in blas_memory_alloc and the process never
 * ended (the exit joins the worker). */
#define DS_BLAS_BUFFER ((128UL << 20) + 4096)

/* The address-space limit (ulimit -v), or 0 when there is none. */
static unsigned long long as_limit(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return 0;
    return (unsigned long long)r.rlim_cur;
}

/* Under an address-space limit, OpenBLAS loads with one thread (no
 * workers, so no buffer taken before main): set here and the program
 * started again, as libgomp's setting is; the workers of this first start
 * (if any spin) end with the exec. The count it would have had (the
 * user's OPENBLAS_NUM_THREADS, else one a core) is kept in
 * DSTRAIN_BLAS_THREADS, for blas_buffer_fits to start as many as fit. */
static int blas_threads_bounded(void)
{
    if (!as_limit() || getenv("DSTRAIN_BLAS_THREADS"))
        return 0;
    const char *user = getenv("OPENBLAS_NUM_THREADS");
    char n[24];
    snprintf(n, sizeof n, "%d", user && atoi(user) > 0 ? atoi(user) : openblas_get_num_threads());
    return setenv("DSTRAIN_BLAS_THREADS", n, 1) == 0 && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
}

/* The address space this process maps now, from /proc/self/status; 0 if unknown. */
static unsigned long long mapped_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024;
}

/* Under an address-space limit: OpenBLAS's buffer must fit, or its first
 * call spins for ever. Refused here when it does not fit (naming the sizes);
 * else taken now by a tiny GEMM, before the run's own allocations can
 * leave no room for it (theirs fail with an error naming their size). */
static int blas_buffer_fits(void)
{
    const unsigned long long lim = as_limit(), used = mapped_now();
    if (!lim || !used)
        return 1;
    const unsigned long long need = DS_BLAS_BUFFER + (64ULL << 20);   /* and room to work */
    if (used + need > lim) {
        fprintf(stderr, "dstrain: the address-space limit (ulimit -v) is %llu MiB and %llu MiB is "
                        "mapped at start, so OpenBLAS's %lu MiB scratch buffer does not fit (it "
                        "would wait for it for ever): raise the limit to at least %llu MiB "
                        "(ulimit -v %llu)\n",
                lim >> 20, used >> 20, DS_BLAS_BUFFER >> 20, (used + need + (1ULL << 20) - 1) >> 20,
                (used + need) / 1024 + 1);
        return 0;
    }
    /* As many threads as were wanted and fit in half the room left (the
     * other half is the run's): each thread past the first costs a BLAS
     * worker and a CPU op's thread (cpu/panel.inc), each with a buffer, a
     * stack and a malloc arena, taken when they start. */
    const char *want = getenv("DSTRAIN_BLAS_THREADS");
    const long fit = 1 + (long)((lim - used - need) / 2 /
                                (2 * (DS_BLAS_BUFFER + (8UL << 20) + (64UL << 20))));
    const long n = want && atol(want) > 1 ? (atol(want) < fit ? atol(want) : fit) : 1;
    if (n > 1)
        openblas_set_num_threads((int)n);
    float a[4] = {1, 2, 3, 4}, c[4];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);
    return 1;
}

int main(int argc, char **argv)
{
    /* a file-size limit (ulimit -f) is a write error (EFBIG) that every
     * writer reports, naming its file and removing its temporary, rather
     * than a SIGXFSZ that kills the process and leaves the temporary */
    signal(SIGXFSZ, SIG_IGN);
    const int again = spin_briefly() | blas_threads_bounded();
    if (again)
        execv("/proc/self/exe", argv);   /* returns only on failure: go on as it is */
    if (!blas_buffer_fits())
        return 1;
    if (argc < 2) {
        ds_cli_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        ds_cli_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version"))
        cmd = "version";
    for (int i = 0; ds_cli_commands[i]; i++)   /* the commands and their tables: cli_common.c */
        if (!strcmp(cmd, ds_cli_commands[i]->name))
            return ds_cli_commands[i]->run(argc - 1, argv + 1);
    return ds_cli_unknown_command(cmd);   /* the nearest suggested */
}
