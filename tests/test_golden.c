/* Oracle test: MaxText's golden sharding dumps. For each of the golden
 * configurations, assemble the config exactly as MaxText's sharding_dump
 * did (model deepseek2-16b, the custom rule file and overrides decoded from
 * the directory name, the device count of the topology), then check:
 *  - every entry of named_shardings.json (params, optimizer state, step,
 *    counts) and its mesh, from --params (the logical dump) and from the
 *    built-in enumeration;
 *  - the built-in enumeration equals logical_shardings.json entry for entry;
 *  - every activation of input_shardings.json with known logical axes,
 *    through the use-site resolution (size-1 axes dropped).
 * Run against two config trees: the bundled configs and MaxText's own files.
 *
 * usage: test_golden SHARDING_INFO_DIR CONFIG_DIR [CONFIG_DIR...] */
#define _DEFAULT_SOURCE
#include "check.h"
#include "smoe/plan.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b)
        b[n] = 0;
    fclose(f);
    return b;
}

static cJSON *load_json(const char *dir, const char *name)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *t = slurp(path);
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    return j;
}

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

static int shape_equal(const cJSON *shape, const int64_t *s, int rank)
{
    if (cJSON_GetArraySize(shape) != rank)
        return 0;
    int d = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, shape)
    if ((int64_t)x->valuedouble != s[d++])
        return 0;
    return 1;
}

/* Decode "rule_<custom>[_k=v...]" into the custom name and overrides. */
static int decode_rule_dir(const char *name, char *custom, size_t nc,
                           char ov[][128], int max_ov)
{
    const char *p = name + strlen("rule_");
    size_t l = strcspn(p, "_");
    snprintf(custom, nc, "%.*s", (int)l, p);
    p += l;
    int n = 0;
    char key[128] = "";
    while (*p == '_') {
        p++;
        size_t t = strcspn(p, "_");
        char tok[128];
        snprintf(tok, sizeof tok, "%.*s", (int)t, p);
        p += t;
        char *eq = strchr(tok, '=');
        if (!eq) {
            size_t kl = strlen(key);
            snprintf(key + kl, sizeof key - kl, "%s%s", kl ? "_" : "", tok);
            continue;
        }
        if (n < max_ov) {
            size_t kl = strlen(key);
            snprintf(ov[n], 128, "%s%s%s", key, kl ? "_" : "", tok);
            n++;
        }
        key[0] = 0;
    }
    return n;
}

/* Devices per slice of a MaxText accelerator name (v5p-16 is 8). */
static int64_t topology_devices(const char *topo)
{
    smoe_topology t;
    smoe_err e;
    if (smoe_topology_find(topo, &t, &e)) {
        CHECKF(0, "%s", e.msg);
        return 0;
    }
    return t.devices_per_slice;
}

