/* smoe train's library path in one process, for tests that ask what
 * `mpirun -n DEVICES smoe train --steps N KEY=VALUE...` says: the config
 * (CONFIG_DIR/train.yml, model tiny unless --model-like `model` is given),
 * the key checks, the plan on DEVICES devices and its even-shard checks,
 * the model config and, on one device, the run itself over the
 * single-rank communicator (no MPI). The same calls in the same order as
 * cli/cmd_train.c, so the error text is the CLI's line after "smoe: ".
 * The run's options are filled by inproc_opts alone. */
#ifndef SMOE_TEST_TRAIN_INPROC_H
#define SMOE_TEST_TRAIN_INPROC_H

#include "smoe/sched.h"
#include "smoe/train.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

typedef struct inproc_case {
    const char *cfgdir;        /* the bundled configs */
    const char *base;          /* NULL: CFGDIR/train.yml */
    const char *model;         /* NULL: tiny */
    const char *const *kv;     /* KEY=VALUE overrides */
    int n_kv;
    int64_t devices;           /* 0 or 1: run; more: stop after the plan */
    int64_t steps;             /* 0: 2 */
    const char *data_path;
    int64_t max_memory;
    const char *dump_path;     /* --dump-params, or NULL */
} inproc_case;

typedef struct inproc_result {
    int exit_code;             /* what smoe train would exit with (0, 1, 2) */
    char line[1200];           /* its "smoe:" line without the prefix, or "" */
    int steps_run, finite;     /* steps reported; all their losses finite */
} inproc_result;

/* The run's options (the one place that fills smoe_train_opts): smoe
 * train's default schedule, prefetch depth 1, is *sched. */
static inline smoe_train_opts inproc_opts(const inproc_case *k, const smoe_schedule *const *sched)
{
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = k->steps ? k->steps : 2;
    o.seed = 1;
    o.schedules = sched;
    o.nschedules = 1;
    o.data_path = k->data_path;
    o.max_memory = k->max_memory;
    o.dump_path = k->dump_path;
    return o;
}

static void inproc_on_step(void *ud, const smoe_train_step *r)
{
    inproc_result *res = ud;
    res->steps_run++;
    if (!isfinite(r->loss))
        res->finite = 0;
}

static inline int inproc_fail(inproc_result *res, const smoe_err *err)
{
    smoe_err_format(err, res->line, sizeof res->line);
    res->exit_code = err->code == SMOE_EINVAL || err->code == SMOE_ENOTFOUND ||
                             err->code == SMOE_ENOMEM
                         ? 2
                         : 1;
    return res->exit_code;
}

/* Run case k into *res; returns res->exit_code. */
static inline int inproc_train(const inproc_case *k, inproc_result *res)
{
    memset(res, 0, sizeof *res);
    res->finite = 1;
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", k->cfgdir);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = k->base ? k->base : base;
    co.model = k->model ? k->model : "tiny";
    co.overrides = k->kv;
    co.n_overrides = k->n_kv;
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_config *cfg = NULL;
    smoe_plan *plan = NULL;
    smoe_comm comm;
    memset(&comm, 0, sizeof comm);
    int64_t devices = k->devices ? k->devices : 1;
    smoe_plan_opts po = { devices, 1, NULL, 4 };
    smoe_model_cfg mc;
    int rc = 0;
    if (smoe_config_load(&co, &cfg, &err) || smoe_train_check_keys(cfg, &err)) {
        rc = inproc_fail(res, &err);
    } else if (smoe_plan_build(cfg, &po, &plan, &err)) {
        if (!err.where[0]) /* as the CLI names the mesh it was given */
            snprintf(err.where, sizeof err.where, "%lld MPI ranks", (long long)devices);
        rc = inproc_fail(res, &err);
    } else if (smoe_plan_check_even(plan, SMOE_MODE_COAXIS, &err) ||
               smoe_plan_check_even(plan, SMOE_MODE_LEGACY, &err) ||
               (devices == 1 && smoe_comm_local_new(&plan->mesh, 20, &comm, &err)) ||
               smoe_train_model_cfg(cfg, &plan->mesh, &mc, &err)) {
        rc = inproc_fail(res, &err);
    } else if (devices == 1) {
        smoe_schedule *sched = NULL;
        if (smoe_schedule_for_plan(plan, 1, 0, &sched, &err)) {
            rc = inproc_fail(res, &err);
        } else {
            const smoe_schedule *one[1] = { sched };
            smoe_train_opts o = inproc_opts(k, one);
            o.on_step = inproc_on_step;
            o.ud = res;
            smoe_train_result tr;
            memset(&tr, 0, sizeof tr);
            if (smoe_train_run(cfg, plan, &comm, &o, &tr, &err))
                rc = inproc_fail(res, &err);
            smoe_train_result_free(&tr);
        }
        smoe_schedule_free(sched);
    }
    if (comm.ctx)
        smoe_comm_local_free(&comm);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    return rc;
}

/* Does s match the POSIX extended regular expression re (from its start)? */
static inline int inproc_match(const char *re, const char *s)
{
    regex_t r;
    char anchored[2100];
    snprintf(anchored, sizeof anchored, "^%s", re);
    if (regcomp(&r, anchored, REG_EXTENDED | REG_NOSUB))
        return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

#endif
