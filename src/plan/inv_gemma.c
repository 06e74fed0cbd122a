/* The gemma, gemma2 and gemma3 decoder blocks, after MaxText e591f30:
 *   gemma   src/maxtext/models/gemma.py GemmaDecoderLayer:
 *           pre_self_attention_norm, self_attention, pre_ffw_norm, mlp
 *   gemma2  src/maxtext/models/gemma2.py Gemma2DecoderLayer: one layer is a
 *           local (sliding) and a global attention block, each with
 *           pre_self_attention_norm_<k>, self_attention_<k>,
 *           post_self_attention_norm_<k> (use_post_attn_norm),
 *           pre_ffw_norm_<k>, mlp_<k>, post_ffw_norm_<k> (use_post_ffw_norm);
 *           the model files give half the real layer count
 *   gemma3  src/maxtext/models/gemma3.py Gemma3DecoderLayer (use_qk_norm
 *           always on) and Gemma3ScannableBlock; decoders.py
 *           _apply_gemma3_scanned_blocks scans blocks of the 6-layer
 *           attention pattern as decoder/layers/layers_<0..5> and puts the
 *           num_decoder_layers % 6 remaining layers, unscanned, in
 *           decoder/layers_remainder/layers_<k>.
 * The text decoder only: the vision encoder exists when use_multimodal is
 * set, which none of these model files does (refused in inventory.c). */
#include "inv_impl.h"

static smoe_status block(inv *v, const model_dims *m, const inv_at *at, const char *sfx,
                         int qk_norm, int post_attn, int post_ffw)
{
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    o.qk_norm = qk_norm;
    o.bias = o.out_bias = 0;
    TRY(inv_norm(v, at, inv_fmt(v, "pre_self_attention_norm%s", sfx), m->emb));
    TRY(inv_gqa(v, m, at, inv_fmt(v, "self_attention%s", sfx), &o));
    if (post_attn)
        TRY(inv_norm(v, at, inv_fmt(v, "post_self_attention_norm%s", sfx), m->emb));
    TRY(inv_norm(v, at, inv_fmt(v, "pre_ffw_norm%s", sfx), m->emb));
    TRY(inv_mlp(v, m, at, inv_fmt(v, "mlp%s", sfx), m->emb, m->mlp, 0));
    if (post_ffw)
        TRY(inv_norm(v, at, inv_fmt(v, "post_ffw_norm%s", sfx), m->emb));
    return SMOE_OK;
}

static smoe_status post_flags(inv *v, int *pa, int *pf)
{
    TRY(inv_bool(v, "use_post_attn_norm", pa));
    return inv_bool(v, "use_post_ffw_norm", pf);
}

static smoe_status gemma_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    return block(v, m, at, "", 0, 0, 0);
}

static smoe_status gemma2_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    int pa, pf;
    TRY(post_flags(v, &pa, &pf));
    TRY(block(v, m, at, "_local", 0, pa, pf));
    return block(v, m, at, "_global", 0, pa, pf);
}

static smoe_status gemma3_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    int pa, pf;
    TRY(post_flags(v, &pa, &pf));
    return block(v, m, at, "", 1, pa, pf);
}

smoe_status inv_gemma(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, gemma_layer);
}

smoe_status inv_gemma2(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, gemma2_layer);
}

#define GEMMA3_PATTERN 6

smoe_status inv_gemma3(inv *v, const model_dims *m)
{
    TRY(inv_top_weights(v, m, 0));
    if (!m->scan_layers)
        return inv_layers(v, m, "layers", m->layers, 0, gemma3_layer);
    int64_t full = m->layers / GEMMA3_PATTERN, rem = m->layers % GEMMA3_PATTERN;
    if (full > 0)
        TRY(inv_cycle(v, m, full * GEMMA3_PATTERN, GEMMA3_PATTERN, "layers", gemma3_layer));
    inv_at r = { "decoder/layers_remainder", NULL, 0, NULL, 0 };
    for (int64_t k = 0; k < rem; k++) {
        inv_at at = inv_sub(v, &r, inv_fmt(v, "layers_%lld", (long long)k));
        TRY(gemma3_layer(v, m, &at, full * GEMMA3_PATTERN + k));
    }
    return SMOE_OK;
}
