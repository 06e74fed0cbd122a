/* smoe sim's MaxText key policy (src/sched/keys.c) and the key-rule engine
 * under it (src/config/keyrule.c): each key the step model does not
 * represent is refused at its location, remat_policy maps to the modelled
 * policies as MaxText's decoders.py get_remat_policy names them, and
 * MaxText's defaults (base.yml) pass unchanged. */
#include "sim_testlib.h"

static const char *cfgdir;

static smoe_hw tpu(void)
{
    smoe_hw hw;
    smoe_err err;
    char f[1024];
    snprintf(f, sizeof f, "%s/hardware/tpu7x.yml", cfgdir);
    memset(&hw, 0, sizeof hw);
    CHECK(smoe_hw_load(f, &hw, &err) == SMOE_OK);
    return hw;
}

/* smoe_sim_keys on deepseek2-16b with the overrides ov[0..n) into sh. */
static smoe_status keys_ov(const char *const *ov, int n, const smoe_hw *hw, smoe_sim_shape *sh,
                           smoe_err *err)
{
    smoe_config *cfg = load_deepseek(cfgdir, ov, n);
    snprintf(err->msg, sizeof err->msg, "the config did not load");
    if (!cfg)
        return SMOE_EINTERNAL;
    smoe_status s = smoe_sim_keys(cfg, hw, sh, err);
    smoe_config_free(cfg);
    return s;
}

/* ... with one override; the message in msg. */
static smoe_status keys(const char *ov, const smoe_hw *hw, smoe_sim_shape *sh, char *msg,
                        size_t cap)
{
    const char *o[1] = { ov };
    smoe_err err;
    smoe_status s = keys_ov(o, ov ? 1 : 0, hw, sh, &err);
    snprintf(msg, cap, "%s", s ? err.msg : "");
    return s;
}

static void test_refused(const smoe_hw *hw)
{
    static const char *const bad[] = {
        "quantization=int8", "gradient_accumulation_steps=2",
        "optimizer_memory_host_offload=true", "parameter_memory_host_offload=true",
        "remat_policy=minimal_with_quantization",
        "attention=dot_product", "attention=paged",
        /* mesh axes the step model does not split a layer's work over */
        "ici_tensor_sequence_parallelism=2",
        "ici_context_usp_ulysses_parallelism=2",
        "ici_context_autoregressive_parallelism=2", "ici_autoregressive_parallelism=2",
        "ici_sequence_parallelism=2", "ici_pipeline_parallelism=2", "ici_diloco_parallelism=2",
        "dcn_pipeline_parallelism=2",
        /* context parallelism other than MaxText's default exchange */
        "context_parallel_strategy=ring", "context_parallel_load_balance=false",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
        char msg[512], key[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        CHECKF(keys(bad[i], hw, &sh, msg, sizeof msg) == SMOE_EINVAL, "%s accepted", bad[i]);
        /* one line: where, the key, what smoe sim models, what MaxText does */
        char want[128];
        snprintf(want, sizeof want, "%s: smoe sim models only %s: ", key, key);
        CHECKF(strstr(msg, want) && strstr(msg, "(MaxText would run with ") &&
                   !strchr(msg, '\n'), "%s: '%s'", bad[i], msg);
    }
    /* "none" reads as None (MaxText's pyconfig): refused, --remat named */
    smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
    char msg[512];
    CHECK(keys("remat_policy=none", hw, &sh, msg, sizeof msg) == SMOE_EINVAL);
    CHECKF(strstr(msg, "--remat full, none or save-dot-products") != NULL, "'%s'", msg);
    /* autoselected runs dot-product attention below 128 tokens */
    sh.seq = 64;
    CHECK(keys(NULL, hw, &sh, msg, sizeof msg) == SMOE_EINVAL);
    CHECKF(strstr(msg, "below 128 tokens") != NULL, "'%s'", msg);
    sh.seq = 128;
    CHECK(keys(NULL, hw, &sh, msg, sizeof msg) == SMOE_OK);
}

/* The routed experts' path (keys.c sim_moe_path): the dense path with a
 * capacity is modelled (smoe_sim_shape.moe_capacity); the sparse path
 * with a capacity, the dense one without, with ring of experts or with
 * fp8 are refused at their key in one line. */
static void test_moe_path(const smoe_hw *hw)
{
    static const struct {
        const char *ov[3];
        const char *want; /* NULL: modelled */
    } c[] = {
        { { "sparse_matmul=false", "capacity_factor=1.25" }, NULL },
        { { "capacity_factor=1.25" }, "capacity_factor: 1.25: smoe sim models only the dropless" },
        { { "sparse_matmul=false" }, "sparse_matmul: false: smoe sim models MaxText's dense "
                                     "expert path only with capacity_factor > 0; not without" },
        { { "sparse_matmul=false", "capacity_factor=2", "use_ring_of_experts=true" },
          "not with use_ring_of_experts" },
        { { "sparse_matmul=false", "capacity_factor=2", "quantization=fp8_full" },
          "not with quantization" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *o[4] = { "use_qwix_quantization=true" };
        int n = 1;
        while (n < 4 && c[i].ov[n - 1])
            o[n] = c[i].ov[n - 1], n++;
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
        smoe_err err;
        smoe_status s = keys_ov(o, n, hw, &sh, &err);
        if (!c[i].want)
            CHECKF(s == SMOE_OK && sh.moe_capacity == 1.25, "%s: %s", c[i].ov[0],
                   s ? err.msg : "capacity not read");
        else
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, c[i].want) && !strchr(err.msg, '\n'),
                   "case %zu: '%s'", i, s ? err.msg : "accepted");
    }
}

