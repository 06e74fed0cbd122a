/* The simulator against hand-computed schedules (two layers, known
 * durations), its memory accounting (static parts from a plan, live
 * gathered bytes), and the budgeted planner (a budget below one layer's
 * gathered weights gives no prefetch; an unlimited budget reaches the
 * exposed wait of unlimited depth). White-box: builds step models by
 * hand (test_sim_cpu.c: the cpu profiles' rules; test_sim_model.c: the
 * step model's terms from MaxText configurations).
 * usage: test_sim CONFIG_DIR */
#include "../src/sched/sched_impl.h"
#include "check.h"
#include "sim_testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)


static void test_hand_schedules(void)
{
    smoe_sim_model m = two_layers(4);
    smoe_sim_sched s;
    smoe_sim_result r;
    /* no prefetch: gather 2 before each of the four units; the last
     * reduce-scatter ends 1 s after the last backward */
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 27), "baseline step %g, expected 27", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 8), "baseline exposed %g, expected 8", r.exposed_gather_s);
    CHECKF(NEAR(r.compute_s, 18), "baseline compute %g, expected 18", r.compute_s);
    CHECKF(NEAR(r.gather_busy_s, 8), "baseline gather busy %g", r.gather_busy_s);
    CHECKF(NEAR(r.mem_gathered, 200), "baseline gathered peak %g, expected 200", r.mem_gathered);
    /* depth 1: only the first gather is exposed */
    s.prefetch_depth = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 21), "prefetch step %g, expected 21", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 2), "prefetch exposed %g, expected 2", r.exposed_gather_s);
    CHECKF(NEAR(r.mem_gathered, 300), "prefetch gathered peak %g, expected 300", r.mem_gathered);
    /* legacy at depth 1: 1 s prefetched, 1 s residual before every unit */
    s.legacy = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.residual_s, 4), "legacy residual %g, expected 4", r.residual_s);
    CHECKF(NEAR(r.step_s, 24), "legacy step %g, expected 24", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 5), "legacy exposed %g, expected 5", r.exposed_gather_s);
    /* one engine for everything: the reductions delay the later gathers
     * (RS of layer 1 [14, 15] ahead of nothing; same as dedicated here),
     * and a longer reduction shows the queueing */
    smoe_sim_model m1 = two_layers(1);
    m1.k[0].w[0].rs_s = 5;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    s.prefetch_depth = 1;
    CHECK(smoe_sim_run(&m1, &s, &r, NULL) == SMOE_OK);
    /* unit 3's gather was issued at 8 and ends at 10, before the RS of
     * unit 2 [14, 19]; then RS of unit 3 [20, 25] */
    CHECKF(NEAR(r.step_s, 25), "shared-engine step %g, expected 25", r.step_s);
    smoe_sim_model m4 = two_layers(4);
    m4.k[0].w[0].rs_s = 5;
    CHECK(smoe_sim_run(&m4, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 25), "dedicated step %g, expected 25", r.step_s);
    /* an MoE layer: compute split around two exchanges of 0.5 s */
    smoe_sim_model me = two_layers(4);
    me.kind_of[1] = 1;
    me.k[1] = me.k[0];
    me.k[1].moe = 1;
    me.k[1].fwd_pre = 1;
    me.k[1].fwd_exp = 1;
    me.k[1].fwd_post = 1;
    me.k[1].bwd_pre = 2;
    me.k[1].bwd_exp = 2;
    me.k[1].bwd_post = 2;
    me.k[1].a2a_s = 0.5;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&me, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.a2a_s, 2), "a2a %g, expected 2", r.a2a_s);
    CHECKF(NEAR(r.step_s, 29), "MoE baseline step %g, expected 29", r.step_s);
}

/* MaxText's prefetch family by hand: 4 layers in two stacks (0-1 dense,
 * 2-3 a second stack), one weight each: gathered as stored 2 s (cast: 1 s),
 * reduce-scatter 1 s, forward 3 s, backward 9 s (full remat; 6 s with the
 * policy), 100 bytes stored. */
