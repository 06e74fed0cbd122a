/* MaxText's memory model (src/sched/mxmem.c) by hand: the activation
 * sizes of a layer kind from its dimensions and remat policy, and the
 * lifetimes of the embedding, head, logits, gradients and activations on
 * one step's timeline, with the peak's breakdown read at one instant.
 * usage: test_sim_mxmem */
#include "../src/sched/sched_impl.h"
#include "check.h"

#include <math.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* A small GQA / MLA layer: 2 tokens (batch 1 x seq 2) of emb 4 in 2-byte
 * elements, 2 heads of 3, 1 kv head, mlp 5; MoE: 8 experts, top-2,
 * expert mlp 3, one shared expert. */
static smoe_dims small_dims(void)
{
    smoe_dims d;
    memset(&d, 0, sizeof d);
    d.emb = 4;
    d.heads = 2;
    d.head_dim = 3;
    d.kv_heads = 1;
    d.mlp = 5;
    d.experts = 8;
    d.topk = 2;
    d.moe_mlp = 3;
    d.moe_in = 4;
    d.shared_experts = 1;
    return d;
}

static void sizes(const smoe_dims *d, smoe_remat remat, int moe, double ep, sim_kind *k)
{
    smoe_sim_shape sh = { .batch = 1, .seq = 2, .remat = remat, .ring_of_experts = ep < 0 };
    ep = fabs(ep);
    memset(k, 0, sizeof *k);
    k->moe = moe;
    k->act_input = 2 * 4 * 2; /* T x emb x 2 (cost.c) */
    sim_mx_sizes(d, &sh, 2, ep, k);
}

static void test_sizes(void)
{
    smoe_dims d = small_dims();
    sim_kind k;
    /* dense: q 2x3 = 6, k + v 2 x 1x3 = 6, context 6: attention 2 x 18 x 2
     * = 72; mlp 2 x (3 x 5 + 4) x 2 = 76. Forward max 76, backward 148.
     * minimal: q, k, v, out_proj 2 x (6 + 6 + 4) x 2 = 64, wi_0, wi_1, wo
     * 2 x (10 + 4) x 2 = 56: 120 beside the input (16) */
    sizes(&d, SMOE_REMAT_FULL, 0, 1, &k);
    CHECKF(NEAR(k.act_mx_fwd, 76) && NEAR(k.act_mx_res, 148) && NEAR(k.act_mx_saved, 16),
           "dense full: fwd %g res %g saved %g, expected 76 148 16", k.act_mx_fwd, k.act_mx_res,
           k.act_mx_saved);
    sizes(&d, SMOE_REMAT_DOTS, 0, 1, &k);
    CHECKF(NEAR(k.act_mx_saved, 136), "dense minimal saved %g, expected 136", k.act_mx_saved);
    sizes(&d, SMOE_REMAT_NONE, 0, 1, &k);
    CHECKF(NEAR(k.act_mx_saved, 164), "dense none saved %g, expected 164", k.act_mx_saved);
    /* MoE at EP 4: the ragged buffer's worst case, 2 x 2 x min(4, 8/2) =
     * 16 rows: 16 x (2 x 4 + 3 x 3) x 2 = 544; shared 2 x (3 x 3 + 4) x 2
     * = 52: 596. minimal: wi_0 and wo 16 x (3 + 4) x 2 = 224 and the
     * shared expert's 2 x (2 x 3 + 4) x 2 = 40, beside attention's 64 */
    sizes(&d, SMOE_REMAT_DOTS, 1, 4, &k);
    CHECKF(NEAR(k.act_mx_fwd, 596) && NEAR(k.act_mx_res, 668),
           "moe ep 4: fwd %g res %g, expected 596 668", k.act_mx_fwd, k.act_mx_res);
    CHECKF(NEAR(k.act_mx_saved, 16 + 64 + 264), "moe minimal saved %g, expected 344",
           k.act_mx_saved);
    /* EP 8 is capped at experts / topk = 4: the same 16 rows; no EP: the 4
     * routed rows, 4 x 17 x 2 + 52 = 188 */
    sizes(&d, SMOE_REMAT_FULL, 1, 8, &k);
    CHECKF(NEAR(k.act_mx_fwd, 596), "moe ep 8: fwd %g, expected 596", k.act_mx_fwd);
    sizes(&d, SMOE_REMAT_FULL, 1, 1, &k);
    CHECKF(NEAR(k.act_mx_fwd, 188), "moe ep 1: fwd %g, expected 188", k.act_mx_fwd);
    /* ring of experts at EP 8 (a negative ep here): every shard's 2 x 2
     * rows gathered and permuted whole, 32 rows: 32 x 17 x 2 + 52 = 1140 */
    sizes(&d, SMOE_REMAT_FULL, 1, -8, &k);
    CHECKF(NEAR(k.act_mx_fwd, 1140), "moe ring ep 8: fwd %g, expected 1140", k.act_mx_fwd);
    /* MLA: q 2 x (2 + 1) = 6, k 6 and v 2 x 2 = 4, context 4: attention
     * 2 x 20 x 2 = 80; the mlp's 76 is the forward's max */
    d.mla = 1;
    d.qk_nope = 2;
    d.qk_rope = 1;
    d.v_head = 2;
    sizes(&d, SMOE_REMAT_FULL, 0, 1, &k);
    CHECKF(NEAR(k.act_mx_res, 80 + 76), "mla res %g, expected 156", k.act_mx_res);
}

