/* The MaxText keys smoe train reads and does not implement. Those that
 * change the numbers of a training run must hold the value(s) smoe
 * implements (MaxText's defaults), or the run is refused with one line
 * naming the key, where it is set, and what smoe accepts. Those that do not
 * (a kernel, remat, memory or placement choice) or that smoe train takes
 * from elsewhere (the data, the run's length) are listed with the reason
 * whenever they ask for something (smoe_train_unapplied_keys: the banner
 * and the JSON of smoe train). docs/train.md's table of training keys
 * lists both next to the implemented ones. A key absent from the configuration
 * has MaxText's default. */
#include "recipe_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the tables' short names for config's key rules (smoe_key_rule) */
#define R_BOOL SMOE_KEY_BOOL
#define R_INT SMOE_KEY_INT
#define R_FLOAT SMOE_KEY_FLOAT
#define R_STR SMOE_KEY_STR
#define R_EMPTY SMOE_KEY_EMPTY
#define R_NONPOS SMOE_KEY_NONPOS
typedef smoe_key_rule key_rule;
#define TRAIN_ONLY "smoe train implements"
#define TRAIN_WOULD "MaxText would train with"

static const key_rule k_refused[] = {
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
    /* moe.py apply_ffn_activation clips only when > 0 */
    { "mlp_activations_limit", R_NONPOS, "", "clipped SwiGLU activations" },
    /* moe.py get_ragged_buffer_size: > 0 sizes the buffer to drop tokens */
    { "ragged_buffer_factor", R_NONPOS, "", "a ragged buffer that drops the tokens past it" },
    { "experimental_sa_quant_q_fp8", R_BOOL, "false", "float8 queries in the attention kernel" },
    { "experimental_sa_quant_k_fp8", R_BOOL, "false", "float8 keys in the attention kernel" },
    /* train.py: the state it starts from, the batches, the optimizer */
    { "load_parameters_path", R_STR, "", "another run's parameters as the start" },
    { "load_full_state_path", R_STR, "", "another run's training state as the start" },
    { "enable_rampup_batch_size", R_BOOL, "false",
      "a global batch ramped up over the first samples" },
    { "enable_diloco", R_BOOL, "false", "DiLoCo's inner and outer optimizers" },
};

/* ---- the keys read and not applied ----
 * Each asks for something smoe train does not do that leaves the numbers
 * of a step as they are (a kernel, memory or placement choice), or that
 * smoe train takes from elsewhere (the data, the run's length, the
 * initialisation, checkpoints). A key set to a value in `want` (MaxText's
 * default, or what smoe train does anyway) asks nothing and is not listed;
 * any other value is listed with `why`. Read at commit
 * e591f30: configs/types.py and base.yml for the defaults; the files named
 * in the reasons for what the keys do. */
#define W_REMAT                                                                             \
    "which activations MaxText recomputes in the backward or moves to the host (decoders.py " \
    "get_remat_policy); smoe train keeps every activation of the step and recomputes none: "  \
    "memory and time, not the numbers"
#define W_KERNEL                                                                            \
    "a choice among MaxText's kernels, sorts or collectives for the same computation; smoe "  \
    "train runs its own (BLAS matmuls, MPI all-gathers and all-to-alls): the same numbers"
#define W_DATA                                                                              \
    "smoe train's tokens are the bytes of --data, windows of max_target_length drawn from "   \
    "--seed: no dataset, tokenizer, packing or shuffling of MaxText's"
#define W_INIT                                                                              \
    "smoe train draws its own initial weights from --seed (normal, with its own scales), "    \
    "not with MaxText's initializers"
#define W_SLICES                                                                            \
    "multi-slice (DCN) parallelism, which smoe train applies with --slices N (one slice: "   \
    "MaxText ignores the dcn_* sizes too, create_device_mesh)"
#define W_OFFLOAD                                                                           \
    "MaxText would keep that state in host memory; smoe train keeps it in its ranks' "        \
    "memory: placement, not the numbers"
#define W_CKPT                                                                              \
    "smoe train checkpoints with --checkpoint-dir, --checkpoint-every and --checkpoint-keep"

