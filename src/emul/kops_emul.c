/* The emulated table's kernel entries (emul.h): each one copies its
 * arguments into a closure that runs the kernels.h function of the same
 * name when the emulated stream reaches it. Scalars a kernel returns land
 * where the caller pointed, in the emulation's memory. */
#include "emul_impl.h"

#include "smoe/dtype.h"
#include "smoe/kernels.h"

#define ENQ(q, run, a) eq_enqueue((q), (run), &(a), sizeof(a))

/* the products: bf16 inputs when the queue's mode says so */
static int bf16(void *q) { return (((smoe_eq *)q)->flags & SMOE_KOPS_BF16_GEMM) != 0; }

typedef struct { int ta, tb; int64_t m, n, k; float alpha; const float *a; int64_t lda;
                 const float *b; int64_t ldb; float beta; float *c; int64_t ldc; int bf16; } gemm_a;
static void gemm_run(const void *p)
{
    const gemm_a *a = p;
    (a->bf16 ? smoe_gemm_bf16in : smoe_gemm)(a->ta, a->tb, a->m, a->n, a->k, a->alpha, a->a,
                                             a->lda, a->b, a->ldb, a->beta, a->c, a->ldc);
}
static void e_gemm(void *q, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc)
{
    gemm_a x = { ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bf16(q) };
    ENQ(q, gemm_run, x);
}

typedef struct { float *y; const float *x, *w; int64_t t, k, n; float beta; int bf16; } matmul_a;
static void matmul_run(const void *p)
{
    const matmul_a *a = p;
    (a->bf16 ? smoe_matmul_bf16in : smoe_matmul)(a->y, a->x, a->w, a->t, a->k, a->n, a->beta);
}
static void e_matmul(void *q, float *y, const float *x, const float *w, int64_t t, int64_t k,
                     int64_t n, float beta)
{
    matmul_a a = { y, x, w, t, k, n, beta, bf16(q) };
    ENQ(q, matmul_run, a);
}

typedef struct { float *dx, *dw; const float *dy, *x, *w; int64_t t, k, n; int bf16; } matmul_bwd_a;
static void matmul_bwd_run(const void *p)
{
    const matmul_bwd_a *a = p;
    (a->bf16 ? smoe_matmul_bwd_bf16in : smoe_matmul_bwd)(a->dx, a->dw, a->dy, a->x, a->w, a->t,
                                                         a->k, a->n);
}
static void e_matmul_bwd(void *q, float *dx, float *dw, const float *dy, const float *x,
                         const float *w, int64_t t, int64_t k, int64_t n)
{
    matmul_bwd_a a = { dx, dw, dy, x, w, t, k, n, bf16(q) };
    ENQ(q, matmul_bwd_run, a);
}

typedef struct { float *y, *rstd; const float *x, *scale; int64_t t, d; float eps; } rms_a;
static void rms_run(const void *p)
{
    const rms_a *a = p;
    smoe_rmsnorm(a->y, a->rstd, a->x, a->scale, a->t, a->d, a->eps);
}
static void e_rmsnorm(void *q, float *y, float *rstd, const float *x, const float *scale,
                      int64_t t, int64_t d, float eps)
{
    rms_a a = { y, rstd, x, scale, t, d, eps };
    ENQ(q, rms_run, a);
}

typedef struct { float *dx, *dscale; const float *dy, *x, *scale, *rstd; int64_t t, d; } rmsb_a;
static void rmsb_run(const void *p)
{
    const rmsb_a *a = p;
    smoe_rmsnorm_bwd(a->dx, a->dscale, a->dy, a->x, a->scale, a->rstd, a->t, a->d);
}
static void e_rmsnorm_bwd(void *q, float *dx, float *dscale, const float *dy, const float *x,
                          const float *scale, const float *rstd, int64_t t, int64_t d)
{
    rmsb_a a = { dx, dscale, dy, x, scale, rstd, t, d };
    ENQ(q, rmsb_run, a);
}

typedef struct { float *h, *s; const float *a, *b; int64_t n; } swi_a;
static void swi_run(const void *p)
{
    const swi_a *a = p;
    smoe_swiglu_sig(a->h, a->s, a->a, a->b, a->n);
}
static void e_swiglu_sig(void *q, float *h, float *s, const float *a, const float *b, int64_t n)
{
    swi_a x = { h, s, a, b, n };
    ENQ(q, swi_run, x);
}

typedef struct { float *da, *db; const float *dh, *a, *b, *s; int64_t n; } swib_a;
static void swib_run(const void *p)
{
    const swib_a *a = p;
    smoe_swiglu_sig_bwd(a->da, a->db, a->dh, a->a, a->b, a->s, a->n);
}
static void e_swiglu_sig_bwd(void *q, float *da, float *db, const float *dh, const float *a,
                             const float *b, const float *s, int64_t n)
{
    swib_a x = { da, db, dh, a, b, s, n };
    ENQ(q, swib_run, x);
}