/* Compare a plan with named_shardings.json. */
static void compare_named(const smoe_plan *p, const cJSON *named, const char *what)
{
    int i = 0;
    const cJSON *e;
    CHECKF(cJSON_GetArraySize(named) == p->n, "%s: %d entries, golden %d", what, p->n,
           cJSON_GetArraySize(named));
    cJSON_ArrayForEach(e, named) {
        if (i >= p->n)
            break;
        const smoe_weight *w = &p->w[i++];
        CHECKF(strcmp(w->key, e->string) == 0, "%s: entry %d is %s, golden %s", what, i,
               w->key, e->string);
        const cJSON *gspec = cJSON_GetObjectItem(e, "partition_spec");
        cJSON *ours = cJSON_CreateArray();
        for (int d = 0; d < w->spec.rank; d++)
            cJSON_AddItemToArray(ours, axes_json(&w->spec.dim[d]));
        if (!cJSON_Compare(ours, gspec, 1)) {
            char *a = cJSON_PrintUnformatted(ours), *b = cJSON_PrintUnformatted(gspec);
            CHECKF(0, "%s: %s spec %s, golden %s", what, e->string, a, b);
            free(a);
            free(b);
        } else {
            CHECK(1);
        }
        cJSON_Delete(ours);
        CHECKF(shape_equal(cJSON_GetObjectItem(e, "shape"), w->shape, w->rank),
               "%s: %s shape differs", what, e->string);
        /* the mesh, in axis order and sizes */
        const cJSON *mesh = cJSON_GetObjectItem(e, "mesh");
        const cJSON *names = cJSON_GetObjectItem(mesh, "axis_names");
        const cJSON *shape = cJSON_GetObjectItem(mesh, "shape");
        int ok = cJSON_GetArraySize(names) == p->mesh.n && cJSON_GetArraySize(shape) == p->mesh.n;
        for (int k = 0; ok && k < p->mesh.n; k++) {
            const cJSON *nm = cJSON_GetArrayItem(names, k);
            const cJSON *sz = cJSON_GetObjectItem(shape, p->mesh.name[k]);
            ok = nm && strcmp(nm->valuestring, p->mesh.name[k]) == 0 && sz &&
                 (int64_t)sz->valuedouble == p->mesh.size[k];
        }
        CHECKF(ok, "%s: %s mesh differs", what, e->string);
    }
}

/* The built-in enumeration (as the plan holds it, with an older release's
 * logical names where its rules call for them) against logical_shardings.json. */
static void compare_logical(const smoe_plan *p, const cJSON *logical, const char *what)
{
    CHECKF(p->n == cJSON_GetArraySize(logical), "%s: %d built-in entries, golden %d", what,
           p->n, cJSON_GetArraySize(logical));
    int i = 0;
    const cJSON *g;
    cJSON_ArrayForEach(g, logical) {
        if (i >= p->n)
            break;
        const smoe_weight *x = &p->w[i++];
        CHECKF(strcmp(x->key, g->string) == 0, "%s: built-in entry %d is %s, golden %s",
               what, i, x->key, g->string);
        CHECKF(shape_equal(cJSON_GetObjectItem(g, "shape"), x->shape, x->rank),
               "%s: %s built-in shape differs", what, g->string);
        const cJSON *spec = cJSON_GetObjectItem(g, "partition_spec");
        int ok = cJSON_GetArraySize(spec) == x->rank;
        for (int d = 0; ok && d < x->rank; d++) {
            const cJSON *s = cJSON_GetArrayItem(spec, d);
            ok = x->logical[d] ? cJSON_IsString(s) && strcmp(s->valuestring, x->logical[d]) == 0
                               : cJSON_IsNull(s);
        }
        CHECKF(ok, "%s: %s built-in logical axes differ", what, g->string);
    }
}

/* "('a', 'b', None)" -> names; returns rank or -1. */
static int parse_tuple(char *s, const char *names[])
{
    int n = 0;
    if (*s != '(')
        return -1;
    s++;
    while (*s && *s != ')') {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        if (strncmp(s, "None", 4) == 0) {
            names[n++] = NULL;
            s += 4;
        } else if (*s == '\'') {
            char *end = strchr(s + 1, '\'');
            if (!end)
                return -1;
            *end = 0;
            names[n++] = s + 1;
            s = end + 1;
        } else {
            return -1;
        }
    }
    return n;
}

