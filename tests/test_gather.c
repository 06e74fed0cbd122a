/* Gather-plan semantics: the edge-case table (legacy vs co-axis), the
 * change description's unit cases, FSDP-only meshes giving identical
 * plans, and the per-configuration counts and bytes of the deepseek2-16b
 * golden configurations.
 *
 * usage: test_gather CONFIG_DIR */
#include "check.h"
#include "spec_text.h"
#include "smoe/plan.h"

#include <stdlib.h>
#include <string.h>

static const char *fmt_dims(const smoe_axes *d, int rank, char *buf, size_t n)
{
    smoe_pspec s;
    s.rank = rank;
    for (int i = 0; i < rank; i++)
        s.dim[i] = d[i];
    return smoe_pspec_format(&s, 0, buf, n);
}

static smoe_mesh edge_mesh(int64_t tensor)
{
    smoe_mesh m = { 7,
                    { "stage", "fsdp", "fsdp_transpose", "context", "context_usp_ulysses",
                      "tensor", "expert" },
                    { 1, 16, 2, 2, 1, tensor, 8 }, { 0 } };
    return m;
}

/* One row of the edge table: entry spec, then for legacy and co-axis the
 * status, ways, gathered axes and gathered spec (compact form), residual. */
typedef struct edge_row {
    const char *spec;
    int64_t tensor;
    const char *l_status;
    int64_t l_ways;
    const char *l_out, *l_residual;
    const char *c_status;
    int64_t c_ways;
    const char *c_axes, *c_out;
} edge_row;

static const edge_row k_edges[] = {
    { "fsdp", 4, "tagged", 16, "-", "-", "tagged", 16, "fsdp", "-" },
    { "fsdp,fsdp_transpose,context,context_usp_ulysses,expert", 4, "fallback", 32,
      "(context,expert)", "(context,expert)", "tagged", 512,
      "(fsdp,fsdp_transpose,context,expert)", "-" },
    { "fsdp,expert", 4, "fallback", 16, "expert", "expert", "tagged", 128, "(fsdp,expert)", "-" },
    { "expert,fsdp", 4, "tagged", 16, "expert", "-", "tagged", 16, "fsdp", "expert" },
    { "fsdp,tensor", 4, "fallback", 16, "tensor", "-", "fallback", 16, "fsdp", "tensor" },
    { "tensor,fsdp", 4, "tagged", 16, "tensor", "-", "tagged", 16, "fsdp", "tensor" },
    { "fsdp,tensor,expert", 4, "fallback", 16, "(tensor,expert)", "expert", "fallback", 128,
      "(fsdp,expert)", "tensor" },
    { "fsdp,stage,expert", 4, "fallback", 16, "expert", "expert", "tagged", 128,
      "(fsdp,expert)", "-" },
    { "fsdp_transpose,tensor", 4, "fallback", 2, "tensor", "-", "fallback", 2,
      "fsdp_transpose", "tensor" },
    { "expert|-|-", 4, "noop", 1, "expert - -", "- - -", "noop", 1, "- - -", "expert - -" },
    { "expert|fsdp,context|tensor", 4, "fallback", 16, "expert context tensor", "- context -",
      "tagged", 32, "- (fsdp,context) -", "expert - tensor" },
    { "-", 4, "noop", 1, "-", "-", "noop", 1, "-", "-" },
    { "tensor", 1, "noop", 1, "-", "-", "noop", 1, "-", "-" },
    { "fsdp,expert|fsdp_transpose", 4, "fallback", 32, "expert -", "expert -", "tagged", 256,
      "(fsdp,expert) fsdp_transpose", "- -" },
};

