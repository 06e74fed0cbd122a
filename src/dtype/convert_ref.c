/* Naive twins of the conversion kernels (convert.c), the tests' oracle:
 * the same specification (dtype.h) computed another way, in double
 * precision from the number's value rather than its bits. Slow on purpose. */
#include "smoe/dtype.h"

#include <math.h>
#include <string.h>

/* The value of bf16 bits b from its fields (2^128 for the pattern after the
 * largest finite one, so rounding can compare against it). */
static double bf16_value(uint32_t b)
{
    int sign = (b >> 15) & 1, e = (b >> 7) & 0xff, m = b & 0x7f;
    double v;
    if (e == 0)
        v = ldexp((double)m, -133);           /* subnormal: m/128 * 2^-126 */
    else if (e == 255)
        v = m ? NAN : ldexp(1.0, 128);
    else
        v = ldexp(1.0 + m / 128.0, e - 127);
    return sign ? -v : v;
}

void smoe_bf16_from_f32_ref(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float f = src[i];
        uint32_t u;
        memcpy(&u, &f, 4);
        if (isnan(f)) {
            dst[i] = (uint16_t)((u >> 16) | 0x40);
            continue;
        }
        if (isinf(f)) {
            dst[i] = (uint16_t)(u >> 16);
            continue;
        }
        /* the bf16 neighbours of |f|: truncated (lo) and one up (hi) */
        uint32_t sign = u & 0x80000000u, lo = (u & 0x7fffffffu) >> 16, hi = lo + 1;
        double a = fabs((double)f);
        double dlo = a - fabs(bf16_value(lo)), dhi = fabs(bf16_value(hi)) - a;
        uint32_t r = dlo < dhi ? lo : dhi < dlo ? hi : (lo & 1) ? hi : lo;
        dst[i] = (uint16_t)((sign >> 16) | r);
    }
}

void smoe_bf16_to_f32_ref(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double v = bf16_value(src[i]);
        if (((src[i] >> 7) & 0xff) == 255 && !(src[i] & 0x7f))
            v = (src[i] & 0x8000) ? -INFINITY : INFINITY;
        dst[i] = (float)v;
    }
}

static double round_half_even(double v)
{
    double f = floor(v), d = v - f;
    if (d > 0.5)
        return f + 1;
    if (d < 0.5)
        return f;
    return fmod(f, 2.0) == 0.0 ? f : f + 1;
}

void smoe_int8_quant_ref(void *dst, const float *src, int64_t n, int64_t block)
{
    unsigned char *out = dst;
    for (int64_t b = 0; b < n / block; b++) {
        const float *x = src + b * block;
        unsigned char *rec = out + b * (4 + block);
        double amax = 0.0;
        int bad = 0;
        for (int64_t i = 0; i < block; i++) {
            if (!isfinite(x[i]))
                bad = 1;
            else if (fabs((double)x[i]) > amax)
                amax = fabs((double)x[i]);
        }
        float s = bad ? NAN : (float)(amax / 127.0);
        while (!bad && isinf((float)((double)s * 127.0)))
            s = nextafterf(s, 0.0f);
        memcpy(rec, &s, 4);
        for (int64_t i = 0; i < block; i++) {
            double q = 0.0;
            if (!bad && s != 0.0f) {
                float ratio = (float)((double)x[i] / (double)s); /* the float quotient */
                q = round_half_even((double)ratio);
                if (q > 127)
                    q = 127;
                if (q < -127)
                    q = -127;
            }
            signed char c = (signed char)(int)q;
            memcpy(rec + 4 + i, &c, 1);
        }
    }
}

void smoe_int8_dequant_ref(float *dst, const void *src, int64_t n, int64_t block)
{
    const unsigned char *in = src;
    for (int64_t b = 0; b < n / block; b++) {
        const unsigned char *rec = in + b * (4 + block);
        float s;
        memcpy(&s, rec, 4);
        for (int64_t i = 0; i < block; i++) {
            signed char c;
            memcpy(&c, rec + 4 + i, 1);
            dst[b * block + i] = isnan(s) ? NAN : (float)((double)c * (double)s);
        }
    }
}
