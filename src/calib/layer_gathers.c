/* A layer's weight gathers, measured as smoe train issues them
 * (calib_impl.h): across hosts the link's terms and, with the same
 * weights gathered within each host only (as HSDP's gathers and a
 * two-level gather's second level run), the shared memory's; on one host
 * the shared memory's. A one-weight sweep (calibrate.c) times one gather at a time,
 * back to back; training starts a layer's dozen gathers at once, up to the
 * runtime's window of them in flight, on communicators of 2 and 4 ranks,
 * and waits for each in turn: what each costs there is what the simulator
 * needs, so that is what is timed. On one host that is several times the
 * sweep's sum for the default model's layers (the ranks that share a core
 * take turns at every handshake of a dozen collectives at once; the
 * figures: bench/results/2026-12-02-budget-sim-train.md). */
#include "calib_impl.h"

#include "smoe/model.h"
#include "smoe/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SET = 64, REPS = 40 };

static const char *const k_stacks[2] = { "decoder/dense_layers/", "decoder/moe_layers/" };

/* plan's mesh is (fsdp = nodes, expert = per_node) in that order, all else 1 */
static int same_mesh(const smoe_mesh *m, int nodes, int per_node)
{
    int f = -1, e = -1;
    for (int a = 0; a < m->n; a++) {
        if (m->size[a] <= 1)
            continue;
        if (strcmp(m->name[a], "fsdp") == 0 && m->size[a] == nodes)
            f = a;
        else if (strcmp(m->name[a], "expert") == 0 && m->size[a] == per_node)
            e = a;
        else
            return 0;
    }
    return f >= 0 && (per_node == 1 || (e > f));
}

/* A routed expert weight keeps its `expert` sharding (as smoe train's store). */
static int is_routed(const char *rest)
{
    static const smoe_wslot r[3] = { SMOE_W_EXP_WI0, SMOE_W_EXP_WI1, SMOE_W_EXP_WO };
    for (int i = 0; i < 3; i++)
        if (strcmp(rest, smoe_wslot_path(r[i])) == 0)
            return 1;
    return 0;
}

typedef struct layer_set {
    int n;
    smoe_wgather *g[MAX_SET];
    float *shard[MAX_SET], *buf[MAX_SET];
    float *grad[MAX_SET], *scratch[MAX_SET]; /* the reductions' (scratch: when they pack) */
    float *full[MAX_SET]; /* across hosts: the reductions' source while the gathers
                             fill buf (run_both) */
    double far_bytes, far_steps; /* the cost model's terms (cost.c coll_at) */
    double near_bytes, near_steps; /* the same within the node */
    int64_t scale;               /* the model's bytes times this */
    char what[64];
} layer_set;

/* Every name `from` among g's axes made `to`. */
static void rename_axes(smoe_gather *g, const char *from, const char *to)
{
    smoe_axes *sets[4] = { g->live, g->axes, g->out, g->residual };
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < g->rank; d++)
            for (int a = 0; a < sets[k][d].n; a++)
                if (strcmp(sets[k][d].ax[a], from) == 0)
                    sets[k][d].ax[a] = to;
}

/* g sharded and gathered within each host only, replicated across hosts
 * (as HSDP's gathers): its source spec without the cross-host axis (fsdp
 * on the calibration's mesh: same_mesh), the within-host one (expert)
 * gathered as an FSDP axis. The plan's rule gathers `expert` only after
 * an FSDP axis, so the gather is computed on the mesh with the two
 * renamed (expert as fsdp, fsdp as data), then named back. */
static void within_host(const smoe_gather *g, const smoe_plan *plan, smoe_gather *out)
{
    smoe_mesh m = plan->mesh;
    for (int a = 0; a < m.n; a++)
        m.name[a] = strcmp(m.name[a], "fsdp") == 0     ? "data"
                  : strcmp(m.name[a], "expert") == 0 ? "fsdp"
                                                     : m.name[a];
    smoe_pspec sp;
    memset(&sp, 0, sizeof sp);
    sp.rank = g->rank;
    for (int d = 0; d < g->rank; d++)
        for (int a = 0; a < g->live[d].n; a++)
            if (strcmp(g->live[d].ax[a], "expert") == 0)
                sp.dim[d].ax[sp.dim[d].n++] = "fsdp";
    smoe_gather_compute(&sp, g->shape, &m, SMOE_MODE_COAXIS, plan->dtype_bytes, out);
    rename_axes(out, "fsdp", "expert");
    out->wire = g->wire;
}

