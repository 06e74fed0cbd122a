/* What the CUDA module's files share (internal to src/cuda/): the device
 * layer's stream, the kernel queue, and the queue's sticky failure. */
#ifndef SMOE_CUDA_IMPL_H
#define SMOE_CUDA_IMPL_H

#include <cuda_runtime_api.h>

#include "smoe/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* one stream of dev_cuda.c's device; the list lets sync visit every one */
struct smoe_dev_stream {
    cudaStream_t s;
    smoe_dev_stream *next;
};

typedef struct cuda_lt cuda_lt; /* gemm_lt.c: cuBLASLt handle, workspace, plans */

struct smoe_kq {
    const smoe_dev *dev;
    cudaStream_t stream;
    unsigned flags; /* SMOE_KOPS_BF16_GEMM or 0 */
    cuda_lt *lt;
    smoe_err err; /* the first failure; err.code == SMOE_OK while none */
};

/* Keep the first failure: "kernel WHAT: CUDA's message". */
void kq_fail(smoe_kq *q, const char *what, const char *msg);
/* After a launch: a launch error kept as kq_fail(q, what, ...). */
void kq_check_launch(smoe_kq *q, const char *what);

/* gemm_lt.c: the queue's cuBLASLt state (workspace from q->dev) */
SMOE_MUST_CHECK smoe_status cuda_lt_new(smoe_kq *q, size_t workspace_bytes, smoe_err *err);
void cuda_lt_free(smoe_kq *q);
int cuda_lt_plans(const cuda_lt *lt);
/* smoe_gemm's contract (kernels.h) on the queue's stream */
void cuda_gemm(void *q, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc);
void cuda_matmul(void *q, float *y, const float *x, const float *w, int64_t t, int64_t k,
                 int64_t n, float beta);
void cuda_matmul_bwd(void *q, float *dx, float *dw, const float *dy, const float *x,
                     const float *w, int64_t t, int64_t k, int64_t n);
/* timer.cu: one thread that spins on the global timer for ns nanoseconds
 * on stream s (the device layer's delay; the launch's error); the table's
 * stamp entry */
cudaError_t cuda_spin(unsigned long long ns, cudaStream_t s);
void cuda_k_stamp(void *s, double *out);
/* convert.cu: a compact bf16 copy (rows, cols) of fp32 rows ld apart, a
 * temporary of the queue's stream (NULL: the queue failed); its release */
void *cuda_k_to_bf16(smoe_kq *q, const float *src, int64_t rows, int64_t cols, int64_t ld);
void cuda_k_untemp(smoe_kq *q, void *p);

/* kq.c: the memory entries of backend.h */
void *cuda_mem_alloc(void *q, size_t bytes);
void cuda_mem_free(void *q, void *p, size_t bytes);
void cuda_mem_copy(void *q, void *dst, const void *src, size_t bytes);
void cuda_mem_fill0(void *q, void *p, size_t bytes);
void cuda_mem_read(void *q, void *host, const void *src, size_t bytes);
void cuda_mem_write(void *q, void *dst, const void *host, size_t bytes);

/* rows.cu: the moving rows of backend.h */
void cuda_k_embed_rows(void *s, float *x, const float *embed, const int32_t *tokens, int64_t t,
                       int64_t d, int64_t vocab);
void cuda_k_embed_rows_bwd(void *s, float *dembed, const int32_t *tokens, const float *dx,
                           int64_t t, int64_t d, int64_t vocab);
void cuda_k_mla_kv_split(void *s, float *k, float *v, const float *kv, const float *kpe,
                         int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv);
void cuda_k_mla_kv_merge(void *s, float *dkv, float *dkpe, const float *dk, const float *dv,
                         int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv_);

void cuda_k_moe_dispatch_rows(void *s, float *er, const float *x, const int64_t *pos, int64_t t,
                              int64_t k, int64_t d);
void cuda_k_moe_combine_rows(void *s, float *x, const float *er, const int64_t *pos,
                             const float *wts, int64_t t, int64_t k, int64_t d);
void cuda_k_moe_combine_bwd(void *s, float *der, float *dwk, const float *dx, const float *er,
                            const int64_t *pos, const float *wts, int64_t t, int64_t k,
                            int64_t d);
void cuda_k_moe_dispatch_bwd(void *s, float *dx, const float *der, const int64_t *pos, int64_t t,
                             int64_t k, int64_t d);

/* attention.cu and reduce.cu: the entries of the same names of backend.h */
void cuda_k_attention(void *s, float *o, float *p, const float *q, const float *k,
                      const float *v, int64_t sl, int64_t h, int64_t dk, int64_t dv, int64_t qs,
                      int64_t ks, int64_t vs, float scale);
void cuda_k_attention_bwd(void *s, float *dq, float *dk, float *dv, const float *dout,
                          const float *p, const float *q, const float *k, const float *v,
                          int64_t sl, int64_t h, int64_t dk_, int64_t dv_, int64_t qs,
                          int64_t ks, int64_t vs, float scale, float *scratch);
void cuda_k_cross_entropy_z(void *s, float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v, float scale, float z,
                            double *loss, double *zsum);
void cuda_k_vec_dot_scale(void *s, float *r, float a, const float *d, const float *y,
                          int64_t n, float *dot);
void cuda_k_vec_sumsq(void *s, const float *x, int64_t n, double *out);
/* convert.cu: the bf16 wire entries */
void cuda_k_wire_to_bf16(void *s, uint16_t *dst, const float *src, int64_t n);
void cuda_k_wire_from_bf16(void *s, float *dst, const uint16_t *src, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
