/* A thread-based expert group for the model's expert-parallel tests
 * (test_model_ep, test_model_ring), and their comparison helpers: up to EPT_MAX ranks on threads, each
 * with a smoe_ep_comm whose exchanges go through shared pointers and a
 * barrier. A rank that receives other row counts than its peers sent sets
 * `bad` and fails with SMOE_ECOMM; `corrupt` > 0 writes expert index -1
 * into the first received row of that width (the ring's gathered routing:
 * its K-th index with K = 1) to check that the receiver refuses it. */
#ifndef SMOE_TEST_EP_TESTLIB_H
#define SMOE_TEST_EP_TESTLIB_H

#include "smoe/comm.h"
#include "smoe/model.h"

#include <math.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

enum { EPT_MAX = 4 };

typedef struct tgroup {
    int size;
    pthread_barrier_t bar;
    const void *send[EPT_MAX];
    const int64_t *rows[EPT_MAX];
    int bad;         /* a rank saw mismatched row counts */
    int64_t corrupt; /* > 0: received rows of this width get expert index -1 */
    long progress_calls;
    pthread_mutex_t mu;
} tgroup;

typedef struct tcomm {
    tgroup *g;
    int rank;
} tcomm;

/* g for `size` ranks (destroy with tgroup_destroy) */
static inline void tgroup_init(tgroup *g, int size, int64_t corrupt)
{
    memset(g, 0, sizeof *g);
    g->size = size;
    g->corrupt = corrupt;
    pthread_barrier_init(&g->bar, NULL, (unsigned)size);
    pthread_mutex_init(&g->mu, NULL);
}

static inline void tgroup_destroy(tgroup *g)
{
    pthread_barrier_destroy(&g->bar);
    pthread_mutex_destroy(&g->mu);
}

static inline smoe_status t_exchange(void *ctx, const int64_t *send, int64_t *recv, int64_t n)
{
    tcomm *c = ctx;
    tgroup *g = c->g;
    g->send[c->rank] = send;
    pthread_barrier_wait(&g->bar);
    for (int p = 0; p < g->size; p++)
        memcpy(recv + p * n, (const int64_t *)g->send[p] + c->rank * n, (size_t)n * sizeof *recv);
    pthread_barrier_wait(&g->bar);
    return SMOE_OK;
}

static inline smoe_status t_alltoallv(void *ctx, const float *send, const int64_t *send_rows,
                                      float *recv, const int64_t *recv_rows, int64_t row)
{
    tcomm *c = ctx;
    tgroup *g = c->g;
    g->send[c->rank] = send;
    g->rows[c->rank] = send_rows;
    pthread_barrier_wait(&g->bar);
    int bad = 0;
    int64_t roff = 0;
    for (int p = 0; p < g->size; p++) {
        int64_t off = 0;
        for (int q = 0; q < c->rank; q++)
            off += g->rows[p][q];
        int64_t n = g->rows[p][c->rank];
        if (n != recv_rows[p]) {
            bad = 1;
            n = n < recv_rows[p] ? n : recv_rows[p];
        }
        memcpy(recv + roff * row, (const float *)g->send[p] + off * row,
               (size_t)(n * row) * sizeof *recv);
        roff += recv_rows[p];
    }
    pthread_barrier_wait(&g->bar);
    if (g->corrupt == row && roff > 0)
        recv[row - 2] = -1.0f;
    if (bad) {
        g->bad = 1;
        return SMOE_ECOMM;
    }
    return SMOE_OK;
}

static inline void t_progress(void *ctx)
{
    tcomm *c = ctx;
    pthread_mutex_lock(&c->g->mu);
    c->g->progress_calls++;
    pthread_mutex_unlock(&c->g->mu);
}

/* rank r's smoe_ep_comm over g (tc must outlive it) */
static inline smoe_ep_comm tcomm_ep(tcomm *tc, tgroup *g, int r)
{
    *tc = (tcomm){ g, r };
    smoe_ep_comm c = { g->size, r, tc, t_exchange, t_alltoallv, t_progress };
    return c;
}

/* A routed expert's weight slot (sliced over the expert axis). */
static inline int routed(int i)
{
    return i == SMOE_W_EXP_WI0 || i == SMOE_W_EXP_WI1 || i == SMOE_W_EXP_WO;
}

/* max |a - b| / max |b| over n elements (0 when both vanish). */
static inline double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0.0, s = 0.0;
    for (int64_t k = 0; k < n; k++) {
        d = fmax(d, fabs((double)a[k] - (double)b[k]));
        s = fmax(s, fabs((double)b[k]));
    }
    return s > 0.0 ? d / s : d;
}

#endif
