/* The model object: configuration checks, the activation slab and the
 * routed-row stores, statistics. smoe_model_new computes every buffer's
 * size up front from the config and carves them all from one slab (saved
 * activations of every layer, then the transient scratch shared by the
 * layers), so a training step does no allocation. The only exception is the
 * MoE owner side, whose row count depends on the routing: those rows live
 * in per-layer stores and one owner scratch, allocated at creation for the
 * balanced load (exactly for ep == 1) and grown geometrically, never past
 * the worst case route_max = ep * T * topk rows (fewer with a capacity).
 * With ring of experts the store also keeps the experts' outputs, and the
 * exchange buffers hold the ep * T tokens of the expert group.
 */
#include "model_impl.h"

#include <math.h>
#include <string.h>

/* ---- configuration checks ---- */

static smoe_status check_pos(smoe_err *err, const char *name, int64_t v)
{
    if (v <= 0 || v > INT32_MAX)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: %s = %lld must be in [1, %d]", name,
                            (long long)v, INT32_MAX);
    return SMOE_OK;
}

static smoe_status check_nonneg(smoe_err *err, const char *name, int64_t v)
{
    if (v < 0 || v > INT32_MAX)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: %s = %lld must be in [0, %d]", name,
                            (long long)v, INT32_MAX);
    return SMOE_OK;
}

static smoe_status check_cfg(const smoe_model_cfg *c, smoe_err *err)
{
    smoe_status st;
#define POS(f) if ((st = check_pos(err, #f, c->f))) return st
#define NONNEG(f) if ((st = check_nonneg(err, #f, c->f))) return st
    POS(emb); POS(heads); POS(kv_lora); POS(qk_nope); POS(qk_rope);
    POS(v_head); POS(vocab); POS(seq); POS(batch); POS(ep);
    NONNEG(q_lora); NONNEG(n_dense); NONNEG(n_moe); NONNEG(shared);
    if (c->qk_rope % 2)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: qk_rope = %lld must be even (RoPE turns pairs)",
                            (long long)c->qk_rope);
    if (c->n_dense > 0)
        POS(mlp);
    if (c->n_moe > 0) {
        POS(moe_mlp); POS(experts); POS(topk);
        if (c->topk > c->experts)
            return smoe_err_set(err, SMOE_EINVAL,
                                "model: topk = %lld exceeds experts = %lld",
                                (long long)c->topk, (long long)c->experts);
        if (c->experts % c->ep)
            return smoe_err_set(err, SMOE_EINVAL,
                                "model: experts = %lld is not divisible by ep = %lld",
                                (long long)c->experts, (long long)c->ep);
        if (!isfinite(c->routed_scale))
            return smoe_err_set(err, SMOE_EINVAL, "model: routed_scale is not finite");
        if (!isfinite(c->capacity_factor))
            return smoe_err_set(err, SMOE_EINVAL, "model: capacity_factor is not finite");
    }
