/* The prefetch executor: runs a smoe_schedule (the same data smoe sim
 * predicts) over a bounded pool of gathered-layer buffers.
 *
 * DESIGN
 *   A schedule lists, in issue order, every (unit, weight) gather with its
 *   issue point: -1 (the step's start), an earlier unit (when that unit's
 *   compute starts) or its own unit (just before use). The executor keeps a
 *   cursor into that list: an entry is issued once its point is reached, in
 *   list order, as long as (a) its unit holds a pool slot or a free one is
 *   left among the schedule's max distance + 2, and (b) with a memory budget,
 *   the gathered bytes in use plus this gather plus what the units before
 *   it still need (and one gradient buffer in the backward) fit the budget.
 *   An entry that cannot go waits, and so do the entries after it: every
 *   rank starts its gathers in the list's order (collectives on a
 *   communicator must start in the same order on all ranks; memory and
 *   timing may differ between ranks, the order may not). The model's
 *   progress hook (between kernels) retries, so a gather starts as soon as
 *   a slot or memory frees. When the unit about to run waits behind an
 *   entry the budget holds back and nothing in flight can free memory, that
 *   entry goes anyway, counted as an overrun (never seen in the tests).
 *   Backward: the layer's gradients get their own buffer (taken under the
 *   same budget), are copied or packed into the weight slot, and reduced
 *   from there; the slot frees when the reduce-scatters that read it
 *   complete (the all-reduce that follows one, across replicas, works on
 *   the shard's gradient: holding the slot for it held the next prefetch
 *   back to the unit's end, bench/results/2026-12-07-reduce-slot.md).
 *   A backward unit's gradient buffer goes before the prefetches of later
 *   units: when its point is reached, the unit's own entries start, then it
 *   takes a free slot for its gradients, and only then do later units'
 *   entries go; with no slot free, they wait until it has one (after its
 *   gathers' wait). A prefetch that took that slot would leave the compute
 *   waiting for the previous layer's reductions to free one, themselves
 *   slowed by that prefetch on the link (seen across hosts; the simulator's
 *   pool.c runs the same rule). Not with a shared queue (try_issue).
 *   Gathered bytes are counted per weight issued, so the pool's peak is
 *   what was in use.
 *   Single-threaded: called from the step loop and its progress hook. */
#include "train_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct pf_entry {
    int unit, j;     /* the unit and the weight's index in its kind's list */
    int issue;       /* issue point */
    int64_t bytes;
} pf_entry;

typedef struct pf_slot {
    float *buf;                            /* (slot_floats) one unit's weights */
    int busy, unit;                        /* unit held, -1 for gradients */
    int64_t bytes;                         /* bytes issued into it */
    int rs_pending;                        /* gradient reduce-scatters reading it */
    int pending;                           /* the unit's gathers not yet issued */
    smoe_comm_ticket tickets[TR_MAX_LAYER_WEIGHTS];
    _Atomic int flags[TR_MAX_LAYER_WEIGHTS];
    int nflags;
} pf_slot;

struct tr_prefetch {
    const smoe_comm *cm;
    tr_store *st;
    int L, nunits, n_dense;
    int idx[2][TR_MAX_LAYER_WEIGHTS], nidx[2]; /* store indices of a kind's weights */
    pf_slot *slots;
    int nslots, use_slots;                 /* allocated / this schedule's */
    int64_t slot_floats;
    int *unit_slot;                        /* (nunits) slot of a unit, or -1 */
    int *left;                             /* (nunits) gathers of a unit not yet issued */
    pf_entry *e;                           /* (ne) this step's schedule */
    unsigned char *done;                   /* (ne) issued */
    int ne, cap, next, reached, cur;
    int legacy;
    int grad_unit;                         /* a backward unit without its gradient buffer
                                            * yet: later units' entries wait (-1: none) */
    int hold;                              /* 0: no such wait (a shared queue, try_issue) */
    int grad_slot;                         /* the backward unit's gradient buffer, -1: none */
    int64_t budget;                        /* gathered bytes allowed, 0 = none */
    int64_t big;                           /* the largest unit's bytes */
    tr_pf_stats stats;
};

static int unit_layer(const tr_prefetch *P, int u) { return u < P->L ? u : 2 * P->L - 1 - u; }
static int unit_kind(const tr_prefetch *P, int u) { return unit_layer(P, u) >= P->n_dense; }

