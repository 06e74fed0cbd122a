/* smoe backend: the kernel table through which the model and the
 * optimizer run their math, so that one model source runs on more than one
 * device. The CPU table (smoe_kops_cpu, src/kernels/kops_cpu.c) forwards
 * every entry to its kernels.h function, which stays the reference: a
 * model on the CPU table computes bit for bit what kernels.h computes. A
 * device backend provides a second table with the same entries.
 *
 * Calling convention, the same for every entry:
 *  - the first argument is the stream the kernel is ordered on: the
 *    backend's own object (for a device, its queue with whatever the queue
 *    owns, such as a GEMM workspace); the CPU table ignores it (pass NULL)
 *    and runs each kernel to completion before returning;
 *  - arrays are pointers into the backend's memory (host memory for the
 *    CPU table) with the shapes, strides and aliasing rules of the
 *    kernels.h function of the same name;
 *  - no entry returns a value: a scalar result goes to an out pointer in
 *    the backend's memory, readable once the stream has run the kernel.
 * Entries cover exactly the kernels the model and the optimizer call.
 * A table is immutable and shared: thread-safe as the kernels are. This
 * header depends on nothing else of smoe, so the kernels module below the
 * model implements it as the runtime implements comm.h. */
#ifndef SMOE_BACKEND_H
#define SMOE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct smoe_adamw_cfg; /* kernels.h */

