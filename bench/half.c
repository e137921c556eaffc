/* half.c - how fast the host converts between float and F16 / BF16
 * (src/half.c's array functions: F16C and AVX2 where the CPU has them, else
 * the scalar path): the step's feature upload in 16-bit GPU runs and every
 * op of the CPU's emulated 16-bit tables go through them.
 *
 * usage: bench_half [N]   N values (default 8758400: a ds2 batch of 32
 *        utterances x 1700 frames x 161 features); prints the best of 7
 *        runs per conversion, ms and ns per value. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "half.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? atol(argv[1]) : 32L * 1700 * 161;
    if (n < 1) {
        fprintf(stderr, "usage: bench_half [N]  (N values, at least 1)\n");
        return 2;
    }
    float *f = malloc((size_t)n * sizeof *f), *g = malloc((size_t)n * sizeof *g);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!f || !g || !h) {
        fprintf(stderr, "bench_half: no memory for %ld values\n", n);
        return 1;
    }
    for (long i = 0; i < n; i++)   /* log-spectrogram-like values */
        f[i] = (float)((uint32_t)(i * 2654435761u) % 100000) / 1000.0f - 50.0f;
    static const char *const names[] = {"f16 from f32", "f32 from f16", "bf16 from f32", "f32 from bf16"};
    double sink = 0;
    for (int k = 0; k < 4; k++) {
        double best = 1e30;
        for (int r = 0; r < 7; r++) {
            const double t0 = now_s();
            switch (k) {
            case 0: ds_half_f16_from_f32_n(h, f, (size_t)n); break;
            case 1: ds_half_f32_from_f16_n(g, h, (size_t)n); break;
            case 2: ds_half_bf16_from_f32_n(h, f, (size_t)n); break;
            default: ds_half_f32_from_bf16_n(g, h, (size_t)n); break;
            }
            const double t = now_s() - t0;
            best = t < best ? t : best;
            sink += g[r] + h[r];
        }
        printf("%-14s %8.2f ms for %ld values, %.2f ns per value\n", names[k], best * 1e3, n, best * 1e9 / n);
    }
    free(f), free(g), free(h);
    return sink == -1;   /* keeps the conversions from being optimised away */
}
