/* Model dimensions from a config: base_* keys scaled by
 * global_parameter_scale the way MaxText derives emb_dim, num_query_heads,
 * mlp_dim and num_decoder_layers. */
#include "dims.h"

#include <string.h>

/* Optional integer: absent keys take `def`. */
static smoe_status opt_int(const smoe_config *c, const char *k, int64_t def,
                           int64_t *out, smoe_err *err)
{
    if (!smoe_config_get(c, k)) {
        *out = def;
        return SMOE_OK;
    }
    return smoe_config_int(c, k, out, err);
}

static smoe_status opt_bool(const smoe_config *c, const char *k, int *out,
                            smoe_err *err)
{
    *out = 0;
    if (!smoe_config_get(c, k))
        return SMOE_OK;
    return smoe_config_bool(c, k, out, err);
}

/* A model dimension: an optional integer in [lo, SMOE_MAX_DIM]. The upper
 * bound keeps every shape, product of two dims and byte count of the plan
 * inside int64 (hostile configs: base_emb_dim=9223372036854775807). */
#define SMOE_MAX_DIM 2147483647LL
#define SMOE_MAX_ACTIVATIONS 16
static smoe_status dim(const smoe_config *c, const char *k, int64_t def,
                       int64_t lo, int64_t *out, smoe_err *err)
{
    smoe_status s = opt_int(c, k, def, out, err);
    if (s)
        return s;
    if (*out < lo)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, k),
                           "'%s' must be >= %lld, got %lld", k, (long long)lo,
                           (long long)*out);
    if (*out > SMOE_MAX_DIM)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, k),
                           "'%s' must be at most %lld, got %lld", k, SMOE_MAX_DIM,
                           (long long)*out);
    return SMOE_OK;
}

/* b << shift for a base_* dim read by dim() (b <= 2^31, shift <= 21: no
 * overflow), bounded again after scaling. */
static smoe_status scaled(const smoe_config *c, const char *k, int64_t b, int shift,
                          int64_t *out, smoe_err *err)
{
    *out = b > 0 ? b << shift : b;
    if (*out > SMOE_MAX_DIM)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, k),
                           "'%s' scaled by global_parameter_scale is %lld, over "
                           "smoe's limit %lld", k, (long long)*out, SMOE_MAX_DIM);
    return SMOE_OK;
}

#define INT(key, dst, def) if ((s = opt_int(c, key, def, dst, err))) return s
#define DIM(key, dst, def, lo) if ((s = dim(c, key, def, lo, dst, err))) return s
#define SCALED(key, dst, lo, shift)                                            \
    if ((s = dim(c, key, 0, lo, &b, err)) || (s = scaled(c, key, b, shift, dst, err))) \
        return s
#define BOOL(key, dst) if ((s = opt_bool(c, key, dst, err))) return s

/* The base_* dims scaled by global_parameter_scale (a power of 2: its
 * log2 split over layers, heads and the embedding as MaxText does). */
static smoe_status read_scaled(const smoe_config *c, model_dims *d, smoe_err *err)
{
    smoe_status s;
    int64_t scale = 1, b;
    INT("global_parameter_scale", &scale, 1);
    if (scale < 1 || (scale & (scale - 1)))
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, "global_parameter_scale"),
                           "global_parameter_scale must be a power of 2");
    int log2s = 0;
    while ((1LL << log2s) < scale)
        log2s++;
    int base_scale = log2s / 3, rem = log2s % 3;
    int head_scale = base_scale + (rem > 0), emb_scale = base_scale + (rem > 1);
    SCALED("base_emb_dim", &d->emb, 1, emb_scale);
    SCALED("base_num_query_heads", &d->heads, 0, head_scale);
    SCALED("base_num_kv_heads", &d->kv_heads, 0, head_scale);
    SCALED("base_mlp_dim", &d->mlp, 0, head_scale);
    if (!smoe_config_get(c, "base_moe_mlp_dim"))
        d->moe_mlp = -1;
    else
        SCALED("base_moe_mlp_dim", &d->moe_mlp, INT64_MIN, head_scale);
    SCALED("base_num_decoder_layers", &d->layers, 1, base_scale);
    return SMOE_OK;
}

