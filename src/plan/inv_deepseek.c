/* The deepseek decoder block (DeepSeek-V2/V3/V3.2, Kimi K2), after MaxText
 * e591f30 src/maxtext/models/deepseek.py (DeepSeekDenseLayer,
 * DeepSeekMoELayer: pre/post_self_attention_layer_norm, self_attention,
 * mlp | DeepSeekMoeBlock_0 {MoeBlock_0, shared_experts}) and
 * src/maxtext/layers/attention_mla.py (MLA: query | wq_a/q_norm/wq_b,
 * wkv_a, kv_norm, wkv_b, out; with use_indexer the Indexer's wq_b, wk,
 * k_norm (flax LayerNorm: scale and bias, no logical axes) and
 * weights_proj). The first first_num_dense_layers layers are the
 * "dense_layers" stack, the rest "moe_layers" (unscanned: dense_layers_<i>,
 * moe_layers_<i>). With mhc_expansion_rate > 1 each layer has mhc_attention
 * and mhc_mlp (src/maxtext/layers/mhc.py); the output head reduces the
 * streams without weights. With mtp_num_layers > 0,
 * src/maxtext/layers/multi_token_prediction.py: mtp_block/mtp_layer_<k>
 * holds mtp_<k>_embedding_norm, mtp_<k>_hidden_state_norm,
 * mtp_<k>_projection (2*emb -> emb, axes (embed, None)) and
 * mtp_<k>_transformer_layer, an unscanned MoE layer (models.py takes the
 * decoder's last layer type). */
#include "inv_impl.h"

static smoe_status add_mla(inv *v, const model_dims *m, const inv_at *at)
{
    const int64_t H = m->heads, e = m->emb, qk = m->qk_nope + m->qk_rope;
    const int ar = m->context_autoregressive;
    if (m->q_lora == 0) {
        INV_ADD(at, "self_attention/query/kernel", D(e, "embed"), D(H, "q_heads"), D(qk, "kv"));
    } else {
        INV_ADD(at, "self_attention/wq_a/kernel", D(e, "embed"), D(m->q_lora, "q_lora_up_proj"));
        TRY(inv_norm(v, at, "self_attention/q_norm", m->q_lora));
        INV_ADD(at, "self_attention/wq_b/kernel", D(m->q_lora, "q_lora"), D(H, "q_heads"),
                D(qk, "kv"));
    }
    INV_ADD(at, "self_attention/wkv_a/kernel", D(e, "embed"),
            D(m->kv_lora + m->qk_rope, "kv_lora_up_proj"));
    TRY(inv_norm(v, at, "self_attention/kv_norm", m->kv_lora));
    INV_ADD(at, "self_attention/wkv_b/kernel", D(m->kv_lora, "kv_lora"), D(H, "kv_heads"),
            D(m->qk_nope + m->v_head, "kv_head_dim"));
    INV_ADD(at, "self_attention/out/kernel", D(H, ar ? NULL : "heads"),
            D(m->v_head, ar ? NULL : "kv"), D(e, ar ? NULL : "embed"));
    int indexer = 0;
    TRY(inv_bool(v, "use_indexer", &indexer));
    if (indexer) {
        int64_t ih, id;
        TRY(inv_int(v, "indexer_n_heads", 64, &ih));
        TRY(inv_int(v, "indexer_head_dim", 128, &id));
        INV_ADD(at, "self_attention/indexer/wq_b/kernel", D(m->q_lora, "q_lora"),
                D(ih, "q_heads"), D(id, "kv"));
        INV_ADD(at, "self_attention/indexer/wk/kernel", D(e, "embed"), D(id, "kv"));
        INV_PLAIN(at, "self_attention/indexer/k_norm/scale", D(id, NULL));
        INV_PLAIN(at, "self_attention/indexer/k_norm/bias", D(id, NULL));
        INV_ADD(at, "self_attention/indexer/weights_proj/kernel", D(e, "embed"),
                D(ih, "q_heads"));
    }
    return SMOE_OK;
}

/* DeepSeekGenericLayer: the two norms, and with mhc_expansion_rate > 1 the
 * hyper-connections around attention and MLP. */
smoe_status inv_deepseek_generic(inv *v, const model_dims *m, const inv_at *at)
{
    int64_t mhc = 1;
    TRY(inv_int(v, "mhc_expansion_rate", 1, &mhc));
    TRY(inv_norm(v, at, "pre_self_attention_layer_norm", m->emb));
    TRY(inv_norm(v, at, "post_self_attention_layer_norm", m->emb));
    if (mhc > 1) {
        TRY(inv_mhc(v, m, at, "mhc_attention"));
        TRY(inv_mhc(v, m, at, "mhc_mlp"));
    }
    return SMOE_OK;
}

static smoe_status norms(inv *v, const model_dims *m, const inv_at *at)
{
    return inv_deepseek_generic(v, m, at);
}

static smoe_status dense_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    TRY(norms(v, m, at));
    TRY(inv_engram(v, m, at, idx));
    TRY(add_mla(v, m, at));
    return inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0);
}

static smoe_status moe_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    TRY(norms(v, m, at));
    TRY(inv_engram(v, m, at, idx));
    TRY(add_mla(v, m, at));
    /* RoutedAndSharedMoE; with shared_experts = 0 MaxText's shared MLP has
     * zero-width weights, left out here */
    if (m->shared_experts > 0)
        return inv_routed_shared(v, m, at, "DeepSeekMoeBlock_0", m->moe_mlp);
    return inv_routed(v, m, at, "DeepSeekMoeBlock_0/MoeBlock_0", "embed_moe", m->moe_mlp);
}

smoe_status inv_deepseek(inv *v, const model_dims *m)
{
    TRY(inv_top_weights(v, m, 0));
    if (m->scan_layers && inv_list_len(v, "engram_layers") > 0) {
        TRY(inv_engram_stack(v, m, "dense_layers", 0, m->first_dense, dense_layer));
        TRY(inv_engram_stack(v, m, "moe_layers", m->first_dense, m->layers, moe_layer));
    } else {
        TRY(inv_layers(v, m, "dense_layers", m->first_dense, 0, dense_layer));
        TRY(inv_layers(v, m, "moe_layers", m->layers - m->first_dense, m->first_dense,
                       moe_layer));
    }
    for (int64_t k = 1; k <= m->mtp_layers; k++) {
        inv_at at = { inv_fmt(v, "mtp_block/mtp_layer_%lld", (long long)k), NULL, 0, NULL, 0 };
        TRY(inv_norm(v, &at, inv_fmt(v, "mtp_%lld_embedding_norm", (long long)k), m->emb));
        TRY(inv_norm(v, &at, inv_fmt(v, "mtp_%lld_hidden_state_norm", (long long)k), m->emb));
        INV_ADD(&at, inv_fmt(v, "mtp_%lld_projection/kernel", (long long)k), D(2 * m->emb, "embed"),
                D(m->emb, NULL));
        inv_at tl = inv_sub(v, &at, inv_fmt(v, "mtp_%lld_transformer_layer", (long long)k));
        TRY(moe_layer(v, m, &tl, -1));
    }
    return SMOE_OK;
}
