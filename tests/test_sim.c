/* The simulator against hand-computed schedules (two layers, known
 * durations), its memory accounting (static parts from a plan, live
 * gathered bytes), and the budgeted planner (a budget below one layer's
 * gathered weights gives no prefetch; an unlimited budget reaches the
 * exposed wait of unlimited depth). White-box: builds step models by
 * hand (test_sim_cpu.c: the cpu profiles' rules).
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

/* One build of deepseek2-16b on tpu7x (1 x 2048 tokens per device) with
 * the override ov; NULL when refused (its message in msg). */
static smoe_sim_model *build_with(const char *cfgdir, const char *ov, char *msg, size_t cap)
{
    const char *o[2] = { "ici_expert_parallelism=2", ov };
    smoe_config *cfg = load_deepseek(cfgdir, o, ov ? 2 : 1);
    smoe_err err;
    smoe_sim_model *m = NULL;
    msg[0] = '\0';
    char hwf[1024];
    snprintf(hwf, sizeof hwf, "%s/hardware/tpu7x.yml", cfgdir);
    smoe_hw hw;
    smoe_plan *p = NULL;
    smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_FULL };
    if (cfg && smoe_hw_load(hwf, &hw, &err) == SMOE_OK &&
        smoe_sim_dtypes(cfg, &hw, &sh, &err) == SMOE_OK) {
        smoe_plan_opts po = { 16, 1, NULL, sh.dtype_bytes };
        if (smoe_plan_build(cfg, &po, &p, &err) == SMOE_OK &&
            smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err) != SMOE_OK)
            snprintf(msg, cap, "%s", err.msg);
    }
    smoe_plan_free(p);
    smoe_config_free(cfg);
    return m;
}

/* num_vocab_tiling (MaxText vocab_tiling_linen_loss): one tile's logits
 * live at a time (a quarter with 4 tiles), the head costs one more
 * forward dot (the backward's recompute) in dots of a quarter of the
 * rows; a count that does not divide the tokens is refused. */
static void test_vocab_tiling(const char *cfgdir)
{
    char msg[512];
    smoe_sim_model *one = build_with(cfgdir, NULL, msg, sizeof msg);
    smoe_sim_model *four = build_with(cfgdir, "num_vocab_tiling=4", msg, sizeof msg);
    CHECKF(one && four, "built: %s", msg);
    if (one && four) {
        CHECKF(NEAR(four->logits_bytes * 4, one->logits_bytes), "logits %g vs %g / 4",
               four->logits_bytes, one->logits_bytes);
        /* 3 dots become 4 (quarter-row dots take at least a quarter's time) */
        CHECKF(four->head_s > one->head_s * 4 / 3 * 0.99 && four->head_s < one->head_s * 2,
               "head %g s with 4 tiles, %g s whole", four->head_s, one->head_s);
        CHECKF(NEAR(four->k[1].fwd_pre, one->k[1].fwd_pre), "the layers unchanged");
    }
    smoe_sim_model_free(one);
    smoe_sim_model_free(four);
    CHECK(build_with(cfgdir, "num_vocab_tiling=3", msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "num_vocab_tiling = 3: MaxText cuts a device's 2048 tokens") != NULL,
           "'%s'", msg);
}

/* deepseek2-16b on tpu7x (1 x 2048 tokens per device, EP 2) with MaxText's
 * keys read by smoe_sim_keys (remat_policy among them) and the overrides
 * ov[0..n); NULL when refused (its message in msg). */
static smoe_sim_model *build_shape(const char *cfgdir, const char *model, const char *const *ov,
                                   int n, smoe_sim_shape sh, char *msg, size_t cap);

static smoe_sim_model *build_model(const char *cfgdir, const char *model, const char *const *ov,
                                   int n, char *msg, size_t cap)
{
    smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
    return build_shape(cfgdir, model, ov, n, sh, msg, cap);
}

