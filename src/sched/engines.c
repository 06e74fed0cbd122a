/* The simulated step's resources: the compute stream (stretched on cpu
 * profiles by the collectives it overlaps), the collective engines (each
 * runs its ops one after another; on a shared accelerator engine an op the
 * compute waits for goes ahead of the queued gathers) and the memory
 * events the peak is read from. sim.c's event loop drives them. */
#include "sim_impl.h"

#include <math.h>
#include <string.h>

/* A device's share of its chip's collective engines and HBM (the profile
 * gives them per chip). */
int smoe_sim_device_engines(const smoe_hw *hw)
{
    return (int)(hw->collective_engines / fmax(1, hw->devices_per_chip));
}

double smoe_sim_device_hbm(const smoe_hw *hw)
{
    return hw->hbm_bytes > 0 ? hw->hbm_bytes / fmax(1, hw->devices_per_chip) : 0;
}

void sim_mem(sim *x, double t, double bytes)
{
    if (x->nev < x->cap) {
        x->ev[x->nev].t = t;
        x->ev[x->nev].bytes = bytes;
        x->ev[x->nev].cat = SIM_MEM_GATHERED;
        x->nev++;
    }
}

void sim_span(sim *x, int lane, const char *name, double t0, double t1)
{
    if (x->trace && t1 > t0)
        smoe_trace_span(x->trace, lane, name, t0, t1);
}

void sim_busy(sim *x, double t0, double t1, double cpu, double use, int eng)
{
    if (!x->m->use_compute || t1 <= t0 || (cpu <= 0 && use <= 0))
        return;
    x->work += cpu * (t1 - t0);
    if (x->nbusy == x->capbusy)
        return;
    x->busy0[x->nbusy] = t0;
    x->busyw[x->nbusy] = cpu;
    x->busyl[x->nbusy] = use;
    x->busye[x->nbusy] = eng;
    x->busy1[x->nbusy++] = t1;
}

/* A compute segment of `dur` seconds ready at t; returns its end. A
 * collective it overlaps stretches it by the overlap times the fraction of
 * the collective's time that is the cores' work (all of it within a node;
 * a transfer on the network goes on while the rank computes). */
double sim_compute(sim *x, double t, double dur, const char *name)
{
    x->work += dur;
    dur *= x->p.rate;
    double start = fmax(t, x->comp), end = start + dur;
    if (x->m->use_compute) /* stretched by the collectives it overlaps */
        for (int it = 0; it < 3; it++) {
            double over = 0;
            for (int i = 0; i < x->nbusy; i++)
                over += x->busyw[i] * fmax(0, fmin(end, x->busy1[i]) - fmax(start, x->busy0[i]));
            end = start + dur + over;
        }
    x->comp = end;
    x->r.compute_s += end - start;
    sim_span(x, LANE_COMPUTE, name, start, end);
    return end;
}

void sim_record(sim *x, double t, double start, double end, int unit, int lane,
                   const char *name)
{
    if (x->nq == x->capq)
        return;
    x->qt[x->nq] = t;
    x->qs[x->nq] = start;
    x->qe[x->nq] = end;
    x->qu[x->nq] = unit;
    x->ql[x->nq] = lane;
    x->qn[x->nq++] = name;
}

/* The engine whose clock is freep, as the link's spans name it. */
static int engine_id(const sim *x, const double *freep)
{
    return freep == &x->geng ? 0 : freep == x->reng ? 1 : freep == x->areng ? 2
                                                     : freep == x->aeng ? 3 : 4;
}

/* An op of `dur` seconds alone, ready at t on the engine whose clock is
 * *freep, `cpu` of it the cores' work and `link` seconds of it the link's
 * (cpu profiles across hosts): beside other engines' transfers on the
 * link it takes longer by what it loses to them (link.c; three passes,
 * as sim_compute's, while the longer span meets more of them); its
 * cores' work stays the same. */
double sim_engine_u(sim *x, double *freep, double t, double dur, int lane, const char *name,
                       int unit, double cpu, double link)
{
    const int eng = engine_id(x, freep);
    const double use = dur > 0 ? fmin(1, link / dur) : 0; /* of the link, alone */
    double start = fmax(*freep, t), end = start + dur;
    if (use > 0 && x->m->use_compute)
        for (int it = 0; it < 3; it++)
            end = start + dur + sim_link_lost(x, eng, start, end, use);
    *freep = end;
    sim_busy(x, start, end, end > start ? cpu * dur / (end - start) : cpu, use, eng);
    if (freep == &x->geng)
        sim_record(x, t, start, end, unit, lane, name); /* spans at the end */
    else
        sim_span(x, lane, name, t, end);
    return end;
}

