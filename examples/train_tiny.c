/* Training through the library API: the bundled 'tiny' MoE model (smoe
 * train's default run: configs/train.yml, seed 1, prefetch depth 1) for a
 * few steps on the bundled text, one batch at a time, then every parameter
 * gathered whole and checked finite. The trainer talks to a communicator
 * (comm.h): the MPI runtime's (smoe_rt_comm), or with --local the
 * single-rank one (smoe_comm_local_new), which never starts MPI; built
 * with TRAIN_TINY_NO_MPI the program has only the latter and links no MPI.
 *
 *   train_tiny [--local] [STEPS [OUT.json [OUT.bin]]]   (default 5 steps, at most 2^40)
 *   mpiexec -n N train_tiny ...                  (N ranks; one without a launcher)
 *
 * It prints one line per step; OUT.json gets the steps and the parameter
 * digest as `smoe train --json` writes them (through cJSON, as it does),
 * OUT.bin the parameters in
 * the --dump-params format, so the run can be compared with `smoe train`
 * (tests/example_train.sh does, bitwise). The configs are found as the
 * smoe command finds them (SMOE_CONFIG_DIR, or beside the executable). */
#ifndef TRAIN_TINY_NO_MPI
#include "smoe/runtime.h"
#endif
#include "smoe/comm.h"
#include "smoe/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the most steps a run may ask for (as smoe train --steps) */
#define MAX_STEPS ((int64_t)1 << 40)

/* The ranks: the MPI runtime, or one rank without it. */
typedef struct ranks {
    int local;
#ifndef TRAIN_TINY_NO_MPI
    smoe_rt *rt;
#endif
    int rank, size;
    smoe_comm comm;       /* made once the plan's mesh is known */
} ranks;

static smoe_status ranks_init(ranks *r, int *argc, char ***argv, smoe_err *err)
{
    r->rank = 0;
    r->size = 1;
    r->comm.ctx = NULL;
#ifdef TRAIN_TINY_NO_MPI
    (void)argc, (void)argv, (void)err;
    r->local = 1;
    return SMOE_OK;
#else
    r->rt = NULL;
    if (r->local)
        return SMOE_OK;
    smoe_status s = smoe_rt_init(argc, argv, &r->rt, err);
    if (!s) {
        r->rank = smoe_rt_rank(r->rt);
        r->size = smoe_rt_size(r->rt);
    }
    return s;
#endif
}

/* The communicator of the plan's mesh. */
static smoe_status ranks_comm(ranks *r, const smoe_mesh *mesh, smoe_err *err)
{
    if (r->local)
        return smoe_comm_local_new(mesh, 20, &r->comm, err);
#ifndef TRAIN_TINY_NO_MPI
    smoe_rt_opts ro = { 0, 0 };
    smoe_status s = smoe_rt_set_mesh(r->rt, mesh, &ro, err);
    if (!s)
        r->comm = smoe_rt_comm(r->rt);
    return s;
#else
    return SMOE_EINTERNAL;
#endif
}

static void ranks_fini(ranks *r)
{
    if (r->local)
        smoe_comm_local_free(&r->comm);
#ifndef TRAIN_TINY_NO_MPI
    else
        smoe_rt_finalize(r->rt);
#endif
}

static int fail(ranks *r, const smoe_err *err)
{
    char buf[1200];
    if (r->rank == 0)
        fprintf(stderr, "train_tiny: %s\n", smoe_err_format(err, buf, sizeof buf));
    ranks_fini(r);
    return 1;
}

/* Every parameter whole on rank 0: all finite? Returns the values seen. */
static int64_t check_params(smoe_trainer *t, int root, int *finite, smoe_err *err)
{
    int n;
    const smoe_trainer_param *p = smoe_trainer_params(t, &n);
    int64_t values = 0;
    *finite = 1;
    for (int i = 0; i < n; i++) {
        float *full = root ? malloc(sizeof *full * (size_t)p[i].numel) : NULL;
        if (smoe_trainer_gather(t, i, full, err)) {
            free(full);
            return -1;
        }
        for (int64_t k = 0; root && k < p[i].numel; k++)
            *finite &= isfinite(full[k]) != 0;
        values += p[i].numel;
        free(full);
    }
    return values;
}

/* The steps and the digest as `smoe train --json` writes them (the same
 * JSON library, so the same digits). */
