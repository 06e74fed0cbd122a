/* smoe sched: the pure (no MPI) side of scheduling: the timeline trace
 * format shared by the simulator and the runtime, so that a predicted and
 * a measured timeline open side by side in Perfetto / chrome://tracing;
 * the step model and its event simulator; the prefetch schedule as data
 * (smoe_schedule), which the simulator consumes and smoe train executes;
 * the memory-budgeted planner that chooses one. */
#ifndef SMOE_SCHED_H
#define SMOE_SCHED_H

#include <stdint.h>
#include <stdio.h>

#include "smoe/config.h"
#include "smoe/core.h"
#include "smoe/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- trace (Chrome trace event format, "X" complete events) ----
 * One process row per rank (pid), one thread row per lane (tid). */
typedef struct smoe_trace smoe_trace;

/* origin: the time (seconds) that maps to ts = 0. */
smoe_trace *smoe_trace_new(int pid, double origin);
void smoe_trace_free(smoe_trace *t);
/* Record a span [t0, t1] (seconds, same clock as origin) on lane `tid`.
 * The name is copied. An event that cannot be kept (out of memory) marks
 * the trace incomplete: smoe_trace_fragment reports it. */
void smoe_trace_span(smoe_trace *t, int tid, const char *name, double t0, double t1);
/* Name this trace's process row (default "rank <pid>"). */
void smoe_trace_process(smoe_trace *t, const char *name);
/* Name a lane (thread row) of this trace's pid (as smoe_trace_span). */
void smoe_trace_lane(smoe_trace *t, int tid, const char *name);
/* Name every lane of smoe_lane (core.h) as smoe's traces name them, but
 * the device's (SMOE_LANE_DEVICE), which its user names. */
void smoe_trace_lanes(smoe_trace *t);
/* The events as JSON objects separated by ",\n" (no brackets) in *out, a
 * buffer owned by the trace (valid until the next call or free).
 * SMOE_ENOMEM (and *out = "") when an event was lost or the text does not
 * fit in memory: never a truncated timeline. */
SMOE_MUST_CHECK
smoe_status smoe_trace_fragment(smoe_trace *t, const char **out, size_t *len, smoe_err *err);
/* The process row's name, and event i: 0 = a span (times in seconds from
 * the origin), 1 = a lane's name (tid, name), -1 = no such event. */
const char *smoe_trace_name(const smoe_trace *t);
int smoe_trace_event(const smoe_trace *t, int64_t i, int *tid, double *t0, double *t1,
                     const char **name);
/* Events that could not be kept (out of memory): 0 for a complete trace. */
int64_t smoe_trace_lost(const smoe_trace *t);
/* Write a whole trace file from per-rank fragments. */
SMOE_MUST_CHECK
smoe_status smoe_trace_write(FILE *f, const char *const *fragments, const size_t *lens,
                             int n, smoe_err *err);

/* ---- the step model ----
 * One training step per device, built from the plan (gather bytes and
 * axes of every weight, co-axis and legacy), the model dimensions, the
 * training shape and a hardware profile:
 *   compute  per op max(FLOPs / FLOP rate, bytes / memory bandwidth), per
 *            layer forward, backward (x2) and rematerialisation;
 *   gathers  per weight and stage: (G-1) x latency + bytes / bandwidth,
 *            over the fast interconnect or, for members on other nodes or
 *            slices, the slow network;
 *   EP       all-to-all of the routed rows (or ring of experts: all-gather
 *            of tokens + reduce-scatter of outputs);
 *   grads    reduce-scatter over the gather axes, all-reduce over the axes
 *            a weight is replicated on; AdamW over the local shards.
 * Exact formulas: docs/sim.md, "The step model". */
typedef enum smoe_remat {
    SMOE_REMAT_FULL,
    SMOE_REMAT_NONE,
    SMOE_REMAT_DOTS,
    SMOE_REMAT_CUSTOM /* the tensors of remat_dev / remat_host saved */
} smoe_remat;

