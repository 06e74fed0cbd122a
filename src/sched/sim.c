/* The discrete-event simulation of one training step over three
 * resources: the compute stream, the gather engine (FSDP all-gathers, in
 * issue order) and the communication engine (expert exchanges and gradient
 * reductions, in issue order); with a shared engine the last two are one.
 * (With enough collective engines, exchanges and reductions each get one
 * of their own too.) Units are layers in use order: forward 0..L-1, the
 * head, backward L-1..0. A weight prefetched d layers ahead is issued when
 * the compute of the unit d before its own starts; what is not prefetched
 * is issued when its unit is ready to run.
 * The request's executor (smoe_sim_executor) says what runs the schedule:
 * when gathers issue and what a layer waits for (XLA's dataflow, MaxText's
 * issue points, smoe's runtime and its buffer pool), when gradients are
 * reduced. The profile says only what the hardware does: on cpu profiles
 * collectives are work of the same cores, so compute that overlaps them is
 * stretched by the overlap, and every sync point (a unit's first gather,
 * an expert exchange) waits the arrival spread of the ranks (the pass's:
 * cores.c, where ranks outnumber cores, derives it and the compute rate
 * from the ranks' CPU work over the cores).
 * Memory: gathered weights live from issue to the end of their use,
 * gradients of a layer from the start of its backward to the end of its
 * reductions. Every executor but smoe's runtime counts the rest as
 * MaxText's program holds it (mxmem.c: top-level weights, logits,
 * gradients and activations as events on the same timeline, the peak read
 * at one instant). smoe's executor counts as smoe train tracks (loop.c,
 * prefetch.c): the top-level weights and gradients all step, a backward
 * layer's gradient buffer from its taking to the compute's end, then its
 * gradients in the weights' buffer until reduced, and the caller's
 * activations (smoe_sim_shape.act_bytes) where given. */
#include "sim_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int unit_layer(const smoe_sim_model *m, int u) { return sim_unit_layer(m->L, u); }

const char *smoe_sim_executor_name(smoe_sim_executor e)
{
    switch (e) {
    case SMOE_SIM_EXEC_XLA_SCAN: return "xla_scan";
    case SMOE_SIM_EXEC_XLA_PREFETCH: return "xla_prefetch";
    case SMOE_SIM_EXEC_MAXTEXT: return "maxtext";
    case SMOE_SIM_EXEC_RUNTIME: return "smoe_runtime";
    case SMOE_SIM_EXEC_NONE: break;
    }
    return NULL;
}

/* A gather's time t with latency part lat at the run's gather ratio
 * (G_BYTES, G_WIRE: sim_impl.h). */
static double scaled(const sim *x, double t, double lat)
{
    return lat + (t - lat) * x->gratio;
}

static double pre_time(const sim *x, const sim_w *w)
{
    if (x->s->legacy)
        return w->pre_legacy_s;
    if (x->gmode == G_WIRE)
        return scaled(x, w->pre_s, w->ag_lat_s);
    return x->gmode == G_CAST ? w->pre_s : x->gmode == G_STORED ? w->pre_stored_s
                                                                : scaled(x, w->pre_stored_s, w->ag_lat_s);
}

/* Gathered bytes of a weight and of a layer (the buffers). */
static double w_bytes(const sim *x, const sim_w *w)
{
    if (x->s->legacy)
        return w->bytes_stored;
    return x->gmode == G_CAST || x->gmode == G_WIRE ? w->bytes : x->gmode == G_STORED ? w->bytes_stored
                                                                : w->bytes_stored * x->gratio;
}

/* The bytes smoe's executor's buffers hold (smoe train's count) where it
 * runs the step, else (and in a model that leaves them 0) the gathers'
 * (w_bytes, k_bytes). */
static double w_mem(const sim *x, const sim_w *w)
{
    return x->pool && w->bytes_exec > 0 ? w->bytes_exec : w_bytes(x, w);
}

static double k_bytes(const sim *x, const sim_kind *k)
{
    if (x->s->legacy)
        return k->bytes_stored;
    return x->gmode == G_CAST || x->gmode == G_WIRE ? k->bytes
           : x->gmode == G_STORED                   ? k->bytes_stored
                                                                : k->bytes_stored * x->gratio;
}