static void test_maxtext_family(void)
{
    smoe_sim_model m = two_layers(4);
    m.L = 4;
    m.kind_of[2] = m.kind_of[3] = 1;
    sim_kind *k = &m.k[0];
    k->w[0].pre_stored_s = 2;
    k->w[0].pre_s = 1;
    k->w[0].bytes_stored = 100;
    k->w[0].bytes = 50;
    k->bytes_stored = 100;
    k->bytes = 50;
    k->bwd_full_pre = 9;
    m.k[1] = *k;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_MAXTEXT;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    /* gathers: W0, W2 at 0 (each stack's first forward layer) [0,2] [2,4];
     * W1 one layer ahead at 2 [4,6]; W3 at 9 [9,11]; the forward computes
     * [2,5] [6,9] [9,12] [12,15] (waits 2 + 1). Backward: W3 and W2 fenced
     * at 15 [15,17] [17,19], bwd L3 [17,26] (wait 2), L2 [26,35], then the
     * first stack fenced at 35: W1 [35,37], W0 [37,39], L1 [37,46] (wait
     * 2), L0 [46,55]; its reduce-scatter [55,56] ends the step. */
    CHECKF(NEAR(r.step_s, 56), "maxtext step %g, expected 56", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 7), "maxtext exposed %g, expected 7", r.exposed_gather_s);
    CHECKF(NEAR(r.gather_busy_s, 16), "maxtext gather busy %g, expected 16", r.gather_busy_s);
    CHECKF(NEAR(r.compute_s, 48), "maxtext compute %g, expected 48", r.compute_s);
    /* live: W0, W2, W1 in [2,5]; at 35 dW2 (until 36), W1, W0 */
    CHECKF(NEAR(r.mem_gathered, 300), "maxtext gathered peak %g, expected 300", r.mem_gathered);
    /* the same model under smoe's runtime (no prefetch, cast gathers of
     * 1 s, the policy's 6 s backward): 8 exposed gathers, step 45 */
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 45), "runtime step %g, expected 45", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 8), "runtime exposed %g, expected 8", r.exposed_gather_s);
}

/* One MoE layer on an accelerator with its own engine per kind: forward
 * pre 3 s, experts 2 s; the backward recomputes and runs the transposes at
 * 2x (pre 9, experts 6); two weights for the caller to fill. */
static smoe_sim_model one_moe_layer(void)
{
    smoe_sim_model m;
    memset(&m, 0, sizeof m);
    m.hw.kind = SMOE_HW_TPU;
    m.hw.collective_engines = 4;
    m.L = 1;
    m.nkinds = 2;
    m.kind_of[0] = 1;
    sim_kind *k = &m.k[1];
    k->moe = 1;
    k->nw = 2;
    k->fwd_pre = 3;
    k->fwd_exp = 2;
    k->rc[0] = k->rc[1] = k->rc[2] = 1;
    k->bwd_pre = 9; /* (2 + recompute) x the forward */
    k->bwd_exp = 6;
    return m;
}

/* Each op waits only for its own weights (accelerators): one MoE layer, an
 * attention weight gathered in 1 s and a routed one in 4 s; forward pre 3 s,
 * experts 2 s; the backward recomputes (pre 3, experts 2) and then runs the
 * transposes at 2x in reverse (experts 4, pre 6). */
static void test_split_waits(void)
{
    smoe_sim_model m = one_moe_layer();
    sim_kind *k = &m.k[1];
    k->w[0] = (sim_w){ .name = "attn", .pre_s = 1, .rs_s = 0.5, .bytes = 10 };
    k->w[1] = (sim_w){ .name = "routed", .pre_s = 4, .rs_s = 0.5, .bytes = 40, .routed = 1 };
    k->bytes = 50;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    /* fwd: attn [0,1], routed [1,5]; pre [1,4], experts wait to 5, [5,7].
     * bwd: attn [7,8], routed [8,12]; pre [8,11], wait to 12, experts
     * [12,14], experts' transpose [14,18], pre's [18,24]; reduce-scatters
     * [24,24.5] [24.5,25] */
    CHECKF(NEAR(r.step_s, 25), "split step %g, expected 25", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 4), "split exposed %g, expected 4", r.exposed_gather_s);
    CHECKF(NEAR(r.compute_s, 20), "split compute %g, expected 20", r.compute_s);
    /* a profile's measured times: forward 10 s (pre 6, experts 4), backward
     * 30 s: every phase x2, the recompute and transposes alike: fwd attn
     * [0,1] routed [1,5]; pre [1,7], experts [7,11]; bwd attn [11,12],
     * routed [12,16]; pre [12,18], experts [18,22] (wait 0), experts' and
     * pre's transposes [22,30] [30,42]; reductions to 43 */
    smoe_sim_model_set_compute(&m, 1, 10, 30);
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.compute_s, 40), "profiled compute %g, expected 40", r.compute_s);
    CHECKF(NEAR(r.step_s, 43), "profiled step %g, expected 43", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 2), "profiled exposed %g, expected 2", r.exposed_gather_s);
}

/* A run's step, exposed wait, compute and gathered peak against the hand
 * computation (a negative expectation is not checked). */
static void expect_run(const char *what, const smoe_sim_result *r, double step, double exposed,
                       double compute, double peak)
{
    CHECKF(NEAR(r->step_s, step), "%s step %g, expected %g", what, r->step_s, step);
    CHECKF(exposed < 0 || NEAR(r->exposed_gather_s, exposed), "%s exposed %g, expected %g", what,
           r->exposed_gather_s, exposed);
    CHECKF(compute < 0 || NEAR(r->compute_s, compute), "%s compute %g, expected %g", what,
           r->compute_s, compute);
    CHECKF(peak < 0 || NEAR(r->mem_gathered, peak), "%s gathered peak %g, expected %g", what,
           r->mem_gathered, peak);
}

