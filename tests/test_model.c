/* Oracles for the model module.
 *
 * 1. Finite differences: the loss of a tiny model (embed -> 1 dense + 2 MoE
 *    layers -> head, loss = mean CE) against the analytic gradient of every
 *    weight slot in use, for five variants (softmax router with q_lora,
 *    plain query, sigmoid scores with routed bias, softmax with a capacity
 *    that drops pairs, and MoE layers only without shared experts, top-1,
 *    65 tokens so the head runs in two chunks). Per tensor, the entry of largest |g| and two random
 *    entries are checked. Scheme: the central difference
 *    (L(w+h) - L(w-h)) / (w+h - (w-h)) in double of the fp32 loss, the
 *    denominator taken after rounding the perturbed weight to float, with
 *    h = 1e-2 (weights ~ 0.25): its truncation error h^2 L''' / 6 reaches
 *    ~5e-3 relative (measured), and the fp32 rounding of a loss of ~3 (~1e-7, measured)
 *    adds ~1e-5 absolute. A sample passes when
 *    |fd - g| <= FD_ATOL + FD_RTOL * max(|fd|, |g|), FD_ATOL = 3e-5,
 *    FD_RTOL = 1e-2: over 30 seeds the worst sample used half of that, and
 *    each deliberate gradient bug tried (a missing term of the sigmoid
 *    renormalisation, RoPE backward turning the wrong way, k_pe's gradient
 *    from one head only, a missing combine weight) fails hundreds of
 *    samples. A perturbation that changes a top-k choice makes the loss
 *    non-smooth: the sample is retried with h / 10 (FD_ATOL x 10), then
 *    skipped and counted; skips must stay under 20 %. The gate bias only
 *    selects: its gradient must stay zero and, without a flip, moving it
 *    must leave the loss bit-identical. FD_DEBUG=1 prints every sample.
 * 2. Expert parallelism: ep = 2 on two threads (a pthread smoe_ep_comm
 *    written here) on the two halves of a batch equals ep = 1 on the whole
 *    batch (loss, and every gradient: dense ones summed over the ranks,
 *    routed ones per expert slice), also with routing skewed onto rank 0
 *    (whose routed-row store must grow). With a capacity, ep = 2 equals two
 *    ep = 1 runs on the halves (capacity is per sending rank), and the
 *    drop count matches the one recomputed from the chosen experts.
 * 3. smoe_model_new rejects bad configurations; allocation failures clean
 *    up; the slot tables are consistent.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "smoe/kernels.h"
#include "smoe/model.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAXL = 4, MAXR = 2 };

static const double FD_H = 1e-2;
static const double FD_ATOL = 3e-5;
static const double FD_RTOL = 1e-2;
static const double EP_RTOL = 1e-5;

/* ---- deterministic random numbers (splitmix64, Box-Muller) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_u64(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unif(rng *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

static double rng_normal(rng *r)
{
    double u = rng_unif(r), v = rng_unif(r);
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static int64_t rng_below(rng *r, int64_t n) { return (int64_t)(rng_u64(r) % (uint64_t)n); }

/* ---- weight sets: every used slot of every layer, plus the top level ---- */

typedef struct wset {
    smoe_model_cfg cfg; /* shapes follow cfg (routed slots hold experts / ep) */
    int nl;
    float *w[MAXL][SMOE_W_NSLOTS]; /* per layer, NULL when unused */
    int64_t n[MAXL][SMOE_W_NSLOTS];
    float *t[SMOE_T_NSLOTS];
    int64_t tn[SMOE_T_NSLOTS];
} wset;

static int is_moe(const smoe_model_cfg *c, int l) { return l >= c->n_dense; }

static void wset_alloc(wset *s, const smoe_model_cfg *c)
{
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->nl = (int)(c->n_dense + c->n_moe);
    for (int l = 0; l < s->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            if (smoe_wslot_used(c, (smoe_wslot)i, is_moe(c, l))) {
                s->n[l][i] = smoe_wslot_numel(c, (smoe_wslot)i);
                s->w[l][i] = calloc((size_t)s->n[l][i], sizeof(float));
            }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        s->tn[i] = smoe_tslot_numel(c, (smoe_tslot)i);
        s->t[i] = calloc((size_t)s->tn[i], sizeof(float));
    }
}

