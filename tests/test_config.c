/* Config assembly semantics (MaxText pyconfig): overrides and their types,
 * model-file conflicts, the logical_axis_rules merge, base_config
 * inheritance, custom_mesh_and_rule replacement, pipeline post-fixups,
 * environment variables, mesh fill, error locations, the keys of other
 * MaxText releases, and failing every
 * allocation in turn. Works in a scratch directory of its own. */
#define _DEFAULT_SOURCE
#include "check.h"
#include "smoe/plan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static const char *k_base =
    "model_name: default\n"
    "override_model_config: false\n"
    "override_logical_axis_rules: false\n"
    "decoder_block: llama2\n"
    "custom_mesh_and_rule: \"\"\n"
    "quantization: \"\"\n"
    "base_emb_dim: 64\n"
    "dropout_rate: 0.5\n"
    "scan_layers: true\n"
    "vocab_size: 10_000\n"
    "mesh_axes: ['data', 'stage', 'fsdp', 'tensor', 'expert']\n"
    "data_sharding: [['data', 'stage', 'fsdp', 'tensor', 'expert']]\n"
    "context_sharding: context\n"
    "logical_axis_rules: [\n"
    "  ['activation_embed_and_logits_batch', ['data', 'fsdp']],\n"
    "  ['activation_length', ['tensor']],\n"
    "  ['mlp', ['tensor', 'fsdp']],\n"
    "  ['embed', ['fsdp', 'expert']],\n"
    "  ['embed', ['fsdp']],\n"
    "  ['heads', 'tensor'],\n"
    "  ['norm', []],\n"
    "  ['norm', 'tensor'],\n"
    "]\n"
    "ici_data_parallelism: 1\n"
    "ici_pipeline_parallelism: 1\n"
    "ici_fsdp_parallelism: -1\n"
    "ici_tensor_parallelism: 1\n"
    "ici_expert_parallelism: 1\n"
    "dcn_data_parallelism: -1\n"
    "dcn_pipeline_parallelism: 1\n"
    "dcn_fsdp_parallelism: 1\n"
    "dcn_tensor_parallelism: 1\n"
    "dcn_expert_parallelism: 1\n";

static smoe_status load(const char *base, const char *model, const char *rules,
                        const char *const *ov, int nov, int env, smoe_config **cfg,
                        smoe_err *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, base);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = path;
    o.model = model;
    o.rules = rules;
    o.overrides = ov;
    o.n_overrides = nov;
    o.use_env = env;
    return smoe_config_load(&o, cfg, err);
}

/* Resolve a list of logical names with the config's rules, formatted. */
static const char *resolve(const smoe_config *c, const char *a, const char *b, char *buf,
                           size_t n)
{
    const char *names[2] = { a, b };
    smoe_pspec s;
    if (smoe_shard_resolve(smoe_config_rules(c), 2, names, &s, NULL, NULL))
        return "error";
    return smoe_pspec_format(&s, 0, buf, n);
}