/* the bytes of unit u's layer buffer (its weights, or its gradients) */
static int64_t unit_bytes(const tr_prefetch *P, int u)
{
    return P->st->unit_floats[unit_kind(P, u)] * (int64_t)sizeof(float);
}

static tr_weight *weight(const tr_prefetch *P, int k, int j) { return &P->st->w[P->idx[k][j]]; }

static smoe_comm_gather *wg_of(const tr_prefetch *P, const tr_weight *w)
{
    return w->wg[P->legacy];
}

static void note(tr_prefetch *P, int64_t delta)
{
    tr_pf_stats *s = &P->stats;
    s->cur_bytes += delta;
    if (s->cur_bytes > s->peak_bytes)
        s->peak_bytes = s->cur_bytes;
    int64_t *p = P->cur >= P->L ? &s->peak_bwd : &s->peak_fwd;
    if (s->cur_bytes > *p)
        *p = s->cur_bytes;
}

static void slot_release(tr_prefetch *P, pf_slot *s)
{
    if (!s->busy)
        return;
    note(P, -s->bytes);
    s->busy = 0;
    s->unit = -1;
    s->bytes = 0;
    s->rs_pending = 0;
}

static int free_slot(const tr_prefetch *P)
{
    int n = P->use_slots < P->nslots ? P->use_slots : P->nslots;
    for (int i = 0; i < n; i++)
        if (!P->slots[i].busy)
            return i;
    return -1;
}

static pf_slot *slot_take(tr_prefetch *P, int i, int unit)
{
    pf_slot *s = &P->slots[i];
    s->busy = 1;
    s->unit = unit;
    s->bytes = 0;
    s->rs_pending = 0;
    s->nflags = 0;
    return s;
}

/* Free slots whose gradients the reduce-scatters have all read. */
static void poll_slots(tr_prefetch *P)
{
    for (int i = 0; i < P->nslots; i++) {
        pf_slot *s = &P->slots[i];
        if (!s->busy || !s->rs_pending)
            continue;
        int all = 1;
        for (int k = 0; k < s->nflags && all; k++)
            all = s->flags[k];
        if (all)
            slot_release(P, s);
    }
}

static int reductions_pending(const tr_prefetch *P)
{
    for (int i = 0; i < P->nslots; i++)
        if (P->slots[i].busy && P->slots[i].rs_pending)
            return 1;
    return 0;
}

/* Does entry i fit the budget? A prefetch also leaves room for what the
 * units before it still need and, in the backward, one gradient buffer. */
static int fits(const tr_prefetch *P, int i)
{
    if (!P->budget)
        return 1;
    const pf_entry *e = &P->e[i];
    int64_t need = P->stats.cur_bytes + e->bytes;
    if (e->unit > P->cur) {
        for (int k = P->next; k < P->ne; k++)
            if (!P->done[k] && k != i && P->e[k].unit < e->unit)
                need += P->e[k].bytes;
        if (e->unit >= P->L) /* the next gradient buffer; the one held frees first */
            need += P->big - (P->grad_slot >= 0 ? P->slots[P->grad_slot].bytes : 0);
    }
    return need <= P->budget;
}

/* Issue entry i if its unit has (or gets) a slot and it fits. */
static int try_one(tr_prefetch *P, int i, int force)
{
    pf_entry *e = &P->e[i];
    int si = P->unit_slot[e->unit];
    if (si < 0 && (si = free_slot(P)) < 0)
        return 0;
    int fit = fits(P, i);
    if (!force && !fit)
        return 0;
    P->stats.overruns += !fit;
    if (P->unit_slot[e->unit] < 0) {
        slot_take(P, si, e->unit);
        P->unit_slot[e->unit] = si;
    }
    pf_slot *s = &P->slots[si];
    tr_weight *w = weight(P, unit_kind(P, e->unit), e->j);
    int l = unit_layer(P, e->unit);
    smoe_comm_gather_start(P->cm, wg_of(P, w), tr_shard_of(P->st, w, l), s->buf + w->unit_off,
                           &s->tickets[e->j]);
    s->bytes += e->bytes;
    note(P, e->bytes);
    P->done[i] = 1;
    P->left[e->unit]--;
    return 1;
}

/* Issue, in order, the entries whose point has been reached and whose
 * unit is at most `upto`. */
static void try_issue_upto(tr_prefetch *P, int upto)
{
    while (P->next < P->ne) {
        if (!P->done[P->next]) {
            const pf_entry *e = &P->e[P->next];
            if (e->issue > P->reached || e->unit > upto || !try_one(P, P->next, 0))
                return;
        }
        P->next++;
    }
}

