/* The MaxText keys that tune a kernel (splash attention's blocks and
 * layouts, the grouped matmuls' tiles, the MoE permute's kernels): the step
 * model times each kernel by its FLOPs and bytes whatever its tuning (but
 * the grouped matmuls' row tiles, sim_gmm_tiles, splash attention's
 * fused backward, sim_attn_bwd, and its kernels' blocks, attn_span.c), so a
 * value other than
 * MaxText's default is not modelled; such keys are
 * named in the output (never silently ignored), as smoe train names the
 * keys it does not apply. A published sweep moves a DeepSeek-V3 step by up
 * to 15 % with splash blocks alone (maxtext cross-layer-prefetch
 * sweeps/results.md), where the prediction does not move. The defaults are
 * base.yml's at e591f30; a local_sa_* key is at its default when null (it
 * inherits its sa_* twin) or at that twin's default. Which kernel runs
 * (megablox, use_tokamax_gmm, use_tokamax_splash) is timed by the same
 * FLOPs and bytes (docs/sim.md). The MoE permute's sort is the exception:
 * which one the step model times follows the profile (ragged_sort_named). */
#include "sched_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_WHY "another splash attention tuning, timed differently"
#define GMM_WHY "other grouped-matmul tiles, timed differently"
#define PERM_WHY "other MoE permute kernels, timed differently"
static const char k_old_tm[] = "tile_batch_seq";
#define SA(k, want) { "sa_" k, SMOE_KEY_INT, want, SA_WHY }, { "local_sa_" k, SMOE_KEY_INT, want, SA_WHY }
#define SAB(k, want) { "sa_" k, SMOE_KEY_BOOL, want, SA_WHY }, { "local_sa_" k, SMOE_KEY_BOOL, want, SA_WHY }
#define SAS(k, want) { "sa_" k, SMOE_KEY_STR, want, SA_WHY }, { "local_sa_" k, SMOE_KEY_STR, want, SA_WHY }
#define TILE(w, pass) { w "_tile_" pass "_embed_dim", SMOE_KEY_INT, "1024", GMM_WHY }, \
                      { w "_tile_" pass "_mlp_dim", SMOE_KEY_INT, "1024", GMM_WHY }

/* The kernels' blocks (sa_block_q, sa_block_kv and their _dkv and _dq
 * twins, local_sa_* too) are modelled: the blocks splash computes
 * (attn_span.c); their compute sub-blocks are not. */
static const smoe_key_rule k_kernel_keys[] = {
    SA("block_kv_compute", "512"), SA("block_kv_dkv_compute", "512"),
    { "local_sa_use_fused_bwd_kernel", SMOE_KEY_BOOL, "false", SA_WHY },
    SAB("fuse_reciprocal", "true"),
    SAB("use_base2_exp", "true"),
    SAS("q_layout", "HEAD_DIM_MINOR"), SAS("k_layout", "HEAD_DIM_MINOR"),
    SAS("v_layout", "HEAD_DIM_MINOR"),
    { "sa_bwd_dkv_megacore", SMOE_KEY_BOOL, "false", SA_WHY },
    { "use_splash_scheduler", SMOE_KEY_BOOL, "false", SA_WHY },
    TILE("wi", "fwd"), TILE("wi", "dlhs"), TILE("wi", "drhs"),
    TILE("wo", "fwd"), TILE("wo", "dlhs"), TILE("wo", "drhs"),
    { "merge_gating_gmm", SMOE_KEY_BOOL, "false", GMM_WHY },
    { "num_moe_emb_chunks", SMOE_KEY_INT, "0", "the token all-gather overlapped in chunks" },
    { "use_gather_mosaic_kernel", SMOE_KEY_BOOL, "false", PERM_WHY },
    { "ragged_gather_fallback", SMOE_KEY_BOOL, "false", PERM_WHY },
    { "ragged_gather_reduce_fallback", SMOE_KEY_BOOL, "false", PERM_WHY },
    { "use_ragged_attention", SMOE_KEY_BOOL, "false", "ragged attention, timed differently" },
};

/* Append "KEY=TEXT" to buf (", "-separated; "..." ends a list cut short). */
static void name_text(const char *key, const char *text, int count, char *buf, size_t n,
                      size_t *used, int *cut)
{
    if (*cut || n < 4)
        return;
    int w = snprintf(buf + *used, n - *used, "%s%s=%s", count > 1 ? ", " : "", key, text);
    if (w > 0 && *used + (size_t)w < n) {
        *used += (size_t)w;
    } else { /* the rest does not fit: end with "..." */
        memcpy(buf + (*used + 4 <= n ? *used : n - 4), "...", 4);
        *cut = 1;
    }
}

/* Append "KEY=VALUE" with v's text. */
static void name_key(const smoe_node *v, const char *key, int count, char *buf, size_t n,
                     size_t *used, int *cut)
{
    char *text = smoe_node_text(v);
    name_text(key, text ? text : "?", count, buf, n, used, cut);
    free(text);
}

