/* Internal to the sched module: the step model the simulator runs. */
#ifndef SMOE_SCHED_IMPL_H
#define SMOE_SCHED_IMPL_H

#include "smoe/sched.h"

/* One prefetched weight of a layer kind, times in seconds, bytes per
 * device. */
typedef struct sim_w {
    const char *name;
    double pre_s;        /* co-axis gather (all stages) */
    double pre_legacy_s; /* legacy: the FSDP stages, prefetched */
    double res_legacy_s; /* legacy: the residual co-axes, at use */
    double pre_stored_s; /* the same gather in the stored dtype */
    double rs_s;         /* gradient reduce-scatter + all-reduce (stored dtype) */
    double ar_s;         /* the all-reduce's part of rs_s */
    double rs_cast_s;    /* the same in the compute dtype: the transpose of a
                            gather of the cast weight (XLA's scan) */
    double ag_lat_s, rs_lat_s; /* the latency parts of pre_stored_s and rs_s
                            (the rest scales with the bytes a gather moves) */
    double pre_net, rs_net; /* the fractions of the gather's and of the
                            reduction's time spent on the network, not the
                            cores' own work (cpu profiles: 0 within a node,
                            where a collective is a copy by the cores) */
    double bytes;        /* gathered buffer, compute dtype */
    double bytes_stored; /* gathered buffer, stored dtype */
    double bytes_exec;   /* smoe's runtime's gathered buffer (the plan's
                            executable form: every live axis gathered but a
                            routed weight's expert), compute dtype; 0:
                            bytes */
    int routed;          /* a routed expert's weight: used by the experts phase */
    int down;            /* the routed down projection (wo): first used after
                            the up projections */
} sim_w;

/* A layer kind (dense or MoE). Compute is split around the expert
 * exchange: pre (attention, router, shared experts), the routed experts,
 * post (combine). */
typedef struct sim_kind {
    int moe;
    int nw;
    sim_w w[SMOE_SIM_MAX_WEIGHTS];
    double fwd_pre, fwd_exp, fwd_post;
    double bwd_pre, bwd_exp, bwd_post; /* with rematerialisation */
    double bwd_full_pre, bwd_full_exp, bwd_full_post; /* with full remat */
    double rc[3];                      /* the share of each phase's forward (pre,
                                          experts, post) the backward recomputes */
    double pre_shared;                 /* the shared experts' part of pre (0..1) */
    double a2a_s;                      /* one expert exchange */
    double permute_s;                  /* dispatch + combine of one forward pass */
    double bytes;                      /* gathered bytes of the layer */
    double bytes_stored;               /* the same in the stored dtype */
    double bytes_exec;                 /* smoe's runtime's buffers of the layer
                                          (0: bytes) */
    double act_saved;                  /* bytes kept per layer for the backward */
    double act_input;                  /* the layer input alone */
    double act_peak;                   /* transient bytes of one layer's backward */
    /* MaxText's memory model (mxmem.c, sim_mx_sizes): */
    double act_mx_fwd;   /* residual buffers live in the forward */
    double act_mx_res;   /* every residual of the layer (its backward) */
    double act_mx_saved; /* kept for the backward under the remat policy */
    double act_host;     /* offloaded to the host by a custom remat policy */
    double offload_s;    /* act_host over the host link, one way */
} sim_kind;

/* The op outputs the remat tensor names of `names` (bits 1 << smoe_rtensor)
 * save in a model of dimensions d, as bits of the canonical names: INPUT,
 * QUERY, KEY, VALUE, CONTEXT, OUT, MLPWI0, MLPWI1, MLPWO, MOE_WI0, MOE_WI1,
 * MOE_WO, Q_WA, KV_WA, MLA_Q, MLA_KV. The fused names become their parts
 * where the model fuses (fused_qkv: qkv_proj, else query_proj, key_proj,
 * value_proj; fused_mlp: mlpwi, else mlpwi_0, mlpwi_1); kv_proj is key
 * and value, attention_out the kernel's output as context is. */
unsigned sim_rt_canon(const smoe_dims *d, unsigned names);
/* Bytes per device of the canonical tensor t of one layer kind (k->moe),
 * T tokens in ab-byte elements, ep expert-parallel ways. */
