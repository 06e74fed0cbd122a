/* Training through the library API: the bundled 'tiny' MoE model (smoe
 * train's default run: configs/train.yml, seed 1, prefetch depth 1) for a
 * few steps on the bundled text, one batch at a time, then every parameter
 * gathered whole and checked finite.
 *
 *   train_tiny [STEPS [OUT.json [OUT.bin]]]        (default 5 steps)
 *   mpiexec -n N train_tiny ...                    (N ranks; one without a launcher)
 *
 * It prints one line per step; OUT.json gets the steps and the parameter
 * digest as `smoe train --json` writes them (through cJSON, as it does),
 * OUT.bin the parameters in
 * the --dump-params format, so the run can be compared with `smoe train`
 * (tests/example_train.sh does, bitwise). The configs are found as the
 * smoe command finds them (SMOE_CONFIG_DIR, or beside the executable). */
#include "smoe/runtime.h"
#include "smoe/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(smoe_rt *rt, const smoe_err *err)
{
    char buf[1200];
    if (smoe_rt_rank(rt) == 0)
        fprintf(stderr, "train_tiny: %s\n", smoe_err_format(err, buf, sizeof buf));
    smoe_rt_finalize(rt);
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
    FILE *f = text ? fopen(path, "w") : NULL;
    int bad = !f || fputs(text, f) < 0;
    if (f && fclose(f) != 0)
        bad = 1;
    free(text);
    cJSON_Delete(o);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    smoe_rt *rt;
    smoe_err err;
    if (smoe_rt_init(&argc, &argv, &rt, &err)) {
        fprintf(stderr, "train_tiny: %s\n", err.msg);
        return 1;
    }
    int root = smoe_rt_rank(rt) == 0;
    int64_t steps = argc > 1 ? strtoll(argv[1], NULL, 10) : 5;
    const char *json_path = argc > 2 ? argv[2] : NULL, *dump_path = argc > 3 ? argv[3] : NULL;
    const char *cdir = smoe_config_default_dir();
    if (!cdir || steps < 1) {
        smoe_err_set(&err, SMOE_EINVAL, cdir ? "STEPS must be >= 1" : "no configs directory");
        return fail(rt, &err);
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
        return fail(rt, &err);
    smoe_plan_opts po = { smoe_rt_size(rt), 1, NULL, 4 };
    smoe_plan *plan;
    smoe_rt_opts ro = { 0, 0 };
    if (smoe_plan_build(cfg, &po, &plan, &err) ||
        smoe_plan_check_even(plan, SMOE_MODE_COAXIS, &err) ||
        smoe_rt_set_mesh(rt, &plan->mesh, &ro, &err))
        return fail(rt, &err);

    /* the trainer, and the batches fed to it one step at a time */
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = steps;
    o.seed = 1;
    o.prefetch_depth = 1;
    o.data_path = data_path;
    smoe_model_cfg shape; /* the sequence length the text must cover */
    smoe_train_data *data;
    smoe_trainer *t;
    if (smoe_train_model_cfg(cfg, &plan->mesh, &shape, &err) ||
        smoe_train_data_load(data_path, shape.seq, &data, &err) ||
        smoe_trainer_new(rt, cfg, plan, &o, data, &t, &err))
        return fail(rt, &err);
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tokens = malloc(sizeof *tokens * (size_t)T), *targets = malloc(sizeof *targets * (size_t)T);
    smoe_train_step *rec = calloc((size_t)steps, sizeof *rec);
    if (!tokens || !targets || !rec)
        return 1;
    for (int64_t s = 0; s < steps; s++) {
        smoe_train_data_batch(data, o.seed, s, smoe_rt_rank(rt) * mc->batch, mc->batch, mc->seq,
                              tokens, targets);
        if (smoe_trainer_step(t, tokens, targets, &rec[s], &err))
            return fail(rt, &err);
        if (root)
            printf("step %lld loss %.6f grad_norm %.4f\n", (long long)s + 1, rec[s].loss,
                   rec[s].grad_norm);
    }

    /* the parameters: whole on rank 0, and their digest */
    int finite;
    int64_t values = check_params(t, root, &finite, &err);
    char sha[65] = "";
    if (values < 0 || smoe_trainer_digest(t, dump_path, sha, &err))
        return fail(rt, &err);
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
    smoe_train_data_free(data);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    smoe_rt_finalize(rt);
    return finite ? 0 : 1;
}