static void compare_inputs(const smoe_config *cfg, const smoe_mesh *m, const cJSON *in,
                           const char *what)
{
    const cJSON *list = cJSON_GetObjectItem(in, "Activation Sharding Dump");
    const cJSON *item;
    int checked = 0;
    cJSON_ArrayForEach(item, list) {
        const cJSON *e = item->child;
        const char *axes = cJSON_GetObjectItem(e, "logic_axes")->valuestring;
        const char *want = cJSON_GetObjectItem(e, "PartitionSpec")->valuestring;
        if (strcmp(axes, "Unknown") == 0)
            continue;
        char buf[512], out[512];
        snprintf(buf, sizeof buf, "%s", axes);
        const char *names[SMOE_MAX_RANK];
        int rank = parse_tuple(buf, names);
        smoe_pspec spec, use;
        smoe_err err;
        if (rank < 0 || smoe_shard_resolve(smoe_config_rules(cfg), rank, names, &spec, NULL, &err)) {
            CHECKF(0, "%s: %s: cannot resolve %s", what, e->string, axes);
            continue;
        }
        smoe_pspec_drop_size1(&spec, m, &use);
        smoe_pspec_format(&use, 1, out, sizeof out);
        CHECKF(strcmp(out, want) == 0, "%s: activation %s: %s, golden %s", what, e->string,
               out, want);
        checked++;
    }
    CHECKF(checked > 0, "%s: no activation checked", what);
}

/* One golden configuration: cfgdir's base.yml, the topology and slices of
 * the dump, the rule directory name ("rule_default" when the dump has no
 * rule level); builtin: also check the built-in enumeration. */
static void run_case(const char *cfgdir, const char *model, const char *topo,
                     int64_t slices, const char *casedir, const char *rule, int builtin)
{
    char custom[64], ov[8][128], what[512];
    int nov = decode_rule_dir(rule, custom, sizeof custom, ov, 8);
    const char *ovp[10];
    int k = 0;
    for (int i = 0; i < nov; i++)
        ovp[k++] = ov[i];
    char base[1024];
    snprintf(base, sizeof base, "%s/base.yml", cfgdir);
    snprintf(what, sizeof what, "%s %s slice_%lld %s [%s]", model, topo, (long long)slices, rule,
             cfgdir);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model;
    o.rules = strcmp(custom, "default") == 0 ? NULL : custom;
    o.overrides = ovp;
    o.n_overrides = k;
    smoe_config *cfg;
    smoe_err err;
    if (smoe_config_load(&o, &cfg, &err)) {
        CHECKF(0, "%s: config: %s: %s", what, err.where, err.msg);
        return;
    }
    cJSON *named = load_json(casedir, "named_shardings.json");
    cJSON *logical = load_json(casedir, "logical_shardings.json");
    cJSON *inputs = load_json(casedir, "input_shardings.json");
    CHECKF(named && logical, "%s: golden files missing", what);
    char params[2048];
    snprintf(params, sizeof params, "%s/logical_shardings.json", casedir);
    for (int src = 0; src < 1 + builtin && named; src++) {
        smoe_plan_opts po = { topology_devices(topo) * slices, slices, src ? NULL : params, 4 };
        smoe_plan *p;
        if (smoe_plan_build(cfg, &po, &p, &err)) {
            CHECKF(0, "%s: plan: %s: %s", what, err.where, err.msg);
            continue;
        }
        char w2[600];
        snprintf(w2, sizeof w2, "%s %s", what, src ? "built-in" : "--params");
        compare_named(p, named, w2);
        if (src == 1 && logical)
            compare_logical(p, logical, what);
        if (src == 0 && inputs)
            compare_inputs(cfg, &p->mesh, inputs, w2);
        smoe_plan_free(p);
    }
    cJSON_Delete(named);
    cJSON_Delete(logical);
    cJSON_Delete(inputs);
    smoe_config_free(cfg);
}

/* Every case under SHARDING_INFO/MODEL: TOPO/slice_N/rule_*, or
 * TOPO/slice_N itself where older dumps have no rule level; none when the
 * dumps or the config tree lack the model. */
