/* No MaxText key smoe train reads is ignored in silence, in one process:
 *   1. a key that leaves the numbers of a step as they are (remat, the MoE
 *      and attention kernels, the embedding lookup, ...) or that smoe train
 *      takes from elsewhere (the data, --steps, --seed) is accepted and
 *      listed by smoe_train_unapplied_keys with its value and a reason;
 *      the same key at MaxText's default (or null) is not listed, nor is
 *      any key of the bundled configs;
 *   2. a key that would change the numbers is refused by the recipe's
 *      checks with one message naming it (the state to start from, a
 *      batch ramp-up, DiLoCo, a dropping ragged buffer, float8 attention);
 *   3. a checkpoint resumed on another number of ranks: each mesh axis
 *      whose size the ranks change and the global batch are listed with
 *      the config keys that changed (ck_changes, the ckpt module's), a
 *      key's own change not twice.
 * usage: test_train_unapplied CONFIG_DIR */
#include "check.h"

#include "../src/ckpt/ckpt_impl.h"
#include "../src/train/train_impl.h"

#include <stdlib.h>

static const char *g_dir;

static smoe_config *load(const char *model, const char *const *ov, int nov)
{
    char base[1024];
    snprintf(base, sizeof base, "%s/train.yml", g_dir);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model ? model : "tiny";
    o.overrides = ov;
    o.n_overrides = nov;
    smoe_config *c = NULL;
    smoe_err e;
    if (smoe_config_load(&o, &c, &e)) {
        CHECKF(0, "config %s: %s", ov && nov ? ov[0] : model, e.msg);
        return NULL;
    }
    return c;
}

/* The listing of one override KEY=VALUE: the entry of KEY (its value and
 * reason copied out), the count, and the recipe's verdict. */
static int listed(const char *ov, char *value, size_t vcap, const char **reason, int *accepted)
{
    smoe_config *c = load(NULL, &ov, 1);
    if (!c)
        return -1;
    smoe_train_unapplied u[SMOE_TRAIN_MAX_UNAPPLIED];
    int n = smoe_train_unapplied_keys(c, 1, u, SMOE_TRAIN_MAX_UNAPPLIED), found = 0;
    size_t kl = (size_t)(strchr(ov, '=') - ov);
    for (int i = 0; i < n && i < SMOE_TRAIN_MAX_UNAPPLIED; i++)
        if (strlen(u[i].key) == kl && strncmp(u[i].key, ov, kl) == 0) {
            snprintf(value, vcap, "%s", u[i].value);
            *reason = u[i].reason;
            found = 1;
        }
    tr_recipe r;
    smoe_err e;
    *accepted = smoe_train_check_keys(c, &e) == SMOE_OK && tr_read_recipe(c, 10, &r, &e) == SMOE_OK;
    smoe_config_free(c);
    return found ? n : 0;
}

static void expect_listed(const char *ov, const char *value, const char *why)
{
    char v[80] = "";
    const char *reason = NULL;
    int ok = 0;
    int n = listed(ov, v, sizeof v, &reason, &ok);
    CHECKF(n == 1, "%s: %d keys listed (expected it alone)", ov, n);
    CHECKF(ok, "%s: refused", ov);
    if (n < 1)
        return;
    CHECKF(strcmp(v, value) == 0, "%s: value '%s', expected '%s'", ov, v, value);
    CHECKF(reason && strstr(reason, why), "%s: reason '%s' lacks '%s'", ov, reason, why);
}

static void expect_quiet(const char *ov)
{
    char v[80];
    const char *reason;
    int ok = 0;
    CHECKF(listed(ov, v, sizeof v, &reason, &ok) == 0, "%s: listed at MaxText's default", ov);
    CHECKF(ok, "%s: refused", ov);
}

static void expect_refused(const char *ov, const char *needle)
{
    smoe_config *c = load(NULL, &ov, 1);
    if (!c)
        return;
    tr_recipe r;
    smoe_err e;
    memset(&e, 0, sizeof e);
    smoe_status s = tr_read_recipe(c, 10, &r, &e);
    CHECKF(s == SMOE_EINVAL && strstr(e.msg, needle), "%s: status %d, '%s'", ov, (int)s, e.msg);
    smoe_config_free(c);
}

