/* `smoe sim`: predicted step time, exposed gather wait, expert-exchange
 * time and peak HBM of every schedule (baseline = no prefetch, prefetch,
 * prefetch on a shared engine, legacy, plus a scenario's variants and the
 * memory-budgeted plan), from the plan, the model, the training shape and a
 * hardware profile; with a scenario, side by side with reported figures.
 * --calibrate (under mpirun) measures a cpu-mpi profile instead. */
#include "cli.h"
#include "smoe/plot.h"
#include "smoe/sched.h"
#include "smoe/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS SIM_MAX_ROWS

/* --profile: measured per-layer compute replaces the model's for the
 * kinds and passes the trace has. */
static void apply_profile(smoe_sim_model *m, double med[2][2], int n[2][2])
{
    for (int k = 0; k < 2; k++)
        smoe_sim_model_set_compute(m, k, n[0][k] ? med[0][k] : -1, n[1][k] ? med[1][k] : -1);
}

/* --profile: the measured layer times replace the model's (some kind of
 * this model must have spans). */
static void load_profile(const sim_args *a, smoe_sim_model *m, double prof[2][2],
                         int prof_n[2][2])
{
    cli_trace_layer_times(a->profile, prof, prof_n);
    int any = 0;
    for (int k = 0; k < 2; k++)
        any |= smoe_sim_model_has_kind(m, k) && (prof_n[0][k] || prof_n[1][k]);
    if (!any) {
        char where[300];
        snprintf(where, sizeof where, "argument '--profile %s'", a->profile);
        cli_usage_error(where, "no 'fwd L<n> dense|moe' / 'bwd L<n> ...' spans for this "
                               "model's layer kinds");
    }
    apply_profile(m, prof, prof_n);
}

/* What runs, and what came of it. */
typedef struct sim_rows {
    int accel;
    smoe_sim_executor own, mx;  /* smoe's schedules' executor, MaxText's paths' */
    char uniform_name[32];
    sim_row runs[MAX_RUNS];
    smoe_trace *traces[MAX_RUNS];
    int n;
    double prof[2][2];
    int prof_n[2][2];
    smoe_sim_point curve[512];
    int ncurve, feasible;
    unsigned char dist[2][SMOE_SIM_MAX_WEIGHTS];
    sim_readings rd; /* the rows under every reading of the scenario */
    sim_run_facts facts;
} sim_rows;

/* One row: schedule sd on m, traced when a trace or plot is asked for. */
static void run_row(const sim_args *a, sim_rows *R, const smoe_sim_model *m,
                    const smoe_sim_sched *sd, const char *name)
{
    int n = R->n;
    R->traces[n] = a->trace_path || a->plot_path ? sim_new_trace(n, name) : NULL;
    R->runs[n].name = name;
    R->runs[n].exec = sd->executor;
    if (smoe_sim_run(m, sd, &R->runs[n].r, R->traces[n]))
        cli_usage_error(NULL, "out of memory in the simulation");
    R->n++;
}

/* What each row simulates is chosen here: on accelerators XLA's scan (the
 * baseline), MaxText's prefetch path (prefetch*, legacy and the
 * scenario's variants) and smoe's schedule in XLA's dataflow (the uniform
 * depth, the budgeted plan); on cpu profiles smoe's runtime, which smoe
 * train executes, for every row. */
static void run_base(const sim_args *a, sim_rows *R, const smoe_hw *hw, const smoe_sim_model *m)
{
    R->accel = hw->kind != SMOE_HW_CPU;
    R->own = R->accel ? SMOE_SIM_EXEC_XLA_PREFETCH : SMOE_SIM_EXEC_RUNTIME;
    R->mx = R->accel ? SMOE_SIM_EXEC_MAXTEXT : R->own;
    snprintf(R->uniform_name, sizeof R->uniform_name, "uniform_depth_%d", a->depth);
    /* XLA's baseline runs without the dedicated SparseCore (the change
     * description gives its flags to the prefetch runs only): its gathers
     * queue with the exchanges */
    int d = a->depth, accel = R->accel;
    struct { const char *name; int depth, legacy, shared; smoe_sim_executor e; } base[] = {
        { "baseline", 0, 0, accel, accel ? SMOE_SIM_EXEC_XLA_SCAN : R->own },
        { "prefetch", d, 0, 0, R->mx }, { "prefetch_shared_queue", d, 0, 1, R->mx },
        { "legacy", d, 1, 0, R->mx }, { R->uniform_name, d, 0, 0, R->own },
    };
    for (int i = 0; i < (accel ? 5 : 4); i++) {
        smoe_sim_sched sd;
        memset(&sd, 0, sizeof sd);
        sd.executor = base[i].e;
        sd.prefetch_depth = base[i].depth;
        sd.legacy = base[i].legacy;
        sd.shared_engine = base[i].shared;
        run_row(a, R, m, &sd, base[i].name);
    }
}