static const key_rule k_unapplied[] = {
    /* remat (decoders.py, maxtext_utils.get_save_and_offload_names) */
    { "remat_policy", R_STR, "full", W_REMAT },
    { "decoder_layer_input", R_STR, "device", W_REMAT },
    { "context", R_STR, "remat", W_REMAT },
    { "mlpwi", R_STR, "remat", W_REMAT },
    { "mlpwi_0", R_STR, "remat", W_REMAT },
    { "mlpwi_1", R_STR, "remat", W_REMAT },
    { "mlpwo", R_STR, "remat", W_REMAT },
    { "moe_mlpwi_0", R_STR, "remat", W_REMAT },
    { "moe_mlpwi_1", R_STR, "remat", W_REMAT },
    { "moe_mlpwo", R_STR, "remat", W_REMAT },
    { "query_proj", R_STR, "remat", W_REMAT },
    { "key_proj", R_STR, "remat", W_REMAT },
    { "value_proj", R_STR, "remat", W_REMAT },
    { "kv_proj", R_STR, "remat", W_REMAT },
    { "qkv_proj", R_STR, "remat", W_REMAT },
    { "out_proj", R_STR, "remat", W_REMAT },
    { "query_wa_proj", R_STR, "remat", W_REMAT },
    { "kv_wa_proj", R_STR, "remat", W_REMAT },
    { "mla_q", R_STR, "remat", W_REMAT },
    { "mla_kv", R_STR, "remat", W_REMAT },
    { "attention_out", R_STR, "remat", W_REMAT },
    /* the MoE layer (moe.py) */
    { "sparse_matmul", R_BOOL, "true",
      "false selects MaxText's dense path (einsums over dispatch masks); smoe train always runs "
      "the sparse one: tokens sorted by expert, one matmul per expert" },
    { "megablox", R_BOOL, "true",
      "false makes MaxText's grouped matmul jax.lax.ragged_dot instead of the Megablox kernel; "
      "smoe train runs one BLAS matmul per expert: the same products" },
    { "use_custom_sort_vjp", R_BOOL, "true", W_KERNEL },
    { "use_ragged_sort", R_BOOL, "false", W_KERNEL },
    { "use_gather_mosaic_kernel", R_BOOL, "false", W_KERNEL },
    { "ragged_gather_fallback", R_BOOL, "false", W_KERNEL },
    { "ragged_gather_reduce_fallback", R_BOOL, "false", W_KERNEL },
    { "merge_gating_gmm", R_BOOL, "false", W_KERNEL },
    { "use_tokamax_gmm", R_BOOL, "false", W_KERNEL },
    { "use_gmm_v2", R_BOOL, "false", W_KERNEL },
    { "num_moe_token_chunks", R_INT, "1", W_KERNEL },
    { "moe_chunk_barrier", R_BOOL, "false", W_KERNEL },
    { "num_moe_emb_chunks", R_INT, "0", W_KERNEL },
    { "moe_dispatch_no_expert_sharding", R_BOOL, "false", W_KERNEL },
    { "moe_fsdp_use_two_stage_all_gather", R_BOOL, "false", W_KERNEL },
    { "dense_fsdp_use_two_stage_all_gather", R_BOOL, "false", W_KERNEL },
    /* attention, embedding, loss, precision */
    { "attention", R_STR, "autoselected",
      "the attention kernel MaxText would run (dot_product, flash, cudnn_flash_te, ...); smoe "
      "train computes the causal softmax attention with its own kernels: the same numbers" },
    { "use_tokamax_splash", R_BOOL, "false", W_KERNEL },
    { "use_jax_splash", R_BOOL, "false", W_KERNEL },
    { "use_splash_scheduler", R_BOOL, "false", W_KERNEL },
    { "use_sliced_mla_proj", R_BOOL, "false", W_KERNEL },
    { "mla_qk_head_chunk_size", R_INT, "0",
      "MaxText would compute MLA's q.k in chunks of heads to save memory; smoe train computes "
      "it in one pass: the same numbers" },
    { "use_iota_embed", R_BOOL, "false",
      "MaxText would look the tokens up as a one-hot matmul (embeddings.py) instead of a "
      "gather; smoe train gathers the embedding rows: the same numbers" },
    { "num_vocab_tiling", R_INT, "1",
      "MaxText would compute the logits and cross-entropy in tiles to save memory; smoe train "
      "computes them its own way: the same loss" },
    { "vocab_tiling_ag_once", R_BOOL, "false", W_KERNEL },
    { "matmul_precision", R_STR, "default|bfloat16|highest|float32",
      "XLA's matmul precision; smoe train multiplies float32 by float32 with float32 sums "
      "(XLA's highest) whatever this asks" },
    { "rope_pairwise", R_BOOL, "false",
      "MaxText would compute the interleaved rotation on real pairs instead of complex numbers "
      "(embeddings.py): the same rotation, which smoe train applies with rope_interleave" },
    /* memory and placement */
    { "optimizer_memory_host_offload", R_BOOL, "false", W_OFFLOAD },
    { "parameter_memory_host_offload", R_BOOL, "false", W_OFFLOAD },
    { "shard_optimizer_over_data", R_BOOL, "false",
      "ZeRO-1: MaxText would shard the optimizer state over the data axis; smoe train shards "
      "each weight's AdamW moments as the weight itself: placement, not the numbers" },
    { "hardware", R_STR, "tpu|cpu", "smoe train runs on the CPU cores of its MPI ranks" },
    { "num_slices", R_INT, "-1|1", W_SLICES },
    { "dcn_diloco_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_data_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_fsdp_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_fsdp_transpose_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_sequence_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_context_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_context_usp_ulysses_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_context_autoregressive_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_tensor_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_tensor_sequence_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_pipeline_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_expert_parallelism", R_INT, "1|-1", W_SLICES },
    { "dcn_autoregressive_parallelism", R_INT, "1|-1", W_SLICES },
    /* the run: its length, start, data, checkpoints, evaluation */
    { "steps", R_INT, "150001",
      "the run's length is --steps (learning_rate_schedule_steps: -1 follows it)" },
    { "init_weights_seed", R_INT, "0", W_INIT },
    { "dense_init_scale", R_FLOAT, "1", W_INIT },
    { "dataset_type", R_STR, "tfds", W_DATA },
    { "dataset_path", R_STR, "", W_DATA },
    { "dataset_name", R_STR, "c4/en:3.1.0", W_DATA },
    { "train_split", R_STR, "train", W_DATA },
    { "hf_path", R_STR, "", W_DATA },
    { "hf_name", R_STR, "", W_DATA },
    { "hf_data_dir", R_STR, "", W_DATA },
    { "hf_train_files", R_STR, "", W_DATA },
    { "grain_train_files", R_STR, "", W_DATA },
    { "grain_train_mixture_config_path", R_STR, "", W_DATA },
    { "tokenizer_path", R_STR, "", W_DATA },
    { "tokenizer_type", R_STR, "sentencepiece", W_DATA },
    { "tokenize_train_data", R_BOOL, "true", W_DATA },
    { "add_bos", R_BOOL, "true", W_DATA },
    { "add_eos", R_BOOL, "true", W_DATA },
    { "packing", R_BOOL, "true", W_DATA },
    { "enable_data_shuffling", R_BOOL, "true", W_DATA },
    { "data_shuffle_seed", R_INT, "0", W_DATA },
    { "num_epoch", R_INT, "1", W_DATA },
    { "reuse_example_batch", R_NONPOS, "", W_DATA },
    { "enable_checkpointing", R_BOOL, "true", W_CKPT },
    { "checkpoint_period", R_INT, "10000", W_CKPT },
    { "async_checkpointing", R_BOOL, "true", W_CKPT },
    { "max_num_checkpoints_to_keep", R_STR, "None", W_CKPT },
    { "eval_interval", R_NONPOS, "", "smoe train does not evaluate" },
};
_Static_assert(sizeof k_unapplied / sizeof k_unapplied[0] <= SMOE_TRAIN_MAX_UNAPPLIED,
               "room for every key read and not applied");

