/* smoe sim --calibrate: measure this machine's cpu-mpi profile the way the
 * training uses it, every rank busy at once: matmul rates at 64 and 512
 * wide, elementwise bandwidth, the cost of one small kernel call; the
 * all-gather and all-to-all of the runtime over a one-axis mesh of all
 * ranks (latency and bandwidth fitted on several sizes); the spread of the
 * ranks' arrival at a collective entered after a stretch of compute, as
 * in training; and the ratio of
 * smoe's model kernels to the cost model's roofline for the configured
 * model at its training shape (measured op costs feeding the schedule
 * simulation, as XLA's profile-guided latency estimator does). */
#define _GNU_SOURCE
#include "calib_impl.h"
#include "smoe/sched.h"
#include "smoe/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*bench_fn)(void *ud);

/* Every rate a median over CALIB_ROUNDS (more while they spread, up to
 * CALIB_MAX_ROUNDS) interleaved samples of about CALIB_TARGET_S each
 * (probe.c): timed as best of 5 over a few ms, a quiet machine's rates
 * did not repeat between two calibrations
 * (bench/results/2026-12-01-budget-sim-train.md). */
enum { CALIB_ROUNDS = 9 };
#define CALIB_TARGET_S 0.04

/* A compute-bound kernel timed while a rank had `had` of a core, brought to
 * the calibration's common share `to`: its CPU time is what the share does
 * not change (a rank's rate is its rate on a core times its share), so the
 * figures of one profile, timed seconds apart while others' load came and
 * went, describe one machine (at 4 ranks alone on 2 cores every share is
 * 0.50 and this is 1; under load the rates of one profile, each timed at
 * another share, described different machines:
 * bench/results/2026-12-02-budget-sim-train.md). Collectives are not
 * scaled: their wall time is partly waiting, not a core's work. */
static double at_share(double had, double to) { return had > 0 && to > 0 ? had / to : 1; }

/* The spread of each measured figure (interquartile range over the
 * median of its rounds), written beside the profile. */
enum { SP_PEAK, SP_SMALL, SP_CALL, SP_HBM, SP_OPT, SP_ICI, SP_A2A, SP_SCALE, SP_N };
static const char *const sp_key[SP_N] = { "peak_flops",     "gemm_small_flops", "op_overhead",
                                          "hbm_bandwidth",  "optimizer_rate",   "ici_bandwidth",
                                          "a2a_bandwidth",  "compute_scale" };
typedef struct spread {
    double v[SP_N], share[SP_N]; /* spread; the part of a core a rank had */
    double rounds;               /* the rates' rounds */
} spread;

/* Best of `reps` timings of fn (inner calls each), all ranks starting
 * together; the slowest rank's time (they share the cores, as in
 * training). */
static double timed(smoe_rt *rt, bench_fn fn, void *ud, int inner, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        smoe_rt_barrier(rt);
        double t0 = smoe_now();
        for (int i = 0; i < inner; i++)
            fn(ud);
        double t[1] = { (smoe_now() - t0) / inner };
        smoe_rt_allreduce_max_f64(rt, t, 1);
        best = fmin(best, t[0]);
    }
    return best;
}

typedef struct mm_args {
    float *a, *b, *c;
    int64_t n;
} mm_args;

static void run_mm(void *ud)
{
    mm_args *x = ud;
    smoe_matmul(x->c, x->a, x->b, x->n, x->n, x->n, 0);
}

static void run_layer_work(void *ud) /* a few ms, a layer's worth */
{
    for (int i = 0; i < 4; i++)
        run_mm(ud);
}

static void run_add(void *ud)
{
    mm_args *x = ud;
    smoe_vec_add(x->c, x->a, x->n);
}

/* smoe train's update of n parameters (optim.c): the gradient's squared
 * norm in double, then a clipped AdamW step; x->a the gradient, x->c the
 * parameters, x->b (2n) the moments. */
static void run_adamw(void *ud)
{
    mm_args *x = ud;
    double sq = 0;
    for (int64_t k = 0; k < x->n; k++)
        sq += (double)x->a[k] * (double)x->a[k];
    smoe_adamw_cfg c = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0, 0.01f, 3, (float)sqrt(sq) + 1, 1 };
    smoe_adamw_step(x->c, x->b, x->b + x->n, x->a, x->n, &c);
}

/* A collective entered after `work` (four 256-wide matmuls, a layer's
 * worth of compute) as in training:
 * returns the mean time from entering it to its completion, the slowest
 * rank's. */
typedef void (*coll_fn)(void *ud);

double calib_median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median over reps, not the mean: training's figures are medians over
 * steps, which a rare preemption of one rank (a shared machine) leaves
 * alone. */
static double after_compute(smoe_rt *rt, mm_args *work, coll_fn fn, void *ud, int reps)
{
    double w[32];
    reps = reps > 32 ? 32 : reps;
    smoe_rt_barrier(rt);
    for (int r = 0; r < reps; r++) {
        run_layer_work(work);
        double t0 = smoe_now();
        fn(ud);
        w[r] = smoe_now() - t0;
    }
    double t[1] = { calib_median(w, reps) };
    smoe_rt_allreduce_max_f64(rt, t, 1);
    return t[0];
}