/* Issue, in order, the entries whose point has been reached; while the
 * backward unit grad_unit has no gradient buffer yet, only its own entries
 * (and what the list puts before them), so that no prefetch takes the slot
 * its gradients need. (Without that, the compute waits for the previous
 * layer's reductions to free a slot, and they are slowed by that very
 * prefetch on the link.)
 * With a shared queue the gathers queue behind and before the expert
 * all-to-alls, which run alone, so every rank must issue them at the same
 * points of its own work: there a prefetch goes at its point, before the
 * unit's wait (where a slot is free whatever the timing), never later from
 * the progress hook when a reduction happens to complete; no hold. */
static void try_issue(tr_prefetch *P)
{
    int u = P->grad_unit;
    if (u < 0) {
        try_issue_upto(P, P->nunits);
        return;
    }
    try_issue_upto(P, u);
    if (P->left[u] > 0) /* its own gathers listed behind a later unit's */
        try_issue_upto(P, P->nunits);
}

void tr_pf_progress(tr_prefetch *P)
{
    smoe_comm_progress(P->cm);
    poll_slots(P);
    try_issue(P);
}

smoe_status tr_pf_set_schedule(tr_prefetch *P, const smoe_schedule *s, int legacy,
                               int64_t budget, smoe_err *err)
{
    if (s->L != P->L || s->n_dense != P->n_dense)
        return smoe_err_set(err, SMOE_EINVAL, "layers: a schedule of %d layers (%d dense) for a "
                            "model of %d (%d dense)", s->L, s->n_dense, P->L, P->n_dense);
    /* every weight of the model exactly once: a name given twice would
     * leave another weight's buffer never gathered */
    int map[2][SMOE_SIM_MAX_WEIGHTS], n[2] = { P->nidx[0], P->nidx[1] };
    const char *nm[2][TR_MAX_LAYER_WEIGHTS];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < P->nidx[k]; j++)
            nm[k][j] = weight(P, k, j)->pw->path;
    const char *const *names[2] = { nm[0], nm[1] };
    smoe_status st = smoe_schedule_match(s, n, names, map, err);
    if (st)
        return st;
    for (int i = 0; i < s->n; i++)
        if (s->g[i].chunk0 != 0 || s->g[i].nchunks != SMOE_SCHED_CHUNKS)
            return smoe_err_set(err, SMOE_EINVAL, "gathers[%d].nchunks: smoe train gathers whole "
                                "weights (plan with smoe sim --whole-weights)", i);
    if (s->n != P->cap)
        return smoe_err_set(err, SMOE_EINVAL, "gathers: %d entries, the model has %d gathers",
                            s->n, P->cap);
    for (int i = 0; i < s->n; i++) {
        const smoe_sched_gather *g = &s->g[i];
        int k = unit_kind(P, g->unit);
        P->e[i].unit = g->unit;
        P->e[i].j = map[k][g->weight];
        P->e[i].issue = g->issue;
        P->e[i].bytes = weight(P, k, P->e[i].j)->info.gathered_numel * (int64_t)sizeof(float);
    }
    P->ne = s->n;
    P->use_slots = smoe_schedule_max_distance(s) + 2;
    P->legacy = legacy ? 1 : 0;
    P->budget = budget;
    SMOE_ASSERT(P->st->w[0].wg[P->legacy]);
    return SMOE_OK;
}

void tr_pf_begin(tr_prefetch *P)
{
    P->stats.peak_bytes = P->stats.peak_fwd = P->stats.peak_bwd = P->stats.cur_bytes;
    P->stats.overruns = 0;
    P->stats.at_use = 0;
    P->stats.grad_wait_s = 0;
    memset(P->done, 0, (size_t)P->ne);
    for (int u = 0; u < P->nunits; u++)
        P->left[u] = 0;
    for (int i = 0; i < P->ne; i++)
        P->left[P->e[i].unit]++;
    P->next = 0;
    P->reached = -1;
    P->cur = 0;
    P->grad_unit = -1;
    P->grad_slot = -1;
    try_issue(P);
}

/* A slot for backward unit u's gradient buffer now: free, and under the
 * budget (or nothing in flight could free memory); -1 when none. */
static int grad_slot_now(const tr_prefetch *P, int u)
{
    int64_t bytes = unit_bytes(P, u);
    int gi = free_slot(P);
    if (gi >= 0 && P->budget && P->stats.cur_bytes + bytes > P->budget && reductions_pending(P))
        return -1;
    return gi;
}