static double k_mem(const sim *x, const sim_kind *k)
{
    return x->pool && k->bytes_exec > 0 ? k->bytes_exec : k_bytes(x, k);
}

/* A weight's gradient reduction: on XLA's scan and MaxText's path in the
 * dtype its gather moved (the reduce-scatter is the gather's transpose);
 * smoe's schedules and the legacy plan reduce as stored. */
static double rs_time(const sim *x, const sim_w *w)
{
    if (x->s->legacy || (!x->mx && !x->xla))
        return w->rs_s;
    return x->gmode == G_CAST ? w->rs_cast_s : x->gmode == G_STORED ? w->rs_s
                                                                    : scaled(x, w->rs_s, w->rs_lat_s);
}

/* MaxText's issue points (fsdp_prefetch.py): at the step's start (a
 * stack's first forward gather), one layer ahead, fenced (a stack's first
 * backward gather: issued when the stack's incoming gradient exists) or
 * together with the fenced one (the stack's second backward layer). */
enum { MX_START, MX_AHEAD, MX_FENCED, MX_WITH_FENCED };

static int mx_point(const smoe_sim_model *m, int u)
{
    if (u < m->L)
        return u == 0 || m->kind_of[u - 1] != m->kind_of[u] ? MX_START : MX_AHEAD;
    int l = 2 * m->L - 1 - u;
    int first = l == m->L - 1 || m->kind_of[l + 1] != m->kind_of[l];
    if (first)
        return MX_FENCED;
    int up_first = l + 1 == m->L - 1 || m->kind_of[l + 2] != m->kind_of[l + 1];
    return up_first ? MX_WITH_FENCED : MX_AHEAD;
}

/* Issue fraction `frac` of weight w of unit u at time t. The first gather
 * of a unit is a sync point: it also waits for the last rank to arrive. */
static void issue(sim *x, int u, int w, double frac, double t)
{
    const sim_kind *k = &x->m->k[x->m->kind_of[unit_layer(x->m, u)]];
    double dur = pre_time(x, &k->w[w]) * frac;
    const double link = sim_link_secs(x, dur * k->w[w].pre_net, x->m->hw.dcn_bandwidth);
    if (x->gend[u] == 0 && dur > 0 && t > 0) {
        /* a sync point: also waits for a reductions' root (not at the step's
         * start, which follows the last step's blocking all-reduces) */
        x->nsync++;
        double skew = x->p.skew;
        const double f = x->m->hw.cpu.gather_core_fraction;
        if (x->p.overlap && f > 0) {
            /* the last rank, arriving `skew` late, still does its own part
             * of the unit's gathers (their cores' part); their waits on
             * the others' turns ran meanwhile */
            double set = 0;
            for (int i = 0; i < k->nw; i++)
                set += pre_time(x, &k->w[i]);
            skew = fmax(0, skew - (1 - f) * set);
        }
        dur += skew + x->lag;
        x->lag = 0;
    }
    x->r.gather_busy_s += dur;
    /* what waits for it: the layer's start, the experts (their up
     * projections), or the routed down projection (split) */
    int grp = !x->split || !k->w[w].routed ? 0 : k->w[w].down ? 2 : 1;
    double end = sim_engine_u(x, &x->geng, t, dur, LANE_GATHER, k->w[w].name, 3 * u + grp,
                          sim_core_part(x, k->w[w].pre_net), link);
    double *ge = grp == 2 ? &x->gend_down[u] : grp ? &x->gend_exp[u] : &x->gend[u];
    if (end > *ge)
        *ge = end;
    sim_mem(x, t, w_mem(x, &k->w[w]) * frac);
    /* what moves: smoe's records are smaller than the buffers they fill */
    x->r.issued_bytes += w_bytes(x, &k->w[w]) * frac * (x->gmode == G_WIRE ? x->gratio : 1);
}

/* Issue all of unit u's weights at t: those the layer uses first (the
 * non-routed ones) ahead of the routed experts'. */