typedef struct ag_args {
    smoe_rt *rt;
    smoe_wgather *g;
    float *shard, *buf;
} ag_args;

static void run_ag(void *ud)
{
    ag_args *x = ud;
    smoe_rt_ticket t;
    smoe_rt_wgather_start(x->rt, x->g, x->shard, x->buf, &t);
    smoe_rt_wgather_wait(x->rt, x->g, x->buf, &t, NULL, NULL);
}

typedef struct a2a_args {
    smoe_ep_comm c;
    float *send, *recv;
    int64_t rows[256];
    int64_t row;
} a2a_args;

static void run_a2a(void *ud)
{
    a2a_args *x = ud;
    x->c.alltoallv(x->c.ctx, x->send, x->rows, x->recv, x->rows, x->row);
}

/* Theil-Sen: b the median of the pairwise slopes, a the median of t - b x:
 * one size slowed by the shared machine's noise does not bend the line, as
 * it does least squares. */
void calib_fit(const double *x, const double *t, int n, double *a, double *b)
{
    double sl[15], res[6];
    int k = 0;
    n = n > 6 ? 6 : n;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (x[j] != x[i])
                sl[k++] = (t[j] - t[i]) / (x[j] - x[i]);
    *b = k ? calib_median(sl, k) : 0;
    for (int i = 0; i < n; i++)
        res[i] = t[i] - *b * x[i];
    *a = n ? calib_median(res, n) : 0;
    if (*a < 0)
        *a = 0;
    if (*b <= 0)
        *b = 1e-12;
}

/* A line t = a + b x fitted on n probes' medians, x[i] per probe, of a
 * collective over `size` ranks: *lat = a / (size - 1), *bw = num / b; spr[0]
 * the spread of b over the rounds (a line fitted on each round's samples),
 * spr[1] the probes' median share of a core. */
static void fit_probes(const calib_probe *p, const double *x, int n, int size, double num,
                       double *lat, double *bw, double spr[2])
{
    double sh[6];
    for (int i = 0; i < n; i++)
        sh[i] = p[i].share;
    spr[1] = calib_median(sh, n);
    double t[6], per[CALIB_MAX_ROUNDS], a, b, ra;
    for (int i = 0; i < n; i++)
        t[i] = p[i].med;
    calib_fit(x, t, n, &a, &b);
    for (int r = 0; r < p[0].rounds; r++) {
        for (int i = 0; i < n; i++)
            t[i] = p[i].t[r];
        calib_fit(x, t, n, &ra, &per[r]);
    }
    spr[0] = calib_spread(per, p[0].rounds);
    *lat = size > 1 ? a / (size - 1) : a;
    *bw = num / b;
}

/* The gathers over mesh axis `axis`: weights of `per` floats per rank,
 * six sizes taking turns (probe.c); *bw in the convention of `half` (1:
 * the cost model takes one direction of the fast interconnect as half its
 * figure). */
static smoe_status calib_gather(smoe_rt *rt, const smoe_mesh *mesh, const char *axis, int half,
                                double *lat, double *bw, double spr[2], smoe_err *err)
{
    int size = (int)smoe_mesh_axis_size(mesh, axis);
    double xs[6];
    ag_args x[6];
    calib_probe p[6];
    int n = 0;
    smoe_status s = SMOE_OK;
    memset(x, 0, sizeof x);
    memset(p, 0, sizeof p);
    /* within a host the sizes reach 4 MiB per rank: below ~1 MiB the times of a
     * copy through shared memory between ranks sharing cores are their
     * scheduling, not their bytes */
    const int64_t lo = half ? 1 << 10 : 1 << 8, hi = half ? 1 << 20 : 1 << 18;
    for (int64_t per = lo; per <= hi && n < 6; per *= 4, n++) {
        smoe_pspec spec = { 2, { { 1, { axis } }, { 0, { NULL } } } };
        int64_t shape[2] = { (int64_t)size * per / 16, 16 };
        smoe_gather plan;
        smoe_gather_compute(&spec, shape, mesh, SMOE_MODE_COAXIS, 4, &plan);
        x[n].rt = rt;
        smoe_gather_exec ex;
        if ((s = smoe_gather_exec_of(&plan, 0, "calibrate", &ex, err)) ||
            (s = smoe_rt_wgather_new(rt, &ex, "calibrate", &x[n].g, err)))
            goto out;
        x[n].shard = smoe_calloc((size_t)per, sizeof(float));
        x[n].buf = smoe_calloc((size_t)(per * size), sizeof(float));
        if (!x[n].shard || !x[n].buf) {
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            n++;
            goto out;
        }
        xs[n] = (double)per * 4 * (size - 1); /* bytes received */
        p[n].fn = run_ag;
        p[n].ud = &x[n];
    }
    calib_probe_run(rt, p, n, CALIB_ROUNDS, CALIB_TARGET_S);
    if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
        for (int i = 0; i < n; i++)
            fprintf(stderr,
                    "gather %s: %.0f bytes: %.1f us (share %.2f, spread %.0f %%, %d calls)\n", axis,
                    xs[i], p[i].med * 1e6, p[i].share, 100 * p[i].spread, p[i].inner);
    fit_probes(p, xs, n, size, half ? 2.0 : 1.0, lat, bw, spr);
out:
    for (int i = 0; i < n; i++) {
        smoe_free(x[i].shard);
        smoe_free(x[i].buf);
    }
    return s;
}

