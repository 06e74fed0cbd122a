/* smoe dtype: the element types a weight gather moves on the wire, and
 * their conversion kernels. Master weights, gradients and the optimizer
 * stay fp32; a compressed gather converts each rank's shard before the
 * all-gather and converts the gathered bytes back into the fp32 buffer.
 * This module is the one owner of the dtype names, their parsing, their
 * sizes and the conversions; plan (bytes), sched (costs) and runtime (the
 * gathers) all use it. Each kernel has a naive twin (suffix _ref) that the
 * tests use as the oracle, as in kernels.h.
 *
 * DESIGN (records)
 *   A compressed tensor is a row-major tensor of records: the last dim of
 *   a tensor of shape (..., n) is cut into n / smoe_dtype_rec_elems records
 *   of smoe_dtype_rec_bytes bytes each, every other dim unchanged.
 *     fp32: one element, 4 bytes (IEEE binary32, as stored)
 *     bf16: one element, 2 bytes (the upper half of binary32, round to
 *           nearest even; NaN stays NaN, quieted; +-Inf stays +-Inf; a
 *           finite value beyond bf16's range rounds to Inf, as RNE says)
 *     int8: one block of B elements, 4 + B bytes: the block's fp32 scale
 *           s = amax / 127 (amax = max |x| of the block; for amax near
 *           FLT_MAX stepped down to the largest float whose 127 s is
 *           finite, so no finite weight comes back Inf), then B signed
 *           bytes q = round-half-even(x / s) clamped to [-127, 127]; the
 *           value back is q * s. An all-zero block (or one whose s
 *           underflows to 0) has s = 0 and comes back all zero; a block
 *           holding NaN or Inf comes back all NaN (never silently finite).
 *   So the same MPI datatype machinery that gathers fp32 elements gathers
 *   records (a record is the element, the last dim counts records). The
 *   int8 block grid lies along the last dim in global coordinates: block k
 *   covers global elements [k B, (k+1) B) of every row, so it is the same
 *   on every mesh; the plan (smoe_gather_check_blocks, plan.h) refuses a
 *   weight whose shard's last dim is not a whole number of blocks.
 *
 *   A compressed record stream is never larger than its fp32 form (B >= 2),
 *   so a gather may receive it into the tail of the fp32 buffer and expand
 *   it in place, front to back (smoe_dtype_tail, smoe_dtype_unpack_tail).
 */
#ifndef SMOE_DTYPE_H
#define SMOE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum smoe_dtype {
    SMOE_DT_FP32 = 0,
    SMOE_DT_BF16 = 1,
    SMOE_DT_INT8 = 2
} smoe_dtype;

/* The default int8 block (elements per fp32 scale): 32, the block of
 * ggml's Q8_0 format (one fp32-class scale per 32 int8 values). */
#define SMOE_INT8_BLOCK_DEFAULT 32
#define SMOE_INT8_BLOCK_MIN 2
#define SMOE_INT8_BLOCK_MAX 4096

/* "fp32", "bf16", "int8". */
const char *smoe_dtype_name(smoe_dtype t);
/* Parse the value of option `flag` (named in the message) into *out;
 * `allowed` is a bit mask of the accepted dtypes (1u << SMOE_DT_...).
 * SMOE_EINVAL, with one line naming the flag, the value and the choices. */
SMOE_MUST_CHECK
smoe_status smoe_dtype_parse(const char *flag, const char *s, unsigned allowed,
                             smoe_dtype *out, smoe_err *err);
/* SMOE_EINVAL unless SMOE_INT8_BLOCK_MIN <= block <= SMOE_INT8_BLOCK_MAX. */
SMOE_MUST_CHECK
smoe_status smoe_dtype_check_block(const char *flag, int64_t block, smoe_err *err);

/* Elements of the last dim per record, and bytes per record. */
int64_t smoe_dtype_rec_elems(smoe_dtype t, int64_t block);
int64_t smoe_dtype_rec_bytes(smoe_dtype t, int64_t block);
/* Bytes of n elements in whole records (n a multiple of rec_elems). */
int64_t smoe_dtype_bytes(smoe_dtype t, int64_t block, int64_t n);

/* ---- conversion kernels (n elements; int8: n a multiple of block) ---- */
/* bf16 (n) from fp32 (n), round to nearest even, and back. */
void smoe_bf16_from_f32(uint16_t *dst, const float *src, int64_t n);
void smoe_bf16_to_f32(float *dst, const uint16_t *src, int64_t n);
void smoe_bf16_from_f32_ref(uint16_t *dst, const float *src, int64_t n);
void smoe_bf16_to_f32_ref(float *dst, const uint16_t *src, int64_t n);
/* int8 records (n / block of them, 4 + block bytes each) from fp32 (n). */
void smoe_int8_quant(void *dst, const float *src, int64_t n, int64_t block);
void smoe_int8_dequant(float *dst, const void *src, int64_t n, int64_t block);
void smoe_int8_quant_ref(void *dst, const float *src, int64_t n, int64_t block);
void smoe_int8_dequant_ref(float *dst, const void *src, int64_t n, int64_t block);

/* Any dtype: records of n elements to dst (smoe_dtype_bytes bytes) and
 * back (fp32: a copy). dst and src do not overlap. */
void smoe_dtype_pack(smoe_dtype t, int64_t block, void *dst, const float *src, int64_t n);
void smoe_dtype_unpack(smoe_dtype t, int64_t block, float *dst, const void *src, int64_t n);
/* Where the records of n elements sit when they fill the tail of an fp32
 * buffer of n elements: (char *)buf + 4 n - smoe_dtype_bytes(n). */
void *smoe_dtype_tail(smoe_dtype t, int64_t block, float *buf, int64_t n);
/* Pack in place the n fp32 elements of buf into records at its start
 * (front to back, through a small stack buffer; fp32: no-op). */
void smoe_dtype_pack_head(smoe_dtype t, int64_t block, float *buf, int64_t n);
/* Pack a compact block of a row-major fp32 tensor (rank <= 16, shape B)
 * into its place in the tensor's record stream dst: src holds the block
 * (shape blk, at offset off), each of its rows whole records (blk and off
 * of the last dim multiples of the record's elements, as is B's), packed
 * straight into place row by row (no scratch). A gather's shard packed
 * into the tail of its buffer (smoe_dtype_tail). */
void smoe_dtype_pack_block(smoe_dtype t, int64_t block, int rank, const int64_t B[],
                           const int64_t blk[], const int64_t off[], const float *src, void *dst);
/* The bf16 sum of MPI reductions: inout[i] = bf16(fp32(in[i]) + fp32(inout[i]))
 * (round to nearest even), n elements. */
void smoe_bf16_add(uint16_t *inout, const uint16_t *in, int64_t n);
/* Expand in place the records held at smoe_dtype_tail(buf) into buf's n
 * fp32 elements (front to back, through a small stack buffer; fp32: no-op). */
void smoe_dtype_unpack_tail(smoe_dtype t, int64_t block, float *buf, int64_t n);
/* The value a gather in dtype t hands back for x: pack then unpack, in
 * place on n elements (the single-rank runtime's gather). */
void smoe_dtype_round_trip(smoe_dtype t, int64_t block, float *x, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
