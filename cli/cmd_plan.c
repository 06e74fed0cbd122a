/* `smoe plan`: resolve every weight's sharding and print its gather plan
 * (co-axis by default, --legacy for the pre-fix plan, --compare for both),
 * as a table and summary or as one JSON object. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

enum { OPT_LEGACY = OPT_COMMON_END, OPT_COMPARE, OPT_ALL, OPT_HELP, OPT_TOPOLOGY, OPT_WHY };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe plan [--base FILE] [--model NAME|FILE] [--rules NAME|FILE]\n"
            "                 [--params FILE] (--devices N | --topology NAME) [--slices N]\n"
            "                 [--legacy|--compare] [--all] [--why] [--dtype-bytes N]\n"
            "                 [--gather-dtype fp32|bf16|int8 [--int8-block N]\n"
            "                 [--int8-fallback fp32|bf16]] [--json]\n"
            "                 [KEY=VALUE ...]\n"
            "\n"
            "  --base FILE        base config (default: the bundled configs/base.yml)\n"
            "  --model NAME|FILE  model file (models/NAME.yml beside the base file)\n"
            "  --rules NAME|FILE  custom_mesh_and_rule file (custom_mesh_and_rule/NAME.yml)\n"
            "  --params FILE      MaxText logical_shardings.json instead of the built-in\n"
            "                     parameter enumeration\n"
            "  --devices N        number of devices (fills one -1 parallelism)\n"
            "  --topology NAME    a MaxText accelerator name (v5p-256, tpu7x-8, a3, ...):\n"
            "                     its devices per slice times --slices, as MaxText's\n"
            "                     accelerator_to_spec_map counts them (v5p-256 is 128)\n"
            "  --slices N         number of slices (DCN axes), default 1\n"
            "  --legacy           show the pre-fix plan (FSDP axes only)\n"
            "  --compare          show co-axis and legacy plans side by side\n"
            "  --all              table rows for optimizer state too (default: params)\n"
            "  --why              under each weight that is fallback, noop, uneven or\n"
            "                     leaves a legacy residual, one line saying why\n"
            "  --dtype-bytes N    bytes per element of the stored weights (default 4)\n"
            CLI_GATHER_USAGE
            "  --json             one JSON object (schema in docs/formats.md)\n"
            "  KEY=VALUE          MaxText config overrides, e.g. ici_expert_parallelism=8\n");
}

static const char *status_cell(const smoe_gather *g, char *buf, size_t n)
{
    if (g->status == SMOE_GATHER_NOOP)
        snprintf(buf, n, "noop");
    else if (g->uneven)
        snprintf(buf, n, "uneven %lld", (long long)g->ways);
    else
        snprintf(buf, n, "%s %lld", smoe_gather_status_name(g->status), (long long)g->ways);
    return buf;
}

static const char *dims_cell(const smoe_axes *dims, int rank, char *buf, size_t n)
{
    smoe_pspec s;
    s.rank = rank;
    for (int d = 0; d < rank; d++)
        s.dim[d] = dims[d];
    return smoe_pspec_format(&s, 0, buf, n);
}

static const char *shape_cell(const int64_t *shape, int rank, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? "x" : "", (long long)shape[d]);
    if (rank == 0)
        snprintf(buf, n, "scalar");
    return buf;
}

static void print_why(const char *label, const smoe_gather *g)
{
    if (g->reason)
        printf("    why%s: %s\n", label, g->reason);
    if (g->wire_reason)
        printf("    why %s%s: %s\n", smoe_dtype_name(g->wire), label, g->wire_reason);
}

/* A gather across slices, and whether smoe train runs it in two levels. */
static const char *slices_mark(const smoe_gather *g, const smoe_mesh *m)
{
    if (!smoe_gather_crosses_slices(g, m))
        return "";
    return smoe_gather_two_level(g, m) ? "  ACROSS SLICES, 2 LEVELS" : "  ACROSS SLICES";
}