static void test_rules(void)
{
    smoe_config *c;
    smoe_err e;
    char b[256];
    CHECK(load("base.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    /* rule-major: mlp (earlier) takes tensor, so heads loses it */
    CHECK_STR(resolve(c, "heads", "mlp", b, sizeof b), "- (tensor,fsdp)");
    /* mlp took fsdp: embed's first rule and its fallback both clash */
    CHECK_STR(resolve(c, "embed", "mlp", b, sizeof b), "- (tensor,fsdp)");
    CHECK_STR(resolve(c, "embed", "heads", b, sizeof b), "(fsdp,expert) tensor");
    /* [] assigns "replicated" and blocks the later 'norm' fallback */
    CHECK_STR(resolve(c, "norm", NULL, b, sizeof b), "- -");
    CHECK_STR(resolve(c, "unknown_name", "heads", b, sizeof b), "- tensor");
    const char *dup[2] = { "embed", "embed" };
    smoe_pspec s;
    CHECK(smoe_shard_resolve(smoe_config_rules(c), 2, dup, &s, "w", &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "used twice") != NULL);
    smoe_config_free(c);

    /* a CLI rule drops the old rules of its name and goes to the end */
    const char *ov[] = { "logical_axis_rules=[['heads', ['expert']], ['embed', 'tensor']]" };
    CHECK(load("base.yml", NULL, NULL, ov, 1, 0, &c, &e) == SMOE_OK);
    const smoe_rules *r = smoe_config_rules(c);
    CHECK_INT(r->n, 7);
    CHECK_STR(r->r[r->n - 2].name, "heads");
    CHECK_STR(r->r[r->n - 1].name, "embed");
    CHECK_STR(resolve(c, "embed", "heads", b, sizeof b), "tensor expert");
    /* rule position is priority: mlp (still early) now wins tensor */
    CHECK_STR(resolve(c, "embed", "mlp", b, sizeof b), "- (tensor,fsdp)");
    smoe_config_free(c);

    /* override_logical_axis_rules=true with no CLI rules deletes them all */
    const char *ov2[] = { "override_logical_axis_rules=true" };
    CHECK(load("base.yml", NULL, NULL, ov2, 1, 0, &c, &e) == SMOE_OK);
    CHECK_INT(smoe_config_rules(c)->n, 0);
    smoe_config_free(c);

    /* a model file with its own override flag replaces the base rules */
    CHECK(load("base.yml", "m_rules", NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK_INT(smoe_config_rules(c)->n, 1);
    CHECK_STR(resolve(c, "embed", NULL, b, sizeof b), "expert -");
    smoe_config_free(c);
    /* without the flag the model's rules merge (append at the end) */
    CHECK(load("base.yml", "m_merge", NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    r = smoe_config_rules(c);
    CHECK_INT(r->n, 8);
    CHECK_STR(r->r[r->n - 1].name, "mlp");
    smoe_config_free(c);
}

static void test_overrides(void)
{
    smoe_config *c;
    smoe_err e;
    int64_t v;
    double f;
    const char *ov[] = { "base_emb_dim=128", "dropout_rate=1", "vocab_size=32_000" };
    CHECK(load("base.yml", NULL, NULL, ov, 3, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "base_emb_dim", &v, &e) == SMOE_OK && v == 128);
    CHECK(smoe_config_float(c, "dropout_rate", &f, &e) == SMOE_OK && f == 1.0);
    CHECK(smoe_config_int(c, "vocab_size", &v, &e) == SMOE_OK && v == 32000);
    smoe_config_free(c);

    const char *bad[] = { "ici_expert_parallelism=four" };
    CHECK(load("base.yml", NULL, NULL, bad, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK_STR(e.where, "argument 'ici_expert_parallelism=four'");
    CHECK(strstr(e.msg, "integer") != NULL);
    const char *unk[] = { "no_such_key=3" };
    CHECK(load("base.yml", NULL, NULL, unk, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "unknown key 'no_such_key'") != NULL);
    const char *noeq[] = { "ici_expert_parallelism" };
    CHECK(load("base.yml", NULL, NULL, noeq, 1, 0, &c, &e) == SMOE_EINVAL);
    const char *flt[] = { "base_emb_dim=1.5" };
    CHECK(load("base.yml", NULL, NULL, flt, 1, 0, &c, &e) == SMOE_EINVAL);
    const char *yamlbad[] = { "logical_axis_rules=[['a', ['b']" };
    CHECK(load("base.yml", NULL, NULL, yamlbad, 1, 0, &c, &e) == SMOE_EINVAL);

    /* model file keys vs overrides */
    const char *same[] = { "base_emb_dim=32" };
    CHECK(load("base.yml", "m_dims", NULL, same, 1, 0, &c, &e) == SMOE_OK);
    smoe_config_free(c);
    const char *diff[] = { "base_emb_dim=48" };
    CHECK(load("base.yml", "m_dims", NULL, diff, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK_STR(e.where, "argument 'base_emb_dim=48'");
    const char *forced[] = { "base_emb_dim=48", "override_model_config=true" };
    CHECK(load("base.yml", "m_dims", NULL, forced, 2, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "base_emb_dim", &v, &e) == SMOE_OK && v == 48);
    smoe_config_free(c);
    /* model_name=X-Instruct loads models/X.yml */
    const char *inst[] = { "model_name=m_dims-Instruct" };
    CHECK(load("base.yml", NULL, NULL, inst, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "base_emb_dim", &v, &e) == SMOE_OK && v == 32);
    smoe_config_free(c);
    CHECK(load("base.yml", "no-such-model", NULL, NULL, 0, 0, &c, &e) == SMOE_ENOTFOUND);
    CHECK_STR(e.where, "argument '--model no-such-model'");
    /* a model key that the base does not have */
    CHECK(load("base.yml", "m_unknown", NULL, NULL, 0, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "m_unknown.yml:2:1") != NULL);

    /* environment variables, and the CLI/environment clash */
    setenv("MAXTEXT_BASE_EMB_DIM", "96", 1);
    CHECK(load("base.yml", NULL, NULL, NULL, 0, 1, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "base_emb_dim", &v, &e) == SMOE_OK && v == 96);
    smoe_config_free(c);
    CHECK(load("base.yml", NULL, NULL, ov, 1, 1, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "MAXTEXT_BASE_EMB_DIM") != NULL);
    unsetenv("MAXTEXT_BASE_EMB_DIM");
}

static void test_files(void)
{
    smoe_config *c;
    smoe_err e;
    int64_t v;
    char b[256];
    /* base_config inheritance: the child wins */
    CHECK(load("child.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "base_emb_dim", &v, &e) == SMOE_OK && v == 256);
    CHECK(smoe_config_int(c, "vocab_size", &v, &e) == SMOE_OK && v == 10000);
    smoe_config_free(c);
    /* custom_mesh_and_rule replaces mesh_axes and rules wholesale */
    const char *ov[] = { "custom_mesh_and_rule=mine" };
    CHECK(load("base.yml", NULL, NULL, ov, 1, 0, &c, &e) == SMOE_OK);
    CHECK_INT(smoe_config_rules(c)->n, 2);
    CHECK_STR(resolve(c, "embed", "mlp", b, sizeof b), "(fsdp,expert) -");
    const smoe_node *cs = smoe_config_get(c, "context_sharding");
    CHECK(cs && strcmp(cs->str, "expert") == 0);
    smoe_mesh m;
    CHECK(smoe_config_mesh(c, 8, 1, &m, &e) == SMOE_OK);
    CHECK_INT(m.n, 2);
    CHECK_STR(m.name[1], "expert");
    smoe_config_free(c);
    CHECK(load("base.yml", NULL, "nope", NULL, 0, 0, &c, &e) == SMOE_ENOTFOUND);
    CHECK_STR(e.where, "argument '--rules nope'");
    /* a key MaxText would not apply from the file is refused at its place;
     * context_sharding (MaxText's shard-exp-on-fsdp.yml has it) is not */
    const char *typo[] = { "custom_mesh_and_rule=typo" };
    CHECK(load("base.yml", NULL, NULL, typo, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "typo.yml:2:1") != NULL);
    CHECK(strstr(e.msg, "'logical_axis_rule' in a custom_mesh_and_rule file") != NULL);
    const char *cs_ok[] = { "custom_mesh_and_rule=with_cs" };
    CHECK(load("base.yml", NULL, NULL, cs_ok, 1, 0, &c, &e) == SMOE_OK);
    smoe_config_free(c);
    /* malformed YAML names file:line:col */
    CHECK(load("broken.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "broken.yml:3:") != NULL);
    CHECK(load("dupkey.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "dupkey.yml:2:1") != NULL);
    CHECK(load("missing.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_ENOTFOUND);
    /* pipeline post-fixups */
    const char *pp[] = { "ici_pipeline_parallelism=2" };
    CHECK(load("base.yml", NULL, NULL, pp, 1, 0, &c, &e) == SMOE_OK);
    const smoe_node *axes = smoe_config_get(c, "mesh_axes");
    CHECK(axes && axes->n == 5 && strcmp(axes->items[0]->str, "stage") == 0 &&
          strcmp(axes->items[1]->str, "data") == 0);
    const smoe_rules *r = smoe_config_rules(c);
    CHECK_STR(r->r[0].name, "activation_embed_and_logits_batch");
    CHECK_INT(r->r[0].value.n, 5);
    CHECK_STR(r->r[0].value.ax[0], "stage");
    const smoe_node *ds = smoe_config_get(c, "data_sharding");
    CHECK(ds && strcmp(ds->items[0]->items[0]->str, "stage") == 0);
    smoe_config_free(c);
}

static void test_mesh(void)
{
    smoe_config *c;
    smoe_err e;
    smoe_mesh m;
    const char *ov[] = { "ici_expert_parallelism=4" };
    CHECK(load("base.yml", NULL, NULL, ov, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_mesh(c, 16, 1, &m, &e) == SMOE_OK);
    CHECK_INT(m.size[2], 4); /* fsdp filled */
    CHECK_INT(m.size[4], 4);
    CHECK(smoe_config_mesh(c, 6, 1, &m, &e) == SMOE_EINVAL); /* 6 % 4 */
    /* multi-slice: dcn_data fills from the slice count */
    CHECK(smoe_config_mesh(c, 32, 2, &m, &e) == SMOE_OK);
    CHECK_INT(m.size[0], 2);
    CHECK_INT(m.size[2], 4);
    smoe_config_free(c);
    const char *two[] = { "ici_expert_parallelism=-1" };
    CHECK(load("base.yml", NULL, NULL, two, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_mesh(c, 16, 1, &m, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "at most one") != NULL);
    CHECK_STR(e.where, "argument 'ici_expert_parallelism=-1'");
    smoe_config_free(c);
    const char *fixed[] = { "ici_fsdp_parallelism=4" };
    CHECK(load("base.yml", NULL, NULL, fixed, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_mesh(c, 16, 1, &m, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "16") != NULL);
    smoe_config_free(c);
    const char *axis[] = { "mesh_axes=['fsdp', 'bogus']" };
    CHECK(load("base.yml", NULL, NULL, axis, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_mesh(c, 4, 1, &m, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "unknown mesh axis 'bogus'") != NULL);
    smoe_config_free(c);
    CHECK(load("badaxis.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_mesh(c, 4, 1, &m, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "badaxis.yml:2:21") != NULL);
    smoe_config_free(c);
}

/* Fail the N-th allocation for every N: each call fails cleanly. */
static void test_alloc_failures(const char *cfgdir)
{
    char base[512];
    snprintf(base, sizeof base, "%s/base.yml", cfgdir);
    const char *ov[] = { "ici_expert_parallelism=4" };
    int failures = 0, n;
    for (n = 1; n < 5000; n++) {
        smoe_config_opts o;
        memset(&o, 0, sizeof o);
        o.base_path = base;
        o.model = "deepseek2-16b";
        o.overrides = ov;
        o.n_overrides = 1;
        smoe_config *c = NULL;
        smoe_plan *p = NULL;
        smoe_err e;
        smoe_alloc_fail_after(n);
        smoe_status s = smoe_config_load(&o, &c, &e);
        if (s == SMOE_OK) {
            smoe_plan_opts po = { 16, 1, NULL, 4 };
            s = smoe_plan_build(c, &po, &p, &e);
        }
        smoe_alloc_fail_after(0);
        smoe_plan_free(p);
        smoe_config_free(c);
        if (s == SMOE_OK)
            break;
        if (s != SMOE_ENOMEM)
            failures++;
    }
    CHECKF(failures == 0, "%d allocation failures gave a status other than ENOMEM", failures);
    CHECKF(n > 10 && n < 5000, "allocation sweep ended at %d", n);
}

/* Keys of other MaxText releases (data/maxtext/key_history.tsv): a renamed
 * key is read as today's key from an argument, a model file or an older
 * base.yml, and setting both names is an error; a tuning key is accepted
 * at the type of its default then; the table's rows are consistent with
 * MaxTextConfig at e591f30. */
static void test_old_keys(void)
{
    smoe_config *c;
    smoe_err e;
    int b;
    int64_t v;
    const char *old[] = { "fsdp_shard_on_exp=True" };
    CHECK(load("base.yml", NULL, NULL, old, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_bool(c, "shard_exp_on_fsdp", &b, &e) == SMOE_OK && b == 1);
    CHECK(smoe_config_get(c, "fsdp_shard_on_exp") == NULL);
    smoe_config_free(c);
    const char *twice[] = { "fsdp_shard_on_exp=True", "fsdp_shard_on_exp=False" };
    CHECK(load("base.yml", NULL, NULL, twice, 2, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_bool(c, "shard_exp_on_fsdp", &b, &e) == SMOE_OK && b == 0);
    smoe_config_free(c);
    const char *both[] = { "shard_exp_on_fsdp=true", "fsdp_shard_on_exp=True" };
    CHECK(load("base.yml", NULL, NULL, both, 2, 0, &c, &e) == SMOE_EINVAL);
    CHECK_STR(e.where, "argument 'fsdp_shard_on_exp=True'");
    CHECK(strstr(e.msg, "one setting") != NULL && strstr(e.msg, "shard_exp_on_fsdp") != NULL);
    const char *badb[] = { "fsdp_shard_on_exp=maybe" };
    CHECK(load("base.yml", NULL, NULL, badb, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK_STR(e.where, "argument 'fsdp_shard_on_exp=maybe'");

    const char *tile[] = { "tile_batch_seq=256", "wo_tile_drhs_buffer_count=3" };
    CHECK(load("base.yml", NULL, NULL, tile, 2, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_int(c, "tile_batch_seq", &v, &e) == SMOE_OK && v == 256);
    CHECK(smoe_config_int(c, "wo_tile_drhs_buffer_count", &v, &e) == SMOE_OK && v == 3);
    smoe_config_free(c);
    const char *wide[] = { "tile_batch_seq=wide" };
    CHECK(load("base.yml", NULL, NULL, wide, 1, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.msg, "'tile_batch_seq' must be an integer") != NULL);

    CHECK(load("base.yml", "m_oldname", NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_bool(c, "shard_exp_on_fsdp", &b, &e) == SMOE_OK && b == 1);
    smoe_config_free(c);
    CHECK(load("base.yml", "m_bothnames", NULL, NULL, 0, 0, &c, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "m_bothnames.yml:2:1") != NULL && strstr(e.msg, "one setting") != NULL);
    CHECK(load("oldbase.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_bool(c, "shard_exp_on_fsdp", &b, &e) == SMOE_OK && b == 1);
    smoe_config_free(c);
    const char *off[] = { "shard_exp_on_fsdp=false" };
    CHECK(load("oldbase.yml", NULL, NULL, off, 1, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_bool(c, "shard_exp_on_fsdp", &b, &e) == SMOE_OK && b == 0);
    smoe_config_free(c);

    /* the table: a renamed key becomes a field (it has a default), a
     * tuning key is no field and has an integer default */
    CHECK(load("base.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    smoe_old_key ok;
    size_t n = 0, renamed = 0;
    for (; smoe_old_key_at(n, &ok); n++) {
        CHECK(smoe_config_get(c, ok.key) == NULL);
        CHECK((ok.current == NULL) != (ok.def == NULL) && ok.history[0] != 0);
        if (ok.current) {
            renamed++;
            CHECK(smoe_config_get(c, ok.current) != NULL);
        } else {
            char *end;
            CHECK(strtol(ok.def, &end, 10) > 0 && *end == 0);
        }
    }
    CHECK(n == 12 && renamed == 1);
    CHECK(smoe_old_key_find("tile_mlp_dim", &ok) && strcmp(ok.def, "1024") == 0);
    CHECK(!smoe_old_key_find("no_such_key", &ok));
    smoe_config_free(c);
}

/* An optional key: absent or null gives the default, a value its typed
 * getter's, a wrong type its error at the value. */
static void test_optional(void)
{
    smoe_config *c;
    smoe_err e;
    int64_t v;
    double f;
    int b;
    const char *s;
    CHECK(load("nulls.yml", NULL, NULL, NULL, 0, 0, &c, &e) == SMOE_OK);
    CHECK(smoe_config_float_or(c, "dropout_rate", 0.25, &f, &e) == SMOE_OK && f == 0.25);
    CHECK(smoe_config_str_or(c, "quantization", "none", &s, &e) == SMOE_OK && !strcmp(s, "none"));
    CHECK(smoe_config_int_or(c, "base_emb_dim", 7, &v, &e) == SMOE_OK && v == 64);
    CHECK(smoe_config_int_or(c, "no_such_key", 7, &v, &e) == SMOE_OK && v == 7);
    CHECK(smoe_config_bool_or(c, "scan_layers", 0, &b, &e) == SMOE_OK && b == 1);
    CHECK(smoe_config_bool_or(c, "no_such_key", 1, &b, &e) == SMOE_OK && b == 1);
    CHECK(smoe_config_int_or(c, "decoder_block", 7, &v, &e) == SMOE_EINVAL);
    CHECK(strstr(e.where, "base.yml:4:") != NULL);
    smoe_config_free(c);
}

int main(int argc, char **argv)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/smoe-test-config-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 2;
    }
    char sub[300];
    snprintf(sub, sizeof sub, "%s/models", g_dir);
    mkdir(sub, 0700);
    snprintf(sub, sizeof sub, "%s/custom_mesh_and_rule", g_dir);
    mkdir(sub, 0700);
    put("base.yml", k_base);
    put("child.yml", "base_config: base.yml\nbase_emb_dim: 256\n");
    put("broken.yml", "a: 1\nb: [1, 2\nc: 3\n");
    put("dupkey.yml", "base_emb_dim: 1\nbase_emb_dim: 2\n");
    put("badaxis.yml", "base_config: base.yml\nmesh_axes: ['fsdp', 'nope']\n");
    put("models/m_dims.yml", "base_emb_dim: 32\n");
    put("models/m_unknown.yml", "base_emb_dim: 32\nnot_a_key: 1\n");
    put("models/m_oldname.yml", "fsdp_shard_on_exp: true\n");
    put("models/m_bothnames.yml", "shard_exp_on_fsdp: true\nfsdp_shard_on_exp: true\n");
    put("oldbase.yml", "base_config: base.yml\nfsdp_shard_on_exp: true\n");
    put("nulls.yml", "base_config: base.yml\ndropout_rate: null\nquantization: null\n");
    put("models/m_rules.yml",
        "override_logical_axis_rules: true\nlogical_axis_rules: [['embed', 'expert']]\n");
    put("models/m_merge.yml", "logical_axis_rules: [['mlp', 'expert']]\n");
    put("custom_mesh_and_rule/typo.yml",
        "mesh_axes: ['fsdp', 'expert']\nlogical_axis_rule: [['embed', 'fsdp']]\n");
    put("custom_mesh_and_rule/with_cs.yml",
        "mesh_axes: ['fsdp', 'expert']\ncontext_sharding: expert\n"
        "logical_axis_rules: [['embed', 'fsdp']]\n");
    put("custom_mesh_and_rule/mine.yml",
        "mesh_axes: ['fsdp', 'expert']\n"
        "logical_axis_rules: [['embed', ['fsdp', 'expert']], ['activation_length', 'expert']]\n");
    test_rules();
    test_overrides();
    test_files();
    test_mesh();
    test_old_keys();
    test_optional();
    if (argc > 1)
        test_alloc_failures(argv[1]);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return check_report();
}