/* The grouped matmuls' row tiles (sim_gmm_tiles): base.yml's 512 for each
 * pass; a pass's key; an older release's tile_batch_seq where a pass's key
 * is at its default; none off a TPU, on the dense path or without
 * megablox and tokamax. */
static void test_gmm_tiles(const smoe_hw *hw)
{
    /* lut: tokamax's unquantized ragged_dot (moe.py gmm: use_tokamax_gmm,
     * no quantization, no use_gmm_v2) takes no tiles and picks its own,
     * 128 where its table lacks the shape; qag: fp8_full on tokamax's
     * kernel with a fixed weight calibration and shard_exp_on_fsdp gathers
     * the routed weights quantized (megablox ops.py) */
    static const struct {
        const char *ov[5];
        int64_t wi_fwd, wo_drhs; /* 0: not modelled */
        int lut, qag;
    } c[] = {
        { { NULL }, 512, 512, 0, 0 },
        { { "wi_tile_fwd_batch_seq=128" }, 128, 512, 0, 0 },
        { { "tile_batch_seq=256" }, 256, 256, 0, 0 },
        { { "tile_batch_seq=256", "wo_tile_drhs_batch_seq=1024" }, 256, 1024, 0, 0 },
        { { "megablox=false" }, 0, 0, 0, 0 },
        { { "megablox=false", "use_tokamax_gmm=true" }, 128, 128, 1, 0 },
        { { "use_tokamax_gmm=true", "wi_tile_fwd_batch_seq=256" }, 128, 128, 1, 0 },
        { { "use_tokamax_gmm=true", "use_gmm_v2=true", "wi_tile_fwd_batch_seq=256" }, 256, 512, 0,
          0 },
        { { "use_tokamax_gmm=true", "quantization=fp8_full", "use_qwix_quantization=true" }, 512,
          512, 0, 0 },
        { { "use_tokamax_gmm=true", "quantization=fp8_full", "use_qwix_quantization=true",
            "weight_quantization_calibration_method=fixed,-224,224" }, 512, 512, 0, 0 },
        { { "use_tokamax_gmm=true", "quantization=fp8_full", "use_qwix_quantization=true",
            "weight_quantization_calibration_method=fixed,-224,224", "shard_exp_on_fsdp=true" },
          512, 512, 0, 1 },
        { { "quantization=fp8_full", "use_qwix_quantization=true",
            "weight_quantization_calibration_method=fixed,-224,224" }, 512, 512, 0, 0 },
        { { "sparse_matmul=false", "capacity_factor=1" }, 0, 0, 0, 0 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int n = 0;
        while (n < 5 && c[i].ov[n])
            n++;
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
        smoe_err err;
        smoe_status s = keys_ov(c[i].ov, n, hw, &sh, &err);
        CHECKF(s == SMOE_OK && sh.gmm_tm[0][0] == c[i].wi_fwd && sh.gmm_tm[1][2] == c[i].wo_drhs &&
                   sh.gmm_lut == c[i].lut && sh.gmm_qag == c[i].qag,
               "case %zu: %s wi fwd %lld, wo drhs %lld, lut %d, qag %d", i, s ? err.msg : "",
               (long long)sh.gmm_tm[0][0], (long long)sh.gmm_tm[1][2], sh.gmm_lut, sh.gmm_qag);
        smoe_hw gpu = *hw;
        gpu.kind = SMOE_HW_GPU;
        sh = (smoe_sim_shape){ .batch = 1, .seq = 2048 };
        CHECKF(keys_ov(c[i].ov, n, &gpu, &sh, &err) == SMOE_OK && sh.gmm_tm[0][0] == 0 &&
                   !sh.gmm_lut,
               "case %zu: a gpu profile tiles nothing", i);
    }
}

/* Splash attention's backward (sim_attn_bwd): split by default, fused with
 * sa_use_fused_bwd_kernel or tokamax's splash; off a TPU, twice the
 * forward (0). */
static void test_attn_bwd(const smoe_hw *hw)
{
    static const struct {
        const char *ov;
        int want;
    } c[] = {
        { NULL, SMOE_ATTN_BWD_SPLIT },
        { "sa_use_fused_bwd_kernel=true", SMOE_ATTN_BWD_FUSED },
        { "use_tokamax_splash=true", SMOE_ATTN_BWD_FUSED },
    };
    smoe_hw gpu = *hw;
    gpu.kind = SMOE_HW_GPU;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 }, sg = sh;
        smoe_err err;
        smoe_status s = keys_ov(&c[i].ov, c[i].ov ? 1 : 0, hw, &sh, &err);
        CHECKF(s == SMOE_OK && sh.attn_bwd == c[i].want, "case %zu: %s backward %d", i,
               s ? err.msg : "", sh.attn_bwd);
        CHECKF(keys_ov(&c[i].ov, c[i].ov ? 1 : 0, &gpu, &sg, &err) == SMOE_OK && sg.attn_bwd == 0,
               "case %zu: a gpu profile keeps twice the forward", i);
    }
}