/* The layer tensors MaxText's custom remat policy saves by name (the
 * per-tensor keys of base.yml at e591f30; checkpoint_name in its layers),
 * each the output of one op of a layer. The step model drops a saved
 * tensor's op from the backward's recompute (the rest of the forward is
 * recomputed whole, as under full remat) and keeps the tensor on the
 * device or, offloaded, on the host. */
typedef enum smoe_rtensor {
    SMOE_RT_INPUT,    /* decoder_layer_input: the layer's input (T x emb) */
    SMOE_RT_QUERY,    /* query_proj: the query projection's output */
    SMOE_RT_KEY,      /* key_proj */
    SMOE_RT_VALUE,    /* value_proj */
    SMOE_RT_KV,       /* kv_proj: key and value, fused */
    SMOE_RT_QKV,      /* qkv_proj: query, key and value, fused */
    SMOE_RT_CONTEXT,  /* context: the attention kernel's output */
    SMOE_RT_ATTN_OUT, /* attention_out: the same, before the out projection */
    SMOE_RT_OUT,      /* out_proj: the out projection's output (T x emb) */
    SMOE_RT_MLPWI,    /* mlpwi: wi_0 and wi_1 fused */
    SMOE_RT_MLPWI0,   /* mlpwi_0 (dense MLP or shared experts) */
    SMOE_RT_MLPWI1,   /* mlpwi_1 */
    SMOE_RT_MLPWO,    /* mlpwo */
    SMOE_RT_MOE_WI0,  /* moe_mlpwi_0: the routed experts' wi_0 output */
    SMOE_RT_MOE_WI1,  /* moe_mlpwi_1 */
    SMOE_RT_MOE_WO,   /* moe_mlpwo */
    SMOE_RT_Q_WA,     /* query_wa_proj: MLA's query down projection */
    SMOE_RT_KV_WA,    /* kv_wa_proj: MLA's key/value down projection */
    SMOE_RT_MLA_Q,    /* mla_q: the former after its norm */
    SMOE_RT_MLA_KV,   /* mla_kv */
    SMOE_RT_N
} smoe_rtensor;
/* The MaxText key of tensor t. */
const char *smoe_rtensor_key(smoe_rtensor t);

enum { SMOE_ATTN_BWD_FUSED = 1, SMOE_ATTN_BWD_SPLIT = 2 };

