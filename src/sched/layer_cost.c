/* One decoder layer's compute on a profile (the attention block, the MLP
 * or the MoE block's router, shared and routed experts, their remat and
 * saved activations) and the output head's: the step model's op costs,
 * which cost.c assembles into a model. */
#include "cost_impl.h"

#include <math.h>
#include <string.h>

/* smoe's own activation estimate of a layer (its runtime executor's):
 * the layer input is always kept, the rest per policy (a custom policy:
 * what it keeps on the device, MaxText's sizes, mxmem.c). */
static void layer_acts(const cost *c, const smoe_dims *d, const smoe_sim_shape *sh, sim_kind *k)
{
    const double T = smoe_sim_tokens(sh), S = (double)sh->seq;
    const double B = T / S, E = (double)d->emb, H = (double)d->heads; /* B: sequences' worth */
    double inner = T * (E * 6 + H * (double)(d->qk_nope + d->qk_rope + d->v_head) * 3 +
                        (k->moe ? (double)d->topk * (E * 2 + (double)d->moe_mlp * 3) +
                                      (double)(d->shared_experts * d->moe_mlp) * 3
                                : (double)d->mlp * 3));
    if (c->hw->kind == SMOE_HW_CPU)
        inner += B * H * S * S; /* attention probabilities */
    k->act_peak = inner * c->ab;
    k->act_input = T * E * c->ab;
    k->act_saved = T * E * c->ab +
                   (sh->remat == SMOE_REMAT_NONE ? inner * c->ab
                    : sh->remat == SMOE_REMAT_DOTS ? inner * c->ab * 0.6 : 0);
}

/* c for the dense matmuls (projections, dense and shared MLPs, router,
 * head): at the profile's gemm_efficiency where it has one; the attention
 * kernel and the routed experts' grouped matmuls keep compute_efficiency.
 * fp8: at the fp8 rate (smoe_sim_shape.fp8). */
cost cost_dense(const cost *c, int fp8)
{
    cost d = *c;
    if (c->hw->gemm_efficiency > 0 && c->eff > 0)
        d.eff = c->hw->gemm_efficiency;
    if (fp8)
        d.flops = c->hw->fp8_peak_flops / c->hw->devices_per_chip;
    return d;
}

/* A phase's forward time and the part of it whose outputs a custom remat
 * policy saves, which the backward does not recompute. */
typedef struct phase_t {
    double fwd, kept;
    double cp;  /* of fwd: the context-parallel key/value exchange */
    double tr;  /* the backward's transposes: 2 x fwd but the attention
                   kernel's, the grouped matmuls' at their tiles and the
                   dense path's dispatch einsum's */
} phase_t;

static const smoe_axes k_ctx_axis = { 1, { "context" } };

static void op_add(phase_t *p, double t, int saved)
{
    p->fwd += t;
    p->tr += 2 * t;
    if (saved)
        p->kept += t;
}

#define RT(t) (1u << SMOE_RT_##t)

/* The attention kernel's backward in forward-equivalents at each
 * kernel's pairs (pf, pdkv, pdq: sim_attn_mix.pairs), in matmuls over the
 * score blocks (jax splash_attention_kernel.py): the forward is q.k^T
 * (width dqk) and p.v (dv); the fused backward q.k^T again, dv = p^T.do,
 * dp = do.v^T, dk = ds^T.q, dq = ds.k, all in its dkv kernel; the split
 * one the same in its dkv kernel but dq, and q.k^T, dp and dq again in
 * its dq kernel; otherwise twice the forward (scores kept). */
static double attn_bwd_work(int kind, double dqk, double dv, double pf, double pdkv, double pdq)
{
    if (kind == SMOE_ATTN_BWD_FUSED)
        return pdkv * (3 * dqk + 2 * dv) / (dqk + dv);
    if (kind == SMOE_ATTN_BWD_SPLIT)
        return (pdkv * (2 * dqk + 2 * dv) + pdq * (2 * dqk + dv)) / (dqk + dv);
    return 2 * pf;
}

/* One attention kind's widths: the kernel's FLOPs over a causal mask's
 * pairs, key + value elements a token, a head's query-key and value
 * widths, the query heads. */
typedef struct attn_geom {
    double core, kvd, dqk, dv, heads;
} attn_geom;

/* The kernel of kind k and the context exchange into p: FLOPs at the
 * matmul rate (the profile's attention_efficiency where it has one);
 * scores are kept on chip (flash) on accelerators, materialised on cpu.
 * Splash attention (a TPU's, sh->attn_bwd) computes whole blocks: its
 * pairs; other kernels the mask's blocks (span). */
