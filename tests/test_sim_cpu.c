/* The simulator's rules for cpu profiles (smoe's runtime on MPI ranks)
 * against hand-computed schedules: smoe's executor (the buffer pool, the
 * reductions' root lag), and collectives across hosts (the network's part
 * of a collective stretches no compute; the parts the cost model gives).
 * White-box: builds step models by hand.
 * usage: test_sim_cpu CONFIG_DIR */
#include "../src/sched/sched_impl.h"
#include "check.h"
#include "sim_testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* The two layers of sim_testlib.h on a cpu profile (smoe's executor). */
static smoe_sim_model cpu_two_layers(void)
{
    smoe_sim_model m = two_layers(2);
    m.hw.kind = SMOE_HW_CPU;
    return m;
}

/* smoe's executor on a cpu profile, by hand (the two layers above; units
 * 0, 1 forward, 2, 3 backward): entries in list order, a pool of the
 * schedule's max distance + 2 buffers, a backward unit's buffer held until
 * its reductions end, the gradient buffer taking one; and the reductions'
 * root lag (reduce_lag_bandwidth: 100 bytes of gradient a second, 1 s per
 * layer) waited at the next unit's first gather or at the end. */
static void test_cpu_executor(void)
{
    smoe_sim_model m = cpu_two_layers();
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    /* depth 0, pool 2, no lag: as the accelerator case, 27 s, 8 s exposed */
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 27), "cpu baseline step %g, expected 27", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 8), "cpu baseline exposed %g, expected 8", r.exposed_gather_s);
    CHECKF(NEAR(r.mem_gathered, 200), "cpu baseline gathered %g, expected 200", r.mem_gathered);
    /* the lag: unit 3's gather [18, 21] waits unit 2's root 1 s; the end
     * waits the reduction [27, 28] and unit 3's root 1 s: 29 s, 9 s */
    m.hw.cpu.reduce_lag_bandwidth = 100;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 29), "cpu lag step %g, expected 29", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 9), "cpu lag exposed %g, expected 9", r.exposed_gather_s);
    /* depth 1, pool 3: unit 3's gather went at 8, so the lag of unit 2
     * only adds to the end: 21 + 2 s */
    s.prefetch_depth = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 23), "cpu depth-1 lag step %g, expected 23", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 2), "cpu depth-1 exposed %g, expected 2", r.exposed_gather_s);
    CHECKF(NEAR(r.mem_gathered, 300), "cpu depth-1 gathered %g, expected 300", r.mem_gathered);
    /* a 5 s reduction at depth 0: unit 2's buffer frees at 23, so unit 3's
     * gradient buffer waits [20, 23] (compute [23, 29], reduction [29, 34]):
     * 34 s where XLA's dataflow (XLA_PREFETCH: no pool) gives 31 s; and
     * the pool holds the peak at two layers (XLA_PREFETCH: three) */
    m.hw.cpu.reduce_lag_bandwidth = 0;
    m.k[0].w[0].rs_s = 5;
    s.prefetch_depth = 0;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 34), "cpu pool step %g, expected 34", r.step_s);
    CHECKF(NEAR(r.mem_gathered, 200), "cpu pool gathered %g, expected 200", r.mem_gathered);
    smoe_sim_model a = two_layers(2);
    a.k[0].w[0].rs_s = 5;
    s.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&a, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 31), "accelerator step %g, expected 31", r.step_s);
    CHECKF(NEAR(r.mem_gathered, 300), "accelerator gathered %g, expected 300", r.mem_gathered);
}

/* A backward unit's gradient buffer goes before later units' prefetches
 * (train's prefetch.c). Three layers of the model above, depth 1 (pool of
 * 3 buffers b0-b2), 5 s reductions: forward units 0-2 [2, 5] [5, 8]
 * [8, 11] (unit 0 waits its gather [0, 2]); unit 3 (the last layer's
 * backward) takes b1 for its gradients at 11, unit 4's gather b2 [11, 13],
 * compute [11, 17], reduction [17, 22]. Unit 4 at 17: b1 is free again and
 * its gradients take it, unit 5's gather waits for b0 (unit 3's, free at
 * 22) [22, 24]; compute [17, 23], reduction [23, 28]. Unit 5 waits its
 * gather [23, 24], computes [24, 30], reduces [30, 35]: 35 s, 3 s exposed.
 * Had unit 5's gather taken b1 at 17, unit 4's gradients would have waited
 * for b0 [17, 22], and the step would end at 39 s. */
/* The three layers, depth 1, rs_s reductions of which ar_s is the
 * all-reduce's: the step, the exposed wait, and the pool's three layers. */
