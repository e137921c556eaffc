/* blas_limits.h - OpenBLAS under an address-space limit (ulimit -v).
 * OpenBLAS retries a failed allocation of its per-thread scratch buffer for
 * ever; these keep it to the threads whose buffers fit, or refuse the run
 * naming the sizes. Called by main only. */
#ifndef DS_BLAS_LIMITS_H
#define DS_BLAS_LIMITS_H

/* Under a finite limit, and once per process: sets OPENBLAS_NUM_THREADS=1
 * (keeping the wanted count in DSTRAIN_BLAS_THREADS) and returns 1: the
 * program must then start again (exec) so that OpenBLAS loads with no
 * workers. 0: nothing to do. */
int ds_blas_limits_one_thread(void);

/* Under a finite limit: 0 (after printing why, with the sizes) when
 * OpenBLAS's buffer cannot fit beside what is mapped; else takes it now and
 * gives OpenBLAS as many threads as were wanted and fit. 1: go on. */
int ds_blas_limits_fit(void);

#endif
