/* Naive reference twins of the BLAS kernels (suffix _ref). They are the
 * oracle for smoe_gemm / smoe_matmul / smoe_matmul_bwd in the tests: plain
 * triple loops with double accumulators, same argument conventions and the
 * same BLAS semantics (beta == 0 means C is not read). Slow on purpose;
 * never call them on a hot path. Also the RMSNorm twins, one row at a
 * time, which norm.c's blocked kernels match bit for bit.
 */
#include "smoe/kernels.h"

#include <math.h>

/* Element (i,j) of op(X) for X stored row-major with row stride ld. */
static inline double op_at(const float *x, int64_t ld, int trans, int64_t i,
                           int64_t j)
{
    return (double)(trans ? x[j * ld + i] : x[i * ld + j]);
}

/* C (m,n) = alpha op(A) (m,k) op(B) (k,n) + beta C; see smoe_gemm. */
void smoe_gemm_ref(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc)
{
    SMOE_ASSERT(m >= 0 && n >= 0 && k >= 0);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++)
                acc += op_at(a, lda, ta, i, p) * op_at(b, ldb, tb, p, j);
            double r = (double)alpha * acc;
            if (beta != 0.0f)
                r += (double)beta * (double)c[i * ldc + j];
            c[i * ldc + j] = (float)r;
        }
    }
}

/* y (t,n) = x (t,k) @ w (k,n) + beta * y. */
void smoe_matmul_ref(float *y, const float *x, const float *w, int64_t t,
                     int64_t k, int64_t n, float beta)
{
    smoe_gemm_ref(0, 0, t, n, k, 1.0f, x, k, w, n, beta, y, n);
}

/* dx (t,k) += dy (t,n) @ w^T (if dx), dw (k,n) += x^T @ dy (if dw). */
void smoe_matmul_bwd_ref(float *dx, float *dw, const float *dy,
                         const float *x, const float *w, int64_t t,
                         int64_t k, int64_t n)
{
    if (dx) {
        for (int64_t i = 0; i < t; i++) {
            for (int64_t p = 0; p < k; p++) {
                double acc = 0.0;
                for (int64_t j = 0; j < n; j++)
                    acc += (double)dy[i * n + j] * (double)w[p * n + j];
                dx[i * k + p] = (float)((double)dx[i * k + p] + acc);
            }
        }
    }
    if (dw) {
        for (int64_t p = 0; p < k; p++) {
            for (int64_t j = 0; j < n; j++) {
                double acc = 0.0;
                for (int64_t i = 0; i < t; i++)
                    acc += (double)x[i * k + p] * (double)dy[i * n + j];
                dw[p * n + j] = (float)((double)dw[p * n + j] + acc);
            }
        }
    }
}

/* Naive twin of smoe_rmsnorm (norm.c), one row at a time: the row's double
 * sum of squares in j order, then y = x * rstd * scale. The kernel matches
 * it bit for bit. */
void smoe_rmsnorm_ref(float *y, float *rstd, const float *x, const float *scale,
                      int64_t t, int64_t d, float eps)
{
    SMOE_ASSERT(t >= 0 && d > 0);
    for (int64_t i = 0; i < t; i++) {
        const float *xr = x + i * d;
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++)
            ss += (double)xr[j] * (double)xr[j];
        float rf = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
        for (int64_t j = 0; j < d; j++)
            y[i * d + j] = xr[j] * rf * scale[j];
        if (rstd)
            rstd[i] = rf;
    }
}

/* Naive twin of smoe_rmsnorm_bwd, one row at a time (same accumulation
 * conventions); the kernel matches it bit for bit. */
void smoe_rmsnorm_bwd_ref(float *dx, float *dscale, const float *dy, const float *x,
                          const float *scale, const float *rstd, int64_t t, int64_t d)
{
    SMOE_ASSERT(t >= 0 && d > 0);
    for (int64_t i = 0; i < t; i++) {
        const float *xr = x + i * d, *dyr = dy + i * d;
        const float q = rstd[i];
        if (dscale)
            for (int64_t j = 0; j < d; j++)
                dscale[j] += dyr[j] * xr[j] * q;
        if (!dx)
            continue;
        double dot = 0.0;
        for (int64_t j = 0; j < d; j++)
            dot += (double)dyr[j] * (double)scale[j] * (double)xr[j];
        float c = (float)((double)q * (double)q * (double)q * dot / (double)d);
        for (int64_t j = 0; j < d; j++)
            dx[i * d + j] += q * dyr[j] * scale[j] - c * xr[j];
    }
}
