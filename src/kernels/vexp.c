/* expf and the logistic sigmoid over arrays, eight lanes at a time, bitwise
 * the C library's scalar expf (and so the scalar sigmoid of act.c) for
 * every input.
 *
 * glibc (2.28 on) computes expf with the algorithm of Arm's
 * optimized-routines (math/expf.c, math/exp2f_data.c; MIT licensed), in
 * double: with N = 32, z = x * N / ln 2, k = round(z) (by adding and
 * subtracting 1.5 * 2^52), r = z - k, s = 2^(k/N) from a 32-entry table of
 * 2^(i/N) whose exponent field is bumped by k / N; then
 * y = (C0 r + C1) r^2 + (C2 r + 1), times s, rounded to float. On x86-64
 * CPUs with AVX2 and FMA glibc runs its FMA build of that code
 * (__expf_fma), whose contractions are, in order: kd = fma(x, InvLn2N,
 * SHIFT); r = fma(x, InvLn2N, -(kd - SHIFT)); z = fma(r, C0, C1); r2 = r r;
 * y = fma(r, C2, 1); y = fma(z, r2, y); y = y s. The lanes below do
 * exactly these double operations (IEEE, round to nearest, so every lane
 * gets the scalar's bits); inputs with |x| >= 88 or NaN (glibc's special
 * path: overflow, underflow, infinities) go to expf itself, eight at a
 * time, and so does every element on a CPU without AVX2 and FMA (where
 * glibc uses its non-FMA build) and everywhere outside glibc on x86-64.
 * The constants below are those of exp2f_data.c; test_vexp compares
 * smoe_expf_n with expf over a sweep of all 2^32 bit patterns.
 *
 * The sigmoid is act.c's: e = exp(-|a|), s = (a >= 0 ? 1 : e) / (1 + e),
 * the division and the select done per lane as the scalar does them.
 */
#include "smoe/kernels.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__))
#define SMOE_VEXP 1
#include <immintrin.h>
#else
#define SMOE_VEXP 0
#endif

#if SMOE_VEXP
/* 2^(i/32) with i << 47 taken from its bits (exp2f_data.c's tab) */
static const uint64_t exp_tab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
static const uint64_t exp_invln2n = 0x40471547652b82fe; /* N / ln 2 */
static const uint64_t exp_shift = 0x4338000000000000;   /* 1.5 * 2^52 */
static const uint64_t exp_c[3] = {0x3ebc6af84b912394, 0x3f2ebfce50fac4f3,
                                  0x3f962e42ff0c52d6}; /* poly / N^3, N^2, N */

#define TARGET __attribute__((target("avx2,fma")))

TARGET static inline __m256d bits_pd(uint64_t u)
{
    return _mm256_castsi256_pd(_mm256_set1_epi64x((long long)u));
}

/* expf of four doubles that hold floats with |x| < 88, rounded to float */
TARGET static inline __m128 exp4(__m256d xd)
{
    const __m256d invln2n = bits_pd(exp_invln2n), shift = bits_pd(exp_shift);
    __m256d kd = _mm256_fmadd_pd(xd, invln2n, shift);
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fmsub_pd(xd, invln2n, kd);
    __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    __m256i t = _mm256_i64gather_epi64((const long long *)exp_tab, idx, 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    __m256d s = _mm256_castsi256_pd(t);
    __m256d z = _mm256_fmadd_pd(r, bits_pd(exp_c[0]), bits_pd(exp_c[1]));
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, bits_pd(exp_c[2]), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    y = _mm256_mul_pd(y, s);
    return _mm256_cvtpd_ps(y);
}

/* 1 when one of the eight lanes needs glibc's special path (|x| >= 88 or
 * NaN: the top 12 bits of |x| at least those of 88.0f) */
TARGET static inline int exp8_special(__m256 x)
{
    __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20),
                                   _mm256_set1_epi32(0x7ff));
    __m256i big = _mm256_cmpgt_epi32(top, _mm256_set1_epi32(0x42a));
    return !_mm256_testz_si256(big, big);
}

/* expf of eight floats: the lanes above, or expf itself for all eight when
 * one needs glibc's special path */
TARGET static inline __m256 exp8(__m256 x)
{
    if (exp8_special(x)) {
        float t[8];
        _mm256_storeu_ps(t, x);
        for (int l = 0; l < 8; l++)
            t[l] = expf(t[l]);
        return _mm256_loadu_ps(t);
    }
    __m128 lo = exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    __m128 hi = exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    return _mm256_set_m128(hi, lo);
}

TARGET static int64_t expf_vec(float *y, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    return i;
}

TARGET static int64_t sigmoid_vec(float *s, const float *a, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        __m256 e = exp8(_mm256_or_ps(x, sign)); /* exp(-|x|) */
        __m256 ge = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
        __m256 num = _mm256_blendv_ps(e, one, ge);
        _mm256_storeu_ps(s + i, _mm256_div_ps(num, _mm256_add_ps(one, e)));
    }
    return i;
}

static int have_vec(void)
{
    static _Atomic int cached = -1; /* every thread would store the same */
    int c = atomic_load_explicit(&cached, memory_order_relaxed);
    if (c < 0) {
        __builtin_cpu_init();
        c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        atomic_store_explicit(&cached, c, memory_order_relaxed);
    }
    return c;
}
#endif

/* y (n) = expf(x) elementwise, bitwise; y may alias x. */
void smoe_expf_n(float *y, const float *x, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    int64_t i = 0;
#if SMOE_VEXP
    if (have_vec())
        i = expf_vec(y, x, n);
#endif
    for (; i < n; i++)
        y[i] = expf(x[i]);
}

/* s (n) = sigmoid(a) = (a >= 0 ? 1 : e) / (1 + e), e = expf(-|a|),
 * bitwise act.c's; s may alias a. */
void smoe_sigmoid_n(float *s, const float *a, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    int64_t i = 0;
#if SMOE_VEXP
    if (have_vec())
        i = sigmoid_vec(s, a, n);
#endif
    smoe_sigmoid(s + i, a + i, n - i);
}
