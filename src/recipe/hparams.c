/* The model configuration and training hyperparameters a smoe config
 * describes. smoe train runs decoder_block "deepseek" with MLA attention
 * and SwiGLU MLPs; anything else is refused with the key's location.
 * The model dimensions are the plan's (smoe_plan_dims reads them once, as
 * MaxText derives them), checked against smoe train's ranges in keys.c;
 * every other numeric key is read through keys.c (its accepted range lives
 * there); the checks between keys are here. */
#include "recipe_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static smoe_status get_i(const smoe_config *c, const char *k, int64_t *v, smoe_err *err)
{
    return rc_key_int(c, k, v, err);
}

static smoe_status get_f(const smoe_config *c, const char *k, double *v, smoe_err *err)
{
    return rc_key_float(c, k, v, err);
}

static smoe_status bad(const smoe_config *c, const char *k, smoe_err *err, const char *why)
{
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, k), "%s: %s", k, why);
}

/* The architecture smoe train runs: the deepseek decoder block with MLA
 * attention and SwiGLU, none of the fused or alternative layouts. */
static smoe_status check_architecture(const smoe_config *c, const smoe_dims *d, smoe_err *err)
{
    smoe_status s;
    const char *att;
    if (strcmp(d->decoder_block, "deepseek") != 0)
        return bad(c, "decoder_block", err, "smoe train runs the deepseek decoder block");
    if ((s = smoe_config_str(c, "attention_type", &att, err)))
        return s;
    if (strcmp(att, "mla") != 0)
        return bad(c, "attention_type", err, "smoe train runs MLA attention (mla)");
    const smoe_node *acts = smoe_config_get(c, "mlp_activations");
    if (!acts || acts->kind != SMOE_NODE_SEQ || acts->n != 2 ||
        strcmp(acts->items[0]->str, "silu") != 0 || strcmp(acts->items[1]->str, "linear") != 0)
        return bad(c, "mlp_activations", err, "smoe train needs [silu, linear] (SwiGLU)");
    const struct { const char *key; int on; } off[] = {
        { "fused_mlp", d->fused_mlp }, { "fused_qkv", d->fused_qkv },
        { "shard_exp_on_fsdp", d->shard_exp_on_fsdp }, { "use_2d_fsdp_sharding", d->use_2d_fsdp },
        { "use_batch_split_schedule", d->batch_split },
        { "logits_via_embedding", d->logits_via_embedding },
    };
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if (off[i].on)
            return bad(c, off[i].key, err, "not supported by smoe train");
    if (!d->scan_layers) /* its model and schedules run the plan's stacks */
        return bad(c, "scan_layers", err, "smoe train runs scanned (stacked) layers only");
    return SMOE_OK;
}

/* The plan's dimensions, each inside smoe train's range (keys.c), and the
 * layer split. */
static smoe_status model_dims(const smoe_config *c, const smoe_dims *d, smoe_model_cfg *mc,
                              smoe_err *err)
{
    smoe_status s;
    int64_t layers;
    const struct { const char *key; int64_t v; int64_t *dst; } dim[] = {
        { "base_emb_dim", d->emb, &mc->emb }, { "base_num_query_heads", d->heads, &mc->heads },
        { "q_lora_rank", d->q_lora, &mc->q_lora }, { "kv_lora_rank", d->kv_lora, &mc->kv_lora },
        { "qk_nope_head_dim", d->qk_nope, &mc->qk_nope },
        { "qk_rope_head_dim", d->qk_rope, &mc->qk_rope }, { "v_head_dim", d->v_head, &mc->v_head },
        { "base_mlp_dim", d->mlp, &mc->mlp }, { "base_moe_mlp_dim", d->moe_mlp, &mc->moe_mlp },
        { "num_experts", d->experts, &mc->experts }, { "num_experts_per_tok", d->topk, &mc->topk },
        { "shared_experts", d->shared_experts, &mc->shared }, { "vocab_size", d->vocab, &mc->vocab },
        { "base_num_decoder_layers", d->layers, &layers },
        { "first_num_dense_layers", d->first_dense, &mc->n_dense },
    };
    for (size_t i = 0; i < sizeof dim / sizeof dim[0]; i++) {
        if ((s = rc_key_check_int(c, dim[i].key, dim[i].v, err)))
            return s;
        *dim[i].dst = dim[i].v;
    }
    if ((s = get_i(c, "max_target_length", &mc->seq, err)))
        return s;
    if (mc->n_dense > layers)
        return bad(c, "first_num_dense_layers", err,
                   "must be at most base_num_decoder_layers");
    if (mc->topk > mc->experts)
        return bad(c, "num_experts_per_tok", err, "must be at most num_experts");
    if (mc->qk_rope % 2)
        return bad(c, "qk_rope_head_dim", err, "must be even (RoPE turns pairs)");
    mc->n_moe = layers - mc->n_dense;
    return SMOE_OK;
}

