/* The fuzz targets' bodies (see targets.h): turn arbitrary bytes into the
 * inputs of smoe's four hostile-input entry points, run them, and check
 * the few invariants a successful result promises. Compiled into the
 * libFuzzer executables (fuzz build) and into tests/fuzz_replay (normal
 * build). Errors from the library are the expected outcome for most inputs
 * and are ignored; a broken invariant calls abort(). */
#include "targets.h"

#include "smoe/config.h"
#include "smoe/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_DEVICES 16
#define FUZZ_MAX_OVERRIDES 16
#define FUZZ_MAX_INPUT (1 << 20) /* longer inputs are cut (libFuzzer's are small) */

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz invariant broken: %s\n", what);
        abort();
    }
}

/* The input as a NUL-terminated string (cut at FUZZ_MAX_INPUT). */
static char *cstr(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        size = FUZZ_MAX_INPUT;
    char *s = malloc(size + 1);
    if (!s)
        return NULL;
    if (size)
        memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* For the other target files (targets_sim.c). */
void smoe_fuzz_check(int ok, const char *what) { check(ok, what); }
char *smoe_fuzz_cstr(const uint8_t *data, size_t size) { return cstr(data, size); }

/* ---- YAML ---- */

/* Visit every node once per path, typing scalars; `budget` bounds the walk
 * (aliases share nodes, so a tree may be a DAG). */
static void walk(const smoe_node *n, int depth, long *budget)
{
    if (--*budget < 0)
        return;
    check(n != NULL, "node is NULL");
    check(depth <= 4096, "node tree deeper than 4096 (a cycle?)");
    check(n->loc.line >= 1 && n->loc.col >= 1, "node location is 1-based");
    smoe_scalar_type t = smoe_node_type(n);
    check(smoe_type_name(t)[0] != '?', "node type has a name");
    switch (n->kind) {
    case SMOE_NODE_SCALAR:
        check(n->str != NULL, "scalar has text");
        check(t != SMOE_T_SEQ && t != SMOE_T_MAP, "scalar typed as a collection");
        break;
    case SMOE_NODE_MAP:
        for (int i = 0; i < n->n; i++) {
            check(n->keys[i] != NULL, "map key is NULL");
            check(smoe_node_get(n, n->keys[i]) == n->items[i], "map keys are unique");
        }
        /* fall through */
    case SMOE_NODE_SEQ:
        check(n->n >= 0 && (n->n == 0 || n->items), "collection items");
        for (int i = 0; i < n->n; i++)
            walk(n->items[i], depth + 1, budget);
        break;
    default:
        check(0, "node kind");
    }
}

int smoe_fuzz_yaml(const uint8_t *data, size_t size)
{
    char *text = cstr(data, size);
    smoe_arena *a = smoe_arena_new(64 * 1024);
    if (text && a) {
        smoe_node *root = NULL;
        smoe_err err;
        if (smoe_yaml_load_string(a, text, "fuzz.yml", &root, &err) == SMOE_OK) {
            long budget = 1L << 20;
            walk(root, 0, &budget);
            check(smoe_node_equal(root, root), "a tree equals itself");
        } else {
            check(err.msg[0] != 0, "an error has a message");
        }
    }
    smoe_arena_free(a);
    free(text);
    return 0;
}

/* ---- overrides and rules: config assembly, mesh, plan ---- */

/* Check what a plan says, then free it. */
static void check_plan(smoe_plan *p)
{
    check(smoe_mesh_devices(&p->mesh) == FUZZ_DEVICES, "mesh has the device count");
    check(p->coaxis.step_gather_bytes_recv >= 0 && p->legacy.step_gather_bytes_recv >= 0 &&
              p->legacy.step_residual_bytes_recv >= 0,
          "per-step byte counts are not negative (no overflow)");
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        check(w->spec.rank == w->rank, "spec rank");
        /* Flax resolution uses every mesh axis at most once per tensor */
        for (int d = 0; d < w->rank; d++)
            for (int k = 0; k < w->spec.dim[d].n; k++)
                for (int e = d; e < w->rank; e++)
                    for (int j = e == d ? k + 1 : 0; j < w->spec.dim[e].n; j++)
                        check(strcmp(w->spec.dim[d].ax[k], w->spec.dim[e].ax[j]) != 0,
                              "a mesh axis is used twice in one spec");
        char buf[1024];
        smoe_pspec_format(&w->spec, 1, buf, sizeof buf);
        if (!w->has_gather)
            continue;
        const smoe_gather *gs[2] = { &w->gather, &w->legacy };
        for (int m = 0; m < 2; m++) {
            const smoe_gather *g = gs[m];
            int64_t ways = 1;
            for (int d = 0; d < g->rank; d++)
                ways *= g->group[d];
            check(ways == g->ways, "ways is the product of the groups");
            check(g->bytes_in >= 0 && g->bytes_out >= 0 && g->residual_bytes_recv >= 0,
                  "byte counts are not negative (no overflow)");
            check(g->bytes_recv == g->bytes_out - g->bytes_in, "bytes_recv");
            check((g->status == SMOE_GATHER_NOOP) == (g->n_gathered_dims == 0),
                  "noop iff nothing gathered");
        }
        /* the local block of the first and the last device */
        int64_t coords[SMOE_MAX_AXES], local[SMOE_MAX_RANK], off[SMOE_MAX_RANK];
        for (int64_t dev = 0; dev < FUZZ_DEVICES; dev += FUZZ_DEVICES - 1) {
            smoe_mesh_coords(&p->mesh, dev, coords);
            if (smoe_layout_local(&w->spec, w->shape, &p->mesh, coords, local, off,
                                  NULL) == SMOE_OK)
                for (int d = 0; d < w->rank; d++)
                    check(off[d] >= 0 && off[d] + local[d] <= w->shape[d],
                          "local block inside the tensor");
        }
    }
    smoe_plan_free(p);
}