static void three_layers(double rs_s, double ar_s, double step, double exposed,
                         const char *what)
{
    smoe_sim_model m = cpu_two_layers();
    m.L = 3;
    m.k[0].w[0].rs_s = rs_s;
    m.k[0].w[0].ar_s = ar_s;
    smoe_sim_result r;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_RUNTIME, 1, &r) == SMOE_OK);
    CHECKF(NEAR(r.step_s, step), "%s: step %g, expected %g", what, r.step_s, step);
    CHECKF(NEAR(r.exposed_gather_s, exposed), "%s: exposed %g, expected %g", what,
           r.exposed_gather_s, exposed);
    CHECKF(NEAR(r.mem_gathered, 300), "%s: gathered %g, expected 300", what, r.mem_gathered);
}

static void test_grad_before_prefetch(void) { three_layers(5, 0, 35, 3, "gradient buffer first"); }

/* A prefetch takes the buffer that frees first, as train's executor does,
 * not the first whose release is known when its point is reached. The
 * three layers above with 10 s reductions: unit 3 as above (compute
 * [11, 17], gradients in b1, reduction [17, 27], b2 held to 27); unit 4
 * takes b1 for its gradients at 17, computes [17, 23] and frees it at 23,
 * its reduction [27, 37]. Unit 5's gather (point 4, at 17) waits for a
 * buffer: b1 at 23, before b2 at 27: [23, 25]. Unit 5 waits for it
 * [23, 25] and for a gradient buffer (b2) [25, 27], computes [27, 33],
 * reduces [37, 47]: 47 s, 4 s exposed. Committed at 17 to b2 (the one
 * release known then), its gather would run [27, 29]: 8 s exposed. */
static void test_first_free_buffer(void)
{
    three_layers(10, 0, 47, 4, "the buffer that frees first");
}

/* Across hosts the gathers and the reductions share one link
 * (dcn_link_bandwidth; src/sched/link.c). The two layers above at depth 0
 * (pool 2), everything on the network (no stretch of the compute),
 * dcn_bandwidth = dcn_reduce_bandwidth = 1e8: forward gathers [0, 2]
 * [5, 7], computes [2, 5] [7, 10]; unit 2 gathers [10, 12], computes
 * [12, 18]; its 1 s reduction and unit 3's 2 s gather both start at 18.
 * Without the key each has the link: gather [18, 20], compute [20, 26],
 * reduction [26, 27]: 27 s, 8 s exposed.
 * A link of 1e8 (each asks all of it). Pass 1: the gather, issued after
 * the reduction, loses its 1 s: [18, 21]. Pass 2, against pass 1: the
 * reduction loses half of what both ask beyond the link while the gather
 * runs, three rounds of 1 s x 1/2, 1.5 x 1/2, 1.75 x 1/2: [18, 19.875];
 * the gather half of its 1 s overlap: [18, 20.5]. Pass 3, against pass 2:
 * the reduction [18, 19.875] again; the gather loses 1.875 x 1/2:
 * [18, 20.9375], compute [20.9375, 26.9375], reduction to 27.9375 s,
 * 8.9375 s exposed (fair shares: 28 s, 9 s).
 * A link of 4/3 x 1e8 (each asks 3/4 of it: 1/2 beyond it, each's part
 * 1/4 a second). Pass 1: the gather [18, 20.5]. Pass 2: the reduction
 * loses 1/4 of 1, 1.25, 1.3125 s: [18, 19.328125]; the gather 1/4 of
 * 1 s: [18, 20.25]. Pass 3: the reduction as in pass 2, the gather
 * 1/4 x 1.328125 s: [18, 20.33203125], the step 27.33203125 s (fair
 * shares: the gather at 20.5). A link of 2e8: both fit, 27 s. */
static void test_shared_link(void)
{
    smoe_sim_model m = cpu_two_layers();
    m.use_compute = 1;
    m.k[0].w[0].pre_net = 1;
    m.k[0].w[0].rs_net = 1;
    m.hw.dcn_bandwidth = 1e8;
    m.hw.cpu.dcn_reduce_bandwidth = 1e8;
    const double link[4] = { 0, 1e8, 4e8 / 3, 2e8 }, step[4] = { 27, 27.9375, 27.33203125, 27 };
    for (int i = 0; i < 4; i++) {
        smoe_sim_result r;
        m.hw.cpu.dcn_link_bandwidth = link[i];
        CHECK(run_depth(&m, SMOE_SIM_EXEC_RUNTIME, 0, &r) == SMOE_OK);
        CHECKF(NEAR(r.step_s, step[i]), "link %g: step %g, expected %g", link[i], r.step_s,
               step[i]);
        CHECKF(NEAR(r.exposed_gather_s, step[i] - 19), "link %g: exposed %g, expected %g",
               link[i], r.exposed_gather_s, step[i] - 19);
    }
}