#undef POS
#undef NONNEG
    if (!(c->eps >= 0.0f) || !isfinite(c->eps))
        return smoe_err_set(err, SMOE_EINVAL, "model: eps = %g must be >= 0",
                            (double)c->eps);
    if (c->rope.max_timescale == 0.0 && (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta)))
        return smoe_err_set(err, SMOE_EINVAL, "model: rope_theta = %g must be > 0",
                            (double)c->rope_theta);
    if (c->rope.max_timescale != 0.0) {
        const smoe_rope_cfg *r = &c->rope;
        if (!(r->max_timescale > 0.0) || !isfinite(r->max_timescale) ||
            (!r->yarn && (!(r->min_timescale > 0.0) || !isfinite(r->min_timescale) ||
                          !(r->linear_scale > 0.0) || !isfinite(r->linear_scale))) ||
            (r->yarn && (!(r->factor > 0.0) || !isfinite(r->factor) ||
                         !(r->beta_fast > 0.0) || !(r->beta_slow > 0.0) ||
                         !isfinite(r->beta_fast) || !isfinite(r->beta_slow) ||
                         !(r->orig_max > 0.0) || !isfinite(r->orig_max) ||
                         r->max_timescale == 1.0)))
            return smoe_err_set(err, SMOE_EINVAL,
                                "model: rope timescales, factor, betas and original length "
                                "must be finite and > 0 (base != 1 for YaRN)");
    }
    if (!isfinite(c->rope_scale) || c->rope_scale < 0.0f || !isfinite(c->attn_scale_mult) ||
        c->attn_scale_mult < 0.0f)
        return smoe_err_set(err, SMOE_EINVAL, "model: rope_scale and attn_scale_mult must be "
                                              "finite and >= 0");
    if (!isfinite(c->lb_weight) || c->lb_weight < 0.0f || !isfinite(c->z_loss) ||
        c->lb_batch < 0)
        return smoe_err_set(err, SMOE_EINVAL, "model: lb_weight, lb_batch and z_loss must be "
                                              "finite and >= 0");
    if (c->score_raw && c->score_sigmoid)
        return smoe_err_set(err, SMOE_EINVAL, "model: score_raw and score_sigmoid exclude "
                                              "each other");
    if (c->batch > INT32_MAX / c->seq)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: batch * seq = %lld * %lld tokens is too many",
                            (long long)c->batch, (long long)c->seq);
    return SMOE_OK;
}

/* ---- slab carving: a sizing pass (base NULL) then the real one ---- */

typedef struct carver {
    char *base;  /* NULL while sizing */
    int64_t off; /* bytes used so far */
    int ovf;     /* a size overflowed */
} carver;

static int64_t mulc(carver *c, int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > ((int64_t)1 << 50)) {
        c->ovf = 1;
        return 0;
    }
    return r;
}

static void *carve(carver *c, int64_t n, int64_t elsize)
{
    int64_t bytes = mulc(c, n, elsize);
    c->off = (c->off + 63) & ~(int64_t)63;
    void *p = c->base ? c->base + c->off : NULL;
    c->off += bytes;
    return p;
}

#define CF(c, n) ((float *)carve((c), (n), (int64_t)sizeof(float)))

/* A MoE layer's saved activations: the table's memory (c) and the routing's
 * host arrays (h; c itself on a synchronous table, where the mirrors are
 * the arrays). */
static void carve_moe(smoe_model *m, moe_act *e, carver *c, carver *h)
{
    const smoe_model_cfg *g = &m->cfg;
    const int sync = h == c;
    const int64_t T = m->T, D = g->emb, K = g->topk, E = g->experts;
    const int64_t ep = g->ep, el = m->el, sw = g->shared * g->moe_mlp;
    e->scores = CF(c, mulc(c, T, E));
    if (g->lb_weight > 0.0f)
        e->lbp = CF(h, mulc(h, T, E));
    e->topk = carve(h, mulc(h, T, K), (int64_t)sizeof(int32_t));
    e->wts = CF(h, mulc(h, T, K));
    e->pos = carve(h, mulc(h, T, K), (int64_t)sizeof(int64_t));
    if (m->ring) {
        e->rpos = carve(c, mulc(c, mulc(c, ep, T), K), (int64_t)sizeof(int64_t));
        e->rwts = CF(c, mulc(c, mulc(c, ep, T), K));
    } else {
        e->yret = CF(c, mulc(c, mulc(c, T, K), D));
    }
    e->send_cnt = carve(h, mulc(h, ep, el), (int64_t)sizeof(int64_t));
    e->recv_cnt = carve(h, mulc(h, ep, el), (int64_t)sizeof(int64_t));
    e->hscores = sync ? e->scores : CF(h, mulc(h, T, E));
    e->wts_d = sync ? e->wts : CF(c, mulc(c, T, K));
    e->pos_d = sync ? e->pos : carve(c, mulc(c, T, K), (int64_t)sizeof(int64_t));
    if (sw) {
        e->sh.a = CF(c, mulc(c, T, sw));
        e->sh.b = CF(c, mulc(c, T, sw));
    }
}

