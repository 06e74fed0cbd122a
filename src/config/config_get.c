/* Typed access to an assembled config: scalars, the rule list and the
 * device mesh (MaxText's create_device_mesh sizes). */
#include "config_impl.h"

#include <stdio.h>
#include <string.h>

const smoe_node *smoe_config_get(const smoe_config *c, const char *key)
{
    return cfg_map_get(&c->values, key);
}

const char *smoe_config_key_at(const smoe_config *c, int i, const smoe_node **value)
{
    if (i < 0 || i >= c->values.n)
        return NULL;
    if (value)
        *value = c->values.e[i].value;
    return c->values.e[i].key;
}

smoe_loc smoe_config_loc(const smoe_config *c, const char *key)
{
    const smoe_node *n = cfg_map_get(&c->values, key);
    smoe_loc none = { NULL, 0, 0 };
    return n ? n->loc : none;
}

static smoe_status typed(const smoe_config *c, const char *key,
                         smoe_scalar_type want, const smoe_node **out,
                         smoe_err *err)
{
    const smoe_node *n = cfg_map_get(&c->values, key);
    if (!n)
        return smoe_err_set(err, SMOE_ENOTFOUND,
                            "config key '%s' is missing from the base config", key);
    smoe_scalar_type t = smoe_node_type(n);
    int ok = t == want || (want == SMOE_T_FLOAT && t == SMOE_T_INT) ||
             (want == SMOE_T_STR && t != SMOE_T_SEQ && t != SMOE_T_MAP);
    if (!ok)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' must be %s, got '%s'",
                           key, smoe_type_name(want),
                           n->kind == SMOE_NODE_SCALAR ? n->str : "a collection");
    *out = n;
    return SMOE_OK;
}

smoe_status smoe_config_int(const smoe_config *c, const char *key,
                            int64_t *out, smoe_err *err)
{
    const smoe_node *n;
    smoe_status s = typed(c, key, SMOE_T_INT, &n, err);
    if (s)
        return s;
    smoe_parse_i64(n->str, out);
    return SMOE_OK;
}

smoe_status smoe_config_float(const smoe_config *c, const char *key,
                              double *out, smoe_err *err)
{
    const smoe_node *n;
    smoe_status s = typed(c, key, SMOE_T_FLOAT, &n, err);
    if (s)
        return s;
    smoe_parse_f64(n->str, out);
    return SMOE_OK;
}

smoe_status smoe_config_bool(const smoe_config *c, const char *key, int *out,
                             smoe_err *err)
{
    const smoe_node *n;
    smoe_status s = typed(c, key, SMOE_T_BOOL, &n, err);
    if (s)
        return s;
    *out = smoe_node_bool_value(n);
    return SMOE_OK;
}

smoe_status smoe_config_str(const smoe_config *c, const char *key,
                            const char **out, smoe_err *err)
{
    const smoe_node *n;
    smoe_status s = typed(c, key, SMOE_T_STR, &n, err);
    if (s)
        return s;
    *out = n->str;
    return SMOE_OK;
}

/* absent, or null: the optional key's default holds */
static int unset(const smoe_config *c, const char *key)
{
    const smoe_node *n = cfg_map_get(&c->values, key);
    return !n || smoe_node_type(n) == SMOE_T_NULL;
}

smoe_status smoe_config_int_or(const smoe_config *c, const char *key, int64_t def,
                               int64_t *out, smoe_err *err)
{
    *out = def;
    return unset(c, key) ? SMOE_OK : smoe_config_int(c, key, out, err);
}

smoe_status smoe_config_float_or(const smoe_config *c, const char *key, double def,
                                 double *out, smoe_err *err)
{
    *out = def;
    return unset(c, key) ? SMOE_OK : smoe_config_float(c, key, out, err);
}

smoe_status smoe_config_bool_or(const smoe_config *c, const char *key, int def, int *out,
                                smoe_err *err)
{
    *out = def;
    return unset(c, key) ? SMOE_OK : smoe_config_bool(c, key, out, err);
}

smoe_status smoe_config_str_or(const smoe_config *c, const char *key, const char *def,
                               const char **out, smoe_err *err)
{
    *out = def;
    return unset(c, key) ? SMOE_OK : smoe_config_str(c, key, out, err);
}

const smoe_rules *smoe_config_rules(const smoe_config *c) { return &c->rules; }

