/* SwiGLU with the sigmoid computed once per backward: the forward can
 * write the sigmoid s = sigmoid(a) beside the product, and the MLP's
 * backward, which recomputes the product from the saved projections a and
 * b, keeps s for the derivative instead of evaluating exp a third time.
 * Naive twins: smoe_swiglu and smoe_swiglu_bwd (act.c), bitwise the same
 * (the same sigmoid, the same products; test_kernels compares them, and
 * finite differences check the backward).
 *
 * The sigmoid is smoe_sigmoid_n (vexp.c): eight lanes at a time and
 * bitwise the scalar expf. Not glibc's vector expf: its last-ulp
 * differences from the scalar expf are enough to move the
 * sharded-vs-single-rank training oracle (train_oracle, 5 steps, relative
 * 1e-5) past its tolerance on the MoE gate, as any other rounding change
 * of the sigmoid did (bench/results/2026-12-01-sigmoid-rounding.md).
 */
#include "smoe/kernels.h"

/* h (n) = silu(a) * b = a * s * b and s (n) = sigmoid(a); h may alias s. */
void smoe_swiglu_sig(float *h, float *s, const float *a, const float *b, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    smoe_sigmoid_n(s, a, n);
    for (int64_t i = 0; i < n; i++)
        h[i] = a[i] * s[i] * b[i];
}

/* da (n) = dh * b * s * (1 + a (1 - s)), db (n) = dh * a * s, from the
 * forward's s; db may alias s (each element of s is read before it is
 * overwritten), nothing else aliases. */
void smoe_swiglu_sig_bwd(float *da, float *db, const float *dh, const float *a,
                         const float *b, const float *s, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) {
        float ai = a[i], si = s[i], di = dh[i];
        da[i] = di * b[i] * si * (1.0f + ai * (1.0f - si));
        db[i] = di * ai * si;
    }
}
