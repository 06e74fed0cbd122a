/* smoe sim's step model for one configuration: the command's config with
 * a variant's rules and keys, the shape's unset parts from it, its plan,
 * and the model smoe_sim_model_build makes of them. Each refusal dies
 * naming the key or argument. */
#include "cli.h"
#include "smoe/sched.h"
#include "smoe/train.h"

#include <stdlib.h>
#include <string.h>

/* A positive integer config key (the shape's defaults: per_device_batch_size,
 * max_target_length), or die naming it. */
static int64_t config_count(const smoe_config *cfg, const char *key, int64_t hi)
{
    double v;
    smoe_err err;
    if (smoe_config_float(cfg, key, &v, &err))
        cli_die(&err);
    if (!(v >= 1 && v <= (double)hi && v == (double)(int64_t)v)) {
        smoe_err_at(&err, SMOE_EINVAL, smoe_config_loc(cfg, key),
                    "%s = %g: smoe sim needs an integer in [1, %lld] (or --batch/--seq)", key, v,
                    (long long)hi);
        cli_die(&err);
    }
    return (int64_t)v;
}

/* The shape's batch with the plan's context axis (smoe_sim_shape.context):
 * per_device_batch_size x context sequences per group of context devices
 * (MaxText's fractional batches: 0.125 on 8-way context parallelism is a
 * sequence's eighth a device), pdbs > 0 from the config, else --batch's
 * per-device sequences; the first build sets it, a variant must keep the
 * axis. */
static void context_shape(const smoe_config *cfg, const smoe_plan *p, double pdbs,
                          smoe_sim_shape *sh)
{
    smoe_err err;
    int64_t cp = smoe_mesh_axis_size(&p->mesh, "context");
    double b = pdbs > 0 ? pdbs * (double)cp : (double)sh->batch * (double)cp;
    if (!(b >= 1 && b <= (double)SMOE_SIM_MAX_BATCH && b == (double)(int64_t)b)) {
        smoe_err_at(&err, SMOE_EINVAL, smoe_config_loc(cfg, "per_device_batch_size"),
                    "per_device_batch_size = %g: with %lld-way context parallelism smoe sim needs "
                    "it times the context axis a whole number of sequences in [1, %lld] (below "
                    "1, MaxText splits each sequence over the context axis)",
                    pdbs > 0 ? pdbs : (double)sh->batch, (long long)cp,
                    (long long)SMOE_SIM_MAX_BATCH);
        cli_die(&err);
    }
    if (sh->seq % cp) {
        smoe_err_at(&err, SMOE_EINVAL, smoe_config_loc(cfg, "max_target_length"),
                    "max_target_length = %lld: the context axis (%lld ways) must divide it",
                    (long long)sh->seq, (long long)cp);
        cli_die(&err);
    }
    sh->batch = (int64_t)b;
    sh->context = cp;
}

/* A positive number (per_device_batch_size), or die naming it. */
static double config_pos(const smoe_config *cfg, const char *key)
{
    double v;
    smoe_err err;
    if (smoe_config_float(cfg, key, &v, &err))
        cli_die(&err);
    if (!(v > 0 && v <= (double)SMOE_SIM_MAX_BATCH)) {
        smoe_err_at(&err, SMOE_EINVAL, smoe_config_loc(cfg, key),
                    "%s = %g: smoe sim needs a number in (0, %lld] (or --batch)", key, v,
                    (long long)SMOE_SIM_MAX_BATCH);
        cli_die(&err);
    }
    return v;
}

/* The bytes per element smoe's gathers move with c's --gather-dtype: the
 * plan's gathered bytes over all layers with that wire (the plan layer
 * checks the int8 block rule and picks the fallbacks) over the stored
 * ones, times the stored element size. */
