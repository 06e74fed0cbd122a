/* Building blocks of the built-in enumeration that several decoder blocks
 * share, after MaxText e591f30:
 *   embeddings.py Embed             token_embedder/embedding (vocab, embed_vocab)
 *   decoders.py apply_output_head   decoder_norm, logits_dense (embed_vocab, vocab)
 *   normalizations.py RMSNorm       <norm>/scale (norm)
 *   linears.py DenseGeneral         kernel = in ++ out features, bias = out
 *                                   features with the kernel's trailing axes
 *   linears.py MlpBlock             wi | wi_<k> | fused wi, wo
 *   moe.py RoutedMoE, GateLogit     gate, wi_0, wi_1 (or prefused wi), wo,
 *                                   mlp_bias biases, gemma4 per_expert_scale;
 *                                   the gate bias is no param for hash-routed
 *                                   layers, and for deepseek4* models a
 *                                   MoEBiasVar outside the params collection
 *   mhc.py ManifoldConstrainedHyperConnections  mhc_norm, res/pre/post
 *                                   alpha, beta and alpha_scale
 *   attentions.py Attention         query/key/value (or qkv_proj), out,
 *                                   query_norm/key_norm, value_norm, sinks */
#include "inv_impl.h"

#include <string.h>

smoe_status inv_top_weights(inv *v, const model_dims *m, int norm_bias)
{
    INV_ADD(&inv_top, "token_embedder/embedding", D(m->vocab, "vocab"), D(m->emb, "embed_vocab"));
    INV_ADD(&inv_top, "decoder/decoder_norm/scale", D(m->emb, "norm"));
    if (norm_bias)
        INV_ADD(&inv_top, "decoder/decoder_norm/bias", D(m->emb, "norm"));
    if (!m->logits_via_embedding)
        INV_ADD(&inv_top, "decoder/logits_dense/kernel", D(m->emb, "embed_vocab"),
                D(m->vocab, "vocab"));
    return SMOE_OK;
}

smoe_status inv_norm(inv *v, const inv_at *at, const char *mod, int64_t features)
{
    INV_ADD(at, inv_fmt(v, "%s/scale", mod), D(features, "norm"));
    return SMOE_OK;
}

smoe_status inv_mlp(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                    int64_t in, int64_t width, int bias)
{
    if (m->fused_mlp) {
        INV_ADD(at, inv_fmt(v, "%s/wi/kernel", mod), D(in, "embed"),
                D(m->n_activations, "num_activations"), D(width, "mlp"));
        if (bias)
            INV_ADD(at, inv_fmt(v, "%s/wi/bias", mod), D(m->n_activations, "num_activations"),
                    D(width, "mlp"));
    } else {
        for (int64_t i = 0; i < m->n_activations; i++) {
            const char *wi = m->n_activations == 1
                                 ? inv_fmt(v, "%s/wi", mod)
                                 : inv_fmt(v, "%s/wi_%lld", mod, (long long)i);
            INV_ADD(at, inv_fmt(v, "%s/kernel", wi ? wi : ""), D(in, "embed"), D(width, "mlp"));
            if (bias)
                INV_ADD(at, inv_fmt(v, "%s/bias", wi ? wi : ""), D(width, "mlp"));
        }
    }
    INV_ADD(at, inv_fmt(v, "%s/wo/kernel", mod), D(width, "mlp"), D(in, "embed"));
    if (bias)
        INV_ADD(at, inv_fmt(v, "%s/wo/bias", mod), D(in, "embed"));
    return SMOE_OK;
}