static int run_tree(const char *info, const char *cfgdir, const char *model, int builtin)
{
    int cases = 0;
    char model_dir[1024], file[2048];
    snprintf(model_dir, sizeof model_dir, "%s/%s", info, model);
    snprintf(file, sizeof file, "%s/models/%s.yml", cfgdir, model);
    FILE *mf = fopen(file, "r");
    if (!mf)
        return 0;
    fclose(mf);
    DIR *d = opendir(model_dir);
    if (!d && strcmp(model, "deepseek2-16b") != 0)
        return 0; /* only deepseek2-16b has dumps in every tree */
    CHECKF(d != NULL, "cannot open %s", model_dir);
    struct dirent *t;
    while (d && (t = readdir(d))) {
        if (t->d_name[0] == '.')
            continue;
        char tdir[2048];
        snprintf(tdir, sizeof tdir, "%s/%s", model_dir, t->d_name);
        DIR *sl = opendir(tdir);
        struct dirent *y;
        while (sl && (y = readdir(sl))) {
            long long slices;
            if (sscanf(y->d_name, "slice_%lld", &slices) != 1 || slices < 1)
                continue;
            char sdir[3072], probe[3200];
            snprintf(sdir, sizeof sdir, "%s/%s", tdir, y->d_name);
            snprintf(probe, sizeof probe, "%s/named_shardings.json", sdir);
            FILE *f = fopen(probe, "r");
            if (f) {
                fclose(f);
                run_case(cfgdir, model, t->d_name, slices, sdir, "rule_default", builtin);
                cases++;
                continue;
            }
            DIR *r = opendir(sdir);
            struct dirent *x;
            while (r && (x = readdir(r))) {
                if (strncmp(x->d_name, "rule_", 5) != 0)
                    continue;
                char casedir[4096];
                snprintf(casedir, sizeof casedir, "%s/%s", sdir, x->d_name);
                run_case(cfgdir, model, t->d_name, slices, casedir, x->d_name, builtin);
                cases++;
            }
            if (r)
                closedir(r);
        }
        if (sl)
            closedir(sl);
    }
    if (d)
        closedir(d);
    return cases;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--versions") == 0) {
        /* VERSIONS_DIR/<date>-<commit>/{configs,sharding_info}: older MaxText
         * releases, each with the base.yml and dumps of one commit */
        int cases = 0, versions = 0;
        DIR *d = opendir(argv[2]);
        CHECKF(d != NULL, "cannot open %s", argv[2]);
        struct dirent *v;
        while (d && (v = readdir(d))) {
            if (v->d_name[0] == '.')
                continue;
            char info[2048], cfg[2048];
            snprintf(info, sizeof info, "%s/%s/sharding_info", argv[2], v->d_name);
            snprintf(cfg, sizeof cfg, "%s/%s/configs", argv[2], v->d_name);
            DIR *probe = opendir(info);
            if (!probe)
                continue;
            closedir(probe);
            cases += run_tree(info, cfg, "deepseek2-16b",
                              argc > 3 && strcmp(argv[3], "--builtin") == 0);
            versions++;
        }
        if (d)
            closedir(d);
        printf("%d historical versions, %d golden configurations\n", versions, cases);
        CHECKF(versions >= 3 && cases >= 6, "only %d versions, %d cases", versions, cases);
        return check_report();
    }
    if (argc < 3) {
        fprintf(stderr, "usage: test_golden SHARDING_INFO_DIR CONFIG_DIR...\n"
                        "       test_golden --versions VERSIONS_DIR [--builtin]\n");
        return 2;
    }
    /* deepseek2-16b: 7 configurations, in every tree; qwen3-0.6b (1) and
     * gpt-oss-20b (2) where the tree has their model files */
    static const char *const models[] = { "deepseek2-16b", "qwen3-0.6b", "gpt-oss-20b" };
    int cases = 0, ds = 0;
    for (int c = 2; c < argc; c++)
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
            int k = run_tree(argv[1], argv[c], models[i], 1);
            cases += k;
            if (i == 0)
                ds += k;
        }
    CHECKF(ds == 7 * (argc - 2), "expected 7 deepseek2-16b golden configurations per config "
           "tree, ran %d", ds);
    printf("golden configurations checked: %d\n", cases);
    CHECKF(cases >= ds + 3, "expected the qwen3-0.6b and gpt-oss-20b golden configurations too, "
           "ran %d in all", cases);
    return check_report();
}
