/* The deepseek4 decoder block (DeepSeek-V4), after MaxText e591f30
 * src/maxtext/models/deepseek4.py DeepSeek4DecoderLayer (DeepSeekGenericLayer
 * norms and mhc hyper-connections, mlp = RoutedAndSharedMoE, hash routing
 * (gate without bias) in the first first_num_hash_layers layers) and
 * src/maxtext/layers/attention_compressed.py CompressedAttention:
 *   sinks (heads), wq_a (embed, q_lora), q_norm, wq_b (q_lora, q_heads, kv),
 *   wkv (embed, kv_heads, kv_head_dim), kv_norm, o_a_proj (a grouped linear,
 *   linears.py DeepSeekV4GroupedLinear: (o_groups, heads*head_dim/o_groups,
 *   o_lora_rank) on (o_groups, q_heads, o_lora_up_proj)), o_b_proj
 *   (o_lora_up_proj, embed); compress ratio > 4 adds hca_compressor, ratio 4
 *   csa_compressor with its indexer (kv_proj, gate_proj (embed, kv),
 *   position_bias (no axes), kv_norm; the indexer's q_proj (q_lora,
 *   indexer_q) and weights_proj (embed, indexer_weights)).
 * decoders.py _apply_deepseek4_scanned_blocks: the hash layers unscanned as
 * decoder/layers_<i> (compress_ratios[i]), then decoder/scanned_blocks
 * (stack "layers") of DeepSeek4ScannableBlock: layers_0 with ratio 128,
 * layers_1 with ratio 4. Unscanned: decoder/layers_<i> with
 * compress_ratios[i]. With mhc, decoder/hc_head (mhc.py DeepSeek4HyperHead)
 * before the output norm. */
#include "inv_impl.h"

static smoe_status compressor(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                              int64_t ratio, int64_t mult)
{
    const int64_t hd = m->head_dim;
    INV_ADD(at, inv_fmt(v, "%s/kv_proj/kernel", mod), D(m->emb, "embed"), D(mult * hd, "kv"));
    INV_ADD(at, inv_fmt(v, "%s/gate_proj/kernel", mod), D(m->emb, "embed"), D(mult * hd, "kv"));
    INV_PLAIN(at, inv_fmt(v, "%s/position_bias", mod), D(ratio, NULL), D(mult * hd, NULL));
    return inv_norm(v, at, inv_fmt(v, "%s/kv_norm", mod), hd);
}

static smoe_status attention(inv *v, const model_dims *m, const inv_at *at, int64_t ratio)
{
    const int64_t H = m->heads, K = m->kv_heads, hd = m->head_dim, e = m->emb, ql = m->q_lora;
    int64_t og, olr;
    TRY(inv_int(v, "o_groups", 0, &og));
    TRY(inv_int(v, "o_lora_rank", 0, &olr));
    if (og <= 0 || olr <= 0 || (H * hd) % og != 0)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "o_groups"),
                           "compressed attention needs o_groups > 0 dividing heads*head_dim and "
                           "o_lora_rank > 0");
    INV_ADD(at, "self_attention/sinks", D(H, NULL));
    INV_ADD(at, "self_attention/wq_a/kernel", D(e, "embed"), D(ql, "q_lora"));
    TRY(inv_norm(v, at, "self_attention/q_norm", ql));
    INV_ADD(at, "self_attention/wq_b/kernel", D(ql, "q_lora"), D(H, "q_heads"), D(hd, "kv"));
    INV_ADD(at, "self_attention/wkv/kernel", D(e, "embed"), D(K, "kv_heads"),
            D(hd, "kv_head_dim"));
    TRY(inv_norm(v, at, "self_attention/kv_norm", hd));
    if (ratio > 4) {
        TRY(compressor(v, m, at, "self_attention/hca_compressor", ratio, 1));
    } else if (ratio == 4) {
        TRY(compressor(v, m, at, "self_attention/csa_compressor", ratio, 2));
        int64_t ih, id;
        TRY(inv_int(v, "indexer_n_heads", 64, &ih));
        TRY(inv_int(v, "indexer_head_dim", 128, &id));
        const char *ix = "self_attention/csa_compressor/indexer";
        INV_ADD(at, inv_fmt(v, "%s/q_proj/kernel", ix), D(ql, "q_lora"), D(inv_mul(ih, id), "indexer_q"));
        INV_ADD(at, inv_fmt(v, "%s/kv_proj/kernel", ix), D(e, "embed"), D(2 * id, "kv"));
        INV_ADD(at, inv_fmt(v, "%s/gate_proj/kernel", ix), D(e, "embed"), D(2 * id, "kv"));
        INV_PLAIN(at, inv_fmt(v, "%s/position_bias", ix), D(ratio, NULL), D(2 * id, NULL));
        TRY(inv_norm(v, at, inv_fmt(v, "%s/kv_norm", ix), id));
        INV_ADD(at, inv_fmt(v, "%s/weights_proj/kernel", ix), D(e, "embed"),
                D(ih, "indexer_weights"));
    }
    INV_ADD(at, "self_attention/o_a_proj/kernel", D(og, "o_groups"), D(H * hd / og, "q_heads"),
            D(olr, "o_lora_up_proj"));
    INV_ADD(at, "self_attention/o_b_proj/kernel", D(og * olr, "o_lora_up_proj"), D(e, "embed"));
    return SMOE_OK;
}

