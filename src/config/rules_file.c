/* A custom_mesh_and_rule file applied to an assembled config, as
 * MaxText's MaxTextConfig does it: the file named by --rules or by the
 * config's custom_mesh_and_rule replaces mesh_axes, logical_axis_rules and
 * data_sharding wholesale, and context_sharding follows the rules. */
#define _POSIX_C_SOURCE 200809L
#include "config_impl.h"

#include <string.h>

/* The rules file to apply: --rules FILE (a name sets
 * custom_mesh_and_rule), else the config's custom_mesh_and_rule name in
 * the config directory; *path NULL when there is none. */
static smoe_status rules_path(smoe_config *c, smoe_arena *a, const char *rules,
                              const char *ov_where, const char **path, smoe_err *err)
{
    const char *where = NULL;
    *path = NULL;
    if (rules) {
        where = smoe_arena_printf(a, "argument '--rules %s'", rules);
        if (cfg_looks_like_file(rules)) {
            *path = rules;
            return cfg_file_exists(rules) ? SMOE_OK
                                          : smoe_err_in(err, SMOE_ENOTFOUND, where,
                                                        "rule file '%s' not found", rules);
        }
        smoe_loc l = { where, 0, 0 };
        smoe_node *v = cfg_scalar(a, rules, l);
        if (!v || cfg_map_set(a, &c->values, "custom_mesh_and_rule", v))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    const smoe_node *n = cfg_map_get(&c->values, "custom_mesh_and_rule");
    if (!n || smoe_node_type(n) == SMOE_T_NULL)
        return SMOE_OK;
    if (n->kind != SMOE_NODE_SCALAR)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "custom_mesh_and_rule must be a name");
    if (!n->str[0])
        return SMOE_OK;
    char buf[320];
    if (!where)
        where = ov_where ? ov_where
                         : smoe_arena_strdup(a, smoe_loc_format(n->loc, buf, sizeof buf));
    const char *p = smoe_arena_printf(a, "%s/custom_mesh_and_rule/%s.yml", c->dir, n->str);
    if (strchr(n->str, '/') || !cfg_file_exists(p))
        return smoe_err_in(err, SMOE_ENOTFOUND, where,
                           "unknown rule set '%s': no custom_mesh_and_rule/%s.yml in %s", n->str,
                           n->str, c->dir);
    *path = p;
    return SMOE_OK;
}

/* MaxText applies these three from a rules file (types.py
 * set_derived_and_validate_values) and ignores the rest; a key it would
 * ignore is refused rather than dropped unsaid, but context_sharding,
 * which its own shard-exp-on-fsdp.yml carries, is inferred from the rules
 * (infer_context_sharding) as MaxText infers it. */
static const char *const k_replaced[] = { "mesh_axes", "logical_axis_rules", "data_sharding" };

static smoe_status check_rules_keys(const smoe_node *root, smoe_err *err)
{
    for (int i = 0; i < root->n; i++) {
        const char *k = root->keys[i];
        if (strcmp(k, k_replaced[0]) && strcmp(k, k_replaced[1]) && strcmp(k, k_replaced[2]) &&
            strcmp(k, "context_sharding"))
            return smoe_err_at(err, SMOE_EINVAL, root->key_locs[i],
                               "'%s' in a custom_mesh_and_rule file: MaxText applies only "
                               "mesh_axes, logical_axis_rules and data_sharding from it (set "
                               "other keys in the config)", k);
    }
    return SMOE_OK;
}

/* context_sharding follows the first axis of the activation_length rule. */
static smoe_status infer_context_sharding(smoe_config *c, smoe_arena *a, smoe_err *err)
{
    for (int i = 0; i < c->rules.n; i++) {
        if (strcmp(c->rules.r[i].name, "activation_length") != 0)
            continue;
        if (c->rules.r[i].value.n > 0) {
            smoe_node *v = cfg_scalar(a, c->rules.r[i].value.ax[0], c->rules.r[i].loc);
            if (!v || cfg_map_set(a, &c->values, "context_sharding", v))
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        }
        break;
    }
    return SMOE_OK;
}

smoe_status cfg_apply_rules_file(smoe_config *c, smoe_arena *a, const char *rules,
                                 const char *ov_where, smoe_err *err)
{
    const char *path;
    smoe_node *root;
    smoe_status s;
    if ((s = rules_path(c, a, rules, ov_where, &path, err)) || !path)
        return s;
    if ((s = smoe_yaml_load_file(a, path, &root, err)) || (s = cfg_add_source(c, a, path, err)))
        return s;
    if (root->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, root->loc,
                           "a custom_mesh_and_rule file must be a mapping");
    if ((s = check_rules_keys(root, err)))
        return s;
    for (int i = 0; i < 3; i++) {
        const smoe_node *v = smoe_node_get(root, k_replaced[i]);
        if (!v)
            continue;
        if (i == 1) {
            smoe_rules r;
            if ((s = cfg_rules_from_node(a, v, &r, err)))
                return s;
            c->rules = r;
        } else if (v->kind != SMOE_NODE_SEQ) {
            return smoe_err_at(err, SMOE_EINVAL, v->loc, "%s must be a list", k_replaced[i]);
        }
        if (cfg_map_set(a, &c->values, k_replaced[i], v))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return infer_context_sharding(c, a, err);
}
