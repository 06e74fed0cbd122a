/* RMSNorm over the last dimension and its backward. For one row x (d):
 *   rstd = 1 / sqrt(mean(x^2) + eps)        (eps inside the sqrt)
 *   y    = x * rstd * scale
 * The mean of squares is accumulated in double so long rows (d in the
 * thousands) do not lose precision. The backward uses the saved rstd:
 *   g      = dy * scale
 *   dx    += rstd * g - x * rstd^3 * dot(g, x) / d
 *   dscale += dy * x * rstd
 */
#include "smoe/kernels.h"

#include <math.h>

/* y (t,d) = x (t,d) * rstd * scale (d); rstd (t) receives 1/rms per row
 * (may be NULL when no backward follows). y may alias x. eps >= 0. */
void smoe_rmsnorm(float *y, float *rstd, const float *x, const float *scale,
                  int64_t t, int64_t d, float eps)
{
    SMOE_ASSERT(t >= 0 && d > 0);
    for (int64_t i = 0; i < t; i++) {
        const float *xr = x + i * d;
        float *yr = y + i * d;
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++)
            ss += (double)xr[j] * (double)xr[j];
        double r = 1.0 / sqrt(ss / (double)d + (double)eps);
        float rf = (float)r;
        for (int64_t j = 0; j < d; j++)
            yr[j] = xr[j] * rf * scale[j];
        if (rstd)
            rstd[i] = rf;
    }
}

/* Accumulates: dx (t,d) += dL/dx and dscale (d) += dL/dscale for the upstream
 * gradient dy (t,d), the forward input x (t,d), scale (d) and the saved
 * rstd (t). Either output may be NULL to skip it. dx must not alias dy/x. */
void smoe_rmsnorm_bwd(float *dx, float *dscale, const float *dy,
                      const float *x, const float *scale, const float *rstd,
                      int64_t t, int64_t d)
{
    SMOE_ASSERT(t >= 0 && d > 0);
    for (int64_t i = 0; i < t; i++) {
        const float *xr = x + i * d;
        const float *dyr = dy + i * d;
        float r = rstd[i];
        if (dscale)
            for (int64_t j = 0; j < d; j++)
                dscale[j] += dyr[j] * xr[j] * r;
        if (!dx)
            continue;
        double dot = 0.0; /* sum_j dy_j scale_j x_j */
        for (int64_t j = 0; j < d; j++)
            dot += (double)dyr[j] * (double)scale[j] * (double)xr[j];
        float c = (float)((double)r * (double)r * (double)r * dot / (double)d);
        float *dxr = dx + i * d;
        for (int64_t j = 0; j < d; j++)
            dxr[j] += r * dyr[j] * scale[j] - c * xr[j];
    }
}
