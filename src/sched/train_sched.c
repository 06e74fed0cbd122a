/* The schedules smoe train runs, from what its command line asks: a
 * uniform prefetch depth over the plan's layer stacks, or the budgeted
 * planner's (whole weights, smoe's runtime executor) for a memory budget,
 * so a depth or a budget means the same schedule in smoe sim and smoe
 * train. */
#include "sched_impl.h"

#include <stdio.h>
#include <string.h>

smoe_status smoe_schedule_for_plan(const smoe_plan *plan, int depth, int legacy,
                                   smoe_schedule **out, smoe_err *err)
{
    static const char *const stacks[2] = { "decoder/dense_layers/", "decoder/moe_layers/" };
    const char *nm[2][SMOE_SIM_MAX_WEIGHTS];
    int nw[2] = { 0, 0 };
    int64_t layers[2] = { 0, 0 };
    *out = NULL;
    for (int i = 0; i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        for (int k = 0; k < 2 && w->kind == SMOE_ENTRY_PARAM && w->path; k++) {
            if (strncmp(w->path, stacks[k], strlen(stacks[k])) != 0)
                continue;
            if (nw[k] == SMOE_SIM_MAX_WEIGHTS)
                return smoe_err_set(err, SMOE_EINVAL, "%s: more than %d weights in a layer",
                                    stacks[k], SMOE_SIM_MAX_WEIGHTS);
            nm[k][nw[k]++] = w->path;
            layers[k] = w->layers;
        }
    }
    if (layers[0] + layers[1] > INT32_MAX)
        return smoe_err_set(err, SMOE_EINVAL, "%lld layers", (long long)(layers[0] + layers[1]));
    const char *const *names[2] = { nm[0], nm[1] };
    smoe_status s = smoe_schedule_build((int)(layers[0] + layers[1]), (int)layers[0], nw, names,
                                        depth, NULL, out, err);
    if (!s)
        (*out)->legacy = legacy ? 1 : 0;
    return s;
}

smoe_status smoe_schedule_for_budget(const smoe_config *cfg, const smoe_plan *plan,
                                     const smoe_hw *hw, int64_t batch, int64_t seq,
                                     int64_t budget, int64_t act_bytes, int legacy,
                                     smoe_schedule **out, smoe_err *err)
{
    *out = NULL;
    if (!hw)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--hbm-budget'",
                           "needs a hardware profile (--hardware)");
    smoe_sim_shape sh = { .batch = batch, .seq = seq, .remat = SMOE_REMAT_NONE,
                          .dtype_bytes = 4, .act_bytes = act_bytes };
    smoe_sim_model *m;
    smoe_status s = smoe_sim_dtypes(cfg, hw, &sh, err);
    if (!s)
        s = smoe_sim_model_build(cfg, plan, hw, &sh, &m, err);
    if (s)
        return s;
    unsigned char lv[2][SMOE_SIM_MAX_WEIGHTS];
    smoe_sim_result best;
    int feasible = 0;
    s = smoe_sim_plan_budget_whole(m, SMOE_SIM_EXEC_RUNTIME, 0, (double)budget, lv, &best,
                                   &feasible);
    if (!s)
        s = smoe_schedule_for_model(m, 0, (const unsigned char(*)[SMOE_SIM_MAX_WEIGHTS])lv, out,
                                    err);
    smoe_sim_model_free(m);
    if (s)
        return s == SMOE_ENOMEM ? smoe_err_set(err, s, "out of memory in the planner") : s;
    smoe_schedule *o = *out;
    o->budget = (double)budget;
    o->legacy = legacy ? 1 : 0;
    o->peak_bytes = best.peak_hbm_bytes;
    o->exposed_s = best.exposed_gather_s;
    o->step_s = best.step_s;
    int pre = 0;
    for (int i = 0; i < o->n; i++)
        pre += o->g[i].issue < o->g[i].unit;
    snprintf(o->note, sizeof o->note, "planned for %lld bytes on %s: %d of %d gathers "
             "prefetched, up to %d layers ahead%s", (long long)budget,
             hw->name, pre, o->n, smoe_schedule_max_distance(o),
             feasible ? "" : "; below the no-prefetch peak");
    return SMOE_OK;
}
