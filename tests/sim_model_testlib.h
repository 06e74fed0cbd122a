/* The step model built from MaxText configurations on tpu7x, for the
 * hand-computed tests of its terms (test_sim_model.c, test_sim_attn.c):
 * tpu7x's figures per device and the builders. */
#ifndef SMOE_TESTS_SIM_MODEL_TESTLIB_H
#define SMOE_TESTS_SIM_MODEL_TESTLIB_H

#include "sim_testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* tpu7x by hand, per device (configs/hardware/tpu7x.yml over its 2
 * devices a chip): the routed experts at compute_efficiency, the
 * attention kernel at attention_efficiency over splash's whole blocks
 * (T7_SPLASH: base.yml's 512 x 512 blocks over 2048 tokens, 1 + 2 + 3 + 4
 * of them under a causal mask, 10 x 512^2 / (2048^2 / 2) = 1.25 of its
 * pairs), elementwise passes of bf16 elements at HBM's rate. */
#define T7_PEAK (2.307e15 / 2)
#define T7_EFF 0.630
#define T7_ATT 0.401
#define T7_SPLASH 1.25
#define T7_EW(elems, passes) ((elems) * 2.0 * (passes) / (7.38e12 / 2))

typedef smoe_status (*shape_reader)(const smoe_config *, const smoe_hw *, smoe_sim_shape *,
                                    smoe_err *);

/* cfg's plan and step model on tpu7x (16 devices) at the shape sh, its
 * keys read into sh by `read` (smoe_sim_dtypes or smoe_sim_keys); NULL
 * when refused (its message in msg). Frees cfg. */
static inline smoe_sim_model *build_on_tpu7x(const char *cfgdir, smoe_config *cfg,
                                             shape_reader read, smoe_sim_shape sh, char *msg,
                                             size_t cap)
{
    smoe_err err;
    smoe_sim_model *m = NULL;
    char hwf[1024];
    snprintf(hwf, sizeof hwf, "%s/hardware/tpu7x.yml", cfgdir);
    smoe_hw hw;
    smoe_plan *p = NULL;
    msg[0] = '\0';
    if (cfg && smoe_hw_load(hwf, &hw, &err) == SMOE_OK && read(cfg, &hw, &sh, &err) == SMOE_OK) {
        smoe_plan_opts po = { 16, 1, NULL, sh.dtype_bytes };
        if (smoe_plan_build(cfg, &po, &p, &err) != SMOE_OK ||
            smoe_sim_model_build(cfg, p, &hw, &sh, &m, &err) != SMOE_OK)
            snprintf(msg, cap, "%s", err.msg);
    } else if (cfg) {
        snprintf(msg, cap, "%s", err.msg);
    }
    smoe_plan_free(p);
    smoe_config_free(cfg);
    return m;
}

/* One build of deepseek2-16b on tpu7x (1 x 2048 tokens per device) with
 * the override ov; NULL when refused (its message in msg). */
static inline smoe_sim_model *build_with(const char *cfgdir, const char *ov, char *msg,
                                         size_t cap)
{
    const char *o[2] = { "ici_expert_parallelism=2", ov };
    smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_FULL };
    return build_on_tpu7x(cfgdir, load_deepseek(cfgdir, o, ov ? 2 : 1), smoe_sim_dtypes, sh, msg,
                          cap);
}

/* model on tpu7x (EP 2) at the shape sh with MaxText's keys read by
 * smoe_sim_keys (remat_policy among them) and the overrides ov[0..n);
 * NULL when refused (its message in msg). */
static inline smoe_sim_model *build_shape(const char *cfgdir, const char *model,
                                          const char *const *ov, int n, smoe_sim_shape sh,
                                          char *msg, size_t cap)
{
    const char *o[8] = { "ici_expert_parallelism=2" };
    for (int i = 0; i < n && i < 7; i++)
        o[i + 1] = ov[i];
    return build_on_tpu7x(cfgdir, load_model(cfgdir, model, o, n + 1), smoe_sim_keys, sh, msg,
                          cap);
}

/* build_shape at 1 x 2048 tokens per device. */
static inline smoe_sim_model *build_model(const char *cfgdir, const char *model,
                                          const char *const *ov, int n, char *msg, size_t cap)
{
    smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
    return build_shape(cfgdir, model, ov, n, sh, msg, cap);
}

static inline smoe_sim_model *build_keys(const char *cfgdir, const char *const *ov, int n,
                                         char *msg, size_t cap)
{
    return build_model(cfgdir, "deepseek2-16b", ov, n, msg, cap);
}

#endif
