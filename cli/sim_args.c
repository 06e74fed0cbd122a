/* smoe sim's command line (sim_args.c): the options, parsed, with a
 * scenario's defaults under them, and the hardware profile and training
 * shape they name. */
#include "cli.h"
#include "smoe/sched.h"

#include <string.h>
#include <unistd.h>

enum {
    OPT_SCENARIO = OPT_COMMON_END, OPT_HARDWARE, OPT_BATCH, OPT_SEQ, OPT_REMAT, OPT_DEPTH,
    OPT_BUDGET, OPT_SWEEP, OPT_TRACE, OPT_CALIBRATE, OPT_OUT, OPT_HELP, OPT_PLOT, OPT_PROFILE,
    OPT_SCHED_OUT, OPT_WHOLE, OPT_PTHREAD, OPT_NO_PTHREAD, OPT_MX_GATHER, OPT_REDUCE_ENGINE
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe sim [--base FILE] [--model NAME|FILE] [--rules NAME|FILE] [--params FILE]\n"
            "                [--devices N] [--slices N] [KEY=VALUE ...] [--scenario NAME|FILE]\n"
            "                [--hardware NAME|FILE] [--batch N] [--seq N]\n"
            "                [--remat full|none|save-dot-products] [--dtype-bytes N]\n"
            "                [--prefetch-depth N] [--hbm-budget BYTES] [--sweep] [--trace FILE]\n"
            "                [--plot FILE.svg] [--profile TRACE.json] [--json]\n"
            "                [--schedule-out FILE] [--whole-weights]\n"
            "                [--gather-dtype fp32|bf16|int8 [--int8-block N]\n"
            "                [--int8-fallback fp32|bf16]] [--maxtext-gather-dtype stored|fp32|bf16]\n"
            "                [--reduce-engine shared|own]\n"
            "       mpirun -np N smoe sim --calibrate [--out FILE] [--[no-]progress-thread]\n"
            "\n"
            "  --scenario NAME|FILE  bundled scenario (configs/scenarios/NAME.yml), e.g. seed:\n"
            "                        model, mesh, hardware, shape, variants, reported figures\n"
            "  --hardware NAME|FILE  profile (configs/hardware/NAME.yml): tpu-v5p, tpu-v6e,\n"
            "                        tpu7x, h100, h200, cpu-mpi\n"
            "  --batch N, --seq N    sequences per device and their length\n"
            "  --remat POLICY        full (recompute the layer), none, save-dot-products\n"
            "  --dtype-bytes N       bytes of stored weights (default: the config's weight_dtype)\n"
            "  --prefetch-depth N    layers ahead for smoe's own schedules (0-64, default 1)\n"
            "  --hbm-budget BYTES    add the memory-budgeted plan (per device, e.g. 32G)\n"
            "  --whole-weights       the budgeted plan prefetches whole weights only (what\n"
            "                        smoe train executes; default: quarters of a weight)\n"
            "  --schedule-out FILE   write smoe's schedule as JSON: the budgeted plan with\n"
            "                        --hbm-budget, else --prefetch-depth (smoe train --schedule)\n"
            "  --sweep               print the Pareto curve of exposed wait vs peak HBM\n"
            "  --trace FILE          Chrome/Perfetto trace, one process row per schedule\n"
            "  --plot FILE.svg       picture: Pareto curve and the schedules' timelines\n"
            "  --profile TRACE.json  per-layer compute measured in a smoe train --trace file\n"
            "  --gather-dtype T      smoe's runtime gathers in T (fp32, bf16, int8): its\n"
            "                        schedules' gather bandwidth follows (scales included);\n"
            "                        XLA's baseline, legacy and MaxText's path do not\n"
            "  --int8-block N, --int8-fallback T   as in smoe plan\n"
            "  --maxtext-gather-dtype T  a reading for MaxText's prefetch path: its gathers\n"
            "                        and their reduce-scatters move T (fp32, bf16); default\n"
            "                        stored: as weight_dtype, what its code does\n"
            "  --reduce-engine E     a reading for an accelerator: the gradient reductions on\n"
            "                        the exchanges' engine (shared) or one of their own (own);\n"
            "                        default: the profile's rule (own from 3 engines a device)\n"
            "  --calibrate           measure this machine's cpu-mpi profile (under mpirun)\n"
            "  --out FILE            where --calibrate writes (default: stdout)\n"
            "  --progress-thread, --no-progress-thread\n"
            "                        calibrate with or without smoe train's progress thread\n"
            "                        (the profile's progress: thread | calls); default as smoe\n"
            "                        train's: on when the ranks span more than one host; smoe\n"
            "                        train refuses a profile or schedule of the other mode\n");
}



