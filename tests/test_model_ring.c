/* Ring of experts in the model module, over a thread-based expert group
 * (ep ranks on ep threads, each on its share of the batch):
 *  - ring against the all-to-all on the same ranks: every rank's loss, its
 *    forward output (the last layer's x) and its whole gradient within 1e-6
 *    relative (2-norms), each gradient tensor within 1e-5 (as cmp_runs
 *    measures a tensor; the small ones, a norm's scale, carry the
 *    rounding of every layer), the same routed and dropped counts, and
 *    bitwise with one expert per rank (a token's partials then hold one
 *    pair each and are added in the all-to-all's order); ep = 2 and 4,
 *    softmax and sigmoid+bias routers, skewed routing, a capacity, one
 *    expert per rank;
 *  - ring against one rank holding the whole batch and every expert (loss,
 *    gradients: dense ones summed over the ranks, routed ones per expert
 *    slice, relative 1e-5 of the largest element, as test_model_ep holds the
 *    all-to-all to);
 *  - with ep = 1 the ring flag changes nothing (bitwise);
 *  - a gathered expert index that is not one fails every rank with
 *    SMOE_ECOMM, naming the ring.
 * The model and weights come from model_testlib.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "ep_testlib.h"
#include "model_testlib.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RR = EPT_MAX };
static const double RING_RTOL = 1e-6, TENSOR_RTOL = 1e-5, ORACLE_RTOL = 1e-5;

static void *job_thread(void *p)
{
    job_run(p);
    return NULL;
}

/* One run of a configuration on its ranks. */
typedef struct run {
    int ep;
    wset G[RR];        /* gradients per rank (shapes of the rank config) */
    double loss[RR];
    float *x[RR];      /* the last layer's output, (T_r, emb) */
    smoe_model_stats st[RR];
    smoe_status status[RR];
    char msg[RR][768];
} run;

static void run_free(run *R)
{
    for (int r = 0; r < R->ep; r++) {
        wset_free(&R->G[r]);
        free(R->x[r]);
    }
}

/* rcfg's ep ranks on threads, rank r on the r-th share of tok/tgt. */
static void run_ranks(const smoe_model_cfg *rcfg, const wset *W, const int32_t *tok,
                      const int32_t *tgt, float scale, int64_t corrupt, run *R)
{
    const int ep = (int)rcfg->ep;
    const int64_t Tr = rcfg->batch * rcfg->seq;
    memset(R, 0, sizeof *R);
    R->ep = ep;
    tgroup g;
    tgroup_init(&g, ep, corrupt);
    smoe_model *m[RR] = { NULL };
    job j[RR];
    tcomm tc[RR];
    pthread_t th[RR];
    smoe_err err;
    for (int r = 0; r < ep; r++) {
        CHECK(smoe_model_new(rcfg, &m[r], &err) == SMOE_OK);
        wset_alloc(&R->G[r], rcfg);
        if (!m[r])
            goto out;
    }
    for (int r = 0; r < ep; r++) {
        job_init(&j[r], m[r], W, r, &R->G[r], tok + r * Tr, tgt + r * Tr, scale);
        j[r].comm = tcomm_ep(&tc[r], &g, r);
    }
    for (int r = 0; r < ep; r++)
        pthread_create(&th[r], NULL, job_thread, &j[r]);
    for (int r = 0; r < ep; r++)
        pthread_join(th[r], NULL);
    CHECK(!g.bad);
    for (int r = 0; r < ep; r++) {
        R->status[r] = j[r].st;
        snprintf(R->msg[r], sizeof R->msg[r], "%s", j[r].err.msg);
        R->loss[r] = j[r].loss;
        R->st[r] = smoe_model_stats_get(m[r]);
        R->x[r] = j[r].x; /* kept; dx freed */
        free(j[r].dx);
    }
out:
    for (int r = 0; r < ep; r++)
        smoe_model_free(m[r]);
    tgroup_destroy(&g);
}

/* ---- comparisons ---- */

/* |a - b|_2 / |b|_2 over n elements (0 when both vanish): cmp_runs' measure
 * of a tensor. */
