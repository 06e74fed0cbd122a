/* Tests for the gather dtypes (dtype.h). Oracles:
 *  - the naive twins (convert_ref.c: the same specification computed from
 *    values in double precision): every bf16 pattern back to fp32; fp32 ->
 *    bf16 on a sweep of the whole 2^32 bit space plus random and special
 *    patterns; int8 quantisation on random blocks, bit for bit;
 *  - hand-computed values: RNE ties (both directions), just above a tie,
 *    overflow to Inf, subnormals, NaN quieting, signs; int8 exact ties,
 *    all-zero, max-magnitude, subnormal and non-finite blocks;
 *  - the record streams: pack/unpack against the kernels, the in-place
 *    tail expansion against the out-of-place one, the round trip;
 *  - names, parsing and sizes.
 * It prints the measured round-trip error per dtype
 * (bench/results/2026-12-01-dtype-round-trip.md). */
#include "smoe/dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float frand(void) { return (float)((double)rnd32() / 4294967296.0 * 2.0 - 1.0); }
/* roughly N(0, 1): the sum of 4 uniforms, scaled */
static float grand(void) { return (frand() + frand() + frand() + frand()) * 0.8660254f; }

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t u_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static uint16_t bf(uint32_t u)
{
    float f = f_of(u);
    uint16_t b;
    smoe_bf16_from_f32(&b, &f, 1);
    return b;
}

static void test_bf16_to_f32_all(void)
{
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        uint16_t h = (uint16_t)b;
        float x, r;
        smoe_bf16_to_f32(&x, &h, 1);
        smoe_bf16_to_f32_ref(&r, &h, 1);
        if (isnan(r) ? !isnan(x) || u_of(x) != b << 16 : u_of(x) != u_of(r))
            bad++;
    }
    CHECKF(bad == 0, "bf16 -> fp32: %d of 65536 patterns differ from the twin", bad);
}

static void test_bf16_from_f32_sweep(void)
{
    int bad = 0;
    uint32_t first = 0;
    int64_t n = 0;
    /* every 4093rd pattern of the 2^32 (a prime stride: all low bit
     * combinations, ties among them), then random ones */
    for (uint64_t u = 0; u < (1ull << 32); u += 4093, n++) {
        float f = f_of((uint32_t)u);
        uint16_t a, r;
        smoe_bf16_from_f32(&a, &f, 1);
        smoe_bf16_from_f32_ref(&r, &f, 1);
        if (a != r && !bad++)
            first = (uint32_t)u;
    }
    for (int i = 0; i < 1 << 20; i++, n++) {
        uint32_t u = rnd32();
        if (i & 1)
            u = (u & 0xffff0000u) | 0x8000u; /* an exact tie */
        float f = f_of(u);
        uint16_t a, r;
        smoe_bf16_from_f32(&a, &f, 1);
        smoe_bf16_from_f32_ref(&r, &f, 1);
        if (a != r && !bad++)
            first = u;
    }
    CHECKF(bad == 0, "fp32 -> bf16: %d of %lld patterns differ from the twin (first 0x%08x)",
           bad, (long long)n, first);
}

static void test_bf16_hand(void)
{
    CHECK_INT(bf(0x3f800000u), 0x3f80); /* 1.0 */
    CHECK_INT(bf(0x3f808000u), 0x3f80); /* 1 + 2^-8: tie, to even (down) */
    CHECK_INT(bf(0x3f818000u), 0x3f82); /* 1 + 3 2^-8: tie, to even (up) */
    CHECK_INT(bf(0x3f808001u), 0x3f81); /* just above the tie */
    CHECK_INT(bf(0x3f807fffu), 0x3f80); /* just below */
    CHECK_INT(bf(0xbf818000u), 0xbf82); /* negative tie */
    CHECK_INT(bf(0x7f7f7fffu), 0x7f7f); /* below half an ulp over bf16's max */
    CHECK_INT(bf(0x7f7f8000u), 0x7f80); /* tie at the top, odd: Inf */
    CHECK_INT(bf(0x7f7fffffu), 0x7f80); /* FLT_MAX rounds to Inf */
    CHECK_INT(bf(0xff7fffffu), 0xff80); /* -FLT_MAX to -Inf */
    CHECK_INT(bf(0x7f800000u), 0x7f80); /* Inf */
    CHECK_INT(bf(0xff800000u), 0xff80); /* -Inf */
    CHECK_INT(bf(0x7f800001u), 0x7fc0); /* signalling NaN: quiet NaN, never Inf */
    CHECK_INT(bf(0xffc00001u), 0xffc0); /* negative quiet NaN */
    CHECK_INT(bf(0x00000000u), 0x0000);
    CHECK_INT(bf(0x80000000u), 0x8000); /* -0 */
    CHECK_INT(bf(0x00000001u), 0x0000); /* smallest subnormal: to 0 */
    CHECK_INT(bf(0x00008000u), 0x0000); /* subnormal tie: to even 0 */
    CHECK_INT(bf(0x00018000u), 0x0002); /* subnormal tie: to even 2 */
    CHECK_INT(bf(0x00010000u), 0x0001); /* exact bf16 subnormal */
    CHECK_INT(bf(0x007fffffu), 0x0080); /* largest subnormal rounds to FLT_MIN */
    uint16_t h = 0x4049; /* 3.140625 */
    float x;
    smoe_bf16_to_f32(&x, &h, 1);
    CHECK(x == 3.140625f);
}

