/* Oracles for the model module (expert parallelism: test_model_ep.c).
 *
 * 1. Finite differences: the loss of a tiny model (embed -> 1 dense + 2 MoE
 *    layers -> head, loss = mean CE) against the analytic gradient of every
 *    weight slot in use, for five variants (softmax router with q_lora,
 *    plain query, sigmoid scores with routed bias, softmax with a capacity
 *    that drops pairs, and MoE layers only without shared experts, top-1,
 *    65 tokens so the head runs in two chunks). Per tensor, the entry of largest |g| and two random
 *    entries are checked. Scheme: the central difference
 *    (L(w+h) - L(w-h)) / (w+h - (w-h)) in double of the fp32 loss, the
 *    denominator taken after rounding the perturbed weight to float, with
 *    h = 1e-2 (weights ~ 0.25): its truncation error h^2 L''' / 6 reaches
 *    ~5e-3 relative (measured), and the fp32 rounding of a loss of ~3 (~1e-7, measured)
 *    adds ~1e-5 absolute. A sample passes when
 *    |fd - g| <= FD_ATOL + FD_RTOL * max(|fd|, |g|), FD_ATOL = 3e-5,
 *    FD_RTOL = 1e-2: over 30 seeds the worst sample used half of that, and
 *    each deliberate gradient bug tried (a missing term of the sigmoid
 *    renormalisation, RoPE backward turning the wrong way, k_pe's gradient
 *    from one head only, a missing combine weight) fails hundreds of
 *    samples. A perturbation that changes a top-k choice makes the loss
 *    non-smooth: the sample is retried with h / 10 (FD_ATOL x 10), then
 *    skipped and counted; skips must stay under 20 %. The gate bias only
 *    selects: its gradient must stay zero and, without a flip, moving it
 *    must leave the loss bit-identical. FD_DEBUG=1 prints every sample.
 * 2. smoe_model_new rejects bad configurations; allocation failures clean
 *    up; the slot tables are consistent.
 * 3. The kernel table: smoe_model_new runs on the CPU table; a model built
 *    by smoe_model_new_on on a copy of it whose GEMM entries count their
 *    calls (stream NULL) calls them and takes a step bitwise equal to the
 *    default model's (loss and every gradient); no table is refused. That
 *    each CPU entry is bitwise its kernels.h function: test_kops.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "model_testlib.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double FD_H = 1e-2;
static const double FD_ATOL = 3e-5;
static const double FD_RTOL = 1e-2;

/* Whether every MoE layer made the top-k choices saved in ref. */
static int same_topk(const smoe_model *m, const int32_t *ref)
{
    const smoe_model_cfg *c = smoe_model_config(m);
    const int64_t tk = c->batch * c->seq * c->topk;
    for (int64_t l = c->n_dense; l < c->n_dense + c->n_moe; l++)
        if (memcmp(ref + (l - c->n_dense) * tk, smoe_model_topk(m, (int)l),
                   (size_t)tk * sizeof *ref))
            return 0;
    return 1;
}

/* ---- 1. finite differences ---- */

typedef struct fd_tally {
    int checked, retried, skipped, failed;
    double worst; /* largest |fd - g| / (FD_ATOL + FD_RTOL max(|fd|, |g|)) */
} fd_tally;

/* Central difference of the loss in entry k of p with step h; sets *flip
 * when either side changes a top-k choice. */
static double central(job *j, float *p, int64_t k, double h,
                      const int32_t *topk0, int *flip, double *lp, double *lm)
{
    const float orig = p[k];
    p[k] = (float)(orig + h);
    const double wp = p[k];
    job_run(j);
    *lp = j->loss;
    *flip = !same_topk(j->m, topk0);
    p[k] = (float)(orig - h);
    const double wm = p[k];
    job_run(j);
    *lm = j->loss;
    *flip |= !same_topk(j->m, topk0);
    p[k] = orig;
    return (*lp - *lm) / (wp - wm);
}