static void wset_free(wset *s)
{
    for (int l = 0; l < s->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            free(s->w[l][i]);
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        free(s->t[i]);
}

static int is_norm(smoe_wslot i)
{
    return i == SMOE_W_PRE_NORM || i == SMOE_W_POST_NORM || i == SMOE_W_Q_NORM ||
           i == SMOE_W_KV_NORM;
}

static void fill(float *p, int64_t n, rng *r, double mean, double sd)
{
    for (int64_t k = 0; k < n; k++)
        p[k] = (float)(mean + sd * rng_normal(r));
}

static void wset_random(wset *s, rng *r)
{
    for (int l = 0; l < s->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            if (!s->w[l][i])
                continue;
            double mean = is_norm((smoe_wslot)i) ? 1.0 : 0.0;
            double sd = is_norm((smoe_wslot)i) ? 0.1 : i == SMOE_W_GATE ? 0.5 : 0.25;
            if (i == SMOE_W_GATE_BIAS)
                sd = 0.2;
            fill(s->w[l][i], s->n[l][i], r, mean, sd);
        }
    fill(s->t[SMOE_T_EMBED], s->tn[SMOE_T_EMBED], r, 0.0, 1.0);
    fill(s->t[SMOE_T_FINAL_NORM], s->tn[SMOE_T_FINAL_NORM], r, 1.0, 0.1);
    fill(s->t[SMOE_T_LOGITS], s->tn[SMOE_T_LOGITS], r, 0.0, 0.25);
}

/* ---- one rank's step: embed, layers, head, and the backward ---- */

typedef struct job {
    smoe_model *m;
    const float *w[MAXL][SMOE_W_NSLOTS];
    const float *t[SMOE_T_NSLOTS];
    wset *g; /* gradients (accumulated), or NULL for the loss only */
    const int32_t *tok, *tgt;
    smoe_ep_comm comm;
    float scale;
    float *x, *dx; /* (T, emb) */
    double loss;
    smoe_status st;
    smoe_err err;
} job;

static void job_view(job *j, const wset *w, int rank, int64_t el)
{
    for (int l = 0; l < w->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            const float *p = w->w[l][i];
            if (p && (i == SMOE_W_EXP_WI0 || i == SMOE_W_EXP_WI1 || i == SMOE_W_EXP_WO))
                p += rank * el * w->cfg.emb * w->cfg.moe_mlp;
            j->w[l][i] = p;
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        j->t[i] = w->t[i];
}

static void job_run(job *j)
{
    const smoe_model_cfg *c = smoe_model_config(j->m);
    const int nl = (int)(c->n_dense + c->n_moe);
    j->st = SMOE_OK;
    smoe_model_embed_fwd(j->m, j->t[SMOE_T_EMBED], j->tok, j->x);
    for (int l = 0; l < nl; l++)
        if ((j->st = smoe_model_layer_fwd(j->m, l, j->w[l], j->x, &j->comm, &j->err)))
            return;
    wset *g = j->g;
    j->loss = smoe_model_head(j->m, j->t[SMOE_T_FINAL_NORM], j->t[SMOE_T_LOGITS],
                              j->tgt, j->x, g ? j->dx : NULL,
                              g ? g->t[SMOE_T_FINAL_NORM] : NULL,
                              g ? g->t[SMOE_T_LOGITS] : NULL, j->scale);
    if (!g)
        return;
    for (int l = nl - 1; l >= 0; l--)
        if ((j->st = smoe_model_layer_bwd(j->m, l, j->w[l], g->w[l], j->dx,
                                          &j->comm, &j->err)))
            return;
    smoe_model_embed_bwd(j->m, g->t[SMOE_T_EMBED], j->tok, j->dx);
}

static void *job_thread(void *p)
{
    job_run(p);
    return NULL;
}

static void job_init(job *j, smoe_model *m, const wset *w, int rank, wset *g,
                     const int32_t *tok, const int32_t *tgt, float scale)
{
    const smoe_model_cfg *c = smoe_model_config(m);
    memset(j, 0, sizeof *j);
    j->m = m;
    job_view(j, w, rank, c->experts / c->ep);
    j->g = g;
    j->tok = tok;
    j->tgt = tgt;
    j->scale = scale;
    j->comm = smoe_ep_comm_self();
    j->x = calloc((size_t)(c->batch * c->seq * c->emb), sizeof(float));
    j->dx = calloc((size_t)(c->batch * c->seq * c->emb), sizeof(float));
}

static void job_free(job *j)
{
    free(j->x);
    free(j->dx);
}

/* ---- a thread-based expert group: shared pointers and a barrier ---- */

typedef struct tgroup {
    int size;
    pthread_barrier_t bar;
    const void *send[MAXR];
    const int64_t *rows[MAXR];
    int bad; /* a rank saw mismatched row counts */
    long progress_calls;
    pthread_mutex_t mu;
} tgroup;

typedef struct tcomm {
    tgroup *g;
    int rank;
} tcomm;

static smoe_status t_exchange(void *ctx, const int64_t *send, int64_t *recv,
                              int64_t n)
{
    tcomm *c = ctx;
    tgroup *g = c->g;
    g->send[c->rank] = send;
    pthread_barrier_wait(&g->bar);
    for (int p = 0; p < g->size; p++)
        memcpy(recv + p * n, (const int64_t *)g->send[p] + c->rank * n,
               (size_t)n * sizeof *recv);
    pthread_barrier_wait(&g->bar);
    return SMOE_OK;
}

static smoe_status t_alltoallv(void *ctx, const float *send,
                               const int64_t *send_rows, float *recv,
                               const int64_t *recv_rows, int64_t row)
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
    if (bad) {
        g->bad = 1;
        return SMOE_ECOMM;
    }
    return SMOE_OK;
}

static void t_progress(void *ctx)
{
    tcomm *c = ctx;
    pthread_mutex_lock(&c->g->mu);
    c->g->progress_calls++;
    pthread_mutex_unlock(&c->g->mu);
}

/* ---- helpers ---- */

static smoe_model_cfg tiny_cfg(int q_lora, int sigmoid)
{
    smoe_model_cfg c;
    memset(&c, 0, sizeof c);
    c.emb = 16;
    c.heads = 2;
    c.q_lora = q_lora;
    c.kv_lora = 8;
    c.qk_nope = 4;
    c.qk_rope = 4;
    c.v_head = 4;
    c.mlp = 24;
    c.moe_mlp = 8;
    c.experts = 4;
    c.topk = 2;
    c.shared = 1;
    c.vocab = 11;
    c.n_dense = 1;
    c.n_moe = 2;
    c.score_sigmoid = sigmoid;
    c.routed_bias = sigmoid;
    c.routed_scale = sigmoid ? 2.5f : 1.5f;
    c.eps = 1e-6f;
    c.rope_theta = 10000.0f;
    c.capacity_factor = 0.0f;
    c.seq = 5;
    c.batch = 2;
    c.ep = 1;
    return c;
}

static void random_tokens(int32_t *p, int64_t n, int64_t vocab, rng *r)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)rng_below(r, vocab);
}

