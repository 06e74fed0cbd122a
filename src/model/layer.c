/* One decoder layer, forward and backward: the MLA block with its
 * residual, then the post-attention RMSNorm and either the dense SwiGLU MLP
 * (layers l < n_dense) or the MoE block, with its residual:
 *
 *   x_mid = x + MLA(rmsnorm(x) * pre_norm)
 *   h2    = rmsnorm(x_mid) * post_norm
 *   x_out = x_mid + (dense ? MLP(h2) : MoE(h2))
 *
 * Checks the layer index and that every weight (and, in the backward,
 * gradient) slot the layer uses is present, then delegates to
 * attention_mla.c, mlp.c and moe.c.
 */
#include "model_impl.h"


static smoe_status check_slots(const smoe_model *m, int l,
                               const float *const w[SMOE_W_NSLOTS],
                               float *const dw[SMOE_W_NSLOTS], smoe_err *err)
{
    if (l < 0 || l >= m->n_layers)
        return smoe_err_set(err, SMOE_EINVAL, "model: layer %d out of range [0, %lld)",
                            l, (long long)m->n_layers);
    const int moe = l >= m->cfg.n_dense;
    for (int i = 0; i < SMOE_W_NSLOTS; i++) {
        smoe_wslot sl = (smoe_wslot)i;
        if (!smoe_wslot_used(&m->cfg, sl, moe))
            continue;
        if (!w[i])
            return smoe_err_set(err, SMOE_EINVAL, "model: layer %d: weight %s is missing",
                                l, smoe_wslot_path(sl));
        if (dw && !dw[i] && sl != SMOE_W_GATE_BIAS)
            return smoe_err_set(err, SMOE_EINVAL, "model: layer %d: gradient of %s is missing",
                                l, smoe_wslot_path(sl));
    }
    return SMOE_OK;
}

smoe_status smoe_model_layer_fwd(smoe_model *m, int l,
                                 const float *const w[SMOE_W_NSLOTS], float *x,
                                 smoe_ep_comm *comm, smoe_err *err)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb;
    smoe_status st;
    if ((st = check_slots(m, l, w, NULL, err)))
        return st;
    layer_act *la = &m->layers[l];

    mla_fwd(m, &la->at, w, x, comm);
    m->ops->copy(m->stream, la->xmid, x, (size_t)(T * D) * sizeof *x);
    m->ops->rmsnorm(m->stream, la->h2, la->rstd2, x, w[SMOE_W_POST_NORM], T, D, g->eps);
    if (l < g->n_dense) {
        mlp_fwd(m, x, 1.0f, la->mlp, m->s.g, la->h2, w[SMOE_W_MLP_WI0],
                w[SMOE_W_MLP_WI1], w[SMOE_W_MLP_WO], T, D, g->mlp, comm);
    } else if ((st = moe_fwd(m, la, w, x, comm, err))) {
        return st;
    }
    la->fwd_done = 1;
    return SMOE_OK;
}

smoe_status smoe_model_layer_bwd(smoe_model *m, int l,
                                 const float *const w[SMOE_W_NSLOTS],
                                 float *const dw[SMOE_W_NSLOTS], float *dx,
                                 smoe_ep_comm *comm, smoe_err *err)
{
    const smoe_model_cfg *g = &m->cfg;
    const int64_t T = m->T, D = g->emb;
    smoe_status st;
    if ((st = check_slots(m, l, w, dw, err)))
        return st;
    layer_act *la = &m->layers[l];
    if (!la->fwd_done)
        return smoe_err_set(err, SMOE_EINVAL,
                            "model: backward of layer %d before its forward", l);

    /* x_out = x_mid + f(h2): dx stays as the residual part, dh2 = f's input grad */
    float *dh2 = m->s.dh2;
    m->ops->fill0(m->stream, dh2, (size_t)(T * D) * sizeof *dh2);
    if (l < g->n_dense) {
        mlp_bwd(m, dh2, dw[SMOE_W_MLP_WI0], dw[SMOE_W_MLP_WI1], dw[SMOE_W_MLP_WO],
                dx, la->mlp, la->h2, w[SMOE_W_MLP_WI0], w[SMOE_W_MLP_WI1],
                w[SMOE_W_MLP_WO], T, D, g->mlp, m->s.g, m->s.dg, m->s.da,
                m->s.db, comm);
    } else if ((st = moe_bwd(m, la, w, dw, dx, dh2, comm, err))) {
        return st;
    }
    m->ops->rmsnorm_bwd(m->stream, dx, dw[SMOE_W_POST_NORM], dh2, la->xmid,
                        w[SMOE_W_POST_NORM], la->rstd2, T, D);
    mla_bwd(m, &la->at, w, dw, dx, comm);
    return SMOE_OK;
}
