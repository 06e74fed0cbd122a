/* Rotary position embedding (RoPE) as MaxText applies it (layers/
 * embeddings.py). For token ti at position pos[ti], each head's vector x (d)
 * is turned pair by pair by angle_i = pos * inv_freq[i], i = 0 .. d/2-1:
 *   (a, b) <- scale * (a c - b s, a s + b c),  c = cos(angle_i), s = sin
 * where the pair (a, b) is (x[2i], x[2i+1]) when interleaved (YarnRotary-
 * Embedding with rope_interleave, the form DeepSeek's checkpoints use) and
 * (x[i], x[i + d/2]) for halves (RotaryEmbedding.apply_rotary: x cos +
 * rotate_half(x) sin). YarnRotaryEmbedding writes its interleaved result
 * in concatenated order ([real | imag]); that is a fixed permutation of the
 * rope dims, applied to queries and keys alike, so q.k (all MLA uses) is
 * the same as rotating the pairs in place, which is what this kernel does.
 * inverse = 1 turns by -angle (the transpose of the rotation, times the
 * same scale): the backward.
 *
 * Element (token ti, head hi, dim j) lives at x[ti*stride + hi*d + j], so a
 * rope slice inside a wider row can be rotated in place by passing its
 * start and the row stride. Angles are computed in double for a chunk of
 * pairs at a time and reused across heads; no allocation.
 */
#include "smoe/kernels.h"

#include <math.h>

enum { ROPE_CHUNK = 64 }; /* pairs whose cos/sin are cached on the stack */

/* YarnRotaryEmbedding._find_correction_dim */
static double yarn_corr_dim(double rot, double dim, double base, double orig)
{
    return dim * log(orig / (rot * 2.0 * 3.14159265358979323846)) / (2.0 * log(base));
}

void smoe_rope_freqs(double *inv_freq, int64_t d, const smoe_rope_cfg *c)
{
    SMOE_ASSERT(d >= 2 && d % 2 == 0);
    const int64_t half = d / 2;
    if (!c->yarn) {
        /* RotaryEmbedding.timescale: min * (max / min)^(2i/d), times
         * rope_linear_scaling_factor; angle = position / timescale */
        for (int64_t i = 0; i < half; i++) {
            double frac = (double)(2 * i) / (double)d;
            double ts = c->min_timescale * pow(c->max_timescale / c->min_timescale, frac);
            ts *= c->linear_scale;
            inv_freq[i] = 1.0 / ts;
        }
        return;
    }
    /* YarnRotaryEmbedding.freqs_cis: base 1 / theta^(2i/d), blended with
     * base / rope_factor by a linear ramp over [low, high] from
     * _find_correction_range (beta_fast -> low, beta_slow -> high, floor /
     * ceil when truncating, clamped to [0, d - 1]) and _linear_ramp_factor */
    double low = yarn_corr_dim(c->beta_fast, (double)d, c->max_timescale, c->orig_max);
    double high = yarn_corr_dim(c->beta_slow, (double)d, c->max_timescale, c->orig_max);
    if (c->truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0.0)
        low = 0.0;
    if (high > (double)(d - 1))
        high = (double)(d - 1);
    if (low == high)
        high += 0.001;
    for (int64_t i = 0; i < half; i++) {
        double f = 1.0 / pow(c->max_timescale, (double)(2 * i) / (double)d);
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
        double smooth = 1.0 - ramp;
        inv_freq[i] = f / c->factor * (1.0 - smooth) + f * smooth;
    }
}

void smoe_rope_apply(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
                     int64_t stride, const double *inv_freq, int halves, float scale,
                     int inverse)
{
    SMOE_ASSERT(t >= 0 && h >= 0 && d >= 0 && d % 2 == 0);
    SMOE_ASSERT(t <= 1 || stride >= h * d);
    const int64_t half = d / 2;
    const int64_t step = halves ? 1 : 2, other = halves ? half : 1;
    const double sign = inverse ? -1.0 : 1.0;
    float cs[ROPE_CHUNK], sn[ROPE_CHUNK];

    for (int64_t ti = 0; ti < t; ti++) {
        float *row = x + ti * stride;
        const double p = sign * (double)pos[ti];
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
            int64_t nc = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
            for (int64_t c = 0; c < nc; c++) {
                double ang = p * inv_freq[i0 + c];
                cs[c] = (float)cos(ang);
                sn[c] = (float)sin(ang);
            }
            for (int64_t hi = 0; hi < h; hi++) {
                float *v = row + hi * d;
                for (int64_t c = 0; c < nc; c++) {
                    float *a = v + (i0 + c) * step, *b = a + other;
                    float x0 = *a, x1 = *b;
                    float r0 = x0 * cs[c] - x1 * sn[c], r1 = x0 * sn[c] + x1 * cs[c];
                    *a = scale == 1.0f ? r0 : r0 * scale;
                    *b = scale == 1.0f ? r1 : r1 * scale;
                }
            }
        }
    }
}

/* The interleaved form with inv_freq_i = theta^(-2i/d), as before. */
void smoe_rope(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
               int64_t stride, float theta, int inverse)
{
    SMOE_ASSERT(theta > 0.0f);
    const double log_theta = log((double)theta);
    double inv[ROPE_CHUNK];
    /* by chunks of pairs so that no allocation is needed */
    for (int64_t i0 = 0; i0 < d / 2; i0 += ROPE_CHUNK) {
        int64_t nc = d / 2 - i0 < ROPE_CHUNK ? d / 2 - i0 : ROPE_CHUNK;
        for (int64_t c = 0; c < nc; c++)
            inv[c] = exp(-log_theta * ((double)(2 * (i0 + c)) / (double)d));
        for (int64_t ti = 0; ti < t; ti++)
            for (int64_t hi = 0; hi < h; hi++)
                smoe_rope_apply(x + ti * stride + hi * d + 2 * i0, pos + ti, 1, 1, 2 * nc,
                                2 * nc, inv, 0, 1.0f, inverse);
    }
}