/* Check entry k of tensor p (gradient g) by central differences: step
 * FD_H, or FD_H / 10 if that flips a top-k choice (with the rounding term
 * of the tolerance 10x larger), else skip. */
static void fd_entry(job *j, float *p, const float *g, int64_t k,
                     const int32_t *topk0, const char *what, int bias,
                     fd_tally *ty)
{
    double lp, lm, h = FD_H, atol = FD_ATOL;
    int flip;
    double fd = central(j, p, k, h, topk0, &flip, &lp, &lm);
    if (flip) {
        h /= 10.0;
        atol *= 10.0;
        ty->retried++;
        fd = central(j, p, k, h, topk0, &flip, &lp, &lm);
    }
    if (flip) {
        ty->skipped++;
        return;
    }
    const double an = g[k];
    ty->checked++;
    if (bias) { /* selection only: the loss must not move at all */
        CHECKF(lp == lm && an == 0.0, "%s[%lld]: gate bias changed the loss "
               "(fd %.3e, grad %.3e)", what, (long long)k, fd, an);
        return;
    }
    double tol = atol + FD_RTOL * fmax(fabs(fd), fabs(an));
    double r = fabs(fd - an) / tol;
    if (getenv("FD_DEBUG"))
        fprintf(stderr, "%-70s fd %+.6e an %+.6e diff %.2e h %g\n", what, fd, an,
                fabs(fd - an), h);
    if (r > ty->worst)
        ty->worst = r;
    if (r > 1.0)
        ty->failed++;
    CHECKF(r <= 1.0, "%s[%lld]: finite difference %.6e, analytic %.6e (step %g)",
           what, (long long)k, fd, an, h);
}

static void fd_tensor(job *j, float *p, const float *g, int64_t n,
                      const int32_t *topk0, const char *what, int bias,
                      rng *r, fd_tally *ty)
{
    int64_t best = 0;
    for (int64_t k = 1; k < n; k++)
        if (fabsf(g[k]) > fabsf(g[best]))
            best = k;
    int64_t ks[3] = { best, rng_below(r, n), rng_below(r, n) };
    for (int i = 0; i < 3; i++)
        fd_entry(j, p, g, ks[i], topk0, what, bias, ty);
}