/* smoe's compressed gathers (smoe_sim_shape.wire_bytes): the split-wait
 * layer of test_split_waits with gathers cast to 2-byte compute elements
 * and a 1-byte wire: every gather takes half as long (no latency), the
 * buffers stay as large, the reductions as stored. fwd: attn [0,0.5],
 * routed [0.5,2.5]; pre [0.5,3.5], experts [3.5,5.5] (no wait). bwd: attn
 * [5.5,6], routed [6,8]; pre [6,9], experts [9,11], transposes [11,15]
 * [15,21]; reduce-scatters [21,21.5] [21.5,22]. Exposed: the two attn
 * waits; issued: half the 100 gathered bytes; the gathered peak that of
 * the run without the wire. XLA's scan (stream_grads) and
 * the legacy plan ignore the wire. */
static void test_wire(void)
{
    smoe_sim_model m = one_moe_layer();
    sim_kind *k = &m.k[1];
    k->w[0] = (sim_w){ .name = "attn", .pre_s = 1, .rs_s = 0.5, .bytes = 10 };
    k->w[1] = (sim_w){ .name = "routed", .pre_s = 4, .rs_s = 0.5, .bytes = 40, .routed = 1 };
    k->bytes = 50;
    m.compute_bytes = 2;
    m.weight_bytes = 4;
    m.wire_bytes = 1;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    expect_run("wire", &r, 22, 1, -1, -1);
    CHECKF(NEAR(r.issued_bytes, 50), "wire issued %g, expected 50", r.issued_bytes);
    double peak = r.mem_gathered;
    m.wire_bytes = 0;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    expect_run("no wire", &r, 25, 4, -1, peak); /* the same buffers */
    CHECKF(NEAR(r.issued_bytes, 100), "issued %g, expected 100", r.issued_bytes);
    m.wire_bytes = 1;
    s.legacy = 1; /* the legacy plan moves the stored weights (bytes_stored 0 here) */
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(!NEAR(r.step_s, 22), "legacy followed the wire: step %g", r.step_s);
}

/* XLA's scan on an accelerator (the baseline): the routed experts' weights
 * are gathered at the MoE block's entry, after attention and the router
 * (in program order: moe.py casts them and its sparse-matmul shard_map
 * gathers them; MaxText's cross-layer-prefetch PERF_NOTES.md: never
 * hoisted to the attention phase), each gradient reduced in the dtype its
 * gather moved (cast). One MoE layer: attention weight cast 1 s (stored
 * 2 s), routed 4 s (stored 8 s), reductions cast 0.5 s (stored 1 s);
 * forward pre 3 s, experts 2 s; backward: recompute, then the transposes
 * at 2x. */
static void test_xla_baseline(void)
{
    smoe_sim_model m = one_moe_layer();
    m.weight_bytes = 4;
    sim_kind *k = &m.k[1];
    k->w[0] = (sim_w){ .name = "attn", .pre_s = 1, .pre_stored_s = 2, .rs_s = 1,
                       .rs_cast_s = 0.5, .bytes = 10, .bytes_stored = 20 };
    k->w[1] = (sim_w){ .name = "routed", .pre_s = 4, .pre_stored_s = 8, .rs_s = 1,
                       .rs_cast_s = 0.5, .bytes = 40, .bytes_stored = 80, .routed = 1 };
    k->bytes = 50;
    k->bytes_stored = 100;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_SCAN;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    /* fwd: attn [0,1] (wait 1), pre [1,4], routed issued at 4 [4,8] (wait
     * 4), experts [8,10]. bwd: attn [10,11] (wait 1), recompute pre
     * [11,14], routed [14,18] (wait 4), experts [18,20], the experts' and
     * pre's transposes [20,24] [24,30]. Gradients with their transposes:
     * routed's at 24, reduced [24,24.5] (its 40 gathered bytes free at 24);
     * attn's at 30, [30,30.5]: the step. Live: at most the 50 gathered in
     * [14,24]. */
    expect_run("xla", &r, 30.5, 10, 20, 50);
    /* gather_bytes 1 (of 4 stored, no latency): every gather and reduction
     * a quarter of the stored one: attn 0.5, routed 2, reductions 0.25,
     * buffers 5 and 20. fwd: attn [0,0.5], pre [0.5,3.5], routed [3.5,5.5],
     * experts [5.5,7.5]; bwd: attn [7.5,8], pre [8,11], routed [11,13],
     * experts [13,15], transposes [15,19] [19,25]; gradients at 19
     * [19,19.25] and 25 [25,25.25]; live at most the 25 gathered. */
    s.gather_bytes = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    expect_run("1-byte", &r, 25.25, 5, -1, 25);
    /* the routed gradient's reduction slow (6 s): its 40 bytes live in
     * [24,30] beside attn's gathered 10 (50), attn's reduction [30,30.5] */
    k->w[1].rs_cast_s = 6;
    s.gather_bytes = 0;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    expect_run("slow-reduction", &r, 30.5, -1, -1, 50);
    k->w[1].rs_cast_s = 0.5;
    /* the routed down projection (wo) is first needed after the up
     * projections (2 of the experts' 3 matmuls): up 2 s, wo 3 s, experts
     * 3 s (up 2, down 1); reductions free. fwd: attn [0,1], pre [1,4], up
     * [4,6], wo [6,9]; up projections [6,8], wait to 9, down [9,10]. bwd:
     * attn [10,11], pre [11,14], up [14,16], wo [16,19]; up [16,18], wait
     * to 19, down [19,20], transposes [20,26] [26,32]. */
    smoe_sim_model d = m;
    sim_kind *dk = &d.k[1];
    dk->nw = 3;
    dk->w[0].rs_cast_s = dk->w[1].rs_cast_s = 0;
    dk->w[1].pre_s = 2;
    dk->w[2] = (sim_w){ .name = "moe/wo", .pre_s = 3, .routed = 1, .down = 1 };
    dk->fwd_exp = 3;
    dk->bwd_exp = 9;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_SCAN;
    CHECK(smoe_sim_run(&d, &s, &r, NULL) == SMOE_OK);
    expect_run("down-projection", &r, 32, 8, 24, -1);
    /* the same schedule run as smoe's (XLA's dataflow, not XLA's scan):
     * every gather at the layer's start (routed [1,5] during pre [1,4]) */
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.exposed_gather_s, 4), "xla_prefetch exposed %g, expected 4",
           r.exposed_gather_s);
}

