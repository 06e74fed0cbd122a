/* The DeepSeek MoE block, forward and backward: router, top-k selection,
 * dispatch of token rows to the ranks owning their experts, the expert
 * FFNs, and the weighted combine, plus the shared experts.
 *
 * Router: scores = softmax|sigmoid(h2 @ gate) (T, E); the top-k experts of
 * each token by score (+ gate bias when routed_bias; the bias only selects
 * and gets no gradient), ties to the lower expert index; combine weights
 * w_k = scores[e_k] (divided by their sum for sigmoid) * routed_scale. The
 * gradient flows through w into the scores and the logits; the choice of
 * experts is a constant.
 *
 * Dispatch: expert e lives on peer e / E_l. The send buffer holds the
 * (token, k) rows ordered by global expert, then token, which is peer
 * order, then local expert, then token. With a capacity C, the pairs of an
 * expert beyond the first C (in token order) are dropped: they contribute
 * zero. Counts per (peer, local expert) are exchanged first, then the rows
 * (alltoallv). The owner regroups the received rows expert-major (local
 * expert, then peer), so each expert sees its rows in global token order
 * when peers hold consecutive token ranges, runs the expert FFN (one
 * smoe_matmul per weight), regroups back to peer order and returns the
 * outputs (alltoallv in reverse); the sender combines them with w. The
 * backward sends the row gradients w_k * dy along the same routes, the
 * owner accumulates its experts' dW and returns the input gradients. The
 * regrouping is the identity with one local expert or one peer, and is
 * skipped then; with one rank (ep = 1) the exchanges of rows are copies
 * and are skipped too: the dispatched rows are written straight into the
 * store, the expert outputs into yret and the row gradients into the
 * owner's buffer. With ring of experts (m->ring) the routed part runs in
 * moe_ring.c instead: the same rows reach the same experts in the same
 * order, exchanged as an all-gather and a reduce-scatter.
 *
 * Errors: every rank of the group must make the same sequence of calls. A
 * failure after the count exchange (the owner store cannot grow, a comm
 * call fails) returns its status with peers possibly still inside a
 * collective; the runtime is expected to abort the job on it (its abort
 * hook is MPI_Abort), as for any error inside a step.
 */
#include "model_impl.h"

#include <string.h>

/* rows[p] = sum over the local experts of cnt (ep, el). */
static int64_t rows_per_peer(int64_t *rows, const int64_t *cnt, int64_t ep,
                             int64_t el)
{
    int64_t total = 0;
    for (int64_t p = 0; p < ep; p++) {
        rows[p] = 0;
        for (int64_t j = 0; j < el; j++)
            rows[p] += cnt[p * el + j];
        total += rows[p];
    }
    return total;
}

/* Move rows grouped by (peer, local expert), counts cnt (ep, el), between
 * peer-major order (as exchanged) and expert-major order (as computed):
 * to_expert = 1 reads peer-major src and writes expert-major dst, 0 the
 * reverse. tmp (ep * el) is scratch. */
static void regroup(float *dst, const float *src, const int64_t *cnt,
                    int64_t ep, int64_t el, int64_t d, int64_t *tmp,
                    int to_expert)
{
    int64_t r = 0;
    for (int64_t j = 0; j < el; j++)
        for (int64_t p = 0; p < ep; p++) {
            tmp[p * el + j] = r;
            r += cnt[p * el + j];
        }
    r = 0;
    for (int64_t p = 0; p < ep; p++)
        for (int64_t j = 0; j < el; j++) {
            const int64_t n = cnt[p * el + j], e = tmp[p * el + j];
            if (n == 0)
                continue;
            if (to_expert)
                memcpy(dst + e * d, src + r * d, (size_t)(n * d) * sizeof *dst);
            else
                memcpy(dst + r * d, src + e * d, (size_t)(n * d) * sizeof *dst);
            r += n;
        }
}

smoe_status moe_exchange(smoe_model *m, smoe_ep_comm *c, const float *send,
                         const int64_t *out, float *recv, const int64_t *in, int64_t row,
                         const char *what, smoe_err *err)
{
    double t0 = smoe_now();
    smoe_status st = c->alltoallv(c->ctx, send, out, recv, in, row);
    m->stats.a2a_seconds += smoe_now() - t0;
    if (st)
        return smoe_err_set(err, st, "model: expert exchange (%s) failed: %s", what,
                            smoe_status_name(st));
    return SMOE_OK;
}

