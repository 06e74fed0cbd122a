/* The Qwen3-VL / Qwen3-Omni vision encoder (vision_encoder_block qwen3_vl,
 * qwen3_omni with use_multimodal), after MaxText e591f30
 * src/maxtext/layers/encoders.py VisionEncoder ("vision_encoder" holding
 * <Encoder>_0 and <Projector>_0), src/maxtext/models/qwen3_vl_vision.py
 * (subclasses of the Omni modules) and src/maxtext/models/qwen3.py:
 *   Qwen3OmniMoeVisionEncoder  patch_embed/proj (nnx.Conv over (temporal,
 *       patch, patch), with bias), pos_embed_interpolate/pos_embed
 *       (embeddings.py), blocks_<i> (Qwen3OmniMoeVisionBlock: ln1, ln2 flax
 *       LayerNorms, attn/attn an attentions.Attention with projection biases,
 *       mlp and mlp_out DenseGenerals with bias) and merger_<k> per deepstack
 *       index (Qwen3OmniMoeVisionPatchMerger, post-shuffle norm)
 *   Qwen3OmniMoeVisionProjector  merger (pre-shuffle norm)
 *   PatchMerger                 ln_q, mlp_0, mlp_2 (with bias)
 * DenseGenerals without kernel_axes, LayerNorms, Conv and the position table
 * carry no logical axes; only the attention projections do. */
#include "inv_impl.h"

#include <string.h>

static smoe_status layer_norm(inv *v, const char *mod, int64_t n)
{
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/scale", mod), D(n, NULL));
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/bias", mod), D(n, NULL));
    return SMOE_OK;
}

static smoe_status dense(inv *v, const char *mod, int64_t in, int64_t out)
{
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/kernel", mod), D(in, NULL), D(out, NULL));
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/bias", mod), D(out, NULL));
    return SMOE_OK;
}

static smoe_status merger(inv *v, const char *mod, int64_t hs, int64_t sm, int64_t out,
                          int postshuffle)
{
    const int64_t h = inv_mul(hs, inv_mul(sm, sm));
    TRY(layer_norm(v, inv_fmt(v, "%s/ln_q", mod), postshuffle ? h : hs));
    TRY(dense(v, inv_fmt(v, "%s/mlp_0", mod), h, h));
    return dense(v, inv_fmt(v, "%s/mlp_2", mod), h, out);
}

/* Encoder self-attention: full multi-head attention of `heads` over `dim`
 * features with biases on q, k, v and out; vm is m with emb = dim. */
static void encoder_attn(const model_dims *m, int64_t heads, int64_t dim, model_dims *vm,
                         inv_attn *o)
{
    *vm = *m;
    vm->emb = dim;
    vm->context_autoregressive = 0;
    vm->fused_qkv = 0;
    vm->n_activations = 1;
    memset(o, 0, sizeof *o);
    o->heads = o->kv_heads = heads;
    o->head_dim = dim / heads;
    o->bias = o->out_bias = 1;
}

smoe_status inv_qwen3_vision(inv *v, const model_dims *m, const char *block)
{
    int64_t hs, inter, nh, depth, ch, patch, tpatch, sm, out, npos;
    TRY(inv_int(v, "hidden_size_for_vit", 1152, &hs));
    TRY(inv_int(v, "intermediate_size_for_vit", 4304, &inter));
    TRY(inv_int(v, "num_attention_heads_for_vit", 16, &nh));
    TRY(inv_int(v, "num_hidden_layers_for_vit", 27, &depth));
    TRY(inv_int(v, "num_channels_for_vit", 3, &ch));
    TRY(inv_int(v, "patch_size_for_vit", 14, &patch));
    TRY(inv_int(v, "temporal_patch_size_for_vit", 2, &tpatch));
    TRY(inv_int(v, "spatial_merge_size_for_vit", 2, &sm));
    TRY(inv_int(v, "out_hidden_size_for_vit", 512, &out));
    TRY(inv_int(v, "num_position_embeddings_for_vit", 1024, &npos));
    if (nh <= 0 || hs % nh != 0)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "num_attention_heads_for_vit"),
                           "num_attention_heads_for_vit must divide hidden_size_for_vit");
    const char *enc, *proj;
    if (strcmp(block, "qwen3_vl") == 0) {
        enc = "vision_encoder/Qwen3VLVisionEncoder_0";
        proj = "vision_encoder/Qwen3VLVisionProjector_0";
    } else {
        enc = "vision_encoder/Qwen3OmniMoeVisionEncoder_0";
        proj = "vision_encoder/Qwen3OmniMoeVisionProjector_0";
    }
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/patch_embed/proj/kernel", enc), D(tpatch, NULL),
              D(patch, NULL), D(patch, NULL), D(ch, NULL), D(hs, NULL));
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/patch_embed/proj/bias", enc), D(hs, NULL));
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/pos_embed_interpolate/pos_embed", enc), D(npos, NULL),
              D(hs, NULL));
    model_dims vm;
    inv_attn o;
    encoder_attn(m, nh, hs, &vm, &o);
    for (int64_t i = 0; i < depth; i++) {
        const char *b = inv_fmt(v, "%s/blocks_%lld", enc, (long long)i);
        TRY(layer_norm(v, inv_fmt(v, "%s/ln1", b), hs));
        TRY(layer_norm(v, inv_fmt(v, "%s/ln2", b), hs));
        TRY(inv_gqa(v, &vm, &inv_top, inv_fmt(v, "%s/attn/attn", b), &o));
        TRY(dense(v, inv_fmt(v, "%s/mlp", b), hs, inter));
        TRY(dense(v, inv_fmt(v, "%s/mlp_out", b), inter, hs));
    }
    int64_t deep = inv_list_len(v, "deepstack_visual_indexes_for_vit");
    for (int64_t k = 0; k < deep; k++)
        TRY(merger(v, inv_fmt(v, "%s/merger_%lld", enc, (long long)k), hs, sm, out, 1));
    return merger(v, inv_fmt(v, "%s/merger", proj), hs, sm, out, 0);
}