typedef struct smoe_sim_shape {
    int64_t batch;        /* sequences per device; with context > 1, per group
                             of `context` devices (per_device_batch_size x
                             context: MaxText's fractional batches) */
    int64_t seq;          /* tokens per sequence */
    int64_t context;      /* context-parallel ways (the mesh's context axis;
                             0 or 1: none): a device holds 1 / context of each
                             of its group's sequences, its attention's keys
                             span the whole sequence (smoe_sim_tokens) */
    smoe_remat remat;
    int remat_set;        /* remat is the caller's choice (--remat, a scenario);
                             0: smoe_sim_keys reads the config's remat_policy */
    unsigned remat_dev;   /* SMOE_REMAT_CUSTOM: bit 1 << smoe_rtensor of each tensor
                             saved on the device */
    unsigned remat_host;  /* ... and of each one offloaded to the host */
    int dtype_bytes;      /* stored weights (weight_dtype) */
    int ring_of_experts;  /* EP by all-gather + reduce-scatter of tokens */
    double moe_capacity;  /* sparse_matmul=false (MaxText moe.py dense_matmul):
                             capacity_factor > 0, the routed experts as dense
                             einsums over each sequence's capacity slots;
                             0: the sparse path (grouped matmuls) */
    int64_t gmm_tm[2][3]; /* the grouped matmuls' row tiles (MaxText's
                             wi_tile_* and wo_tile_* _batch_seq: forward, the
                             backward's dlhs and drhs) on the sparse path on a
                             TPU (megablox or tokamax): a tile that holds rows of
                             k experts is computed k times; 0: not modelled
                             (the dense path, ragged_dot, cpu and gpu) */
    int gmm_lut;          /* 1: tokamax's unquantized ragged_dot picks its own
                             row tiles by shape (MaxText passes it no tiling):
                             its lookup table, else 128 (sim_tokamax_tiles);
                             gmm_tm then holds that default */
    int gmm_qag;          /* 1: fp8_full on tokamax's kernel with a fixed
                             weight calibration and shard_exp_on_fsdp: the
                             routed weights are gathered quantized, 1 byte an
                             element, inside the grouped matmul (megablox
                             ops.py _fwd_gather_weight; sim_gmm_qag) */
    int attn_bwd;         /* the attention kernel's backward on a TPU (splash,
                             MaxText attention_op.py): SMOE_ATTN_BWD_FUSED one
                             kernel recomputing the scores once
                             (sa_use_fused_bwd_kernel, tokamax's splash),
                             SMOE_ATTN_BWD_SPLIT a dkv and a dq kernel, each
                             recomputing them; 0: twice the forward (cpu, gpu) */
    int fp8;              /* quantization=fp8_full (Qwix): the decoder layers'
                             matmuls (projections, router, routed experts) at
                             the profile's fp8 rate, forward and backward; the
                             attention kernel and the head in the compute dtype */
    /* bytes per element; 0 = from the defaults below (smoe_sim_dtypes fills
     * them from a config as MaxText defaults them) */
    int compute_bytes;    /* activations and cast weights (dtype) */
    int grad_bytes;       /* gradients as kept for the optimizer (grad_dtype) */
    int mu_bytes;         /* AdamW first moment (mu_dtype, else weight_dtype) */
    int nu_bytes;         /* AdamW second moment (optax: the parameters' dtype);
                             mu = nu = 0 with opt_type sgd */
    int no_moments;       /* opt_type sgd: no optimizer state */
    /* smoe's runtime with compressed gathers (smoe sim --gather-dtype): the
     * bytes per element its weight gathers move on average (2 for bf16,
     * (B + 4) / B for int8 blocks of B, a mix with an int8 fallback); 0 =
     * the compute dtype's. smoe's schedules (executors XLA_PREFETCH and
     * RUNTIME, below; not the legacy plan) scale their gathers' bandwidth
     * part by wire_bytes / compute_bytes; the gathered buffers keep the
     * compute dtype (the runtime expands the records into them). */
    double wire_bytes;
    /* MaxText's prefetch path (executor MAXTEXT, not the legacy plan): the
     * bytes per element its gathers and their reduce-scatters move, a
     * declared reading (smoe sim --maxtext-gather-dtype); 0 = as stored,
     * weight_dtype, which is what fsdp_prefetch.py does (it gathers the
     * nnx.Param leaves; the layers cast after the gather) */
    int mx_gather_bytes;
    /* Where the gradient reductions run on an accelerator with a few
     * collective engines per device (a declared reading, smoe sim
     * --reduce-engine): the profile's rule (SMOE_REDUCE_PROFILE: with two
     * engines a device's reductions share the exchanges'), or forced onto
     * the exchanges' engine (SHARED) or an engine of their own (OWN: they
     * contend with neither the exchanges nor the gathers); config.h. */
    int reduce_engine;
    /* smoe's runtime (executor RUNTIME): the activation bytes smoe train
     * tracks per rank (train.h: smoe_train_act_bytes; its model's count,
     * not the simulator's estimate below), or 0: the estimate */
    int64_t act_bytes;
} smoe_sim_shape;

/* Tokens a device computes: batch x seq / context. */
double smoe_sim_tokens(const smoe_sim_shape *sh);

/* The kernel-tuning keys of cfg (splash attention's blocks and layouts,
 * the grouped matmuls' tiles, the MoE permute's kernels) set away from
 * MaxText's default, which the step model does not time differently, and
 * a MoE model's use_ragged_sort where it is not the sort hw times (its
 * permute_bandwidth: the ragged-sort kernels; hw NULL: none):
 * "key=value, ..." into buf (n bytes, cut with "..."); returns how many. */
