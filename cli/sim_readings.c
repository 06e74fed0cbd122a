/* smoe sim's rows under every combination of a scenario's declared
 * readings, side by side, with the envelope (the smallest and largest
 * prediction of each figure over the readings) and whether each reported
 * figure lies inside it. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const k_fig_title[SIM_FIGS] = { "step ms", "exposed AG ms", "peak HBM GiB" };
static const char *const k_fig_name[SIM_FIGS] = { "step time", "exposed gather wait",
                                                  "peak HBM per device" };
static const char *const k_fig_unit[SIM_FIGS] = { "ms", "ms", "GiB" };

double sim_reading_fig(const sim_reading_rows *r, int row, int which)
{
    return which == SIM_FIG_STEP ? r->step_ms[row] : which == SIM_FIG_EXPOSED ? r->exposed_ms[row]
                                                                      : r->peak_gib[row];
}

static double reported_fig(const smoe_scenario *sc, const char *name, int which)
{
    for (int i = 0; i < sc->n_reported; i++)
        if (strcmp(sc->reported_name[i], name) == 0)
            return which == SIM_FIG_STEP ? sc->reported[i].step_ms
                 : which == SIM_FIG_EXPOSED ? sc->reported[i].exposed_gather_ms
                                        : sc->reported[i].peak_hbm_gib;
    return -1;
}

void sim_reading_envelope(const sim_readings *rd, int row, int which, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int c = 0; c < rd->n; c++) {
        double v = sim_reading_fig(&rd->r[c], row, which);
        *lo = fmin(*lo, v);
        *hi = fmax(*hi, v);
    }
}

static void print_combos(FILE *f, const smoe_scenario *sc, const sim_readings *rd)
{
    for (int c = 0; c < rd->n; c++) {
        fprintf(f, "  R%-2d", c + 1);
        for (int k = 0; k < sc->n_facts; k++)
            if (rd->r[c].idx[k] >= 0)
                fprintf(f, " %s=%s", smoe_scn_fact_name(sc->facts[k].key),
                        sc->facts[k].text[rd->r[c].idx[k]]);
        fprintf(f, "\n");
    }
}

/* Combinations c0 .. c1-1 of one figure, a column each; the last block
 * ends with the envelope and the reported figure. */
static void print_block(FILE *f, const smoe_scenario *sc, const sim_readings *rd, int which,
                        int c0, int c1)
{
    const char *fmt = which == SIM_FIG_PEAK ? " %7.1f" : " %7.0f";
    int last = c1 == rd->n;
    fprintf(f, last ? "\n%-26s" : "\n%s", k_fig_title[which]);
    if (last) {
        for (int c = c0; c < c1; c++)
            fprintf(f, " %7s", "");
        fprintf(f, "  %-17s reported", "envelope");
    }
    fprintf(f, "\n%-26s", "schedule");
    for (int c = c0; c < c1; c++) {
        char h[8];
        snprintf(h, sizeof h, "R%d", c + 1);
        fprintf(f, " %7s", h);
    }
    fprintf(f, "\n");
    for (int i = 0; i < rd->r[0].n; i++) {
        double lo, hi, rep = reported_fig(sc, rd->r[0].name[i], which);
        fprintf(f, "%-26s", rd->r[0].name[i]);
        for (int c = c0; c < c1; c++)
            fprintf(f, fmt, sim_reading_fig(&rd->r[c], i, which));
        if (!last) {
            fprintf(f, "\n");
            continue;
        }
        sim_reading_envelope(rd, i, which, &lo, &hi);
        char env[40];
        snprintf(env, sizeof env, which == SIM_FIG_PEAK ? "%.1f-%.1f" : "%.0f-%.0f", lo, hi);
        if (rep >= 0)
            fprintf(f, "  %-17s %.1f %s\n", env, rep, rep >= lo && rep <= hi ? "inside" : "outside");
        else
            fprintf(f, "  %s\n", env);
    }
}

/* At most SIM_READING_COLS combinations side by side: more run on in
 * further blocks of the same figure. */
#define SIM_READING_COLS 12
static void print_figure(FILE *f, const smoe_scenario *sc, const sim_readings *rd, int which)
{
    for (int c0 = 0; c0 < rd->n; c0 += SIM_READING_COLS)
        print_block(f, sc, rd, which, c0,
                    rd->n - c0 > SIM_READING_COLS ? c0 + SIM_READING_COLS : rd->n);
}

void sim_print_readings(FILE *f, const smoe_scenario *sc, const sim_readings *rd)
{
    fprintf(f, "\npredicted under every reading of the unstated facts (%s): %d combinations\n",
            sc->file, rd->n);
    print_combos(f, sc, rd);
    for (int w = 0; w < SIM_FIGS; w++)
        print_figure(f, sc, rd, w);
    fprintf(f, "\nwhere the readings come from\n");
    for (int k = 0; k < sc->n_facts; k++)
        for (int j = 0; j < sc->facts[k].n; j++)
            fprintf(f, "  %s=%s: %s\n", smoe_scn_fact_name(sc->facts[k].key),
                    sc->facts[k].text[j], sc->facts[k].source[j]);
}

int sim_readings_plot(const smoe_scenario *sc, const sim_readings *rd, sim_plot_env *e)
{
    if (rd->n == 0)
        return 0;
    for (int w = 0; w < SIM_FIGS; w++) {
        for (int i = 0; i < rd->r[0].n; i++) {
            smoe_plot_range *g = &e->r[w][i];
            g->label = rd->r[0].name[i];
            sim_reading_envelope(rd, i, w, &g->lo, &g->hi);
            g->reported = reported_fig(sc, g->label, w);
        }
        e->p[w] = (smoe_plot_ranges){ k_fig_name[w], k_fig_unit[w], e->r[w], rd->r[0].n };
    }
    return SIM_FIGS;
}
