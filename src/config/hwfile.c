/* Hardware profiles and simulation scenarios: small YAML files read through
 * the config module's YAML tree, each value checked with its file:line:col. */
#include "config_impl.h"

#include <stdio.h>
#include <string.h>

static smoe_status num(const smoe_node *root, const char *key, double *out, int required,
                       smoe_err *err)
{
    const smoe_node *n = smoe_node_get(root, key);
    if (!n) {
        if (!required)
            return SMOE_OK;
        return smoe_err_at(err, SMOE_EINVAL, root->loc, "missing key '%s'", key);
    }
    smoe_scalar_type t = smoe_node_type(n);
    if ((t != SMOE_T_INT && t != SMOE_T_FLOAT) || smoe_parse_f64(n->str, out))
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' must be a number", key);
    if (*out < 0)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' must not be negative", key);
    return SMOE_OK;
}

static smoe_status str(const smoe_node *root, const char *key, char *out, size_t cap,
                       smoe_err *err)
{
    const smoe_node *n = smoe_node_get(root, key);
    if (!n || n->kind != SMOE_NODE_SCALAR || !n->str[0])
        return smoe_err_at(err, SMOE_EINVAL, n ? n->loc : root->loc,
                           "'%s' must be a non-empty string", key);
    snprintf(out, cap, "%s", n->str);
    return SMOE_OK;
}

static smoe_status load_map(smoe_arena *a, const char *path, smoe_node **root, smoe_err *err)
{
    smoe_status s = smoe_yaml_load_file(a, path, root, err);
    if (s)
        return s;
    if ((*root)->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, (*root)->loc, "expected a mapping of keys to values");
    return SMOE_OK;
}

/* Keys a file may hold: anything else is a typo worth reporting. */
static smoe_status known_keys(const smoe_node *root, const char *const *keys, smoe_err *err)
{
    for (int i = 0; i < root->n; i++) {
        int ok = 0;
        for (int k = 0; keys[k] && !ok; k++)
            ok = strcmp(root->keys[i], keys[k]) == 0;
        if (!ok)
            return smoe_err_at(err, SMOE_EINVAL, root->key_locs[i], "unknown key '%s'",
                               root->keys[i]);
    }
    return SMOE_OK;
}

smoe_status smoe_hw_load(const char *path, smoe_hw *hw, smoe_err *err)
{
    static const char *const keys[] = {
        "name", "kind", "devices_per_chip", "peak_flops", "hbm_bytes", "hbm_bandwidth",
        "ici_bandwidth", "ici_links", "ici_latency", "devices_per_node", "dcn_bandwidth",
        "dcn_latency", "collective_engines", "a2a_bandwidth", "a2a_latency",
        "collectives_use_compute", "elementwise_bandwidth", "op_overhead", "compute_bytes",
        "gemm_small_flops", "compute_scale", "sync_skew", NULL
    };
    smoe_arena *a = smoe_arena_new(16 * 1024);
    if (!a)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_node *root;
    memset(hw, 0, sizeof *hw);
    double use_compute = 0;
    smoe_status s = load_map(a, path, &root, err);
    if (!s)
        s = known_keys(root, keys, err);
    if (!s)
        s = str(root, "name", hw->name, sizeof hw->name, err);
    if (!s)
        s = str(root, "kind", hw->kind, sizeof hw->kind, err);
    if (!s && strcmp(hw->kind, "tpu") && strcmp(hw->kind, "gpu") && strcmp(hw->kind, "cpu"))
        s = smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, "kind")->loc,
                        "'kind' must be tpu, gpu or cpu");
    struct { const char *k; double *v; int req; } f[] = {
        { "devices_per_chip", &hw->devices_per_chip, 1 }, { "peak_flops", &hw->peak_flops, 1 },
        { "hbm_bytes", &hw->hbm_bytes, 1 }, { "hbm_bandwidth", &hw->hbm_bandwidth, 1 },
        { "ici_bandwidth", &hw->ici_bandwidth, 1 }, { "ici_links", &hw->ici_links, 1 },
        { "ici_latency", &hw->ici_latency, 1 }, { "devices_per_node", &hw->devices_per_node, 1 },
        { "dcn_bandwidth", &hw->dcn_bandwidth, 1 }, { "dcn_latency", &hw->dcn_latency, 1 },
        { "collective_engines", &hw->collective_engines, 1 },
        { "a2a_bandwidth", &hw->a2a_bandwidth, 0 }, { "a2a_latency", &hw->a2a_latency, 0 },
        { "collectives_use_compute", &use_compute, 0 },
        { "elementwise_bandwidth", &hw->elementwise_bandwidth, 0 },
        { "op_overhead", &hw->op_overhead, 0 }, { "compute_bytes", &hw->compute_bytes, 0 },
        { "gemm_small_flops", &hw->gemm_small_flops, 0 },
        { "compute_scale", &hw->compute_scale, 0 },
        { "sync_skew", &hw->sync_skew, 0 },
    };
    for (size_t i = 0; !s && i < sizeof f / sizeof f[0]; i++)
        s = num(root, f[i].k, f[i].v, f[i].req, err);
    if (!s && (hw->devices_per_chip < 1 || hw->peak_flops <= 0 || hw->hbm_bandwidth <= 0 ||
               hw->ici_bandwidth <= 0 || hw->devices_per_node < 1 || hw->dcn_bandwidth <= 0))
        s = smoe_err_at(err, SMOE_EINVAL, root->loc,
                        "devices_per_chip, devices_per_node must be >= 1 and the flop and "
                        "bandwidth figures > 0");
    hw->collectives_use_compute = use_compute != 0;
    if (!s && hw->compute_bytes == 0)
        hw->compute_bytes = strcmp(hw->kind, "cpu") == 0 ? 4 : 2;
    smoe_arena_free(a);
    return s;
}

