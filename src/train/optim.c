/* The update of a training step, after the gradient reductions, as MaxText's
 * train.py train_step does it: the global norm of the raw gradient, clipping
 * by it (optax.clip_by_global_norm through maxtext_utils.apply_gradient_
 * clipping, when gradient_clipping_threshold > 0), optax AdamW with the
 * learning rate of the schedule at the update count (adamw.c, recipe.c),
 * then the aux-loss-free bias update (routed_bias with
 * routed_bias_update_rate > 0: maxtext_utils.update_state_param adds
 * moe.py calculate_load_balance_updates to the gate bias after
 * apply_gradients).
 *
 * Sharded: every rank holds a shard of every weight; a weight replicated on
 * r of the ranks (the mesh axes its spec leaves out) has r identical copies
 * of each shard after the reductions, so the squared norm sums each rank's
 * local squares divided by r over all ranks: each element counted once.
 * The bias update counts the experts chosen by every token of the global
 * batch (MaxText's top_k_indices cover the whole batch): the local counts
 * summed over all ranks, since the batch is sharded over every mesh axis.
 */
#include "train_impl.h"

#include <math.h>
#include <string.h>

struct tr_optim {
    int n;
    float *wd;            /* (n) weight decay of each weight (0 where masked) */
    double *inv_rep;      /* (n) 1 / ranks holding each shard */
    int nbias;            /* MoE layers with a gate bias to update */
    double *counts;       /* (n_moe * E) expert counts of the step */
    float *bias_h;        /* (E) a bias row on the host, on a device's table */
    int bias_w;           /* store index of the gate bias, or -1 */
    /* the squares of each weight's gradient: computed where the gradients
     * live (the model's table, sq_d in its memory, made at the first step)
     * and read into sq */
    double *sq;           /* (n) */
    double *sq_d;         /* (n) the table's memory */
    const smoe_kops *ops; /* the table sq_d came from, and its stream */
    void *stream;
};

smoe_status tr_optim_new(const tr_store *st, const tr_hparams *hp, const smoe_model_cfg *mc,
                         int ranks, tr_optim **out, smoe_err *err)
{
    tr_optim *o = smoe_calloc(1, sizeof *o);
    *out = o;
    if (!o)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    o->n = st->n;
    o->bias_w = -1;
    o->wd = smoe_calloc((size_t)(st->n ? st->n : 1), sizeof *o->wd);
    o->inv_rep = smoe_calloc((size_t)(st->n ? st->n : 1), sizeof *o->inv_rep);
    o->sq = smoe_calloc((size_t)(st->n ? st->n : 1), sizeof *o->sq);
    if (!o->wd || !o->inv_rep || !o->sq)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        int64_t full = 1;
        for (int d = 0; d < w->lrank; d++)
            full *= w->lshape[d];
        /* shards per layer = full / shard_numel; each held by ranks / shards */
        double copies = (double)ranks * (double)w->info.shard_numel / (double)full;
        o->inv_rep[i] = copies > 0 ? 1.0 / copies : 0.0;
        o->wd[i] = smoe_recipe_decays(&hp->rc, w->pw->path) ? (float)hp->wd : 0.0f;
        if (!w->top && w->moe && w->slot == SMOE_W_GATE_BIAS)
            o->bias_w = i;
    }
    if (mc->routed_bias && hp->rc.bias_rate > 0.0 && mc->n_moe > 0) {
        if (o->bias_w < 0)
            return smoe_err_set(err, SMOE_EINTERNAL, "routed_bias without a gate bias weight");
        o->nbias = (int)mc->n_moe;
        o->counts = smoe_calloc((size_t)(mc->n_moe * mc->experts), sizeof *o->counts);
        o->bias_h = smoe_calloc((size_t)mc->experts, sizeof *o->bias_h);
        if (!o->counts || !o->bias_h)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return SMOE_OK;
}

void tr_optim_free(tr_optim *o)
{
    if (!o)
        return;
    smoe_free(o->wd);
    smoe_free(o->inv_rep);
    smoe_free(o->counts);
    smoe_free(o->bias_h);
    smoe_free(o->sq);
    if (o->sq_d)
        o->ops->free(o->stream, o->sq_d, sizeof *o->sq_d * (size_t)(o->n ? o->n : 1));
    smoe_free(o);
}

/* The experts chosen by every token of the global batch, per MoE layer:
 * the local counts summed over all ranks. */
static smoe_status bias_counts(tr_optim *o, const smoe_comm *cm, smoe_model *model,
                               const smoe_model_cfg *mc, smoe_err *err)
{
    const int64_t E = mc->experts, K = mc->topk, T = mc->batch * mc->seq;
    memset(o->counts, 0, sizeof(double) * (size_t)(o->nbias * E));
    for (int j = 0; j < o->nbias; j++) {
        const int32_t *idx = smoe_model_topk(model, (int)(mc->n_dense + j));
        if (!idx)
            return smoe_err_set(err, SMOE_EINTERNAL, "no routing of MoE layer %d", j);
        for (int64_t i = 0; i < T * K; i++)
            o->counts[j * E + idx[i]] += 1.0;
    }
    smoe_comm_allreduce_sum_f64(cm, o->counts, (int)(o->nbias * E));
    return SMOE_OK;
}

/* calculate_load_balance_updates: sign(average load - count) * rate per
 * expert, average = tokens * topk / experts, counts over the global batch;
 * on the MoE layers whose `first` mark equals `pass` (every layer when
 * first is NULL and pass 0). */