/* An axis name inside a rule value: a string scalar. */
static smoe_status axis_name(const smoe_node *n, const char **out, smoe_err *err)
{
    if (n->kind != SMOE_NODE_SCALAR || smoe_node_type(n) == SMOE_T_NULL || !n->str[0])
        return smoe_err_at(err, SMOE_EINVAL, n->loc,
                           "a mesh axis name must be a non-empty string");
    *out = n->str;
    return SMOE_OK;
}

smoe_status cfg_rules_from_node(smoe_arena *a, const smoe_node *n,
                                smoe_rules *out, smoe_err *err)
{
    smoe_status s;
    out->n = 0;
    out->r = NULL;
    if (smoe_node_type(n) == SMOE_T_NULL)
        return SMOE_OK;
    if (n->kind != SMOE_NODE_SEQ)
        return smoe_err_at(err, SMOE_EINVAL, n->loc,
                           "logical_axis_rules must be a list of [name, axes] pairs");
    out->r = smoe_arena_alloc(a, sizeof *out->r * (size_t)(n->n ? n->n : 1));
    if (!out->r)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < n->n; i++) {
        const smoe_node *it = n->items[i];
        if (it->kind != SMOE_NODE_SEQ || it->n != 2 ||
            it->items[0]->kind != SMOE_NODE_SCALAR || !it->items[0]->str[0])
            return smoe_err_at(err, SMOE_EINVAL, it->loc,
                               "a logical axis rule must be [logical_name, "
                               "mesh_axis or [mesh_axes...]]");
        smoe_rule *r = &out->r[out->n++];
        r->name = it->items[0]->str;
        r->loc = it->loc;
        const smoe_node *v = it->items[1];
        r->value.n = 0;
        if (v->kind == SMOE_NODE_SCALAR) {
            if (smoe_node_type(v) == SMOE_T_NULL)
                continue; /* None: no leaves, like [] */
            if ((s = axis_name(v, &r->value.ax[0], err)))
                return s;
            r->value.n = 1;
        } else if (v->kind == SMOE_NODE_SEQ) {
            if (v->n > SMOE_MAX_ENTRY)
                return smoe_err_at(err, SMOE_EINVAL, v->loc,
                                   "a rule may name at most %d mesh axes", SMOE_MAX_ENTRY);
            for (int k = 0; k < v->n; k++) {
                if ((s = axis_name(v->items[k], &r->value.ax[k], err)))
                    return s;
                for (int j = 0; j < k; j++)
                    if (strcmp(r->value.ax[j], r->value.ax[k]) == 0)
                        return smoe_err_at(err, SMOE_EINVAL, v->items[k]->loc,
                                           "mesh axis '%s' appears twice in one rule",
                                           r->value.ax[k]);
            }
            r->value.n = v->n;
        } else {
            return smoe_err_at(err, SMOE_EINVAL, v->loc,
                               "a rule value must be a mesh axis or a list of them");
        }
    }
    return SMOE_OK;
}

/* MaxText's mesh-axis -> parallelism key map (create_device_mesh), with
 * the axes of older releases: tensor_transpose (mesh_axes until 2026-07),
 * sequence, model. */
static const struct { const char *axis, *key; } k_axis_keys[] = {
    { "diloco", "diloco_parallelism" },
    { "data", "data_parallelism" },
    { "stage", "pipeline_parallelism" },
    { "fsdp", "fsdp_parallelism" },
    { "fsdp_transpose", "fsdp_transpose_parallelism" },
    { "sequence", "sequence_parallelism" },
    { "context", "context_parallelism" },
    { "context_usp_ulysses", "context_usp_ulysses_parallelism" },
    { "context_autoregressive", "context_autoregressive_parallelism" },
    { "tensor", "tensor_parallelism" },
    { "tensor_transpose", "tensor_transpose_parallelism" },
    { "tensor_sequence", "tensor_sequence_parallelism" },
    { "model", "tensor_parallelism" },
    { "expert", "expert_parallelism" },
    { "autoregressive", "autoregressive_parallelism" },
    { "attn_dp", NULL },
    { "attn_dp_expert", NULL },
};

static int axis_key(const char *axis)
{
    for (size_t i = 0; i < sizeof k_axis_keys / sizeof k_axis_keys[0]; i++)
        if (strcmp(k_axis_keys[i].axis, axis) == 0)
            return (int)i;
    return -1;
}

const char *smoe_config_axis_key(const char *axis)
{
    int i = axis_key(axis);
    return i < 0 ? NULL : k_axis_keys[i].key;
}