/* --maxtext-gather-dtype: bytes per element, 4 or 2; -1 for stored (given,
 * as the parameters are stored). */
static int parse_mx_gather(const char *s, const char *where)
{
    int b = smoe_mx_gather_bytes(s);
    if (b < 0)
        cli_usage_error(where, "expected " SMOE_MX_GATHER_NAMES);
    return b ? b : -1;
}

static smoe_remat parse_remat(const char *s, const char *where)
{
    if (strcmp(s, "full") == 0)
        return SMOE_REMAT_FULL;
    if (strcmp(s, "none") == 0)
        return SMOE_REMAT_NONE;
    if (strcmp(s, "save-dot-products") == 0 || strcmp(s, "save_dot_products") == 0)
        return SMOE_REMAT_DOTS;
    cli_usage_error(where, "expected full, none or save-dot-products");
}

static const struct option k_longopts[] = {
    CLI_COMMON_LONGOPTS,
    CLI_GATHER_LONGOPTS,
    { "scenario", required_argument, 0, OPT_SCENARIO },
    { "hardware", required_argument, 0, OPT_HARDWARE },
    { "batch", required_argument, 0, OPT_BATCH },
    { "seq", required_argument, 0, OPT_SEQ },
    { "remat", required_argument, 0, OPT_REMAT },
    { "prefetch-depth", required_argument, 0, OPT_DEPTH },
    { "hbm-budget", required_argument, 0, OPT_BUDGET },
    { "sweep", no_argument, 0, OPT_SWEEP },
    { "trace", required_argument, 0, OPT_TRACE },
    { "plot", required_argument, 0, OPT_PLOT },
    { "profile", required_argument, 0, OPT_PROFILE },
    { "calibrate", no_argument, 0, OPT_CALIBRATE },
    { "progress-thread", no_argument, 0, OPT_PTHREAD },
    { "no-progress-thread", no_argument, 0, OPT_NO_PTHREAD },
    { "out", required_argument, 0, OPT_OUT },
    { "schedule-out", required_argument, 0, OPT_SCHED_OUT },
    { "whole-weights", no_argument, 0, OPT_WHOLE },
    { "maxtext-gather-dtype", required_argument, 0, OPT_MX_GATHER },
    { "reduce-engine", required_argument, 0, OPT_REDUCE_ENGINE },
    { "help", no_argument, 0, OPT_HELP },
    { 0, 0, 0, 0 },
};

/* One option; 1 when it asks for the help (printed). */
static int parse_opt(sim_args *a, int opt, const char *arg, const char *where)
{
    switch (opt) {
    case OPT_SCENARIO: a->scenario = arg; break;
    case OPT_HARDWARE: a->hardware = arg; break;
    case OPT_BATCH: a->batch = cli_int("--batch", arg, 1, SMOE_SIM_MAX_BATCH); break;
    case OPT_SEQ: a->seq = cli_int("--seq", arg, 1, SMOE_SIM_MAX_SEQ); break;
    case OPT_REMAT: a->remat = arg; parse_remat(arg, where); break;
    case OPT_DEPTH: a->depth = (int)cli_int("--prefetch-depth", arg, 0, SMOE_SIM_MAX_DEPTH); break;
    case OPT_BUDGET: a->budget = cli_bytes("--hbm-budget", arg); break;
    case OPT_SWEEP: a->sweep = 1; break;
    case OPT_TRACE: a->trace_path = arg; break;
    case OPT_PLOT: a->plot_path = arg; break;
    case OPT_PROFILE: a->profile = arg; break;
    case OPT_CALIBRATE: a->calib = 1; break;
    case OPT_PTHREAD:
    case OPT_NO_PTHREAD:
        if (a->pthread >= 0 && a->pthread != (opt == OPT_PTHREAD))
            cli_usage_error(where, "contradicts the other progress-thread option");
        a->pthread = opt == OPT_PTHREAD;
        break;
    case OPT_OUT: a->out = arg; break;
    case OPT_SCHED_OUT: a->sched_out = arg; break;
    case OPT_WHOLE: a->whole = 1; break;
    case OPT_MX_GATHER: a->mx_gather_bytes = parse_mx_gather(arg, where); break;
    case OPT_REDUCE_ENGINE:
        if ((a->reduce_engine = smoe_reduce_engine_of(arg)) < 0)
            cli_usage_error(where, "expected " SMOE_REDUCE_ENGINE_NAMES);
        break;
    case 'h':
    case OPT_HELP: usage(stdout); return 1;
    default:
        cli_usage_error(where, optopt ? "missing value or unknown option"
                                      : "unknown option (see 'smoe sim --help')");
    }
    return 0;
}

