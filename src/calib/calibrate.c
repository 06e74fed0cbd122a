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

/* What a calibration measured, for the profile's text. */
typedef struct measured {
    smoe_hw hw;
    spread sp;
    double fig[4][3]; /* ici, a2a, compute_scale, dcn: spread, share (, s) */
    calib_sets sets, within; /* the layer sets; across hosts, within each host */
    int size, nodes, per_node, layer_ici, layer_dcn;
    const char *corename;
} measured;

/* The five rates (sgemm 512 and 64 wide, a tiny call, the elementwise
 * probe, the optimizer), every rank running the same kernel at once, the
 * five taking turns (probe.c): into M->hw and M->sp, each at the rates'
 * median share of a core (*share). m: the operands (m->n = big). */
static smoe_status measure_rates(smoe_rt *rt, const mm_args *m, int64_t small, int64_t ew_n,
                                 measured *M, double *share, smoe_err *err)
{
    const int64_t big = m->n;
    mm_args k_big = *m, k_small = *m, k_call = *m, k_add = *m, opt = *m;
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
    double shares[5], t[5];
    for (int i = 0; i < 5; i++)
        shares[i] = rates[i].share;
    *share = calib_median(shares, 5);
    const int key[5] = { SP_PEAK, SP_SMALL, SP_CALL, SP_HBM, SP_OPT };
    for (int i = 0; i < 5; i++) {
        t[i] = rates[i].med * calib_at_share(rates[i].share, *share);
        M->sp.v[key[i]] = rates[i].spread;
        M->sp.share[key[i]] = rates[i].share;
    }
    M->sp.rounds = rates[0].rounds;
    smoe_hw *hw = &M->hw;
    hw->peak_flops = 2.0 * (double)(big * big * big) / t[0];
    hw->cpu.gemm_small_flops = 2.0 * (double)(small * small * small) / t[1];
    hw->cpu.op_overhead = t[2];
    hw->hbm_bandwidth = hw->cpu.elementwise_bandwidth = 3.0 * 4.0 * (double)ew_n / t[3];
    hw->cpu.optimizer_rate = (double)opt.n / t[4];
    return SMOE_OK;
}

/* The profile's keys (with their notes) and, after them, each figure's
 * spread, rank 0 writing to f. */
static smoe_status write_profile(FILE *f, const measured *M, smoe_err *err)
{
    const int layer_ici = M->layer_ici, layer_dcn = M->layer_dcn, per_node = M->per_node;
    const spread *sp = &M->sp;
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
        { "dcn_link_bandwidth", "the same gathers and reductions at once: the link's bytes from "
                                "other hosts per second for both" },
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
            M->size, M->corename, M->nodes, per_node);
    /* after the keys: each figure's spread over its rounds, for a reader
     * judging a drift */
    char tail[4096] = "";
    addf(tail, sizeof tail,
         "# spread: the interquartile range over the median of %d-%d interleaved rounds (the\n"
         "# rates' %.0f); share %.2f: the part of a core a rank had while the rates were timed\n"
         "# (its CPU time over the wall time; %d ranks on %ld cores alone: %.2f)\n",
         CALIB_ROUNDS, CALIB_MAX_ROUNDS, sp->rounds, sp->share[SP_PEAK], per_node,
         sysconf(_SC_NPROCESSORS_ONLN), fmin(1, (double)sysconf(_SC_NPROCESSORS_ONLN) / per_node));
    addf(tail, sizeof tail, "# layer_time %.6g s: the layers' measured forward + backward "
                            "(compute_scale x\n# the roofline)\n", M->fig[2][2]);
    if (layer_ici) /* what bench/profile_drift.sh times a within-host step at */
        addf(tail, sizeof tail, "# ici_step_bytes %.0f: bytes within the host per step of the "
                                "model's\n# layers, at ici_bandwidth / 2\n",
             M->within.used ? M->within.step_bytes : M->sets.step_bytes);
    if (layer_dcn) /* what bench/profile_drift.sh times a cross-host step at */
        addf(tail, sizeof tail, "# dcn_step_bytes %.0f: bytes from other hosts per cross-host "
                                "step of the\n# model's layers\n", M->sets.step_bytes);
    for (int i = 0; i < SP_N; i++)
        if (per_node > 1 || (i != SP_ICI && i != SP_A2A))
            addf(tail, sizeof tail, "# spread %s %.3f share %.2f\n", sp_key[i], sp->v[i],
                 sp->share[i]);
    return smoe_hw_write(f, &M->hw, notes, tail, err);
}

/* The probes' operands: a and c (cap floats: the elementwise probe's
 * arrays, the matmuls' operands and the optimizer's gradient), b (big x
 * big), filled with small repeating values. */
static smoe_status operands_new(int64_t cap, int64_t big, mm_args *m, smoe_err *err)
{
    m->a = smoe_malloc(sizeof(float) * (size_t)cap);
    m->b = smoe_malloc(sizeof(float) * (size_t)(big * big));
    m->c = smoe_malloc(sizeof(float) * (size_t)cap);
    if (!m->a || !m->b || !m->c)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int64_t i = 0; i < cap; i++)
        m->a[i] = m->c[i] = (float)(i % 7) * 0.25f;
    for (int64_t i = 0; i < big * big; i++)
        m->b[i] = (float)(i % 5) * 0.5f;
    m->n = big;
    return SMOE_OK;
}

/* What a cpu-mpi profile states without measuring it: a device is a rank,
 * collectives are the cores' work, RAM is shared by the ranks. */
