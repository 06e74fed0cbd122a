/* Internal to the plan module: model dimensions read from a config. */
#ifndef SMOE_PLAN_DIMS_H
#define SMOE_PLAN_DIMS_H

#include "smoe/config.h"

typedef struct model_dims {
    const char *decoder_block;
    int64_t emb, heads, kv_heads, head_dim, mlp, moe_mlp, layers, vocab;
    int64_t first_dense, experts, shared_experts;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    int64_t moe_in;          /* moe_expert_input_dim, or emb */
    int64_t n_activations;   /* len(mlp_activations) */
    int64_t scan_axis;       /* param_scan_axis */
    int64_t mtp_layers;
    int routed_bias, logits_via_embedding, fused_mlp, fused_qkv;
    int shard_exp_on_fsdp, use_2d_fsdp, batch_split, use_qk_norm;
    int context_autoregressive; /* ici_context_autoregressive_parallelism > 1 */
    int scan_layers;
} model_dims;

smoe_status plan_read_dims(const smoe_config *c, model_dims *d, smoe_err *err);

#endif
