/* smoe sim --calibrate: this machine measured as a cpu-mpi profile, under
 * mpirun (smoe_calib_measure), on the model and mesh of the command's
 * configuration. */
#include "cli.h"
#include "smoe/calib.h"
#include "smoe/runtime.h"

#include <stdio.h>

/* --calibrate: under mpirun; the model (default: smoe train's bundled
 * run) sets the shape of the compute measurement. */
int sim_calibrate(int argc, char **argv, cli_common *c, const char *out, int pthread)
{
    smoe_rt *rt = cli_rt_start(&argc, &argv);
    smoe_err err;
    if (!rt)
        return SMOE_EXIT_FAIL;
    char base[4200];
    const char *cdir = smoe_config_default_dir();
    if (!c->base && cdir) {
        snprintf(base, sizeof base, "%s/train.yml", cdir);
        c->base = base;
    }
    if (!c->model)
        c->model = "tiny";
    c->devices = smoe_rt_size(rt);
    smoe_config_opts o = cli_config_opts(c);
    smoe_config *cfg = NULL;
    smoe_plan *plan = NULL;
    smoe_plan_opts po = { c->devices, 1, c->params, 4 };
    smoe_status s = smoe_config_load(&o, &cfg, &err);
    if (!s)
        s = smoe_plan_build(cfg, &po, &plan, &err);
    if (!s)
        s = smoe_calib_measure(rt, cfg, plan, pthread, out, &err);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    /* every rank has the same verdict; rank 0 prints it before the ranks
     * leave together (a rank that exits first may have the launcher end
     * the others) */
    if (s)
        cli_die(&err);
    cli_die_under(NULL);
    smoe_rt_finalize(rt);
    return SMOE_EXIT_OK;
}
