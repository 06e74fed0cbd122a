/* The hybrid linear/full attention MoE blocks qwen3_next and qwen3_5, after
 * MaxText e591f30 src/maxtext/models/qwen3.py (Qwen3NextDecoderLayer,
 * Qwen3NextGatedDeltaNet, Qwen3NextFullAttention, Qwen3NextSparseMoeBlock,
 * Qwen3NextScannableBlock) and src/maxtext/models/qwen3_5.py (the same
 * modules under Qwen3_5 names). Layer i (its index inside the scanned cycle,
 * or in the decoder when unscanned) is full attention when (i + 1) %
 * inhomogeneous_layer_cycle_interval == 0, else a gated delta net:
 *   input_layernorm, post_attention_layernorm  Qwen3NextRMSNorm (no axes)
 *   attention (delta net)  in_proj_qkvz (embed, gdn_head), in_proj_ba,
 *                          conv1d (depthwise nnx.Conv, no axes), A_log and
 *                          dt_bias (no axes), norm/rms_norm (no axes),
 *                          out_proj (gdn_head, embed)
 *   attention (full)       attention/{query (embed, q_heads, kv) with a
 *                          doubled head_dim (output gate), key, value,
 *                          out (mlp, embed) over heads*head_dim,
 *                          query_norm/key_norm}
 *   mlp                    routed_experts (gate (embed, None), moe_mlp_dim),
 *                          shared_expert (MlpBlock, moe_mlp_dim),
 *                          shared_expert_gate (embed, None) of width 1
 * The scanned block names its layers layer_<k> (not layers_<k>). */
#include "inv_impl.h"

static smoe_status gdn(inv *v, const model_dims *m, const inv_at *at)
{
    int64_t nv, nk, dk, dvh, kernel;
    TRY(inv_int(v, "gdn_num_value_heads", 32, &nv));
    TRY(inv_int(v, "gdn_num_key_heads", 16, &nk));
    TRY(inv_int(v, "gdn_key_head_dim", 128, &dk));
    TRY(inv_int(v, "gdn_value_head_dim", 128, &dvh));
    TRY(inv_int(v, "gdn_conv_kernel_dim", 4, &kernel));
    const int64_t key_dim = inv_mul(nk, dk), value_dim = inv_mul(nv, dvh);
    const int64_t conv_dim = inv_plus(inv_mul(2, key_dim), value_dim);
    INV_ADD(at, "attention/in_proj_qkvz/kernel", D(m->emb, "embed"),
            D(inv_plus(conv_dim, value_dim), "gdn_head"));
    INV_ADD(at, "attention/in_proj_ba/kernel", D(m->emb, "embed"), D(2 * nv, "gdn_head"));
    INV_PLAIN(at, "attention/conv1d/kernel", D(kernel, NULL), D(1, NULL), D(conv_dim, NULL));
    INV_PLAIN(at, "attention/A_log", D(nv, NULL));
    INV_PLAIN(at, "attention/dt_bias", D(nv, NULL));
    INV_PLAIN(at, "attention/norm/rms_norm/scale", D(dvh, NULL));
    INV_ADD(at, "attention/out_proj/kernel", D(value_dim, "gdn_head"), D(m->emb, "embed"));
    return SMOE_OK;
}

static smoe_status full_attention(inv *v, const model_dims *m, const inv_at *at)
{
    const int64_t e = m->emb, H = m->heads, K = m->kv_heads, hd = m->head_dim;
    INV_ADD(at, "attention/attention/query/kernel", D(e, "embed"), D(H, "q_heads"),
            D(2 * hd, "kv"));
    INV_ADD(at, "attention/attention/key/kernel", D(e, "embed"), D(K, "kv_heads"),
            D(hd, "kv_head_dim"));
    INV_ADD(at, "attention/attention/value/kernel", D(e, "embed"), D(K, "kv_heads"),
            D(hd, "kv_head_dim"));
    INV_ADD(at, "attention/attention/out/kernel", D(H * hd, "mlp"), D(e, "embed"));
    if (m->use_qk_norm) {
        TRY(inv_norm(v, at, "attention/attention/query_norm", hd));
        TRY(inv_norm(v, at, "attention/attention/key_norm", hd));
    } else {
        INV_PLAIN(at, "attention/attention/query_norm/scale", D(hd, NULL));
        INV_PLAIN(at, "attention/attention/key_norm/scale", D(hd, NULL));
    }
    return SMOE_OK;
}

static smoe_status hybrid_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    int64_t cycle;
    TRY(inv_int(v, "inhomogeneous_layer_cycle_interval", 1, &cycle));
    INV_PLAIN(at, "input_layernorm/scale", D(m->emb, NULL));
    INV_PLAIN(at, "post_attention_layernorm/scale", D(m->emb, NULL));
    if ((idx + 1) % cycle == 0)
        TRY(full_attention(v, m, at));
    else
        TRY(gdn(v, m, at));
    TRY(inv_routed(v, m, at, "mlp/routed_experts", "embed", m->moe_mlp));
    TRY(inv_mlp(v, m, at, "mlp/shared_expert", m->emb, m->moe_mlp, 0));
    INV_ADD(at, "mlp/shared_expert_gate/kernel", D(m->emb, "embed"), D(1, NULL));
    return SMOE_OK;
}

smoe_status inv_qwen_hybrid(inv *v, const model_dims *m)
{
    int64_t cycle;
    TRY(inv_cycle_len(v, m, &cycle));
    /* decoder_norm is Qwen3NextRMSNormLinen, given kernel_axes (norm) */
    TRY(inv_top_weights(v, m, 0));
    return inv_cycle(v, m, m->layers, cycle, "layer", hybrid_layer);
}