/* One layer's attention activations ([T, ...] each; MLA's low ranks
 * where the config has them). */
static void carve_attn(carver *c, const smoe_model_cfg *g, int64_t T, attn_act *a)
{
    const int64_t D = g->emb, H = g->heads, dq = g->qk_nope + g->qk_rope;
    a->xin = CF(c, mulc(c, T, D));
    a->rstd1 = CF(c, T);
    a->h = CF(c, mulc(c, T, D));
    if (g->q_lora) {
        a->qa = CF(c, mulc(c, T, g->q_lora));
        a->rstd_q = CF(c, T);
        a->qan = CF(c, mulc(c, T, g->q_lora));
    }
    a->q = CF(c, mulc(c, T, mulc(c, H, dq)));
    a->ckv = CF(c, mulc(c, T, g->kv_lora));
    a->rstd_kv = CF(c, T);
    a->ckvn = CF(c, mulc(c, T, g->kv_lora));
    a->k = CF(c, mulc(c, T, mulc(c, H, dq)));
    a->v = CF(c, mulc(c, T, mulc(c, H, g->v_head)));
    a->p = CF(c, mulc(c, mulc(c, g->batch, H), mulc(c, g->seq, g->seq)));
    a->o = CF(c, mulc(c, T, mulc(c, H, g->v_head)));
}

/* The attention backward's and the MLP's scratch. */
static void carve_layer_scratch(smoe_model *m, carver *c, carver *h)
{
    const smoe_model_cfg *g = &m->cfg;
    model_scratch *s = &m->s;
    const int64_t T = m->T, D = g->emb, H = g->heads, dq = g->qk_nope + g->qk_rope;
    const int64_t K = g->n_moe ? g->topk : 0, E = g->n_moe ? g->experts : 0;
    s->kv = CF(c, mulc(c, T, mulc(c, H, g->qk_nope + g->v_head)));
    s->kpe = CF(c, mulc(c, T, g->qk_rope));
    s->dh = CF(c, mulc(c, T, D));
    s->dq = CF(c, mulc(c, T, mulc(c, H, dq)));
    s->dk = CF(c, mulc(c, T, mulc(c, H, dq)));
    s->dv = CF(c, mulc(c, T, mulc(c, H, g->v_head)));
    s->dckvn = CF(c, mulc(c, T, g->kv_lora));
    s->dckv = CF(c, mulc(c, T, g->kv_lora));
    if (g->q_lora) {
        s->dqan = CF(c, mulc(c, T, g->q_lora));
        s->dqa = CF(c, mulc(c, T, g->q_lora));
    }
    s->dout = CF(c, mulc(c, T, mulc(c, H, g->v_head)));
    s->att = CF(c, g->seq);
    s->dh2 = CF(c, mulc(c, T, D));
    s->g = CF(c, mulc(c, T, m->wmax));
    s->dg = CF(c, mulc(c, T, m->wmax));
    s->da = CF(c, mulc(c, T, m->wmax));
    s->db = CF(c, mulc(c, T, m->wmax));
    s->dsc = CF(h, mulc(h, T, E));
    s->dwk = CF(h, mulc(h, T, K));
}

/* The routing's, the expert exchange's and the head's scratch (h: the
 * routing's host arrays; their device copies in c unless synchronous). */
