/* Shared helpers of the model tests (test_model.c, test_model_ep.c):
 * deterministic random numbers, weight sets holding every used slot, one
 * rank's step (embed, layers, head, backward) and a tiny configuration.
 * Everything is static inline so a test that does not use a helper does
 * not warn. */
#ifndef SMOE_TEST_MODEL_TESTLIB_H
#define SMOE_TEST_MODEL_TESTLIB_H

#include "smoe/kernels.h"
#include "smoe/model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAXL = 4, MAXR = 2 };

/* ---- deterministic random numbers (splitmix64, Box-Muller) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static inline uint64_t rng_u64(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double rng_unif(rng *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

static inline double rng_normal(rng *r)
{
    double u = rng_unif(r), v = rng_unif(r);
    if (u < 1e-300)
        u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static inline int64_t rng_below(rng *r, int64_t n) { return (int64_t)(rng_u64(r) % (uint64_t)n); }

/* ---- weight sets: every used slot of every layer, plus the top level ---- */

typedef struct wset {
    smoe_model_cfg cfg; /* shapes follow cfg (routed slots hold experts / ep) */
    int nl;
    float *w[MAXL][SMOE_W_NSLOTS]; /* per layer, NULL when unused */
    int64_t n[MAXL][SMOE_W_NSLOTS];
    float *t[SMOE_T_NSLOTS];
    int64_t tn[SMOE_T_NSLOTS];
} wset;

static inline int is_moe(const smoe_model_cfg *c, int l) { return l >= c->n_dense; }

static inline void wset_alloc(wset *s, const smoe_model_cfg *c)
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

static inline void wset_free(wset *s)
{
    for (int l = 0; l < s->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            free(s->w[l][i]);
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        free(s->t[i]);
}

static inline int is_norm(smoe_wslot i)
{
    return i == SMOE_W_PRE_NORM || i == SMOE_W_POST_NORM || i == SMOE_W_Q_NORM ||
           i == SMOE_W_KV_NORM;
}

static inline void fill(float *p, int64_t n, rng *r, double mean, double sd)
{
    for (int64_t k = 0; k < n; k++)
        p[k] = (float)(mean + sd * rng_normal(r));
}

static inline void wset_random(wset *s, rng *r)
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

static inline void job_view(job *j, const wset *w, int rank, int64_t el)
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

static inline void job_run(job *j)
{
    const smoe_model_cfg *c = smoe_model_config(j->m);
    const int nl = (int)(c->n_dense + c->n_moe);
    j->st = SMOE_OK;
    smoe_model_stats_reset(j->m);
    smoe_model_embed_fwd(j->m, j->t[SMOE_T_EMBED], j->tok, j->x);
    for (int l = 0; l < nl; l++)
        if ((j->st = smoe_model_layer_fwd(j->m, l, j->w[l], j->x, &j->comm, &j->err)))
            return;
    wset *g = j->g;
    j->loss = smoe_model_head(j->m, j->t[SMOE_T_FINAL_NORM], j->t[SMOE_T_LOGITS],
                              j->tgt, j->x, g ? j->dx : NULL,
                              g ? g->t[SMOE_T_FINAL_NORM] : NULL,
                              g ? g->t[SMOE_T_LOGITS] : NULL, j->scale);
    j->loss += smoe_model_stats_get(j->m).aux_loss; /* the load-balance loss */
    if (!g)
        return;
    for (int l = nl - 1; l >= 0; l--)
        if ((j->st = smoe_model_layer_bwd(j->m, l, j->w[l], g->w[l], j->dx,
                                          &j->comm, &j->err)))
            return;
    smoe_model_embed_bwd(j->m, g->t[SMOE_T_EMBED], j->tok, j->dx);
}

static inline void job_init(job *j, smoe_model *m, const wset *w, int rank,
                            wset *g, const int32_t *tok, const int32_t *tgt,
                            float scale)
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

static inline void job_free(job *j)
{
    free(j->x);
    free(j->dx);
}

/* ---- helpers ---- */

static inline smoe_model_cfg tiny_cfg(int q_lora, int sigmoid)
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

static inline void random_tokens(int32_t *p, int64_t n, int64_t vocab, rng *r)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)rng_below(r, vocab);
}

/* Copy of the top-k choices of every MoE layer: (n_moe, T, K). */
static inline void save_topk(const smoe_model *m, int32_t *out)
{
    const smoe_model_cfg *c = smoe_model_config(m);
    const int64_t tk = c->batch * c->seq * c->topk;
    for (int64_t l = c->n_dense; l < c->n_dense + c->n_moe; l++)
        memcpy(out + (l - c->n_dense) * tk, smoe_model_topk(m, (int)l),
               (size_t)tk * sizeof *out);
}

#endif
