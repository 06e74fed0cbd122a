/* RoPE from tables: the cos/sin of every (position, pair) angle computed
 * once (for a model: once per sequence length, at creation) instead of on
 * every call for every token, and all heads of a token rotated in one call
 * with a head stride, so the queries' rope slices (one per head inside the
 * (T, H, nope + rope) rows) are one call, not one per head.
 *
 * smoe_rope_apply (rope.c) is the naive twin: the table holds exactly
 * (float)cos(p * inv_freq[i]) and (float)sin(p * inv_freq[i]), the values
 * smoe_rope_apply computes, and the inverse uses -sin (sin is odd, the cast
 * commutes with negation), so both give bitwise the same result
 * (test_kernels checks it, and the backward by finite differences).
 */
#include "smoe/kernels.h"

#include <math.h>

void smoe_rope_table(float *cs, float *sn, int64_t npos, int64_t d, const double *inv_freq)
{
    SMOE_ASSERT(npos >= 0 && d >= 0 && d % 2 == 0);
    const int64_t half = d / 2;
    for (int64_t p = 0; p < npos; p++)
        for (int64_t i = 0; i < half; i++) {
            double ang = (double)p * inv_freq[i];
            cs[p * half + i] = (float)cos(ang);
            sn[p * half + i] = (float)sin(ang);
        }
}

/* One head's pairs (a_c, b_c) = (v[c*step], v[c*step + other]) rotated by
 * the row's cos/sin; sgn = -1 for the inverse. */
static void rotate(float *v, const float *cs, const float *sn, int64_t half, int64_t step,
                   int64_t other, float sgn, float scale)
{
    for (int64_t c = 0; c < half; c++) {
        float *a = v + c * step, *b = a + other;
        float x0 = *a, x1 = *b, s = sgn * sn[c];
        float r0 = x0 * cs[c] - x1 * s, r1 = x0 * s + x1 * cs[c];
        *a = scale == 1.0f ? r0 : r0 * scale;
        *b = scale == 1.0f ? r1 : r1 * scale;
    }
}

void smoe_rope_apply_tab(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
                         int64_t stride, int64_t hstride, const float *cs, const float *sn,
                         int64_t npos, int halves, float scale, int inverse)
{
    SMOE_ASSERT(t >= 0 && h >= 0 && d >= 0 && d % 2 == 0);
    SMOE_ASSERT(h <= 1 || hstride >= d);
    SMOE_ASSERT(t <= 1 || stride >= (h ? (h - 1) * hstride + d : 0));
    const int64_t half = d / 2;
    const int64_t step = halves ? 1 : 2, other = halves ? half : 1;
    const float sgn = inverse ? -1.0f : 1.0f;
    for (int64_t ti = 0; ti < t; ti++) {
        SMOE_ASSERT(pos[ti] >= 0 && pos[ti] < npos);
        const float *c = cs + (int64_t)pos[ti] * half, *s = sn + (int64_t)pos[ti] * half;
        for (int64_t hi = 0; hi < h; hi++)
            rotate(x + ti * stride + hi * hstride, c, s, half, step, other, sgn, scale);
    }
}