/* build_model at the shape sh (its keys read by smoe_sim_keys). */
static smoe_sim_model *build_shape(const char *cfgdir, const char *model, const char *const *ov,
                                   int n, smoe_sim_shape sh, char *msg, size_t cap)
{
    const char *o[8] = { "ici_expert_parallelism=2" };
    for (int i = 0; i < n && i < 7; i++)
        o[i + 1] = ov[i];
    smoe_config *cfg = load_model(cfgdir, model, o, n + 1);
    smoe_err err;
    smoe_sim_model *m = NULL;
    char hwf[1024];
    snprintf(hwf, sizeof hwf, "%s/hardware/tpu7x.yml", cfgdir);
    smoe_hw hw;
    smoe_plan *p = NULL;
    msg[0] = '\0';
    if (cfg && smoe_hw_load(hwf, &hw, &err) == SMOE_OK &&
        smoe_sim_keys(cfg, &hw, &sh, &err) == SMOE_OK) {
        smoe_plan_opts po = { 16, 1, NULL, sh.dtype_bytes };
        if (smoe_plan_build(cfg, &po, &p, &err) == SMOE_OK &&
            smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err) != SMOE_OK)
            snprintf(msg, cap, "%s", err.msg);
    } else if (cfg) {
        snprintf(msg, cap, "%s", err.msg);
    }
    smoe_plan_free(p);
    smoe_config_free(cfg);
    return m;
}

static smoe_sim_model *build_keys(const char *cfgdir, const char *const *ov, int n, char *msg,
                                  size_t cap)
{
    return build_model(cfgdir, "deepseek2-16b", ov, n, msg, cap);
}

/* A scannable block (gemma4-31b: 10 stacked blocks of 6 decoder layers,
 * a global one and 5 local ones) times 6 layers' compute a unit, beside
 * the same dimensions as 60 plain layers (decoder_block llama2); the
 * gathers stay the block's. */
static void test_scannable_block(const char *cfgdir)
{
    char msg[512];
    /* no sliding window: every layer's attention causal (test_attention_span) */
    const char *block[] = { "override_model_config=true", "sliding_window_size=0" };
    const char *plain[] = { "override_model_config=true", "sliding_window_size=0",
                            "decoder_block=llama2" };
    smoe_sim_model *b = build_model(cfgdir, "gemma4-31b", block, 2, msg, sizeof msg);
    smoe_sim_model *p = build_model(cfgdir, "gemma4-31b", plain, 3, msg, sizeof msg);
    CHECKF(b && p, "built: %s", msg);
    if (b && p) {
        CHECK_INT(b->L, 10);
        CHECK_INT(p->L, 60);
        CHECKF(fabs(b->k[0].fwd_pre - 6 * p->k[0].fwd_pre) < 1e-9 * b->k[0].fwd_pre &&
                   fabs(b->k[0].bwd_pre - 6 * p->k[0].bwd_pre) < 1e-9 * b->k[0].bwd_pre,
               "block forward %g backward %g, layer %g %g", b->k[0].fwd_pre, b->k[0].bwd_pre,
               p->k[0].fwd_pre, p->k[0].bwd_pre);
        CHECKF(NEAR(b->k[0].act_input, p->k[0].act_input), "the block input once");
        /* 6 layers' weights, the global layer's heads 512 wide (256 in
         * the plain layers) */
        CHECKF(b->k[0].bytes > 6 * p->k[0].bytes && b->k[0].bytes < 6.5 * p->k[0].bytes,
               "block gathers %g bytes, layer %g", b->k[0].bytes, p->k[0].bytes);
    }
    smoe_sim_model_free(b);
    smoe_sim_model_free(p);
}

/* model (build_model) as it is (*a) and with the overrides ov[0..n) (*b);
 * 1 when both are built (a failed check otherwise). */
static int build_pair(const char *cfgdir, const char *model, const char *const *ov, int n,
                      smoe_sim_model **a, smoe_sim_model **b)
{
    char msg[512];
    *a = build_model(cfgdir, model, NULL, 0, msg, sizeof msg);
    *b = build_model(cfgdir, model, ov, n, msg, sizeof msg);
    CHECKF(*a && *b, "%s, %s: %s", model, ov[0], msg);
    return *a && *b;
}

/* Unscanned layers (unrolled.c). A dense model unscanned is the same step
 * model as scanned: llama3.1-8b's 32 layers_<i> modules become 32 layers
 * of one kind whose weights are the stacked ones. gemma4-e2b (35 layers,
 * the last num_kv_shared_layers = 20 twice as wide with
 * use_double_wide_mlp: gemma4_small.py) has a mean MLP width of
 * (15 x 6144 + 20 x 12288) / 35. Routed experts unscanned are refused.
 * The merge by hand: two layers' weights of one name, their mean. */
