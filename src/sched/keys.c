/* The MaxText keys smoe sim reads: the dtypes (dtypes.c), the remat policy,
 * ring of experts, the attention kernel, and the keys that change a step's
 * time or memory in ways the step model does not represent, each refused
 * in one line at its file:line:col unless it holds the value the model
 * assumes. docs/sim.md lists them. */
#include "sched_impl.h"

#include <stdio.h>
#include <string.h>

#define SIM_ONLY "smoe sim models"
#define SIM_WOULD "MaxText would run with"

static const smoe_key_rule k_sim_refused[] = {
    { "gradient_accumulation_steps", SMOE_KEY_INT, "1", "micro-batches per update" },
    { "optimizer_memory_host_offload", SMOE_KEY_BOOL, "false",
      "the optimizer state in host memory" },
    { "parameter_memory_host_offload", SMOE_KEY_BOOL, "false", "the parameters in host memory" },
};

/* The mesh axes the step model does not represent: each shards a layer's
 * compute (tensor: the matmuls' dimensions; context, sequence and the
 * autoregressive axes: the sequence, with a key/value exchange in
 * attention; pipeline: the layers into stages) or its optimizer (diloco),
 * where the model gives every device the whole layer's work over its own
 * batch. Refused at any size but 1, within a slice (ici_) and across (dcn_).
 * The context axis is modelled (smoe_sim_shape.context; sim_context), and
 * so is the tensor axis (cost.c tensor_parallel).
 * The plan (smoe plan) still shards and gathers weights over them. */
static const struct {
    const char *axis, *why;
} k_sim_axes[] = {
    { "tensor_sequence", "the matmuls split across devices and their all-reduces" },
    { "context_usp_ulysses", "each device's part of the sequence and attention's all-to-alls" },
    { "context_autoregressive", "each device's part of the sequence and attention's exchange" },
    { "autoregressive", "each device's part of the sequence and attention's exchange" },
    { "sequence", "each device's part of the sequence and attention's exchange" },
    { "pipeline", "the layers split into pipeline stages with their bubbles" },
    { "diloco", "DiLoCo's outer optimizer across replicas" },
};

/* Context parallelism as MaxText's default runs it (base.yml
 * context_parallel_strategy "all_gather": keys and values all-gathered
 * over the axis; context_parallel_load_balance true: each device's query
 * shard sees half of the sequence's keys on average). */
static smoe_status sim_context(const smoe_config *cfg, smoe_err *err)
{
    static const smoe_key_rule r[] = {
        { "context_parallel_strategy", SMOE_KEY_STR, "all_gather",
          "another exchange of the keys and values (ring, Ulysses all-to-alls)" },
        { "context_parallel_load_balance", SMOE_KEY_BOOL, "true",
          "the causal mask's work unbalanced across the context shards" },
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        smoe_status s = smoe_key_check(cfg, &r[i], SIM_ONLY, SIM_WOULD, err);
        if (s)
            return s;
    }
    return SMOE_OK;
}

static smoe_status sim_axes(const smoe_config *cfg, smoe_err *err)
{
    static const char *const prefix[2] = { "ici", "dcn" };
    for (size_t i = 0; i < sizeof k_sim_axes / sizeof k_sim_axes[0]; i++)
        for (int p = 0; p < 2; p++) {
            char key[64];
            snprintf(key, sizeof key, "%s_%s_parallelism", prefix[p], k_sim_axes[i].axis);
            smoe_key_rule r = { key, SMOE_KEY_INT, "1", k_sim_axes[i].why };
            smoe_status s = smoe_key_check(cfg, &r, SIM_ONLY, SIM_WOULD, err);
            if (s)
                return s;
        }
    return SMOE_OK;
}