/* The expert all-to-all of rows of emb floats: sender -> owner (back = 0,
 * srows out, rrows in) or owner -> sender (back = 1). */
static smoe_status a2a(smoe_model *m, smoe_ep_comm *c, int back, const float *send,
                       float *recv, const char *what, smoe_err *err)
{
    const int64_t *out = back ? m->s.rrows : m->s.srows, *in = back ? m->s.srows : m->s.rrows;
    return moe_exchange(m, c, send, out, recv, in, m->cfg.emb, what, err);
}

/* The rows local expert j received from every peer (recv_cnt is peer-major,
 * el experts a peer). */
static int64_t expert_rows(const moe_act *a, int64_t ep, int64_t el, int64_t j)
{
    int64_t n = 0;
    for (int64_t p = 0; p < ep; p++)
        n += a->recv_cnt[p * el + j];
    return n;
}

void moe_experts_fwd(smoe_model *m, moe_act *a, const float *const w[SMOE_W_NSLOTS],
                     float *out, smoe_ep_comm *comm)
{
    const int64_t D = m->cfg.emb, ep = m->cfg.ep, el = m->el, Mm = m->cfg.moe_mlp;
    const float *wi0 = w[SMOE_W_EXP_WI0], *wi1 = w[SMOE_W_EXP_WI1];
    const float *wo = w[SMOE_W_EXP_WO];
    for (int64_t j = 0, row = 0; j < el; j++) {
        int64_t n = expert_rows(a, ep, el, j);
        mlp_act ra = { a->r.a + row * Mm, a->r.b + row * Mm };
        mlp_fwd(m, out + row * D, 0.0f, ra, m->own.g + row * Mm, a->xr + row * D,
                wi0 + j * D * Mm, wi1 + j * D * Mm, wo + j * Mm * D, n, D, Mm, comm);
        row += n;
    }
}

void moe_experts_bwd(smoe_model *m, moe_act *a, const float *const w[SMOE_W_NSLOTS],
                     float *const dw[SMOE_W_NSLOTS], const float *dy, float *dxr,
                     smoe_ep_comm *comm)
{
    const int64_t D = m->cfg.emb, ep = m->cfg.ep, el = m->el, Mm = m->cfg.moe_mlp;
    own_scratch *o = &m->own;
    m->ops->fill0(m->stream, dxr, (size_t)(a->n_recv * D) * sizeof *dxr);
    const float *wi0 = w[SMOE_W_EXP_WI0], *wi1 = w[SMOE_W_EXP_WI1];
    const float *wo = w[SMOE_W_EXP_WO];
    for (int64_t j = 0, row = 0; j < el; j++) {
        int64_t n = expert_rows(a, ep, el, j);
        mlp_act ra = { a->r.a + row * Mm, a->r.b + row * Mm };
        mlp_bwd(m, dxr + row * D, dw[SMOE_W_EXP_WI0] + j * D * Mm,
                dw[SMOE_W_EXP_WI1] + j * D * Mm, dw[SMOE_W_EXP_WO] + j * Mm * D,
                dy + row * D, ra, a->xr + row * D, wi0 + j * D * Mm, wi1 + j * D * Mm,
                wo + j * Mm * D, n, D, Mm, o->g + row * Mm, o->dg + row * Mm,
                o->da + row * Mm, o->db + row * Mm, comm);
        row += n;
    }
}

static int picked(const int32_t *idx, int64_t k, int64_t e)
{
    for (int64_t j = 0; j < k; j++)
        if (idx[j] == e)
            return 1;
    return 0;
}

/* Top-k and combine weights of every token from the saved scores s (T, E).
 * MaxText moe.py: GateLogit.__call__ (g = score_func(logits) + bias; the
 * pre-bias scores kept for deepseek3/deepseek4 model names), get_topk /
 * deepseek_routing (top-k of g, ties to the lower index as lax.top_k;
 * weights from the pre-bias scores when kept, else from g),
 * deepseek_scale_weights (sigmoid: w /= sum(w) + 1e-20; w *= routed_scale). */