/* Copy of the top-k choices of every MoE layer: (n_moe, T, K). */
static void save_topk(const smoe_model *m, int32_t *out)
{
    const smoe_model_cfg *c = smoe_model_config(m);
    const int64_t tk = c->batch * c->seq * c->topk;
    for (int64_t l = c->n_dense; l < c->n_dense + c->n_moe; l++)
        memcpy(out + (l - c->n_dense) * tk, smoe_model_topk(m, (int)l),
               (size_t)tk * sizeof *out);
}

static int same_topk(const smoe_model *m, const int32_t *ref)
{
    const smoe_model_cfg *c = smoe_model_config(m);
    const int64_t tk = c->batch * c->seq * c->topk;
    for (int64_t l = c->n_dense; l < c->n_dense + c->n_moe; l++)
        if (memcmp(ref + (l - c->n_dense) * tk, smoe_model_topk(m, (int)l),
                   (size_t)tk * sizeof *ref))
            return 0;
    return 1;
}

/* ---- 1. finite differences ---- */

typedef struct fd_tally {
    int checked, retried, skipped, failed;
    double worst; /* largest |fd - g| / (FD_ATOL + FD_RTOL max(|fd|, |g|)) */
} fd_tally;

/* Central difference of the loss in entry k of p with step h; sets *flip
 * when either side changes a top-k choice. */