static void issue_unit(sim *x, int u, double t)
{
    const sim_kind *k = &x->m->k[x->m->kind_of[unit_layer(x->m, u)]];
    for (int routed = 0; routed < 2; routed++)
        for (int w = 0; w < k->nw; w++)
            if (k->w[w].routed == routed)
                issue(x, u, w, 1, t);
}

/* The schedule's gathers issued at point p (-1: the step's start) for
 * units `ahead` of p (1) or for p itself (0: just before use, the weights
 * the layer uses first, the non-routed ones, ahead of the routed experts';
 * groups: bit 0 the non-routed, bit 1 the routed ones). */
static void issue_point(sim *x, int p, int ahead, int groups, double t)
{
    const smoe_sched_gather *g = x->sc->g;
    for (int routed = 0; routed < 2 - ahead; routed++)
        for (int i = x->at[p + 1]; i < x->at[p + 2] && (ahead || groups >> routed & 1); i++) {
            if ((g[i].unit > p) != ahead)
                continue;
            const sim_kind *k = &x->m->k[x->m->kind_of[unit_layer(x->m, g[i].unit)]];
            if (!ahead && k->w[g[i].weight].routed != routed)
                continue;
            issue(x, g[i].unit, g[i].weight, (double)g[i].nchunks / SMOE_SCHED_CHUNKS, t);
        }
}

/* smoe's executor starts a schedule entry (pool.c). */
static void pool_start(void *ud, const smoe_sched_gather *e, double at)
{
    issue(ud, e->unit, e->weight, (double)e->nchunks / SMOE_SCHED_CHUNKS, at);
}

/* At the start of unit k's compute: prefetches whose issue point it is. */
static void issue_ahead(sim *x, int k, double t)
{
    const smoe_sim_model *m = x->m;
    if (x->mx) {
        if (k + 1 < 2 * m->L && mx_point(m, k + 1) == MX_AHEAD)
            issue_unit(x, k + 1, t);
        return;
    }
    if (!x->pool)
        issue_point(x, k, 1, 3, t);
}

static int cmp_mev(const void *a, const void *b)
{
    const mev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return (x->bytes > y->bytes) - (x->bytes < y->bytes); /* frees first */
}

/* Wait from `ready` until `until` for gathers (exposed). */
static double wait_gathers(sim *x, double ready, double until, const char *name)
{
    if (until <= ready)
        return ready;
    x->r.exposed_gather_s += until - ready;
    sim_span(x, LANE_WAIT, name, ready, until);
    return until;
}

/* The backward's gradients of a layer whose compute ran [start, end];
 * returns when its reductions end. */
static double reduce(sim *x, const sim_kind *k, double start, double end)
{
    double rs_end = end;
    if (x->mx) { /* dW(k) whole, as stored, until its reduce-scatter ends */
        sim_mem(x, end, k_bytes(x, k));
        for (int w = 0; w < k->nw; w++)
            rs_end = sim_reduction(x, &k->w[w], end, rs_time(x, &k->w[w]));
        sim_mem(x, rs_end, -k_bytes(x, k));
    } else if (x->xla) {
        /* XLA's scan in op order: a weight's gradient appears with its
         * transpose, the routed experts' when the experts' transposes end,
         * the others' at the layer's end; that transpose is the gathered
         * weight's last use, so its buffer frees then. Reduce-scattered from
         * then in the dtype its gather moved. */
        for (int routed = 1; routed >= 0; routed--)
            for (int w = 0; w < k->nw; w++) {
                if (k->w[w].routed != routed)
                    continue;
                double p = routed && k->moe ? fmin(x->t_exp_grad, end) : end;
                double b = w_bytes(x, &k->w[w]);
                double e = sim_reduction(x, &k->w[w], p, rs_time(x, &k->w[w]));
                sim_mem(x, p, -b); /* the gathered weight */
                sim_mem(x, p, b);
                sim_mem(x, e, -b);
            }
    } else { /* smoe's schedules: the layer's gradients from its start;
              * the weights' buffer holds them until the reduce-scatters
              * end, the all-reduces after them run on the shards'
              * gradients: smoe's runtime (pool) gates each on its own
              * weight's reduce-scatter, XLA issues them after the layer's */
        for (int w = 0; w < k->nw; w++) {
            double rs = sim_reduction(x, &k->w[w], end, k->w[w].rs_s - k->w[w].ar_s);
            rs_end = fmax(rs_end, rs);
            if (x->pool && k->w[w].ar_s > 0)
                sim_allreduce(x, &k->w[w], rs, k->w[w].ar_s);
        }
        for (int w = 0; !x->pool && w < k->nw; w++)
            if (k->w[w].ar_s > 0)
                sim_allreduce(x, &k->w[w], rs_end, k->w[w].ar_s);
        if (x->pool) { /* train's prefetch.c: the gradient buffer from when it
                        * is taken to the compute's end, then the gradients
                        * in the weights' buffer until their reduce-scatters
                        * end */
            sim_mem(x, x->gb_t, k_mem(x, k));
            sim_mem(x, end, -k_mem(x, k));
            sim_mem(x, rs_end, -k_mem(x, k));
        } else {
            sim_mem(x, start, k->bytes);
            sim_mem(x, rs_end, -k->bytes);
        }
        if (x->pool && x->m->hw.cpu.reduce_lag_bandwidth > 0) /* its root reduces alone */
            x->lag += k->bytes / x->m->hw.cpu.reduce_lag_bandwidth;
    }
    return rs_end;
}

