/* The training step loop: the model forward and backward layer by layer
 * over the prefetch executor (prefetch.c, which runs the step's
 * smoe_schedule), gradient reductions and AdamW, and the memory tracked by
 * class.
 *
 * DESIGN
 *   Units are layers in the order they are used: forward 0..L-1, then
 *   backward L-1..0 (re-gathered, as MaxText does with rematerialisation:
 *   two all-gathers and one reduce-scatter per layer per step). For each
 *   unit the loop asks the executor for its gathered weights (issuing what
 *   the schedule issues at this unit's start), runs the layer, and hands the
 *   buffer back (forward) or its gradients for reduction (backward). Top-
 *   level weights (embedding, final norm, logits) have their own buffers,
 *   gathered at the start of each step. Nothing in a step comes before its
 *   first gathers (the embedding's, the first layer's), so when the next
 *   step's schedule gathers at its start the optimizer updates those
 *   weights first and issues them there (issue_next), to move while the
 *   rest of the update and the step's end run; a next step in another mode
 *   completes them unused (tr_loop_retire). Memory is tracked by class, as smoe
 *   sim counts it: parameters, gradients and optimizer moments (the slabs),
 *   gathered (top-level buffers + the pool's peak in use), activations (the
 *   model's slab and routed-row stores) and communication buffers (none:
 *   gathers land in the pool, reductions read from it). With a budget the
 *   executor holds the gathered bytes under budget - the other classes. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tr_state {
    const smoe_comm *cm;
    const smoe_model_cfg *mc;
    smoe_model *model;
    tr_store *st;
    tr_prefetch *pf;
    int L, nunits, max_distance;
    int legacy;                          /* this step's plan: 0 co-axis, 1 legacy */
    int64_t budget;                      /* tracked bytes allowed, 0 = none */
    const smoe_schedule *sched;          /* this step's schedule */
    int top_idx[SMOE_T_NSLOTS];
    float *top_w, *top_dw;               /* (top_floats) top-level gathered / grads */
    _Atomic int top_flags[SMOE_T_NSLOTS];
    smoe_comm_ticket top_tickets[SMOE_T_NSLOTS];
    float *x, *dx;                       /* (T, emb) residual stream and its grad */
    int32_t *tokens, *targets;           /* (T) */
    /* the model's kernel table and stream: the buffers above are its
     * memory; on a table that is not synchronous the tokens are staged on
     * the host (tok_h, tgt_h) and written at the step's start */
    const smoe_kops *ops;
    void *stream;
    int32_t *tok_h, *tgt_h;
    smoe_ep_comm ep_rt;                  /* the communicator's expert group */
    smoe_ep_comm ep;                     /* the same, its progress hook driving prefetch */
    smoe_trace *trace;
    double model_s;                      /* time inside model calls this step */
    double model_cpu_s;                  /* this thread's CPU time inside them */
    double cpu_mark;                     /* this thread's CPU time at the last tic */
    tr_hparams hp;
    tr_optim *optim;                     /* clipping, AdamW, bias update */
    int64_t run_peak_fwd, run_peak_bwd;  /* over all steps */
    tr_mem run_peak;                     /* tracked, at the run's peak */
    int64_t run_peak_total;
    int64_t fail_step;                   /* test hook: this rank fails in this step (1-based) */
    /* the next step's first gathers, issued in this step's optimizer */
    const smoe_schedule *next_sched;     /* the next step's schedule (NULL: none known) */
    int next_legacy;
    int early;                           /* 1: issued for the current sched/legacy */
    int64_t early_bytes, early_ops;      /* their bytes and ops (the next step's) */
    int64_t early_host, early_link;      /* their bytes by host (smoe_comm_stats) */
    unsigned char *first;                /* (L) layers the next step gathers at its start */
    tr_devtime *dt;                      /* on a device: the step's stamps (devtime.c) */
    int dt_begin;                        /* the stamp of the last tic */
};