/* Without the dedicated SparseCore MaxText's tagged gathers keep issue order
 * with the layer's exchange (fsdp_prefetch.py: they must finish before that
 * work can). Two stacks of MoE layers on one engine: the stacks' first
 * gathers W0 [0,4] and W2 [4,8] at the step's start, W1 one layer ahead at
 * 4 [8,12]; layer 0 (pre 1 s) issues its exchange at 5, which runs after
 * them, [12,13] (an exchange going first would run [8,9]). */
static void test_shared_queue_order(void)
{
    smoe_sim_model m = one_moe_layer();
    m.hw.collective_engines = 2;
    m.L = 4;
    m.kind_of[0] = m.kind_of[1] = 0;
    m.kind_of[2] = m.kind_of[3] = 1;
    sim_kind *k = &m.k[1];
    k->nw = 1;
    k->w[0] = (sim_w){ .name = "w", .pre_s = 2, .pre_stored_s = 4, .bytes = 5, .bytes_stored = 10 };
    k->bytes = 5;
    k->bytes_stored = 10;
    k->fwd_pre = 1;
    k->a2a_s = 1;
    k->bwd_full_pre = 3;
    k->bwd_full_exp = 6;
    m.k[0] = *k;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_MAXTEXT;
    s.prefetch_depth = 1;
    s.shared_engine = 1;
    smoe_trace *t = smoe_trace_new(0, 0);
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK(smoe_sim_run(&m, &s, &r, t) == SMOE_OK);
    double t0 = -1, t1 = -1;
    int tid;
    const char *name;
    for (int64_t i = 0; t0 < 0; i++) {
        int e = smoe_trace_event(t, i, &tid, &t0, &t1, &name);
        if (e < 0)
            break;
        if (e != 0 || strcmp(name, "expert exchange") != 0)
            t0 = -1;
    }
    CHECKF(NEAR(t0, 5) && NEAR(t1, 13), "first exchange [%g,%g], expected [5,13]", t0, t1);
    smoe_trace_free(t);
}