/* Ranks per host: every rank's host name compared (they must come in
 * equal contiguous blocks, as a --host h1:K,h2:K launch places them);
 * otherwise the ranks are taken as one node. */
enum { HOSTLEN = 64 };

static const char *host_of(const char *all, int r) { return all + (size_t)r * HOSTLEN; }

static int ranks_per_node(smoe_rt *rt)
{
    int size = smoe_rt_size(rt);
    char name[HOSTLEN], *all = smoe_calloc((size_t)size, HOSTLEN);
    memset(name, 0, sizeof name);
    gethostname(name, sizeof name - 1);
    double per[1] = { 0 };
    if (all)
        smoe_rt_gather_bytes(rt, name, all, HOSTLEN);
    if (all && smoe_rt_rank(rt) == 0) {
        int k = 1;
        while (k < size && strcmp(host_of(all, k), all) == 0)
            k++;
        int ok = size % k == 0;
        for (int r = 0; r < size && ok; r++) { /* the block's host, and a new one per block */
            int same_prev = r > 0 && strcmp(host_of(all, r), host_of(all, r - 1)) == 0;
            ok = strcmp(host_of(all, r), host_of(all, r / k * k)) == 0 && (r % k ? 1 : !same_prev);
        }
        per[0] = ok ? k : size;
    }
    smoe_free(all);
    smoe_rt_allreduce_max_f64(rt, per, 1); /* rank 0's verdict (the others 0) */
    return per[0] >= 1 ? (int)per[0] : size;
}

/* The expert exchange within a host: five sizes taking turns (probe.c). */
static smoe_status calib_a2a(smoe_rt *rt, double *lat, double *bw, double spr[2], smoe_err *err)
{
    a2a_args y[5];
    calib_probe p[5];
    double xs[5];
    int n = 0;
    smoe_status s = SMOE_OK;
    memset(y, 0, sizeof y);
    memset(p, 0, sizeof p);
    smoe_ep_comm c = smoe_rt_ep_comm(rt);
    int size = c.size; /* the ranks of one node */
    for (int64_t rows = 1; rows <= 4096 && n < 5; rows *= 8, n++) {
        y[n].c = c;
        y[n].row = 128;
        for (int q = 0; q < size && q < 256; q++)
            y[n].rows[q] = rows;
        y[n].send = smoe_calloc((size_t)(rows * y[n].row * size), sizeof(float));
        y[n].recv = smoe_calloc((size_t)(rows * y[n].row * size), sizeof(float));
        if (!y[n].send || !y[n].recv) {
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            n++;
            goto out;
        }
        xs[n] = (double)(rows * y[n].row) * 4 * (size - 1); /* bytes to the others */
        p[n].fn = run_a2a;
        p[n].ud = &y[n];
    }
    calib_probe_run(rt, p, n, CALIB_ROUNDS, CALIB_TARGET_S / 2);
    fit_probes(p, xs, n, size, 1.0, lat, bw, spr);
out:
    for (int i = 0; i < n; i++) {
        smoe_free(y[i].send);
        smoe_free(y[i].recv);
    }
    return s;
}

static smoe_status calib_reduce_lag(smoe_rt *rt, const smoe_mesh *mesh, double tight,
                                    ag_args *one, double *bw, smoe_err *err);

/* The arrival spread: a one-float all-gather entered right after a
 * layer's worth of compute, minus the same gather back to back. */
static smoe_status calib_skew(smoe_rt *rt, const smoe_mesh *mesh, mm_args *work, double *skew,
                              double *lag_bw_out, smoe_err *err)
{
    double lag_bw = 0;
    int size = smoe_rt_size(rt);
    smoe_pspec spec = { 2, { { 2, { "fsdp", "expert" } }, { 0, { NULL } } } }; /* all ranks */
    int64_t shape[2] = { (int64_t)size, 1 };
    smoe_gather plan;
    smoe_gather_compute(&spec, shape, mesh, SMOE_MODE_COAXIS, 4, &plan);
    ag_args x;
    float one[1] = { 0 }, *all = smoe_calloc((size_t)size, sizeof(float));
    smoe_status s;
    x.rt = rt;
    x.shard = one;
    x.buf = all;
    if (!all)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_gather_exec ex;
    if ((s = smoe_gather_exec_of(&plan, 0, "calibrate", &ex, err)) ||
        (s = smoe_rt_wgather_new(rt, &ex, "calibrate", &x.g, err)))
        return s;
    double tight = timed(rt, run_ag, &x, 50, 4);
    double after = after_compute(rt, work, run_ag, &x, 16);
    *skew = fmax(0, after - tight);
    s = calib_reduce_lag(rt, mesh, tight, &x, &lag_bw, err);
    *lag_bw_out = lag_bw;
    smoe_free(all);
    return s;
}

