/* The step model's terms built from MaxText configurations, by hand:
 * vocabulary tiling, scannable and interleaved blocks, unscanned layers, tensor
 * parallelism, MLP activations, custom remat, fp8, the dense/attention
 * efficiency split, the dense expert path, ring of experts, tokamax's
 * tiles and the experts' layout (test_sim_attn.c: the attention's terms;
 * test_sim.c: the executors on hand-built models).
 * usage: test_sim_model CONFIG_DIR */
#include "sim_model_testlib.h"

/* num_vocab_tiling (MaxText vocab_tiling_linen_loss): one tile's logits
 * live at a time (a quarter with 4 tiles), the head costs one more
 * forward dot (the backward's recompute) in dots of a quarter of the
 * rows; a count that does not divide the tokens is refused. */
static void test_vocab_tiling(const char *cfgdir)
{
    char msg[512];
    smoe_sim_model *one = build_with(cfgdir, NULL, msg, sizeof msg);
    smoe_sim_model *four = build_with(cfgdir, "num_vocab_tiling=4", msg, sizeof msg);
    CHECKF(one && four, "built: %s", msg);
    if (one && four) {
        CHECKF(NEAR(four->logits_bytes * 4, one->logits_bytes), "logits %g vs %g / 4",
               four->logits_bytes, one->logits_bytes);
        /* 3 dots become 4 (quarter-row dots take at least a quarter's time) */
        CHECKF(four->head_s > one->head_s * 4 / 3 * 0.99 && four->head_s < one->head_s * 2,
               "head %g s with 4 tiles, %g s whole", four->head_s, one->head_s);
        CHECKF(NEAR(four->k[1].fwd_pre, one->k[1].fwd_pre), "the layers unchanged");
    }
    smoe_sim_model_free(one);
    smoe_sim_model_free(four);
    CHECK(build_with(cfgdir, "num_vocab_tiling=3", msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "num_vocab_tiling = 3: MaxText cuts a device's 2048 tokens") != NULL,
           "'%s'", msg);
}

/* A scannable block (gemma4-31b: 10 stacked blocks of 6 decoder layers,
 * a global one and 5 local ones) times 6 layers' compute a unit, beside
 * the same dimensions as 60 plain layers (decoder_block llama2); the
 * gathers stay the block's. The global layer's own widths are the
 * compute's only difference (test_global_heads): set to the others'. */
static void test_scannable_block(const char *cfgdir)
{
    char msg[512];
    /* no sliding window: every layer's attention causal (test_attention_span) */
    const char *block[] = { "override_model_config=true", "sliding_window_size=0",
                            "global_head_dim=0", "global_num_kv_heads=0",
                            "share_kv_projections=false" };
    const char *plain[] = { "override_model_config=true", "sliding_window_size=0",
                            "decoder_block=llama2" };
    smoe_sim_model *b = build_model(cfgdir, "gemma4-31b", block, 5, msg, sizeof msg);
    smoe_sim_model *p = build_model(cfgdir, "gemma4-31b", plain, 3, msg, sizeof msg);
    CHECKF(b && p, "built: %s", msg);
    if (b && p) {
        CHECK_INT(b->L, 10);
        CHECK_INT(p->L, 60);
        CHECKF(fabs(b->k[0].fwd_pre - 6 * p->k[0].fwd_pre) < 1e-9 * b->k[0].fwd_pre &&
                   fabs(b->k[0].bwd_pre - 6 * p->k[0].bwd_pre) < 1e-9 * b->k[0].bwd_pre,
               "block forward %g backward %g, layer %g %g", b->k[0].fwd_pre, b->k[0].bwd_pre,
               p->k[0].fwd_pre, p->k[0].bwd_pre);
        CHECKF(NEAR(b->k[0].act_input, p->k[0].act_input), "the block input once");
        /* 6 layers' weights (gemma4's norms and scalars aside: within
         * 0.1 %) */
        CHECKF(fabs(b->k[0].bytes - 6 * p->k[0].bytes) < 1e-3 * b->k[0].bytes,
               "block gathers %g bytes, layer %g", b->k[0].bytes, p->k[0].bytes);
    }
    smoe_sim_model_free(b);
    smoe_sim_model_free(p);
}

#define REL(a, b) (fabs((a) - (b)) <= 1e-9 * fabs(b))

/* A block that interleaves dense and MoE layers (llama4-17b-128e: 12
 * blocks of 4 layers, interleave_moe_layer_step 2, so layers_1 and
 * layers_3 are MoE, layers_0 and layers_2 dense MLPs of base_mlp_dim;
 * llama4.py determine_is_moe_layer). Its unit is 2 MoE layers (a quarter
 * of the all-MoE block's, interleave_moe_layer_step 1) and 2 dense layers
 * (a quarter of kind 0's 4), never 4 MoE layers: the experts' phase, the
 * exchanges and the dispatch are half the all-MoE block's; the phase
 * before them, its backward and the saved activations add up by layer. */