/* A unit's gathers up to the start of its compute: what is issued at its
 * point, the wait for them, the legacy residual gathers; returns the start. */
static double unit_gathers(sim *x, int u, const sim_kind *k)
{
    const smoe_sim_model *m = x->m;
    double ready = x->comp;
    if (x->mx) {
        if (mx_point(m, u) == MX_FENCED) { /* behind the stack's incoming gradient */
            issue_unit(x, u, ready);
            if (u + 1 < 2 * m->L && mx_point(m, u + 1) == MX_WITH_FENCED)
                issue_unit(x, u + 1, ready);
        }
    } else if (x->pool) { /* smoe's executor: the unit's point reached */
        x->P.reached = u;
        x->gb = -1;
        /* a backward unit's gradient buffer before later units' entries,
         * but after its own (train's prefetch.c, try_issue) */
        int hold = u >= m->L && !x->s->shared_engine;
        x->P.hold = hold ? u : -1;
        sim_pool_issue(&x->P, ready, pool_start, x);
        double a0 = fmax(ready, x->P.last);
        if (hold && sim_pool_free_at(&x->P, a0)) {
            x->gb_t = sim_pool_grad(&x->P, a0, &x->gb);
            x->P.hold = -1;
            sim_pool_issue(&x->P, a0, pool_start, x);
        }
    } else { /* what was not prefetched (XLA's scan: the routed experts'
              * weights later, at the MoE block's entry) */
        issue_point(x, u, 0, x->xla ? 1 : 3, ready);
    }
    x->comp = wait_gathers(x, ready, x->gend[u], "wait gathers");
    if (x->s->legacy) { /* the second, un-prefetched gather before use */
        double res = 0;
        for (int w = 0; w < k->nw; w++)
            res += k->w[w].res_legacy_s;
        if (res > 0) { /* on the same links: it runs ahead of queued prefetches */
            double t0 = x->comp, t1 = sim_urgent(x, t0, res, LANE_WAIT, "residual gathers");
            x->comp = t1;
            x->r.residual_s += t1 - t0;
            x->r.exposed_gather_s += t1 - t0;
        }
    }
    if (x->pool && u >= m->L && x->gb < 0) { /* the compute waits for a gradient buffer */
        double t0 = x->comp, t1 = sim_pool_grad(&x->P, t0, &x->gb);
        x->gb_t = t1;
        if (t1 > t0)
            sim_span(x, LANE_WAIT, "wait gradient buffer", t0, t1);
        x->comp = fmax(x->comp, t1);
        x->P.hold = -1;
        sim_pool_issue(&x->P, x->comp, pool_start, x);
    }
    return x->comp;
}