static smoe_status layer(inv *v, const model_dims *m, const inv_at *at, int64_t ratio, int hash)
{
    TRY(inv_deepseek_generic(v, m, at));
    TRY(attention(v, m, at, ratio));
    v->hash_routing = hash;
    smoe_status s = inv_routed_shared(v, m, at, "mlp", m->moe_mlp);
    v->hash_routing = 0;
    return s;
}

static smoe_status ratio_of(inv *v, int64_t i, int64_t *ratio)
{
    if (i >= inv_list_len(v, "compress_ratios"))
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "compress_ratios"),
                           "compress_ratios must list one ratio per decoder layer (no entry "
                           "for layer %lld)", (long long)i);
    return inv_list_int(v, "compress_ratios", i, ratio);
}

smoe_status inv_deepseek4(inv *v, const model_dims *m)
{
    int64_t nhash, mhc;
    TRY(inv_int(v, "first_num_hash_layers", 0, &nhash));
    TRY(inv_int(v, "mhc_expansion_rate", 1, &mhc));
    TRY(inv_top_weights(v, m, 0));
    if (mhc > 1) {
        const int64_t kd = mhc * m->emb;
        INV_ADD(&inv_top, "decoder/hc_head/hc_fn", D(kd, "activation_embed"), D(mhc, NULL));
        INV_ADD(&inv_top, "decoder/hc_head/hc_base", D(mhc, NULL));
        INV_ADD(&inv_top, "decoder/hc_head/hc_scale", D(1, NULL));
    }
    int64_t prefix = m->scan_layers ? (nhash < m->layers ? nhash : m->layers) : m->layers;
    for (int64_t i = 0; i < prefix; i++) {
        int64_t ratio;
        TRY(ratio_of(v, i, &ratio));
        inv_at at = { inv_fmt(v, "decoder/layers_%lld", (long long)i), NULL, 0, NULL, 0 };
        TRY(layer(v, m, &at, ratio, i < nhash));
    }
    if (!m->scan_layers)
        return SMOE_OK;
    int64_t rest = m->layers - prefix;
    if (rest % 2 != 0)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "base_num_decoder_layers"),
                           "deepseek4 with scanned layers: the layers after the %lld hash "
                           "layers (%lld) must pair into (128, 4) blocks", (long long)nhash,
                           (long long)rest);
    if (rest == 0)
        return SMOE_OK;
    inv_at blk = { "decoder/scanned_blocks", "layers", rest / 2, NULL, 0 };
    inv_at l0 = inv_sub(v, &blk, "layers_0"), l1 = inv_sub(v, &blk, "layers_1");
    TRY(layer(v, m, &l0, 128, 0));
    return layer(v, m, &l1, 4, 0);
}
