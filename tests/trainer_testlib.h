/* The tiny model on one rank, for in-process tests of the trainer API
 * (train.h): its config (CONFIG_DIR/train.yml, model tiny), its plan on
 * one device and the single-rank communicator (smoe_comm_local_new: no
 * MPI linked). */
#ifndef SMOE_TEST_TRAINER_TESTLIB_H
#define SMOE_TEST_TRAINER_TESTLIB_H

#include "smoe/train.h"

#include <stdio.h>
#include <string.h>

typedef struct tiny_rank {
    smoe_config *cfg;
    smoe_plan *plan;
    smoe_comm comm;
    smoe_schedule *sched; /* depth 1, co-axis gathers */
} tiny_rank;

/* The schedules tiny_opts names: the last tiny_rank_init's depth 1. */
static const smoe_schedule *tiny_schedules[1];

/* 0, or 1 with err set (what is made is freed by tiny_rank_free). */
static inline int tiny_rank_init(tiny_rank *r, const char *cfgdir, smoe_err *err)
{
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", cfgdir);
    memset(r, 0, sizeof *r);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    smoe_plan_opts po = { 1, 1, NULL, 4 };
    if (smoe_config_load(&co, &r->cfg, err) || smoe_plan_build(r->cfg, &po, &r->plan, err) ||
        smoe_comm_local_new(&r->plan->mesh, 20, &r->comm, err) ||
        smoe_schedule_for_plan(r->plan, 1, 0, &r->sched, err))
        return 1;
    tiny_schedules[0] = r->sched;
    return 0;
}

static inline void tiny_rank_free(tiny_rank *r)
{
    if (r->comm.ctx)
        smoe_comm_local_free(&r->comm);
    smoe_schedule_free(r->sched);
    smoe_plan_free(r->plan);
    smoe_config_free(r->cfg);
}

/* Options for `steps` steps: seed 7, prefetch depth 1 (tiny_rank_init's
 * schedule), nothing else. */
static inline smoe_train_opts tiny_opts(int64_t steps)
{
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = steps;
    o.seed = 7;
    o.schedules = tiny_schedules;
    o.nschedules = 1;
    return o;
}

#endif