/* The routed experts' forward (or recompute) of `dur` seconds from t: the
 * up projections (wi_0, wi_1: 2 of its 3 matmuls) need the experts' up
 * weights, the down projection (wo) only its own, so wo's gather can run
 * behind them (XLA's dataflow; MaxText's cross-layer-prefetch sketch: wo's
 * gather "hides behind layer i's own w0/w1 matmuls (as it does today)"). */
static double experts_fwd(sim *x, int u, double t, double dur, const char *name)
{
    if (x->gend_down[u] <= t + dur * 2 / 3)
        return sim_compute(x, t, dur, name);
    t = sim_compute(x, t, dur * 2 / 3, name);
    t = x->comp = wait_gathers(x, t, x->gend_down[u], "wait expert gathers");
    return sim_compute(x, t, dur / 3, name);
}

/* A backward in op order: the recomputed forward (pre, experts,
 * combine, each exchange carrying a dispatch or combine), then the
 * transposes in reverse (combine, experts, pre) at 2x the forward; the
 * routed weights are first needed by the experts' recompute (or, without
 * recompute, by their backward). XLA's, and smoe's model under its runtime
 * (model/moe.c moe_bwd), which runs the shared experts' transpose first,
 * with the combine's: its first exchange follows them, so it queues behind
 * the reductions the previous unit left on the engine, as it does in
 * training. c[3]: the backward's phases. */
static double bwd_op_order(sim *x, int u, const sim_kind *k, double start, const double c[3])
{
    const char *nm[3] = { x->name, "experts", "combine" };
    /* each phase's recompute (rc) and transposes (tr, its own: the
     * attention kernel's and the grouped matmuls' are not 2x, layer_cost.c)
     * over its forward, the passes scaled so that they sum to the
     * backward's total (1 unless a profile set it) */
    double rc[3], tr[3] = { 2, 2, 2 };
    const double fwd[3] = { k->fwd_pre, k->fwd_exp, k->fwd_post };
    const double bwd[3] = { x->mx ? k->bwd_full_pre : k->bwd_pre,
                            x->mx ? k->bwd_full_exp : k->bwd_exp,
                            x->mx ? k->bwd_full_post : k->bwd_post };
    for (int j = 0; j < 3; j++) {
        rc[j] = x->mx ? 1 : k->rc[j];
        if (fwd[j] > 0)
            tr[j] = bwd[j] / fwd[j] - rc[j];
    }
    double fsum = bwd[0] + bwd[1] + bwd[2];
    double bsum = c[0] + c[1] + c[2];
    double sc = fsum > 0 ? bsum / fsum : 1;
    double fw[3] = { k->fwd_pre * sc, k->fwd_exp * sc, k->fwd_post * sc };
    double first = x->split ? 0 : fw[0] * k->pre_shared; /* smoe: shared experts first */
    double t = start;
    int waited = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 && rc[0] + rc[1] + rc[2] <= 0)
            continue;
        for (int j = 0; j < 3; j++) {
            int ph = pass == 0 ? j : 2 - j; /* 0 pre, 1 experts, 2 combine */
            double f = pass == 0 ? rc[ph] : tr[ph]; /* a phase kept whole is not recomputed */
            if (f <= 0)
                continue;
            if (ph == 1 && !waited && x->xla && k->moe)
                issue_point(x, u, 0, 2, t); /* the MoE block's entry */
            if (j > 0 && k->moe && k->a2a_s + k->permute_s > 0) {
                double a1 = sim_exchange(x, t, k->a2a_s + k->permute_s / 2 + x->p.skew);
                x->nsync++;
                x->r.a2a_s += a1 - t;
                t = x->comp = fmax(x->comp, a1);
            }
            if (ph == 1 && !waited) { /* the exchange needs no weights */
                t = x->comp = wait_gathers(x, t, x->gend_exp[u], "wait expert gathers");
                if (pass == 1) /* no recompute: the transposes start with wo's */
                    t = x->comp = wait_gathers(x, t, x->gend_down[u], "wait expert gathers");
                waited = 1;
                if (pass == 0) {
                    t = experts_fwd(x, u, t, fw[ph] * f, nm[ph]);
                    continue;
                }
            }
            double d = fw[ph] + (pass == 1 ? (ph == 2) - (ph == 0) : 0) * first;
            if (d > 0 || ph == 0)
                t = sim_compute(x, t, d * f, nm[ph]);
            if (pass == 1 && ph == 1)
                x->t_exp_grad = t;
        }
    }
    return t;
}