/* remat_policy "custom" (MaxText decoders.py get_remat_policy:
 * save_and_offload_only_these_names over pyconfig's tensors_on_device and
 * tensors_to_offload, the per-tensor keys set to "device" and "offload";
 * base.yml's names at e591f30, in smoe_rtensor's order). The layer input is
 * the scan's carry, kept whatever its key says unless offloaded. A tensor
 * the step model has no op for is refused at its key unless "remat". */
static const char *const k_rt_key[SMOE_RT_N] = {
    "decoder_layer_input", "query_proj", "key_proj", "value_proj", "kv_proj", "qkv_proj",
    "context", "attention_out", "out_proj", "mlpwi", "mlpwi_0", "mlpwi_1", "mlpwo",
    "moe_mlpwi_0", "moe_mlpwi_1", "moe_mlpwo", "query_wa_proj", "kv_wa_proj", "mla_q", "mla_kv",
};

const char *smoe_rtensor_key(smoe_rtensor t) { return t < SMOE_RT_N ? k_rt_key[t] : "?"; }

#define RTB(t) (1u << SMOE_RT_##t)

unsigned sim_rt_canon(const smoe_dims *d, unsigned names)
{
    const unsigned qkv = RTB(QUERY) | RTB(KEY) | RTB(VALUE), wi = RTB(MLPWI0) | RTB(MLPWI1);
    unsigned r = names & ~(qkv | wi | RTB(QKV) | RTB(KV) | RTB(ATTN_OUT) | RTB(MLPWI));
    if (!d->mla && d->fused_qkv)
        r |= names & RTB(QKV) ? qkv : 0;
    else
        r |= names & qkv;
    r |= names & RTB(KV) ? RTB(KEY) | RTB(VALUE) : 0;
    r |= names & RTB(ATTN_OUT) ? RTB(CONTEXT) : 0;
    /* moe.py names the routed wi_0's output "mlpwi_0" and "moe_mlpwi_0",
     * wo's "mlpwo" and "moe_mlpwo" (wi_1's only "moe_mlpwi_1" on the sparse
     * path): the dense MLP's names select the routed tensors too */
    r |= names & RTB(MLPWI0) ? RTB(MOE_WI0) : 0;
    r |= names & RTB(MLPWO) ? RTB(MOE_WO) : 0;
    if (d->fused_mlp)
        r |= names & RTB(MLPWI) ? wi : 0;
    else if (d->n_activations == 1) /* one up projection, named mlpwi */
        r |= names & RTB(MLPWI) ? RTB(MLPWI0) : 0;
    else
        r |= names & wi;
    return r;
}

/* A remat policy that offloads to the host on a profile without the host
 * link's rate: refused at `key`, "KEY: WHAT: ...". */
static smoe_status no_host_link(const smoe_config *cfg, const smoe_hw *hw, const char *key,
                                const char *what, smoe_err *err)
{
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, key),
                       "%s: %s: the hardware profile '%s' has no host_bandwidth to time the "
                       "host transfers by", key, what, hw->name);
}

static smoe_status sim_remat_custom(const smoe_config *cfg, const smoe_hw *hw,
                                    smoe_sim_shape *sh, smoe_err *err)
{
    static const smoe_key_rule unmodelled[] = {
        { "indexer_cutoff_threshold", SMOE_KEY_STR, "remat", "the sparse indexer's threshold kept" },
        { "engram", SMOE_KEY_STR, "remat", "the engram memory's output kept" },
    };
    smoe_status s;
    for (size_t i = 0; i < sizeof unmodelled / sizeof unmodelled[0]; i++)
        if ((s = smoe_key_check(cfg, &unmodelled[i], "smoe sim models custom remat with only",
                                SIM_WOULD, err)))
            return s;
    sh->remat_dev = sh->remat_host = 0;
    for (int t = 0; t < SMOE_RT_N; t++) {
        /* remat, device or offload (MaxTextConfig's enum); base.yml:
         * remat (the input: device) */
        const char *v;
        if ((s = smoe_config_str_or(cfg, k_rt_key[t], "remat", &v, err)))
            return s;
        int dev = strcmp(v, "device") == 0, host = strcmp(v, "offload") == 0;
        if (host && !(hw->host_bandwidth > 0))
            return no_host_link(cfg, hw, k_rt_key[t], "offload", err);
        if (t == SMOE_RT_INPUT && !host)
            dev = 1; /* the scan's carry */
        sh->remat_dev |= (unsigned)dev << t;
        sh->remat_host |= (unsigned)host << t;
    }
    return SMOE_OK;
}

