/* Cross-entropy of a row of logits against an integer target, with the
 * gradient written in the same pass, and MaxText's z-loss (max_utils.py
 * cross_entropy_with_logits and its custom VJP
 * _cross_entropy_with_logits_bwd). Per row r of logits (v):
 *   lse  = max + log(sum_j exp(r_j - max))        (stable log-sum-exp)
 *   loss = lse - r[y] + z * lse^2                  (z-loss added to the loss)
 *   dr_j = ((1 + 2 z lse) exp(r_j - lse) - [j == y]) * scale
 * The exponential sum and the loss are accumulated in double; the caller
 * divides by the number of tokens (or passes scale = 1/tokens) itself.
 */
#include "smoe/kernels.h"

#include <math.h>

double smoe_cross_entropy_z(float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v,
                            float scale, float z, double *zsum)
{
    SMOE_ASSERT(t >= 0 && v > 0);
    double total = 0.0, ztot = 0.0;
    for (int64_t i = 0; i < t; i++) {
        const float *r = logits + i * v;
        const int32_t y = targets[i];
        SMOE_ASSERT(y >= 0 && (int64_t)y < v);
        float mx = r[0];
        for (int64_t j = 1; j < v; j++)
            mx = r[j] > mx ? r[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j < v; j++)
            sum += exp((double)(r[j] - mx));
        const double lse = (double)mx + log(sum);
        const double zl = (double)z * lse * lse;
        total += lse - (double)r[y] + zl;
        ztot += zl;
        if (!dlogits)
            continue;
        float *dr = dlogits + i * v;
        const double f = (1.0 + 2.0 * (double)z * lse) * (double)scale;
        for (int64_t j = 0; j < v; j++)
            dr[j] = (float)(exp((double)r[j] - lse) * f);
        dr[y] -= scale;
    }
    if (zsum)
        *zsum = ztot;
    return total;
}

/* logits (t,v), targets (t) in [0, v) (anything else is a caller bug and
 * fails SMOE_ASSERT). Returns the summed loss. dlogits (t,v), if not NULL,
 * is overwritten and may alias logits (then the logits are consumed). */
double smoe_cross_entropy(float *dlogits, const float *logits,
                          const int32_t *targets, int64_t t, int64_t v,
                          float scale)
{
    return smoe_cross_entropy_z(dlogits, logits, targets, t, v, scale, 0.0f, NULL);
}