int smoe_sim_tuned_keys(const smoe_config *cfg, const smoe_hw *hw, char *buf, size_t n);
/* Fill the dtype sizes of *sh from MaxText's keys: weight_dtype (default
 * float32), dtype (bfloat16), grad_dtype (float32), mu_dtype ("" = weight_
 * dtype) and opt_type (adamw, adam_pax: two moments; sgd: none; others are
 * refused). A cpu profile with compute_bytes computes in that size (smoe's
 * kernels). Errors name the key's file:line:col. */
SMOE_MUST_CHECK
smoe_status smoe_sim_dtypes(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                            smoe_err *err);

/* Read cfg's MaxText keys the step model depends on into *sh: the dtypes
 * (smoe_sim_dtypes), remat_policy unless sh->remat_set (full, minimal and
 * custom with its per-tensor keys: MaxText's decoders.py get_remat_policy;
 * offloading needs hw->host_bandwidth), use_ring_of_experts;
 * refuse in one line at the key's file:line:col a key that changes a
 * step's time or memory in a way the model does not represent
 * (quantization, sparse_matmul=false, token dropping, gradient
 * accumulation, host offload, vocabulary tiling, another remat policy, and
 * on accelerator profiles an attention that keeps its scores). Needs
 * sh->seq. docs/sim.md lists the keys. */
SMOE_MUST_CHECK
smoe_status smoe_sim_keys(const smoe_config *cfg, const smoe_hw *hw, smoe_sim_shape *sh,
                          smoe_err *err);
/* "full", "none" or "save-dot-products". */
const char *smoe_sim_remat_name(smoe_remat r);
/* The collective engines of one device (collective_engines over
 * devices_per_chip, whole): with 1 everything queues on it, with 2 the
 * exchanges share one with the reductions, from 3 each kind has its own
 * (smoe_sim_shape.reduce_engine may move the reductions from 2). */
int smoe_sim_device_engines(const smoe_hw *hw);
/* A device's HBM bytes (hbm_bytes over devices_per_chip; a cpu profile's:
 * a rank's memory); 0 where the profile gives none. */
double smoe_sim_device_hbm(const smoe_hw *hw);

typedef struct smoe_sim_model smoe_sim_model;

/* The step model of cfg's model on plan's mesh, hw and shape. A cpu
 * profile measured with progress only inside MPI calls (hw->cpu.progress
 * "calls") on a plan whose gathers cross hosts is refused (SMOE_EINVAL, one
 * line): the model's links move data all along (progress "thread"), and a
 * link that moves only at the ranks' polls is not modelled. */
SMOE_MUST_CHECK
smoe_status smoe_sim_model_build(const smoe_config *cfg, const smoe_plan *plan,
                                 const smoe_hw *hw, const smoe_sim_shape *shape,
                                 smoe_sim_model **out, smoe_err *err);
void smoe_sim_model_free(smoe_sim_model *m);
/* The cross-node part of weight gather g (the cost model's one-round
 * gather, cost.c coll_at): over its stages (one per gathered dim, the
 * buffer growing stage by stage, at `scale` times its bytes), the bytes a
 * device receives from members on other nodes of devices_per_node devices
 * and the cross-node steps (members' nodes - 1 per stage). */
void smoe_sim_gather_far(const smoe_gather *g, const smoe_mesh *m, double devices_per_node,
                         double scale, double *far_bytes, double *far_steps);
/* Its within-node part on cpu profiles, on the same terms: the bytes from
 * members on the device's node, scaled as coll_at times them at
 * ici_bandwidth / 2 (received bytes x (node members - 1) / (members - 1)
 * per stage), and the within-node latency steps (node members - 1 per
 * stage). */
