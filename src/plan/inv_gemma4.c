/* The gemma4 and gemma4_small decoder blocks, after MaxText e591f30:
 *   gemma4        src/maxtext/models/gemma4.py Gemma4DecoderLayer: layer i
 *                 is global attention when i % 6 == 5 (the 6-layer
 *                 GEMMA4_ATTENTION_PATTERN), else sliding; global layers use
 *                 global_head_dim / global_num_kv_heads when set and, with
 *                 share_kv_projections, no value projection; query_norm,
 *                 key_norm always, value_norm with v_norm_with_scale;
 *                 pre/post_self_attention_norm, pre_ffw_norm, post_ffw_norm;
 *                 mlp is an MlpBlock, or with num_experts > 1 Gemma4MoE:
 *                 moe_block (RoutedAndSharedMoE, shared experts of mlp_dim,
 *                 per_expert_scale), pre_forward_scale_2 (embed),
 *                 pre_feedforward_layernorm_2, post_feedforward_layernorm_1/2
 *                 (gate_norm has no scale); layer_scalar (1,).
 *                 Scanned: decoders.py _apply_gemma4_scanned_blocks scans
 *                 Gemma4ScannableBlock as decoder/scanned_blocks (stack
 *                 "layers"), whose 5 sliding layers are an inner scan
 *                 local_layers (stack "local_layers") and whose global layer
 *                 is global_layer.
 *   gemma4_small  src/maxtext/models/gemma4_small.py Gemma4SmallDecoderLayer
 *                 (unscanned only: MaxText's types.py refuses scan_layers for
 *                 gemma4-e2b/e4b): the attention pattern is 4 sliding + 1
 *                 global for model gemma4-e2b, else 5 + 1; the last
 *                 num_kv_shared_layers layers reuse an earlier layer's K/V
 *                 (no key/value/key_norm/value_norm) and, with
 *                 use_double_wide_mlp, have twice mlp_dim; per-layer-input
 *                 weights per_layer_input_gate, per_layer_projection,
 *                 post_per_layer_input_norm, and decoder/per_layer_embedder
 *                 (Gemma4SmallPLE) when hidden_size_per_layer_input > 0. */
#include "inv_impl.h"

#include <string.h>

#define G4_PATTERN 6

typedef struct g4 {
    int global;   /* global attention layer */
    int shared;   /* gemma4_small: K/V shared from an earlier layer */
    int64_t mlp;  /* MLP width */
} g4;

static smoe_status attention(inv *v, const model_dims *m, const inv_at *at, const g4 *l,
                             int share_projections)
{
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    o.bias = o.out_bias = 0;
    o.qk_norm = 1;
    o.v_norm = !l->shared;
    if (l->global) {
        int64_t gkv, ghd;
        TRY(inv_int(v, "global_num_kv_heads", 0, &gkv));
        TRY(inv_int(v, "global_head_dim", 0, &ghd));
        if (gkv > 0)
            o.kv_heads = gkv;
        if (ghd > 0)
            o.head_dim = ghd;
        o.share_kv = share_projections;
    }
    o.qk_norm_q = o.qk_norm_k = o.head_dim;
    o.no_kv = l->shared;
    return inv_gqa(v, m, at, "self_attention", &o);
}

static smoe_status norms(inv *v, const model_dims *m, const inv_at *at, int post_attn,
                         int post_ffw)
{
    TRY(inv_norm(v, at, "pre_self_attention_norm", m->emb));
    if (post_attn)
        TRY(inv_norm(v, at, "post_self_attention_norm", m->emb));
    TRY(inv_norm(v, at, "pre_ffw_norm", m->emb));
    if (post_ffw)
        TRY(inv_norm(v, at, "post_ffw_norm", m->emb));
    INV_ADD(at, "layer_scalar", D(1, NULL));
    return SMOE_OK;
}