/* A gather whose wire is the int8 fallback, marked in its row. */
static const char *wire_mark(const smoe_gather *g)
{
    if (!g->wire_reason)
        return "";
    return g->wire == SMOE_DT_BF16 ? "  (bf16: int8 blocks do not fit)"
                                   : "  (fp32: int8 blocks do not fit)";
}

static void print_table(const smoe_plan *p, int mode, int all, int why)
{
    /* mode 0 co-axis, 1 legacy, 2 compare */
    char b1[256], b2[256], b3[256], b4[64], b5[64], b6[64], b7[256];
    if (mode == 2)
        printf("%-66s %-18s %-34s %-12s %-34s %-12s %-12s %s\n", "weight", "shape",
               "spec (axes > 1)", "co-axis", "co-axis gather", "legacy", "residual",
               "recv/dev/layer");
    else
        printf("%-66s %-18s %-34s %-14s %-34s %-26s %s\n", "weight", "shape",
               "spec (axes > 1)", "status", "gather axes", "gathered spec",
               "recv/dev/layer");
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        if (!all && w->kind != SMOE_ENTRY_PARAM)
            continue;
        const char *name = w->path ? w->path : w->key;
        shape_cell(w->shape, w->rank, b2, sizeof b2);
        smoe_pspec_format(&w->use_spec, 0, b3, sizeof b3);
        if (!w->has_gather) {
            printf("%-66s %-18s %-34s %s\n", name, b2, b3, "-");
            continue;
        }
        const smoe_gather *g = mode == 1 ? &w->legacy : &w->gather;
        if (mode == 2) {
            const smoe_gather *l = &w->legacy;
            printf("%-66s %-18s %-34s %-12s %-34s %-12s %-12s %s%s%s\n", name, b2, b3,
                   status_cell(g, b4, sizeof b4), dims_cell(g->axes, g->rank, b1, sizeof b1),
                   status_cell(l, b5, sizeof b5),
                   l->residual_ways > 1 ? dims_cell(l->residual, l->rank, b7, sizeof b7) : "-",
                   cli_fmt_bytes((double)g->bytes_recv, b6, sizeof b6),
                   w->prefetch ? "" : "  (not prefetched)", wire_mark(g));
            if (why) {
                print_why(" (co-axis)", g);
                print_why(" (legacy)", l);
            }
        } else {
            printf("%-66s %-18s %-34s %-14s %-34s %-26s %s%s%s%s%s\n", name, b2, b3,
                   status_cell(g, b4, sizeof b4), dims_cell(g->axes, g->rank, b1, sizeof b1),
                   dims_cell(g->out, g->rank, b7, sizeof b7),
                   cli_fmt_bytes((double)g->bytes_recv, b6, sizeof b6),
                   g->indivisible && !g->uneven ? "  INDIVISIBLE" : "",
                   w->prefetch ? "" : "  (not prefetched)", wire_mark(g),
                   slices_mark(g, &p->mesh));
            if (why)
                print_why("", g);
        }
    }
}

static void print_summary(const char *title, const smoe_plan_summary *s)
{
    char b1[64], b2[64], b3[64];
    printf("%s: %d tagged, %d fallback, %d noop (distinct per-layer weights)", title,
           s->tagged, s->fallback, s->noop);
    if (s->uneven)
        printf("; %d of the tagged uneven (cannot be prefetched, see --why)", s->uneven);
    if (s->n_ways) {
        printf("; tagged gathers:");
        for (int i = 0; i < s->n_ways; i++)
            printf("%s %dx %lld-way", i ? "," : "", s->ways_count[i], (long long)s->ways[i]);
    }
    printf("\n");
    for (int i = 0; i < s->n_stacks; i++) {
        const smoe_plan_stack *k = &s->stack[i];
        printf("  %-14s x%-4lld  %2d tagged %2d fallback %2d noop   per layer and device: "
               "tagged recv %s, fallback recv %s, un-prefetched residual recv %s\n",
               k->name, (long long)k->layers, k->tagged, k->fallback, k->noop,
               cli_fmt_bytes((double)k->tagged_bytes_recv, b1, sizeof b1),
               cli_fmt_bytes((double)k->fallback_bytes_recv, b2, sizeof b2),
               cli_fmt_bytes((double)k->residual_bytes_recv, b3, sizeof b3));
    }
    printf("  per step and device (forward + backward re-gather): %s gathered, %s in "
           "un-prefetched residual gathers\n",
           cli_fmt_bytes((double)s->step_gather_bytes_recv, b1, sizeof b1),
           cli_fmt_bytes((double)s->step_residual_bytes_recv, b2, sizeof b2));
}