static double rel_norm(const float *a, const float *b, int64_t n)
{
    double d = 0.0, s = 0.0;
    for (int64_t k = 0; k < n; k++) {
        const double e = (double)a[k] - (double)b[k];
        d += e * e;
        s += (double)b[k] * (double)b[k];
    }
    return s > 0.0 ? sqrt(d / s) : sqrt(d);
}

/* Squared 2-norms of a - b into *d and of b into *s. */
static void acc_norm(const float *a, const float *b, int64_t n, double *d, double *s)
{
    for (int64_t k = 0; k < n; k++) {
        const double e = (double)a[k] - (double)b[k];
        *d += e * e;
        *s += (double)b[k] * (double)b[k];
    }
}

/* Rank r's gradients of A against B: each tensor within TENSOR_RTOL (2-norm),
 * the whole gradient within RING_RTOL; returns the whole gradient's
 * difference, the worst tensor's into *tworst. */
static double compare_grads(const char *name, int r, const wset *GA, const wset *GB,
                            double *tworst)
{
    double dd = 0.0, ss = 0.0;
    for (int l = 0; l < GB->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            if (!GB->w[l][i])
                continue;
            const double d = rel_norm(GA->w[l][i], GB->w[l][i], GB->n[l][i]);
            *tworst = fmax(*tworst, d);
            CHECKF(d <= TENSOR_RTOL, "%s rank %d layer %d %s: differs by %.3e", name, r, l,
                   smoe_wslot_path((smoe_wslot)i), d);
            acc_norm(GA->w[l][i], GB->w[l][i], GB->n[l][i], &dd, &ss);
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        const double d = rel_norm(GA->t[i], GB->t[i], GB->tn[i]);
        *tworst = fmax(*tworst, d);
        CHECKF(d <= TENSOR_RTOL, "%s rank %d %s: differs by %.3e", name, r,
               smoe_tslot_path((smoe_tslot)i), d);
        acc_norm(GA->t[i], GB->t[i], GB->tn[i], &dd, &ss);
    }
    const double d = sqrt(dd / ss);
    CHECKF(d <= RING_RTOL, "%s rank %d: the gradient differs by %.3e", name, r, d);
    return d;
}

/* ring (A) against the all-to-all (B) on the same ranks, rank by rank;
 * returns the largest relative difference of the loss, the output and the
 * whole gradient, the worst tensor's into *tworst. */
static double compare_runs(const char *name, const run *A, const run *B, int64_t Tr,
                           double *tworst)
{
    double worst = 0.0;
    for (int r = 0; r < A->ep; r++) {
        CHECKF(A->status[r] == SMOE_OK && B->status[r] == SMOE_OK, "%s rank %d: %s / %s", name,
               r, A->msg[r], B->msg[r]);
        double d = fabs(A->loss[r] - B->loss[r]) / fabs(B->loss[r]);
        worst = fmax(worst, d);
        CHECKF(d <= RING_RTOL, "%s rank %d: loss ring %.9g vs all-to-all %.9g", name, r,
               A->loss[r], B->loss[r]);
        d = rel_norm(A->x[r], B->x[r], Tr * B->G[r].cfg.emb);
        worst = fmax(worst, d);
        CHECKF(d <= RING_RTOL, "%s rank %d: forward output differs by %.3e", name, r, d);
        worst = fmax(worst, compare_grads(name, r, &A->G[r], &B->G[r], tworst));
        CHECK_INT(A->st[r].routed, B->st[r].routed);
        CHECK_INT(A->st[r].dropped, B->st[r].dropped);
        d = fabs(A->st[r].aux_loss - B->st[r].aux_loss);
        CHECKF(d <= RING_RTOL * fabs(B->st[r].aux_loss), "%s: aux loss", name);
    }
    return worst;
}