double sim_engine(sim *x, double *freep, double t, double dur, int lane, const char *name)
{
    return sim_engine_u(x, freep, t, dur, lane, name, -1, 1, 0);
}

/* The link's seconds of a transfer whose network part took `net` seconds
 * at `rate` (the profile's figure it was timed by): its bytes at the
 * shared link's rate; 0 where the profile has none (each engine has the
 * link to itself). */
double sim_link_secs(const sim *x, double net, double rate)
{
    const double link = x->m->hw.cpu.dcn_link_bandwidth;
    return link > 0 && rate > 0 ? net * rate / link : 0;
}

/* The same for a reduction of `dur` whose network part is `net`, timed at
 * the reductions' rate across hosts where the profile has one. */
static double reduce_link(const sim *x, double dur, double net)
{
    const smoe_hw *hw = &x->m->hw;
    return sim_link_secs(x, dur * net, hw->cpu.dcn_reduce_bandwidth > 0
                                           ? hw->cpu.dcn_reduce_bandwidth
                                           : hw->dcn_bandwidth);
}

/* A gradient reduction of weight w on the reduction engine. */
double sim_reduction(sim *x, const sim_w *w, double t, double dur)
{
    return sim_engine_u(x, x->reng, t, dur, LANE_COMM, "reduce-scatter", -1,
                        sim_core_part(x, w->rs_net), reduce_link(x, dur, w->rs_net));
}

/* The all-reduce after weight w's reduce-scatter (HSDP), ready at t: on
 * its own queue (x->areng), as smoe's runtime runs it. */
double sim_allreduce(sim *x, const sim_w *w, double t, double dur)
{
    return sim_engine_u(x, x->areng, t, dur, LANE_COMM, "all-reduce", -1,
                        sim_core_part(x, w->rs_net), reduce_link(x, dur, w->rs_net));
}

/* An op the compute waits for, issued at t on the gather engine: it waits
 * for the op running at t, then runs; the ops queued after it move back. */
double sim_urgent(sim *x, double t, double dur, int lane, const char *name)
{
    int i = 0;
    while (i < x->nq && x->qs[i] < t)
        i++;
    double start = t;
    if (i > 0 && x->qe[i - 1] > t) /* the op running at t */
        start = x->qe[i - 1];
    double end = start + dur, cur = end;
    for (int j = i; j < x->nq; j++) {
        double d = x->qe[j] - x->qs[j];
        x->qs[j] = fmax(x->qs[j], cur);
        x->qe[j] = x->qs[j] + d;
        cur = x->qe[j];
        if (x->qu[j] >= 0) { /* a gather: 3 x unit + its group (issue()) */
            int grp = x->qu[j] % 3;
            double *ge = (grp == 2 ? x->gend_down : grp ? x->gend_exp : x->gend) + x->qu[j] / 3;
            if (x->qe[j] > *ge)
                *ge = x->qe[j];
        }
    }
    if (x->nq < x->capq) { /* insert at i */
        memmove(x->qs + i + 1, x->qs + i, sizeof(double) * (size_t)(x->nq - i));
        memmove(x->qe + i + 1, x->qe + i, sizeof(double) * (size_t)(x->nq - i));
        memmove(x->qt + i + 1, x->qt + i, sizeof(double) * (size_t)(x->nq - i));
        memmove(x->qu + i + 1, x->qu + i, sizeof(int) * (size_t)(x->nq - i));
        memmove(x->ql + i + 1, x->ql + i, sizeof(int) * (size_t)(x->nq - i));
        memmove(x->qn + i + 1, x->qn + i, sizeof(const char *) * (size_t)(x->nq - i));
        x->qt[i] = t;
        x->qs[i] = start;
        x->qe[i] = end;
        x->qu[i] = -1;
        x->ql[i] = lane;
        x->qn[i] = name;
        x->nq++;
    }
    x->geng = fmax(x->geng, cur);
    sim_busy(x, start, end, 1, 0, engine_id(x, &x->geng));
    return end;
}

/* An expert exchange: on a shared accelerator engine it goes ahead of the
 * queued gathers; otherwise it queues on its engine. */
double sim_exchange(sim *x, double t, double dur)
{
    if (!x->prio)
        return sim_engine(x, x->aeng, t, dur, LANE_COMM, "expert exchange");
    return sim_urgent(x, t, dur, LANE_COMM, "expert exchange");
}
