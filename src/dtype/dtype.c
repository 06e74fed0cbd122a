/* The wire dtypes of weight gathers: names, parsing, record sizes, and the
 * record streams (pack, unpack, the in-place tail expansion). See the
 * DESIGN block in dtype.h. */
#include "smoe/dtype.h"

#include <stdio.h>
#include <string.h>

static const char *const names[] = { "fp32", "bf16", "int8" };
#define N_DTYPES ((int)(sizeof names / sizeof names[0]))

const char *smoe_dtype_name(smoe_dtype t)
{
    return (int)t >= 0 && (int)t < N_DTYPES ? names[t] : "?";
}

smoe_status smoe_dtype_parse(const char *flag, const char *s, unsigned allowed,
                             smoe_dtype *out, smoe_err *err)
{
    char choices[64] = "";
    size_t k = 0;
    for (int i = 0; i < N_DTYPES; i++) {
        if (!(allowed & (1u << i)))
            continue;
        if (s && strcmp(s, names[i]) == 0) {
            *out = (smoe_dtype)i;
            return SMOE_OK;
        }
        size_t l = strlen(names[i]);
        if (k + l + 3 < sizeof choices) {
            if (k)
                choices[k++] = '|';
            memcpy(choices + k, names[i], l + 1);
            k += l;
        }
    }
    /* the flag's role: "--reduce-dtype" a reduce dtype, "--int8-fallback"
     * an int8 fallback dtype */
    char role[48];
    snprintf(role, sizeof role, "%s", flag + strspn(flag, "-"));
    size_t n = strlen(role);
    if (n > 6 && strcmp(role + n - 6, "-dtype") == 0)
        role[n - 6] = 0;
    for (char *c = role; *c; c++)
        if (*c == '-')
            *c = ' ';
    return smoe_err_set(err, SMOE_EINVAL, "%s '%s': not %s %s dtype (%s)", flag, s ? s : "",
                        strchr("aeiou", role[0]) && role[0] ? "an" : "a", role, choices);
}

smoe_status smoe_dtype_check_block(const char *flag, int64_t block, smoe_err *err)
{
    if (block >= SMOE_INT8_BLOCK_MIN && block <= SMOE_INT8_BLOCK_MAX)
        return SMOE_OK;
    return smoe_err_set(err, SMOE_EINVAL, "%s %lld: the int8 block must be %d..%d elements",
                        flag, (long long)block, SMOE_INT8_BLOCK_MIN, SMOE_INT8_BLOCK_MAX);
}

int64_t smoe_dtype_rec_elems(smoe_dtype t, int64_t block)
{
    return t == SMOE_DT_INT8 ? block : 1;
}

int64_t smoe_dtype_rec_bytes(smoe_dtype t, int64_t block)
{
    switch (t) {
    case SMOE_DT_BF16: return 2;
    case SMOE_DT_INT8: return 4 + block;
    case SMOE_DT_FP32: break;
    }
    return 4;
}

int64_t smoe_dtype_bytes(smoe_dtype t, int64_t block, int64_t n)
{
    int64_t e = smoe_dtype_rec_elems(t, block);
    return (n + e - 1) / e * smoe_dtype_rec_bytes(t, block);
}

void smoe_dtype_pack(smoe_dtype t, int64_t block, void *dst, const float *src, int64_t n)
{
    switch (t) {
    case SMOE_DT_BF16: smoe_bf16_from_f32(dst, src, n); return;
    case SMOE_DT_INT8: smoe_int8_quant(dst, src, n, block); return;
    case SMOE_DT_FP32: break;
    }
    memcpy(dst, src, sizeof *src * (size_t)n);
}

void smoe_dtype_unpack(smoe_dtype t, int64_t block, float *dst, const void *src, int64_t n)
{
    switch (t) {
    case SMOE_DT_BF16: smoe_bf16_to_f32(dst, src, n); return;
    case SMOE_DT_INT8: smoe_int8_dequant(dst, src, n, block); return;
    case SMOE_DT_FP32: break;
    }
    memcpy(dst, src, sizeof *dst * (size_t)n);
}

void *smoe_dtype_tail(smoe_dtype t, int64_t block, float *buf, int64_t n)
{
    return (char *)buf + 4 * n - smoe_dtype_bytes(t, block, n);
}

