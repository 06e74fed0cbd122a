/* Digests of what every rank must agree on before the first collective:
 * the merged configuration, the plan, the run options and the training
 * data. They are compared across ranks (smoe_comm_check_same) and recorded
 * in checkpoint manifests. */
#include "train_impl.h"

#include <stdio.h>
#include <string.h>

static void put_str(tr_sha *h, const char *s)
{
    size_t n = s ? strlen(s) + 1 : 0;
    tr_sha_update(h, &n, sizeof n);
    if (n)
        tr_sha_update(h, s, n);
}

static void put_i64(tr_sha *h, int64_t v) { tr_sha_update(h, &v, sizeof v); }

static void put_node(tr_sha *h, const smoe_node *n)
{
    put_i64(h, n ? (int64_t)n->kind : -1);
    if (!n)
        return;
    if (n->kind == SMOE_NODE_SCALAR) {
        put_i64(h, n->plain);
        put_str(h, n->str);
        return;
    }
    put_i64(h, n->n);
    for (int i = 0; i < n->n; i++) {
        if (n->kind == SMOE_NODE_MAP)
            put_str(h, n->keys[i]);
        put_node(h, n->items[i]);
    }
}

static void put_spec(tr_sha *h, const smoe_pspec *p)
{
    char buf[512];
    put_str(h, smoe_pspec_format(p, 0, buf, sizeof buf));
}

smoe_status tr_fingerprint(const smoe_config *cfg, const smoe_plan *plan,
                           const smoe_train_opts *o, const smoe_comm *cm, const tr_data *data,
                           tr_fingerprint_t *fp, smoe_err *err)
{
    tr_sha *h[4] = { tr_sha_new(), tr_sha_new(), tr_sha_new(), tr_sha_new() };
    if (!h[0] || !h[1] || !h[2] || !h[3]) {
        char scratch[65];
        for (int i = 0; i < 4; i++)
            if (h[i])
                tr_sha_final(h[i], scratch);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    const smoe_node *v;
    const char *k;
    for (int i = 0; (k = smoe_config_key_at(cfg, i, &v)) != NULL; i++) {
        put_str(h[0], k);
        put_node(h[0], v);
    }
    for (int a = 0; a < plan->mesh.n; a++) {
        put_str(h[1], plan->mesh.name[a]);
        put_i64(h[1], plan->mesh.size[a]);
    }
    for (int i = 0; i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        put_str(h[1], w->key);
        put_i64(h[1], w->rank);
        for (int d = 0; d < w->rank; d++)
            put_i64(h[1], w->shape[d]);
        put_spec(h[1], &w->spec);
        put_spec(h[1], &w->use_spec);
        if (w->has_gather) /* what its gathers move (smoe_plan_set_wire) */
            put_i64(h[1], w->gather.wire);
    }
    put_i64(h[1], plan->gather_dtype == SMOE_DT_INT8 ? plan->int8_block : 0);
    int64_t set[SMOE_COMM_NSETTINGS]; /* the runtime's queues and thread */
    smoe_comm_settings(cm, set);
    int64_t opts[] = { o->steps, (int64_t)o->seed, o->nschedules,
                       o->ckpt_every, o->resume, set[0], set[1], o->reduce_dtype };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        put_i64(h[2], opts[i]);
    put_str(h[2], o->ckpt_dir);
    put_i64(h[3], data ? data->n : -1); /* NULL: batches from the caller */
    if (data)
        tr_sha_update(h[3], data->text, (size_t)data->n);
    tr_sha_final(h[0], fp->config);
    tr_sha_final(h[1], fp->plan);
    tr_sha_final(h[2], fp->options);
    tr_sha_final(h[3], fp->data);
    return SMOE_OK;
}

void tr_wire_text(const smoe_plan *plan, int reduce_dtype, char *buf, size_t n)
{
    if (plan->gather_dtype == SMOE_DT_INT8)
        snprintf(buf, n, "gathers int8 (block %lld%s%s), reductions %s",
                 (long long)plan->int8_block, plan->wire_fallbacks ? ", fallback " : "",
                 plan->wire_fallbacks ? smoe_dtype_name(plan->int8_fallback) : "",
                 smoe_dtype_name((smoe_dtype)reduce_dtype));
    else
        snprintf(buf, n, "gathers %s, reductions %s", smoe_dtype_name(plan->gather_dtype),
                 smoe_dtype_name((smoe_dtype)reduce_dtype));
}

smoe_status tr_fingerprint_check(const smoe_comm *cm, const tr_fingerprint_t *fp, smoe_err *err)
{
    static const char *const names[] = { ("configuration (merged config files, overrides "
                                          "and MAXTEXT_* environment)"),
                                         "plan (mesh or sharding)", "set of run options",
                                         "training data file" };
    const char *d[] = { fp->config, fp->plan, fp->options, fp->data };
    return smoe_comm_check_same(cm, 4, names, d, err);
}
