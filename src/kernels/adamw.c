/* The AdamW update (Loshchilov & Hutter): Adam moments with bias correction
 * and weight decay decoupled from the gradient, applied in place to one slab
 * of parameters and its two moment slabs. For step t (1-based):
 *   m    = b1 m + (1 - b1) g
 *   v    = b2 v + (1 - b2) g^2
 *   mhat = m / (1 - b1^t),  vhat = v / (1 - b2^t)
 *   p   -= lr * (mhat / (sqrt(vhat) + eps) + wd * p)   (eps outside sqrt)
 * The bias corrections are computed once per call in double.
 */
#include "smoe/kernels.h"

#include <math.h>

/* p, m, v, g (n); m and v start at zero before step 1. t >= 1, 0 <= b1,b2
 * < 1. Thread-safe; disjoint slices may be updated in parallel. */
void smoe_adamw(float *p, float *m, float *v, const float *g, int64_t n,
                float lr, float b1, float b2, float eps, float wd, int64_t t)
{
    SMOE_ASSERT(n >= 0 && t >= 1);
    SMOE_ASSERT(b1 >= 0.0f && b1 < 1.0f && b2 >= 0.0f && b2 < 1.0f);
    const float c1 = (float)(1.0 / (1.0 - pow((double)b1, (double)t)));
    const float c2 = (float)(1.0 / (1.0 - pow((double)b2, (double)t)));
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi * c1;
        float vhat = vi * c2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}