/* Build the plan of `c` on FUZZ_DEVICES devices and check it. */
static void plan_and_check(const smoe_config *c)
{
    smoe_plan_opts po = { FUZZ_DEVICES, 1, NULL, 4 };
    smoe_plan *p = NULL;
    smoe_err err;
    if (smoe_plan_build(c, &po, &p, &err) == SMOE_OK)
        check_plan(p);
    else
        check(p == NULL && err.msg[0] != 0, "a failed plan has an error and no plan");
}

int smoe_fuzz_overrides(const uint8_t *data, size_t size)
{
    char *text = cstr(data, size);
    if (!text)
        return 0;
    const char *ov[FUZZ_MAX_OVERRIDES];
    int n = 0;
    for (char *line = text; line && n < FUZZ_MAX_OVERRIDES;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (*line)
            ov[n++] = line;
        line = nl ? nl + 1 : NULL;
    }
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.n_overrides = n;
    o.overrides = ov;
    smoe_config *c = NULL;
    smoe_err err;
    if (smoe_config_load(&o, &c, &err) == SMOE_OK) {
        smoe_mesh m;
        check(smoe_config_mesh(c, FUZZ_DEVICES, 1, &m, NULL) != SMOE_EINTERNAL,
              "a loaded config's mesh is built or refused, never an internal error");
        plan_and_check(c);
        smoe_config_free(c);
    } else {
        check(c == NULL && err.msg[0] != 0, "a failed load has an error and no config");
    }
    free(text);
    return 0;
}

