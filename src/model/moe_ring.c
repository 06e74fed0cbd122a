/* Ring of experts: the routed part of the MoE block when every rank of the
 * expert group gets every token of the group instead of the tokens routed
 * to it (MaxText moe.py, RoutedMoE.sparse_matmul, the use_ring_of_experts
 * branch of its shard_map wrapper: all_gather of the inputs and of the
 * router's logits over the expert axis; permute with roll_to_expert_id,
 * which puts this shard's experts first, and the rows of the other experts
 * masked; the grouped matmuls; unpermute, where the combine weights
 * multiply and a token's k outputs are summed; psum_scatter of the outputs
 * over the expert axis).
 *
 * The router runs where its tokens live (moe.c route) and what is gathered
 * is its result beside the input: each gathered row is [h2 (D) | the top-k
 * experts (K, as floats: exact below 2^24) | their weights (K)]. The
 * routing is a function of each token alone, so this is the routing
 * MaxText computes on every shard from the gathered logits, with 2K floats
 * per token instead of E, and the router's gradient stays with its tokens.
 *
 * Forward: the all-gather (an alltoallv sending the same T rows to every
 * peer) brings the G = ep * T tokens of the group, peer by peer. The pairs
 * (token, k) of the local experts, the capacity applied per sending rank
 * in token order as the all-to-all applies it, are copied into the store
 * expert-major (local expert, then peer, then token): the all-to-all's
 * rows in its order. The experts run on them; partial[g] = the sum over
 * the local pairs of token g of w_k * y_k (k ascending, from zero); the
 * reduce-scatter (an alltoallv of each peer's T partial rows) returns each
 * token's partials, and x += those of the peers that hold its experts,
 * each once, in the order of its experts (k ascending; the other peers'
 * are zero).
 * Backward, the transpose: the all-gather of dy; the local pairs' row
 * gradients w_k * dy and the weights' gradients dw_k = dy . y_k; the
 * experts' backward; rows [sum of the pairs' input gradients (D) | dw (K)]
 * reduce-scattered: dh2 += the partials in the forward's order, and dw_k
 * is the owner of e_k's (the other peers' are zero).
 *
 * The order of the sums is fixed by the routing, so the result does not
 * depend on when the exchanges complete. Each expert sees the all-to-all's
 * rows in its order, and a token whose experts live on distinct ranks gets
 * the all-to-all's sums bit for bit (always so with one expert per rank);
 * where two of its experts share a rank their outputs are summed there
 * first, a difference of rounding.
 */
#include "model_impl.h"

#include <string.h>

/* T rows to and from every peer. */
static void even_rows(smoe_model *m)
{
    for (int64_t p = 0; p < m->cfg.ep; p++)
        m->s.srows[p] = m->s.rrows[p] = m->T;
}

/* The all-gather of the T rows of `row` floats at the start of s->gsend:
 * peer p's arrive at s->grecv + p * T * row. */
static smoe_status all_gather(smoe_model *m, smoe_ep_comm *c, int64_t row, const char *what,
                              smoe_err *err)
{
    const int64_t n = m->T * row;
    for (int64_t p = 1; p < m->cfg.ep; p++)
        memcpy(m->s.gsend + p * n, m->s.gsend, (size_t)n * sizeof(float));
    even_rows(m);
    return moe_exchange(m, c, m->s.gsend, m->s.srows, m->s.grecv, m->s.rrows, row, what, err);
}

/* The reduce-scatter's exchange: peer p's T rows of `row` floats in
 * s->gsend (the gathered order) go to p; the ep partials of this rank's
 * tokens arrive at s->grecv, peer by peer. */
static smoe_status reduce_scatter(smoe_model *m, smoe_ep_comm *c, int64_t row, const char *what,
                                  smoe_err *err)
{
    even_rows(m);
    return moe_exchange(m, c, m->s.gsend, m->s.srows, m->s.grecv, m->s.rrows, row, what, err);
}

