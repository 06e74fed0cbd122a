/* Predicted vs measured: a `smoe sim --json` and a `smoe train --compare
 * --json` of the same configuration. Prints step time and exposed gather
 * wait of no-prefetch and prefetch side by side with their ratios (the
 * measured figures are means over the steps after the first, the warm-up).
 * The check: |pred/meas - 1| <= 25% for the step times and the no-prefetch
 * wait; for the prefetch wait, whose measured value is near zero,
 * |pred - meas| <= 25% of the measured no-prefetch wait.
 * usage: cmp_sim_train SIM.json TRAIN.json */
#include <cjson/cJSON.h>
#include "smoe/core.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static cJSON *load(const char *path)
{
    char *b;
    if (smoe_read_file(path, &b, NULL, NULL))
        return NULL;
    cJSON *j = cJSON_Parse(b);
    smoe_free(b);
    return j;
}

static double steady(const cJSON *run, const char *key)
{
    const cJSON *steps = cJSON_GetObjectItem(run, "steps");
    int n = cJSON_GetArraySize(steps);
    double s = 0;
    int k = 0;
    for (int i = n > 1 ? 1 : 0; i < n; i++, k++)
        s += cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), key)->valuedouble;
    return k ? s / k : 0;
}

static double get(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(o, a), b);
    return x ? x->valuedouble : NAN;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: cmp_sim_train SIM.json TRAIN.json\n");
        return 2;
    }
    cJSON *sim = load(argv[1]), *tr = load(argv[2]);
    if (!sim || !tr) {
        fprintf(stderr, "cannot read the inputs\n");
        return 2;
    }
    const cJSON *sched = cJSON_GetObjectItem(sim, "schedules");
    const cJSON *runs = cJSON_GetObjectItem(tr, "runs");
    const cJSON *np = cJSON_GetObjectItem(runs, "no_prefetch"), *pf = cJSON_GetObjectItem(runs, "prefetch");
    double m_np_step = steady(np, "step_ms"), m_np_wait = steady(np, "exposed_gather_ms");
    double m_pf_step = steady(pf, "step_ms"), m_pf_wait = steady(pf, "exposed_gather_ms");
    double p_np_step = get(sched, "baseline", "step_ms"), p_np_wait = get(sched, "baseline", "exposed_gather_ms");
    double p_pf_step = get(sched, "prefetch", "step_ms"), p_pf_wait = get(sched, "prefetch", "exposed_gather_ms");
    struct { const char *what; double pred, meas, scale; } rows[] = {
        { "no-prefetch step ms", p_np_step, m_np_step, m_np_step },
        { "no-prefetch exposed gather ms", p_np_wait, m_np_wait, m_np_wait },
        { "prefetch step ms", p_pf_step, m_pf_step, m_pf_step },
        { "prefetch exposed gather ms", p_pf_wait, m_pf_wait, m_np_wait },
    };
    int ok = 1;
    printf("%-32s %12s %12s %10s %8s\n", "quantity", "predicted", "measured", "pred/meas", "within");
    for (int i = 0; i < 4; i++) {
        double err = fabs(rows[i].pred - rows[i].meas) / rows[i].scale;
        int pass = err <= 0.25;
        ok &= pass;
        printf("%-32s %12.2f %12.2f %10.3f %8s\n", rows[i].what, rows[i].pred, rows[i].meas,
               rows[i].meas > 0 ? rows[i].pred / rows[i].meas : NAN, pass ? "yes" : "NO");
    }
    printf("%s: every figure within 25%% (prefetch wait: of the no-prefetch wait)\n",
           ok ? "PASS" : "FAIL");
    cJSON_Delete(sim);
    cJSON_Delete(tr);
    return ok ? 0 : 1;
}
