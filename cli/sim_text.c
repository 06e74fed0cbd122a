/* smoe sim's text report: the schedules' table, predicted beside reported
 * figures, a measured profile's medians and the budget sweep (cmd_sim.c
 * runs the simulations and prints the head). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#define SWEEP_POINTS 200 /* budgets the sweep samples (a report's choice) */

void sim_print_table(const sim_row *runs, int n)
{
    char b[32];
    printf("%-26s %10s %11s %14s %12s %10s %12s  %s\n", "schedule", "step ms", "compute ms",
           "exposed AG ms", "residual ms", "a2a ms", "peak HBM", "executor");
    for (int i = 0; i < n; i++) {
        const smoe_sim_result *r = &runs[i].r;
        printf("%-26s %10.1f %11.1f %14.1f %12.1f %10.1f %12s  %s\n", runs[i].name,
               r->step_s * 1e3, r->compute_s * 1e3, r->exposed_gather_s * 1e3,
               r->residual_s * 1e3, r->a2a_s * 1e3,
               cli_fmt_bytes(r->peak_hbm_bytes, b, sizeof b), smoe_sim_executor_name(runs[i].exec));
    }
}

void sim_print_fit(const sim_row *runs, int n, const smoe_hw *hw)
{
    double cap = smoe_sim_device_hbm(hw);
    char b[32];
    int over = 0;
    for (int i = 0; i < n && cap > 0; i++) {
        if (!(runs[i].r.peak_hbm_bytes > cap))
            continue;
        if (!over++)
            printf("over a device's HBM (%s of %s):", cli_fmt_bytes(cap, b, sizeof b), hw->name);
        printf("%s %s %s", over > 1 ? "," : "", runs[i].name,
               cli_fmt_bytes(runs[i].r.peak_hbm_bytes, b, sizeof b));
    }
    if (over)
        printf("\n");
}

static const smoe_scn_numbers *reported(const smoe_scenario *sc, const char *name)
{
    for (int i = 0; i < sc->n_reported; i++)
        if (strcmp(sc->reported_name[i], name) == 0)
            return &sc->reported[i];
    return NULL;
}

static void cell(char *buf, size_t n, double v, const char *fmt)
{
    if (v < 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, fmt, v);
}

void sim_print_reported(const smoe_scenario *sc, const sim_row *runs, int n)
{
    const smoe_scn_numbers *rb = reported(sc, "baseline");
    const sim_row *pb = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(runs[i].name, "baseline") == 0)
            pb = &runs[i];
    printf("\npredicted vs reported (%s)\n", sc->file);
    printf("%-26s %20s %22s %22s %22s\n", "schedule", "step ms rep / pred",
           "vs baseline rep / pred", "exposed AG rep / pred", "peak HBM GiB rep / pred");
    for (int i = 0; i < n; i++) {
        const smoe_scn_numbers *x = reported(sc, runs[i].name);
        if (!x)
            continue;
        const smoe_sim_result *r = &runs[i].r;
        char a[32], b[32], c1[32], d[32];
        cell(a, sizeof a, x->step_ms, "%.1f");
        double rep_change = rb && rb->step_ms > 0 && x->step_ms > 0
                                ? 100.0 * (x->step_ms / rb->step_ms - 1) : -1e9;
        double pred_change = pb ? 100.0 * (r->step_s / pb->r.step_s - 1) : 0;
        if (rep_change > -1e8)
            snprintf(b, sizeof b, "%+.1f%%", rep_change);
        else
            snprintf(b, sizeof b, "-");
        cell(c1, sizeof c1, x->exposed_gather_ms, "%.0f");
        cell(d, sizeof d, x->peak_hbm_gib, "%.1f");
        printf("%-26s %11s / %6.1f %13s / %+6.1f%% %14s / %5.0f %14s / %5.1f\n", runs[i].name, a,
               r->step_s * 1e3, b, pred_change, c1, r->exposed_gather_s * 1e3, d,
               r->peak_hbm_bytes / (1024.0 * 1024 * 1024));
    }
}

/* The profile's per-layer compute; "-" (modelled) where the trace has no
 * span of that pass and kind, so a measured 0 reads as 0. */
void sim_print_profile(const char *path, double med[2][2], int n[2][2])
{
    char c[2][2][24];
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++)
            cell(c[p][k], sizeof c[p][k], n[p][k] ? med[p][k] * 1e3 : -1, "%.2f");
    printf("compute per layer from %s (median of its spans, exchanges excluded): "
           "dense %s / %s, MoE %s / %s ms forward / backward (-: modelled)\n",
           path, c[0][0], c[1][0], c[0][1], c[1][1]);
}

/* --sweep: 200 budgets from the no-prefetch peak to the largest useful
 * one; each takes the best point of the greedy path it fits. */
void sim_print_sweep(const smoe_sim_point *curve, int ncurve)
{
    char b1[32], b2[32];
    double lo = curve[0].peak_hbm_bytes, hi = curve[ncurve - 1].peak_hbm_bytes;
    printf("\nPareto sweep: %d budgets, %d plans on the greedy path\n", SWEEP_POINTS, ncurve);
    printf("%14s %14s %16s %12s\n", "budget", "peak HBM", "exposed AG ms", "step ms");
    for (int i = 0; i < SWEEP_POINTS; i++) {
        double b = lo + (hi - lo) * i / (SWEEP_POINTS - 1);
        int j = 0;
        for (int k = 0; k < ncurve; k++)
            if (curve[k].peak_hbm_bytes <= b * (1 + 1e-12) &&
                curve[k].exposed_gather_s <= curve[j].exposed_gather_s)
                j = k;
        printf("%14s %14s %16.2f %12.2f\n", cli_fmt_bytes(b, b2, sizeof b2),
               cli_fmt_bytes(curve[j].peak_hbm_bytes, b1, sizeof b1),
               curve[j].exposed_gather_s * 1e3, curve[j].step_s * 1e3);
    }
}