static void bias_update(const tr_optim *o, const smoe_comm *cm, tr_store *st,
                        const smoe_model *model, const smoe_model_cfg *mc, double rate,
                        const unsigned char *first, int pass)
{
    const smoe_kops *ops = smoe_model_kops(model);
    void *stream = smoe_model_stream(model);
    const int64_t E = mc->experts, K = mc->topk, T = mc->batch * mc->seq;
    const double avg = (double)T * (double)smoe_comm_size(cm) * (double)K / (double)E;
    const tr_weight *w = &st->w[o->bias_w];
    const int64_t n = w->info.shard_numel, e0 = w->info.offset[0];
    for (int j = 0; j < o->nbias; j++) {
        int64_t l = mc->n_dense + j - w->layer0;
        if ((first ? !first[mc->n_dense + j] : 0) != pass)
            continue;
        float *bias = st->params + w->shard_off + l * n;
        if (ops->synchronous) {
            tr_bias_step(bias, o->counts + j * E + e0, n, avg, rate);
            continue;
        }
        /* the row (n <= E floats) read, updated on the host, written back */
        ops->read(stream, o->bias_h, bias, sizeof *bias * (size_t)n);
        tr_bias_step(o->bias_h, o->counts + j * E + e0, n, avg, rate);
        ops->write(stream, bias, o->bias_h, sizeof *bias * (size_t)n);
    }
}

void tr_bias_step(float *bias, const double *counts, int64_t n, double avg, double rate)
{
    for (int64_t e = 0; e < n; e++) {
        double d = avg - counts[e];
        float u = (float)((d > 0) - (d < 0)) * (float)rate; /* jnp.sign(...) * rate */
        bias[e] = bias[e] + u;
    }
}

/* AdamW on weight w: the layers whose `first` mark equals `pass` (a top-
 * level weight counts as marked; no marks: the whole stack in pass 0). */
static void update(const smoe_model *model, tr_store *st, const tr_weight *w,
                   const smoe_adamw_cfg *c, const unsigned char *first, int pass)
{
    const smoe_kops *ops = smoe_model_kops(model);
    void *s = smoe_model_stream(model);
    int64_t n = w->info.shard_numel, off = w->shard_off;
    if (!first || w->top) {
        if (pass == 0)
            ops->adamw_step(s, st->params + off, st->m + off, st->v + off, st->grads + off,
                            w->layers * n, c);
        return;
    }
    for (int64_t k = 0; k < w->layers; k++) {
        int64_t o = off + k * n;
        if ((first[w->layer0 + k] ? 0 : 1) == pass)
            ops->adamw_step(s, st->params + o, st->m + o, st->v + o, st->grads + o, n, c);
    }
}

/* The squared global norm of the raw gradient (max_utils.l2norm_pytree):
 * each weight's squares where its gradient lives (one read for all), then
 * each weighted by 1 / its copies, summed over the weights in order and
 * over the ranks. */
static smoe_status grad_sq(tr_optim *o, const smoe_comm *cm, const tr_store *st,
                           const smoe_model *model, double *sq, smoe_err *err)
{
    const smoe_kops *ops = smoe_model_kops(model);
    void *stream = smoe_model_stream(model);
    const size_t bytes = sizeof *o->sq * (size_t)(o->n ? o->n : 1);
    if (!o->sq_d) {
        o->ops = ops, o->stream = stream;
        o->sq_d = ops->synchronous ? NULL : ops->alloc(stream, bytes);
        if (!ops->synchronous && !o->sq_d)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the gradient norm");
    }
    double *d = ops->synchronous ? o->sq : o->sq_d;
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        ops->vec_sumsq(stream, st->grads + w->shard_off, w->layers * w->info.shard_numel, &d[i]);
    }
    if (d != o->sq)
        ops->read(stream, o->sq, d, bytes);
    sq[0] = 0.0;
    for (int i = 0; i < st->n; i++)
        sq[0] += o->sq[i] * o->inv_rep[i];
    smoe_comm_allreduce_sum_f64(cm, sq, 1);
    return SMOE_OK;
}

smoe_status tr_optim_step(tr_optim *o, const smoe_comm *cm, tr_store *st, smoe_model *model,
                          const smoe_model_cfg *mc, const tr_hparams *hp, int64_t step,
                          const tr_optim_split *split, double *lr_out, double *norm_out,
                          smoe_err *err)
{
    const tr_recipe *rc = &hp->rc;
    double sq[1] = { 0.0 };
    smoe_status s = grad_sq(o, cm, st, model, sq, err);
    if (s)
        return s;
    const float norm = (float)sqrt(sq[0]);
    /* clip_by_global_norm: unchanged when norm < threshold, else
     * (g / norm) * threshold */
    smoe_adamw_cfg c = { 0 };
    c.lr = smoe_recipe_lr_at(rc, step); /* scale_by_learning_rate: the schedule at the count */
    c.b1 = (float)hp->b1;
    c.b2 = (float)hp->b2;
    c.eps = (float)hp->eps;
    c.eps_root = (float)rc->eps_root;
    c.t = step + 1;
    if (rc->clip > 0 && !(norm < (float)rc->clip)) {
        c.clip_norm = norm;
        c.clip_max = (float)rc->clip;
    }
    s = o->nbias ? bias_counts(o, cm, model, mc, err) : SMOE_OK;
    if (s)
        return s;
    /* the layers split marks first (with the top-level weights), then the
     * others: per element the same operations, so the same bits */
    for (int pass = 0; pass < (split ? 2 : 1); pass++) {
        for (int i = 0; i < st->n; i++) {
            c.wd = o->wd[i];
            update(model, st, &st->w[i], &c, split ? split->first : NULL, pass);
        }
        if (o->nbias)
            bias_update(o, cm, st, model, mc, rc->bias_rate, split ? split->first : NULL, pass);
        if (split && pass == 0)
            split->then(split->ud);
    }
    *lr_out = (double)c.lr;
    *norm_out = (double)norm;
    return SMOE_OK;
}
