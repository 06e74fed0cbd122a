/* smoe plan: every weight of a model with its physical PartitionSpec and
 * its FSDP-prefetch gather plan, co-axis and legacy side by side.
 *
 * The parameter inventory comes either from a MaxText logical_shardings.json
 * (--params) or from the built-in enumeration of a model file (every
 * decoder block of MaxText's model files; see src/plan/inventory.c), with
 * MaxText's key strings, shapes and logical axes. Resolution uses the config's rules
 * (Flax semantics, size-1 axes kept: the state sharding). The gather plan
 * follows the change description:
 *   LEGACY: gather only the FSDP axes (fsdp, fsdp_transpose) of a dim; if
 *           they are not the minor-most axes of that dim the weight falls
 *           back to an untagged reshard, and the co-axes left behind
 *           ("residual") cost a second, un-prefetched all-gather before use.
 *   COAXIS: from the first FSDP axis of a dim onward, gather every FSDP or
 *           co-sharding axis (expert, context, context_usp_ulysses) in one
 *           tagged all-gather; axes before the first FSDP axis and dims with
 *           no FSDP axis keep their sharding.
 * In both, size-1 axes are dropped first. The plan is pure data: the
 * simulator and the MPI runtime execute it, they never recompute it. */
#ifndef SMOE_PLAN_H
#define SMOE_PLAN_H

#include "smoe/config.h"
#include "smoe/core.h"
#include "smoe/dtype.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum smoe_entry_kind {
    SMOE_ENTRY_PARAM,  /* .params/... */
    SMOE_ENTRY_MU,     /* .opt_state/[i]/.mu/... */
    SMOE_ENTRY_NU,     /* .opt_state/[i]/.nu/... */
    SMOE_ENTRY_STEP,   /* .step */
    SMOE_ENTRY_COUNT,  /* .opt_state/[i]/.count */
    SMOE_ENTRY_OTHER
} smoe_entry_kind;

typedef enum smoe_gather_status {
    SMOE_GATHER_NOOP,     /* nothing to gather */
    SMOE_GATHER_TAGGED,   /* one tagged tiled all-gather per gathered dim */
    SMOE_GATHER_FALLBACK  /* untagged reshard: gather axes not minor-most */
} smoe_gather_status;

typedef enum smoe_gather_mode {
    SMOE_MODE_COAXIS,
    SMOE_MODE_LEGACY
} smoe_gather_mode;

/* The gather plan of one per-layer weight (scan dim removed). */
typedef struct smoe_gather {
    smoe_gather_status status;
    int rank;
    int64_t shape[SMOE_MAX_RANK];     /* per-layer global shape */
    smoe_axes live[SMOE_MAX_RANK];    /* source spec, size-1 axes dropped */
    smoe_axes axes[SMOE_MAX_RANK];    /* gathered axes per dim, in order */
    smoe_axes out[SMOE_MAX_RANK];     /* gathered (target) spec per dim */
    smoe_axes residual[SMOE_MAX_RANK];/* co-axes LEGACY leaves behind */
    int64_t group[SMOE_MAX_RANK];     /* product of axes[d] sizes */
    int64_t ways;                     /* product of group[] */
    int64_t residual_ways;            /* product of residual sizes */
    int64_t bytes_in;                 /* local shard, bytes per device */
    int64_t bytes_out;                /* gathered buffer, bytes per device */
    int64_t bytes_recv;               /* bytes_out - bytes_in */
    int64_t residual_bytes_recv;      /* second, un-prefetched gather */
    int64_t numel_in, numel_out, numel_final; /* elements behind bytes_in, bytes_out
                                         and bytes_out + residual_bytes_recv */
    unsigned indivisible;             /* bit d: shape[d] % shards != 0 */
    int uneven;                       /* TAGGED, but a dim is indivisible: the
                                         prefetch all-gather runs in shard_map,
                                         which needs even shards (JAX raises) */
    int n_gathered_dims;              /* dims with axes[d] non-empty */
    smoe_dtype wire;                  /* what the gather moves (bytes follow it) */
    const char *wire_reason;          /* why wire is the int8 fallback (the block
                                         rule's message), else NULL (plan arena) */
    const char *reason;               /* why it is fallback, noop, uneven or
                                         leaves a legacy residual; NULL for an
                                         even tagged gather (plan arena) */
} smoe_gather;