static void test_interleaved_block(const char *cfgdir)
{
    char msg[512];
    const char *all[] = { "override_model_config=true", "interleave_moe_layer_step=1" };
    smoe_sim_model *a = build_model(cfgdir, "llama4-17b-128e", NULL, 0, msg, sizeof msg);
    smoe_sim_model *m = build_model(cfgdir, "llama4-17b-128e", all, 2, msg, sizeof msg);
    CHECKF(a && m, "built: %s", msg);
    if (a && m) {
        const sim_kind *x = &a->k[1], *moe = &m->k[1], *dense = &a->k[0];
        CHECK_INT(a->L, 12);
        CHECK(a->kind_of[0] == 1 && a->kind_of[11] == 1);
        CHECKF(REL(x->fwd_exp, moe->fwd_exp / 2) && REL(x->bwd_exp, moe->bwd_exp / 2),
               "experts %g %g, all-MoE block %g %g", x->fwd_exp, x->bwd_exp, moe->fwd_exp,
               moe->bwd_exp);
        CHECKF(x->a2a_s > 0 && REL(x->a2a_s, moe->a2a_s / 2), "exchange %g, all-MoE %g",
               x->a2a_s, moe->a2a_s);
        CHECKF(REL(x->fwd_pre, moe->fwd_pre / 2 + dense->fwd_pre / 2) &&
                   REL(x->bwd_pre, moe->bwd_pre / 2 + dense->bwd_pre / 2) &&
                   REL(x->bwd_full_pre, moe->bwd_full_pre / 2 + dense->bwd_full_pre / 2),
               "pre %g (bwd %g), MoE layer %g, dense layer %g", x->fwd_pre, x->bwd_pre,
               moe->fwd_pre / 4, dense->fwd_pre / 4);
        /* the dense layers are the wider MLPs, not the MoE layer's router,
         * shared expert and half-width routed rows */
        CHECKF(dense->fwd_pre > moe->fwd_pre, "dense layers %g, MoE layers' pre %g",
               dense->fwd_pre, moe->fwd_pre);
        /* the recompute: the same seconds, by layer */
        CHECKF(REL(x->fwd_pre * x->rc[0],
                   moe->fwd_pre * moe->rc[0] / 2 + dense->fwd_pre * dense->rc[0] / 2),
               "recomputed %g", x->fwd_pre * x->rc[0]);
        CHECKF(REL(x->act_saved - x->act_input,
                   (moe->act_saved - moe->act_input) / 2 + (dense->act_saved - dense->act_input) / 2),
               "saved %g", x->act_saved);
        CHECKF(REL(x->act_input, moe->act_input), "the block input once");
    }
    smoe_sim_model_free(a);
    smoe_sim_model_free(m);
}

/* model (build_model) as it is (*a) and with the overrides ov[0..n) (*b);
 * 1 when both are built (a failed check otherwise). */
static int build_pair(const char *cfgdir, const char *model, const char *const *ov, int n,
                      smoe_sim_model **a, smoe_sim_model **b)
{
    char msg[512];
    *a = build_model(cfgdir, model, NULL, 0, msg, sizeof msg);
    *b = build_model(cfgdir, model, ov, n, msg, sizeof msg);
    CHECKF(*a && *b, "%s, %s: %s", model, ov[0], msg);
    return *a && *b;
}

/* Unscanned layers (unrolled.c). A dense model unscanned is the same step
 * model as scanned: llama3.1-8b's 32 layers_<i> modules become 32 layers
 * of one kind whose weights are the stacked ones. gemma4-e2b (35 layers,
 * the last num_kv_shared_layers = 20 twice as wide with
 * use_double_wide_mlp: gemma4_small.py) has a mean MLP width of
 * (15 x 6144 + 20 x 12288) / 35. Routed experts unscanned are refused.
 * The merge by hand: two layers' weights of one name, their mean. */
