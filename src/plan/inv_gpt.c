/* The gpt3 and gpt_oss decoder blocks, after MaxText e591f30:
 *   gpt3     src/maxtext/models/gpt3.py Gpt3DecoderLayer:
 *            pre_self_attention_norm (Gpt3LayerNorm: scale and bias),
 *            self_attention (Gpt3MultiHeadAttention: fused qkv_proj
 *            (embed, qkv, heads, kv) or query/key/value, out; all with
 *            bias), mlp (MlpBlock with use_pre_norm: mlp_layer_norm, wi, wo,
 *            all with bias); decoders.py adds decoder/position_embedder
 *            with trainable_position_size > 0 and a LayerNorm decoder_norm
 *   gpt_oss  src/maxtext/models/gpt_oss.py GptOssDecoderLayer:
 *            pre/post_self_attention_layer_norm, GptOssAttention (biases
 *            with attention_bias, sinks with attention_sink), GptOssMlp
 *            (RoutedMoE, gate axes (embed, None), width mlp_dim);
 *            GptOssScannableBlock scans inhomogeneous_layer_cycle_interval
 *            layers as decoder/layers/layers_<k>. */
#include "inv_impl.h"

static smoe_status layer_norm(inv *v, const inv_at *at, const char *mod, int64_t emb)
{
    INV_ADD(at, inv_fmt(v, "%s/scale", mod), D(emb, "norm"));
    INV_ADD(at, inv_fmt(v, "%s/bias", mod), D(emb, "norm"));
    return SMOE_OK;
}

static smoe_status gpt3_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    const int64_t e = m->emb, H = m->heads, hd = m->head_dim;
    TRY(layer_norm(v, at, "pre_self_attention_norm", e));
    if (m->fused_qkv) {
        INV_ADD(at, "self_attention/qkv_proj/kernel", D(e, "embed"), D(3, "qkv"), D(H, "heads"),
                D(hd, "kv"));
        INV_ADD(at, "self_attention/qkv_proj/bias", D(3, "qkv"), D(H, "heads"), D(hd, "kv"));
    } else {
        static const char *const p[3] = { "query", "key", "value" };
        for (int i = 0; i < 3; i++) {
            INV_ADD(at, inv_fmt(v, "self_attention/%s/kernel", p[i]), D(e, "embed"),
                    D(H, "heads"), D(hd, "kv"));
            INV_ADD(at, inv_fmt(v, "self_attention/%s/bias", p[i]), D(H, "heads"), D(hd, "kv"));
        }
    }
    INV_ADD(at, "self_attention/out/kernel", D(H, "heads"), D(hd, "kv"), D(e, "embed"));
    INV_ADD(at, "self_attention/out/bias", D(e, "embed"));
    TRY(layer_norm(v, at, "mlp/mlp_layer_norm", e));
    return inv_mlp(v, m, at, "mlp", e, m->mlp, 1);
}

smoe_status inv_gpt3(inv *v, const model_dims *m)
{
    int64_t pos = -1;
    TRY(inv_int(v, "trainable_position_size", -1, &pos));
    TRY(inv_top_weights(v, m, 1));
    if (pos > 0)
        INV_ADD(&inv_top, "decoder/position_embedder/embedding", D(pos, "vocab"),
                D(m->emb, "embed_vocab"));
    return inv_layers(v, m, "layers", m->layers, 0, gpt3_layer);
}

static smoe_status gpt_oss_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    o.qk_norm = 0;
    TRY(inv_norm(v, at, "pre_self_attention_layer_norm", m->emb));
    TRY(inv_norm(v, at, "post_self_attention_layer_norm", m->emb));
    TRY(inv_gqa(v, m, at, "GptOssAttention", &o));
    return inv_routed(v, m, at, "GptOssMlp", "embed", m->mlp);
}

smoe_status inv_gpt_oss(inv *v, const model_dims *m)
{
    int64_t cycle;
    TRY(inv_cycle_len(v, m, &cycle));
    TRY(inv_top_weights(v, m, 0));
    return inv_cycle(v, m, m->layers, cycle, "layers", gpt_oss_layer);
}