int smoe_fuzz_rules(const uint8_t *data, size_t size)
{
    static const char *const k_rules[] = { NULL, "ep-as-cp", "shard-exp-on-fsdp",
                                           "pure-fsdp" };
    static const char *const k_ep[] = { "ici_expert_parallelism=1",
                                        "ici_expert_parallelism=2",
                                        "ici_expert_parallelism=4",
                                        "ici_expert_parallelism=16" };
    if (size < 1)
        return 0;
    /* first byte: bit 0 override_logical_axis_rules, bits 1-2 the rule
     * file, bits 3-4 the expert parallelism; the rest is the rule list */
    unsigned sel = data[0];
    char *rules = cstr(data + 1, size - 1);
    const char *arg = NULL;
    if (rules) {
        size_t n = strlen(rules) + sizeof "logical_axis_rules=";
        char *s = malloc(n);
        if (s)
            snprintf(s, n, "logical_axis_rules=%s", rules);
        arg = s;
    }
    if (arg) {
        const char *ov[3] = { arg, k_ep[(sel >> 3) & 3],
                              "override_logical_axis_rules=true" };
        smoe_config_opts o;
        memset(&o, 0, sizeof o);
        o.model = "deepseek2-16b";
        o.rules = k_rules[(sel >> 1) & 3];
        o.n_overrides = (sel & 1) ? 3 : 2;
        o.overrides = ov;
        smoe_config *c = NULL;
        smoe_err err;
        if (smoe_config_load(&o, &c, &err) == SMOE_OK) {
            plan_and_check(c);
            smoe_config_free(c);
        }
    }
    free((void *)arg);
    free(rules);
    return 0;
}

/* ---- logical_shardings.json ---- */

static smoe_config *g_params_cfg; /* the same config for every input */

const smoe_config *smoe_fuzz_ep2_config(void)
{
    if (!g_params_cfg) {
        smoe_config_opts o;
        memset(&o, 0, sizeof o);
        o.model = "deepseek2-16b";
        const char *ov[1] = { "ici_expert_parallelism=2" };
        o.n_overrides = 1;
        o.overrides = ov;
        if (smoe_config_load(&o, &g_params_cfg, NULL) != SMOE_OK)
            g_params_cfg = NULL;
    }
    return g_params_cfg;
}

int smoe_fuzz_params_json(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT)
        size = FUZZ_MAX_INPUT;
    /* the reader alone, on the raw bytes (no NUL at the end) */
    smoe_arena *a = smoe_arena_new(64 * 1024);
    if (a) {
        smoe_logical_entry *e = NULL;
        int n = 0;
        smoe_err err;
        if (smoe_params_load_json_text(a, "fuzz.json", size ? (const char *)data : "",
                                       size, &e, &n, &err) == SMOE_OK) {
            for (int i = 0; i < n; i++) {
                check(e[i].key != NULL, "entry has a key");
                check(e[i].rank >= 0 && e[i].rank <= SMOE_MAX_RANK, "entry rank");
                for (int d = 0; d < e[i].rank; d++)
                    check(e[i].shape[d] >= 0, "entry shape");
            }
        } else {
            check(err.msg[0] != 0, "an error has a message");
        }
        smoe_arena_free(a);
    }
    /* and the whole --params path: config, plan from these entries */
    if (!smoe_fuzz_ep2_config())
        return 0;
    smoe_plan_opts po = { FUZZ_DEVICES, 1, "fuzz.json", 4 };
    smoe_plan *p = NULL;
    const char *json = size ? (const char *)data : "";
    if (smoe_plan_build_json(g_params_cfg, &po, json, size, &p, NULL) == SMOE_OK)
        check_plan(p);
    return 0;
}

/* ---- by name ---- */

smoe_fuzz_fn smoe_fuzz_target(const char *name)
{
    static const struct { const char *name; smoe_fuzz_fn fn; } k[] = {
        { "yaml", smoe_fuzz_yaml },
        { "overrides", smoe_fuzz_overrides },
        { "rules", smoe_fuzz_rules },
        { "params_json", smoe_fuzz_params_json },
        { "manifest", smoe_fuzz_manifest },
        { "hwfile", smoe_fuzz_hwfile },
        { "scenario", smoe_fuzz_scenario },
        { "schedule", smoe_fuzz_schedule },
        { "trace", smoe_fuzz_trace },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(k[i].name, name) == 0)
            return k[i].fn;
    return NULL;
}

void smoe_fuzz_cleanup(void)
{
    smoe_fuzz_sim_cleanup();
    smoe_fuzz_schedule_cleanup();
    smoe_config_free(g_params_cfg);
    g_params_cfg = NULL;
}
