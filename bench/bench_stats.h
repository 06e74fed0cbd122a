/* The benchmarks' order statistics: values sorted ascending, their median
 * and quartiles (the median of an even count: the mean of the middle two). */
#ifndef SMOE_BENCH_STATS_H
#define SMOE_BENCH_STATS_H

#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and quartiles of v (n >= 1), sorted in place: q[0] p25, q[1]
 * median, q[2] p75. */
static inline void bench_quartiles(double *v, int n, double q[3])
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    q[0] = v[n / 4];
    q[1] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    q[2] = v[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
}

static inline double bench_median(double *v, int n)
{
    double q[3];
    bench_quartiles(v, n, q);
    return q[1];
}

#endif