/* A weight replicated across slices: its reduction is a reduce-scatter and
 * then an all-reduce of the shard's gradient, and the weights' buffer frees
 * when the reduce-scatter ends (train's prefetch.c), not the all-reduce.
 * The three layers above, the 5 s reductions a 1 s reduce-scatter and a
 * 4 s all-reduce: unit 3 computes [11, 17], its reduce-scatter [17, 18]
 * frees b0, its all-reduce [18, 22]; unit 4 computes [17, 23] (its
 * gradients in b1), and unit 5's gather takes b0 [18, 20]; unit 4's
 * reductions [23, 24] [24, 28]; unit 5 computes [23, 29] without a wait,
 * reduces [29, 30] [30, 34]: 34 s, 2 s exposed (unit 0's gather). Held to
 * the all-reduce's end, b0 would free at 22 as in the test above: 35 s,
 * 3 s.
 * The all-reduces run on a queue of their own, each gated on its own
 * reduce-scatter (the runtime's second-stage queue), so a long all-reduce
 * does not hold the next layer's reduce-scatter. With a 1 s reduce-scatter
 * and an 8 s all-reduce: unit 3's [17, 18] [18, 26]; unit 4's
 * reduce-scatter [23, 24], its all-reduce after unit 3's [26, 34]; unit
 * 5's [29, 30] [34, 42]: 42 s. Behind the all-reduces on one queue, unit
 * 4's reduce-scatter would wait to 26 and the step end at 44 s. */
static void test_slot_frees_after_reduce_scatter(void)
{
    three_layers(5, 4, 34, 2, "slot at the reduce-scatter");
    three_layers(9, 8, 42, 2, "all-reduces on their own queue");
}

/* On cpu profiles a collective stretches the compute it overlaps by the
 * overlap times the part of its time that is the cores' work (1 - the
 * network's part). The two layers above at depth 1 with
 * collectives_use_compute (pool of 3; units 0, 1 forward, 2, 3 backward).
 * All on the cores (within a node): unit 0 computes [2, 7] (unit 1's
 * gather [2, 4] overlaps 2 s), unit 1 [7, 12] (unit 2's gather [7, 9]),
 * unit 2 [12, 20] (unit 3's gather [12, 14]), its reduction [20, 21]
 * stretches unit 3 [20, 27], the last reduction [27, 28]: 28 s. Half of
 * each gather on the network: 1 s per overlap, [2, 6] [6, 10] [10, 17]
 * [17, 24], reduction [24, 25]: 25 s. All on the network: no stretch, the
 * 21 s of an accelerator (gathers and reductions beside the compute).
 * A profile that measured the cores' part of a layer's collectives
 * (gather_core_fraction 0.5: the ranks' CPU time in them, the TCP stack's
 * included) stretches by it whatever the network's part: [2, 6] [6, 10]
 * [10, 17], the reduction's 0.5 s [17, 23.5], reduction [23.5, 24.5]:
 * 24.5 s, 21.5 s compute. */
static void test_network_stretch(void)
{
    smoe_sim_model m = cpu_two_layers();
    m.use_compute = 1;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    s.prefetch_depth = 1;
    const double net[4] = { 0, 0.5, 1, 1 }, rnet[4] = { 0, 0, 1, 1 };
    const double step[4] = { 28, 25, 21, 24.5 }, comp[4] = { 25, 22, 18, 21.5 };
    for (int i = 0; i < 4; i++) {
        m.k[0].w[0].pre_net = net[i];
        m.k[0].w[0].rs_net = rnet[i];
        m.hw.cpu.gather_core_fraction = i == 3 ? 0.5 : 0;
        CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
        CHECKF(NEAR(r.step_s, step[i]), "network part %g: step %g, expected %g", net[i], r.step_s,
               step[i]);
        CHECKF(NEAR(r.compute_s, comp[i]), "network part %g: compute %g, expected %g", net[i],
               r.compute_s, comp[i]);
        CHECKF(NEAR(r.exposed_gather_s, 2), "network part %g: exposed %g, expected 2", net[i],
               r.exposed_gather_s);
    }
}

/* smoe's MoE backward in its model's order (model/moe.c moe_bwd): the
 * shared experts' and the combine's transposes, the exchange to the
 * experts' owners, the experts', the exchange back, then the router and
 * attention. Two MoE layers of the model above (pre 3 s of which half the
 * shared experts, the backward 2x; two 0.5 s exchanges per pass on the
 * reductions' engine, 6 s reductions), depth 1: forward [0, 2] gather,
 * [2, 5] compute, exchanges [5, 6]; [6, 9], [9, 10]. Backward unit 2
 * (gathered by then): shared experts [10, 13], exchanges [13, 14], the
 * rest [14, 17], its reduction [17, 23]. Unit 3: shared experts [17, 20],
 * its first exchange queues behind unit 2's reduction: [23, 24], the rest
 * [24, 27], reduction [27, 33]: 33 s, 7 s in the exchanges (3 s of it
 * waiting). In the forward's order (the whole 6 s first) unit 3's
 * exchanges would follow the reduction: 30 s, 4 s. */
