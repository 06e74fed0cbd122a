/* RMSNorm over the last dimension and its backward. For one row x (d):
 *   rstd = 1 / sqrt(mean(x^2) + eps)        (eps inside the sqrt)
 *   y    = x * rstd * scale
 * The mean of squares is accumulated in double so long rows (d in the
 * thousands) do not lose precision. The backward uses the saved rstd:
 *   g      = dy * scale
 *   dx    += rstd * g - x * rstd^3 * dot(g, x) / d
 *   dscale += dy * x * rstd
 * Every row's double sum is one chain of additions in j order, so the
 * kernels match their one-row naive twins smoe_rmsnorm_ref /
 * smoe_rmsnorm_bwd_ref (ref.c) bit for bit.
 */
#include "smoe/kernels.h"

#include <math.h>

/* Rows whose sums run side by side: each row's sum is the same chain of
 * additions in j order as one row alone, four chains interleaved so they
 * do not wait on each other's additions. */
enum { ROWS = 4 };

/* ss[r] = sum_j x_r[j]^2 in double, j in order, for nr <= ROWS rows of d */
static void sum_squares(double *ss, const float *x, int64_t nr, int64_t d)
{
    if (nr == ROWS) {
        const float *x0 = x, *x1 = x + d, *x2 = x + 2 * d, *x3 = x + 3 * d;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int64_t j = 0; j < d; j++) {
            s0 += (double)x0[j] * (double)x0[j];
            s1 += (double)x1[j] * (double)x1[j];
            s2 += (double)x2[j] * (double)x2[j];
            s3 += (double)x3[j] * (double)x3[j];
        }
        ss[0] = s0, ss[1] = s1, ss[2] = s2, ss[3] = s3;
        return;
    }
    for (int64_t r = 0; r < nr; r++) {
        const float *xr = x + r * d;
        double s0 = 0.0;
        for (int64_t j = 0; j < d; j++)
            s0 += (double)xr[j] * (double)xr[j];
        ss[r] = s0;
    }
}

/* dot[r] = sum_j dy_r[j] scale[j] x_r[j] in double, j in order */
static void dots(double *dot, const float *dy, const float *scale, const float *x,
                 int64_t nr, int64_t d)
{
    if (nr == ROWS) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const double g = (double)scale[j];
            s0 += (double)dy[j] * g * (double)x[j];
            s1 += (double)dy[d + j] * g * (double)x[d + j];
            s2 += (double)dy[2 * d + j] * g * (double)x[2 * d + j];
            s3 += (double)dy[3 * d + j] * g * (double)x[3 * d + j];
        }
        dot[0] = s0, dot[1] = s1, dot[2] = s2, dot[3] = s3;
        return;
    }
    for (int64_t r = 0; r < nr; r++) {
        double s0 = 0.0;
        for (int64_t j = 0; j < d; j++)
            s0 += (double)dy[r * d + j] * (double)scale[j] * (double)x[r * d + j];
        dot[r] = s0;
    }
}

/* y (t,d) = x (t,d) * rstd * scale (d); rstd (t) receives 1/rms per row
 * (may be NULL when no backward follows). y may alias x. eps >= 0. */
void smoe_rmsnorm(float *y, float *rstd, const float *x, const float *scale,
                  int64_t t, int64_t d, float eps)
{
    SMOE_ASSERT(t >= 0 && d > 0);
    for (int64_t i0 = 0; i0 < t; i0 += ROWS) {
        const int64_t nr = t - i0 < ROWS ? t - i0 : ROWS;
        double ss[ROWS];
        sum_squares(ss, x + i0 * d, nr, d);
        for (int64_t r = 0; r < nr; r++) {
            const float *xr = x + (i0 + r) * d;
            float *yr = y + (i0 + r) * d;
            double q = 1.0 / sqrt(ss[r] / (double)d + (double)eps);
            float rf = (float)q;
            for (int64_t j = 0; j < d; j++)
                yr[j] = xr[j] * rf * scale[j];
            if (rstd)
                rstd[i0 + r] = rf;
        }
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
    for (int64_t i0 = 0; i0 < t; i0 += ROWS) {
        const int64_t nr = t - i0 < ROWS ? t - i0 : ROWS;
        double dot[ROWS]; /* sum_j dy_j scale_j x_j */
        if (dx)
            dots(dot, dy + i0 * d, scale, x + i0 * d, nr, d);
        for (int64_t r = 0; r < nr; r++) {
            const int64_t i = i0 + r;
            const float *xr = x + i * d;
            const float *dyr = dy + i * d;
            float q = rstd[i];
            if (dscale)
                for (int64_t j = 0; j < d; j++)
                    dscale[j] += dyr[j] * xr[j] * q;
            if (!dx)
                continue;
            float c = (float)((double)q * (double)q * (double)q * dot[r] / (double)d);
            float *dxr = dx + i * d;
            for (int64_t j = 0; j < d; j++)
                dxr[j] += q * dyr[j] * scale[j] - c * xr[j];
        }
    }
}