static void test_fd(const char *name, smoe_model_cfg cfg, uint64_t seed)
{
    rng r = { seed };
    wset W, G;
    wset_alloc(&W, &cfg);
    wset_alloc(&G, &cfg);
    wset_random(&W, &r);
    const int64_t T = cfg.batch * cfg.seq;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    random_tokens(tok, T, cfg.vocab, &r);
    random_tokens(tgt, T, cfg.vocab, &r);
    int32_t *topk0 = malloc((size_t)(cfg.n_moe * T * cfg.topk) * sizeof *topk0);

    smoe_model *m = NULL;
    smoe_err err;
    CHECK(smoe_model_new(&cfg, &m, &err) == SMOE_OK);
    if (!m)
        goto out;
    job j;
    job_init(&j, m, &W, 0, &G, tok, tgt, 1.0f / (float)T);
    job_run(&j);
    CHECKF(j.st == SMOE_OK, "%s: step failed: %s", name, j.err.msg);
    const double loss0 = j.loss;
    CHECKF(isfinite(loss0) && loss0 > 0.0, "%s: loss %g", name, loss0);
    save_topk(m, topk0);
    smoe_model_stats st = smoe_model_stats_get(m);
    CHECK_INT(st.routed, cfg.n_moe * T * cfg.topk);
    if (cfg.capacity_factor > 0.0f)
        CHECKF(st.dropped > 0, "%s: the capacity should drop pairs", name);
    else
        CHECK_INT(st.dropped, 0);

    /* the bias only selects unless it is in the weights or feeds the
     * load-balance loss */
    const int sel_only = !cfg.bias_in_weights && cfg.lb_weight == 0.0f;
    if (cfg.lb_weight > 0.0f)
        CHECKF(st.aux_loss > 0.0, "%s: no load-balance loss", name);
    if (cfg.z_loss > 0.0f)
        CHECKF(st.z_loss > 0.0, "%s: no z-loss", name);
    j.g = NULL; /* from here on: the loss only */
    fd_tally ty = { 0, 0, 0, 0, 0.0 };
    char what[160];
    for (int l = 0; l < W.nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            if (!W.w[l][i])
                continue;
            snprintf(what, sizeof what, "%s: layer %d %s", name, l,
                     smoe_wslot_path((smoe_wslot)i));
            fd_tensor(&j, W.w[l][i], G.w[l][i], W.n[l][i], topk0, what,
                      i == SMOE_W_GATE_BIAS && sel_only, &r, &ty);
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        snprintf(what, sizeof what, "%s: %s", name, smoe_tslot_path((smoe_tslot)i));
        fd_tensor(&j, W.t[i], G.t[i], W.tn[i], topk0, what, 0, &r, &ty);
    }
    /* a selection-only gate bias gets no gradient */
    for (int l = 0; l < W.nl; l++)
        if (sel_only && G.w[l][SMOE_W_GATE_BIAS])
            for (int64_t k = 0; k < G.n[l][SMOE_W_GATE_BIAS]; k++)
                CHECK(G.w[l][SMOE_W_GATE_BIAS][k] == 0.0f);
    /* skips (top-k flips) must be rare, or the check means little */
    CHECKF(ty.skipped * 5 <= ty.checked, "%s: %d of %d samples skipped", name,
           ty.skipped, ty.checked + ty.skipped);
    printf("fd %-22s loss %.6f: %d samples (%d with the small step), %d skipped "
           "(top-k flip), %d failed, worst error %.2f of tolerance\n",
           name, loss0, ty.checked, ty.retried, ty.skipped, ty.failed, ty.worst);
    job_free(&j);
out:
    smoe_model_free(m);
    free(topk0);
    free(tok);
    free(tgt);
    wset_free(&W);
    wset_free(&G);
}

/* The load-balance loss by hand (MaxText moe.py load_balance_loss): with a
 * zero gate every gate value is the same, softmax(g) = 1/E everywhere, and
 * each sequence's densities sum to K, so each MoE layer's loss is
 * weight * E^2 * mean over (B, E) of density / E = weight * K * batch / B,
 * whatever the routing; the mean over layers is the same. */
static void test_lb_hand(int raw)
{
    smoe_model_cfg cfg = tiny_cfg(8, 0);
    cfg.score_raw = raw;
    cfg.lb_weight = 0.5f;
    cfg.lb_batch = 2 * cfg.batch; /* this rank's sequences are half the batch */
    rng r = { 31 };
    wset W;
    wset_alloc(&W, &cfg);
    wset_random(&W, &r);
    for (int l = 0; l < W.nl; l++)
        if (W.w[l][SMOE_W_GATE])
            memset(W.w[l][SMOE_W_GATE], 0, (size_t)W.n[l][SMOE_W_GATE] * sizeof(float));
    const int64_t T = cfg.batch * cfg.seq;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    random_tokens(tok, T, cfg.vocab, &r);
    random_tokens(tgt, T, cfg.vocab, &r);
    smoe_model *m = NULL;
    smoe_err err;
    CHECK(smoe_model_new(&cfg, &m, &err) == SMOE_OK);
    if (m) {
        job j;
        job_init(&j, m, &W, 0, NULL, tok, tgt, 1.0f / (float)T);
        job_run(&j);
        double aux = smoe_model_stats_get(m).aux_loss;
        double want = 0.5 * (double)cfg.topk * 0.5;
        CHECKF(fabs(aux - want) <= 1e-6, "load-balance loss %s %.9g, by hand %.9g",
               raw ? "raw" : "softmax", aux, want);
        job_free(&j);
    }
    smoe_model_free(m);
    free(tok);
    free(tgt);
    wset_free(&W);
}