int sim_parse_args(sim_args *a, int argc, char **argv)
{
    cli_common_init(&a->c);
    a->c.dtype_bytes = 0;
    a->budget = -1;
    a->depth = -1;
    a->pthread = -1;
    int opt, li = -1;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", k_longopts, &li)) != -1) {
        char where[300];
        if (li >= 0 && optarg)
            snprintf(where, sizeof where, "argument '--%s %s'", k_longopts[li].name, optarg);
        else
            snprintf(where, sizeof where, "argument '%s'", argv[optind - 1]);
        li = -1;
        if (!cli_common_opt(&a->c, opt, optarg) && parse_opt(a, opt, optarg, where))
            return 1;
    }
    cli_collect_overrides(&a->c, argc, argv, optind);
    if (a->pthread >= 0 && !a->calib)
        cli_usage_error(a->pthread ? "argument '--progress-thread'"
                                   : "argument '--no-progress-thread'",
                        "is read only with --calibrate (smoe train takes it for a run)");
    return 0;
}

/* The scenario's devices (and slices) where the command line set none. */
static void scenario_devices(sim_args *a)
{
    const smoe_scenario *sc = &a->sc;
    cli_common *c = &a->c;
    if (!c->devices && sc->devices) {
        c->devices = sc->devices;
        if (sc->slices > 1 && c->slices == 1)
            snprintf(a->dev_where, sizeof a->dev_where, "%s:%d:%d (devices: %lld, slices: %lld)",
                     sc->file, sc->devices_loc.line, sc->devices_loc.col,
                     (long long)sc->devices, (long long)sc->slices);
        else
            snprintf(a->dev_where, sizeof a->dev_where, "%s:%d:%d (devices: %lld)", sc->file,
                     sc->devices_loc.line, sc->devices_loc.col, (long long)sc->devices);
        c->devices_where = a->dev_where;
    }
    if (c->slices == 1 && sc->slices > 1)
        c->slices = sc->slices;
}

