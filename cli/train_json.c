/* `smoe train --json`: rank 0 prints one object at the end (schema in
 * docs/formats.md). With --compare: {"runs": {"no_prefetch": RUN, "prefetch": RUN,
 * "legacy": RUN}} (with repeated --schedule: one RUN per file, keyed by
 * its path), each RUN holding the steps that schedule ran (they take
 * turns in one training run) and its summary after the warm-up round. */
#include "cli.h"
#include "smoe/train.h"

#include <cjson/cJSON.h>
#include <string.h>

static void add_stat(cJSON *o, const char *name, const smoe_train_stat *t)
{
    char k[96];
    snprintf(k, sizeof k, "mean_%s", name);
    cJSON_AddNumberToObject(o, k, t->mean);
    snprintf(k, sizeof k, "median_%s", name);
    cJSON_AddNumberToObject(o, k, t->median);
    snprintf(k, sizeof k, "p25_%s", name);
    cJSON_AddNumberToObject(o, k, t->p25);
    snprintf(k, sizeof k, "p75_%s", name);
    cJSON_AddNumberToObject(o, k, t->p75);
}

/* What the weight gathers and the gradient reductions move, and where the
 * run started (a checkpoint, the config keys changed since, the keys not
 * applied). */
static void add_run_head(cJSON *o, const smoe_plan *p, const smoe_train_result *r,
                         int reduce_dtype)
{
    cJSON_AddItemToObject(o, "mesh", cli_json_mesh(&p->mesh));
    cJSON_AddItemToObject(o, "gather_dtype", cli_json_string(smoe_dtype_name(p->gather_dtype)));
    if (p->gather_dtype == SMOE_DT_INT8)
        cJSON_AddNumberToObject(o, "int8_block", (double)p->int8_block);
    else
        cJSON_AddNullToObject(o, "int8_block");
    cJSON_AddNumberToObject(o, "wire_fallbacks", p->wire_fallbacks);
    cJSON_AddItemToObject(o, "reduce_dtype",
                          cli_json_string(smoe_dtype_name((smoe_dtype)reduce_dtype)));
    cJSON_AddItemToObject(o, "expert_exchange", cli_json_string(r->expert_exchange));
    cJSON_AddNumberToObject(o, "first_step", (double)r->first_step);
    if (r->resumed_from[0])
        cJSON_AddItemToObject(o, "resumed_from", cli_json_string(r->resumed_from));
    if (r->resume_note[0])
        cJSON_AddItemToObject(o, "resume_note", cli_json_string(r->resume_note));
    cJSON *ch = cJSON_AddArrayToObject(o, "config_changes");
    for (int i = 0; i < r->nchanges; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToObject(x, "key", cli_json_string(r->changes[i].key));
        cJSON_AddItemToObject(x, "checkpoint", cli_json_string(r->changes[i].from));
        cJSON_AddItemToObject(x, "now", cli_json_string(r->changes[i].to));
        cJSON_AddItemToArray(ch, x);
    }
    cJSON *na = cJSON_AddArrayToObject(o, "not_applied");
    for (int i = 0; i < r->nunapplied; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToObject(x, "key", cli_json_string(r->unapplied[i].key));
        cJSON_AddItemToObject(x, "value", cli_json_string(r->unapplied[i].value));
        cJSON_AddItemToObject(x, "reason", cli_json_string(r->unapplied[i].reason));
        cJSON_AddItemToArray(na, x);
    }
}

static cJSON *step_json(const smoe_train_step *s, int dev)
{
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
    cJSON_AddNumberToObject(x, "peak_tracked_bytes", (double)s->peak_tracked_bytes);
    cJSON_AddNumberToObject(x, "gathers_at_use", (double)s->gathers_at_use);
    cJSON_AddNumberToObject(x, "gather_bytes", (double)s->gather_bytes);
    cJSON_AddNumberToObject(x, "host_bytes", (double)s->host_bytes);
    cJSON_AddNumberToObject(x, "link_bytes", (double)s->link_bytes);
    cJSON_AddNumberToObject(x, "compute_cpu_ms", s->compute_cpu_ms);
    cJSON_AddNumberToObject(x, "cpu_ms", s->cpu_ms);
    cJSON_AddNumberToObject(x, "sys_ms", s->sys_ms);
    cJSON_AddNumberToObject(x, "train_cpu_ms", s->train_cpu_ms);
    if (dev) {
        cJSON_AddNumberToObject(x, "device_step_ms", s->device_step_ms);
        cJSON_AddNumberToObject(x, "device_compute_ms", s->device_compute_ms);
    }
    return x;
}

