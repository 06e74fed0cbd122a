/* Timings that repeat on a machine whose ranks share its cores.
 *
 * DESIGN. Under smoe train the ranks of a host compute at once, more
 * ranks than cores on a small machine, so a rank's rate is its share of a
 * core over many scheduler slices. A timing of a few milliseconds sees a
 * different machine each time: a rank descheduled at the barrier starts
 * late and then runs alone on a core (a 64-wide sgemm came out several
 * times the rate of a 512-wide one:
 * bench/results/2026-12-01-budget-sim-train.md), or shares it for the
 * whole window, and a best-of-N picks whichever came last. So every
 * sample here is a window long enough to span many slices (`target`
 * seconds, calls per sample agreed by all ranks from a pilot), with every
 * rank running the same kernel at once and the slowest rank's time taken;
 * the probes of one measurement take turns round by round (a load change
 * falls on all of them alike); the figure is the median over the rounds
 * and its spread the interquartile range over the median. While any
 * probe's spread is over CALIB_SPREAD_GOAL, rounds are added (up to
 * CALIB_MAX_ROUNDS): a median of more samples where the machine is
 * noisier. */
#define _GNU_SOURCE
#include "calib_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>


/* The slowest rank's time of `inner` calls, all ranks starting together;
 * *share (if not NULL) the smallest rank's CPU time over its wall time:
 * the part of a core it had. */
static double sample(smoe_rt *rt, const calib_probe *p, int inner, double *share)
{
    smoe_rt_barrier(rt);
    double t0 = smoe_now(), c0 = smoe_thread_cpu();
    for (int i = 0; i < inner; i++)
        p->fn(p->ud);
    double wall = smoe_now() - t0;
    double t[2] = { wall, -(smoe_thread_cpu() - c0) / fmax(wall, 1e-9) };
    smoe_rt_allreduce_max_f64(rt, t, 2);
    if (share)
        *share = -t[1];
    return t[0];
}

/* Calls per sample: doubled until a sample takes a quarter of target,
 * then scaled to target (every rank sees the same slowest time). */
static int calls_for(smoe_rt *rt, const calib_probe *p, double target)
{
    int inner = 1;
    double t = sample(rt, p, inner, NULL);
    while (t < target / 4 && inner < (1 << 22)) {
        inner *= 2;
        t = sample(rt, p, inner, NULL);
    }
    double k = ceil(inner * target / fmax(t, 1e-9));
    return k < 1 ? 1 : k > (1 << 24) ? (1 << 24) : (int)k;
}

double calib_spread(const double *v, int n)
{
    double s[CALIB_MAX_ROUNDS];
    n = n > CALIB_MAX_ROUNDS ? CALIB_MAX_ROUNDS : n;
    for (int i = 0; i < n; i++)
        s[i] = v[i];
    double med = calib_median(s, n); /* s sorted now */
    int q = (n - 1) / 4;
    return med > 0 && n > 1 ? (s[n - 1 - q] - s[q]) / med : 0;
}

void calib_probe_run(smoe_rt *rt, calib_probe *p, int n, int rounds, double target)
{
    rounds = rounds > CALIB_MAX_ROUNDS ? CALIB_MAX_ROUNDS : rounds < 1 ? 1 : rounds;
    for (int i = 0; i < n; i++)
        p[i].inner = calls_for(rt, &p[i], target);
    double sh[CALIB_MAX_ROUNDS][8];
    int done = 0;
    const int debug = getenv("SMOE_CALIB_DEBUG") && smoe_rt_rank(rt) == 0;
    struct rusage ru0, ru1; /* page faults in the timed rounds (the pilot touched the buffers) */
    if (debug)
        getrusage(RUSAGE_SELF, &ru0);
    while (done < CALIB_MAX_ROUNDS) {
        for (; done < rounds; done++)
            for (int i = 0; i < n; i++)
                p[i].t[done] = sample(rt, &p[i], p[i].inner, &sh[done][i < 8 ? i : 7]) / p[i].inner;
        double worst = 0; /* the same on every rank: the samples are agreed */
        for (int i = 0; i < n; i++)
            worst = fmax(worst, calib_spread(p[i].t, done));
        if (worst <= CALIB_SPREAD_GOAL)
            break;
        rounds = done + 1; /* another round while any probe spreads */
    }
    for (int i = 0; i < n; i++) {
        double s[CALIB_MAX_ROUNDS];
        p[i].rounds = done;
        for (int r = 0; r < done; r++)
            s[r] = p[i].t[r];
        p[i].med = calib_median(s, done);
        p[i].spread = calib_spread(p[i].t, done);
        for (int r = 0; r < done; r++)
            s[r] = sh[r][i < 8 ? i : 7];
        p[i].share = calib_median(s, done);
    }
    if (!debug)
        return;
    getrusage(RUSAGE_SELF, &ru1);
    fprintf(stderr, "probes: %ld minor page faults in the timed rounds\n",
            ru1.ru_minflt - ru0.ru_minflt);
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "probe %d (%d calls, share %.2f):", i, p[i].inner, p[i].share);
        for (int r = 0; r < p[i].rounds; r++)
            fprintf(stderr, " %.3g", p[i].t[r] / p[i].med);
        fprintf(stderr, "\n");
    }
}