void sim_apply_scenario(sim_args *a)
{
    smoe_err err;
    char path[4200];
    const char *f = cli_named_file(a->scenario, "scenarios", path, sizeof path);
    if (access(f, R_OK) != 0) {
        char where[300];
        snprintf(where, sizeof where, "argument '--scenario %s'", a->scenario);
        cli_usage_error(where, "no scenario file %s", f);
    }
    smoe_scenario *sc = &a->sc;
    cli_common *c = &a->c;
    if (smoe_scenario_load(a->arena, f, sc, &err))
        cli_die(&err);
    /* a fact the command line gives, by option or by its MaxText key, is not
     * varied (the key must then agree with the scenario's value: sim_build) */
    a->fixed[SMOE_FACT_SEQ] = a->seq != 0 || cli_kv_sets(c->kv, c->n_kv, "max_target_length");
    a->fixed[SMOE_FACT_BATCH] =
        a->batch != 0 || cli_kv_sets(c->kv, c->n_kv, "per_device_batch_size");
    a->fixed[SMOE_FACT_DTYPE_BYTES] =
        c->dtype_bytes != 0 || cli_kv_sets(c->kv, c->n_kv, "weight_dtype");
    a->fixed[SMOE_FACT_MX_GATHER] = a->mx_gather_bytes != 0;
    a->fixed[SMOE_FACT_REDUCE_ENGINE] = a->reduce_engine != 0;
    if (!c->model)
        c->model = sc->model;
    if (!c->rules)
        c->rules = sc->rules;
    if (!a->hardware)
        a->hardware = sc->hardware;
    scenario_devices(a);
    if (!a->batch)
        a->batch = sc->batch;
    if (!a->seq)
        a->seq = sc->seq;
    if (!a->remat)
        a->remat = sc->remat;
    if (!c->dtype_bytes)
        c->dtype_bytes = sc->dtype_bytes;
    if (!a->mx_gather_bytes)
        a->mx_gather_bytes = sc->mx_gather_bytes;
    if (!a->reduce_engine)
        a->reduce_engine = sc->reduce_engine;
    if (a->depth < 0)
        a->depth = sc->prefetch_depth;
    int n = 0;
    size_t cap = (size_t)(sc->n_overrides + c->n_kv + 1);
    a->scn_over = cli_alloc(cap * sizeof *a->scn_over);
    a->scn_where = cli_alloc(cap * sizeof *a->scn_where);
    for (int i = 0; i < sc->n_overrides; i++) {
        a->scn_where[n] = sc->override_where[i];
        a->scn_over[n++] = sc->overrides[i];
    }
    for (int i = 0; i < c->n_kv; i++) {
        a->scn_where[n] = NULL;
        a->scn_over[n++] = c->kv[i];
    }
    c->kv = a->scn_over;
    c->kv_where = a->scn_where;
    c->n_kv = n;
}

void sim_load_hw(sim_args *a, smoe_hw *hw, char *hwf_buf, size_t cap, const char **hwf,
                 smoe_sim_shape *sh)
{
    smoe_err err;
    if (!a->hardware)
        cli_usage_error("argument '--hardware'", "is required (or a --scenario that names one)");
    if (!a->c.devices)
        cli_usage_error("argument '--devices'", "is required (or a --scenario that sets it)");
    if (a->depth < 0)
        a->depth = 1;
    *hwf = cli_named_file(a->hardware, "hardware", hwf_buf, cap);
    char hw_where[300];
    snprintf(hw_where, sizeof hw_where, "argument '--hardware %s'", a->hardware);
    if (cli_hardware_check(a->hardware, *hwf, hw_where, &err) || smoe_hw_load(*hwf, hw, &err))
        cli_die(&err);
    memset(sh, 0, sizeof *sh);
    sh->batch = a->batch;
    sh->seq = a->seq;
    sh->remat = a->remat ? parse_remat(a->remat, "argument '--remat'") : SMOE_REMAT_FULL;
    sh->remat_set = a->remat != NULL; /* else the config's remat_policy */
    sh->mx_gather_bytes = a->mx_gather_bytes > 0 ? a->mx_gather_bytes : 0;
    sh->reduce_engine = a->reduce_engine;
    sh->dtype_bytes = a->c.dtype_bytes; /* 0: weight_dtype */
    if (a->mx_gather_bytes && hw->kind == SMOE_HW_CPU)
        cli_usage_error("argument '--maxtext-gather-dtype'", "MaxText's prefetch path is "
                        "simulated on tpu and gpu profiles only (%s is a cpu profile)", hw->name);
    if (a->reduce_engine && hw->kind == SMOE_HW_CPU)
        cli_usage_error("argument '--reduce-engine'", "collective engines are an accelerator's "
                        "(%s is a cpu profile: its reductions run as smoe train issues them)",
                        hw->name);
    if (a->reduce_engine && smoe_sim_device_engines(hw) < 2)
        cli_usage_error("argument '--reduce-engine'", "profile %s has one collective engine a "
                        "device (collective_engines %g, devices_per_chip %g): everything queues "
                        "on it", hw->name, hw->collective_engines, hw->devices_per_chip);
}