/* The reductions' imbalance: Open MPI's nonblocking reduce-scatter
 * (libnbc, nbc_ireduce_scatter_block.c: a binomial reduce to rank 0, then
 * a linear scatter from it) leaves its root behind the other ranks by the
 * reduction work it alone does, so the next collective after a layer's
 * gradient reductions waits for the root. Measured as in training: a
 * reduce-scatter of `per` floats per rank enqueued, then at once a
 * one-float all-gather (the next layer's gathers); the slowest rank's wait
 * in that gather (median of 15 reps) beyond the gather alone, on several
 * sizes; *bw = gradient bytes (the full buffer) per second of that wait. */
static smoe_status calib_reduce_lag(smoe_rt *rt, const smoe_mesh *mesh, double tight,
                                    ag_args *one, double *bw, smoe_err *err)
{
    int size = smoe_rt_size(rt);
    double xs[4], ts[4];
    int n = 0;
    smoe_status s;
    for (int64_t per = 1 << 12; per <= 1 << 18 && n < 4; per *= 4) {
        smoe_pspec spec = { 2, { { 2, { "fsdp", "expert" } }, { 0, { NULL } } } };
        int64_t shape[2] = { (int64_t)size * per / 16, 16 };
        smoe_gather plan;
        smoe_gather_compute(&spec, shape, mesh, SMOE_MODE_COAXIS, 4, &plan);
        smoe_gather_exec ex;
        smoe_wgather *g;
        if ((s = smoe_gather_exec_of(&plan, 0, "calibrate", &ex, err)) ||
            (s = smoe_rt_wgather_new(rt, &ex, "calibrate reduce", &g, err)))
            return s;
        float *full = smoe_calloc((size_t)(per * size), sizeof(float));
        float *shard = smoe_calloc((size_t)per, sizeof(float));
        if (!full || !shard)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        double w[15];
        for (int r = 0; r < 15; r++) {
            _Atomic int done = 0;
            smoe_rt_barrier(rt);
            smoe_rt_wgather_reduce(rt, g, full, NULL, shard, &done, NULL);
            double t0 = smoe_now();
            run_ag(one);
            w[r] = smoe_now() - t0;
            if ((s = smoe_rt_drain(rt, err)))
                return s;
        }
        double t[1] = { calib_median(w, 15) };
        smoe_rt_allreduce_max_f64(rt, t, 1);
        xs[n] = (double)(per * size) * 4;
        ts[n++] = fmax(0, t[0] - tight);
        smoe_free(full);
        smoe_free(shard);
    }
    double a, b;
    calib_fit(xs, ts, n, &a, &b);
    if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
        for (int i = 0; i < n; i++)
            fprintf(stderr, "reduce lag: %.0f bytes: %.1f us\n", xs[i], ts[i] * 1e6);
    *bw = size > 1 ? 1.0 / b : 0;
    return SMOE_OK;
}

/* One layer's forward and backward from the same input (x0, dx0 copied
 * in first: a few hundred kB, under 1 % of the layer's time). */
typedef struct layer_args {
    smoe_model *model;
    int l;
    const float *const *w;
    float *const *dw;
    float *x, *dx;
    const float *x0, *dx0;
    int64_t n; /* floats of x */
    smoe_ep_comm *self;
    smoe_status s;
    smoe_err *err;
} layer_args;

static void run_layer(void *ud)
{
    layer_args *a = ud;
    if (a->s)
        return;
    memcpy(a->x, a->x0, sizeof(float) * (size_t)a->n);
    memcpy(a->dx, a->dx0, sizeof(float) * (size_t)a->n);
    if ((a->s = smoe_model_layer_fwd(a->model, a->l, a->w, a->x, a->self, a->err)) == SMOE_OK)
        a->s = smoe_model_layer_bwd(a->model, a->l, a->w, a->dw, a->dx, a->self, a->err);
}

/* The model as one rank runs it alone (every mesh axis of size 1). */
static smoe_status one_rank_cfg(const smoe_config *cfg, const smoe_plan *plan,
                                smoe_model_cfg *mc, smoe_err *err)
{
    smoe_mesh one = plan->mesh;
    for (int i = 0; i < one.n; i++)
        one.size[i] = 1;
    return smoe_train_model_cfg(cfg, &one, mc, err);
}

/* The layers calib_compute times: one of each kind the model has (has[k]),
 * whole (experts all local), at the model's training shape. */
static smoe_status timed_layers(const smoe_config *cfg, const smoe_plan *plan,
                                smoe_model_cfg *mc, int has[2], smoe_err *err)
{
    smoe_status s = one_rank_cfg(cfg, plan, mc, err);
    if (s)
        return s;
    has[0] = mc->n_dense > 0;
    has[1] = mc->n_moe > 0;
    mc->n_dense = has[0];
    mc->n_moe = has[1];
    mc->ep = 1;
    return SMOE_OK;
}

