/* The CPU model's core sharing: one step of the simulator where a host's
 * ranks share fewer cores than they are (cpu profiles of smoe train on MPI
 * ranks), run by smoe_sim_run (sim.c) in place of the event loop's one
 * pass at the profile's rates. Only the cpu profile's terms (smoe_hw.cpu)
 * enter here; the executor is the request's, as in any pass.
 *
 * DESIGN. A cpu profile is measured with every rank busy at once
 * (smoe sim --calibrate), so its rates are a rank's while it has its
 * `core_share` of a core. In training the ranks do not stay busy: a rank
 * that waits at a collective sleeps between polls (runtime's wait loop),
 * and the ranks still computing get its core. A step is then bounded two
 * ways, as any schedule on P processors is by the work over P and by its
 * critical path (Brent's bound, R. P. Brent, "The parallel evaluation of
 * general arithmetic expressions", J. ACM 21(2), 1974; Graham's bound for
 * list scheduling, R. L. Graham, SIAM J. Appl. Math. 17(2), 1969):
 *   - the work: the host's ranks' CPU work over the cores they have. The
 *     ranks are alike, so it is one rank's work at the every-rank-busy
 *     rate (its compute and the cores' part of its collectives);
 *   - the path: one rank's step with its compute at a whole core's rate
 *     (the measured rate over its share: a rank alone on a core; where
 *     the ranks together have less than a core, at that).
 * The event loop runs the path first with no wait at sync points; when
 * the work exceeds it, the difference is the ranks arriving apart at the
 * sync points (a unit's first gather, an expert exchange: where a rank
 * that is ahead waits while the others compute), spread evenly over the
 * path's sync points, and the loop runs again with that wait. Where the
 * profile measured the cores' part of a layer's gathers
 * (gather_core_fraction f: on one host they take several times the
 * one-weight sweep's sum, most of the rest the ranks waiting on each
 * other's turns),
 * that rest runs during the wait, all members being on the host: the
 * last rank still does its own part, f of the gathers' time, after it
 * arrives, so a sync point takes max(gathers, wait + f x gathers)
 * (wait + gathers, added, over-predicted training's no-prefetch wait:
 * bench/results/2026-12-02-budget-sim-train.md).
 * The step is the larger of the two bounds. This takes the place of the
 * profile's sync_skew, which measured the same time-slicing after one
 * layer of compute; a profile without core_share (or with whole cores per
 * rank) runs once at the profile's rates with its sync_skew.
 * Only on one host. Across hosts the work is not all counted: the
 * transfers' part on the network (pre_net, rs_net) is the kernel's TCP
 * work, which on hosts that share cores (the netns hosts of the tests and
 * benchmarks) takes the same cores; and a wait spread over the sync
 * points lengthens gathers that are already on the path. There the loop
 * runs once, as before: the every-rank-busy rates and the profile's
 * sync_skew (docs/sim.md, "Checked against reality"). */
#include "sched_impl.h"

#include <math.h>

/* Does any gather cross hosts (the cost model gave it a network part)? */
static int on_network(const smoe_sim_model *m)
{
    int net = m->top_head_net > 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < m->k[k].nw; i++)
            net |= m->k[k].w[i].pre_net > 0 || m->k[k].w[i].rs_net > 0;
    return net;
}

int sim_cores_shared(const smoe_sim_model *m)
{
    double share = m->hw.cpu.core_share;
    return m->hw.kind == SMOE_HW_CPU && share > 0 && share < 1 && !on_network(m);
}

smoe_status sim_cores_step(const smoe_sim_model *m, const smoe_sim_sched *s,
                           const smoe_schedule *sc, smoe_sim_result *r, smoe_trace *trace)
{
    double share = m->hw.cpu.core_share, cores = share * m->hw.devices_per_node;
    sim_pass p = { .rate = share / fmin(1, cores) }; /* a rank alone on its core */
    sim_pass_out o;
    smoe_status st = sim_run_pass(m, s, sc, &p, r, &o, NULL);
    if (st)
        return st;
    double work = o.work_s, path = r->step_s;
    p.skew = o.nsync > 0 && work > path ? (work - path) / o.nsync : 0;
    p.overlap = 1;
    if ((st = sim_run_pass(m, s, sc, &p, r, &o, trace)))
        return st;
    r->step_s = fmax(r->step_s, work);
    return SMOE_OK;
}