/* The weight's gathers in this step's mode (co-axis or legacy plan). */
static smoe_comm_gather *wg_of(const tr_state *S, const tr_weight *w) { return w->wg[S->legacy]; }

static int unit_layer(const tr_state *S, int u) { return u < S->L ? u : 2 * S->L - 1 - u; }
static int layer_moe(const tr_state *S, int l) { return l >= S->mc->n_dense; }

/* The loop's buffers are in the model table's memory (smoe_kops_buf), with
 * these sizes for its free. */
static size_t top_bytes(const tr_state *S) { return sizeof(float) * (size_t)S->st->top_floats; }
static size_t x_bytes(const tr_state *S)
{
    return sizeof(float) * (size_t)(S->mc->batch * S->mc->seq * S->mc->emb);
}
static size_t tok_bytes(const tr_state *S)
{
    return sizeof(int32_t) * (size_t)(S->mc->batch * S->mc->seq);
}

int64_t tr_residual_bytes(const smoe_model_cfg *mc)
{
    return 2 * mc->batch * mc->seq * mc->emb * (int64_t)sizeof(float);
}

int64_t tr_mem_static(const tr_mem *m)
{
    return m->params + m->grads + m->optimizer + m->activations + m->comm + m->top;
}

tr_mem tr_mem_of(const tr_store *st, const smoe_model_cfg *mc, int64_t act_bytes, int64_t pool)
{
    tr_mem m;
    int64_t slab = st->total * (int64_t)sizeof(float);
    m.params = slab;
    m.grads = slab;
    m.optimizer = 2 * slab;
    m.top = 2 * st->top_floats * (int64_t)sizeof(float);
    m.gathered = m.top + pool;
    m.activations = act_bytes + tr_residual_bytes(mc);
    m.comm = 0;
    return m;
}

static tr_mem mem_now(const tr_state *S, int64_t pool_peak)
{
    return tr_mem_of(S->st, S->mc, smoe_model_act_bytes(S->model), pool_peak);
}

/* ---- the model's expert comm, wrapped so its progress hook also issues
 * prefetches ---- */
static smoe_status ep_counts(void *ctx, const int64_t *send, int64_t *recv, int64_t n)
{
    tr_state *S = ctx;
    return S->ep_rt.exchange_counts(S->ep_rt.ctx, send, recv, n);
}

static smoe_status ep_a2av(void *ctx, const float *send, const int64_t *sr, float *recv,
                           const int64_t *rr, int64_t row)
{
    tr_state *S = ctx;
    return S->ep_rt.alltoallv(S->ep_rt.ctx, send, sr, recv, rr, row);
}

static void ep_progress(void *ctx) { tr_pf_progress(((tr_state *)ctx)->pf); }

static void span(tr_state *S, int lane, const char *name, double t0, double t1)
{
    if (S->trace)
        smoe_trace_span(S->trace, lane, name, t0, t1);
}

static void rt_span_hook(void *ud, int lane, const char *name, double t0, double t1)
{
    span(ud, lane, name, t0, t1);
}

static void layer_ptrs(tr_state *S, int l, float *base, const float *w[SMOE_W_NSLOTS],
                       float *dw[SMOE_W_NSLOTS])
{
    int k = layer_moe(S, l);
    for (int i = 0; i < SMOE_W_NSLOTS; i++) {
        if (w)
            w[i] = NULL;
        if (dw)
            dw[i] = NULL;
    }
    for (int i = 0; i < S->st->n; i++) {
        tr_weight *x = &S->st->w[i];
        if (x->top || x->moe != k)
            continue;
        if (w)
            w[x->slot] = base + x->unit_off;
        if (dw)
            dw[x->slot] = base + x->unit_off;
    }
}

static float *top(tr_state *S, float *base, int slot)
{
    return base + S->st->w[S->top_idx[slot]].unit_off;
}