static smoe_status str_list(smoe_arena *a, const smoe_node *n, const char **out, int cap,
                            int *count, smoe_err *err)
{
    *count = 0;
    if (!n)
        return SMOE_OK;
    if (n->kind != SMOE_NODE_SEQ)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "expected a list of KEY=VALUE strings");
    if (n->n > cap)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "at most %d entries", cap);
    for (int i = 0; i < n->n; i++) {
        if (n->items[i]->kind != SMOE_NODE_SCALAR)
            return smoe_err_at(err, SMOE_EINVAL, n->items[i]->loc, "expected a string");
        out[(*count)++] = smoe_arena_strdup(a, n->items[i]->str);
    }
    return SMOE_OK;
}

static const char *opt_str(smoe_arena *a, const smoe_node *root, const char *key)
{
    const smoe_node *n = smoe_node_get(root, key);
    if (!n || n->kind != SMOE_NODE_SCALAR || smoe_node_type(n) == SMOE_T_NULL || !n->str[0])
        return NULL;
    return smoe_arena_strdup(a, n->str);
}

static smoe_status numbers(const smoe_node *n, smoe_scn_numbers *out, smoe_err *err)
{
    static const char *const keys[] = { "step_ms", "exposed_gather_ms", "peak_hbm_gib", NULL };
    out->step_ms = out->exposed_gather_ms = out->peak_hbm_gib = -1;
    if (n->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "expected a mapping of reported figures");
    smoe_status s = known_keys(n, keys, err);
    if (!s)
        s = num(n, "step_ms", &out->step_ms, 0, err);
    if (!s)
        s = num(n, "exposed_gather_ms", &out->exposed_gather_ms, 0, err);
    if (!s)
        s = num(n, "peak_hbm_gib", &out->peak_hbm_gib, 0, err);
    return s;
}

smoe_status smoe_scenario_load(smoe_arena *a, const char *path, smoe_scenario *sc,
                               smoe_err *err)
{
    static const char *const keys[] = { "description", "model", "rules", "hardware", "devices",
                                        "slices", "overrides", "per_device_batch", "seq_len",
                                        "remat", "dtype_bytes", "prefetch_depth", "variants",
                                        "reported", NULL };
    smoe_node *root;
    memset(sc, 0, sizeof *sc);
    smoe_status s = load_map(a, path, &root, err);
    if (s || (s = known_keys(root, keys, err)))
        return s;
    sc->file = smoe_arena_strdup(a, path);
    sc->description = opt_str(a, root, "description");
    sc->model = opt_str(a, root, "model");
    sc->rules = opt_str(a, root, "rules");
    sc->hardware = opt_str(a, root, "hardware");
    sc->remat = opt_str(a, root, "remat");
    double v;
    struct { const char *k; int64_t *dst; int64_t def; } ints[] = {
        { "devices", &sc->devices, 0 }, { "slices", &sc->slices, 1 },
        { "per_device_batch", &sc->batch, 0 }, { "seq_len", &sc->seq, 0 },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        v = (double)ints[i].def;
        if ((s = num(root, ints[i].k, &v, 0, err)))
            return s;
        *ints[i].dst = (int64_t)v;
    }
    v = 2;
    if ((s = num(root, "dtype_bytes", &v, 0, err)))
        return s;
    sc->dtype_bytes = (int)v;
    v = 1;
    if ((s = num(root, "prefetch_depth", &v, 0, err)))
        return s;
    sc->prefetch_depth = (int)v;
    if ((s = str_list(a, smoe_node_get(root, "overrides"), sc->overrides,
                      SMOE_SCN_MAX_OVERRIDES, &sc->n_overrides, err)))
        return s;
    const smoe_node *vars = smoe_node_get(root, "variants");
    if (vars) {
        if (vars->kind != SMOE_NODE_MAP || vars->n > SMOE_SCN_MAX_VARIANTS)
            return smoe_err_at(err, SMOE_EINVAL, vars->loc,
                               "variants: a mapping of at most %d schedules",
                               SMOE_SCN_MAX_VARIANTS);
        static const char *const vkeys[] = { "rules", "overrides", NULL };
        for (int i = 0; i < vars->n; i++) {
            smoe_scn_variant *x = &sc->variants[sc->n_variants++];
            const smoe_node *vn = vars->items[i];
            x->name = smoe_arena_strdup(a, vars->keys[i]);
            if (vn->kind != SMOE_NODE_MAP)
                return smoe_err_at(err, SMOE_EINVAL, vn->loc, "a variant is a mapping");
            if ((s = known_keys(vn, vkeys, err)))
                return s;
            x->rules = opt_str(a, vn, "rules");
            if ((s = str_list(a, smoe_node_get(vn, "overrides"), x->overrides,
                              SMOE_SCN_MAX_OVERRIDES, &x->n_overrides, err)))
                return s;
        }
    }
    const smoe_node *rep = smoe_node_get(root, "reported");
    if (rep) {
        if (rep->kind != SMOE_NODE_MAP || rep->n > SMOE_SCN_MAX_VARIANTS + 4)
            return smoe_err_at(err, SMOE_EINVAL, rep->loc, "reported: a mapping of schedules");
        for (int i = 0; i < rep->n; i++) {
            sc->reported_name[sc->n_reported] = smoe_arena_strdup(a, rep->keys[i]);
            if ((s = numbers(rep->items[i], &sc->reported[sc->n_reported], err)))
                return s;
            sc->n_reported++;
        }
    }
    return SMOE_OK;
}