/* MaxText's named remat policies that save (save_only_these_names) or
 * offload (save_and_offload_only_these_names) a fixed list of tensors:
 * layers/decoders.py get_remat_policy and minimal_policy, and
 * utils/maxtext_utils.py get_save_and_offload_names, at e591f30. Each is
 * the custom policy with those names (the layer input, the scan's carry,
 * kept as ever). "minimal" keeps its own model (save-dot-products);
 * "minimal_with_quantization" and its context twin save the quantization
 * residuals, which the step model has no op for: refused. */
#define RT_QKV_ALL (RTB(QUERY) | RTB(VALUE) | RTB(KEY) | RTB(KV) | RTB(QKV))
#define RT_MLP_ALL (RTB(MLPWI0) | RTB(MLPWI1) | RTB(MLPWI) | RTB(MLPWO))
static const struct {
    const char *name;
    unsigned dev, host;
} k_named_remat[] = {
    { "minimal_with_context", RT_QKV_ALL | RTB(OUT) | RT_MLP_ALL | RTB(CONTEXT), 0 },
    { "minimal_flash", RT_QKV_ALL | RTB(OUT) | RT_MLP_ALL | RTB(CONTEXT), 0 },
    { "save_dot_with_context_except_mlp", RT_QKV_ALL | RTB(CONTEXT) | RTB(OUT), 0 },
    { "save_dot_except_mlpwi", RT_QKV_ALL | RTB(OUT) | RTB(MLPWO), 0 },
    { "save_dot_except_mlp", RT_QKV_ALL | RTB(OUT), 0 },
    { "save_qkv_proj", RT_QKV_ALL, 0 },
    { "qkv_proj_offloaded", 0, RTB(QUERY) | RTB(VALUE) | RTB(KEY) | RTB(KV) },
    { "minimal_offloaded", 0, RT_QKV_ALL | RTB(OUT) | RT_MLP_ALL },
    { "save_out_proj", RTB(OUT), 0 },
};
#define REMAT_NAMED "|minimal_with_context|minimal_flash|save_dot_with_context_except_mlp" \
                    "|save_dot_except_mlpwi|save_dot_except_mlp|save_qkv_proj|qkv_proj_offloaded" \
                    "|minimal_offloaded|save_out_proj"

/* 1 when v is a named policy of k_named_remat (sh's masks set), else 0. */
static int sim_remat_named(const char *v, smoe_sim_shape *sh)
{
    for (size_t i = 0; i < sizeof k_named_remat / sizeof k_named_remat[0]; i++)
        if (strcmp(v, k_named_remat[i].name) == 0) {
            sh->remat = SMOE_REMAT_CUSTOM;
            sh->remat_dev = k_named_remat[i].dev | RTB(INPUT);
            sh->remat_host = k_named_remat[i].host;
            return 1;
        }
    return 0;
}

/* quantization (MaxText quantizations.py): "fp8_full" through Qwix
 * (use_qwix_quantization; get_fp8_full_qwix_rule_w_sparsity: module_path
 * "decoder/.*layers.*", ops dot_general, gmm and ragged_dot, e4m3 forward
 * and e5m2 backward operands) quantizes every matmul of the decoder layers
 * at use; the weights stay in weight_dtype, so the gathers do not change.
 * The attention kernel (a Pallas kernel) and the head (decoder/logits_dense)
 * are not quantized. Anything else is refused. */
