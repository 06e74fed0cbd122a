/* The ends of the model: the token embedding (a row gather, and its
 * scatter-add backward) and the head, loss = loss_scale * sum_t
 * [CE + z_loss * lse^2](rmsnorm(x_t) * final_norm @ logits_w, target_t). The head runs over
 * head_rows rows at a time so its logits buffer is (head_rows, vocab)
 * rather than (T, vocab), which for a 100k+ vocabulary would dominate the
 * activation memory: as many rows as fit 1 MiB of logits (all of them for
 * a small vocabulary, so the products are few and large), at least 64.
 */
#include "model_impl.h"

void smoe_model_embed_fwd(smoe_model *m, const float *embed,
                          const int32_t *tokens, float *x)
{
    m->ops->embed_rows(m->stream, x, embed, tokens, m->T, m->cfg.emb, m->cfg.vocab);
}

void smoe_model_embed_bwd(smoe_model *m, float *dembed, const int32_t *tokens,
                          const float *dx)
{
    m->ops->embed_rows_bwd(m->stream, dembed, tokens, dx, m->T, m->cfg.emb, m->cfg.vocab);
}

double smoe_model_head(smoe_model *m, const float *final_norm,
                       const float *logits_w, const int32_t *targets,
                       const float *x, float *dx, float *dnorm,
                       float *dlogits, float loss_scale)
{
    const int64_t T = m->T, D = m->cfg.emb, V = m->cfg.vocab;
    model_scratch *s = &m->s;
    double loss = 0.0;
    const int64_t hr = m->head_rows;
    for (int64_t r0 = 0; r0 < T; r0 += hr) {
        const int64_t n = T - r0 < hr ? T - r0 : hr;
        const float *xr = x + r0 * D;
        m->ops->rmsnorm(m->stream, s->hn, s->hrstd, xr, final_norm, n, D, m->cfg.eps);
        m->ops->matmul(m->stream, s->lg, s->hn, logits_w, n, D, V, 0.0f);
        /* the logits' gradient overwrites them; the loss and the z-loss
         * (MaxText max_utils.cross_entropy_with_logits) land in the
         * table's memory and are read back (a synchronisation point) */
        double sc[2];
        m->ops->cross_entropy_z(m->stream, dx ? s->lg : NULL, s->lg, targets + r0, n, V,
                                loss_scale, m->cfg.z_loss, &m->scalars[0], &m->scalars[1]);
        m->ops->read(m->stream, sc, m->scalars, sizeof sc);
        loss += sc[0];
        m->stats.z_loss += sc[1] * (double)loss_scale;
        if (!dx)
            continue;
        m->ops->gemm(m->stream, 0, 1, n, D, V, 1.0f, s->lg, V, logits_w, V, 0.0f, s->dhn, D);
        m->ops->matmul_bwd(m->stream, NULL, dlogits, s->lg, s->hn, logits_w, n, D, V);
        m->ops->fill0(m->stream, dx + r0 * D, (size_t)(n * D) * sizeof *dx);
        m->ops->rmsnorm_bwd(m->stream, dx + r0 * D, dnorm, s->dhn, xr, final_norm, s->hrstd, n, D);
    }
    return loss * (double)loss_scale;
}