static void test_unrolled(const char *cfgdir)
{
    char msg[512];
    const char *off[] = { "scan_layers=false" };
    smoe_sim_model *sc, *un;
    if (build_pair(cfgdir, "llama3.1-8b", off, 1, &sc, &un)) {
        CHECK_INT(sc->L, 32);
        CHECK_INT(un->L, 32);
        CHECK_INT(un->k[0].nw, sc->k[0].nw);
        CHECKF(NEAR(un->k[0].fwd_pre, sc->k[0].fwd_pre) && NEAR(un->k[0].bwd_pre, sc->k[0].bwd_pre),
               "compute %g vs %g", un->k[0].fwd_pre, sc->k[0].fwd_pre);
        double pu = 0, ps = 0, ru = 0, rs = 0;
        for (int j = 0; j < un->k[0].nw && j < sc->k[0].nw; j++) {
            pu += un->k[0].w[j].pre_s, ps += sc->k[0].w[j].pre_s;
            ru += un->k[0].w[j].rs_s, rs += sc->k[0].w[j].rs_s;
        }
        CHECKF(fabs(pu - ps) < 1e-9 * ps && fabs(ru - rs) < 1e-9 * rs &&
                   fabs(un->k[0].bytes - sc->k[0].bytes) < 1e-6 * sc->k[0].bytes,
               "gathers %g vs %g s, reductions %g vs %g s, bytes %g vs %g", pu, ps, ru, rs,
               un->k[0].bytes, sc->k[0].bytes);
    }
    smoe_sim_model_free(sc);
    smoe_sim_model_free(un);

    smoe_config *cfg = load_model(cfgdir, "gemma4-e2b", off, 1);
    smoe_plan *p = NULL;
    smoe_err err;
    smoe_plan_opts po = { 16, 1, NULL, 4 };
    int n = 0;
    double mlp = 0;
    CHECK(cfg && smoe_plan_build(cfg, &po, &p, &err) == SMOE_OK &&
          sim_unrolled_count(cfg, p, 35, &n, &mlp, &err) == SMOE_OK);
    CHECK_INT(n, 35);
    CHECKF(fabs(mlp - (15.0 * 6144 + 20.0 * 12288) / 35) < 1e-9, "mean MLP width %g", mlp);
    CHECK(p && sim_unrolled_count(cfg, p, 34, &n, &mlp, &err) == SMOE_EINVAL &&
          strstr(err.msg, "35 unscanned decoder layers") != NULL);
    smoe_plan_free(p);
    smoe_config_free(cfg);
    CHECK(build_keys(cfgdir, off, 1, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "scan_layers: smoe sim models unscanned layers without routed experts") != NULL,
           "'%s'", msg);
    /* the routed experts laid out without the exp axis are still theirs */
    const char *off_fsdp[] = { "scan_layers=false", "ici_expert_parallelism=1",
                               "ici_fsdp_parallelism=-1", "shard_exp_on_fsdp=true" };
    CHECK(build_keys(cfgdir, off_fsdp, 4, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "scan_layers: smoe sim models unscanned layers without routed experts") != NULL,
           "'%s'", msg);

    const char *rest = NULL;
    CHECK(sim_unrolled_layer("decoder/layers_12/mlp/wo/kernel", &rest) == 12 &&
          strcmp(rest, "mlp/wo/kernel") == 0);
    CHECK(sim_unrolled_layer("decoder/layers/mlp/wo/kernel", NULL) == -1);
    CHECK(sim_unrolled_layer("decoder/layers_3x/kernel", NULL) == -1);
    CHECK(sim_unrolled_layer("decoder/layers_", NULL) == -1);
    CHECK(sim_unrolled_layer(NULL, NULL) == -1);
    static sim_kind k;
    memset(&k, 0, sizeof k);
    sim_w a = { .name = "decoder/layers_0/mlp/wo/kernel", .pre_s = 2, .pre_stored_s = 2,
                .pre_net = 1, .bytes = 10 };
    sim_w b = { .name = "decoder/layers_1/mlp/wo/kernel", .pre_s = 4, .pre_stored_s = 6,
                .pre_net = 0, .bytes = 30 };
    sim_w c = { .name = "decoder/layers_1/mlp/wi/kernel", .pre_s = 8, .bytes = 8 };
    CHECK(sim_unrolled_add(&k, &a, 2, &err) == SMOE_OK && sim_unrolled_add(&k, &b, 2, &err) == SMOE_OK &&
          sim_unrolled_add(&k, &c, 2, &err) == SMOE_OK);
    CHECK_INT(k.nw, 2);
    /* pre_net: of 1 s (1 x 2 / 2) and 3 s (6 / 2) of stored gather, the first's on the network */
    CHECKF(NEAR(k.w[0].pre_s, 3) && NEAR(k.w[0].bytes, 20) && NEAR(k.w[0].pre_net, 0.25),
           "merged %g s, %g bytes, net %g", k.w[0].pre_s, k.w[0].bytes, k.w[0].pre_net);
    CHECK(NEAR(k.w[1].pre_s, 4) && NEAR(k.bytes, 24));
    sim_w bad = { .name = "decoder/moe_layers/mlp/wo/kernel" };
    CHECK(sim_unrolled_add(&k, &bad, 2, &err) == SMOE_EINVAL);
}

/* One up projection per MLP activation (MaxText linears.py MlpBlock: wi
 * with one activation, wi_0 and wi_1 with two): gpt3-175b's ["gelu"]
 * against the same model with ["gelu", "linear"] differs by one forward
 * matmul of 2048 tokens x 12288 x 49152 at 2.307e15 / 2 x 0.85 (tpu7x's
 * dense matmuls), and by 3 in the full-remat backward. */