static void test_moe_backward_order(void)
{
    smoe_sim_model m = cpu_two_layers();
    sim_kind *k = &m.k[0];
    k->moe = 1;
    k->pre_shared = 0.5;
    k->a2a_s = 0.5;
    k->w[0].rs_s = 6;
    smoe_sim_result r;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_RUNTIME, 1, &r) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 33), "moe backward order: step %g, expected 33", r.step_s);
    CHECKF(NEAR(r.a2a_s, 7), "moe backward order: exchanges %g, expected 7", r.a2a_s);
    CHECKF(NEAR(r.compute_s, 18), "moe backward order: compute %g, expected 18", r.compute_s);
    /* no shared experts: unit 3's first exchange at its start, 6 s behind
     * the reduction: exchanges [23, 24], compute [24, 30], reduction
     * [30, 36] */
    k->pre_shared = 0;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_RUNTIME, 1, &r) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 36), "moe backward, no shared experts: step %g, expected 36",
           r.step_s);
    CHECKF(NEAR(r.a2a_s, 10), "moe backward, no shared experts: exchanges %g, expected 10",
           r.a2a_s);
}

/* The network parts the cost model gives (coll(): the within-node ring's
 * steps and bytes are the cores' work, the network's latency and bytes are
 * not): deepseek2-16b on fsdp 2 x expert 2, a cpu profile of 2 ranks per
 * host (fsdp crosses the hosts) and of 4 (one host). A routed weight is
 * gathered over fsdp alone: all on the network across hosts. A weight
 * gathered 4-way over (fsdp, expert) in one stage of B bytes in: 1 member
 * of 3 on the node, t_local = B / ici, t_far = 2 B / dcn; one round (Open
 * MPI's linear MPI_Iallgather: the node's block arrives during the other
 * node's), so it takes dcn_latency + max(t_local, t_far) (not ici_latency
 * + dcn_latency + ...), t_local of it the cores'. On one host every part
 * is the cores' and the ring's 3 steps are paid: 3 ici_latency + 3 B / ici.
 * Its gradient's reduction costs the same (the gather's transpose; no axis
 * left to all-reduce over), or across hosts, where the profile measured
 * the reductions (dcn_reduce_bandwidth, dcn_reduce_latency), the same terms
 * at those figures; on one host they change nothing, and the within-host
 * reductions' own figures (ici_reduce_bandwidth, ici_reduce_latency: the
 * calibration on one host) give 3 ici_reduce_latency + 3 B / (their
 * bandwidth / 2). */
/* deepseek2-16b on fsdp 2 x expert 2 (4 devices): its plan, or NULL (a
 * check failed; *cfg freed). */
static smoe_plan *fsdp2_expert2(const char *cfgdir, smoe_config **cfg)
{
    const char *ov[] = { "ici_expert_parallelism=2" };
    smoe_plan_opts po = { 4, 1, NULL, 4 };
    smoe_plan *p = NULL;
    smoe_err err;
    *cfg = load_deepseek(cfgdir, ov, 1);
    if (*cfg && smoe_plan_build(*cfg, &po, &p, &err)) {
        CHECKF(0, "plan: %s", err.msg);
        smoe_config_free(*cfg);
        p = NULL;
    }
    return p;
}