/* Layer kind `kind`'s gathers at s times their bytes into L; with
 * near_only, each gathered within the host only (within_host), routed
 * experts too (their expert axis is the host's); with `both`, the
 * reductions' own source for run_both. */
static smoe_status build_set(smoe_rt *rt, const smoe_plan *plan, int kind, int per_node,
                             int near_only, int both, int64_t s, layer_set *L, smoe_err *err)
{
    memset(L, 0, sizeof *L);
    L->scale = s;
    size_t pl = strlen(k_stacks[kind]);
    snprintf(L->what, sizeof L->what, "%s x%lld", k_stacks[kind], (long long)s);
    for (int i = 0; i < plan->n && L->n < MAX_SET; i++) {
        const smoe_weight *pw = &plan->w[i];
        if (pw->kind != SMOE_ENTRY_PARAM || !pw->path || strncmp(pw->path, k_stacks[kind], pl) ||
            pw->gather.status == SMOE_GATHER_NOOP)
            continue;
        smoe_gather gn;
        if (near_only)
            within_host(&pw->gather, plan, &gn);
        const smoe_gather *g = near_only ? &gn : &pw->gather;
        if (g->status == SMOE_GATHER_NOOP)
            continue;
        smoe_gather_exec x;
        smoe_status st;
        int routed = !near_only && is_routed(pw->path + pl);
        if ((st = smoe_gather_exec_of(g, routed, pw->path, &x, err)) ||
            (st = smoe_gather_exec_set_wire(&x, g, &plan->mesh, g->wire, plan->int8_block,
                                            pw->path, err)))
            return st;
        x.shape[x.rank - 1] *= s; /* the same gather, s times the bytes */
        char name[96];
        snprintf(name, sizeof name, "calibrate %s", pw->path + pl);
        const int k = L->n;
        if ((st = smoe_rt_wgather_new(rt, &x, name, &L->g[k], err)))
            return st;
        smoe_wgather_info info;
        smoe_rt_wgather_info(L->g[k], &info);
        L->shard[k] = smoe_calloc((size_t)info.shard_numel, sizeof(float));
        L->buf[k] = smoe_calloc((size_t)info.gathered_numel, sizeof(float));
        L->grad[k] = smoe_calloc((size_t)info.shard_numel, sizeof(float));
        if (smoe_rt_wgather_needs_pack(L->g[k]))
            L->scratch[k] = smoe_calloc((size_t)info.gathered_numel, sizeof(float));
        if (both)
            L->full[k] = smoe_calloc((size_t)info.gathered_numel, sizeof(float));
        L->n++; /* counted before the check, so free_set frees what was allocated */
        if (!L->shard[k] || !L->buf[k] || !L->grad[k] || (both && !L->full[k]) ||
            (smoe_rt_wgather_needs_pack(L->g[k]) && !L->scratch[k]))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        double fb, fs, nb, ns; /* the cost model's terms (sched: the one-round gather) */
        smoe_sim_gather_far(g, &plan->mesh, per_node, (double)s, &fb, &fs);
        smoe_sim_gather_near(g, &plan->mesh, per_node, (double)s, &nb, &ns);
        L->far_bytes += fb;
        L->far_steps += fs;
        L->near_bytes += nb;
        L->near_steps += ns;
    }
    return SMOE_OK;
}

/* The process's CPU seconds, every thread (the progress thread moves the
 * collectives where it runs). */
static double process_cpu(void)
{
    double u, s;
    smoe_process_cpu(&u, &s);
    return u + s;
}

static void free_set(layer_set *L)
{
    for (int i = 0; i < L->n; i++) {
        smoe_free(L->shard[i]);
        smoe_free(L->buf[i]);
        smoe_free(L->grad[i]);
        smoe_free(L->scratch[i]);
        smoe_free(L->full[i]);
    }
}