static double wire_bytes(const cli_common *c, const cli_common *cc, const smoe_config *cfg,
                         const smoe_plan *p)
{
    cli_common cw = *cc;
    cw.gather_dtype = c->gather_dtype;
    cw.int8_block = c->int8_block;
    cw.int8_fallback = c->int8_fallback;
    smoe_plan *pw = cli_build_plan(&cw, cfg);
    double stored = 0, moved = 0;
    for (int i = 0; i < p->n; i++)
        if (p->w[i].has_gather) {
            stored += (double)p->w[i].gather.bytes_out * (double)p->w[i].layers;
            moved += (double)pw->w[i].gather.bytes_out * (double)pw->w[i].layers;
        }
    smoe_plan_free(pw);
    return stored > 0 ? moved / stored * p->dtype_bytes : p->dtype_bytes;
}

/* The activations smoe train would track for cfg on plan's mesh at the
 * shape (train.h: smoe_train_act_bytes), for smoe's runtime executor on a
 * cpu profile; 0 (the simulator's estimate) where smoe train would not run
 * that step as the shape says (a model it refuses, remat, a compute dtype
 * other than float32). */
static int64_t train_act_bytes(const smoe_config *cfg, const smoe_plan *p, const smoe_hw *hw,
                               const smoe_sim_shape *sh)
{
    smoe_model_cfg mc;
    smoe_err err;
    int64_t act = 0;
    if (hw->kind != SMOE_HW_CPU || sh->remat != SMOE_REMAT_NONE || sh->compute_bytes != 4 ||
        smoe_train_model_cfg(cfg, &p->mesh, &mc, &err))
        return 0;
    mc.batch = sh->batch;
    mc.seq = sh->seq;
    return smoe_train_act_bytes(&mc, &act, &err) ? 0 : act;
}

/* A number or a string of cfg's key, or die naming it. */
static double key_num(const smoe_config *cfg, const char *key)
{
    double v;
    smoe_err err;
    if (smoe_config_float(cfg, key, &v, &err))
        cli_die(&err);
    return v;
}

static const char *key_str(const smoe_config *cfg, const char *key)
{
    const char *v;
    smoe_err err;
    if (smoe_config_str(cfg, key, &v, &err))
        cli_die(&err);
    return v;
}

/* Each fact's agreement with cfg's value of its key; `fixed` receives the
 * shape's value as the option takes it. */
static int seq_agrees(const smoe_config *cfg, const smoe_sim_shape *in, char *fixed, size_t cap)
{
    snprintf(fixed, cap, "%lld", (long long)in->seq);
    return key_num(cfg, "max_target_length") == (double)in->seq;
}

static int batch_agrees(const smoe_config *cfg, const smoe_sim_shape *in, char *fixed, size_t cap)
{
    snprintf(fixed, cap, "%lld", (long long)in->batch);
    return key_num(cfg, "per_device_batch_size") == (double)in->batch;
}

static int dtype_agrees(const smoe_config *cfg, const smoe_sim_shape *in, char *fixed, size_t cap)
{
    snprintf(fixed, cap, "%d", in->dtype_bytes);
    return (strcmp(key_str(cfg, "weight_dtype"), "float32") == 0 ? 4 : 2) == in->dtype_bytes;
}

static int remat_agrees(const smoe_config *cfg, const smoe_sim_shape *in, char *fixed, size_t cap)
{
    snprintf(fixed, cap, "%s", smoe_sim_remat_name(in->remat));
    return in->remat == SMOE_REMAT_FULL && strcmp(key_str(cfg, "remat_policy"), "full") == 0;
}

/* The shape facts a KEY=VALUE may restate, with the option that fixes each
 * (the scenario's key beside it), whether the shape as given fixes it, and
 * whether cfg's value agrees. */
static const struct {
    const char *key, *opt, *scn;
    int (*agrees)(const smoe_config *, const smoe_sim_shape *, char *, size_t);
} k_fixed[] = {
    { "max_target_length", "--seq", "seq_len", seq_agrees },
    { "per_device_batch_size", "--batch", "per_device_batch", batch_agrees },
    { "weight_dtype", "--dtype-bytes", "dtype_bytes", dtype_agrees },
    { "remat_policy", "--remat", "remat", remat_agrees },
};

