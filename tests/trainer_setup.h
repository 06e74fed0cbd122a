/* The trainer tests' set-up: smoe train's tiny model (CONFIG_DIR/train.yml)
 * on one rank over the single-rank communicator (no MPI), the batches of
 * DATA_FILE at sequence length 128, and a scratch directory. */
#ifndef SMOE_TEST_TRAINER_SETUP_H
#define SMOE_TEST_TRAINER_SETUP_H

#include "smoe/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The depth-1 co-axis schedule of the plan trainer_setup made (freed by
 * trainer_teardown), as smoe train runs by default. */
static smoe_schedule *setup_depth1;
static const smoe_schedule *setup_schedules[1];

/* Fill the four; tmpl (mkdtemp's template) becomes the scratch
 * directory. 0 on success, else a line on stderr naming `test`. */
static inline int trainer_setup(const char *test, const char *cfgdir, const char *file,
                                smoe_config **cfg, smoe_plan **plan, smoe_comm *comm,
                                smoe_train_data **data, char *tmpl)
{
    smoe_err err;
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", cfgdir);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    smoe_plan_opts po = { 1, 1, NULL, 4 };
    memset(&err, 0, sizeof err);
    if (smoe_config_load(&co, cfg, &err) || smoe_plan_build(*cfg, &po, plan, &err) ||
        smoe_comm_local_new(&(*plan)->mesh, 20, comm, &err) ||
        smoe_train_data_load(file, 128, data, &err) ||
        smoe_schedule_for_plan(*plan, 1, 0, &setup_depth1, &err) || !mkdtemp(tmpl)) {
        fprintf(stderr, "%s: set-up: %s\n", test, err.msg);
        return 1;
    }
    setup_schedules[0] = setup_depth1;
    return 0;
}

/* Remove the scratch directory and free the four; 0 when the directory
 * went. */
static inline int trainer_teardown(const char *tmpl, smoe_config *cfg, smoe_plan *plan,
                                   smoe_comm *comm, smoe_train_data *data)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    int rc = system(cmd);
    smoe_train_data_free(data);
    smoe_schedule_free(setup_depth1);
    setup_depth1 = NULL;
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    smoe_comm_local_free(comm);
    return rc;
}

#endif