/* use_ragged_sort (base.yml default false) picks the MoE permute's sort:
 * MaxText's ragged-sort kernels on the SparseCores (true) or
 * _sort_activations' gathers (false, moe.py permute/unpermute). A profile
 * with permute_bandwidth times the dispatch and combine at that rate,
 * which is the kernels' (configs/hardware/tpu7x.yml), so there false is
 * not modelled; one without times them as passes by their bytes, so true
 * is not. Named for a model with routed experts only; a value that is no
 * boolean is the keys' check's to refuse. */
static int ragged_sort_named(const smoe_config *cfg, const smoe_hw *hw)
{
    smoe_err err;
    int64_t experts;
    int on = 0;
    if (smoe_config_int_or(cfg, "num_experts", 1, &experts, &err) || experts <= 1 ||
        smoe_config_bool_or(cfg, "use_ragged_sort", 0, &on, &err))
        return -1;
    return on == (hw && hw->permute_bandwidth > 0) ? -1 : on;
}

/* Today's kernel keys (k_kernel_keys), then an older release's tuning keys
 * (smoe_old_key: the grouped matmuls' tiles and buffers of before) at a
 * value other than their default then. */
int smoe_sim_tuned_keys(const smoe_config *cfg, const smoe_hw *hw, char *buf, size_t n)
{
    int count = 0, cut = 0;
    size_t used = 0;
    smoe_old_key ok;
    if (n)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof k_kernel_keys / sizeof k_kernel_keys[0]; i++) {
        const smoe_node *v = smoe_config_get(cfg, k_kernel_keys[i].key);
        if (!smoe_key_holds(v, &k_kernel_keys[i]))
            name_key(v, k_kernel_keys[i].key, ++count, buf, n, &used, &cut);
    }
    int rs = ragged_sort_named(cfg, hw);
    if (rs >= 0)
        name_text("use_ragged_sort", rs ? "true" : "false", ++count, buf, n, &used, &cut);
    for (size_t i = 0; smoe_old_key_at(i, &ok); i++) {
        if (strcmp(ok.key, k_old_tm) == 0) /* modelled: sim_gmm_tiles */
            continue;
        smoe_key_rule r = { ok.key, SMOE_KEY_INT, ok.def, GMM_WHY };
        const smoe_node *v = ok.def ? smoe_config_get(cfg, ok.key) : NULL;
        if (!smoe_key_holds(v, &r))
            name_key(v, ok.key, ++count, buf, n, &used, &cut);
    }
    return count;
}

/* The grouped matmuls' row tiles, MaxText's names (moe.py get_wi_gmm_params
 * and get_wo_gmm_params pass them to megablox's and tokamax's kernels;
 * base.yml's default 512); before the wi_tile_* keys one key,
 * tile_batch_seq, tiled every pass (key_history.tsv): it counts where a
 * pass's key is at its default. */
static const char *const k_tm_keys[2][3] = {
    { "wi_tile_fwd_batch_seq", "wi_tile_dlhs_batch_seq", "wi_tile_drhs_batch_seq" },
    { "wo_tile_fwd_batch_seq", "wo_tile_dlhs_batch_seq", "wo_tile_drhs_batch_seq" },
};

smoe_status sim_gmm_tiles(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                          smoe_err *err)
{
    int megablox, tokamax;
    int64_t old;
    smoe_status s;
    memset(sh->gmm_tm, 0, sizeof sh->gmm_tm);
    if ((s = smoe_config_bool_or(cfg, "megablox", 1, &megablox, err)) ||
        (s = smoe_config_bool_or(cfg, "use_tokamax_gmm", 0, &tokamax, err)) ||
        (s = smoe_config_int_or(cfg, k_old_tm, 512, &old, err)))
        return s;
    sh->gmm_lut = 0;
    if (hw->kind != SMOE_HW_TPU || sh->moe_capacity > 0 || !(megablox || tokamax))
        return SMOE_OK;
    int v2;
    if ((s = smoe_config_bool_or(cfg, "use_gmm_v2", 0, &v2, err)))
        return s;
    if (tokamax && !sh->fp8 && !v2) { /* moe.py gmm: is_tokamax_v1_unquantized */
        for (int w = 0; w < 2; w++)
            for (int p = 0; p < 3; p++)
                sh->gmm_tm[w][p] = 128;
        sh->gmm_lut = 1;
        return SMOE_OK;
    }
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 3; p++) {
            const char *key = k_tm_keys[w][p];
            int64_t tm;
            if ((s = smoe_config_int_or(cfg, key, 512, &tm, err)))
                return s;
            if (tm == 512 && old != 512) /* an older release's one key */
                key = k_old_tm, tm = old;
            if (tm < 1 || tm > (int64_t)1 << 30)
                return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, key),
                                   "%s: %lld: a grouped matmul's row tile must be 1 to 2^30 rows",
                                   key, (long long)tm);
            sh->gmm_tm[w][p] = tm;
        }
    return SMOE_OK;
}

