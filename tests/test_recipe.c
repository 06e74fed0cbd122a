/* MaxText's training recipe as smoe train reads and applies it, against
 * values computed by hand from MaxText's definitions (commit e591f30) and
 * optax's:
 *   1. the learning-rate schedule (maxtext_utils.create_learning_rate_
 *      schedule, optax linear_schedule / join_schedules) at chosen counts:
 *      warmup + cosine, the zero tail, the legacy key's version, WSD;
 *   2. the AdamW update (optax adamw after clip_by_global_norm): eps_root,
 *      clipping, the weight-decay mask;
 *   3. RoPE (embeddings.py RotaryEmbedding / YarnRotaryEmbedding): the
 *      frequencies of DeepSeek-V3's YaRN parameters, rotations of halves
 *      and interleaved pairs; the MLA softmax factor (attention_mla.py);
 *   4. the z-loss cross-entropy (max_utils.cross_entropy_with_logits) and
 *      its gradient, by hand and by finite differences;
 *   5. the aux-loss-free bias update (moe.py calculate_load_balance_updates);
 *   6. the model-side keys (router per model name, losses) and the refusal
 *      of every key smoe train does not implement (one message naming it).
 * usage: test_recipe CONFIG_DIR */
#include "check.h"

#include "../src/recipe/recipe_impl.h"
#include "../src/train/train_impl.h"

#include <math.h>
#include <stdlib.h>

static const char *g_dir;

static smoe_config *load(const char *model, const char *const *ov, int nov, smoe_err *err)
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
    if (smoe_config_load(&o, &c, err))
        return NULL;
    return c;
}

/* the recipe of `steps` steps with the overrides, or NULL-status; the
 * recipe points into its config (adamw_mask), which lives until the next
 * call (or recipe_done) */
static smoe_config *g_recipe_cfg;
static void recipe_done(void)
{
    smoe_config_free(g_recipe_cfg);
    g_recipe_cfg = NULL;
}
static smoe_status recipe(const char *const *ov, int nov, int64_t steps, smoe_recipe *r,
                          smoe_err *err)
{
    recipe_done();
    smoe_config *c = load(NULL, ov, nov, err);
    if (!c)
        return SMOE_EINVAL;
    g_recipe_cfg = c;
    return smoe_recipe_read(c, steps, r, err);
}

#define NEAR(a, b) CHECKF(fabs((double)(a) - (double)(b)) <= 1e-6 * fabs((double)(b)) + 1e-12, \
                          "%s = %.9g, expected %.9g", #a, (double)(a), (double)(b))

/* ---- 1. the schedule ---- */