static void wait_top(tr_state *S, int k)
{
    tr_weight *w = &S->st->w[S->top_idx[k]];
    smoe_comm_gather_wait(S->cm, wg_of(S, w), top(S, S->top_w, k), &S->top_tickets[k], NULL);
}

/* Reduce a top-level gradient; scratch is the (dead) gathered weight. */
static void reduce_top(tr_state *S, int slot)
{
    tr_weight *w = &S->st->w[S->top_idx[slot]];
    smoe_comm_gather_reduce(S->cm, wg_of(S, w), top(S, S->top_dw, slot), top(S, S->top_w, slot),
                            tr_grad_of(S->st, w, 0), &S->top_flags[slot], NULL);
}

/* A model call's start (wall clock; the thread's CPU time kept) and its
 * end, counted in the step's compute. */
static double tic(tr_state *S)
{
    S->dt_begin = tr_devtime_mark(S->dt);
    S->cpu_mark = smoe_thread_cpu();
    return smoe_now();
}

static double toc(tr_state *S, double tm)
{
    double t1 = smoe_now();
    S->model_s += t1 - tm;
    S->model_cpu_s += smoe_thread_cpu() - S->cpu_mark;
    return t1;
}

static void timed(tr_state *S, const char *name, double tm)
{
    tr_devtime_span(S->dt, S->dt_begin, name, 1);
    span(S, SMOE_LANE_COMPUTE, name, tm, toc(S, tm));
}

/* The gathered-layer bytes a budget leaves once the other classes (as
 * they are now: the routed-row stores grow with skewed routing) are
 * counted. When that cannot hold one layer and its gradients: SMOE_EINVAL
 * with err, else (a step, after growth) one layer's worth. */
static smoe_status pool_budget(const tr_state *S, int64_t *pool, smoe_err *err)
{
    *pool = 0;
    if (S->budget <= 0)
        return SMOE_OK;
    tr_mem m = mem_now(S, 0);
    *pool = S->budget - tr_mem_static(&m);
    int64_t f = S->st->unit_floats[0] > S->st->unit_floats[1] ? S->st->unit_floats[0]
                                                              : S->st->unit_floats[1];
    int64_t need = 2 * f * (int64_t)sizeof(float);
    if (*pool < need && err) {
        char where[64];
        snprintf(where, sizeof where, "argument '--hbm-budget %lld'", (long long)S->budget);
        return smoe_err_in(err, SMOE_EINVAL, where,
                           "leaves %lld bytes for gathered layers; one layer and its gradients "
                           "need %lld (parameters, gradients, optimizer, activations and "
                           "top-level buffers take %lld)",
                           (long long)*pool, (long long)need, (long long)tr_mem_static(&m));
    }
    if (*pool < need) /* the activations grew since the start: hold one layer */
        *pool = need;
    return SMOE_OK;
}

static void refresh_budget(tr_state *S)
{
    int64_t pool;
    pool_budget(S, &pool, NULL);
    tr_pf_set_budget(S->pf, pool);
}

static void start_top(tr_state *S, int k)
{
    tr_weight *w = &S->st->w[S->top_idx[k]];
    smoe_comm_gather_start(S->cm, wg_of(S, w), tr_shard_of(S->st, w, 0), top(S, S->top_w, k),
                           &S->top_tickets[k]);
}

/* The step's first gathers: the embedding's, the schedule's first ones,
 * then the head's (final norm, logits: used last, so queued behind the
 * first layer's, which the compute needs first). */
static void issue_first(tr_state *S)
{
    start_top(S, SMOE_T_EMBED);
    tr_pf_begin(S->pf);
    for (int k = 0; k < SMOE_T_NSLOTS; k++)
        if (k != SMOE_T_EMBED)
            start_top(S, k);
}

/* The step's start: its first gathers (unless the previous step's
 * optimizer issued them), the embedding. */