static void test_planner(void)
{
    smoe_sim_model m = two_layers(4);
    unsigned char dist[2][SMOE_SIM_MAX_WEIGHTS];
    smoe_sim_result best, deep;
    smoe_sim_point curve[64];
    int feasible, n;
    /* below one layer's gathered weights: nothing fits, no prefetch */
    const smoe_sim_executor x = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_plan_budget(&m, x, 0, 50, dist, &best, &feasible, curve, 64, &n) == SMOE_OK);
    CHECK(!feasible);
    CHECK(dist[0][0] == 0);
    CHECKF(NEAR(best.exposed_gather_s, 8), "infeasible budget: exposed %g", best.exposed_gather_s);
    /* between the no-prefetch and the depth-1 peaks: part of a weight */
    CHECK(smoe_sim_plan_budget(&m, x, 0, 250, dist, &best, &feasible, curve, 64, &n) == SMOE_OK);
    CHECK(feasible);
    CHECKF(best.peak_hbm_bytes <= 250, "budget 250: peak %g", best.peak_hbm_bytes);
    CHECKF(best.exposed_gather_s < 8 && best.exposed_gather_s > 2,
           "budget 250: exposed %g between 2 and 8", best.exposed_gather_s);
    CHECK(dist[0][0] > 0 && dist[0][0] < 4);
    /* the Pareto points: peak rises, wait falls */
    int mono = n >= 2;
    for (int i = 1; i < n; i++)
        mono &= curve[i].peak_hbm_bytes >= curve[i - 1].peak_hbm_bytes &&
                curve[i].exposed_gather_s <= curve[i - 1].exposed_gather_s;
    CHECKF(mono, "Pareto curve of %d points not monotone", n);
    /* unlimited: as good as unlimited depth */
    CHECK(smoe_sim_plan_budget(&m, x, 0, INFINITY, dist, &best, &feasible, curve, 64, &n) ==
          SMOE_OK);
    smoe_sim_sched s;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    s.prefetch_depth = 4;
    CHECK(smoe_sim_run(&m, &s, &deep, NULL) == SMOE_OK);
    CHECKF(NEAR(best.exposed_gather_s, deep.exposed_gather_s),
           "unlimited budget exposed %g, unlimited depth %g", best.exposed_gather_s,
           deep.exposed_gather_s);
}

/* Static memory from a plan with the dtypes a config gives (MaxText's
 * defaults: fp32 weights, gradients and both AdamW moments, bf16 compute;
 * mu_dtype inherits weight_dtype): bytes per parameter element w, g, mu, nu;
 * gathered buffers in the compute dtype and as stored. */
static void test_memory(const char *cfgdir, const char *const *ov, int n_ov, int w, int g,
                        int mu, int nu)
{
    smoe_config *cfg = load_deepseek(cfgdir, ov, n_ov);
    smoe_err err;
    if (!cfg)
        return;
    char hwf[1024];
    snprintf(hwf, sizeof hwf, "%s/hardware/tpu7x.yml", cfgdir);
    smoe_hw hw;
    CHECK(smoe_hw_load(hwf, &hw, &err) == SMOE_OK);
    smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_FULL };
    CHECK(smoe_sim_dtypes(cfg, &hw, &sh, &err) == SMOE_OK);
    CHECK_INT(sh.dtype_bytes, w);
    CHECK_INT(sh.grad_bytes, g);
    CHECK_INT(sh.mu_bytes, mu);
    CHECK_INT(sh.nu_bytes, nu);
    CHECK_INT(sh.compute_bytes, 2);
    smoe_plan_opts po = { 16, 1, NULL, sh.dtype_bytes };
    smoe_plan *p;
    if (smoe_plan_build(cfg, &po, &p, &err)) {
        CHECKF(0, "plan: %s", err.msg);
        smoe_config_free(cfg);
        return;
    }
    smoe_sim_model *m;
    CHECK(smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err) == SMOE_OK);
    double shard = 0; /* stored bytes */
    for (int i = 0; i < p->n; i++)
        if (p->w[i].kind == SMOE_ENTRY_PARAM)
            shard += (double)p->w[i].gather.bytes_in * (double)p->w[i].layers;
    double elems = shard / w;
    CHECKF(NEAR(m->mem_params, shard), "params %g, expected %g", m->mem_params, shard);
    CHECKF(NEAR(m->mem_grads, elems * g), "grads %g, expected %g", m->mem_grads, elems * g);
    CHECKF(NEAR(m->mem_optimizer, elems * (mu + nu)), "optimizer %g, expected %g",
           m->mem_optimizer, elems * (mu + nu));
    /* a layer's gathered bytes are the sum of its weights' buffers */
    double moe = 0;
    for (int i = 0; i < p->n; i++)
        if (p->w[i].prefetch && strcmp(p->w[i].stack, "moe_layers") == 0)
            moe += (double)p->w[i].gather.bytes_out;
    CHECKF(NEAR(m->k[1].bytes_stored, moe), "MoE layer stored %g, expected %g",
           m->k[1].bytes_stored, moe);
    CHECKF(NEAR(m->k[1].bytes, moe * 2 / w), "MoE layer cast %g, expected %g", m->k[1].bytes,
           moe * 2 / w);
    /* the total is the breakdown */
    smoe_sim_sched s;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    s.prefetch_depth = 1;
    smoe_sim_result r;
    CHECK(smoe_sim_run(m, &s, &r, NULL) == SMOE_OK);
    CHECK(NEAR(r.peak_hbm_bytes, r.mem_params + r.mem_grads + r.mem_optimizer + r.mem_gathered +
                                     r.mem_activations));
    /* depth 1 holds at least two MoE layers at once, no prefetch one */
    CHECKF(r.mem_gathered >= 2 * m->k[1].bytes, "depth-1 gathered %g < 2 layers %g",
           r.mem_gathered, 2 * m->k[1].bytes);
    smoe_sim_model_free(m);
    smoe_plan_free(p);
    smoe_config_free(cfg);
}

