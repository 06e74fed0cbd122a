/* The llama-shaped decoder blocks: pre_self_attention_layer_norm,
 * self_attention (GQA), post_self_attention_layer_norm, then a dense MLP
 * or routed experts. After MaxText e591f30:
 *   llama2, mistral  src/maxtext/models/llama2.py, mistral.py: mlp
 *   mixtral          src/maxtext/models/mixtral.py: MoeBlock_0 (gate axes
 *                    (embed, None), width mlp_dim)
 *   qwen2            src/maxtext/models/qwen2.py: q/k/v biases with
 *                    attention_bias (out has none), use_qk_norm
 *   qwen3            src/maxtext/models/qwen3.py Qwen3DecoderLayer: mlp,
 *                    use_qk_norm (per-head query_norm/key_norm)
 *   qwen3_moe        qwen3.py Qwen3MoeDecoderLayer: moe_block (gate axes
 *                    (embed, None), width moe_mlp_dim)
 *   qwen3_custom_moe src/maxtext/models/qwen3_custom.py
 *                    Qwen3CustomMoeDecoderLayer: attention out projects to
 *                    attention_output_dim, latent_norm, moe_block on
 *                    moe_expert_input_dim, layer_up_projection (mlp, embed)
 *                    back to emb when the two differ
 * Attention options the layer does not pass stay at Attention's defaults
 * (no qk norm, no projection bias); attention_sink is read from the config
 * by Attention itself. */
#include "inv_impl.h"

#include <string.h>

static smoe_status attn_out(inv *v, const model_dims *m, const inv_at *at, int64_t out_dim)
{
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    o.out_dim = out_dim;
    const char *b = m->decoder_block;
    int qwen = strncmp(b, "qwen", 4) == 0;
    if (!qwen) {
        o.qk_norm = 0;
        o.bias = o.out_bias = 0;
    }
    if (strcmp(b, "qwen2") == 0)
        o.out_bias = 0;
    else if (qwen)
        o.bias = o.out_bias = 0;
    TRY(inv_norm(v, at, "pre_self_attention_layer_norm", m->emb));
    TRY(inv_norm(v, at, "post_self_attention_layer_norm", m->emb));
    return inv_gqa(v, m, at, "self_attention", &o);
}

static smoe_status attn(inv *v, const model_dims *m, const inv_at *at)
{
    return attn_out(v, m, at, 0);
}

static smoe_status dense_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    TRY(attn(v, m, at));
    return inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0);
}

static smoe_status mixtral_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    TRY(attn(v, m, at));
    return inv_routed(v, m, at, "MoeBlock_0", "embed", m->mlp);
}

static smoe_status qwen3_moe_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    TRY(attn(v, m, at));
    return inv_routed(v, m, at, "moe_block", "embed", m->moe_mlp);
}

static smoe_status dense(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, dense_layer);
}

smoe_status inv_llama(inv *v, const model_dims *m) { return dense(v, m); }
smoe_status inv_qwen2(inv *v, const model_dims *m) { return dense(v, m); }
smoe_status inv_qwen3(inv *v, const model_dims *m) { return dense(v, m); }

smoe_status inv_mixtral(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, mixtral_layer);
}

smoe_status inv_qwen3_moe(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, qwen3_moe_layer);
}

/* olmo3: src/maxtext/models/olmo3.py Olmo3DecoderLayer: attention (GQA;
 * with use_qk_norm a GlobalRMSNorm over all heads, heads*head_dim
 * features, for model names olmo3*), post_self_attention_layer_norm, mlp,
 * post_mlp_layer_norm; Olmo3ScannableBlock scans
 * inhomogeneous_layer_cycle_interval layers as decoder/layers/layers_<k>. */
static smoe_status olmo3_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    const char *name = inv_model_name(v);
    if (name && strncmp(name, "olmo3", 5) == 0) {
        o.qk_norm_q = m->heads * m->head_dim;
        o.qk_norm_k = m->kv_heads * m->head_dim;
    }
    TRY(inv_gqa(v, m, at, "attention", &o));
    TRY(inv_norm(v, at, "post_self_attention_layer_norm", m->emb));
    TRY(inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0));
    return inv_norm(v, at, "post_mlp_layer_norm", m->emb);
}

smoe_status inv_olmo3(inv *v, const model_dims *m)
{
    int64_t cycle;
    TRY(inv_cycle_len(v, m, &cycle));
    TRY(inv_top_weights(v, m, 0));
    return inv_cycle(v, m, m->layers, cycle, "layers", olmo3_layer);
}

static smoe_status qwen3_custom_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    (void)idx;
    int64_t od;
    TRY(inv_int(v, "attention_output_dim", -1, &od));
    if (od <= 0 || od != m->moe_in)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "attention_output_dim"),
                           "qwen3_custom_moe needs attention_output_dim > 0 and equal to "
                           "moe_expert_input_dim (as MaxText checks)");
    TRY(attn_out(v, m, at, od));
    TRY(inv_norm(v, at, "latent_norm", od));
    TRY(inv_routed(v, m, at, "moe_block", "embed", m->moe_mlp));
    if (od != m->emb) {
        const int ar = m->context_autoregressive;
        INV_ADD(at, "layer_up_projection/kernel", D(od, ar ? NULL : "mlp"),
                D(m->emb, ar ? NULL : "embed"));
    }
    return SMOE_OK;
}

smoe_status inv_qwen3_custom_moe(inv *v, const model_dims *m)
{
    return inv_decoder(v, m, qwen3_custom_layer);
}
