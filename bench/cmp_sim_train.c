/* Predicted vs measured: a `smoe sim --json` and a `smoe train --compare
 * --json` of the same configuration. Prints step time and exposed gather
 * wait of no-prefetch and prefetch side by side with their ratios (the
 * measured figures are medians over the steps after the first round, the
 * warm-up, with their quartiles).
 * The check: |pred/meas - 1| <= 25% for the step times and the no-prefetch
 * wait; for the prefetch wait, whose measured value is near zero,
 * |pred - meas| <= 25% of the measured no-prefetch wait.
 * usage: cmp_sim_train SIM.json TRAIN.json */
#include "json_file.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A run's median of `key` (its summary: the steps after the warm-up
 * round), and in *p25, *p75 the quartiles. */
static double steady(const cJSON *run, const char *key, double *p25, double *p75)
{
    const cJSON *sum = cJSON_GetObjectItem(run, "summary");
    char k[96];
    snprintf(k, sizeof k, "p25_%s", key);
    *p25 = cJSON_GetNumberValue(cJSON_GetObjectItem(sum, k));
    snprintf(k, sizeof k, "p75_%s", key);
    *p75 = cJSON_GetNumberValue(cJSON_GetObjectItem(sum, k));
    snprintf(k, sizeof k, "median_%s", key);
    return cJSON_GetNumberValue(cJSON_GetObjectItem(sum, k));
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
    cJSON *sim = json_file_load(argv[1]), *tr = json_file_load(argv[2]);
    if (!sim || !tr) {
        fprintf(stderr, "cannot read the inputs\n");
        return 2;
    }
    const cJSON *sched = cJSON_GetObjectItem(sim, "schedules");
    const cJSON *runs = cJSON_GetObjectItem(tr, "runs");
    const cJSON *np = cJSON_GetObjectItem(runs, "no_prefetch"), *pf = cJSON_GetObjectItem(runs, "prefetch");
    double q[4][2];
    double m_np_step = steady(np, "step_ms", &q[0][0], &q[0][1]);
    double m_np_wait = steady(np, "exposed_gather_ms", &q[1][0], &q[1][1]);
    double m_pf_step = steady(pf, "step_ms", &q[2][0], &q[2][1]);
    double m_pf_wait = steady(pf, "exposed_gather_ms", &q[3][0], &q[3][1]);
    double p_np_step = get(sched, "baseline", "step_ms"), p_np_wait = get(sched, "baseline", "exposed_gather_ms");
    double p_pf_step = get(sched, "prefetch", "step_ms"), p_pf_wait = get(sched, "prefetch", "exposed_gather_ms");
    struct { const char *what; double pred, meas, scale; } rows[] = {
        { "no-prefetch step ms", p_np_step, m_np_step, m_np_step },
        { "no-prefetch exposed gather ms", p_np_wait, m_np_wait, m_np_wait },
        { "prefetch step ms", p_pf_step, m_pf_step, m_pf_step },
        { "prefetch exposed gather ms", p_pf_wait, m_pf_wait, m_np_wait },
    };
    int ok = 1;
    printf("%-32s %12s %12s %17s %10s %8s\n", "quantity", "predicted", "measured",
           "[25th-75th]", "pred/meas", "within");
    for (int i = 0; i < 4; i++) {
        double err = fabs(rows[i].pred - rows[i].meas) / rows[i].scale;
        int pass = err <= 0.25;
        ok &= pass;
        char iqr[40];
        snprintf(iqr, sizeof iqr, "[%.2f-%.2f]", q[i][0], q[i][1]);
        printf("%-32s %12.2f %12.2f %17s %10.3f %8s\n", rows[i].what, rows[i].pred, rows[i].meas,
               iqr, rows[i].meas > 0 ? rows[i].pred / rows[i].meas : NAN, pass ? "yes" : "NO");
    }
    printf("%s: every figure within 25%% (prefetch wait: of the no-prefetch wait)\n",
           ok ? "PASS" : "FAIL");
    cJSON_Delete(sim);
    cJSON_Delete(tr);
    return ok ? 0 : 1;
}
