/* Hardware profiles and simulation scenarios: small YAML files read through
 * the config module's YAML tree, each value checked with its file:line:col.
 * A profile's schema (its keys, where each lands in smoe_hw, its range) is
 * the one table k_hw below: the loader and the writer (smoe sim
 * --calibrate's output) both walk it. */
#include "config_impl.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A number in [lo, hi] (integer-valued if `integer`); 0 is also allowed
 * when `zero_ok` (the key's "not set" value). */
typedef struct range {
    double lo, hi;
    int integer, zero_ok;
} range;

static smoe_status num_in(const smoe_node *root, const char *key, double *out, int required,
                          const range *r, smoe_err *err)
{
    const smoe_node *n = smoe_node_get(root, key);
    if (!n) {
        if (!required)
            return SMOE_OK;
        return smoe_err_at(err, SMOE_EINVAL, root->loc, "missing key '%s'", key);
    }
    smoe_scalar_type t = smoe_node_type(n);
    double v;
    if ((t != SMOE_T_INT && t != SMOE_T_FLOAT) || smoe_parse_f64(n->str, &v))
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' must be a number", key);
    if (r->zero_ok && v == 0) {
        *out = 0;
        return SMOE_OK;
    }
    if (!(v >= r->lo && v <= r->hi))
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' = %s must be %sin [%.6g, %.6g]", key,
                           n->str, r->zero_ok ? "0 or " : "", r->lo, r->hi);
    if (r->integer && v != (double)(int64_t)v)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'%s' = %s must be an integer", key, n->str);
    *out = v;
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

/* Each profile key (after name and kind), where it lands in smoe_hw, and
 * the range it must be in: a number outside gives an error at its
 * file:line:col, never an overflow or an inf later. `flag` marks the one
 * int field; every other is a double. */
#define BW { 1e6, 1e17, 0, 0 }      /* bytes/s */
#define BW0 { 1e6, 1e17, 0, 1 }     /* bytes/s, 0 = not set */
#define SECS { 0, 10, 0, 0 }        /* seconds */
#define FLOPS { 1e6, 1e19, 0, 0 }   /* FLOP/s */
#define HW(field) offsetof(smoe_hw, field)
static const struct hw_key {
    const char *k;
    size_t off;
    int req, flag;
    range r;
} k_hw[] = {
    { "devices_per_chip", HW(devices_per_chip), 1, 0, { 1, 64, 1, 0 } },
    { "peak_flops", HW(peak_flops), 1, 0, FLOPS },
    { "hbm_bytes", HW(hbm_bytes), 1, 0, { 1e6, 1e16, 0, 0 } },
    { "hbm_bandwidth", HW(hbm_bandwidth), 1, 0, BW },
    { "ici_bandwidth", HW(ici_bandwidth), 1, 0, BW },
    { "ici_links", HW(ici_links), 1, 0, { 0, 1024, 1, 0 } },
    { "ici_latency", HW(ici_latency), 1, 0, SECS },
    { "devices_per_node", HW(devices_per_node), 1, 0, { 1, 1LL << 40, 1, 0 } },
    { "dcn_bandwidth", HW(dcn_bandwidth), 1, 0, BW },
    { "dcn_latency", HW(dcn_latency), 1, 0, SECS },
    /* at least one: the simulator has no collective without an engine */
    { "collective_engines", HW(collective_engines), 1, 0, { 1, 64, 1, 0 } },
    { "a2a_bandwidth", HW(cpu.a2a_bandwidth), 0, 0, BW0 },
    { "a2a_latency", HW(cpu.a2a_latency), 0, 0, SECS },
    { "collectives_use_compute", HW(cpu.collectives_use_compute), 0, 1, { 0, 1, 1, 0 } },
    { "elementwise_bandwidth", HW(cpu.elementwise_bandwidth), 0, 0, BW0 },
    { "op_overhead", HW(cpu.op_overhead), 0, 0, SECS },
    { "compute_bytes", HW(cpu.compute_bytes), 0, 0, { 1, 8, 1, 1 } },
    { "gemm_small_flops", HW(cpu.gemm_small_flops), 0, 0, { 1e6, 1e19, 0, 1 } },
    { "compute_scale", HW(cpu.compute_scale), 0, 0, { 1e-3, 1e4, 0, 1 } },
    { "sync_skew", HW(cpu.sync_skew), 0, 0, SECS },
    { "compute_efficiency", HW(compute_efficiency), 0, 0, { 1e-3, 1, 0, 1 } },
    { "gemm_efficiency", HW(gemm_efficiency), 0, 0, { 1e-3, 1, 0, 1 } },
    { "attention_efficiency", HW(attention_efficiency), 0, 0, { 1e-3, 1, 0, 1 } },
    { "permute_bandwidth", HW(permute_bandwidth), 0, 0, BW0 },
    { "host_bandwidth", HW(host_bandwidth), 0, 0, BW0 },
    { "fp8_peak_flops", HW(fp8_peak_flops), 0, 0, { 1e6, 1e19, 0, 1 } },
    { "reduce_lag_bandwidth", HW(cpu.reduce_lag_bandwidth), 0, 0, BW0 },
    { "optimizer_rate", HW(cpu.optimizer_rate), 0, 0, { 1e3, 1e15, 0, 1 } },
    { "core_share", HW(cpu.core_share), 0, 0, { 1e-3, 1, 0, 1 } },
    { "dcn_reduce_bandwidth", HW(cpu.dcn_reduce_bandwidth), 0, 0, BW0 },
    { "dcn_reduce_latency", HW(cpu.dcn_reduce_latency), 0, 0, SECS },
    { "dcn_link_bandwidth", HW(cpu.dcn_link_bandwidth), 0, 0, BW0 },
    { "ici_reduce_bandwidth", HW(cpu.ici_reduce_bandwidth), 0, 0, BW0 },
    { "ici_reduce_latency", HW(cpu.ici_reduce_latency), 0, 0, SECS },
    { "gather_core_fraction", HW(cpu.gather_core_fraction), 0, 0, { 1e-3, 1, 0, 1 } },
};
#define N_HW ((int)(sizeof k_hw / sizeof k_hw[0]))

/* Does key k land in the CPU model's terms (smoe_hw.cpu)? Only a cpu
 * profile may set those. */
static int cpu_key(const struct hw_key *k)
{
    return k->off >= offsetof(smoe_hw, cpu) && k->off < offsetof(smoe_hw, cpu) + sizeof(smoe_hw_cpu);
}

static double hw_get(const smoe_hw *hw, const struct hw_key *k)
{
    const char *p = (const char *)hw + k->off;
    return k->flag ? (double)*(const int *)p : *(const double *)p;
}

static void hw_put(smoe_hw *hw, const struct hw_key *k, double v)
{
    char *p = (char *)hw + k->off;
    if (k->flag)
        *(int *)p = v != 0;
    else
        *(double *)p = v;
}

/* A cpu profile is measured (smoe sim --calibrate) and its last line is
 * `complete: true`: one cut short (a full disk, an interrupted copy) lacks
 * it and is refused rather than read as a profile without its later keys.
 * Accelerator profiles are written by hand from data sheets; on them the
 * line is optional. */
#define COMPLETE_KEY "complete"
static smoe_status check_complete(const smoe_node *root, smoe_hw_kind kind, const char *name,
                                  smoe_err *err)
{
    const smoe_node *n = smoe_node_get(root, COMPLETE_KEY);
    if (n && (n->kind != SMOE_NODE_SCALAR || strcmp(n->str, "true") != 0))
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "'" COMPLETE_KEY "' must be true");
    if (!n && kind == SMOE_HW_CPU)
        return smoe_err_in(err, SMOE_EINVAL, name,
                           "incomplete profile: a cpu profile ends with the line '" COMPLETE_KEY
                           ": true' (smoe sim --calibrate writes it last; a file cut short "
                           "lacks it): measure it again");
    return SMOE_OK;
}

