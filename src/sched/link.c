/* The link between hosts that the collective engines' transfers share
 * (cpu profiles with dcn_link_bandwidth): what a transfer loses to the
 * others on it, and the passes of the event loop that share it.
 *
 * DESIGN
 *   A transfer records the part of the link it asks over its span: the
 *   seconds its bytes take at the link's rate over its time alone (1 fills
 *   the link). Where the parts of the transfers running at a time add up
 *   to more than the link, what they ask beyond it waits (a fluid link).
 *   One pass of the event loop knows, for each transfer, only those issued
 *   before it: the later one loses all of the excess, and the pair ends
 *   when the link has moved both. Each further pass shares the link with
 *   every transfer of the pass before it (that timeline held fixed), each
 *   losing the part of the excess in proportion to the part it asks, as
 *   flows sharing a link do. Three passes in all: the second moves the
 *   excess between the transfers, the third settles their overlaps (near
 *   the flows' fair shares: by hand in test_sim_cpu); the step is the
 *   last pass's. */
#include "sim_impl.h"

#include <math.h>
#include <string.h>

enum { LINK_MAX = 96, LINK_PASSES = 3 };

/* The time a transfer on engine `eng` asking u of the link over
 * [start, end) loses to the spans (t0, t1, use: the part each asks, their
 * engines) of other engines: the integral of max(0, u + W(t) - 1), W the
 * others' parts at t, or with `share` its part u / (u + W) of that. At
 * most LINK_MAX spans, the first that overlap. */
static double lost_to(const sim_link *l, int eng, double start, double end, double u, int share)
{
    double pt[2 * LINK_MAX + 2];
    int idx[LINK_MAX], k = 0, np = 0;
    for (int i = 0; i < l->n && k < LINK_MAX; i++)
        if (l->use[i] > 0 && l->eng[i] != eng && l->t1[i] > start && l->t0[i] < end)
            idx[k++] = i;
    if (k == 0)
        return 0;
    pt[np++] = start;
    pt[np++] = end;
    for (int j = 0; j < k; j++) {
        pt[np++] = fmax(start, l->t0[idx[j]]);
        pt[np++] = fmin(end, l->t1[idx[j]]);
    }
    for (int i = 1; i < np; i++) /* insertion sort: a few dozen points */
        for (int j = i; j > 0 && pt[j] < pt[j - 1]; j--) {
            double tmp = pt[j];
            pt[j] = pt[j - 1];
            pt[j - 1] = tmp;
        }
    double lost = 0;
    for (int p = 0; p + 1 < np; p++) {
        double a = pt[p], b = pt[p + 1], mid = 0.5 * (a + b), w = 0;
        if (b <= a)
            continue;
        for (int j = 0; j < k; j++)
            if (l->t0[idx[j]] <= mid && mid < l->t1[idx[j]])
                w += l->use[idx[j]];
        double excess = fmax(0, u + w - 1);
        lost += (share ? excess * u / (u + w) : excess) * (b - a);
    }
    return lost;
}

double sim_link_lost(const sim *x, int eng, double start, double end, double u)
{
    if (x->p.link) /* the pass before: every transfer at once */
        return lost_to(x->p.link, eng, start, end, u, 1);
    const sim_link own = { x->busy0, x->busy1, x->busyl, x->busye, x->nbusy };
    return lost_to(&own, eng, start, end, u, 0);
}

void sim_link_free(sim_link *l)
{
    smoe_free(l->t0);
    memset(l, 0, sizeof *l);
}

smoe_status sim_link_keep(const sim *x, sim_link *l)
{
    sim_link_free(l);
    int n = x->nbusy > 0 ? x->nbusy : 1;
    double *d = smoe_malloc(sizeof(double) * 3 * (size_t)n + sizeof(int) * (size_t)n);
    if (!d)
        return SMOE_ENOMEM;
    *l = (sim_link){ d, d + n, d + 2 * n, (int *)(void *)(d + 3 * n), x->nbusy };
    memcpy(l->t0, x->busy0, sizeof(double) * (size_t)x->nbusy);
    memcpy(l->t1, x->busy1, sizeof(double) * (size_t)x->nbusy);
    memcpy(l->use, x->busyl, sizeof(double) * (size_t)x->nbusy);
    memcpy(l->eng, x->busye, sizeof(int) * (size_t)x->nbusy);
    return SMOE_OK;
}

int sim_link_shared(const smoe_sim_model *m)
{
    return m->use_compute && m->hw.cpu.dcn_link_bandwidth > 0;
}

smoe_status sim_link_step(const smoe_sim_model *m, const smoe_sim_sched *s,
                          const smoe_schedule *sc, smoe_sim_result *r, smoe_trace *trace)
{
    sim_link bg[2];
    memset(bg, 0, sizeof bg);
    smoe_status st = SMOE_OK;
    for (int i = 0; i < LINK_PASSES && !st; i++) {
        const int last = i + 1 == LINK_PASSES;
        sim_pass p = { .rate = 1, .skew = m->skew, .link = i ? &bg[(i + 1) % 2] : NULL,
                       .keep = last ? NULL : &bg[i % 2] };
        sim_pass_out o;
        st = sim_run_pass(m, s, sc, &p, r, &o, last ? trace : NULL);
    }
    sim_link_free(&bg[0]);
    sim_link_free(&bg[1]);
    return st;
}
