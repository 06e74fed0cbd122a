/* The step model's attention terms built from MaxText configurations, by
 * hand: gemma4's global layers at their own widths, the attention
 * kernel's blocks under masks and windows (attn_span.c), context
 * parallelism, splash's backward and its kernels' own blocks
 * (test_sim_model.c: the other terms).
 * usage: test_sim_attn CONFIG_DIR */
#include "sim_model_testlib.h"

/* gemma4's global layers by hand (gemma4-31b on tpu7x, 2048 tokens a
 * device; gemma4.py: a GLOBAL layer takes global_head_dim 512 and
 * global_num_kv_heads 4, and with share_kv_projections no value
 * projection; the 5 local layers of a block keep 256 and 16). A block's
 * forward against the same block with the global widths set to the
 * others' differs by its one global layer's: the query projection
 * 5376 -> 32 x 512 (from 32 x 256), the key's 4 x 512 (from 16 x 256),
 * no value projection (16 x 256), the output 32 x 512 -> 5376, at
 * gemm_efficiency; the kernel's 2 x 32 heads x 2048^2 x (2 x 512) x 0.5
 * FLOPs (from 2 x 256) over splash's blocks (T7_SPLASH) at
 * attention_efficiency; the elementwise pass over 32 x 512 x 6 (from
 * x 256) elements a token. The kind's share: 10 of 60 layers. */
static void test_global_heads(const char *cfgdir)
{
    char msg[512];
    const char *same[] = { "override_model_config=true", "global_head_dim=0",
                           "global_num_kv_heads=0", "share_kv_projections=false" };
    smoe_sim_model *g = build_model(cfgdir, "gemma4-31b", NULL, 0, msg, sizeof msg);
    smoe_sim_model *o = build_model(cfgdir, "gemma4-31b", same, 4, msg, sizeof msg);
    CHECKF(g && o, "built: %s", msg);
    if (g && o) {
        const double T = 2048, E = 5376, mm = 2 * T * E / (T7_PEAK * 0.85);
        const double proj = mm * (32.0 * 256 + (4 * 512 - 16 * 256) - 16 * 256 + 32 * 256);
        const double kern = 2.0 * 32 * T * T * (1024 - 512) * 0.5 * T7_SPLASH / (T7_PEAK * T7_ATT);
        const double elem = T7_EW(T * 32 * 256 * 6, 1);
        double d = g->k[0].fwd_pre - o->k[0].fwd_pre, want = proj + kern + elem;
        CHECKF(fabs(d - want) < 1e-9 * want, "block forward +%g s, expected %g", d, want);
    }
    smoe_sim_model_free(g);
    smoe_sim_model_free(o);
    smoe_config *cfg = load_model(cfgdir, "gemma4-31b", NULL, 0);
    smoe_dims dm;
    smoe_err err;
    sim_attn_mix a;
    CHECK(cfg && smoe_plan_dims(cfg, &dm, &err) == SMOE_OK &&
          sim_attention_span(cfg, &dm, 2048, &a, &err) == SMOE_OK);
    CHECKF(fabs(a.share - 10.0 / 60) < 1e-12 && a.head_dim[1] == 512 && a.kv_heads[1] == 4 &&
               a.no_value[1] && a.head_dim[0] == 256 && a.kv_heads[0] == 16 && !a.no_value[0],
           "share %g, global %lld x %lld", a.share, (long long)a.head_dim[1],
           (long long)a.kv_heads[1]);
    smoe_config_free(cfg);
}

/* The attention kernel's blocks by hand (attn_span.c), 1024 x 1024 blocks
 * over 4096 tokens: a causal mask leaves 1 + 2 + 3 + 4 = 10 blocks; a
 * window of 1024 (gemma3-12b) or 128 (gpt-oss-120b) keys 1 + 2 + 2 + 2 = 7
 * (a query block and the one before it). gemma3: 5 sliding layers in 6
 * (48 layers: 40 + 8), so (40 x 7 + 8 x 10) / (48 x 10); gpt-oss: 1 in 2.
 * llama4 (chunks of 8192, every 4th layer global) over 16384 tokens in
 * 2048-blocks: causal 1 + ... + 8 = 36, chunked 2 x (1 + 2 + 3 + 4) = 20;
 * over 8192 tokens one chunk is causal. A causal model is 1.
 * Splash's pairs (the second figure) over a causal mask's S^2 / 2: the
 * blocks times their area, 10 x 1024^2 / (4096^2 / 2) = 1.25 for a causal
 * layer, 7 / 8 for the windows; llama4 at 16384 tokens 36 x 2048^2 /
 * (16384^2 / 2) = 1.125 causal, 20 / 32 chunked; at 8192, 1.25. gemma3's
 * sliding layers in local_sa_block_q/kv of 512 (the global ones keep
 * 1024): a window of 1024 keys leaves 1 + 2 + 3 x 6 = 21 blocks of 512^2,
 * 21 / 32 of 4096^2 / 2. Blocks beyond the sequence shrink to it
 * (attention_op.py min(block, seq)): 256 tokens in one 256^2 block, 2. */