static smoe_status sim_quant(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                             smoe_err *err)
{
    static const smoe_key_rule r = { "quantization", SMOE_KEY_STR, "|fp8_full",
                                     "quantized matmuls, at other rates and sizes" };
    static const smoe_key_rule qwix = { "use_qwix_quantization", SMOE_KEY_BOOL, "true",
                                        "fp8_full through AQT, which smoe sim does not time" };
    const char *v;
    smoe_status s = smoe_key_check(cfg, &r, SIM_ONLY, SIM_WOULD, err);
    if (s || (s = smoe_config_str_or(cfg, r.key, "", &v, err)))
        return s;
    sh->fp8 = 0;
    if (!*v)
        return SMOE_OK;
    if ((s = smoe_key_check(cfg, &qwix, "smoe sim models fp8_full with", SIM_WOULD, err)))
        return s;
    if (!(hw->fp8_peak_flops > 0))
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, r.key),
                           "quantization: fp8_full: the hardware profile '%s' has no "
                           "fp8_peak_flops (no fp8 matmul rate)", hw->name);
    sh->fp8 = 1;
    return SMOE_OK;
}

/* remat_policy (MaxText layers/decoders.py get_remat_policy): "full" remats
 * the layer with no saved names, "minimal" saves every projection's output
 * but the attention context (the dot products); "custom" and the named
 * policies of k_named_remat save or offload their tensors. MaxText's pyconfig reads the text
 * "none" as None, which get_remat_policy does not take (its chain of names
 * ends in an assertion that the policy is "full"): a null policy is
 * refused, and --remat none asks for no remat. */
static smoe_status sim_remat(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                             smoe_err *err)
{
    static const smoe_key_rule r = { "remat_policy", SMOE_KEY_STR,
                                     "full|minimal|custom" REMAT_NAMED,
                                     "another policy's saved tensors; --remat picks a modelled one" };
    const smoe_node *n = smoe_config_get(cfg, r.key);
    const char *v = "full";
    smoe_status s;
    if (n && smoe_node_type(n) == SMOE_T_NULL)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, r.key),
                           "remat_policy: None (MaxText's pyconfig reads 'none' as None, which its "
                           "get_remat_policy does not take); give --remat full, none or "
                           "save-dot-products");
    if ((s = smoe_key_check(cfg, &r, SIM_ONLY, SIM_WOULD, err)) ||
        (n && (s = smoe_config_str(cfg, r.key, &v, err))))
        return s;
    if (strcmp(v, "custom") == 0) {
        sh->remat = SMOE_REMAT_CUSTOM;
        return sim_remat_custom(cfg, hw, sh, err);
    }
    if (sim_remat_named(v, sh)) {
        if (sh->remat_host && !(hw->host_bandwidth > 0)) {
            char what[96];
            snprintf(what, sizeof what, "%s offloads to the host", v);
            return no_host_link(cfg, hw, r.key, what, err);
        }
        return SMOE_OK;
    }
    sh->remat = strcmp(v, "minimal") == 0 ? SMOE_REMAT_DOTS : SMOE_REMAT_FULL;
    return SMOE_OK;
}

/* attention (MaxText layers/attention_op.py): "flash" or "autoselected" at
 * 128 tokens or more run a flash kernel in training, which keeps no
 * scores; the accelerator model assumes it. "dot_product" (and
 * autoselected below 128 tokens) materialises the scores. A cpu profile
 * times smoe's own attention whatever the key. */