static void route(smoe_model *m, moe_act *a, const float *bias)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t E = g->experts, K = g->topk;
    for (int64_t t = 0; t < m->T; t++) {
        const float *sc = a->hscores + t * E;
        int32_t *idx = a->topk + t * K;
        for (int64_t k = 0; k < K; k++) {
            int64_t best = -1;
            float bv = 0.0f;
            for (int64_t e = 0; e < E; e++) {
                float v = bias ? sc[e] + bias[e] : sc[e];
                if ((best < 0 || v > bv) && !picked(idx, k, e)) {
                    best = e;
                    bv = v;
                }
            }
            idx[k] = (int32_t)best;
        }
        const int with_bias = bias && g->bias_in_weights;
        float *wk = a->wts + t * K;
        float sum = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            wk[k] = with_bias ? sc[idx[k]] + bias[idx[k]] : sc[idx[k]];
            sum += wk[k];
        }
        if (g->score_sigmoid) {
            const float z = sum + 1e-20f;
            for (int64_t k = 0; k < K; k++)
                wk[k] /= z;
        }
        for (int64_t k = 0; k < K; k++)
            wk[k] *= g->routed_scale;
    }
}

/* The load-balance loss of this layer over the local sequences (moe.py
 * load_balance_loss): prob = softmax(g) saved in a->lbp (T, E); density of
 * (sequence b, expert e) = (1/S) #{t in b: e in top-k(t)}; the layer's
 * loss = lb_weight * E^2 * mean over (global batch, E) of density * prob,
 * i.e. lb_weight * E / B * sum_{b, e} density * mean_t prob; the model's
 * share of the mean over MoE layers (train.py loss_fn) is 1 / n_moe of it.
 * Returns that share; dens (E) is scratch. */
static double lb_loss(smoe_model *m, const moe_act *a, const float *bias, double *dens)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t E = g->experts, K = g->topk, S = g->seq;
    float *p = a->lbp;
    for (int64_t i = 0; i < m->T * E; i++)
        p[i] = a->hscores[i] + (bias ? bias[i % E] : 0.0f);
    m->hops->softmax_rows(m->stream, p, m->T, E);
    const double B = (double)(g->lb_batch ? g->lb_batch : g->batch);
    const double c = (double)g->lb_weight * (double)E / (B * (double)g->n_moe);
    double total = 0.0;
    for (int64_t b = 0; b < g->batch; b++) {
        for (int64_t e = 0; e < E; e++)
            dens[e] = 0.0;
        double prob_dot = 0.0;
        for (int64_t t = b * S; t < (b + 1) * S; t++)
            for (int64_t k = 0; k < K; k++)
                dens[a->topk[t * K + k]] += 1.0 / (double)S;
        for (int64_t t = b * S; t < (b + 1) * S; t++)
            for (int64_t e = 0; e < E; e++)
                prob_dot += dens[e] * (double)p[t * E + e];
        total += prob_dot / (double)S;
    }
    return c * total;
}

static smoe_status check_comm(const smoe_model *m, const smoe_ep_comm *c,
                              smoe_err *err)
{
    if (!c || !c->exchange_counts || !c->alltoallv)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: a MoE layer needs an expert communicator");
    if (c->size != m->cfg.ep || c->rank < 0 || c->rank >= c->size)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: expert group of size %d (rank %d) does not "
                            "match ep = %lld",
                            c->size, c->rank, (long long)m->cfg.ep);
    return SMOE_OK;
}

/* The forward's dispatch: each (token, k) pair's row of h2 in send order
 * (by expert, then token; the pairs over capacity drop), the counts to
 * the owners, then the rows into the owner's store a->xr, expert-major (on
 * one rank straight into the store: the exchange and the regrouping are
 * identities). Sets a->pos, the counts, n_send and n_recv. */