static void test_modelled(const smoe_hw *hw)
{
    static const struct { const char *ov; smoe_remat remat; int ring; } ok[] = {
        { NULL, SMOE_REMAT_FULL, 0 }, /* base.yml: remat_policy 'full' */
        { "remat_policy=full", SMOE_REMAT_FULL, 0 },
        { "remat_policy=minimal", SMOE_REMAT_DOTS, 0 },
        /* custom with base.yml's tensors: only the layer input on device */
        { "remat_policy=custom", SMOE_REMAT_CUSTOM, 0 },
        { "use_ring_of_experts=true", SMOE_REMAT_FULL, 1 },
        { "quantization=", SMOE_REMAT_FULL, 0 },
        { "capacity_factor=-1", SMOE_REMAT_FULL, 0 },
        { "capacity_factor=0", SMOE_REMAT_FULL, 0 },
        { "gradient_accumulation_steps=1", SMOE_REMAT_FULL, 0 },
        { "attention=flash", SMOE_REMAT_FULL, 0 },
        { "attention=cudnn_flash_te", SMOE_REMAT_FULL, 0 },
        { "ici_tensor_parallelism=1", SMOE_REMAT_FULL, 0 },
        { "ici_tensor_parallelism=2", SMOE_REMAT_FULL, 0 }, /* the model: test_sim */
        { "dcn_context_parallelism=1", SMOE_REMAT_FULL, 0 },
        { "ici_context_parallelism=2", SMOE_REMAT_FULL, 0 },
        { "dcn_context_parallelism=2", SMOE_REMAT_FULL, 0 },
        { "ici_expert_parallelism=4", SMOE_REMAT_FULL, 0 },
        { "ici_fsdp_transpose_parallelism=2", SMOE_REMAT_FULL, 0 },
        { "dcn_data_parallelism=2", SMOE_REMAT_FULL, 0 },
        { "scan_layers=true", SMOE_REMAT_FULL, 0 },
        { "scan_layers=false", SMOE_REMAT_FULL, 0 }, /* the step model: test_sim */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_NONE };
        char msg[512];
        CHECKF(keys(ok[i].ov, hw, &sh, msg, sizeof msg) == SMOE_OK, "%s: %s",
               ok[i].ov ? ok[i].ov : "(defaults)", msg);
        CHECKF(sh.remat == ok[i].remat, "%s: remat %d", ok[i].ov ? ok[i].ov : "-", sh.remat);
        CHECK_INT(sh.ring_of_experts, ok[i].ring);
        CHECK_INT(sh.dtype_bytes, 4); /* the dtypes are read too */
    }
    /* a remat the caller chose (--remat, a scenario) wins over the key */
    smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_DOTS, .remat_set = 1 };
    char msg[512];
    CHECKF(keys("remat_policy=custom", hw, &sh, msg, sizeof msg) == SMOE_OK, "%s", msg);
    CHECK(sh.remat == SMOE_REMAT_DOTS);
    /* a cpu profile times smoe's own attention whatever the key */
    smoe_hw cpu = cpu_profile();
    sh.seq = 64;
    CHECKF(keys("attention=dot_product", &cpu, &sh, msg, sizeof msg) == SMOE_OK, "%s", msg);
    CHECK_STR(smoe_sim_remat_name(SMOE_REMAT_DOTS), "save-dot-products");
}

