/* MaxText compatibility of config loading.
 *
 * Oracles:
 *  - tests/data/maxtext/coercion.tsv: pydantic 2 itself, run on MaxText's own
 *    MaxTextConfig field annotations (scripts/gen-pydantic-cases.py), for one
 *    field of every distinct type: each YAML value must be coerced to the
 *    same typed value, or refused where pydantic refuses it.
 *  - MaxText's real files at e591f30 (../shared/maxtext/configs, skipped with
 *    a message when absent): every model file must load with that base.yml.
 *  - historical base.yml files (tests/data/maxtext/history/) must load and
 *    build their mesh.
 * Usage: test_maxtext_compat TESTDATA_DIR BUNDLED_CONFIGS [SHARED_MAXTEXT_CONFIGS] */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "../src/config/config_impl.h"
#include "smoe/plan.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *g_data, *g_cfg, *g_shared;
static char g_tmp[256];

/* Typed, order-insensitive equality (8 != 8.0, unlike smoe_node_equal). */
static int same(const smoe_node *a, const smoe_node *b)
{
    smoe_scalar_type ta = smoe_node_type(a), tb = smoe_node_type(b);
    if (ta != tb)
        return 0;
    switch (ta) {
    case SMOE_T_NULL:
        return 1;
    case SMOE_T_BOOL:
        return smoe_node_bool_value(a) == smoe_node_bool_value(b);
    case SMOE_T_INT:
    case SMOE_T_FLOAT:
        return smoe_node_equal(a, b) || strcmp(a->str, b->str) == 0; /* .inf */
    case SMOE_T_STR:
        return strcmp(a->str, b->str) == 0;
    case SMOE_T_SEQ:
        if (a->n != b->n)
            return 0;
        for (int i = 0; i < a->n; i++)
            if (!same(a->items[i], b->items[i]))
                return 0;
        return 1;
    case SMOE_T_MAP:
        if (a->n != b->n)
            return 0;
        for (int i = 0; i < a->n; i++) {
            const smoe_node *o = smoe_node_get(b, a->keys[i]);
            if (!o || !same(a->items[i], o))
                return 0;
        }
        return 1;
    }
    return 0;
}

static void test_coercion_oracle(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/maxtext/coercion.tsv", g_data);
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    smoe_arena *a = smoe_arena_new(1 << 20);
    const cfg_fields *t;
    smoe_err e;
    CHECK(cfg_fields_open(a, &t, &e) == SMOE_OK);
    char line[4096];
    int rows = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *name = line, *in = strchr(line, '\t'), *want;
        if (!in || !(want = strchr(in + 1, '\t'))) {
            CHECKF(0, "malformed row '%s'", line);
            continue;
        }
        *in++ = 0;
        *want++ = 0;
        rows++;
        const cfg_field *fd = cfg_field_find(t, name);
        smoe_node *v, *w;
        const smoe_node *got = NULL;
        if (!fd || smoe_yaml_load_string(a, in, "case", &v, &e)) {
            CHECKF(0, "%s: no field or bad input '%s'", name, in);
            continue;
        }
        smoe_status s = cfg_field_coerce(a, t, fd, v, NULL, &got, &e);
        /* smoe refuses non-finite numbers where pydantic takes them */
        int nonfinite = strstr(want, ".inf") || strstr(want, ".nan");
        if (strcmp(want, "error") == 0 || (nonfinite && strcmp(fd->type, "any") != 0)) {
            if (s == SMOE_OK) {
                bad++;
                fprintf(stderr, "%s = %s: accepted, pydantic says %s\n", name, in, want);
            }
            continue;
        }
        if (s != SMOE_OK) {
            bad++;
            fprintf(stderr, "%s = %s: refused (%s), pydantic gives %s\n", name, in, e.msg, want);
            continue;
        }
        if (smoe_yaml_load_string(a, want, "expected", &w, &e) || !same(got, w)) {
            bad++;
            fprintf(stderr, "%s = %s: got '%s', pydantic gives %s\n", name, in,
                    got->kind == SMOE_NODE_SCALAR ? got->str : "(collection)", want);
        }
    }
    fclose(f);
    CHECKF(rows > 1000, "only %d oracle rows", rows);
    CHECKF(bad == 0, "%d of %d coercions differ from pydantic", bad, rows);
    smoe_arena_free(a);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