/* One dense layer, one weight of 100 gathered bytes (1 s), forward 3 s,
 * backward 6 s; the embedding's table 10 bytes and the head's 20, their
 * gathers one 2 s block at 0; lookup 1 s, head 2 s, its backward 1 s, the
 * top-level reduce-scatter 1 s; logits 7 bytes; gradients 50, parameters
 * 1000, optimizer 2000; activations: input 4, forward 8, residuals 16. */
static smoe_sim_model one_layer(void)
{
    smoe_sim_model m;
    memset(&m, 0, sizeof m);
    m.hw.kind = SMOE_HW_TPU;
    m.hw.collective_engines = 4;
    m.L = 1;
    m.nkinds = 2;
    sim_kind *k = &m.k[0];
    k->nw = 1;
    k->w[0] = (sim_w){ .name = "w", .pre_s = 1, .rs_cast_s = 1, .bytes = 100 };
    k->bytes = 100;
    k->fwd_pre = 3;
    k->bwd_pre = 6;
    k->act_input = 4;
    k->act_mx_fwd = 8;
    k->act_mx_res = 16;
    k->act_mx_saved = 4;
    m.top_gather_s = 2;
    m.top_embed_s = 1;
    m.top_bytes = 30;
    m.top_embed_bytes = 10;
    m.embed_fwd_s = 1;
    m.head_s = 2;
    m.embed_bwd_s = 1;
    m.top_rs_s = 1;
    m.logits_bytes = 7;
    m.mem_grads = 50;
    m.mem_params = 1000;
    m.mem_optimizer = 2000;
    return m;
}

static void run(const smoe_sim_model *m, smoe_sim_executor e, smoe_sim_result *r)
{
    smoe_sim_sched s;
    memset(&s, 0, sizeof s);
    s.executor = e;
    CHECK(smoe_sim_run(m, &s, r, NULL) == SMOE_OK);
}

static void expect_peak(const char *what, const smoe_sim_result *r, double live, double gathered,
                        double act, double grads)
{
    CHECKF(NEAR(r->peak_hbm_bytes, 3000 + live) && NEAR(r->mem_gathered, gathered) &&
               NEAR(r->mem_activations, act) && NEAR(r->mem_grads, grads) &&
               NEAR(r->mem_params, 1000) && NEAR(r->mem_optimizer, 2000),
           "%s: peak %g (gathered %g, activations %g, gradients %g), expected %g (%g, %g, %g)",
           what, r->peak_hbm_bytes, r->mem_gathered, r->mem_activations, r->mem_grads, 3000 + live,
           gathered, act, grads);
}

/* XLA's scan: top-level gathers [0,2], lookup [2,3], w [3,4], forward
 * [4,7], head [7,9], w [9,10], backward [10,16], its reduce-scatter
 * [16,17], the embedding's backward [16,17], the top-level reduce-scatter
 * [17,18]: the step, 18. Live: the embedding's 10 in [0,3] and the head's
 * 20 in [0,9]; w in [3,7] and [9,16], its gradient [16,17]; the input 4
 * from 4 to 16, the forward's 8 in [4,7], the backward's 16 in [10,16];
 * the logits and their gradient 14 in [7,9]; from 9 the head's gradient
 * 20 and the gradients 50; the embedding's gradient 10 in [16,18]. At
 * [3,4]: 130, [4,7]: 142, [7,9]: 38, [9,10]: 174, [10,16]: 190 (gathered
 * 120, activations 20, gradients 50), [16,17]: 180. */