static double central(job *j, float *p, int64_t k, double h,
                      const int32_t *topk0, int *flip, double *lp, double *lm)
{
    const float orig = p[k];
    p[k] = (float)(orig + h);
    const double wp = p[k];
    job_run(j);
    *lp = j->loss;
    *flip = !same_topk(j->m, topk0);
    p[k] = (float)(orig - h);
    const double wm = p[k];
    job_run(j);
    *lm = j->loss;
    *flip |= !same_topk(j->m, topk0);
    p[k] = orig;
    return (*lp - *lm) / (wp - wm);
}

/* Check entry k of tensor p (gradient g) by central differences: step
 * FD_H, or FD_H / 10 if that flips a top-k choice (with the rounding term
 * of the tolerance 10x larger), else skip. */
static void fd_entry(job *j, float *p, const float *g, int64_t k,
                     const int32_t *topk0, const char *what, int bias,
                     fd_tally *ty)
{
    double lp, lm, h = FD_H, atol = FD_ATOL;
    int flip;
    double fd = central(j, p, k, h, topk0, &flip, &lp, &lm);
    if (flip) {
        h /= 10.0;
        atol *= 10.0;
        ty->retried++;
        fd = central(j, p, k, h, topk0, &flip, &lp, &lm);
    }
    if (flip) {
        ty->skipped++;
        return;
    }
    const double an = g[k];
    ty->checked++;
    if (bias) { /* selection only: the loss must not move at all */
        CHECKF(lp == lm && an == 0.0, "%s[%lld]: gate bias changed the loss "
               "(fd %.3e, grad %.3e)", what, (long long)k, fd, an);
        return;
    }
    double tol = atol + FD_RTOL * fmax(fabs(fd), fabs(an));
    double r = fabs(fd - an) / tol;
    if (getenv("FD_DEBUG"))
        fprintf(stderr, "%-70s fd %+.6e an %+.6e diff %.2e h %g\n", what, fd, an,
                fabs(fd - an), h);
    if (r > ty->worst)
        ty->worst = r;
    if (r > 1.0)
        ty->failed++;
    CHECKF(r <= 1.0, "%s[%lld]: finite difference %.6e, analytic %.6e (step %g)",
           what, (long long)k, fd, an, h);
}

static void fd_tensor(job *j, float *p, const float *g, int64_t n,
                      const int32_t *topk0, const char *what, int bias,
                      rng *r, fd_tally *ty)
{
    int64_t best = 0;
    for (int64_t k = 1; k < n; k++)
        if (fabsf(g[k]) > fabsf(g[best]))
            best = k;
    int64_t ks[3] = { best, rng_below(r, n), rng_below(r, n) };
    for (int i = 0; i < 3; i++)
        fd_entry(j, p, g, ks[i], topk0, what, bias, ty);
}

