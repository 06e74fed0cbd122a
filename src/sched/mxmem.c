/* MaxText's memory model: what a step of MaxText's program (XLA's scan,
 * MaxText's prefetch path, a smoe schedule under XLA's dataflow) holds and
 * when, each term from MaxText's code (AI-Hypercomputer/maxtext, paths
 * under src/maxtext/). The sizes come from the model's dimensions
 * (sim_mx_sizes, at model build); the lifetimes are events on the step's
 * timeline (sim_mx_*, from sim.c's event loop), so the peak is read at one
 * instant, its breakdown with it. smoe's runtime executor keeps its own
 * count (smoe train's, sim.c sim_memory). */
#include "sim_impl.h"

#include <math.h>
#include <stdlib.h>

/* moe.py generate_masks: a sequence's slots per expert,
 * int(max(ceil(seq * topk / experts) * capacity_factor, capacity_factor)). */
double sim_moe_capacity(const smoe_dims *d, const smoe_sim_shape *sh)
{
    double per = ceil((double)sh->seq * (double)d->topk / (double)d->experts);
    return floor(fmax(per * sh->moe_capacity, sh->moe_capacity));
}

/* The dense path's slots on a device: every expert's slots of its
 * sequences ([E, B, C]), before the exchange and as many after it. */
double sim_moe_slots(const smoe_dims *d, const smoe_sim_shape *sh)
{
    return smoe_sim_tokens(sh) / (double)sh->seq * sim_moe_capacity(d, sh) * (double)d->experts;
}

/* moe.py sparse_matmul: the routed rows arrive in a buffer of
 * get_ragged_buffer_size rows (ragged_buffer_factor -1, base.yml: the
 * worst case, T * topk * min(EP, experts / topk)); with use_ring_of_experts
 * (roe_ag_and_route) every shard's tokens are all-gathered and permuted
 * whole, T * EP * topk rows. dense_matmul's capacity branch: its slots
 * (sim_moe_slots). */
double sim_routed_rows(const smoe_dims *d, const smoe_sim_shape *sh, double ep)
{
    if (sh->moe_capacity > 0)
        return sim_moe_slots(d, sh);
    double rows = smoe_sim_tokens(sh) * (double)d->topk;
    if (sh->ring_of_experts)
        return rows * ep;
    return ep > 1 ? rows * fmin(ep, (double)d->experts / (double)d->topk) : rows;
}

double sim_rt_bytes(const smoe_dims *d, const smoe_sim_shape *sh, double ab, double ep, int moe,
                    int t)
{
    const double T = smoe_sim_tokens(sh), E = (double)d->emb, H = (double)d->heads;
    const double mlp = moe ? (double)(d->shared_experts * d->moe_mlp) : (double)d->mlp;
    const double rows = moe ? sim_routed_rows(d, sh, ep) : 0;
    double q = H * (double)d->head_dim, kd = (double)(d->kv_heads * d->head_dim), vd = kd, ctx = q;
    if (d->mla) {
        q = kd = H * (double)(d->qk_nope + d->qk_rope);
        vd = ctx = H * (double)d->v_head;
    }
    double e;
    switch (t) {
    case SMOE_RT_INPUT: case SMOE_RT_OUT: e = T * E; break;
    case SMOE_RT_QUERY: e = T * q; break;
    case SMOE_RT_KEY: e = T * kd; break;
    case SMOE_RT_VALUE: e = T * vd; break;
    case SMOE_RT_CONTEXT: e = T * ctx; break;
    case SMOE_RT_MLPWI0: e = T * mlp; break;
    case SMOE_RT_MLPWI1: e = d->n_activations == 1 && !d->fused_mlp ? 0 : T * mlp; break;
    case SMOE_RT_MLPWO: e = mlp > 0 ? T * E : 0; break;
    case SMOE_RT_MOE_WI0: case SMOE_RT_MOE_WI1: e = rows * (double)d->moe_mlp; break;
    case SMOE_RT_MOE_WO: e = rows * (double)d->moe_in; break;
    case SMOE_RT_Q_WA: case SMOE_RT_MLA_Q: e = d->mla ? T * (double)d->q_lora : 0; break;
    case SMOE_RT_KV_WA: e = d->mla ? T * (double)(d->kv_lora + d->qk_rope) : 0; break;
    case SMOE_RT_MLA_KV: e = d->mla ? T * (double)d->kv_lora : 0; break;
    default: e = 0; break;
    }
    return e * ab;
}

/* The activations of one layer kind, bytes per device, T tokens per device
 * in `ab`-byte elements, `ep` expert-parallel ways. */