typedef struct { float *y; const float *x; int64_t t, n; } rows_a; /* t = 0: elementwise */
static void sigmoid_run(const void *p)
{
    const rows_a *a = p;
    smoe_sigmoid(a->y, a->x, a->n);
}
static void e_sigmoid(void *q, float *y, const float *x, int64_t n)
{
    rows_a a = { y, x, 0, n };
    ENQ(q, sigmoid_run, a);
}
static void softmax_run(const void *p)
{
    const rows_a *a = p;
    smoe_softmax_rows(a->y, a->t, a->n);
}
static void e_softmax_rows(void *q, float *x, int64_t t, int64_t n)
{
    rows_a a = { x, NULL, t, n };
    ENQ(q, softmax_run, a);
}

typedef struct { float *dx; const float *dy, *y; int64_t t, n; } smb_a;
static void smb_run(const void *p)
{
    const smb_a *a = p;
    smoe_softmax_rows_bwd(a->dx, a->dy, a->y, a->t, a->n);
}
static void e_softmax_rows_bwd(void *q, float *dx, const float *dy, const float *y, int64_t t,
                               int64_t n)
{
    smb_a a = { dx, dy, y, t, n };
    ENQ(q, smb_run, a);
}

typedef struct { float *x; const int32_t *pos; int64_t t, h, d, stride, hstride;
                 const float *cs, *sn; int64_t npos; int halves; float scale; int inverse;
} rope_a;
static void rope_run(const void *p)
{
    const rope_a *a = p;
    smoe_rope_apply_tab(a->x, a->pos, a->t, a->h, a->d, a->stride, a->hstride, a->cs, a->sn,
                        a->npos, a->halves, a->scale, a->inverse);
}
static void e_rope_apply_tab(void *q, float *x, const int32_t *pos, int64_t t, int64_t h,
                             int64_t d, int64_t stride, int64_t hstride, const float *cs,
                             const float *sn, int64_t npos, int halves, float scale, int inverse)
{
    rope_a a = { x, pos, t, h, d, stride, hstride, cs, sn, npos, halves, scale, inverse };
    ENQ(q, rope_run, a);
}

typedef struct { float *o, *p; const float *q, *k, *v; int64_t s, h, dk, dv, qs, ks, vs;
                 float scale; } att_a;
static void att_run(const void *p)
{
    const att_a *a = p;
    smoe_attention(a->o, a->p, a->q, a->k, a->v, a->s, a->h, a->dk, a->dv, a->qs, a->ks, a->vs,
                   a->scale);
}
static void e_attention(void *q, float *o, float *p, const float *qq, const float *k,
                        const float *v, int64_t s, int64_t h, int64_t dk, int64_t dv, int64_t qs,
                        int64_t ks, int64_t vs, float scale)
{
    att_a a = { o, p, qq, k, v, s, h, dk, dv, qs, ks, vs, scale };
    ENQ(q, att_run, a);
}

typedef struct { float *dq, *dk, *dv; const float *dout, *p, *q, *k, *v; int64_t s, h, dk_,
                 dv_, qs, ks, vs; float scale; float *scratch; } attb_a;
static void attb_run(const void *p)
{
    const attb_a *a = p;
    smoe_attention_bwd(a->dq, a->dk, a->dv, a->dout, a->p, a->q, a->k, a->v, a->s, a->h, a->dk_,
                       a->dv_, a->qs, a->ks, a->vs, a->scale, a->scratch);
}
static void e_attention_bwd(void *q, float *dq, float *dk, float *dv, const float *dout,
                            const float *p, const float *qq, const float *k, const float *v,
                            int64_t s, int64_t h, int64_t dk_, int64_t dv_, int64_t qs,
                            int64_t ks, int64_t vs, float scale, float *scratch)
{
    attb_a a = { dq, dk, dv, dout, p, qq, k, v, s, h, dk_, dv_, qs, ks, vs, scale, scratch };
    ENQ(q, attb_run, a);
}

typedef struct { float *dl; const float *lg; const int32_t *tg; int64_t t, v; float scale, z;
                 double *loss, *zsum; } ce_a;
static void ce_run(const void *p)
{
    const ce_a *a = p;
    *a->loss = smoe_cross_entropy_z(a->dl, a->lg, a->tg, a->t, a->v, a->scale, a->z, a->zsum);
}
static void e_cross_entropy_z(void *q, float *dl, const float *lg, const int32_t *tg, int64_t t,
                              int64_t v, float scale, float z, double *loss, double *zsum)
{
    ce_a a = { dl, lg, tg, t, v, scale, z, loss, zsum };
    ENQ(q, ce_run, a);
}