/* What calib_compute will allocate on every rank (the layers' weights and
 * gradients, their activations and the input copies), against this
 * machine's memory by smoe train's check, before anything is measured. */
static smoe_status check_memory(const smoe_config *cfg, const smoe_plan *plan, smoe_err *err)
{
    smoe_model_cfg mc;
    int has[2];
    int64_t act = 0;
    smoe_status s = timed_layers(cfg, plan, &mc, has, err);
    if (!s)
        s = smoe_model_need_bytes(&mc, &act, err);
    if (s)
        return s;
    double w = 0;
    for (int k = 0; k < 2; k++)
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++)
            if (has[k] && smoe_wslot_used(&mc, (smoe_wslot)sl, k))
                w += (double)smoe_wslot_numel(&mc, (smoe_wslot)sl);
    const double wbytes = 2 * 4 * w, xbytes = 4.0 * 4 * (double)(mc.batch * mc.seq * mc.emb);
    char what[300];
    snprintf(what, sizeof what, "one layer of each kind whole: weights and gradients %.0f, "
             "activations %lld, inputs %.0f", wbytes, (long long)act, xbytes);
    return smoe_train_check_ram(cfg, wbytes + (double)act + xbytes, what,
                                "smoe sim --calibrate times a layer of each kind whole on "
                                "every rank: calibrate with a smaller --model", err);
}

/* smoe's own layer kernels (one dense and one MoE layer, forward and
 * backward, experts all local) against the cost model's roofline; spr:
 * the spread, the share of a core, the measured seconds. The ratio moves
 * with the roofline's inputs (peak_flops, gemm_small_flops, hbm_bandwidth
 * of the same calibration); the layers' time it gives the simulator is the
 * measured one, spr[2]. */
static smoe_status calib_compute(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                                 const smoe_hw *hw, double share, double *scale, double spr[3],
                                 smoe_err *err)
{
    smoe_model_cfg mc;
    int has[2];
    smoe_status s = timed_layers(cfg, plan, &mc, has, err);
    if (s)
        return s;
    smoe_model *model;
    if ((s = smoe_model_new(&mc, &model, err)))
        return s;
    int64_t T = mc.batch * mc.seq, total = 0;
    float *w[2][SMOE_W_NSLOTS], *dw[2][SMOE_W_NSLOTS];
    memset(w, 0, sizeof w);
    memset(dw, 0, sizeof dw);
    for (int k = 0; k < 2; k++)
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++) {
            if (!has[k] || !smoe_wslot_used(&mc, (smoe_wslot)sl, k))
                continue;
            int64_t n = smoe_wslot_numel(&mc, (smoe_wslot)sl);
            w[k][sl] = smoe_malloc(sizeof(float) * (size_t)n);
            dw[k][sl] = smoe_calloc((size_t)n, sizeof(float));
            if (!w[k][sl] || !dw[k][sl])
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            int norm = sl == SMOE_W_PRE_NORM || sl == SMOE_W_POST_NORM || sl == SMOE_W_Q_NORM ||
                       sl == SMOE_W_KV_NORM;
            for (int64_t i = 0; i < n; i++)
                w[k][sl][i] = norm ? 1.0f : 0.05f * (float)((double)(i * 2654435761u % 2001) / 1000.0 - 1);
            total += n;
        }
    const int64_t nx = T * mc.emb;
    float *x = smoe_malloc(sizeof(float) * (size_t)(4 * nx)), *dx = x + nx;
    if (!x)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    float *x0 = x + 2 * nx, *dx0 = x + 3 * nx;
    for (int64_t i = 0; i < nx; i++) {
        x0[i] = (float)((double)(i * 40503u % 2001) / 1000.0 - 1);
        dx0[i] = 1e-3f * (float)((double)(i * 9973u % 2001) / 1000.0 - 1);
    }
    smoe_ep_comm self = smoe_ep_comm_self();
    layer_args la[2];
    calib_probe p[2];
    int np = 0;
    for (int k = 0; k < 2; k++) { /* the two kinds taking turns (probe.c) */
        if (!has[k])
            continue;
        la[np] = (layer_args){ model, k == 0 ? 0 : (int)mc.n_dense, (const float *const *)w[k],
                               dw[k], x, dx, x0, dx0, nx, &self, SMOE_OK, err };
        p[np] = (calib_probe){ .fn = run_layer, .ud = &la[np] };
        np++;
    }
    calib_probe_run(rt, p, np, CALIB_ROUNDS, 2 * CALIB_TARGET_S);
    double measured = 0, per[CALIB_MAX_ROUNDS] = { 0 }, kshare[2];
    for (int i = 0; i < np; i++) {
        if ((s = la[i].s))
            return s;
        measured += p[i].med * at_share(p[i].share, share);
        kshare[i] = p[i].share;
        for (int r = 0; r < p[i].rounds; r++)
            per[r] += p[i].t[r];
    }
    spr[0] = calib_spread(per, p[0].rounds);
    spr[1] = calib_median(kshare, np);
    spr[2] = measured;
    for (int k = 0; k < 2; k++)
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++) {
            smoe_free(w[k][sl]);
            smoe_free(dw[k][sl]);
        }
    smoe_free(x);
    smoe_model_free(model);
    /* the cost model at the same shape, without any scale */
    smoe_hw h = *hw;
    h.cpu.compute_scale = 0;
    smoe_sim_shape sh = { .batch = mc.batch, .seq = mc.seq, .remat = SMOE_REMAT_NONE, .dtype_bytes = 4 };
    smoe_sim_model *sm;
    if ((s = smoe_sim_model_build(cfg, plan, &h, &sh, &sm, err)))
        return s;
    double modelled = 0;
    for (int k = 0; k < 2; k++) {
        double f, b;
        if (!has[k])
            continue;
        smoe_sim_model_compute(sm, k, &f, &b);
        modelled += f + b;
        if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
            fprintf(stderr, "layer kind %d: modelled fwd %.2f bwd %.2f ms\n", k, f * 1e3, b * 1e3);
    }
    if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
        for (int i = 0; i < np; i++)
            fprintf(stderr, "layer %d measured fwd+bwd %.2f ms\n", la[i].l, p[i].med * 1e3);
    smoe_sim_model_free(sm);
    *scale = modelled > 0 ? measured / modelled : 1;
    (void)total;
    return SMOE_OK;
}