/* The dims read as they are: heads, vocabulary, experts, MLA's ranks. */
static smoe_status read_plain(const smoe_config *c, model_dims *d, smoe_err *err)
{
    smoe_status s;
    DIM("head_dim", &d->head_dim, 128, 0);
    DIM("vocab_size", &d->vocab, 0, 1);
    INT("first_num_dense_layers", &d->first_dense, 0);
    DIM("num_experts", &d->experts, 1, 1);
    DIM("num_experts_per_tok", &d->topk, 1, 0);
    DIM("shared_experts", &d->shared_experts, 0, 0);
    DIM("q_lora_rank", &d->q_lora, 0, 0);
    DIM("kv_lora_rank", &d->kv_lora, 0, 0);
    DIM("qk_nope_head_dim", &d->qk_nope, 0, 0);
    DIM("qk_rope_head_dim", &d->qk_rope, 0, 0);
    DIM("v_head_dim", &d->v_head, 0, 0);
    DIM("moe_expert_input_dim", &d->moe_in, -1, INT64_MIN);
    if (d->moe_in <= 0)
        d->moe_in = d->emb;
    INT("param_scan_axis", &d->scan_axis, 1);
    DIM("mtp_num_layers", &d->mtp_layers, 0, INT64_MIN);
    return SMOE_OK;
}

/* The switches that change which weights exist and how they are sharded. */
static smoe_status read_flags(const smoe_config *c, model_dims *d, smoe_err *err)
{
    smoe_status s;
    int64_t car = 1;
    INT("ici_context_autoregressive_parallelism", &car, 1);
    d->context_autoregressive = car > 1;
    BOOL("routed_bias", &d->routed_bias);
    BOOL("logits_via_embedding", &d->logits_via_embedding);
    BOOL("fused_mlp", &d->fused_mlp);
    BOOL("fused_qkv", &d->fused_qkv);
    BOOL("shard_exp_on_fsdp", &d->shard_exp_on_fsdp);
    BOOL("use_2d_fsdp_sharding", &d->use_2d_fsdp);
    BOOL("use_batch_split_schedule", &d->batch_split);
    BOOL("use_qk_norm", &d->use_qk_norm);
    d->scan_layers = 1;
    if (smoe_config_get(c, "scan_layers") &&
        (s = smoe_config_bool(c, "scan_layers", &d->scan_layers, err)))
        return s;
    const char *att = NULL;
    if (smoe_config_get(c, "attention_type") &&
        smoe_config_str(c, "attention_type", &att, NULL) == SMOE_OK)
        d->mla = strcmp(att, "mla") == 0;
    return SMOE_OK;
}
#undef INT
#undef DIM
#undef SCALED
#undef BOOL

smoe_status plan_read_dims(const smoe_config *c, model_dims *d, smoe_err *err)
{
    smoe_status s;
    memset(d, 0, sizeof *d);
    if ((s = smoe_config_str(c, "decoder_block", &d->decoder_block, err)) ||
        (s = read_scaled(c, d, err)) || (s = read_plain(c, d, err)) || (s = read_flags(c, d, err)))
        return s;
    const smoe_node *acts = smoe_config_get(c, "mlp_activations");
    d->n_activations = acts && acts->kind == SMOE_NODE_SEQ ? acts->n : 1;
    if (d->n_activations > SMOE_MAX_ACTIVATIONS)
        return smoe_err_at(err, SMOE_EINVAL, acts->loc,
                           "mlp_activations may list at most %d functions, got %lld",
                           SMOE_MAX_ACTIVATIONS, (long long)d->n_activations);
    if (d->first_dense < 0 || d->first_dense > d->layers)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, "first_num_dense_layers"),
                           "first_num_dense_layers must be between 0 and the "
                           "number of decoder layers (%lld)", (long long)d->layers);
    return SMOE_OK;
}

smoe_status smoe_plan_dims(const smoe_config *cfg, smoe_dims *d, smoe_err *err)
{
    return plan_read_dims(cfg, d, err);
}