/* ranks (R) against one rank with all experts (Gref, loss lref). */
static double compare_oracle(const char *name, const run *R, const wset *Gref, double lref)
{
    const smoe_model_cfg *c = &Gref->cfg;
    const int64_t el = c->experts / R->ep;
    double loss = 0.0, worst;
    for (int r = 0; r < R->ep; r++)
        loss += R->loss[r];
    worst = fabs(loss - lref) / fabs(lref);
    CHECKF(worst <= ORACLE_RTOL, "%s: loss %.9g vs one rank %.9g", name, loss, lref);
    for (int l = 0; l < Gref->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            const float *ref = Gref->w[l][i];
            if (!ref)
                continue;
            double d = 0.0;
            if (routed(i)) {
                const int64_t per = el * c->emb * c->moe_mlp;
                for (int r = 0; r < R->ep; r++)
                    d = fmax(d, rel_diff(R->G[r].w[l][i], ref + r * per, per));
            } else {
                const int64_t n = Gref->n[l][i];
                float *sum = calloc((size_t)n, sizeof *sum);
                for (int r = 0; r < R->ep; r++)
                    for (int64_t k = 0; k < n; k++)
                        sum[k] += R->G[r].w[l][i][k];
                d = rel_diff(sum, ref, n);
                free(sum);
            }
            worst = fmax(worst, d);
            CHECKF(d <= ORACLE_RTOL, "%s: layer %d %s: differs from one rank by %.3e", name, l,
                   smoe_wslot_path((smoe_wslot)i), d);
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        const int64_t n = Gref->tn[i];
        float *sum = calloc((size_t)n, sizeof *sum);
        for (int r = 0; r < R->ep; r++)
            for (int64_t k = 0; k < n; k++)
                sum[k] += R->G[r].t[i][k];
        double d = rel_diff(sum, Gref->t[i], n);
        free(sum);
        worst = fmax(worst, d);
        CHECKF(d <= ORACLE_RTOL, "%s: %s: differs from one rank by %.3e", name,
               smoe_tslot_path((smoe_tslot)i), d);
    }
    return worst;
}

/* ---- the cases ---- */

typedef struct fixture {
    wset W;
    int32_t *tok, *tgt;
    float scale;
} fixture;

/* Weights and tokens for gcfg (all experts, the whole batch); skew: every
 * token prefers experts 0 .. topk-1 through the gate bias. */
static void fixture_new(fixture *f, const smoe_model_cfg *gcfg, int skew, uint64_t seed)
{
    rng r = { seed };
    wset_alloc(&f->W, gcfg);
    wset_random(&f->W, &r);
    if (skew)
        for (int l = 0; l < f->W.nl; l++)
            if (f->W.w[l][SMOE_W_GATE_BIAS])
                for (int64_t e = 0; e < gcfg->topk; e++)
                    f->W.w[l][SMOE_W_GATE_BIAS][e] += 10.0f;
    const int64_t T = gcfg->batch * gcfg->seq;
    f->tok = malloc((size_t)T * sizeof *f->tok);
    f->tgt = malloc((size_t)T * sizeof *f->tgt);
    random_tokens(f->tok, T, gcfg->vocab, &r);
    random_tokens(f->tgt, T, gcfg->vocab, &r);
    f->scale = 1.0f / (float)T;
}

static void fixture_free(fixture *f)
{
    wset_free(&f->W);
    free(f->tok);
    free(f->tgt);
}

/* The whole batch on one rank with every expert: loss, gradients into G. */
static double run_one(smoe_model_cfg cfg, const fixture *f, wset *G)
{
    cfg.ep = 1;
    smoe_model *m = NULL;
    smoe_err err;
    double loss = NAN;
    wset_alloc(G, &cfg);
    CHECK(smoe_model_new(&cfg, &m, &err) == SMOE_OK);
    if (!m)
        return loss;
    job j;
    job_init(&j, m, &f->W, 0, G, f->tok, f->tgt, f->scale);
    job_run(&j);
    CHECKF(j.st == SMOE_OK, "one rank: %s", j.err.msg);
    loss = j.loss;
    job_free(&j);
    smoe_model_free(m);
    return loss;
}

/* gcfg (the whole batch, batch divisible by ep) on ep ranks: ring against
 * the all-to-all, and (dropless) both against one rank. */
