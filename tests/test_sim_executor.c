/* The executor a step is simulated under is the request's choice, never
 * the profile's: the same request gives the same step on a tpu and on a
 * cpu profile (without the CPU model's terms), and each executor keeps its
 * own rules whatever the profile. A request without an executor is
 * refused, and the budgeted planner plans only smoe's schedules.
 * usage: test_sim_executor */
#include "../src/sched/sched_impl.h"
#include "check.h"
#include "sim_testlib.h"

#include <math.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* The two layers of sim_testlib.h with a 5 s reduction, at depth 0: smoe's
 * runtime holds unit 2's buffer until its reduction ends at 23, so unit 3's
 * gradient buffer waits [20, 23] and the step ends at 34 with two layers
 * gathered at most; XLA's dataflow has no pool: 31, three layers. Each on
 * a tpu and on a cpu profile alike (the request of a zeroed schedule was
 * 31 on the one and 34 on the other). */
static void test_profile_does_not_choose(void)
{
    static const smoe_hw_kind kinds[] = { SMOE_HW_TPU, SMOE_HW_GPU, SMOE_HW_CPU };
    for (int i = 0; i < 3; i++) {
        smoe_sim_model m = two_layers(2);
        m.hw.kind = kinds[i];
        m.k[0].w[0].rs_s = 5;
        smoe_sim_result r;
        CHECK(run_depth(&m, SMOE_SIM_EXEC_RUNTIME, 0, &r) == SMOE_OK);
        CHECKF(NEAR(r.step_s, 34) && NEAR(r.mem_gathered, 200),
               "%s, smoe_runtime: step %g, gathered %g; expected 34, 200",
               smoe_hw_kind_name(kinds[i]), r.step_s, r.mem_gathered);
        CHECK(run_depth(&m, SMOE_SIM_EXEC_XLA_PREFETCH, 0, &r) == SMOE_OK);
        CHECKF(NEAR(r.step_s, 31) && NEAR(r.mem_gathered, 300),
               "%s, xla_prefetch: step %g, gathered %g; expected 31, 300",
               smoe_hw_kind_name(kinds[i]), r.step_s, r.mem_gathered);
    }
}

/* Every executor gives the same step on every kind of profile. */
static void test_same_on_every_kind(void)
{
    for (int e = SMOE_SIM_EXEC_XLA_SCAN; e <= SMOE_SIM_EXEC_RUNTIME; e++) {
        smoe_sim_result r[3];
        for (int k = 0; k < 3; k++) {
            smoe_sim_model m = two_layers(1);
            m.hw.kind = (smoe_hw_kind)k;
            m.k[0].w[0].rs_s = 3;
            CHECK(run_depth(&m, (smoe_sim_executor)e, 1, &r[k]) == SMOE_OK);
        }
        CHECKF(NEAR(r[0].step_s, r[2].step_s) && NEAR(r[1].step_s, r[2].step_s) &&
                   NEAR(r[0].peak_hbm_bytes, r[2].peak_hbm_bytes),
               "%s: steps %g %g %g on tpu, gpu, cpu", smoe_sim_executor_name((smoe_sim_executor)e),
               r[0].step_s, r[1].step_s, r[2].step_s);
    }
}

/* No executor, or one out of range: refused; the names. */
static void test_choice_required(void)
{
    smoe_sim_model m = two_layers(2);
    smoe_sim_result r;
    CHECK(run_depth(&m, SMOE_SIM_EXEC_NONE, 0, &r) == SMOE_EINVAL);
    CHECK(run_depth(&m, (smoe_sim_executor)99, 0, &r) == SMOE_EINVAL);
    CHECK(smoe_sim_executor_name(SMOE_SIM_EXEC_NONE) == NULL);
    static const char *const names[] = { "xla_scan", "xla_prefetch", "maxtext", "smoe_runtime" };
    for (int e = SMOE_SIM_EXEC_XLA_SCAN; e <= SMOE_SIM_EXEC_RUNTIME; e++) {
        const char *n = smoe_sim_executor_name((smoe_sim_executor)e);
        CHECKF(n && strcmp(n, names[e - 1]) == 0, "executor %d named %s", e, n ? n : "NULL");
    }
    /* the planner: smoe's schedules only */
    unsigned char lv[2][SMOE_SIM_MAX_WEIGHTS];
    int feasible;
    smoe_sim_executor bad[] = { SMOE_SIM_EXEC_NONE, SMOE_SIM_EXEC_XLA_SCAN, SMOE_SIM_EXEC_MAXTEXT };
    for (int i = 0; i < 3; i++)
        CHECKF(smoe_sim_plan_budget_whole(&m, bad[i], 0, 1e9, lv, &r, &feasible) == SMOE_EINVAL,
               "the planner ran executor %d", (int)bad[i]);
    CHECK(smoe_sim_plan_budget_whole(&m, SMOE_SIM_EXEC_RUNTIME, 0, 1e9, lv, &r, &feasible) ==
          SMOE_OK);
}

/* MaxText's gathered dtype is a declared reading (smoe_sim_shape.mx_gather_
 * bytes): each of the two layers' weights is gathered in 2 s as stored
 * (fp32, 0.5 s of it latency) and 200 bytes. Read as bf16, MaxText's path
 * moves half the bytes: each of its 4 gathers (forward and backward) takes
 * 0.5 + 1.5 / 2 = 1.25 s instead of 2 (busy 8 -> 5 s) and its gathered peak,
 * two layers' buffers, halves (400 -> 200). Read as fp32 it is the code's
 * default; the legacy plan gathers as stored under any reading. */
static void test_maxtext_gather_reading(void)
{
    double busy[3], held[3], step[3], legacy_step[3];
    for (int i = 0; i < 3; i++) {
        smoe_sim_model m = two_layers(2);
        m.weight_bytes = 4;
        m.mx_gather_bytes = (int[]){ 0, 2, 4 }[i];
        m.k[0].w[0].pre_stored_s = 2;
        m.k[0].w[0].ag_lat_s = 0.5;
        m.k[0].w[0].bytes_stored = 200;
        m.k[0].bytes_stored = 200;
        smoe_sim_sched s;
        memset(&s, 0, sizeof s);
        s.executor = SMOE_SIM_EXEC_MAXTEXT;
        s.prefetch_depth = 1;
        smoe_sim_result r;
        CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
        busy[i] = r.gather_busy_s;
        held[i] = r.mem_gathered;
        step[i] = r.step_s;
        s.legacy = 1;
        CHECK(smoe_sim_run(&m, &s, &r, NULL) == SMOE_OK);
        legacy_step[i] = r.step_s;
    }
    CHECKF(NEAR(busy[0], 8) && NEAR(held[0], 400), "as stored: busy %g, gathered %g; expected 8, 400",
           busy[0], held[0]);
    CHECKF(NEAR(busy[1], 5) && NEAR(held[1], 200), "bf16: busy %g, gathered %g; expected 5, 200",
           busy[1], held[1]);
    CHECKF(step[1] < step[0], "bf16 gathers: step %g, as stored %g", step[1], step[0]);
    CHECKF(NEAR(busy[2], busy[0]) && NEAR(held[2], held[0]) && NEAR(step[2], step[0]),
           "fp32 reading differs from the default");
    CHECKF(NEAR(legacy_step[0], legacy_step[1]) && NEAR(legacy_step[0], legacy_step[2]),
           "legacy moved with the reading: %g %g %g", legacy_step[0], legacy_step[1],
           legacy_step[2]);
}

int main(void)
{
    test_profile_does_not_choose();
    test_same_on_every_kind();
    test_choice_required();
    test_maxtext_gather_reading();
    return check_report();
}