static void test_unrolled(const char *cfgdir)
{
    char msg[512];
    const char *off[] = { "scan_layers=false" };
    smoe_sim_model *sc, *un;
    if (build_pair(cfgdir, "llama3.1-8b", off, 1, &sc, &un)) {
        CHECK_INT(sc->L, 32);
        CHECK_INT(un->L, 32);
        CHECK_INT(un->k[0].nw, sc->k[0].nw);
        CHECKF(NEAR(un->k[0].fwd_pre, sc->k[0].fwd_pre) && NEAR(un->k[0].bwd_pre, sc->k[0].bwd_pre),
               "compute %g vs %g", un->k[0].fwd_pre, sc->k[0].fwd_pre);
        double pu = 0, ps = 0, ru = 0, rs = 0;
        for (int j = 0; j < un->k[0].nw && j < sc->k[0].nw; j++) {
            pu += un->k[0].w[j].pre_s, ps += sc->k[0].w[j].pre_s;
            ru += un->k[0].w[j].rs_s, rs += sc->k[0].w[j].rs_s;
        }
        CHECKF(fabs(pu - ps) < 1e-9 * ps && fabs(ru - rs) < 1e-9 * rs &&
                   fabs(un->k[0].bytes - sc->k[0].bytes) < 1e-6 * sc->k[0].bytes,
               "gathers %g vs %g s, reductions %g vs %g s, bytes %g vs %g", pu, ps, ru, rs,
               un->k[0].bytes, sc->k[0].bytes);
    }
    smoe_sim_model_free(sc);
    smoe_sim_model_free(un);

    smoe_config *cfg = load_model(cfgdir, "gemma4-e2b", off, 1);
    smoe_plan *p = NULL;
    smoe_err err;
    smoe_plan_opts po = { 16, 1, NULL, 4 };
    int n = 0;
    double mlp = 0;
    CHECK(cfg && smoe_plan_build(cfg, &po, &p, &err) == SMOE_OK &&
          sim_unrolled_count(cfg, p, 35, &n, &mlp, &err) == SMOE_OK);
    CHECK_INT(n, 35);
    CHECKF(fabs(mlp - (15.0 * 6144 + 20.0 * 12288) / 35) < 1e-9, "mean MLP width %g", mlp);
    CHECK(p && sim_unrolled_count(cfg, p, 34, &n, &mlp, &err) == SMOE_EINVAL &&
          strstr(err.msg, "35 unscanned decoder layers") != NULL);
    smoe_plan_free(p);
    smoe_config_free(cfg);
    CHECK(build_keys(cfgdir, off, 1, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "scan_layers: smoe sim models unscanned layers without routed experts") != NULL,
           "'%s'", msg);

    const char *rest = NULL;
    CHECK(sim_unrolled_layer("decoder/layers_12/mlp/wo/kernel", &rest) == 12 &&
          strcmp(rest, "mlp/wo/kernel") == 0);
    CHECK(sim_unrolled_layer("decoder/layers/mlp/wo/kernel", NULL) == -1);
    CHECK(sim_unrolled_layer("decoder/layers_3x/kernel", NULL) == -1);
    CHECK(sim_unrolled_layer("decoder/layers_", NULL) == -1);
    CHECK(sim_unrolled_layer(NULL, NULL) == -1);
    static sim_kind k;
    memset(&k, 0, sizeof k);
    sim_w a = { .name = "decoder/layers_0/mlp/wo/kernel", .pre_s = 2, .pre_stored_s = 2,
                .pre_net = 1, .bytes = 10 };
    sim_w b = { .name = "decoder/layers_1/mlp/wo/kernel", .pre_s = 4, .pre_stored_s = 6,
                .pre_net = 0, .bytes = 30 };
    sim_w c = { .name = "decoder/layers_1/mlp/wi/kernel", .pre_s = 8, .bytes = 8 };
    CHECK(sim_unrolled_add(&k, &a, 2, &err) == SMOE_OK && sim_unrolled_add(&k, &b, 2, &err) == SMOE_OK &&
          sim_unrolled_add(&k, &c, 2, &err) == SMOE_OK);
    CHECK_INT(k.nw, 2);
    /* pre_net: of 1 s (1 x 2 / 2) and 3 s (6 / 2) of stored gather, the first's on the network */
    CHECKF(NEAR(k.w[0].pre_s, 3) && NEAR(k.w[0].bytes, 20) && NEAR(k.w[0].pre_net, 0.25),
           "merged %g s, %g bytes, net %g", k.w[0].pre_s, k.w[0].bytes, k.w[0].pre_net);
    CHECK(NEAR(k.w[1].pre_s, 4) && NEAR(k.bytes, 24));
    sim_w bad = { .name = "decoder/moe_layers/mlp/wo/kernel" };
    CHECK(sim_unrolled_add(&k, &bad, 2, &err) == SMOE_EINVAL);
}