/* The engine: values compare by type, numbers by value, null is unset. */
static void test_engine(void)
{
    smoe_node n;
    memset(&n, 0, sizeof n);
    n.kind = SMOE_NODE_SCALAR;
    n.plain = 1; /* typed by YAML's rules */
    smoe_key_rule steps = { "steps", SMOE_KEY_INT, "150001|1", "" };
    n.str = "150_001";
    CHECK(smoe_key_holds(&n, &steps));
    n.str = "2";
    CHECK(!smoe_key_holds(&n, &steps));
    CHECK(smoe_key_holds(NULL, &steps));
    n.str = "null";
    CHECK(smoe_key_holds(&n, &steps));
    smoe_key_rule b = { "b", SMOE_KEY_BOOL, "false", "" };
    n.str = "false";
    CHECK(smoe_key_holds(&n, &b));
    n.str = "0"; /* an integer is not a boolean */
    CHECK(!smoe_key_holds(&n, &b));
    smoe_key_rule s = { "s", SMOE_KEY_STR, "|a", "" };
    n.str = "";
    n.plain = 0; /* '' */
    CHECK(smoe_key_holds(&n, &s));
    n.str = "ab";
    CHECK(!smoe_key_holds(&n, &s));
    smoe_key_rule np = { "r", SMOE_KEY_NONPOS, "", "" };
    n.plain = 1;
    n.str = "-1.5";
    CHECK(smoe_key_holds(&n, &np));
    n.str = "0.5";
    CHECK(!smoe_key_holds(&n, &np));
}

/* remat_policy custom: each tensor key read into the device and host
 * masks (the layer input, the scan's carry, on the device unless
 * offloaded); offloading needs the profile's host_bandwidth; a tensor
 * the model has no op for is refused at the key (the config layer refuses
 * a value MaxTextConfig does not take: remat, device, offload). */