typedef struct { float *x; const float *embed; const int32_t *tok; int64_t t, d, vocab; } emb_a;
static void emb_run(const void *p)
{
    const emb_a *a = p;
    smoe_embed_rows(a->x, a->embed, a->tok, a->t, a->d, a->vocab);
}
static void e_embed_rows(void *q, float *x, const float *embed, const int32_t *tok, int64_t t,
                         int64_t d, int64_t vocab)
{
    emb_a a = { x, embed, tok, t, d, vocab };
    ENQ(q, emb_run, a);
}
static void embb_run(const void *p)
{
    const emb_a *a = p; /* x: dembed, embed: dx */
    smoe_embed_rows_bwd(a->x, a->tok, a->embed, a->t, a->d, a->vocab);
}
static void e_embed_rows_bwd(void *q, float *dembed, const int32_t *tok, const float *dx,
                             int64_t t, int64_t d, int64_t vocab)
{
    emb_a a = { dembed, dx, tok, t, d, vocab };
    ENQ(q, embb_run, a);
}

typedef struct { float *o1, *o2; const float *i1, *i2; int64_t t, h, dn, dr, dv; } mla_a;
static void split_run(const void *p)
{
    const mla_a *a = p;
    smoe_mla_kv_split(a->o1, a->o2, a->i1, a->i2, a->t, a->h, a->dn, a->dr, a->dv);
}
static void e_mla_kv_split(void *q, float *k, float *v, const float *kv, const float *kpe,
                           int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv)
{
    mla_a a = { k, v, kv, kpe, t, h, dn, dr, dv };
    ENQ(q, split_run, a);
}
static void merge_run(const void *p)
{
    const mla_a *a = p;
    smoe_mla_kv_merge(a->o1, a->o2, a->i1, a->i2, a->t, a->h, a->dn, a->dr, a->dv);
}
static void e_mla_kv_merge(void *q, float *dkv, float *dkpe, const float *dk, const float *dv,
                           int64_t t, int64_t h, int64_t dn, int64_t dr, int64_t dv_)
{
    mla_a a = { dkv, dkpe, dk, dv, t, h, dn, dr, dv_ };
    ENQ(q, merge_run, a);
}

/* the MoE rows: o1 = er / x / der / dx, o2 = dwk; i1 = x / er / dx / der, i2 = er */
typedef struct { float *o1, *o2; const float *i1, *i2; const int64_t *pos; const float *wts;
                 int64_t t, k, d; } moe_a;
static void mdisp_run(const void *p)
{
    const moe_a *a = p;
    smoe_moe_dispatch_rows(a->o1, a->i1, a->pos, a->t, a->k, a->d);
}
static void e_moe_dispatch_rows(void *q, float *er, const float *x, const int64_t *pos,
                                int64_t t, int64_t k, int64_t d)
{
    moe_a a = { er, NULL, x, NULL, pos, NULL, t, k, d };
    ENQ(q, mdisp_run, a);
}
static void mcomb_run(const void *p)
{
    const moe_a *a = p;
    smoe_moe_combine_rows(a->o1, a->i1, a->pos, a->wts, a->t, a->k, a->d);
}
static void e_moe_combine_rows(void *q, float *x, const float *er, const int64_t *pos,
                               const float *wts, int64_t t, int64_t k, int64_t d)
{
    moe_a a = { x, NULL, er, NULL, pos, wts, t, k, d };
    ENQ(q, mcomb_run, a);
}
static void mcombb_run(const void *p)
{
    const moe_a *a = p;
    smoe_moe_combine_bwd(a->o1, a->o2, a->i1, a->i2, a->pos, a->wts, a->t, a->k, a->d);
}
static void e_moe_combine_bwd(void *q, float *der, float *dwk, const float *dx, const float *er,
                              const int64_t *pos, const float *wts, int64_t t, int64_t k,
                              int64_t d)
{
    moe_a a = { der, dwk, dx, er, pos, wts, t, k, d };
    ENQ(q, mcombb_run, a);
}
static void mdispb_run(const void *p)
{
    const moe_a *a = p;
    smoe_moe_dispatch_bwd(a->o1, a->i1, a->pos, a->t, a->k, a->d);
}
static void e_moe_dispatch_bwd(void *q, float *dx, const float *der, const int64_t *pos,
                               int64_t t, int64_t k, int64_t d)
{
    moe_a a = { dx, NULL, der, NULL, pos, NULL, t, k, d };
    ENQ(q, mdispb_run, a);
}

typedef struct { float *p, *m, *v; const float *g; int64_t n; smoe_adamw_cfg c; } adamw_a;
static void adamw_run(const void *p)
{
    const adamw_a *a = p;
    smoe_adamw_step(a->p, a->m, a->v, a->g, a->n, &a->c);
}
static void e_adamw_step(void *q, float *p, float *m, float *v, const float *g, int64_t n,
                         const smoe_adamw_cfg *c)
{
    adamw_a a = { p, m, v, g, n, *c };
    ENQ(q, adamw_run, a);
}