static void test_schedule(void)
{
    smoe_recipe r;
    smoe_err e;
    /* train.yml: lr 3e-3, final fraction 0.1, warmup 0.1; 10 steps: W =
     * int(10 * 0.1) = 1, cosine over 9 updates, pct = s / 8 */
    CHECK(recipe(NULL, 0, 10, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 0), 0.0);                     /* the first update: lr 0 */
    NEAR(smoe_recipe_lr_at(&r, 1), 0.003);                   /* cosine at s = 0 */
    NEAR(smoe_recipe_lr_at(&r, 3), 0.0026045941546018387);   /* s = 2: a = (cos(pi/4) + 1)/2 */
    NEAR(smoe_recipe_lr_at(&r, 5), 0.00165);                 /* s = 4: a = 1/2 */
    NEAR(smoe_recipe_lr_at(&r, 9), 0.0003);                  /* s = 8: the final fraction */
    /* 100 steps: W = 10, linear 0 -> lr; cosine over 90 */
    CHECK(recipe(NULL, 0, 100, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 5), 0.0015);
    NEAR(smoe_recipe_lr_at(&r, 10), 0.003);
    NEAR(smoe_recipe_lr_at(&r, 54), 0.001673825448868224);   /* s = 44, pct = 44/89 */
    NEAR(smoe_recipe_lr_at(&r, 99), 0.0003);
    /* a schedule shorter than the run: zero after it */
    const char *shorter[] = { "learning_rate_schedule_steps=50" };
    CHECK(recipe(shorter, 1, 100, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 2), 0.0012);                  /* W = 5: 2/5 of lr */
    NEAR(smoe_recipe_lr_at(&r, 49), 0.0003);
    NEAR(smoe_recipe_lr_at(&r, 50), 0.0);
    NEAR(smoe_recipe_lr_at(&r, 99), 0.0);
    /* int() truncates: 15 * 0.1 = 1.5 -> one warmup update */
    CHECK(recipe(NULL, 0, 15, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 0), 0.0);
    NEAR(smoe_recipe_lr_at(&r, 1), 0.003);
    /* warmup over the whole schedule: no cosine piece, the line goes on */
    const char *allw[] = { "warmup_steps_fraction=1.0" };
    CHECK(recipe(allw, 1, 10, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 9), 0.0027);
    /* the legacy key: MaxText before e886dd212, pct = s / len */
    const char *leg[] = { "cosine_learning_rate_final_fraction=0.2" };
    CHECK(recipe(leg, 1, 10, &r, &e) == SMOE_OK && r.legacy);
    NEAR(smoe_recipe_lr_at(&r, 0), 0.0);
    NEAR(smoe_recipe_lr_at(&r, 1), 0.003);
    NEAR(smoe_recipe_lr_at(&r, 5), 0.0020083778132003165);   /* s = 4, pct = 4/9 */
    NEAR(smoe_recipe_lr_at(&r, 9), 0.00067236885505691);     /* s = 8, pct = 8/9 */
    const char *leg2[] = { "cosine_learning_rate_final_fraction=0.2",
                           "learning_rate_schedule_steps=10" };
    CHECK(recipe(leg2, 2, 20, &r, &e) == SMOE_OK);
    NEAR(smoe_recipe_lr_at(&r, 10), 0.0);
    NEAR(smoe_recipe_lr_at(&r, 19), 0.0);
    const char *leg3[] = { "cosine_learning_rate_final_fraction=0.2",
                           "warmup_steps_fraction=1.0" };
    CHECK(recipe(leg3, 2, 10, &r, &e) == SMOE_EINVAL && strstr(e.msg, "divides by zero"));
    /* WSD: W = 10, decay D = 10, stable 80; linear decay over D - 1 */
    const char *wsd[] = { "lr_schedule_type=wsd" };
    CHECK(recipe(wsd, 1, 100, &r, &e) == SMOE_OK && r.wsd && r.wsd_linear);
    NEAR(smoe_recipe_lr_at(&r, 5), 0.0015);
    NEAR(smoe_recipe_lr_at(&r, 50), 0.003);
    NEAR(smoe_recipe_lr_at(&r, 90), 0.003);
    NEAR(smoe_recipe_lr_at(&r, 94), 0.0018);                 /* 3e-3 - 2.7e-3 * 4/9 */
    NEAR(smoe_recipe_lr_at(&r, 99), 0.0003);
    const char *wsdc[] = { "lr_schedule_type=wsd", "wsd_decay_style=cosine" };
    CHECK(recipe(wsdc, 2, 100, &r, &e) == SMOE_OK && !r.wsd_linear);
    NEAR(smoe_recipe_lr_at(&r, 94), 0.0018844250398503564);  /* pct = 4/9 */
    const char *badt[] = { "lr_schedule_type=linear" };
    CHECK(recipe(badt, 1, 10, &r, &e) == SMOE_EINVAL && strstr(e.msg, "lr_schedule_type"));
    /* clipping and the optimizer extras */
    const char *clip[] = { "gradient_clipping_threshold=0.25", "adam_eps_root=1e-6" };
    CHECK(recipe(clip, 2, 10, &r, &e) == SMOE_OK && r.clip == 0.25 && r.eps_root == 1e-6);
    CHECK(recipe(NULL, 0, 10, &r, &e) == SMOE_OK && r.clip == 1.0); /* base.yml */
}

/* ---- 2. AdamW ---- */

