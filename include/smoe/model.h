/* smoe model: a DeepSeek-style MoE decoder, forward and backward, on the
 * local tensors of one rank (fp32). It knows nothing about MPI: weights
 * arrive already gathered (natural row-major layout, MaxText shapes with the
 * scan dim removed), and the expert all-to-all goes through the
 * smoe_ep_comm interface (comm.h; a single-rank implementation is provided).
 *
 * Structure (per token t of the local batch, T = batch * seq):
 *   x = embed[token]
 *   for each layer l (first n_dense dense, then n_moe MoE):
 *     h  = rmsnorm(x) * pre_norm
 *     MLA: q = (q_lora ? rmsnorm(h @ wq_a) * q_norm @ wq_b : h @ query)
 *          kv_a = h @ wkv_a = [c_kv | k_pe]; kv = rmsnorm(c_kv) * kv_norm @ wkv_b
 *          = [k_nope | v] per head; RoPE on q_pe and the shared k_pe;
 *          causal softmax attention per sequence and head, scale
 *          attn_scale_mult/sqrt(nope+rope); RoPE as MaxText's rotary embeddings;
 *          x += o @ out
 *     h2 = rmsnorm(x) * post_norm
 *     dense: x += (silu(h2 @ wi_0) * (h2 @ wi_1)) @ wo
 *     MoE:   x += shared SwiGLU(h2) + sum_k w_k * expert_{e_k}(h2)
 *            router (MaxText moe.py GateLogit, get_topk, deepseek_routing,
 *            deepseek_scale_weights): s = softmax|sigmoid|identity(h2 @ gate),
 *            gate values g = s (+ bias if routed_bias); top-k on g; w = g[top-k]
 *            (bias_in_weights) or s[top-k], divided by (sum + 1e-20) for
 *            sigmoid, times routed_scale; tokens go to the rank owning their
 *            expert through an all-to-all over the expert group and back
 *            (ring: every rank gets every token of the group, runs its
 *            experts and the tokens' combined outputs go back summed).
 *            Load-balance loss (lb_weight > 0, moe.py load_balance_loss, per
 *            sequence): lb_weight * E / lb_batch * sum_{seq, e} density * prob
 *            (density: mean over the sequence of "e is in the top-k", prob:
 *            mean of softmax(g)), averaged over the MoE layers.
 *   loss = sum_t [CE + z_loss * lse_t^2](rmsnorm(x) * final_norm @ logits,
 *          target) * loss_scale + the load-balance loss
 *
 * Thread-safety: a smoe_model is used by one thread at a time. */
#ifndef SMOE_MODEL_H
#define SMOE_MODEL_H

#include <stdint.h>

#include "smoe/backend.h"
#include "smoe/comm.h"
#include "smoe/core.h"
#include "smoe/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-layer weight slots. Shapes are per layer (scan dim removed); E_l is
 * the number of local experts (experts / ep). Slots a layer kind does not
 * use are NULL. */
typedef enum smoe_wslot {
    SMOE_W_PRE_NORM,  /* (emb)                      pre_self_attention_layer_norm/scale */
    SMOE_W_POST_NORM, /* (emb)                      post_self_attention_layer_norm/scale */
    SMOE_W_QUERY,     /* (emb, H, nope+rope)        self_attention/query/kernel (q_lora == 0) */
    SMOE_W_WQ_A,      /* (emb, q_lora)              self_attention/wq_a/kernel */
    SMOE_W_Q_NORM,    /* (q_lora)                   self_attention/q_norm/scale */
    SMOE_W_WQ_B,      /* (q_lora, H, nope+rope)     self_attention/wq_b/kernel */
    SMOE_W_WKV_A,     /* (emb, kv_lora+rope)        self_attention/wkv_a/kernel */
    SMOE_W_KV_NORM,   /* (kv_lora)                  self_attention/kv_norm/scale */
    SMOE_W_WKV_B,     /* (kv_lora, H, nope+v)       self_attention/wkv_b/kernel */
    SMOE_W_OUT,       /* (H, v, emb)                self_attention/out/kernel */
    SMOE_W_MLP_WI0,   /* (emb, mlp)                 mlp/wi_0/kernel        (dense) */
    SMOE_W_MLP_WI1,   /* (emb, mlp)                 mlp/wi_1/kernel        (dense) */
    SMOE_W_MLP_WO,    /* (mlp, emb)                 mlp/wo/kernel          (dense) */
    SMOE_W_GATE,      /* (emb, E)                   .../MoeBlock_0/gate/kernel */
    SMOE_W_GATE_BIAS, /* (E)                        .../MoeBlock_0/gate/bias (routed_bias) */
    SMOE_W_EXP_WI0,   /* (E_l, emb, moe_mlp)        .../MoeBlock_0/wi_0 */
    SMOE_W_EXP_WI1,   /* (E_l, emb, moe_mlp)        .../MoeBlock_0/wi_1 */
    SMOE_W_EXP_WO,    /* (E_l, moe_mlp, emb)        .../MoeBlock_0/wo */
    SMOE_W_SH_WI0,    /* (emb, shared*moe_mlp)      .../shared_experts/wi_0/kernel */
    SMOE_W_SH_WI1,    /* (emb, shared*moe_mlp)      .../shared_experts/wi_1/kernel */
    SMOE_W_SH_WO,     /* (shared*moe_mlp, emb)      .../shared_experts/wo/kernel */
    SMOE_W_NSLOTS
} smoe_wslot;