static void test_fd(const char *name, smoe_model_cfg cfg, uint64_t seed)
{
    rng r = { seed };
    wset W, G;
    wset_alloc(&W, &cfg);
    wset_alloc(&G, &cfg);
    wset_random(&W, &r);
    const int64_t T = cfg.batch * cfg.seq;
    int32_t *tok = malloc((size_t)T * sizeof *tok), *tgt = malloc((size_t)T * sizeof *tgt);
    random_tokens(tok, T, cfg.vocab, &r);
    random_tokens(tgt, T, cfg.vocab, &r);
    int32_t *topk0 = malloc((size_t)(cfg.n_moe * T * cfg.topk) * sizeof *topk0);

    smoe_model *m = NULL;
    smoe_err err;
    CHECK(smoe_model_new(&cfg, &m, &err) == SMOE_OK);
    if (!m)
        goto out;
    job j;
    job_init(&j, m, &W, 0, &G, tok, tgt, 1.0f / (float)T);
    job_run(&j);
    CHECKF(j.st == SMOE_OK, "%s: step failed: %s", name, j.err.msg);
    const double loss0 = j.loss;
    CHECKF(isfinite(loss0) && loss0 > 0.0, "%s: loss %g", name, loss0);
    save_topk(m, topk0);
    smoe_model_stats st = smoe_model_stats_get(m);
    CHECK_INT(st.routed, cfg.n_moe * T * cfg.topk);
    if (cfg.capacity_factor > 0.0f)
        CHECKF(st.dropped > 0, "%s: the capacity should drop pairs", name);
    else
        CHECK_INT(st.dropped, 0);

    j.g = NULL; /* from here on: the loss only */
    fd_tally ty = { 0, 0, 0, 0, 0.0 };
    char what[160];
    for (int l = 0; l < W.nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            if (!W.w[l][i])
                continue;
            snprintf(what, sizeof what, "%s: layer %d %s", name, l,
                     smoe_wslot_path((smoe_wslot)i));
            fd_tensor(&j, W.w[l][i], G.w[l][i], W.n[l][i], topk0, what,
                      i == SMOE_W_GATE_BIAS, &r, &ty);
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        snprintf(what, sizeof what, "%s: %s", name, smoe_tslot_path((smoe_tslot)i));
        fd_tensor(&j, W.t[i], G.t[i], W.tn[i], topk0, what, 0, &r, &ty);
    }
    /* the gate bias gets no gradient */
    for (int l = 0; l < W.nl; l++)
        if (G.w[l][SMOE_W_GATE_BIAS])
            for (int64_t k = 0; k < G.n[l][SMOE_W_GATE_BIAS]; k++)
                CHECK(G.w[l][SMOE_W_GATE_BIAS][k] == 0.0f);
    /* skips (top-k flips) must be rare, or the check means little */
    CHECKF(ty.skipped * 5 <= ty.checked, "%s: %d of %d samples skipped", name,
           ty.skipped, ty.checked + ty.skipped);
    printf("fd %-22s loss %.6f: %d samples (%d with the small step), %d skipped "
           "(top-k flip), %d failed, worst error %.2f of tolerance\n",
           name, loss0, ty.checked, ty.retried, ty.skipped, ty.failed, ty.worst);
    job_free(&j);
out:
    smoe_model_free(m);
    free(topk0);
    free(tok);
    free(tgt);
    wset_free(&W);
    wset_free(&G);
}

/* ---- 2. expert parallelism ---- */

static int routed(int i)
{
    return i == SMOE_W_EXP_WI0 || i == SMOE_W_EXP_WI1 || i == SMOE_W_EXP_WO;
}

/* max |a - b| / max |b| over n elements (0 when both vanish). */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0.0, s = 0.0;
    for (int64_t k = 0; k < n; k++) {
        d = fmax(d, fabs((double)a[k] - (double)b[k]));
        s = fmax(s, fabs((double)b[k]));
    }
    return s > 0.0 ? d / s : d;
}

/* Run ep = 2 ranks on two threads, rank r on batch half r, weights W (all
 * experts), gradients into G[r] (shapes of the rank config). */
