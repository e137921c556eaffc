/* test_convert.c - ds_backend.convert (what --reduce-dtype sends gradients
 * through) against the host's ds_convert, bit for bit, for every pair of
 * float32, float64, float16 and bfloat16: random values over the whole range
 * of each source type plus the hard ones (signed zeros, infinities, NaN,
 * subnormals of each 16-bit type, the largest finite values, and ties
 * halfway between two 16-bit neighbours, which round to the even one).
 * usage: test_convert [BACKEND]   (ctest runs it as test_convert_cuda, which
 * skips without a GPU; on the cpu the backend's convert is ds_convert itself) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "convert.h"
#include "rng.h"
#include "testutil.h"

enum { N = 4096 };

static const ds_dtype types[] = {DS_F32, DS_F64, DS_F16, DS_BF16};

/* x [N] doubles: the hard cases first, then random magnitudes from 2^-140
 * to 2^70 with random signs (every source type rounds them on the way in). */
static void fill(double *x, ds_rng *rng)
{
    static const double hard[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0,
                                  0x1p-24, 0x1p-25, 0x1.8p-24, 0x1p-14, 0x1.ffcp-15, /* f16 tiny */
                                  65504.0, 65520.0, 65519.99,                       /* f16 top */
                                  1.0 + 0x1p-11, 1.0 + 0x1p-8, 1.0 + 3 * 0x1p-11,   /* ties */
                                  1.0 + 3 * 0x1p-8, 0x1p-133, 0x1p-126, 3.3895e38,
                                  1e300, -1e-300, 0x1.0000001p0, 2049.0, 2051.0};
    const size_t nh = sizeof hard / sizeof hard[0];
    for (size_t i = 0; i < N; i++)
        x[i] = i < nh ? hard[i]
                      : (ds_rng_int(rng, 0, 1) ? -1 : 1) * ldexp(ds_rng_range(rng, 1, 2),
                                                                 ds_rng_int(rng, -140, 70));
}

int main(int argc, char **argv)
{
    const ds_backend *be = t_backend(argc > 1 ? argv[1] : NULL);
    ds_ctx *ctx;
    T_OK(be->ctx_create(0, NULL, &ctx));
    double *x = malloc(N * sizeof *x);
    unsigned char *src = malloc(N * 8), *want = malloc(N * 8), *got = malloc(N * 8);
    ds_rng rng;
    ds_rng_seed(&rng, 77);
    fill(x, &rng);
    const int nt = sizeof types / sizeof types[0];
    for (int a = 0; a < nt; a++)
        for (int b = 0; b < nt; b++) {
            const ds_dtype st = types[a], dt = types[b];
            void *dsrc = NULL, *ddst = NULL;
            T_OK(ds_convert(st, src, DS_F64, x, N));     /* the source, in its own type */
            T_OK(ds_convert(dt, want, st, src, N));      /* the host's answer */
            T_OK(be->alloc(ctx, st, N, &dsrc));
            T_OK(be->alloc(ctx, dt, N, &ddst));
            T_OK(be->from_host(ctx, st, N, src, dsrc));
            T_OK(be->convert(ctx, dt, ddst, st, dsrc, N));
            T_OK(be->to_host(ctx, dt, N, ddst, got));
            const size_t es = ds_dtype_size(dt);
            int wrong = 0, first = -1;
            for (size_t i = 0; i < N; i++) {
                double g, w;
                ds_convert(DS_F64, &g, dt, got + i * es, 1);
                ds_convert(DS_F64, &w, dt, want + i * es, 1);
                /* the same bits, or both NaN (a NaN's payload is not ours to fix) */
                if (memcmp(got + i * es, want + i * es, es) != 0 && !(isnan(g) && isnan(w))) {
                    wrong++;
                    first = first < 0 ? (int)i : first;
                }
            }
            T_CHECK(wrong == 0, "%s %s -> %s: %d of %d differ from the host's (first at %d: x = %.17g)",
                    be->name, ds_dtype_name(st), ds_dtype_name(dt), wrong, N, first,
                    first >= 0 ? x[first] : 0);
            be->release(ctx, dsrc);
            be->release(ctx, ddst);
        }
    free(x);
    free(src);
    free(want);
    free(got);
    be->ctx_destroy(ctx);
    return t_finish("test_convert");
}