/* The peer that owns expert k of token t (of this rank) when no earlier
 * expert of the token lives there, else -1: each peer once, in the order
 * of the token's experts. */
static int64_t first_owner(const smoe_model *m, const moe_act *a, int64_t t, int64_t k)
{
    const int64_t K = m->cfg.topk, q = a->topk[t * K + k] / m->el;
    for (int64_t j = 0; j < k; j++)
        if (a->topk[t * K + j] / m->el == q)
            return -1;
    return q;
}

/* This rank's routed and dropped pairs for the stats, counted as the
 * all-to-all's sender counts them (per expert, in token order). */
static void count_own(smoe_model *m, moe_act *a)
{
    const int64_t TK = m->T * m->cfg.topk;
    int64_t *cnt = a->send_cnt, dropped = 0;
    memset(cnt, 0, (size_t)m->cfg.experts * sizeof *cnt);
    if (m->capacity > 0)
        for (int64_t i = 0; i < TK; i++)
            if (cnt[a->topk[i]]++ >= m->capacity)
                dropped++;
    m->stats.routed += TK;
    m->stats.dropped += dropped;
}

/* The local expert (0..el-1, or -1 for another rank's) of gathered pair i;
 * -2 when the received index is not an expert. */
static int64_t local_expert(const smoe_model *m, int64_t i, int64_t e0)
{
    const int64_t D = m->cfg.emb, K = m->cfg.topk, W = D + 2 * K;
    const float v = m->s.grecv[(i / K) * W + D + i % K];
    if (!(v >= 0.0f && v < (float)m->cfg.experts) || (float)(int64_t)v != v)
        return -2;
    const int64_t j = (int64_t)v - e0;
    return j >= 0 && j < m->el ? j : -1;
}

/* The local experts' pairs among the gathered rows (s->grecv): a->rpos,
 * a->rwts, a->recv_cnt (peer, local expert) and a->n_recv. */
static smoe_status ring_route(smoe_model *m, moe_act *a, int rank, smoe_err *err)
{
    const int64_t T = m->T, D = m->cfg.emb, K = m->cfg.topk, ep = m->cfg.ep, el = m->el;
    const int64_t GK = ep * T * K, W = D + 2 * K, e0 = rank * el;
    int64_t *cnt = a->recv_cnt, *off = m->s.eoff;
    memset(cnt, 0, (size_t)(ep * el) * sizeof *cnt);
    for (int64_t i = 0; i < GK; i++) {
        const int64_t j = local_expert(m, i, e0), p = i / K / T;
        if (j == -2)
            return smoe_err_set(err, SMOE_ECOMM,
                                "model: ring of experts: a gathered expert index is not one");
        a->rpos[i] = -1;
        a->rwts[i] = m->s.grecv[(i / K) * W + D + K + i % K];
        if (j < 0 || (m->capacity > 0 && cnt[p * el + j] >= m->capacity))
            continue;
        a->rpos[i] = cnt[p * el + j]++;
    }
    int64_t r = 0;
    for (int64_t j = 0; j < el; j++)
        for (int64_t p = 0; p < ep; p++) {
            off[p * el + j] = r;
            r += cnt[p * el + j];
        }
    a->n_recv = r;
    a->n_send = 0;
    for (int64_t i = 0; i < GK; i++)
        if (a->rpos[i] >= 0)
            a->rpos[i] += off[i / K / T * el + local_expert(m, i, e0)];
    return SMOE_OK;
}