/* One up projection per MLP activation (MaxText linears.py MlpBlock: wi
 * with one activation, wi_0 and wi_1 with two): gpt3-175b's ["gelu"]
 * against the same model with ["gelu", "linear"] differs by one forward
 * matmul of 2048 tokens x 12288 x 49152 at 2.307e15 / 2 x 0.85 (tpu7x's
 * dense matmuls), and by 3 in the full-remat backward. */
static void test_mlp_activations(const char *cfgdir)
{
    const char *two_acts[] = { "override_model_config=true", "mlp_activations=['gelu','linear']" };
    smoe_sim_model *one, *two;
    if (build_pair(cfgdir, "gpt3-175b", two_acts, 2, &one, &two)) {
        const double mm = 2.0 * 2048 * 12288 * 49152 / (2.307e15 / 2 * 0.85);
        CHECKF(fabs(two->k[0].fwd_pre - one->k[0].fwd_pre - mm) < 1e-9 * mm,
               "forward +%g s, expected %g", two->k[0].fwd_pre - one->k[0].fwd_pre, mm);
        CHECKF(fabs(two->k[0].bwd_full_pre - one->k[0].bwd_full_pre - 3 * mm) < 1e-9 * mm,
               "backward +%g s", two->k[0].bwd_full_pre - one->k[0].bwd_full_pre);
    }
    smoe_sim_model_free(one);
    smoe_sim_model_free(two);
}

/* The attention kernel's blocks by hand (attn_span.c), 1024 x 1024 blocks
 * over 4096 tokens: a causal mask leaves 1 + 2 + 3 + 4 = 10 blocks; a
 * window of 1024 (gemma3-12b) or 128 (gpt-oss-120b) keys 1 + 2 + 2 + 2 = 7
 * (a query block and the one before it). gemma3: 5 sliding layers in 6
 * (48 layers: 40 + 8), so (40 x 7 + 8 x 10) / (48 x 10); gpt-oss: 1 in 2.
 * llama4 (chunks of 8192, every 4th layer global) over 16384 tokens in
 * 2048-blocks: causal 1 + ... + 8 = 36, chunked 2 x (1 + 2 + 3 + 4) = 20;
 * over 8192 tokens one chunk is causal. A causal model is 1. */
