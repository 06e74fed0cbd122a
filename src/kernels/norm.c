/* RMSNorm over the last dimension and its backward. For one row x (d):
 *   rstd = 1 / sqrt(mean(x^2) + eps)        (eps inside the sqrt)
 *   y    = x * rstd * scale
 * The mean of squares is accumulated in double so long rows (d in the
 * thousands) do not lose precision. The backward uses the saved rstd:
 *   g      = dy * scale
 *   dx    += rstd * g - x * rstd^3 * dot(g, x) / d
 *   dscale += dy * x * rstd
 *
 * Every row's double sum is one chain of additions in j order, each term
 * rounded as the scalar expression rounds it (the naive twins
 * smoe_rmsnorm_ref / smoe_rmsnorm_bwd_ref in ref.c, which the kernels match
 * bit for bit). The chains of several rows run side by side: four in
 * scalar registers, or, on x86-64 CPUs with AVX2, sixteen as four vectors
 * of four rows' doubles (lane r = row r, the floats of four rows at four j
 * transposed into lanes), with the multiplications and additions apart
 * (never fused), so each lane does the scalar chain's operations. The
 * elementwise loops are the same code compiled for AVX2 there.
 */
#include "smoe/kernels.h"

#include <math.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SMOE_NORM_AVX2 1
#include <immintrin.h>
#include <stdatomic.h>
#else
#define SMOE_NORM_AVX2 0
#endif

/* Rows whose sums run side by side: ROWS in scalar registers, WIDE_ROWS
 * (four vectors of four) with AVX2. */
enum { ROWS = 4, WIDE_ROWS = 16 };

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

#if SMOE_NORM_AVX2
#define TARGET __attribute__((target("avx2")))

/* c[q] (lane r) = (double)x[r * d + j + q] for the four rows at x, q < 4 */
TARGET static inline void cols4(__m256d c[4], const float *x, int64_t d, int64_t j)
{
    __m128 a0 = _mm_loadu_ps(x + j), a1 = _mm_loadu_ps(x + d + j);
    __m128 a2 = _mm_loadu_ps(x + 2 * d + j), a3 = _mm_loadu_ps(x + 3 * d + j);
    _MM_TRANSPOSE4_PS(a0, a1, a2, a3);
    c[0] = _mm256_cvtps_pd(a0), c[1] = _mm256_cvtps_pd(a1);
    c[2] = _mm256_cvtps_pd(a2), c[3] = _mm256_cvtps_pd(a3);
}

/* lane r = (double)x[r * d + j] for the four rows at x */
TARGET static inline __m256d col1(const float *x, int64_t d, int64_t j)
{
    return _mm256_cvtps_pd(_mm_set_ps(x[3 * d + j], x[2 * d + j], x[d + j], x[j]));
}

/* sum_squares of WIDE_ROWS rows: the same chains, lane by lane */
TARGET static void sum_squares16(double *ss, const float *x, int64_t d)
{
    __m256d acc[4];
    for (int g = 0; g < 4; g++)
        acc[g] = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 4 <= d; j += 4)
        for (int g = 0; g < 4; g++) {
            __m256d c[4];
            cols4(c, x + g * ROWS * d, d, j);
            for (int q = 0; q < 4; q++)
                acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(c[q], c[q]));
        }
    for (; j < d; j++)
        for (int g = 0; g < 4; g++) {
            __m256d c = col1(x + g * ROWS * d, d, j);
            acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(c, c));
        }
    for (int g = 0; g < 4; g++)
        _mm256_storeu_pd(ss + g * ROWS, acc[g]);
}

/* dots of WIDE_ROWS rows: (dy * scale) * x added in j order, lane by lane */
TARGET static void dots16(double *dot, const float *dy, const float *scale, const float *x,
                          int64_t d)
{
    __m256d acc[4];
    for (int g = 0; g < 4; g++)
        acc[g] = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j + 4 <= d; j += 4)
        for (int g = 0; g < 4; g++) {
            __m256d cy[4], cx[4];
            cols4(cy, dy + g * ROWS * d, d, j);
            cols4(cx, x + g * ROWS * d, d, j);
            for (int q = 0; q < 4; q++) {
                __m256d t = _mm256_mul_pd(cy[q], _mm256_set1_pd((double)scale[j + q]));
                acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(t, cx[q]));
            }
        }
    for (; j < d; j++)
        for (int g = 0; g < 4; g++) {
            __m256d t = _mm256_mul_pd(col1(dy + g * ROWS * d, d, j),
                                      _mm256_set1_pd((double)scale[j]));
            acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(t, col1(x + g * ROWS * d, d, j)));
        }
    for (int g = 0; g < 4; g++)
        _mm256_storeu_pd(dot + g * ROWS, acc[g]);
}

