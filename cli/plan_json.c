/* `smoe plan --json`: one object {mesh, entries, summary}; keys and
 * partition_spec use the golden files' encoding (null / "axis" / [..]).
 * The only CLI file that includes the JSON library. */
#include "cli.h"

#include <cjson/cJSON.h>

static cJSON *axes_json(const smoe_axes *e)
{
    if (e->n == 0)
        return cJSON_CreateNull();
    if (e->n == 1)
        return cJSON_CreateString(e->ax[0]);
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < e->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(e->ax[i]));
    return a;
}

/* Always a list (used for gather axes per dim). */
static cJSON *axes_list(const smoe_axes *e)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < e->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(e->ax[i]));
    return a;
}

static cJSON *i64_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *gather_json(const smoe_gather *g, int prefetch, const smoe_mesh *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", smoe_gather_status_name(g->status));
    cJSON_AddBoolToObject(o, "prefetch", prefetch);
    cJSON_AddBoolToObject(o, "crosses_slices", smoe_gather_crosses_slices(g, m));
    cJSON_AddBoolToObject(o, "two_level", smoe_gather_two_level(g, m));
    cJSON_AddItemToObject(o, "layer_shape", i64_array(g->shape, g->rank));
    cJSON *axes = cJSON_CreateArray(), *spec = cJSON_CreateArray(),
          *res = cJSON_CreateArray(), *ind = cJSON_CreateArray();
    for (int d = 0; d < g->rank; d++) {
        cJSON_AddItemToArray(axes, axes_list(&g->axes[d]));
        cJSON_AddItemToArray(spec, axes_json(&g->out[d]));
        cJSON_AddItemToArray(res, axes_list(&g->residual[d]));
        if (g->indivisible & (1u << d))
            cJSON_AddItemToArray(ind, cJSON_CreateNumber(d));
    }
    cJSON_AddItemToObject(o, "axes", axes);
    cJSON_AddItemToObject(o, "group", i64_array(g->group, g->rank));
    cJSON_AddNumberToObject(o, "ways", (double)g->ways);
    cJSON_AddItemToObject(o, "gathered_spec", spec);
    cJSON_AddNumberToObject(o, "bytes_in", (double)g->bytes_in);
    cJSON_AddNumberToObject(o, "bytes_out", (double)g->bytes_out);
    cJSON_AddNumberToObject(o, "bytes_recv", (double)g->bytes_recv);
    cJSON_AddItemToObject(o, "residual", res);
    cJSON_AddNumberToObject(o, "residual_ways", (double)g->residual_ways);
    cJSON_AddNumberToObject(o, "residual_bytes_recv", (double)g->residual_bytes_recv);
    cJSON_AddItemToObject(o, "indivisible", ind);
    cJSON_AddBoolToObject(o, "uneven", g->uneven);
    cJSON_AddItemToObject(o, "wire", cli_json_string(smoe_dtype_name(g->wire)));
    if (g->wire_reason)
        cJSON_AddItemToObject(o, "wire_reason", cli_json_string(g->wire_reason));
    else
        cJSON_AddNullToObject(o, "wire_reason");
    if (g->reason)
        cJSON_AddStringToObject(o, "reason", g->reason);
    else
        cJSON_AddNullToObject(o, "reason");
    return o;
}

static cJSON *summary_json(const smoe_plan_summary *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "tagged", s->tagged);
    cJSON_AddNumberToObject(o, "fallback", s->fallback);
    cJSON_AddNumberToObject(o, "noop", s->noop);
    cJSON_AddNumberToObject(o, "uneven", s->uneven);
    cJSON *ways = cJSON_AddObjectToObject(o, "tagged_ways");
    for (int i = 0; i < s->n_ways; i++) {
        char k[32];
        snprintf(k, sizeof k, "%lld", (long long)s->ways[i]);
        cJSON_AddNumberToObject(ways, k, s->ways_count[i]);
    }
    cJSON *st = cJSON_AddObjectToObject(o, "stacks");
    for (int i = 0; i < s->n_stacks; i++) {
        const smoe_plan_stack *k = &s->stack[i];
        cJSON *x = cJSON_AddObjectToObject(st, k->name);
        cJSON_AddNumberToObject(x, "layers", (double)k->layers);
        cJSON_AddNumberToObject(x, "weights_per_layer", k->n_weights);
        cJSON_AddNumberToObject(x, "tagged", k->tagged);
        cJSON_AddNumberToObject(x, "fallback", k->fallback);
        cJSON_AddNumberToObject(x, "noop", k->noop);
        cJSON_AddNumberToObject(x, "uneven", k->uneven);
        cJSON_AddNumberToObject(x, "tagged_bytes_recv_per_layer", (double)k->tagged_bytes_recv);
        cJSON_AddNumberToObject(x, "fallback_bytes_recv_per_layer", (double)k->fallback_bytes_recv);
        cJSON_AddNumberToObject(x, "residual_bytes_recv_per_layer", (double)k->residual_bytes_recv);
        cJSON_AddNumberToObject(x, "gathered_bytes_per_layer", (double)k->gathered_bytes);
    }
    cJSON_AddNumberToObject(o, "step_gather_bytes_recv", (double)s->step_gather_bytes_recv);
    cJSON_AddNumberToObject(o, "step_residual_bytes_recv", (double)s->step_residual_bytes_recv);
    return o;
}

