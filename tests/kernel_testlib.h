/* Shared helpers of the kernel tests (test_kernels.c, test_attention.c):
 * fixed-seed random numbers, buffers, error measures and the finite
 * difference check. Everything is static inline so a test that does not
 * use a helper does not warn. */
#ifndef SMOE_TEST_KERNEL_TESTLIB_H
#define SMOE_TEST_KERNEL_TESTLIB_H

#include "smoe/kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

/* ---- helpers ---- */

/* xorshift state: the random numbers depend on nothing but the order of
 * the draws in one test executable. */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static inline float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void fill(float *x, int64_t n, float amp)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = amp * frand();
}

static inline float *fnew(int64_t n)
{
    float *p = smoe_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    SMOE_ASSERT(p);
    return p;
}

static inline float *fdup(const float *x, int64_t n)
{
    float *p = fnew(n);
    memcpy(p, x, (size_t)n * sizeof *p);
    return p;
}

/* max|a - b| / max|b| (b the reference); 0 when both are all zero. */
static inline double rel_err(const float *a, const float *b, int64_t n)
{
    double md = 0.0, mb = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > mb)
            mb = fabs((double)b[i]);
    }
    return mb > 0.0 ? md / mb : md;
}

static inline double max_abs_diff(const float *a, const double *b, int64_t n)
{
    double md = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        md = (d > md || isnan(d)) ? (isnan(d) ? INFINITY : d) : md;
    }
    return md;
}

/* max|a - b| / max|b| with a double reference. */
static inline double rel_err_d(const float *a, const double *b, int64_t n)
{
    double mb = 0.0;
    for (int64_t i = 0; i < n; i++)
        mb = fmax(mb, fabs(b[i]));
    double md = max_abs_diff(a, b, n);
    return mb > 0.0 ? md / mb : md;
}

static inline double wsum(const float *w, const float *y, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)w[i] * (double)y[i];
    return s;
}

/* ---- finite differences ----
 * Every backward is checked against central finite differences. Scheme:
 * the kernels run in fp32, so the scalar loss L = sum_i w_i f_i(x) (random
 * fixed weights w, i.e. upstream gradient dy = w) is accumulated in double
 * over the fp32 outputs. Each input/parameter element is moved to fp32
 * values x+h and x-h with h = 1e-3, and the derivative is (L+ - L-) /
 * (xp - xm) using the perturbations actually representable in fp32.
 * Truncation error is O(h^2) ~ 1e-6; the fp32 rounding noise of L (~1e-7
 * per output, tens of outputs) divided by 2h is up to ~1e-4. So an element
 * passes when |analytic - fd| <= 2e-3 * max(|analytic|, |fd|) + 2e-4
 * (observed worst over several seeds: half of that), and the gradient's max
 * magnitude must exceed 0.05 so a vanishing gradient cannot pass
 * vacuously. Sizes are small (tens to hundreds of elements). */

typedef double (*loss_fn)(void *ctx);

/* Compare the analytic gradient ga (n) of loss() w.r.t. the n floats at x
 * with central differences (scheme above). */
static inline void fd_check(const char *what, float *x, int64_t n,
                            const float *ga, loss_fn loss, void *ctx)
{
    const float h = 1e-3f;
    double worst = 0.0, gmax = 0.0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = x0 + h, xm = x0 - h;
        x[i] = xp;
        double lp = loss(ctx);
        x[i] = xm;
        double lm = loss(ctx);
        x[i] = x0;
        double fd = (lp - lm) / ((double)xp - (double)xm);
        double a = (double)ga[i];
        double tol = 2e-3 * fmax(fabs(a), fabs(fd)) + 2e-4;
        double excess = fabs(a - fd) / tol;
        if (excess > worst || isnan(excess)) {
            worst = isnan(excess) ? INFINITY : excess;
            worst_i = i;
        }
        gmax = fmax(gmax, fabs(a));
    }
    CHECKF(worst <= 1.0 && gmax > 0.05,
           "%s: worst element %lld at %.2fx tolerance (analytic %g), "
           "max |grad| %g",
           what, (long long)worst_i, worst,
           worst_i >= 0 ? (double)ga[worst_i] : 0.0, gmax);
}

#endif