void smoe_sim_gather_near(const smoe_gather *g, const smoe_mesh *m, double devices_per_node,
                          double scale, double *near_bytes, double *near_steps);
/* Modelled compute seconds of one layer of a kind, forward and backward
 * (0 when the model has no layer of that kind). */
void smoe_sim_model_compute(const smoe_sim_model *m, int kind, double *fwd, double *bwd);
int smoe_sim_model_has_kind(const smoe_sim_model *m, int kind);
/* Replace a layer kind's modelled compute by measured seconds (a profile):
 * the forward phases scaled to sum to fwd, the backward's (policy and full
 * remat alike) to bwd. Values < 0 leave that pass as modelled. */
void smoe_sim_model_set_compute(smoe_sim_model *m, int kind, double fwd, double bwd);

/* A schedule. distance (may be NULL) gives, per layer kind and weight, a
 * prefetch level: 0 = gathered just before use; level L > 0 prefetches
 * (L - 1) % 4 + 1 quarters of the weight (L - 1) / 4 + 1 layers ahead, the
 * rest just before use. With distance NULL every weight is prefetched
 * prefetch_depth layers ahead (0..SMOE_SIM_MAX_DEPTH). Either is turned
 * into a smoe_schedule (below) unless `schedule` is given. */
#define SMOE_SIM_MAX_WEIGHTS 128
#define SMOE_SIM_MAX_LEVEL 16
/* What executes the schedule: the request's choice, never the profile's
 * (the profile says what the hardware is; on a cpu profile its CPU model
 * applies whichever executor runs). 0 is no choice: smoe_sim_run refuses
 * it.
 *   XLA_SCAN      XLA's own scan (the baseline): the schedule's prefetches
 *                 (depth 0: none) in XLA's dataflow, each op waiting only for
 *                 its own weights: the routed experts' weights gathered in
 *                 program order at the MoE block's entry (after attention
 *                 and the router), the down projection's behind the up
 *                 projections; each weight's gradient reduce-scattered in
 *                 the dtype its gather moved as the backward produces it
 *                 (with its transpose); on a shared engine an expert
 *                 exchange goes ahead of the queued gathers.
 *   XLA_PREFETCH  smoe's schedule (prefetch_depth, the planner's levels or
 *                 `schedule`) in XLA's dataflow, as XLA_SCAN waits and
 *                 queues, every gather issued at its point (what is not
 *                 prefetched at the layer's start); the gradients held from
 *                 the layer's start to its reductions' end, reduced as
 *                 stored.
 *   MAXTEXT       MaxText's prefetch_fsdp_weights (layers/fsdp_prefetch.py),
 *                 per layer stack: the forward's first gather issued at the
 *                 step's start (it depends only on the parameters), then
 *                 W(k+1) during layer k; the backward's first two gathers
 *                 fenced behind the stack's incoming gradient (an
 *                 optimization barrier), then W(k-1) during layer k; W(k),
 *                 W(k-1) and dW(k) live until dW(k)'s reduce-scatter;
 *                 weights gathered as stored (weight_dtype: the pipeline
 *                 gathers the nnx.Param leaves, the layers cast after); the
 *                 backward always rematerialises the layer in full and only
 *                 layer inputs are saved; the waits as XLA's dataflow's, the
 *                 shared engine in issue order. Its own issue points, not
 *                 the schedule's.
 *   RUNTIME       smoe's runtime, as smoe train executes a schedule: its
 *                 entries in list order on a pool of (max distance + 2)
 *                 layer buffers, a layer waiting for all its weights, the
 *                 backward in smoe's model's op order (the shared experts'
 *                 transpose first), the gradients held from the layer's
 *                 start to its reductions' end, reduced as stored.
 * XLA_PREFETCH and RUNTIME gather in the compute dtype (the weights cast
 * before the gather), or in smoe_sim_shape.wire_bytes; XLA_SCAN in the
 * compute dtype. */
