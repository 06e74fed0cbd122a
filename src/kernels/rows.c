/* The model's row movements (kernels.h "moving rows"): the embedding's
 * gather and scatter-add, MLA's split of the up-projected keys and values
 * and its transpose, the MoE block's rows between tokens and experts. Plain copies and in-order sums: a model that called
 * memcpy and smoe_vec_add for these computes bit for bit the same. */
#include "smoe/kernels.h"

#include <string.h>

void smoe_embed_rows(float *x, const float *embed, const int32_t *tokens, int64_t t, int64_t d,
                     int64_t vocab)
{
    SMOE_ASSERT(t >= 0 && d >= 0);
    for (int64_t i = 0; i < t; i++) {
        SMOE_ASSERT(tokens[i] >= 0 && tokens[i] < vocab);
        memcpy(x + i * d, embed + (int64_t)tokens[i] * d, (size_t)d * sizeof *x);
    }
}

void smoe_embed_rows_bwd(float *dembed, const int32_t *tokens, const float *dx, int64_t t,
                         int64_t d, int64_t vocab)
{
    SMOE_ASSERT(t >= 0 && d >= 0);
    for (int64_t i = 0; i < t; i++) {
        SMOE_ASSERT(tokens[i] >= 0 && tokens[i] < vocab);
        smoe_vec_add(dembed + (int64_t)tokens[i] * d, dx + i * d, d);
    }
}

void smoe_mla_kv_split(float *k, float *v, const float *kv, const float *kpe, int64_t t,
                       int64_t h, int64_t dn, int64_t dr, int64_t dv)
{
    SMOE_ASSERT(t >= 0 && h >= 0 && dn >= 0 && dr >= 0 && dv >= 0);
    const int64_t dq = dn + dr;
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t hh = 0; hh < h; hh++) {
            const float *r = kv + (ti * h + hh) * (dn + dv);
            float *kr = k + (ti * h + hh) * dq;
            memcpy(kr, r, (size_t)dn * sizeof *kr);
            memcpy(kr + dn, kpe + ti * dr, (size_t)dr * sizeof *kr);
            memcpy(v + (ti * h + hh) * dv, r + dn, (size_t)dv * sizeof *v);
        }
}

void smoe_mla_kv_merge(float *dkv, float *dkpe, const float *dk, const float *dv, int64_t t,
                       int64_t h, int64_t dn, int64_t dr, int64_t dv_)
{
    SMOE_ASSERT(t >= 0 && h >= 0 && dn >= 0 && dr >= 0 && dv_ >= 0);
    const int64_t dq = dn + dr;
    memset(dkpe, 0, (size_t)(t * dr) * sizeof *dkpe);
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t hh = 0; hh < h; hh++) {
            float *d = dkv + (ti * h + hh) * (dn + dv_);
            const float *dkr = dk + (ti * h + hh) * dq;
            memcpy(d, dkr, (size_t)dn * sizeof *d);
            memcpy(d + dn, dv + (ti * h + hh) * dv_, (size_t)dv_ * sizeof *d);
            smoe_vec_add(dkpe + ti * dr, dkr + dn, dr);
        }
}

void smoe_moe_dispatch_rows(float *er, const float *x, const int64_t *pos, int64_t t, int64_t k,
                            int64_t d)
{
    SMOE_ASSERT(t >= 0 && k >= 0 && d >= 0);
    for (int64_t i = 0; i < t * k; i++)
        if (pos[i] >= 0)
            memcpy(er + pos[i] * d, x + (i / k) * d, (size_t)d * sizeof *er);
}

void smoe_moe_combine_rows(float *x, const float *er, const int64_t *pos, const float *wts,
                           int64_t t, int64_t k, int64_t d)
{
    SMOE_ASSERT(t >= 0 && k >= 0 && d >= 0);
    for (int64_t i = 0; i < t * k; i++)
        if (pos[i] >= 0)
            smoe_vec_axpy(x + (i / k) * d, wts[i], er + pos[i] * d, d);
}

void smoe_moe_combine_bwd(float *der, float *dwk, const float *dx, const float *er,
                          const int64_t *pos, const float *wts, int64_t t, int64_t k, int64_t d)
{
    SMOE_ASSERT(t >= 0 && k >= 0 && d >= 0);
    for (int64_t i = 0; i < t * k; i++)
        dwk[i] = pos[i] < 0 ? 0.0f
                            : (float)smoe_vec_dot_scale(der + pos[i] * d, wts[i], dx + (i / k) * d,
                                                        er + pos[i] * d, d);
}

void smoe_moe_dispatch_bwd(float *dx, const float *der, const int64_t *pos, int64_t t, int64_t k,
                           int64_t d)
{
    SMOE_ASSERT(t >= 0 && k >= 0 && d >= 0);
    for (int64_t i = 0; i < t * k; i++)
        if (pos[i] >= 0)
            smoe_vec_add(dx + (i / k) * d, der + pos[i] * d, d);
}