smoe_status inv_routed(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                       const char *gate_axis, int64_t width)
{
    const int64_t E = m->experts, in = m->moe_in;
    const char *wi[3] = { "exp", "embed_moe", "mlp_moe" };
    const char *wo[3] = { "exp", "mlp_moe", "embed_moe" };
    if (m->shard_exp_on_fsdp) {
        wi[0] = "embed_moe"; wi[1] = NULL; wi[2] = "mlp_moe";
        wo[0] = "embed_moe"; wo[1] = "mlp_moe"; wo[2] = NULL;
    } else if (m->use_2d_fsdp) {
        wi[0] = wo[0] = "embed_moe"; wi[1] = wo[1] = "mlp_moe"; wi[2] = wo[2] = NULL;
    } else if (m->batch_split) {
        wi[0] = "expert_only"; wi[1] = "embed_moe"; wi[2] = NULL;
        wo[0] = "expert_only"; wo[1] = NULL; wo[2] = "embed_moe";
    }
    int prefuse = 0, mlp_bias = 0;
    TRY(inv_bool(v, "prefuse_moe_weights", &prefuse));
    TRY(inv_bool(v, "mlp_bias", &mlp_bias));
    INV_ADD(at, inv_fmt(v, "%s/gate/kernel", mod), D(in, gate_axis), D(E, NULL));
    const char *name = inv_model_name(v);
    int bias_var = name && strncmp(name, "deepseek4", 9) == 0;
    if (m->routed_bias && !v->hash_routing && !bias_var)
        INV_ADD(at, inv_fmt(v, "%s/gate/bias", mod), D(E, NULL));
    if (prefuse) {
        INV_ADD(at, inv_fmt(v, "%s/wi", mod), D(E, wi[0]), D(in, wi[1]), D(2 * width, wi[2]));
    } else {
        INV_ADD(at, inv_fmt(v, "%s/wi_0", mod), D(E, wi[0]), D(in, wi[1]), D(width, wi[2]));
        INV_ADD(at, inv_fmt(v, "%s/wi_1", mod), D(E, wi[0]), D(in, wi[1]), D(width, wi[2]));
    }
    INV_ADD(at, inv_fmt(v, "%s/wo", mod), D(E, wo[0]), D(width, wo[1]), D(in, wo[2]));
    if (mlp_bias) {
        INV_ADD(at, inv_fmt(v, "%s/wi_0_bias", mod), D(E, "exp"), D(width, "activation_mlp"));
        INV_ADD(at, inv_fmt(v, "%s/wi_1_bias", mod), D(E, "exp"), D(width, "activation_mlp"));
        INV_ADD(at, inv_fmt(v, "%s/wo_bias", mod), D(E, "exp"), D(in, "activation_embed"));
    }
    if (strcmp(m->decoder_block, "gemma4") == 0)
        INV_ADD(at, inv_fmt(v, "%s/per_expert_scale", mod), D(E, "exp"));
    return SMOE_OK;
}

smoe_status inv_attn_default(inv *v, const model_dims *m, inv_attn *o)
{
    memset(o, 0, sizeof *o);
    o->heads = m->heads;
    o->kv_heads = m->kv_heads;
    o->head_dim = m->head_dim;
    TRY(inv_bool(v, "attention_bias", &o->bias));
    o->out_bias = o->bias;
    o->qk_norm = m->use_qk_norm;
    o->qk_norm_q = o->qk_norm_k = m->head_dim;
    TRY(inv_bool(v, "attention_sink", &o->sinks));
    return SMOE_OK;
}

