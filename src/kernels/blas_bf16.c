/* smoe_gemm with bf16 inputs (kernels.h): each operand's stored rows
 * copied into a compact buffer and rounded to bf16 there (dtype.h's round
 * trip: round to nearest even), then smoe_gemm on the copies. A product
 * of two bf16 values is exact in fp32, so only the sums' order separates
 * this from a GPU's bf16 GEMM with fp32 accumulation. */
#include "smoe/dtype.h"
#include "smoe/kernels.h"

#include <string.h>

/* rows x cols of x (row stride ld), compact and rounded to bf16 */
static float *rounded(const float *x, int64_t rows, int64_t cols, int64_t ld)
{
    float *r = smoe_malloc(sizeof *r * (size_t)(rows * cols > 0 ? rows * cols : 1));
    SMOE_ASSERT(r);
    for (int64_t i = 0; i < rows; i++)
        memcpy(r + i * cols, x + i * ld, sizeof *r * (size_t)cols);
    smoe_dtype_round_trip(SMOE_DT_BF16, 0, r, rows * cols);
    return r;
}

void smoe_gemm_bf16in(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc)
{
    /* the operands as stored: A is (m,k), or (k,m) when ta; B (k,n) or (n,k) */
    const int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    float *a16 = rounded(a, ar, ac, lda), *b16 = rounded(b, br, bc, ldb);
    smoe_gemm(ta, tb, m, n, k, alpha, a16, ac, b16, bc, beta, c, ldc);
    smoe_free(a16);
    smoe_free(b16);
}

void smoe_matmul_bf16in(float *y, const float *x, const float *w, int64_t t, int64_t k,
                        int64_t n, float beta)
{
    smoe_gemm_bf16in(0, 0, t, n, k, 1.0f, x, k, w, n, beta, y, n);
}

void smoe_matmul_bwd_bf16in(float *dx, float *dw, const float *dy, const float *x,
                            const float *w, int64_t t, int64_t k, int64_t n)
{
    if (dx)
        smoe_gemm_bf16in(0, 1, t, k, n, 1.0f, dy, n, w, n, 1.0f, dx, k);
    if (dw)
        smoe_gemm_bf16in(1, 0, k, n, t, 1.0f, x, k, dy, n, 1.0f, dw, n);
}