/* The kinds in smoe_hw_kind's order: the file's names. */
static const char *const k_kinds[] = { "tpu", "gpu", "cpu" };

const char *smoe_hw_kind_name(smoe_hw_kind k)
{
    return (unsigned)k < sizeof k_kinds / sizeof k_kinds[0] ? k_kinds[k] : "?";
}

/* The profile's 'kind', the one place its text is compared. */
static smoe_status kind_of(const smoe_node *root, smoe_hw_kind *out, smoe_err *err)
{
    char text[16];
    smoe_status s = str(root, "kind", text, sizeof text, err);
    for (int i = 0; !s && i < (int)(sizeof k_kinds / sizeof k_kinds[0]); i++)
        if (strcmp(text, k_kinds[i]) == 0) {
            *out = (smoe_hw_kind)i;
            return SMOE_OK;
        }
    return s ? s : smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, "kind")->loc,
                               "'kind' must be tpu, gpu or cpu");
}

smoe_status smoe_hw_write(FILE *f, const smoe_hw *hw, const smoe_hw_note *notes,
                          const char *trailer, smoe_err *err)
{
    fprintf(f, "name: %s\nkind: %s\n", hw->name, smoe_hw_kind_name(hw->kind));
    if (hw->cpu.progress[0])
        fprintf(f, "progress: %s\n", hw->cpu.progress);
    for (int i = 0; i < N_HW; i++) {
        double v = hw_get(hw, &k_hw[i]);
        if (!k_hw[i].req && v == 0)
            continue; /* optional and not set */
        const char *note = NULL;
        for (const smoe_hw_note *n = notes; n && n->key && !note; n++)
            if (strcmp(n->key, k_hw[i].k) == 0)
                note = n->text;
        char num[40];
        snprintf(num, sizeof num, "%.6g", v);
        if (note)
            fprintf(f, "%s: %-14s # %s\n", k_hw[i].k, num, note);
        else
            fprintf(f, "%s: %s\n", k_hw[i].k, num);
    }
    fputs(trailer ? trailer : "", f);
    fprintf(f, "%s: %-14s # the last line: a profile cut short lacks it\n", COMPLETE_KEY, "true");
    if (ferror(f))
        return smoe_err_set(err, SMOE_EIO, "error writing the profile");
    return SMOE_OK;
}