smoe_status moe_ring_fwd(smoe_model *m, layer_act *la, const float *const w[SMOE_W_NSLOTS],
                         float *x, smoe_ep_comm *comm, smoe_err *err)
{
    const int64_t T = m->T, D = m->cfg.emb, K = m->cfg.topk, ep = m->cfg.ep;
    const int64_t G = ep * T, W = D + 2 * K;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    smoe_status st;
    count_own(m, a);

    /* the all-gather of [h2 | experts | weights] */
    for (int64_t t = 0; t < T; t++) {
        float *row = s->gsend + t * W;
        memcpy(row, la->h2 + t * D, (size_t)D * sizeof *row);
        for (int64_t k = 0; k < K; k++) {
            row[D + k] = (float)a->topk[t * K + k];
            row[D + K + k] = a->wts[t * K + k];
        }
    }
    if ((st = all_gather(m, comm, W, "ring all-gather", err)) ||
        (st = ring_route(m, a, comm->rank, err)) ||
        (st = model_reserve_routed(m, a, a->n_recv, err)))
        return st;
    for (int64_t i = 0; i < G * K; i++)
        if (a->rpos[i] >= 0)
            memcpy(a->xr + a->rpos[i] * D, s->grecv + (i / K) * W, (size_t)D * sizeof *a->xr);

    /* the local experts, then each token's weighted sum over its local pairs */
    moe_experts_fwd(m, a, w, a->yr, comm);
    memset(s->gsend, 0, (size_t)(G * D) * sizeof *s->gsend);
    for (int64_t i = 0; i < G * K; i++)
        if (a->rpos[i] >= 0)
            m->ops->vec_axpy(m->stream, s->gsend + (i / K) * D, a->rwts[i],
                             a->yr + a->rpos[i] * D, D);

    /* the reduce-scatter: x += the partials of this rank's tokens, from the
     * peers holding its experts (the others' are zero) */
    if ((st = reduce_scatter(m, comm, D, "ring reduce-scatter", err)))
        return st;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t q = first_owner(m, a, t, k);
            if (q >= 0)
                m->ops->vec_add(m->stream, x + t * D, s->grecv + (q * T + t) * D, D);
        }
    return SMOE_OK;
}

smoe_status moe_ring_bwd(smoe_model *m, layer_act *la, const float *const w[SMOE_W_NSLOTS],
                         float *const dw[SMOE_W_NSLOTS], const float *dy, float *dh2,
                         smoe_ep_comm *comm, smoe_err *err)
{
    const int64_t T = m->T, D = m->cfg.emb, K = m->cfg.topk, ep = m->cfg.ep;
    const int64_t G = ep * T, V = D + K;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    own_scratch *o = &m->own;
    smoe_status st;

    /* the all-gather of dy; the local pairs' row gradients w_k * dy, and
     * dw_k = dy . y_k straight into the rows to reduce-scatter */
    memcpy(s->gsend, dy, (size_t)(T * D) * sizeof *s->gsend);
    if ((st = all_gather(m, comm, D, "ring gradient all-gather", err)))
        return st;
    float *part = s->gsend; /* (G, D + K): [sum of the pairs' dx | dw] */
    memset(part, 0, (size_t)(G * V) * sizeof *part);
    for (int64_t i = 0; i < G * K; i++) {
        const int64_t r = a->rpos[i], g = i / K;
        if (r >= 0)
            m->ops->vec_dot_scale(m->stream, o->rb + r * D, a->rwts[i], s->grecv + g * D,
                                  a->yr + r * D, D, part + g * V + D + i % K);
    }

    /* the local experts' backward, their input gradients summed per token */
    moe_experts_bwd(m, a, w, dw, o->rb, o->rc, comm);
    for (int64_t i = 0; i < G * K; i++)
        if (a->rpos[i] >= 0)
            m->ops->vec_add(m->stream, part + (i / K) * V, o->rc + a->rpos[i] * D, D);

    /* the reduce-scatter: dh2 and the weights' gradients of this rank's
     * tokens, as in the forward; dw_k from the owner of e_k alone */
    if ((st = reduce_scatter(m, comm, V, "ring gradient reduce-scatter", err)))
        return st;
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t q = first_owner(m, a, t, k), e = a->topk[t * K + k];
            s->dwk[t * K + k] = s->grecv[((e / m->el) * T + t) * V + D + k];
            if (q >= 0)
                m->ops->vec_add(m->stream, dh2 + t * D, s->grecv + (q * T + t) * V, D);
        }
    return SMOE_OK;
}