/* The run's summary over the steps of `mode` (-1: all) after `skip`. */
static void add_summary(cJSON *o, const smoe_train_result *r, int mode, int64_t skip, int dev)
{
    smoe_train_summary sm;
    smoe_train_summarize(r, mode, skip, &sm);
    cJSON *sum = cJSON_AddObjectToObject(o, "summary");
    cJSON_AddStringToObject(sum, "recipe", r->recipe);
    cJSON_AddNumberToObject(sum, "steps_counted", (double)sm.nsteps);
    cJSON_AddNumberToObject(sum, "warmup_steps_skipped", (double)skip);
    add_stat(sum, "step_ms", &sm.step_ms);
    add_stat(sum, "exposed_gather_ms", &sm.exposed_gather_ms);
    add_stat(sum, "residual_gather_ms", &sm.residual_ms);
    add_stat(sum, "a2a_ms", &sm.a2a_ms);
    add_stat(sum, "compute_ms", &sm.compute_ms);
    add_stat(sum, "gather_ms", &sm.gather_ms);
    if (dev) {
        add_stat(sum, "device_step_ms", &sm.device_step_ms);
        add_stat(sum, "device_compute_ms", &sm.device_compute_ms);
    }
    cJSON_AddNumberToObject(sum, "peak_gathered_bytes", (double)sm.peak_gathered_bytes);
    cJSON_AddNumberToObject(sum, "peak_gathered_fwd_bytes", (double)r->peak_gathered_fwd_bytes);
    cJSON_AddNumberToObject(sum, "peak_gathered_bwd_bytes", (double)r->peak_gathered_bwd_bytes);
    cJSON_AddNumberToObject(sum, "layer_gathered_bytes", (double)r->layer_gathered_bytes);
    cJSON_AddNumberToObject(sum, "peak_rss_bytes", (double)r->peak_rss_bytes);
    cJSON_AddNumberToObject(sum, "peak_tracked_bytes", (double)r->peak_tracked_bytes);
    cJSON *pt = cJSON_AddObjectToObject(sum, "peak_tracked");
    const smoe_train_mem *m = &r->peak_tracked;
    cJSON_AddNumberToObject(pt, "params", (double)m->params);
    cJSON_AddNumberToObject(pt, "grads", (double)m->grads);
    cJSON_AddNumberToObject(pt, "optimizer", (double)m->optimizer);
    cJSON_AddNumberToObject(pt, "gathered", (double)m->gathered);
    cJSON_AddNumberToObject(pt, "activations", (double)m->activations);
    cJSON_AddNumberToObject(pt, "comm", (double)m->comm);
    cJSON_AddNumberToObject(sum, "budget_overruns", (double)r->budget_overruns);
    cJSON_AddNumberToObject(sum, "gathers_at_use", (double)r->gathers_at_use);
    cJSON_AddStringToObject(sum, "schedule", r->schedule_note);
    cJSON_AddNumberToObject(sum, "memory_estimate_bytes", (double)r->memory_estimate_bytes);
    cJSON_AddNumberToObject(sum, "params", (double)r->params);
    cJSON_AddNumberToObject(sum, "tokens_per_step", (double)r->tokens_per_step);
    cJSON_AddNumberToObject(sum, "model_flops_per_step", r->model_flops_per_step);
    cJSON_AddStringToObject(sum, "blas_core", r->blas.corename);
}

/* The steps of `mode` (-1: all) and their summary. */
static cJSON *run_json(const smoe_plan *p, const smoe_train_result *r, int mode, int64_t skip,
                       int reduce_dtype, int dev)
{
    cJSON *o = cJSON_CreateObject();
    add_run_head(o, p, r, reduce_dtype);
    cJSON *steps = cJSON_AddArrayToObject(o, "steps");
    for (int64_t i = 0; i < r->nsteps; i++)
        if (mode < 0 || r->steps[i].mode == mode)
            cJSON_AddItemToArray(steps, step_json(&r->steps[i], dev));
    add_summary(o, r, mode, skip, dev);
    cJSON_AddStringToObject(o, "params_sha256", r->params_sha256);
    return o;
}

void train_print_json(FILE *f, const smoe_plan *p, const smoe_train_result *res,
                      const cli_runs *rs, int reduce_dtype)
{
    cJSON *root;
    int dev = rs->device && strcmp(rs->device, "cpu") != 0; /* device timings */
    if (rs->n) {
        int64_t skip = train_warmup_steps(res, rs);
        root = cJSON_CreateObject();
        cJSON *runs = cJSON_AddObjectToObject(root, "runs");
        for (int i = 0; i < rs->n; i++)
            cli_json_add(runs, rs->key[i], run_json(p, res, i, skip, reduce_dtype, dev));
    } else {
        root = run_json(p, res, -1, 0, reduce_dtype, dev);
    }
    if (rs->progress) {
        cJSON_AddItemToObject(root, "progress_thread", cli_json_string(rs->progress));
        cJSON_AddItemToObject(root, "progress_thread_priority",
                              rs->priority ? cli_json_string(rs->priority) : cJSON_CreateNull());
    }
    if (rs->slices)
        cJSON_AddItemToObject(root, "slices", cli_json_string(rs->slices));
    cJSON_AddItemToObject(root, "device", cli_json_string(rs->device ? rs->device : "cpu"));
    cJSON_AddItemToObject(root, "matmul_dtype", cli_json_string(rs->matmul_bf16 ? "bf16" : "fp32"));
    cli_json_print(f, root);
}