static void test_mlp_activations(const char *cfgdir)
{
    const char *two_acts[] = { "override_model_config=true", "mlp_activations=['gelu','linear']" };
    smoe_sim_model *one, *two;
    if (build_pair(cfgdir, "gpt3-175b", two_acts, 2, &one, &two)) {
        const double mm = 2.0 * 2048 * 12288 * 49152 / (2.307e15 / 2 * 0.85);
        CHECKF(fabs(two->k[0].fwd_pre - one->k[0].fwd_pre - mm) < 1e-9 * mm,
               "forward +%g s, expected %g", two->k[0].fwd_pre - one->k[0].fwd_pre, mm);
        CHECKF(fabs(two->k[0].bwd_full_pre - one->k[0].bwd_full_pre - 3 * mm) < 1e-9 * mm,
               "backward +%g s", two->k[0].bwd_full_pre - one->k[0].bwd_full_pre);
    }
    smoe_sim_model_free(one);
    smoe_sim_model_free(two);
}

/* Tensor parallelism by hand (llama3.1-8b, 1 x 2048 tokens a device,
 * tpu7x): ici_tensor_parallelism=2 leaves a device's FLOPs as they were
 * and adds, per layer, 4 collectives forward (the layer input all-gathered
 * over the 2 devices before attention and before the MLP, each output
 * reduce-scattered), their transposes and the recomputed forward's in the
 * backward (full remat: 8), and the head input's all-gather and its
 * transpose. One moves (2 - 1) x 2048 x 4096 bf16 elements = 16777216
 * bytes at 1.2e12 / 2 / 2 bytes/s a device, after 3 x (2^(1/3) - 1) ICI
 * steps of 1e-6 s (tpu7x.yml). */
static void test_tensor_parallel(const char *cfgdir)
{
    const char *tp[] = { "ici_tensor_parallelism=2" };
    smoe_sim_model *a, *b;
    if (build_pair(cfgdir, "llama3.1-8b", tp, 1, &a, &b)) {
        const double one = 3 * (cbrt(2.0) - 1) * 1e-6 + 16777216.0 / (1.2e12 / 2 / 2);
        CHECKF(fabs(b->k[0].fwd_pre - a->k[0].fwd_pre - 4 * one) < 1e-12, "forward +%g, expected %g",
               b->k[0].fwd_pre - a->k[0].fwd_pre, 4 * one);
        CHECKF(fabs(b->k[0].bwd_full_pre - a->k[0].bwd_full_pre - 8 * one) < 1e-12,
               "full-remat backward +%g, expected %g", b->k[0].bwd_full_pre - a->k[0].bwd_full_pre,
               8 * one);
        CHECKF(fabs(b->head_s - a->head_s - 2 * one) < 1e-12, "head +%g", b->head_s - a->head_s);
        CHECK(NEAR(b->k[0].fwd_post, a->k[0].fwd_post));
    }
    smoe_sim_model_free(a);
    smoe_sim_model_free(b);
}

/* remat_policy custom by hand (deepseek2-16b: MLA without q_lora, emb
 * 2048, 16 heads of 128 + 64, T = 2048; tpu7x: the dense matmuls at
 * 2.307e15 / 2 x gemm_efficiency 0.85). The layer input alone is full remat; a saved tensor drops its
 * op from the backward's recompute and keeps its bytes on the device
 * (bf16); an offloaded one lives on the host and crosses the host link,
 * 2.03e10 / 2 bytes/s a device, each way. */
