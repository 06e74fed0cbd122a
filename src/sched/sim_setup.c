/* One simulated step's state (sim_impl.h): the executor's rules, which
 * engine runs which collectives, the buffers the event loop fills, and
 * their release. sim.c's event loop runs on it. */
#include "sim_impl.h"

#include <stdlib.h>
#include <string.h>

/* Index the schedule's entries by issue point: at[p + 1] .. at[p + 2]. */
static int *index_points(const smoe_schedule *sc, int nu)
{
    int *at = smoe_calloc((size_t)nu + 3, sizeof *at);
    if (!at)
        return NULL;
    for (int i = 0; i < sc->n; i++)
        at[sc->g[i].issue + 2]++;
    for (int p = 1; p < nu + 3; p++)
        at[p] += at[p - 1];
    return at;
}

void sim_free(sim *x)
{
    if (x->pool)
        sim_pool_free(&x->P);
    smoe_free(x->at);
    smoe_free(x->ev);
    smoe_free(x->gend);
    smoe_free(x->busy0);
    smoe_free(x->busye);
    smoe_free(x->qs);
    smoe_free(x->qu);
    smoe_free(x->qn);
}

/* The executor's rules (smoe_sim_executor): how a layer waits for its
 * weights, the shared engine's order, what the gathers move. */
static void executor_rules(sim *x, const smoe_sim_sched *s)
{
    const smoe_sim_model *m = x->m;
    x->split = s->executor != SMOE_SIM_EXEC_RUNTIME;
    x->mx = s->executor == SMOE_SIM_EXEC_MAXTEXT;
    x->mxm = s->executor != SMOE_SIM_EXEC_RUNTIME;
    /* On a shared engine XLA's own collectives let an exchange go ahead of
     * queued gathers (assumed: its scheduler runs first the op the compute
     * waits for). MaxText's tagged gathers without the dedicated SparseCore
     * "share the SparseCore queue with the layer's own SparseCore work (e.g.
     * MoE token gathers) and must finish before that work can"
     * (fsdp_prefetch.py, _explicit_fsdp_all_gather): issue order, as smoe's
     * runtime. */
    x->prio = x->aeng == &x->geng && x->split && !x->mx;
    x->xla = s->executor == SMOE_SIM_EXEC_XLA_SCAN;
    /* a schedule's own bytes, else the model's declared reading for
     * MaxText's path (not the legacy plan: its gathers stay as stored) */
    double gb = s->gather_bytes > 0 ? s->gather_bytes
              : x->mx && !s->legacy ? m->mx_gather_bytes : 0;
    if (gb > 0) {
        x->gmode = G_BYTES;
        x->gratio = m->weight_bytes > 0 ? gb / m->weight_bytes : 1;
    } else {
        x->gmode = x->mx || s->legacy ? G_STORED : G_CAST;
    }
    if (x->gmode == G_CAST && !x->xla && m->wire_bytes > 0 && m->compute_bytes > 0) {
        x->gmode = G_WIRE; /* smoe's schedules with compressed gathers */
        x->gratio = m->wire_bytes / m->compute_bytes;
    }
}

/* The engines of one run: with one collective engine everything queues
 * on it; with two, exchanges share one with the reductions; with three or
 * more each kind has its own. A shared schedule puts the gathers on the
 * exchanges' engine (no dedicated gather engine). A profile gives the
 * engines per chip; a device has its share. With two or more, the model's
 * reduce_engine reading may move the reductions onto the exchanges' engine
 * or one of their own. */
static void assign_engines(sim *x, const smoe_sim_model *m, const smoe_sim_sched *s)
{
    int engines = smoe_sim_device_engines(&m->hw);
    if (engines <= 1) {
        x->aeng = x->reng = &x->geng;
    } else {
        x->aeng = &x->aeng_own;
        x->reng = engines >= 3 ? &x->reng_own : &x->aeng_own;
        if (m->reduce_engine != SMOE_REDUCE_PROFILE)
            x->reng = m->reduce_engine == SMOE_REDUCE_OWN ? &x->reng_own : &x->aeng_own;
        if (s->shared_engine) {
            if (x->reng == x->aeng)
                x->reng = &x->geng;
            x->aeng = &x->geng;
        }
    }
    /* smoe's runtime: a queue of their own, but on one engine or one
     * shared queue (the runtime's shared mode merges the second stages
     * into it); XLA's: the reductions' engine */
    x->areng = s->executor == SMOE_SIM_EXEC_RUNTIME && engines > 1 && !s->shared_engine
                   ? &x->areng_own
                   : x->reng;
}

/* One run's state: its engines, the executor's rules and the buffers. */
smoe_status sim_init(sim *x, const smoe_sim_model *m, const smoe_sim_sched *s,
                     const smoe_schedule *sc, smoe_trace *trace)
{
    memset(x, 0, sizeof *x);
    x->m = m;
    x->s = s;
    x->sc = sc;
    x->trace = trace;
    assign_engines(x, m, s);
    executor_rules(x, s);
    int nu = 2 * m->L;
    /* per unit: its weights' issues and gradients (4 each at most), its
     * buffers and activations (mxmem.c: 3); the top-level terms */
    int mw = m->k[0].nw > m->k[1].nw ? m->k[0].nw : m->k[1].nw;
    x->cap = nu * (4 * mw + 12) + 32;
    x->capbusy = m->use_compute ? nu * (2 * mw + 4) + 16 : 0;
    x->ev = smoe_malloc(sizeof *x->ev * (size_t)x->cap);
    x->gend = smoe_calloc(3 * (size_t)nu, sizeof *x->gend);
    x->gend_exp = x->gend ? x->gend + nu : NULL;
    x->gend_down = x->gend ? x->gend + 2 * nu : NULL;
    x->busy0 = x->capbusy ? smoe_malloc(sizeof(double) * 4 * (size_t)x->capbusy) : NULL;
    x->busy1 = x->busy0 ? x->busy0 + x->capbusy : NULL;
    x->busyw = x->busy0 ? x->busy0 + 2 * x->capbusy : NULL;
    x->busyl = x->busy0 ? x->busy0 + 3 * x->capbusy : NULL;
    x->busye = x->capbusy ? smoe_malloc(sizeof(int) * (size_t)x->capbusy) : NULL;
    x->capq = nu * (2 * mw + 8) + 16;
    x->qs = smoe_malloc(sizeof(double) * 3 * (size_t)x->capq);
    x->qu = smoe_malloc(sizeof(int) * 2 * (size_t)x->capq);
    x->qn = smoe_malloc(sizeof(const char *) * (size_t)x->capq);
    if (x->qs) {
        x->qe = x->qs + x->capq;
        x->qt = x->qs + 2 * x->capq;
    }
    if (x->qu)
        x->ql = x->qu + x->capq;
    x->at = index_points(sc, nu);
    if (s->executor == SMOE_SIM_EXEC_RUNTIME) /* smoe's own executor */
        x->pool = sim_pool_init(&x->P, sc, nu) == SMOE_OK ? 1 : -1;
    if (!x->ev || !x->gend || (x->capbusy && (!x->busy0 || !x->busye)) || !x->qs || !x->qu || !x->qn || !x->at ||
        x->pool < 0) {
        sim_free(x);
        return SMOE_ENOMEM;
    }
    return SMOE_OK;
}