/* One entry of the state tree: a parameter, an optimizer moment, a count. */
typedef struct smoe_weight {
    const char *key;      /* the golden files' key string */
    const char *path;     /* "decoder/moe_layers/self_attention/wkv_a/kernel"
                             (params and moments), NULL otherwise */
    smoe_entry_kind kind;
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    const char *logical[SMOE_MAX_RANK]; /* NULL = None */
    smoe_pspec spec;      /* state sharding: Flax resolution, size-1 kept */
    smoe_pspec use_spec;  /* use-site form: size-1 axes dropped */
    int scan_axis;        /* dim of the stacked-layer axis, or -1 */
    const char *stack;    /* its logical name (dense_layers, ...) or NULL */
    int64_t layers;       /* shape[scan_axis], or 1 */
    int prefetch;         /* a scanned decoder weight: prefetched per layer */
    int has_gather;       /* params only */
    smoe_gather gather;   /* COAXIS */
    smoe_gather legacy;   /* LEGACY */
} smoe_weight;

/* Per-stack totals for one gather mode, per layer unless named per step. */
typedef struct smoe_plan_stack {
    const char *name;     /* logical stack name */
    int64_t layers;
    int n_weights;        /* per layer */
    int tagged, fallback, noop;
    int uneven;           /* of the tagged: indivisible, cannot be prefetched */
    int64_t tagged_bytes_recv;    /* per layer, tagged gathers */
    int64_t fallback_bytes_recv;  /* per layer, untagged reshards */
    int64_t residual_bytes_recv;  /* per layer, second un-prefetched gather */
    int64_t gathered_bytes;       /* per layer, sum of bytes_out */
} smoe_plan_stack;

#define SMOE_MAX_STACKS 8
#define SMOE_MAX_WAYS 16

typedef struct smoe_plan_summary {
    int n_stacks;
    smoe_plan_stack stack[SMOE_MAX_STACKS];
    int tagged, fallback, noop;   /* over all per-layer weights */
    int uneven;                   /* of the tagged: uneven (see smoe_gather) */
    /* histogram of tagged gather ways: ways[i] happens count[i] times per
     * layer-kind (each distinct per-layer weight counted once) */
    int n_ways;
    int64_t ways[SMOE_MAX_WAYS];
    int ways_count[SMOE_MAX_WAYS];
    /* per training step: every layer gathered twice (forward, and backward
     * with rematerialisation) */
    int64_t step_gather_bytes_recv;   /* tagged + fallback reshards */
    int64_t step_residual_bytes_recv; /* un-prefetched second gathers */
} smoe_plan_summary;

typedef struct smoe_plan {
    smoe_mesh mesh;
    int dtype_bytes;
    smoe_dtype gather_dtype;  /* what the weight gathers move */
    int64_t int8_block;
    smoe_dtype int8_fallback; /* int8: the dtype of weights that cannot hold whole
                                 blocks (SMOE_DT_INT8: none, they are refused) */
    int wire_fallbacks;       /* params gathered in int8_fallback instead */
    int n;
    smoe_weight *w;
    smoe_plan_summary coaxis, legacy;
    smoe_arena *arena;
    const char *source;   /* "built-in enumeration" or the --params file */
} smoe_plan;

typedef struct smoe_plan_opts {
    int64_t devices;      /* >= 1 */
    int64_t slices;       /* >= 1 */
    const char *params_file; /* NULL: built-in enumeration of the model */
    int dtype_bytes;      /* element size for bytes (default 4) */
} smoe_plan_opts;

/* Build the plan of a config on a mesh of `devices`. Owns its memory
 * (smoe_plan_free). Errors: mesh (see smoe_config_mesh), inventory
 * (unknown decoder block, bad --params file), resolution (a logical name
 * used twice in one weight, with its file:line:col). */