static smoe_status dispatch(smoe_model *m, layer_act *la, smoe_ep_comm *comm, smoe_err *err)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb, E = g->experts, K = g->topk;
    const int64_t ep = g->ep, el = m->el;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    own_scratch *o = &m->own;
    smoe_status st;
    int64_t *cnt = a->send_cnt, dropped = 0;
    memset(cnt, 0, (size_t)E * sizeof *cnt);
    for (int64_t i = 0; i < T * K; i++) {
        int32_t e = a->topk[i];
        if (m->capacity > 0 && cnt[e] >= m->capacity) {
            a->pos[i] = -1;
            dropped++;
        } else {
            a->pos[i] = cnt[e]++;
        }
    }
    m->stats.routed += T * K;
    m->stats.dropped += dropped;

    double t0 = smoe_now();
    st = comm->exchange_counts(comm->ctx, cnt, a->recv_cnt, el);
    m->stats.a2a_seconds += smoe_now() - t0;
    if (st)
        return smoe_err_set(err, st, "model: expert count exchange failed: %s",
                            smoe_status_name(st));
    a->n_send = rows_per_peer(s->srows, cnt, ep, el);
    a->n_recv = rows_per_peer(s->rrows, a->recv_cnt, ep, el);
    for (int64_t i = 0; i < ep * el; i++)
        if (a->recv_cnt[i] < 0)
            return smoe_err_set(err, SMOE_ECOMM, "model: negative expert row count received");
    if ((st = model_reserve_routed(m, a, a->n_recv, err)))
        return st;
    const int self = ep == 1, ident = ep == 1 || el == 1;
    for (int64_t e = 0, r = 0; e < E; e++) {
        s->eoff[e] = r;
        r += cnt[e];
    }
    float *send = self ? a->xr : s->send;
    for (int64_t i = 0; i < T * K; i++)
        if (a->pos[i] >= 0)
            a->pos[i] += s->eoff[a->topk[i]];
    mirror_out(m, a->pos_d, a->pos, (size_t)(T * K) * sizeof *a->pos);
    m->ops->moe_dispatch_rows(m->stream, send, la->h2, a->pos_d, T, K, D);
    if (!self) {
        if ((st = a2a(m, comm, 0, send, ident ? a->xr : o->ra, "dispatch", err)))
            return st;
        if (!ident)
            regroup(a->xr, o->ra, a->recv_cnt, ep, el, D, s->eoff, 1);
    }
    return SMOE_OK;
}

smoe_status moe_fwd(smoe_model *m, layer_act *la,
                    const float *const w[SMOE_W_NSLOTS], float *x,
                    smoe_ep_comm *comm, smoe_err *err)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb, E = g->experts, K = g->topk;
    const int64_t ep = g->ep, el = m->el;
    const int64_t sw = g->shared * g->moe_mlp;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    own_scratch *o = &m->own;
    smoe_status st;
    if ((st = check_comm(m, comm, err)))
        return st;

    /* router */
    m->ops->matmul(m->stream, a->scores, la->h2, w[SMOE_W_GATE], T, D, E, 0.0f);
    model_progress(comm);
    if (g->score_sigmoid)
        m->ops->sigmoid(m->stream, a->scores, a->scores, T * E);
    else if (!g->score_raw)
        m->ops->softmax_rows(m->stream, a->scores, T, E);
    mirror_in(m, a->hscores, a->scores, (size_t)(T * E) * sizeof *a->scores);
    const float *bias = g->routed_bias ? host_view(m, s->hbias, w[SMOE_W_GATE_BIAS], E) : NULL;
    route(m, a, bias);
    if (g->lb_weight > 0.0f)
        m->stats.aux_loss += lb_loss(m, a, bias, s->lbd);

    /* shared experts: x += SwiGLU(h2) */
    if (sw)
        mlp_fwd(m, x, 1.0f, a->sh, s->g, la->h2, w[SMOE_W_SH_WI0],
                w[SMOE_W_SH_WI1], w[SMOE_W_SH_WO], T, D, sw, comm);

    if (m->ring)
        return moe_ring_fwd(m, la, w, x, comm, err);
    if ((st = dispatch(m, la, comm, err)))
        return st;
    const int self = ep == 1, ident = ep == 1 || el == 1;

    /* the local experts, on their rows */
    float *out = self ? a->yret : o->rb;
    moe_experts_fwd(m, a, w, out, comm);
    if (!self) {
        if (!ident)
            regroup(o->ra, o->rb, a->recv_cnt, ep, el, D, s->eoff, 0);
        if ((st = a2a(m, comm, 1, ident ? o->rb : o->ra, a->yret, "combine", err)))
            return st;
    }

    /* x += sum_k w_k * expert_k(h2) */
    mirror_out(m, a->wts_d, a->wts, (size_t)(T * K) * sizeof *a->wts);
    m->ops->moe_combine_rows(m->stream, x, a->yret, a->pos_d, a->wts_d, T, K, D);
    return SMOE_OK;
}