/* int8 record accessors */
static float rec_scale(const unsigned char *r)
{
    float s;
    memcpy(&s, r, 4);
    return s;
}
static int rec_q(const unsigned char *r, int i) { return (int)(signed char)r[4 + i]; }

static void test_int8_hand(void)
{
    unsigned char rec[4 * (4 + 4)];
    float y[16];
    /* block 0: amax 127 -> scale exactly 1, exact ties to even */
    /* block 1: all zero; block 2: max magnitude; block 3: a NaN */
    float x[16] = { 127.0f, -2.5f, 3.5f, 0.5f,     0, 0, -0.0f, 0,
                    FLT_MAX, -FLT_MAX, 0.0f, 1.0f, 1.0f, NAN, 2.0f, 3.0f };
    smoe_int8_quant(rec, x, 16, 4);
    CHECK(rec_scale(rec) == 1.0f);
    CHECK(rec_q(rec, 0) == 127 && rec_q(rec, 1) == -2 && rec_q(rec, 2) == 4 &&
          rec_q(rec, 3) == 0);
    CHECK(rec_scale(rec + 8) == 0.0f);
    CHECK(rec_q(rec + 8, 0) == 0 && rec_q(rec + 8, 1) == 0 && rec_q(rec + 8, 2) == 0);
    CHECK(rec_scale(rec + 16) <= FLT_MAX / 127.0f && isfinite(127.0f * rec_scale(rec + 16)));
    CHECK(rec_q(rec + 16, 0) == 127 && rec_q(rec + 16, 1) == -127 && rec_q(rec + 16, 3) == 0);
    CHECK(isnan(rec_scale(rec + 24)));
    smoe_int8_dequant(y, rec, 16, 4);
    CHECK(y[0] == 127.0f && y[1] == -2.0f && y[2] == 4.0f && y[3] == 0.0f);
    CHECK(y[4] == 0 && y[5] == 0 && y[6] == 0 && y[7] == 0);
    CHECKF(isfinite(y[8]) && isfinite(y[9]) && fabsf(y[8] - FLT_MAX) <= FLT_MAX * 1e-6f,
           "max-magnitude block back as %g, %g", (double)y[8], (double)y[9]);
    CHECK(isnan(y[12]) && isnan(y[13]) && isnan(y[14]) && isnan(y[15]));
    /* subnormal blocks: 2^-149 alone has a scale that underflows (back as
     * 0); 2^-130 keeps a subnormal scale, back within one step */
    float sub[8] = { 0x1p-149f, 0, 0, 0, 0x1p-130f, -0x1p-131f, 0x1p-133f, 0 };
    smoe_int8_quant(rec, sub, 8, 4);
    smoe_int8_dequant(y, rec, 8, 4);
    CHECK(rec_scale(rec) == 0.0f && y[0] == 0.0f);
    CHECK(rec_q(rec + 8, 0) == 127);
    int ok = 1;
    for (int i = 4; i < 8; i++)
        ok &= fabsf(y[i] - sub[i]) <= 0x1p-130f / 127.0f;
    CHECKF(ok, "subnormal block back as %g %g %g %g", (double)y[4], (double)y[5],
           (double)y[6], (double)y[7]);
}

