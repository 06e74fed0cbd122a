/* The sizes of the training's dtypes from MaxText's keys (configs/types.py:
 * DType is bfloat16 | float32 | float16; weight_dtype and grad_dtype default
 * to float32, dtype to bfloat16, mu_dtype "" inherits weight_dtype;
 * optax.adamw keeps nu in the parameters' dtype). */
#include "smoe/sched.h"

#include <string.h>

static smoe_status dtype_bytes(const smoe_config *cfg, const char *key, const char *def,
                               int *out, smoe_err *err)
{
    const char *v = def;
    const smoe_node *n = smoe_config_get(cfg, key);
    if (n) {
        smoe_status s = smoe_config_str(cfg, key, &v, err);
        if (s)
            return s;
    }
    if (!v[0] && strcmp(key, "mu_dtype") == 0) {
        *out = 0; /* inherits weight_dtype */
        return SMOE_OK;
    }
    if (strcmp(v, "float32") == 0)
        *out = 4;
    else if (strcmp(v, "bfloat16") == 0 || strcmp(v, "float16") == 0)
        *out = 2;
    else
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, key),
                           "%s = '%s' must be bfloat16, float32 or float16", key, v);
    return SMOE_OK;
}

smoe_status smoe_sim_dtypes(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                            smoe_err *err)
{
    int w, c, g, mu;
    smoe_status s;
    if ((s = dtype_bytes(cfg, "weight_dtype", "float32", &w, err)) ||
        (s = dtype_bytes(cfg, "dtype", "bfloat16", &c, err)) ||
        (s = dtype_bytes(cfg, "grad_dtype", "float32", &g, err)) ||
        (s = dtype_bytes(cfg, "mu_dtype", "", &mu, err)))
        return s;
    const char *opt = "adamw";
    if (smoe_config_get(cfg, "opt_type") && (s = smoe_config_str(cfg, "opt_type", &opt, err)))
        return s;
    if (strcmp(opt, "adamw") && strcmp(opt, "adam_pax") && strcmp(opt, "sgd"))
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "opt_type"),
                           "opt_type = '%s' is not modelled by smoe sim (adamw, adam_pax, sgd)",
                           opt);
    if (!sh->dtype_bytes)
        sh->dtype_bytes = w;
    if (!sh->compute_bytes)
        sh->compute_bytes = hw->cpu.compute_bytes > 0 ? (int)hw->cpu.compute_bytes : c;
    /* MaxText casts the gradients to grad_dtype only where they are float32
     * (train.py train_step: x.astype(config.grad_dtype) if x.dtype ==
     * jnp.float32): those of bf16 or fp16 weights keep the weights' dtype */
    if (!sh->grad_bytes)
        sh->grad_bytes = sh->dtype_bytes == 4 ? g : sh->dtype_bytes;
    sh->no_moments = strcmp(opt, "sgd") == 0;
    if (!sh->mu_bytes)
        sh->mu_bytes = sh->no_moments ? 0 : mu ? mu : sh->dtype_bytes;
    if (!sh->nu_bytes)
        sh->nu_bytes = sh->no_moments ? 0 : sh->dtype_bytes;
    return SMOE_OK;
}
