/* bench_stats.c - median, mean and the 95% interval of timed steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Student's t at 97.5% for df degrees of freedom (table to 30, then the
 * normal's 1.96 approached as 1.96 + 2.4/df). */
static double t975(int df)
{
    static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110,
                                2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
                                2.052, 2.048, 2.045, 2.042};
    return df <= 30 ? t[df] : 1.96 + 2.4 / df;
}

ds_bench_stats ds_bench_stats_of(const double *x, int n)
{
    ds_bench_stats s = {0};
    double *v = malloc((size_t)n * sizeof *v);
    if (!v || n < 1) {
        free(v);
        return s;
    }
    memcpy(v, x, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, by_value);
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    const double half = n > 1 ? t975(n - 1) * sqrt(ss / (n - 1) / n) : 0;
    s.lo = s.mean - half;
    s.hi = s.mean + half;
    free(v);
    return s;
}
