/* smoe train's prefetch executor as the simulator runs it on cpu profiles
 * (src/train/prefetch.c is the real one): a schedule's entries start in
 * list order, once their issue point is reached and their unit holds one
 * of a pool of (the schedule's max distance + 2) layer buffers. A buffer
 * is held from a unit's first gather to the end of its forward compute, or
 * in the backward to the end of its reductions; the backward's gradient
 * buffer takes one for the layer's compute, before the entries of later
 * units (once its own have started: at once if a buffer is free, else
 * after its gathers' wait). Release times are the
 * simulator's: an entry waits for a buffer that frees at a known time, and
 * stops the list at one whose release is not known yet (a unit still to
 * run). */
#include "sched_impl.h"

#include <math.h>

smoe_status sim_pool_init(sim_pool *p, const smoe_schedule *sc, int nunits)
{
    p->sc = sc;
    p->n = smoe_schedule_max_distance(sc) + 2;
    p->next = 0;
    p->reached = -1;
    p->hold = -1;
    p->last = -INFINITY; /* the step's first entries may go before its start */
    p->held_pt = -2;
    p->held_t = -INFINITY;
    p->sfree = smoe_malloc(sizeof *p->sfree * (size_t)p->n);
    p->uslot = smoe_malloc(sizeof *p->uslot * (size_t)nunits);
    if (!p->sfree || !p->uslot) {
        sim_pool_free(p);
        return SMOE_ENOMEM;
    }
    for (int b = 0; b < p->n; b++)
        p->sfree[b] = -INFINITY;
    for (int u = 0; u < nunits; u++)
        p->uslot[u] = -1;
    return SMOE_OK;
}

/* smoe train's optimizer updates first the weights the next step gathers
 * at its start (the top-level weights and the layers of the schedule's
 * entries at point -1), then issues those gathers and updates the rest
 * (train's loop.c, next_split): they go that part of the update before the
 * step's start. The part by gathered bytes (a layer's gathered buffer
 * stands for its parameters). 0 when no entry is at point -1 (no prefetch:
 * the first gathers stay at the step's start). */
double sim_pool_lead(const smoe_sim_model *m, const smoe_schedule *sc)
{
    unsigned char first[SIM_MAX_LAYERS] = { 0 };
    int any = 0;
    for (int i = 0; i < sc->n; i++)
        if (sc->g[i].issue < 0) {
            first[sim_unit_layer(m->L, sc->g[i].unit)] = 1;
            any = 1;
        }
    if (!any)
        return 0;
    double done = m->top_bytes, all = m->top_bytes;
    for (int l = 0; l < m->L; l++) {
        double b = m->k[m->kind_of[l]].bytes;
        all += b;
        done += first[l] ? b : 0;
    }
    return all > 0 ? m->optimizer_s * (1 - done / all) : 0;
}

void sim_pool_free(sim_pool *p)
{
    smoe_free(p->sfree);
    smoe_free(p->uslot);
    p->sfree = NULL;
    p->uslot = NULL;
    p->n = 0;
}

/* The buffer that frees first: its index and time (INFINITY: all held). */
static int first(const sim_pool *p, double *when)
{
    int b = 0;
    for (int i = 1; i < p->n; i++)
        if (p->sfree[i] < p->sfree[b])
            b = i;
    *when = p->sfree[b];
    return b;
}

/* Is an entry of unit u still to start at or after entry i? */
static int unit_pending(const sim_pool *p, int i, int u)
{
    for (; i < p->sc->n; i++)
        if (p->sc->g[i].unit == u)
            return 1;
    return 0;
}

/* Is a buffer held whose release is not known yet? */
static int unknown_release(const sim_pool *p)
{
    for (int b = 0; b < p->n; b++)
        if (p->sfree[b] == INFINITY)
            return 1;
    return 0;
}

void sim_pool_issue(sim_pool *p, double t, sim_pool_start start, void *ud)
{
    const smoe_sched_gather *g = p->sc->g;
    while (p->next < p->sc->n && g[p->next].issue <= p->reached) {
        const smoe_sched_gather *e = &g[p->next];
        if (p->hold >= 0 && e->unit > p->hold && !unit_pending(p, p->next, p->hold))
            return; /* a later unit's prefetch: after the held unit's start */
        double at = fmax(e->issue <= p->held_pt ? p->held_t : t, p->last);
        if (p->uslot[e->unit] < 0) {
            double when;
            int b = first(p, &when);
            if (when == INFINITY)
                return;
            /* a buffer that frees later, while one whose release is not
             * known yet may free first (the unit computing now, a gradient
             * buffer): held back until that one's release is known (train's
             * executor takes whichever frees first) */
            if (when > t && unknown_release(p)) {
                if (p->held_pt < e->issue) {
                    p->held_pt = e->issue;
                    p->held_t = at;
                }
                return;
            }
            at = fmax(at, when);
            p->sfree[b] = INFINITY;
            p->uslot[e->unit] = b;
        }
        start(ud, e, at);
        p->last = at;
        p->next++;
    }
}

int sim_pool_free_at(const sim_pool *p, double t)
{
    double when;
    first(p, &when);
    return when <= t;
}

void sim_pool_release(sim_pool *p, int u, double t)
{
    if (p->uslot[u] >= 0)
        p->sfree[p->uslot[u]] = t;
    p->uslot[u] = -1;
}

double sim_pool_grad(sim_pool *p, double t, int *b)
{
    double when;
    *b = first(p, &when);
    if (when == INFINITY) /* cannot happen with max distance + 2 buffers */
        when = t;
    p->sfree[*b] = INFINITY;
    return fmax(t, when);
}

void sim_pool_grad_done(sim_pool *p, int b, double t)
{
    if (b >= 0)
        p->sfree[b] = t;
}