static void test_adamw(void)
{
    /* p = 1, g = 2, b1 0.9, b2 0.95, eps 1e-8, wd 0.1, lr 0.01, t = 1:
     * m = 0.2, v = 0.2, mhat = 2, vhat = 4, u = 2 / (2 + 1e-8) + 0.1 */
    float p = 1, m = 0, v = 0, g = 2;
    smoe_adamw_cfg c = { 0.01f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.1f, 1, 0.0f, 0.0f };
    smoe_adamw_step(&p, &m, &v, &g, 1, &c);
    NEAR(m, 0.2);
    NEAR(v, 0.2);
    NEAR(p, 1.0 - 0.01 * (2.0 / (2.0 + 1e-8) + 0.1));
    /* t = 2: m = 0.38, v = 0.39, mhat = 0.38 / 0.19 = 2, vhat = 0.39 / 0.0975 = 4 */
    float p1 = p;
    smoe_adamw_step(&p, &m, &v, &g, 1, &(smoe_adamw_cfg){ 0.01f, 0.9f, 0.95f, 1e-8f, 0.0f,
                                                           0.1f, 2, 0.0f, 0.0f });
    NEAR(m, 0.38);
    NEAR(v, 0.39);
    NEAR(p, p1 - 0.01 * (2.0 / (2.0 + 1e-8) + 0.1 * p1));
    /* eps_root inside the root: u = 2 / (sqrt(4 + 1) + 1e-8) */
    p = 1, m = 0, v = 0;
    c.eps_root = 1.0f;
    smoe_adamw_step(&p, &m, &v, &g, 1, &c);
    NEAR(p, 1.0 - 0.01 * (2.0 / (sqrt(5.0) + 1e-8) + 0.1));
    /* clipped from norm 4 to 1: g = 0.5; masked (wd 0): u = 0.5 / 0.5 */
    p = 1, m = 0, v = 0;
    c = (smoe_adamw_cfg){ 0.01f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.0f, 1, 4.0f, 1.0f };
    smoe_adamw_step(&p, &m, &v, &g, 1, &c);
    NEAR(m, 0.05);
    NEAR(v, 0.0125);
    NEAR(p, 1.0 - 0.01 * (0.5 / (0.5 + 1e-8)));
    /* lr 0 (the first warmup update) leaves the parameter, moments move */
    p = 1, m = 0, v = 0;
    c = (smoe_adamw_cfg){ 0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.1f, 1, 0.0f, 0.0f };
    smoe_adamw_step(&p, &m, &v, &g, 1, &c);
    CHECK(p == 1.0f && m > 0.0f);

    /* adamw_mask: re.search on "params/<path>"; a match does not decay */
    smoe_recipe r;
    smoe_err e;
    const char *mask[] = { "adamw_mask=[bias, '.*norm']" };
    CHECK(recipe(mask, 1, 10, &r, &e) == SMOE_OK && r.nmask == 2);
    CHECK(!smoe_recipe_decays(&r, "decoder/moe_layers/DeepSeekMoeBlock_0/MoeBlock_0/gate/bias"));
    CHECK(!smoe_recipe_decays(&r, "decoder/dense_layers/pre_self_attention_layer_norm/scale"));
    CHECK(!smoe_recipe_decays(&r, "decoder/decoder_norm/scale"));
    CHECK(smoe_recipe_decays(&r, "decoder/dense_layers/self_attention/wq_a/kernel"));
    const char *anch[] = { "adamw_mask=['^params/token_embedder']" };
    CHECK(recipe(anch, 1, 10, &r, &e) == SMOE_OK);
    CHECK(!smoe_recipe_decays(&r, "token_embedder/embedding"));
    CHECK(smoe_recipe_decays(&r, "decoder/logits_dense/kernel"));
    CHECK(recipe(NULL, 0, 10, &r, &e) == SMOE_OK && r.nmask == 0 &&
          smoe_recipe_decays(&r, "decoder/decoder_norm/scale")); /* empty: all decay */
    const char *bad[] = { "adamw_mask=['\\d+']" };
    CHECK(recipe(bad, 1, 10, &r, &e) == SMOE_EINVAL && strstr(e.msg, "adamw_mask"));
    const char *bad2[] = { "adamw_mask=['(?:norm)']" };
    CHECK(recipe(bad2, 1, 10, &r, &e) == SMOE_EINVAL && strstr(e.msg, "adamw_mask"));
}

/* ---- 3. RoPE ---- */

