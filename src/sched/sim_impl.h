/* The state of one simulated step (sim.c's event loop) and its resources
 * (engines.c: the compute stream, the collective engines, memory events).
 * Private to those two files. */
#ifndef SMOE_SCHED_SIM_IMPL_H
#define SMOE_SCHED_SIM_IMPL_H

#include "sched_impl.h"

enum { LANE_COMPUTE = SMOE_LANE_COMPUTE, LANE_GATHER = SMOE_LANE_GATHER, LANE_COMM = SMOE_LANE_COMM,
       LANE_WAIT = SMOE_LANE_WAIT };

/* What a memory event holds (the peak's breakdown): gathered weights and
 * their full-size gradients, activations, the sharded gradients. */
enum { SIM_MEM_GATHERED, SIM_MEM_ACT, SIM_MEM_GRADS, SIM_MEM_NCAT };

typedef struct mev {
    double t, bytes;
    int cat;
} mev;

typedef struct sim {
    const smoe_sim_model *m;
    const smoe_sim_sched *s;
    smoe_trace *trace;
    double comp, geng, aeng_own, reng_own, areng_own;
    double host; /* the host link's clock: custom remat's offloaded tensors */
    double *aeng, *reng; /* expert exchanges, reductions */
    double *areng; /* smoe's schedules: the all-reduces after reduce-scatters
                      (the runtime's second-stage queue, RT_Q_RLEVEL) */
    double *gend;  /* (2L) prefetched gathers of a unit done */
    double *gend_exp; /* (2L) the same for its routed experts' weights (split) */
    double *gend_down; /* (2L) the same for the routed down projection (split) */
    int split;     /* each op waits only for its own weights (XLA's dataflow:
                      every executor but RUNTIME): the experts phase for the
                      routed weights, the rest for the others; smoe's runtime
                      waits for the whole layer */
    int mx;        /* executor MAXTEXT: MaxText's prefetch path */
    int mxm;       /* MaxText's memory model (mxmem.c): every executor but
                      smoe's runtime, which counts as smoe train does */
    int xla;       /* executor XLA_SCAN (the baseline): the routed experts'
                      weights gathered at the MoE block's entry, each
                      gradient reduced with its transpose */
    int gmode;     /* the dtype the gathers move: G_CAST, G_STORED, G_BYTES, G_WIRE */
    double gratio; /* G_BYTES: bytes per element moved / stored; G_WIRE: / compute */
    double t_exp_grad; /* XLA: when the unit's experts' transposes ended */
    mev *ev;
    int nev, cap;
    double *busy0, *busy1, *busyw; /* comm intervals (cpu profiles) and the
                                      fraction of each that is the cores' work */
    double *busyl;                 /* and of each the link's part it asks (link.c) */
    int *busye;                    /* and its engine (sim_engine_id) */
    int nbusy, capbusy;
    smoe_sim_result r;
    char name[96];
    /* shared engine on accelerators: an expert exchange goes ahead of the
     * queued (not yet started) gathers and reductions, as the scheduler
     * runs the op the compute waits for first; the tasks of the engine: */
    int prio;
    double *qs, *qe, *qt; /* start, end, issue (tasks of the gather engine) */
    int *qu;              /* unit of a gather, -1 otherwise */
    const char **qn;
    int *ql;
    int nq, capq;
    const smoe_schedule *sc; /* UNIFORM: the gathers, in issue order */
    int *at;                 /* (2L + 2) entries of issue point p start at at[p + 1] */
    int pool;                /* executor RUNTIME: smoe's executor runs the schedule */
    sim_pool P;              /* its buffers (pool.c) */
    int gb;                  /* the backward unit's gradient buffer in P, -1: none */
    double gb_t;             /* when it was taken */
    double lag;              /* the reductions' root behind the others (cpu) */
    sim_pass p;              /* this pass's compute rate and sync wait (cores.c) */
    double work;             /* the rank's CPU work, at the every-rank-busy rate */
    int nsync;               /* sync points met */
} sim;

/* What the gathers move (sim.gmode): the weights cast to the compute dtype
 * (XLA's scan, smoe's runtime), as stored (MaxText's path, and the legacy
 * plan, which is that path before the fix), or a schedule's gather_bytes
 * per element (the bandwidth part scaled from the stored dtype's), or
 * smoe's compressed records (smoe_sim_shape.wire_bytes: the bandwidth part
 * scaled from the compute dtype's, the buffers in the compute dtype). */
enum { G_CAST, G_STORED, G_BYTES, G_WIRE };

/* sim_setup.c: one run's state (0, or SMOE_ENOMEM with nothing held),
 * and its release */
smoe_status sim_init(sim *x, const smoe_sim_model *m, const smoe_sim_sched *s,
                     const smoe_schedule *sc, smoe_trace *trace);
void sim_free(sim *x);

/* engines.c */
void sim_mem(sim *x, double t, double bytes);
void sim_span(sim *x, int lane, const char *name, double t0, double t1);
void sim_busy(sim *x, double t0, double t1, double cpu, double use, int eng);
double sim_compute(sim *x, double t, double dur, const char *name);
void sim_record(sim *x, double t, double start, double end, int unit, int lane, const char *name);
double sim_engine_u(sim *x, double *freep, double t, double dur, int lane, const char *name,
                    int unit, double cpu, double link);
double sim_engine(sim *x, double *freep, double t, double dur, int lane, const char *name);
double sim_link_secs(const sim *x, double net, double rate);
/* link.c: what a transfer on engine eng using u of the link over
 * [start, end) loses to the others on it; x's transfers kept for the next
 * pass (SMOE_ENOMEM) */
double sim_link_lost(const sim *x, int eng, double start, double end, double u);
smoe_status sim_link_keep(const sim *x, sim_link *out);
double sim_reduction(sim *x, const sim_w *w, double t, double dur);
double sim_allreduce(sim *x, const sim_w *w, double t, double dur);
double sim_urgent(sim *x, double t, double dur, int lane, const char *name);
double sim_exchange(sim *x, double t, double dur);

/* mxmem.c: MaxText's memory model */
void sim_mx_mem(sim *x, double t, double bytes, int cat);
void sim_mx_unit(sim *x, const sim_kind *k, int bwd, double start, double end);
void sim_mx_embed(sim *x, double t0, double fwd_end);
void sim_mx_head(sim *x, double start, double end);
void sim_mx_top_grads(sim *x, double bwd_start, double rs_end);
void sim_mx_peak(sim *x, int (*cmp)(const void *, const void *));

/* The cores' part of a gather's or reduction's time whose network part
 * is `net`: the profile's measured share of a layer's collectives where it
 * has one (the ranks' CPU time in them: their polling and copies, and
 * across hosts the TCP stack's), else everything but the network part. */
static inline double sim_core_part(const sim *x, double net)
{
    const double f = x->m->hw.cpu.gather_core_fraction;
    return f > 0 ? f : 1 - net;
}

#endif