/* Unit u's gradient buffer in slot gi, zeroed; later units' entries may go. */
static void grad_take(tr_prefetch *P, int u, int gi)
{
    int64_t bytes = unit_bytes(P, u);
    P->stats.overruns += P->budget && P->stats.cur_bytes + bytes > P->budget;
    pf_slot *g = slot_take(P, gi, -1);
    g->bytes = bytes;
    note(P, bytes);
    P->st->ops->fill0(P->st->stream, g->buf, (size_t)bytes);
    P->grad_slot = gi;
    P->grad_unit = -1;
}

/* Unit u's weights: its entries start (in list order; with a slot for its
 * gradients free, a backward unit takes it first, then the prefetches whose
 * point u is start), the wait for them, then (if not taken yet) the wait
 * for a gradient buffer (reductions in flight to free one). */
float *tr_pf_acquire(tr_prefetch *P, int u)
{
    P->cur = u;
    if (P->reached < u)
        P->reached = u;
    int bwd = u >= P->L;
    P->grad_unit = bwd && P->hold ? u : -1;
    P->grad_slot = -1;
    smoe_comm_wait sw = smoe_comm_wait_begin("a free gathered-layer buffer or memory");
    P->stats.at_use += P->left[u];
    try_issue(P);
    while (P->left[u] > 0) {
        int before = P->next;
        tr_pf_progress(P);
        if (P->next == before && !reductions_pending(P) && P->next < P->ne &&
            P->e[P->next].issue <= P->reached &&
            try_one(P, P->next, 1)) /* nothing in flight will free memory */
            P->next++;
        if (P->next == before)
            smoe_comm_wait_step(P->cm, &sw);
    }
    int gi;
    if (P->grad_unit == u && (gi = grad_slot_now(P, u)) >= 0) {
        grad_take(P, u, gi);
        try_issue(P);
    }
    int k = unit_kind(P, u);
    pf_slot *s = &P->slots[P->unit_slot[u]];
    for (int j = 0; j < P->nidx[k]; j++) {
        tr_weight *w = weight(P, k, j);
        smoe_comm_gather_wait(P->cm, wg_of(P, w), s->buf + w->unit_off, &s->tickets[j], NULL);
    }
    if (bwd && P->grad_slot < 0) {
        smoe_comm_wait gw = smoe_comm_wait_begin("a gradient buffer (reductions in flight)");
        double t0 = smoe_now();
        while ((gi = grad_slot_now(P, u)) < 0) {
            smoe_comm_wait_step(P->cm, &gw);
            poll_slots(P);
        }
        P->stats.grad_wait_s += smoe_now() - t0;
        grad_take(P, u, gi);
    }
    try_issue(P);
    return s->buf;
}

void tr_pf_release(tr_prefetch *P, int u)
{
    slot_release(P, &P->slots[P->unit_slot[u]]);
    P->unit_slot[u] = -1;
    try_issue(P);
}

float *tr_pf_grad_buffer(tr_prefetch *P, int u, int *gslot)
{
    SMOE_ASSERT(u >= P->L && P->grad_slot >= 0 && P->cur == u);
    *gslot = P->grad_slot;
    return P->slots[P->grad_slot].buf;
}

void tr_pf_reduce(tr_prefetch *P, int u, int gslot)
{
    int l = unit_layer(P, u), k = unit_kind(P, u);
    pf_slot *ws = &P->slots[P->unit_slot[u]], *gs = &P->slots[gslot];
    /* gradients into the weight slot (copied, or packed by the runtime),
     * reduced from there; the gradient buffer frees now, the weight slot
     * once the reduce-scatters have read it (an all-reduce after one runs
     * on the shard's gradient) */
    ws->nflags = P->nidx[k];
    for (int j = 0; j < P->nidx[k]; j++) {
        tr_weight *x = weight(P, k, j);
        float *g = gs->buf + x->unit_off, *wb = ws->buf + x->unit_off;
        ws->flags[j] = 0;
        if (smoe_comm_gather_needs_pack(P->cm, wg_of(P, x))) {
            smoe_comm_gather_reduce(P->cm, wg_of(P, x), g, wb, tr_grad_of(P->st, x, l), NULL,
                                    &ws->flags[j]);
        } else {
            P->st->ops->copy(P->st->stream, wb, g, sizeof(float) * (size_t)x->info.gathered_numel);
            smoe_comm_gather_reduce(P->cm, wg_of(P, x), wb, NULL, tr_grad_of(P->st, x, l), NULL,
                                    &ws->flags[j]);
        }
    }
    ws->rs_pending = 1;
    P->unit_slot[u] = -1;
    slot_release(P, gs);
    P->grad_slot = -1;
    tr_pf_progress(P);
}