static int is_fixed(const smoe_sim_shape *in, size_t i)
{
    const int64_t set[] = { in->seq, in->batch, in->dtype_bytes, in->remat_set };
    return set[i] != 0;
}

/* Die where a KEY=VALUE contradicts what the shape as given fixes (the
 * command line's option, the scenario's key or a reading of it): the key
 * would otherwise be dropped without a word. */
static void check_fixed(const smoe_config *cfg, const char *const *kv, int n,
                        const smoe_sim_shape *in)
{
    for (size_t i = 0; i < sizeof k_fixed / sizeof k_fixed[0]; i++) {
        char fixed[32];
        if (!is_fixed(in, i) || !cli_kv_sets(kv, n, k_fixed[i].key) ||
            k_fixed[i].agrees(cfg, in, fixed, sizeof fixed))
            continue;
        smoe_err err;
        smoe_err_at(&err, SMOE_EINVAL, smoe_config_loc(cfg, k_fixed[i].key),
                    "%s contradicts %s %s (or the scenario's %s): give it one way",
                    k_fixed[i].key, k_fixed[i].opt, fixed, k_fixed[i].scn);
        cli_die(&err);
    }
}

smoe_sim_model *sim_build(const cli_common *c, const char *rules, const char *const *extra,
                          const char *const *extra_where, int n_extra, const smoe_hw *hw,
                          smoe_sim_shape *shp, smoe_plan **plan_out, sim_run_facts *facts)
{
    smoe_sim_shape sh = *shp;
    const char **kv = cli_alloc((size_t)(c->n_kv + n_extra + 1) * sizeof *kv);
    const char **at = cli_alloc((size_t)(c->n_kv + n_extra + 1) * sizeof *at);
    int n = 0;
    for (int i = 0; i < c->n_kv; i++) {
        at[n] = c->kv_where ? c->kv_where[i] : NULL;
        kv[n++] = c->kv[i];
    }
    for (int i = 0; i < n_extra; i++) {
        at[n] = extra_where ? extra_where[i] : NULL;
        kv[n++] = extra[i];
    }
    cli_common cc = *c;
    cc.kv = kv;
    cc.kv_where = at;
    cc.n_kv = n;
    /* the model's plan stays in the stored dtype (the step model sizes
     * everything from it); a compressed wire is a second plan's ratio */
    cc.gather_dtype = SMOE_DT_FP32;
    cc.int8_block = 0;
    cc.int8_fallback = SMOE_DT_INT8;
    if (rules)
        cc.rules = rules;
    smoe_config *cfg = cli_load_config(&cc);
    smoe_err err;
    check_fixed(cfg, kv, n, shp);
    double pdbs = sh.batch ? 0 : config_pos(cfg, "per_device_batch_size");
    if (!sh.batch)
        sh.batch = 1; /* context_shape sets it below, with the mesh */
    if (!sh.seq)
        sh.seq = config_count(cfg, "max_target_length", SMOE_SIM_MAX_SEQ);
    if (smoe_sim_keys(cfg, hw, &sh, &err))
        cli_die(&err);
    cc.dtype_bytes = sh.dtype_bytes;
    smoe_plan *p = cli_build_plan(&cc, cfg);
    context_shape(cfg, p, pdbs, &sh);
    if (c->gather_dtype != SMOE_DT_FP32 || c->int8_block || c->int8_fallback != SMOE_DT_INT8)
        sh.wire_bytes = wire_bytes(c, &cc, cfg, p);
    free(kv);
    free(at);
    sh.act_bytes = train_act_bytes(cfg, p, hw, &sh);
    smoe_sim_model *m;
    if (smoe_sim_model_build(cfg, p, hw, &sh, &m, &err))
        cli_die(&err);
    if (facts) {
        smoe_dims d; /* read by the model build just above */
        (void)smoe_sim_tuned_keys(cfg, hw, facts->tuned, sizeof facts->tuned);
        if (smoe_plan_dims(cfg, &d, &err))
            cli_die(&err);
        facts->unscanned = !d.scan_layers;
    }
    smoe_config_free(cfg);
    *plan_out = p;
    *shp = sh;
    return m;
}