/* The scenario's variants: MaxText's path on their own plans. Each starts
 * from the shape as given (`in`: what the command line and the scenario
 * fixed), so a variant's keys resolve what the rest leaves open (the
 * dtypes, remat_policy, per_device_batch_size) as they would on the command
 * line; the context axis must stay the run's. */
static void run_variants(const sim_args *a, sim_rows *R, const smoe_hw *hw,
                         const smoe_sim_shape *in, int64_t base_context)
{
    const smoe_scenario *sc = &a->sc;
    for (int v = 0; v < sc->n_variants && R->n < MAX_RUNS - 1; v++) {
        smoe_plan *vp;
        smoe_sim_shape vsh = *in;
        smoe_sim_model *vm = sim_build(&a->c, sc->variants[v].rules, sc->variants[v].overrides,
                                       sc->variants[v].override_where,
                                       sc->variants[v].n_overrides, hw, &vsh, &vp, NULL);
        if (vsh.context != base_context)
            cli_usage_error(NULL, "variant '%s' changes the context axis (%lld ways, the run's "
                            "%lld)", sc->variants[v].name, (long long)vsh.context,
                            (long long)base_context);
        smoe_sim_sched sd;
        memset(&sd, 0, sizeof sd);
        sd.executor = R->mx;
        sd.prefetch_depth = a->depth;
        if (a->profile)
            apply_profile(vm, R->prof, R->prof_n);
        run_row(a, R, vm, &sd, sc->variants[v].name);
        smoe_sim_model_free(vm);
        smoe_plan_free(vp);
    }
}

/* Combination ci's shape: the shape as given (`in`, unresolved) with each
 * fact's value where the command line set none (the value index per fact
 * into out->idx). */
static smoe_sim_shape reading_shape(const sim_args *a, const smoe_sim_shape *in, int ci,
                                    sim_reading_rows *out)
{
    smoe_sim_shape x = *in;
    for (int f = 0; f < a->sc.n_facts; f++) {
        const smoe_scn_fact *ft = &a->sc.facts[f];
        int j = ci % ft->n;
        ci /= ft->n;
        out->idx[f] = a->fixed[ft->key] ? -1 : j;
        if (out->idx[f] < 0)
            continue;
        int64_t v = (int64_t)ft->value[j];
        switch (ft->key) {
        case SMOE_FACT_SEQ: x.seq = v; break;
        case SMOE_FACT_BATCH: x.batch = v; break;
        case SMOE_FACT_DTYPE_BYTES: x.dtype_bytes = (int)v; break;
        case SMOE_FACT_MX_GATHER: x.mx_gather_bytes = (int)v; break;
        case SMOE_FACT_REDUCE_ENGINE: x.reduce_engine = (int)v; break;
        }
    }
    return x;
}

/* A --profile's layer times are one shape's: readings may not vary the
 * shape's tokens under it. */
static void check_profile_readings(const sim_args *a)
{
    for (int f = 0; a->profile && f < a->sc.n_facts; f++) {
        const smoe_scn_fact *ft = &a->sc.facts[f];
        if ((ft->key != SMOE_FACT_SEQ && ft->key != SMOE_FACT_BATCH) || a->fixed[ft->key] ||
            ft->n < 2)
            continue;
        char where[300];
        snprintf(where, sizeof where, "argument '--profile %s'", a->profile);
        cli_usage_error(where, "its layer times are one shape's, and the scenario's readings "
                        "vary %s: fix it with %s", smoe_scn_fact_name(ft->key),
                        ft->key == SMOE_FACT_SEQ ? "--seq" : "--batch");
    }
}

/* Combination ci must suit the command line: smoe's compressed gathers
 * (--gather-dtype) convert fp32 master weights. */