static void carve_moe_head_scratch(smoe_model *m, carver *c, carver *h)
{
    const int sync = h == c;
    const smoe_model_cfg *g = &m->cfg;
    model_scratch *s = &m->s;
    const int64_t T = m->T, D = g->emb, hc = m->head_rows, ep = g->ep;
    const int64_t K = g->n_moe ? g->topk : 0, E = g->n_moe ? g->experts : 0;
    if (g->lb_weight > 0.0f && g->n_moe) {
        s->lbd = carve(h, E, (int64_t)sizeof(double));
        s->lbr = CF(h, E);
    }
    if (m->ring) {
        s->gsend = CF(c, mulc(c, mulc(c, ep, T), D + 2 * K));
        s->grecv = CF(c, mulc(c, mulc(c, ep, T), D + 2 * K));
    } else {
        s->send = CF(c, mulc(c, mulc(c, T, K), D));
        s->dxk = CF(c, mulc(c, mulc(c, T, K), D));
    }
    s->eoff = carve(h, E, (int64_t)sizeof(int64_t));
    s->srows = carve(h, ep, (int64_t)sizeof(int64_t));
    s->rrows = carve(h, ep, (int64_t)sizeof(int64_t));
    s->hn = CF(c, mulc(c, hc, D));
    s->hrstd = CF(c, hc);
    s->lg = CF(c, mulc(c, hc, g->vocab));
    s->dhn = CF(c, mulc(c, hc, D));
    s->dsc_d = sync ? s->dsc : CF(c, mulc(c, T, E));
    s->dwk_d = sync ? s->dwk : CF(c, mulc(c, T, K));
    s->hbias = sync ? NULL : CF(h, E);
    s->hdbias = sync ? NULL : CF(h, E);
}

/* c carves the table's memory, h the MoE routing's host arrays (model_impl.h:
 * h == c on a synchronous table, where the mirrors and "_d" copies are the
 * arrays themselves, so the layout is the one slab it always was). The
 * order of the carves is the slab's layout. */
static void carve_all(smoe_model *m, carver *c, carver *h)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb;
    m->pos = carve(c, T, (int64_t)sizeof(int32_t));
    for (int64_t l = 0; l < m->n_layers; l++) {
        layer_act *la = &m->layers[l];
        carve_attn(c, g, T, &la->at);
        la->xmid = CF(c, mulc(c, T, D));
        la->rstd2 = CF(c, T);
        la->h2 = CF(c, mulc(c, T, D));
        if (l < g->n_dense) {
            la->mlp.a = CF(c, mulc(c, T, g->mlp));
            la->mlp.b = CF(c, mulc(c, T, g->mlp));
        } else {
            carve_moe(m, &la->moe, c, h);
        }
    }
    carve_layer_scratch(m, c, h);
    carve_moe_head_scratch(m, c, h);
}

/* ---- routed-row stores ---- */

/* Floats per row of a layer's store: the input, the hidden activations,
 * and with ring of experts the output. */
static int64_t store_row(const smoe_model *m)
{
    return m->cfg.emb * (m->ring ? 2 : 1) + 2 * m->cfg.moe_mlp;
}

static int64_t grow_to(int64_t cap, int64_t need, int64_t max)
{
    int64_t n = cap + cap / 2;
    if (n < need)
        n = need;
    return n < max ? n : max;
}

static size_t store_bytes(const smoe_model *m, int64_t cap)
{
    return (size_t)(cap * store_row(m)) * sizeof(float);
}

static size_t own_bytes(const smoe_model *m, int64_t cap)
{
    return (size_t)(cap * (3 * m->cfg.emb + 4 * m->cfg.moe_mlp)) * sizeof(float);
}

smoe_status model_reserve_routed(smoe_model *m, moe_act *a, int64_t n,
                                 smoe_err *err)
{
    const int64_t D = m->cfg.emb, Mm = m->cfg.moe_mlp;
    if (n > m->route_max)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: %lld routed rows received, more than the bound "
                            "%lld (do all ranks use the same batch and seq?)",
                            (long long)n, (long long)m->route_max);
    if (a && n > a->store_cap) {
        int64_t cap = grow_to(a->store_cap, n, m->route_max);
        float *p = smoe_kops_buf(m->ops, m->stream, store_bytes(m, cap));
        if (!p)
            return smoe_err_set(err, SMOE_ENOMEM,
                                "model: out of memory growing the routed store to %lld rows",
                                (long long)cap);
        smoe_kops_buf_free(m->ops, m->stream, a->store, store_bytes(m, a->store_cap));
        a->store = p;
        a->store_cap = cap;
        a->xr = p;
        a->r.a = p + cap * D;
        a->r.b = a->r.a + cap * Mm;
        a->yr = m->ring ? a->r.b + cap * Mm : NULL;
    }
    own_scratch *o = &m->own;
    if (n > o->cap) {
        int64_t cap = grow_to(o->cap, n, m->route_max);
        float *p = smoe_kops_buf(m->ops, m->stream, own_bytes(m, cap));
        if (!p)
            return smoe_err_set(err, SMOE_ENOMEM,
                                "model: out of memory growing the MoE scratch to %lld rows",
                                (long long)cap);
        smoe_kops_buf_free(m->ops, m->stream, o->buf, own_bytes(m, o->cap));
        o->buf = p;
        o->cap = cap;
        o->ra = p;
        o->rb = o->ra + cap * D;
        o->rc = o->rb + cap * D;
        o->g = o->rc + cap * D;
        o->dg = o->g + cap * Mm;
        o->da = o->dg + cap * Mm;
        o->db = o->da + cap * Mm;
    }
    return SMOE_OK;
}

