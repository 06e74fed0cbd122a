/* The conversion kernels of dtype.h: fp32 <-> bf16 by bit arithmetic
 * (round to nearest even), int8 blockwise symmetric quantisation. Their
 * naive twins are in convert_ref.c. Records are read and written through
 * memcpy, so they need no alignment. */
#include "smoe/dtype.h"

#include <float.h>
#include <math.h>
#include <string.h>

static inline uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN: quiet, sign and top bits kept */
    u += 0x7fffu + ((u >> 16) & 1u);            /* ties to the even upper half */
    return (uint16_t)(u >> 16);
}

void smoe_bf16_from_f32(uint16_t *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_of(src[i]);
}

void smoe_bf16_to_f32(float *dst, const uint16_t *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, 4);
    }
}

void smoe_int8_quant(void *dst, const float *src, int64_t n, int64_t block)
{
    unsigned char *out = dst;
    for (int64_t b = 0; b < n / block; b++, out += 4 + block) {
        const float *x = src + b * block;
        float amax = 0.0f;
        int finite = 1;
        for (int64_t i = 0; i < block; i++) {
            float a = fabsf(x[i]);
            finite &= a <= FLT_MAX;
            amax = a > amax ? a : amax;
        }
        float s = finite ? amax / 127.0f : NAN;
        while (finite && !(s * 127.0f <= FLT_MAX)) /* amax near FLT_MAX: keep 127 s finite */
            s = nextafterf(s, 0.0f);
        memcpy(out, &s, 4);
        for (int64_t i = 0; i < block; i++) {
            float q = 0.0f;
            if (finite && s > 0.0f) {
                q = rintf(x[i] / s);
                q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            }
            int8_t v = (int8_t)q;
            memcpy(out + 4 + i, &v, 1);
        }
    }
}

void smoe_int8_dequant(float *dst, const void *src, int64_t n, int64_t block)
{
    const unsigned char *in = src;
    for (int64_t b = 0; b < n / block; b++, in += 4 + block) {
        float s;
        memcpy(&s, in, 4);
        float *y = dst + b * block;
        for (int64_t i = 0; i < block; i++) {
            int8_t q;
            memcpy(&q, in + 4 + i, 1);
            y[i] = (float)q * s; /* NaN scale: the whole block NaN */
        }
    }
}