/* dsc (T, E) = grad of the router logits, and dbias (E) += grad of the
 * gate bias (when not NULL), from dwk (T, K), the grads of the combine
 * weights, and the load-balance loss. g = s + bias: the weights take dwk
 * into g (bias_in_weights) or s, the load-balance loss d(loss)/d(prob)
 * through softmax(g) into g; ds = dg (+ the weights' part), dbias =
 * sum_t dg, dlogits = score'(ds). */
static void router_bwd(smoe_model *m, const moe_act *a, const float *bias, float *dbias)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, E = g->experts, K = g->topk, S = g->seq;
    const float rs = g->routed_scale;
    float *dsc = m->s.dsc;
    memset(dsc, 0, (size_t)(T * E) * sizeof *dsc);
    const int with_bias = bias && g->bias_in_weights;
    for (int64_t t = 0; t < T; t++) {
        const float *sc = a->hscores + t * E;
        const int32_t *idx = a->topk + t * K;
        const float *dwk = m->s.dwk + t * K;
        float *d = dsc + t * E;
        if (!g->score_sigmoid) { /* w_k = rs * v_k */
            for (int64_t k = 0; k < K; k++)
                d[idx[k]] += rs * dwk[k];
            continue;
        }
        /* w_k = rs * v_k / (Z + 1e-20), Z = sum_j v_j:
         * dL/dv_j = rs (dw_j / Z' - sum_k dw_k v_k / Z'^2) */
        double z = 0.0, sdot = 0.0;
        for (int64_t k = 0; k < K; k++) {
            double v = (double)sc[idx[k]] + (with_bias ? (double)bias[idx[k]] : 0.0);
            z += v;
            sdot += (double)dwk[k] * v;
        }
        z += 1e-20;
        for (int64_t k = 0; k < K; k++)
            d[idx[k]] += (float)((double)rs * ((double)dwk[k] / z - sdot / (z * z)));
    }
    /* the gate values' gradient dg: the weights' part when they use g, plus
     * the load-balance part; the bias gets sum_t dg */
    float *dg = with_bias ? dsc : NULL;
    if (g->lb_weight > 0.0f) {
        const double B = (double)(g->lb_batch ? g->lb_batch : g->batch);
        const double c = (double)g->lb_weight * (double)E / (B * (double)g->n_moe);
        double *dens = m->s.lbd;
        float *row = m->s.lbr;
        for (int64_t b = 0; b < g->batch; b++) {
            for (int64_t e = 0; e < E; e++)
                dens[e] = 0.0;
            for (int64_t t = b * S; t < (b + 1) * S; t++)
                for (int64_t k = 0; k < K; k++)
                    dens[a->topk[t * K + k]] += 1.0 / (double)S;
            for (int64_t t = b * S; t < (b + 1) * S; t++) {
                /* d(loss)/d(prob[t, e]) = c * dens[e] / S, through softmax */
                const float *p = a->lbp + t * E;
                double dot = 0.0;
                for (int64_t e = 0; e < E; e++) {
                    row[e] = (float)(c * dens[e] / (double)S);
                    dot += (double)row[e] * (double)p[e];
                }
                float *d = dsc + t * E;
                for (int64_t e = 0; e < E; e++) {
                    float v = (float)((double)p[e] * ((double)row[e] - dot));
                    d[e] += v;
                    if (bias && dbias && !with_bias)
                        dbias[e] += v;
                }
            }
        }
    }
    if (dg && dbias)
        for (int64_t t = 0; t < T; t++)
            m->hops->vec_add(m->stream, dbias, dg + t * E, E);
    if (g->score_sigmoid) {
        for (int64_t i = 0; i < T * E; i++)
            dsc[i] *= a->hscores[i] * (1.0f - a->hscores[i]);
    } else if (!g->score_raw) {
        m->hops->softmax_rows_bwd(m->stream, dsc, dsc, a->hscores, T, E);
    }
}

