/* The schedules smoe train runs (built by the caller: sched.h's
 * smoe_schedule_for_plan / smoe_schedule_for_budget, or a file): checked
 * and compared across ranks; and the activations the run tracks, the
 * count the simulator's runtime executor (the budgeted planner's) is
 * given. */
#include "train_impl.h"

#include <stdio.h>
#include <string.h>

smoe_status smoe_train_act_bytes(const smoe_model_cfg *mc, int64_t *bytes, smoe_err *err)
{
    int64_t act = 0;
    smoe_status s = smoe_model_need_bytes(mc, &act, err);
    *bytes = s ? 0 : act + tr_residual_bytes(mc);
    return s;
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
        int64_t plan[2] = { s->legacy, (int64_t)s->budget };
        tr_sha_update(h, plan, sizeof plan);
    }
    char hex[65];
    tr_sha_final(h, hex);
    const char *names[1] = { "prefetch schedule" }, *dig[1] = { hex };
    return smoe_comm_check_same(cm, 1, names, dig, err);
}

smoe_status tr_schedules(const smoe_comm *cm, const smoe_train_opts *o, int *max_distance,
                         int plans[2], smoe_err *err)
{
    smoe_status s = SMOE_OK;
    *max_distance = 0;
    plans[0] = plans[1] = 0;
    for (int i = 0; !s && i < o->nschedules; i++) { /* their number: tr_trainer_check */
        const smoe_schedule *sc = o->schedules[i];
        if (!sc) {
            s = smoe_err_set(err, SMOE_EINVAL, "schedule %d is NULL", i);
            break;
        }
        if (smoe_schedule_max_distance(sc) > *max_distance)
            *max_distance = smoe_schedule_max_distance(sc);
        plans[sc->legacy ? 1 : 0] = 1;
    }
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    return check_same(cm, o->schedules, o->nschedules, err);
}
