/* The numeric MaxText keys smoe train reads, with the values it accepts:
 * the one place that knows them. Every numeric training key is read
 * through rc_key_int / rc_key_float, which refuse a value outside its range
 * with the key's location (file:line:col or the override argument), so no
 * config value reaches a kernel's invariant. `smoe train --list-keys`
 * prints this table (the hostile-value test walks it).
 *
 * Float keys marked F32 are checked after rounding to float32, the precision
 * the kernels compute in (adam_b2 = 0.99999999 rounds to 1.0f; adam_eps =
 * 1e-50 to 0). The ranges are optax's and MaxText's where they have one
 * (b1, b2 in [0, 1), eps > 0), else what smoe's model can run. */
#include "recipe_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define BIG ((double)INT32_MAX)
#define INF INFINITY

/* flags */
#define LO_OPEN 1u  /* lo excluded */
#define HI_OPEN 2u  /* hi excluded */
#define F32 4u      /* checked after rounding to float32 */
#define WHOLE 8u    /* a whole number */
#define POS_F32 16u /* a value > 0 must stay > 0 in float32 (else <= 0 is a mode) */
#define NULL_OK 32u /* null means unset (a key of an older MaxText version) */

static const smoe_train_key k_keys[] = {
    /* model dimensions (the model's sizes: listed when a model is too big) */
    { "base_emb_dim", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "base_num_query_heads", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "q_lora_rank", 'i', 0, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 0 (0: no query LoRA)" },
    { "kv_lora_rank", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "qk_nope_head_dim", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "qk_rope_head_dim", 'i', 2, BIG, 0, SMOE_TRAIN_KEY_SIZE, "even, >= 2 (RoPE turns pairs)" },
    { "v_head_dim", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "base_mlp_dim", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "base_moe_mlp_dim", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "num_experts", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "num_experts_per_tok", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, "from 1 to num_experts" },
    { "shared_experts", 'i', 0, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 0" },
    { "vocab_size", 'i', 256, BIG, 0, SMOE_TRAIN_KEY_SIZE,
      ">= 256 (smoe train's tokens are the data file's bytes)" },
    { "base_num_decoder_layers", 'i', 1, 65536, 0, SMOE_TRAIN_KEY_SIZE, "from 1 to 65536" },
    { "first_num_dense_layers", 'i', 0, BIG, 0, SMOE_TRAIN_KEY_SIZE,
      "from 0 to base_num_decoder_layers" },
    { "max_target_length", 'i', 1, BIG, 0, SMOE_TRAIN_KEY_SIZE, ">= 1" },
    { "per_device_batch_size", 'f', 1, BIG, WHOLE, SMOE_TRAIN_KEY_SIZE,
      "a whole number >= 1 (smoe train runs whole sequences per device)" },
    { "global_parameter_scale", 'i', 1, 1, 0, 0, "1 (smoe train does not scale the model)" },
    /* model numerics */
    { "routed_scaling_factor", 'f', -INF, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number (in float32)" },
    { "normalization_layer_epsilon", 'f', 0, INF, F32 | HI_OPEN, 0,
      "a finite number >= 0 (in float32)" },
    { "rope_max_timescale", 'f', 0, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number > 0 (in float32)" },
    { "capacity_factor", 'f', -INF, INF, F32 | LO_OPEN | HI_OPEN | POS_F32, 0,
      "<= 0 (dropless) or a finite number that stays > 0 in float32" },
    /* optimizer (optax.adamw; MaxText optimizers.py) */
    { "learning_rate", 'f', 0, INF, HI_OPEN, 0, "a finite number >= 0" },
    { "adam_b1", 'f', 0, 1, F32 | HI_OPEN, 0, "in [0, 1) after rounding to float32" },
    { "adam_b2", 'f', 0, 1, F32 | HI_OPEN, 0, "in [0, 1) after rounding to float32" },
    { "adam_eps", 'f', 0, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number > 0 after rounding to float32" },
    { "adam_weight_decay", 'f', 0, INF, F32 | HI_OPEN, 0, "a finite number >= 0 (in float32)" },
    { "adam_eps_root", 'f', 0, INF, F32 | HI_OPEN, 0, "a finite number >= 0 (in float32)" },
    /* MaxText's recipe (recipe.c): schedule, clipping, losses, RoPE; the
     * conditions that depend on other keys are checked there */
    { "learning_rate_final_fraction", 'f', -INF, INF, LO_OPEN | HI_OPEN, 0, "a finite number" },
    { "cosine_learning_rate_final_fraction", 'f', -INF, INF, LO_OPEN | HI_OPEN | NULL_OK, 0,
      "a finite number (or null)" },
    { "warmup_steps_fraction", 'f', 0, INF, HI_OPEN, 0, "a finite number >= 0" },
    { "wsd_decay_steps_fraction", 'f', 0, INF, HI_OPEN, 0, "a finite number >= 0" },
    { "learning_rate_schedule_steps", 'i', -1, BIG, 0, 0, "-1 (the run's steps) or >= 1" },
    { "gradient_clipping_threshold", 'f', -INF, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number (<= 0: no clipping)" },
    { "routed_bias_update_rate", 'f', -INF, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number (<= 0: no update)" },
    { "load_balance_loss_weight", 'f', 0, INF, F32 | HI_OPEN, 0,
      "a finite number >= 0 (in float32)" },
    { "z_loss_multiplier", 'f', -INF, INF, F32 | LO_OPEN | HI_OPEN, 0,
      "a finite number (in float32)" },
    { "rope_min_timescale", 'f', 0, INF, LO_OPEN | HI_OPEN, 0, "a finite number > 0" },
    { "rope_linear_scaling_factor", 'f', 0, INF, LO_OPEN | HI_OPEN, 0, "a finite number > 0" },
    { "rope_factor", 'f', -INF, INF, LO_OPEN | HI_OPEN, 0,
      "a finite number (> 0 where YaRN or the MLA softmax factor uses it)" },
    { "beta_fast", 'f', -INF, INF, LO_OPEN | HI_OPEN, 0, "a finite number (> 0 for YaRN)" },
    { "beta_slow", 'f', -INF, INF, LO_OPEN | HI_OPEN, 0, "a finite number (> 0 for YaRN)" },
    { "mscale", 'f', -INF, INF, LO_OPEN | HI_OPEN, 0, "a finite number" },
    { "original_max_position_embeddings", 'i', 1, BIG, 0, 0, ">= 1" },
    { "max_position_embeddings", 'i', 1, BIG, 0, 0, ">= 1" },
};

const smoe_train_key *smoe_train_keys(int *n)
{
    *n = (int)(sizeof k_keys / sizeof k_keys[0]);
    return k_keys;
}

const smoe_train_key *rc_key_find(const char *name)
{
    for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++)
        if (strcmp(k_keys[i].name, name) == 0)
            return &k_keys[i];
    return NULL;
}

smoe_status rc_key_refuse(const smoe_config *c, const char *key, const char *got,
                          smoe_err *err)
{
    const smoe_train_key *k = rc_key_find(key);
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, key),
                       "'%s' must be %s for smoe train, got %s", key, k ? k->rule : "valid",
                       got);
}

/* v inside k's range (NaN never is). */
static int in_range(const smoe_train_key *k, double v)
{
    unsigned f = k->flags;
    if (f & F32) {
        float x = (float)v;
        if (isnan(x) || ((f & POS_F32) && v > 0 && !(x > 0.0f)))
            return 0;
        v = (double)x;
    }
    if (isnan(v))
        return 0;
    if ((f & WHOLE) && v != floor(v))
        return 0;
    if ((f & LO_OPEN) ? !(v > k->lo) : !(v >= k->lo))
        return 0;
    if ((f & HI_OPEN) ? !(v < k->hi) : !(v <= k->hi))
        return 0;
    return 1;
}

smoe_status rc_key_int(const smoe_config *c, const char *key, int64_t *out, smoe_err *err)
{
    const smoe_train_key *k = rc_key_find(key);
    SMOE_ASSERT(k && k->type == 'i');
    smoe_status s = smoe_config_int(c, key, out, err);
    if (s)
        return s;
    if (!in_range(k, (double)*out)) {
        char got[32];
        snprintf(got, sizeof got, "%lld", (long long)*out);
        return rc_key_refuse(c, key, got, err);
    }
    return SMOE_OK;
}

smoe_status rc_key_check_int(const smoe_config *c, const char *key, int64_t v, smoe_err *err)
{
    const smoe_train_key *k = rc_key_find(key);
    SMOE_ASSERT(k && k->type == 'i');
    if (!smoe_config_get(c, key)) {
        int64_t unused;
        return rc_key_int(c, key, &unused, err); /* the config's "missing key" */
    }
    if (!in_range(k, (double)v)) {
        char got[32];
        snprintf(got, sizeof got, "%lld", (long long)v);
        return rc_key_refuse(c, key, got, err);
    }
    return SMOE_OK;
}

smoe_status rc_key_float(const smoe_config *c, const char *key, double *out, smoe_err *err)
{
    const smoe_train_key *k = rc_key_find(key);
    SMOE_ASSERT(k && k->type == 'f');
    smoe_status s = smoe_config_float(c, key, out, err);
    if (s)
        return s;
    if (!in_range(k, *out)) {
        char got[40];
        snprintf(got, sizeof got, "%.17g", *out);
        return rc_key_refuse(c, key, got, err);
    }
    return SMOE_OK;
}

smoe_status smoe_train_check_keys(const smoe_config *c, smoe_err *err)
{
    for (size_t i = 0; i < sizeof k_keys / sizeof k_keys[0]; i++) {
        const smoe_train_key *k = &k_keys[i];
        const smoe_node *n = smoe_config_get(c, k->name);
        if (!n)
            continue; /* the readers say so when a key they need is absent */
        if ((k->flags & NULL_OK) && smoe_node_type(n) == SMOE_T_NULL)
            continue;
        int64_t iv;
        double fv;
        smoe_status s = k->type == 'i' ? rc_key_int(c, k->name, &iv, err)
                                       : rc_key_float(c, k->name, &fv, err);
        if (s)
            return s;
    }
    return SMOE_OK;
}
