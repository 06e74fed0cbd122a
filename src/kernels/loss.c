/* Cross-entropy of a row of logits against an integer target, with the
 * gradient written in the same pass, and MaxText's z-loss (max_utils.py
 * cross_entropy_with_logits and its custom VJP
 * _cross_entropy_with_logits_bwd). Per row r of logits (v):
 *   lse  = max + log(sum_j exp(r_j - max))        (stable log-sum-exp)
 *   loss = lse - r[y] + z * lse^2                  (z-loss added to the loss)
 *   dr_j = ((1 + 2 z lse) exp(r_j - lse) - [j == y]) * scale
 * The exponential sum and the loss are accumulated in double; the caller
 * divides by the number of tokens (or passes scale = 1/tokens) itself.
 * One float exponential per element (the gradient reuses it); the naive
 * twin smoe_cross_entropy_z_ref takes two double ones.
 */
#include "smoe/kernels.h"

#include <math.h>

enum { CE_CHUNK = 256 }; /* exponentials of a row computed at a time */

/* One row: the loss term (z-loss included, its part added to *zrow) and,
 * when dr is not NULL, the gradient. One expf per element: e_j =
 * expf(r_j - max) (smoe_expf_n, eight lanes at a time) is kept in dr and
 * scaled by f / sum at the end, since exp(r_j - lse) = e_j / sum. dr may
 * alias r: each element is read before it is overwritten. */
static double ce_row(float *dr, const float *r, int32_t y, int64_t v, float scale, float z,
                     double *zrow)
{
    float mx = r[0];
    for (int64_t j = 1; j < v; j++)
        mx = r[j] > mx ? r[j] : mx;
    const float ry = r[y];
    double s4[4] = { 0.0, 0.0, 0.0, 0.0 };
    float buf[CE_CHUNK];
    for (int64_t j0 = 0; j0 < v; j0 += CE_CHUNK) {
        const int64_t n = v - j0 < CE_CHUNK ? v - j0 : CE_CHUNK;
        float *e = dr ? dr + j0 : buf;
        for (int64_t j = 0; j < n; j++)
            e[j] = r[j0 + j] - mx;
        smoe_expf_n(e, e, n);
        int64_t j = 0;
        for (; j + 4 <= n; j += 4)
            for (int q = 0; q < 4; q++)
                s4[q] += (double)e[j + q];
        for (; j < n; j++)
            s4[0] += (double)e[j];
    }
    const double sum = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    const double lse = (double)mx + log(sum);
    const double zl = (double)z * lse * lse;
    *zrow += zl;
    if (dr) {
        const double c = (1.0 + 2.0 * (double)z * lse) * (double)scale / sum;
        for (int64_t j = 0; j < v; j++)
            dr[j] = (float)((double)dr[j] * c);
        dr[y] -= scale;
    }
    return lse - (double)ry + zl;
}

double smoe_cross_entropy_z(float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v,
                            float scale, float z, double *zsum)
{
    SMOE_ASSERT(t >= 0 && v > 0);
    double total = 0.0, ztot = 0.0;
    for (int64_t i = 0; i < t; i++) {
        const int32_t y = targets[i];
        SMOE_ASSERT(y >= 0 && (int64_t)y < v);
        total += ce_row(dlogits ? dlogits + i * v : NULL, logits + i * v, y, v, scale, z,
                        &ztot);
    }
    if (zsum)
        *zsum = ztot;
    return total;
}

/* The naive twin of smoe_cross_entropy_z (the oracle of its tests): two
 * double exponentials per element, exp(r_j - max) for the sum and
 * exp(r_j - lse) for the gradient, and a plain double sum. */
double smoe_cross_entropy_z_ref(float *dlogits, const float *logits,
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
        const float ry = r[y];
        double sum = 0.0;
        for (int64_t j = 0; j < v; j++)
            sum += exp((double)(r[j] - mx));
        const double lse = (double)mx + log(sum);
        const double zl = (double)z * lse * lse;
        total += lse - (double)ry + zl;
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