/* Records are read chunk by chunk into a stack buffer before their fp32
 * values are written: the write of chunk c ends at 4 (c+1) K elements'
 * bytes, never past the start of chunk c+1's records (tail offset 4n -
 * bytes(n) plus (c+1) bytes(K)), because a record is at most as large as
 * its fp32 elements. */
void smoe_dtype_unpack_tail(smoe_dtype t, int64_t block, float *buf, int64_t n)
{
    if (t == SMOE_DT_FP32)
        return;
    int64_t e = smoe_dtype_rec_elems(t, block), rb = smoe_dtype_rec_bytes(t, block);
    _Alignas(8) unsigned char tmp[8192]; /* >= one record: block <= 4096 */
    int64_t per = (int64_t)sizeof tmp / rb;
    const unsigned char *src = smoe_dtype_tail(t, block, buf, n);
    int64_t nrec = n / e;
    for (int64_t r = 0; r < nrec; r += per) {
        int64_t k = nrec - r < per ? nrec - r : per;
        memcpy(tmp, src + r * rb, (size_t)(k * rb));
        smoe_dtype_unpack(t, block, buf + r * e, tmp, k * e);
    }
}

/* Chunk c's floats are copied out before its records are written; the
 * records end at (c+1) bytes(K), never past the next chunk's first float at
 * 4 (c+1) K bytes. */
void smoe_dtype_pack_head(smoe_dtype t, int64_t block, float *buf, int64_t n)
{
    if (t == SMOE_DT_FP32)
        return;
    _Alignas(8) float tmp[2048];
    int64_t e = smoe_dtype_rec_elems(t, block);
    int64_t k = (int64_t)(sizeof tmp / sizeof *tmp) / e * e; /* whole records */
    unsigned char *dst = (unsigned char *)buf;
    for (int64_t i = 0; i < n; i += k) {
        int64_t m = n - i < k ? n - i : k;
        memcpy(tmp, buf + i, sizeof *tmp * (size_t)m);
        smoe_dtype_pack(t, block, dst + smoe_dtype_bytes(t, block, i), tmp, m);
    }
}

void smoe_bf16_add(uint16_t *inout, const uint16_t *in, int64_t n)
{
    float a[256], b[256];
    for (int64_t i = 0; i < n; i += 256) {
        int64_t m = n - i < 256 ? n - i : 256;
        smoe_bf16_to_f32(a, inout + i, m);
        smoe_bf16_to_f32(b, in + i, m);
        for (int64_t j = 0; j < m; j++)
            a[j] += b[j];
        smoe_bf16_from_f32(inout + i, a, m);
    }
}

void smoe_dtype_round_trip(smoe_dtype t, int64_t block, float *x, int64_t n)
{
    if (t == SMOE_DT_FP32)
        return;
    _Alignas(8) unsigned char tmp[8192];
    int64_t e = smoe_dtype_rec_elems(t, block), rb = smoe_dtype_rec_bytes(t, block);
    int64_t k = (int64_t)sizeof tmp / rb * e; /* elements per chunk, whole records */
    for (int64_t i = 0; i < n; i += k) {
        int64_t m = n - i < k ? n - i : k;
        smoe_dtype_pack(t, block, tmp, x + i, m);
        smoe_dtype_unpack(t, block, x + i, tmp, m);
    }
}

void smoe_dtype_pack_block(smoe_dtype t, int64_t block, int rank, const int64_t B[],
                           const int64_t blk[], const int64_t off[], const float *src, void *dst)
{
    SMOE_ASSERT(rank >= 1 && rank <= 16);
    int64_t rec = smoe_dtype_rec_elems(t, block), esz = smoe_dtype_rec_bytes(t, block);
    int64_t n = blk[rank - 1], rows = 1, idx[16] = { 0 };
    for (int d = 0; d < rank - 1; d++)
        rows *= blk[d];
    for (int64_t row = 0; row < rows; row++) {
        int64_t e = 0; /* the row's first element in B (a record boundary) */
        for (int d = 0; d < rank - 1; d++)
            e = e * B[d] + off[d] + idx[d];
        e = e * B[rank - 1] + off[rank - 1];
        smoe_dtype_pack(t, block, (char *)dst + e / rec * esz, src + row * n, n);
        for (int d = rank - 2; d >= 0 && ++idx[d] == blk[d]; d--)
            idx[d] = 0;
    }
}