static int write_json(const char *path, const smoe_train_step *rec, int64_t steps,
                      const char *sha)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "steps");
    for (int64_t s = 0; s < steps; s++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "step", (double)rec[s].step);
        cJSON_AddNumberToObject(x, "loss", rec[s].loss);
        cJSON_AddNumberToObject(x, "lr", rec[s].lr);
        cJSON_AddNumberToObject(x, "grad_norm", rec[s].grad_norm);
        cJSON_AddNumberToObject(x, "aux_loss", rec[s].aux_loss);
        cJSON_AddNumberToObject(x, "z_loss", rec[s].z_loss);
        cJSON_AddItemToArray(a, x);
    }
    cJSON_AddStringToObject(o, "params_sha256", sha);
    char *text = cJSON_Print(o);
    smoe_err err; /* written whole or not at all, as smoe's own outputs */
    int bad = !text || smoe_out_write_file(path, "the record", text, strlen(text), &err);
    if (text && bad)
        fprintf(stderr, "train_tiny: %s: %s\n", err.where, err.msg);
    free(text);
    cJSON_Delete(o);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    ranks r;
    smoe_err err;
    r.local = argc > 1 && strcmp(argv[1], "--local") == 0;
    if (r.local) {
        argc--;
        argv++;
    }
    if (ranks_init(&r, &argc, &argv, &err)) {
        fprintf(stderr, "train_tiny: %s\n", err.msg);
        return 1;
    }
    int root = r.rank == 0;
    int64_t steps = 5;
    const char *json_path = argc > 2 ? argv[2] : NULL, *dump_path = argc > 3 ? argv[3] : NULL;
    const char *cdir = smoe_config_default_dir();
    if (argc > 1 && (smoe_parse_i64(argv[1], &steps) || steps < 1 || steps > MAX_STEPS)) {
        smoe_err_in(&err, SMOE_EINVAL, "STEPS", "'%s': expected an integer from 1 to %lld",
                    argv[1], (long long)MAX_STEPS);
        return fail(&r, &err);
    }
    if (!cdir) {
        smoe_err_set(&err, SMOE_EINVAL, "no configs directory");
        return fail(&r, &err);
    }
    /* a record per step (the JSON has them all), asked for before anything
     * large: too many steps for this machine are refused at once */
    smoe_train_step *rec = calloc((size_t)steps, sizeof *rec);
    if (!rec) {
        smoe_err_in(&err, SMOE_ENOMEM, "STEPS", "%lld: out of memory for a record per step "
                    "(%lld bytes)", (long long)steps, (long long)steps * (long long)sizeof *rec);
        return fail(&r, &err);
    }
    char base[4200], data_path[4200];
    snprintf(base, sizeof base, "%s/train.yml", cdir);
    snprintf(data_path, sizeof data_path, "%s/../data/gpl-3.0.txt", cdir);

    /* the config, the plan on this many ranks, the mesh */
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    smoe_config *cfg;
    if (smoe_config_load(&co, &cfg, &err))
        return fail(&r, &err);
    smoe_plan_opts po = { r.size, 1, NULL, 4 };
    smoe_plan *plan;
    if (smoe_plan_build(cfg, &po, &plan, &err) ||
        smoe_plan_check_even(plan, SMOE_MODE_COAXIS, &err) ||
        ranks_comm(&r, &plan->mesh, &err))
        return fail(&r, &err);

    /* the trainer, its prefetch schedule (depth 1, co-axis gathers) and the
     * batches fed to it one step at a time */
    smoe_schedule *sched;
    if (smoe_schedule_for_plan(plan, 1, 0, &sched, &err))
        return fail(&r, &err);
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = steps;
    o.seed = 1;
    o.schedules = (const smoe_schedule *const *)&sched;
    o.nschedules = 1;
    o.data_path = data_path;
    smoe_model_cfg shape; /* the sequence length the text must cover */
    smoe_train_data *data;
    smoe_trainer *t;
    if (smoe_train_model_cfg(cfg, &plan->mesh, &shape, &err) ||
        smoe_train_data_load(data_path, shape.seq, &data, &err) ||
        smoe_trainer_new(cfg, plan, &r.comm, &o, data, &t, &err))
        return fail(&r, &err);
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)T), *targets = malloc(sizeof *targets * (size_t)T);
    if (!tokens || !targets) {
        smoe_err_set(&err, SMOE_ENOMEM, "out of memory for a batch (%lld tokens)", (long long)T);
        return fail(&r, &err);
    }
    for (int64_t s = 0; s < steps; s++) {
        if (smoe_train_data_batch(data, o.seed, s, r.rank * mc->batch, mc->batch, mc->seq,
                                  tokens, targets, &err) ||
            smoe_trainer_step(t, tokens, targets, &rec[s], &err))
            return fail(&r, &err);
        if (root)
            printf("step %lld loss %.6f grad_norm %.4f\n", (long long)s + 1, rec[s].loss,
                   rec[s].grad_norm);
    }

    /* the parameters: whole on rank 0, and their digest */
    int finite;
    int64_t values = check_params(t, root, &finite, &err);
    char sha[65] = "";
    if (values < 0 || smoe_trainer_digest(t, dump_path, sha, &err))
        return fail(&r, &err);
    int np;
    smoe_trainer_params(t, &np);
    if (root) {
        printf("params: %d tensors, %lld values, %s\n", np, (long long)values,
               finite ? "all finite" : "NOT FINITE");
        printf("loss: first %.6f last %.6f (%s)\n", rec[0].loss, rec[steps - 1].loss,
               rec[steps - 1].loss < rec[0].loss ? "falls" : "does not fall");
        printf("params_sha256: %s\n", sha);
    }
    if (root && json_path && write_json(json_path, rec, steps, sha) != 0) {
        fprintf(stderr, "train_tiny: cannot write %s\n", json_path);
        return 1;
    }
    free(tokens);
    free(targets);
    free(rec);
    smoe_trainer_free(t);
    smoe_schedule_free(sched);
    smoe_train_data_free(data);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    ranks_fini(&r);
    return finite ? 0 : 1;
}