smoe_status smoe_hw_load_text(const char *text, const char *name, smoe_hw *hw, smoe_err *err)
{
    smoe_arena *a = smoe_arena_new(16 * 1024);
    if (!a)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_node *root;
    memset(hw, 0, sizeof *hw);
    const char *keys[N_HW + 5];
    keys[0] = "name";
    keys[1] = "kind";
    keys[2] = "progress";
    keys[3] = COMPLETE_KEY;
    for (int i = 0; i < N_HW; i++)
        keys[i + 4] = k_hw[i].k;
    keys[N_HW + 4] = NULL;
    smoe_status s = smoe_yaml_load_string(a, text, name, &root, err);
    if (!s && root->kind != SMOE_NODE_MAP)
        s = smoe_err_at(err, SMOE_EINVAL, root->loc, "expected a mapping of keys to values");
    if (!s)
        s = known_keys(root, keys, err);
    if (!s)
        s = str(root, "name", hw->name, sizeof hw->name, err);
    if (!s)
        s = kind_of(root, &hw->kind, err);
    if (!s)
        s = check_complete(root, hw->kind, name, err);
    if (!s && smoe_node_get(root, "progress")) {
        s = str(root, "progress", hw->cpu.progress, sizeof hw->cpu.progress, err);
        if (!s && strcmp(hw->cpu.progress, "calls") && strcmp(hw->cpu.progress, "thread"))
            s = smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, "progress")->loc,
                            "'progress' must be calls or thread");
        if (!s && hw->kind != SMOE_HW_CPU)
            s = smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, "progress")->loc,
                            "'progress' is a cpu profile's key (smoe sim --calibrate)");
    }
    for (int i = 0; !s && i < N_HW; i++) {
        double v = 0;
        if (!(s = num_in(root, k_hw[i].k, &v, k_hw[i].req, &k_hw[i].r, err)))
            hw_put(hw, &k_hw[i], v);
        if (!s && hw->kind != SMOE_HW_CPU && cpu_key(&k_hw[i]) && smoe_node_get(root, k_hw[i].k))
            s = smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, k_hw[i].k)->loc,
                            "'%s' is a cpu profile's key (smoe sim --calibrate)", k_hw[i].k);
    }
    /* the split efficiencies are parts of compute_efficiency: without it
     * every FLOP is at peak and they would be ignored */
    static const char *const split[] = { "gemm_efficiency", "attention_efficiency" };
    for (int i = 0; !s && i < 2; i++)
        if (!(hw->compute_efficiency > 0) && smoe_node_get(root, split[i]))
            s = smoe_err_at(err, SMOE_EINVAL, smoe_node_get(root, split[i])->loc,
                            "'%s' needs a compute_efficiency (0 or absent: every FLOP at peak)",
                            split[i]);
    if (!s && !hw->cpu.progress[0] && hw->kind == SMOE_HW_CPU) /* measured before the key */
        snprintf(hw->cpu.progress, sizeof hw->cpu.progress, "calls");
    if (!s && hw->cpu.compute_bytes == 0 && hw->kind == SMOE_HW_CPU)
        hw->cpu.compute_bytes = 4; /* smoe's kernels; accelerators: the config's dtype */
    smoe_arena_free(a);
    return s;
}