static void test_edge_table(void)
{
    for (size_t i = 0; i < sizeof k_edges / sizeof k_edges[0]; i++) {
        const edge_row *r = &k_edges[i];
        smoe_mesh m = edge_mesh(r->tensor);
        smoe_pspec s = spec_of(r->spec);
        int64_t shape[SMOE_MAX_RANK];
        for (int d = 0; d < s.rank; d++)
            shape[d] = 4096;
        smoe_gather l, c;
        smoe_gather_compute(&s, shape, &m, SMOE_MODE_LEGACY, 4, &l);
        smoe_gather_compute(&s, shape, &m, SMOE_MODE_COAXIS, 4, &c);
        char b[256];
        CHECKF(strcmp(smoe_gather_status_name(l.status), r->l_status) == 0,
               "edge %s: legacy %s, expected %s", r->spec, smoe_gather_status_name(l.status),
               r->l_status);
        CHECKF(l.ways == r->l_ways, "edge %s: legacy ways %lld, expected %lld", r->spec,
               (long long)l.ways, (long long)r->l_ways);
        CHECKF(strcmp(fmt_dims(l.out, l.rank, b, sizeof b), r->l_out) == 0,
               "edge %s: legacy out %s, expected %s", r->spec, b, r->l_out);
        CHECKF(strcmp(fmt_dims(l.residual, l.rank, b, sizeof b), r->l_residual) == 0,
               "edge %s: legacy residual %s, expected %s", r->spec, b, r->l_residual);
        CHECKF(strcmp(smoe_gather_status_name(c.status), r->c_status) == 0,
               "edge %s: co-axis %s, expected %s", r->spec, smoe_gather_status_name(c.status),
               r->c_status);
        CHECKF(c.ways == r->c_ways, "edge %s: co-axis ways %lld, expected %lld", r->spec,
               (long long)c.ways, (long long)r->c_ways);
        CHECKF(strcmp(fmt_dims(c.axes, c.rank, b, sizeof b), r->c_axes) == 0,
               "edge %s: co-axis axes %s, expected %s", r->spec, b, r->c_axes);
        CHECKF(strcmp(fmt_dims(c.out, c.rank, b, sizeof b), r->c_out) == 0,
               "edge %s: co-axis out %s, expected %s", r->spec, b, r->c_out);
        for (int d = 0; d < c.rank; d++)
            CHECKF(c.residual[d].n == 0, "edge %s: co-axis leaves a residual", r->spec);
        /* bytes: gathered buffer = local * ways, received = buffer - local */
        CHECK_INT(c.bytes_out, c.bytes_in * c.ways);
        CHECK_INT(c.bytes_recv, c.bytes_out - c.bytes_in);
    }
    /* the 2-D row gathers two dims: one tagged gather per dim */
    smoe_mesh m = edge_mesh(4);
    smoe_pspec s = spec_of("fsdp,expert|fsdp_transpose");
    int64_t shape[2] = { 4096, 4096 };
    smoe_gather c;
    smoe_gather_compute(&s, shape, &m, SMOE_MODE_COAXIS, 4, &c);
    CHECK_INT(c.n_gathered_dims, 2);
    CHECK_INT(c.group[0], 128);
    CHECK_INT(c.group[1], 2);
}