/* One unit: gathers, residual gathers (legacy), compute around the expert
 * exchange, and in the backward the gradient reductions. */
static void run_unit(sim *x, int u)
{
    const smoe_sim_model *m = x->m;
    int l = unit_layer(m, u), bwd = u >= m->L;
    const sim_kind *k = &m->k[m->kind_of[l]];
    double start = unit_gathers(x, u, k);
    issue_ahead(x, u, start);
    x->t_exp_grad = INFINITY;
    int full = x->mx; /* MaxText's path rematerialises fully */
    double c[3] = { !bwd ? k->fwd_pre : full ? k->bwd_full_pre : k->bwd_pre,
                    !bwd ? k->fwd_exp : full ? k->bwd_full_exp : k->bwd_exp,
                    !bwd ? k->fwd_post : full ? k->bwd_full_post : k->bwd_post };
    /* the forward's dispatch + combine, half with each exchange (the
     * backward's: bwd_op_order) */
    double perm = k->permute_s / 2;
    snprintf(x->name, sizeof x->name, "%s L%d %s", bwd ? "bwd" : "fwd", l, k->moe ? "moe" : "dense");
    double t;
    if (bwd) {
        t = bwd_op_order(x, u, k, start, c);
    } else {
        t = sim_compute(x, start, c[0], x->name);
        if (x->xla && k->moe)
            issue_point(x, u, 0, 2, t); /* the MoE block's entry */
        if (k->moe && k->a2a_s + perm > 0) {
            for (int half = 0; half < 2; half++) {
                double a0 = t, a1 = sim_exchange(x, t, k->a2a_s + perm + x->p.skew);
                x->nsync++;
                x->r.a2a_s += a1 - a0;
                x->comp = fmax(x->comp, a1);
                if (half == 0)
                    a1 = x->comp = wait_gathers(x, a1, x->gend_exp[u], "wait expert gathers");
                t = half == 0 ? experts_fwd(x, u, a1, c[1], "experts")
                              : sim_compute(x, a1, c[2], "combine");
            }
        } else if (k->moe) {
            t = x->comp = wait_gathers(x, t, x->gend_exp[u], "wait expert gathers");
            t = experts_fwd(x, u, t, c[1], "experts");
            if (c[2] > 0)
                t = sim_compute(x, t, c[2], "experts");
        }
    }
    /* a custom remat policy's offloaded tensors, to the host in the forward
     * and back in the backward, on the host link beside the compute (XLA's
     * asynchronous copies): a unit ends once its copies are done */
    if (k->offload_s > 0 && !x->mx) {
        x->host = fmax(x->host, start) + k->offload_s;
        t = x->comp = fmax(t, x->host);
    }
    /* the gathered weights (XLA's backward frees each with its transpose,
     * smoe's executor its buffer when the gradients in it are reduced) */
    if (!bwd || (!x->xla && !x->pool))
        sim_mem(x, t, -k_mem(x, k));
    if (x->mxm) /* the layer's activations (mxmem.c) */
        sim_mx_unit(x, k, bwd, start, t);
    double rs_end = t;
    if (bwd)
        rs_end = reduce(x, k, start, t);
    if (x->pool) { /* buffers freed; entries waiting for one go */
        sim_pool_grad_done(&x->P, x->gb, t);
        sim_pool_release(&x->P, u, rs_end);
        sim_pool_issue(&x->P, t, pool_start, x);
    }
}