static void run_ep2(const smoe_model_cfg *rcfg, const wset *W, wset G[MAXR],
                    const int32_t *tok, const int32_t *tgt, float scale,
                    double loss[MAXR], smoe_model_stats stats[MAXR],
                    int32_t *topk[MAXR], long *progress, int64_t grew[MAXR])
{
    const int64_t Tr = rcfg->batch * rcfg->seq;
    tgroup g;
    memset(&g, 0, sizeof g);
    g.size = 2;
    pthread_barrier_init(&g.bar, NULL, 2);
    pthread_mutex_init(&g.mu, NULL);
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
        tc[r] = (tcomm){ &g, r };
        j[r].comm.size = 2;
        j[r].comm.rank = r;
        j[r].comm.ctx = &tc[r];
        j[r].comm.exchange_counts = t_exchange;
        j[r].comm.alltoallv = t_alltoallv;
        j[r].comm.progress = t_progress;
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
    pthread_barrier_destroy(&g.bar);
    pthread_mutex_destroy(&g.mu);
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

/* ---- 3. configuration checks, allocation failures, slot tables ---- */

static void expect_bad(smoe_model_cfg c, const char *needle)
{
    smoe_model *m = NULL;
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_status st = smoe_model_new(&c, &m, &err);
    CHECKF(st == SMOE_EINVAL && !m, "config should be rejected (%s)", needle);
    CHECKF(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    smoe_model_free(m);
}

static void test_config(void)
{
    smoe_model_cfg c = tiny_cfg(8, 0);
    smoe_model *m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK && m);
    if (m) {
        CHECK(smoe_model_act_bytes(m) > 0);
        CHECK(smoe_model_config(m)->emb == 16);
        CHECK(smoe_model_topk(m, 0) == NULL && smoe_model_topk(m, 1) != NULL);
        /* a layer run without its forward, or with the wrong group size */
        smoe_ep_comm self = smoe_ep_comm_self();
        const float *w[SMOE_W_NSLOTS] = { NULL };
        float *dw[SMOE_W_NSLOTS] = { NULL };
        float x[1] = { 0 };
        smoe_err err;
        CHECK(smoe_model_layer_fwd(m, 0, w, x, &self, &err) == SMOE_EINVAL);
        CHECK(strstr(err.msg, "missing") != NULL);
        CHECK(smoe_model_layer_bwd(m, 3, w, dw, x, &self, &err) == SMOE_EINVAL);
        smoe_model_free(m);
    }

    c = tiny_cfg(8, 0);
    c.ep = 3;
    expect_bad(c, "divisible");
    c = tiny_cfg(8, 0);
    c.qk_rope = 3;
    expect_bad(c, "even");
    c = tiny_cfg(8, 0);
    c.topk = 5;
    expect_bad(c, "topk");
    c = tiny_cfg(8, 0);
    c.emb = 0;
    expect_bad(c, "emb");
    c = tiny_cfg(8, 0);
    c.q_lora = -1;
    expect_bad(c, "q_lora");
    c = tiny_cfg(8, 0);
    c.rope_theta = 0.0f;
    expect_bad(c, "rope_theta");

    /* a model of ep = 2 refuses the single-rank group */
    c = tiny_cfg(8, 0);
    c.ep = 2;
    rng r = { 7 };
    wset W;
    wset_alloc(&W, &c);
    wset_random(&W, &r);
    m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK);
    if (m) {
        job j;
        int32_t tok[10] = { 0 };
        job_init(&j, m, &W, 0, NULL, tok, tok, 1.0f);
        job_run(&j);
        CHECK(j.st == SMOE_EINVAL && strstr(j.err.msg, "ep = 2") != NULL);
        job_free(&j);
        smoe_model_free(m);
    }
    wset_free(&W);

    /* a dense-only model needs no experts and no expert group */
    c = tiny_cfg(0, 0);
    c.n_moe = 0;
    c.experts = 0;
    c.topk = 0;
    c.moe_mlp = 0;
    wset_alloc(&W, &c);
    wset G;
    wset_alloc(&G, &c);
    wset_random(&W, &r);
    m = NULL;
    CHECK(smoe_model_new(&c, &m, NULL) == SMOE_OK);
    if (m) {
        job j;
        int32_t tok[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
        job_init(&j, m, &W, 0, &G, tok, tok, 0.1f);
        job_run(&j);
        CHECKF(j.st == SMOE_OK && isfinite(j.loss), "dense-only: %s", j.err.msg);
        CHECK(G.t[SMOE_T_EMBED][16] != 0.0f); /* token 1's row got a gradient */
        job_free(&j);
        smoe_model_free(m);
    }
    wset_free(&W);
    wset_free(&G);

    /* every allocation failure is reported and cleaned up */
    c = tiny_cfg(8, 0);
    int ok_at = 0;
    for (long n = 1; n < 100 && !ok_at; n++) {
        m = NULL;
        smoe_alloc_fail_after(n);
        smoe_status st = smoe_model_new(&c, &m, NULL);
        smoe_alloc_fail_after(0);
        if (st == SMOE_OK)
            ok_at = (int)n;
        else
            CHECKF(st == SMOE_ENOMEM && !m, "allocation failure %ld: status %d", n, st);
        smoe_model_free(m);
    }
    CHECK(ok_at > 1);

    /* slot tables */
    CHECK_STR(smoe_wslot_path(SMOE_W_WKV_A), "self_attention/wkv_a/kernel");
    CHECK_STR(smoe_wslot_path(SMOE_W_EXP_WO), "DeepSeekMoeBlock_0/MoeBlock_0/wo");
    CHECK_STR(smoe_wslot_path(SMOE_W_SH_WI1),
              "DeepSeekMoeBlock_0/shared_experts/wi_1/kernel");
    CHECK_STR(smoe_tslot_path(SMOE_T_LOGITS), "decoder/logits_dense/kernel");
    for (int i = 0; i < SMOE_W_NSLOTS; i++)
        CHECKF(smoe_wslot_path((smoe_wslot)i) != NULL, "slot %d has no path", i);
    c = tiny_cfg(8, 1);
    c.ep = 2;
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_EXP_WI0), 2 * 16 * 8);
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_WKV_B), 8 * 2 * 8);
    CHECK_INT(smoe_wslot_numel(&c, SMOE_W_WQ_B), 8 * 2 * 8);
    CHECK(smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 1) && !smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 0));
    CHECK(smoe_wslot_used(&c, SMOE_W_WQ_A, 0) && !smoe_wslot_used(&c, SMOE_W_QUERY, 1));
    CHECK(smoe_wslot_used(&c, SMOE_W_MLP_WO, 0) && !smoe_wslot_used(&c, SMOE_W_MLP_WO, 1));
    c.shared = 0;
    c.routed_bias = 0;
    CHECK(!smoe_wslot_used(&c, SMOE_W_SH_WI0, 1) && !smoe_wslot_used(&c, SMOE_W_GATE_BIAS, 1));
}

