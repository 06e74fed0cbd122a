/* A scannable block's unit: the decoder layers one stacked layer holds.
 *
 * MaxText's gemma4, gpt-oss, llama4, envy, qwen3-next and olmo3 decoders
 * scan a block of several decoder layers (decoders.py get_decoder_layers,
 * the *ScannableBlock classes, rematerialised as one): each stacked layer
 * of the plan is `sub` decoder layers, as decoder/<stack>/layers_<k>/...
 * A block whose layers interleave dense and MoE layers (llama4's and
 * envy's interleave_moe_layer_step: layer i is MoE when (i + 1) % step ==
 * 0, llama4.py determine_is_moe_layer) holds routed experts in some of
 * its sub layers only: its unit is those MoE layers and, for the rest,
 * dense layers of the model's MLP width (kind 0's costs), never sub MoE
 * layers. A unit's gathers are already the block's weights. */
#include <stdio.h>
#include <string.h>

#include "cost_impl.h"

/* Fields of a layer kind that grow with its decoder layers (the block
 * input, act_input, is kept once). */
#define BLOCK_FIELDS(k)                                                                          \
    { &(k)->fwd_pre, &(k)->fwd_exp, &(k)->fwd_post, &(k)->bwd_pre, &(k)->bwd_exp,              \
      &(k)->bwd_post, &(k)->bwd_full_pre, &(k)->bwd_full_exp, &(k)->bwd_full_post, &(k)->a2a_s, \
      &(k)->permute_s, &(k)->act_mx_res, &(k)->act_peak, &(k)->act_host, &(k)->offload_s }

/* The sub layer k of a path decoder/<stack>/layers_<k>/..., or -1. */
static int sub_layer(const smoe_weight *w)
{
    const char *p = strstr(w->path, "/layers_");
    int k = -1;
    if (p && sscanf(p, "/layers_%d/", &k) == 1 && k >= 0 && k < 64)
        return k;
    return -1;
}

void sim_block_moe_layers(const smoe_plan *plan, const char *stack, int *sub, int *moe)
{
    unsigned long long any = 0, routed = 0;
    for (int i = 0; stack && i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        int k = w->stack && strcmp(w->stack, stack) == 0 ? sub_layer(w) : -1;
        if (k < 0)
            continue;
        any |= 1ull << k;
        if (sim_expert_weight(w))
            routed |= 1ull << k;
    }
    *sub = __builtin_popcountll(any);
    *moe = __builtin_popcountll(routed);
}

void sim_block_scale(sim_kind *k, double sub)
{
    double *t[] = BLOCK_FIELDS(k);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        *t[i] *= sub;
    k->act_mx_saved = k->act_input + (k->act_mx_saved - k->act_input) * sub;
    k->act_saved = k->act_input + (k->act_saved - k->act_input) * sub;
}

void sim_block_mix(sim_kind *moe, const sim_kind *dense, double n_moe, double n_dense)
{
    /* the recomputed share and the shared experts' part of pre, as
     * amounts, before the phases are summed */
    double fwd0 = moe->fwd_pre * n_moe + dense->fwd_pre * n_dense;
    double rc0 = moe->fwd_pre * moe->rc[0] * n_moe + dense->fwd_pre * dense->rc[0] * n_dense;
    double shared = moe->fwd_pre * moe->pre_shared * n_moe;
    double saved = (moe->act_saved - moe->act_input) * n_moe +
                   (dense->act_saved - dense->act_input) * n_dense;
    double mx_saved = (moe->act_mx_saved - moe->act_input) * n_moe +
                      (dense->act_mx_saved - dense->act_input) * n_dense;
    double *t[] = BLOCK_FIELDS(moe);
    const double *d[] = BLOCK_FIELDS(dense);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        *t[i] = *t[i] * n_moe + *d[i] * n_dense;
    moe->act_saved = moe->act_input + saved;
    moe->act_mx_saved = moe->act_input + mx_saved;
    if (fwd0 > 0) {
        moe->rc[0] = rc0 / fwd0;
        moe->pre_shared = shared / fwd0;
    }
}