/* ---- 2. configuration checks, allocation failures, slot tables ---- */

static void expect_bad(smoe_model_cfg c, const char *needle)
{
    smoe_model *m = NULL;
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_status st = smoe_model_new(&c, &m, &err);
    CHECKF(st == SMOE_EINVAL && !m, "config should be rejected (%s)", needle);
    CHECKF(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    smoe_model_free(m);
}

static void test_config(void)
{
    smoe_model_cfg c = tiny_cfg(8, 0);
    smoe_model *m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK && m);
    if (m) {
        CHECK(smoe_model_act_bytes(m) > 0);
        CHECK(smoe_model_config(m)->emb == 16);
        CHECK(smoe_model_topk(m, 0) == NULL && smoe_model_topk(m, 1) != NULL);
        /* a layer run without its forward, or with the wrong group size */
        smoe_ep_comm self = smoe_ep_comm_self();
        const float *w[SMOE_W_NSLOTS] = { NULL };
        float *dw[SMOE_W_NSLOTS] = { NULL };
        float x[1] = { 0 };
        smoe_err err;
        CHECK(smoe_model_layer_fwd(m, 0, w, x, &self, &err) == SMOE_EINVAL);
        CHECK(strstr(err.msg, "missing") != NULL);
        CHECK(smoe_model_layer_bwd(m, 3, w, dw, x, &self, &err) == SMOE_EINVAL);
        smoe_model_free(m);
    }

    c = tiny_cfg(8, 0);
    c.ep = 3;
    expect_bad(c, "divisible");
    c = tiny_cfg(8, 0);
    c.qk_rope = 3;
    expect_bad(c, "even");
    c = tiny_cfg(8, 0);
    c.topk = 5;
    expect_bad(c, "topk");
    c = tiny_cfg(8, 0);
    c.emb = 0;
    expect_bad(c, "emb");
    c = tiny_cfg(8, 0);
    c.q_lora = -1;
    expect_bad(c, "q_lora");
    c = tiny_cfg(8, 0);
    c.rope_theta = 0.0f;
    expect_bad(c, "rope_theta");

    /* a model of ep = 2 refuses the single-rank group */
    c = tiny_cfg(8, 0);
    c.ep = 2;
    rng r = { 7 };
    wset W;
    wset_alloc(&W, &c);
    wset_random(&W, &r);
    m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK);
    if (m) {
        job j;
        int32_t tok[10] = { 0 };
        job_init(&j, m, &W, 0, NULL, tok, tok, 1.0f);
        job_run(&j);
        CHECK(j.st == SMOE_EINVAL && strstr(j.err.msg, "ep = 2") != NULL);
        job_free(&j);
        smoe_model_free(m);
    }
    wset_free(&W);

    /* a dense-only model needs no experts and no expert group */
    c = tiny_cfg(0, 0);
    c.n_moe = 0;
    c.experts = 0;
    c.topk = 0;
    c.moe_mlp = 0;
    wset_alloc(&W, &c);
    wset G;
    wset_alloc(&G, &c);
    wset_random(&W, &r);
    m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK);
    if (m) {
        job j;
        int32_t tok[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
        job_init(&j, m, &W, 0, &G, tok, tok, 0.1f);
        job_run(&j);
        CHECKF(j.st == SMOE_OK && isfinite(j.loss), "dense-only: %s", j.err.msg);
        CHECK(G.t[SMOE_T_EMBED][16] != 0.0f); /* token 1's row got a gradient */
        job_free(&j);
        smoe_model_free(m);
    }
    wset_free(&W);
    wset_free(&G);

    /* every allocation failure is reported and cleaned up */
    c = tiny_cfg(8, 0);
    int ok_at = 0;
    for (long n = 1; n < 100 && !ok_at; n++) {
        m = NULL;
        smoe_alloc_fail_after(n);
        smoe_status st = smoe_model_new(&c, &m, NULL);
        smoe_alloc_fail_after(0);
        if (st == SMOE_OK)
            ok_at = (int)n;
        else
            CHECKF(st == SMOE_ENOMEM && !m, "allocation failure %ld: status %d", n, st);
        smoe_model_free(m);
    }
    CHECK(ok_at > 1);

    /* slot tables */
    CHECK_STR(smoe_wslot_path(SMOE_W_WKV_A), "self_attention/wkv_a/kernel");
    CHECK_STR(smoe_wslot_path(SMOE_W_EXP_WO), "DeepSeekMoeBlock_0/MoeBlock_0/wo");
    CHECK_STR(smoe_wslot_path(SMOE_W_SH_WI1),
              "DeepSeekMoeBlock_0/shared_experts/wi_1/kernel");
    CHECK_STR(smoe_tslot_path(SMOE_T_LOGITS), "decoder/logits_dense/kernel");
    for (int i = 0; i < SMOE_W_NSLOTS; i++)
        CHECKF(smoe_wslot_path((smoe_wslot)i) != NULL, "slot %d has no path", i);
    c = tiny_cfg(8, 1);
    c.ep = 2;
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_EXP_WI0), 2 * 16 * 8);
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_WKV_B), 8 * 2 * 8);
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_WQ_B), 8 * 2 * 8);
    CHECK(smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 1) && !smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 0));
    CHECK(smoe_wslot_used(&c, SMOE_W_WQ_A, 0) && !smoe_wslot_used(&c, SMOE_W_QUERY, 1));
    CHECK(smoe_wslot_used(&c, SMOE_W_MLP_WO, 0) && !smoe_wslot_used(&c, SMOE_W_MLP_WO, 1));
    c.shared = 0;
    c.routed_bias = 0;
    CHECK(!smoe_wslot_used(&c, SMOE_W_SH_WI0, 1) && !smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 1));
}