/* ---- lifecycle ---- */

/* Everything of a model but its buffers: the sizes from cfg, the layer
 * table and the slab size (a sizing pass over the carving). */
static smoe_status model_prepare(smoe_model *m, const smoe_model_cfg *cfg, smoe_err *err)
{
    smoe_status st;
    if ((st = check_cfg(cfg, err)))
        return st;
    m->cfg = *cfg;
    const smoe_model_cfg *g = &m->cfg;
    m->T = g->batch * g->seq;
    m->n_layers = g->n_dense + g->n_moe;
    m->ring = g->ring && g->ep > 1 && g->n_moe > 0;
    if (g->n_moe) {
        m->el = g->experts / g->ep;
        int64_t per_peer = m->T * g->topk;
        if (g->capacity_factor > 0.0f) { /* never more than every pair (dropless) */
            double cap = ceil((double)m->T * (double)g->topk / (double)g->experts *
                              (double)g->capacity_factor);
            m->capacity = cap < (double)per_peer ? (int64_t)cap : per_peer;
        }
        if (m->capacity > 0 && m->el * m->capacity < per_peer)
            per_peer = m->el * m->capacity;
        m->route_max = g->ep * per_peer;
    }
    int64_t wd = g->n_dense ? g->mlp : 0, ws = g->n_moe ? g->shared * g->moe_mlp : 0;
    m->wmax = wd > ws ? wd : ws;
    m->head_rows = HEAD_LOGITS / g->vocab;
    if (m->head_rows < HEAD_ROWS_MIN)
        m->head_rows = HEAD_ROWS_MIN;
    if (m->head_rows > m->T)
        m->head_rows = m->T;
    m->layers = smoe_calloc((size_t)(m->n_layers ? m->n_layers : 1), sizeof *m->layers);
    if (!m->layers)
        return smoe_err_set(err, SMOE_ENOMEM, "model: out of memory for %lld layers",
                            (long long)m->n_layers);
    carver c = { NULL, 0, 0 }, h = { NULL, 0, 0 };
    const int sync = !m->ops || m->ops->synchronous;
    carve_all(m, &c, sync ? &c : &h);
    if (c.ovf || h.ovf)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: activation sizes overflow (dimensions too large)");
    m->slab_bytes = c.off;
    m->hslab_bytes = h.off;
    return SMOE_OK;
}

/* Routed rows reserved at creation: the balanced load. */
static int64_t initial_routed_rows(const smoe_model *m)
{
    int64_t n0 = m->T * m->cfg.topk;
    return n0 < m->route_max ? n0 : m->route_max;
}

smoe_status smoe_model_need_bytes(const smoe_model_cfg *cfg, int64_t *bytes, smoe_err *err)
{
    smoe_model *m = smoe_calloc(1, sizeof *m);
    if (!m)
        return smoe_err_set(err, SMOE_ENOMEM, "model: out of memory");
    smoe_status st = model_prepare(m, cfg, err);
    if (!st) {
        const double D = (double)cfg->emb, Mm = (double)cfg->moe_mlp;
        double n0 = cfg->n_moe ? (double)initial_routed_rows(m) : 0;
        double b = (double)m->slab_bytes + 4.0 * n0 * ((double)cfg->n_moe * (double)store_row(m) +
                                                       (3 * D + 4 * Mm));
        *bytes = b < 9e18 ? (int64_t)b : INT64_MAX;
    }
    smoe_free(m->layers);
    smoe_free(m);
    return st;
}

