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

} // namespace

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