static void test_custom_remat(const char *cfgdir)
{
    char msg[512];
    const char *full[] = { "remat_policy=full" }, *in[] = { "remat_policy=custom" };
    const char *q[] = { "remat_policy=custom", "query_proj=device" };
    const char *ex[] = { "remat_policy=custom", "moe_mlpwi_0=device", "moe_mlpwi_1=device",
                         "moe_mlpwo=device" };
    const char *off[] = { "remat_policy=custom", "decoder_layer_input=offload" };
    const char *wo[] = { "remat_policy=custom", "mlpwo=offload" };
    smoe_sim_model *f = build_keys(cfgdir, full, 1, msg, sizeof msg);
    smoe_sim_model *c = build_keys(cfgdir, in, 1, msg, sizeof msg);
    smoe_sim_model *cq = build_keys(cfgdir, q, 2, msg, sizeof msg);
    smoe_sim_model *ce = build_keys(cfgdir, ex, 4, msg, sizeof msg);
    smoe_sim_model *co = build_keys(cfgdir, off, 2, msg, sizeof msg);
    smoe_sim_model *cw = build_keys(cfgdir, wo, 2, msg, sizeof msg);
    CHECKF(f && c && cq && ce && co && cw, "built: %s", msg);
    if (f && c && cq && ce && co) {
        const double T = 2048, ab = 2, rate = 2.307e15 / 2 * 0.85; /* gemm_efficiency */
        const double mm_q = 2 * T * 2048 * 16 * 192 / rate; /* wq: emb -> 16 x 192 */
        for (int k = 0; k < 2; k++) {
            CHECKF(NEAR(c->k[k].bwd_pre, f->k[k].bwd_pre) && NEAR(c->k[k].bwd_exp, f->k[k].bwd_exp),
                   "kind %d: the input alone is full remat", k);
            CHECKF(NEAR(c->k[k].act_mx_saved, T * 2048 * ab), "kind %d: input %g bytes", k,
                   c->k[k].act_mx_saved);
            CHECKF(fabs(cq->k[k].bwd_pre - (f->k[k].bwd_pre - mm_q)) < 1e-12 &&
                       NEAR(cq->k[k].fwd_pre, f->k[k].fwd_pre),
                   "kind %d: query_proj saved: backward %g, expected %g - %g", k,
                   cq->k[k].bwd_pre, f->k[k].bwd_pre, mm_q);
            CHECKF(NEAR(cq->k[k].act_mx_saved, T * (2048 + 16 * 192) * ab),
                   "kind %d: input and query %g bytes", k, cq->k[k].act_mx_saved);
            CHECKF(NEAR(co->k[k].act_mx_saved, 0) && NEAR(co->k[k].act_host, T * 2048 * ab) &&
                       NEAR(co->k[k].offload_s, T * 2048 * ab / (2.03e10 / 2)),
                   "kind %d: offloaded input: device %g host %g, %g s", k, co->k[k].act_mx_saved,
                   co->k[k].act_host, co->k[k].offload_s);
        }
        /* every routed output kept: the experts' matmuls are not
         * recomputed, their activation (over the buffer's 2 x 2048 x 6
         * rows of 1408, test_gemm_split; three passes; its output is not
         * saved) is */
        const double act = T7_EW(2 * T * 6 * 1408, 3);
        CHECKF(NEAR(ce->k[1].bwd_exp, 2 * ce->k[1].fwd_exp + act) &&
                   NEAR(ce->k[1].rc[1], act / ce->k[1].fwd_exp) &&
                   NEAR(ce->k[1].bwd_pre, f->k[1].bwd_pre),
               "routed outputs saved: backward %g of forward %g + %g", ce->k[1].bwd_exp,
               ce->k[1].fwd_exp, act);
        /* the ragged buffer at EP 2: 2048 x 6 x min(2, 64 / 6) rows of
         * 1408 (wi_0, wi_1) and 2048 (wo) */
        double rows = T * 6 * 2;
        CHECKF(NEAR(ce->k[1].act_mx_saved, T * 2048 * ab + rows * (2 * 1408 + 2048) * ab),
               "routed outputs %g bytes", ce->k[1].act_mx_saved);
        /* "mlpwo" names the dense MLP's wo output and, in a MoE layer, the
         * shared experts' and the routed experts' (moe.py: "mlpwo" and
         * "moe_mlpwo"): all offloaded, the routed wo not recomputed */
        CHECKF(NEAR(cw->k[0].act_host, T * 2048 * ab), "dense wo %g bytes", cw->k[0].act_host);
        CHECKF(NEAR(cw->k[1].act_host, T * 2048 * ab + rows * 2048 * ab), "MoE wo %g bytes",
               cw->k[1].act_host);
        CHECKF(cw->k[1].bwd_exp < c->k[1].bwd_exp, "routed wo kept: backward %g of %g",
               cw->k[1].bwd_exp, c->k[1].bwd_exp);
    }
    smoe_sim_model_free(cw);
    smoe_sim_model_free(f);
    smoe_sim_model_free(c);
    smoe_sim_model_free(cq);
    smoe_sim_model_free(ce);
    smoe_sim_model_free(co);
}

/* quantization=fp8_full by hand (deepseek2-16b on tpu7x, whose fp8 rate is
 * twice its bf16 one): the routed experts' matmuls take half the time,
 * the attention kernel keeps its bf16 time (MLA: 2 x 16 heads x 2048^2 x
 * (192 + 128) x 0.5 FLOPs over splash's blocks at attention_efficiency) while the projections
 * halve, the elementwise passes keep their time (the experts' activation:
 * the buffer's 2 x 2048 x 6 rows of 1408, three passes; the attention block's: 2048 tokens x
 * (4 x 2048 + 2 x 512 + 4 x 16 x 320) elements, one pass), and the head and
 * the gathers are unchanged. */
static void test_fp8_cost(const char *cfgdir)
{
    char msg[512];
    const char *q[] = { "quantization=fp8_full", "use_qwix_quantization=true" };
    smoe_sim_model *b = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *f = build_keys(cfgdir, q, 2, msg, sizeof msg);
    CHECKF(b && f, "built: %s", msg);
    if (b && f) {
        const double core = 2.0 * 16 * 2048 * 2048 * 320 * 0.5 * T7_SPLASH / (T7_PEAK * T7_ATT);
        const double act = T7_EW(2 * 2048.0 * 6 * 1408, 3);
        const double elem = T7_EW(2048.0 * (4 * 2048 + 2 * 512 + 4 * 16 * 320), 1);
        CHECKF(NEAR(f->k[1].fwd_exp, act + (b->k[1].fwd_exp - act) / 2), "experts %g, bf16 %g",
               f->k[1].fwd_exp, b->k[1].fwd_exp);
        for (int k = 0; k < 2; k++) {
            /* and the dense MLP's activation (10944 wide), or the router's
             * pass over 64 logits and the shared experts' activation
             * (2 x 1408 wide) */
            double keep = core + elem + (k == 0 ? T7_EW(2048.0 * 10944, 3)
                                                : T7_EW(2048.0 * 64, 4) + T7_EW(2048.0 * 2816, 3));
            CHECKF(fabs(f->k[k].fwd_pre - (keep + (b->k[k].fwd_pre - keep) / 2)) < 1e-12,
                   "kind %d: pre %g, bf16 %g, kernel %g", k, f->k[k].fwd_pre, b->k[k].fwd_pre,
                   core);
        }
        CHECKF(NEAR(f->head_s, b->head_s) && NEAR(f->top_gather_s, b->top_gather_s) &&
                   NEAR(f->k[1].w[0].pre_s, b->k[1].w[0].pre_s),
               "head and gathers unchanged");
    }
    smoe_sim_model_free(b);
    smoe_sim_model_free(f);
}

