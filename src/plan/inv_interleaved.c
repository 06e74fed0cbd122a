/* Decoder blocks that interleave dense and MoE layers in a repeating
 * cycle, after MaxText e591f30:
 *   llama4  src/maxtext/models/llama4.py Llama4DecoderLayer: layer i is MoE
 *           when (i + 1) % interleave_moe_layer_step == 0
 *           (determine_is_moe_layer): Llama4MoEBlock_0 (RoutedAndSharedMoE
 *           in moe.py: MoeBlock_0 with gate axes (embed_moe, None) and width
 *           moe_mlp_dim, shared_experts MlpBlock of shared_experts *
 *           moe_mlp_dim), else mlp (mlp_dim). Its qk norm is a parameter-free
 *           L2 norm (attentions.py skips query_norm/key_norm for llama4).
 *           Llama4ScannableBlock scans inhomogeneous_layer_cycle_interval
 *           layers as decoder/layers/layers_<k>.
 *   envy    src/maxtext/models/envy.py EnvyDecoderLayer: MoE when (i + 1) %
 *           interleave_moe_layer_step == 0: MoeBlock_0 (RoutedMoE, gate axes
 *           (embed, None), width moe_mlp_dim), else mlp; use_qk_norm
 *           per-head norms; post_ffw_norm with use_post_ffw_norm;
 *           EnvyScannableBlock as llama4's. */
#include "inv_impl.h"

smoe_status inv_routed_shared(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                              int64_t shared_width)
{
    TRY(inv_routed(v, m, at, inv_fmt(v, "%s/MoeBlock_0", mod), "embed_moe", m->moe_mlp));
    return inv_mlp(v, m, at, inv_fmt(v, "%s/shared_experts", mod), m->moe_in,
                   m->shared_experts * shared_width, 0);
}

static int is_moe(int64_t idx, int64_t step)
{
    return step > 0 && (idx + 1) % step == 0;
}

static smoe_status moe_step(inv *v, int64_t *step)
{
    return inv_int(v, "interleave_moe_layer_step", 1, step);
}

static smoe_status common(inv *v, const model_dims *m, const inv_at *at, int qk_norm)
{
    inv_attn o;
    TRY(inv_attn_default(v, m, &o));
    o.qk_norm = qk_norm;
    o.bias = o.out_bias = 0;
    TRY(inv_norm(v, at, "pre_self_attention_layer_norm", m->emb));
    TRY(inv_norm(v, at, "post_self_attention_layer_norm", m->emb));
    return inv_gqa(v, m, at, "self_attention", &o);
}

static smoe_status llama4_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    int64_t step;
    TRY(moe_step(v, &step));
    TRY(common(v, m, at, 0));
    if (is_moe(idx, step))
        return inv_routed_shared(v, m, at, "Llama4MoEBlock_0", m->moe_mlp);
    return inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0);
}

static smoe_status envy_layer(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    int64_t step;
    int post_ffw;
    TRY(moe_step(v, &step));
    TRY(inv_bool(v, "use_post_ffw_norm", &post_ffw));
    TRY(common(v, m, at, m->use_qk_norm));
    if (is_moe(idx, step))
        TRY(inv_routed(v, m, at, "MoeBlock_0", "embed", m->moe_mlp));
    else
        TRY(inv_mlp(v, m, at, "mlp", m->emb, m->mlp, 0));
    if (post_ffw)
        TRY(inv_norm(v, at, "post_ffw_norm", m->emb));
    return SMOE_OK;
}

static smoe_status cycled(inv *v, const model_dims *m, inv_layer_fn fn)
{
    int64_t cycle, step;
    TRY(inv_cycle_len(v, m, &cycle));
    TRY(moe_step(v, &step));
    /* a scanned block repeats one cycle: the MoE pattern must repeat in it */
    if (m->scan_layers && step > 0 && cycle % step != 0)
        return smoe_err_at(v->err, SMOE_EINVAL,
                           smoe_config_loc(v->cfg, "interleave_moe_layer_step"),
                           "interleave_moe_layer_step (%lld) must divide "
                           "inhomogeneous_layer_cycle_interval (%lld) when layers are scanned",
                           (long long)step, (long long)cycle);
    TRY(inv_top_weights(v, m, 0));
    return inv_cycle(v, m, m->layers, cycle, "layers", fn);
}

smoe_status inv_llama4(inv *v, const model_dims *m) { return cycled(v, m, llama4_layer); }
smoe_status inv_envy(inv *v, const model_dims *m) { return cycled(v, m, envy_layer); }
