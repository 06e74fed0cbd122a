/* Small vector helpers used to combine gradients and residual streams:
 * y += x, y += a x, y *= a on contiguous float arrays. Plain loops the
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