static void test_listed(void)
{
    /* the keys that change what runs, not the numbers */
    expect_listed("num_moe_token_chunks=2", "2", "the same numbers");
    expect_listed("remat_policy=minimal", "minimal", "recomputes none");
    expect_listed("sparse_matmul=false", "false", "always runs the sparse one");
    expect_listed("megablox=false", "false", "ragged_dot");
    expect_listed("attention=flash", "flash", "the same numbers");
    expect_listed("decoder_layer_input=offload", "offload", "recomputes none");
    expect_listed("use_iota_embed=true", "true", "one-hot matmul");
    /* and what smoe train takes from elsewhere */
    expect_listed("steps=100", "100", "--steps");
    expect_listed("dataset_type=synthetic", "synthetic", "--data");
    expect_listed("init_weights_seed=3", "3", "--seed");
    expect_listed("dcn_fsdp_parallelism=2", "2", "one slice");
    expect_listed("checkpoint_period=5", "5", "--checkpoint-every");
    expect_listed("eval_interval=100", "100", "does not evaluate");
    expect_listed("num_vocab_tiling=4", "4", "the same loss");
    expect_listed("matmul_precision=high", "high", "float32 sums");
    /* MaxText's defaults, written out or null, ask nothing */
    expect_quiet("use_ring_of_experts=true"); /* applied: ring of experts */
    expect_quiet("num_moe_token_chunks=1");
    expect_quiet("remat_policy=full");
    expect_quiet("sparse_matmul=True");
    expect_quiet("steps=150_001");
    expect_quiet("dcn_data_parallelism=1");
    expect_quiet("matmul_precision=highest");
    expect_quiet("eval_interval=0");
    expect_quiet("tokenizer_path=null");
    /* every bundled model as it comes lists nothing */
    static const char *const models[] = { "tiny", "deepseek3-test", "deepseek3-tiny",
                                          "deepseek2-16b", "deepseek3-671b" };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        smoe_config *c = load(models[i], NULL, 0);
        smoe_train_unapplied u[SMOE_TRAIN_MAX_UNAPPLIED];
        int n = c ? smoe_train_unapplied_keys(c, 1, u, SMOE_TRAIN_MAX_UNAPPLIED) : -1;
        CHECKF(n == 0, "model %s: %d keys listed (first %s)", models[i], n, n > 0 ? u[0].key : "");
        smoe_config_free(c);
    }
    /* the listing stops at cap and still counts */
    const char *two[] = { "num_moe_token_chunks=2", "use_iota_embed=true" };
    smoe_config *c = load(NULL, two, 2);
    smoe_train_unapplied u[1];
    CHECK_INT(c ? smoe_train_unapplied_keys(c, 1, u, 1) : -1, 2);
    CHECK(c && strcmp(u[0].key, "num_moe_token_chunks") == 0);
    smoe_config_free(c);
}

static void test_refused(void)
{
    expect_refused("load_parameters_path=/ckpt/items", "load_parameters_path: smoe train");
    expect_refused("load_full_state_path=/ckpt/state", "load_full_state_path");
    expect_refused("enable_rampup_batch_size=true", "enable_rampup_batch_size");
    expect_refused("enable_diloco=true", "enable_diloco");
    expect_refused("ragged_buffer_factor=1.0", "ragged_buffer_factor: a value <= 0");
    expect_refused("experimental_sa_quant_q_fp8=true", "experimental_sa_quant_q_fp8");
    expect_refused("mlp_activations_limit=7.0", "mlp_activations_limit: a value <= 0");
    char v[80];
    const char *reason;
    int ok = 0;
    listed("ragged_buffer_factor=-1.0", v, sizeof v, &reason, &ok);
    CHECKF(ok, "ragged_buffer_factor=-1.0 refused");
}

/* The change of `key` in res, or NULL. */
static const smoe_train_change *change(const smoe_train_result *res, const char *key)
{
    for (int i = 0; i < res->nchanges; i++)
        if (strcmp(res->changes[i].key, key) == 0)
            return &res->changes[i];
    return NULL;
}

/* A checkpoint of fsdp=2 x expert=`expert` ranks (per_device_batch_size
 * `pdbs`) resumed by the config `ov` on `ranks` ranks. */