/* gemm_efficiency by hand (deepseek2-16b on tpu7x: the dense matmuls at
 * 0.85 of 2.307e15 / 2, the attention kernel and routed experts at
 * compute_efficiency): the head's three dots over 2048 tokens x 2048 x the
 * 102400-word vocabulary and its four passes over the logits, and the
 * experts' forward (2048 x 6 rows through 3 matmuls of 2048 x 1408, and
 * their activation's three passes over the buffer's rows: EP 2's
 * all-to-all receives at worst 2 x 2048 x 6, moe.py
 * get_ragged_buffer_size). */
static void test_gemm_split(const char *cfgdir)
{
    char msg[512];
    smoe_sim_model *m = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    CHECKF(m != NULL, "built: %s", msg);
    if (!m)
        return;
    const double peak = 2.307e15 / 2, T = 2048;
    /* megablox's row tiles (512, base.yml): 2048 x 6 rows over 32 local
     * experts visit 12288 / 512 + 31 tiles, 1 + 31 x 512 / 12288 of the
     * rows' work, in the forward and in each transpose */
    const double tiles = 1 + 31 * 512.0 / 12288;
    double head = 3 * 2 * T * 2048 * 102400 / (peak * 0.85) + T7_EW(T * 102400, 4);
    double mm = 3 * 2 * T * 6 * 2048 * 1408 / (peak * T7_EFF), act = T7_EW(2 * T * 6 * 1408, 3);
    double ex = mm * tiles + act;
    CHECKF(fabs(m->head_s - head) < 1e-9 * head, "head %g s, expected %g", m->head_s, head);
    CHECKF(fabs(m->k[1].fwd_exp - ex) < 1e-9 * ex, "experts %g s, expected %g", m->k[1].fwd_exp,
           ex);
    smoe_sim_model_free(m);
    /* wi's forward tile at 128 rows: wi_0's and wi_1's forward at
     * 1 + 31 x 128 / 12288, wo's and every transpose as before; wo's drhs
     * at 2048: its share of the backward at 1 + 31 x 2048 / 12288 */
    const char *ov[] = { "wi_tile_fwd_batch_seq=128", "wo_tile_drhs_batch_seq=2048" };
    m = build_keys(cfgdir, ov, 2, msg, sizeof msg);
    CHECKF(m != NULL, "built: %s", msg);
    if (m) {
        const double t128 = 1 + 31 * 128.0 / 12288, t2048 = 1 + 31 * 2048.0 / 12288;
        double fwd = mm / 3 * (2 * t128 + tiles) + act;
        double tr = mm / 3 * (2 * 2 * tiles + tiles + t2048) + 2 * act;
        CHECKF(fabs(m->k[1].fwd_exp - fwd) < 1e-9 * fwd, "tiled forward %g s, expected %g",
               m->k[1].fwd_exp, fwd);
        /* full remat (the default policy): the backward is the transposes
         * and the forward again */
        CHECKF(fabs(m->k[1].bwd_exp - (tr + fwd)) < 1e-9 * tr, "tiled backward %g s, expected %g",
               m->k[1].bwd_exp, tr + fwd);
        smoe_sim_model_free(m);
    }
    /* tokamax's unquantized kernel picks its own tiles: its table has no
     * 12288-row shape, so 128 rows in every pass, whatever the keys say */
    const char *tk[] = { "use_tokamax_gmm=true", "wi_tile_fwd_batch_seq=2048" };
    m = build_keys(cfgdir, tk, 2, msg, sizeof msg);
    CHECKF(m != NULL, "built: %s", msg);
    if (m) {
        const double t128 = 1 + 31 * 128.0 / 12288;
        double fwd = mm * t128 + act, tr = 2 * mm * t128 + 2 * act;
        CHECKF(fabs(m->k[1].fwd_exp - fwd) < 1e-9 * fwd &&
                   fabs(m->k[1].bwd_exp - (tr + fwd)) < 1e-9 * tr,
               "tokamax: forward %g s (expected %g), backward %g s (expected %g)",
               m->k[1].fwd_exp, fwd, m->k[1].bwd_exp, tr + fwd);
        smoe_sim_model_free(m);
    }
    const char *bad[] = { "wo_tile_dlhs_batch_seq=0" };
    CHECK(build_keys(cfgdir, bad, 1, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "wo_tile_dlhs_batch_seq: 0: a grouped matmul's row tile must be 1 to 2^30 "
                       "rows") != NULL, "'%s'", msg);
}