static void test_rope(void)
{
    /* DeepSeek-V3's YaRN: d 64, theta 1e4, factor 40, beta_fast 32,
     * beta_slow 1, original 4096: correction dims 10.47 -> 10 (floor) and
     * 22.51 -> 23 (ceil); inv_freq_i = f_i (1 - ramp) + f_i / 40 ramp,
     * ramp = clip((i - 10) / 13, 0, 1), f_i = 1e4^(-2i/64) */
    double inv[32];
    smoe_rope_cfg y = { 1, 1.0, 10000.0, 1.0, 40.0, 32.0, 1.0, 4096.0, 1 };
    smoe_rope_freqs(inv, 64, &y);
    NEAR(inv[0], 1.0);
    NEAR(inv[10], 0.056234132519034905);
    NEAR(inv[11], 0.03900692656714386);
    NEAR(inv[16], 0.0055);
    NEAR(inv[22], 0.0001778279410038922);
    NEAR(inv[23], 3.33380358040831e-05);
    NEAR(inv[31], 3.3338035804083097e-06);
    y.truncate = 0; /* rope_truncate false: the ramp runs over [10.47, 22.51] */
    smoe_rope_freqs(inv, 64, &y);
    NEAR(inv[11], 0.04036758449441141);
    NEAR(inv[16], 0.005524062977468265);
    /* RotaryEmbedding: timescale min * (max/min)^(2i/d) * linear factor */
    smoe_rope_cfg dflt = { 0, 1.0, 10000.0, 1.0, 0, 0, 0, 0, 0 };
    smoe_rope_freqs(inv, 4, &dflt);
    NEAR(inv[0], 1.0);
    NEAR(inv[1], 0.01);
    smoe_rope_cfg d2 = { 0, 2.0, 10000.0, 3.0, 0, 0, 0, 0, 0 };
    smoe_rope_freqs(inv, 4, &d2);
    NEAR(inv[0], 1.0 / 6.0);
    NEAR(inv[1], 1.0 / (2.0 * sqrt(5000.0) * 3.0));
    /* rotations of x = [1 2 3 4] at position 2 with inv = [1, 0.5]:
     * halves turn (x0, x2) by 2 and (x1, x3) by 1; interleaved turn
     * (x0, x1) by 2 and (x2, x3) by 1 */
    const double f2[2] = { 1.0, 0.5 };
    const int32_t pos = 2;
    const double c2 = cos(2.0), s2 = sin(2.0), c1 = cos(1.0), s1 = sin(1.0);
    float h[4] = { 1, 2, 3, 4 }, il[4] = { 1, 2, 3, 4 }, sc[4] = { 1, 2, 3, 4 };
    smoe_rope_apply(h, &pos, 1, 1, 4, 4, f2, 1, 1.0f, 0);
    NEAR(h[0], 1 * c2 - 3 * s2);
    NEAR(h[2], 1 * s2 + 3 * c2);
    NEAR(h[1], 2 * c1 - 4 * s1);
    NEAR(h[3], 2 * s1 + 4 * c1);
    smoe_rope_apply(il, &pos, 1, 1, 4, 4, f2, 0, 1.0f, 0);
    NEAR(il[0], 1 * c2 - 2 * s2);
    NEAR(il[1], 1 * s2 + 2 * c2);
    NEAR(il[2], 3 * c1 - 4 * s1);
    NEAR(il[3], 3 * s1 + 4 * c1);
    smoe_rope_apply(sc, &pos, 1, 1, 4, 4, f2, 0, 2.0f, 0);
    NEAR(sc[3], 2 * (3 * s1 + 4 * c1));
    smoe_rope_apply(sc, &pos, 1, 1, 4, 4, f2, 0, 0.5f, 1); /* the inverse, scale undone */
    NEAR(sc[0], 1.0);
    NEAR(sc[3], 4.0);

    /* the model-side keys of the default run: RotaryEmbedding (halves),
     * MLA softmax scale times (0.1 ln 40 + 1)^2 = 1.8738542 since
     * max_position_embeddings 163840 > original 4096 */
    smoe_err e;
    smoe_config *c = load(NULL, NULL, 0, &e);
    CHECK(c != NULL);
    smoe_model_cfg mc;
    memset(&mc, 0, sizeof mc);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_OK);
        CHECK(!mc.rope.yarn && mc.rope_halves == 1);
        NEAR(mc.attn_scale_mult, 1.8738542070926265);
        NEAR(mc.rope_scale, 1.0);
        CHECK(!mc.score_raw && !mc.score_sigmoid && mc.bias_in_weights);
        smoe_config_free(c);
    }
    const char *noms[] = { "max_position_embeddings=4096" };
    c = load(NULL, noms, 1, &e);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_OK);
        NEAR(mc.attn_scale_mult, 1.0);
        smoe_config_free(c);
    }
    /* deepseek3: YaRN interleaved, selection-only bias; attention scaling */
    const char *ds3[] = { "rope_attention_scaling=true", "override_model_config=true",
                          "mscale=0.5" };
    c = load("deepseek3-tiny", ds3, 3, &e);
    CHECK(c != NULL);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_OK);
        CHECK(mc.rope.yarn && mc.rope_halves == 0 && mc.rope.factor == 40.0);
        NEAR(mc.rope_scale, 1.3688879454113936);
        NEAR(mc.attn_scale_mult, (0.05 * log(40.0) + 1) * (0.05 * log(40.0) + 1));
        CHECK(mc.score_sigmoid && !mc.bias_in_weights); /* model_name deepseek3-tiny */
        smoe_config_free(c);
    }
    const char *ds3h[] = { "rope_interleave=false" };
    c = load("deepseek3-tiny", ds3h, 1, &e);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_OK && mc.rope_halves == 1);
        smoe_config_free(c);
    }
    const char *ds3p[] = { "rope_interleave=false", "rope_pairwise=true" };
    c = load("deepseek3-tiny", ds3p, 2, &e);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_EINVAL && strstr(e.msg, "rope_pairwise"));
        smoe_config_free(c);
    }
    const char *llama[] = { "rope_type=llama3.1" };
    c = load(NULL, llama, 1, &e);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_EINVAL && strstr(e.msg, "rope_type"));
        smoe_config_free(c);
    }
    const char *shortpos[] = { "max_position_embeddings=64" };
    c = load("deepseek3-tiny", shortpos, 1, &e);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_EINVAL &&
              strstr(e.msg, "max_position_embeddings"));
        smoe_config_free(c);
    }
    /* routed_score_func "" (base.yml's default): raw logits */
    const char *raw[] = { "override_model_config=true", "routed_score_func=\"\"",
                          "load_balance_loss_weight=0.01", "z_loss_multiplier=1e-4" };
    c = load(NULL, raw, 4, &e);
    CHECKF(c != NULL, "%s", e.msg);
    if (c) {
        CHECK(rc_model_recipe(c, &mc, &e) == SMOE_OK);
        CHECK(mc.score_raw && !mc.score_sigmoid);
        NEAR(mc.lb_weight, 0.01);
        NEAR(mc.z_loss, 1e-4);
        smoe_config_free(c);
    }
}

