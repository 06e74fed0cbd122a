/* Oracle for expert parallelism in the model module: ep = 2 on two threads
 * (a pthread smoe_ep_comm written here) on the two halves of a batch equals
 * ep = 1 on the whole batch (loss, and every gradient: dense ones summed
 * over the ranks, routed ones per expert slice, relative 1e-5), also with
 * routing skewed onto rank 0 (whose routed-row store must grow). With a
 * capacity, ep = 2 equals two ep = 1 runs on the halves (capacity is per
 * sending rank), and the drop count matches the one recomputed from the
 * chosen experts; with one expert per rank (no regrouping) as well. The
 * model and weights come from model_testlib.h.
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

static const double EP_RTOL = 1e-5;

/* One rank of the group: its step on its own thread. */
static void *job_thread(void *p)
{
    job_run(p);
    return NULL;
}

/* ---- ep = 2 against ep = 1 ---- */

/* Run ep = 2 ranks on two threads, rank r on batch half r, weights W (all
 * experts), gradients into G[r] (shapes of the rank config). */
static void run_ep2(const smoe_model_cfg *rcfg, const wset *W, wset G[MAXR],
                    const int32_t *tok, const int32_t *tgt, float scale,
                    double loss[MAXR], smoe_model_stats stats[MAXR],
                    int32_t *topk[MAXR], long *progress, int64_t grew[MAXR])
{
    const int64_t Tr = rcfg->batch * rcfg->seq;
    tgroup g;
    tgroup_init(&g, 2, 0);
    smoe_model *m[MAXR] = { NULL, NULL };
    job j[MAXR];
    tcomm tc[MAXR];
    pthread_t th[MAXR];
    smoe_err err;
    for (int r = 0; r < 2; r++) {
        CHECK(smoe_model_new(rcfg, &m[r], &err) == SMOE_OK);
        if (!m[r])
            goto out;
    }
    for (int r = 0; r < 2; r++) {
        wset_alloc(&G[r], rcfg);
        job_init(&j[r], m[r], W, r, &G[r], tok + r * Tr, tgt + r * Tr, scale);
        j[r].comm = tcomm_ep(&tc[r], &g, r);
    }
    for (int r = 0; r < 2; r++) {
        grew[r] = -smoe_model_act_bytes(m[r]);
        pthread_create(&th[r], NULL, job_thread, &j[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    CHECK(!g.bad);
    for (int r = 0; r < 2; r++) {
        CHECKF(j[r].st == SMOE_OK, "rank %d: %s", r, j[r].err.msg);
        loss[r] = j[r].loss;
        stats[r] = smoe_model_stats_get(m[r]);
        grew[r] += smoe_model_act_bytes(m[r]);
        if (topk[r])
            save_topk(m[r], topk[r]);
        job_free(&j[r]);
    }
    *progress = g.progress_calls;
out:
    for (int r = 0; r < 2; r++)
        smoe_model_free(m[r]);
    tgroup_destroy(&g);
}

/* Compare the gradients of ep = 2 (Gr, per rank) to a reference with all
 * experts (Gref): dense slots summed over ranks, routed ones per slice. */
static void compare_ep(const char *name, const wset Gr[MAXR], const wset *Gref,
                       int64_t el)
{
    const smoe_model_cfg *c = &Gref->cfg;
    double worst = 0.0;
    for (int l = 0; l < Gref->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            const float *ref = Gref->w[l][i];
            if (!ref)
                continue;
            double d;
            if (routed(i)) {
                const int64_t n = Gr[0].n[l][i], per = el * c->emb * c->moe_mlp;
                CHECK_INT(n, per);
                d = fmax(rel_diff(Gr[0].w[l][i], ref, n),
                         rel_diff(Gr[1].w[l][i], ref + per, n));
            } else {
                const int64_t n = Gref->n[l][i];
                float *sum = malloc((size_t)n * sizeof *sum);
                for (int64_t k = 0; k < n; k++)
                    sum[k] = Gr[0].w[l][i][k] + Gr[1].w[l][i][k];
                d = rel_diff(sum, ref, n);
                free(sum);
            }
            worst = fmax(worst, d);
            CHECKF(d <= EP_RTOL, "%s: layer %d %s: ep=2 differs by %.3e", name, l,
                   smoe_wslot_path((smoe_wslot)i), d);
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        const int64_t n = Gref->tn[i];
        float *sum = malloc((size_t)n * sizeof *sum);
        for (int64_t k = 0; k < n; k++)
            sum[k] = Gr[0].t[i][k] + Gr[1].t[i][k];
        double d = rel_diff(sum, Gref->t[i], n);
        free(sum);
        worst = fmax(worst, d);
        CHECKF(d <= EP_RTOL, "%s: %s: ep=2 differs by %.3e", name,
               smoe_tslot_path((smoe_tslot)i), d);
    }
    printf("ep %-22s largest relative gradient difference %.2e\n", name, worst);
}

/* Single rank, all experts, on `batch` sequences starting at sequence b0;
 * gradients accumulate into G. */
static double run_ep1(smoe_model_cfg cfg, int64_t batch, int64_t b0,
                      const wset *W, wset *G, const int32_t *tok,
                      const int32_t *tgt, float scale)
{
    cfg.batch = batch;
    cfg.ep = 1;
    smoe_model *m = NULL;
    smoe_err err;
    double loss = NAN;
    CHECK(smoe_model_new(&cfg, &m, &err) == SMOE_OK);
    if (!m)
        return loss;
    job j;
    job_init(&j, m, W, 0, G, tok + b0 * cfg.seq, tgt + b0 * cfg.seq, scale);
    job_run(&j);
    CHECKF(j.st == SMOE_OK, "ep=1 step: %s", j.err.msg);
    loss = j.loss;
    job_free(&j);
    smoe_model_free(m);
    return loss;
}

/* skew: every token prefers experts 0 .. topk-1 (all on rank 0), through
 * the gate bias, so rank 0 receives the worst case and grows its store. */
static void test_ep(const char *name, smoe_model_cfg gcfg, float cf, int skew,
                    uint64_t seed)
{
    rng r = { seed };
    gcfg.capacity_factor = cf;
    wset W, Gref, G[MAXR];
    wset_alloc(&W, &gcfg);
    wset_alloc(&Gref, &gcfg);
    wset_random(&W, &r);
    if (skew)
        for (int l = 0; l < W.nl; l++)
            if (W.w[l][SMOE_W_GATE_BIAS])
                for (int64_t e = 0; e < gcfg.topk; e++)
                    W.w[l][SMOE_W_GATE_BIAS][e] += 10.0f;
    const int64_t T = gcfg.batch * gcfg.seq;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    random_tokens(tok, T, gcfg.vocab, &r);
    random_tokens(tgt, T, gcfg.vocab, &r);
    const float scale = 1.0f / (float)T;

    /* the oracle: dropless, the whole batch on one rank; with a capacity
     * (per sending rank) each half on its own rank */
    double lref;
    if (cf > 0.0f)
        lref = run_ep1(gcfg, gcfg.batch / 2, 0, &W, &Gref, tok, tgt, scale) +
               run_ep1(gcfg, gcfg.batch / 2, gcfg.batch / 2, &W, &Gref, tok, tgt, scale);
    else
        lref = run_ep1(gcfg, gcfg.batch, 0, &W, &Gref, tok, tgt, scale);

    smoe_model_cfg rcfg = gcfg;
    rcfg.batch = gcfg.batch / 2;
    rcfg.ep = 2;
    const int64_t Tr = rcfg.batch * rcfg.seq, tk = rcfg.n_moe * Tr * rcfg.topk;
    double loss[MAXR] = { 0, 0 };
    smoe_model_stats st[MAXR];
    int32_t *topk[MAXR] = { malloc((size_t)tk * sizeof(int32_t)),
                            malloc((size_t)tk * sizeof(int32_t)) };
    long progress = 0;
    int64_t grew[MAXR] = { 0, 0 };
    run_ep2(&rcfg, &W, G, tok, tgt, scale, loss, st, topk, &progress, grew);
    if (skew)
        CHECKF(grew[0] > 0 && grew[1] == 0, "%s: rank 0 should grow its routed "
               "store (grew %lld / %lld bytes)", name, (long long)grew[0],
               (long long)grew[1]);

    double dl = fabs(loss[0] + loss[1] - lref) / fabs(lref);
    CHECKF(dl <= EP_RTOL, "%s: loss ep=2 %.9g vs ep=1 %.9g", name, loss[0] + loss[1], lref);
    compare_ep(name, G, &Gref, gcfg.experts / 2);
    CHECKF(progress > 0, "%s: progress was never called", name);
    CHECK(st[0].a2a_seconds >= 0.0 && st[1].a2a_seconds >= 0.0);

    /* drops recomputed from the choices: per rank, expert, in token order */
    int64_t expect = 0, dropped = st[0].dropped + st[1].dropped;
    if (cf > 0.0f) {
        const int64_t C = (int64_t)ceil((double)Tr * (double)rcfg.topk /
                                        (double)rcfg.experts * (double)cf);
        for (int q = 0; q < 2; q++)
            for (int64_t l = 0; l < rcfg.n_moe; l++) {
                int64_t cnt[64] = { 0 };
                for (int64_t k = 0; k < Tr * rcfg.topk; k++)
                    if (cnt[topk[q][l * Tr * rcfg.topk + k]]++ >= C)
                        expect++;
            }
        CHECKF(expect > 0, "%s: the capacity should drop pairs", name);
    }
    CHECK_INT(dropped, expect);
    CHECK_INT(st[0].routed + st[1].routed, 2 * tk);
    printf("ep %-22s loss %.6f (ep=1 %.6f), dropped %lld of %lld pairs\n", name,
           loss[0] + loss[1], lref, (long long)dropped, (long long)(2 * tk));

    for (int q = 0; q < 2; q++) {
        free(topk[q]);
        wset_free(&G[q]);
    }
    free(tok);
    free(tgt);
    wset_free(&W);
    wset_free(&Gref);
}

int main(void)
{
    smoe_blas_init(1, NULL); /* two model threads; keep BLAS serial */

    test_ep("dropless softmax", tiny_cfg(8, 0), 0.0f, 0, 21);
    test_ep("dropless sigmoid+bias", tiny_cfg(0, 1), 0.0f, 0, 22);
    test_ep("skewed sigmoid+bias", tiny_cfg(8, 1), 0.0f, 1, 23);
    test_ep("capacity=0.5", tiny_cfg(8, 0), 0.5f, 0, 24);
    /* one local expert per rank: the regrouping is the identity (skipped) */
    smoe_model_cfg one = tiny_cfg(8, 0);
    one.experts = 2;
    one.topk = 1;
    test_ep("one expert per rank", one, 0.0f, 0, 25);
    return check_report();
}