typedef enum smoe_sim_executor {
    SMOE_SIM_EXEC_NONE = 0,
    SMOE_SIM_EXEC_XLA_SCAN,
    SMOE_SIM_EXEC_XLA_PREFETCH,
    SMOE_SIM_EXEC_MAXTEXT,
    SMOE_SIM_EXEC_RUNTIME
} smoe_sim_executor;
/* An executor's name in smoe sim's output: "xla_scan", "xla_prefetch",
 * "maxtext", "smoe_runtime"; NULL for NONE or out of range. */
const char *smoe_sim_executor_name(smoe_sim_executor e);

typedef struct smoe_sim_sched {
    smoe_sim_executor executor;
    int prefetch_depth;
    int legacy;           /* pre-fix plan: residual co-axes gathered at use,
                             the weights as stored */
    int shared_engine;    /* gathers queue with the all-to-all and reductions */
    const unsigned char (*distance)[SMOE_SIM_MAX_WEIGHTS]; /* [kind][weight] */
    /* Bytes per element the gathers move, and with them the gradients'
     * reductions (a reduce-scatter is its gather's transpose) on XLA's scan
     * and MaxText's path: 0 = the executor's own (MAXTEXT and legacy: as
     * stored, weight_dtype; the others: the compute dtype). Other values
     * scale the gathers' bandwidth parts from the stored dtype's (legacy
     * gathers stay as stored). */
    int gather_bytes;
    /* all but MAXTEXT: the schedule to run (built for the same model; may
     * be NULL: then built from distance or prefetch_depth) */
    const struct smoe_schedule *schedule;
} smoe_sim_sched;

typedef struct smoe_sim_result {
    double step_s, compute_s, exposed_gather_s, residual_s, a2a_s, gather_busy_s;
    double exposed_top_s; /* of exposed_gather_s: the waits for the top-level
                             (embedding and head) weights; the rest is the
                             decoder layers' */
    double reduce_wait_s;
    double issued_bytes;  /* gathered bytes issued by the schedule (layers) */
    double peak_hbm_bytes;
    /* the peak's breakdown: for smoe's runtime executor each class's own
     * peak; for the others what is live at the peak's instant (a peak in
     * the forward has no mem_grads) */
    double mem_params, mem_grads, mem_optimizer, mem_gathered, mem_activations;
    /* of mem_gathered: the top-level weights and their gradients, held all
     * step by smoe's runtime executor (0 for the other executors, which
     * count them only while in use) */
    double mem_top;
} smoe_sim_result;

/* Simulate one step of s's executor. trace (may be NULL) receives the
 * timeline: lanes as in smoe train's traces (compute, gathers,
 * all-to-all/reductions, waits). SMOE_EINVAL: no executor, a depth out of
 * range, a schedule of other layers or weights; SMOE_ENOMEM. */
SMOE_MUST_CHECK
smoe_status smoe_sim_run(const smoe_sim_model *m, const smoe_sim_sched *s,
                         smoe_sim_result *r, smoe_trace *trace);

/* Memory-budgeted prefetch for executor exec (XLA_PREFETCH or RUNTIME,
 * the executors of smoe's schedules; others: SMOE_EINVAL): choose per
 * layer kind and weight a prefetch level minimising the exposed gather
 * wait with peak HBM <= budget (greedy on wait saved per byte, then
 * checked against uniform depths). The greedy path is the Pareto curve: up
 * to max_points (peak, wait) points in *curve. A budget below the
 * no-prefetch peak gives no prefetch (*feasible = 0). */
typedef struct smoe_sim_point {
    double peak_hbm_bytes, exposed_gather_s, step_s;
} smoe_sim_point;
SMOE_MUST_CHECK
smoe_status smoe_sim_plan_budget(const smoe_sim_model *m, smoe_sim_executor exec,
                                 int shared_engine, double budget,
                                 unsigned char distance[][SMOE_SIM_MAX_WEIGHTS],
                                 smoe_sim_result *best, int *feasible,
                                 smoe_sim_point *curve, int max_points, int *n_points);
