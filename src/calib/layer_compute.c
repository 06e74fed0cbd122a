/* smoe sim --calibrate's compute figure: smoe's own layer kernels (one
 * layer of each kind, forward and backward, experts all local, at the
 * model's training shape) timed on every rank at once against the cost
 * model's roofline at the same shape (compute_scale), with the memory
 * check that comes before any measuring and the elementwise probe's
 * length from the same shape. */
#define _GNU_SOURCE
#include "calib_impl.h"
#include "smoe/sched.h"
#include "smoe/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
smoe_status calib_check_memory(const smoe_config *cfg, const smoe_plan *plan, smoe_err *err)
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

/* The timed layers' weights and gradients (one layer of each kind the
 * model has), filled with small values (norm scales 1). */
typedef struct layer_weights {
    float *w[2][SMOE_W_NSLOTS], *dw[2][SMOE_W_NSLOTS];
} layer_weights;

static void weights_free(layer_weights *L)
{
    for (int k = 0; k < 2; k++)
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++) {
            smoe_free(L->w[k][sl]);
            smoe_free(L->dw[k][sl]);
        }
}

static smoe_status weights_new(const smoe_model_cfg *mc, const int has[2], layer_weights *L,
                               smoe_err *err)
{
    memset(L, 0, sizeof *L);
    for (int k = 0; k < 2; k++)
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++) {
            if (!has[k] || !smoe_wslot_used(mc, (smoe_wslot)sl, k))
                continue;
            int64_t n = smoe_wslot_numel(mc, (smoe_wslot)sl);
            float *w = L->w[k][sl] = smoe_malloc(sizeof(float) * (size_t)n);
            L->dw[k][sl] = smoe_calloc((size_t)n, sizeof(float));
            if (!w || !L->dw[k][sl])
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            int norm = sl == SMOE_W_PRE_NORM || sl == SMOE_W_POST_NORM || sl == SMOE_W_Q_NORM ||
                       sl == SMOE_W_KV_NORM;
            for (int64_t i = 0; i < n; i++)
                w[i] = norm ? 1.0f : 0.05f * (float)((double)(i * 2654435761u % 2001) / 1000.0 - 1);
        }
    return SMOE_OK;
}

/* Each kind's layer forward and backward on every rank at once, the kinds
 * taking turns (probe.c): *measured, their medians at the rates' share;
 * spr as calib_compute's. */
static smoe_status time_layers(smoe_rt *rt, smoe_model *model, const smoe_model_cfg *mc,
                               const int has[2], layer_weights *L, double share,
                               double *measured, double spr[3], smoe_err *err)
{
    const int64_t nx = mc->batch * mc->seq * mc->emb;
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
    for (int k = 0; k < 2; k++) {
        if (!has[k])
            continue;
        la[np] = (layer_args){ model, k == 0 ? 0 : (int)mc->n_dense, (const float *const *)L->w[k],
                               L->dw[k], x, dx, x0, dx0, nx, &self, SMOE_OK, err };
        p[np] = (calib_probe){ .fn = run_layer, .ud = &la[np] };
        np++;
    }
    calib_probe_run(rt, p, np, CALIB_ROUNDS, 2 * CALIB_TARGET_S);
    smoe_free(x);
    double per[CALIB_MAX_ROUNDS] = { 0 }, kshare[2];
    *measured = 0;
    for (int i = 0; i < np; i++) {
        if (la[i].s)
            return la[i].s;
        *measured += p[i].med * calib_at_share(p[i].share, share);
        kshare[i] = p[i].share;
        for (int r = 0; r < p[i].rounds; r++)
            per[r] += p[i].t[r];
        if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
            fprintf(stderr, "layer %d measured fwd+bwd %.2f ms\n", la[i].l, p[i].med * 1e3);
    }
    spr[0] = calib_spread(per, p[0].rounds);
    spr[1] = calib_median(kshare, np);
    spr[2] = *measured;
    return SMOE_OK;
}

/* The cost model's time for the same layers at the same shape, without
 * any scale. */
static smoe_status modelled_layers(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                                   const smoe_hw *hw, const smoe_model_cfg *mc, const int has[2],
                                   double *modelled, smoe_err *err)
{
    smoe_hw h = *hw;
    h.cpu.compute_scale = 0;
    smoe_sim_shape sh = { .batch = mc->batch, .seq = mc->seq, .remat = SMOE_REMAT_NONE,
                          .dtype_bytes = 4 };
    smoe_sim_model *sm;
    smoe_status s = smoe_sim_model_build(cfg, plan, &h, &sh, &sm, err);
    if (s)
        return s;
    *modelled = 0;
    for (int k = 0; k < 2; k++) {
        double f, b;
        if (!has[k])
            continue;
        smoe_sim_model_compute(sm, k, &f, &b);
        *modelled += f + b;
        if (getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0)
            fprintf(stderr, "layer kind %d: modelled fwd %.2f bwd %.2f ms\n", k, f * 1e3, b * 1e3);
    }
    smoe_sim_model_free(sm);
    return SMOE_OK;
}

/* smoe's own layer kernels (one dense and one MoE layer, forward and
 * backward, experts all local) against the cost model's roofline; spr:
 * the spread, the share of a core, the measured seconds. The ratio moves
 * with the roofline's inputs (peak_flops, gemm_small_flops, hbm_bandwidth
 * of the same calibration); the layers' time it gives the simulator is the
 * measured one, spr[2]. */
smoe_status calib_compute(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
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
    layer_weights L;
    double measured = 0, modelled = 0;
    if (!(s = weights_new(&mc, has, &L, err)))
        s = time_layers(rt, model, &mc, has, &L, share, &measured, spr, err);
    weights_free(&L);
    smoe_model_free(model);
    if (s || (s = modelled_layers(rt, cfg, plan, hw, &mc, has, &modelled, err)))
        return s;
    *scale = modelled > 0 ? measured / modelled : 1;
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
int64_t calib_act_elems(const smoe_config *cfg, const smoe_plan *plan)
{
    smoe_model_cfg mc;
    int64_t n = 1 << 21;
    if (one_rank_cfg(cfg, plan, &mc, NULL) == SMOE_OK)
        n = mc.batch * mc.seq * mc.emb;
    return n < (1 << 14) ? 1 << 14 : n > (1 << 21) ? 1 << 21 : n;
}