static smoe_status load(const char *base, const char *model, int n, const char *const *ov,
                        smoe_config **c, smoe_err *e)
{
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model;
    o.n_overrides = n;
    o.overrides = ov;
    return smoe_config_load(&o, c, e);
}

/* The cases of the issue, on the bundled base.yml with small model files. */
static void test_fields_on_bundled(void)
{
    char base[512], model[512];
    smoe_config *c;
    smoe_err e;
    int64_t i;
    snprintf(base, sizeof base, "%s/base.yml", g_cfg);
    snprintf(model, sizeof model, "%s/m.yml", g_tmp);
    write_file(model, "rope_factor: 8.0\nrope_max_timescale: 1000000.0\n"
                      "image_size_for_vit: [672, 960]\nvision_encoder_block: \"llama4\"\n"
                      "log_moe_bias_norms: true\n");
    CHECKF(load(base, model, 0, NULL, &c, &e) == SMOE_OK, "%s", e.msg);
    if (c) {
        CHECK(smoe_config_int(c, "rope_factor", &i, &e) == SMOE_OK && i == 8);
        CHECK(smoe_config_int(c, "rope_max_timescale", &i, &e) == SMOE_OK && i == 1000000);
        const smoe_node *v = smoe_config_get(c, "image_size_for_vit");
        CHECK(v && v->kind == SMOE_NODE_SEQ && v->n == 2);
        /* a field no file sets has MaxTextConfig's default */
        v = smoe_config_get(c, "engram_max_ngram_size");
        CHECK(v && smoe_node_type(v) == SMOE_T_INT && strcmp(v->str, "3") == 0);
        smoe_config_free(c);
    }
    /* refused as pydantic refuses: fraction for an int, unknown enum value */
    write_file(model, "base_emb_dim: 8\nrope_factor: 8.5\n");
    CHECK(load(base, model, 0, NULL, &c, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.where, "m.yml:2:14") && strstr(e.msg, "rope_factor"), "%s: %s", e.where, e.msg);
    write_file(model, "vision_encoder_block: \"llama5\"\n");
    CHECK(load(base, model, 0, NULL, &c, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.where, "m.yml:1:23") != NULL, "%s", e.where);
    /* a key that is no field: still an error at file:line:col */
    write_file(model, "base_emb_dim: 8\n  \nnot_a_field: 1\n");
    CHECK(load(base, model, 0, NULL, &c, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.where, "m.yml:3:1") && strstr(e.msg, "not_a_field"), "%s: %s", e.where, e.msg);
    /* the same on the command line */
    const char *ov1[] = { "rope_factor=8.0", "weight_dtype=float32" };
    CHECKF(load(base, NULL, 2, ov1, &c, &e) == SMOE_OK, "%s", e.msg);
    if (c) {
        CHECK(smoe_config_int(c, "rope_factor", &i, &e) == SMOE_OK && i == 8);
        smoe_config_free(c);
    }
    const char *ov2[] = { "weight_dtype=float8" };
    CHECK(load(base, NULL, 1, ov2, &c, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.where, "argument 'weight_dtype=float8'") != NULL, "%s", e.where);
    const char *ov3[] = { "lora={lora_rank: 4, bogus: 1}" };
    CHECK(load(base, NULL, 1, ov3, &c, &e) == SMOE_EINVAL); /* LoRA forbids extras */
    const char *ov4[] = { "nope=1" };
    CHECK(load(base, NULL, 1, ov4, &c, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, "no MaxText config field") != NULL, "%s", e.msg);
}

static int is_yml(const char *n)
{
    size_t l = strlen(n);
    return l > 4 && strcmp(n + l - 4, ".yml") == 0;
}

