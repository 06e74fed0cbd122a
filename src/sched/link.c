/* The gather queue across nodes: smoe's runtime starts up to
 * SIM_GATHER_WINDOW gathers of its gather queue at once (RT_WINDOW in
 * src/runtime/queue.c); across nodes they move together over the link,
 * each at its share of the rate (each moves at 1/k of its own rate while k
 * are in flight), where the simulator's engines run ops one after another.
 * A processor-sharing queue with a limit on the ops in service, evaluated
 * from the step's start over every op added so far. */
#include "sched_impl.h"

#include <math.h>

enum { SIM_GATHER_WINDOW = 8 };

smoe_status sim_link_init(sim_link *l, int cap)
{
    l->n = 0;
    l->cap = cap;
    l->t = smoe_malloc(sizeof(double) * 4 * (size_t)cap);
    l->unit = smoe_malloc(sizeof(int) * (size_t)cap);
    if (!l->t || !l->unit) {
        sim_link_free(l);
        return SMOE_ENOMEM;
    }
    l->w = l->t + cap;
    l->end = l->t + 2 * cap;
    l->rem = l->t + 3 * cap;
    return SMOE_OK;
}

void sim_link_free(sim_link *l)
{
    smoe_free(l->t);
    smoe_free(l->unit);
    l->t = NULL;
    l->unit = NULL;
}

void sim_link_add(sim_link *l, double t, double w, int unit)
{
    if (l->n == l->cap)
        return;
    l->t[l->n] = t;
    l->w[l->n] = w;
    l->unit[l->n++] = unit;
}

void sim_link_ends(sim_link *l, double *gend, double *other)
{
    int run[SIM_GATHER_WINDOW], nrun = 0, next = 0, n = l->n;
    double t = 0;
    while (next < n || nrun > 0) {
        while (next < n && nrun < SIM_GATHER_WINDOW && l->t[next] <= t) {
            l->rem[next] = l->w[next];
            run[nrun++] = next++;
        }
        for (int i = 0; i < nrun;) /* the done ones leave */
            if (l->rem[run[i]] <= 1e-12 * (1 + l->w[run[i]])) {
                l->end[run[i]] = t;
                run[i] = run[--nrun];
            } else {
                i++;
            }
        if (nrun == 0) {
            if (next < n)
                t = fmax(t, l->t[next]);
            continue;
        }
        /* to the next end or the next start, whichever comes first */
        double mn = INFINITY;
        for (int i = 0; i < nrun; i++)
            mn = fmin(mn, l->rem[run[i]]);
        double dt = mn * nrun;
        if (next < n && nrun < SIM_GATHER_WINDOW && l->t[next] - t < dt)
            dt = l->t[next] - t;
        for (int i = 0; i < nrun; i++)
            l->rem[run[i]] -= dt / nrun;
        t += dt;
    }
    for (int i = 0; i < n; i++)
        if (l->unit[i] >= 0)
            gend[l->unit[i]] = 0;
    *other = 0;
    for (int i = 0; i < n; i++) {
        double *ge = l->unit[i] >= 0 ? &gend[l->unit[i]] : other;
        *ge = fmax(*ge, l->end[i]);
    }
}