void tr_pf_drained(tr_prefetch *P) { poll_slots(P); }

void tr_pf_retire(tr_prefetch *P)
{
    for (int u = 0; u < P->nunits; u++) {
        int si = P->unit_slot[u];
        if (si < 0)
            continue;
        pf_slot *s = &P->slots[si];
        for (int i = 0; i < P->ne; i++) {
            if (!P->done[i] || P->e[i].unit != u)
                continue;
            tr_weight *w = weight(P, unit_kind(P, u), P->e[i].j);
            smoe_comm_gather_wait(P->cm, wg_of(P, w), s->buf + w->unit_off,
                                  &s->tickets[P->e[i].j], NULL);
        }
        slot_release(P, s);
        P->unit_slot[u] = -1;
    }
    P->next = P->ne; /* nothing more of that step issues */
}

void tr_pf_set_budget(tr_prefetch *P, int64_t budget) { P->budget = budget; }

const tr_pf_stats *tr_pf_stats_get(const tr_prefetch *P) { return &P->stats; }

int64_t tr_pf_pool_bytes(const tr_store *st, int max_distance)
{
    int64_t f = st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0] : st->unit_floats[1];
    return (int64_t)(max_distance + 2) * f * (int64_t)sizeof(float);
}

/* A slot's buffer, in the store's table memory (smoe_kops_buf). */
static size_t slot_bytes(const tr_prefetch *P)
{
    return sizeof(float) * (size_t)(P->slot_floats ? P->slot_floats : 1);
}

smoe_status tr_pf_new(const smoe_comm *cm, tr_store *st, int L, int n_dense, int max_distance,
                      tr_prefetch **out, smoe_err *err)
{
    tr_prefetch *P = smoe_calloc(1, sizeof *P);
    if (!P)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    *out = P;
    P->cm = cm;
    P->st = st;
    P->L = L;
    P->n_dense = n_dense;
    P->nunits = 2 * L;
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        if (w->top)
            continue;
        if (P->nidx[w->moe] == TR_MAX_LAYER_WEIGHTS)
            return smoe_err_set(err, SMOE_EINTERNAL, "too many weights in a layer");
        P->idx[w->moe][P->nidx[w->moe]++] = i;
    }
    P->slot_floats = st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0]
                                                             : st->unit_floats[1];
    P->big = P->slot_floats * (int64_t)sizeof(float);
    P->nslots = max_distance + 2;
    P->cap = 0;
    for (int u = 0; u < P->nunits; u++)
        P->cap += P->nidx[unit_kind(P, u)];
    P->slots = smoe_calloc((size_t)P->nslots, sizeof *P->slots);
    P->unit_slot = smoe_calloc((size_t)P->nunits, sizeof *P->unit_slot);
    P->left = smoe_calloc((size_t)P->nunits, sizeof *P->left);
    P->e = smoe_calloc((size_t)(P->cap ? P->cap : 1), sizeof *P->e);
    P->done = smoe_calloc((size_t)(P->cap ? P->cap : 1), 1);
    if (!P->slots || !P->unit_slot || !P->left || !P->e || !P->done)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int u = 0; u < P->nunits; u++)
        P->unit_slot[u] = -1;
    P->grad_unit = P->grad_slot = -1;
    int64_t set[SMOE_COMM_NSETTINGS];
    smoe_comm_settings(cm, set);
    P->hold = !set[SMOE_COMM_SHARED_QUEUE];
    for (int i = 0; i < P->nslots; i++) {
        P->slots[i].unit = -1;
        P->slots[i].buf = smoe_kops_buf(st->ops, st->stream, slot_bytes(P));
        if (!P->slots[i].buf)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the gathered-layer pool");
    }
    return SMOE_OK;
}

void tr_pf_free(tr_prefetch *P)
{
    if (!P)
        return;
    for (int i = 0; P->slots && i < P->nslots; i++)
        smoe_kops_buf_free(P->st->ops, P->st->stream, P->slots[i].buf, slot_bytes(P));
    smoe_free(P->slots);
    smoe_free(P->unit_slot);
    smoe_free(P->left);
    smoe_free(P->e);
    smoe_free(P->done);
    smoe_free(P);
}