static smoe_status sim_attention(const smoe_config *cfg, const smoe_hw *hw, int64_t seq,
                                 smoe_err *err)
{
    static const smoe_key_rule r = { "attention", SMOE_KEY_STR,
                                     "autoselected|flash|cudnn_flash_te|cudnn_flash_jax",
                                     "an attention kernel that keeps its scores" };
    if (hw->kind == SMOE_HW_CPU)
        return SMOE_OK;
    smoe_status s = smoe_key_check(cfg, &r, SIM_ONLY, SIM_WOULD, err);
    const char *v;
    if (s || (s = smoe_config_str_or(cfg, r.key, "autoselected", &v, err)))
        return s;
    if (strcmp(v, "autoselected") == 0 && seq < 128)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, r.key),
                           "attention: autoselected picks dot-product attention below 128 tokens "
                           "(sequence %lld); smoe sim models only a flash kernel on %s",
                           (long long)seq, hw->name);
    return SMOE_OK;
}

/* The routed experts' path (MaxText moe.py RoutedMoE): sparse_matmul
 * (default true) runs grouped matmuls over the routed rows, dropless
 * (capacity_factor <= 0); sparse_matmul=false with capacity_factor > 0 runs
 * dense_matmul's capacity branch: generate_masks' dispatch and combine
 * masks over each sequence's capacity slots and four einsums. Refused: the
 * sparse path with a capacity (its token dropping), the dense path without
 * one (every expert for every token), and the dense path with ring of
 * experts or fp8 (the sparse path's exchange; the masks' einsums under
 * Qwix's rules). */
static smoe_status sim_moe_path(const smoe_config *cfg, smoe_sim_shape *sh, smoe_err *err)
{
    int sparse;
    double cf;
    smoe_status s = smoe_config_bool_or(cfg, "sparse_matmul", 1, &sparse, err);
    if (s || (s = smoe_config_float_or(cfg, "capacity_factor", -1, &cf, err)))
        return s;
    sh->moe_capacity = 0;
    if (sparse && cf > 0)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "capacity_factor"),
                           "capacity_factor: %g: %s only the dropless sparse path "
                           "(capacity_factor <= 0); %s token dropping at a capacity",
                           cf, SIM_ONLY, SIM_WOULD);
    if (sparse)
        return SMOE_OK;
    const char *why = !(cf > 0) ? "without a capacity_factor > 0 (every expert for every token)"
                      : sh->ring_of_experts ? "with use_ring_of_experts"
                      : sh->fp8             ? "with quantization (the masks' einsums quantized)"
                                            : NULL;
    if (why)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "sparse_matmul"),
                           "sparse_matmul: false: %s MaxText's dense expert path only with "
                           "capacity_factor > 0; not %s", SIM_ONLY, why);
    sh->moe_capacity = cf;
    return SMOE_OK;
}

const char *smoe_sim_remat_name(smoe_remat r)
{
    return r == SMOE_REMAT_NONE     ? "none"
           : r == SMOE_REMAT_DOTS   ? "save-dot-products"
           : r == SMOE_REMAT_CUSTOM ? "custom"
                                    : "full";
}

smoe_status smoe_sim_keys(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                          smoe_err *err)
{
    smoe_status s;
    for (size_t i = 0; i < sizeof k_sim_refused / sizeof k_sim_refused[0]; i++)
        if ((s = smoe_key_check(cfg, &k_sim_refused[i], SIM_ONLY, SIM_WOULD, err)))
            return s;
    if ((s = sim_axes(cfg, err)) || (s = sim_context(cfg, err)))
        return s;
    if ((s = sim_quant(cfg, hw, sh, err)))
        return s;
    if (!sh->remat_set && (s = sim_remat(cfg, hw, sh, err)))
        return s;
    if ((s = sim_attention(cfg, hw, sh->seq, err)))
        return s;
    int ring;
    if ((s = smoe_config_bool_or(cfg, "use_ring_of_experts", 0, &ring, err)))
        return s;
    sh->ring_of_experts = ring;
    if ((s = sim_moe_path(cfg, sh, err)) || (s = sim_gmm_tiles(cfg, hw, sh, err)) ||
        (s = sim_gmm_qag(cfg, sh, err)) ||
        (s = sim_attn_bwd(cfg, hw, sh, err)))
        return s;
    return smoe_sim_dtypes(cfg, hw, sh, err);
}