/* The peak: the live gathered bytes at their peak plus the static parts. */
static void sim_memory(sim *x)
{
    const smoe_sim_model *m = x->m;
    qsort(x->ev, (size_t)x->nev, sizeof *x->ev, cmp_mev);
    double live = 0, peak = 0;
    for (int i = 0; i < x->nev; i++) {
        live += x->ev[i].bytes;
        peak = fmax(peak, live);
    }
    double act = 0, act_peak = 0;
    for (int l = 0; l < m->L; l++) {
        act += x->mx ? m->k[m->kind_of[l]].act_input : m->k[m->kind_of[l]].act_saved;
        act_peak = fmax(act_peak, m->k[m->kind_of[l]].act_peak);
    }
    x->r.mem_params = m->mem_params;
    x->r.mem_grads = m->mem_grads;
    x->r.mem_optimizer = m->mem_optimizer;
    if (x->pool) { /* smoe train's count (loop.c, tr_mem_of): the top-level
                    * weights and their gradients all step, the model's
                    * activations where the caller gave them */
        x->r.mem_top = 2 * (m->top_bytes_exec > 0 ? m->top_bytes_exec : m->top_bytes);
        peak += x->r.mem_top;
        if (m->act_runtime > 0) {
            act = m->act_runtime;
            act_peak = 0;
        }
    }
    x->r.mem_gathered = peak;
    x->r.mem_activations = act + act_peak;
    x->r.peak_hbm_bytes = m->mem_params + m->mem_grads + m->mem_optimizer + peak + act + act_peak;
}

/* The step's start: the top-level weights, then the units whose prefetch
 * window starts at 0; smoe's executor (train's loop.c, step_begin)
 * gathers the embedding, then the schedule's first entries, then the
 * head's weights, which are used last (waited for at the head); with
 * prefetch it issues them inside the last step's optimizer, at *t0
 * (pool.c). Returns when the compute may start; *head_end: when the
 * head's weights have arrived. */
static double step_start(sim *x, const smoe_schedule *sc, double *t0, double *head_end)
{
    const smoe_sim_model *m = x->m;
    const int nu = 2 * m->L;
    double head_s = x->pool ? m->top_gather_s - m->top_embed_s : 0;
    *t0 = x->pool ? -sim_pool_lead(m, sc) * x->p.rate : 0;
    x->geng = *t0;
    double top = sim_engine(x, &x->geng, *t0, m->top_gather_s - head_s, LANE_GATHER,
                            x->pool ? "embedding weights" : "top-level weights");
    x->r.gather_busy_s += m->top_gather_s;
    if (!x->pool && !x->mxm) /* (smoe's executor holds them all step: sim_memory) */
        sim_mem(x, *t0, m->top_bytes);
    for (int u = 0; x->mx && u < nu; u++)
        if (mx_point(m, u) == MX_START)
            issue_unit(x, u, 0);
    if (x->pool)
        sim_pool_issue(&x->P, *t0, pool_start, x);
    else if (!x->mx)
        issue_point(x, -1, 1, 3, 0);
    *head_end = head_s > 0 ? sim_engine_u(x, &x->geng, *t0, head_s, LANE_GATHER, "head weights",
                                          -1, 1 - m->top_head_net,
                                          sim_link_secs(x, head_s * m->top_head_net,
                                                        m->hw.dcn_bandwidth))
                           : 0;
    top = fmax(0, top);
    if (top > 0) {
        x->r.exposed_gather_s += top;
        x->r.exposed_top_s += top;
        sim_span(x, LANE_WAIT, "wait top-level gathers", 0, top);
    }
    return top;
}

/* The forward from `top`: the embedding, the layers, the head. */
static void step_forward(sim *x, double t0, double top, double head_end)
{
    const smoe_sim_model *m = x->m;
    x->comp = top;
    double emb = sim_compute(x, top, m->embed_fwd_s, "embed");
    if (x->mxm)
        sim_mx_embed(x, t0, emb);
    for (int u = 0; u < m->L; u++)
        run_unit(x, u);
    double before = x->r.exposed_gather_s;
    x->comp = wait_gathers(x, x->comp, head_end, "wait head gathers");
    x->r.exposed_top_s += x->r.exposed_gather_s - before;
    double h0 = x->comp, h = sim_compute(x, x->comp, m->head_s, "head");
    if (x->mxm)
        sim_mx_head(x, h0, h);
    else if (!x->pool)
        sim_mem(x, h, -m->top_bytes); /* embedding and head weights done */
}

/* The backward, the wait for the reductions (and their root), AdamW; the
 * step's end and its memory. */
