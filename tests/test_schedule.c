/* The prefetch schedule as data: the builders (uniform depth, planner
 * levels) against hand-listed entries, the checker against broken
 * schedules, and the simulator over depths 0..8 on a 6-layer model whose
 * gathers outrun its compute (so every extra layer of depth matters up to
 * the whole step): exposed wait non-increasing, peak non-decreasing, every
 * gather issued exactly once (issued bytes = 2 x layers x layer bytes, the
 * gather engine busy for all of them), and depths past the step's 12
 * units equal to depth 12. Depth 5 was the bug: layers 5 and more ahead
 * were counted as prefetched but never issued. White-box: builds step
 * models by hand. */
#include "../src/sched/sched_impl.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) < 1e-9 * (1 + fabs((double)(b))))

/* L dense layers, two weights: gathers 1 + 2 s, compute 1 s forward, 2 s
 * backward, 10 + 30 bytes gathered. */
static smoe_sim_model layers(int L)
{
    smoe_sim_model m;
    memset(&m, 0, sizeof m);
    m.hw.kind = SMOE_HW_TPU;
    m.hw.collective_engines = 4;
    m.L = L;
    m.nkinds = 2;
    sim_kind *k = &m.k[0];
    k->nw = 2;
    k->w[0].name = "a";
    k->w[0].pre_s = 1;
    k->w[0].rs_s = 0.5;
    k->w[0].bytes = 10;
    k->w[1].name = "b";
    k->w[1].pre_s = 2;
    k->w[1].rs_s = 0.5;
    k->w[1].bytes = 30;
    k->bytes = 40;
    k->fwd_pre = 1;
    k->bwd_pre = 2;
    return m;
}

static void test_build(void)
{
    smoe_sim_model m = layers(3);
    smoe_schedule *s;
    smoe_err err;
    CHECK(smoe_schedule_for_model(&m, 2, NULL, &s, &err) == SMOE_OK);
    CHECK_INT(s->n, 2 * 3 * 2);
    CHECK_INT(s->L, 3);
    CHECK_INT(s->n_dense, 3);
    CHECK_STR(s->names[0][1], "b");
    /* units 0, 1 at the step's start, then unit u at unit u - 2 */
    CHECK_INT(s->g[0].issue, -1);
    CHECK_INT(s->g[0].unit, 0);
    CHECK_INT(s->g[3].unit, 1);
    CHECK_INT(s->g[4].issue, 0);
    CHECK_INT(s->g[4].unit, 2);
    CHECK_INT(s->g[11].issue, 3);
    CHECK_INT(s->g[11].unit, 5);
    CHECK_INT(smoe_schedule_max_distance(s), 2);
    CHECK(smoe_schedule_check(s, &err) == SMOE_OK);
    /* broken: out of order, a chunk twice, a weight missing */
    smoe_sched_gather keep = s->g[4];
    s->g[4].issue = 5;
    CHECK(smoe_schedule_check(s, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "gathers[4].issue") != NULL, "%s", err.msg);
    s->g[4] = keep;
    s->g[5].weight = 0;
    CHECK(smoe_schedule_check(s, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "gathers[5].chunks") != NULL, "%s", err.msg);
    smoe_schedule_free(s);
    /* levels: weight a 3 quarters 1 layer ahead, b at use */
    unsigned char lv[2][SMOE_SIM_MAX_WEIGHTS];
    memset(lv, 0, sizeof lv);
    lv[0][0] = 3;
    CHECK(smoe_schedule_for_model(&m, 0, lv, &s, &err) == SMOE_OK);
    CHECK_INT(s->n, 6 * 3);
    CHECK_INT(s->depth, -1);
    CHECK(smoe_schedule_check(s, &err) == SMOE_OK);
    int split = 0;
    for (int i = 0; i < s->n; i++)
        if (s->g[i].weight == 0 && s->g[i].unit == 4)
            split += s->g[i].nchunks == 3 ? s->g[i].issue == 3 : s->g[i].issue == 4;
    CHECK_INT(split, 2);
    smoe_schedule_free(s);
    CHECK(smoe_schedule_for_model(&m, SMOE_SIM_MAX_DEPTH + 1, NULL, &s, &err) == SMOE_EINVAL);
}

