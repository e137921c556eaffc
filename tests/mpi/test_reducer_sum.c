/* test_reducer_sum.c - the gradient reducer over MPI on the CPU backend sums
 * in the gradients' own dtype unless told otherwise: a zeroed config's wire
 * (DS_F32 is the enum's 0) must not sum FP64 gradients in FP32. Random
 * gradients (not integers, which FP32 holds exactly) on every rank; each
 * rank checks the result bit for bit against the sum it forms itself, in
 * rank order, of every rank's inputs (the same additions MPI's sum makes at
 * 1 or 2 ranks, so exact equality holds there), then the same with
 * --reduce-dtype's wire set to FP32, and FP16 and BF16 gradients summed by
 * dstrain's own MPI op (each addition rounded once, to nearest even).
 *
 * usage: mpiexec -np 1|2 test_reducer_sum */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "half.h"
#include "reduce.h"
#include "rng.h"
#include "testutil.h"
#include "world.h"

enum { N = 10007, BUCKET = 1000 };

/* x rounded once to dt (float64: as it is). */
static double round_to(ds_dtype dt, double x)
{
    switch (dt) {
    case DS_F32: return (float)x;
    case DS_F16: return ds_half_f32_from_f16(ds_half_f16_from_f64(x));
    case DS_BF16: return ds_half_f32_from_bf16(ds_half_bf16_from_f64(x));
    default: return x;
    }
}

/* rank r's input element i */
static double input(int r, size_t i, ds_rng *g)
{
    (void)r, (void)i;
    return ds_rng_range(g, -1, 1);
}

/* One reduction of N gradients of dt, summed in wire (wire_set) or dt;
 * returns the number of elements that differ from the expected sum. */
static long check(ds_world *w, const ds_backend *be, ds_ctx *ctx, ds_dtype dt, int wire_set,
                  ds_dtype wire)
{
    double *in = malloc(N * sizeof *in), *want = calloc(N, sizeof *want);
    double *got = malloc(N * sizeof *got);
    void *grads = NULL;
    long bad = -1;
    T_CHECK(in && want && got, "host buffers");
    if (!in || !want || !got)
        goto out;
    for (int r = 0; r < w->size; r++) {   /* every rank's inputs, in rank order */
        ds_rng g;
        ds_rng_seed(&g, 101u + (unsigned)r);
        for (size_t i = 0; i < N; i++) {
            double x = round_to(dt, input(r, i, &g));
            if (r == w->rank)
                in[i] = x;
            const ds_dtype sum_dt = wire_set ? wire : dt;
            /* each addition rounded once to the dtype summed in (exact in
             * double for every dtype here: two 24-bit numbers at most) */
            want[i] = r == 0 ? round_to(sum_dt, x) : round_to(sum_dt, want[i] + round_to(sum_dt, x));
        }
    }
    T_OK(be->alloc(ctx, dt, N, &grads));
    T_OK(t_put_real(be, ctx, dt, N, in, grads));
    const ds_reduce_cfg rc = {.world = w, .kind = DS_REDUCE_MPI, .be = be, .ctx = ctx, .dt = dt,
                              .grads = grads, .n = N, .bucket_elems = BUCKET,
                              .wire = wire, .wire_set = wire_set};
    ds_reduce *red = NULL;
    T_OK(ds_reduce_create(&rc, &red));
    if (!red)
        goto out;
    T_OK(ds_reduce_begin(red));
    T_OK(ds_reduce_ready(red, 0));
    T_OK(ds_reduce_finish(red, NULL));
    T_OK(t_get_real(be, ctx, dt, N, grads, got));
    ds_reduce_destroy(red);
    bad = 0;
    for (size_t i = 0; i < N; i++)
        bad += got[i] != want[i];
out:
    if (grads)
        be->release(ctx, grads);
    free(in);
    free(want);
    free(got);
    return bad;
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    ds_world w;
    T_OK(ds_world_init(&w, 0, 60));
    const ds_backend *be = ds_backend_get("cpu");
    ds_ctx *ctx = NULL;
    T_OK(be->ctx_create(0, NULL, &ctx));
    static const struct {
        ds_dtype dt;
        int wire_set;
        ds_dtype wire;
        const char *what;
    } cases[] = {
        {DS_F64, 0, DS_F32, "float64 gradients, a zeroed wire: summed in float64"},
        {DS_F32, 0, DS_F32, "float32 gradients: summed in float32"},
        {DS_F64, 1, DS_F64, "float64 gradients, wire float64"},
        {DS_F64, 1, DS_F32, "float64 gradients, wire float32 (--reduce-dtype float32)"},
        {DS_F16, 0, DS_F32, "float16 gradients: summed by dstrain's float16 op"},
        {DS_BF16, 0, DS_F32, "bfloat16 gradients: summed by dstrain's bfloat16 op"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const long bad = check(&w, be, ctx, cases[k].dt, cases[k].wire_set, cases[k].wire);
        T_CHECK(bad == 0, "rank %d of %d, %s: %ld of %d sums differ from the exact ones", w.rank,
                w.size, cases[k].what, bad, N);
        if (w.rank == 0)
            printf("%d rank(s), %s: %ld of %d sums differ\n", w.size, cases[k].what, bad, N);
    }
    be->ctx_destroy(ctx);
    int failed = t_failures, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, w.comm);
    ds_world_finalize(&w);
    return any ? 1 : t_finish(__FILE__);
}