/* The closed-form count of a group's members on device 0's node against
 * enumerating every member, on random meshes, axis subsets (in any order)
 * and node sizes; then a 2^30-device mesh the enumeration could not do. */
static double brute_members(const smoe_mesh *m, const smoe_axes *axes, int64_t dpn, int64_t *g)
{
    int64_t stride[SMOE_MAX_AXES], size = 1;
    for (int a = m->n - 1; a >= 0; a--) {
        stride[a] = size;
        size *= m->size[a];
    }
    int idx[SMOE_MAX_AXES], n = 0;
    int64_t total = 1;
    for (int i = 0; i < axes->n; i++) {
        int a = smoe_mesh_find(m, axes->ax[i]);
        if (a >= 0 && m->size[a] > 1) {
            idx[n++] = a;
            total *= m->size[a];
        }
    }
    *g = total;
    int64_t local = 0;
    for (int64_t j = 0; j < total; j++) {
        int64_t r = 0, x = j;
        for (int i = n - 1; i >= 0; i--) {
            r += (x % m->size[idx[i]]) * stride[idx[i]];
            x /= m->size[idx[i]];
        }
        local += r < dpn;
    }
    return (double)local;
}

static void test_local_members(void)
{
    static const char *names[] = { "data", "fsdp", "expert", "tensor", "context" };
    unsigned seed = 12345;
    int bad = 0, cases = 0;
    for (int t = 0; t < 3000; t++) {
        smoe_mesh m;
        memset(&m, 0, sizeof m); /* one slice */
        m.n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 5;
        int64_t devices = 1;
        for (int a = 0; a < m.n; a++) {
            m.name[a] = names[a];
            m.size[a] = 1 + (int64_t)(((seed = seed * 1103515245u + 12345u) >> 16) % 7);
            devices *= m.size[a];
        }
        smoe_axes ax;
        ax.n = 0;
        for (int a = m.n - 1; a >= 0; a--) /* reverse order: the count must not care */
            if (((seed = seed * 1103515245u + 12345u) >> 16) % 2)
                ax.ax[ax.n++] = m.name[a];
        int64_t dpn = 1 + (int64_t)(((seed = seed * 1103515245u + 12345u) >> 16) % (unsigned)(devices + 2));
        int64_t g1, g2;
        double fast = sim_local_members(&m, &ax, dpn, &g1);
        double slow = brute_members(&m, &ax, dpn, &g2);
        cases++;
        if (fast != slow || g1 != g2) {
            if (bad++ < 5)
                fprintf(stderr, "mesh of %d axes, %d group axes, dpn %lld: %g/%lld vs %g/%lld\n",
                        m.n, ax.n, (long long)dpn, fast, (long long)g1, slow, (long long)g2);
        }
    }
    CHECKF(bad == 0, "%d of %d closed-form member counts differ from enumeration", bad, cases);
    /* slices cap a node: fsdp = 4 in 2 slices of 2 (dcn fsdp = 2) on nodes
     * of 8 devices: 2 of the 4 fsdp members share device 0's node, as on
     * nodes of 2; data across 2 slices (HSDP): fsdp's 2 members all near */
    {
        smoe_mesh sl = { 1, { "fsdp" }, { 4 }, { 2 } };
        smoe_axes fs = { 1, { "fsdp" } };
        int64_t g;
        CHECK(sim_local_members(&sl, &fs, 8, &g) == 2 && g == 4);
        smoe_mesh h = { 2, { "data", "fsdp" }, { 2, 2 }, { 2, 1 } };
        CHECK(sim_local_members(&h, &fs, 8, &g) == 2 && g == 2);
        smoe_axes da = { 1, { "data" } };
        CHECK(sim_local_members(&h, &da, 8, &g) == 1 && g == 2);
    }
    /* fsdp = 2^28 x expert = 4, nodes of 18432 devices: 18432 / 4 members
     * of the fsdp group share a node, 4 of the expert group */
    smoe_mesh big = { 2, { "fsdp", "expert" }, { 1LL << 28, 4 }, { 0 } };
    smoe_axes f = { 1, { "fsdp" } }, e = { 1, { "expert" } };
    int64_t g;
    CHECK(sim_local_members(&big, &f, 18432, &g) == 4608 && g == (1LL << 28));
    CHECK(sim_local_members(&big, &e, 18432, &g) == 4 && g == 4);
}

/* The profile schema is one table: what smoe_hw_write writes (smoe sim
 * --calibrate's output), smoe_hw_load reads back to the same values, for
 * every bundled profile and for a cpu profile with every optional key set. */
static int close_to(double a, double b) { return fabs(a - b) <= 1e-5 * fabs(b); }

