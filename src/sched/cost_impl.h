/* The step model's cost primitives, shared by cost.c (the model and its
 * collectives) and layer_cost.c (a layer's compute). Internal to sched. */
#ifndef SMOE_SCHED_COST_IMPL_H
#define SMOE_SCHED_COST_IMPL_H

#include "sched_impl.h"

typedef struct cost {
    const smoe_hw *hw;
    const smoe_mesh *mesh;
    double flops, small_flops, hbm, ew, ab, overhead;
    double eff; /* compute_efficiency: > 0 times every FLOP at peak x eff,
                   the dense matmuls at gemm_efficiency where the profile has
                   it (cost_dense); elementwise passes are bytes at `ew` on
                   every profile (cost_ew) */
    double ici, dcn; /* one-direction bytes/s per device */
    double ici_lat;  /* s per within-node step */
    double dcn_lat;  /* s per cross-node step */
    double *net;     /* when set, coll() adds the part of its time that is
                        not work of the cores but the network's (cpu profiles) */
    sim_attn_mix attn; /* the layers' attention kinds (sim_attention_span;
                          all 0: one kind, the causal mask's pairs) */
} cost;

/* FLOP rate of a matmul: the peak, or on cpu profiles interpolated on the
 * log of the smallest dimension between a 64-wide and a 512-wide one. */
double cost_rate(const cost *c, double m, double k, double n);
/* An m x k by k x n matmul, weights of wb bytes an element (cost.c). */
double cost_mm(const cost *c, double m, double k, double n, double wb);
/* An elementwise pass over elems elements, `passes` times (cost.c). */
double cost_ew(const cost *c, double elems, double passes);
/* A collective moving `bytes` per device over `axes` (cost.c coll_at). */
double cost_coll(const cost *c, const smoe_axes *axes, double bytes, double bw_override);

/* layer_cost.c: one layer kind's compute and activations into k (e_local
 * experts a device); the dense matmuls' cost (quantized with fp8); the
 * head's forward and backward over T tokens of E into V logits in
 * `tiles` tiles. */
void cost_layer(const cost *c, const smoe_dims *d, const smoe_sim_shape *sh, double e_local,
                sim_kind *k);
cost cost_dense(const cost *c, int fp8);
double cost_head(const cost *c, double T, double E, double V, double tiles);

/* Scannable blocks (block.c): the sub layers of a stacked layer of
 * `stack` in the plan (decoder/<stack>/layers_<k>/...) and those with
 * routed experts; a kind's costs times sub decoder layers; an MoE kind's
 * as n_moe MoE layers and n_dense layers of kind `dense`. */
void sim_block_moe_layers(const smoe_plan *plan, const char *stack, int *sub, int *moe);
void sim_block_scale(sim_kind *k, double sub);
void sim_block_mix(sim_kind *moe, const sim_kind *dense, double n_moe, double n_dense);

#endif