static void print_header(const smoe_plan *p)
{
    printf("mesh:");
    int ones = 0;
    for (int i = 0; i < p->mesh.n; i++)
        if (p->mesh.size[i] > 1)
            printf(" %s=%lld", p->mesh.name[i], (long long)p->mesh.size[i]);
        else
            ones++;
    printf("  (%lld devices; %d axes of size 1)\n", (long long)smoe_mesh_devices(&p->mesh), ones);
    printf("inventory: %s, %d entries; bytes at %d per element", p->source, p->n,
           p->dtype_bytes);
    if (p->gather_dtype == SMOE_DT_BF16)
        printf("; weight gathers move bf16 (2 bytes per element)");
    else if (p->gather_dtype == SMOE_DT_INT8)
        printf("; weight gathers move int8 in blocks of %lld along the last dim, "
               "each with a 4-byte fp32 scale (%g bytes per element)",
               (long long)p->int8_block, (double)(p->int8_block + 4) / (double)p->int8_block);
    if (p->wire_fallbacks)
        printf(", except %d weights whose shards cannot hold whole blocks: %s (see --why)",
               p->wire_fallbacks, smoe_dtype_name(p->int8_fallback));
    printf("\n\n");
}

/* --topology NAME: its devices per slice times the slices; the devices
 * are required one way or the other. */
static void set_devices(cli_common *c, const char *topology)
{
    if (topology) {
        char where[256];
        snprintf(where, sizeof where, "argument '--topology %s'", topology);
        if (c->devices)
            cli_usage_error(where, "give --devices or --topology, not both");
        smoe_topology t;
        smoe_err e;
        if (smoe_topology_find(topology, &t, &e)) {
            snprintf(e.where, sizeof e.where, "%s", where);
            cli_die(&e);
        }
        c->devices = t.devices_per_slice * c->slices;
    }
    if (c->devices == 0)
        cli_usage_error("argument '--devices'",
                        "is required (the number of devices), or --topology NAME");
}

/* The bytes a device sends across slices per step of smoe train. */
static void print_link(const smoe_plan *p, int legacy)
{
    smoe_plan_link l;
    smoe_err e;
    if (smoe_plan_link_bytes(p, legacy ? SMOE_MODE_LEGACY : SMOE_MODE_COAXIS, 4, &l, &e)) {
        printf("  %s: bytes across slices not counted: %s\n", legacy ? "legacy" : "co-axis",
               e.msg);
        return;
    }
    printf("  %s: bytes a device sends across slices per step of smoe train: %lld (gathers "
           "%lld, fp32 gradient reductions %lld; the expert exchange not counted)\n",
           legacy ? "legacy" : "co-axis", (long long)(l.gathers + l.reductions),
           (long long)l.gathers, (long long)l.reductions);
}

/* With several slices, which level each plan's gathers use: within a
 * slice (ICI) or across the slices (DCN). */