smoe_status smoe_model_new(const smoe_model_cfg *cfg, smoe_model **out,
                           smoe_err *err)
{
    return smoe_model_new_on(cfg, smoe_kops_cpu(), NULL, out, err);
}

/* The position of every token in its sequence, and the RoPE tables of
 * every position, computed on the host (with the inverse frequencies) and
 * written to the table's memory. */
static smoe_status model_tables(smoe_model *m)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t rhalf = g->qk_rope / 2, ntab = g->seq * rhalf;
    m->tab_bytes = 2 * sizeof(float) * (size_t)ntab;
    m->rope_cs = m->ops->alloc(m->stream, m->tab_bytes);
    int32_t *pos = smoe_malloc(sizeof *pos * (size_t)(m->T ? m->T : 1));
    double *inv = smoe_malloc(sizeof(double) * (size_t)rhalf + m->tab_bytes);
    if (!pos || !inv || !m->rope_cs) {
        smoe_free(pos);
        smoe_free(inv);
        return SMOE_ENOMEM;
    }
    m->rope_sn = m->rope_cs + ntab;
    for (int64_t t = 0; t < m->T; t++)
        pos[t] = (int32_t)(t % g->seq);
    m->ops->write(m->stream, m->pos, pos, sizeof *pos * (size_t)m->T);
    if (g->rope.max_timescale != 0.0) {
        smoe_rope_freqs(inv, g->qk_rope, &g->rope);
    } else { /* the interleaved theta form */
        smoe_rope_cfg r = { 0, 1.0, (double)g->rope_theta, 1.0, 0, 0, 0, 0, 0 };
        smoe_rope_freqs(inv, g->qk_rope, &r);
    }
    float *cs = (float *)(inv + rhalf), *sn = cs + ntab;
    smoe_rope_table(cs, sn, g->seq, g->qk_rope, inv);
    m->ops->write(m->stream, m->rope_cs, cs, m->tab_bytes);
    smoe_free(pos);
    smoe_free(inv);
    return SMOE_OK;
}

smoe_status smoe_model_new_on(const smoe_model_cfg *cfg, const smoe_kops *ops, void *stream,
                              smoe_model **out, smoe_err *err)
{
    smoe_status st;
    *out = NULL;
    if (!ops)
        return smoe_err_set(err, SMOE_EINVAL, "model: no kernel table");
    /* on a device the expert exchange and ring of experts are not written yet */
    if (!ops->synchronous && cfg->n_moe > 0 && (cfg->ep > 1 || cfg->ring))
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: MoE layers on the '%s' kernel table run on one rank of "
                            "the expert group (ep = 1, no ring of experts) so far",
                            ops->name);
    smoe_model *m = smoe_calloc(1, sizeof *m);
    if (!m)
        goto nomem;
    m->ops = ops;
    m->stream = stream;
    m->hops = ops->synchronous ? ops : smoe_kops_cpu();
    if ((st = model_prepare(m, cfg, err)))
        goto fail;
    const smoe_model_cfg *g = &m->cfg;
    m->slab = ops->alloc(stream, (size_t)m->slab_bytes);
    m->scalars = ops->alloc(stream, 2 * sizeof *m->scalars);
    if (m->hslab_bytes)
        m->hslab = smoe_slab_alloc((size_t)m->hslab_bytes);
    if (!m->slab || !m->scalars || (m->hslab_bytes && !m->hslab))
        goto nomem;
    carver c = { m->slab, 0, 0 }, h = { m->hslab, 0, 0 };
    carve_all(m, &c, ops->synchronous ? &c : &h);
    SMOE_ASSERT(c.off == m->slab_bytes && h.off == m->hslab_bytes);
    if (model_tables(m) != SMOE_OK)
        goto nomem;
    m->rope_scale = g->rope_scale > 0.0f ? g->rope_scale : 1.0f;
    m->attn_scale = (float)((g->attn_scale_mult > 0.0f ? (double)g->attn_scale_mult : 1.0) /
                            sqrt((double)(g->qk_nope + g->qk_rope)));

    if (g->n_moe) {
        /* Balanced load up front (every case for ep == 1); grown on demand. */
        int64_t n0 = initial_routed_rows(m);
        for (int64_t l = g->n_dense; l < m->n_layers; l++)
            if ((st = model_reserve_routed(m, &m->layers[l].moe, n0, err)))
                goto fail;
    }
    *out = m;
    return SMOE_OK;