smoe_status smoe_hw_load(const char *path, smoe_hw *hw, smoe_err *err)
{
    char *text;
    size_t n;
    smoe_status s = smoe_read_file_max(path, SMOE_MAX_YAML_BYTES, &text, &n, err);
    if (s)
        return s;
    s = smoe_hw_load_text(text, path, hw, err);
    smoe_free(text);
    return s;
}

static smoe_status str_list(smoe_arena *a, const smoe_node *n, const char **out,
                            const char **where, int cap, int *count, smoe_err *err)
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
        char at[320];
        smoe_loc_format(n->items[i]->loc, at, sizeof at);
        where[*count] = smoe_arena_strdup(a, at);
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
    static const range ms = { 0, 1e9, 0, 0 }, gib = { 0, 1e9, 0, 0 };
    out->step_ms = out->exposed_gather_ms = out->peak_hbm_gib = -1;
    if (n->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "expected a mapping of reported figures");
    smoe_status s = known_keys(n, keys, err);
    if (!s)
        s = num_in(n, "step_ms", &out->step_ms, 0, &ms, err);
    if (!s)
        s = num_in(n, "exposed_gather_ms", &out->exposed_gather_ms, 0, &ms, err);
    if (!s)
        s = num_in(n, "peak_hbm_gib", &out->peak_hbm_gib, 0, &gib, err);
    return s;
}

/* sources: {KEY: "where the value comes from, or 'assumed: why'"} */
static smoe_status sources(smoe_arena *a, const smoe_node *n, smoe_scenario *sc, smoe_err *err)
{
    if (n->kind != SMOE_NODE_MAP || n->n > SMOE_SCN_MAX_SOURCES)
        return smoe_err_at(err, SMOE_EINVAL, n->loc,
                           "sources: a mapping of at most %d keys to text", SMOE_SCN_MAX_SOURCES);
    for (int i = 0; i < n->n; i++) {
        if (n->items[i]->kind != SMOE_NODE_SCALAR || !n->items[i]->str[0])
            return smoe_err_at(err, SMOE_EINVAL, n->items[i]->loc,
                               "sources: '%s' needs a non-empty text", n->keys[i]);
        sc->source_key[sc->n_sources] = smoe_arena_strdup(a, n->keys[i]);
        sc->source_text[sc->n_sources++] = smoe_arena_strdup(a, n->items[i]->str);
    }
    return SMOE_OK;
}