static void test_network_parts(const char *cfgdir)
{
    smoe_config *cfg;
    smoe_plan *p = fsdp2_expert2(cfgdir, &cfg);
    smoe_err err;
    if (!p)
        return;
    smoe_hw hw = cpu_profile(); /* the network slower than the hosts */
    hw.ici_bandwidth = 4e9;
    hw.ici_latency = 1e-4;
    hw.dcn_bandwidth = 1e8;
    hw.dcn_latency = 4e-4;
    smoe_sim_shape sh = { .batch = 1, .seq = 128, .remat = SMOE_REMAT_NONE, .dtype_bytes = 4,
                          .compute_bytes = 4 };
    for (int pass = 0; pass < 4; pass++) {
        /* across hosts, then with the reductions' own figures, then one
         * host, then with the within-host reductions' figures */
        const int hosts = pass < 2 ? 2 : 1, red = pass > 0, ired = pass == 3;
        hw.devices_per_node = 4 / hosts;
        hw.cpu.dcn_reduce_bandwidth = red ? 5e7 : 0;
        hw.cpu.dcn_reduce_latency = red ? 1e-3 : 0;
        hw.cpu.ici_reduce_bandwidth = ired ? 1e9 : 0;
        hw.cpu.ici_reduce_latency = ired ? 3e-4 : 0;
        smoe_sim_model *m;
        if (smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err)) {
            CHECKF(0, "model: %s", err.msg);
            break;
        }
        int routed = 0, four = 0;
        for (int k = 0; k < m->nkinds; k++)
            for (int w = 0; w < m->k[k].nw; w++) {
                const sim_w *x = &m->k[k].w[w];
                const smoe_weight *pw = NULL;
                for (int i = 0; i < p->n && !pw; i++)
                    if (p->w[i].kind == SMOE_ENTRY_PARAM && strcmp(p->w[i].path, x->name) == 0)
                        pw = &p->w[i];
                if (!pw)
                    continue;
                const smoe_gather *g = &pw->gather;
                int stages = 0, d4 = -1;
                for (int d = 0; d < g->rank; d++)
                    if (g->axes[d].n) {
                        stages++;
                        if (g->axes[d].n == 2)
                            d4 = d;
                    }
                if (hosts == 1) {
                    CHECKF(x->pre_net == 0 && x->rs_net == 0, "%s on one host: network parts %g %g",
                           x->name, x->pre_net, x->rs_net);
                } else if (x->routed && stages == 1 && d4 < 0) {
                    routed++;
                    CHECKF(NEAR(x->pre_net, 1), "%s over fsdp: network part %g, expected 1",
                           x->name, x->pre_net);
                } else if (stages == 1 && d4 >= 0 && !x->routed) {
                    four++;
                    double B = (double)g->bytes_in, ici = hw.ici_bandwidth / 2;
                    double tl = B / ici, tf = 2 * B / hw.dcn_bandwidth;
                    double t = hw.dcn_latency + fmax(tl, tf), want = 1 - tl / t;
                    CHECKF(fabs(x->pre_net - want) < 1e-9, "%s 4-way: network part %g, expected %g",
                           x->name, x->pre_net, want);
                    CHECKF(fabs(x->pre_stored_s - t) < 1e-12, "%s 4-way across hosts: %g s, "
                           "expected %g", x->name, x->pre_stored_s, t);
                    /* its reduction: the gather's terms at the reductions' own
                     * figures where the profile has them */
                    double tr = red ? hw.cpu.dcn_reduce_latency +
                                      fmax(tl, 2 * B / hw.cpu.dcn_reduce_bandwidth) : t;
                    CHECKF(fabs(x->rs_s - tr) < 1e-12, "%s 4-way reduction across hosts%s: "
                           "%g s, expected %g", x->name, red ? " (its own figures)" : "", x->rs_s,
                           tr);
                    CHECKF(fabs(x->rs_net - (1 - tl / tr)) < 1e-9, "%s 4-way reduction: "
                           "network part %g, expected %g", x->name, x->rs_net, 1 - tl / tr);
                }
                if (hosts == 1 && stages == 1 && d4 >= 0 && !x->routed) {
                    double B = (double)g->bytes_in, t = 3 * hw.ici_latency +
                                                        3 * B / (hw.ici_bandwidth / 2);
                    CHECKF(fabs(x->pre_stored_s - t) < 1e-12, "%s 4-way on one host: %g s, "
                           "expected %g", x->name, x->pre_stored_s, t);
                    double tr = ired ? 3 * hw.cpu.ici_reduce_latency +
                                       3 * B / (hw.cpu.ici_reduce_bandwidth / 2) : t;
                    CHECKF(fabs(x->rs_s - tr) < 1e-12, "%s 4-way reduction on one host%s: %g s, "
                           "expected %g", x->name, ired ? " (its own figures)" : "", x->rs_s, tr);
                    four++;
                }
            }
        CHECKF((hosts == 1 || routed > 0) && four > 0, "%d host(s): checked %d routed and %d "
               "4-way weights", hosts, routed, four);
        smoe_sim_model_free(m);
    }
    smoe_plan_free(p);
    smoe_config_free(cfg);
}

/* smoe's executor gathers the top-level weights as train's loop does: the
 * embedding (1 s) at the step's start, then the schedule's first entries,
 * then the head's weights (2 s), waited for only at the head. The two
 * layers above at depth 1 (pool 3): embedding [0, 1] (1 s exposed), unit
 * 0's gather [1, 3] (2 s), the head's [3, 5], unit 1's [5, 7] (1 s after
 * unit 0's compute [3, 6]), unit 2's [7, 9], unit 1 computes [7, 10], the
 * head's weights are there; the backward [10, 16] and [16, 22] with its
 * reductions to 23: 23 s, 4 s exposed (one top-level block before unit
 * 0's gather, as on accelerators: 24 s, 5 s). At depth 0 both give 30 s,
 * 11 s (unit 0's gather behind the head's weights instead of after them
 * all). */
