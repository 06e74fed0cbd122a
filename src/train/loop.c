/* The training step loop: FSDP gathers with prefetch over a bounded pool of
 * gathered-layer buffers, the model forward and backward, gradient
 * reductions and AdamW.
 *
 * DESIGN
 *   Units are layers in the order they are used: forward 0..L-1, then
 *   backward L-1..0 (re-gathered, as MaxText does with rematerialisation:
 *   two all-gathers and one reduce-scatter per layer per step). A unit's
 *   weights are gathered into one pool slot (sized for the largest layer).
 *   Gathers are issued in unit order up to `prefetch_depth` units ahead of
 *   the unit being computed, as long as a slot is free; the model's progress
 *   hook (called between kernels) retries, so a gather starts as soon as a
 *   slot frees. The pool has depth + 2 slots: forward holds the current
 *   layer and `depth` prefetched ones; backward also holds the current
 *   layer's gradients. After a layer's backward its gradients are copied
 *   (or packed) into its weight slot, which stays busy until their
 *   reduce-scatters complete; the gradient slot is free at once. So gathered
 *   bytes never exceed (depth + 1) layers in the forward and (depth + 2) in
 *   the backward. Top-level weights (embedding, final norm, logits) have
 *   their own buffers, gathered at the start of each step. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define MAX_LAYER_WEIGHTS 32

typedef struct tr_slot {
    float *buf;                          /* (slot_floats) gathered unit */
    int busy;
    int unit;                            /* unit held (W), or -1 */
    int64_t bytes;                       /* bytes in use */
    int rs_pending;                      /* gradient reductions in flight */
    smoe_rt_ticket tickets[MAX_LAYER_WEIGHTS]; /* the unit's gathers in flight */
    _Atomic int flags[MAX_LAYER_WEIGHTS];
    int nflags;
} tr_slot;


struct tr_state {
    smoe_rt *rt;
    const smoe_model_cfg *mc;
    smoe_model *model;
    tr_store *st;
    int L, nunits, depth;                /* depth: this step's prefetch depth */
    int max_depth;                       /* the pool is sized for it */
    int legacy;                          /* this step's plan: 0 co-axis, 1 legacy */
    int idx[2][MAX_LAYER_WEIGHTS];       /* store indices of a dense/MoE layer's weights */
    int nidx[2];
    int top_idx[SMOE_T_NSLOTS];
    tr_slot *slots;
    int nslots;
    int64_t slot_floats;
    int *unit_slot;                      /* (nunits) slot of a unit's weights, or -1 */
    int next_issue, limit;
    int phase;                           /* 0 forward, 1 backward */
    int64_t cur_bytes, peak_bytes, peak_fwd, peak_bwd;
    float *top_w, *top_dw;               /* (top_floats) top-level gathered / grads */
    _Atomic int top_flags[SMOE_T_NSLOTS];
    smoe_rt_ticket top_tickets[SMOE_T_NSLOTS];
    float *x, *dx;                       /* (T, emb) residual stream and its grad */
    int32_t *tokens, *targets;           /* (T) */
    smoe_ep_comm ep_rt;                  /* the runtime's expert comm */
    smoe_trace *trace;
    double model_s;                      /* time inside model calls this step */
    tr_hparams hp;
    tr_optim *optim;                     /* clipping, AdamW, bias update */
    int64_t run_peak_fwd, run_peak_bwd;  /* over all steps */
    int64_t fail_step;                   /* test hook: this rank fails in this step (1-based) */
};

/* The weight's gathers in this step's mode (co-axis or legacy plan). */
static smoe_wgather *wg_of(const tr_state *S, const tr_weight *w) { return w->wg[S->legacy]; }

static int unit_layer(const tr_state *S, int u) { return u < S->L ? u : 2 * S->L - 1 - u; }
static int layer_moe(const tr_state *S, int l) { return l >= S->mc->n_dense; }