nomem:
    st = smoe_err_set(err, SMOE_ENOMEM, "model: out of memory allocating activations");
fail:
    smoe_model_free(m);
    return st;
}

void smoe_model_free(smoe_model *m)
{
    if (!m)
        return;
    for (int64_t l = 0; m->layers && l < m->n_layers; l++)
        smoe_kops_buf_free(m->ops, m->stream, m->layers[l].moe.store,
                           store_bytes(m, m->layers[l].moe.store_cap));
    smoe_kops_buf_free(m->ops, m->stream, m->own.buf, own_bytes(m, m->own.cap));
    if (m->hslab)
        smoe_slab_free(m->hslab, (size_t)m->hslab_bytes);
    if (m->ops) {
        m->ops->free(m->stream, m->rope_cs, m->tab_bytes);
        m->ops->free(m->stream, m->scalars, 2 * sizeof *m->scalars);
        m->ops->free(m->stream, m->slab, (size_t)m->slab_bytes);
    }
    smoe_free(m->layers);
    smoe_free(m);
}

const smoe_model_cfg *smoe_model_config(const smoe_model *m) { return &m->cfg; }

const smoe_kops *smoe_model_kops(const smoe_model *m) { return m->ops; }

void *smoe_model_stream(const smoe_model *m) { return m->stream; }

double smoe_model_fwd_flops_per_token(const smoe_model_cfg *m)
{
    double e = (double)m->emb, h = (double)m->heads, qk = (double)(m->qk_nope + m->qk_rope);
    double att = m->q_lora ? 2 * (e * (double)m->q_lora + (double)m->q_lora * h * qk)
                           : 2 * e * h * qk;
    att += 2 * e * (double)(m->kv_lora + m->qk_rope);
    att += 2 * (double)m->kv_lora * h * (double)(m->qk_nope + m->v_head);
    att += 2 * h * (double)m->v_head * e;
    att += 2 * h * (qk + (double)m->v_head) * (double)(m->seq + 1) / 2; /* causal core */
    double dense = 6 * e * (double)m->mlp;
    double moe = 2 * e * (double)m->experts + 6 * e * (double)(m->shared * m->moe_mlp) +
                 6 * e * (double)m->moe_mlp * (double)m->topk;
    return (double)(m->n_dense + m->n_moe) * att + (double)m->n_dense * dense +
           (double)m->n_moe * moe + 2 * e * (double)m->vocab;
}

int64_t smoe_model_act_bytes(const smoe_model *m)
{
    const int64_t D = m->cfg.emb, Mm = m->cfg.moe_mlp;
    int64_t n = m->slab_bytes;
    for (int64_t l = m->cfg.n_dense; l < m->n_layers; l++)
        n += m->layers[l].moe.store_cap * store_row(m) * (int64_t)sizeof(float);
    n += m->own.cap * (3 * D + 4 * Mm) * (int64_t)sizeof(float);
    return n;
}

smoe_model_stats smoe_model_stats_get(const smoe_model *m) { return m->stats; }

void smoe_model_stats_reset(smoe_model *m) { memset(&m->stats, 0, sizeof m->stats); }

const int32_t *smoe_model_topk(const smoe_model *m, int l)
{
    if (l < m->cfg.n_dense || l >= m->n_layers)
        return NULL;
    return m->layers[l].moe.topk;
}
