/* The store as the ckpt module sees it: this rank's parameter and AdamW
 * moment slabs and, per weight, its per-layer shape, state spec and shard
 * placement (what the bytes of a shard mean). */
#include "train_impl.h"

#include <string.h>

/* st's weights described into x (st->n of them) */
static void store_weights(const tr_store *st, smoe_ckpt_weight *x)
{
    for (int i = 0; i < st->n; i++) {
        const tr_weight *w = &st->w[i];
        x[i].path = w->pw->path;
        x[i].lrank = w->lrank;
        memcpy(x[i].lshape, w->lshape, sizeof x[i].lshape);
        x[i].lspec = w->lspec;
        x[i].layers = w->layers;
        x[i].shard_numel = w->info.shard_numel;
        x[i].shard_offset = w->shard_off;
    }
}

/* The state of st (its weights in w, n >= st->n of them). */
static smoe_ckpt_state store_state(const tr_store *st, smoe_ckpt_weight *w)
{
    store_weights(st, w);
    smoe_ckpt_state cs = { st->n, w, st->total, st->params_h, st->m_h, st->v_h };
    return cs;
}

smoe_status tr_ckpt_save(const smoe_comm *cm, tr_ckpt *ck, const tr_store *st,
                         const tr_ckpt_opts *co, smoe_err *err)
{
    smoe_ckpt_weight *w = smoe_calloc((size_t)(st->n ? st->n : 1), sizeof *w);
    smoe_status s = w ? SMOE_OK : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if ((s = smoe_comm_agree_err(cm, s, err))) {
        smoe_free(w);
        return s;
    }
    smoe_ckpt_state cs = store_state(st, w);
    s = smoe_ckpt_save(cm, ck, &cs, co, err);
    smoe_free(w);
    return s;
}

_Static_assert(sizeof((smoe_train_result *)0)->resumed_from ==
                       sizeof((smoe_ckpt_resume *)0)->from &&
                   sizeof((smoe_train_result *)0)->resume_note ==
                       sizeof((smoe_ckpt_resume *)0)->note,
               "the result holds what a load found");

smoe_status tr_ckpt_load(const smoe_comm *cm, tr_store *st, tr_ckpt_opts *co,
                         smoe_train_result *res, smoe_err *err)
{
    smoe_ckpt_weight *w = smoe_calloc((size_t)(st->n ? st->n : 1), sizeof *w);
    smoe_ckpt_resume *r = smoe_calloc(1, sizeof *r);
    smoe_status s = w && r ? SMOE_OK : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (!(s = smoe_comm_agree_err(cm, s, err))) {
        smoe_ckpt_state cs = store_state(st, w);
        s = smoe_ckpt_load(cm, &cs, co, r, err);
        res->first_step = r->first_step;
        memcpy(res->resumed_from, r->from, sizeof r->from);
        memcpy(res->resume_note, r->note, sizeof r->note);
        res->nchanges = r->nchanges; /* taken over: smoe_train_result_free */
        res->changes = r->changes;
    }
    smoe_free(r);
    smoe_free(w);
    return s;
}