static void test_attention_span(const char *cfgdir)
{
    static const struct {
        const char *model, *ov[4];
        double S, want, pairs;
    } t[] = {
        { "gemma3-12b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, (40.0 * 7 + 8 * 10) / 480,
          (40 * 0.875 + 8 * 1.25) / 48 },
        { "gemma3-12b",
          { "sa_block_q=1024", "sa_block_kv=1024", "local_sa_block_q=512", "local_sa_block_kv=512" },
          4096, (40.0 * 7 + 8 * 10) / 480, (40 * 21.0 / 32 + 8 * 1.25) / 48 },
        { "gpt-oss-120b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, (7.0 + 10) / 20,
          (0.875 + 1.25) / 2 },
        { "llama4-17b-16e", { "sa_block_q=2048", "sa_block_kv=2048" }, 16384,
          (36.0 * 20 + 12 * 36) / (48 * 36), (36 * 0.625 + 12 * 1.125) / 48 },
        { "llama4-17b-16e", { "sa_block_q=2048", "sa_block_kv=2048" }, 8192, 1, 1.25 },
        { "llama3.1-8b", { "sa_block_q=1024", "sa_block_kv=1024" }, 4096, 1, 1.25 },
        { "llama3.1-8b", { "sa_block_q=1024", "sa_block_kv=1024" }, 256, 1, 2 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int n = 0;
        while (n < 4 && t[i].ov[n])
            n++;
        smoe_config *cfg = load_model(cfgdir, t[i].model, t[i].ov, n);
        smoe_dims d;
        smoe_err err;
        sim_attn_mix a;
        double got[2] = { -1, -1 };
        CHECK(cfg && smoe_plan_dims(cfg, &d, &err) == SMOE_OK &&
              sim_attention_span(cfg, &d, t[i].S, &a, &err) == SMOE_OK);
        /* the means over every layer (no gemma4 here: one kind) */
        got[0] = (1 - a.share) * a.span[0] + a.share * a.span[1];
        got[1] = (1 - a.share) * a.pairs[0][0] + a.share * a.pairs[1][0];
        CHECKF(a.share == 0, "%s: %g of the layers a kind of their own", t[i].model, a.share);
        CHECKF(fabs(got[0] - t[i].want) < 1e-12, "%s at %g tokens: %g, expected %g", t[i].model,
               t[i].S, got[0], t[i].want);
        CHECKF(fabs(got[1] - t[i].pairs) < 1e-12, "%s at %g tokens: pairs %g, expected %g",
               t[i].model, t[i].S, got[1], t[i].pairs);
        smoe_config_free(cfg);
    }
}

/* Context parallelism by hand (deepseek2-16b on tpu7x, EP 2, context 2 of
 * 16 devices): a device's 2048 tokens of a 4096-token sequence cost the
 * projections of 2048 tokens alone (the same as one 2048-token sequence)
 * and twice the attention kernel (its keys span the whole sequence, in 36
 * blocks of 512 x 512 against 10), plus
 * the keys' and values' all-gather over the pair: 2048 x 16 x (192 + 128)
 * bf16 elements from the other member, at 1.2e12 / 2 / 2 bytes/s a device
 * and 1 us a torus step (3 x (cbrt(2) - 1) steps for 2 members). The
 * backward: the kernel's extra recomputed (full remat) and in splash's
 * split backward (test_attn_bwd: 3.6 x the forward), the exchange twice
 * (the recompute's gather, the gradients' reduce-scatter). A shape whose
 * context is not the mesh's is refused. */
static void test_context(const char *cfgdir)
{
    char msg[512];
    const char *ctx[] = { "ici_context_parallelism=2" };
    smoe_sim_shape a = { .batch = 1, .seq = 4096, .context = 2 };
    smoe_sim_shape b = { .batch = 1, .seq = 2048 };
    smoe_sim_model *ma = build_shape(cfgdir, "deepseek2-16b", ctx, 1, a, msg, sizeof msg);
    smoe_sim_model *mb = build_shape(cfgdir, "deepseek2-16b", NULL, 0, b, msg, sizeof msg);
    CHECKF(ma && mb, "built: %s", msg);
    if (ma && mb) {
        /* 4096 tokens in 512-blocks: 36 blocks of 64 (1.125 of the
         * pairs), half a sequence's queries a device */
        const double one = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 / (T7_PEAK * T7_ATT);
        const double kernel = one * (2 * 1.125 - T7_SPLASH);
        const double cp = 2048.0 * 16 * 320 * 2 / (1.2e12 / 4) + 3 * (cbrt(2.0) - 1) * 1e-6;
        for (int k = 0; k < 2; k++) {
            double df = ma->k[k].fwd_pre - mb->k[k].fwd_pre;
            double db = ma->k[k].bwd_pre - mb->k[k].bwd_pre;
            CHECKF(fabs(df - (kernel + cp)) < 1e-9, "kind %d: forward +%g, expected %g + %g", k,
                   df, kernel, cp);
            CHECKF(fabs(db - (4.6 * kernel + 2 * cp)) < 1e-9, "kind %d: backward +%g, expected %g",
                   k, db, 4.6 * kernel + 2 * cp);
            CHECKF(NEAR(ma->k[k].fwd_exp, mb->k[k].fwd_exp), "kind %d: the experts' tokens", k);
        }
    }
    smoe_sim_model_free(ma);
    smoe_sim_model_free(mb);
    a.context = 1;
    CHECK(build_shape(cfgdir, "deepseek2-16b", ctx, 1, a, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "must be the mesh's context axis (2)") != NULL, "'%s'", msg);
}

/* Splash attention's backward by hand (deepseek2-16b on tpu7x: MLA, 16
 * heads, query-key width 192, value 128, 2048 tokens, the kernel at
 * attention_efficiency over splash's blocks; jax splash_attention_kernel.py): the forward's two
 * matmuls over the score blocks weigh 192 + 128; the split backward
 * (base.yml sa_use_fused_bwd_kernel false) 4 x 192 + 3 x 128, 3.6 x the
 * forward; the fused one, and tokamax's splash, 3 x 192 + 2 x 128, 2.6 x;
 * the forward unchanged. */
static void test_attn_bwd(const char *cfgdir)
{
    char msg[512];
    const char *fused[] = { "sa_use_fused_bwd_kernel=true" }, *tok[] = { "use_tokamax_splash=true" };
    smoe_sim_model *sp = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *fu = build_keys(cfgdir, fused, 1, msg, sizeof msg);
    smoe_sim_model *tk = build_keys(cfgdir, tok, 1, msg, sizeof msg);
    CHECKF(sp && fu && tk, "built: %s", msg);
    if (sp && fu && tk) {
        const double kernel = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 * T7_SPLASH / (T7_PEAK * T7_ATT);
        for (int k = 0; k < 2; k++) {
            double d = sp->k[k].bwd_pre - fu->k[k].bwd_pre;
            CHECKF(fabs(d - kernel) < 1e-12, "kind %d: split - fused %g, expected %g", k, d,
                   kernel);
            CHECKF(NEAR(sp->k[k].fwd_pre, fu->k[k].fwd_pre) &&
                       NEAR(tk->k[k].bwd_pre, fu->k[k].bwd_pre),
                   "kind %d: the forward unchanged, tokamax's splash fused", k);
        }
    }
    smoe_sim_model_free(sp);
    smoe_sim_model_free(fu);
    smoe_sim_model_free(tk);
}

/* Splash's backward kernels at their own blocks by hand (deepseek2-16b on
 * tpu7x, 2048 tokens, T7_SPLASH's 512-blocks elsewhere): 1024 x 1024
 * blocks leave 1 + 2 = 3 of 4 under a causal mask, 3 x 1024^2 / (2048^2 /
 * 2) = 1.5 of the pairs. The fused backward's dkv kernel, 2.6 forward
 * matmuls (test_attn_bwd), at 1.5 for 1.25; the split backward's dq
 * kernel, (2 x 192 + 128) / 320 = 1.6 of them, likewise; the forward
 * unchanged. */
static void test_bwd_blocks(const char *cfgdir)
{
    char msg[512];
    const char *fu[] = { "sa_use_fused_bwd_kernel=true" };
    const char *fb[] = { "sa_use_fused_bwd_kernel=true", "sa_block_q_dkv=1024",
                         "sa_block_kv_dkv=1024" };
    const char *sb[] = { "sa_block_q_dq=1024", "sa_block_kv_dq=1024" };
    smoe_sim_model *f0 = build_keys(cfgdir, fu, 1, msg, sizeof msg);
    smoe_sim_model *f1 = build_keys(cfgdir, fb, 3, msg, sizeof msg);
    smoe_sim_model *s0 = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *s1 = build_keys(cfgdir, sb, 2, msg, sizeof msg);
    CHECKF(f0 && f1 && s0 && s1, "built: %s", msg);
    if (f0 && f1 && s0 && s1) {
        const double one = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 / (T7_PEAK * T7_ATT);
        for (int k = 0; k < 2; k++) {
            double df = f1->k[k].bwd_pre - f0->k[k].bwd_pre, wf = one * 2.6 * (1.5 - T7_SPLASH);
            double ds = s1->k[k].bwd_pre - s0->k[k].bwd_pre, ws = one * 1.6 * (1.5 - T7_SPLASH);
            CHECKF(fabs(df - wf) < 1e-9 * wf && fabs(ds - ws) < 1e-9 * ws,
                   "kind %d: dkv +%g (expected %g), dq +%g (expected %g)", k, df, wf, ds, ws);
            CHECK(NEAR(f1->k[k].fwd_pre, f0->k[k].fwd_pre) && NEAR(s1->k[k].fwd_pre, s0->k[k].fwd_pre));
        }
    }
    smoe_sim_model_free(f0);
    smoe_sim_model_free(f1);
    smoe_sim_model_free(s0);
    smoe_sim_model_free(s1);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_sim_attn CONFIG_DIR\n");
        return 2;
    }
    test_attention_span(argv[1]);
    test_context(argv[1]);
    test_attn_bwd(argv[1]);
    test_bwd_blocks(argv[1]);
    test_global_heads(argv[1]);
    return check_report();
}