typedef struct smoe_kops {
    const char *name; /* "cpu", ... */
    /* 1: every entry has finished when it returns and the memory is the
     * host's (the CPU table), so a caller may read results in place;
     * 0: results are read with `read` */
    int synchronous;

    /* ---- the backend's memory ----
     * alloc: a zeroed block of `bytes` (NULL when out of memory); free: a
     * block alloc made, with its size (NULL: nothing), once the stream's
     * work is done with it. copy / fill0: bytes within the backend's
     * memory, copied / zeroed in the stream's order. read: bytes to host
     * memory, returning when the stream's earlier work and the copy are
     * done (a synchronisation point); write: bytes from host memory,
     * returning when copied (the host buffer may be reused at once; the
     * stream's later work sees them). */
    void *(*alloc)(void *stream, size_t bytes);
    void (*free)(void *stream, void *p, size_t bytes);
    void (*copy)(void *stream, void *dst, const void *src, size_t bytes);
    void (*fill0)(void *stream, void *p, size_t bytes);
    void (*read)(void *stream, void *host, const void *src, size_t bytes);
    void (*write)(void *stream, void *dst, const void *host, size_t bytes);

    /* ---- matrix products: smoe_gemm, smoe_matmul, smoe_matmul_bwd ---- */
    void (*gemm)(void *stream, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc);
    void (*matmul)(void *stream, float *y, const float *x, const float *w, int64_t t, int64_t k,
                   int64_t n, float beta);
    void (*matmul_bwd)(void *stream, float *dx, float *dw, const float *dy, const float *x,
                       const float *w, int64_t t, int64_t k, int64_t n);

    /* ---- smoe_rmsnorm, smoe_rmsnorm_bwd ---- */
    void (*rmsnorm)(void *stream, float *y, float *rstd, const float *x, const float *scale,
                    int64_t t, int64_t d, float eps);
    void (*rmsnorm_bwd)(void *stream, float *dx, float *dscale, const float *dy, const float *x,
                        const float *scale, const float *rstd, int64_t t, int64_t d);

    /* ---- smoe_swiglu_sig, smoe_swiglu_sig_bwd ---- */
    void (*swiglu_sig)(void *stream, float *h, float *s, const float *a, const float *b,
                       int64_t n);
    void (*swiglu_sig_bwd)(void *stream, float *da, float *db, const float *dh, const float *a,
                           const float *b, const float *s, int64_t n);

    /* ---- router scores: smoe_sigmoid, smoe_softmax_rows(_bwd) ---- */
    void (*sigmoid)(void *stream, float *y, const float *x, int64_t n);
    void (*softmax_rows)(void *stream, float *x, int64_t t, int64_t n);
    void (*softmax_rows_bwd)(void *stream, float *dx, const float *dy, const float *y, int64_t t,
                             int64_t n);

    /* ---- smoe_rope_apply_tab (tables from smoe_rope_table) ---- */
    void (*rope_apply_tab)(void *stream, float *x, const int32_t *pos, int64_t t, int64_t h,
                           int64_t d, int64_t stride, int64_t hstride, const float *cs,
                           const float *sn, int64_t npos, int halves, float scale, int inverse);

    /* ---- causal attention of one sequence: smoe_attention(_bwd) ---- */
    void (*attention)(void *stream, float *o, float *p, const float *q, const float *k,
                      const float *v, int64_t s, int64_t h, int64_t dk, int64_t dv, int64_t qs,
                      int64_t ks, int64_t vs, float scale);
    void (*attention_bwd)(void *stream, float *dq, float *dk, float *dv, const float *dout,
                          const float *p, const float *q, const float *k, const float *v,
                          int64_t s, int64_t h, int64_t dk_, int64_t dv_, int64_t qs, int64_t ks,
                          int64_t vs, float scale, float *scratch);

    /* ---- smoe_cross_entropy_z: *loss = its return value ---- */
    void (*cross_entropy_z)(void *stream, float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v, float scale, float z,
                            double *loss, double *zsum);

    /* ---- moving rows: smoe_embed_rows(_bwd), smoe_mla_kv_split / _merge ---- */
    void (*embed_rows)(void *stream, float *x, const float *embed, const int32_t *tokens,
                       int64_t t, int64_t d, int64_t vocab);
    void (*embed_rows_bwd)(void *stream, float *dembed, const int32_t *tokens, const float *dx,
                           int64_t t, int64_t d, int64_t vocab);
    void (*mla_kv_split)(void *stream, float *k, float *v, const float *kv, const float *kpe,
                         int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv);
    void (*mla_kv_merge)(void *stream, float *dkv, float *dkpe, const float *dk,
                         const float *dv, int64_t t, int64_t h, int64_t dn, int64_t dr,
                         int64_t dv_);

    /* ---- the MoE rows: smoe_moe_dispatch_rows, _combine_rows, _combine_bwd
     * (dwk in the backend's memory), _dispatch_bwd ---- */
    void (*moe_dispatch_rows)(void *stream, float *er, const float *x, const int64_t *pos,
                              int64_t t, int64_t k, int64_t d);
    void (*moe_combine_rows)(void *stream, float *x, const float *er, const int64_t *pos,
                             const float *wts, int64_t t, int64_t k, int64_t d);
    void (*moe_combine_bwd)(void *stream, float *der, float *dwk, const float *dx,
                            const float *er, const int64_t *pos, const float *wts, int64_t t,
                            int64_t k, int64_t d);
    void (*moe_dispatch_bwd)(void *stream, float *dx, const float *der, const int64_t *pos,
                             int64_t t, int64_t k, int64_t d);

    /* ---- smoe_adamw_step ---- */
    void (*adamw_step)(void *stream, float *p, float *m, float *v, const float *g, int64_t n,
                       const struct smoe_adamw_cfg *c);

    /* ---- smoe_vec_add, smoe_vec_axpy; smoe_vec_dot_scale with
     * *dot = (float) its return value ---- */
    void (*vec_add)(void *stream, float *y, const float *x, int64_t n);
    void (*vec_axpy)(void *stream, float *y, float a, const float *x, int64_t n);
    void (*vec_dot_scale)(void *stream, float *r, float a, const float *d, const float *y,
                          int64_t n, float *dot);
    /* *out (the backend's memory) = smoe_vec_sumsq(x, n) */
    void (*vec_sumsq)(void *stream, const float *x, int64_t n, double *out);

    /* ---- the bf16 wire (dtype.h): smoe_bf16_from_f32 (nearest even, NaN
     * quieted with its sign and top bits), smoe_bf16_to_f32 (exact); bit
     * for bit on every table ---- */
    void (*to_bf16)(void *stream, uint16_t *dst, const float *src, int64_t n);
    void (*from_bf16)(void *stream, float *dst, const uint16_t *src, int64_t n);

    /* ---- timing: *out (the backend's memory) = the device's clock in
     * seconds when the stream reaches the stamp (one clock for every
     * stream of a device; the CPU table: smoe_now(), at once) ---- */
    void (*stamp)(void *stream, double *out);
} smoe_kops;

/* A device queue's modes (smoe_kq_cuda_new, smoe_eq_new): BF16_GEMM rounds
 * the matrix products' inputs to bf16 and accumulates in fp32, as
 * smoe_kops_cpu_bf16 does (the mode's reference); 0 is fp32 throughout. */
enum { SMOE_KOPS_BF16_GEMM = 1 };

/* A buffer of `bytes` in table k's memory, for code that runs on any
 * table: on a synchronous table the host allocator's (smoe_malloc, not
 * zeroed: the CPU path's allocations as they always were), else k's alloc
 * (zeroed). NULL when out of memory. Freed with smoe_kops_buf_free and the
 * same size (p NULL: nothing). (src/kernels/kops_cpu.c) */
void *smoe_kops_buf(const smoe_kops *k, void *stream, size_t bytes);
void smoe_kops_buf_free(const smoe_kops *k, void *stream, void *p, size_t bytes);

/* The CPU table: each entry calls its kernels.h function; stream unused. */
const smoe_kops *smoe_kops_cpu(void);
/* The same with the matrix products' inputs rounded to bf16 first
 * (smoe_gemm_bf16in): the reference of the device tables' bf16 mode. */
const smoe_kops *smoe_kops_cpu_bf16(void);

#ifdef __cplusplus
}
#endif
#endif