static void test_top_level(void)
{
    smoe_sim_model m = cpu_two_layers();
    m.top_gather_s = 3;
    m.top_embed_s = 1;
    /* and with a 4 s optimizer: with prefetch it updates layer 0 (half the
     * gathered bytes; the top-level weights count none here) and then
     * issues the next step's first gathers, so they go 2 s before the
     * step's start: embedding [-2, -1], unit 0 [-1, 1], head [1, 3]; unit
     * 0 waits [0, 1], computes [1, 4]; unit 1's gather (at 1) [3, 5] waits
     * [4, 5], compute [5, 8]; the backward as above from 8: units 2, 3
     * [8, 14] [14, 20], reduction [20, 21], the optimizer [21, 25]: 25 s,
     * 2 s exposed (not 27 s, 4 s). Without prefetch the first gathers stay
     * at the step's start: 30 + 4 s, 11 s exposed. Of the exposed time the
 * top-level weights' part is the embedding's [0, 1] (1 s; the head's are
 * there before the head), none where it went before the step's start. */
    static const struct {
        int depth;
        double optimizer, step, exposed, top;
    } cases[] = { { 1, 0, 23, 4, 1 }, { 0, 0, 30, 11, 1 }, { 0, 4, 34, 11, 1 }, { 1, 4, 25, 2, 0 } };
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s.prefetch_depth = cases[i].depth;
        m.optimizer_s = cases[i].optimizer;
        CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
        CHECKF(NEAR(r.step_s, cases[i].step), "top-level depth %d, optimizer %g s: step %g, expected %g",
               cases[i].depth, cases[i].optimizer, r.step_s, cases[i].step);
        CHECKF(NEAR(r.exposed_gather_s, cases[i].exposed),
               "top-level depth %d, optimizer %g s: exposed %g, expected %g", cases[i].depth,
               cases[i].optimizer, r.exposed_gather_s, cases[i].exposed);
        CHECKF(NEAR(r.exposed_top_s, cases[i].top),
               "top-level depth %d, optimizer %g s: top-level exposed %g, expected %g",
               cases[i].depth, cases[i].optimizer, r.exposed_top_s, cases[i].top);
    }
}

/* Ranks that share cores (sched/cores.c): a step is bounded by the ranks'
 * CPU work over the cores and by one rank's path with its compute at a
 * whole core's rate. The two layers above on a cpu profile (depth 0, pool
 * 2; units 0, 1 forward 3 s, 2, 3 backward 6 s at the every-rank-busy
 * rate; gathers 2 s; reductions 1 s), 4 ranks a host.
 *   core_share 0.25 (a core between the 4): a rank alone computes at 4x,
 *   0.75 s forward, 1.5 s backward. Path with no wait at sync points: g0
 *   [0, 2] c [2, 2.75], g1 [2.75, 4.75] c [4.75, 5.5], g2 [5.5, 7.5] c
 *   [7.5, 9] r [9, 10], g3 [9, 11] c [11, 12.5] r [12.5, 13.5]: 13.5 s.
 *   Work: 3 + 3 + 6 + 6 = 18 s, so the 3 sync points (units 1-3's first
 *   gathers; unit 0's at the step's start is none) wait (18 - 13.5) / 3 =
 *   1.5 s each: g1 [2.75, 6.25] c [6.25, 7], g2 [7, 10.5] c [10.5, 12] r
 *   [12, 13], g3 [12, 15.5] c [15.5, 17] r [17, 18]: 18 s, 2 + 3 x 3.5 =
 *   12.5 s exposed, 4.5 s compute.
 *   At depth 1 (pool 3) the path is g0 [0, 2] c [2, 2.75], g1 (issued
 *   with g0 at the step's start: no sync point) [2, 4] c [4, 4.75], g2
 *   (at 2.75) [4, 6] c [6, 7.5] r [7.5, 8.5], g3 (at 4.75) [6, 8] c
 *   [8, 9.5] r [9.5, 10.5]: 10.5 s; the 2 sync points wait 7.5 / 2 =
 *   3.75 s: g2 [4, 9.75] c [9.75, 11.25] r [11.25, 12.25], g3 [9.75, 15.5]
 *   c [15.5, 17] r [17, 18]: 18 s again (the step is the cores' work),
 *   2 + 1.25 + 5 + 4.25 = 12.5 s exposed.
 *   With gather_core_fraction 0.5 (half a gather's time the cores' work,
 *   the rest waiting on the others' turns, which runs during the wait):
 *   a sync point takes max(2, wait + 1). Depth 0: 2.5 s each, g1 [2.75,
 *   5.25] c [5.25, 6], g2 [6, 8.5] c [8.5, 10] r [10, 11], g3 [10, 12.5]
 *   c [12.5, 14] r [14, 15]: the work's 18 s, 2 + 3 x 2.5 = 9.5 s exposed.
 *   Depth 1: 4.75 s, g2 [4, 8.75] c [8.75, 10.25] r [10.25, 11.25], g3
 *   [8.75, 13.5] c [13.5, 15] r [15, 16]: 18 s, 2 + 1.25 + 4 + 3.25 =
 *   10.5 s exposed.
 *   10 s gathers: the path g0 [0, 10] c [10, 10.75], g1 [10.75, 20.75]
 *   c [20.75, 21.5], g2 [21.5, 31.5] c [31.5, 33] r [33, 34], g3 [33, 43]
 *   c [43, 44.5] r [44.5, 45.5] is over the work: 45.5 s, 40 s exposed,
 *   no wait added.
 *   core_share 0.5 with 1 rank a host (half a core in all): alone it
 *   still has half a core, the profile's rates: the baseline's 27 s. And
 *   a profile without core_share keeps its sync_skew (1 s at 3 sync
 *   points: 30 s), as does a model whose gathers cross hosts (a network
 *   part). */
