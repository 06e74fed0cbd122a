/* The CPU kernel table (backend.h): every kernel entry forwards its
 * arguments, unchanged and in order, to the kernels.h function of the same
 * name, so a model on this table computes bit for bit what the kernels
 * compute; the memory is the host's (slabs, zeroed). The stream argument is
 * unused: each entry has finished when it returns. */
#include "smoe/backend.h"
#include "smoe/dtype.h"
#include "smoe/kernels.h"

#include <string.h>

/* ---- memory: the host's; slabs, so a block is zeroed ---- */

static void *mem_alloc(void *stream, size_t bytes)
{
    (void)stream;
    return smoe_slab_alloc(bytes);
}

static void mem_free(void *stream, void *p, size_t bytes)
{
    (void)stream;
    if (p)
        smoe_slab_free(p, bytes);
}

static void mem_copy(void *stream, void *dst, const void *src, size_t bytes)
{
    (void)stream;
    if (bytes)
        memmove(dst, src, bytes);
}

static void mem_fill0(void *stream, void *p, size_t bytes)
{
    (void)stream;
    if (bytes)
        memset(p, 0, bytes);
}

static void gemm(void *stream, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc)
{
    (void)stream;
    smoe_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void matmul(void *stream, float *y, const float *x, const float *w, int64_t t, int64_t k,
                   int64_t n, float beta)
{
    (void)stream;
    smoe_matmul(y, x, w, t, k, n, beta);
}

static void matmul_bwd(void *stream, float *dx, float *dw, const float *dy, const float *x,
                       const float *w, int64_t t, int64_t k, int64_t n)
{
    (void)stream;
    smoe_matmul_bwd(dx, dw, dy, x, w, t, k, n);
}

static void rmsnorm(void *stream, float *y, float *rstd, const float *x, const float *scale,
                    int64_t t, int64_t d, float eps)
{
    (void)stream;
    smoe_rmsnorm(y, rstd, x, scale, t, d, eps);
}

static void rmsnorm_bwd(void *stream, float *dx, float *dscale, const float *dy, const float *x,
                        const float *scale, const float *rstd, int64_t t, int64_t d)
{
    (void)stream;
    smoe_rmsnorm_bwd(dx, dscale, dy, x, scale, rstd, t, d);
}

static void swiglu_sig(void *stream, float *h, float *s, const float *a, const float *b,
                       int64_t n)
{
    (void)stream;
    smoe_swiglu_sig(h, s, a, b, n);
}

static void swiglu_sig_bwd(void *stream, float *da, float *db, const float *dh, const float *a,
                           const float *b, const float *s, int64_t n)
{
    (void)stream;
    smoe_swiglu_sig_bwd(da, db, dh, a, b, s, n);
}

static void sigmoid(void *stream, float *y, const float *x, int64_t n)
{
    (void)stream;
    smoe_sigmoid(y, x, n);
}

static void softmax_rows(void *stream, float *x, int64_t t, int64_t n)
{
    (void)stream;
    smoe_softmax_rows(x, t, n);
}

static void softmax_rows_bwd(void *stream, float *dx, const float *dy, const float *y, int64_t t,
                             int64_t n)
{
    (void)stream;
    smoe_softmax_rows_bwd(dx, dy, y, t, n);
}

static void rope_apply_tab(void *stream, float *x, const int32_t *pos, int64_t t, int64_t h,
                           int64_t d, int64_t stride, int64_t hstride, const float *cs,
                           const float *sn, int64_t npos, int halves, float scale, int inverse)
{
    (void)stream;
    smoe_rope_apply_tab(x, pos, t, h, d, stride, hstride, cs, sn, npos, halves, scale, inverse);
}

static void attention(void *stream, float *o, float *p, const float *q, const float *k,
                      const float *v, int64_t s, int64_t h, int64_t dk, int64_t dv, int64_t qs,
                      int64_t ks, int64_t vs, float scale)
{
    (void)stream;
    smoe_attention(o, p, q, k, v, s, h, dk, dv, qs, ks, vs, scale);
}

static void attention_bwd(void *stream, float *dq, float *dk, float *dv, const float *dout,
                          const float *p, const float *q, const float *k, const float *v,
                          int64_t s, int64_t h, int64_t dk_, int64_t dv_, int64_t qs, int64_t ks,
                          int64_t vs, float scale, float *scratch)
{
    (void)stream;
    smoe_attention_bwd(dq, dk, dv, dout, p, q, k, v, s, h, dk_, dv_, qs, ks, vs, scale, scratch);
}

static void cross_entropy_z(void *stream, float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v, float scale, float z,
                            double *loss, double *zsum)
{
    (void)stream;
    *loss = smoe_cross_entropy_z(dlogits, logits, targets, t, v, scale, z, zsum);
}

static void adamw_step(void *stream, float *p, float *m, float *v, const float *g, int64_t n,
                       const smoe_adamw_cfg *c)
{
    (void)stream;
    smoe_adamw_step(p, m, v, g, n, c);
}

static void vec_add(void *stream, float *y, const float *x, int64_t n)
{
    (void)stream;
    smoe_vec_add(y, x, n);
}

static void vec_axpy(void *stream, float *y, float a, const float *x, int64_t n)
{
    (void)stream;
    smoe_vec_axpy(y, a, x, n);
}

static void vec_dot_scale(void *stream, float *r, float a, const float *d, const float *y,
                          int64_t n, float *dot)
{
    (void)stream;
    *dot = (float)smoe_vec_dot_scale(r, a, d, y, n);
}

static void embed_rows(void *stream, float *x, const float *embed, const int32_t *tokens,
                       int64_t t, int64_t d, int64_t vocab)
{
    (void)stream;
    smoe_embed_rows(x, embed, tokens, t, d, vocab);
}

static void embed_rows_bwd(void *stream, float *dembed, const int32_t *tokens, const float *dx,
                           int64_t t, int64_t d, int64_t vocab)
{
    (void)stream;
    smoe_embed_rows_bwd(dembed, tokens, dx, t, d, vocab);
}

static void mla_kv_split(void *stream, float *k, float *v, const float *kv, const float *kpe,
                         int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv)
{
    (void)stream;
    smoe_mla_kv_split(k, v, kv, kpe, t, h, dn, dr, dv);
}

static void mla_kv_merge(void *stream, float *dkv, float *dkpe, const float *dk, const float *dv,
                         int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv_)
{
    (void)stream;
    smoe_mla_kv_merge(dkv, dkpe, dk, dv, t, h, dn, dr, dv_);
}

static void moe_dispatch_rows(void *stream, float *er, const float *x, const int64_t *pos,
                              int64_t t, int64_t k, int64_t d)
{
    (void)stream;
    smoe_moe_dispatch_rows(er, x, pos, t, k, d);
}

static void moe_combine_rows(void *stream, float *x, const float *er, const int64_t *pos,
                             const float *wts, int64_t t, int64_t k, int64_t d)
{
    (void)stream;
    smoe_moe_combine_rows(x, er, pos, wts, t, k, d);
}

static void moe_combine_bwd(void *stream, float *der, float *dwk, const float *dx,
                            const float *er, const int64_t *pos, const float *wts, int64_t t,
                            int64_t k, int64_t d)
{
    (void)stream;
    smoe_moe_combine_bwd(der, dwk, dx, er, pos, wts, t, k, d);
}

static void moe_dispatch_bwd(void *stream, float *dx, const float *der, const int64_t *pos,
                             int64_t t, int64_t k, int64_t d)
{
    (void)stream;
    smoe_moe_dispatch_bwd(dx, der, pos, t, k, d);
}

static void vec_sumsq(void *stream, const float *x, int64_t n, double *out)
{
    (void)stream;
    *out = smoe_vec_sumsq(x, n);
}

static void to_bf16(void *stream, uint16_t *dst, const float *src, int64_t n)
{
    (void)stream;
    smoe_bf16_from_f32(dst, src, n);
}

static void from_bf16(void *stream, float *dst, const uint16_t *src, int64_t n)
{
    (void)stream;
    smoe_bf16_to_f32(dst, src, n);
}

static void stamp(void *stream, double *out)
{
    (void)stream;
    *out = smoe_now();
}

/* every entry but the name and the matrix products, shared by both tables */
#define CPU_ENTRIES \
    .synchronous = 1, \
    .alloc = mem_alloc, \
    .free = mem_free, \
    .copy = mem_copy, \
    .fill0 = mem_fill0, \
    .read = mem_copy, \
    .write = mem_copy, \
    .rmsnorm = rmsnorm, \
    .rmsnorm_bwd = rmsnorm_bwd, \
    .swiglu_sig = swiglu_sig, \
    .swiglu_sig_bwd = swiglu_sig_bwd, \
    .sigmoid = sigmoid, \
    .softmax_rows = softmax_rows, \
    .softmax_rows_bwd = softmax_rows_bwd, \
    .rope_apply_tab = rope_apply_tab, \
    .attention = attention, \
    .attention_bwd = attention_bwd, \
    .cross_entropy_z = cross_entropy_z, \
    .embed_rows = embed_rows, \
    .embed_rows_bwd = embed_rows_bwd, \
    .mla_kv_split = mla_kv_split, \
    .mla_kv_merge = mla_kv_merge, \
    .moe_dispatch_rows = moe_dispatch_rows, \
    .moe_combine_rows = moe_combine_rows, \
    .moe_combine_bwd = moe_combine_bwd, \
    .moe_dispatch_bwd = moe_dispatch_bwd, \
    .adamw_step = adamw_step, \
    .vec_add = vec_add, \
    .vec_axpy = vec_axpy, \
    .vec_dot_scale = vec_dot_scale, \
    .vec_sumsq = vec_sumsq, \
    .to_bf16 = to_bf16, \
    .from_bf16 = from_bf16, \
    .stamp = stamp

static void gemm_bf16(void *stream, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc)
{
    (void)stream;
    smoe_gemm_bf16in(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void matmul_bf16(void *stream, float *y, const float *x, const float *w, int64_t t,
                        int64_t k, int64_t n, float beta)
{
    (void)stream;
    smoe_matmul_bf16in(y, x, w, t, k, n, beta);
}

static void matmul_bwd_bf16(void *stream, float *dx, float *dw, const float *dy, const float *x,
                            const float *w, int64_t t, int64_t k, int64_t n)
{
    (void)stream;
    smoe_matmul_bwd_bf16in(dx, dw, dy, x, w, t, k, n);
}

static const smoe_kops cpu = {
    .name = "cpu", .gemm = gemm, .matmul = matmul, .matmul_bwd = matmul_bwd, CPU_ENTRIES,
};

static const smoe_kops cpu_bf16 = {
    .name = "cpu bf16", .gemm = gemm_bf16, .matmul = matmul_bf16,
    .matmul_bwd = matmul_bwd_bf16, CPU_ENTRIES,
};

const smoe_kops *smoe_kops_cpu(void) { return &cpu; }

void *smoe_kops_buf(const smoe_kops *k, void *stream, size_t bytes)
{
    return k->synchronous ? smoe_malloc(bytes) : k->alloc(stream, bytes);
}

void smoe_kops_buf_free(const smoe_kops *k, void *stream, void *p, size_t bytes)
{
    if (k->synchronous)
        smoe_free(p);
    else if (p)
        k->free(stream, p, bytes);
}

const smoe_kops *smoe_kops_cpu_bf16(void) { return &cpu_bf16; }