static void test_depths(void)
{
    smoe_sim_model m = layers(6);
    smoe_sim_result r[13];
    smoe_sim_sched sd;
    for (int d = 0; d <= 12; d++) {
        memset(&sd, 0, sizeof sd);
        sd.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
        sd.prefetch_depth = d;
        CHECK(smoe_sim_run(&m, &sd, &r[d], NULL) == SMOE_OK);
        CHECKF(NEAR(r[d].issued_bytes, 2 * 6 * 40), "depth %d: issued %g bytes, expected 480", d,
               r[d].issued_bytes);
        CHECKF(NEAR(r[d].gather_busy_s, 2 * 6 * 3), "depth %d: gather engine busy %g s", d,
               r[d].gather_busy_s);
        if (d > 0) {
            CHECKF(r[d].exposed_gather_s <= r[d - 1].exposed_gather_s + 1e-9,
                   "depth %d exposed %g > depth %d's %g", d, r[d].exposed_gather_s, d - 1,
                   r[d - 1].exposed_gather_s);
            CHECKF(r[d].peak_hbm_bytes >= r[d - 1].peak_hbm_bytes - 1e-9,
                   "depth %d peak %g < depth %d's %g", d, r[d].peak_hbm_bytes, d - 1,
                   r[d - 1].peak_hbm_bytes);
        }
    }
    /* the gathers (3 s a layer, 36 s a step on one engine) outrun the
     * compute (18 s): no depth finishes the step before its gathers, and
     * the step is compute + exposed wait + the final reductions' wait (the
     * old depth 5 counted 7 units' gathers as done, never issuing them) */
    for (int d = 0; d <= 12; d++) {
        CHECKF(r[d].step_s >= 36 - 1e-9, "depth %d: step %g s < the 36 s of gathers", d,
               r[d].step_s);
        CHECKF(NEAR(r[d].step_s, r[d].compute_s + r[d].exposed_gather_s + r[d].reduce_wait_s),
               "depth %d: step %g != compute %g + exposed %g + reduce wait %g", d, r[d].step_s,
               r[d].compute_s, r[d].exposed_gather_s, r[d].reduce_wait_s);
    }
    /* a schedule given explicitly runs as the depth it was built from */
    smoe_schedule *s;
    CHECK(smoe_schedule_for_model(&m, 5, NULL, &s, NULL) == SMOE_OK);
    memset(&sd, 0, sizeof sd);
    sd.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    sd.schedule = s;
    smoe_sim_result x;
    CHECK(smoe_sim_run(&m, &sd, &x, NULL) == SMOE_OK);
    CHECK(NEAR(x.exposed_gather_s, r[5].exposed_gather_s) && NEAR(x.step_s, r[5].step_s));
    smoe_schedule_free(s);
    /* beyond the step's units nothing changes; beyond the bound refused */
    memset(&sd, 0, sizeof sd);
    sd.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    sd.prefetch_depth = SMOE_SIM_MAX_DEPTH;
    CHECK(smoe_sim_run(&m, &sd, &x, NULL) == SMOE_OK);
    CHECK(NEAR(x.exposed_gather_s, r[12].exposed_gather_s));
    sd.prefetch_depth = SMOE_SIM_MAX_DEPTH + 1;
    CHECK(smoe_sim_run(&m, &sd, &x, NULL) == SMOE_EINVAL);
}

/* The whole-weight planner chooses levels 0, 4 or 8 only, within budget. */
static void test_whole(void)
{
    smoe_sim_model m = layers(6);
    unsigned char lv[2][SMOE_SIM_MAX_WEIGHTS];
    smoe_sim_result best, base;
    smoe_sim_sched sd;
    memset(&sd, 0, sizeof sd);
    sd.executor = SMOE_SIM_EXEC_XLA_PREFETCH;
    CHECK(smoe_sim_run(&m, &sd, &base, NULL) == SMOE_OK);
    int feasible;
    double budget = base.peak_hbm_bytes + 45;
    CHECK(smoe_sim_plan_budget_whole(&m, SMOE_SIM_EXEC_XLA_PREFETCH, 0, budget, lv, &best,
                                     &feasible) == SMOE_OK);
    CHECK(feasible);
    CHECK(best.peak_hbm_bytes <= budget);
    CHECK(best.exposed_gather_s < base.exposed_gather_s);
    for (int w = 0; w < 2; w++)
        CHECKF(lv[0][w] % 4 == 0, "weight %d level %d", w, lv[0][w]);
}

int main(void)
{
    test_build();
    test_depths();
    test_whole();
    return check_report();
}
