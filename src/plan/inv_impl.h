/* Internal to the built-in parameter enumeration (inventory.c and the
 * inv_*.c family files): a growing list of params paths with per-layer
 * shapes and logical axes, the place ("at") a layer's weights go, and the
 * building blocks shared by the families (norms, dense MLP, routed experts,
 * attention). Each family file cites the MaxText model code it follows
 * (upstream commit e591f30, src/maxtext/models/ and src/maxtext/layers/).
 *
 * Scanned and unscanned layers: MaxText stacks a scanned layer's weights
 * with the scan's logical name ("layers", "dense_layers", ...) inserted at
 * param_scan_axis; with scan_layers=false each layer is its own module
 * "layers_<i>" (deepseek: "dense_layers_<i>", "moe_layers_<i>") and has no
 * stacked dim. An inv_at carries either form, so a family writes one layer
 * once and inv_layers() places it. */
#ifndef SMOE_PLAN_INV_IMPL_H
#define SMOE_PLAN_INV_IMPL_H

#include "dims.h"
#include "smoe/plan.h"

#include <stdint.h>

typedef struct inv {
    smoe_arena *a;
    const smoe_config *cfg;
    smoe_logical_entry *e;
    const char **path; /* params path of e[i] */
    int n, cap;
    int64_t scan_axis;
    int hash_routing; /* set around inv_routed for DeepSeek-V4 hash layers */
    smoe_err *err;
} inv;

/* Where a layer's weights go: params path prefix ("decoder/layers" or
 * "decoder/layers_3" or "decoder/layers/layers_1"), and the stacked dim
 * (stack name and its length) or stack == NULL for an unstacked module. */
typedef struct inv_at {
    const char *prefix;
    const char *stack;
    int64_t L;        /* > 0: a stacked dim of L is inserted */
    const char *inner; /* a scan inside the scanned block (gemma4's */
    int64_t L_in;      /* local_layers), inserted first, or L_in = 0 */
} inv_at;

/* Top level (no stack): prefix "" means paths are taken as given. */
extern const inv_at inv_top;

/* Add <at->prefix>/<rest> with per-layer shape/names (rank dims). */
SMOE_MUST_CHECK
smoe_status inv_add(inv *v, const inv_at *at, const char *rest, int rank,
                    const int64_t *shape, const char *const *names);