static void attn_kernel(const cost *c, const smoe_sim_shape *sh, unsigned m, attn_geom g, int k,
                        phase_t *p)
{
    const double T = smoe_sim_tokens(sh), S = (double)sh->seq, B = T / S;
    double scores = c->hw->kind == SMOE_HW_CPU ? B * g.heads * S * S * 3 : 0;
    const double *pr = c->attn.pairs[k];
    double pf = sh->attn_bwd ? pr[0] : c->attn.span[k];
    pf = pf > 0 ? pf : 1;
    double eff = c->hw->attention_efficiency > 0 && c->eff > 0 ? c->hw->attention_efficiency : c->eff;
    double t = eff > 0 ? g.core * pf / (cost_rate(c, S, S, 128) * eff) + c->overhead
                       : fmax(g.core * pf / cost_rate(c, S, S, 128), scores * c->ab / c->ew) + c->overhead;
    op_add(p, t, m & RT(CONTEXT));
    /* the backward: t per forward-equivalent at the forward's pairs */
    p->tr += (t - c->overhead) / pf * attn_bwd_work(sh->attn_bwd, g.dqk, g.dv, pf, pr[1], pr[2]) -
             2 * (t - c->overhead);
    /* context parallelism (MaxText's all_gather strategy): the keys and
     * values all-gathered over the context axis before the kernel, with
     * the kernel in the recompute; the backward's reduce-scatter of their
     * gradients is the same bytes (layer_compute keeps it to one pass) */
    p->cp = sh->context > 1 ? cost_coll(c, &k_ctx_axis, T * g.kvd * c->ab * (double)(sh->context - 1), 0)
                            : 0;
    op_add(p, p->cp, m & RT(CONTEXT));
}

/* MLA's projections (attention_mla.py: wq_a, wq_b (or wq), wkv_a, wkv_b,
 * out) into p, at cq's rates, and its widths. */
static attn_geom mla_ops(const cost *cq, const smoe_dims *d, double T, double B, double S,
                         unsigned m, phase_t *p, double *elem)
{
    const double E = (double)d->emb, H = (double)d->heads, wb = cq->ab;
    double qk = (double)(d->qk_nope + d->qk_rope), kvl = (double)d->kv_lora;
    if (d->q_lora) {
        op_add(p, cost_mm(cq, T, E, (double)d->q_lora, wb), m & (RT(Q_WA) | RT(MLA_Q)));
        op_add(p, cost_mm(cq, T, (double)d->q_lora, H * qk, wb), m & RT(QUERY));
    } else {
        op_add(p, cost_mm(cq, T, E, H * qk, wb), m & RT(QUERY));
    }
    op_add(p, cost_mm(cq, T, E, kvl + (double)d->qk_rope, wb), m & (RT(KV_WA) | RT(MLA_KV)));
    op_add(p, cost_mm(cq, T, kvl, H * (double)(d->qk_nope + d->v_head), wb),
           (m & RT(KEY)) && (m & RT(VALUE)));
    op_add(p, cost_mm(cq, T, H * (double)d->v_head, E, wb), m & RT(OUT));
    *elem += T * (E * 4 + (double)d->q_lora * 2 + kvl * 2 + H * (qk + (double)d->v_head) * 4);
    attn_geom g = { 2 * B * H * S * S * (qk + (double)d->v_head) * 0.5, H * (qk + (double)d->v_head),
                    qk, (double)d->v_head, H };
    return g;
}

/* Multi-head attention's projections (attentions.py: query, key, value
 * unless the keys serve as values, out) of kind k (sim_attn_mix) into p,
 * at cq's rates, and its widths. */
static attn_geom mha_ops(const cost *cq, const smoe_dims *d, int k, double T, double B, double S,
                         unsigned m, phase_t *p, double *elem)
{
    const sim_attn_mix *a = &cq->attn;
    const double E = (double)d->emb, H = (double)d->heads, wb = cq->ab;
    double hd = a->head_dim[k] > 0 ? (double)a->head_dim[k] : (double)d->head_dim;
    double KV = a->kv_heads[k] > 0 ? (double)a->kv_heads[k] : (double)d->kv_heads;
    op_add(p, cost_mm(cq, T, E, H * hd, wb), m & RT(QUERY));
    op_add(p, cost_mm(cq, T, E, KV * hd, wb), m & RT(KEY));
    if (!a->no_value[k])
        op_add(p, cost_mm(cq, T, E, KV * hd, wb), m & RT(VALUE));
    op_add(p, cost_mm(cq, T, H * hd, E, wb), m & RT(OUT));
    *elem += T * (E * 4 + H * hd * 6);
    attn_geom g = { 2 * B * H * S * S * 2 * hd * 0.5, 2 * KV * hd, hd, hd, H };
    return g;
}