/* Every upstream model file loads with upstream base.yml. */
static void test_upstream_models(void)
{
    char base[1024], dir[1024];
    snprintf(base, sizeof base, "%s/base.yml", g_shared);
    snprintf(dir, sizeof dir, "%s/models", g_shared);
    DIR *d = opendir(dir);
    if (!d || access(base, R_OK) != 0) {
        printf("skipped: upstream model files: %s not found\n", dir);
        if (d)
            closedir(d);
        return;
    }
    struct dirent *de;
    int n = 0, ok = 0;
    while ((de = readdir(d))) {
        if (!is_yml(de->d_name))
            continue;
        char model[2048];
        snprintf(model, sizeof model, "%s/%s", dir, de->d_name);
        smoe_config *c;
        smoe_err e;
        n++;
        if (load(base, model, 0, NULL, &c, &e) == SMOE_OK) {
            ok++;
            smoe_config_free(c);
        } else {
            fprintf(stderr, "%s: %s: %s\n", de->d_name, e.where, e.msg);
        }
    }
    closedir(d);
    printf("upstream model files that load: %d of %d\n", ok, n);
    CHECKF(n >= 78 && ok == n, "%d of %d model files load", ok, n);
}

/* Every historical base.yml (in tests/data/maxtext/history) loads and plans
 * deepseek2-16b with the built-in enumeration; the routed experts keep their
 * expert sharding (the older logical names are used) and the mesh has the
 * release's own axes. The dumps of these releases are checked entry by
 * entry by test_golden --versions. */
static void test_history(void)
{
    char hdir[1024];
    snprintf(hdir, sizeof hdir, "%s/maxtext/history", g_data);
    DIR *d = opendir(hdir);
    CHECKF(d != NULL, "cannot open %s", hdir);
    struct dirent *v;
    int versions = 0;
    while (d && (v = readdir(d))) {
        if (v->d_name[0] == '.')
            continue;
        char base[2048], model[2048];
        snprintf(base, sizeof base, "%s/%s/configs/base.yml", hdir, v->d_name);
        snprintf(model, sizeof model, "%s/%s/configs/models/deepseek2-16b.yml", hdir, v->d_name);
        const char *ov[] = { "ici_fsdp_parallelism=-1", "ici_expert_parallelism=4" };
        smoe_config *c;
        smoe_err e;
        if (load(base, model, 2, ov, &c, &e)) {
            CHECKF(0, "%s: %s: %s", v->d_name, e.where, e.msg);
            continue;
        }
        smoe_plan_opts po = { 64, 1, NULL, 4 };
        smoe_plan *p;
        if (smoe_plan_build(c, &po, &p, &e)) {
            CHECKF(0, "%s: plan: %s: %s", v->d_name, e.where, e.msg);
            smoe_config_free(c);
            continue;
        }
        versions++;
        const smoe_weight *w = smoe_plan_find(p, "decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/wi_0");
        CHECKF(w && w->spec.dim[0].n >= 1 && strcmp(w->spec.dim[0].ax[0], "expert") == 0,
               "%s: routed experts lost their expert sharding", v->d_name);
        int tt = 0;
        for (int i = 0; i < p->mesh.n; i++)
            tt |= strcmp(p->mesh.name[i], "tensor_transpose") == 0;
        CHECKF(tt, "%s: mesh without tensor_transpose", v->d_name);
        smoe_plan_free(p);
        smoe_config_free(c);
    }
    if (d)
        closedir(d);
    CHECKF(versions >= 5, "only %d historical versions planned", versions);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s TESTDATA BUNDLED_CONFIGS [SHARED_MAXTEXT_CONFIGS]\n", argv[0]);
        return 2;
    }
    g_data = argv[1];
    g_cfg = argv[2];
    g_shared = argc > 3 ? argv[3] : "";
    snprintf(g_tmp, sizeof g_tmp, "/tmp/smoe-test-compat-XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 2;
    }
    test_coercion_oracle();
    test_fields_on_bundled();
    test_upstream_models();
    test_history();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_tmp);
    return check_report();
}
