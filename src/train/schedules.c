/* The schedules smoe train runs: a file's, a uniform depth's, or the
 * budgeted planner's (smoe sim's, whole weights) on a hardware profile for
 * a memory budget, through the sched module's builders, so a depth or a
 * budget means the same schedule in smoe sim and smoe train; and the check
 * that every rank runs the same ones. */
#include "train_impl.h"

#include <stdio.h>
#include <string.h>

smoe_status tr_schedule_depth(const tr_store *st, const smoe_model_cfg *mc, int depth,
                              smoe_schedule **out, smoe_err *err)
{
    const char *nm[2][SMOE_SIM_MAX_WEIGHTS];
    int nw[2] = { 0, 0 };
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        if (w->top)
            continue;
        if (nw[w->moe] == SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINTERNAL, "too many weights in a layer");
        nm[w->moe][nw[w->moe]++] = w->pw->path;
    }
    const char *const *names[2] = { nm[0], nm[1] };
    return smoe_schedule_build((int)(mc->n_dense + mc->n_moe), (int)mc->n_dense, nw, names,
                               depth, NULL, out, err);
}

/* The planner counts memory as smoe sim does (its activation model, one
 * top-level copy); smoe train holds its own tracked classes under the
 * budget. So the planner gets the budget moved by the difference of the
 * two no-prefetch peaks: it spends on prefetch what the run can spend. It
 * simulates smoe's runtime, what smoe train executes, on any profile. */
static smoe_status tr_schedule_budget(const smoe_config *cfg, const smoe_plan *plan, const smoe_hw *hw,
                               const tr_store *st, const smoe_model_cfg *mc, int64_t budget,
                               smoe_schedule **out, char *note, size_t cap, smoe_err *err)
{
    *out = NULL;
    if (!hw)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--hbm-budget'",
                           "needs a hardware profile (--hardware)");
    /* smoe train's shape: its batch and sequence, no remat, float32 */
    smoe_sim_shape sh = { .batch = mc->batch, .seq = mc->seq, .remat = SMOE_REMAT_NONE,
                          .dtype_bytes = 4 };
    smoe_sim_model *m;
    smoe_status s = smoe_sim_dtypes(cfg, hw, &sh, err);
    if (!s)
        s = smoe_sim_model_build(cfg, plan, hw, &sh, &m, err);
    if (s)
        return s;
    int64_t act = 0;
    if ((s = smoe_model_need_bytes(mc, &act, err))) {
        smoe_sim_model_free(m);
        return s;
    }
    int64_t f = st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0] : st->unit_floats[1];
    tr_mem base = tr_mem_of(st, mc, act, 2 * f * (int64_t)sizeof(float));
    smoe_sim_sched none;
    smoe_sim_result r0, best;
    memset(&none, 0, sizeof none);
    none.executor = SMOE_SIM_EXEC_RUNTIME;
    unsigned char lv[2][SMOE_SIM_MAX_WEIGHTS];
    int feasible = 0;
    s = smoe_sim_run(m, &none, &r0, NULL);
    double shift = r0.peak_hbm_bytes - (double)(tr_mem_static(&base) + 2 * f * 4);
    if (!s)
        s = smoe_sim_plan_budget_whole(m, SMOE_SIM_EXEC_RUNTIME, 0, (double)budget + shift, lv,
                                       &best, &feasible);
    if (!s)
        s = smoe_schedule_for_model(m, 0, (const unsigned char(*)[SMOE_SIM_MAX_WEIGHTS])lv, out,
                                    err);
    smoe_sim_model_free(m);
    if (s)
        return s == SMOE_ENOMEM ? smoe_err_set(err, s, "out of memory in the planner") : s;
    (*out)->budget = (double)budget;
    (*out)->peak_bytes = best.peak_hbm_bytes;
    (*out)->exposed_s = best.exposed_gather_s;
    (*out)->step_s = best.step_s;
    int pre = 0;
    for (int i = 0; i < (*out)->n; i++)
        pre += (*out)->g[i].issue < (*out)->g[i].unit;
    snprintf(note, cap, "planned for %lld bytes on %s (%+.0f as smoe sim counts memory): %d of "
             "%d gathers prefetched, up to %d layers ahead%s", (long long)budget, hw->name, shift,
             pre, (*out)->n, smoe_schedule_max_distance(*out),
             feasible ? "" : "; below the no-prefetch peak");
    return SMOE_OK;
}

/* Every rank must issue the same gathers in the same order, or the
 * collectives stop matching: the schedules' digests agreed. */
static smoe_status check_same(const smoe_comm *cm, const smoe_schedule *const *sched, int n,
                              smoe_err *err)
{
    tr_sha *h = tr_sha_new();
    if (!h)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int m = 0; m < n; m++) {
        const smoe_schedule *s = sched[m];
        for (int k = 0; k < 2; k++)
            for (int w = 0; w < s->nweights[k]; w++)
                tr_sha_update(h, s->names[k][w], strlen(s->names[k][w]) + 1);
        for (int i = 0; i < s->n; i++) {
            const smoe_sched_gather *g = &s->g[i];
            int v[5] = { g->unit, g->weight, g->chunk0, g->nchunks, g->issue };
            tr_sha_update(h, v, sizeof v);
        }
    }
    char hex[65];
    tr_sha_final(h, hex);
    const char *names[1] = { "prefetch schedule" }, *dig[1] = { hex };
    return smoe_comm_check_same(cm, 1, names, dig, err);
}

smoe_status tr_schedules(const smoe_comm *cm, const smoe_config *cfg, const smoe_plan *plan,
                         const smoe_train_opts *o, const smoe_schedule *given,
                         const tr_store *st, const smoe_model_cfg *mc,
                         const smoe_train_mode *modes, int nmodes, smoe_schedule *own[],
                         const smoe_schedule *sched[], int *max_distance, char *note, size_t cap,
                         smoe_err *err)
{
    smoe_status s = SMOE_OK;
    if (nmodes > 1 && (given || o->hbm_budget))
        s = smoe_err_in(err, SMOE_EINVAL, given ? "argument '--schedule'"
                        : "argument '--hbm-budget'", "runs one schedule (not with --compare)");
    if (!s && given && o->hbm_budget)
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--schedule'",
                        "cannot be combined with --hbm-budget (which plans its own)");
    for (int i = 0; i < nmodes && !s; i++) {
        if (given)
            sched[i] = given;
        else if (modes[i].schedule)
            sched[i] = modes[i].schedule;
        else if (o->hbm_budget)
            s = tr_schedule_budget(cfg, plan, o->hw, st, mc, o->hbm_budget, &own[i], note, cap,
                                   err);
        else
            s = tr_schedule_depth(st, mc, modes[i].prefetch_depth, &own[i], err);
        if (own[i])
            sched[i] = own[i];
    }
    *max_distance = 0;
    for (int i = 0; i < nmodes && !s; i++)
        if (smoe_schedule_max_distance(sched[i]) > *max_distance)
            *max_distance = smoe_schedule_max_distance(sched[i]);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    return check_same(cm, sched, nmodes, err);
}