/* Read the prefix_* parallelism values of the mesh axes; missing keys are
 * 1 (MaxText would fail: it only happens with a trimmed base file). */
static smoe_status read_sizes(const smoe_config *c, const smoe_mesh *m,
                              const int ki[], const char *prefix,
                              int64_t vals[], const char *labels[],
                              smoe_arena *a, smoe_err *err)
{
    for (int i = 0; i < m->n; i++) {
        vals[i] = 1;
        labels[i] = m->name[i];
        if (!k_axis_keys[ki[i]].key)
            continue;
        const char *key = smoe_arena_printf(a, "%s_%s", prefix, k_axis_keys[ki[i]].key);
        if (!key)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        labels[i] = key;
        if (!cfg_map_get(&c->values, key))
            continue;
        smoe_status s = smoe_config_int(c, key, &vals[i], err);
        if (s)
            return s;
    }
    return SMOE_OK;
}

smoe_status smoe_config_mesh(const smoe_config *c, int64_t devices,
                             int64_t slices, smoe_mesh *out, smoe_err *err)
{
    const smoe_node *axes = cfg_map_get(&c->values, "mesh_axes");
    int ki[SMOE_MAX_AXES];
    smoe_status s;
    if (!axes || axes->kind != SMOE_NODE_SEQ || axes->n == 0)
        return smoe_err_at(err, SMOE_EINVAL,
                           axes ? axes->loc : smoe_config_loc(c, "mesh_axes"),
                           "mesh_axes must be a non-empty list of axis names");
    if (axes->n > SMOE_MAX_AXES)
        return smoe_err_at(err, SMOE_EINVAL, axes->loc,
                           "at most %d mesh axes are supported", SMOE_MAX_AXES);
    out->n = axes->n;
    for (int i = 0; i < axes->n; i++) {
        const smoe_node *it = axes->items[i];
        if ((s = axis_name(it, &out->name[i], err)))
            return s;
        ki[i] = axis_key(it->str);
        if (ki[i] < 0)
            return smoe_err_at(err, SMOE_EINVAL, it->loc,
                               "unknown mesh axis '%s' (MaxText knows diloco, data, "
                               "stage, fsdp, fsdp_transpose, sequence, context, "
                               "context_usp_ulysses, context_autoregressive, tensor, "
                               "tensor_transpose, tensor_sequence, model, expert, "
                               "autoregressive, attn_dp, attn_dp_expert)",
                               it->str);
        for (int j = 0; j < i; j++)
            if (strcmp(out->name[j], it->str) == 0)
                return smoe_err_at(err, SMOE_EINVAL, it->loc,
                                   "mesh axis '%s' appears twice in mesh_axes", it->str);
    }
    if (slices < 1)
        return smoe_err_set(err, SMOE_EINVAL, "the number of slices must be >= 1");
    if (devices < 1 || devices % slices != 0)
        return smoe_err_set(err, SMOE_EINVAL,
                            "%lld devices cannot be split into %lld equal slices",
                            (long long)devices, (long long)slices);
    smoe_arena *a = c->arena;
    int64_t ici[SMOE_MAX_AXES], dcn[SMOE_MAX_AXES];
    const char *ilab[SMOE_MAX_AXES], *dlab[SMOE_MAX_AXES];
    int bad;
    if ((s = read_sizes(c, out, ki, "ici", ici, ilab, a, err)))
        return s;
    char what[96];
    snprintf(what, sizeof what, "the number of devices per slice");
    if ((s = smoe_mesh_fill(ici, out->n, devices / slices, ilab, what, &bad, err))) {
        if (bad >= 0 && err)
            smoe_loc_format(smoe_config_loc(c, ilab[bad]), err->where, sizeof err->where);
        return s;
    }
    for (int i = 0; i < out->n; i++) {
        out->size[i] = ici[i];
        out->dcn[i] = 1;
    }
    if (slices > 1) {
        if ((s = read_sizes(c, out, ki, "dcn", dcn, dlab, a, err)))
            return s;
        if ((s = smoe_mesh_fill(dcn, out->n, slices, dlab, "the number of slices",
                                &bad, err))) {
            if (bad >= 0 && err)
                smoe_loc_format(smoe_config_loc(c, dlab[bad]), err->where,
                                sizeof err->where);
            return s;
        }
        for (int i = 0; i < out->n; i++) {
            out->size[i] = ici[i] * dcn[i];
            out->dcn[i] = dcn[i];
        }
    }
    return SMOE_OK;
}
