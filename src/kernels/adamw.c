/* The AdamW update exactly as MaxText builds it: optax.adamw (optax
 * alias.py adamw = chain(scale_by_adam, add_decayed_weights(weight_decay,
 * mask), scale_by_learning_rate)), after optax.clip_by_global_norm
 * (MaxText maxtext_utils.apply_gradient_clipping, called from train.py
 * train_step). Per element, in this order (float32 throughout, as optax
 * runs on float32 parameters):
 *   g    = clipped ? (g / global_norm) * threshold : g
 *                    (optax transforms/_clipping.py clip_by_global_norm)
 *   m    = (1 - b1) g + b1 m          (optax tree_update_moment, order 1)
 *   v    = (1 - b2) g^2 + b2 v        (tree_update_moment_per_elem_norm, 2)
 *   mhat = m / (1 - b1^t), vhat = v / (1 - b2^t), t = update count + 1
 *                    (tree_bias_correction: the divisor in float32)
 *   u    = mhat / (sqrt(vhat + eps_root) + eps)      (scale_by_adam)
 *   u   += wd p   when the parameter decays          (add_decayed_weights)
 *   p   += -lr u                     (scale_by_learning_rate, apply_updates)
 */
#include "smoe/kernels.h"

#include <math.h>

/* The update of n elements with the choices fixed (clip, decay: 0 or 1),
 * so that each specialisation is a straight loop the compiler vectorises
 * (the same operations per element as one at a time). */
static inline void adamw_loop(float *p, float *m, float *v, const float *g, int64_t n,
                              const smoe_adamw_cfg *c, float bc1, float bc2, int clip,
                              int decay)
{
    const float b1 = c->b1, b2 = c->b2, eps = c->eps, eps_root = c->eps_root;
    const float wd = c->wd, step = -c->lr;
    const float cn = c->clip_norm, cmax = c->clip_max;
    for (int64_t i = 0; i < n; i++) {
        float gi = clip ? (g[i] / cn) * cmax : g[i];
        float mi = (1.0f - b1) * gi + b1 * m[i];
        float vi = (1.0f - b2) * (gi * gi) + b2 * v[i];
        m[i] = mi;
        v[i] = vi;
        float u = (mi / bc1) / (sqrtf(vi / bc2 + eps_root) + eps);
        if (decay)
            u = u + wd * p[i];
        p[i] = p[i] + step * u;
    }
}

void smoe_adamw_step(float *p, float *m, float *v, const float *g, int64_t n,
                     const smoe_adamw_cfg *c)
{
    SMOE_ASSERT(n >= 0 && c->t >= 1);
    SMOE_ASSERT(c->b1 >= 0.0f && c->b1 < 1.0f && c->b2 >= 0.0f && c->b2 < 1.0f);
    /* 1 - decay^count, computed in double and rounded once (optax computes
     * decay**count in float32; the two agree to float rounding) */
    const float bc1 = (float)(1.0 - pow((double)c->b1, (double)c->t));
    const float bc2 = (float)(1.0 - pow((double)c->b2, (double)c->t));
    const int clip = c->clip_norm > 0.0f, decay = c->wd != 0.0f;
    if (clip && decay)
        adamw_loop(p, m, v, g, n, c, bc1, bc2, 1, 1);
    else if (clip)
        adamw_loop(p, m, v, g, n, c, bc1, bc2, 1, 0);
    else if (decay)
        adamw_loop(p, m, v, g, n, c, bc1, bc2, 0, 1);
    else
        adamw_loop(p, m, v, g, n, c, bc1, bc2, 0, 0);
}

void smoe_adamw(float *p, float *m, float *v, const float *g, int64_t n,
                float lr, float b1, float b2, float eps, float wd, int64_t t)
{
    smoe_adamw_cfg c = { lr, b1, b2, eps, 0.0f, wd, t, 0.0f, 0.0f };
    smoe_adamw_step(p, m, v, g, n, &c);
}
