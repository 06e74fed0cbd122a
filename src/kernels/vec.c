/* Small vector helpers used to combine gradients and residual streams:
 * y += x, y += a x, y *= a on contiguous float arrays, and the MoE
 * combine's double dot product with a scaled copy. Plain loops the
 * compiler vectorises; not worth a BLAS call for the sizes involved.
 */
#include "smoe/kernels.h"

/* y (n) += x (n). */
void smoe_vec_add(float *y, const float *x, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

/* y (n) += a * x (n). */
void smoe_vec_axpy(float *y, float a, const float *x, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* y (n) *= a. */
void smoe_vec_scale(float *y, float a, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] *= a;
}

/* r (n) = a * d, and returns sum_j d_j y_j in double: four chains (j mod
 * 4, each in order), added as (c0 + c1) + (c2 + c3), so the adds do not
 * wait on each other. r must not alias d or y. Naive twin:
 * smoe_vec_dot_scale_ref. */
double smoe_vec_dot_scale(float *r, float a, const float *d, const float *y, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    double c[4] = { 0.0, 0.0, 0.0, 0.0 };
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int q = 0; q < 4; q++)
            c[q] += (double)d[j + q] * (double)y[j + q];
    for (; j < n; j++)
        c[j % 4] += (double)d[j] * (double)y[j];
    for (int64_t i = 0; i < n; i++)
        r[i] = a * d[i];
    return (c[0] + c[1]) + (c[2] + c[3]);
}

/* The naive twin: one chain in j order. */
double smoe_vec_dot_scale_ref(float *r, float a, const float *d, const float *y, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    double dot = 0.0;
    for (int64_t j = 0; j < n; j++) {
        dot += (double)d[j] * (double)y[j];
        r[j] = a * d[j];
    }
    return dot;
}

double smoe_vec_sumsq(const float *x, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    double a = 0.0;
    for (int64_t j = 0; j < n; j++)
        a += (double)x[j] * (double)x[j];
    return a;
}