int main(void)
{
    smoe_blas_init(1, NULL); /* two model threads in the ep test; keep BLAS serial */

    test_config();

    smoe_model_cfg c = tiny_cfg(8, 0);
    test_fd("softmax q_lora=8", c, 11);
    c = tiny_cfg(0, 0);
    test_fd("softmax q_lora=0", c, 12);
    c = tiny_cfg(8, 1);
    test_fd("sigmoid+bias", c, 13);
    c = tiny_cfg(8, 0);
    c.capacity_factor = 0.75f;
    test_fd("softmax capacity=0.75", c, 14);

    /* MoE only, no shared experts, top-1, T = 65 (two head chunks) */
    c = tiny_cfg(0, 1);
    c.n_dense = 0;
    c.shared = 0;
    c.topk = 1;
    c.batch = 13;
    test_fd("moe-only top-1 T=65", c, 15);

    test_ep("dropless softmax", tiny_cfg(8, 0), 0.0f, 0, 21);
    test_ep("dropless sigmoid+bias", tiny_cfg(0, 1), 0.0f, 0, 22);
    test_ep("skewed sigmoid+bias", tiny_cfg(8, 1), 0.0f, 1, 23);
    test_ep("capacity=0.5", tiny_cfg(8, 0), 0.5f, 0, 24);
    return check_report();
}
