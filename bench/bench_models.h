/* The benchmarks' model sizes as smoe config overrides on the tiny model
 * (configs/models/tiny.yml), the same shapes as bench/torch_model.py's
 * configurations of the same names (bench/vs_torch.sh checks the
 * parameter counts equal): "wide", 512 wide; "big", a compute-bound
 * configuration for a GPU (2048 wide, 16 experts, 8 layers, sequences of
 * 2048). NULL-terminated. */
#ifndef SMOE_BENCH_MODELS_H
#define SMOE_BENCH_MODELS_H

#include <string.h>

static const char *const bench_wide_kv[] = {
    "override_model_config=true", "base_emb_dim=512", "base_mlp_dim=1024",
    "base_moe_mlp_dim=256", "base_num_query_heads=8", "base_num_kv_heads=8",
    "q_lora_rank=128", "kv_lora_rank=128", "qk_nope_head_dim=64", "qk_rope_head_dim=32",
    "v_head_dim=64", "max_target_length=256", NULL,
};

static const char *const bench_big_kv[] = {
    "override_model_config=true", "base_emb_dim=2048", "base_mlp_dim=8192",
    "base_moe_mlp_dim=1408", "base_num_query_heads=16", "base_num_kv_heads=16",
    "q_lora_rank=512", "kv_lora_rank=512", "qk_nope_head_dim=128", "qk_rope_head_dim=64",
    "v_head_dim=128", "num_experts=16", "vocab_size=32000", "base_num_decoder_layers=8",
    "first_num_dense_layers=1", "max_target_length=2048", "per_device_batch_size=1", NULL,
};

/* the overrides of model `name` (tiny: none), or NULL for an unknown name
 * with *known 0 */
static inline const char *const *bench_model_kv(const char *name, int *known)
{
    static const char *const none[] = { NULL };
    *known = 1;
    if (!strcmp(name, "tiny"))
        return none;
    if (!strcmp(name, "wide"))
        return bench_wide_kv;
    if (!strcmp(name, "big"))
        return bench_big_kv;
    *known = 0;
    return NULL;
}

#endif
