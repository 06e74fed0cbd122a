/* `smoe train --json`: rank 0 prints one object at the end (schema in the
 * README). With --compare: {"runs": {"no_prefetch": RUN, "prefetch": RUN,
 * "legacy": RUN}}. */
#include "cli.h"
#include "smoe/train.h"

#include <cjson/cJSON.h>

static cJSON *run_json(const smoe_plan *p, const smoe_train_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "mesh", cli_json_mesh(&p->mesh));
    cJSON_AddNumberToObject(o, "first_step", (double)r->first_step);
    if (r->resumed_from[0])
        cJSON_AddStringToObject(o, "resumed_from", r->resumed_from);
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    for (int64_t i = 0; i < r->nsteps; i++) {
        const smoe_train_step *s = &r->steps[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "step", (double)s->step);
        cJSON_AddNumberToObject(x, "loss", s->loss);
        cJSON_AddNumberToObject(x, "lr", s->lr);
        cJSON_AddNumberToObject(x, "grad_norm", s->grad_norm);
        cJSON_AddNumberToObject(x, "aux_loss", s->aux_loss);
        cJSON_AddNumberToObject(x, "z_loss", s->z_loss);
        cJSON_AddNumberToObject(x, "step_ms", s->step_ms);
        cJSON_AddNumberToObject(x, "exposed_gather_ms", s->exposed_gather_ms);
        cJSON_AddNumberToObject(x, "residual_gather_ms", s->residual_ms);
        cJSON_AddNumberToObject(x, "a2a_ms", s->a2a_ms);
        cJSON_AddNumberToObject(x, "compute_ms", s->compute_ms);
        cJSON_AddNumberToObject(x, "gather_ms", s->gather_ms);
        cJSON_AddNumberToObject(x, "reduce_wait_ms", s->reduce_wait_ms);
        cJSON_AddNumberToObject(x, "peak_gathered_bytes", (double)s->peak_gathered_bytes);
        cJSON_AddItemToArray(steps, x);
    }
    cJSON *sum = cJSON_AddObjectToObject(o, "summary");
    cJSON_AddStringToObject(sum, "recipe", r->recipe);
    cJSON_AddNumberToObject(sum, "mean_step_ms", r->mean_step_ms);
    cJSON_AddNumberToObject(sum, "mean_exposed_gather_ms", r->mean_exposed_gather_ms);
    cJSON_AddNumberToObject(sum, "mean_residual_gather_ms", r->mean_residual_ms);
    cJSON_AddNumberToObject(sum, "mean_a2a_ms", r->mean_a2a_ms);
    cJSON_AddNumberToObject(sum, "mean_compute_ms", r->mean_compute_ms);
    cJSON_AddNumberToObject(sum, "mean_gather_ms", r->mean_gather_ms);
    cJSON_AddNumberToObject(sum, "peak_gathered_bytes", (double)r->peak_gathered_bytes);
    cJSON_AddNumberToObject(sum, "peak_gathered_fwd_bytes", (double)r->peak_gathered_fwd_bytes);
    cJSON_AddNumberToObject(sum, "peak_gathered_bwd_bytes", (double)r->peak_gathered_bwd_bytes);
    cJSON_AddNumberToObject(sum, "layer_gathered_bytes", (double)r->layer_gathered_bytes);
    cJSON_AddNumberToObject(sum, "peak_rss_bytes", (double)r->peak_rss_bytes);
    cJSON_AddNumberToObject(sum, "memory_estimate_bytes", (double)r->memory_estimate_bytes);
    cJSON_AddNumberToObject(sum, "params", (double)r->params);
    cJSON_AddNumberToObject(sum, "tokens_per_step", (double)r->tokens_per_step);
    cJSON_AddNumberToObject(sum, "model_flops_per_step", r->model_flops_per_step);
    cJSON_AddStringToObject(sum, "blas_core", r->blas.corename);
    cJSON_AddStringToObject(o, "params_sha256", r->params_sha256);
    return o;
}

void train_print_json(FILE *f, const smoe_plan *p, const smoe_train_result *res, int n,
                      const char *compare)
{
    cJSON *root;
    if (compare && n == 3) {
        static const char *const keys[3] = { "no_prefetch", "prefetch", "legacy" };
        root = cJSON_CreateObject();
        cJSON *runs = cJSON_AddObjectToObject(root, "runs");
        for (int i = 0; i < 3; i++)
            cJSON_AddItemToObject(runs, keys[i], run_json(p, &res[i]));
    } else {
        root = run_json(p, &res[0]);
    }
    cli_json_print(f, root);
}
