// The bf16 mode's operand copies (cuda.h): rows x cols of a row-major fp32
// matrix of row stride ld into a compact bf16 temporary on the queue's
// stream, rounded to nearest even as dtype.h rounds (__float2bfloat16_rn).
#include "kern_impl.cuh"

#include <cuda_bf16.h>

namespace {

__global__ void to_bf16_k(__nv_bfloat16 *dst, const float *src, int64_t rows, int64_t cols,
                          int64_t ld)
{
    FOR_ELEMENTS(e, rows * cols) dst[e] = __float2bfloat16_rn(src[(e / cols) * ld + e % cols]);
}

// the bf16 wire, bit for bit dtype.h's conversions (convert.c's bit arithmetic)
__global__ void wire_to_bf16_k(uint16_t *dst, const float *src, int64_t n)
{
    FOR_ELEMENTS(i, n)
    {
        uint32_t u = __float_as_uint(src[i]);
        if ((u & 0x7fffffffu) > 0x7f800000u)
            dst[i] = (uint16_t)((u >> 16) | 0x0040u);
        else
            dst[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

__global__ void wire_from_bf16_k(float *dst, const uint16_t *src, int64_t n)
{
    FOR_ELEMENTS(i, n) dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

} // namespace

extern "C" void cuda_k_wire_to_bf16(void *s, uint16_t *dst, const float *src, int64_t n)
{
    LAUNCH(static_cast<smoe_kq *>(s), "to_bf16", dim3(blocks_for(n)), wire_to_bf16_k, dst, src, n);
}

extern "C" void cuda_k_wire_from_bf16(void *s, float *dst, const uint16_t *src, int64_t n)
{
    LAUNCH(static_cast<smoe_kq *>(s), "from_bf16", dim3(blocks_for(n)), wire_from_bf16_k, dst, src,
           n);
}

extern "C" void *cuda_k_to_bf16(smoe_kq *q, const float *src, int64_t rows, int64_t cols,
                                int64_t ld)
{
    __nv_bfloat16 *d = temp<__nv_bfloat16>(q, rows * cols, "gemm (bf16 copy)");
    if (d)
        LAUNCH(q, "gemm (bf16 copy)", dim3(blocks_for(rows * cols)), to_bf16_k, d, src, rows,
               cols, ld);
    return d;
}

extern "C" void cuda_k_untemp(smoe_kq *q, void *p) { untemp(q, p, "gemm (bf16 copy)"); }
