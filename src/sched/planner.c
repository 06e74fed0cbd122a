/* Memory-budgeted prefetch planning. Every (layer kind, weight) gets a
 * level: 0 = gathered just before use; level L prefetches a quarter-chunk
 * count of (L - 1) % 4 + 1 of the weight (L - 1) / 4 + 1 layers ahead. The
 * greedy search starts from nothing prefetched and repeatedly raises the
 * level that saves the most exposed gather time per byte of extra peak
 * memory, as long as the peak stays within the budget; each accepted step
 * is a point of the Pareto curve (peak HBM, exposed wait). The uniform
 * depths 1..4 are checked too, so an unlimited budget does at least as
 * well as unlimited depth. The whole-weight variant raises levels four at
 * a time (a weight is prefetched whole or not at all), which is what smoe
 * train executes. */
#include "sched_impl.h"

#include <math.h>
#include <string.h>

#define MAX_LEVEL 8 /* up to two layers ahead, in quarters */

typedef unsigned char levels[2][SMOE_SIM_MAX_WEIGHTS];

static smoe_status eval(const smoe_sim_model *m, smoe_sim_executor exec, int shared, levels lv,
                        smoe_sim_result *r)
{
    smoe_sim_sched s;
    memset(&s, 0, sizeof s);
    s.executor = exec;
    s.shared_engine = shared;
    s.distance = (const unsigned char(*)[SMOE_SIM_MAX_WEIGHTS])lv;
    return smoe_sim_run(m, &s, r, NULL);
}

static void add_point(smoe_sim_point *curve, int max, int *n, const smoe_sim_result *r)
{
    if (!curve || *n >= max)
        return;
    curve[*n].peak_hbm_bytes = r->peak_hbm_bytes;
    curve[*n].exposed_gather_s = r->exposed_gather_s;
    curve[*n].step_s = r->step_s;
    (*n)++;
}

/* The next greedy step from cur (at `now`): the weight whose prefetch a
 * quantum deeper saves the most exposed wait per extra byte and still fits
 * the budget; *bk < 0 when none does. */
static smoe_status best_step(const smoe_sim_model *m, smoe_sim_executor exec, int shared,
                             double budget, int quantum, levels cur, const smoe_sim_result *now,
                             int *bk, int *bw, smoe_sim_result *best_r)
{
    levels trial;
    smoe_sim_result r;
    double best_score = 0;
    *bk = *bw = -1;
    memset(best_r, 0, sizeof *best_r);
    for (int k = 0; k < m->nkinds; k++)
        for (int w = 0; w < m->k[k].nw; w++) {
            if (cur[k][w] + quantum > MAX_LEVEL || m->k[k].w[w].pre_s <= 0)
                continue;
            memcpy(trial, cur, sizeof trial);
            trial[k][w] = (unsigned char)(trial[k][w] + quantum);
            smoe_status s = eval(m, exec, shared, trial, &r);
            if (s)
                return s;
            double saved = now->exposed_gather_s - r.exposed_gather_s;
            double extra = fmax(r.peak_hbm_bytes - now->peak_hbm_bytes, 1.0);
            if (r.peak_hbm_bytes > budget || saved <= 1e-12)
                continue;
            double score = saved / extra;
            if (score > best_score) {
                best_score = score;
                *bk = k;
                *bw = w;
                *best_r = r;
            }
        }
    return SMOE_OK;
}

/* Uniform depths 1 to 4 as a check on the greedy result: one that fits
 * and hides more replaces it (cur, *now, the curve). */
static smoe_status uniform_check(const smoe_sim_model *m, smoe_sim_executor exec, int shared,
                                 double budget, levels cur, smoe_sim_result *now,
                                 smoe_sim_point *curve, int max_points, int *np)
{
    for (int d = 1; d <= 4; d++) {
        smoe_sim_sched sd;
        smoe_sim_result r;
        memset(&sd, 0, sizeof sd);
        sd.executor = exec;
        sd.prefetch_depth = d;
        sd.shared_engine = shared;
        smoe_status s = smoe_sim_run(m, &sd, &r, NULL);
        if (s)
            return s;
        if (r.peak_hbm_bytes <= budget && r.exposed_gather_s < now->exposed_gather_s - 1e-12) {
            *now = r;
            for (int k = 0; k < 2; k++)
                for (int w = 0; w < SMOE_SIM_MAX_WEIGHTS; w++)
                    cur[k][w] = (unsigned char)((d - 1) * 4 + 4 > 255 ? 255 : (d - 1) * 4 + 4);
            add_point(curve, max_points, np, now);
        }
    }
    return SMOE_OK;
}

static smoe_status plan(const smoe_sim_model *m, smoe_sim_executor exec, int shared,
                        double budget, int quantum,
                        unsigned char distance[][SMOE_SIM_MAX_WEIGHTS], smoe_sim_result *best,
                        int *feasible, smoe_sim_point *curve, int max_points, int *n_points)
{
    levels cur;
    memset(cur, 0, sizeof cur);
    smoe_sim_result base;
    smoe_status s;
    if (n_points)
        *n_points = 0;
    int np = 0;
    if (exec != SMOE_SIM_EXEC_XLA_PREFETCH && exec != SMOE_SIM_EXEC_RUNTIME)
        return SMOE_EINVAL; /* the others do not run smoe's schedules */
    if ((s = eval(m, exec, shared, cur, &base)))
        return s;
    add_point(curve, max_points, &np, &base);
    *feasible = base.peak_hbm_bytes <= budget;
    smoe_sim_result now = base;
    /* greedy: the best saving per byte that still fits */
    while (*feasible) {
        int bk, bw;
        smoe_sim_result best_r;
        if ((s = best_step(m, exec, shared, budget, quantum, cur, &now, &bk, &bw, &best_r)))
            return s;
        if (bk < 0)
            break;
        cur[bk][bw] = (unsigned char)(cur[bk][bw] + quantum);
        now = best_r;
        add_point(curve, max_points, &np, &now);
    }
    if (*feasible && (s = uniform_check(m, exec, shared, budget, cur, &now, curve, max_points, &np)))
        return s;
    if (!*feasible)
        now = base;
    if (distance)
        memcpy(distance, cur, sizeof cur);
    if (best)
        *best = now;
    if (n_points)
        *n_points = np;
    return SMOE_OK;
}

smoe_status smoe_sim_plan_budget(const smoe_sim_model *m, smoe_sim_executor exec, int shared,
                                 double budget, unsigned char distance[][SMOE_SIM_MAX_WEIGHTS],
                                 smoe_sim_result *best, int *feasible,
                                 smoe_sim_point *curve, int max_points, int *n_points)
{
    return plan(m, exec, shared, budget, 1, distance, best, feasible, curve, max_points,
                n_points);
}

smoe_status smoe_sim_plan_budget_whole(const smoe_sim_model *m, smoe_sim_executor exec,
                                       int shared, double budget,
                                       unsigned char distance[][SMOE_SIM_MAX_WEIGHTS],
                                       smoe_sim_result *best, int *feasible)
{
    return plan(m, exec, shared, budget, 4, distance, best, feasible, NULL, 0, NULL);
}