static void check_combo(const sim_args *a, const smoe_sim_shape *x, int ci)
{
    if (a->c.gather_dtype == SMOE_DT_FP32 || !x->dtype_bytes || x->dtype_bytes == 4)
        return;
    char where[64];
    snprintf(where, sizeof where, "argument '--gather-dtype %s'",
             smoe_dtype_name(a->c.gather_dtype));
    cli_usage_error(where, "reading R%d stores %d-byte weights (dtype_bytes), and smoe's "
                    "compressed gathers convert fp32 master weights: fix the reading with "
                    "--dtype-bytes 4", ci + 1, x->dtype_bytes);
}

/* A combination's figures from its rows X. */
static void keep_rows(sim_reading_rows *out, const sim_rows *X)
{
    out->n = X->n;
    for (int i = 0; i < X->n; i++) {
        snprintf(out->name[i], sizeof out->name[i], "%s", X->runs[i].name);
        out->step_ms[i] = X->runs[i].r.step_s * 1e3;
        out->exposed_ms[i] = X->runs[i].r.exposed_gather_s * 1e3;
        out->peak_gib[i] = X->runs[i].r.peak_hbm_bytes / (1024.0 * 1024 * 1024);
    }
}

/* The scenario's rows (base and variants) under every combination of its
 * readings, untraced. A fact the command line set keeps its value; the rest
 * of the shape resolves from the configuration under each combination (a
 * stored dtype's gradients and moments follow it, as smoe_sim_dtypes). */
static void run_readings(const sim_args *a, sim_rows *R, const smoe_hw *hw,
                         const smoe_sim_shape *in)
{
    static sim_rows X;
    sim_args b = *a;
    b.trace_path = b.plot_path = NULL;
    int combos = 1;
    for (int f = 0; f < a->sc.n_facts; f++)
        combos *= a->fixed[a->sc.facts[f].key] ? 1 : a->sc.facts[f].n;
    check_profile_readings(a);
    for (int ci = 0; a->sc.n_facts && ci < combos; ci++) {
        sim_reading_rows *out = &R->rd.r[R->rd.n++];
        smoe_sim_shape xin = reading_shape(a, in, ci, out), xs = xin;
        check_combo(a, &xin, ci);
        smoe_plan *p;
        memset(&X, 0, sizeof X);
        smoe_sim_model *m = sim_build(&b.c, NULL, NULL, NULL, 0, hw, &xs, &p, NULL);
        if (a->profile)
            apply_profile(m, R->prof, R->prof_n);
        run_base(&b, &X, hw, m);
        run_variants(&b, &X, hw, &xin, xs.context);
        keep_rows(out, &X);
        smoe_sim_model_free(m);
        smoe_plan_free(p);
    }
}

/* The budgeted plan (a row with --hbm-budget) and the Pareto curve. */
static void run_budget(const sim_args *a, sim_rows *R, const smoe_sim_model *m)
{
    smoe_sim_result best;
    R->feasible = 1;
    if (a->budget < 0 && !a->sweep && !a->plot_path)
        return;
    double b = a->budget >= 0 ? (double)a->budget : INFINITY;
    if (smoe_sim_plan_budget(m, R->own, 0, b, R->dist, &best, &R->feasible, R->curve, 512,
                             &R->ncurve))
        cli_usage_error(NULL, "out of memory in the planner");
    if (a->whole && a->budget >= 0 &&
        smoe_sim_plan_budget_whole(m, R->own, 0, b, R->dist, &best, &R->feasible))
        cli_usage_error(NULL, "out of memory in the planner");
    if (a->budget >= 0) {
        R->runs[R->n].name = "budgeted";
        R->runs[R->n].exec = R->own;
        R->runs[R->n].r = best;
        R->traces[R->n] = NULL;
        R->n++;
    }
}