static void resume(int64_t expert, const char *pdbs, const char *ov, int ranks,
                   smoe_train_result *res)
{
    memset(res, 0, sizeof *res);
    smoe_config *c = load(NULL, ov ? &ov : NULL, ov ? 1 : 0);
    smoe_mesh now;
    smoe_err e;
    if (!c || smoe_config_mesh(c, ranks, 1, &now, &e) != SMOE_OK) {
        CHECKF(0, "the mesh of %d ranks", ranks);
        smoe_config_free(c);
        return;
    }
    /* the checkpoint's config: this one's, with its own per_device_batch_size
     * and ici_expert_parallelism */
    int n = 0;
    const smoe_node *v;
    while (smoe_config_key_at(c, n, &v))
        n++;
    const char **k = calloc((size_t)n, sizeof *k);
    char **t = calloc((size_t)n, sizeof *t);
    char ep[16];
    snprintf(ep, sizeof ep, "%lld", (long long)expert);
    for (int i = 0; i < n; i++) {
        k[i] = smoe_config_key_at(c, i, &v);
        t[i] = smoe_node_text(v);
        if (strcmp(k[i], "per_device_batch_size") == 0 ||
            strcmp(k[i], "ici_expert_parallelism") == 0) {
            const char *x = k[i][0] == 'p' ? pdbs : ep;
            smoe_free(t[i]);
            t[i] = smoe_malloc(strlen(x) + 1);
            memcpy(t[i], x, strlen(x) + 1);
        }
    }
    ck_manifest m;
    memset(&m, 0, sizeof m);
    m.version = 2;
    m.ns = (int)(2 * expert);
    m.mesh = now;
    for (int a = 0; a < m.mesh.n; a++)
        m.mesh.size[a] = strcmp(m.mesh.name[a], "fsdp") == 0     ? 2
                         : strcmp(m.mesh.name[a], "expert") == 0 ? expert
                                                                 : 1;
    m.ncfg = n;
    m.cfg_keys = k;
    m.cfg_vals = (const char *const *)t;
    smoe_ckpt_resume *r = calloc(1, sizeof *r);
    CHECK(r && ck_changes(&m, c, SMOE_CKPT_WIRE_FP32, &now, ranks, r, &e) == SMOE_OK);
    if (r) { /* the result takes the changes over, as a load's */
        res->nchanges = r->nchanges;
        res->changes = r->changes;
    }
    free(r);
    for (int i = 0; i < n; i++)
        smoe_free(t[i]);
    free(k);
    free(t);
    smoe_config_free(c);
}

static void test_resume(void)
{
    smoe_train_result res;
    const smoe_train_change *x;
    /* fsdp=2 (ici_fsdp_parallelism -1), 4 per rank, resumed on one rank */
    resume(1, "4", NULL, 1, &res);
    x = change(&res, "ici_fsdp_parallelism (resolved)");
    CHECKF(x && !strcmp(x->from, "2") && !strcmp(x->to, "1"), "fsdp change %s -> %s",
           x ? x->from : "-", x ? x->to : "-");
    x = change(&res, "global batch (per_device_batch_size x ranks)");
    CHECKF(x && !strcmp(x->from, "8 (4 per rank x 2 ranks)") &&
               !strcmp(x->to, "4 (4 per rank x 1 rank)"),
           "global batch %s -> %s", x ? x->from : "-", x ? x->to : "-");
    CHECK_INT(res.nchanges, 2);
    smoe_train_result_free(&res);
    /* the same global batch on one rank: the mesh alone changes */
    resume(1, "2", "per_device_batch_size=4", 1, &res);
    CHECK(change(&res, "ici_fsdp_parallelism (resolved)") != NULL);
    CHECK(change(&res, "global batch (per_device_batch_size x ranks)") == NULL);
    CHECK(change(&res, "per_device_batch_size") != NULL);
    CHECK_INT(res.nchanges, 2);
    smoe_train_result_free(&res);
    /* fsdp=2 x expert=2 resumed as fsdp=4: ici_expert_parallelism's own
     * change (2 -> 1) is not listed twice; fsdp's resolved size is */
    resume(2, "4", NULL, 4, &res);
    x = change(&res, "ici_expert_parallelism");
    CHECKF(x && !strcmp(x->from, "2") && !strcmp(x->to, "1"), "expert change");
    CHECK(change(&res, "ici_expert_parallelism (resolved)") == NULL);
    x = change(&res, "ici_fsdp_parallelism (resolved)");
    CHECKF(x && !strcmp(x->from, "2") && !strcmp(x->to, "4"), "fsdp 2 -> 4");
    CHECK(change(&res, "global batch (per_device_batch_size x ranks)") == NULL);
    CHECK_INT(res.nchanges, 2);
    smoe_train_result_free(&res);
    /* the same mesh and batch: nothing changed */
    resume(2, "4", "ici_expert_parallelism=2", 4, &res);
    CHECK_INT(res.nchanges, 0);
    smoe_train_result_free(&res);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_train_unapplied CONFIG_DIR\n");
        return 2;
    }
    g_dir = argv[1];
    test_listed();
    test_refused();
    test_resume();
    return check_report();
}