smoe_status inv_gqa(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                    const inv_attn *o)
{
    const int ar = m->context_autoregressive;
    const int64_t H = o->heads, K = o->kv_heads, hd = o->head_dim, e = m->emb;
    if (m->fused_qkv) {
        INV_ADD(at, inv_fmt(v, "%s/qkv_proj/kernel", mod), D(e, "embed"), D(H + 2 * K, "heads"),
                D(hd, "kv"));
        if (o->bias)
            INV_ADD(at, inv_fmt(v, "%s/qkv_proj/bias", mod), D(H + 2 * K, "heads"), D(hd, "kv"));
    } else {
        INV_ADD(at, inv_fmt(v, "%s/query/kernel", mod), D(e, ar ? NULL : "embed"),
                D(H, ar ? NULL : "q_heads"), D(hd, ar ? NULL : "kv"));
        if (o->bias)
            INV_ADD(at, inv_fmt(v, "%s/query/bias", mod), D(H, ar ? NULL : "q_heads"),
                    D(hd, ar ? NULL : "kv"));
        int nkv = o->no_kv ? 0 : o->share_kv ? 1 : 2;
        static const char *const kv[2] = { "key", "value" };
        for (int i = 0; i < nkv; i++) {
            INV_ADD(at, inv_fmt(v, "%s/%s/kernel", mod, kv[i]), D(e, ar ? NULL : "embed"),
                    D(K, ar ? NULL : "kv_heads"), D(hd, ar ? NULL : "kv_head_dim"));
            if (o->bias)
                INV_ADD(at, inv_fmt(v, "%s/%s/bias", mod, kv[i]), D(K, ar ? NULL : "kv_heads"),
                        D(hd, ar ? NULL : "kv_head_dim"));
        }
    }
    const int64_t od = o->out_dim > 0 ? o->out_dim : e;
    INV_ADD(at, inv_fmt(v, "%s/out/kernel", mod), D(H, ar ? NULL : "heads"),
            D(hd, ar ? NULL : "kv"), D(od, ar ? NULL : "embed"));
    if (o->out_bias)
        INV_ADD(at, inv_fmt(v, "%s/out/bias", mod), D(od, ar ? NULL : "embed"));
    if (o->qk_norm) {
        int with_scale = 1;
        if (smoe_config_get(v->cfg, "qk_norm_with_scale"))
            TRY(inv_bool(v, "qk_norm_with_scale", &with_scale));
        if (with_scale) {
            TRY(inv_norm(v, at, inv_fmt(v, "%s/query_norm", mod), o->qk_norm_q));
            if (!o->no_kv)
                TRY(inv_norm(v, at, inv_fmt(v, "%s/key_norm", mod), o->qk_norm_k));
        }
    }
    if (o->v_norm) {
        int with_scale = 1;
        if (smoe_config_get(v->cfg, "v_norm_with_scale"))
            TRY(inv_bool(v, "v_norm_with_scale", &with_scale));
        if (with_scale)
            TRY(inv_norm(v, at, inv_fmt(v, "%s/value_norm", mod), hd));
    }
    if (o->sinks)
        INV_ADD(at, inv_fmt(v, "%s/sinks", mod), D(H, NULL));
    return SMOE_OK;
}

smoe_status inv_mhc(inv *v, const model_dims *m, const inv_at *at, const char *mod)
{
    int64_t k;
    int lite;
    TRY(inv_int(v, "mhc_expansion_rate", 1, &k));
    TRY(inv_bool(v, "enable_mhc_lite", &lite));
    if (k < 1 || (lite && k > 20))
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "mhc_expansion_rate"),
                           "mhc_expansion_rate must be >= 1 (at most 20 with enable_mhc_lite: "
                           "its k! permutations)");
    int64_t perms = 1;
    for (int64_t i = 2; lite && i <= k; i++)
        perms *= i;
    const int64_t kd = k * m->emb;
    TRY(inv_norm(v, at, inv_fmt(v, "%s/mhc_norm", mod), kd));
    static const char *const sc[3] = { "res_alpha_scale", "pre_alpha_scale", "post_alpha_scale" };
    for (int i = 0; i < 3; i++)
        INV_ADD(at, inv_fmt(v, "%s/%s", mod, sc[i]), D(1, NULL));
    INV_ADD(at, inv_fmt(v, "%s/res_alpha", mod), D(kd, "activation_embed"),
            D(lite ? perms : k * k, NULL));
    INV_ADD(at, inv_fmt(v, "%s/pre_alpha", mod), D(kd, "activation_embed"), D(k, NULL));
    INV_ADD(at, inv_fmt(v, "%s/post_alpha", mod), D(kd, "activation_embed"), D(k, NULL));
    if (lite)
        INV_ADD(at, inv_fmt(v, "%s/res_beta", mod), D(perms, NULL));
    else
        INV_ADD(at, inv_fmt(v, "%s/res_beta", mod), D(k, NULL), D(k, NULL));
    INV_ADD(at, inv_fmt(v, "%s/pre_beta", mod), D(k, NULL));
    INV_ADD(at, inv_fmt(v, "%s/post_beta", mod), D(k, NULL));
    return SMOE_OK;
}
