/* Multi-head latent attention (DeepSeek MLA), forward and backward, for
 * the T = batch * seq local tokens of one layer:
 *
 *   h    = rmsnorm(x) * pre_norm
 *   q    = q_lora ? (rmsnorm(h @ wq_a) * q_norm) @ wq_b : h @ query
 *          (T, H, nope+rope); RoPE (rope.c, MaxText's embedding) on the
 *          last `rope` dims of each head
 *   kv_a = h @ wkv_a = [c_kv (kv_lora) | k_pe (rope)], the two column
 *          blocks computed as two strided products; RoPE on k_pe
 *   kv   = (rmsnorm(c_kv) * kv_norm) @ wkv_b = [k_nope | v] per head
 *   k    = [k_nope(head) | k_pe] (k_pe shared by all heads)
 *   o    = causal softmax(q k^T * scale) v per sequence and head, scale =
 *          attn_scale_mult / sqrt(nope+rope) (MaxText attention_mla.py
 *          MLA.__init__/mla_query_projection: softmax_scale = qk_head_dim^-0.5,
 *          times mscale^2 with mscale = 0.1 * mscale * ln(rope_factor) + 1
 *          whenever max_position_embeddings > original_max_position_embeddings)
 *   x   += o (T, H*v) @ out (H*v, D)
 *
 * The backward runs the same chain in reverse; the gradient of the shared
 * k_pe is the sum over heads. RoPE is a rotation, so its backward is the
 * inverse rotation of the gradient. Each layer's saved tensors are in its
 * attn_act; the intermediate gradients use the model's shared scratch.
 */
#include "model_impl.h"

#include <math.h>

/* RoPE on the rope slices of h heads (hstride apart) of every token (row
 * stride), MaxText's embedding of the model from the model's tables
 * (smoe_rope_apply_tab); inverse = 1 in the backward. */
static void rope(const smoe_model *m, float *x, int64_t h, int64_t stride, int64_t hstride,
                 int inverse)
{
    m->ops->rope_apply_tab(m->stream, x, m->pos, m->T, h, m->cfg.qk_rope, stride, hstride,
                           m->rope_cs, m->rope_sn, m->cfg.seq, m->cfg.rope_halves,
                           m->rope_scale, inverse);
}

static void zero(smoe_model *m, float *p, int64_t n)
{
    m->ops->fill0(m->stream, p, (size_t)n * sizeof *p);
}

void mla_fwd(smoe_model *m, attn_act *a, const float *const w[SMOE_W_NSLOTS],
             float *x, smoe_ep_comm *comm)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb, H = g->heads, S = g->seq;
    const int64_t dn = g->qk_nope, dr = g->qk_rope, dq = dn + dr;
    const int64_t dv = g->v_head, R = g->kv_lora, Q = g->q_lora;
    model_scratch *s = &m->s;

    m->ops->copy(m->stream, a->xin, x, (size_t)(T * D) * sizeof *x);
    m->ops->rmsnorm(m->stream, a->h, a->rstd1, x, w[SMOE_W_PRE_NORM], T, D, g->eps);

    /* queries */
    if (Q) {
        m->ops->matmul(m->stream, a->qa, a->h, w[SMOE_W_WQ_A], T, D, Q, 0.0f);
        model_progress(comm);
        m->ops->rmsnorm(m->stream, a->qan, a->rstd_q, a->qa, w[SMOE_W_Q_NORM], T, Q, g->eps);
        m->ops->matmul(m->stream, a->q, a->qan, w[SMOE_W_WQ_B], T, Q, H * dq, 0.0f);
    } else {
        m->ops->matmul(m->stream, a->q, a->h, w[SMOE_W_QUERY], T, D, H * dq, 0.0f);
    }
    model_progress(comm);
    rope(m, a->q + dn, H, H * dq, dq, 0);

    /* compressed kv and the shared rotary key */
    const float *wkv_a = w[SMOE_W_WKV_A];
    m->ops->gemm(m->stream, 0, 0, T, R, D, 1.0f, a->h, D, wkv_a, R + dr, 0.0f, a->ckv, R);
    model_progress(comm);
    m->ops->gemm(m->stream, 0, 0, T, dr, D, 1.0f, a->h, D, wkv_a + R, R + dr, 0.0f, s->kpe, dr);
    model_progress(comm);
    rope(m, s->kpe, 1, dr, dr, 0);
    m->ops->rmsnorm(m->stream, a->ckvn, a->rstd_kv, a->ckv, w[SMOE_W_KV_NORM], T, R, g->eps);
    m->ops->matmul(m->stream, s->kv, a->ckvn, w[SMOE_W_WKV_B], T, R, H * (dn + dv), 0.0f);
    model_progress(comm);
    m->ops->mla_kv_split(m->stream, a->k, a->v, s->kv, s->kpe, T, H, dn, dr, dv);

    /* causal attention, one sequence at a time */
    const float scale = m->attn_scale;
    for (int64_t b = 0; b < g->batch; b++) {
        const int64_t t0 = b * S;
        m->ops->attention(m->stream, a->o + t0 * H * dv, a->p + b * H * S * S,
                          a->q + t0 * H * dq, a->k + t0 * H * dq,
                          a->v + t0 * H * dv, S, H, dq, dv, H * dq, H * dq,
                          H * dv, scale);
        model_progress(comm);
    }

    /* x += o @ out */
    m->ops->matmul(m->stream, x, a->o, w[SMOE_W_OUT], T, H * dv, D, 1.0f);
    model_progress(comm);
}