/* MaxText's dense expert path (smoe_sim_shape.moe_capacity > 0): a
 * sequence's slots per expert (mxmem.c). */
double sim_moe_capacity(const smoe_dims *d, const smoe_sim_shape *sh);
/* The grouped matmuls' row tiles into sh->gmm_tm (keys_kernels.c): on the
 * sparse path on a TPU profile with megablox or tokamax's kernel; a tile
 * under 1 is refused at its key. Call after the MoE path is read. */
SMOE_MUST_CHECK smoe_status sim_gmm_tiles(const smoe_config *cfg, const smoe_hw *hw,
                                          smoe_sim_shape *sh, smoe_err *err);
/* Whether the routed weights are gathered quantized (sh->gmm_qag,
 * keys_kernels.c). Call after the quantization is read. */
SMOE_MUST_CHECK smoe_status sim_gmm_qag(const smoe_config *cfg, smoe_sim_shape *sh,
                                        smoe_err *err);
/* tokamax's own row tiles (sh->gmm_lut) of a grouped matmul of m rows
 * ([m, k] x g groups of [k, n]) into out: forward, dlhs, drhs. */
void sim_tokamax_tiles(double m, double k, double n, double g, int64_t out[3]);
/* A routed expert's weight, wherever it is sharded (unrolled.c): moe.py
 * RoutedMoE's wi_0, wi_1 and wo are the only kernels with the mlp_moe
 * axis, and hold exp (or, batch-split, expert_only) unless
 * shard_exp_on_fsdp or use_2d_fsdp_sharding lay them out without it; the
 * grouped matmuls are their only use. smoe_weight_routed is the plan's
 * test, the exp axis alone. */
int sim_expert_weight(const smoe_weight *w);
/* The rows of a device's routed buffer (mxmem.c), ep expert-parallel ways. */
double sim_routed_rows(const smoe_dims *d, const smoe_sim_shape *sh, double ep);
/* The attention kernel's backward into sh->attn_bwd (keys_kernels.c): on a
 * TPU profile, splash's fused or split backward. */
SMOE_MUST_CHECK smoe_status sim_attn_bwd(const smoe_config *cfg, const smoe_hw *hw,
                                         smoe_sim_shape *sh, smoe_err *err);
/* ... and a device's slots, experts x its sequences x capacity. */
double sim_moe_slots(const smoe_dims *d, const smoe_sim_shape *sh);
double sim_rt_bytes(const smoe_dims *d, const smoe_sim_shape *sh, double ab, double ep, int moe,
                    int t);

#define SIM_MAX_LAYERS 512

struct smoe_sim_model {
    smoe_hw hw;
    int L;
    unsigned char kind_of[SIM_MAX_LAYERS];
    int nkinds;
    sim_kind k[2];
    double top_gather_s, top_rs_s, top_bytes;
    double top_bytes_exec; /* smoe's runtime's top-level buffers (sim_w.bytes_exec;
                              0: top_bytes) */
    double top_embed_s;  /* of top_gather_s: the embedding's gather (the rest
                            is the head's: final norm, logits) */
    double top_head_net; /* the network's fraction of the head's gathers */
    double embed_fwd_s, embed_bwd_s, head_s;
    double optimizer_s;
    double mem_params, mem_grads, mem_optimizer;
    double shard_elems;   /* parameter elements on this device */
    double compute_bytes; /* activation element size */
    double weight_bytes;  /* stored weight element size (weight_dtype) */
    double wire_bytes;    /* smoe_sim_shape.wire_bytes (0: the compute dtype) */
    double mx_gather_bytes; /* smoe_sim_shape.mx_gather_bytes (0: as stored) */
    int reduce_engine;      /* smoe_sim_shape.reduce_engine (SMOE_REDUCE_*) */
    double act_runtime;   /* smoe_sim_shape.act_bytes (0: the estimate) */
    double top_embed_bytes; /* of top_bytes: the embedding's gathered table */
    double logits_bytes;    /* the logits of one step, per device (mxmem.c) */
    int use_compute; /* collectives are CPU work (cpu profiles) */
    double skew;     /* a sync point's wait for the last rank (cpu profiles) */
};

/* The layer of unit u of L layers: forward 0..L-1, backward L..2L-1 (the
 * schedule's units, sched.h). */