static void hw_roundtrip(const smoe_hw *hw, const char *what)
{
    char text[8192];
    FILE *f = tmpfile();
    smoe_err err;
    CHECKF(f && smoe_hw_write(f, hw, NULL, NULL, &err) == SMOE_OK, "%s: write", what);
    if (!f)
        return;
    rewind(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    smoe_hw back;
    smoe_status s = smoe_hw_load_text(text, what, &back, &err);
    CHECKF(s == SMOE_OK, "%s: reads back: %s", what, s ? err.msg : "");
    if (s)
        return;
    CHECK_STR(back.name, hw->name);
    CHECK_INT(back.kind, hw->kind);
    /* a cpu profile that does not state its progress mode was measured
     * before the key, progressed only inside MPI calls */
    CHECK_STR(back.cpu.progress,
              hw->cpu.progress[0] || hw->kind != SMOE_HW_CPU ? hw->cpu.progress : "calls");
    const double a[] = { hw->devices_per_chip, hw->peak_flops, hw->hbm_bytes,
                         hw->hbm_bandwidth, hw->ici_bandwidth, hw->ici_links, hw->ici_latency,
                         hw->devices_per_node, hw->dcn_bandwidth, hw->dcn_latency,
                         hw->collective_engines, hw->cpu.a2a_bandwidth, hw->cpu.a2a_latency,
                         hw->cpu.collectives_use_compute, hw->cpu.elementwise_bandwidth,
                         hw->cpu.op_overhead, hw->cpu.compute_bytes, hw->cpu.gemm_small_flops,
                         hw->cpu.compute_scale, hw->cpu.sync_skew, hw->compute_efficiency,
                         hw->permute_bandwidth, hw->cpu.reduce_lag_bandwidth, hw->cpu.optimizer_rate,
                         hw->cpu.core_share };
    const double b[] = { back.devices_per_chip, back.peak_flops, back.hbm_bytes,
                         back.hbm_bandwidth, back.ici_bandwidth, back.ici_links, back.ici_latency,
                         back.devices_per_node, back.dcn_bandwidth, back.dcn_latency,
                         back.collective_engines, back.cpu.a2a_bandwidth, back.cpu.a2a_latency,
                         back.cpu.collectives_use_compute, back.cpu.elementwise_bandwidth,
                         back.cpu.op_overhead, back.cpu.compute_bytes, back.cpu.gemm_small_flops,
                         back.cpu.compute_scale, back.cpu.sync_skew, back.compute_efficiency,
                         back.permute_bandwidth, back.cpu.reduce_lag_bandwidth, back.cpu.optimizer_rate,
                         back.cpu.core_share };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
        CHECKF(close_to(b[i], a[i]), "%s: field %zu: %g read back as %g", what, i, a[i], b[i]);
}

static void test_hw_schema(const char *cfgdir)
{
    static const char *const names[] = { "h100", "h200", "tpu-v5p", "tpu-v6e", "tpu7x" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/hardware/%s.yml", cfgdir, names[i]);
        smoe_hw hw;
        smoe_err err;
        smoe_status s = smoe_hw_load(path, &hw, &err);
        CHECKF(s == SMOE_OK, "%s: %s", path, s ? err.msg : "");
        if (!s)
            hw_roundtrip(&hw, path);
    }
    smoe_hw cpu = cpu_profile();
    cpu.cpu.reduce_lag_bandwidth = 2e9;
    cpu.cpu.optimizer_rate = 3e8;
    cpu.cpu.core_share = 0.5;
    hw_roundtrip(&cpu, "cpu profile, every key set");
    snprintf(cpu.cpu.progress, sizeof cpu.cpu.progress, "thread");
    hw_roundtrip(&cpu, "cpu profile, progress thread");
    snprintf(cpu.cpu.progress, sizeof cpu.cpu.progress, "calls");
    hw_roundtrip(&cpu, "cpu profile, progress calls");
    /* the mode is one of two words, and a cpu profile's */
    static const char *const bad[][2] = {
        { "name: x\nkind: cpu\nprogress: polls\n", "'progress' must be calls or thread" },
        { "name: x\nkind: tpu\nprogress: thread\n", "'progress' is a cpu profile's key" },
    };
    for (int i = 0; i < 2; i++) {
        char text[2048];
        FILE *f = tmpfile();
        smoe_err err;
        smoe_hw back;
        if (!f || smoe_hw_write(f, &cpu, NULL, NULL, &err)) {
            CHECK(0);
            if (f)
                fclose(f);
            continue;
        }
        rewind(f);
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
        /* the written profile's keys after name, kind and progress, under bad[i]'s head */
        const char *rest = strstr(text, "progress: calls\n");
        char whole[4096];
        snprintf(whole, sizeof whole, "%s%s", bad[i][0], rest ? rest + 16 : "");
        smoe_status st = smoe_hw_load_text(whole, "bad.yml", &back, &err);
        CHECKF(rest && st == SMOE_EINVAL && strstr(err.msg, bad[i][1]), "profile %d: status %d, %s",
               i, (int)st, err.msg);
    }
}

/* The fused names become their parts where the model fuses, and name
 * nothing where it does not; "mlpwi_0" and "mlpwo" name the routed
 * experts' wi_0 and wo outputs too, as moe.py names them (sim_rt_canon). */
static void test_rt_canon(void)
{
    smoe_dims d;
    memset(&d, 0, sizeof d);
    const unsigned Q = 1u << SMOE_RT_QUERY, K = 1u << SMOE_RT_KEY, V = 1u << SMOE_RT_VALUE;
    const unsigned QKV = 1u << SMOE_RT_QKV, W0 = 1u << SMOE_RT_MLPWI0, W1 = 1u << SMOE_RT_MLPWI1;
    const unsigned WI = 1u << SMOE_RT_MLPWI, C = 1u << SMOE_RT_CONTEXT;
    const unsigned WO = 1u << SMOE_RT_MLPWO, E0 = 1u << SMOE_RT_MOE_WI0;
    const unsigned E1 = 1u << SMOE_RT_MOE_WI1, EO = 1u << SMOE_RT_MOE_WO;
    CHECK_INT((int)sim_rt_canon(&d, QKV | Q), (int)Q);
    CHECK_INT((int)sim_rt_canon(&d, 1u << SMOE_RT_KV), (int)(K | V));
    CHECK_INT((int)sim_rt_canon(&d, 1u << SMOE_RT_ATTN_OUT), (int)C);
    CHECK_INT((int)sim_rt_canon(&d, WI | W0), (int)(W0 | E0));
    CHECK_INT((int)sim_rt_canon(&d, WO), (int)(WO | EO));
    CHECK_INT((int)sim_rt_canon(&d, W1), (int)W1);
    CHECK_INT((int)sim_rt_canon(&d, E1 | EO), (int)(E1 | EO));
    d.fused_qkv = d.fused_mlp = 1;
    CHECK_INT((int)sim_rt_canon(&d, Q | QKV), (int)(Q | K | V));
    CHECK_INT((int)sim_rt_canon(&d, Q), 0);
    CHECK_INT((int)sim_rt_canon(&d, WI), (int)(W0 | W1));
    CHECK_INT((int)sim_rt_canon(&d, W0), (int)E0);
}

/* The host link runs beside the compute: transfers shorter than a unit's
 * compute cost nothing; longer ones hold each unit until its own is done
 * (one layer: forward 3 s, backward 6 s, each unit's transfer 10 s). */
static void test_offload_lane(void)
{
    smoe_sim_model m = two_layers(4);
    smoe_sim_result r0, r1, r2;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_XLA_PREFETCH, 1, &r0) == SMOE_OK);
    m.k[0].offload_s = 0.5;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_XLA_PREFETCH, 1, &r1) == SMOE_OK);
    CHECKF(NEAR(r1.step_s, r0.step_s), "short transfers: step %g, expected %g", r1.step_s,
           r0.step_s);
    m.k[0].offload_s = 10;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_XLA_PREFETCH, 1, &r2) == SMOE_OK);
    CHECKF(r2.step_s >= 40 && r2.step_s < 40 + r0.step_s,
           "4 units' transfers of 10 s in a row: step %g", r2.step_s);
}

