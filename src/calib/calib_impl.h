/* Internal to the calib module: the statistics its measurements share and
 * the measurement of a layer's gathers across hosts (layer_gathers.c). */
#ifndef SMOE_CALIB_IMPL_H
#define SMOE_CALIB_IMPL_H

#include "smoe/calib.h"

#include <stdio.h>

/* Every rate a median over CALIB_ROUNDS (more while they spread, up to
 * CALIB_MAX_ROUNDS) interleaved samples of about CALIB_TARGET_S each
 * (probe.c): timed as best of 5 over a few ms, a quiet machine's rates
 * did not repeat between two calibrations
 * (bench/results/2026-12-01-budget-sim-train.md). */
enum { CALIB_ROUNDS = 9 };
#define CALIB_TARGET_S 0.04

/* A compute-bound kernel timed while a rank had `had` of a core, brought to
 * the calibration's common share `to`: its CPU time is what the share does
 * not change (a rank's rate is its rate on a core times its share), so the
 * figures of one profile, timed seconds apart while others' load came and
 * went, describe one machine (at 4 ranks alone on 2 cores every share is
 * 0.50 and this is 1; under load the rates of one profile, each timed at
 * another share, described different machines:
 * bench/results/2026-12-02-budget-sim-train.md). Collectives are not
 * scaled: their wall time is partly waiting, not a core's work. */
static inline double calib_at_share(double had, double to)
{
    return had > 0 && to > 0 ? had / to : 1;
}

/* layer_compute.c: smoe's layer kernels against the cost model's roofline
 * (compute_scale; spr: the spread, the share of a core, the measured
 * seconds); what that allocates checked against the machine's memory
 * before anything is measured; the elementwise probe's length. */
SMOE_MUST_CHECK
smoe_status calib_compute(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                          const smoe_hw *hw, double share, double *scale, double spr[3],
                          smoe_err *err);
SMOE_MUST_CHECK
smoe_status calib_check_memory(const smoe_config *cfg, const smoe_plan *plan, smoe_err *err);
int64_t calib_act_elems(const smoe_config *cfg, const smoe_plan *plan);

/* The rate C of the simulator's shared link (sched/link.c: the later of
 * two transfers loses what they ask beyond it) at which gathers of tg s
 * and reductions of tr s alone, each moving b bytes from other hosts,
 * take tb s together: tb - max(tg, tr) = min(tg, tr) (b / (C tg) +
 * b / (C tr) - 1); INFINITY where they took no longer together than the
 * slower alone. */
double calib_link_rate(double tg, double tr, double tb, double b);
/* The median of n values (n <= 32; reordered). */
double calib_median(double *v, int n);
/* t = a + b x over n <= 6 points, robustly (Theil-Sen); a >= 0, b > 0. */
void calib_fit(const double *x, const double *t, int n, double *a, double *b);

/* One timed kernel of a measurement (probe.c): fn(ud) timed by every rank
 * at once over windows of many calls, the probes taking turns. */
enum { CALIB_MAX_ROUNDS = 15 };
#define CALIB_SPREAD_GOAL 0.10
typedef struct calib_probe {
    void (*fn)(void *ud);
    void *ud;
    int inner, rounds;              /* calls per sample (agreed), samples */
    double t[CALIB_MAX_ROUNDS];     /* s per call, each round's, the slowest rank's */
    double med, spread;             /* their median; interquartile range / median */
    double share;                   /* the median part of a core the smallest rank had */
} calib_probe;
/* The n probes, rounds (<= CALIB_MAX_ROUNDS; more while one spreads over
 * CALIB_SPREAD_GOAL) samples each in turn, a sample lasting about target s.
 * Collective. */
void calib_probe_run(smoe_rt *rt, calib_probe *p, int n, int rounds, double target);
/* The interquartile range of n values over their median (0 for n < 2). */
double calib_spread(const double *v, int n);

