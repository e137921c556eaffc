/* blas_limits.c - OpenBLAS under an address-space limit (ulimit -v): its
 * buffers bounded so that a failed allocation is an error, not a spin; see
 * blas_limits.h. */
#include "blas_limits.h"

#include "address_space.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

/* OpenBLAS 0.3.x takes a scratch buffer of BUFFER_SIZE (32 << 22 on x86-64
 * and arm64) plus a page for each thread, at its first call on the main
 * thread and when each of its worker threads starts (in its constructor,
 * before main). A failed mmap/malloc there is retried for ever: under
 * `ulimit -v` a worker spun in blas_memory_alloc and the process never
 * ended (the exit joins the worker). */
#define BLAS_BUFFER ((128UL << 20) + 4096)

/* Under an address-space limit, OpenBLAS loads with one thread (no
 * workers, so no buffer taken before main): set here and the program
 * started again, as libgomp's setting is; the workers of this first start
 * (if any spin) end with the exec. The count it would have had (the
 * user's OPENBLAS_NUM_THREADS, else one a core) is kept in
 * DSTRAIN_BLAS_THREADS, for ds_blas_limits_fit to start as many as fit. */
int ds_blas_limits_one_thread(void)
{
    if (!ds_address_space_limit() || getenv("DSTRAIN_BLAS_THREADS"))
        return 0;
    const char *user = getenv("OPENBLAS_NUM_THREADS");
    char n[24];
    snprintf(n, sizeof n, "%d", user && atoi(user) > 0 ? atoi(user) : openblas_get_num_threads());
    return setenv("DSTRAIN_BLAS_THREADS", n, 1) == 0 && setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
}

/* Under an address-space limit: OpenBLAS's buffer must fit, or its first
 * call spins for ever. Refused here when it does not fit (naming the sizes);
 * else taken now by a tiny GEMM, before the run's own allocations can
 * leave no room for it (theirs fail with an error naming their size). */
int ds_blas_limits_fit(void)
{
    const unsigned long long lim = ds_address_space_limit(), used = ds_address_space_mapped();
    if (!lim || !used)
        return 1;
    const unsigned long long need = BLAS_BUFFER + (64ULL << 20);   /* and room to work */
    if (used + need > lim) {
        fprintf(stderr, "dstrain: the address-space limit (ulimit -v) is %llu MiB and %llu MiB is "
                        "mapped at start, so OpenBLAS's %lu MiB scratch buffer does not fit (it "
                        "would wait for it for ever): raise the limit to at least %llu MiB "
                        "(ulimit -v %llu)\n",
                lim >> 20, used >> 20, BLAS_BUFFER >> 20, (used + need + (1ULL << 20) - 1) >> 20,
                (used + need) / 1024 + 1);
        return 0;
    }
    /* As many threads as were wanted and fit in half the room left (the
     * other half is the run's): each thread past the first costs a BLAS
     * worker and a CPU op's thread (cpu/panel.inc), each with a buffer, a
     * stack and a malloc arena, taken when they start. */
    const char *want = getenv("DSTRAIN_BLAS_THREADS");
    const long fit = 1 + (long)((lim - used - need) / 2 /
                                (2 * (BLAS_BUFFER + (8UL << 20) + (64UL << 20))));
    const long n = want && atol(want) > 1 ? (atol(want) < fit ? atol(want) : fit) : 1;
    if (n > 1)
        openblas_set_num_threads((int)n);
    float a[4] = {1, 2, 3, 4}, c[4];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);
    return 1;
}