/* The attention's ops (projections, the kernel, the out projection) into
 * p, each kept when its output is saved (m: sim_rt_canon's bits), per
 * layer kind (c->attn: gemma4's global layers, their share of the
 * layers); the projections at cq's rates (quantized), the kernel at c's. */
static void attention_ops(const cost *c, const cost *cq, const smoe_dims *d,
                          const smoe_sim_shape *sh, unsigned m, phase_t *p, double *elem)
{
    const double T = smoe_sim_tokens(sh), S = (double)sh->seq, B = T / S; /* B: sequences' worth */
    const sim_attn_mix *a = &c->attn;
    p->cp = 0;
    for (int k = 0; k < 2; k++) {
        double w = k ? a->share : 1 - a->share; /* the kind's share of the layers */
        if (!(w > 0))
            continue;
        phase_t q = { 0, 0, 0, 0 };
        double el = 0;
        attn_geom g = d->mla ? mla_ops(cq, d, T, B, S, m, &q, &el) : mha_ops(cq, d, k, T, B, S, m, &q, &el);
        attn_kernel(c, sh, m, g, k, &q);
        p->fwd += w * q.fwd, p->kept += w * q.kept, p->tr += w * q.tr, p->cp += w * q.cp;
        *elem += w * el;
    }
}

/* An MLP block of width f over T tokens (linears.py MlpBlock: one up
 * projection per activation, wi with one, wi_0, wi_1, ... with more,
 * their product, wo; a MoE layer's shared experts too). */
static void mlp_ops(const cost *c, const cost *cq, double T, double in, double f, double out,
                    int64_t nact, unsigned m, phase_t *p)
{
    for (int64_t i = 0; i < (nact > 0 ? nact : 1); i++) {
        unsigned name = i == 0 ? RT(MLPWI0) : i == 1 ? RT(MLPWI1) : 0u;
        op_add(p, cost_mm(cq, T, in, f, c->ab), (m & name) != 0);
    }
    op_add(p, cost_mm(cq, T, f, out, c->ab), m & RT(MLPWO));
    op_add(p, cost_ew(c, T * f, 3), 0);
}

/* A grouped matmul's work over its ideal, row tiles of tm (0: untiled):
 * megablox (and tokamax) visit an m tile once for every group with rows in
 * it and compute it whole each time (megablox make_group_metadata:
 * tiles_m <= visits <= tiles_m + groups - 1), so g groups over m rows cost
 * m / tm + g - 1 tiles, the upper bound, where group boundaries fall
 * inside tiles. */
static double tile_work(double tm, double m, double g)
{
    return tm > 0 && m > 0 ? 1 + (g - 1) * tm / m : 1;
}

/* The local experts' up (wi_0, wi_1) and down (wo) projections, `rows`
 * each, into ex, each kept per keep[] (a custom policy's saved names);
 * tm: wi's and wo's row tiles (forward, dlhs, drhs; NULL: untiled) over
 * the group's rows (rows x e_local experts x `t` devices of a tensor
 * group, whose tokens a device's grouped matmul holds). */
static void experts_ops(const cost *ce, double rows, double in, double f, double e_local,
                        const unsigned keep[3], const int64_t (*tm)[3], double t, phase_t *ex)
{
    double up = 0, down = 0;
    for (int i = 0; i < (int)e_local && i < 4096; i++) {
        up += cost_mm(ce, rows, in, f, ce->ab);
        down += cost_mm(ce, rows, f, in, ce->ab);
    }
    double scale = e_local > 4096 ? e_local / 4096 : 1, m = rows * e_local * t;
    for (int w = 0; w < 3; w++) {
        const int64_t *p = tm ? tm[w == 2] : NULL;
        double one = (w == 2 ? down : up) * scale;
        double fwd = one * (p ? tile_work((double)p[0], m, e_local) : 1);
        op_add(ex, fwd, keep[w] != 0);
        if (p) /* the transposes: dlhs and drhs, each at its tile */
            ex->tr += one * (tile_work((double)p[1], m, e_local) +
                             tile_work((double)p[2], m, e_local)) - 2 * fwd;
    }
}