int main(int argc, char **argv)
{
    test_local_members();
    test_hand_schedules();
    test_maxtext_family();
    test_split_waits();
    test_wire();
    test_xla_baseline();
    test_shared_queue_order();
    test_planner();
    test_rt_canon();
    test_offload_lane();
    if (argc > 1) {
        test_hw_schema(argv[1]);
        const char *ep[] = { "ici_expert_parallelism=2" };
        test_memory(argv[1], ep, 1, 4, 4, 4, 4);
        const char *bf[] = { "ici_expert_parallelism=2", "weight_dtype=bfloat16",
                             "grad_dtype=bfloat16" };
        test_memory(argv[1], bf, 3, 2, 2, 2, 2);
        /* bf16 weights: MaxText casts only float32 gradients to grad_dtype
         * (train.py), so they stay bf16; the moments follow the weights */
        const char *bw[] = { "ici_expert_parallelism=2", "weight_dtype=bfloat16" };
        test_memory(argv[1], bw, 2, 2, 2, 2, 2);
        const char *mu[] = { "ici_expert_parallelism=2", "mu_dtype=bfloat16" };
        test_memory(argv[1], mu, 2, 4, 4, 2, 4);
        const char *sgd[] = { "ici_expert_parallelism=2", "opt_type=sgd" };
        test_memory(argv[1], sgd, 2, 4, 4, 0, 0);
    }
    return check_report();
}