/* A sub-module of at: prefix/<name>, same stack. NULL on out of memory. */
inv_at inv_sub(inv *v, const inv_at *at, const char *name);
/* printf into the arena (NULL on out of memory, which inv_add reports). */
const char *inv_fmt(inv *v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* a * b and a + b for dimensions, saturating at INT64_MAX (then refused by
 * the final size check): configs may be hostile. Both >= 0. */
static inline int64_t inv_mul(int64_t a, int64_t b)
{
    return a > 0 && b > INT64_MAX / a ? INT64_MAX : a * b;
}
static inline int64_t inv_plus(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* Optional config values (between -1 and 2^31-1): absent keys take def. Bad values are errors. */
SMOE_MUST_CHECK
smoe_status inv_int(inv *v, const char *key, int64_t def, int64_t *out);
SMOE_MUST_CHECK
smoe_status inv_bool(inv *v, const char *key, int *out);
/* The length of a list-valued key (0 when absent or not a list). */
int64_t inv_list_len(inv *v, const char *key);
/* Integer element i of a list-valued key. */
SMOE_MUST_CHECK
smoe_status inv_list_int(inv *v, const char *key, int64_t i, int64_t *out);

/* MaxText's model_name: the model_name key, or for a model given as a
 * file the file's name without directory and .yml. NULL if unknown. */
const char *inv_model_name(inv *v);

/* One layer at `at`; idx is its index in the whole decoder (unscanned) or
 * its position inside a scanned cycle (scannable blocks), or -1 for a
 * plain scanned layer. */
typedef smoe_status (*inv_layer_fn)(inv *v, const model_dims *m, const inv_at *at,
                                    int64_t idx);
/* n layers named `name` under decoder/: scanned, one stacked call at
 * decoder/<name> (idx -1); unscanned, calls at decoder/<name>_<i> (idx i). */
SMOE_MUST_CHECK
smoe_status inv_layers(inv *v, const model_dims *m, const char *name, int64_t n,
                       int64_t first_idx, inv_layer_fn fn);
/* The common model shape: top-level weights and n scanned (or unscanned)
 * "layers" of one kind. */
SMOE_MUST_CHECK
smoe_status inv_decoder(inv *v, const model_dims *m, inv_layer_fn fn);
/* A scannable block of `cycle` layers (llama4, gpt_oss, olmo3, ...):
 * scanned, fn at decoder/layers/<sub>_<k> (idx k) stacked n/cycle times;
 * unscanned, fn at decoder/layers_<i> (idx i), i < n. */
SMOE_MUST_CHECK
smoe_status inv_cycle(inv *v, const model_dims *m, int64_t n, int64_t cycle,
                      const char *sub, inv_layer_fn fn);

/* inhomogeneous_layer_cycle_interval, checked to divide the layer count
 * when layers are scanned. */
SMOE_MUST_CHECK
smoe_status inv_cycle_len(inv *v, const model_dims *m, int64_t *cycle);

#define INV_ADD(at, rest, ...)                                                 \
    do {                                                                       \
        const struct { int64_t s; const char *n; } d_[] = { __VA_ARGS__ };    \
        int64_t sh_[SMOE_MAX_RANK];                                            \
        const char *nm_[SMOE_MAX_RANK];                                        \
        int r_ = (int)(sizeof d_ / sizeof d_[0]);                              \
        for (int i_ = 0; i_ < r_; i_++) {                                      \
            sh_[i_] = d_[i_].s;                                                \
            nm_[i_] = d_[i_].n;                                                \
        }                                                                      \
        smoe_status s_ = inv_add(v, (at), (rest), r_, sh_, nm_);              \
        if (s_)                                                                \
            return s_;                                                         \
    } while (0)
/* A weight MaxText gives no logical axes (a plain nnx.Param, a flax
 * LayerNorm or Conv, an RMSNorm with default kernel_axes): every dim None,
 * the stacked dim too, so it is neither sharded nor prefetched. */
#define INV_PLAIN(at, rest, ...)                                               \
    do {                                                                       \
        inv_at p_ = *(at);                                                     \
        p_.stack = p_.inner = NULL;                                            \
        INV_ADD(&p_, rest, __VA_ARGS__);                                       \
    } while (0)
#define D(size, name) { (size), (name) }
#define TRY(expr)                                                              \
    do {                                                                       \
        smoe_status t_ = (expr);                                               \
        if (t_)                                                                \
            return t_;                                                         \
    } while (0)

/* --- shared blocks (inv_blocks.c) --- */
/* token_embedder, decoder_norm (scale; + bias for LayerNorm families),
 * logits_dense unless logits_via_embedding. */
SMOE_MUST_CHECK
smoe_status inv_top_weights(inv *v, const model_dims *m, int norm_bias);
/* An RMSNorm <mod>/scale of `features` on axis "norm". */
SMOE_MUST_CHECK
smoe_status inv_norm(inv *v, const inv_at *at, const char *mod, int64_t features);
/* Dense MLP (linears.py MlpBlock) under <mod>: wi / wi_<k> / fused wi, wo;
 * bias adds <dense>/bias. */
SMOE_MUST_CHECK
smoe_status inv_mlp(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                    int64_t in, int64_t width, int bias);
/* Routed experts (moe.py RoutedMoE) under <mod>: gate (kernel, bias with
 * routed_bias), wi_<k>/wi, wo; gate_axis is the gate kernel's input axis. */
SMOE_MUST_CHECK
smoe_status inv_routed(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                       const char *gate_axis, int64_t width);
/* RoutedAndSharedMoE (moe.py) under <mod>: MoeBlock_0 (gate axes
 * (embed_moe, None), width moe_mlp_dim) and shared_experts, an MlpBlock of
 * shared_experts * shared_width. */
SMOE_MUST_CHECK
smoe_status inv_routed_shared(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                              int64_t shared_width);
/* ManifoldConstrainedHyperConnections (mhc.py) under <mod> with
 * mhc_expansion_rate k: mhc_norm, alpha/beta weights and scales. */
SMOE_MUST_CHECK
smoe_status inv_mhc(inv *v, const model_dims *m, const inv_at *at, const char *mod);
/* Options of the GQA attention (attentions.py Attention). */
typedef struct inv_attn {
    int64_t heads, kv_heads, head_dim;
    int bias;        /* use_bias_in_projections (q, k, v and out) */
    int out_bias;    /* bias on out too (not for qwen2) */
    int qk_norm;     /* query_norm/key_norm of head_dim */
    int64_t qk_norm_q, qk_norm_k; /* their feature counts */
    int v_norm;      /* value_norm of head_dim (with scale) */
    int sinks;       /* attention_sink: sinks (heads,) */
    int share_kv;    /* share_kv_projections: no value */
    int64_t out_dim; /* out's output features (0: emb) */
    int no_kv;       /* share_kv_layer: K/V from another layer, no key,
                        value, key_norm, value_norm */
} inv_attn;
/* The default options from the config (heads, kv heads, head_dim, fused
 * qkv, use_qk_norm with per-head norms, attention_bias, attention_sink). */
SMOE_MUST_CHECK
smoe_status inv_attn_default(inv *v, const model_dims *m, inv_attn *o);
/* GQA attention weights under <mod>. */
SMOE_MUST_CHECK
smoe_status inv_gqa(inv *v, const model_dims *m, const inv_at *at, const char *mod,
                    const inv_attn *o);

/* --- families, one file each group --- */
SMOE_MUST_CHECK
smoe_status inv_deepseek(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_llama(inv *v, const model_dims *m);      /* llama2, mistral */
SMOE_MUST_CHECK
smoe_status inv_mixtral(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_qwen3(inv *v, const model_dims *m);      /* qwen3 */
SMOE_MUST_CHECK
smoe_status inv_qwen3_moe(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_qwen2(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gemma(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gemma2(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gemma3(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gpt3(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gpt_oss(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_olmo3(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_llama4(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_envy(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_qwen_hybrid(inv *v, const model_dims *m); /* qwen3_next, qwen3_5 */
SMOE_MUST_CHECK
smoe_status inv_qwen3_custom_moe(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gemma4(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_gemma4_small(inv *v, const model_dims *m);
SMOE_MUST_CHECK
smoe_status inv_deepseek4(inv *v, const model_dims *m);
/* The vision encoder of vision_encoder_block qwen3_vl / qwen3_omni. */
SMOE_MUST_CHECK
smoe_status inv_qwen3_vision(inv *v, const model_dims *m, const char *block);
/* The audio encoder of qwen3-omni-30b-a3b (use_audio). */
SMOE_MUST_CHECK
smoe_status inv_qwen3_audio(inv *v, const model_dims *m);
/* deepseek.py DeepSeekGenericLayer: pre/post_self_attention_layer_norm and
 * mhc_attention/mhc_mlp with mhc_expansion_rate > 1. */
SMOE_MUST_CHECK
smoe_status inv_deepseek_generic(inv *v, const model_dims *m, const inv_at *at);
/* engram.py (inv_engram.c): whether layer idx is in engram_layers; the
 * engram weights of layer idx (none for other layers or idx < 0); a
 * deepseek stack [start, end) with engram layers unscanned, the runs
 * between them scanned (scan_layers) as decoders.py names them. */
int inv_is_engram_layer(inv *v, int64_t idx);
SMOE_MUST_CHECK
smoe_status inv_engram(inv *v, const model_dims *m, const inv_at *at, int64_t idx);
SMOE_MUST_CHECK
smoe_status inv_engram_stack(inv *v, const model_dims *m, const char *name, int64_t start,
                             int64_t end, inv_layer_fn fn);

#endif