static void print_slices(const smoe_plan *p, int mode)
{
    if (smoe_mesh_slices(&p->mesh) <= 1)
        return;
    printf("slices: %lld (dcn:", (long long)smoe_mesh_slices(&p->mesh));
    for (int i = 0; i < p->mesh.n; i++)
        if (p->mesh.dcn[i] > 1)
            printf(" %s=%lld", p->mesh.name[i], (long long)p->mesh.dcn[i]);
    printf(")");
    for (int legacy = 0; legacy < 2; legacy++) {
        if ((legacy && mode == 0) || (!legacy && mode == 1))
            continue;
        int within = 0, across = 0, two = 0;
        for (int i = 0; i < p->n; i++) {
            const smoe_weight *w = &p->w[i];
            const smoe_gather *g = legacy ? &w->legacy : &w->gather;
            if (w->kind != SMOE_ENTRY_PARAM || !w->has_gather || g->status == SMOE_GATHER_NOOP)
                continue;
            smoe_gather_crosses_slices(g, &p->mesh) ? across++ : within++;
            two += smoe_gather_two_level(g, &p->mesh);
        }
        printf("; %s gathers: %d within a slice (ICI), %d across slices (DCN), %d of them in "
               "2 levels", legacy ? "legacy" : "co-axis", within, across, two);
    }
    printf("\n");
    for (int legacy = 0; legacy < 2; legacy++)
        if (!((legacy && mode == 0) || (!legacy && mode == 1)))
            print_link(p, legacy);
}

/* The text report: the table and each plan's summary (mode 0 co-axis, 1
 * legacy, 2 both compared). */
static void print_text(const smoe_plan *p, int mode, int all, int why)
{
    print_header(p);
    print_table(p, mode, all, why);
    printf("\n");
    if (mode != 1)
        print_summary("co-axis plan", &p->coaxis);
    if (mode != 0)
        print_summary("legacy plan", &p->legacy);
    print_slices(p, mode);
    if (mode == 2) {
        char b1[64];
        printf("co-axis vs legacy: %+d tagged, %+d fallback; removes %s per step of "
               "un-prefetched residual gathers\n",
               p->coaxis.tagged - p->legacy.tagged, p->coaxis.fallback - p->legacy.fallback,
               cli_fmt_bytes((double)(p->legacy.step_residual_bytes_recv -
                                      p->coaxis.step_residual_bytes_recv),
                             b1, sizeof b1));
    }
}

int cmd_plan(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        CLI_GATHER_LONGOPTS,
        { "legacy", no_argument, 0, OPT_LEGACY },
        { "compare", no_argument, 0, OPT_COMPARE },
        { "all", no_argument, 0, OPT_ALL },
        { "topology", required_argument, 0, OPT_TOPOLOGY },
        { "why", no_argument, 0, OPT_WHY },
        { "help", no_argument, 0, OPT_HELP },
        { 0, 0, 0, 0 },
    };
    cli_common c;
    cli_common_init(&c);
    int mode = 0, all = 0, why = 0, opt;
    const char *topology = NULL;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (cli_common_opt(&c, opt, optarg))
            continue;
        switch (opt) {
        case OPT_LEGACY:
            if (mode == 2)
                cli_usage_error("argument '--legacy'", "cannot be combined with --compare");
            mode = 1;
            break;
        case OPT_COMPARE:
            if (mode == 1)
                cli_usage_error("argument '--compare'", "cannot be combined with --legacy");
            mode = 2;
            break;
        case OPT_ALL: all = 1; break;
        case OPT_WHY: why = 1; break;
        case OPT_TOPOLOGY: topology = optarg; break;
        case 'h':
        case OPT_HELP: usage(stdout); return SMOE_EXIT_OK;
        default: {
            char where[256];
            snprintf(where, sizeof where, "argument '%s'", argv[optind - 1]);
            cli_usage_error(where, optopt ? "missing value or unknown option"
                                          : "unknown option (see 'smoe plan --help')");
        }
        }
    }
    cli_collect_overrides(&c, argc, argv, optind);
    set_devices(&c, topology);
    smoe_config *cfg = cli_load_config(&c);
    smoe_plan *p = cli_build_plan(&c, cfg);
    if (c.json)
        plan_print_json(stdout, p);
    else
        print_text(p, mode, all, why);
    smoe_plan_free(p);
    smoe_config_free(cfg);
    return SMOE_EXIT_OK;
}