/* An optional key whose value is one of a few names (as its smoe sim
 * option): *out = named(value), left alone when the key is absent. */
static smoe_status scn_named(const smoe_node *root, const char *key, int (*named)(const char *),
                             const char *names, int *out, smoe_err *err)
{
    const smoe_node *n = smoe_node_get(root, key);
    if (!n)
        return SMOE_OK;
    int v = n->kind == SMOE_NODE_SCALAR ? named(n->str) : -1;
    if (v < 0)
        return smoe_err_at(err, SMOE_EINVAL, n->loc, "%s: expected %s", key, names);
    *out = v;
    return SMOE_OK;
}

/* A scenario's numbers, each in the bounds of the matching smoe sim
 * option, and the named readings maxtext_gather_dtype and reduce_engine. */
static smoe_status scn_numbers(const smoe_node *root, smoe_scenario *sc, smoe_err *err)
{
    struct { const char *k; int64_t *dst; int64_t def; range r; } ints[] = {
        { "devices", &sc->devices, 0, { 1, (double)SMOE_SIM_MAX_DEVICES, 1, 0 } },
        { "slices", &sc->slices, 1, { 1, (double)SMOE_SIM_MAX_SLICES, 1, 0 } },
        { "per_device_batch", &sc->batch, 0, { 1, (double)SMOE_SIM_MAX_BATCH, 1, 0 } },
        { "seq_len", &sc->seq, 0, { 1, (double)SMOE_SIM_MAX_SEQ, 1, 0 } },
        { "dtype_bytes", &sc->dtype_bytes64, 0, { 1, 16, 1, 0 } },
        { "prefetch_depth", &sc->prefetch_depth64, 1, { 0, SMOE_SIM_MAX_DEPTH, 1, 0 } },
    };
    smoe_status s;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        double v = (double)ints[i].def;
        if ((s = num_in(root, ints[i].k, &v, 0, &ints[i].r, err)))
            return s;
        *ints[i].dst = (int64_t)v;
    }
    sc->dtype_bytes = (int)sc->dtype_bytes64;
    sc->prefetch_depth = (int)sc->prefetch_depth64;
    const smoe_node *dn = smoe_node_get(root, "devices"), *sn = smoe_node_get(root, "slices");
    if (dn)
        sc->devices_loc = dn->loc;
    if (sn)
        sc->slices_loc = sn->loc;
    if ((s = scn_named(root, "maxtext_gather_dtype", smoe_mx_gather_bytes, SMOE_MX_GATHER_NAMES,
                       &sc->mx_gather_bytes, err)))
        return s;
    return scn_named(root, "reduce_engine", smoe_reduce_engine_of, SMOE_REDUCE_ENGINE_NAMES,
                     &sc->reduce_engine, err);
}