static void test_core_share(void)
{
    smoe_sim_model m = cpu_two_layers();
    m.hw.devices_per_node = 4;
    m.hw.cpu.core_share = 0.25;
    m.skew = 1; /* replaced by the cores' bound */
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 18), "shared cores depth 0: step %g, expected 18", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 12.5), "shared cores depth 0: exposed %g, expected 12.5",
           r.exposed_gather_s);
    CHECKF(NEAR(r.compute_s, 4.5), "shared cores depth 0: compute %g, expected 4.5", r.compute_s);
    s.prefetch_depth = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 18), "shared cores depth 1: step %g, expected 18", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 12.5), "shared cores depth 1: exposed %g, expected 12.5",
           r.exposed_gather_s);
    m.hw.cpu.gather_core_fraction = 0.5;
    const double part_exposed[2] = { 9.5, 10.5 };
    for (int d = 0; d < 2; d++) {
        s.prefetch_depth = d;
        CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
        CHECKF(NEAR(r.step_s, 18) && NEAR(r.exposed_gather_s, part_exposed[d]),
               "shared cores, half the gathers the cores' work, depth %d: step %g, exposed %g, "
               "expected 18, %g", d, r.step_s, r.exposed_gather_s, part_exposed[d]);
    }
    m.hw.cpu.gather_core_fraction = 0;
    s.prefetch_depth = 0;
    m.k[0].w[0].pre_s = 10;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 45.5), "shared cores, long gathers: step %g, expected 45.5", r.step_s);
    CHECKF(NEAR(r.exposed_gather_s, 40), "shared cores, long gathers: exposed %g, expected 40",
           r.exposed_gather_s);
    m.k[0].w[0].pre_s = 2;
    m.k[0].w[0].pre_net = 0.5; /* across hosts: the profile's rates and skew */
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 30), "shared cores across hosts: step %g, expected 30", r.step_s);
    m.k[0].w[0].pre_net = 0;
    m.hw.devices_per_node = 1;
    m.hw.cpu.core_share = 0.5;
    m.skew = 0;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 27), "half a core in all: step %g, expected 27", r.step_s);
    m.hw.cpu.core_share = 0;
    m.skew = 1;
    CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
    CHECKF(NEAR(r.step_s, 30), "no core_share: step %g, expected 30", r.step_s);
}

/* The progress mode and the cross-host terms of a gather, by hand, on the
 * same plan (fsdp 2 x expert 2): smoe_sim_gather_far, which the cost model
 * and the calibration across hosts both use, gives a 4-way (fsdp, expert)
 * stage of B bytes in 3 B received, 2 B of them from the other host over
 * one cross-host step; a 2-way fsdp stage B over one step; an expert stage
 * nothing. A profile that progresses only inside MPI calls ("calls") is
 * refused across hosts, in one line naming the profile and the flag, and
 * predicted on one host; "thread" (and an in-memory profile that does not
 * say) across hosts too. */