static void test_lifetimes(void)
{
    smoe_sim_model m = one_layer();
    smoe_sim_result r;
    run(&m, SMOE_SIM_EXEC_XLA_SCAN, &r);
    CHECKF(NEAR(r.step_s, 18), "step %g, expected 18", r.step_s);
    expect_peak("xla", &r, 190, 120, 20, 50);
    /* the step waits [0,2] for the top-level weights (nothing runs before
     * the embedding), then 1 s for each of w's gathers, [3,4] and [9,10]:
     * 4 s exposed, of it 2 s for the top-level weights */
    CHECKF(NEAR(r.exposed_top_s, 2) && NEAR(r.exposed_gather_s, 4),
           "xla: exposed %g, of it top-level %g, expected 4 and 2", r.exposed_gather_s,
           r.exposed_top_s);
    /* logits of 100: [7,9] holds the head's 20, the input 4 and 200, no
     * gradients yet (they exist from the backward's start) */
    m.logits_bytes = 100;
    run(&m, SMOE_SIM_EXEC_XLA_SCAN, &r);
    expect_peak("logits", &r, 224, 20, 204, 0);
    /* an embedding of 500 (top 520): its gathered table dies with the
     * lookup, so [0,3] holds 520; its gradient from its backward's start
     * (16) beside w's (until 17), the head's and the gradients: 670 */
    m = one_layer();
    m.top_embed_bytes = 500;
    m.top_bytes = 520;
    run(&m, SMOE_SIM_EXEC_XLA_SCAN, &r);
    expect_peak("embedding", &r, 670, 620, 0, 50);
    /* a policy that keeps 60 (the input and 56 more): held from the
     * forward to the backward's end, which recomputes max(0, 16 - 56) = 0
     * more: [10,16] holds 120 gathered, 60 and 50 */
    m = one_layer();
    m.k[0].act_mx_saved = 60;
    run(&m, SMOE_SIM_EXEC_XLA_SCAN, &r);
    expect_peak("saved 60", &r, 230, 120, 60, 50);
    /* no activations: a weight's gradient lives from its transpose (16)
     * until its reduce-scatter ends (17) beside the head's, the
     * embedding's and the gradients: 100 + 20 + 10 + 50 = 180 over the
     * backward's 170 (w 100, the head's 20, the gradients 50) */
    m = one_layer();
    m.k[0].act_input = m.k[0].act_mx_fwd = m.k[0].act_mx_res = m.k[0].act_mx_saved = 0;
    run(&m, SMOE_SIM_EXEC_XLA_SCAN, &r);
    expect_peak("dW until its reduce-scatter", &r, 180, 130, 0, 50);
    m = one_layer();
    m.k[0].act_mx_saved = 60;
    /* MaxText's prefetch path keeps the input alone whatever the policy:
     * its activations at the peak as with a policy of the input alone */
    smoe_sim_result full;
    m.k[0].w[0].pre_stored_s = 1;
    m.k[0].w[0].rs_s = 1;
    m.k[0].w[0].bytes_stored = 100;
    m.k[0].bytes_stored = 100;
    m.k[0].bwd_full_pre = 6;
    run(&m, SMOE_SIM_EXEC_MAXTEXT, &r);
    m.k[0].act_mx_saved = 4;
    run(&m, SMOE_SIM_EXEC_MAXTEXT, &full);
    CHECKF(NEAR(r.peak_hbm_bytes, full.peak_hbm_bytes) && NEAR(r.mem_activations, 20),
           "maxtext: peak %g / %g, activations %g, expected equal and 20", r.peak_hbm_bytes,
           full.peak_hbm_bytes, r.mem_activations);
}

/* smoe's runtime keeps its own count (smoe train's): the same model under
 * it is unaffected by MaxText's terms. */
static void test_runtime_untouched(void)
{
    smoe_sim_model m = one_layer();
    smoe_sim_result a, b;
    run(&m, SMOE_SIM_EXEC_RUNTIME, &a);
    m.logits_bytes = 1e6;
    m.k[0].act_mx_res = 1e6;
    m.k[0].act_mx_saved = 1e6;
    m.top_embed_bytes = 0;
    run(&m, SMOE_SIM_EXEC_RUNTIME, &b);
    CHECKF(a.peak_hbm_bytes == b.peak_hbm_bytes && a.mem_grads == 50,
           "runtime: peak %g then %g, gradients %g", a.peak_hbm_bytes, b.peak_hbm_bytes,
           a.mem_grads);
}

int main(void)
{
    test_sizes();
    test_lifetimes();
    test_runtime_untouched();
    return check_report();
}
