/* smoe sim's files: the traces' processes, the --plot picture and the
 * --schedule-out file (cmd_sim.c runs the simulations they draw on). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#define PLOT_DEPTHS 4 /* the marks drawn (a picture's choice, not a limit) */

/* A schedule's timeline: one process row, its lanes named as smoe train
 * names them. */
smoe_trace *sim_new_trace(int pid, const char *name)
{
    smoe_trace *t = smoe_trace_new(pid, 0);
    if (!t)
        cli_usage_error(NULL, "out of memory for the timeline");
    smoe_trace_process(t, name);
    smoe_trace_lanes(t);
    return t;
}

/* --plot: the Pareto curve with smoe's uniform depths 0..PLOT_DEPTHS
 * marked, over every schedule's timeline. */
void sim_write_plot(const char *path, const smoe_sim_model *m, smoe_sim_executor own,
                       smoe_trace *const *traces, int n, const smoe_sim_point *curve, int ncurve,
                       const smoe_scenario *sc, const sim_readings *rd)
{
    smoe_plot_mark marks[PLOT_DEPTHS + 1];
    char labels[PLOT_DEPTHS + 1][24];
    for (int d = 0; d <= PLOT_DEPTHS; d++) {
        smoe_sim_sched sd;
        smoe_sim_result r;
        memset(&sd, 0, sizeof sd);
        sd.executor = own;
        sd.prefetch_depth = d;
        if (smoe_sim_run(m, &sd, &r, NULL))
            cli_usage_error(NULL, "out of memory in the simulation");
        snprintf(labels[d], sizeof labels[d], "depth %d", d);
        marks[d].peak_hbm_bytes = r.peak_hbm_bytes;
        marks[d].exposed_gather_s = r.exposed_gather_s;
        marks[d].label = labels[d];
    }
    static sim_plot_env env;
    int nenv = sim_readings_plot(sc, rd, &env);
    smoe_err err;
    smoe_out *o = cli_out_open("--plot", path);
    smoe_status s = smoe_plot_svg(smoe_out_file(o), traces, n, curve, ncurve, marks,
                                  PLOT_DEPTHS + 1, env.p, nenv, &err);
    cli_out_finish(o, s, &err, "--plot", path);
}

/* --schedule-out: the budgeted plan (with --hbm-budget) or the uniform
 * depth, with the simulator's prediction of it under executor `own`. */
void sim_write_schedule(const char *path, const smoe_sim_model *m, smoe_sim_executor own,
                           const smoe_hw *hw, int64_t budget,
                           const unsigned char dist[][SMOE_SIM_MAX_WEIGHTS], int depth)
{
    smoe_schedule *s;
    smoe_err err;
    if (smoe_schedule_for_model(m, depth, budget >= 0 ? dist : NULL, &s, &err))
        cli_die(&err);
    if (budget >= 0)
        s->budget = (double)budget;
    snprintf(s->progress, sizeof s->progress, "%s", hw->cpu.progress);
    smoe_sim_sched sd;
    smoe_sim_result r;
    memset(&sd, 0, sizeof sd);
    sd.executor = own;
    sd.schedule = s;
    if (smoe_sim_run(m, &sd, &r, NULL))
        cli_usage_error(NULL, "out of memory in the simulation");
    s->peak_bytes = r.peak_hbm_bytes;
    s->exposed_s = r.exposed_gather_s;
    s->step_s = r.step_s;
    cli_schedule_write(path, s, hw->name);
    smoe_schedule_free(s);
}