/* The routed part of moe_bwd over the all-to-all: the combine weights'
 * gradients dw_k = dy . expert_k(h2) into s->dwk, the row gradients
 * w_k * dy to the owners (on one rank straight into the owner's buffer, as
 * in the forward), the experts' backward there, and their input gradients
 * back into dh2. */
static smoe_status routed_bwd(smoe_model *m, layer_act *la, const float *const w[SMOE_W_NSLOTS],
                              float *const dw[SMOE_W_NSLOTS], const float *dy, float *dh2,
                              smoe_ep_comm *comm, smoe_err *err)
{
    const int64_t T = m->T, D = m->cfg.emb, K = m->cfg.topk, ep = m->cfg.ep, el = m->el;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    own_scratch *o = &m->own;
    smoe_status st;
    const int self = ep == 1, ident = ep == 1 || el == 1;
    float *send = self ? o->rb : s->send;
    m->ops->moe_combine_bwd(m->stream, send, s->dwk_d, dy, a->yret, a->pos_d, a->wts_d, T, K, D);
    mirror_in(m, s->dwk, s->dwk_d, (size_t)(T * K) * sizeof *s->dwk);
    rows_per_peer(s->srows, a->send_cnt, ep, el);
    rows_per_peer(s->rrows, a->recv_cnt, ep, el);
    if (!self) {
        if ((st = a2a(m, comm, 0, send, ident ? o->rb : o->ra, "gradient dispatch", err)))
            return st;
        if (!ident)
            regroup(o->rb, o->ra, a->recv_cnt, ep, el, D, s->eoff, 1);
    }

    /* the local experts: dW and the input gradients of their rows */
    moe_experts_bwd(m, a, w, dw, o->rb, o->rc, comm);
    const float *dxk = o->rc;
    if (!self) {
        if (!ident)
            regroup(o->ra, o->rc, a->recv_cnt, ep, el, D, s->eoff, 0);
        if ((st = a2a(m, comm, 1, ident ? o->rc : o->ra, s->dxk, "gradient combine", err)))
            return st;
        dxk = s->dxk;
    }
    m->ops->moe_dispatch_bwd(m->stream, dh2, dxk, a->pos_d, T, K, D);
    return SMOE_OK;
}

smoe_status moe_bwd(smoe_model *m, layer_act *la,
                    const float *const w[SMOE_W_NSLOTS],
                    float *const dw[SMOE_W_NSLOTS], const float *dy,
                    float *dh2, smoe_ep_comm *comm, smoe_err *err)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb, E = g->experts;
    const int64_t sw = g->shared * g->moe_mlp;
    moe_act *a = &la->moe;
    model_scratch *s = &m->s;
    smoe_status st;
    if ((st = check_comm(m, comm, err)))
        return st;

    if (sw)
        mlp_bwd(m, dh2, dw[SMOE_W_SH_WI0], dw[SMOE_W_SH_WI1], dw[SMOE_W_SH_WO], dy,
                a->sh, la->h2, w[SMOE_W_SH_WI0], w[SMOE_W_SH_WI1],
                w[SMOE_W_SH_WO], T, D, sw, s->g, s->dg, s->da, s->db, comm);
    st = m->ring ? moe_ring_bwd(m, la, w, dw, dy, dh2, comm, err)
                 : routed_bwd(m, la, w, dw, dy, dh2, comm, err);
    if (st)
        return st;

    /* router (on the host): logits = h2 @ gate; the bias's gradient is
     * read, accumulated and written back */
    const float *bias = g->routed_bias ? host_view(m, s->hbias, w[SMOE_W_GATE_BIAS], E) : NULL;
    float *dbias = g->routed_bias ? host_view(m, s->hdbias, dw[SMOE_W_GATE_BIAS], E) : NULL;
    router_bwd(m, a, bias, dbias);
    if (dbias)
        mirror_out(m, dw[SMOE_W_GATE_BIAS], dbias, (size_t)E * sizeof *dbias);
    mirror_out(m, s->dsc_d, s->dsc, (size_t)(T * E) * sizeof *s->dsc);
    m->ops->matmul_bwd(m->stream, dh2, dw[SMOE_W_GATE], s->dsc_d, la->h2, w[SMOE_W_GATE], T, D,
                       E);
    model_progress(comm);
    return SMOE_OK;
}