static void test_change_description_cases(void)
{
    smoe_mesh m = { 2, { "fsdp", "expert" }, { 4, 4 }, { 0 } };
    char b[256];
    /* remove_fsdp_from_sharding */
    static const struct { const char *in, *out; } rm[] = {
        { "fsdp,expert|-", "- -" },
        { "expert|fsdp", "expert -" },
        { "expert,fsdp", "expert" },
        { "fsdp", "-" },
        { "-|expert", "- expert" },
    };
    for (size_t i = 0; i < sizeof rm / sizeof rm[0]; i++) {
        smoe_pspec in = spec_of(rm[i].in), out;
        smoe_remove_fsdp_from_spec(&in, &m, &out);
        CHECKF(strcmp(smoe_pspec_format(&out, 0, b, sizeof b), rm[i].out) == 0,
               "remove_fsdp_from_sharding(%s) = %s, expected %s", rm[i].in, b, rm[i].out);
    }
    /* ('fsdp','expert') gathered together: one 16-way, and 128-way at 16x8 */
    int64_t shape[2] = { 2048, 512 };
    smoe_pspec s = spec_of("fsdp,expert|-");
    smoe_gather g;
    smoe_gather_compute(&s, shape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(g.status == SMOE_GATHER_TAGGED);
    CHECK_INT(g.ways, 16);
    CHECK_INT(g.n_gathered_dims, 1);
    smoe_mesh big = { 2, { "fsdp", "expert" }, { 16, 8 }, { 0 } };
    smoe_gather_compute(&s, shape, &big, SMOE_MODE_COAXIS, 4, &g);
    CHECK_INT(g.ways, 128);
    CHECK_STR(fmt_dims(g.axes, g.rank, b, sizeof b), "(fsdp,expert) -");
    /* routed-expert 'expert' dim preserved */
    int64_t eshape[3] = { 64, 2048, 1408 };
    s = spec_of("expert|fsdp|-");
    smoe_gather_compute(&s, eshape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(g.status == SMOE_GATHER_TAGGED);
    CHECK_INT(g.ways, 4);
    CHECK_STR(fmt_dims(g.out, g.rank, b, sizeof b), "expert - -");
    /* leading 'expert' in ('expert','fsdp') preserved */
    s = spec_of("expert,fsdp|-|-");
    smoe_gather_compute(&s, eshape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(g.status == SMOE_GATHER_TAGGED);
    CHECK_INT(g.ways, 4);
    CHECK_STR(fmt_dims(g.out, g.rank, b, sizeof b), "expert - -");
    CHECK_STR(fmt_dims(g.axes, g.rank, b, sizeof b), "fsdp - -");
}

static smoe_plan *plan_sliced(const char *cfgdir, const char *rules, int64_t devices,
                              int64_t slices, const char *const *ov, int nov, const char *model);

static smoe_plan *plan_for(const char *cfgdir, const char *rules, int64_t devices,
                           const char *const *ov, int nov, const char *model)
{
    return plan_sliced(cfgdir, rules, devices, 1, ov, nov, model);
}

static smoe_plan *plan_sliced(const char *cfgdir, const char *rules, int64_t devices,
                              int64_t slices, const char *const *ov, int nov, const char *model)
{
    char base[1024];
    snprintf(base, sizeof base, "%s/base.yml", cfgdir);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model;
    o.rules = rules;
    o.overrides = ov;
    o.n_overrides = nov;
    smoe_config *cfg;
    smoe_err err;
    if (smoe_config_load(&o, &cfg, &err)) {
        CHECKF(0, "config: %s: %s", err.where, err.msg);
        return NULL;
    }
    smoe_plan_opts po = { devices, slices, NULL, 4 };
    smoe_plan *p = NULL;
    if (smoe_plan_build(cfg, &po, &p, &err))
        CHECKF(0, "plan: %s: %s", err.where, err.msg);
    smoe_config_free(cfg);
    return p;
}

static int gathers_equal(const smoe_gather *a, const smoe_gather *b)
{
    if (a->status != b->status || a->ways != b->ways || a->rank != b->rank ||
        a->bytes_out != b->bytes_out || a->bytes_recv != b->bytes_recv)
        return 0;
    for (int d = 0; d < a->rank; d++)
        if (!smoe_axes_equal(&a->axes[d], &b->axes[d]) || !smoe_axes_equal(&a->out[d], &b->out[d]))
            return 0;
    return 1;
}

static void test_fsdp_only_identical(const char *cfgdir)
{
    static const char *const ov1[] = { "ici_expert_parallelism=1" };
    static const struct { const char *model, *rules; int64_t dev; } cases[] = {
        { "deepseek2-16b", NULL, 16 },
        { "deepseek2-16b", "pure-fsdp", 16 },
        { "deepseek3-671b", NULL, 128 },
        { "deepseek3-671b", "ep-as-cp", 64 },
        { "mixtral-8x7b", NULL, 32 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        smoe_plan *p = plan_for(cfgdir, cases[i].rules, cases[i].dev, ov1, 1, cases[i].model);
        if (!p)
            continue;
        int same = 1;
        for (int k = 0; k < p->n; k++)
            if (p->w[k].has_gather && !gathers_equal(&p->w[k].gather, &p->w[k].legacy))
                same = 0;
        CHECKF(same, "%s %s: expert=1 plans differ between legacy and co-axis",
               cases[i].model, cases[i].rules ? cases[i].rules : "default");
        CHECK_INT(p->coaxis.fallback, 0);
        smoe_plan_free(p);
    }
}

static const char *mib(int64_t b, char *buf, size_t n)
{
    if (b == 0)
        snprintf(buf, n, "0B");
    else if (b >= (1LL << 30))
        snprintf(buf, n, "%.1fGiB", (double)b / (1 << 30));
    else
        snprintf(buf, n, "%.1fMiB", (double)b / (1 << 20));
    return buf;
}

/* Counts and bytes per layer on the golden configurations. */
static void test_golden_summaries(const char *cfgdir)
{
    static const struct {
        const char *rules;
        int64_t devices, expert;
        const char *legacy_tfn, *coaxis_tfn;
        const char *legacy_dense, *legacy_moe, *coaxis_dense, *coaxis_moe;
    } rows[] = {
        { NULL, 16, 1, "18/0/6", "18/0/6", "289.7MiB", "2.0GiB", "289.7MiB", "2.0GiB" },
        { "pure-fsdp", 16, 1, "18/0/6", "18/0/6", "289.7MiB", "2.0GiB", "289.7MiB", "2.0GiB" },
        { "ep-as-dp", 16, 2, "18/0/6", "18/0/6", "270.4MiB", "1.0GiB", "270.4MiB", "1.0GiB" },
        { NULL, 16, 4, "4/14/6", "18/0/6", "0B", "396.4MiB", "289.7MiB", "507.5MiB" },
        { "pipeline-large-moe", 16, 4, "6/12/6", "18/0/6", "6.0MiB", "402.4MiB", "288.2MiB",
          "506.0MiB" },
        { "ep-as-cp", 8, 2, "6/12/6", "18/0/6", "6.0MiB", "798.4MiB", "269.4MiB", "895.1MiB" },
        { "shard-exp-on-fsdp", 8, 2, "3/14/7", "17/0/7", "0B", "792.0MiB", "270.4MiB",
          "895.7MiB" },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char ov[64], b1[32], b2[32];
        snprintf(ov, sizeof ov, "ici_expert_parallelism=%lld", (long long)rows[i].expert);
        const char *ovp[] = { "ici_fsdp_parallelism=-1", ov };
        smoe_plan *p = plan_for(cfgdir, rows[i].rules, rows[i].devices, ovp, 2, "deepseek2-16b");
        if (!p)
            continue;
        const smoe_plan_summary *sl = &p->legacy, *sc = &p->coaxis;
        snprintf(b1, sizeof b1, "%d/%d/%d", sl->tagged, sl->fallback, sl->noop);
        snprintf(b2, sizeof b2, "%d/%d/%d", sc->tagged, sc->fallback, sc->noop);
        CHECKF(strcmp(b1, rows[i].legacy_tfn) == 0, "row %zu legacy T/F/N %s, expected %s", i,
               b1, rows[i].legacy_tfn);
        CHECKF(strcmp(b2, rows[i].coaxis_tfn) == 0, "row %zu co-axis T/F/N %s, expected %s", i,
               b2, rows[i].coaxis_tfn);
        const char *want[4] = { rows[i].legacy_dense, rows[i].legacy_moe, rows[i].coaxis_dense,
                                rows[i].coaxis_moe };
        const smoe_plan_summary *sums[2] = { sl, sc };
        for (int k = 0; k < 4; k++) {
            const smoe_plan_summary *s = sums[k / 2];
            const char *stack = k % 2 ? "moe_layers" : "dense_layers";
            int64_t got = -1;
            for (int j = 0; j < s->n_stacks; j++)
                if (strcmp(s->stack[j].name, stack) == 0)
                    got = s->stack[j].tagged_bytes_recv;
            CHECKF(strcmp(mib(got, b1, sizeof b1), want[k]) == 0,
                   "row %zu %s %s tagged bytes %s, expected %s", i, k < 2 ? "legacy" : "co-axis",
                   stack, b1, want[k]);
        }
        /* the co-axis rule removes every fallback; legacy fallbacks leave
         * exactly the expert (or context,expert) residual */
        for (int k = 0; k < p->n; k++) {
            const smoe_weight *w = &p->w[k];
            if (!w->prefetch || w->legacy.status != SMOE_GATHER_FALLBACK)
                continue;
            int only_co = 1;
            for (int d = 0; d < w->legacy.rank; d++)
                for (int a = 0; a < w->legacy.residual[d].n; a++)
                    only_co &= smoe_is_co_axis(w->legacy.residual[d].ax[a]);
            CHECKF(only_co && w->legacy.residual_ways > 1, "row %zu %s: residual", i, w->path);
        }
        smoe_plan_free(p);
    }
    /* DeepSeek-V3 at 128 devices: legacy 4/16/9, co-axis 20/0/9 with 16 x
     * 128-way over (fsdp, expert); 2.2 GiB / 5.8 GiB per layer */
    const char *ov3[] = { "ici_fsdp_parallelism=-1", "ici_expert_parallelism=8" };
    smoe_plan *p = plan_for(cfgdir, NULL, 128, ov3, 2, "deepseek3-671b");
    if (p) {
        CHECK_INT(p->legacy.tagged, 4);
        CHECK_INT(p->legacy.fallback, 16);
        CHECK_INT(p->coaxis.tagged, 20);
        CHECK_INT(p->coaxis.fallback, 0);
        CHECK_INT(p->coaxis.noop, 9);
        int n128 = 0;
        for (int i = 0; i < p->coaxis.n_ways; i++)
            if (p->coaxis.ways[i] == 128)
                n128 = p->coaxis.ways_count[i];
        CHECK_INT(n128, 16);
        char b[32];
        CHECK_STR(mib(p->coaxis.stack[0].tagged_bytes_recv, b, sizeof b), "2.2GiB");
        CHECK_STR(mib(p->coaxis.stack[1].tagged_bytes_recv, b, sizeof b), "5.8GiB");
        smoe_plan_free(p);
    }
    /* at 1024 devices wq_b (1536) and wkv_b (512) are indivisible */
    p = plan_for(cfgdir, NULL, 1024, ov3, 2, "deepseek3-671b");
    if (p) {
        const smoe_weight *w = smoe_plan_find(p, "decoder/moe_layers/self_attention/wq_b/kernel");
        const smoe_weight *x = smoe_plan_find(p, "decoder/moe_layers/self_attention/wkv_b/kernel");
        const smoe_weight *y = smoe_plan_find(p, "decoder/moe_layers/self_attention/wq_a/kernel");
        CHECK(w && (w->gather.indivisible & 1));
        CHECK(x && (x->gather.indivisible & 1));
        CHECK(y && y->gather.indivisible == 0);
        smoe_plan_free(p);
    }
}

/* Built-in enumerations of other families, by their published sizes. */
static void test_param_totals(const char *cfgdir)
{
    static const struct { const char *model; int64_t params; } rows[] = {
        { "llama3.1-8b", 8030261248LL },   /* Llama 3.1 8B */
        { "mixtral-8x7b", 46702792704LL }, /* Mixtral 8x7B */
        { "deepseek2-16b", 15706484224LL },
        { "deepseek3-671b", 671026419200LL },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        smoe_plan *p = plan_for(cfgdir, NULL, 8, NULL, 0, rows[i].model);
        if (!p)
            continue;
        int64_t total = 0;
        int nparams = 0;
        for (int k = 0; k < p->n; k++) {
            if (p->w[k].kind != SMOE_ENTRY_PARAM)
                continue;
            int64_t e = 1;
            for (int d = 0; d < p->w[k].rank; d++)
                e *= p->w[k].shape[d];
            total += e;
            nparams++;
        }
        CHECKF(total == rows[i].params, "%s: %lld parameters, expected %lld", rows[i].model,
               (long long)total, (long long)rows[i].params);
        /* params, mu and nu, plus step and two counts */
        CHECK_INT(p->n, 3 * nparams + 3);
        smoe_plan_free(p);
    }
}

/* Reasons of the coverage lint, hand-written from the semantics (edge
 * mesh: fsdp=16 fsdp_transpose=2 context=2 tensor=4 expert=8). */
static void test_reasons(void)
{
    static const struct {
        const char *spec;
        int64_t dim0;
        smoe_gather_mode mode;
        const char *why; /* NULL: no reason */
    } k[] = {
        { "fsdp", 4096, SMOE_MODE_COAXIS, NULL },
        { "fsdp,expert", 4096, SMOE_MODE_COAXIS, NULL },
        { "fsdp,expert", 4096, SMOE_MODE_LEGACY,
          "legacy: 'expert' follows 'fsdp' on layer dim 0 and legacy gathers only "
          "fsdp/fsdp_transpose (an untagged reshard, then a second all-gather over it)" },
        { "fsdp,tensor", 4096, SMOE_MODE_COAXIS,
          "fallback: gathered axes (fsdp) are not the minor-most of layer dim 0 "
          "('fsdp','tensor')" },
        { "fsdp,tensor,expert", 4096, SMOE_MODE_COAXIS,
          "fallback: gathered axes (fsdp,expert) are not the minor-most of layer dim 0 "
          "('fsdp','tensor','expert')" },
        { "expert|-|-", 4096, SMOE_MODE_COAXIS,
          "noop: layer dim 0 is sharded over 'expert', no FSDP axis (fsdp, fsdp_transpose) "
          "of size > 1 on any dim; nothing to gather" },
        { "-", 4096, SMOE_MODE_COAXIS, "noop: no axis of size > 1 on any dim (replicated)" },
        /* 1536 over fsdp x expert = 128: 1536 = 12 x 128, even */
        { "fsdp,expert|-", 1536, SMOE_MODE_COAXIS, NULL },
        /* 1000 over 128 shards: uneven (tagged, but shard_map needs even shards) */
        { "fsdp,expert|-", 1000, SMOE_MODE_COAXIS,
          "uneven: layer dim 0 (1000) does not divide into its 128 shards over "
          "('fsdp','expert'); the prefetch all-gather runs in shard_map, which needs even "
          "shards" },
        /* an indivisible dim in a fallback: no shard_map, GSPMD pads; the
         * fallback is the reason */
        { "fsdp,tensor", 1000, SMOE_MODE_COAXIS,
          "fallback: gathered axes (fsdp) are not the minor-most of layer dim 0 "
          "('fsdp','tensor')" },
    };
    smoe_mesh m = edge_mesh(4);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        smoe_pspec s = spec_of(k[i].spec);
        int64_t shape[SMOE_MAX_RANK];
        for (int d = 0; d < s.rank; d++)
            shape[d] = d ? 4096 : k[i].dim0;
        smoe_gather g;
        smoe_gather_compute(&s, shape, &m, k[i].mode, 4, &g);
        char why[512];
        int has = smoe_gather_reason(&g, k[i].mode, &m, why, sizeof why);
        if (!k[i].why)
            CHECKF(!has, "%s (%lld): unexpected reason '%s'", k[i].spec, (long long)k[i].dim0,
                   why);
        else
            CHECKF(has && strcmp(why, k[i].why) == 0, "%s (%lld): reason '%s', expected '%s'",
                   k[i].spec, (long long)k[i].dim0, why, k[i].why);
    }
    smoe_pspec s = spec_of("fsdp,expert|-");
    int64_t shape[2] = { 1000, 4096 };
    smoe_gather g;
    smoe_gather_compute(&s, shape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(g.status == SMOE_GATHER_TAGGED && g.uneven && g.indivisible == 1u);
}

/* DeepSeek-V3 on 1024 devices (fsdp=128, expert=8): wq_b (1536) and wkv_b
 * (512) do not divide by 1024 (the semantics note, 3.4): uneven, with a
 * reason, counted, and refused by smoe_plan_check_even; every weight that
 * is fallback, noop, uneven or leaves a legacy residual has its reason. */
static void test_uneven_plan(const char *cfgdir)
{
    const char *ov[] = { "ici_fsdp_parallelism=-1", "ici_expert_parallelism=8" };
    smoe_plan *p = plan_for(cfgdir, NULL, 1024, ov, 2, "deepseek3-671b");
    if (!p)
        return;
    CHECK_INT(p->coaxis.uneven, 4);
    const smoe_weight *w = smoe_plan_find(p, "decoder/moe_layers/self_attention/wq_b/kernel");
    CHECK(w && w->gather.uneven && w->gather.reason &&
          strncmp(w->gather.reason, "uneven: layer dim 0 (1536)", 26) == 0);
    smoe_err e;
    CHECK(smoe_plan_check_even(p, SMOE_MODE_COAXIS, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, "cannot be prefetched: uneven:") != NULL, "%s", e.msg);
    smoe_plan_free(p);
    p = plan_for(cfgdir, NULL, 128, ov, 2, "deepseek3-671b");
    if (!p)
        return;
    CHECK_INT(p->coaxis.uneven, 0);
    CHECK(smoe_plan_check_even(p, SMOE_MODE_COAXIS, &e) == SMOE_OK);
    int lint = 0;
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *x = &p->w[i];
        if (!x->has_gather)
            continue;
        for (int k = 0; k < 2; k++) {
            const smoe_gather *g = k ? &x->legacy : &x->gather;
            int need = g->status != SMOE_GATHER_TAGGED || g->uneven ||
                       (k && g->residual_ways > 1);
            CHECKF(need == (g->reason != NULL), "%s: %s reason %s", x->path,
                   k ? "legacy" : "co-axis", g->reason ? g->reason : "(none)");
            lint += need;
        }
    }
    CHECKF(lint > 20, "only %d reasons", lint);
    smoe_plan_free(p);
}

/* Compressed gathers: hand-computed bytes of one weight in each wire dtype,
 * the int8 block rule, and a whole plan whose step bytes halve (bf16) and
 * quarter plus the scales (int8). */
static void test_wire_bytes(void)
{
    smoe_mesh m = edge_mesh(1);
    /* (64, 128) on (fsdp, None): 16 shards of (4, 128) */
    smoe_pspec spec = spec_of("fsdp|-");
    int64_t shape[2] = { 64, 128 };
    smoe_gather g;
    smoe_gather_compute(&spec, shape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK_INT(g.bytes_in, 4 * 128 * 4);
    CHECK_INT(g.bytes_out, 64 * 128 * 4);
    smoe_gather b = g;
    smoe_gather_set_wire(&b, SMOE_DT_BF16, 32);
    CHECK_INT(b.bytes_in, 4 * 128 * 2);
    CHECK_INT(b.bytes_out, 64 * 128 * 2);
    CHECK_INT(b.bytes_recv, 60 * 128 * 2);
    smoe_gather q = g;
    smoe_gather_set_wire(&q, SMOE_DT_INT8, 32);
    CHECK_INT(q.bytes_in, 4 * 4 * 36);   /* 4 rows of 4 blocks of 32 + a scale */
    CHECK_INT(q.bytes_out, 64 * 4 * 36);
    CHECK_INT(q.bytes_recv, 60 * 4 * 36);
    smoe_err e;
    CHECK(smoe_gather_check_blocks(&g, &m, 32, "w", &e) == SMOE_OK);
    CHECK(smoe_gather_check_blocks(&g, &m, 128, "w", &e) == SMOE_OK);
    CHECK(smoe_gather_check_blocks(&g, &m, 256, "w", &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, "w: int8 gather: the shard's last dim (128) is not a whole number "
                  "of int8 blocks of 256") != NULL, "%s", e.msg);
    /* the last dim sharded: (64, 96) on (None, fsdp): shards of 6 columns */
    smoe_pspec s2 = spec_of("-|fsdp");
    int64_t sh2[2] = { 64, 96 };
    smoe_gather_compute(&s2, sh2, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(smoe_gather_check_blocks(&g, &m, 2, "w2", &e) == SMOE_OK);
    CHECK(smoe_gather_check_blocks(&g, &m, 6, "w2", &e) == SMOE_OK);
    CHECK(smoe_gather_check_blocks(&g, &m, 4, "w2", &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, "(6 over fsdp)") != NULL, "%s", e.msg);
    /* a last dim that does not divide into its shards */
    int64_t sh3[2] = { 64, 100 };
    smoe_gather_compute(&s2, sh3, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(smoe_gather_check_blocks(&g, &m, 2, "w3", &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, "does not divide into its 16 shards") != NULL, "%s", e.msg);
    /* the executable form carries the wire dtype */
    smoe_gather_exec x;
    smoe_gather_compute(&spec, shape, &m, SMOE_MODE_COAXIS, 4, &g);
    CHECK(smoe_gather_exec_of(&g, 0, "w", &x, &e) == SMOE_OK);
    CHECK_INT(x.wire, SMOE_DT_FP32);
    CHECK(smoe_gather_exec_set_wire(&x, &g, &m, SMOE_DT_INT8, 64, "w", &e) == SMOE_OK);
    CHECK_INT(x.wire, SMOE_DT_INT8);
    CHECK_INT(x.wire_block, 64);
    CHECK(smoe_gather_exec_set_wire(&x, &g, &m, SMOE_DT_INT8, 48, "w", &e) == SMOE_EINVAL);
}

static void test_wire_plan(const char *cfgdir)
{
    static const char *const ov[] = { "ici_fsdp_parallelism=-1", "ici_expert_parallelism=4" };
    smoe_plan *p = plan_for(cfgdir, NULL, 16, ov, 2, "deepseek2-16b");
    smoe_plan *b = plan_for(cfgdir, NULL, 16, ov, 2, "deepseek2-16b");
    smoe_plan *q = plan_for(cfgdir, NULL, 16, ov, 2, "deepseek2-16b");
    if (!p || !b || !q)
        goto out;
    smoe_err e;
    CHECK(smoe_plan_set_wire(b, SMOE_DT_BF16, 0, SMOE_DT_INT8, &e) == SMOE_OK);
    CHECK(smoe_plan_set_wire(q, SMOE_DT_INT8, 0, SMOE_DT_INT8, &e) == SMOE_OK);
    CHECK_INT(q->int8_block, SMOE_INT8_BLOCK_DEFAULT);
    int64_t f = p->coaxis.step_gather_bytes_recv;
    CHECK(f > 0 && f % 128 == 0);
    CHECK_INT(b->coaxis.step_gather_bytes_recv, f / 2);
    CHECK_INT(q->coaxis.step_gather_bytes_recv, f / 4 / 32 * 36);
    CHECK_INT(b->legacy.step_gather_bytes_recv, p->legacy.step_gather_bytes_recv / 2);
    CHECK_INT(b->legacy.step_residual_bytes_recv, p->legacy.step_residual_bytes_recv / 2);
    CHECK_INT(q->legacy.step_residual_bytes_recv,
              p->legacy.step_residual_bytes_recv / 4 / 32 * 36);
    /* per weight: every parameter's gathers follow the dtype */
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        if (!w->has_gather)
            continue;
        int64_t out = w->gather.bytes_out;
        CHECKF(b->w[i].gather.bytes_out == out / 2 && b->w[i].gather.wire == SMOE_DT_BF16,
               "%s bf16", w->path);
        CHECKF(q->w[i].gather.bytes_out == out / 4 / 32 * 36 &&
                   q->w[i].legacy.wire == SMOE_DT_INT8 && !q->w[i].gather.wire_reason,
               "%s int8", w->path);
    }
    CHECK_INT(q->wire_fallbacks, 0);
    /* a block the shards cannot hold: refused naming a weight, plan unchanged */
    smoe_plan_free(q);
    q = plan_for(cfgdir, NULL, 16, ov, 2, "deepseek2-16b");
    if (!q)
        goto out;
    CHECK(smoe_plan_set_wire(q, SMOE_DT_INT8, 4096, SMOE_DT_INT8, &e) == SMOE_EINVAL);
    CHECKF(strstr(e.msg, ": int8 gather: the shard's last dim") != NULL, "%s", e.msg);
    CHECK_INT(q->coaxis.step_gather_bytes_recv, f);
    CHECK_INT(q->gather_dtype, SMOE_DT_FP32);
    CHECK(smoe_plan_set_wire(q, SMOE_DT_INT8, 1, SMOE_DT_INT8, &e) == SMOE_EINVAL);
    /* with a fallback: the weights the blocks of 2048 do not fit gather in
     * bf16, saying why; the others in int8 */
    CHECK(smoe_plan_set_wire(q, SMOE_DT_INT8, 2048, SMOE_DT_BF16, &e) == SMOE_OK);
    int fb = 0, params = 0;
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        if (!w->has_gather)
            continue;
        const smoe_gather *g = &q->w[i].gather;
        int64_t out = w->gather.bytes_out;
        params++;
        fb += g->wire_reason != NULL;
        if (g->wire_reason)
            CHECKF(g->wire == SMOE_DT_BF16 && g->bytes_out == out / 2 &&
                       strstr(g->wire_reason, "int8 gather:") != NULL,
                   "%s fallback", w->path);
        else
            CHECKF(g->wire == SMOE_DT_INT8 && g->bytes_out == out / 4 / 2048 * 2052, "%s int8",
                   w->path);
    }
    CHECKF(fb > 0 && fb < params && fb == q->wire_fallbacks, "%d of %d fall back, plan says %d",
           fb, params, q->wire_fallbacks);
out:
    smoe_plan_free(p);
    smoe_plan_free(b);
    smoe_plan_free(q);
}

/* The level of a gather with slices: over an axis with a dcn part it
 * crosses the slices, a legacy residual over one too; else it stays in
 * each slice. */
static void test_slices_level(void)
{
    smoe_mesh m = { 2, { "data", "fsdp" }, { 2, 4 }, { 2, 1 } }; /* HSDP */
    smoe_gather g;
    memset(&g, 0, sizeof g);
    g.rank = 2;
    g.axes[0].n = 1;
    g.axes[0].ax[0] = "fsdp";
    CHECK(!smoe_gather_crosses_slices(&g, &m));
    m.dcn[0] = 1;
    m.dcn[1] = 2; /* fsdp split across 2 slices of 2 */
    CHECK(smoe_gather_crosses_slices(&g, &m));
    m.dcn[1] = 0; /* one slice */
    CHECK(!smoe_gather_crosses_slices(&g, &m));
    memset(&g, 0, sizeof g);
    g.rank = 1;
    g.residual[0].n = 1;
    g.residual[0].ax[0] = "data";
    m.dcn[0] = 2;
    CHECK(smoe_gather_crosses_slices(&g, &m));
}

/* Bytes across slices per step (smoe_plan_link_bytes), by hand on the tiny
 * model over 4 devices. Per device, P is its parameter bytes (each
 * weight's shard, once a layer), S of them sharded, N the norms'
 * (replicated), G the gathers' shard bytes (twice a layer for a decoder
 * weight, once for the others).
 *   HSDP, data across 2 slices: no gather crosses; the all-reduce over
 *   data sends its shard (2 / 2 of it) to the 1 member across, the
 *   norms' all-reduce over (data, fsdp) 2 / 4 of it to 2: P.
 *   fsdp across 2 slices of 2, two levels: a gather and a reduce-scatter
 *   send the shard to the 1 counterpart: G, then S + N (as above).
 *   fsdp across 4 slices of 1, one level: to 3 members: 3 G, then
 *   3 S + 2 / 4 x 3 N. */
static void test_link_bytes(const char *cfgdir)
{
    static const char *const hsdp[] = { "dcn_data_parallelism=2", "ici_expert_parallelism=1" };
    static const char *const two[] = { "dcn_fsdp_parallelism=2", "ici_expert_parallelism=1" };
    static const char *const one[] = { "dcn_fsdp_parallelism=4", "ici_expert_parallelism=1" };
    const char *const *ov[3] = { hsdp, two, one };
    int64_t slices[3] = { 2, 2, 4 };
    for (int c = 0; c < 3; c++) {
        smoe_plan *p = plan_sliced(cfgdir, NULL, 4, slices[c], ov[c], 2, "tiny");
        if (!p)
            continue;
        int64_t S = 0, N = 0, G = 0;
        int marks = 0;
        for (int i = 0; i < p->n; i++) {
            const smoe_weight *w = &p->w[i];
            if (w->kind != SMOE_ENTRY_PARAM)
                continue;
            int64_t b = w->gather.bytes_in * w->layers;
            if (w->gather.status == SMOE_GATHER_NOOP)
                N += b;
            else
                S += b, G += (w->prefetch ? 2 : 1) * b;
            marks += smoe_gather_two_level(&w->gather, &p->mesh);
        }
        smoe_plan_link l;
        smoe_err e;
        CHECKF(smoe_plan_link_bytes(p, SMOE_MODE_COAXIS, 4, &l, &e) == SMOE_OK, "%s", e.msg);
        int64_t wg[3] = { 0, G, 3 * G }, wr[3] = { S + N, S + N, 3 * S + 3 * N / 2 };
        CHECKF(l.gathers == wg[c] && l.reductions == wr[c],
               "case %d: gathers %lld (want %lld), reductions %lld (want %lld)", c,
               (long long)l.gathers, (long long)wg[c], (long long)l.reductions,
               (long long)wr[c]);
        CHECKF((marks > 0) == (c == 1), "case %d: %d gathers marked two-level", c, marks);
        smoe_plan_free(p);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_gather CONFIG_DIR\n");
        return 2;
    }
    test_edge_table();
    test_slices_level();
    test_link_bytes(argv[1]);
    test_change_description_cases();
    test_fsdp_only_identical(argv[1]);
    test_golden_summaries(argv[1]);
    test_param_totals(argv[1]);
    test_reasons();
    test_uneven_plan(argv[1]);
    test_wire_bytes();
    test_wire_plan(argv[1]);
    return check_report();
}
