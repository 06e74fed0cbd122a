/* The MaxText keys that change the numbers of a training run and that smoe
 * train does not implement: each must hold the value(s) smoe implements
 * (MaxText's defaults), or the run is refused with one line naming the key,
 * where it is set, and what smoe accepts. docs/train.md's table of training
 * keys lists these next to the implemented ones and those with no effect
 * here. A key absent from the configuration has MaxText's default. */
#include "train_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { R_BOOL, R_INT, R_FLOAT, R_STR, R_EMPTY } rkind;

typedef struct refusal {
    const char *key;
    rkind kind;
    const char *want; /* R_BOOL "false"/"true"; R_INT/R_FLOAT the number;
                         R_STR values separated by '|' ("" allowed) */
    const char *why;  /* what MaxText would do instead */
} refusal;

static const refusal k_refused[] = {
    { "opt_type", R_STR, "adamw", "another optimizer" },
    { "dtype", R_STR, "float32", "activations in another precision" },
    { "weight_dtype", R_STR, "float32", "weights in another precision" },
    { "grad_dtype", R_STR, "float32", "gradients in another precision" },
    { "mu_dtype", R_STR, "|float32", "the first moment in another precision" },
    { "quantization", R_STR, "", "quantized matmuls" },
    { "training_objective", R_STR, "causal_lm", "another objective" },
    { "gradient_accumulation_steps", R_INT, "1", "micro-batches per update" },
    { "skip_step_on_spikes", R_BOOL, "false", "skipped updates on loss spikes" },
    { "trainable_parameters_mask", R_EMPTY, "[]", "frozen parameters" },
    { "mtp_num_layers", R_INT, "0", "multi-token prediction layers and loss" },
    { "use_indexer", R_BOOL, "false", "the sparse-attention indexer and its loss" },
    { "use_qk_clip", R_BOOL, "false", "QK-Clip of the attention weights" },
    { "use_qk_norm", R_BOOL, "false", "normalised queries and keys" },
    { "n_routing_groups", R_INT, "-1", "group-limited routing" },
    { "use_random_routing", R_BOOL, "false", "random routing" },
    { "first_num_hash_layers", R_INT, "0", "hash-routed layers" },
    { "use_mrope", R_BOOL, "false", "multimodal RoPE" },
    { "use_multimodal", R_BOOL, "false", "image inputs" },
    { "use_dpo", R_BOOL, "false", "the DPO loss" },
    { "use_sft", R_BOOL, "false", "prompt-masked targets" },
    { "use_untrainable_positional_embedding", R_BOOL, "false", "a positional embedding" },
    { "trainable_position_size", R_INT, "-1", "a trainable positional embedding" },
    { "final_logits_soft_cap", R_FLOAT, "0", "soft-capped logits" },
    { "attn_logits_soft_cap", R_FLOAT, "0", "soft-capped attention logits" },
    { "attention_sink", R_BOOL, "false", "attention sinks" },
    { "moba", R_BOOL, "false", "mixture-of-block attention" },
    { "mhc_expansion_rate", R_INT, "1", "hyper-connections" },
    { "engram_layers", R_EMPTY, "[]", "engram layers" },
    { "mlp_activations_limit", R_FLOAT, "-1", "clipped SwiGLU activations" },
};

static smoe_status refuse(const smoe_config *c, const refusal *r, smoe_err *err)
{
    char want[96];
    const char *w = r->want;
    if (r->kind == R_STR) { /* "a|b" -> "a" or "b", with "" spelled out */
        size_t o = 0;
        for (const char *p = w;; p++) {
            if (*p == '|' || !*p) {
                if (p == w || p[-1] == '|')
                    o += (size_t)snprintf(want + o, sizeof want - o, "\"\"");
                if (!*p)
                    break;
                o += (size_t)snprintf(want + o, sizeof want - o, " or ");
            } else if (o + 1 < sizeof want) {
                want[o++] = *p;
                want[o] = '\0';
            }
        }
    } else {
        snprintf(want, sizeof want, "%s", w);
    }
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, r->key),
                       "%s: smoe train implements only %s: %s (MaxText would train with %s)",
                       r->key, r->key, want, r->why);
}

static int str_in(const char *v, const char *list)
{
    size_t n = strlen(v);
    for (const char *p = list;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && strncmp(p, v, n) == 0)
            return 1;
        if (!e)
            return 0;
        p = e + 1;
    }
}

static smoe_status check_one(const smoe_config *c, const refusal *r, smoe_err *err)
{
    const smoe_node *n = smoe_config_get(c, r->key);
    smoe_status s;
    if (!n)
        return SMOE_OK;
    switch (r->kind) {
    case R_BOOL: {
        int v;
        if ((s = smoe_config_bool(c, r->key, &v, err)))
            return s;
        return v == (strcmp(r->want, "true") == 0) ? SMOE_OK : refuse(c, r, err);
    }
    case R_INT: {
        int64_t v;
        if ((s = smoe_config_int(c, r->key, &v, err)))
            return s;
        return v == (int64_t)strtoll(r->want, NULL, 10) ? SMOE_OK : refuse(c, r, err);
    }
    case R_FLOAT: {
        double v;
        if ((s = smoe_config_float(c, r->key, &v, err)))
            return s;
        double want = strtod(r->want, NULL);
        /* mlp_activations_limit acts only when > 0 (moe.py apply_ffn_activation) */
        if (strcmp(r->key, "mlp_activations_limit") == 0)
            return v <= 0 ? SMOE_OK : refuse(c, r, err);
        return v == want ? SMOE_OK : refuse(c, r, err);
    }
    case R_STR: {
        const char *v;
        if ((s = smoe_config_str(c, r->key, &v, err)))
            return s;
        return str_in(v, r->want) ? SMOE_OK : refuse(c, r, err);
    }
    case R_EMPTY:
        return smoe_node_type(n) == SMOE_T_NULL || (n->kind == SMOE_NODE_SEQ && n->n == 0)
                   ? SMOE_OK
                   : refuse(c, r, err);
    }
    return SMOE_OK;
}

smoe_status tr_refuse_keys(const smoe_config *c, smoe_err *err)
{
    smoe_status s;
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++)
        if ((s = check_one(c, &k_refused[i], err)))
            return s;
    /* N:M sparsity needs both weight_sparsity_n and _m (train.py loss_fn) */
    int64_t nm[2] = { 0, 0 };
    static const char *const sp[2] = { "weight_sparsity_n", "weight_sparsity_m" };
    for (int i = 0; i < 2; i++) {
        const smoe_node *n = smoe_config_get(c, sp[i]);
        if (n && smoe_node_type(n) != SMOE_T_NULL && (s = smoe_config_int(c, sp[i], &nm[i], err)))
            return s;
    }
    if (nm[0] && nm[1]) {
        static const refusal w = { "weight_sparsity_n", R_STR, "null", "N:M weight sparsity" };
        return refuse(c, &w, err);
    }
    /* dropout acts only with enable_dropout (train.py loss_fn) */
    int on = 1;
    double rate = 0;
    if (smoe_config_get(c, "enable_dropout") &&
        (s = smoe_config_bool(c, "enable_dropout", &on, err)))
        return s;
    if (smoe_config_get(c, "dropout_rate") &&
        (s = smoe_config_float(c, "dropout_rate", &rate, err)))
        return s;
    if (on && rate != 0) {
        static const refusal d = { "dropout_rate", R_FLOAT, "0", "dropout" };
        return refuse(c, &d, err);
    }
    return SMOE_OK;
}