/* smoe_plan_link_bytes of one mode: null with one slice or where the
 * count cannot be made (the text says why). */
static cJSON *link_json(const smoe_plan *p, smoe_gather_mode mode)
{
    smoe_plan_link l;
    smoe_err e;
    if (smoe_mesh_slices(&p->mesh) <= 1 || smoe_plan_link_bytes(p, mode, 4, &l, &e))
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "gathers", (double)l.gathers);
    cJSON_AddNumberToObject(o, "reductions", (double)l.reductions);
    cJSON_AddNumberToObject(o, "total", (double)(l.gathers + l.reductions));
    return o;
}

void plan_print_json(FILE *f, const smoe_plan *p)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "mesh", cli_json_mesh(&p->mesh));
    cJSON *entries = cJSON_AddObjectToObject(root, "entries");
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        cJSON *e = cJSON_CreateObject();
        cli_json_add(entries, w->key, e); /* --params keys may not be UTF-8 */
        cJSON_AddItemToObject(e, "shape", i64_array(w->shape, w->rank));
        cJSON *lg = cJSON_AddArrayToObject(e, "logical");
        cJSON *ps = cJSON_AddArrayToObject(e, "partition_spec");
        for (int d = 0; d < w->rank; d++) {
            cJSON_AddItemToArray(lg, w->logical[d] ? cJSON_CreateString(w->logical[d])
                                                   : cJSON_CreateNull());
            cJSON_AddItemToArray(ps, axes_json(&w->spec.dim[d]));
        }
        if (w->has_gather) {
            cJSON_AddItemToObject(e, "gather", gather_json(&w->gather, w->prefetch, &p->mesh));
            cJSON_AddItemToObject(e, "legacy_gather",
                                  gather_json(&w->legacy, w->prefetch, &p->mesh));
        } else {
            cJSON_AddNullToObject(e, "gather");
            cJSON_AddNullToObject(e, "legacy_gather");
        }
    }
    cJSON *sum = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddItemToObject(sum, "source", cli_json_string(p->source));
    cJSON_AddNumberToObject(sum, "devices", (double)smoe_mesh_devices(&p->mesh));
    cJSON_AddNumberToObject(sum, "dtype_bytes", p->dtype_bytes);
    cJSON_AddItemToObject(sum, "gather_dtype", cli_json_string(smoe_dtype_name(p->gather_dtype)));
    if (p->gather_dtype == SMOE_DT_INT8)
        cJSON_AddNumberToObject(sum, "int8_block", (double)p->int8_block);
    else
        cJSON_AddNullToObject(sum, "int8_block");
    if (p->gather_dtype == SMOE_DT_INT8 && p->int8_fallback != SMOE_DT_INT8)
        cJSON_AddItemToObject(sum, "int8_fallback",
                              cli_json_string(smoe_dtype_name(p->int8_fallback)));
    else
        cJSON_AddNullToObject(sum, "int8_fallback");
    cJSON_AddNumberToObject(sum, "wire_fallbacks", p->wire_fallbacks);
    cJSON *co = summary_json(&p->coaxis), *lg = summary_json(&p->legacy);
    cJSON_AddItemToObject(co, "slices_link_bytes", link_json(p, SMOE_MODE_COAXIS));
    cJSON_AddItemToObject(lg, "slices_link_bytes", link_json(p, SMOE_MODE_LEGACY));
    cJSON_AddItemToObject(sum, "coaxis", co);
    cJSON_AddItemToObject(sum, "legacy", lg);
    cli_json_print(f, root);
}