/* The router's bias, the scalars and the batch (the score function is the
 * recipe's: rc_model_recipe). */
static smoe_status model_scalars(const smoe_config *c, const smoe_dims *d, smoe_model_cfg *mc,
                                 smoe_err *err)
{
    smoe_status s;
    double f;
    mc->routed_bias = d->routed_bias;
    const struct { const char *key; float *dst; } fl[] = {
        { "routed_scaling_factor", &mc->routed_scale },
        { "normalization_layer_epsilon", &mc->eps },
        { "rope_max_timescale", &mc->rope_theta },
        { "capacity_factor", &mc->capacity_factor },
    };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        if ((s = get_f(c, fl[i].key, &f, err)))
            return s;
        *fl[i].dst = (float)f;
    }
    if ((s = get_f(c, "per_device_batch_size", &f, err)))
        return s;
    mc->batch = (int64_t)f;
    if (mc->batch > INT32_MAX / mc->seq) {
        char why[160];
        snprintf(why, sizeof why,
                 "%lld sequences of max_target_length %lld tokens are more than smoe's "
                 "limit of 2^31 - 1 tokens per device",
                 (long long)mc->batch, (long long)mc->seq);
        return bad(c, "per_device_batch_size", err, why);
    }
    return SMOE_OK;
}

/* Parallelism: every axis of size > 1 must be a batch axis or expert, and
 * the experts divide over the expert axis. */
static smoe_status model_mesh(const smoe_config *c, const smoe_mesh *mesh, smoe_model_cfg *mc,
                              smoe_err *err)
{
    mc->ep = 1;
    for (int i = 0; i < mesh->n; i++) {
        const char *a = mesh->name[i];
        if (mesh->size[i] <= 1)
            continue;
        if (strcmp(a, "expert") == 0) {
            mc->ep = mesh->size[i];
            continue;
        }
        if (strcmp(a, "data") && strcmp(a, "fsdp") && strcmp(a, "fsdp_transpose"))
            return smoe_err_set(err, SMOE_EINVAL,
                                "mesh axis '%s' has size %lld; smoe train shards over data, "
                                "fsdp, fsdp_transpose and expert only",
                                a, (long long)mesh->size[i]);
    }
    if (mc->experts % mc->ep != 0)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, "num_experts"),
                           "num_experts (%lld) is not divisible by the expert axis (%lld)",
                           (long long)mc->experts, (long long)mc->ep);
    return SMOE_OK;
}

smoe_status smoe_train_model_cfg(const smoe_config *c, const smoe_mesh *mesh,
                                 smoe_model_cfg *mc, smoe_err *err)
{
    smoe_status s;
    memset(mc, 0, sizeof *mc);
    int64_t scale;
    /* smoe train does not scale the model: checked before the dimensions
     * are derived, so they are the config's base_* values */
    if ((s = get_i(c, "global_parameter_scale", &scale, err)))
        return s;
    smoe_dims d;
    if ((s = smoe_plan_dims(c, &d, err)) || (s = check_architecture(c, &d, err)) ||
        (s = model_dims(c, &d, mc, err)) || (s = model_scalars(c, &d, mc, err)) ||
        (s = model_mesh(c, mesh, mc, err)))
        return s;
    /* the recipe's model-side keys (recipe.c); the load-balance mean runs
     * over the global batch: every mesh axis shards it */
    if ((s = rc_model_recipe(c, mc, err)))
        return s;
    mc->lb_batch = mc->batch;
    for (int i = 0; i < mesh->n; i++)
        mc->lb_batch *= mesh->size[i];
    return SMOE_OK;
}

smoe_status smoe_recipe_read_hparams(const smoe_config *c, smoe_recipe_hparams *hp, smoe_err *err)
{
    smoe_status s;
    if ((s = get_f(c, "learning_rate", &hp->lr, err)) ||
        (s = get_f(c, "adam_b1", &hp->b1, err)) || (s = get_f(c, "adam_b2", &hp->b2, err)) ||
        (s = get_f(c, "adam_eps", &hp->eps, err)) ||
        (s = get_f(c, "adam_weight_decay", &hp->wd, err)))
        return s;
    /* MaxText's train step checks the loss of every step when these are
     * set (both true in base.yml); absent keys (older configs) mean true */
    hp->abort_on_nan = hp->abort_on_inf = 1;
    if (smoe_config_get(c, "abort_on_nan_loss") &&
        (s = smoe_config_bool(c, "abort_on_nan_loss", &hp->abort_on_nan, err)))
        return s;
    if (smoe_config_get(c, "abort_on_inf_loss") &&
        (s = smoe_config_bool(c, "abort_on_inf_loss", &hp->abort_on_inf, err)))
        return s;
    return SMOE_OK;
}