static void step_begin(tr_state *S, int64_t step)
{
    smoe_comm_set_phase(S->cm, "step %lld: forward, embedding", (long long)step + 1);
    if (!S->early)
        issue_first(S);
    S->early = 0;
    wait_top(S, SMOE_T_EMBED);
    double tm = tic(S);
    smoe_model_embed_fwd(S->model, top(S, S->top_w, SMOE_T_EMBED), S->tokens, S->x);
    timed(S, "embed", tm);
}

static smoe_status step_forward(tr_state *S, int64_t step, smoe_err *err)
{
    const float *w[SMOE_W_NSLOTS];
    char name[64];
    for (int u = 0; u < S->L; u++) {
        smoe_comm_set_phase(S->cm, "step %lld: forward, layer %d", (long long)step + 1, u);
        float *buf = tr_pf_acquire(S->pf, u);
        layer_ptrs(S, u, buf, w, NULL);
        double tm = tic(S);
        smoe_status s = smoe_model_layer_fwd(S->model, u, w, S->x, &S->ep, err);
        if (s)
            return s;
        snprintf(name, sizeof name, "fwd L%d %s", u, layer_moe(S, u) ? "moe" : "dense");
        timed(S, name, tm);
        if (S->budget > 0) /* the layer may have grown the routed-row stores */
            refresh_budget(S);
        tr_pf_release(S->pf, u);
    }
    return SMOE_OK;
}

/* The head: loss and its gradient in one pass. */
static double step_head(tr_state *S, int64_t step)
{
    smoe_comm_set_phase(S->cm, "step %lld: loss", (long long)step + 1);
    for (int k = SMOE_T_FINAL_NORM; k <= SMOE_T_LOGITS; k++)
        wait_top(S, k);
    S->ops->fill0(S->stream, S->top_dw, top_bytes(S));
    double tm = tic(S);
    double T = (double)(S->mc->batch * S->mc->seq);
    double loss = smoe_model_head(S->model, top(S, S->top_w, SMOE_T_FINAL_NORM),
                                  top(S, S->top_w, SMOE_T_LOGITS), S->targets, S->x, S->dx,
                                  top(S, S->top_dw, SMOE_T_FINAL_NORM),
                                  top(S, S->top_dw, SMOE_T_LOGITS),
                                  (float)(1.0 / (T * smoe_comm_size(S->cm))));
    timed(S, "head", tm);
    reduce_top(S, SMOE_T_FINAL_NORM);
    reduce_top(S, SMOE_T_LOGITS);
    return loss;
}

static smoe_status step_backward(tr_state *S, int64_t step, smoe_err *err)
{
    const float *w[SMOE_W_NSLOTS];
    float *dw[SMOE_W_NSLOTS];
    char name[64];
    for (int u = S->L; u < S->nunits; u++) {
        int l = unit_layer(S, u);
        smoe_comm_set_phase(S->cm, "step %lld: backward, layer %d", (long long)step + 1, l);
        float *wb = tr_pf_acquire(S->pf, u);
        int gslot;
        float *gb = tr_pf_grad_buffer(S->pf, u, &gslot);
        layer_ptrs(S, l, wb, w, NULL);
        layer_ptrs(S, l, gb, NULL, dw);
        double tm = tic(S);
        smoe_status s = smoe_model_layer_bwd(S->model, l, w, dw, S->dx, &S->ep, err);
        if (s)
            return s;
        snprintf(name, sizeof name, "bwd L%d %s", l, layer_moe(S, l) ? "moe" : "dense");
        timed(S, name, tm);
        tr_pf_reduce(S->pf, u, gslot);
    }
    tr_weight *we = &S->st->w[S->top_idx[SMOE_T_EMBED]];
    float *dembed = top(S, S->top_dw, SMOE_T_EMBED);
    S->ops->fill0(S->stream, dembed, sizeof(float) * (size_t)we->info.gathered_numel);
    double tm = tic(S);
    smoe_model_embed_bwd(S->model, dembed, S->tokens, S->dx);
    tr_devtime_span(S->dt, S->dt_begin, "embed bwd", 0);
    toc(S, tm); /* counted in the compute, not drawn in the trace */
    reduce_top(S, SMOE_T_EMBED);
    return SMOE_OK;
}

