/* Tests for smoe_expf_n and smoe_sigmoid_n (vexp.c). Oracle: their naive
 * twins, the C library's expf per element and smoe_sigmoid, compared bit
 * for bit (two NaNs count as equal):
 *
 *  - a sweep of the 2^32 float bit patterns with a stride of 61 (every
 *    exponent, both signs, NaNs and infinities), plus every float in
 *    [-0.5, 0.5] at stride 7 and around the thresholds of glibc's special
 *    path (|x| near 88, the overflow and underflow bounds); with the
 *    argument --all every one of the 2^32 patterns (about a minute);
 *  - arrays whose length is not a multiple of the lanes, in place.
 *
 * The vector path runs only where it reproduces glibc's FMA expf (x86-64,
 * AVX2 and FMA); elsewhere the functions are the scalar loops and the test
 * holds trivially.
 */
#include "smoe/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernel_testlib.h"

enum { BATCH = 1 << 15 };

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

/* x[i] = bits(u0 + i * stride) for BATCH values (or up to 2^32); returns
 * how many; compares both kernels with their twins, counting mismatches. */
static uint64_t g_exp_bad, g_sig_bad, g_tested;

static void check_batch(const float *x, int64_t n)
{
    static float y[BATCH], s[BATCH], r[BATCH];
    smoe_expf_n(y, x, n);
    smoe_sigmoid_n(s, x, n);
    smoe_sigmoid(r, x, n);
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i]);
        if (!same_bits(e, y[i]) && g_exp_bad++ < 5)
            printf("expf(%a): %a, expected %a\n", (double)x[i], (double)y[i], (double)e);
        if (!same_bits(r[i], s[i]) && g_sig_bad++ < 5)
            printf("sigmoid(%a): %a, expected %a\n", (double)x[i], (double)s[i], (double)r[i]);
    }
    g_tested += (uint64_t)n;
}

static void sweep_bits(uint64_t u0, uint64_t u1, uint64_t stride)
{
    static float x[BATCH];
    int64_t n = 0;
    for (uint64_t u = u0; u < u1; u += stride) {
        uint32_t b = (uint32_t)u;
        memcpy(&x[n++], &b, sizeof b);
        if (n == BATCH) {
            check_batch(x, n);
            n = 0;
        }
    }
    check_batch(x, n);
}

static uint64_t bits_of(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* every float in [lo, hi] (lo <= hi, same sign) at the given stride */
static void sweep_range(float lo, float hi, uint64_t stride)
{
    uint64_t a = bits_of(lo), b = bits_of(hi);
    if (a > b) {
        uint64_t t = a;
        a = b;
        b = t;
    }
    sweep_bits(a, b + 1, stride);
}

static void test_sweep(int all)
{
    g_exp_bad = g_sig_bad = g_tested = 0;
    if (all) {
        sweep_bits(0, 1ull << 32, 1);
    } else {
        sweep_bits(0, 1ull << 32, 61);
        sweep_range(0.0f, 0.5f, 7);
        sweep_range(-0.5f, -0.0f, 7);
        sweep_range(87.0f, 89.0f, 1);     /* 88: the special path; 88.72: overflow */
        sweep_range(-89.0f, -87.0f, 1);
        sweep_range(-105.0f, -103.0f, 1); /* underflow to 0 near -103.97 */
    }
    printf("%llu inputs\n", (unsigned long long)g_tested);
    CHECKF(g_exp_bad == 0, "smoe_expf_n == expf bitwise (%llu of %llu differ)",
           (unsigned long long)g_exp_bad, (unsigned long long)g_tested);
    CHECKF(g_sig_bad == 0, "smoe_sigmoid_n == smoe_sigmoid bitwise (%llu of %llu differ)",
           (unsigned long long)g_sig_bad, (unsigned long long)g_tested);
}

/* ragged lengths, in place, special values mixed into a vector's lanes */
static void test_arrays(void)
{
    const int64_t n = 37;
    float *x = fnew(n), *y = fnew(n), *ref = fnew(n);
    int ok_exp = 1, ok_sig = 1;
    for (int64_t len = 0; len <= n; len++) {
        fill(x, n, 30.0f);
        x[len / 2] = len % 3 ? 100.0f : -INFINITY; /* one lane on glibc's special path */
        memcpy(y, x, (size_t)n * sizeof *x);
        smoe_expf_n(y, y, len);
        for (int64_t i = 0; i < n; i++)
            ok_exp &= same_bits(y[i], i < len ? expf(x[i]) : x[i]);
        memcpy(y, x, (size_t)n * sizeof *x);
        smoe_sigmoid_n(y, y, len);
        smoe_sigmoid(ref, x, n);
        for (int64_t i = 0; i < n; i++)
            ok_sig &= same_bits(y[i], i < len ? ref[i] : x[i]);
    }
    CHECKF(ok_exp, "smoe_expf_n in place, every length 0..%lld", (long long)n);
    CHECKF(ok_sig, "smoe_sigmoid_n in place, every length 0..%lld", (long long)n);
    smoe_free(x);
    smoe_free(y);
    smoe_free(ref);
}

int main(int argc, char **argv)
{
    test_sweep(argc > 1 && strcmp(argv[1], "--all") == 0);
    test_arrays();
    return check_report();
}