static inline int sim_unit_layer(int L, int u) { return u < L ? u : 2 * L - 1 - u; }

/* The transfers on the link between hosts in one pass (link.c): each
 * span, the part of the link it asks (1 fills it) and its engine. */
typedef struct sim_link {
    double *t0, *t1, *use;
    int *eng;
    int n;
} sim_link;
void sim_link_free(sim_link *l);
/* One pass of the event simulation (sim.c): compute segments take `rate`
 * times the model's (every-rank-busy) time, and every sync point waits
 * `skew` s for the last rank; with `overlap`, the part of the unit's
 * gathers that is not the cores' work (gather_core_fraction) runs during
 * that wait. */
typedef struct sim_pass {
    double rate, skew;
    int overlap;
    const sim_link *link; /* the pass before's transfers, shared at once (NULL:
                             each loses to those issued before it) */
    sim_link *keep;       /* this pass's transfers, kept for the next (NULL: not) */
} sim_pass;
typedef struct sim_pass_out {
    double work_s; /* the rank's CPU work at the every-rank-busy rate: the
                      model's compute plus the cores' part of its collectives */
    int nsync;     /* sync points (a unit's first gather, an expert exchange) */
} sim_pass_out;
smoe_status sim_run_pass(const smoe_sim_model *m, const smoe_sim_sched *s, const smoe_schedule *sc,
                         const sim_pass *p, smoe_sim_result *r, sim_pass_out *out,
                         smoe_trace *trace);

/* The CPU model's core sharing (cores.c): does m's step need it (a cpu
 * profile whose ranks had part of a core each, core_share < 1, on one
 * host)? Then sim_cores_step runs the event loop's passes on the cores'
 * terms in place of the one pass at the profile's rates. */
int sim_cores_shared(const smoe_sim_model *m);
smoe_status sim_cores_step(const smoe_sim_model *m, const smoe_sim_sched *s,
                           const smoe_schedule *sc, smoe_sim_result *r, smoe_trace *trace);
/* The link between hosts (link.c): do m's transfers share it (a cpu
 * profile with dcn_link_bandwidth)? Then sim_link_step runs the event
 * loop's passes that share it. */
int sim_link_shared(const smoe_sim_model *m);
smoe_status sim_link_step(const smoe_sim_model *m, const smoe_sim_sched *s,
                          const smoe_schedule *sc, smoe_sim_result *r, smoe_trace *trace);

/* The attention of a model's decoder layers in two kinds (attn_span.c):
 * [1] gemma4's global layers, with their own head widths, [0] the rest;
 * per kind the mean over its layers at S tokens a sequence of the
 * kernel's blocks over a causal mask's (span: 1 for causal layers only)
 * and of the (query, key) pairs of the whole blocks each splash attention
 * kernel computes over a causal mask's S^2 / 2 (pairs). */
#define SIM_ATTN_KERNELS 3 /* splash's forward, dkv and dq kernels */
typedef struct sim_attn_mix {
    double share;          /* of the decoder layers, kind 1's */
    double span[2];        /* per kind: the forward's blocks */
    double pairs[2][SIM_ATTN_KERNELS]; /* per kind and splash kernel */
    int64_t head_dim[2], kv_heads[2];
    int no_value[2];       /* share_kv_projections: the keys serve as values */
} sim_attn_mix;
SMOE_MUST_CHECK
smoe_status sim_attention_span(const smoe_config *cfg, const smoe_dims *d, double S,
                               sim_attn_mix *out, smoe_err *err);

/* MaxText's unscanned decoder layers as one layer kind (unrolled.c):
 * the layer index of a weight path "decoder/layers_<i>/REST" (*rest =
 * REST), or -1; and x, one of n unrolled layers' weights, added to k as
 * 1/n of the weight of its REST (created at its first layer). */
int sim_unrolled_layer(const char *path, const char **rest);
SMOE_MUST_CHECK
smoe_status sim_unrolled_add(sim_kind *k, const sim_w *x, double n, smoe_err *err);
/* The unrolled layers of a plan built with scan_layers=false: *n of them
 * (which must be the model's `layers`), and *mlp their MLP's mean width
 * (the plan's mlp/wo kernels: gemma4_small's KV-sharing layers are twice
 * as wide; 0 without one); routed experts are refused. */