/* The text report's head: the shape, the profile, the schedules, the mesh. */
static void print_head(const sim_args *a, const sim_rows *R, const smoe_hw *hw, const char *hwf,
                       const smoe_plan *plan, const smoe_sim_shape *sh)
{
    char shape[160];
    if (sh->context > 1)
        snprintf(shape, sizeof shape, "batch %lld x seq %lld per %lld devices (context %lld: "
                 "%.0f tokens per device)", (long long)sh->batch, (long long)sh->seq,
                 (long long)sh->context, (long long)sh->context, smoe_sim_tokens(sh));
    else
        snprintf(shape, sizeof shape, "batch %lld x seq %lld per device", (long long)sh->batch,
                 (long long)sh->seq);
    printf("hardware: %s (%s); %lld devices; %s, remat %s; "
           "bytes per element: weights %d, compute %d, gradients %d, moments %d + %d\n",
           hw->name, hwf, (long long)smoe_mesh_devices(&plan->mesh), shape,
           a->remat ? a->remat : smoe_sim_remat_name(sh->remat), sh->dtype_bytes,
           sh->compute_bytes, sh->grad_bytes, sh->mu_bytes, sh->nu_bytes);
    if (R->facts.tuned[0])
        printf("kernel tuning not modelled (kernels are timed by FLOPs and bytes at any "
               "tuning): %s\n", R->facts.tuned);
    if (sh->wire_bytes > 0)
        printf("smoe's runtime gathers %s: %.4g bytes per element on the wire (its "
               "schedules only)\n", smoe_dtype_name(a->c.gather_dtype), sh->wire_bytes);
    if (a->profile)
        sim_print_profile(a->profile, (double(*)[2])R->prof, (int(*)[2])R->prof_n);
    if (R->accel)
        printf("schedules: baseline = XLA's scan; prefetch* and legacy = MaxText's "
               "prefetch_fsdp_weights (depth 1, full remat); %s = smoe's own at "
               "--prefetch-depth\n", R->uniform_name);
    else
        printf("schedules: smoe's runtime, prefetch depth %d\n", a->depth);
    if (R->facts.unscanned)
        printf("unscanned layers (scan_layers=false): timed as a stack of layers of their mean "
               "weights and MLP width, gathered where XLA's scan gathers%s\n",
               R->accel ? "; MaxText's prefetch path requires scan_layers=true "
                          "(fsdp_prefetch.py): the prefetch* rows are what it would do over "
                          "these layers stacked" : "");
    if (sh->mx_gather_bytes) /* accelerator profiles only (load_hw) */
        printf("reading: MaxText's prefetch path gathers %s (--maxtext-gather-dtype; its code "
               "gathers as stored, %d bytes)\n", sh->mx_gather_bytes == 4 ? "fp32" : "bf16",
               sh->dtype_bytes);
    if (sh->reduce_engine) /* accelerator profiles only (load_hw) */
        printf("reading: the gradient reductions run on %s (--reduce-engine; the profile's "
               "rule: %s)\n", sh->reduce_engine == SMOE_REDUCE_OWN ? "an engine of their own"
                                                                 : "the exchanges' engine",
               smoe_sim_device_engines(hw) >= 3 ? "their own engine" : "the exchanges' engine");
    printf("mesh:");
    for (int i = 0; i < plan->mesh.n; i++)
        if (plan->mesh.size[i] > 1)
            printf(" %s=%lld", plan->mesh.name[i], (long long)plan->mesh.size[i]);
    printf("\n\n");
}

/* The text report. */
static void print_text(const sim_args *a, const sim_rows *R, const smoe_hw *hw, const char *hwf,
                       const smoe_plan *plan, const smoe_sim_shape *sh)
{
    const smoe_scenario *sc = &a->sc;
    print_head(a, R, hw, hwf, plan, sh);
    sim_print_table(R->runs, R->n);
    sim_print_fit(R->runs, R->n, hw);
    const smoe_sim_result *pf = &R->runs[1].r;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    printf("\npeak HBM of 'prefetch': parameters %s, gradients %s, optimizer %s, gathered "
           "weights %s, activations %s\n",
           cli_fmt_bytes(pf->mem_params, b1, sizeof b1),
           cli_fmt_bytes(pf->mem_grads, b2, sizeof b2),
           cli_fmt_bytes(pf->mem_optimizer, b3, sizeof b3),
           cli_fmt_bytes(pf->mem_gathered, b4, sizeof b4),
           cli_fmt_bytes(pf->mem_activations, b5, sizeof b5));
    const smoe_sim_result *bl = &R->runs[0].r;
    printf("exposed gather wait, decoder layers + embedding and head: baseline %.1f + %.1f ms, "
           "prefetch %.1f + %.1f ms\n", (bl->exposed_gather_s - bl->exposed_top_s) * 1e3,
           bl->exposed_top_s * 1e3, (pf->exposed_gather_s - pf->exposed_top_s) * 1e3,
           pf->exposed_top_s * 1e3);
    if (a->budget >= 0 && !R->feasible)
        printf("budget %s is below the no-prefetch peak: no prefetch\n",
               cli_fmt_bytes((double)a->budget, b1, sizeof b1));
    if (sc->n_reported)
        sim_print_reported(sc, R->runs, R->n);
    if (sc->n_sources) {
        printf("\nwhere the scenario's facts come from (%s)\n", sc->file);
        for (int i = 0; i < sc->n_sources; i++)
            printf("  %-18s %s\n", sc->source_key[i], sc->source_text[i]);
    }
    if (R->rd.n)
        sim_print_readings(stdout, sc, &R->rd);
    if (a->sweep && R->ncurve > 0)
        sim_print_sweep(R->curve, R->ncurve);
}