/* n's value as one line of YAML flow text, cut to fit. */
static void value_text(const smoe_node *n, char *buf, size_t cap)
{
    if (n->kind == SMOE_NODE_SCALAR) {
        snprintf(buf, cap, "%s", n->str ? n->str : "");
        return;
    }
    char *t = smoe_node_text(n);
    snprintf(buf, cap, "%s", t ? t : "(a collection)");
    smoe_free(t);
}

/* With several slices (the mesh's dcn parts) the dcn_* sizes build the
 * mesh, and num_slices applies where it names their number. */
static int applied_by_slices(const key_rule *r, const smoe_node *v, int64_t slices)
{
    if (slices <= 1)
        return 0;
    if (strncmp(r->key, "dcn_", 4) == 0)
        return 1;
    return strcmp(r->key, "num_slices") == 0 && v->kind == SMOE_NODE_SCALAR && v->str &&
           strtoll(v->str, NULL, 10) == slices;
}

int smoe_train_unapplied_keys(const smoe_config *cfg, int64_t slices, smoe_train_unapplied *out,
                              int cap)
{
    int n = 0;
    for (size_t i = 0; i < sizeof k_unapplied / sizeof k_unapplied[0]; i++) {
        const key_rule *r = &k_unapplied[i];
        const smoe_node *v = smoe_config_get(cfg, r->key);
        if (!v || smoe_key_holds(v, r) || applied_by_slices(r, v, slices))
            continue; /* absent: MaxText's default */
        if (n < cap) {
            out[n].key = r->key;
            out[n].reason = r->why;
            value_text(v, out[n].value, sizeof out[n].value);
        }
        n++;
    }
    return n;
}

smoe_status rc_refuse_keys(const smoe_config *c, smoe_err *err)
{
    smoe_status s;
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++)
        if ((s = smoe_key_check(c, &k_refused[i], TRAIN_ONLY, TRAIN_WOULD, err)))
            return s;
    /* N:M sparsity needs both weight_sparsity_n and _m (train.py loss_fn) */
    int64_t nm[2] = { 0, 0 };
    static const char *const sp[2] = { "weight_sparsity_n", "weight_sparsity_m" };
    for (int i = 0; i < 2; i++)
        if ((s = smoe_config_int_or(c, sp[i], 0, &nm[i], err)))
            return s;
    if (nm[0] && nm[1]) {
        static const key_rule w = { "weight_sparsity_n", R_STR, "null", "N:M weight sparsity" };
        return smoe_key_refuse(c, &w, TRAIN_ONLY, TRAIN_WOULD, err);
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
        static const key_rule d = { "dropout_rate", R_FLOAT, "0", "dropout" };
        return smoe_key_refuse(c, &d, TRAIN_ONLY, TRAIN_WOULD, err);
    }
    return SMOE_OK;
}