/* The record: losses summed over ranks, times and memory maxed over ranks;
 * the loss is MaxText's learning/loss (cross-entropy + z-loss + the
 * load-balance loss). */
/* CPU time read at a step's start and end: the training thread's, and the
 * process's (every thread: training, progress, MPI's own) user and kernel. */
typedef struct { double thread, user, sys; } tr_cpu;

static tr_cpu cpu_now(void)
{
    tr_cpu c = { smoe_thread_cpu(), 0, 0 };
    smoe_process_cpu(&c.user, &c.sys);
    return c;
}

static void step_record(tr_state *S, int64_t step, double loss, double dt, tr_cpu cpu,
                        smoe_comm_stats *rs, const tr_pf_stats *ps, smoe_train_step *rec)
{
    double dev[2]; /* the device's step and compute, read back (a synchronisation) */
    tr_devtime_step_end(S->dt, S->trace, &dev[0], &dev[1]);
    smoe_model_stats ms = smoe_model_stats_get(S->model);
    tr_cpu c1 = cpu_now();
    double sum[7] = { loss + ms.aux_loss, ms.aux_loss, ms.z_loss,
                      c1.user + c1.sys - cpu.user - cpu.sys, c1.sys - cpu.sys,
                      c1.thread - cpu.thread, S->model_cpu_s };
    smoe_comm_allreduce_sum_f64(S->cm, sum, 7);
    rec->aux_loss = sum[1];
    rec->z_loss = sum[2];
    rec->cpu_ms = sum[3] * 1e3;
    rec->sys_ms = sum[4] * 1e3;
    rec->train_cpu_ms = sum[5] * 1e3;
    rec->compute_cpu_ms = sum[6] * 1e3;
    tr_mem m = mem_now(S, ps->peak_bytes);
    double a2a = rs->a2a_s;
    double v[16] = { dt, rs->gather_wait_s + rs->residual_s, rs->residual_s, a2a,
                     S->model_s - a2a, rs->gather_busy_s, rs->reduce_wait_s,
                     (double)ps->peak_bytes, (double)(tr_mem_static(&m) + ps->peak_bytes),
                     (double)ps->overruns, (double)ps->at_use,
                     (double)(rs->gather_bytes - S->early_bytes),
                     (double)(rs->host_bytes - S->early_host),
                     (double)(rs->link_bytes - S->early_link), dev[0], dev[1] };
    smoe_comm_allreduce_max_f64(S->cm, v, 16);
    rec->step = step;
    rec->loss = sum[0];
    rec->step_ms = v[0] * 1e3;
    rec->exposed_gather_ms = v[1] * 1e3;
    rec->residual_ms = v[2] * 1e3;
    rec->a2a_ms = v[3] * 1e3;
    rec->compute_ms = v[4] * 1e3;
    rec->gather_ms = v[5] * 1e3;
    rec->reduce_wait_ms = v[6] * 1e3;
    rec->peak_gathered_bytes = (int64_t)v[7];
    rec->peak_tracked_bytes = (int64_t)v[8];
    rec->budget_overruns = (int64_t)v[9];
    rec->gathers_at_use = (int64_t)v[10];
    rec->gather_bytes = (int64_t)v[11];
    rec->host_bytes = (int64_t)v[12];
    rec->link_bytes = (int64_t)v[13];
    rec->device_step_ms = v[14] * 1e3;
    rec->device_compute_ms = v[15] * 1e3;
    if (ps->peak_fwd > S->run_peak_fwd)
        S->run_peak_fwd = ps->peak_fwd;
    if (ps->peak_bwd > S->run_peak_bwd)
        S->run_peak_bwd = ps->peak_bwd;
    if (tr_mem_static(&m) + ps->peak_bytes > S->run_peak_total) {
        S->run_peak_total = tr_mem_static(&m) + ps->peak_bytes;
        S->run_peak = m;
    }
}