/* One set started together and waited for in order (smoe train at use),
 * every rank starting after `idle` (a layer's compute, as training's
 * gathers at use follow the previous layer's: the link is idle meanwhile)
 * and a barrier; this rank's seconds; *cpu += its CPU seconds in them. */
static double run_set(smoe_rt *rt, layer_set *L, void (*idle)(void *), void *ud, double *cpu)
{
    smoe_rt_ticket t[MAX_SET];
    idle(ud);
    smoe_rt_barrier(rt);
    double t0 = smoe_now(), c0 = process_cpu();
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_start(rt, L->g[i], L->shard[i], L->buf[i], &t[i]);
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_wait(rt, L->g[i], L->buf[i], &t[i], NULL, NULL);
    *cpu += process_cpu() - c0;
    return smoe_now() - t0;
}

/* The same weights' gradient reductions, enqueued together at the end of a
 * layer's backward as smoe train does and drained; this rank's seconds. */
static double run_reduce(smoe_rt *rt, layer_set *L, void (*idle)(void *), void *ud,
                         double *cpu, smoe_status *st, smoe_err *err)
{
    idle(ud);
    smoe_rt_barrier(rt);
    double t0 = smoe_now(), c0 = process_cpu();
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_reduce(rt, L->g[i], L->buf[i], L->scratch[i], L->grad[i], NULL, NULL);
    *st = smoe_rt_drain(rt, err);
    *cpu += process_cpu() - c0;
    return smoe_now() - t0;
}

/* The set's gathers started and its reductions enqueued together (a
 * backward layer's prefetch beside the previous layer's reductions), all
 * drained; this rank's seconds. */
static double run_both(smoe_rt *rt, layer_set *L, void (*idle)(void *), void *ud,
                       smoe_status *st, smoe_err *err)
{
    smoe_rt_ticket t[MAX_SET];
    idle(ud);
    smoe_rt_barrier(rt);
    double t0 = smoe_now();
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_start(rt, L->g[i], L->shard[i], L->buf[i], &t[i]);
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_reduce(rt, L->g[i], L->full[i], L->scratch[i], L->grad[i], NULL, NULL);
    for (int i = 0; i < L->n; i++)
        smoe_rt_wgather_wait(rt, L->g[i], L->buf[i], &t[i], NULL, NULL);
    *st = smoe_rt_drain(rt, err);
    return smoe_now() - t0;
}

/* A line through the sets' (bytes, seconds) per step: *lat, *bw;
 * where it finds no slope (noise), *bw is kept and *lat is the sets'
 * median time per step beyond their bytes at *bw. */
static void fit_sets(const double *xs, double *ys, int n, double *lat, double *bw)
{
    double a, b;
    calib_fit(xs, ys, n, &a, &b);
    if (b <= 1e-12) {
        for (int i = 0; i < n; i++)
            ys[i] = fmax(0, ys[i] - xs[i] / *bw);
        a = calib_median(ys, n);
    } else {
        *bw = 1.0 / b;
    }
    *lat = a;
}

/* The sets timed: one layer of each kind at 1, 2 and 4 times its bytes,
 * each with steps on the terms measured (near: within the host); *nset. */
static smoe_status build_sets(smoe_rt *rt, const smoe_plan *plan, int per_node, int near,
                              int near_only, int both, layer_set set[6], int *nset,
                              smoe_err *err)
{
    static const int64_t scale[3] = { 1, 2, 4 };
    smoe_status s = SMOE_OK;
    *nset = 0;
    for (int kind = 0; kind < 2 && !s; kind++)
        for (int k = 0; k < 3 && !s; k++) {
            layer_set *L = &set[*nset];
            s = build_set(rt, plan, kind, per_node, near_only, both, scale[k], L, err);
            if (s || (near ? L->near_steps : L->far_steps) <= 0)
                free_set(L);
            else
                (*nset)++;
        }
    return s;
}