/* Top-level weights. */
typedef enum smoe_tslot {
    SMOE_T_EMBED,      /* (vocab, emb)  token_embedder/embedding */
    SMOE_T_FINAL_NORM, /* (emb)         decoder/decoder_norm/scale */
    SMOE_T_LOGITS,     /* (emb, vocab)  decoder/logits_dense/kernel */
    SMOE_T_NSLOTS
} smoe_tslot;

/* MaxText path of a slot relative to its stack ("self_attention/wq_a/kernel")
 * and of a top-level weight ("decoder/logits_dense/kernel"). */
const char *smoe_wslot_path(smoe_wslot s);
const char *smoe_tslot_path(smoe_tslot s);
/* Is the slot used by a dense (moe = 0) or MoE (moe = 1) layer of cfg? */
struct smoe_model_cfg;
int smoe_wslot_used(const struct smoe_model_cfg *cfg, smoe_wslot s, int moe);
/* Number of elements of a slot's per-layer tensor (local experts for the
 * routed slots). */
int64_t smoe_wslot_numel(const struct smoe_model_cfg *cfg, smoe_wslot s);
int64_t smoe_tslot_numel(const struct smoe_model_cfg *cfg, smoe_tslot s);

typedef struct smoe_model_cfg {
    int64_t emb, heads;
    int64_t q_lora;             /* 0: plain query projection */
    int64_t kv_lora, qk_nope, qk_rope, v_head;
    int64_t mlp;                /* dense MLP width */
    int64_t moe_mlp;            /* routed expert width */
    int64_t experts, topk;
    int64_t shared;             /* shared experts (width shared * moe_mlp) */
    int64_t vocab;
    int64_t n_dense, n_moe;     /* layers: n_dense dense first, then n_moe MoE */
    int score_sigmoid;          /* 0: softmax scores; 1: sigmoid, top-k renormalised */
    int score_raw;              /* 1: routed_score_func "": the raw logits are the scores */
    int routed_bias;            /* gate/bias added to the scores (gate values) */
    int bias_in_weights;        /* 1: the combine weights are the gate values (bias
                                   included, so it is trained); 0: the pre-bias scores
                                   (MaxText's DeepSeek-V3/V4 model names) */
    float routed_scale;         /* routed_scaling_factor */
    float lb_weight;            /* load_balance_loss_weight (0: none) */
    int64_t lb_batch;           /* sequences the load-balance mean runs over (the
                                   global batch); 0 = batch */
    float z_loss;               /* z_loss_multiplier (0: none) */
    float eps;                  /* RMSNorm epsilon */
    float rope_theta;           /* RoPE base (used when rope.max_timescale == 0:
                                   interleaved theta^(-2i/d)) */
    smoe_rope_cfg rope;         /* MaxText's rotary embedding (rope.max_timescale > 0) */
    int rope_halves;            /* 1: pairs (i, i + d/2); 0: (2i, 2i + 1) */
    float rope_scale;           /* rope output multiplier (0 = 1) */
    float attn_scale_mult;      /* multiplies 1/sqrt(nope + rope) (0 = 1) */
    float capacity_factor;      /* <= 0: dropless; else per-expert capacity per
                                   sending rank = ceil(T * topk / experts * cf) */
    int64_t seq;                /* sequence length */
    int64_t batch;              /* local sequences */
    int64_t ep;                 /* expert-parallel size; experts % ep == 0 */
    int ring;                   /* 1: ring of experts (use_ring_of_experts): the tokens
                                   are all-gathered over the expert group and the
                                   outputs reduce-scattered back, instead of the
                                   all-to-all; the same computation (ep == 1: ignored) */
} smoe_model_cfg;


/* Statistics of the forwards/backwards since the last reset, for the
 * progress line. */
typedef struct smoe_model_stats {
    double a2a_seconds;        /* time inside the expert all-to-alls */
    int64_t dropped;           /* (token, expert) pairs over capacity (forward) */
    int64_t routed;            /* (token, expert) pairs routed (forward) */
    double aux_loss;           /* load-balance loss of this rank's sequences, already
                                  scaled (forward; the global one sums over ranks) */
    double z_loss;             /* z-loss of this rank's tokens, times loss_scale (head) */
} smoe_model_stats;

