/* The weight slots of the model: their MaxText paths (relative to the
 * layer stack "decoder/dense_layers/" or "decoder/moe_layers/", or absolute
 * for the top-level weights), which slots each layer kind uses, and their
 * per-layer element counts. Pure functions, thread-safe.
 */
#include "model_impl.h"

#include <string.h>

static const char *const wslot_paths[SMOE_W_NSLOTS] = {
    [SMOE_W_PRE_NORM] = "pre_self_attention_layer_norm/scale",
    [SMOE_W_POST_NORM] = "post_self_attention_layer_norm/scale",
    [SMOE_W_QUERY] = "self_attention/query/kernel",
    [SMOE_W_WQ_A] = "self_attention/wq_a/kernel",
    [SMOE_W_Q_NORM] = "self_attention/q_norm/scale",
    [SMOE_W_WQ_B] = "self_attention/wq_b/kernel",
    [SMOE_W_WKV_A] = "self_attention/wkv_a/kernel",
    [SMOE_W_KV_NORM] = "self_attention/kv_norm/scale",
    [SMOE_W_WKV_B] = "self_attention/wkv_b/kernel",
    [SMOE_W_OUT] = "self_attention/out/kernel",
    [SMOE_W_MLP_WI0] = "mlp/wi_0/kernel",
    [SMOE_W_MLP_WI1] = "mlp/wi_1/kernel",
    [SMOE_W_MLP_WO] = "mlp/wo/kernel",
    [SMOE_W_GATE] = "DeepSeekMoeBlock_0/MoeBlock_0/gate/kernel",
    [SMOE_W_GATE_BIAS] = "DeepSeekMoeBlock_0/MoeBlock_0/gate/bias",
    [SMOE_W_EXP_WI0] = "DeepSeekMoeBlock_0/MoeBlock_0/wi_0",
    [SMOE_W_EXP_WI1] = "DeepSeekMoeBlock_0/MoeBlock_0/wi_1",
    [SMOE_W_EXP_WO] = "DeepSeekMoeBlock_0/MoeBlock_0/wo",
    [SMOE_W_SH_WI0] = "DeepSeekMoeBlock_0/shared_experts/wi_0/kernel",
    [SMOE_W_SH_WI1] = "DeepSeekMoeBlock_0/shared_experts/wi_1/kernel",
    [SMOE_W_SH_WO] = "DeepSeekMoeBlock_0/shared_experts/wo/kernel",
};

static const char *const tslot_paths[SMOE_T_NSLOTS] = {
    [SMOE_T_EMBED] = "token_embedder/embedding",
    [SMOE_T_FINAL_NORM] = "decoder/decoder_norm/scale",
    [SMOE_T_LOGITS] = "decoder/logits_dense/kernel",
};

const char *smoe_wslot_path(smoe_wslot s)
{
    return (unsigned)s < SMOE_W_NSLOTS ? wslot_paths[s] : NULL;
}

const char *smoe_tslot_path(smoe_tslot s)
{
    return (unsigned)s < SMOE_T_NSLOTS ? tslot_paths[s] : NULL;
}

int smoe_wslot_used(const smoe_model_cfg *cfg, smoe_wslot s, int moe)
{
    switch (s) {
    case SMOE_W_PRE_NORM:
    case SMOE_W_POST_NORM:
    case SMOE_W_WKV_A:
    case SMOE_W_KV_NORM:
    case SMOE_W_WKV_B:
    case SMOE_W_OUT:
        return 1;
    case SMOE_W_QUERY:
        return cfg->q_lora == 0;
    case SMOE_W_WQ_A:
    case SMOE_W_Q_NORM:
    case SMOE_W_WQ_B:
        return cfg->q_lora > 0;
    case SMOE_W_MLP_WI0:
    case SMOE_W_MLP_WI1:
    case SMOE_W_MLP_WO:
        return !moe;
    case SMOE_W_GATE:
    case SMOE_W_EXP_WI0:
    case SMOE_W_EXP_WI1:
    case SMOE_W_EXP_WO:
        return moe;
    case SMOE_W_GATE_BIAS:
        return moe && cfg->routed_bias;
    case SMOE_W_SH_WI0:
    case SMOE_W_SH_WI1:
    case SMOE_W_SH_WO:
        return moe && cfg->shared > 0;
    case SMOE_W_NSLOTS:
        break;
    }
    return 0;
}

int64_t smoe_wslot_numel(const smoe_model_cfg *c, smoe_wslot s)
{
    const int64_t dq = c->qk_nope + c->qk_rope;
    const int64_t el = c->ep > 0 ? c->experts / c->ep : 0;
    switch (s) {
    case SMOE_W_PRE_NORM:
    case SMOE_W_POST_NORM:
        return c->emb;
    case SMOE_W_QUERY:
        return c->emb * c->heads * dq;
    case SMOE_W_WQ_A:
        return c->emb * c->q_lora;
    case SMOE_W_Q_NORM:
        return c->q_lora;
    case SMOE_W_WQ_B:
        return c->q_lora * c->heads * dq;
    case SMOE_W_WKV_A:
        return c->emb * (c->kv_lora + c->qk_rope);
    case SMOE_W_KV_NORM:
        return c->kv_lora;
    case SMOE_W_WKV_B:
        return c->kv_lora * c->heads * (c->qk_nope + c->v_head);
    case SMOE_W_OUT:
        return c->heads * c->v_head * c->emb;
    case SMOE_W_MLP_WI0:
    case SMOE_W_MLP_WI1:
    case SMOE_W_MLP_WO:
        return c->emb * c->mlp;
    case SMOE_W_GATE:
        return c->emb * c->experts;
    case SMOE_W_GATE_BIAS:
        return c->experts;
    case SMOE_W_EXP_WI0:
    case SMOE_W_EXP_WI1:
    case SMOE_W_EXP_WO:
        return el * c->emb * c->moe_mlp;
    case SMOE_W_SH_WI0:
    case SMOE_W_SH_WI1:
    case SMOE_W_SH_WO:
        return c->emb * c->shared * c->moe_mlp;
    case SMOE_W_NSLOTS:
        break;
    }
    return 0;
}

int64_t smoe_tslot_numel(const smoe_model_cfg *c, smoe_tslot s)
{
    switch (s) {
    case SMOE_T_EMBED:
    case SMOE_T_LOGITS:
        return c->vocab * c->emb;
    case SMOE_T_FINAL_NORM:
        return c->emb;
    case SMOE_T_NSLOTS:
        break;
    }
    return 0;
}