static void test_attention_span(const char *cfgdir)
{
    static const struct {
        const char *model, *ov[3];
        double S, want;
    } t[] = {
        { "gemma3-12b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, (40.0 * 7 + 8 * 10) / 480 },
        { "gpt-oss-120b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, (7.0 + 10) / 20 },
        { "llama4-17b-16e", { "sa_block_q=2048", "sa_block_kv=2048" }, 16384,
          (36.0 * 20 + 12 * 36) / (48 * 36) },
        { "llama4-17b-16e", { "sa_block_q=2048", "sa_block_kv=2048" }, 8192, 1 },
        { "llama3.1-8b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, 1 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        smoe_config *cfg = load_model(cfgdir, t[i].model, t[i].ov, 2);
        smoe_dims d;
        smoe_err err;
        double got = -1;
        CHECK(cfg && smoe_plan_dims(cfg, &d, &err) == SMOE_OK &&
              sim_attention_span(cfg, &d, t[i].S, &got, &err) == SMOE_OK);
        CHECKF(fabs(got - t[i].want) < 1e-12, "%s at %g tokens: %g, expected %g", t[i].model,
               t[i].S, got, t[i].want);
        smoe_config_free(cfg);
    }
}

/* Tensor parallelism by hand (llama3.1-8b, 1 x 2048 tokens a device,
 * tpu7x): ici_tensor_parallelism=2 leaves a device's FLOPs as they were
 * and adds, per layer, 4 collectives forward (the layer input all-gathered
 * over the 2 devices before attention and before the MLP, each output
 * reduce-scattered), their transposes and the recomputed forward's in the
 * backward (full remat: 8), and the head input's all-gather and its
 * transpose. One moves (2 - 1) x 2048 x 4096 bf16 elements = 16777216
 * bytes at 1.2e12 / 2 / 2 bytes/s a device, after 3 x (2^(1/3) - 1) ICI
 * steps of 1e-6 s (tpu7x.yml). */
static void test_tensor_parallel(const char *cfgdir)
{
    const char *tp[] = { "ici_tensor_parallelism=2" };
    smoe_sim_model *a, *b;
    if (build_pair(cfgdir, "llama3.1-8b", tp, 1, &a, &b)) {
        const double one = 3 * (cbrt(2.0) - 1) * 1e-6 + 16777216.0 / (1.2e12 / 2 / 2);
        CHECKF(fabs(b->k[0].fwd_pre - a->k[0].fwd_pre - 4 * one) < 1e-12, "forward +%g, expected %g",
               b->k[0].fwd_pre - a->k[0].fwd_pre, 4 * one);
        CHECKF(fabs(b->k[0].bwd_full_pre - a->k[0].bwd_full_pre - 8 * one) < 1e-12,
               "full-remat backward +%g, expected %g", b->k[0].bwd_full_pre - a->k[0].bwd_full_pre,
               8 * one);
        CHECKF(fabs(b->head_s - a->head_s - 2 * one) < 1e-12, "head +%g", b->head_s - a->head_s);
        CHECK(NEAR(b->k[0].fwd_post, a->k[0].fwd_post));
    }
    smoe_sim_model_free(a);
    smoe_sim_model_free(b);
}

/* remat_policy custom by hand (deepseek2-16b: MLA without q_lora, emb
 * 2048, 16 heads of 128 + 64, T = 2048; tpu7x: the dense matmuls at
 * 2.307e15 / 2 x gemm_efficiency 0.85). The layer input alone is full remat; a saved tensor drops its
 * op from the backward's recompute and keeps its bytes on the device
 * (bf16); an offloaded one lives on the host and crosses the host link,
 * 1.5e10 / 2 bytes/s a device, each way. */
static void test_custom_remat(const char *cfgdir)
{
    char msg[512];
    const char *full[] = { "remat_policy=full" }, *in[] = { "remat_policy=custom" };
    const char *q[] = { "remat_policy=custom", "query_proj=device" };
    const char *ex[] = { "remat_policy=custom", "moe_mlpwi_0=device", "moe_mlpwi_1=device",
                         "moe_mlpwo=device" };
    const char *off[] = { "remat_policy=custom", "decoder_layer_input=offload" };
    smoe_sim_model *f = build_keys(cfgdir, full, 1, msg, sizeof msg);
    smoe_sim_model *c = build_keys(cfgdir, in, 1, msg, sizeof msg);
    smoe_sim_model *cq = build_keys(cfgdir, q, 2, msg, sizeof msg);
    smoe_sim_model *ce = build_keys(cfgdir, ex, 4, msg, sizeof msg);
    smoe_sim_model *co = build_keys(cfgdir, off, 2, msg, sizeof msg);
    CHECKF(f && c && cq && ce && co, "built: %s", msg);
    if (f && c && cq && ce && co) {
        const double T = 2048, ab = 2, rate = 2.307e15 / 2 * 0.85; /* gemm_efficiency */
        const double mm_q = 2 * T * 2048 * 16 * 192 / rate; /* wq: emb -> 16 x 192 */
        for (int k = 0; k < 2; k++) {
            CHECKF(NEAR(c->k[k].bwd_pre, f->k[k].bwd_pre) && NEAR(c->k[k].bwd_exp, f->k[k].bwd_exp),
                   "kind %d: the input alone is full remat", k);
            CHECKF(NEAR(c->k[k].act_mx_saved, T * 2048 * ab), "kind %d: input %g bytes", k,
                   c->k[k].act_mx_saved);
            CHECKF(fabs(cq->k[k].bwd_pre - (f->k[k].bwd_pre - mm_q)) < 1e-12 &&
                       NEAR(cq->k[k].fwd_pre, f->k[k].fwd_pre),
                   "kind %d: query_proj saved: backward %g, expected %g - %g", k,
                   cq->k[k].bwd_pre, f->k[k].bwd_pre, mm_q);
            CHECKF(NEAR(cq->k[k].act_mx_saved, T * (2048 + 16 * 192) * ab),
                   "kind %d: input and query %g bytes", k, cq->k[k].act_mx_saved);
            CHECKF(NEAR(co->k[k].act_mx_saved, 0) && NEAR(co->k[k].act_host, T * 2048 * ab) &&
                       NEAR(co->k[k].offload_s, T * 2048 * ab / (1.5e10 / 2)),
                   "kind %d: offloaded input: device %g host %g, %g s", k, co->k[k].act_mx_saved,
                   co->k[k].act_host, co->k[k].offload_s);
        }
        /* every routed output kept: the experts are not recomputed */
        CHECKF(NEAR(ce->k[1].bwd_exp, 2 * ce->k[1].fwd_exp) && NEAR(ce->k[1].rc[1], 0) &&
                   NEAR(ce->k[1].bwd_pre, f->k[1].bwd_pre),
               "routed outputs saved: backward %g of forward %g", ce->k[1].bwd_exp,
               ce->k[1].fwd_exp);
        /* the ragged buffer at EP 2: 2048 x 6 x min(2, 64 / 6) rows of
         * 1408 (wi_0, wi_1) and 2048 (wo) */
        double rows = T * 6 * 2;
        CHECKF(NEAR(ce->k[1].act_mx_saved, T * 2048 * ab + rows * (2 * 1408 + 2048) * ab),
               "routed outputs %g bytes", ce->k[1].act_mx_saved);
    }
    smoe_sim_model_free(f);
    smoe_sim_model_free(c);
    smoe_sim_model_free(cq);
    smoe_sim_model_free(ce);
    smoe_sim_model_free(co);
}

/* quantization=fp8_full by hand (deepseek2-16b on tpu7x, whose fp8 rate is
 * twice its bf16 one): the routed experts' matmuls take half the time,
 * the attention kernel keeps its bf16 time (MLA: 2 x 16 heads x 2048^2 x
 * (192 + 128) x 0.5 FLOPs at compute_efficiency 0.274) while the
 * projections halve, and the head and the gathers are unchanged. */
static void test_fp8_cost(const char *cfgdir)
{
    char msg[512];
    const char *q[] = { "quantization=fp8_full", "use_qwix_quantization=true" };
    smoe_sim_model *b = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *f = build_keys(cfgdir, q, 2, msg, sizeof msg);
    CHECKF(b && f, "built: %s", msg);
    if (b && f) {
        const double core = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 / (2.307e15 / 2 * 0.274);
        CHECKF(NEAR(f->k[1].fwd_exp * 2, b->k[1].fwd_exp), "experts %g, bf16 %g",
               f->k[1].fwd_exp, b->k[1].fwd_exp);
        for (int k = 0; k < 2; k++)
            CHECKF(fabs(f->k[k].fwd_pre - (core + (b->k[k].fwd_pre - core) / 2)) < 1e-12,
                   "kind %d: pre %g, bf16 %g, kernel %g", k, f->k[k].fwd_pre, b->k[k].fwd_pre,
                   core);
        CHECKF(NEAR(f->head_s, b->head_s) && NEAR(f->top_gather_s, b->top_gather_s) &&
                   NEAR(f->k[1].w[0].pre_s, b->k[1].w[0].pre_s),
               "head and gathers unchanged");
    }
    smoe_sim_model_free(b);
    smoe_sim_model_free(f);
}

/* gemm_efficiency by hand (deepseek2-16b on tpu7x: the dense matmuls at
 * 0.85 of 2.307e15 / 2, the attention kernel and routed experts at
 * compute_efficiency 0.274): the head's three dots over 2048 tokens x
 * 2048 x the 102400-word vocabulary, and the experts' forward (2048 x 6
 * rows through 3 matmuls of 2048 x 1408). */
static void test_gemm_split(const char *cfgdir)
{
    char msg[512];
    smoe_sim_model *m = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    CHECKF(m != NULL, "built: %s", msg);
    if (!m)
        return;
    const double peak = 2.307e15 / 2, T = 2048;
    double head = 3 * 2 * T * 2048 * 102400 / (peak * 0.85);
    double ex = 3 * 2 * T * 6 * 2048 * 1408 / (peak * 0.274);
    CHECKF(fabs(m->head_s - head) < 1e-9 * head, "head %g s, expected %g", m->head_s, head);
    CHECKF(fabs(m->k[1].fwd_exp - ex) < 1e-9 * ex, "experts %g s, expected %g", m->k[1].fwd_exp,
           ex);
    smoe_sim_model_free(m);
}

/* Context parallelism by hand (deepseek2-16b on tpu7x, EP 2, context 2 of
 * 16 devices): a device's 2048 tokens of a 4096-token sequence cost the
 * projections of 2048 tokens alone (the same as one 2048-token sequence)
 * and twice the attention kernel (its keys span the whole sequence), plus
 * the keys' and values' all-gather over the pair: 2048 x 16 x (192 + 128)
 * bf16 elements from the other member, at 1.2e12 / 2 / 2 bytes/s a device
 * and 1 us a torus step (3 x (cbrt(2) - 1) steps for 2 members). The backward: the kernel's extra in its 3 passes, the
 * exchange twice (the recompute's gather, the gradients' reduce-scatter).
 * A shape whose context is not the mesh's is refused. */
static void test_context(const char *cfgdir)
{
    char msg[512];
    const char *ctx[] = { "ici_context_parallelism=2" };
    smoe_sim_shape a = { .batch = 1, .seq = 4096, .context = 2 };
    smoe_sim_shape b = { .batch = 1, .seq = 2048 };
    smoe_sim_model *ma = build_shape(cfgdir, "deepseek2-16b", ctx, 1, a, msg, sizeof msg);
    smoe_sim_model *mb = build_shape(cfgdir, "deepseek2-16b", NULL, 0, b, msg, sizeof msg);
    CHECKF(ma && mb, "built: %s", msg);
    if (ma && mb) {
        const double kernel = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 / (2.307e15 / 2 * 0.274);
        const double cp = 2048.0 * 16 * 320 * 2 / (1.2e12 / 4) + 3 * (cbrt(2.0) - 1) * 1e-6;
        for (int k = 0; k < 2; k++) {
            double df = ma->k[k].fwd_pre - mb->k[k].fwd_pre;
            double db = ma->k[k].bwd_pre - mb->k[k].bwd_pre;
            CHECKF(fabs(df - (kernel + cp)) < 1e-9, "kind %d: forward +%g, expected %g + %g", k,
                   df, kernel, cp);
            CHECKF(fabs(db - (3 * kernel + 2 * cp)) < 1e-9, "kind %d: backward +%g, expected %g",
                   k, db, 3 * kernel + 2 * cp);
            CHECKF(NEAR(ma->k[k].fwd_exp, mb->k[k].fwd_exp), "kind %d: the experts' tokens", k);
        }
    }
    smoe_sim_model_free(ma);
    smoe_sim_model_free(mb);
    a.context = 1;
    CHECK(build_shape(cfgdir, "deepseek2-16b", ctx, 1, a, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "must be the mesh's context axis (2)") != NULL, "'%s'", msg);
}

/* The fused names become their parts where the model fuses, and name
 * nothing where it does not (sim_rt_canon). */
static void test_rt_canon(void)
{
    smoe_dims d;
    memset(&d, 0, sizeof d);
    const unsigned Q = 1u << SMOE_RT_QUERY, K = 1u << SMOE_RT_KEY, V = 1u << SMOE_RT_VALUE;
    const unsigned QKV = 1u << SMOE_RT_QKV, W0 = 1u << SMOE_RT_MLPWI0, W1 = 1u << SMOE_RT_MLPWI1;
    const unsigned WI = 1u << SMOE_RT_MLPWI, C = 1u << SMOE_RT_CONTEXT;
    CHECK_INT((int)sim_rt_canon(&d, QKV | Q), (int)Q);
    CHECK_INT((int)sim_rt_canon(&d, 1u << SMOE_RT_KV), (int)(K | V));
    CHECK_INT((int)sim_rt_canon(&d, 1u << SMOE_RT_ATTN_OUT), (int)C);
    CHECK_INT((int)sim_rt_canon(&d, WI | W0), (int)W0);
    d.fused_qkv = d.fused_mlp = 1;
    CHECK_INT((int)sim_rt_canon(&d, Q | QKV), (int)(Q | K | V));
    CHECK_INT((int)sim_rt_canon(&d, Q), 0);
    CHECK_INT((int)sim_rt_canon(&d, WI), (int)(W0 | W1));
    CHECK_INT((int)sim_rt_canon(&d, W0), 0);
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
        test_custom_remat(argv[1]);
        test_scannable_block(argv[1]);
        test_unrolled(argv[1]);
        test_tensor_parallel(argv[1]);
        test_attention_span(argv[1]);
        test_mlp_activations(argv[1]);
        test_fp8_cost(argv[1]);
        test_gemm_split(argv[1]);
        test_context(argv[1]);
        test_vocab_tiling(argv[1]);
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