/* The routed rows' elementwise passes (moe.py sparse_matmul): the
 * activation over the up projections' outputs (read both, write one),
 * whose rows are the buffer's (sim_routed_rows, the memory model's): the
 * grouped matmuls compute the local experts' rows alone (megablox
 * make_group_metadata: the grid covers the active groups' tiles), the
 * activation runs over the whole buffer. Expert parallelism by
 * all-to-all: the received rows' worst case (get_ragged_buffer_size);
 * ring of experts: the group's gathered rows (ep x T x topk), and
 * megablox's gmm zeroes the rest of its output (backend.py
 * _zero_uninitialized_memory, a jnp.where over the whole output): wi_0's
 * and wi_1's zeroing fused into the activation, wo's a pass of its own
 * (read and write), its consumer the unsort. A cpu profile times smoe's
 * own runtime, whose activation runs over the routed rows alone. */
static void buffer_passes(const cost *c, const smoe_dims *d, const smoe_sim_shape *sh, double ep,
                          phase_t *ex)
{
    int maxtext = c->hw->kind != SMOE_HW_CPU;
    double rows = maxtext ? sim_routed_rows(d, sh, ep) : smoe_sim_tokens(sh) * (double)d->topk;
    op_add(ex, cost_ew(c, rows * (double)d->moe_mlp, 3), 0);
    if (maxtext && sh->ring_of_experts && ep > 1)
        op_add(ex, cost_ew(c, rows * (double)d->moe_in, 2), 0);
}

/* moe.py dense_matmul's capacity branch, B sequences of S tokens on the
 * device, C slots per expert and sequence (sim_moe_capacity), M = moe_in:
 * the masks [B, S, E, C] (combine_mask in the compute dtype, dispatch_mask
 * as booleans: each written once, the one-hot and the product fused into
 * them), the dispatch einsum BSM,BSEC->EBCM before the exchange, the
 * experts' einsums on their B x C x EP rows, the combine einsum
 * EBCM,BSEC->BSM after it; dense dots at cq's rates. wi_0, wi_1 and wo
 * carry both their names (mlpwi_0 and moe_mlpwi_0, ...). The backward
 * holds two transposes of each einsum but the dispatch einsum's one (its
 * boolean mask takes no gradient). */
static void dense_moe_ops(const cost *c, const cost *cq, const smoe_dims *d,
                          const smoe_sim_shape *sh, double e_local, unsigned m, phase_t *pre,
                          phase_t *ex, double *post)
{
    const double T = smoe_sim_tokens(sh), S = (double)sh->seq, B = T / S;
    const double ne = (double)d->experts, in = (double)d->moe_in, f = (double)d->moe_mlp;
    const double C = sim_moe_capacity(d, sh), slots = sim_moe_slots(d, sh);
    op_add(pre, cost_ew(c, slots * S, (c->ab + 1) / c->ab), 0); /* the masks */
    double dispatch = B * cost_mm(cq, ne * C, S, in, c->ab);
    op_add(pre, dispatch, 0);
    pre->tr -= dispatch; /* the tokens' gradient alone */
    double rows = slots / e_local;
    const unsigned keep[3] = { m & (RT(MOE_WI0) | RT(MLPWI0)), m & (RT(MOE_WI1) | RT(MLPWI1)),
                               m & (RT(MOE_WO) | RT(MLPWO)) };
    experts_ops(cq, rows, in, f, e_local, keep, NULL, 1, ex);
    op_add(ex, cost_ew(c, rows * e_local * f, 3), 0); /* the activation */
    *post = B * cost_mm(cq, S, ne * C, in, c->ab);
}

/* Compute of one layer kind: forward split around the expert exchange,
 * backward = 2x the forward matmuls + the recompute of the remat policy:
 * the whole forward (full), a share (save-dot-products), none, or, with
 * a custom policy, the forward less the ops whose outputs it saves. */