static int have_avx2(void)
{
    static _Atomic int cached = -1; /* every thread would store the same */
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        __builtin_cpu_init();
        c = __builtin_cpu_supports("avx2");
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c;
}
#endif

/* The rows the next block takes: WIDE_ROWS with AVX2 (wide) when that many
 * are left, else up to ROWS. */
static inline int64_t block_rows(int64_t left, int wide)
{
    if (wide && left >= WIDE_ROWS)
        return WIDE_ROWS;
    return left < ROWS ? left : ROWS;
}

static inline __attribute__((always_inline)) void
row_sums(double *ss, const float *x, int64_t nr, int64_t d)
{
#if SMOE_NORM_AVX2
    if (nr == WIDE_ROWS) {
        sum_squares16(ss, x, d);
        return;
    }
#endif
    sum_squares(ss, x, nr, d);
}

static inline __attribute__((always_inline)) void
row_dots(double *dot, const float *dy, const float *scale, const float *x, int64_t nr,
         int64_t d)
{
#if SMOE_NORM_AVX2
    if (nr == WIDE_ROWS) {
        dots16(dot, dy, scale, x, d);
        return;
    }
#endif
    dots(dot, dy, scale, x, nr, d);
}

/* The forward over all rows (see smoe_rmsnorm); wide: AVX2 blocks. */
static inline __attribute__((always_inline)) void
norm_fwd(float *y, float *rstd, const float *x, const float *scale, int64_t t, int64_t d,
         float eps, int wide)
{
    for (int64_t i0 = 0, nr; i0 < t; i0 += nr) {
        nr = block_rows(t - i0, wide);
        double ss[WIDE_ROWS];
        row_sums(ss, x + i0 * d, nr, d);
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

/* The backward over all rows (see smoe_rmsnorm_bwd); wide: AVX2 blocks. */
static inline __attribute__((always_inline)) void
norm_bwd(float *dx, float *dscale, const float *dy, const float *x, const float *scale,
         const float *rstd, int64_t t, int64_t d, int wide)
{
    for (int64_t i0 = 0, nr; i0 < t; i0 += nr) {
        nr = block_rows(t - i0, wide);
        double dot[WIDE_ROWS]; /* sum_j dy_j scale_j x_j */
        if (dx)
            row_dots(dot, dy + i0 * d, scale, x + i0 * d, nr, d);
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

#if SMOE_NORM_AVX2
TARGET static void norm_fwd_avx2(float *y, float *rstd, const float *x, const float *scale,
                                 int64_t t, int64_t d, float eps)
{
    norm_fwd(y, rstd, x, scale, t, d, eps, 1);
}

TARGET static void norm_bwd_avx2(float *dx, float *dscale, const float *dy, const float *x,
                                 const float *scale, const float *rstd, int64_t t, int64_t d)
{
    norm_bwd(dx, dscale, dy, x, scale, rstd, t, d, 1);
}
#endif

/* y (t,d) = x (t,d) * rstd * scale (d); rstd (t) receives 1/rms per row
 * (may be NULL when no backward follows). y may alias x. eps >= 0.
 * Bitwise smoe_rmsnorm_ref. */
void smoe_rmsnorm(float *y, float *rstd, const float *x, const float *scale,
                  int64_t t, int64_t d, float eps)
{
    SMOE_ASSERT(t >= 0 && d > 0);
#if SMOE_NORM_AVX2
    if (have_avx2()) {
        norm_fwd_avx2(y, rstd, x, scale, t, d, eps);
        return;
    }
#endif
    norm_fwd(y, rstd, x, scale, t, d, eps, 0);
}

/* Accumulates: dx (t,d) += dL/dx and dscale (d) += dL/dscale for the upstream
 * gradient dy (t,d), the forward input x (t,d), scale (d) and the saved
 * rstd (t). Either output may be NULL to skip it. dx must not alias dy/x.
 * Bitwise smoe_rmsnorm_bwd_ref. */
void smoe_rmsnorm_bwd(float *dx, float *dscale, const float *dy,
                      const float *x, const float *scale, const float *rstd,
                      int64_t t, int64_t d)
{
    SMOE_ASSERT(t >= 0 && d > 0);
#if SMOE_NORM_AVX2
    if (have_avx2()) {
        norm_bwd_avx2(dx, dscale, dy, x, scale, rstd, t, d);
        return;
    }
#endif
    norm_bwd(dx, dscale, dy, x, scale, rstd, t, d, 0);
}