/* ---- 4. the z-loss ---- */

static void test_zloss(void)
{
    /* logits [0, 0], target 0, z 0.5: lse = ln 2; loss = ln 2 + 0.5 ln^2 2;
     * d = ((1 + 2 * 0.5 * ln 2) * 0.5 - [j == 0]) */
    const float lg[2] = { 0, 0 };
    const int32_t y = 0;
    float d[2];
    double zs = 0;
    double l = smoe_cross_entropy_z(d, lg, &y, 1, 2, 1.0f, 0.5f, &zs);
    const double l2 = log(2.0);
    NEAR(l, l2 + 0.5 * l2 * l2);
    NEAR(zs, 0.5 * l2 * l2);
    NEAR(d[0], (1 + l2) * 0.5 - 1);
    NEAR(d[1], (1 + l2) * 0.5);
    /* finite differences on a random row */
    float r[7] = { 0.3f, -1.2f, 2.0f, 0.7f, -0.1f, 1.1f, -2.5f }, dr[7];
    const int32_t t = 4;
    smoe_cross_entropy_z(dr, r, &t, 1, 7, 0.25f, 0.3f, NULL);
    for (int j = 0; j < 7; j++) {
        float p[7], m[7];
        memcpy(p, r, sizeof p);
        memcpy(m, r, sizeof m);
        p[j] += 1e-2f;
        m[j] -= 1e-2f;
        double fd = 0.25 * (smoe_cross_entropy_z(NULL, p, &t, 1, 7, 1.0f, 0.3f, NULL) -
                            smoe_cross_entropy_z(NULL, m, &t, 1, 7, 1.0f, 0.3f, NULL)) /
                    (double)(p[j] - m[j]);
        CHECKF(fabs(fd - dr[j]) <= 1e-4 + 1e-3 * fabs(fd), "z-loss fd [%d]: %.6g vs %.6g", j,
               fd, (double)dr[j]);
    }
}

/* ---- the aux-loss-free bias update ---- */