static const float *shard_of(const tr_state *S, const tr_weight *w, int l)
{
    int64_t local = w->top ? 0 : l - w->layer0;
    return S->st->params + w->shard_off + local * w->info.shard_numel;
}

static float *grad_of(const tr_state *S, const tr_weight *w, int l)
{
    int64_t local = w->top ? 0 : l - w->layer0;
    return S->st->grads + w->shard_off + local * w->info.shard_numel;
}

static int64_t unit_bytes(const tr_state *S, int l)
{
    return S->st->unit_floats[layer_moe(S, l)] * (int64_t)sizeof(float);
}

static void note_bytes(tr_state *S, int64_t delta)
{
    S->cur_bytes += delta;
    if (S->cur_bytes > S->peak_bytes)
        S->peak_bytes = S->cur_bytes;
    int64_t *p = S->phase ? &S->peak_bwd : &S->peak_fwd;
    if (S->cur_bytes > *p)
        *p = S->cur_bytes;
}

static void slot_release(tr_state *S, tr_slot *s)
{
    if (!s->busy)
        return;
    note_bytes(S, -s->bytes);
    s->busy = 0;
    s->unit = -1;
    s->bytes = 0;
    s->rs_pending = 0;
}

static int pool_slots(int depth) { return depth + 2; }

/* Free slots whose gradient reductions have all completed. */
static void poll_slots(tr_state *S)
{
    for (int i = 0; i < S->nslots; i++) {
        tr_slot *s = &S->slots[i];
        if (!s->busy || !s->rs_pending)
            continue;
        int all = 1;
        for (int k = 0; k < s->nflags && all; k++)
            all = s->flags[k];
        if (all)
            slot_release(S, s);
    }
}

/* A free slot among the depth + 2 this step's depth allows (the pool may
 * be larger for other modes; those slots stay unused, so a step holds
 * exactly what a run at its depth would). */
static int free_slot(tr_state *S)
{
    int n = pool_slots(S->depth) < S->nslots ? pool_slots(S->depth) : S->nslots;
    for (int i = 0; i < n; i++)
        if (!S->slots[i].busy)
            return i;
    return -1;
}

static tr_slot *slot_take(tr_state *S, int i, int unit, int64_t bytes)
{
    tr_slot *s = &S->slots[i];
    s->busy = 1;
    s->unit = unit;
    s->bytes = bytes;
    s->rs_pending = 0;
    s->nflags = 0;
    note_bytes(S, bytes);
    return s;
}

/* Issue the gathers of units next_issue..limit while slots are free. */
static void try_issue(tr_state *S)
{
    while (S->next_issue < S->nunits && S->next_issue <= S->limit) {
        int i = free_slot(S);
        if (i < 0)
            return;
        int u = S->next_issue++;
        int l = unit_layer(S, u);
        int k = layer_moe(S, l);
        tr_slot *s = slot_take(S, i, u, unit_bytes(S, l));
        S->unit_slot[u] = i;
        for (int j = 0; j < S->nidx[k]; j++) {
            tr_weight *w = &S->st->w[S->idx[k][j]];
            smoe_rt_wgather_start(S->rt, wg_of(S, w), shard_of(S, w, l), s->buf + w->unit_off,
                                  &s->tickets[j]);
        }
    }
}