static void test_custom_remat(const smoe_hw *hw)
{
    const unsigned in = 1u << SMOE_RT_INPUT;
    static const struct {
        const char *tensor;
        int ok;
        unsigned dev, host; /* beside the input's bit, set below */
        const char *why;
    } t[] = {
        { "decoder_layer_input=device", 1, 0, 0, NULL },
        { "decoder_layer_input=remat", 1, 0, 0, NULL },
        { "decoder_layer_input=offload", 1, 0, 1u << SMOE_RT_INPUT, NULL },
        { "query_proj=device", 1, 1u << SMOE_RT_QUERY, 0, NULL },
        { "moe_mlpwo=offload", 1, 0, 1u << SMOE_RT_MOE_WO, NULL },
        { "context=remat", 1, 0, 0, NULL },
        { "mla_kv=device", 1, 1u << SMOE_RT_MLA_KV, 0, NULL },
        { "engram=device", 0, 0, 0, "smoe sim models custom remat with only" },
        { "indexer_cutoff_threshold=offload", 0, 0, 0, "smoe sim models custom remat with only" },
    };
    smoe_hw host = *hw, nohost = *hw;
    host.host_bandwidth = 1e11;
    nohost.host_bandwidth = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *o[2] = { "remat_policy=custom", t[i].tensor };
        smoe_config *cfg = load_deepseek(cfgdir, o, 2);
        smoe_sim_shape sh = { .batch = 1, .seq = 2048, .remat = SMOE_REMAT_NONE };
        smoe_err err;
        CHECK(cfg != NULL);
        if (!cfg)
            continue;
        smoe_status s = smoe_sim_keys(cfg, &host, &sh, &err);
        char key[64];
        snprintf(key, sizeof key, "%.*s: ", (int)strcspn(t[i].tensor, "="), t[i].tensor);
        if (t[i].ok) {
            unsigned dev = t[i].dev | (t[i].host & in ? 0 : in);
            CHECKF(s == SMOE_OK && sh.remat == SMOE_REMAT_CUSTOM && sh.remat_dev == dev &&
                       sh.remat_host == t[i].host,
                   "%s: %s (device %#x host %#x)", t[i].tensor, s ? err.msg : "-", sh.remat_dev,
                   sh.remat_host);
        } else {
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, key) && strstr(err.msg, t[i].why),
                   "%s: '%s'", t[i].tensor, s ? err.msg : "accepted");
        }
        /* without the profile's host link, offloading is refused */
        if (t[i].ok && t[i].host) {
            s = smoe_sim_keys(cfg, &nohost, &sh, &err);
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, key) && strstr(err.msg, "host_bandwidth"),
                   "%s without host_bandwidth: '%s'", t[i].tensor, s ? err.msg : "accepted");
        }
        smoe_config_free(cfg);
    }
    /* the per-tensor keys act only under custom (MaxText reads them there) */
    const char *o[2] = { "remat_policy=full", "query_proj=device" };
    smoe_config *cfg = load_deepseek(cfgdir, o, 2);
    smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
    smoe_err err;
    CHECK(cfg && smoe_sim_keys(cfg, hw, &sh, &err) == SMOE_OK && sh.remat == SMOE_REMAT_FULL);
    smoe_config_free(cfg);
}

/* quantization fp8_full through Qwix: modelled where the profile has an
 * fp8 rate; through AQT, or on a profile without the rate, refused at the
 * key that decides. */
static void test_fp8(const smoe_hw *hw)
{
    smoe_hw nofp8 = *hw;
    nofp8.fp8_peak_flops = 0;
    const char *o[2] = { "quantization=fp8_full", "use_qwix_quantization=true" };
    smoe_err err;
    for (int pass = 0; pass < 3; pass++) {
        smoe_config *cfg = load_deepseek(cfgdir, o, pass == 2 ? 1 : 2);
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
        CHECK(cfg != NULL);
        if (!cfg)
            continue;
        smoe_status s = smoe_sim_keys(cfg, pass == 1 ? &nofp8 : hw, &sh, &err);
        if (pass == 0)
            CHECKF(s == SMOE_OK && sh.fp8 == 1, "fp8_full through Qwix: %s", s ? err.msg : "-");
        else if (pass == 1)
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, "quantization: fp8_full: the hardware "
                                                        "profile 'tpu7x' has no fp8_peak_flops"),
                   "no fp8 rate: '%s'", s ? err.msg : "accepted");
        else
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, "use_qwix_quantization: smoe sim models "
                                                        "fp8_full with only"),
                   "fp8_full through AQT: '%s'", s ? err.msg : "accepted");
        smoe_config_free(cfg);
    }
}