static void test_bias_update(void)
{
    /* 4 experts, 6 tokens x top-2 = 12 choices, average load 3: counts
     * [5, 3, 1, 3] -> signs [-1, 0, +1, 0] times the rate */
    float b[4] = { 0.5f, -0.25f, 0.0f, 1.0f };
    const double counts[4] = { 5, 3, 1, 3 };
    tr_bias_step(b, counts, 4, 6.0 * 2.0 / 4.0, 0.01);
    NEAR(b[0], 0.49);
    NEAR(b[1], -0.25);
    NEAR(b[2], 0.01);
    NEAR(b[3], 1.0);
}

/* ---- 5. refused keys ---- */

static void expect_refused(const char *ov, const char *needle)
{
    smoe_recipe r;
    smoe_err e;
    const char *o[] = { ov };
    smoe_status s = recipe(o, 1, 10, &r, &e);
    CHECKF(s == SMOE_EINVAL && strstr(e.msg, needle) && strstr(e.where, "argument"),
           "%s: status %d, message '%s' (where '%s')", ov, (int)s, s ? e.msg : "", e.where);
}

static void expect_accepted(const char *ov)
{
    smoe_recipe r;
    smoe_err e;
    const char *o[] = { ov };
    smoe_status s = recipe(o, 1, 10, &r, &e);
    CHECKF(s == SMOE_OK, "%s: refused: %s", ov, s ? e.msg : "");
}

static void test_refused(void)
{
    expect_refused("opt_type=sgd", "opt_type: smoe train implements only opt_type: adamw");
    expect_refused("dtype=bfloat16", "implements only dtype: float32");
    expect_refused("weight_dtype=bfloat16", "weight_dtype");
    expect_refused("grad_dtype=bfloat16", "grad_dtype");
    expect_refused("mu_dtype=bfloat16", "mu_dtype: \"\" or float32");
    expect_refused("quantization=int8", "quantization");
    expect_refused("gradient_accumulation_steps=2", "gradient_accumulation_steps: 1");
    expect_refused("dropout_rate=0.1", "implements only dropout_rate: 0");
    expect_refused("skip_step_on_spikes=true", "skip_step_on_spikes: false");
    expect_refused("trainable_parameters_mask=[embed]", "trainable_parameters_mask: []");
    expect_refused("mtp_num_layers=1", "mtp_num_layers: 0");
    expect_refused("use_indexer=true", "use_indexer");
    expect_refused("use_qk_clip=true", "use_qk_clip");
    expect_refused("n_routing_groups=4", "n_routing_groups: -1");
    expect_refused("use_random_routing=true", "use_random_routing");
    expect_refused("first_num_hash_layers=1", "first_num_hash_layers");
    expect_refused("final_logits_soft_cap=30.0", "final_logits_soft_cap: 0");
    expect_refused("training_objective=block_diffusion", "training_objective");
    expect_refused("use_sft=true", "use_sft");
    expect_refused("engram_layers=[1]", "engram_layers");
    expect_refused("mlp_activations_limit=7.0", "mlp_activations_limit");
    expect_accepted("mlp_activations_limit=-1.0");
    expect_accepted("mu_dtype=float32");
    expect_accepted("enable_dropout=false");
    expect_accepted("num_vocab_tiling=4");  /* no effect: the same loss */
    expect_accepted("scan_layers=false");
    expect_accepted("remat_policy=minimal");
    /* dropout is off with enable_dropout false, as in train.py */
    smoe_recipe r;
    smoe_err e;
    const char *off[] = { "enable_dropout=false", "dropout_rate=0.1" };
    CHECK(recipe(off, 2, 10, &r, &e) == SMOE_OK);
    const char *sp[] = { "weight_sparsity_n=2", "weight_sparsity_m=4" };
    CHECK(recipe(sp, 2, 10, &r, &e) == SMOE_EINVAL && strstr(e.msg, "weight_sparsity_n"));
    const char *sp1[] = { "weight_sparsity_n=2" };
    CHECK(recipe(sp1, 1, 10, &r, &e) == SMOE_OK);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_recipe CONFIG_DIR\n");
        return 2;
    }
    g_dir = argv[1];
    test_schedule();
    test_adamw();
    test_rope();
    test_zloss();
    test_bias_update();
    test_refused();
    recipe_done();
    return check_report();
}