static void progress(tr_state *S)
{
    smoe_rt_progress(S->rt);
    poll_slots(S);
    try_issue(S);
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

static void ep_progress(void *ctx) { progress((tr_state *)ctx); }

static void span(tr_state *S, int lane, const char *name, double t0, double t1)
{
    if (S->trace)
        smoe_trace_span(S->trace, lane, name, t0, t1);
}

static void rt_span_hook(void *ud, int lane, const char *name, double t0, double t1)
{
    span(ud, lane, name, t0, t1);
}

/* Make sure unit u's gathers were issued (waiting for a slot if needed),
 * then wait for them. */
static void wait_unit(tr_state *S, int u, smoe_err *err)
{
    smoe_rt_wait sw = smoe_rt_wait_begin("a free gathered-layer buffer");
    while (S->next_issue <= u) {
        int before = S->next_issue;
        if (S->limit < u)
            S->limit = u;
        progress(S);
        if (S->next_issue == before)
            smoe_rt_wait_step(S->rt, &sw);
    }
    int l = unit_layer(S, u), k = layer_moe(S, l);
    tr_slot *s = &S->slots[S->unit_slot[u]];
    for (int j = 0; j < S->nidx[k]; j++) {
        tr_weight *w = &S->st->w[S->idx[k][j]];
        smoe_rt_wgather_wait(S->rt, wg_of(S, w), s->buf + w->unit_off, &s->tickets[j], NULL, err);
    }
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
    for (int j = 0; j < S->nidx[k]; j++) {
        tr_weight *x = &S->st->w[S->idx[k][j]];
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

/* Reduce a top-level gradient; scratch is the (dead) gathered weight. */
static void reduce_top(tr_state *S, int slot)
{
    tr_weight *w = &S->st->w[S->top_idx[slot]];
    smoe_rt_wgather_reduce(S->rt, wg_of(S, w), top(S, S->top_dw, slot), top(S, S->top_w, slot),
                           grad_of(S, w, 0), &S->top_flags[slot], NULL);
}

smoe_status tr_loop_step(tr_state *S, int64_t step, smoe_train_step *rec, smoe_err *err)
{
    const smoe_model_cfg *mc = S->mc;
    smoe_rt *rt = S->rt;
    smoe_status s;
    smoe_rt_stats *rs = smoe_rt_stats_get(rt);
    memset(rs, 0, sizeof *rs);
    S->model_s = 0;
    S->peak_bytes = S->peak_fwd = S->peak_bwd = S->cur_bytes;
    smoe_model_stats_reset(S->model);
    double t0 = smoe_now(), tm;
    int64_t T = mc->batch * mc->seq;
    smoe_ep_comm ep = { S->ep_rt.size, S->ep_rt.rank, S, ep_counts, ep_a2av, ep_progress };
    char name[64];

    smoe_rt_set_phase(rt, "step %lld: forward, embedding", (long long)step + 1);
    /* top-level weights first, then the first units */
    for (int k = 0; k < SMOE_T_NSLOTS; k++) {
        tr_weight *w = &S->st->w[S->top_idx[k]];
        smoe_rt_wgather_start(rt, wg_of(S, w), shard_of(S, w, 0), top(S, S->top_w, k),
                              &S->top_tickets[k]);
    }
    S->phase = 0;
    S->next_issue = 0;
    S->limit = S->depth;
    try_issue(S);

    tr_weight *we = &S->st->w[S->top_idx[SMOE_T_EMBED]];
    smoe_rt_wgather_wait(rt, wg_of(S, we), top(S, S->top_w, SMOE_T_EMBED),
                         &S->top_tickets[SMOE_T_EMBED], NULL, err);
    tm = smoe_now();
    smoe_model_embed_fwd(S->model, top(S, S->top_w, SMOE_T_EMBED), S->tokens, S->x);
    S->model_s += smoe_now() - tm;
    span(S, SMOE_LANE_COMPUTE, "embed", tm, smoe_now());

    const float *w[SMOE_W_NSLOTS];
    float *dw[SMOE_W_NSLOTS];
    for (int u = 0; u < S->L; u++) {
        S->limit = u + S->depth;
        try_issue(S);
        smoe_rt_set_phase(rt, "step %lld: forward, layer %d", (long long)step + 1, u);
        wait_unit(S, u, err);
        tr_slot *sl = &S->slots[S->unit_slot[u]];
        layer_ptrs(S, u, sl->buf, w, NULL);
        tm = smoe_now();
        if ((s = smoe_model_layer_fwd(S->model, u, w, S->x, &ep, err)))
            return s;
        double t1 = smoe_now();
        S->model_s += t1 - tm;
        snprintf(name, sizeof name, "fwd L%d %s", u, layer_moe(S, u) ? "moe" : "dense");
        span(S, SMOE_LANE_COMPUTE, name, tm, t1);
        slot_release(S, sl);
        S->unit_slot[u] = -1;
        try_issue(S);
    }

    if (step + 1 == S->fail_step) /* test hook: an error on one rank alone */
        return smoe_err_set(err, SMOE_EINTERNAL,
                            "step %lld: an error injected by SMOE_TEST_STEP_ERROR",
                            (long long)step + 1);
    smoe_rt_set_phase(rt, "step %lld: loss", (long long)step + 1);
    /* head: loss and its gradient in one pass */
    for (int k = SMOE_T_FINAL_NORM; k <= SMOE_T_LOGITS; k++) {
        tr_weight *x = &S->st->w[S->top_idx[k]];
        smoe_rt_wgather_wait(rt, wg_of(S, x), top(S, S->top_w, k), &S->top_tickets[k], NULL, err);
    }
    memset(S->top_dw, 0, sizeof(float) * (size_t)S->st->top_floats);
    tm = smoe_now();
    double loss = smoe_model_head(S->model, top(S, S->top_w, SMOE_T_FINAL_NORM),
                                  top(S, S->top_w, SMOE_T_LOGITS), S->targets, S->x, S->dx,
                                  top(S, S->top_dw, SMOE_T_FINAL_NORM),
                                  top(S, S->top_dw, SMOE_T_LOGITS),
                                  (float)(1.0 / ((double)T * smoe_rt_size(rt))));
    S->model_s += smoe_now() - tm;
    span(S, SMOE_LANE_COMPUTE, "head", tm, smoe_now());
    reduce_top(S, SMOE_T_FINAL_NORM);
    reduce_top(S, SMOE_T_LOGITS);

    /* backward */
    S->phase = 1;
    for (int u = S->L; u < S->nunits; u++) {
        int l = unit_layer(S, u), k = layer_moe(S, l);
        smoe_rt_set_phase(rt, "step %lld: backward, layer %d", (long long)step + 1, l);
        S->limit = u + S->depth;
        try_issue(S);
        wait_unit(S, u, err);
        tr_slot *ws = &S->slots[S->unit_slot[u]];
        /* the gradient slot: wait for a reduction to free one */
        double ta = smoe_now();
        int gi;
        smoe_rt_wait gw = smoe_rt_wait_begin("a gradient buffer (reductions in flight)");
        while ((gi = free_slot(S)) < 0) {
            smoe_rt_wait_step(rt, &gw);
            poll_slots(S);
        }
        rs->reduce_wait_s += smoe_now() - ta;
        tr_slot *gs = slot_take(S, gi, -1, unit_bytes(S, l));
        memset(gs->buf, 0, sizeof(float) * (size_t)S->st->unit_floats[k]);
        try_issue(S);
        layer_ptrs(S, l, ws->buf, w, NULL);
        layer_ptrs(S, l, gs->buf, NULL, dw);
        tm = smoe_now();
        if ((s = smoe_model_layer_bwd(S->model, l, w, dw, S->dx, &ep, err)))
            return s;
        double t1 = smoe_now();
        S->model_s += t1 - tm;
        snprintf(name, sizeof name, "bwd L%d %s", l, k ? "moe" : "dense");
        span(S, SMOE_LANE_COMPUTE, name, tm, t1);
        /* gradients into the weight slot (copied, or packed by the
         * runtime), reduced from there; the gradient slot frees now */
        ws->nflags = S->nidx[k];
        for (int j = 0; j < S->nidx[k]; j++) {
            tr_weight *x = &S->st->w[S->idx[k][j]];
            float *g = gs->buf + x->unit_off, *wb = ws->buf + x->unit_off;
            ws->flags[j] = 0;
            if (smoe_rt_wgather_needs_pack(wg_of(S, x))) {
                smoe_rt_wgather_reduce(rt, wg_of(S, x), g, wb, grad_of(S, x, l), &ws->flags[j], NULL);
            } else {
                memcpy(wb, g, sizeof(float) * (size_t)x->info.gathered_numel);
                smoe_rt_wgather_reduce(rt, wg_of(S, x), wb, NULL, grad_of(S, x, l), &ws->flags[j],
                                       NULL);
            }
        }
        ws->rs_pending = 1;
        S->unit_slot[u] = -1;
        slot_release(S, gs);
        progress(S);
    }
    float *dembed = top(S, S->top_dw, SMOE_T_EMBED);
    memset(dembed, 0, sizeof(float) * (size_t)we->info.gathered_numel);
    tm = smoe_now();
    smoe_model_embed_bwd(S->model, dembed, S->tokens, S->dx);
    S->model_s += smoe_now() - tm;
    reduce_top(S, SMOE_T_EMBED);

    smoe_rt_set_phase(rt, "step %lld: gradient reductions and AdamW", (long long)step + 1);
    /* all reductions, then the optimizer on the local shards */
    double tr = smoe_now();
    if ((s = smoe_rt_drain(rt, err)))
        return s;
    poll_slots(S);
    rs->reduce_wait_s += smoe_now() - tr;
    span(S, SMOE_LANE_WAIT, "drain reductions", tr, smoe_now());
    tm = smoe_now();
    double lr = 0, gnorm = 0;
    if ((s = tr_optim_step(S->optim, rt, S->st, S->model, mc, &S->hp, step, &lr, &gnorm, err)))
        return s;
    double t_end = smoe_now();
    span(S, SMOE_LANE_COMPUTE, "adamw", tm, t_end);

    smoe_rt_set_phase(rt, "step %lld: metrics", (long long)step + 1);
    /* the record: losses summed over ranks, times maxed over ranks; the
     * loss is MaxText's learning/loss (cross-entropy + z-loss + the
     * load-balance loss) */
    smoe_model_stats ms = smoe_model_stats_get(S->model);
    double sum[3] = { loss + ms.aux_loss, ms.aux_loss, ms.z_loss };
    smoe_rt_allreduce_sum_f64(rt, sum, 3);
    rec->lr = lr;
    rec->grad_norm = gnorm;
    rec->aux_loss = sum[1];
    rec->z_loss = sum[2];
    double a2a = rs->a2a_s;
    double v[8] = { t_end - t0, rs->gather_wait_s + rs->residual_s, rs->residual_s, a2a,
                    S->model_s - a2a, rs->gather_busy_s, rs->reduce_wait_s,
                    (double)S->peak_bytes };
    smoe_rt_allreduce_max_f64(rt, v, 8);
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
    if (S->peak_fwd > S->run_peak_fwd)
        S->run_peak_fwd = S->peak_fwd;
    if (S->peak_bwd > S->run_peak_bwd)
        S->run_peak_bwd = S->peak_bwd;
    return SMOE_OK;
}


int64_t tr_loop_pool_bytes(const smoe_model_cfg *mc, const tr_store *st, int depth)
{
    (void)mc;
    int64_t f = st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0] : st->unit_floats[1];
    return (int64_t)pool_slots(depth) * f * (int64_t)sizeof(float);
}

smoe_status tr_loop_new(smoe_rt *rt, const smoe_model_cfg *mc, const tr_hparams *hp,
                        int max_depth, smoe_model *model, tr_store *st,
                        smoe_trace *trace, tr_state **out, smoe_err *err)
{
    tr_state *S = smoe_calloc(1, sizeof *S);
    if (!S)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    *out = S;
    S->rt = rt;
    S->mc = mc;
    S->hp = *hp;
    S->model = model;
    S->st = st;
    S->trace = trace;
    S->L = (int)(mc->n_dense + mc->n_moe);
    S->nunits = 2 * S->L;
    S->max_depth = max_depth > S->nunits ? S->nunits : max_depth;
    S->depth = S->max_depth;
    for (int k = 0; k < SMOE_T_NSLOTS; k++)
        S->top_idx[k] = -1;
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        if (w->top) {
            S->top_idx[w->slot] = i;
        } else {
            if (S->nidx[w->moe] == MAX_LAYER_WEIGHTS)
                return smoe_err_set(err, SMOE_EINTERNAL, "too many weights in a layer");
            S->idx[w->moe][S->nidx[w->moe]++] = i;
        }
    }
    S->nslots = pool_slots(S->max_depth);
    S->slot_floats = st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0]
                                                             : st->unit_floats[1];
    S->slots = smoe_calloc((size_t)S->nslots, sizeof *S->slots);
    S->unit_slot = smoe_calloc((size_t)S->nunits, sizeof *S->unit_slot);
    if (!S->slots || !S->unit_slot)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < S->nslots; i++) {
        S->slots[i].unit = -1;
        S->slots[i].buf = smoe_malloc(sizeof(float) * (size_t)(S->slot_floats ? S->slot_floats : 1));
        if (!S->slots[i].buf)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the gathered-layer pool");
    }
    int64_t T = mc->batch * mc->seq;
    S->top_w = smoe_malloc(sizeof(float) * (size_t)st->top_floats);
    S->top_dw = smoe_malloc(sizeof(float) * (size_t)st->top_floats);
    S->x = smoe_malloc(sizeof(float) * (size_t)(T * mc->emb));
    S->dx = smoe_malloc(sizeof(float) * (size_t)(T * mc->emb));
    S->tokens = smoe_malloc(sizeof(int32_t) * (size_t)T);
    S->targets = smoe_malloc(sizeof(int32_t) * (size_t)T);
    if (!S->top_w || !S->top_dw || !S->x || !S->dx || !S->tokens || !S->targets)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    /* test hook: SMOE_TEST_STEP_ERROR=N makes the last rank fail in step N */
    const char *fs = getenv("SMOE_TEST_STEP_ERROR");
    if (fs && smoe_rt_rank(rt) == smoe_rt_size(rt) - 1)
        S->fail_step = atoll(fs);
    S->ep_rt = smoe_rt_ep_comm(rt);
    if (S->ep_rt.size != mc->ep)
        return smoe_err_set(err, SMOE_EINTERNAL, "expert group of %d ranks, model ep %lld",
                            S->ep_rt.size, (long long)mc->ep);
    if (trace)
        smoe_rt_set_span_hook(rt, rt_span_hook, S);
    return tr_optim_new(st, hp, mc, smoe_rt_size(rt), &S->optim, err);
}

void tr_loop_set_mode(tr_state *S, int depth, int legacy)
{
    S->depth = depth < S->max_depth ? depth : S->max_depth;
    S->legacy = legacy ? 1 : 0;
    SMOE_ASSERT(S->st->w[0].wg[S->legacy]);
}

int32_t *tr_loop_tokens(tr_state *S, int32_t **targets)
{
    *targets = S->targets;
    return S->tokens;
}

void tr_loop_peaks(const tr_state *S, int64_t *fwd, int64_t *bwd)
{
    *fwd = S->run_peak_fwd;
    *bwd = S->run_peak_bwd;
}

void tr_loop_free(tr_state *S)
{
    if (!S)
        return;
    smoe_rt_set_span_hook(S->rt, NULL, NULL);
    tr_optim_free(S->optim);
    for (int i = 0; S->slots && i < S->nslots; i++)
        smoe_free(S->slots[i].buf);
    smoe_free(S->slots);
    smoe_free(S->unit_slot);
    smoe_free(S->top_w);
    smoe_free(S->top_dw);
    smoe_free(S->x);
    smoe_free(S->dx);
    smoe_free(S->tokens);
    smoe_free(S->targets);
    smoe_free(S);
}