/* The same with whole weights only (levels 0, 4, 8: no quarter chunks), as
 * smoe train executes them. */
smoe_status smoe_sim_plan_budget_whole(const smoe_sim_model *m, smoe_sim_executor exec,
                                       int shared, double budget,
                                       unsigned char distance[][SMOE_SIM_MAX_WEIGHTS],
                                       smoe_sim_result *best, int *feasible);

/* ---- the prefetch schedule as data ----
 * Units are layers in use order: forward 0..L-1, then backward L..2L-1
 * (unit u is layer 2L-1-u); layers 0..n_dense-1 are dense (kind 0), the
 * rest MoE (kind 1). For each (unit, weight, chunk range) the schedule says
 * when its gather is issued and when its buffer frees; chunks are quarters
 * of a weight (SMOE_SCHED_CHUNKS). Entries are in issue order: by issue
 * point, then unit, weight and chunk. The simulator consumes a schedule,
 * smoe train executes one, and both come from the same builders: a uniform
 * depth (every weight `depth` layers ahead) or the planner's levels. */
#define SMOE_SCHED_CHUNKS 4
#define SMOE_SCHED_NAME 160

typedef struct smoe_sched_gather {
    int unit;    /* the unit that uses it */
    int weight;  /* index into the unit's kind's names */
    int chunk0, nchunks; /* chunks [chunk0, chunk0 + nchunks) of SMOE_SCHED_CHUNKS */
    int issue;   /* -1: at the step's start; u < unit: when unit u's compute
                    starts; == unit: just before use */
    int free;    /* the unit after whose compute the buffer frees (the
                    backward: once that unit's gradient reductions end) */
} smoe_sched_gather;

typedef struct smoe_schedule {
    int L, n_dense;
    int nweights[2];                                  /* per kind */
    char names[2][SMOE_SIM_MAX_WEIGHTS][SMOE_SCHED_NAME]; /* plan paths */
    int depth;          /* the uniform depth it was built from, or -1 (levels) */
    double budget;      /* the memory budget per rank it was planned for (bytes),
                           or 0; smoe train holds every tracked class under it */
    int legacy;         /* the plan it gathers by: 0 co-axis, 1 the pre-fix legacy
                           plan (residual co-axes gathered again just before use) */
    char note[200];     /* how it was chosen (the budgeted planner's words), or "" */
    char progress[16];  /* the profile's progress mode (smoe_hw.cpu.progress) the
                           prediction is for: smoe train refuses to run it
                           under the other one; "" = not stated */
    /* the simulator's prediction (0: none) */
    double peak_bytes, exposed_s, step_s;
    int n;
    smoe_sched_gather *g; /* (n) in issue order; owned */
} smoe_schedule;

/* Build a schedule for L layers (n_dense dense first) with the weights
 * `names[kind][0..nweights[kind])`: from levels when not NULL (per kind
 * and weight: 0 = gathered just before use; level v > 0 prefetches
 * (v - 1) % 4 + 1 chunks (v - 1) / 4 + 1 layers ahead, the rest at use),
 * else every weight whole `depth` layers ahead (0 = at use; a prefetch
 * point before the step's first unit is the step's start). SMOE_EINVAL for
 * a depth outside 0..SMOE_SIM_MAX_DEPTH or bad sizes, SMOE_ENOMEM.
 * *out is freed with smoe_schedule_free. */
smoe_status smoe_schedule_build(int L, int n_dense, const int nweights[2],
                                const char *const *names[2], int depth,
                                const unsigned char (*levels)[SMOE_SIM_MAX_WEIGHTS],
                                smoe_schedule **out, smoe_err *err);
/* The same for the layers and weights of a step model. */
smoe_status smoe_schedule_for_model(const smoe_sim_model *m, int depth,
                                    const unsigned char (*levels)[SMOE_SIM_MAX_WEIGHTS],
                                    smoe_schedule **out, smoe_err *err);