/* The Qwen3-Omni audio encoder (use_audio; MaxText builds it for model
 * qwen3-omni-30b-a3b only), after encoders.py AudioEncoder ("audio_encoder")
 * and qwen3.py Qwen3OmniAudioEncoder: conv2d1..3 (3x3 nnx.Conv with bias),
 * conv_out (no bias), layers_<i> (Qwen3OmniAudioEncoderLayer:
 * input_layer_norm, self_attention_audio with projection biases,
 * post_attention_layer_norm, AudioMLP a one-activation MlpBlock with bias),
 * layernorm_post; Qwen3OmniAudioProjector: proj1, proj2 (with bias). */
smoe_status inv_qwen3_audio(inv *v, const model_dims *m)
{
    const char *name = inv_model_name(v);
    if (!name || strcmp(name, "qwen3-omni-30b-a3b") != 0)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "use_audio"),
                           "MaxText has no audio encoder for model '%s' (only "
                           "qwen3-omni-30b-a3b)", name ? name : "default");
    int64_t d, nl, nh, ffn, dh, mel, out;
    TRY(inv_int(v, "d_model_for_audio", 1280, &d));
    TRY(inv_int(v, "encoder_layers_for_audio", 32, &nl));
    TRY(inv_int(v, "encoder_attention_heads_for_audio", 20, &nh));
    TRY(inv_int(v, "encoder_ffn_dim_for_audio", 5120, &ffn));
    TRY(inv_int(v, "downsample_hidden_size_for_audio", 480, &dh));
    TRY(inv_int(v, "num_mel_bins_for_audio", 128, &mel));
    TRY(inv_int(v, "output_dim_for_audio", 2048, &out));
    if (nh <= 0 || d % nh != 0)
        return smoe_err_at(v->err, SMOE_EINVAL,
                           smoe_config_loc(v->cfg, "encoder_attention_heads_for_audio"),
                           "encoder_attention_heads_for_audio must divide d_model_for_audio");
    const char *enc = "audio_encoder/Qwen3OmniAudioEncoder_0";
    const char *proj = "audio_encoder/Qwen3OmniAudioProjector_0";
    const int64_t convs[3][2] = { { 1, dh }, { dh, dh }, { dh, dh } };
    for (int i = 0; i < 3; i++) {
        INV_PLAIN(&inv_top, inv_fmt(v, "%s/conv2d%d/kernel", enc, i + 1), D(3, NULL), D(3, NULL),
                  D(convs[i][0], NULL), D(convs[i][1], NULL));
        INV_PLAIN(&inv_top, inv_fmt(v, "%s/conv2d%d/bias", enc, i + 1), D(dh, NULL));
    }
    const int64_t conv_out = dh * ((((mel + 1) / 2 + 1) / 2 + 1) / 2);
    INV_PLAIN(&inv_top, inv_fmt(v, "%s/conv_out/kernel", enc), D(conv_out, NULL), D(d, NULL));
    TRY(layer_norm(v, inv_fmt(v, "%s/layernorm_post", enc), d));
    model_dims am;
    inv_attn o;
    encoder_attn(m, nh, d, &am, &o);
    for (int64_t i = 0; i < nl; i++) {
        const char *l = inv_fmt(v, "%s/layers_%lld", enc, (long long)i);
        TRY(layer_norm(v, inv_fmt(v, "%s/input_layer_norm", l), d));
        TRY(inv_gqa(v, &am, &inv_top, inv_fmt(v, "%s/self_attention_audio", l), &o));
        TRY(layer_norm(v, inv_fmt(v, "%s/post_attention_layer_norm", l), d));
        TRY(inv_mlp(v, &am, &inv_top, inv_fmt(v, "%s/AudioMLP", l), d, ffn, 1));
    }
    TRY(dense(v, inv_fmt(v, "%s/proj1", proj), d, d));
    return dense(v, inv_fmt(v, "%s/proj2", proj), d, out);
}