/* Inside the optimizer, once the weights the next step gathers first are
 * updated: that step's mode set, its first gathers issued (they move while
 * the rest of the update runs, and the step's end), their bytes counted
 * for it. */
static void issue_next(void *ud)
{
    tr_state *S = ud;
    if (tr_loop_set_mode(S, S->next_sched, S->next_legacy, S->budget, NULL) != SMOE_OK)
        return; /* checked when the trainer was built: not seen */
    smoe_comm_stats *rs = smoe_comm_stats_get(S->cm);
    int64_t b0 = rs->gather_bytes, n0 = rs->gathers, h0 = rs->host_bytes, l0 = rs->link_bytes;
    refresh_budget(S);
    issue_first(S);
    S->early = 1;
    S->early_bytes = rs->gather_bytes - b0;
    S->early_ops = rs->gathers - n0;
    S->early_host = rs->host_bytes - h0;
    S->early_link = rs->link_bytes - l0;
}

/* The optimizer's split when the next step's schedule gathers at its start
 * (point -1): those layers (and the top-level weights) first, then
 * issue_next. NULL otherwise (no next step, or no-prefetch: its first
 * gathers stay at their use). */
static const tr_optim_split *next_split(tr_state *S, tr_optim_split *sp)
{
    const smoe_schedule *n = S->next_sched;
    int any = 0;
    memset(S->first, 0, (size_t)S->L);
    for (int i = 0; n && i < n->n; i++)
        if (n->g[i].issue < 0) {
            S->first[unit_layer(S, n->g[i].unit)] = 1;
            any = 1;
        }
    if (!any)
        return NULL;
    sp->first = S->first;
    sp->then = issue_next;
    sp->ud = S;
    return sp;
}

void tr_loop_retire(tr_state *S)
{
    if (!S || !S->early)
        return;
    for (int k = 0; k < SMOE_T_NSLOTS; k++)
        wait_top(S, k);
    tr_pf_retire(S->pf);
    S->early = 0;
    S->early_bytes = S->early_ops = S->early_host = S->early_link = 0;
}

void tr_loop_forget(tr_state *S, const smoe_schedule *sched)
{
    if (!sched)
        return;
    if (S->sched == sched) {
        tr_loop_retire(S);
        S->sched = NULL;
    }
    if (S->next_sched == sched)
        S->next_sched = NULL;
}

void tr_loop_set_next(tr_state *S, const smoe_schedule *sched, int legacy)
{
    S->next_sched = sched;
    S->next_legacy = legacy ? 1 : 0;
}

void tr_loop_next_same(tr_state *S, int more)
{
    tr_loop_set_next(S, more ? S->sched : NULL, S->legacy);
}