/* ---- 3. the kernel table ---- */

static int spy_calls;
static void spy_gemm(void *stream, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                     float *c, int64_t ldc)
{
    spy_calls++;
    CHECK(stream == NULL);
    smoe_kops_cpu()->gemm(stream, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void spy_matmul(void *stream, float *y, const float *x, const float *w, int64_t t,
                       int64_t k, int64_t n, float beta)
{
    spy_calls++;
    CHECK(stream == NULL);
    smoe_kops_cpu()->matmul(stream, y, x, w, t, k, n, beta);
}

/* One step with gradients of the model on ops (NULL: smoe_model_new's). */
static double table_step(const smoe_model_cfg *cfg, const smoe_kops *ops, wset *W, wset *G)
{
    rng r = { 41 };
    const int64_t T = cfg->batch * cfg->seq;
    int32_t tok[64], tgt[64];
    SMOE_ASSERT(T <= 64);
    random_tokens(tok, T, cfg->vocab, &r);
    random_tokens(tgt, T, cfg->vocab, &r);
    smoe_model *m = NULL;
    smoe_err err;
    smoe_status st = ops ? smoe_model_new_on(cfg, ops, NULL, &m, &err)
                         : smoe_model_new(cfg, &m, &err);
    CHECK(st == SMOE_OK && m);
    if (!m)
        return NAN;
    CHECK(smoe_model_kops(m) == (ops ? ops : smoe_kops_cpu()));
    job j;
    job_init(&j, m, W, 0, G, tok, tgt, 1.0f / (float)T);
    job_run(&j);
    CHECK(j.st == SMOE_OK);
    job_free(&j);
    smoe_model_free(m);
    return j.loss;
}

static void test_table(void)
{
    smoe_model_cfg cfg = tiny_cfg(8, 1);
    smoe_model *m = NULL;
    smoe_err err;
    CHECK(smoe_model_new_on(&cfg, NULL, NULL, &m, &err) == SMOE_EINVAL && !m);
    CHECK(strstr(err.msg, "kernel table") != NULL);

    smoe_kops spy = *smoe_kops_cpu();
    spy.gemm = spy_gemm;
    spy.matmul = spy_matmul;
    rng r = { 40 };
    wset W, G0, G1;
    wset_alloc(&W, &cfg);
    wset_alloc(&G0, &cfg);
    wset_alloc(&G1, &cfg);
    wset_random(&W, &r);
    double l0 = table_step(&cfg, NULL, &W, &G0);
    double l1 = table_step(&cfg, &spy, &W, &G1);
    CHECKF(spy_calls > 0, "the model did not call the table it was built on");
    CHECKF(memcmp(&l0, &l1, sizeof l0) == 0, "loss %.17g on the table copy, %.17g", l1, l0);
    int diff = 0;
    for (int l = 0; l < G0.nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            if (G0.w[l][i])
                diff += memcmp(G0.w[l][i], G1.w[l][i], (size_t)G0.n[l][i] * sizeof(float)) != 0;
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        diff += memcmp(G0.t[i], G1.t[i], (size_t)G0.tn[i] * sizeof(float)) != 0;
    CHECKF(diff == 0, "%d gradients differ on the table copy", diff);
    wset_free(&W);
    wset_free(&G0);
    wset_free(&G1);
}

int main(void)
{
    smoe_blas_init(1, NULL); /* keep BLAS serial, as in test_model_ep */

    test_config();
    test_table();

    smoe_model_cfg c = tiny_cfg(8, 0);
    test_fd("softmax q_lora=8", c, 11);
    c = tiny_cfg(0, 0);
    test_fd("softmax q_lora=0", c, 12);
    c = tiny_cfg(8, 1);
    test_fd("sigmoid+bias", c, 13);
    c = tiny_cfg(8, 0);
    c.capacity_factor = 0.75f;
    test_fd("softmax capacity=0.75", c, 14);

    /* MoE only, no shared experts, top-1, T = 65 (two head chunks) */
    c = tiny_cfg(0, 1);
    c.n_dense = 0;
    c.shared = 0;
    c.topk = 1;
    c.batch = 13;
    test_fd("moe-only top-1 T=65", c, 15);

    /* MaxText's recipe: raw-logit router scores, a bias in the weights,
     * the load-balance loss and the z-loss; RoPE halves and YaRN with the
     * output scale and the MLA softmax factor */
    c = tiny_cfg(8, 0);
    c.score_raw = 1;
    c.routed_bias = 1;
    c.bias_in_weights = 1;
    c.z_loss = 1e-2f;
    test_fd("raw+bias-in-weights z", c, 16);
    c = tiny_cfg(8, 1);
    c.lb_weight = 0.5f;
    c.lb_batch = 3; /* as if another rank held more sequences */
    test_fd("sigmoid+bias lb", c, 17);
    c = tiny_cfg(0, 1);
    c.bias_in_weights = 1;
    c.lb_weight = 0.3f;
    c.z_loss = 3e-2f;
    test_fd("sigmoid+bias-in lb z", c, 18);
    c = tiny_cfg(8, 0);
    c.lb_weight = 0.2f;
    c.rope_halves = 1;
    c.rope = (smoe_rope_cfg){ 0, 1.0, 10000.0, 1.0, 0, 0, 0, 0, 0 };
    c.attn_scale_mult = 1.8738542f;
    test_fd("softmax lb rope-halves", c, 21);
    c = tiny_cfg(8, 1);
    c.rope = (smoe_rope_cfg){ 1, 1.0, 10000.0, 1.0, 40.0, 32.0, 1.0, 4.0, 1 };
    c.rope_scale = 1.3688879f;
    c.attn_scale_mult = 1.8738542f;
    test_fd("sigmoid yarn scaled", c, 20);
    test_lb_hand(0);
    test_lb_hand(1);

    return check_report();
}
