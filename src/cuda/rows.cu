// The moving rows of the CUDA table (kernels.h "moving rows"): one thread
// per element copied; the sums (the embedding's scatter-add, k_pe's sum
// over heads, a token's MoE pairs) run in the CPU's order, so they are bit
// for bit the CPU's; the MoE combine's dot products are double sums in a
// fixed tree.
// A token outside [0, vocab), which the CPU refuses by assertion, gives a
// row of NaN (forward) or adds nothing (backward) and never reads or
// writes outside the table.
#include "kern_impl.cuh"

namespace {

__global__ void embed_k(float *x, const float *embed, const int32_t *tokens, int64_t t,
                        int64_t d, int64_t vocab)
{
    FOR_ELEMENTS(e, t * d) {
        const int64_t tok = tokens[e / d];
        x[e] = tok >= 0 && tok < vocab ? embed[tok * d + e % d] : NAN;
    }
}

// one thread per column, the rows in token order (the CPU's sums)
__global__ void embed_bwd_k(float *dembed, const int32_t *tokens, const float *dx, int64_t t,
                            int64_t d, int64_t vocab)
{
    FOR_ELEMENTS(j, d) {
        for (int64_t i = 0; i < t; i++) {
            const int64_t tok = tokens[i];
            if (tok >= 0 && tok < vocab)
                dembed[tok * d + j] += dx[i * d + j];
        }
    }
}

struct mla_dims {
    int64_t t, h, dn, dr, dv;
};

// k (t*h, dn + dr) and v (t*h, dv) from kv (t*h, dn + dv) and kpe (t, dr)
__global__ void kv_split_k(float *k, float *v, const float *kv, const float *kpe, mla_dims g)
{
    const int64_t w = g.dn + g.dr + g.dv;
    FOR_ELEMENTS(e, g.t * g.h * w) {
        const int64_t r = e / w, c = e % w;
        if (c < g.dn)
            k[r * (g.dn + g.dr) + c] = kv[r * (g.dn + g.dv) + c];
        else if (c < g.dn + g.dr)
            k[r * (g.dn + g.dr) + c] = kpe[(r / g.h) * g.dr + c - g.dn];
        else
            v[r * g.dv + c - g.dn - g.dr] = kv[r * (g.dn + g.dv) + g.dn + c - g.dn - g.dr];
    }
}

// dkv (t*h, dn + dv) = [dk's first dn | dv]
__global__ void kv_merge_k(float *dkv, const float *dk, const float *dv, mla_dims g)
{
    const int64_t w = g.dn + g.dv;
    FOR_ELEMENTS(e, g.t * g.h * w) {
        const int64_t r = e / w, c = e % w;
        dkv[e] = c < g.dn ? dk[r * (g.dn + g.dr) + c] : dv[r * g.dv + c - g.dn];
    }
}

// dkpe (t, dr) = the sum over heads, in head order, of dk's last dr
__global__ void kpe_sum_k(float *dkpe, const float *dk, mla_dims g)
{
    FOR_ELEMENTS(e, g.t * g.dr) {
        const int64_t ti = e / g.dr, c = e % g.dr;
        float acc = 0.0f;
        for (int64_t hh = 0; hh < g.h; hh++)
            acc += dk[(ti * g.h + hh) * (g.dn + g.dr) + g.dn + c];
        dkpe[e] = acc;
    }
}

// ---- the MoE rows: pairs i = t*k + kk, pos[i] < 0 dropped ----

__global__ void moe_dispatch_k(float *er, const float *x, const int64_t *pos, int64_t t,
                               int64_t k, int64_t d)
{
    FOR_ELEMENTS(e, t * k * d) {
        const int64_t i = e / d, c = e % d;
        if (pos[i] >= 0)
            er[pos[i] * d + c] = x[(i / k) * d + c];
    }
}

// one thread per (token, column): the token's pairs in order (the CPU's)
__global__ void moe_combine_k(float *x, const float *er, const int64_t *pos, const float *wts,
                              int64_t t, int64_t k, int64_t d)
{
    FOR_ELEMENTS(e, t * d) {
        const int64_t ti = e / d, c = e % d;
        float acc = x[e];
        for (int64_t kk = 0; kk < k; kk++) {
            const int64_t i = ti * k + kk;
            if (pos[i] >= 0) /* no fused multiply-add: the CPU's rounding */
                acc = __fadd_rn(acc, __fmul_rn(wts[i], er[pos[i] * d + c]));
        }
        x[e] = acc;
    }
}

__global__ void moe_dispatch_bwd_k(float *dx, const float *der, const int64_t *pos, int64_t t,
                                   int64_t k, int64_t d)
{
    FOR_ELEMENTS(e, t * d) {
        const int64_t ti = e / d, c = e % d;
        float acc = dx[e];
        for (int64_t kk = 0; kk < k; kk++) {
            const int64_t i = ti * k + kk;
            if (pos[i] >= 0)
                acc = acc + der[pos[i] * d + c];
        }
        dx[e] = acc;
    }
}

// one block per pair: der's row and the dot product (double, fixed tree)
__global__ void moe_combine_bwd_k(float *der, float *dwk, const float *dx, const float *er,
                                  const int64_t *pos, const float *wts, int64_t k, int64_t d)
{
    const int64_t i = blockIdx.x, p = pos[i];
    if (p < 0) {
        if (threadIdx.x == 0)
            dwk[i] = 0.0f;
        return;
    }
    const float *dr = dx + (i / k) * d, *yr = er + p * d;
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < d; c += NT) {
        acc += (double)dr[c] * (double)yr[c];
        der[p * d + c] = wts[i] * dr[c];
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        dwk[i] = (float)acc;
}

} // namespace