/* The schedule of a uniform depth for smoe train's model of plan: the
 * parameters of the stacks decoder/dense_layers/ (kind 0) and
 * decoder/moe_layers/ (kind 1), in plan order, gathered whole `depth`
 * layers ahead by the plan `legacy` names. SMOE_EINVAL for a depth outside
 * 0..SMOE_SIM_MAX_DEPTH or a plan without layers; SMOE_ENOMEM. */
SMOE_MUST_CHECK
smoe_status smoe_schedule_for_plan(const smoe_plan *plan, int depth, int legacy,
                                   smoe_schedule **out, smoe_err *err);
/* The budgeted planner's schedule for smoe train (whole weights, smoe's
 * runtime executor on hw; the run's batch and seq per rank, no remat,
 * float32) for `budget` bytes per rank. act_bytes: the activations the run
 * tracks (train.h: smoe_train_act_bytes); with them the executor counts
 * every class as the run does, so the planner plans against the budget
 * itself. Sets budget, legacy, the prediction and note. SMOE_EINVAL (no profile,
 * a model the simulator cannot build), SMOE_ENOMEM. */
SMOE_MUST_CHECK
smoe_status smoe_schedule_for_budget(const smoe_config *cfg, const smoe_plan *plan,
                                     const smoe_hw *hw, int64_t batch, int64_t seq,
                                     int64_t budget, int64_t act_bytes, int legacy,
                                     smoe_schedule **out, smoe_err *err);
/* An empty schedule with n entries (zeroed) for a reader to fill. */
smoe_schedule *smoe_schedule_alloc(int n);
/* Check a schedule read from a file: sizes, every (unit, weight) covered
 * once by chunk ranges that tile [0, SMOE_SCHED_CHUNKS), issue points in
 * -1..unit, free == unit, entries in issue order. SMOE_EINVAL names the
 * field ("gathers[12].issue"). */
smoe_status smoe_schedule_check(const smoe_schedule *s, smoe_err *err);
/* Match a schedule's weight names with a model's: names[kind][0..n[kind])
 * are the model's layer weights of each kind (plan paths; kind 0 dense, 1
 * MoE). A schedule runs on the model only when, for each kind, its names
 * are the model's, each exactly once, in any order (a name given twice
 * leaves another weight never gathered). map (may be NULL) gets, per kind
 * and schedule index, the model's index. SMOE_EINVAL names the field and
 * the weight: one that is not the model's, one named twice (and the one it
 * leaves out), or one missing. Pure. */
SMOE_MUST_CHECK
smoe_status smoe_schedule_match(const smoe_schedule *s, const int n[2],
                                const char *const *names[2],
                                int map[2][SMOE_SIM_MAX_WEIGHTS], smoe_err *err);
/* The farthest issue distance in layers (a point -1 counts as unit + 1). */
int smoe_schedule_max_distance(const smoe_schedule *s);
void smoe_schedule_free(smoe_schedule *s);

/* ---- schedule files (schema in docs/formats.md, "Schedule files"):
 * written by smoe sim --schedule-out, read by smoe train --schedule */
#define SMOE_SCHEDULE_FORMAT "smoe-schedule"
#define SMOE_SCHEDULE_VERSION 1
extern const char *const smoe_schedule_kinds[2]; /* weights.dense, weights.moe */
/* s as the file's JSON text with source.hardware `hardware` (UTF-8), or
 * NULL when out of memory; the caller free()s it. Pure. */
char *smoe_schedule_json(const smoe_schedule *s, const char *hardware);
/* Read the file `path` (read and parse return SMOE_EINVAL with where = the
 * file, or `name`, and the first bad field in the message; SMOE_ENOMEM);
 * *out (NULL on error) is freed with smoe_schedule_free. */
SMOE_MUST_CHECK
smoe_status smoe_schedule_read(const char *path, smoe_schedule **out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_schedule_parse_text(const char *text, size_t n, const char *name,
                                     smoe_schedule **out, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