smoe_status tr_loop_step(tr_state *S, int64_t step, smoe_train_step *rec, smoe_err *err)
{
    const smoe_comm *cm = S->cm;
    smoe_status s;
    smoe_comm_stats *rs = smoe_comm_stats_get(cm);
    if (!S->early) /* else reset at the previous step's record, its gathers' bytes kept */
        memset(rs, 0, sizeof *rs);
    S->early_bytes = S->early_ops = S->early_host = S->early_link = 0;
    S->model_s = S->model_cpu_s = 0;
    smoe_model_stats_reset(S->model);
    if (S->tok_h != S->tokens) { /* the staged tokens to the table's memory */
        S->ops->write(S->stream, S->tokens, S->tok_h, tok_bytes(S));
        S->ops->write(S->stream, S->targets, S->tgt_h, tok_bytes(S));
    }
    tr_cpu cpu0 = cpu_now();
    double t0 = smoe_now();
    tr_devtime_step_begin(S->dt);
    refresh_budget(S);
    step_begin(S, step);
    if ((s = step_forward(S, step, err)))
        return s;
    if (step + 1 == S->fail_step) /* test hook: an error on one rank alone */
        return smoe_err_set(err, SMOE_EINTERNAL,
                            "step %lld: an error injected by the step_error test hook",
                            (long long)step + 1);
    double loss = step_head(S, step);
    if ((s = step_backward(S, step, err)))
        return s;
    smoe_comm_set_phase(cm, "step %lld: gradient reductions and AdamW", (long long)step + 1);
    /* all reductions, then the optimizer on the local shards */
    double tr = smoe_now();
    if ((s = smoe_comm_drain(cm, err)))
        return s;
    tr_pf_drained(S->pf);
    rs->reduce_wait_s += smoe_now() - tr + tr_pf_stats_get(S->pf)->grad_wait_s;
    span(S, SMOE_LANE_WAIT, "drain reductions", tr, smoe_now());
    double tm = smoe_now(), lr = 0, gnorm = 0;
    tr_pf_stats ps = *tr_pf_stats_get(S->pf); /* this step's, before the next one's gathers */
    tr_optim_split sp;
    if ((s = tr_optim_step(S->optim, cm, S->st, S->model, S->mc, &S->hp, step,
                           next_split(S, &sp), &lr, &gnorm, err)))
        return s;
    double t_end = smoe_now();
    span(S, SMOE_LANE_COMPUTE, "adamw", tm, t_end);
    smoe_comm_set_phase(cm, "step %lld: metrics", (long long)step + 1);
    rec->lr = lr;
    rec->grad_norm = gnorm;
    step_record(S, step, loss, t_end - t0, cpu0, rs, &ps, rec);
    if (S->early) { /* what completes from now on is the next step's */
        memset(rs, 0, sizeof *rs);
        rs->gather_bytes = S->early_bytes;
        rs->gathers = S->early_ops;
        rs->host_bytes = S->early_host;
        rs->link_bytes = S->early_link;
    }
    return SMOE_OK;
}

smoe_status tr_loop_new(const smoe_comm *cm, const smoe_model_cfg *mc, const tr_hparams *hp,
                        int max_distance, smoe_model *model, tr_store *st,
                        smoe_trace *trace, tr_state **out, smoe_err *err)
{
    tr_state *S = smoe_calloc(1, sizeof *S);
    if (!S)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    *out = S;
    S->cm = cm;
    S->mc = mc;
    S->hp = *hp;
    S->model = model;
    S->ops = smoe_model_kops(model);
    S->stream = smoe_model_stream(model);
    S->st = st;
    S->trace = trace;
    S->L = (int)(mc->n_dense + mc->n_moe);
    S->nunits = 2 * S->L;
    S->max_distance = max_distance > S->nunits ? S->nunits : max_distance;
    for (int k = 0; k < SMOE_T_NSLOTS; k++)
        S->top_idx[k] = -1;
    for (int i = 0; i < st->n; i++)
        if (st->w[i].top)
            S->top_idx[st->w[i].slot] = i;
    smoe_status s = tr_pf_new(cm, st, S->L, (int)mc->n_dense, S->max_distance, &S->pf, err);
    if (s)
        return s;
    S->top_w = smoe_kops_buf(S->ops, S->stream, top_bytes(S));
    S->top_dw = smoe_kops_buf(S->ops, S->stream, top_bytes(S));
    S->x = smoe_kops_buf(S->ops, S->stream, x_bytes(S));
    S->dx = smoe_kops_buf(S->ops, S->stream, x_bytes(S));
    S->tokens = smoe_kops_buf(S->ops, S->stream, tok_bytes(S));
    S->targets = smoe_kops_buf(S->ops, S->stream, tok_bytes(S));
    S->tok_h = S->ops->synchronous ? S->tokens : smoe_malloc(tok_bytes(S));
    S->tgt_h = S->ops->synchronous ? S->targets : smoe_malloc(tok_bytes(S));
    S->first = smoe_calloc((size_t)(S->L ? S->L : 1), 1);
    if (!S->top_w || !S->top_dw || !S->x || !S->dx || !S->tokens || !S->targets || !S->tok_h ||
        !S->tgt_h || !S->first)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    /* test hook: the last rank fails in step step_error */
    if (smoe_comm_rank(cm) == smoe_comm_size(cm) - 1)
        S->fail_step = smoe_get_test_hooks().step_error;
    S->ep_rt = smoe_comm_ep(cm);
    if (S->ep_rt.size != mc->ep)
        return smoe_err_set(err, SMOE_EINTERNAL, "expert group of %d ranks, model ep %lld",
                            S->ep_rt.size, (long long)mc->ep);
    smoe_ep_comm ep = { S->ep_rt.size, S->ep_rt.rank, S, ep_counts, ep_a2av, ep_progress };
    S->ep = ep;
    if (trace)
        smoe_comm_set_span_hook(cm, rt_span_hook, S);
    if ((s = tr_devtime_new(S->ops, S->stream, 2 * S->L + 3, &S->dt, err)))
        return s;
    return tr_optim_new(st, hp, mc, smoe_comm_size(cm), &S->optim, err);
}

