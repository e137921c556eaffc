/* testutil.h - assertions, finite-difference gradient checks and RNG fills
 * shared by the C unit tests. A failed check prints where and why; the test
 * program exits non-zero if any check failed. */
#ifndef DS_TESTUTIL_H
#define DS_TESTUTIL_H

#include <stddef.h>
#include <stdio.h>

#include "backend.h"
#include "rng.h"

extern int t_failures, t_passes;

#define T_CHECK(cond, ...)                                                          \
    do {                                                                            \
        if (cond) {                                                                 \
            t_passes++;                                                             \
        } else {                                                                    \
            t_failures++;                                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                    \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* Fails the test and stops it when a ds_status call fails. */
#define T_OK(expr)                                                                  \
    do {                                                                            \
        ds_status t_s_ = (expr);                                                    \
        if (t_s_ != DS_OK) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, \
                    ds_status_name(t_s_), ds_status_last_error());                         \
            t_failures++;                                                           \
            return t_finish(__FILE__);                                              \
        }                                                                           \
    } while (0)

/* Prints "N passed, N failed" and returns the exit code. */
int t_finish(const char *name);

/* A set-up call that must succeed: on failure prints what, the status and
 * the library's message, and exits 1. */
void t_must(ds_status s, const char *what);

/* n zeroed doubles (at least one), or exit through t_must. */
double *t_zeros(size_t n);

/* Exit code of a test that did not run (ctest's SKIP_RETURN_CODE). */
#define T_SKIP_CODE 77

/* The backend a test runs on: the name given (a command-line argument, or
 * NULL), else $DSTRAIN_TEST_BACKEND when set and non-empty, else "cpu".
 * A backend that is not built in prints "skipped: backend X not built" and
 * exits with T_SKIP_CODE; so does one without a device here. */
const ds_backend *t_backend(const char *name);

/* ||a - b||_2 / max(||a||_2, ||b||_2), 0 when both are zero. */
double t_rel_err(const double *a, const double *b, size_t n);
double t_max_abs_diff(const double *a, const double *b, size_t n);

void t_fill_uniform(ds_rng *r, double *x, size_t n, double lo, double hi);

/* Central finite differences of a scalar function of x [n], written into
 * g [n]. loss(arg) is evaluated with x perturbed in place (restored after). */
void t_fd_grad(double (*loss)(void *arg), void *arg, double *x, size_t n, double h, double *g);

/* Host doubles to and from backend buffers of dtype dt (F32, F64 or I32),
 * converted with ds_convert through a host staging buffer. */

/* The backend buffer dst [count] of dt = src [count]. */
ds_status t_put_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const double *src, void *dst);

/* A new backend buffer *out of dt, max(count, 1) elements, holding src [count].
 * *out is set once allocated, also when the copy then fails. */
ds_status t_new_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const double *src, void **out);

/* A new DS_I32 backend buffer *out, max(count, 1) elements, holding src [count]. */
ds_status t_new_int(const ds_backend *be, ds_ctx *ctx, size_t count, const int *src, void **out);

/* dst [count] = the backend buffer src [count] of dt, as doubles. */
ds_status t_get_real(const ds_backend *be, ds_ctx *ctx, ds_dtype dt, size_t count,
                     const void *src, double *dst);

/* A new backend buffer [1] of the scalar role (DS_F64) holding value, for
 * the ops that read a per-batch scalar in backend memory (a BatchNorm count,
 * the loss norm, dropout's step); the caller releases it. Exits through t_must on failure. */
void *t_scalar(const ds_backend *be, ds_ctx *ctx, double value);

/* Releases the backend buffers bufs [n], skipping NULL ones. */
void t_release_all(const ds_backend *be, ds_ctx *ctx, void *const *bufs, size_t n);

#endif