static void test_int8_twin(void)
{
    int64_t blocks[] = { 2, 4, 32, 100, 4096 };
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
        int64_t B = blocks[k], n = B * 37;
        float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n),
              *yr = malloc(sizeof *yr * (size_t)n);
        unsigned char *a = malloc((size_t)smoe_dtype_bytes(SMOE_DT_INT8, B, n)),
                      *r = malloc((size_t)smoe_dtype_bytes(SMOE_DT_INT8, B, n));
        for (int64_t i = 0; i < n; i++)
            x[i] = grand() * (float)(1 + i / B % 7) * ((i / B) % 5 == 0 ? 1e-30f : 1.0f);
        for (int64_t i = 3 * B; i < 4 * B; i++)
            x[i] = FLT_MAX * frand(); /* a block near the top of the range */
        x[3] = 0.5f * x[0]; /* ties are possible but rare; the twin covers them */
        smoe_int8_quant(a, x, n, B);
        smoe_int8_quant_ref(r, x, n, B);
        CHECKF(memcmp(a, r, (size_t)smoe_dtype_bytes(SMOE_DT_INT8, B, n)) == 0,
               "int8 block %lld: records differ from the twin", (long long)B);
        smoe_int8_dequant(y, a, n, B);
        smoe_int8_dequant_ref(yr, a, n, B);
        CHECKF(memcmp(y, yr, sizeof *y * (size_t)n) == 0,
               "int8 block %lld: dequantised values differ from the twin", (long long)B);
        free(x), free(y), free(yr), free(a), free(r);
    }
}

/* The streams: pack/unpack, the tail expanded in place, the round trip. */
static void test_streams(void)
{
    smoe_dtype ts[] = { SMOE_DT_FP32, SMOE_DT_BF16, SMOE_DT_INT8 };
    int64_t blocks[] = { 2, 32, 4096 };
    for (int ti = 0; ti < 3; ti++)
        for (int bi = 0; bi < 3; bi++) {
            smoe_dtype t = ts[ti];
            int64_t B = blocks[bi], n = 3 * 4096;
            float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n),
                  *z = malloc(sizeof *z * (size_t)n);
            void *c = malloc((size_t)smoe_dtype_bytes(t, B, n));
            for (int64_t i = 0; i < n; i++)
                x[i] = grand();
            smoe_dtype_pack(t, B, c, x, n);
            smoe_dtype_unpack(t, B, y, c, n);
            /* the same records in the tail of z, expanded in place */
            memset(z, 0xff, sizeof *z * (size_t)n);
            memcpy(smoe_dtype_tail(t, B, z, n), c, (size_t)smoe_dtype_bytes(t, B, n));
            smoe_dtype_unpack_tail(t, B, z, n);
            CHECKF(memcmp(y, z, sizeof *y * (size_t)n) == 0, "%s block %lld: in-place tail "
                   "expansion differs", smoe_dtype_name(t), (long long)B);
            memcpy(z, x, sizeof *z * (size_t)n);
            smoe_dtype_round_trip(t, B, z, n);
            CHECKF(memcmp(y, z, sizeof *y * (size_t)n) == 0, "%s block %lld: round trip "
                   "differs from pack + unpack", smoe_dtype_name(t), (long long)B);
            if (t == SMOE_DT_FP32)
                CHECK(memcmp(x, y, sizeof *y * (size_t)n) == 0);
            free(x), free(y), free(z), free(c);
        }
}

/* The bf16 sum of the reductions against the twins: one rounding of the
 * fp32 sum of the two bf16 values; and the in-place head packing. */
static void test_bf16_add_and_head(void)
{
    enum { N = 1000 };
    uint16_t a[N], b[N], r[N];
    for (int i = 0; i < N; i++) {
        float x = grand() * 100.0f, y = grand() * (i % 3 ? 100.0f : 1e-3f);
        smoe_bf16_from_f32_ref(&a[i], &x, 1);
        smoe_bf16_from_f32_ref(&b[i], &y, 1);
        float fx, fy;
        smoe_bf16_to_f32_ref(&fx, &a[i], 1);
        smoe_bf16_to_f32_ref(&fy, &b[i], 1);
        float sum = fx + fy;
        smoe_bf16_from_f32_ref(&r[i], &sum, 1);
    }
    smoe_bf16_add(a, b, N);
    CHECKF(memcmp(a, r, sizeof a) == 0, "bf16 sums differ from the twins' rounded fp32 sums");
    smoe_dtype ts[] = { SMOE_DT_BF16, SMOE_DT_INT8 };
    for (int k = 0; k < 2; k++) {
        int64_t n = 5000 * 4, B = 4;
        float *x = malloc(sizeof *x * (size_t)n);
        unsigned char *want = malloc((size_t)smoe_dtype_bytes(ts[k], B, n));
        for (int64_t i = 0; i < n; i++)
            x[i] = grand();
        smoe_dtype_pack(ts[k], B, want, x, n);
        smoe_dtype_pack_head(ts[k], B, x, n);
        CHECKF(memcmp(x, want, (size_t)smoe_dtype_bytes(ts[k], B, n)) == 0,
               "%s: in-place head packing differs", smoe_dtype_name(ts[k]));
        free(x), free(want);
    }
}

