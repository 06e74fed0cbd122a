/* The SwiGLU MLP y = (silu(x @ wi_0) * (x @ wi_1)) @ wo and its backward,
 * on n rows. One function pair serves the dense layers' MLP, the shared
 * experts of the MoE layers (width shared * moe_mlp) and each routed expert
 * on the rows dispatched to it. The forward saves the two projections a and
 * b; the product g = silu(a) * b is cheap to recompute, so the backward
 * does that instead of keeping it for every layer, keeping the sigmoid
 * for the derivative (smoe_swiglu_sig: two exp per element and step, not
 * three).
 */
#include "model_impl.h"

void mlp_fwd(const smoe_model *m, float *y, float beta, mlp_act a, float *g, const float *x,
             const float *wi0, const float *wi1, const float *wo, int64_t n, int64_t d,
             int64_t w, smoe_ep_comm *comm)
{
    if (n == 0)
        return;
    m->ops->matmul(m->stream, a.a, x, wi0, n, d, w, 0.0f);
    model_progress(comm);
    m->ops->matmul(m->stream, a.b, x, wi1, n, d, w, 0.0f);
    model_progress(comm);
    m->ops->swiglu_sig(m->stream, g, g, a.a, a.b, n * w); /* = smoe_swiglu, bitwise */
    m->ops->matmul(m->stream, y, g, wo, n, w, d, beta);
    model_progress(comm);
}

void mlp_bwd(const smoe_model *m, float *dx, float *dwi0, float *dwi1, float *dwo,
             const float *dy, mlp_act a, const float *x, const float *wi0, const float *wi1,
             const float *wo, int64_t n, int64_t d, int64_t w, float *g, float *dg, float *da,
             float *db, smoe_ep_comm *comm)
{
    if (n == 0)
        return;
    m->ops->swiglu_sig(m->stream, g, db, a.a, a.b, n * w); /* the sigmoid kept in db */
    /* dg = dy @ wo^T (overwrite), dwo += g^T @ dy */
    m->ops->gemm(m->stream, 0, 1, n, w, d, 1.0f, dy, d, wo, d, 0.0f, dg, w);
    model_progress(comm);
    m->ops->matmul_bwd(m->stream, NULL, dwo, dy, g, wo, n, w, d);
    model_progress(comm);
    m->ops->swiglu_sig_bwd(m->stream, da, db, dg, a.a, a.b, db, n * w);
    m->ops->matmul_bwd(m->stream, dx, dwi0, da, x, wi0, n, d, w);
    model_progress(comm);
    m->ops->matmul_bwd(m->stream, dx, dwi1, db, x, wi1, n, d, w);
    model_progress(comm);
}