static void test_ring(const char *name, smoe_model_cfg gcfg, int ep, float cf, int skew,
                      uint64_t seed)
{
    gcfg.capacity_factor = cf;
    fixture f;
    fixture_new(&f, &gcfg, skew, seed);
    smoe_model_cfg rcfg = gcfg;
    rcfg.batch = gcfg.batch / ep;
    rcfg.ep = ep;
    run ring, a2a;
    rcfg.ring = 1;
    run_ranks(&rcfg, &f.W, f.tok, f.tgt, f.scale, 0, &ring);
    rcfg.ring = 0;
    run_ranks(&rcfg, &f.W, f.tok, f.tgt, f.scale, 0, &a2a);
    double tw = 0.0;
    const double d = compare_runs(name, &ring, &a2a, rcfg.batch * rcfg.seq, &tw);
    int64_t dropped = 0;
    for (int r = 0; r < ep; r++)
        dropped += ring.st[r].dropped;
    if (cf > 0.0f)
        CHECKF(dropped > 0, "%s: the capacity should drop pairs", name);
    if (gcfg.experts == ep) /* a peer holds one pair of a token at most */
        CHECKF(d == 0.0 && tw == 0.0, "%s: one expert per rank should be bitwise", name);
    printf("ring ep=%d %-22s vs all-to-all: loss, output, gradient %.2e, worst tensor %.2e "
           "(%lld dropped)\n", ep, name, d, tw, (long long)dropped);
    if (cf <= 0.0f) {
        wset Gref;
        const double lref = run_one(gcfg, &f, &Gref);
        const double dr = compare_oracle(name, &ring, &Gref, lref);
        const double da = compare_oracle(name, &a2a, &Gref, lref);
        printf("ring ep=%d %-22s vs one rank: %.2e (all-to-all %.2e)\n", ep, name, dr, da);
        wset_free(&Gref);
    }
    run_free(&ring);
    run_free(&a2a);
    fixture_free(&f);
}

/* ep = 1: the ring flag leaves the step as it is, bit for bit. */
static void test_one_rank(void)
{
    smoe_model_cfg c = tiny_cfg(8, 1);
    fixture f;
    fixture_new(&f, &c, 0, 31);
    wset G0, G1;
    const double l0 = run_one(c, &f, &G0);
    c.ring = 1;
    const double l1 = run_one(c, &f, &G1);
    CHECK(l0 == l1);
    int same = 1;
    for (int l = 0; l < G0.nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            if (G0.w[l][i])
                same &= memcmp(G0.w[l][i], G1.w[l][i], (size_t)G0.n[l][i] * sizeof(float)) == 0;
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        same &= memcmp(G0.t[i], G1.t[i], (size_t)G0.tn[i] * sizeof(float)) == 0;
    CHECKF(same, "ep=1: the ring flag changed a gradient");
    wset_free(&G0);
    wset_free(&G1);
    fixture_free(&f);
}

/* A gathered row whose expert index is no expert: every rank fails. */
static void test_bad_index(void)
{
    smoe_model_cfg g = tiny_cfg(0, 0);
    g.topk = 1;
    fixture f;
    fixture_new(&f, &g, 0, 41);
    smoe_model_cfg rcfg = g;
    rcfg.batch = 1;
    rcfg.ep = 2;
    rcfg.ring = 1;
    run R;
    run_ranks(&rcfg, &f.W, f.tok, f.tgt, f.scale, g.emb + 2 * g.topk, &R);
    for (int r = 0; r < 2; r++)
        CHECKF(R.status[r] == SMOE_ECOMM && strstr(R.msg[r], "ring of experts"),
               "rank %d: status %d, '%s'", r, (int)R.status[r], R.msg[r]);
    run_free(&R);
    fixture_free(&f);
}

int main(void)
{
    smoe_blas_init(1, NULL); /* the model threads; keep BLAS serial */

    smoe_model_cfg eight = tiny_cfg(8, 0), one = tiny_cfg(8, 0);
    eight.experts = 8;
    eight.batch = 4;
    one.experts = 2;
    one.topk = 1;
    for (int ep = 2; ep <= 4; ep += 2) {
        smoe_model_cfg soft = tiny_cfg(8, 0), sig = tiny_cfg(0, 1);
        soft.batch = sig.batch = 4;
        test_ring("dropless softmax", soft, ep, 0.0f, 0, 51);
        test_ring("dropless sigmoid+bias", sig, ep, 0.0f, 0, 52);
        test_ring("skewed sigmoid+bias", sig, ep, 0.0f, 1, 53);
        test_ring("capacity=0.5", soft, ep, 0.5f, 0, 54);
        test_ring("8 experts", eight, ep, 0.0f, 0, 55);
    }
    /* one local expert per rank */
    test_ring("one expert per rank", one, 2, 0.0f, 0, 56);
    test_one_rank();
    test_bad_index();
    return check_report();
}
