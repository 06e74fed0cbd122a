/* Predicted vs measured for memory-budgeted schedules: for each budget the
 * `smoe sim --hbm-budget B --whole-weights --json` prediction of the plan it
 * wrote (--schedule-out FILE), and the run of that same FILE in one
 * `smoe train --schedule FILE1 --schedule FILE2 ... --json` (the files
 * taking turns step by step). Measured: each schedule's median over its
 * steps after the first round, with the 25th-75th percentiles, and the
 * largest tracked peak of its steps. Prints one row per budget and the
 * ratios; the check: step time, tracked peak and the peak of the gathered
 * class (gathered layers and their gradients: what a budget buys) within
 * 25%; the exposed gather wait within 25% of the measured value or, where
 * the measured wait is below a tenth of the no-prefetch one (the first
 * budget's), within 25% of that no-prefetch wait (a near-zero wait has no
 * meaningful ratio).
 * usage: cmp_budget TRAIN.json SCHED1 SIM1.json [SCHED2 SIM2.json ...] */
#include "json_file.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double num(const cJSON *o, const char *k)
{
    const cJSON *x = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* The largest value of `key` over a run's steps after `skip`. */
static double step_max(const cJSON *run, const char *key, int skip)
{
    const cJSON *steps = cJSON_GetObjectItem(run, "steps");
    double m = NAN;
    int n = cJSON_GetArraySize(steps);
    for (int i = n > skip ? skip : 0; i < n; i++) {
        double v = num(cJSON_GetArrayItem(steps, i), key);
        m = isnan(m) || v > m ? v : m;
    }
    return m;
}

typedef struct row {
    double budget, p_step, p_wait, p_peak, p_gath;
    double m_step, m_step25, m_step75, m_wait, m_wait25, m_wait75, m_peak, m_gath;
} row;

static int within(double p, double m, double scale) { return fabs(p - m) <= 0.25 * scale; }

int main(int argc, char **argv)
{
    if (argc < 4 || argc % 2 != 0) {
        fprintf(stderr, "usage: cmp_budget TRAIN.json SCHED1 SIM1.json [SCHED2 SIM2.json ...]\n");
        return 2;
    }
    cJSON *tr = json_file_load(argv[1]);
    const cJSON *runs = tr ? cJSON_GetObjectItem(tr, "runs") : NULL;
    if (!runs) {
        fprintf(stderr, "%s: not a smoe train --json output with runs\n", argv[1]);
        return 2;
    }
    int n = (argc - 2) / 2, ok = 1;
    row *r = calloc((size_t)n, sizeof *r);
    if (!r)
        return 2;
    for (int i = 0; i < n; i++) {
        cJSON *sim = json_file_load(argv[3 + 2 * i]), *file = json_file_load(argv[2 + 2 * i]);
        const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(sim, "schedules"), "budgeted");
        const cJSON *run = cJSON_GetObjectItem(runs, argv[2 + 2 * i]);
        const cJSON *sum = cJSON_GetObjectItem(run, "summary");
        if (!b || !sum) {
            fprintf(stderr, "%s / %s: no budgeted prediction or no run of it\n", argv[3 + 2 * i],
                    argv[2 + 2 * i]);
            return 2;
        }
        int skip = (int)num(sum, "warmup_steps_skipped");
        /* the warm-up round's steps of this run: one of them */
        skip = skip > 0 ? 1 : 0;
        const cJSON *mem = cJSON_GetObjectItem(b, "memory");
        r[i].budget = num(cJSON_GetObjectItem(file, "source"), "budget_bytes");
        r[i].p_step = num(b, "step_ms");
        r[i].p_wait = num(b, "exposed_gather_ms");
        r[i].p_peak = num(b, "peak_hbm_bytes");
        /* the gathered layers: the class less the top-level buffers,
         * which the run's peak_gathered_bytes leaves out */
        double top = num(mem, "top_level");
        r[i].p_gath = num(mem, "gathered") - (isnan(top) ? 0 : top);
        r[i].m_step = num(sum, "median_step_ms");
        r[i].m_step25 = num(sum, "p25_step_ms");
        r[i].m_step75 = num(sum, "p75_step_ms");
        r[i].m_wait = num(sum, "median_exposed_gather_ms");
        r[i].m_wait25 = num(sum, "p25_exposed_gather_ms");
        r[i].m_wait75 = num(sum, "p75_exposed_gather_ms");
        r[i].m_peak = step_max(run, "peak_tracked_bytes", skip);
        r[i].m_gath = step_max(run, "peak_gathered_bytes", skip);
        cJSON_Delete(sim);
        cJSON_Delete(file);
    }
    double wait0 = r[0].m_wait;
    printf("%-10s | %-30s | %-30s | %-22s | %-22s\n", "budget MB", "step ms pred / meas [IQR]",
           "exposed AG ms pred / meas [IQR]", "peak MB pred / meas", "gathered MB pred / meas");
    for (int i = 0; i < n; i++) {
        const row *x = &r[i];
        int wait_small = x->m_wait < 0.1 * wait0;
        int ok_step = within(x->p_step, x->m_step, x->m_step);
        int ok_wait = within(x->p_wait, x->m_wait, wait_small ? wait0 : x->m_wait);
        int ok_peak = within(x->p_peak, x->m_peak, x->m_peak);
        int ok_gath = within(x->p_gath, x->m_gath, x->m_gath);
        ok &= ok_step && ok_wait && ok_peak && ok_gath;
        char a[64], b[64], c[64], d[64];
        snprintf(a, sizeof a, "%.1f / %.1f [%.1f-%.1f] %.2f%s", x->p_step, x->m_step, x->m_step25,
                 x->m_step75, x->p_step / x->m_step, ok_step ? "" : "!");
        snprintf(b, sizeof b, "%.2f / %.2f [%.2f-%.2f] %.2f%s%s", x->p_wait, x->m_wait,
                 x->m_wait25, x->m_wait75, x->m_wait > 0 ? x->p_wait / x->m_wait : NAN,
                 wait_small ? "*" : "", ok_wait ? "" : "!");
        snprintf(c, sizeof c, "%.2f / %.2f %.3f%s", x->p_peak / 1e6, x->m_peak / 1e6,
                 x->p_peak / x->m_peak, ok_peak ? "" : "!");
        snprintf(d, sizeof d, "%.2f / %.2f %.2f%s", x->p_gath / 1e6, x->m_gath / 1e6,
                 x->p_gath / x->m_gath, ok_gath ? "" : "!");
        printf("%-10.2f | %-30s | %-30s | %-22s | %-22s\n", x->budget / 1e6, a, b, c, d);
    }
    printf("ratios are predicted / measured; ! = outside 25%%; * = measured wait under a tenth "
           "of the no-prefetch wait, checked against 25%% of that (%.2f ms)\n", wait0);
    printf("%s: step, exposed wait, tracked peak and gathered peak within 25%%\n",
           ok ? "PASS" : "FAIL");
    free(r);
    cJSON_Delete(tr);
    return ok ? 0 : 1;
}