void mla_bwd(smoe_model *m, const attn_act *a,
             const float *const w[SMOE_W_NSLOTS],
             float *const dw[SMOE_W_NSLOTS], float *dx, smoe_ep_comm *comm)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb, H = g->heads, S = g->seq;
    const int64_t dn = g->qk_nope, dr = g->qk_rope, dq = dn + dr;
    const int64_t dv = g->v_head, R = g->kv_lora, Q = g->q_lora;
    model_scratch *s = &m->s;
    float *dkv = s->kv, *dkpe = s->kpe; /* the forward's buffers, reused */

    /* x_out = x_in + o @ out */
    zero(m, s->dout, T * H * dv);
    m->ops->matmul_bwd(m->stream, s->dout, dw[SMOE_W_OUT], dx, a->o, w[SMOE_W_OUT], T, H * dv, D);
    model_progress(comm);

    /* attention */
    zero(m, s->dq, T * H * dq);
    zero(m, s->dk, T * H * dq);
    zero(m, s->dv, T * H * dv);
    const float scale = m->attn_scale;
    for (int64_t b = 0; b < g->batch; b++) {
        const int64_t t0 = b * S;
        m->ops->attention_bwd(m->stream, s->dq + t0 * H * dq, s->dk + t0 * H * dq,
                              s->dv + t0 * H * dv, s->dout + t0 * H * dv,
                              a->p + b * H * S * S, a->q + t0 * H * dq,
                              a->k + t0 * H * dq, a->v + t0 * H * dv, S, H, dq,
                              dv, H * dq, H * dq, H * dv, scale, s->att);
        model_progress(comm);
    }

    /* back to kv's layout; k_pe's gradient sums over the heads */
    m->ops->mla_kv_merge(m->stream, dkv, dkpe, s->dk, s->dv, T, H, dn, dr, dv);
    rope(m, dkpe, 1, dr, dr, 1);
    rope(m, s->dq + dn, H, H * dq, dq, 1);

    /* kv = ckvn @ wkv_b, ckvn = rmsnorm(ckv) * kv_norm */
    zero(m, s->dckvn, T * R);
    m->ops->matmul_bwd(m->stream, s->dckvn, dw[SMOE_W_WKV_B], dkv, a->ckvn, w[SMOE_W_WKV_B],
                       T, R, H * (dn + dv));
    model_progress(comm);
    zero(m, s->dckv, T * R);
    m->ops->rmsnorm_bwd(m->stream, s->dckv, dw[SMOE_W_KV_NORM], s->dckvn, a->ckv,
                        w[SMOE_W_KV_NORM], a->rstd_kv, T, R);

    /* [ckv | k_pe] = h @ wkv_a, by column blocks */
    const float *wkv_a = w[SMOE_W_WKV_A];
    float *dwkv_a = dw[SMOE_W_WKV_A];
    m->ops->gemm(m->stream, 0, 1, T, D, R, 1.0f, s->dckv, R, wkv_a, R + dr, 0.0f, s->dh, D);
    model_progress(comm);
    m->ops->gemm(m->stream, 0, 1, T, D, dr, 1.0f, dkpe, dr, wkv_a + R, R + dr, 1.0f, s->dh, D);
    model_progress(comm);
    m->ops->gemm(m->stream, 1, 0, D, R, T, 1.0f, a->h, D, s->dckv, R, 1.0f, dwkv_a, R + dr);
    model_progress(comm);
    m->ops->gemm(m->stream, 1, 0, D, dr, T, 1.0f, a->h, D, dkpe, dr, 1.0f, dwkv_a + R, R + dr);
    model_progress(comm);

    /* queries */
    if (Q) {
        zero(m, s->dqan, T * Q);
        m->ops->matmul_bwd(m->stream, s->dqan, dw[SMOE_W_WQ_B], s->dq, a->qan, w[SMOE_W_WQ_B],
                           T, Q, H * dq);
        model_progress(comm);
        zero(m, s->dqa, T * Q);
        m->ops->rmsnorm_bwd(m->stream, s->dqa, dw[SMOE_W_Q_NORM], s->dqan, a->qa,
                            w[SMOE_W_Q_NORM], a->rstd_q, T, Q);
        m->ops->matmul_bwd(m->stream, s->dh, dw[SMOE_W_WQ_A], s->dqa, a->h, w[SMOE_W_WQ_A],
                           T, D, Q);
    } else {
        m->ops->matmul_bwd(m->stream, s->dh, dw[SMOE_W_QUERY], s->dq, a->h, w[SMOE_W_QUERY],
                           T, D, H * dq);
    }
    model_progress(comm);

    /* h = rmsnorm(x) * pre_norm; dx already holds the residual path */
    m->ops->rmsnorm_bwd(m->stream, dx, dw[SMOE_W_PRE_NORM], s->dh, a->xin,
                        w[SMOE_W_PRE_NORM], a->rstd1, T, D);
}