static void test_progress_mode(const char *cfgdir)
{
    smoe_config *cfg;
    smoe_plan *p = fsdp2_expert2(cfgdir, &cfg);
    smoe_err err;
    if (!p)
        return;
    int kinds[3] = { 0, 0, 0 };
    for (int i = 0; i < p->n; i++) {
        const smoe_gather *g = &p->w[i].gather;
        if (p->w[i].kind != SMOE_ENTRY_PARAM)
            continue;
        int stages = 0, k = -1;
        for (int d = 0; d < g->rank; d++)
            if (g->axes[d].n) {
                stages++;
                k = g->axes[d].n == 2 ? 0 : smoe_axes_has(&g->axes[d], "fsdp") ? 1 : 2;
            }
        if (stages != 1)
            continue;
        double B = (double)g->bytes_in, fb, fs;
        const double want_b[3] = { 2 * B, B, 0 }, want_s[3] = { 1, 1, 0 };
        smoe_sim_gather_far(g, &p->mesh, 2, 1, &fb, &fs);
        CHECKF(NEAR(fb, want_b[k]) && NEAR(fs, want_s[k]), "%s: %g bytes from the other host "
               "over %g steps, expected %g over %g", p->w[i].path, fb, fs, want_b[k], want_s[k]);
        smoe_sim_gather_far(g, &p->mesh, 2, 4, &fb, &fs);
        CHECKF(NEAR(fb, 4 * want_b[k]) && NEAR(fs, want_s[k]), "%s at 4x: %g over %g",
               p->w[i].path, fb, fs);
        smoe_sim_gather_far(g, &p->mesh, 4, 1, &fb, &fs);
        CHECKF(fb == 0 && fs == 0, "%s on one host: %g over %g", p->w[i].path, fb, fs);
        /* the within-host part (smoe_sim_gather_near, what the calibration
         * on one host fits ici_latency and ici_bandwidth to): the bytes as
         * coll_at times them, (members - 1) x B x (host members - 1) /
         * (members - 1), over host members - 1 steps. 2 hosts: a 4-way
         * stage B over 1 step, an fsdp stage (a member on each host)
         * nothing, an expert stage B over 1; one host: 3 B over 3, B over
         * 1, B over 1. */
        const double near_b[2][3] = { { B, 0, B }, { 3 * B, B, B } };
        const double near_s[2][3] = { { 1, 0, 1 }, { 3, 1, 1 } };
        for (int one = 0; one < 2; one++) {
            double nb, ns;
            smoe_sim_gather_near(g, &p->mesh, one ? 4 : 2, 1, &nb, &ns);
            CHECKF(NEAR(nb, near_b[one][k]) && NEAR(ns, near_s[one][k]), "%s, %d host(s): %g "
                   "bytes within the host over %g steps, expected %g over %g", p->w[i].path,
                   2 - one, nb, ns, near_b[one][k], near_s[one][k]);
        }
        kinds[k]++;
    }
    CHECKF(kinds[0] > 0 && kinds[1] > 0, "checked %d 4-way and %d fsdp stages",
           kinds[0], kinds[1]);
    smoe_hw hw = cpu_profile();
    smoe_sim_shape sh = { .batch = 1, .seq = 128, .remat = SMOE_REMAT_NONE, .dtype_bytes = 4,
                          .compute_bytes = 4 };
    const char *mode[3] = { "calls", "thread", "" };
    for (int hosts = 2; hosts >= 1; hosts--)
        for (int i = 0; i < 3; i++) {
            hw.devices_per_node = 4 / hosts;
            snprintf(hw.cpu.progress, sizeof hw.cpu.progress, "%s", mode[i]);
            smoe_sim_model *m = NULL;
            memset(&err, 0, sizeof err);
            smoe_status st = smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err);
            int refuse = hosts == 2 && i == 0;
            CHECKF(refuse ? st == SMOE_EINVAL && strstr(err.msg, "progress 'calls'") &&
                                strstr(err.msg, "--progress-thread") && !strchr(err.msg, '\n')
                          : st == SMOE_OK,
                   "%d host(s), progress '%s': status %d (%s)", hosts, mode[i], (int)st, err.msg);
            smoe_sim_model_free(m);
        }
    smoe_plan_free(p);
    smoe_config_free(cfg);
}

/* A cpu profile times smoe's own runtime, not MaxText's buffers
 * (layer_cost.c buffer_passes): deepseek2-16b on fsdp 2 x expert 2, 128
 * tokens a device, 6 experts a token; the experts' activation runs over
 * the 128 x 6 routed rows, three passes of 1408 fp32 elements, with the
 * all-to-all and with ring of experts alike (MaxText's buffer would hold
 * twice the rows, ring's a zeroing pass more). Read off the
 * elementwise rate: doubling it takes away half the passes' time, times
 * the profile's compute_scale (1.7, as every compute time). */
static void test_cpu_routed_rows(const char *cfgdir)
{
    const double rows = 128.0 * 6, ew = 1.1e10;
    const double want = 1.7 * 4 * 3 * rows * 1408 * (1 / ew - 1 / (2 * ew));
    smoe_config *cfg;
    smoe_plan *p = fsdp2_expert2(cfgdir, &cfg);
    for (int ring = 0; p && ring < 2; ring++) {
        double fwd[2] = { 0, 0 };
        for (int i = 0; i < 2; i++) {
            smoe_hw hw = cpu_profile();
            hw.cpu.elementwise_bandwidth = ew * (1 + i);
            smoe_sim_shape sh = { .batch = 1, .seq = 128, .remat = SMOE_REMAT_NONE,
                                  .dtype_bytes = 4, .compute_bytes = 4, .ring_of_experts = ring };
            smoe_sim_model *m = NULL;
            smoe_err err;
            if (smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err) == SMOE_OK)
                fwd[i] = m->k[1].fwd_exp;
            else
                CHECKF(0, "model: %s", err.msg);
            smoe_sim_model_free(m);
        }
        CHECKF(fabs(fwd[0] - fwd[1] - want) < 1e-9 * want, "ring %d: the passes %g s, expected %g",
               ring, fwd[0] - fwd[1], want);
    }
    if (p) {
        smoe_plan_free(p);
        smoe_config_free(cfg);
    }
}

int main(int argc, char **argv)
{
    test_cpu_executor();
    test_grad_before_prefetch();
    test_slot_frees_after_reduce_scatter();
    test_first_free_buffer();
    test_network_stretch();
    test_shared_link();
    test_top_level();
    test_core_share();
    test_moe_backward_order();
    if (argc > 1)
        test_network_parts(argv[1]);
    if (argc > 1)
        test_progress_mode(argv[1]);
    if (argc > 1)
        test_cpu_routed_rows(argv[1]);
    return check_report();
}