/* The cross-host figures of the cost model (dcn_latency per cross-host
 * step, dcn_bandwidth: bytes from other hosts per second per rank)
 * measured on the gathers smoe train issues: every gathered weight of one
 * layer of each kind of plan's model, started together on the runtime's
 * gather queue and waited for in order as the executor does at use, at the
 * model's sizes and at 2x and 4x them, all ranks at once (the hosts' ranks
 * share the link as in training), each after idle(ud) (a layer's
 * compute). Each set's time over its cross-host steps is fitted against
 * its bytes from other hosts per step (calib_fit): the cost model's
 * one-round gather across hosts (sched/cost.c coll_at). Where the fit
 * finds no slope (noise), bw (on entry: the one-weight sweep's) is kept
 * and lat is the sets' median time per step beyond their bytes at bw.
 * The same weights' gradient reductions, enqueued together as smoe train
 * does at the end of a layer's backward, give reduce_lat and reduce_bw on
 * the same terms (the gather's bytes and steps): Open MPI's libnbc reduces
 * a reduce-scatter to one root and scatters from it
 * (ompi/mca/coll/libnbc/nbc_ireduce_scatter_block.c),
 * which is not the gather's transpose on the wire.
 * Across hosts only when plan's mesh is the calibration's (fsdp = hosts,
 * expert = ranks per host, every other axis 1): the gathers then run on
 * the training's communicators; used = 0 otherwise (the caller keeps the
 * sweep's figures).
 * On one host (nodes 1, per_node > 1; any mesh: every communicator is
 * within it) the same sets give the within-host figures on the cost
 * model's terms instead (smoe_sim_gather_near): lat per within-host step
 * (ici_latency), bw the near bytes per second (ici_bandwidth / 2, coll_at's
 * rate); so do they across hosts with near_only, each weight's cross-host
 * axis dropped from its sharding (gathered within each host, replicated
 * across), the gathers alone (reduce_* not set). Collective. */
typedef struct calib_sets {
    double lat, bw;               /* in: the sweep's; out: the gathers' */
    double reduce_lat, reduce_bw; /* out: the reductions' (when used) */
    double link_bw;               /* out: across hosts, the link's rate for both at once
                                     (0: each has it to itself) */
    double step_bytes;            /* out: bytes per step of the model's layers */
    double cpu_share;             /* out: the ranks' CPU time in the sets over their wall
                                     time (a rank computing alone on its core: 1) */
    int used;
} calib_sets;
SMOE_MUST_CHECK
smoe_status calib_layer_gathers(smoe_rt *rt, const smoe_plan *plan, int nodes, int per_node,
                                int near_only, void (*idle)(void *), void *ud, calib_sets *out,
                                smoe_err *err);
/* The profile's figures from those sets, into hw (which holds the sweep's
 * on entry): on one host ici_latency, ici_bandwidth and ici_reduce_*,
 * across hosts dcn_latency, dcn_bandwidth and dcn_reduce_* and, from the
 * sets within each host (near_only), the ici_* ones; both ways
 * gather_core_fraction (the first sets' CPU share over `share`, the
 * rates' share of a core); *out the first sets' fit, *within the
 * within-host sets' across hosts (used = 0: those figures unchanged).
 * Collective. */
SMOE_MUST_CHECK
smoe_status calib_layer_figures(smoe_rt *rt, const smoe_plan *plan, int nodes, int per_node,
                                void (*idle)(void *), void *ud, double share, smoe_hw *hw,
                                calib_sets *out, calib_sets *within, smoe_err *err);

/* The profile's file (profile_file.c): rank 0's f, smoe_out's temporary
 * beside path (stdout when path is NULL), NULL on the other ranks. */
typedef struct calib_out {
    smoe_out *out; /* NULL: stdout, or not rank 0 */
    FILE *f;
} calib_out;
/* Create the temporary file before anything is measured; every rank
 * returns rank 0's verdict (SMOE_EIO naming path and the reason).
 * Collective. */
SMOE_MUST_CHECK
smoe_status calib_out_open(smoe_rt *rt, const char *path, calib_out *o, smoe_err *err);
/* Finish: with s == SMOE_OK (or a failed write) commit the file over path
 * (SMOE_EIO naming it and the OS error on failure); with another error
 * remove the temporary file and return s. Rank 0's call is the one that
 * acts. */
SMOE_MUST_CHECK
smoe_status calib_out_close(calib_out *o, smoe_status s, smoe_err *err);

#endif