SMOE_MUST_CHECK
smoe_status smoe_plan_build(const smoe_config *cfg, const smoe_plan_opts *o,
                            smoe_plan **out, smoe_err *err);
/* The same with MaxText's logical_shardings.json already in memory: `len`
 * bytes of `json` (read during the call only) instead of o->params_file,
 * which, if not NULL, names the text in messages. */
SMOE_MUST_CHECK
smoe_status smoe_plan_build_json(const smoe_config *cfg, const smoe_plan_opts *o,
                                 const char *json, size_t len, smoe_plan **out,
                                 smoe_err *err);
void smoe_plan_free(smoe_plan *p);
/* The wire dtype of the plan's weight gathers, every parameter's (a plan is
 * built fp32: as stored, dtype_bytes an element). bf16 and int8 convert
 * fp32 master weights, so they need dtype_bytes 4; block is int8's
 * elements per scale (0: SMOE_INT8_BLOCK_DEFAULT). With int8 a parameter
 * that does not meet the block rule (smoe_gather_check_blocks) is gathered
 * in `fallback` (fp32 or bf16; its gathers' wire_reason says why), or, with
 * fallback SMOE_DT_INT8, refused: SMOE_EINVAL naming the first such weight,
 * the plan unchanged. On success every parameter's gathers (both modes)
 * carry their wire and their bytes follow it (the int8 scales included),
 * and so do the summaries. Call once, on a plan still fp32. */
SMOE_MUST_CHECK
smoe_status smoe_plan_set_wire(smoe_plan *p, smoe_dtype t, int64_t block, smoe_dtype fallback,
                               smoe_err *err);

/* The built-in enumeration: the full state tree (step, params, AdamW
 * moments, counts) in MaxText's tree-flatten order. Arena-allocated. */
SMOE_MUST_CHECK
smoe_status smoe_inventory_build(const smoe_config *cfg, smoe_arena *a,
                                 smoe_logical_entry **out, int *n,
                                 smoe_err *err);

/* 1 when the gather (its prefetched stages or a legacy residual) runs over
 * an axis split across slices (m->dcn > 1): it crosses the slices' link
 * (DCN); else it stays within each slice (ICI). */
int smoe_gather_crosses_slices(const smoe_gather *g, const smoe_mesh *m);
/* 1 when a stage of g spans slices and shares them, so that smoe train
 * runs it in two levels: across slices, then within (smoe_axes_levels). */
int smoe_gather_two_level(const smoe_gather *g, const smoe_mesh *m);

/* The gather plan of one per-layer weight on a mesh (pure; exposed for the
 * edge-case tests and for the runtime). spec has rank entries. */
void smoe_gather_compute(const smoe_pspec *spec, const int64_t shape[],
                         const smoe_mesh *m, smoe_gather_mode mode,
                         int dtype_bytes, smoe_gather *out);
/* The one-line reason of a gather plan computed by smoe_gather_compute in
 * `mode` (fallback, noop, uneven, legacy residual), written to buf ("layer
 * dim" counts the per-layer dims, scan dim removed); returns
 * 0 (buf empty) for an even tagged gather. Pure. */
int smoe_gather_reason(const smoe_gather *g, smoe_gather_mode mode, const smoe_mesh *m,
                       char *buf, size_t n);
/* The first prefetched weight whose gather in `mode` is uneven: an error
 * naming it and the reason (smoe train refuses such plans); SMOE_OK if none. */
SMOE_MUST_CHECK
smoe_status smoe_plan_check_even(const smoe_plan *p, smoe_gather_mode mode, smoe_err *err);
/* A routed expert's weight (a dim named "exp" or "expert_only"): it keeps
 * its expert sharding (smoe_gather_exec_of's keep_expert). */
int smoe_weight_routed(const smoe_weight *w);

/* The bytes one device sends to devices in other slices in one step of
 * smoe train (src/plan/link.c has the rules, as smoe_comm_stats.link_bytes
 * counts them): the weight gathers and the gradient reductions, whose
 * elements are reduce_bytes each (4: fp32, 2: bf16). The expert
 * all-to-all's bytes depend on the routing and are not counted. */