void sim_mx_sizes(const smoe_dims *d, const smoe_sim_shape *sh, double ab, double ep, sim_kind *k)
{
    const double T = smoe_sim_tokens(sh), E = (double)d->emb, H = (double)d->heads;
    /* the attention's q, k, v projections (attention_mla.py / attentions.py
     * checkpoint_name "query_proj", "key_proj", "value_proj") and its
     * output before the out projection ("attention_out") */
    double q, kv, ctx;
    if (d->mla) {
        q = H * (double)(d->qk_nope + d->qk_rope);
        kv = q + H * (double)d->v_head;
        ctx = H * (double)d->v_head;
    } else {
        q = H * (double)d->head_dim;
        kv = 2 * (double)(d->kv_heads * d->head_dim);
        ctx = q;
    }
    double attn = T * (q + kv + ctx) * ab;
    double named = T * (q + kv + E) * ab; /* with "out_proj" (T x emb) */
    double mlp;
    if (!k->moe) { /* linears.py mlp_block: wi_0, wi_1 ("mlpwi_0", "mlpwi_1"),
                    * their product (wo's input), wo ("mlpwo") */
        mlp = T * (3 * (double)d->mlp + E) * ab;
        named += T * (2 * (double)d->mlp + E) * ab;
    } else {
        /* the grouped matmuls' operands and outputs on the routed rows
         * (sim_routed_rows): the rows (emb), wi_0's and wi_1's outputs
         * ("mlpwi_0", "moe_mlpwi_1"), their product, wo's output ("mlpwo");
         * the shared experts as an mlp_block */
        double rows = sim_routed_rows(d, sh, ep);
        double f = (double)d->moe_mlp, in = (double)d->moe_in;
        double sh_f = (double)(d->shared_experts * d->moe_mlp);
        mlp = rows * (2 * in + 3 * f) * ab + (sh_f > 0 ? T * (3 * sh_f + E) * ab : 0);
        if (sh->moe_capacity > 0) /* the dense path's masks [B, S, E, C]: combine_mask in
                                   * the compute dtype, dispatch_mask as booleans */
            mlp += rows * (double)sh->seq * (ab + 1);
        /* "minimal" saves wi_0's and wo's outputs, not wi_1's: the sparse
         * path names it only "moe_mlpwi_1" */
        named += rows * (f + in) * ab + (sh_f > 0 ? T * (2 * sh_f + E) * ab : 0);
    }
    k->act_mx_fwd = fmax(attn, mlp);
    k->act_mx_res = attn + mlp;
    /* decoders.py get_remat_policy: "full" is nn.remat with no policy, so
     * the scan keeps each layer's input ("decoder_layer_input") alone;
     * "minimal" (save-dot-products) saves the names of minimal_policy
     * (query_proj, key_proj, value_proj, out_proj, mlpwi_0, mlpwi_1,
     * mlpwo); none keeps every residual; "custom" keeps its tensors on the
     * device (its offloaded ones live in host memory, moved each way once:
     * act_host) */
    k->act_mx_saved = k->act_input + (sh->remat == SMOE_REMAT_DOTS   ? named
                                      : sh->remat == SMOE_REMAT_NONE ? k->act_mx_res
                                                                     : 0);
    k->act_host = 0;
    if (sh->remat == SMOE_REMAT_CUSTOM) {
        unsigned dev = sim_rt_canon(d, sh->remat_dev), host = sim_rt_canon(d, sh->remat_host);
        k->act_mx_saved = 0;
        for (int t = 0; t < SMOE_RT_N; t++) {
            double b = sim_rt_bytes(d, sh, ab, ep, k->moe, t);
            if (dev >> t & 1)
                k->act_mx_saved += b;
            else if (host >> t & 1)
                k->act_host += b;
        }
        k->act_saved = k->act_mx_saved; /* smoe's runtime under the same policy */
    }
}

void sim_mx_mem(sim *x, double t, double bytes, int cat)
{
    if (x->nev < x->cap) {
        x->ev[x->nev].t = t;
        x->ev[x->nev].bytes = bytes;
        x->ev[x->nev].cat = cat;
        x->nev++;
    }
}

/* A layer's activations over one unit's compute [start, end]: the forward
 * saves what the remat policy keeps (from the layer's start until the end
 * of its backward) and holds its residual buffers while it runs; the
 * backward recomputes the rest and holds every residual of the layer
 * (jax.checkpoint's backward: recompute, then the transposes). MaxText's
 * prefetch path always saves the layer input alone (fsdp_prefetch.py
 * _custom_vjp_prefetch_pipeline: "Only each layer's input activation is
 * saved", the backward "always rematerializes each layer in full"). */