/* The measured round-trip error per dtype on N(0,1)-like weights. */
static void test_round_trip_error(void)
{
    const int64_t n = 1 << 20, B = SMOE_INT8_BLOCK_DEFAULT;
    float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = grand();
    smoe_dtype ts[] = { SMOE_DT_BF16, SMOE_DT_INT8 };
    for (int k = 0; k < 2; k++) {
        memcpy(y, x, sizeof *y * (size_t)n);
        smoe_dtype_round_trip(ts[k], B, y, n);
        double se = 0, sx = 0, maxrel = 0, maxblk = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)y[i] - x[i]);
            se += d * d;
            sx += (double)x[i] * x[i];
            if (x[i] != 0 && d / fabs(x[i]) > maxrel)
                maxrel = d / fabs(x[i]);
        }
        for (int64_t b = 0; b < n / B; b++) {
            double amax = 0, dm = 0;
            for (int64_t i = b * B; i < (b + 1) * B; i++) {
                amax = fmax(amax, fabs(x[i]));
                dm = fmax(dm, fabs((double)y[i] - x[i]));
            }
            maxblk = fmax(maxblk, dm / amax);
        }
        double rms = sqrt(se / sx);
        printf("round trip %s (block %lld), %lld N(0,1) values: rms err / rms x = %.3e, "
               "max |err|/|x| = %.3e, max |err|/block amax = %.3e, bytes/element %.4f\n",
               smoe_dtype_name(ts[k]), (long long)B, (long long)n, rms, maxrel, maxblk,
               (double)smoe_dtype_bytes(ts[k], B, n) / (double)n);
        if (ts[k] == SMOE_DT_BF16)
            CHECKF(maxrel <= 0x1p-8 && rms < 2e-3, "bf16 round trip: max rel %g rms %g",
                   maxrel, rms);
        else
            CHECKF(maxblk <= 0.5 / 127.0 * (1 + 1e-5) && rms < 1e-2,
                   "int8 round trip: max err/amax %g rms %g", maxblk, rms);
    }
    free(x), free(y);
}

static void test_names(void)
{
    smoe_err err;
    smoe_dtype t = SMOE_DT_FP32;
    unsigned all = 7;
    CHECK(smoe_dtype_parse("--gather-dtype", "bf16", all, &t, &err) == SMOE_OK &&
          t == SMOE_DT_BF16);
    CHECK(smoe_dtype_parse("--gather-dtype", "int8", all, &t, &err) == SMOE_OK &&
          t == SMOE_DT_INT8);
    CHECK(smoe_dtype_parse("--gather-dtype", "fp32", all, &t, &err) == SMOE_OK &&
          t == SMOE_DT_FP32);
    CHECK(smoe_dtype_parse("--gather-dtype", "fp16", all, &t, &err) == SMOE_EINVAL);
    CHECK_STR(err.msg, "--gather-dtype 'fp16': not a gather dtype (fp32|bf16|int8)");
    CHECK(smoe_dtype_parse("--reduce-dtype", "int8", 3, &t, &err) == SMOE_EINVAL);
    CHECK_STR(err.msg, "--reduce-dtype 'int8': not a reduce dtype (fp32|bf16)");
    CHECK(smoe_dtype_check_block("--int8-block", 1, &err) == SMOE_EINVAL);
    CHECK(smoe_dtype_check_block("--int8-block", 4097, &err) == SMOE_EINVAL);
    CHECK(smoe_dtype_check_block("--int8-block", 32, &err) == SMOE_OK);
    CHECK_STR(smoe_dtype_name(SMOE_DT_INT8), "int8");
    CHECK_INT(smoe_dtype_bytes(SMOE_DT_FP32, 32, 64), 256);
    CHECK_INT(smoe_dtype_bytes(SMOE_DT_BF16, 32, 64), 128);
    CHECK_INT(smoe_dtype_bytes(SMOE_DT_INT8, 32, 64), 2 * 36);
    CHECK_INT(smoe_dtype_rec_bytes(SMOE_DT_INT8, 32), 36);
    CHECK_INT(smoe_dtype_rec_elems(SMOE_DT_INT8, 32), 32);
    CHECK_INT(smoe_dtype_rec_elems(SMOE_DT_BF16, 32), 1);
}

int main(void)
{
    test_names();
    test_bf16_to_f32_all();
    test_bf16_from_f32_sweep();
    test_bf16_hand();
    test_int8_hand();
    test_int8_twin();
    test_streams();
    test_bf16_add_and_head();
    test_round_trip_error();
    return check_report();
}
