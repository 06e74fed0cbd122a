/* One memory model: smoe sim's runtime executor (SMOE_SIM_EXEC_RUNTIME on
 * a cpu profile, given the run's activations: smoe_train_act_bytes)
 * counts every class exactly as smoe train tracks it. The tiny model on
 * one rank (the single-rank communicator, in process), prefetch depths 0
 * to 4 and the budgeted planner's schedule for a budget between the
 * depth-0 and depth-2 peaks: for each, the run's tracked memory at its
 * peak (smoe_train_result.peak_tracked: parameters, gradients, optimizer,
 * gathered, activations, communication) equals the simulator's breakdown
 * of the same schedule, byte for byte; the budget run stays within its
 * budget. (On one rank the routed-row stores never grow, so the
 * activations are exact; with expert parallelism skewed routing grows
 * them during a run: tests/train_schedule.sh checks that case.)
 * usage: test_sim_mem CONFIG_DIR DATA_FILE HW_PROFILE */
#include "check.h"
#include "smoe/sched.h"
#include "smoe/train.h"

#include <string.h>

static smoe_config *cfg;
static smoe_plan *plan;
static smoe_comm comm;
static smoe_hw hw;
static smoe_model_cfg mc;
static int64_t act;
static const char *data_path;

/* The simulator's breakdown of schedule sc. */
static int sim_mem(const smoe_schedule *sc, smoe_train_mem *out)
{
    smoe_err err;
    smoe_sim_shape sh = { .batch = mc.batch, .seq = mc.seq, .remat = SMOE_REMAT_NONE,
                          .dtype_bytes = 4, .act_bytes = act };
    smoe_sim_model *m = NULL;
    smoe_sim_sched s;
    smoe_sim_result r;
    memset(&s, 0, sizeof s);
    s.executor = SMOE_SIM_EXEC_RUNTIME;
    s.schedule = sc;
    if (smoe_sim_dtypes(cfg, &hw, &sh, &err) || smoe_sim_model_build(cfg, plan, &hw, &sh, &m, &err)) {
        CHECKF(0, "sim model: %s", err.msg);
        return 1;
    }
    int bad = smoe_sim_run(m, &s, &r, NULL) != SMOE_OK;
    CHECK(!bad);
    smoe_sim_model_free(m);
    out->params = (int64_t)r.mem_params;
    out->grads = (int64_t)r.mem_grads;
    out->optimizer = (int64_t)r.mem_optimizer;
    out->gathered = (int64_t)r.mem_gathered;
    out->activations = (int64_t)r.mem_activations;
    out->comm = 0;
    return bad;
}

/* smoe train's run of sc: its tracked memory at its peak. */
static int train_mem(const smoe_schedule *sc, smoe_train_mem *out, int64_t *peak)
{
    smoe_err err;
    smoe_train_opts o;
    smoe_train_result res;
    const smoe_schedule *list[1] = { sc };
    memset(&o, 0, sizeof o);
    memset(&res, 0, sizeof res);
    o.steps = 2;
    o.seed = 7;
    o.data_path = data_path;
    o.schedules = list;
    o.nschedules = 1;
    smoe_status s = smoe_train_run(cfg, plan, &comm, &o, &res, &err);
    CHECKF(s == SMOE_OK, "train: %s", err.msg);
    *out = res.peak_tracked;
    *peak = res.peak_tracked_bytes;
    smoe_train_result_free(&res);
    return s != SMOE_OK;
}

/* Class by class, exactly. */
static void same(const char *what, const smoe_train_mem *t, const smoe_train_mem *p)
{
    const char *name[6] = { "parameters", "gradients", "optimizer", "gathered", "activations",
                            "communication" };
    int64_t a[6] = { t->params, t->grads, t->optimizer, t->gathered, t->activations, t->comm };
    int64_t b[6] = { p->params, p->grads, p->optimizer, p->gathered, p->activations, p->comm };
    for (int i = 0; i < 6; i++)
        CHECKF(a[i] == b[i], "%s: %s: train tracks %lld, smoe sim counts %lld", what, name[i],
               (long long)a[i], (long long)b[i]);
}

static int64_t total(const smoe_train_mem *m)
{
    return m->params + m->grads + m->optimizer + m->gathered + m->activations + m->comm;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_sim_mem CONFIG_DIR DATA_FILE HW_PROFILE\n");
        return 2;
    }
    data_path = argv[2];
    smoe_err err;
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", argv[1]);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    smoe_plan_opts po = { 1, 1, NULL, 4 };
    if (smoe_config_load(&co, &cfg, &err) || smoe_plan_build(cfg, &po, &plan, &err) ||
        smoe_comm_local_new(&plan->mesh, 20, &comm, &err) || smoe_hw_load(argv[3], &hw, &err) ||
        smoe_train_model_cfg(cfg, &plan->mesh, &mc, &err) ||
        smoe_train_act_bytes(&mc, &act, &err)) {
        fprintf(stderr, "test_sim_mem: set-up: %s\n", err.msg);
        return 1;
    }
    int64_t peak[5] = { 0 };
    for (int d = 0; d <= 4; d++) {
        smoe_schedule *sc = NULL;
        smoe_train_mem t, p;
        char what[32];
        snprintf(what, sizeof what, "depth %d", d);
        CHECK(smoe_schedule_for_plan(plan, d, 0, &sc, &err) == SMOE_OK);
        if (sc && !train_mem(sc, &t, &peak[d]) && !sim_mem(sc, &p)) {
            same(what, &t, &p);
            CHECKF(peak[d] == total(&t), "%s: the peak %lld is its classes' sum", what,
                   (long long)peak[d]);
        }
        smoe_schedule_free(sc);
    }
    CHECKF(peak[2] > peak[0], "depth 2's peak %lld above depth 0's %lld", (long long)peak[2],
           (long long)peak[0]);
    /* the planner's schedule for a budget between them: planned against
     * the budget itself, and held */
    int64_t budget = (peak[0] + peak[2]) / 2;
    smoe_schedule *sb = NULL;
    CHECK(smoe_schedule_for_budget(cfg, plan, &hw, mc.batch, mc.seq, budget, act, 0, &sb,
                                   &err) == SMOE_OK);
    smoe_train_mem t, p;
    int64_t pb = 0;
    if (sb && !train_mem(sb, &t, &pb) && !sim_mem(sb, &p)) {
        same("budget", &t, &p);
        CHECKF(pb <= budget, "budget run's peak %lld <= budget %lld", (long long)pb,
               (long long)budget);
        CHECKF((int64_t)sb->peak_bytes == pb, "the planner's peak %.0f is the run's %lld",
               sb->peak_bytes, (long long)pb);
        CHECKF(strstr(sb->note, "as smoe sim counts") == NULL, "no shift in the note: %s",
               sb->note);
    }
    smoe_schedule_free(sb);
    smoe_comm_local_free(&comm);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    return check_report();
}