void cost_layer(const cost *c, const smoe_dims *d, const smoe_sim_shape *sh,
                          double e_local, sim_kind *k)
{
    const double T = smoe_sim_tokens(sh), E = (double)d->emb;
    const unsigned m =
        sh->remat == SMOE_REMAT_CUSTOM ? sim_rt_canon(d, sh->remat_dev | sh->remat_host) : 0;
    phase_t pre = { 0, 0, 0, 0 }, ex = { 0, 0, 0, 0 };
    double elem = 0, shared = 0, post = 0;
    cost dq = cost_dense(c, sh->fp8), rq = *c; /* dense; routed (both fp8: quantized) */
    if (sh->fp8)
        rq.flops = dq.flops;
    const cost *cq = &dq;
    attention_ops(c, cq, d, sh, m, &pre, &elem);
    op_add(&pre, cost_ew(c, elem, 1), 0);
    if (!k->moe) {
        mlp_ops(c, cq, T, E, (double)d->mlp, E, d->n_activations, m, &pre);
    } else {
        double ne = (double)d->experts, tk = (double)d->topk, f = (double)d->moe_mlp;
        double in = (double)d->moe_in, sh_w = (double)(d->shared_experts * d->moe_mlp);
        op_add(&pre, cost_mm(cq, T, in, ne, c->ab) + cost_ew(c, T * ne, 4), 0); /* the router */
        if (sh_w > 0) {
            double before = pre.fwd;
            mlp_ops(c, cq, T, in, sh_w, E, d->n_activations, m, &pre);
            shared = pre.fwd - before;
        }
        if (sh->moe_capacity > 0) {
            dense_moe_ops(c, cq, d, sh, e_local, m, &pre, &ex, &post);
        } else { /* rows this device's experts process: T * topk on average */
            const unsigned keep[3] = { m & RT(MOE_WI0), m & RT(MOE_WI1), m & RT(MOE_WO) };
            const double tp = fmax(1, (double)smoe_mesh_axis_size(c->mesh, "tensor"));
            int64_t tm[2][3];
            memcpy(tm, sh->gmm_tm, sizeof tm);
            if (sh->gmm_lut) { /* the buffer's rows, the local experts' shapes */
                double rows = sim_routed_rows(d, sh, ne / e_local);
                sim_tokamax_tiles(rows, in, f / tp, e_local, tm[0]);
                sim_tokamax_tiles(rows, f / tp, in, e_local, tm[1]);
            }
            experts_ops(&rq, T * tk / e_local, in, f, e_local, keep, tm, tp, &ex);
            buffer_passes(c, d, sh, ne / e_local, &ex);
            /* dispatch and combine: elementwise passes, unless the profile
             * times them on their own engine (permute_bandwidth, cost.c) */
            if (!(c->hw->permute_bandwidth > 0)) {
                op_add(&ex, cost_ew(c, T * tk * E, 4), 0);
                post = cost_ew(c, T * tk * E, 2);
            }
        }
    }
    k->fwd_pre = pre.fwd;
    k->pre_shared = pre.fwd > 0 ? shared / pre.fwd : 0;
    k->fwd_exp = ex.fwd;
    k->fwd_post = post;
    double rc = sh->remat == SMOE_REMAT_NONE ? 0 : sh->remat == SMOE_REMAT_DOTS ? 0.15 : 1;
    k->rc[0] = pre.fwd > 0 && m ? (pre.fwd - pre.kept) / pre.fwd : rc;
    k->rc[1] = ex.fwd > 0 && m ? (ex.fwd - ex.kept) / ex.fwd : rc;
    k->rc[2] = rc;
    /* the transposes' one key/value reduce-scatter (context parallelism),
     * not two passes of the exchange */
    k->bwd_pre = pre.tr + pre.fwd * k->rc[0] - pre.cp;
    if (pre.cp > 0)
        k->rc[0] = k->bwd_pre / pre.fwd - 2;
    k->bwd_exp = ex.tr + ex.fwd * k->rc[1];
    k->bwd_post = post * (2 + k->rc[2]);
    k->bwd_full_pre = pre.tr + pre.fwd - pre.cp; /* MaxText's prefetch path always remats fully */
    k->bwd_full_exp = ex.tr + ex.fwd;
    k->bwd_full_post = post * 3;
    layer_acts(c, d, sh, k);
}


/* The head, forward and backward (the logits dot and its two transposes;
 * the softmax and loss over the logits). With tiles > 1 each tile is its
 * own dot (T / tiles rows), and the backward's scan computes each tile's
 * logits again before its transposes (vocab_tiling_linen_loss's custom
 * VJP: jax.vjp of the tile's loss): one more forward dot and its
 * elementwise passes over the logits. */
double cost_head(const cost *c, double T, double E, double V, double tiles)
{
    if (tiles <= 1)
        return 3 * cost_mm(c, T, E, V, c->ab) + cost_ew(c, T * V, 4);
    return tiles * 4 * cost_mm(c, T / tiles, E, V, c->ab) + cost_ew(c, T * V, 6);
}
