/* `smoe sim --json`: {"hardware", "mesh", "shape", "schedules": {NAME: {...,
 * "executor": what the row simulates}},
 * "reported": {NAME: {...}}, "sources": {KEY: TEXT}, "pareto": [...]}
 * (schema in docs/formats.md). */
#include "cli.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>

/* The readings, each combination's rows and the envelope. */
cJSON *sim_readings_json(const smoe_scenario *sc, const sim_readings *rd)
{
    if (!rd || !rd->n)
        return NULL;
    static const char *const k_fig_name[SIM_FIGS] = { "step_ms", "exposed_gather_ms",
                                                      "peak_hbm_gib" };
    cJSON *o = cJSON_CreateObject();
    cJSON *facts = cJSON_AddObjectToObject(o, "facts");
    for (int k = 0; k < sc->n_facts; k++) {
        cJSON *l = cJSON_CreateArray();
        for (int j = 0; j < sc->facts[k].n; j++) {
            cJSON *v = cJSON_CreateObject();
            cli_json_add(v, "value", cli_json_string(sc->facts[k].text[j]));
            cli_json_add(v, "source", cli_json_string(sc->facts[k].source[j]));
            cJSON_AddItemToArray(l, v);
        }
        cli_json_add(facts, smoe_scn_fact_name(sc->facts[k].key), l);
    }
    cJSON *combos = cJSON_AddArrayToObject(o, "combinations");
    for (int c = 0; c < rd->n; c++) {
        cJSON *x = cJSON_CreateObject(), *vals = cJSON_AddObjectToObject(x, "readings");
        for (int k = 0; k < sc->n_facts; k++)
            if (rd->r[c].idx[k] >= 0)
                cli_json_add(vals, smoe_scn_fact_name(sc->facts[k].key),
                             cli_json_string(sc->facts[k].text[rd->r[c].idx[k]]));
        cJSON *rows = cJSON_AddObjectToObject(x, "schedules");
        for (int i = 0; i < rd->r[c].n; i++) {
            cJSON *r = cJSON_CreateObject();
            for (int w = 0; w < SIM_FIGS; w++)
                cJSON_AddNumberToObject(r, k_fig_name[w], sim_reading_fig(&rd->r[c], i, w));
            cli_json_add(rows, rd->r[c].name[i], r);
        }
        cJSON_AddItemToArray(combos, x);
    }
    cJSON *env = cJSON_AddObjectToObject(o, "envelope");
    for (int i = 0; i < rd->r[0].n; i++) {
        cJSON *r = cJSON_CreateObject();
        for (int w = 0; w < SIM_FIGS; w++) {
            double lo, hi;
            sim_reading_envelope(rd, i, w, &lo, &hi);
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(lo));
            cJSON_AddItemToArray(pair, cJSON_CreateNumber(hi));
            cli_json_add(r, k_fig_name[w], pair);
        }
        cli_json_add(env, rd->r[0].name[i], r);
    }
    return o;
}

/* The shape as simulated. */
static void add_shape(cJSON *root, const smoe_sim_shape *sh)
{
    cJSON *shape = cJSON_AddObjectToObject(root, "shape");
    cJSON_AddNumberToObject(shape, "batch", (double)sh->batch);
    cJSON_AddNumberToObject(shape, "seq", (double)sh->seq);
    cJSON_AddNumberToObject(shape, "context", (double)(sh->context > 1 ? sh->context : 1));
    cJSON_AddNumberToObject(shape, "weight_bytes", sh->dtype_bytes);
    cJSON_AddNumberToObject(shape, "compute_bytes", sh->compute_bytes);
    cJSON_AddNumberToObject(shape, "grad_bytes", sh->grad_bytes);
    cJSON_AddNumberToObject(shape, "mu_bytes", sh->mu_bytes);
    cJSON_AddNumberToObject(shape, "nu_bytes", sh->nu_bytes);
    if (sh->wire_bytes > 0)
        cJSON_AddNumberToObject(shape, "wire_bytes", sh->wire_bytes);
    else
        cJSON_AddNullToObject(shape, "wire_bytes");
}