typedef struct { float *y; float a; const float *x, *y2; int64_t n; float *dot; } vec_a;
static void vadd_run(const void *p)
{
    const vec_a *a = p;
    smoe_vec_add(a->y, a->x, a->n);
}
static void e_vec_add(void *q, float *y, const float *x, int64_t n)
{
    vec_a a = { y, 0.0f, x, NULL, n, NULL };
    ENQ(q, vadd_run, a);
}
static void axpy_run(const void *p)
{
    const vec_a *a = p;
    smoe_vec_axpy(a->y, a->a, a->x, a->n);
}
static void e_vec_axpy(void *q, float *y, float s, const float *x, int64_t n)
{
    vec_a a = { y, s, x, NULL, n, NULL };
    ENQ(q, axpy_run, a);
}
static void dot_run(const void *p)
{
    const vec_a *a = p; /* r = y, d = x, y = y2 */
    *a->dot = (float)smoe_vec_dot_scale(a->y, a->a, a->x, a->y2, a->n);
}
static void e_vec_dot_scale(void *q, float *r, float s, const float *d, const float *y,
                            int64_t n, float *dot)
{
    vec_a a = { r, s, d, y, n, dot };
    ENQ(q, dot_run, a);
}

typedef struct { const float *x; int64_t n; double *out; } sumsq_a;
static void sumsq_run(const void *p)
{
    const sumsq_a *a = p;
    *a->out = smoe_vec_sumsq(a->x, a->n);
}
static void e_vec_sumsq(void *q, const float *x, int64_t n, double *out)
{
    sumsq_a a = { x, n, out };
    ENQ(q, sumsq_run, a);
}

typedef struct { void *dst; const void *src; int64_t n; } conv_a;
static void to_bf16_run(const void *p)
{
    const conv_a *a = p;
    smoe_bf16_from_f32(a->dst, a->src, a->n);
}
static void e_to_bf16(void *q, uint16_t *dst, const float *src, int64_t n)
{
    conv_a a = { dst, src, n };
    ENQ(q, to_bf16_run, a);
}
static void from_bf16_run(const void *p)
{
    const conv_a *a = p;
    smoe_bf16_to_f32(a->dst, a->src, a->n);
}
static void e_from_bf16(void *q, float *dst, const uint16_t *src, int64_t n)
{
    conv_a a = { dst, src, n };
    ENQ(q, from_bf16_run, a);
}

typedef struct { double *out; } stamp_a;
static void stamp_run(const void *p)
{
    const stamp_a *a = p;
    *a->out = smoe_now();
}
static void e_stamp(void *q, double *out)
{
    stamp_a a = { out };
    ENQ(q, stamp_run, a);
}

static const smoe_kops emul = {
    .name = "emul",
    .synchronous = 0,
    .alloc = eq_alloc,
    .free = eq_free_mem,
    .copy = eq_copy,
    .fill0 = eq_fill0,
    .read = eq_read,
    .write = eq_write,
    .gemm = e_gemm,
    .matmul = e_matmul,
    .matmul_bwd = e_matmul_bwd,
    .rmsnorm = e_rmsnorm,
    .rmsnorm_bwd = e_rmsnorm_bwd,
    .swiglu_sig = e_swiglu_sig,
    .swiglu_sig_bwd = e_swiglu_sig_bwd,
    .sigmoid = e_sigmoid,
    .softmax_rows = e_softmax_rows,
    .softmax_rows_bwd = e_softmax_rows_bwd,
    .rope_apply_tab = e_rope_apply_tab,
    .attention = e_attention,
    .attention_bwd = e_attention_bwd,
    .cross_entropy_z = e_cross_entropy_z,
    .embed_rows = e_embed_rows,
    .embed_rows_bwd = e_embed_rows_bwd,
    .mla_kv_split = e_mla_kv_split,
    .mla_kv_merge = e_mla_kv_merge,
    .moe_dispatch_rows = e_moe_dispatch_rows,
    .moe_combine_rows = e_moe_combine_rows,
    .moe_combine_bwd = e_moe_combine_bwd,
    .moe_dispatch_bwd = e_moe_dispatch_bwd,
    .adamw_step = e_adamw_step,
    .vec_add = e_vec_add,
    .vec_axpy = e_vec_axpy,
    .vec_dot_scale = e_vec_dot_scale,
    .vec_sumsq = e_vec_sumsq,
    .to_bf16 = e_to_bf16,
    .from_bf16 = e_from_bf16,
    .stamp = e_stamp,
};

const smoe_kops *smoe_kops_emul(void) { return &emul; }