/* MaxText's named save/offload remat policies (decoders.py
 * get_remat_policy, maxtext_utils.py get_save_and_offload_names at
 * e591f30) read as the custom policy with their names, the layer input
 * kept: the name lists by hand. Offloading needs the profile's
 * host_bandwidth. */
static void test_named_remat(const smoe_hw *hw)
{
#define B(t) (1u << SMOE_RT_##t)
    const unsigned qkv = B(QUERY) | B(VALUE) | B(KEY) | B(KV) | B(QKV);
    const unsigned mlp = B(MLPWI0) | B(MLPWI1) | B(MLPWI) | B(MLPWO);
    const struct {
        const char *ov;
        unsigned dev, host;
    } t[] = {
        { "remat_policy=minimal_with_context", qkv | B(OUT) | mlp | B(CONTEXT), 0 },
        { "remat_policy=minimal_flash", qkv | B(OUT) | mlp | B(CONTEXT), 0 },
        { "remat_policy=save_dot_with_context_except_mlp", qkv | B(CONTEXT) | B(OUT), 0 },
        { "remat_policy=save_dot_except_mlpwi", qkv | B(OUT) | B(MLPWO), 0 },
        { "remat_policy=save_dot_except_mlp", qkv | B(OUT), 0 },
        { "remat_policy=save_qkv_proj", qkv, 0 },
        { "remat_policy=save_out_proj", B(OUT), 0 },
        { "remat_policy=qkv_proj_offloaded", 0, B(QUERY) | B(VALUE) | B(KEY) | B(KV) },
        { "remat_policy=minimal_offloaded", 0, qkv | B(OUT) | mlp },
    };
    smoe_hw host = *hw;
    host.host_bandwidth = 1.5e10;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
        char msg[512];
        CHECKF(keys(t[i].ov, &host, &sh, msg, sizeof msg) == SMOE_OK, "%s: %s", t[i].ov, msg);
        CHECKF(sh.remat == SMOE_REMAT_CUSTOM && sh.remat_dev == (t[i].dev | B(INPUT)) &&
                   sh.remat_host == t[i].host,
               "%s: remat %d device %#x host %#x", t[i].ov, sh.remat, sh.remat_dev, sh.remat_host);
    }
    smoe_hw none = *hw;
    none.host_bandwidth = 0;
    smoe_sim_shape sh = { .batch = 1, .seq = 2048 };
    char msg[512];
    CHECK(keys("remat_policy=qkv_proj_offloaded", &none, &sh, msg, sizeof msg) == SMOE_EINVAL &&
          strstr(msg, "qkv_proj_offloaded offloads to the host") != NULL);
#undef B
}

/* The kernel-tuning keys: named when away from MaxText's default (a
 * local_sa_* key at null or at its sa_* twin's default is not; splash's
 * kernels' blocks are modelled, so never named), never
 * refused, an older release's tuning keys (smoe_old_key) with them; the
 * list is cut with "..." where the buffer ends. */