typedef struct smoe_plan_link {
    int64_t gathers, reductions;
} smoe_plan_link;
SMOE_MUST_CHECK
smoe_status smoe_plan_link_bytes(const smoe_plan *p, smoe_gather_mode mode, int reduce_bytes,
                                 smoe_plan_link *out, smoe_err *err);

/* The executable form of gather plan g (see smoe_gather_exec in shard.h):
 * the plan's gather axes are prefetched; every other live axis is gathered
 * at use (the plan's legacy residual co-axes among them), so the weight
 * ends fully replicated, except that a routed-expert weight (keep_expert =
 * 1) keeps an `expert` axis leading its dim 0. SMOE_EINVAL, naming `name`,
 * when a dim is indivisible (g->indivisible) or `expert` would be both
 * kept and gathered. Pure. */
SMOE_MUST_CHECK
smoe_status smoe_gather_exec_of(const smoe_gather *g, int keep_expert, const char *name,
                                smoe_gather_exec *out, smoe_err *err);
/* The int8 block rule (dtype.h: blocks of `block` consecutive elements
 * along the last dim, in global coordinates): every shard of the weight
 * holds whole blocks, i.e. its last dim divides evenly into its shards and
 * the shard's length is a multiple of block. Then every shard boundary is a
 * block boundary and the blocks, hence the quantised values, are the same
 * on every mesh. SMOE_EINVAL with one line naming `name`, the shard's
 * length and the block otherwise. Pure. */
SMOE_MUST_CHECK
smoe_status smoe_gather_check_blocks(const smoe_gather *g, const smoe_mesh *m,
                                     int64_t block, const char *name, smoe_err *err);
/* Set g's wire to t and restate its byte counts (fp32: unchanged, as
 * computed; bf16: 2 bytes an element; int8: whole blocks of block + 4
 * bytes, the scales included). Pure. */
void smoe_gather_set_wire(smoe_gather *g, smoe_dtype t, int64_t block);
/* Mark the executable form x to move wire dtype t (int8: after checking
 * the block rule on g, as smoe_gather_check_blocks). */
SMOE_MUST_CHECK
smoe_status smoe_gather_exec_set_wire(smoe_gather_exec *x, const smoe_gather *g,
                                      const smoe_mesh *m, smoe_dtype t, int64_t block,
                                      const char *name, smoe_err *err);
/* remove_fsdp_from_partition_spec (co-axis form) on a raw spec. */
void smoe_remove_fsdp_from_spec(const smoe_pspec *in, const smoe_mesh *m,
                                smoe_pspec *out);
const char *smoe_gather_status_name(smoe_gather_status s);
int smoe_is_fsdp_axis(const char *axis);
int smoe_is_co_axis(const char *axis);

/* Model dimensions as MaxText derives them from a config (base_* scaled by
 * global_parameter_scale). */
typedef struct smoe_dims {
    const char *decoder_block;
    int64_t emb, heads, kv_heads, head_dim, mlp, moe_mlp, layers, vocab;
    int64_t first_dense, experts, topk, shared_experts;
    int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
    int64_t moe_in;          /* moe_expert_input_dim, or emb */
    int64_t n_activations;   /* len(mlp_activations) */
    int64_t scan_axis;       /* param_scan_axis */
    int64_t mtp_layers;
    int routed_bias, logits_via_embedding, fused_mlp, fused_qkv;
    int shard_exp_on_fsdp, use_2d_fsdp, batch_split, use_qk_norm;
    int context_autoregressive; /* ici_context_autoregressive_parallelism > 1 */
    int scan_layers;
    int mla;                 /* attention_type mla */
} smoe_dims;
SMOE_MUST_CHECK
smoe_status smoe_plan_dims(const smoe_config *cfg, smoe_dims *d, smoe_err *err);

/* Find a weight by its params path ("decoder/dense_layers/mlp/wo/kernel"). */
const smoe_weight *smoe_plan_find(const smoe_plan *p, const char *path);

#ifdef __cplusplus
}
#endif
#endif