SMOE_MUST_CHECK
smoe_status sim_unrolled_count(const smoe_config *cfg, const smoe_plan *plan, int64_t layers,
                               int *n, double *mlp, smoe_err *err);

/* Members of the group over `axes` (each once, size-1 axes ignored) whose
 * device index is below dpn, i.e. on device 0's node; *g = the group size.
 * With several slices a node is at most a slice (dpn capped at the
 * devices per slice). Closed form, O(mesh axes). */
double sim_local_members(const smoe_mesh *m, const smoe_axes *axes, int64_t dpn, int64_t *g);
/* One stage of a collective over `axes` moving `bytes` into device 0: *g
 * members, *gl of them on its node, *near_bytes of the bytes from those
 * (bytes x (gl - 1) / (g - 1)), *far_bytes from the others (bytes x
 * (g - gl) / (g - 1)) over *far_steps cross-node steps (g / gl - 1). The
 * one owner of these terms (coll_at, smoe_sim_gather_far, _near). */
void sim_stage_far(const smoe_mesh *m, const smoe_axes *axes, double dpn, double bytes,
                   int64_t *g, double *gl, double *near_bytes, double *far_bytes,
                   double *far_steps);
/* A gather stage over ax of `local` bytes a member as smoe's runtime runs
 * it: one collective over ax on m moving b[0] (returns 0), or, where its
 * group spans slices and shares them (smoe_axes_levels), one across the
 * slices over lv->across moving b[0], then one within over lv->within
 * moving b[1], both on the mesh of parts pm (returns 1). (placement.c, as
 * the two above.) */
int sim_stage_levels(const smoe_mesh *m, const smoe_axes *ax, double local, smoe_levels *lv,
                     smoe_part_mesh *pm, double b[2]);

/* smoe train's prefetch executor as the simulator runs it (pool.c, cpu
 * profiles): entries in list order, a pool of (the schedule's max distance
 * + 2) layer buffers; times in seconds of the simulated step. */
typedef struct sim_pool {
    const smoe_schedule *sc;
    int n;           /* buffers */
    int next;        /* the first entry not started */
    int reached;     /* the last issue point reached (-1: the step's start) */
    int hold;        /* a backward unit without its gradient buffer yet: later
                      * units' entries wait (-1: none; train's prefetch.c) */
    double last;     /* the last entry's start */
    double held_t;   /* the entries up to point held_pt were held back at held_t
                      * for a buffer that frees later while another's release
                      * is not known yet (held_pt -2: none) */
    int held_pt;
    double *sfree;   /* (n) when a buffer frees; INFINITY: held */
    int *uslot;      /* (units) a unit's buffer, or -1 */
} sim_pool;
typedef void (*sim_pool_start)(void *ud, const smoe_sched_gather *e, double at);
smoe_status sim_pool_init(sim_pool *p, const smoe_schedule *sc, int nunits);
void sim_pool_free(sim_pool *p);
/* At time t: start, in list order, the entries whose point is reached,
 * each when its unit has a buffer (start(ud, entry, when)); while hold >= 0
 * only that unit's entries and those listed before them. */
void sim_pool_issue(sim_pool *p, double t, sim_pool_start start, void *ud);
/* How long before the step's start (s, at the model's rates) smoe train
 * issues the entries at point -1 and the top-level gathers: the part of
 * the optimizer after the weights they gather. */
double sim_pool_lead(const smoe_sim_model *m, const smoe_schedule *sc);
/* Is a buffer free at t? */
int sim_pool_free_at(const sim_pool *p, double t);
/* Unit u's buffer frees at t (its compute, or its reductions, ended). */
void sim_pool_release(sim_pool *p, int u, double t);
/* A backward layer ready at t takes a gradient buffer: returns when it has
 * one (its index in *b); sim_pool_grad_done frees it at t. */
double sim_pool_grad(sim_pool *p, double t, int *b);
void sim_pool_grad_done(sim_pool *p, int b, double t);

/* MaxText's memory model's activation sizes of a layer kind (mxmem.c):
 * T tokens per device in `ab`-byte elements, `ep` ways of expert
 * parallelism. */
void sim_mx_sizes(const smoe_dims *d, const smoe_sim_shape *sh, double ab, double ep, sim_kind *k);


#endif