typedef struct smoe_model smoe_model;

/* Model FLOPs of one token's forward (the backward counts twice that):
 * 2 per multiply-add of every projection, the causal attention core at
 * (seq + 1) / 2 positions on average, the router, shared and top-k routed
 * experts, the head. */
double smoe_model_fwd_flops_per_token(const struct smoe_model_cfg *m);

/* Validate cfg and allocate the activation slab for one step (all layers'
 * saved activations). SMOE_EINVAL names the bad dimension. The model runs
 * its kernels through the CPU table (smoe_kops_cpu); smoe_model_new_on
 * takes the table (backend.h, not owned, outliving the model) and its
 * stream argument instead: then the activations live in the table's
 * memory, and so must the weights, gradients and token ids handed to the
 * calls below. A table that is not synchronous runs dense layers only so
 * far (SMOE_EINVAL for a config with MoE layers). */
SMOE_MUST_CHECK
smoe_status smoe_model_new(const smoe_model_cfg *cfg, smoe_model **out,
                           smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_model_new_on(const smoe_model_cfg *cfg, const smoe_kops *ops, void *stream,
                              smoe_model **out, smoe_err *err);
void smoe_model_free(smoe_model *m);
const smoe_model_cfg *smoe_model_config(const smoe_model *m);
/* The kernel table the model runs on (the optimizer updates its weights
 * with the same one). */
const smoe_kops *smoe_model_kops(const smoe_model *m);
/* ... and its stream argument (NULL for the CPU table). */
void *smoe_model_stream(const smoe_model *m);
/* The bytes smoe_model_new(cfg) will allocate, without allocating them
 * (the same checks: SMOE_EINVAL for a config it refuses). */
SMOE_MUST_CHECK
smoe_status smoe_model_need_bytes(const struct smoe_model_cfg *cfg, int64_t *bytes,
                                  smoe_err *err);
/* Bytes of activation memory: the slab, plus the MoE routed-row stores as
 * currently grown (they start at the balanced load and grow with skewed
 * routing, up to the dropless worst case ep * T * topk rows per layer). */
int64_t smoe_model_act_bytes(const smoe_model *m);
/* Statistics accumulated since creation or the last reset. */
smoe_model_stats smoe_model_stats_get(const smoe_model *m);
void smoe_model_stats_reset(smoe_model *m);
/* The experts (T, topk) that MoE layer l chose in its last forward, best
 * first, or NULL for a dense layer. Valid until the next forward of layer
 * l; for tests (routing stability under perturbation, drop counts) and
 * routing statistics. */
const int32_t *smoe_model_topk(const smoe_model *m, int l);

/* x (T, emb) = embed[tokens]; tokens (T) in [0, vocab). */
void smoe_model_embed_fwd(smoe_model *m, const float *embed,
                          const int32_t *tokens, float *x);
/* dembed (vocab, emb) += scatter of dx (T, emb) by tokens. */
void smoe_model_embed_bwd(smoe_model *m, float *dembed, const int32_t *tokens,
                          const float *dx);

/* Layer l forward: x (T, emb) in, out; saves what the backward needs. */
SMOE_MUST_CHECK
smoe_status smoe_model_layer_fwd(smoe_model *m, int l,
                                 const float *const w[SMOE_W_NSLOTS], float *x,
                                 smoe_ep_comm *comm, smoe_err *err);
/* Layer l backward: dx (T, emb) in (grad of the layer output), out (grad of
 * its input); dw[slot] (same shapes as w, may be NULL for unused slots)
 * are ACCUMULATED into. Must follow the forward of the same step, layers
 * in reverse order. */
SMOE_MUST_CHECK
smoe_status smoe_model_layer_bwd(smoe_model *m, int l,
                                 const float *const w[SMOE_W_NSLOTS],
                                 float *const dw[SMOE_W_NSLOTS], float *dx,
                                 smoe_ep_comm *comm, smoe_err *err);

/* Head: loss = loss_scale * sum_t [CE + z_loss * lse^2](rmsnorm(x) *
 * final_norm @ logits_w, targets[t]); returns the loss (the z-loss part is
 * also added to the stats). If dx is not NULL, writes dx (T, emb) and
 * accumulates dnorm (emb) and dlogits (emb, vocab). The load-balance loss
 * is not included (it is in the stats after the MoE forwards). */
double smoe_model_head(smoe_model *m, const float *final_norm,
                       const float *logits_w, const int32_t *targets,
                       const float *x, float *dx, float *dnorm,
                       float *dlogits, float loss_scale);

#ifdef __cplusplus
}
#endif
#endif