/* The sets take turns rep by rep, each's gathers then its reductions
 * (one unmeasured round first), so a change of the shared machine's load
 * falls on all of them; the slowest rank's mean. The mean, not the
 * median: on a shared machine one set in a few takes several times the
 * others (a rank descheduled), and a step's wait, whose median training
 * reports, is the sum of a dozen such sets, near the sum of their means.
 * mean[j]: set j's gathers, mean[6 + j] its reductions (without
 * `reduce`: not timed, 0), mean[12 + j] both at once (with `both`, else
 * 0); *cpu_share: the ranks' CPU time in the first two over their wall
 * time. */
static smoe_status time_sets(smoe_rt *rt, layer_set set[6], int nset, int reduce, int both,
                             void (*idle)(void *), void *ud, double mean[18], double *cpu_share,
                             smoe_err *err)
{
    double busy[2] = { 0, 0 }; /* this rank's CPU and wall seconds in them */
    smoe_status s = SMOE_OK;
    for (int r = -1; r < REPS && !s; r++)
        for (int j = 0; j < nset && !s; j++) {
            double cpu = 0, t = run_set(rt, &set[j], idle, ud, &cpu);
            double tr = reduce ? run_reduce(rt, &set[j], idle, ud, &cpu, &s, err) : 0;
            double tb = both && !s ? run_both(rt, &set[j], idle, ud, &s, err) : 0;
            if (r >= 0) {
                mean[j] += t / REPS;
                mean[6 + j] += tr / REPS;
                mean[12 + j] += tb / REPS;
                busy[0] += cpu;
                busy[1] += t + tr;
            }
        }
    if (!s && nset > 0) {
        smoe_rt_allreduce_max_f64(rt, mean, 18);
        smoe_rt_allreduce_sum_f64(rt, busy, 2);
    }
    *cpu_share = busy[1] > 0 ? busy[0] / busy[1] : 0;
    if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
        fprintf(stderr, "layer sets: the ranks' CPU time over their wall time %.3f\n", *cpu_share);
    return s;
}

double calib_link_rate(double tg, double tr, double tb, double b)
{
    double lo = fmin(tg, tr), e = tb - fmax(tg, tr);
    return lo > 0 && e > 0 && b > 0 ? b * (1 / tg + 1 / tr) / (1 + e / lo) : INFINITY;
}

/* The link's rate for a layer's gathers and reductions at once: the
 * median over the sets of calib_link_rate, 0 where half or more took no
 * longer together (the link carries both). */
static double link_rate(const layer_set set[6], int nset, const double mean[18])
{
    double c[6];
    for (int j = 0; j < nset; j++)
        c[j] = calib_link_rate(mean[j], mean[6 + j], mean[12 + j], set[j].far_bytes);
    double m = nset > 0 ? calib_median(c, nset) : INFINITY;
    return !isfinite(m) || m > 1e17 ? 0 : fmax(m, 1e6); /* the key's range */
}

/* Lines through the sets' (bytes, seconds) per step for the gathers and
 * the reductions into out, and the link's rate for both; out->used when
 * at least two sets were timed. */
static void fit_all(smoe_rt *rt, const layer_set set[6], int nset, int near,
                    const double mean[18], calib_sets *out)
{
    double xs[6], ys[6], yr[6], one = 0; /* one: a step of the model's own layers */
    int n = 0, n1 = 0;
    for (int j = 0; j < nset; j++) {
        double bytes = near ? set[j].near_bytes : set[j].far_bytes;
        double steps = near ? set[j].near_steps : set[j].far_steps;
        xs[n] = bytes / steps;
        if (set[j].scale == 1) {
            one += xs[n];
            n1++;
        }
        ys[n] = mean[j] / steps;
        yr[n++] = mean[6 + j] / steps;
        if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
            fprintf(stderr, "layer gathers %s: %d gathers, %.0f bytes %s, %.0f steps: %.1f us, "
                    "their reductions %.1f us, both %.1f us\n", set[j].what, set[j].n, bytes,
                    near ? "within the host" : "from other hosts", steps, mean[j] * 1e6,
                    mean[6 + j] * 1e6, mean[12 + j] * 1e6);
    }
    if (n < 2)
        return;
    out->step_bytes = n1 ? one / n1 : 0;
    fit_sets(xs, ys, n, &out->lat, &out->bw);
    out->reduce_bw = out->bw; /* kept where the reductions' fit finds no slope */
    fit_sets(xs, yr, n, &out->reduce_lat, &out->reduce_bw);
    out->link_bw = near ? 0 : link_rate(set, nset, mean); /* timed only across hosts */
    out->used = 1;
}

