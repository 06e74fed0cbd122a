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

void mlp_fwd(float *y, float beta, mlp_act a, float *g, const float *x,
             const float *wi0, const float *wi1, const float *wo, int64_t n,
             int64_t d, int64_t w, smoe_ep_comm *comm)
{
    if (n == 0)
        return;
    smoe_matmul(a.a, x, wi0, n, d, w, 0.0f);
    model_progress(comm);
    smoe_matmul(a.b, x, wi1, n, d, w, 0.0f);
    model_progress(comm);
    smoe_swiglu_sig(g, g, a.a, a.b, n * w); /* = smoe_swiglu, bitwise */
    smoe_matmul(y, g, wo, n, w, d, beta);
    model_progress(comm);
}

void mlp_bwd(float *dx, float *dwi0, float *dwi1, float *dwo, const float *dy,
             mlp_act a, const float *x, const float *wi0, const float *wi1,
             const float *wo, int64_t n, int64_t d, int64_t w, float *g,
             float *dg, float *da, float *db, smoe_ep_comm *comm)
{
    if (n == 0)
        return;
    smoe_swiglu_sig(g, db, a.a, a.b, n * w); /* the sigmoid kept in db */
    /* dg = dy @ wo^T (overwrite), dwo += g^T @ dy */
    smoe_gemm(0, 1, n, w, d, 1.0f, dy, d, wo, d, 0.0f, dg, w);
    model_progress(comm);
    smoe_matmul_bwd(NULL, dwo, dy, g, wo, n, w, d);
    model_progress(comm);
    smoe_swiglu_sig_bwd(da, db, dg, a.a, a.b, db, n * w);
    smoe_matmul_bwd(dx, dwi0, da, x, wi0, n, d, w);
    model_progress(comm);
    smoe_matmul_bwd(dx, dwi1, db, x, wi1, n, d, w);
    model_progress(comm);
}