extern "C" void cuda_k_moe_dispatch_rows(void *s, float *er, const float *x, const int64_t *pos,
                                         int64_t t, int64_t k, int64_t d)
{
    LAUNCH(Q(s), "moe_dispatch_rows", dim3(blocks_for(t * k * d)), moe_dispatch_k, er, x, pos,
           t, k, d);
}

extern "C" void cuda_k_moe_combine_rows(void *s, float *x, const float *er, const int64_t *pos,
                                        const float *wts, int64_t t, int64_t k, int64_t d)
{
    LAUNCH(Q(s), "moe_combine_rows", dim3(blocks_for(t * d)), moe_combine_k, x, er, pos, wts, t,
           k, d);
}

extern "C" void cuda_k_moe_combine_bwd(void *s, float *der, float *dwk, const float *dx,
                                       const float *er, const int64_t *pos, const float *wts,
                                       int64_t t, int64_t k, int64_t d)
{
    LAUNCH(Q(s), "moe_combine_bwd", dim3((unsigned)(t * k)), moe_combine_bwd_k, der, dwk, dx, er,
           pos, wts, k, d);
}

extern "C" void cuda_k_moe_dispatch_bwd(void *s, float *dx, const float *der, const int64_t *pos,
                                        int64_t t, int64_t k, int64_t d)
{
    LAUNCH(Q(s), "moe_dispatch_bwd", dim3(blocks_for(t * d)), moe_dispatch_bwd_k, dx, der, pos,
           t, k, d);
}

extern "C" void cuda_k_embed_rows(void *s, float *x, const float *embed, const int32_t *tokens,
                                  int64_t t, int64_t d, int64_t vocab)
{
    LAUNCH(Q(s), "embed_rows", dim3(blocks_for(t * d)), embed_k, x, embed, tokens, t, d, vocab);
}

extern "C" void cuda_k_embed_rows_bwd(void *s, float *dembed, const int32_t *tokens,
                                      const float *dx, int64_t t, int64_t d, int64_t vocab)
{
    LAUNCH(Q(s), "embed_rows_bwd", dim3(blocks_for(d)), embed_bwd_k, dembed, tokens, dx, t, d,
           vocab);
}

extern "C" void cuda_k_mla_kv_split(void *s, float *k, float *v, const float *kv,
                                    const float *kpe, int64_t t, int64_t h, int64_t dn,
                                    int64_t dr, int64_t dv)
{
    mla_dims g = { t, h, dn, dr, dv };
    LAUNCH(Q(s), "mla_kv_split", dim3(blocks_for(t * h * (dn + dr + dv))), kv_split_k, k, v, kv,
           kpe, g);
}

extern "C" void cuda_k_mla_kv_merge(void *s, float *dkv, float *dkpe, const float *dk,
                                    const float *dv, int64_t t, int64_t h, int64_t dn,
                                    int64_t dr, int64_t dv_)
{
    mla_dims g = { t, h, dn, dr, dv_ };
    LAUNCH(Q(s), "mla_kv_merge", dim3(blocks_for(t * h * (dn + dv_))), kv_merge_k, dkv, dk, dv,
           g);
    LAUNCH(Q(s), "mla_kv_merge", dim3(blocks_for(t * dr)), kpe_sum_k, dkpe, dk, g);
}