/* MaxText's dense expert path by hand (moe.py dense_matmul, capacity
 * branch; deepseek2-16b on tpu7x, EP 2, 1 x 2048 tokens a device, bf16):
 * capacity_factor 1.25 gives int(ceil(2048 x 6 / 64) x 1.25) = 240 slots
 * per expert, 240 x 64 = 15360 rows. At gemm_efficiency (dense dots, as
 * in test_gemm_split): the experts' three einsums over the 15360 rows, the
 * dispatch einsum (64 x 240 slots x 2048 tokens x 2048) before the
 * exchange and the combine einsum (the same FLOPs) after it; elementwise:
 * the masks written once (15360 x 2048 elements of 2 + 1 bytes) and the
 * experts' activation (15360 rows of 1408, three passes); the dispatch
 * einsum's backward one transpose. Residuals: the
 * routed buffers on 15360 rows where the sparse path's ragged buffer has
 * 2048 x 6 x min(2, 64 / 6) = 24576, plus the masks (15360 x 2048, 2 + 1
 * bytes). */
static void test_dense_moe(const char *cfgdir)
{
    char msg[512];
    const char *dense[2] = { "sparse_matmul=false", "capacity_factor=1.25" };
    smoe_sim_model *s = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *d = build_keys(cfgdir, dense, 2, msg, sizeof msg);
    CHECKF(s && d, "built: %s", msg);
    if (s && d) {
        const double peak = 2.307e15 / 2, g = peak * 0.85, rows = 15360;
        double ex = 3 * 2 * rows * 2048 * 1408 / g + T7_EW(rows * 1408, 3);
        double mix = 2 * rows * 2048 * 2048 / g, masks = T7_EW(rows * 2048, 1.5);
        CHECKF(fabs(d->k[1].fwd_exp - ex) < 1e-9 * ex, "experts %g s, expected %g",
               d->k[1].fwd_exp, ex);
        CHECKF(fabs(d->k[1].fwd_post - mix) < 1e-9 * mix, "combine %g s, expected %g",
               d->k[1].fwd_post, mix);
        double pre = d->k[1].fwd_pre - s->k[1].fwd_pre;
        CHECKF(fabs(pre - mix - masks) < 1e-9 * mix, "dispatch %g s, expected %g + %g", pre, mix,
               masks);
        /* full remat: the forward again, the masks' two transposes, the
         * dispatch einsum's one (its boolean mask takes no gradient) */
        double bwd = d->k[1].bwd_pre - s->k[1].bwd_pre;
        CHECKF(fabs(bwd - (3 * masks + 2 * mix)) < 1e-9 * mix, "dispatch backward %g s, expected %g",
               bwd, 3 * masks + 2 * mix);
        double res = (rows - 24576) * (2 * 2048 + 3 * 1408) * 2 + rows * 2048 * 3;
        double got = d->k[1].act_mx_res - s->k[1].act_mx_res;
        CHECKF(fabs(got - res) < 1e-6 * fabs(res), "residuals %+g bytes, expected %+g", got, res);
    }
    smoe_sim_model_free(s);
    smoe_sim_model_free(d);
    /* more slots than a one-hot's classes can number: refused, not inf */
    const char *huge[2] = { "sparse_matmul=false", "capacity_factor=1e300" };
    CHECK(build_keys(cfgdir, huge, 2, msg, sizeof msg) == NULL);
    CHECKF(strstr(msg, "capacity_factor: 1e+300: ") && strstr(msg, "fewer than 2^31 - 1"), "'%s'",
           msg);
}

/* Ring of experts by hand (deepseek2-16b on tpu7x, EP 2, 2048 tokens a
 * device, 6 experts a token; moe.py roe_ag_and_route): a rank's buffer
 * holds the pair's 2 x 2048 x 6 rows and its grouped matmuls compute its
 * own experts' rows alone, the same work as the all-to-all's; its
 * activation runs over a buffer as large as the all-to-all's worst case
 * (test_gemm_split); megablox zeroes wo's output outside the local groups
 * (two passes of 2048 wide over the buffer). Nothing else of the layer
 * moves. */
static void test_ring_passes(const char *cfgdir)
{
    char msg[512];
    const char *ring[] = { "use_ring_of_experts=true" };
    smoe_sim_model *a = build_keys(cfgdir, NULL, 0, msg, sizeof msg);
    smoe_sim_model *r = build_keys(cfgdir, ring, 1, msg, sizeof msg);
    CHECKF(a && r, "built: %s", msg);
    if (a && r) {
        const double rows = 2 * 2048.0 * 6;
        const double extra = T7_EW(rows * 2048, 2);
        double d = r->k[1].fwd_exp - a->k[1].fwd_exp;
        CHECKF(fabs(d - extra) < 1e-9 * extra, "forward +%g s, expected %g", d, extra);
        CHECKF(fabs(r->k[1].bwd_exp - a->k[1].bwd_exp - 3 * extra) < 1e-9 * extra,
               "backward +%g s, expected %g (transposes and the recompute)",
               r->k[1].bwd_exp - a->k[1].bwd_exp, 3 * extra);
        CHECK(NEAR(r->k[1].fwd_pre, a->k[1].fwd_pre) && NEAR(r->k[0].fwd_pre, a->k[0].fwd_pre));
    }
    smoe_sim_model_free(a);
    smoe_sim_model_free(r);
}