/* variants: NAME: {rules, overrides}, at most SMOE_SCN_MAX_VARIANTS. */
static smoe_status scn_variants(smoe_arena *a, const smoe_node *vars, smoe_scenario *sc,
                                smoe_err *err)
{
    if (vars->kind != SMOE_NODE_MAP || vars->n > SMOE_SCN_MAX_VARIANTS)
        return smoe_err_at(err, SMOE_EINVAL, vars->loc,
                           "variants: a mapping of at most %d schedules", SMOE_SCN_MAX_VARIANTS);
    static const char *const vkeys[] = { "rules", "overrides", NULL };
    for (int i = 0; i < vars->n; i++) {
        smoe_scn_variant *x = &sc->variants[sc->n_variants++];
        const smoe_node *vn = vars->items[i];
        smoe_status s;
        x->name = smoe_arena_strdup(a, vars->keys[i]);
        if (vn->kind != SMOE_NODE_MAP)
            return smoe_err_at(err, SMOE_EINVAL, vn->loc, "a variant is a mapping");
        if ((s = known_keys(vn, vkeys, err)))
            return s;
        x->rules = opt_str(a, vn, "rules");
        if ((s = str_list(a, smoe_node_get(vn, "overrides"), x->overrides, x->override_where,
                          SMOE_SCN_MAX_OVERRIDES, &x->n_overrides, err)))
            return s;
    }
    return SMOE_OK;
}

/* reported: SCHEDULE: {step_ms: ..., ...}. */
static smoe_status scn_reported(smoe_arena *a, const smoe_node *rep, smoe_scenario *sc,
                                smoe_err *err)
{
    if (rep->kind != SMOE_NODE_MAP || rep->n > SMOE_SCN_MAX_VARIANTS + 4)
        return smoe_err_at(err, SMOE_EINVAL, rep->loc, "reported: a mapping of schedules");
    for (int i = 0; i < rep->n; i++) {
        sc->reported_name[sc->n_reported] = smoe_arena_strdup(a, rep->keys[i]);
        smoe_status s = numbers(rep->items[i], &sc->reported[sc->n_reported], err);
        if (s)
            return s;
        sc->n_reported++;
    }
    return SMOE_OK;
}

smoe_status smoe_scenario_load_text(smoe_arena *a, const char *text, const char *name,
                                    smoe_scenario *sc, smoe_err *err)
{
    static const char *const keys[] = { "description", "model", "rules", "hardware", "devices",
                                        "slices", "overrides", "per_device_batch", "seq_len",
                                        "remat", "dtype_bytes", "prefetch_depth", "variants",
                                        "reported", "sources", "maxtext_gather_dtype",
                                        "reduce_engine", "readings", NULL };
    smoe_node *root;
    memset(sc, 0, sizeof *sc);
    sc->file = smoe_arena_strdup(a, name);
    if (!sc->file)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_status s = smoe_yaml_load_string(a, text, sc->file, &root, err);
    if (s)
        return s;
    if (root->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, root->loc, "expected a mapping of keys to values");
    if ((s = known_keys(root, keys, err)))
        return s;
    sc->description = opt_str(a, root, "description");
    sc->model = opt_str(a, root, "model");
    sc->rules = opt_str(a, root, "rules");
    sc->hardware = opt_str(a, root, "hardware");
    sc->remat = opt_str(a, root, "remat");
    const smoe_node *vars = smoe_node_get(root, "variants"), *rep = smoe_node_get(root, "reported");
    const smoe_node *src = smoe_node_get(root, "sources"), *rd = smoe_node_get(root, "readings");
    if ((s = scn_numbers(root, sc, err)) ||
        (s = str_list(a, smoe_node_get(root, "overrides"), sc->overrides, sc->override_where,
                      SMOE_SCN_MAX_OVERRIDES, &sc->n_overrides, err)) ||
        (vars && (s = scn_variants(a, vars, sc, err))) ||
        (rep && (s = scn_reported(a, rep, sc, err))) || (src && (s = sources(a, src, sc, err))))
        return s;
    return rd ? cfg_scn_readings(a, rd, sc, err) : SMOE_OK;
}

smoe_status smoe_scenario_load(smoe_arena *a, const char *path, smoe_scenario *sc,
                               smoe_err *err)
{
    char *text;
    size_t n;
    smoe_status s = smoe_read_file_max(path, SMOE_MAX_YAML_BYTES, &text, &n, err);
    if (s)
        return s;
    s = smoe_scenario_load_text(a, text, path, sc, err);
    smoe_free(text);
    return s;
}