static smoe_status gemma4_layer(inv *v, const model_dims *m, const inv_at *at, int global)
{
    int pa, pf, share;
    TRY(inv_bool(v, "use_post_attn_norm", &pa));
    TRY(inv_bool(v, "use_post_ffw_norm", &pf));
    TRY(inv_bool(v, "share_kv_projections", &share));
    g4 l = { global, 0, m->mlp };
    TRY(norms(v, m, at, pa, pf));
    TRY(attention(v, m, at, &l, share));
    if (m->experts <= 1)
        return inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0);
    /* shared experts are mlp_dim wide for gemma4 (get_shared_expert_mlp_dim) */
    TRY(inv_routed_shared(v, m, at, "mlp/moe_block", m->mlp));
    INV_ADD(at, "mlp/pre_forward_scale_2", D(m->emb, "embed"));
    TRY(inv_norm(v, at, "mlp/pre_feedforward_layernorm_2", m->emb));
    TRY(inv_norm(v, at, "mlp/post_feedforward_layernorm_1", m->emb));
    return inv_norm(v, at, "mlp/post_feedforward_layernorm_2", m->emb);
}

static smoe_status gemma4_unscanned(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    return gemma4_layer(v, m, at, idx % G4_PATTERN == G4_PATTERN - 1);
}

smoe_status inv_gemma4(inv *v, const model_dims *m)
{
    TRY(inv_top_weights(v, m, 0));
    if (!m->scan_layers)
        return inv_layers(v, m, "layers", m->layers, 0, gemma4_unscanned);
    if (m->layers % G4_PATTERN != 0)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "base_num_decoder_layers"),
                           "gemma4 with scanned layers: the %lld layers left after the scanned "
                           "6-layer blocks are not in the built-in enumeration; use a multiple "
                           "of 6 layers or scan_layers=false",
                           (long long)(m->layers % G4_PATTERN));
    inv_at blk = { "decoder/scanned_blocks", "layers", m->layers / G4_PATTERN, NULL, 0 };
    inv_at local = inv_sub(v, &blk, "local_layers");
    local.inner = "local_layers";
    local.L_in = G4_PATTERN - 1;
    TRY(gemma4_layer(v, m, &local, 0));
    inv_at global = inv_sub(v, &blk, "global_layer");
    return gemma4_layer(v, m, &global, 1);
}

/* gemma4_small */

static smoe_status small_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    int64_t shared_n, ple;
    int wide;
    TRY(inv_int(v, "num_kv_shared_layers", 0, &shared_n));
    TRY(inv_int(v, "hidden_size_per_layer_input", 0, &ple));
    TRY(inv_bool(v, "use_double_wide_mlp", &wide));
    const char *name = inv_model_name(v);
    int64_t period = name && strcmp(name, "gemma4-e2b") == 0 ? 5 : 6;
    int64_t first = shared_n > 0 ? (m->layers - shared_n > 0 ? m->layers - shared_n : 0) : m->layers;
    g4 l = { idx % period == period - 1, shared_n > 0 && idx >= first && first > 0, m->mlp };
    if (l.shared && wide)
        l.mlp *= 2;
    TRY(norms(v, m, at, 1, 1));
    TRY(attention(v, m, at, &l, 0));
    TRY(inv_mlp(v, m, at, "mlp", m->emb, l.mlp, 0));
    if (ple > 0) {
        INV_ADD(at, "per_layer_input_gate/kernel", D(m->emb, "embed"), D(ple, "mlp"));
        INV_ADD(at, "per_layer_projection/kernel", D(ple, "mlp"), D(m->emb, "embed"));
        TRY(inv_norm(v, at, "post_per_layer_input_norm", m->emb));
    }
    return SMOE_OK;
}

smoe_status inv_gemma4_small(inv *v, const model_dims *m)
{
    if (m->scan_layers)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "scan_layers"),
                           "decoder_block gemma4_small needs scan_layers=false (MaxText refuses "
                           "scanned layers: per-layer KV sharing is incompatible with nn.scan)");
    int64_t ple, vple;
    TRY(inv_int(v, "hidden_size_per_layer_input", 0, &ple));
    TRY(inv_int(v, "vocab_size_per_layer_input", 0, &vple));
    TRY(inv_top_weights(v, m, 0));
    if (ple > 0 && vple > 0) {
        INV_ADD(&inv_top, "decoder/per_layer_embedder/embed_tokens_per_layer",
                D(vple, "vocab"), D(m->layers * ple, "embed_vocab"));
        INV_ADD(&inv_top, "decoder/per_layer_embedder/per_layer_model_projection/kernel",
                D(m->emb, "embed"), D(m->layers * ple, "mlp"));
        TRY(inv_norm(v, &inv_top, "decoder/per_layer_embedder/per_layer_projection_norm", ple));
    }
    return inv_layers(v, m, "layers", m->layers, 0, small_layer);
}