static void print_json(const sim_args *a, const sim_rows *R, const smoe_hw *hw,
                       const smoe_plan *plan, const smoe_sim_shape *sh)
{
    const char *names[MAX_RUNS], *execs[MAX_RUNS];
    smoe_sim_result res[MAX_RUNS];
    for (int i = 0; i < R->n; i++) {
        names[i] = R->runs[i].name;
        execs[i] = smoe_sim_executor_name(R->runs[i].exec);
        res[i] = R->runs[i].r;
    }
    sim_print_json(stdout, plan, hw, sh, R->facts.tuned, names, execs, res, R->n, &a->sc, &R->rd,
                   R->curve, a->sweep ? R->ncurve : 0);
}

/* --trace: every traced row's timeline in one file; the traces freed. */
static void write_traces(const sim_args *a, sim_rows *R)
{
    smoe_err err;
    if (a->trace_path) {
        const char *frags[MAX_RUNS];
        size_t lens[MAX_RUNS];
        int nt = 0;
        for (int i = 0; i < R->n; i++)
            if (R->traces[i]) {
                if (smoe_trace_fragment(R->traces[i], &frags[nt], &lens[nt], &err))
                    cli_die(&err);
                nt++;
            }
        smoe_out *o = cli_out_open("--trace", a->trace_path);
        cli_out_finish(o, smoe_trace_write(smoe_out_file(o), frags, lens, nt, &err), &err,
                       "--trace", a->trace_path);
    }
    for (int i = 0; i < R->n; i++)
        smoe_trace_free(R->traces[i]);
}

int cmd_sim(int argc, char **argv)
{
    static sim_args a;
    static sim_rows R;
    memset(&a, 0, sizeof a);
    memset(&R, 0, sizeof R);
    if (sim_parse_args(&a, argc, argv))
        return SMOE_EXIT_OK;
    if (a.calib)
        return sim_calibrate(argc, argv, &a.c, a.out,
                         a.pthread < 0 ? SMOE_RT_PROGRESS_AUTO : a.pthread);
    a.arena = smoe_arena_new(64 * 1024);
    if (a.scenario)
        sim_apply_scenario(&a);
    smoe_hw hw;
    smoe_sim_shape sh;
    char path[4200];
    const char *hwf;
    sim_load_hw(&a, &hw, path, sizeof path, &hwf, &sh);
    smoe_plan *plan;
    const smoe_sim_shape in = sh; /* as given; sim_build resolves sh */
    smoe_sim_model *m = sim_build(&a.c, NULL, NULL, NULL, 0, &hw, &sh, &plan, &R.facts);
    if (a.profile)
        load_profile(&a, m, R.prof, R.prof_n);
    run_base(&a, &R, &hw, m);
    run_variants(&a, &R, &hw, &in, sh.context);
    run_budget(&a, &R, m);
    run_readings(&a, &R, &hw, &in);
    if (a.c.json)
        print_json(&a, &R, &hw, plan, &sh);
    else
        print_text(&a, &R, &hw, hwf, plan, &sh);
    if (a.plot_path)
        sim_write_plot(a.plot_path, m, R.own, R.traces, R.n, R.curve, R.ncurve, &a.sc, &R.rd);
    if (a.sched_out)
        sim_write_schedule(a.sched_out, m, R.own, &hw, a.budget,
                       (const unsigned char(*)[SMOE_SIM_MAX_WEIGHTS])R.dist, a.depth);
    write_traces(&a, &R);
    smoe_sim_model_free(m);
    smoe_plan_free(plan);
    smoe_arena_free(a.arena);
    free(a.scn_over);
    free(a.scn_where);
    return SMOE_EXIT_OK;
}