smoe_status tr_loop_set_mode(tr_state *S, const smoe_schedule *sched, int legacy,
                             int64_t budget, smoe_err *err)
{
    if (sched == S->sched && (legacy ? 1 : 0) == S->legacy && budget == S->budget)
        return SMOE_OK; /* set already (and the first gathers issued for it stand) */
    tr_loop_retire(S); /* another mode: those gathers complete unused */
    S->sched = NULL;
    S->legacy = legacy ? 1 : 0;
    S->budget = budget;
    if (smoe_schedule_max_distance(sched) > S->max_distance)
        return smoe_err_set(err, SMOE_EINVAL, "gathers: issued %d units ahead, the pool holds %d",
                            smoe_schedule_max_distance(sched), S->max_distance);
    int64_t pool;
    smoe_status s = pool_budget(S, &pool, err);
    if (!s)
        s = tr_pf_set_schedule(S->pf, sched, legacy, pool, err);
    S->sched = s ? NULL : sched;
    return s;
}

int32_t *tr_loop_tokens(tr_state *S, int32_t **targets)
{
    *targets = S->tgt_h;
    return S->tok_h;
}

void tr_loop_peaks(const tr_state *S, int64_t *fwd, int64_t *bwd, tr_mem *peak)
{
    *fwd = S->run_peak_fwd;
    *bwd = S->run_peak_bwd;
    if (peak)
        *peak = S->run_peak;
}

void tr_loop_free(tr_state *S)
{
    if (!S)
        return;
    tr_loop_retire(S);
    smoe_comm_set_span_hook(S->cm, NULL, NULL);
    tr_optim_free(S->optim);
    tr_devtime_free(S->dt);
    tr_pf_free(S->pf);
    if (S->ops) {
        smoe_kops_buf_free(S->ops, S->stream, S->top_w, top_bytes(S));
        smoe_kops_buf_free(S->ops, S->stream, S->top_dw, top_bytes(S));
        smoe_kops_buf_free(S->ops, S->stream, S->x, x_bytes(S));
        smoe_kops_buf_free(S->ops, S->stream, S->dx, x_bytes(S));
        if (S->tok_h != S->tokens)
            smoe_free(S->tok_h);
        if (S->tgt_h != S->targets)
            smoe_free(S->tgt_h);
        smoe_kops_buf_free(S->ops, S->stream, S->tokens, tok_bytes(S));
        smoe_kops_buf_free(S->ops, S->stream, S->targets, tok_bytes(S));
    }
    smoe_free(S->first);
    smoe_free(S);
}