static void step_backward(sim *x)
{
    const smoe_sim_model *m = x->m;
    for (int u = m->L; u < 2 * m->L; u++)
        run_unit(x, u);
    if (!x->pool && !x->mxm)
        sim_mem(x, x->comp, m->top_bytes); /* the embedding's gradient */
    double e0 = x->comp, e = sim_compute(x, x->comp, m->embed_bwd_s, "embed bwd");
    double rs_top = sim_engine(x, x->reng, e, m->top_rs_s, LANE_COMM, "reduce-scatter top");
    if (x->mxm)
        sim_mx_top_grads(x, e0, rs_top);
    double done = fmax(fmax(*x->reng, *x->aeng), *x->areng);
    double wait = fmax(0, done - x->comp) + x->lag; /* and the root */
    x->r.reduce_wait_s = wait;
    if (wait > 0)
        sim_span(x, LANE_WAIT, "wait reductions", x->comp, x->comp + wait);
    x->comp += wait;
    sim_compute(x, x->comp, m->optimizer_s, "adamw");
    x->r.step_s = x->comp;
    if (!x->pool && !x->mxm)
        sim_mem(x, x->comp, -m->top_bytes);
    if (x->mxm)
        sim_mx_peak(x, cmp_mev);
    else
        sim_memory(x);
    for (int i = 0; i < x->nq; i++)
        sim_span(x, x->ql[i], x->qn[i], x->qt[i], x->qe[i]);
}

smoe_status sim_run_pass(const smoe_sim_model *m, const smoe_sim_sched *s, const smoe_schedule *sc,
                         const sim_pass *p, smoe_sim_result *r, sim_pass_out *out,
                         smoe_trace *trace)
{
    sim x;
    if (sim_init(&x, m, s, sc, trace))
        return SMOE_ENOMEM;
    x.p = *p;
    double t0, head_end, top = step_start(&x, sc, &t0, &head_end);
    step_forward(&x, t0, top, head_end);
    step_backward(&x);
    *r = x.r;
    out->work_s = x.work;
    out->nsync = x.nsync;
    smoe_status st = p->keep ? sim_link_keep(&x, p->keep) : SMOE_OK;
    sim_free(&x);
    return st;
}

/* Does schedule sc fit model m: its layers, every entry's unit, weight and
 * issue point? */
static int schedule_fits(const smoe_sim_model *m, const smoe_schedule *sc)
{
    if (sc->L != m->L)
        return 0;
    for (int i = 0; i < sc->n; i++) {
        const smoe_sched_gather *g = &sc->g[i];
        if (g->unit < 0 || g->unit >= 2 * m->L || g->issue < -1 || g->issue > g->unit ||
            g->weight < 0 || g->weight >= m->k[m->kind_of[unit_layer(m, g->unit)]].nw)
            return 0;
    }
    return 1;
}

/* One step: one pass at the profile's rates, or where a host's ranks share
 * fewer cores than they are, the core-sharing model's passes (cores.c). */
smoe_status smoe_sim_run(const smoe_sim_model *m, const smoe_sim_sched *s, smoe_sim_result *r,
                         smoe_trace *trace)
{
    smoe_schedule *own = NULL;
    const smoe_schedule *sc = s->schedule;
    if (!smoe_sim_executor_name(s->executor))
        return SMOE_EINVAL; /* no executor chosen */
    if (!sc) {
        if (!s->distance && (s->prefetch_depth < 0 || s->prefetch_depth > SMOE_SIM_MAX_DEPTH))
            return SMOE_EINVAL;
        smoe_status st = smoe_schedule_for_model(m, s->prefetch_depth, s->distance, &own, NULL);
        if (st)
            return st;
        sc = own;
    }
    smoe_status st;
    if (!schedule_fits(m, sc)) {
        st = SMOE_EINVAL;
    } else if (sim_cores_shared(m)) {
        st = sim_cores_step(m, s, sc, r, trace);
    } else if (sim_link_shared(m)) {
        st = sim_link_step(m, s, sc, r, trace);
    } else {
        sim_pass p = { .rate = 1, .skew = m->skew };
        sim_pass_out o;
        st = sim_run_pass(m, s, sc, &p, r, &o, trace);
    }
    smoe_schedule_free(own);
    return st;
}