smoe_status calib_layer_gathers(smoe_rt *rt, const smoe_plan *plan, int nodes, int per_node,
                                int near_only, void (*idle)(void *), void *ud, calib_sets *out,
                                smoe_err *err)
{
    out->used = 0;
    const int near = nodes == 1 || near_only; /* the within-node terms, on any mesh */
    const int both = !near; /* the link's share: across hosts, the layer's own gathers */
    if (out->bw <= 0 || (nodes == 1 ? per_node < 2 : !same_mesh(&plan->mesh, nodes, per_node)))
        return SMOE_OK;
    layer_set set[6];
    int nset;
    double mean[18] = { 0 };
    smoe_status s = build_sets(rt, plan, per_node, near, near_only, both, set, &nset, err);
    if (!s)
        s = time_sets(rt, set, nset, !near_only, both, idle, ud, mean, &out->cpu_share, err);
    if (!s)
        fit_all(rt, set, nset, near, mean, out);
    for (int j = 0; j < nset; j++)
        free_set(&set[j]);
    return s;
}

/* The sets' fit into hw's within-node (near) or cross-host figures; the
 * reductions' where they were timed (`reduce`). */
static void set_figures(smoe_hw *hw, int near, int reduce, const calib_sets *out)
{
    if (near) { /* ici_bandwidth is 2x the cost model's within-node rate */
        hw->ici_latency = out->lat;
        hw->ici_bandwidth = 2 * out->bw;
        if (reduce) {
            hw->cpu.ici_reduce_latency = out->reduce_lat;
            hw->cpu.ici_reduce_bandwidth = 2 * out->reduce_bw;
        }
    } else {
        hw->dcn_latency = out->lat;
        hw->dcn_bandwidth = out->bw;
        hw->cpu.dcn_reduce_latency = out->reduce_lat;
        hw->cpu.dcn_reduce_bandwidth = out->reduce_bw;
        hw->cpu.dcn_link_bandwidth = out->link_bw;
    }
}

smoe_status calib_layer_figures(smoe_rt *rt, const smoe_plan *plan, int nodes, int per_node,
                                void (*idle)(void *), void *ud, double share, smoe_hw *hw,
                                calib_sets *out, calib_sets *within, smoe_err *err)
{
    const int near = nodes == 1;
    *out = (calib_sets){ .lat = near ? hw->ici_latency : hw->dcn_latency,
                        .bw = near ? hw->ici_bandwidth / 2 : hw->dcn_bandwidth };
    *within = (calib_sets){ .lat = hw->ici_latency, .bw = hw->ici_bandwidth / 2 };
    smoe_status s = calib_layer_gathers(rt, plan, nodes, per_node, 0, idle, ud, out, err);
    if (s || !out->used)
        return s;
    set_figures(hw, near, 1, out);
    if (out->cpu_share > 0) /* the sets' CPU time at the rates' share of a core */
        hw->cpu.gather_core_fraction = fmin(1, fmax(1e-3, out->cpu_share / fmax(share, 1e-3)));
    /* across hosts, the same layers' gathers within each host (HSDP's, a
     * two-level gather's second level): the sweep's within-host figures
     * are a single gather's, several times cheaper than a layer's. Their
     * reductions are not timed: a weight replicated across hosts adds an
     * all-reduce over the link to its reduce-scatter, which the dcn
     * figures time. */
    if (!near && (s = calib_layer_gathers(rt, plan, nodes, per_node, 1, idle, ud, within, err)))
        return s;
    if (within->used)
        set_figures(hw, 1, 0, within);
    return SMOE_OK;
}