/* tokamax's table (pallas_mosaic_tpu.py, unquantized): DeepSeek-V3's
 * 262144 routed rows over 256 experts, wi (7168 x 2048) and wo
 * (2048 x 7168), each pass's tile_m; a key the table lists twice takes
 * its later value (131072 rows: forward 512, not 128); another shape
 * gets 128. */
static void test_tokamax_tiles(void)
{
    static const struct {
        double m, k, n, g;
        int64_t want[3];
    } c[] = {
        { 262144, 7168, 2048, 256, { 256, 256, 512 } },
        { 262144, 2048, 7168, 256, { 128, 256, 256 } },
        { 131072, 7168, 2048, 256, { 512, 512, 256 } },
        { 524288, 4096, 1536, 128, { 256, 1024, 512 } },
        { 262144, 7168, 2048, 128, { 128, 128, 128 } },
        { 12288, 2048, 1408, 32, { 128, 128, 128 } },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int64_t t[3];
        sim_tokamax_tiles(c[i].m, c[i].k, c[i].n, c[i].g, t);
        CHECKF(t[0] == c[i].want[0] && t[1] == c[i].want[1] && t[2] == c[i].want[2],
               "case %zu: tiles %lld %lld %lld", i, (long long)t[0], (long long)t[1],
               (long long)t[2]);
    }
}

/* The routed experts' weights laid out without the exp axis
 * (shard_exp_on_fsdp: moe.py wi_kernel_axes embed_moe, None, mlp_moe) are
 * still the experts' (the experts phase waits for them; their gather's
 * bytes), and with fp8_full's quantization all-gather (tokamax, a fixed
 * calibration) they are gathered at 1 byte an element, half the bf16
 * cast's; the shared experts' and attention's gathers do not change, nor
 * any reduction. deepseek2-16b, ici_expert_parallelism 2 (build_keys)
 * cannot take shard_exp_on_fsdp (MaxText requires EP 1), so fsdp 16. */
static void test_expert_layout(const char *cfgdir)
{
    char msg[512];
    const char *o[] = { "ici_expert_parallelism=1", "ici_fsdp_parallelism=-1",
                        "shard_exp_on_fsdp=true", "use_tokamax_gmm=true",
                        "quantization=fp8_full", "use_qwix_quantization=true",
                        "weight_quantization_calibration_method=fixed,-224,224" };
    smoe_sim_model *b = build_keys(cfgdir, o, 6, msg, sizeof msg);
    smoe_sim_model *q = build_keys(cfgdir, o, 7, msg, sizeof msg);
    CHECKF(b && q, "built: %s", msg);
    if (b && q) {
        /* an expert weight gathered whole: 64 experts x 2048 x 1408 in
         * bf16 (the cast), 1 byte an element with the fp8 gather (names
         * are the plan's, freed with it, so the sizes tell them apart) */
        const double whole = 64.0 * 2048 * 1408 * 2;
        int routed = 0, sized = 1, half = 1;
        for (int w = 0; w < b->k[1].nw; w++) {
            const sim_w *x = &b->k[1].w[w], *y = &q->k[1].w[w];
            routed += x->routed;
            sized &= x->routed == y->routed && x->routed == NEAR(x->bytes, whole) &&
                     NEAR(x->rs_cast_s, y->rs_cast_s);
            if (x->routed)
                half &= NEAR(y->bytes, whole / 2) && y->pre_s < x->pre_s;
            else
                half &= NEAR(y->bytes, x->bytes) && NEAR(y->pre_s, x->pre_s);
        }
        CHECKF(routed == 3 && sized && half,
               "%d expert weights, routed by size %d, QAG halves only theirs %d", routed, sized,
               half);
    }
    smoe_sim_model_free(b);
    smoe_sim_model_free(q);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_sim_model CONFIG_DIR\n");
        return 2;
    }
    test_custom_remat(argv[1]);
    test_scannable_block(argv[1]);
    test_interleaved_block(argv[1]);
    test_unrolled(argv[1]);
    test_tensor_parallel(argv[1]);
    test_mlp_activations(argv[1]);
    test_fp8_cost(argv[1]);
    test_gemm_split(argv[1]);
    test_dense_moe(argv[1]);
    test_ring_passes(argv[1]);
    test_vocab_tiling(argv[1]);
    test_tokamax_tiles();
    test_expert_layout(argv[1]);
    return check_report();
}
