/* Rotary position embedding (RoPE), interleaved-pair form. For token ti at
 * position pos[ti], each head's vector x (d) is rotated pair by pair:
 *   angle_i = pos * theta^(-2i/d),   i = 0 .. d/2-1
 *   (x[2i], x[2i+1]) <- (x[2i] c - x[2i+1] s, x[2i] s + x[2i+1] c)
 * with c = cos(angle_i), s = sin(angle_i). inverse = 1 turns by -angle,
 * which is the transpose of the rotation, hence the backward.
 *
 * Element (token ti, head hi, dim j) lives at x[ti*stride + hi*d + j], so a
 * rope slice inside a wider row (e.g. the rope part of a query laid out
 * (t, h, nope+rope)) can be rotated in place by passing its start and the
 * row stride. Angles are computed in double (positions reach 1e4+ radians,
 * where float sin/cos of pos*freq lose digits) for a chunk of pairs at a
 * time and reused across heads, so the kernel needs no allocation.
 */
#include "smoe/kernels.h"

#include <math.h>

enum { ROPE_CHUNK = 64 }; /* pairs whose cos/sin are cached on the stack */

/* x as above, d even, pos (t); stride >= h*d unless t <= 1. Positions may be
 * any int32 (negative ones rotate the other way). Thread-safe. */
void smoe_rope(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
               int64_t stride, float theta, int inverse)
{
    SMOE_ASSERT(t >= 0 && h >= 0 && d >= 0 && d % 2 == 0);
    SMOE_ASSERT(t <= 1 || stride >= h * d);
    SMOE_ASSERT(theta > 0.0f);
    const int64_t half = d / 2;
    const double sign = inverse ? -1.0 : 1.0;
    const double log_theta = log((double)theta);
    float cs[ROPE_CHUNK], sn[ROPE_CHUNK];

    for (int64_t ti = 0; ti < t; ti++) {
        float *row = x + ti * stride;
        const double p = sign * (double)pos[ti];
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
            int64_t nc = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
            for (int64_t c = 0; c < nc; c++) {
                /* theta^(-2i/d) */
                double e = (double)(2 * (i0 + c)) / (double)d;
                double freq = exp(-log_theta * e);
                double ang = p * freq;
                cs[c] = (float)cos(ang);
                sn[c] = (float)sin(ang);
            }
            for (int64_t hi = 0; hi < h; hi++) {
                float *v = row + hi * d + 2 * i0;
                for (int64_t c = 0; c < nc; c++) {
                    float x0 = v[2 * c], x1 = v[2 * c + 1];
                    v[2 * c] = x0 * cs[c] - x1 * sn[c];
                    v[2 * c + 1] = x0 * sn[c] + x1 * cs[c];
                }
            }
        }
    }
}
