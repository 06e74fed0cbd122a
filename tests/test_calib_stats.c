/* The calibration's statistics (src/calib) against hand-computed values:
 * the median, the spread (interquartile range over the median) and the
 * Theil-Sen line, which one noisy size must not bend (least squares on
 * the case below gives a slope of 14.4 for the true 3), and the shared
 * link's rate from a layer's transfers alone and together. White-box.
 * usage: test_calib_stats */
#include "../src/calib/calib_impl.h"
#include "check.h"

#include <math.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-12)

static void test_median(void)
{
    double odd[5] = { 5, 1, 4, 2, 3 }, even[4] = { 4, 1, 3, 2 }, one[1] = { 7 };
    CHECK(NEAR(calib_median(odd, 5), 3));
    CHECK(NEAR(calib_median(even, 4), 2.5));
    CHECK(NEAR(calib_median(one, 1), 7));
}

/* 9 rounds: sorted 1..9, median 5, quartiles the 3rd and 7th (indices 2
 * and 6): (7 - 3) / 5; the values are left in their order */
static void test_spread(void)
{
    double v[9] = { 9, 3, 7, 1, 5, 2, 8, 4, 6 };
    CHECK(NEAR(calib_spread(v, 9), 0.8));
    CHECK(NEAR(v[0], 9) && NEAR(v[8], 6));
    double flat[5] = { 2, 2, 2, 2, 2 };
    CHECK(NEAR(calib_spread(flat, 5), 0));
    double one[1] = { 3 };
    CHECK(NEAR(calib_spread(one, 1), 0));
    /* 4 values 1, 2, 10, 11: median 6, quartiles the 1st and 4th: 10 / 6 */
    double four[4] = { 11, 1, 10, 2 };
    CHECK(NEAR(calib_spread(four, 4), 10.0 / 6));
}

/* t = 2 + 3 x at x = 1..6 with the last point 100 (a preempted size): the
 * 10 pairwise slopes without it are 3, the 5 with it above 3, so the
 * median of the 15 is 3; the residuals t - 3 x are 2 five times and 82:
 * median 2 */
static void test_fit(void)
{
    double x[6] = { 1, 2, 3, 4, 5, 6 }, t[6] = { 5, 8, 11, 14, 17, 100 }, a, b;
    calib_fit(x, t, 6, &a, &b);
    CHECKF(NEAR(b, 3) && NEAR(a, 2), "a %g b %g", a, b);
    /* a line through the origin keeps a = 0; a falling one is floored */
    double t0[3] = { 4, 8, 12 };
    calib_fit(x, t0, 3, &a, &b);
    CHECKF(NEAR(a, 0) && NEAR(b, 4), "a %g b %g", a, b);
    double down[3] = { 3, 2, 1 };
    calib_fit(x, down, 3, &a, &b);
    CHECKF(b > 0 && b <= 1e-12, "b %g", b);
}

/* The shared link's rate by hand: gathers and reductions of 1 s each
 * alone, 2 s together: each asks all of a link of b / 1 s; reductions of
 * 2 s (half the link) beside 1 s gathers, 2.5 s together: the 0.5 s
 * the two ask beyond a link of b a second; together no longer than the
 * slower alone: no shared link (INFINITY). */
static void test_link_rate(void)
{
    CHECKF(NEAR(calib_link_rate(1, 1, 2, 1e8), 1e8), "%g", calib_link_rate(1, 1, 2, 1e8));
    CHECKF(NEAR(calib_link_rate(1, 2, 2.5, 1e8), 1e8), "%g", calib_link_rate(1, 2, 2.5, 1e8));
    CHECKF(NEAR(calib_link_rate(2, 1, 2.5, 1e8), 1e8), "%g", calib_link_rate(2, 1, 2.5, 1e8));
    CHECK(isinf(calib_link_rate(1, 2, 2, 1e8)));
    CHECK(isinf(calib_link_rate(0, 2, 3, 1e8)));
}

int main(void)
{
    test_median();
    test_spread();
    test_fit();
    test_link_rate();
    return check_report();
}