/* The elementwise probe's length: one activation of the model at its
 * training shape (batch x seq x emb floats, what the cost model's
 * elementwise terms move), within [2^14, 2^21]. At a fixed 2^21 (two 8 MiB
 * arrays a rank, four ranks) the working set of the ranks on the cores at
 * a time fills a small machine's shared L3, so the figure moved with
 * whatever else ran on the host
 * (bench/results/2026-12-02-budget-sim-train.md). The model's
 * activations sit in a core's own L2, and so does this probe for the
 * default model (2 x 256 KiB a rank). */
static int64_t act_elems(const smoe_config *cfg, const smoe_plan *plan)
{
    smoe_model_cfg mc;
    int64_t n = 1 << 21;
    if (one_rank_cfg(cfg, plan, &mc, NULL) == SMOE_OK)
        n = mc.batch * mc.seq * mc.emb;
    return n < (1 << 14) ? 1 << 14 : n > (1 << 21) ? 1 << 21 : n;
}

/* printf onto the end of the string in buf (cap bytes; cut at the end) */
static void addf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
}

/* The measurement, rank 0 writing the profile to f. */
static smoe_status measure(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                           int progress_thread, FILE *f, smoe_err *err)
{
    smoe_status s;
    int size = smoe_rt_size(rt), per_node = ranks_per_node(rt), nodes = size / per_node;
    /* hosts x ranks of a host: gathers within a node and across nodes
     * measured apart, the expert exchange within a node */
    smoe_mesh mesh = { 2, { "fsdp", "expert" }, { nodes, per_node }, { 0 } };
    smoe_rt_opts ro = { 0, progress_thread }; /* progressed as the training will be */
    if ((s = smoe_rt_set_mesh(rt, &mesh, &ro, err)))
        return s;
    smoe_blas_info info;
    smoe_blas_init(1, &info);
    const int64_t big = 512, small = 64, ew_n = act_elems(cfg, plan);
    mm_args m, work;
    /* a and c: the elementwise probe's arrays, the matmuls' operands
     * (big x big) and the optimizer's gradient (2^18) */
    const int64_t cap = ew_n > big * big ? ew_n : big * big;
    m.a = smoe_malloc(sizeof(float) * (size_t)cap);
    m.b = smoe_malloc(sizeof(float) * (size_t)(big * big));
    m.c = smoe_malloc(sizeof(float) * (size_t)cap);
    if (!m.a || !m.b || !m.c)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int64_t i = 0; i < cap; i++)
        m.a[i] = m.c[i] = (float)(i % 7) * 0.25f;
    for (int64_t i = 0; i < big * big; i++)
        m.b[i] = (float)(i % 5) * 0.5f;
    work = m;
    work.n = 256;
    m.n = big;
    /* the rates, every rank running the same kernel at once, the five
     * taking turns (probe.c) */
    mm_args k_big = m, k_small = m, k_call = m, k_add = m, opt = m;
    k_big.n = big;
    k_small.n = small;
    k_call.n = 4;
    k_add.n = ew_n;
    opt.n = 1 << 18; /* 2^18 parameters in c, their moments in b, the gradient in a */
    opt.c = smoe_calloc((size_t)(3 * opt.n), sizeof(float));
    if (!opt.c)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    opt.b = opt.c + opt.n;
    calib_probe rates[5] = { { .fn = run_mm, .ud = &k_big },
                             { .fn = run_mm, .ud = &k_small },
                             { .fn = run_mm, .ud = &k_call },
                             { .fn = run_add, .ud = &k_add },
                             { .fn = run_adamw, .ud = &opt } };
    calib_probe_run(rt, rates, 5, CALIB_ROUNDS, CALIB_TARGET_S);
    smoe_free(opt.c);
    /* each rate at the rates' median share of a core (at_share) */
    double shares[5];
    for (int i = 0; i < 5; i++)
        shares[i] = rates[i].share;
    const double share = calib_median(shares, 5);
    double t[5];
    for (int i = 0; i < 5; i++)
        t[i] = rates[i].med * at_share(rates[i].share, share);
    double t_big = t[0], t_small = t[1], t_call = t[2], t_add = t[3], t_opt = t[4];
    double fig[4][3] = { { 0 } }; /* ici, a2a, compute_scale, dcn: spread, share (, s) */
    spread sp;
    memset(&sp, 0, sizeof sp);
    sp.v[SP_PEAK] = rates[0].spread;
    sp.share[SP_PEAK] = rates[0].share;
    sp.v[SP_SMALL] = rates[1].spread;
    sp.share[SP_SMALL] = rates[1].share;
    sp.v[SP_CALL] = rates[2].spread;
    sp.share[SP_CALL] = rates[2].share;
    sp.v[SP_HBM] = rates[3].spread;
    sp.share[SP_HBM] = rates[3].share;
    sp.v[SP_OPT] = rates[4].spread;
    sp.share[SP_OPT] = rates[4].share;
    sp.rounds = rates[0].rounds;
    smoe_hw hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "cpu-mpi");
    hw.kind = SMOE_HW_CPU;
    hw.devices_per_chip = 1;
    hw.peak_flops = 2.0 * (double)(big * big * big) / t_big;
    hw.cpu.gemm_small_flops = 2.0 * (double)(small * small * small) / t_small;
    hw.hbm_bandwidth = hw.cpu.elementwise_bandwidth = 3.0 * 4.0 * (double)ew_n / t_add;
    hw.cpu.op_overhead = t_call;
    hw.cpu.optimizer_rate = (double)opt.n / t_opt;
    hw.ici_links = 1;
    hw.devices_per_node = per_node;
    hw.collective_engines = 2;
    hw.cpu.collectives_use_compute = 1;
    hw.cpu.compute_bytes = 4;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    hw.hbm_bytes = (double)pages * (double)psz / size;
    if (per_node > 1 && (s = calib_gather(rt, &mesh, "expert", 1, &hw.ici_latency,
                                          &hw.ici_bandwidth, fig[0], err)))
        return s;
    if (nodes > 1 && (s = calib_gather(rt, &mesh, "fsdp", 0, &hw.dcn_latency, &hw.dcn_bandwidth,
                                       fig[3], err)))
        return s;
    /* a layer's gathers and reductions as training issues them */
    calib_sets sets;
    if ((s = calib_layer_figures(rt, plan, nodes, per_node, run_layer_work, &work, share, &hw,
                                 &sets, err)))
        return s;
    const int layer_ici = sets.used && nodes == 1, layer_dcn = sets.used && nodes > 1;
    if (per_node == 1) { /* no fast interconnect: the network's figures */
        hw.ici_bandwidth = 2 * hw.dcn_bandwidth;
        hw.ici_latency = hw.dcn_latency;
    }
    if (nodes == 1) {
        hw.dcn_bandwidth = hw.ici_bandwidth;
        hw.dcn_latency = hw.ici_latency;
    }
    if ((per_node > 1 && (s = calib_a2a(rt, &hw.cpu.a2a_latency, &hw.cpu.a2a_bandwidth, fig[1], err))) ||
        (s = calib_skew(rt, &mesh, &work, &hw.cpu.sync_skew, &hw.cpu.reduce_lag_bandwidth, err)))
        return s;
    if ((s = calib_compute(rt, cfg, plan, &hw, share, &hw.cpu.compute_scale, fig[2], err)))
        return s;
    hw.cpu.core_share = fmin(1, share); /* the rates' condition (sched/cores.c) */
    /* the mode resolved (the default follows the hosts), not the one asked */
    snprintf(hw.cpu.progress, sizeof hw.cpu.progress, "%s",
             smoe_rt_get_opts(rt).progress_thread ? "thread" : "calls");
    smoe_free(m.a);
    smoe_free(m.b);
    smoe_free(m.c);
    const int figk[3] = { SP_ICI, SP_A2A, SP_SCALE };
    for (int i = 0; i < 3; i++) {
        sp.v[figk[i]] = fig[i][0];
        sp.share[figk[i]] = fig[i][1];
    }
    if (smoe_rt_rank(rt) != 0)
        return SMOE_OK;
    smoe_hw_note notes[] = {
        { "peak_flops", "512-wide sgemm, FLOP/s per rank" },
        { "hbm_bytes", "RAM per rank" },
        { "hbm_bandwidth", "elementwise y += x of one activation, bytes/s per rank" },
        { "ici_bandwidth", layer_ici ? "2 x bytes per second within the host, a layer's gathers "
                                       "started together as smoe train does"
                                     : "2 x all-gather bytes received per second, within a host" },
        { "ici_latency", layer_ici ? "a layer's gathers started together as smoe train does: "
                                     "fixed cost per within-host step, s"
                                   : "all-gather fixed cost / (ranks - 1), s, within a host" },
        { "devices_per_node", "ranks per host" },
        { "dcn_bandwidth", layer_dcn ? "bytes from other hosts per second, a layer's gathers "
                                       "started together as smoe train does"
                                     : "all-gather bytes received per second, one rank per host" },
        { "dcn_latency", layer_dcn ? "a layer's gathers started together as smoe train does: "
                                     "fixed cost per cross-host step, s"
                                   : "all-gather fixed cost / (hosts - 1), s" },
        { "dcn_reduce_bandwidth", "a layer's gradient reductions enqueued together as smoe train "
                                  "does: the gathers' bytes from other hosts per second" },
        { "dcn_reduce_latency", "the same reductions: fixed cost per cross-host step, s" },
        { "ici_reduce_bandwidth", "a layer's gradient reductions enqueued together as smoe train "
                                  "does: 2 x the gathers' bytes within the host per second" },
        { "ici_reduce_latency", "the same reductions: fixed cost per within-host step, s" },
        { "gather_core_fraction", "a layer's gathers and reductions as smoe train issues them: "
                                  "the ranks' CPU time over their wall time at core_share" },
        { "collective_engines", "smoe's runtime: a gather queue, an exchange/reduction queue" },
        { "a2a_bandwidth", "all-to-all bytes sent to the others per second" },
        { "a2a_latency", "all-to-all fixed cost / (ranks - 1), s" },
        { "op_overhead", "one tiny kernel call, s" },
        { "gemm_small_flops", "64-wide sgemm, FLOP/s per rank" },
        { "compute_scale", "smoe's layer kernels / the roofline, this model and shape" },
        { "sync_skew", "wait for the last rank at a collective after compute, s" },
        { "reduce_lag_bandwidth", "gradient bytes per s of the wait for a reduce-scatter's root" },
        { "optimizer_rate", "parameters per s: smoe train's gradient norm and AdamW step" },
        { "core_share", "the part of a core a rank had, every rank busy (the rates are at it)" },
        { NULL, NULL },
    };
    fprintf(f,
            "# cpu-mpi: this machine measured by `smoe sim --calibrate` under %d MPI ranks, every\n"
            "# rank busy at once as in training (OpenBLAS core %s, 1 thread per rank).\n"
            "# A device is one rank; collectives over shared memory are work of the same cores.\n"
            "# %d host(s) of %d rank(s).\n",
            size, info.corename, nodes, per_node);
    /* after the keys: each figure's spread over its rounds, for a reader
     * judging a drift */
    char tail[4096] = "";
    addf(tail, sizeof tail,
         "# spread: the interquartile range over the median of %d-%d interleaved rounds (the\n"
         "# rates' %.0f); share %.2f: the part of a core a rank had while the rates were timed\n"
         "# (its CPU time over the wall time; %d ranks on %ld cores alone: %.2f)\n",
         CALIB_ROUNDS, CALIB_MAX_ROUNDS, sp.rounds, sp.share[SP_PEAK], per_node,
         sysconf(_SC_NPROCESSORS_ONLN), fmin(1, (double)sysconf(_SC_NPROCESSORS_ONLN) / per_node));
    addf(tail, sizeof tail, "# layer_time %.6g s: the layers' measured forward + backward "
                            "(compute_scale x\n# the roofline)\n", fig[2][2]);
    if (layer_ici) /* what bench/profile_drift.sh times a within-host step at */
        addf(tail, sizeof tail, "# ici_step_bytes %.0f: bytes within the host per step of the "
                                "model's\n# layers, at ici_bandwidth / 2\n", sets.step_bytes);
    if (layer_dcn) /* what bench/profile_drift.sh times a cross-host step at */
        addf(tail, sizeof tail, "# dcn_step_bytes %.0f: bytes from other hosts per cross-host "
                                "step of the\n# model's layers\n", sets.step_bytes);
    for (int i = 0; i < SP_N; i++)
        if (per_node > 1 || (i != SP_ICI && i != SP_A2A))
            addf(tail, sizeof tail, "# spread %s %.3f share %.2f\n", sp_key[i], sp.v[i],
                 sp.share[i]);
    return smoe_hw_write(f, &hw, notes, tail, err);
}

smoe_status smoe_calib_measure(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                               int progress_thread, const char *path, smoe_err *err)
{
    /* one rank has no collective to time (the profile's ici and dcn
     * figures would be 0, which no profile may hold) */
    if (smoe_rt_size(rt) < 2)
        return smoe_err_set(err, SMOE_EINVAL,
                            "smoe sim --calibrate needs at least 2 MPI ranks (it times the "
                            "collectives between them): run it under 'mpirun -np N' with N >= 2, "
                            "as many ranks per host as smoe train will run");
    calib_out out;
    smoe_status s = smoe_rt_agree_err(rt, check_memory(cfg, plan, err), err);
    if (!s)
        s = calib_out_open(rt, path, &out, err);
    if (s)
        return s;
    s = smoe_rt_agree_err(rt, measure(rt, cfg, plan, progress_thread, out.f, err), err);
    return smoe_rt_agree_err(rt, calib_out_close(&out, s, err), err); /* rank 0's close */
}