static void test_tuned(void)
{
    static const struct {
        const char *ov, *text;
        int n;
    } t[] = {
        { NULL, "", 0 },
        { "sa_block_kv_compute=512", "", 0 },
        { "sa_block_kv_compute=1024", "sa_block_kv_compute=1024", 1 },
        { "sa_block_q=1024", "", 0 }, /* the kernels' blocks: modelled */
        { "sa_block_q_dkv=1024", "", 0 },
        { "local_sa_block_kv_dq=256", "", 0 },
        { "local_sa_block_kv_dkv_compute=512", "", 0 },
        { "local_sa_block_kv_dkv_compute=256", "local_sa_block_kv_dkv_compute=256", 1 },
        { "sa_q_layout=SEQ_MINOR", "sa_q_layout=SEQ_MINOR", 1 },
        { "wo_tile_drhs_mlp_dim=2048", "wo_tile_drhs_mlp_dim=2048", 1 },
        { "megablox=false", "", 0 }, /* which kernel runs: not tuning */
        /* an older release's tuning keys, at and away from their default then */
        { "tile_batch_seq=512", "", 0 },
        { "tile_embed_dim=2048", "tile_embed_dim=2048", 1 },
        { "wi_tile_drhs_buffer_count=3", "wi_tile_drhs_buffer_count=3", 1 },
        { "fsdp_shard_on_exp=false", "", 0 }, /* renamed: not tuning */
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *o[1] = { t[i].ov };
        smoe_config *cfg = load_deepseek(cfgdir, o, t[i].ov ? 1 : 0);
        char buf[256];
        CHECK(cfg != NULL);
        if (!cfg)
            continue;
        int n = smoe_sim_tuned_keys(cfg, NULL, buf, sizeof buf);
        CHECKF(n == t[i].n && strcmp(buf, t[i].text) == 0, "%s: %d '%s'",
               t[i].ov ? t[i].ov : "(defaults)", n, buf);
        smoe_config_free(cfg);
    }
    const char *two[2] = { "sa_block_kv_compute=1024", "sa_block_kv_dkv_compute=2048" };
    smoe_config *cfg = load_deepseek(cfgdir, two, 2);
    char small[30];
    CHECK(cfg && smoe_sim_tuned_keys(cfg, NULL, small, sizeof small) == 2);
    CHECKF(strcmp(small, "sa_block_kv_compute=1024...") == 0, "cut: '%s'", small);
    smoe_config_free(cfg);
}

/* use_ragged_sort, named where it is not the sort the profile times: a
 * profile with permute_bandwidth (tpu7x) times the ragged-sort kernels,
 * so a MoE model's default false is named there and true is not; one
 * without (permute_bandwidth 0, or no profile at all) the reverse; a dense
 * model never. */
static void test_ragged_sort(const smoe_hw *tpu7x)
{
    smoe_hw plain = *tpu7x;
    plain.permute_bandwidth = 0;
    static const struct {
        const char *model, *ov;
        int kernels; /* 1: the profile has permute_bandwidth; 0: not; -1: no profile */
        const char *text;
    } t[] = {
        { "deepseek2-16b", NULL, 1, "use_ragged_sort=false" },
        { "deepseek2-16b", "use_ragged_sort=false", 1, "use_ragged_sort=false" },
        { "deepseek2-16b", "use_ragged_sort=true", 1, "" },
        { "deepseek2-16b", NULL, 0, "" },
        { "deepseek2-16b", NULL, -1, "" },
        { "deepseek2-16b", "use_ragged_sort=true", 0, "use_ragged_sort=true" },
        { "llama3.1-8b", NULL, 1, "" },
        { "llama3.1-8b", "use_ragged_sort=true", 0, "" },
    };
    CHECK(tpu7x->permute_bandwidth > 0);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *o[1] = { t[i].ov };
        smoe_config *cfg = load_model(cfgdir, t[i].model, o, t[i].ov ? 1 : 0);
        char buf[128];
        if (!cfg)
            continue;
        const smoe_hw *hw = t[i].kernels > 0 ? tpu7x : t[i].kernels == 0 ? &plain : NULL;
        int n = smoe_sim_tuned_keys(cfg, hw, buf, sizeof buf);
        CHECKF(n == (t[i].text[0] != '\0') && strcmp(buf, t[i].text) == 0, "%s %s on %s: %d '%s'",
               t[i].model, t[i].ov ? t[i].ov : "(default)",
               hw == tpu7x ? "tpu7x" : hw ? "no permute" : "no profile", n, buf);
        smoe_config_free(cfg);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_sim_keys CONFIG_DIR\n");
        return 2;
    }
    cfgdir = argv[1];
    smoe_hw hw = tpu();
    test_refused(&hw);
    test_moe_path(&hw);
    test_gmm_tiles(&hw);
    test_attn_bwd(&hw);
    test_named_remat(&hw);
    test_modelled(&hw);
    test_engine();
    test_tuned();
    test_ragged_sort(&hw);
    test_custom_remat(&hw);
    test_fp8(&hw);
    return check_report();
}