static void fixed_terms(smoe_hw *hw, int per_node, int size)
{
    snprintf(hw->name, sizeof hw->name, "cpu-mpi");
    hw->kind = SMOE_HW_CPU;
    hw->devices_per_chip = 1;
    hw->ici_links = 1;
    hw->devices_per_node = per_node;
    hw->collective_engines = 2;
    hw->cpu.collectives_use_compute = 1;
    hw->cpu.compute_bytes = 4;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    hw->hbm_bytes = (double)pages * (double)psz / size;
}

/* The gathers within a host and across hosts (the one-weight sweep, then a
 * layer's gathers and reductions as training issues them, each after
 * `work`); a profile of one host or one rank a host copies the figures it
 * has into the ones it cannot measure. */
static smoe_status measure_links(smoe_rt *rt, const smoe_plan *plan, const smoe_mesh *mesh,
                                 mm_args *work, double share, measured *M, smoe_err *err)
{
    smoe_hw *hw = &M->hw;
    const int nodes = M->nodes, per_node = M->per_node;
    smoe_status s;
    if (per_node > 1 && (s = calib_gather(rt, mesh, "expert", 1, &hw->ici_latency,
                                          &hw->ici_bandwidth, M->fig[0], err)))
        return s;
    if (nodes > 1 && (s = calib_gather(rt, mesh, "fsdp", 0, &hw->dcn_latency,
                                       &hw->dcn_bandwidth, M->fig[3], err)))
        return s;
    if ((s = calib_layer_figures(rt, plan, nodes, per_node, run_layer_work, work, share, hw,
                                 &M->sets, &M->within, err)))
        return s;
    M->layer_ici = (M->sets.used && nodes == 1) || M->within.used;
    M->layer_dcn = M->sets.used && nodes > 1;
    if (per_node == 1) { /* no fast interconnect: the network's figures */
        hw->ici_bandwidth = 2 * hw->dcn_bandwidth;
        hw->ici_latency = hw->dcn_latency;
    }
    if (nodes == 1) {
        hw->dcn_bandwidth = hw->ici_bandwidth;
        hw->dcn_latency = hw->ici_latency;
    }
    return SMOE_OK;
}

/* The expert exchange, the ranks' arrival spread, the model's kernels
 * against the roofline, and the conditions the rates hold under. */
static smoe_status measure_rest(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                                const smoe_mesh *mesh, mm_args *work, double share, measured *M,
                                smoe_err *err)
{
    smoe_hw *hw = &M->hw;
    smoe_status s;
    if ((M->per_node > 1 &&
         (s = calib_a2a(rt, &hw->cpu.a2a_latency, &hw->cpu.a2a_bandwidth, M->fig[1], err))) ||
        (s = calib_skew(rt, mesh, work, &hw->cpu.sync_skew, &hw->cpu.reduce_lag_bandwidth, err)) ||
        (s = calib_compute(rt, cfg, plan, hw, share, &hw->cpu.compute_scale, M->fig[2], err)))
        return s;
    hw->cpu.core_share = fmin(1, share); /* the rates' condition (sched/cores.c) */
    /* the mode resolved (the default follows the hosts), not the one asked */
    snprintf(hw->cpu.progress, sizeof hw->cpu.progress, "%s",
             smoe_rt_get_opts(rt).progress_thread ? "thread" : "calls");
    const int figk[3] = { SP_ICI, SP_A2A, SP_SCALE };
    for (int i = 0; i < 3; i++) {
        M->sp.v[figk[i]] = M->fig[i][0];
        M->sp.share[figk[i]] = M->fig[i][1];
    }
    return SMOE_OK;
}

/* The measurement, rank 0 writing the profile to f. */
static smoe_status measure(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                           int progress_thread, FILE *f, smoe_err *err)
{
    smoe_status s;
    measured M;
    memset(&M, 0, sizeof M);
    int size = smoe_rt_size(rt), per_node = ranks_per_node(rt), nodes = size / per_node;
    M.size = size;
    M.nodes = nodes;
    M.per_node = per_node;
    /* hosts x ranks of a host: gathers within a node and across nodes
     * measured apart, the expert exchange within a node */
    smoe_mesh mesh = { 2, { "fsdp", "expert" }, { nodes, per_node }, { 0 } };
    smoe_rt_opts ro = { 0, progress_thread }; /* progressed as the training will be */
    if ((s = smoe_rt_set_mesh(rt, &mesh, &ro, err)))
        return s;
    smoe_blas_info info;
    smoe_blas_init(1, &info);
    M.corename = info.corename;
    const int64_t big = 512, small = 64, ew_n = calib_act_elems(cfg, plan);
    mm_args m = { 0 }, work;
    double share = 1;
    s = operands_new(ew_n > big * big ? ew_n : big * big, big, &m, err);
    work = m;
    work.n = 256;
    fixed_terms(&M.hw, per_node, size);
    if (!s && !(s = measure_rates(rt, &m, small, ew_n, &M, &share, err)) &&
        !(s = measure_links(rt, plan, &mesh, &work, share, &M, err)))
        s = measure_rest(rt, cfg, plan, &mesh, &work, share, &M, err);
    smoe_free(m.a);
    smoe_free(m.b);
    smoe_free(m.c);
    if (s)
        return s;
    return smoe_rt_rank(rt) == 0 ? write_profile(f, &M, err) : SMOE_OK;
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
    smoe_status s = smoe_rt_agree_err(rt, calib_check_memory(cfg, plan, err), err);
    if (!s)
        s = calib_out_open(rt, path, &out, err);
    if (s)
        return s;
    s = smoe_rt_agree_err(rt, measure(rt, cfg, plan, progress_thread, out.f, err), err);
    return smoe_rt_agree_err(rt, calib_out_close(&out, s, err), err); /* rank 0's close */
}