void sim_mx_unit(sim *x, const sim_kind *k, int bwd, double start, double end)
{
    double saved = x->mx ? k->act_input : k->act_mx_saved;
    double extra = fmax(0, saved - k->act_input); /* kept beyond the input */
    double tr = bwd ? fmax(0, k->act_mx_res - extra) : k->act_mx_fwd;
    if (!bwd)
        sim_mx_mem(x, start, saved, SIM_MEM_ACT);
    sim_mx_mem(x, start, tr, SIM_MEM_ACT);
    sim_mx_mem(x, end, -tr, SIM_MEM_ACT);
    if (bwd)
        sim_mx_mem(x, end, -saved, SIM_MEM_ACT);
}

/* The step's ends: the embedding's weights gathered from their gather's
 * issue (t0) to the end of the lookup (embeddings.py Embed.__call__ casts
 * the table to `dtype`, then takes the rows: the gathered table is used by
 * the lookup alone). */
void sim_mx_embed(sim *x, double t0, double fwd_end)
{
    const smoe_sim_model *m = x->m;
    sim_mx_mem(x, t0, m->top_embed_bytes, SIM_MEM_GATHERED);
    sim_mx_mem(x, fwd_end, -m->top_embed_bytes, SIM_MEM_GATHERED);
    double head = m->top_bytes - m->top_embed_bytes;
    sim_mx_mem(x, t0, head, SIM_MEM_GATHERED); /* issued with it (sim.c) */
}

/* The head, [start, end] its forward and backward (decoders.py
 * apply_output_head: the final norm and logits_dense, or the embedding
 * with logits_via_embedding): its gathered weights die with it; the
 * logits (batch x seq x vocab per device in the dot's dtype) and their
 * gradient, the operand of the head's two transposes, live through it;
 * its weights' gradients from its end; the layers' gradient accumulators
 * (the backward scan's outputs, then the optimizer's input) from the start
 * of the backward. */
void sim_mx_head(sim *x, double start, double end)
{
    const smoe_sim_model *m = x->m;
    double head = m->top_bytes - m->top_embed_bytes;
    sim_mx_mem(x, start, 2 * m->logits_bytes, SIM_MEM_ACT);
    sim_mx_mem(x, end, -2 * m->logits_bytes, SIM_MEM_ACT);
    sim_mx_mem(x, end, -head, SIM_MEM_GATHERED);
    sim_mx_mem(x, end, head, SIM_MEM_GATHERED);
    sim_mx_mem(x, end, m->mem_grads, SIM_MEM_GRADS);
}

/* The embedding's gradient (the lookup's transpose: a scatter-add into a
 * table of `dtype`) from the start of its backward; both top-level
 * gradients until their reduce-scatter (sim.c's "reduce-scatter top")
 * ends, when the full-size buffers free. */
void sim_mx_top_grads(sim *x, double bwd_start, double rs_end)
{
    const smoe_sim_model *m = x->m;
    sim_mx_mem(x, bwd_start, m->top_embed_bytes, SIM_MEM_GATHERED);
    sim_mx_mem(x, rs_end, -m->top_bytes, SIM_MEM_GATHERED);
}

/* The peak: the static parts (parameters, optimizer state) and the live
 * events at the instant their sum peaks, with the breakdown there. */
void sim_mx_peak(sim *x, int (*cmp)(const void *, const void *))
{
    const smoe_sim_model *m = x->m;
    qsort(x->ev, (size_t)x->nev, sizeof *x->ev, cmp);
    double live[SIM_MEM_NCAT] = { 0 }, at[SIM_MEM_NCAT] = { 0 }, total = 0, peak = 0;
    for (int i = 0; i < x->nev; i++) {
        live[x->ev[i].cat] += x->ev[i].bytes;
        total += x->ev[i].bytes;
        if (total > peak) {
            peak = total;
            for (int c = 0; c < SIM_MEM_NCAT; c++)
                at[c] = live[c];
        }
    }
    x->r.mem_params = m->mem_params;
    x->r.mem_optimizer = m->mem_optimizer;
    x->r.mem_grads = at[SIM_MEM_GRADS];
    x->r.mem_gathered = at[SIM_MEM_GATHERED];
    x->r.mem_activations = at[SIM_MEM_ACT];
    x->r.peak_hbm_bytes = m->mem_params + m->mem_optimizer + peak;
}