/* Quantization all-gather (MaxText kernels/megablox/ops.py, gmm's
 * forward: use_tokamax_backend, a rule with bwd_qtype, which fp8_full's
 * has, and a weight_calibration_method starting "fixed"; moe.py passes
 * weight_gather_axes only then, and only with shard_exp_on_fsdp): the
 * routed weights enter the layer sharded and are gathered as their fp8
 * values; their gradients are reduce-scattered from drhs in the compute
 * dtype. */
smoe_status sim_gmm_qag(const smoe_config *cfg, smoe_sim_shape *sh, smoe_err *err)
{
    int tokamax, on_fsdp;
    const char *cal;
    smoe_status s;
    sh->gmm_qag = 0;
    if ((s = smoe_config_bool_or(cfg, "use_tokamax_gmm", 0, &tokamax, err)) ||
        (s = smoe_config_bool_or(cfg, "shard_exp_on_fsdp", 0, &on_fsdp, err)) ||
        (s = smoe_config_str_or(cfg, "weight_quantization_calibration_method", "absmax", &cal,
                                err)))
        return s;
    sh->gmm_qag = sh->fp8 && tokamax && on_fsdp && sh->moe_capacity <= 0 &&
                  strncmp(cal, "fixed", 5) == 0;
    return SMOE_OK;
}

/* tokamax's tuned row tiles (openxla/tokamax @ 099096d3,
 * tokamax/_src/ops/ragged_dot/pallas_mosaic_tpu.py: GMM_TILING_TUNED_LUT,
 * GMM_RHS_TRANSPOSE_TILING_TUNED_LUT and TGMM_TILING_TUNED_LUT, the
 * unquantized entries; a key listed twice there takes its later value, as
 * a Python dict does), by the lhs rows m, the contracted k, the output n
 * and the groups g, each with the forward's, dlhs's and drhs's tile_m. A
 * shape it lacks gets Config's default, 128. */
typedef struct tokamax_tile {
    int64_t m, k, n, g;
    int64_t tm[3];
} tokamax_tile;

static const tokamax_tile k_tokamax_lut[] = {
    { 262144, 7168, 2048, 256, { 256, 256, 512 } },
    { 262144, 2048, 7168, 256, { 128, 256, 256 } },
    { 327680, 2880, 2880, 128, { 512, 512, 512 } },
    { 393216, 2048, 768, 128, { 512, 1024, 512 } },
    { 393216, 768, 2048, 128, { 1024, 512, 512 } },
    { 524288, 4096, 1536, 128, { 256, 1024, 512 } },
    { 524288, 1536, 4096, 128, { 512, 1024, 512 } },
    { 262144, 4096, 1536, 128, { 256, 512, 512 } },
    { 262144, 1536, 4096, 128, { 256, 1024, 512 } },
    { 131072, 7168, 2048, 256, { 512, 512, 256 } },
    { 131072, 2048, 7168, 256, { 128, 512, 256 } },
    { 131072, 4096, 1536, 128, { 256, 512, 512 } },
    { 131072, 1536, 4096, 128, { 256, 512, 512 } },
    { 65536, 7168, 2048, 256, { 256, 512, 256 } },
    { 131072, 7168, 512, 256, { 128, 256, 256 } },
    { 131072, 512, 7168, 256, { 256, 256, 256 } },
    { 262144, 7168, 512, 256, { 512, 256, 256 } },
    { 262144, 512, 7168, 256, { 256, 256, 512 } },
};

void sim_tokamax_tiles(double m, double k, double n, double g, int64_t out[3])
{
    for (int p = 0; p < 3; p++)
        out[p] = 128;
    for (size_t i = 0; i < sizeof k_tokamax_lut / sizeof k_tokamax_lut[0]; i++) {
        const tokamax_tile *t = &k_tokamax_lut[i];
        if ((double)t->m == m && (double)t->k == k && (double)t->n == n && (double)t->g == g) {
            memcpy(out, t->tm, sizeof t->tm);
            return;
        }
    }
}

/* Splash attention's backward (MaxText attention_op.py: the global layers'
 * sa_use_fused_bwd_kernel, base.yml false; tokamax's splash runs the fused
 * one only): fused, one dkv kernel that also computes dq; else a dkv and a
 * dq kernel, each recomputing the scores (jax splash_attention_kernel.py).
 * A TPU's flash kernel; other profiles keep twice the forward. */
smoe_status sim_attn_bwd(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                         smoe_err *err)
{
    int fused, tokamax;
    smoe_status s;
    sh->attn_bwd = 0;
    if ((s = smoe_config_bool_or(cfg, "sa_use_fused_bwd_kernel", 0, &fused, err)) ||
        (s = smoe_config_bool_or(cfg, "use_tokamax_splash", 0, &tokamax, err)))
        return s;
    if (hw->kind == SMOE_HW_TPU)
        sh->attn_bwd = fused || tokamax ? SMOE_ATTN_BWD_FUSED : SMOE_ATTN_BWD_SPLIT;
    return SMOE_OK;
}