/* One schedule's figures, its memory by class and its executor. */
static void add_result(cJSON *sched, const char *name, const smoe_sim_result *r,
                       const char *executor, double cap)
{
    cJSON *o = cJSON_AddObjectToObject(sched, name);
    cJSON_AddNumberToObject(o, "step_ms", r->step_s * 1e3);
    cJSON_AddNumberToObject(o, "compute_ms", r->compute_s * 1e3);
    cJSON_AddNumberToObject(o, "exposed_gather_ms", r->exposed_gather_s * 1e3);
    cJSON_AddNumberToObject(o, "exposed_top_level_ms", r->exposed_top_s * 1e3);
    cJSON_AddNumberToObject(o, "residual_gather_ms", r->residual_s * 1e3);
    cJSON_AddNumberToObject(o, "a2a_ms", r->a2a_s * 1e3);
    cJSON_AddNumberToObject(o, "gather_busy_ms", r->gather_busy_s * 1e3);
    cJSON_AddNumberToObject(o, "reduce_wait_ms", r->reduce_wait_s * 1e3);
    cJSON_AddNumberToObject(o, "peak_hbm_bytes", r->peak_hbm_bytes);
    if (cap > 0)
        cJSON_AddBoolToObject(o, "fits_hbm", r->peak_hbm_bytes <= cap);
    else
        cJSON_AddNullToObject(o, "fits_hbm");
    cJSON *mem = cJSON_AddObjectToObject(o, "memory");
    cJSON_AddNumberToObject(mem, "params", r->mem_params);
    cJSON_AddNumberToObject(mem, "grads", r->mem_grads);
    cJSON_AddNumberToObject(mem, "optimizer", r->mem_optimizer);
    cJSON_AddNumberToObject(mem, "gathered", r->mem_gathered);
    cJSON_AddNumberToObject(mem, "activations", r->mem_activations);
    if (r->mem_top > 0) /* smoe's runtime executor */
        cJSON_AddNumberToObject(mem, "top_level", r->mem_top);
    cJSON_AddItemToObject(o, "executor", cli_json_string(executor));
}

/* The scenario's reported figures and the sources of its facts. */
static void add_reported(cJSON *root, const smoe_scenario *sc)
{
    cJSON *rep = cJSON_AddObjectToObject(root, "reported");
    for (int i = 0; sc && i < sc->n_reported; i++) {
        cJSON *o = cJSON_AddObjectToObject(rep, sc->reported_name[i]);
        const smoe_scn_numbers *x = &sc->reported[i];
        if (x->step_ms >= 0)
            cJSON_AddNumberToObject(o, "step_ms", x->step_ms);
        if (x->exposed_gather_ms >= 0)
            cJSON_AddNumberToObject(o, "exposed_gather_ms", x->exposed_gather_ms);
        if (x->peak_hbm_gib >= 0)
            cJSON_AddNumberToObject(o, "peak_hbm_gib", x->peak_hbm_gib);
    }
    if (sc && sc->n_sources) { /* where the scenario's facts come from */
        cJSON *src = cJSON_AddObjectToObject(root, "sources");
        for (int i = 0; i < sc->n_sources; i++)
            cli_json_add(src, sc->source_key[i], cli_json_string(sc->source_text[i]));
    }
}

void sim_print_json(FILE *f, const smoe_plan *p, const smoe_hw *hw, const smoe_sim_shape *sh,
                    const char *tuned, const char *const *names, const char *const *executors,
                    const smoe_sim_result *res, int n, const smoe_scenario *sc,
                    const sim_readings *rd, const smoe_sim_point *curve, int ncurve)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "hardware", cli_json_string(hw->name));
    cJSON_AddItemToObject(root, "mesh", cli_json_mesh(&p->mesh));
    /* kernel-tuning keys away from MaxText's default: not modelled */
    cJSON_AddItemToObject(root, "kernel_tuning_not_modelled", cli_json_string(tuned));
    add_shape(root, sh);
    double cap = smoe_sim_device_hbm(hw); /* 0: the profile gives none */
    if (cap > 0)
        cJSON_AddNumberToObject(root, "device_hbm_bytes", cap);
    else
        cJSON_AddNullToObject(root, "device_hbm_bytes");
    cJSON *sched = cJSON_AddObjectToObject(root, "schedules");
    for (int i = 0; i < n; i++)
        add_result(sched, names[i], &res[i], executors[i], cap);
    add_reported(root, sc);
    cJSON *rj = sc ? sim_readings_json(sc, rd) : NULL;
    if (rj)
        cJSON_AddItemToObject(root, "readings", rj);
    if (ncurve) {
        cJSON *pc = cJSON_AddArrayToObject(root, "pareto");
        for (int i = 0; i < ncurve; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "peak_hbm_bytes", curve[i].peak_hbm_bytes);
            cJSON_AddNumberToObject(o, "exposed_gather_ms", curve[i].exposed_gather_s * 1e3);
            cJSON_AddNumberToObject(o, "step_ms", curve[i].step_s * 1e3);
            cJSON_AddItemToArray(pc, o);
        }
    }
    cli_json_print(f, root);
}
