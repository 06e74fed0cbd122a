/* Built-in parameter inventory: the state tree MaxText builds for a model
 * file, with its key strings, shapes and logical axes, for the deepseek,
 * llama2/mistral, mixtral and qwen3_moe decoder blocks. Decoder weights are
 * stacked per scanned stack with the stack's logical name inserted at
 * param_scan_axis. The order is tree-flatten order: .step, params (dict
 * keys sorted), the AdamW count, mu, nu, and the schedule count. */
#include "dims.h"
#include "smoe/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct inv {
    smoe_arena *a;
    smoe_logical_entry *e;
    const char **path; /* params path of e[i] */
    int n, cap;
    int64_t scan_axis;
    smoe_err *err;
} inv;

/* Add params/<path> with per-layer shape/names; stack != NULL inserts the
 * stacked-layer dim (size layers) at the scan axis. */
static smoe_status add(inv *v, const char *path, int rank,
                       const int64_t *shape, const char *const *names,
                       const char *stack, int64_t layers)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 64;
        smoe_logical_entry *e = smoe_arena_alloc(v->a, sizeof *e * (size_t)cap);
        const char **p = smoe_arena_alloc(v->a, sizeof *p * (size_t)cap);
        if (!e || !p)
            return smoe_err_set(v->err, SMOE_ENOMEM, "out of memory");
        if (v->n) {
            memcpy(e, v->e, sizeof *e * (size_t)v->n);
            memcpy(p, v->path, sizeof *p * (size_t)v->n);
        }
        v->e = e;
        v->path = p;
        v->cap = cap;
    }
    smoe_logical_entry *e = &v->e[v->n];
    memset(e, 0, sizeof *e);
    int at = stack ? (int)(v->scan_axis < rank ? v->scan_axis : rank) : -1;
    int r = 0;
    for (int i = 0; i <= rank; i++) {
        if (i == at) {
            e->shape[r] = layers;
            e->names[r++] = stack;
        }
        if (i < rank) {
            e->shape[r] = shape[i];
            e->names[r++] = names[i];
        }
    }
    e->rank = r;
    if (r > SMOE_MAX_RANK)
        return smoe_err_set(v->err, SMOE_EINTERNAL, "rank too large for %s", path);
    v->path[v->n++] = path;
    return SMOE_OK;
}

#define ADD(path, stack, L, ...)                                               \
    do {                                                                       \
        const struct { int64_t s; const char *n; } d_[] = { __VA_ARGS__ };    \
        int64_t sh_[SMOE_MAX_RANK];                                            \
        const char *nm_[SMOE_MAX_RANK];                                        \
        int r_ = (int)(sizeof d_ / sizeof d_[0]);                              \
        for (int i_ = 0; i_ < r_; i_++) {                                      \
            sh_[i_] = d_[i_].s;                                                \
            nm_[i_] = d_[i_].n;                                                \
        }                                                                      \
        smoe_status s_ = add(v, (path), r_, sh_, nm_, (stack), (L));           \
        if (s_)                                                                \
            return s_;                                                         \
    } while (0)
#define D(size, name) { (size), (name) }

static const char *P(inv *v, const char *stack, const char *rest)
{
    return smoe_arena_printf(v->a, "decoder/%s/%s", stack, rest);
}

static smoe_status add_top(inv *v, const model_dims *m)
{
    ADD("token_embedder/embedding", NULL, 0, D(m->vocab, "vocab"), D(m->emb, "embed_vocab"));
    ADD("decoder/decoder_norm/scale", NULL, 0, D(m->emb, "norm"));
    if (!m->logits_via_embedding)
        ADD("decoder/logits_dense/kernel", NULL, 0, D(m->emb, "embed_vocab"), D(m->vocab, "vocab"));
    return SMOE_OK;
}

static smoe_status add_norms(inv *v, const char *st, int64_t L, int64_t emb)
{
    ADD(P(v, st, "pre_self_attention_layer_norm/scale"), st, L, D(emb, "norm"));
    ADD(P(v, st, "post_self_attention_layer_norm/scale"), st, L, D(emb, "norm"));
    return SMOE_OK;
}

/* Dense SwiGLU (or single-activation) MLP under <st>/<mod>. */
static smoe_status add_mlp(inv *v, const model_dims *m, const char *st,
                           int64_t L, const char *mod, int64_t in, int64_t width)
{
    char buf[128];
    if (m->fused_mlp) {
        snprintf(buf, sizeof buf, "%s/wi/kernel", mod);
        ADD(P(v, st, buf), st, L, D(in, "embed"), D(m->n_activations, "num_activations"),
            D(width, "mlp"));
    } else if (m->n_activations == 1) {
        snprintf(buf, sizeof buf, "%s/wi/kernel", mod);
        ADD(P(v, st, buf), st, L, D(in, "embed"), D(width, "mlp"));
    } else {
        for (int64_t i = 0; i < m->n_activations; i++) {
            snprintf(buf, sizeof buf, "%s/wi_%lld/kernel", mod, (long long)i);
            ADD(P(v, st, buf), st, L, D(in, "embed"), D(width, "mlp"));
        }
    }
    snprintf(buf, sizeof buf, "%s/wo/kernel", mod);
    ADD(P(v, st, buf), st, L, D(width, "mlp"), D(m->emb, "embed"));
    return SMOE_OK;
}

/* Routed experts <st>/<mod>/{gate,wi_*,wo} (moe.py RoutedMoE). */
static smoe_status add_routed(inv *v, const model_dims *m, const char *st,
                              int64_t L, const char *mod, const char *gate_axis,
                              int64_t width)
{
    char buf[128];
    const int64_t E = m->experts, in = m->moe_in;
    const char *wi[3] = { "exp", "embed_moe", "mlp_moe" };
    const char *wo[3] = { "exp", "mlp_moe", "embed_moe" };
    if (m->shard_exp_on_fsdp) {
        wi[0] = "embed_moe"; wi[1] = NULL; wi[2] = "mlp_moe";
        wo[0] = "embed_moe"; wo[1] = "mlp_moe"; wo[2] = NULL;
    } else if (m->use_2d_fsdp) {
        wi[0] = wo[0] = "embed_moe"; wi[1] = wo[1] = "mlp_moe"; wi[2] = wo[2] = NULL;
    } else if (m->batch_split) {
        wi[0] = "expert_only"; wi[1] = "embed_moe"; wi[2] = NULL;
        wo[0] = "expert_only"; wo[1] = NULL; wo[2] = "embed_moe";
    }
    snprintf(buf, sizeof buf, "%s/gate/kernel", mod);
    ADD(P(v, st, buf), st, L, D(in, gate_axis), D(E, NULL));
    if (m->routed_bias) {
        snprintf(buf, sizeof buf, "%s/gate/bias", mod);
        ADD(P(v, st, buf), st, L, D(E, NULL));
    }
    for (int64_t i = 0; i < (m->n_activations > 1 ? m->n_activations : 1); i++) {
        if (m->n_activations > 1)
            snprintf(buf, sizeof buf, "%s/wi_%lld", mod, (long long)i);
        else
            snprintf(buf, sizeof buf, "%s/wi", mod);
        ADD(P(v, st, buf), st, L, D(E, wi[0]), D(in, wi[1]), D(width, wi[2]));
    }
    snprintf(buf, sizeof buf, "%s/wo", mod);
    ADD(P(v, st, buf), st, L, D(E, wo[0]), D(width, wo[1]), D(in, wo[2]));
    return SMOE_OK;
}

/* GQA attention (attentions.py) under <st>/self_attention. */
static smoe_status add_gqa(inv *v, const model_dims *m, const char *st, int64_t L)
{
    const int ar = m->context_autoregressive;
    const int64_t H = m->heads, K = m->kv_heads, hd = m->head_dim, e = m->emb;
    if (m->fused_qkv) {
        ADD(P(v, st, "self_attention/qkv_proj/kernel"), st, L, D(e, "embed"),
            D(3, "qkv"), D(H, "heads"), D(hd, "kv"));
    } else {
        ADD(P(v, st, "self_attention/query/kernel"), st, L, D(e, ar ? NULL : "embed"),
            D(H, ar ? NULL : "q_heads"), D(hd, ar ? NULL : "kv"));
        ADD(P(v, st, "self_attention/key/kernel"), st, L, D(e, ar ? NULL : "embed"),
            D(K, ar ? NULL : "kv_heads"), D(hd, ar ? NULL : "kv_head_dim"));
        ADD(P(v, st, "self_attention/value/kernel"), st, L, D(e, ar ? NULL : "embed"),
            D(K, ar ? NULL : "kv_heads"), D(hd, ar ? NULL : "kv_head_dim"));
    }
    ADD(P(v, st, "self_attention/out/kernel"), st, L, D(H, ar ? NULL : "heads"),
        D(hd, ar ? NULL : "kv"), D(e, ar ? NULL : "embed"));
    if (m->use_qk_norm) {
        ADD(P(v, st, "self_attention/query_norm/scale"), st, L, D(hd, "norm"));
        ADD(P(v, st, "self_attention/key_norm/scale"), st, L, D(hd, "norm"));
    }
    return SMOE_OK;
}

/* MLA attention (attention_mla.py) under <st>/self_attention. */
static smoe_status add_mla(inv *v, const model_dims *m, const char *st, int64_t L)
{
    const int64_t H = m->heads, e = m->emb, qk = m->qk_nope + m->qk_rope;
    const int ar = m->context_autoregressive;
    if (m->q_lora == 0) {
        ADD(P(v, st, "self_attention/query/kernel"), st, L, D(e, "embed"), D(H, "q_heads"),
            D(qk, "kv"));
    } else {
        ADD(P(v, st, "self_attention/wq_a/kernel"), st, L, D(e, "embed"),
            D(m->q_lora, "q_lora_up_proj"));
        ADD(P(v, st, "self_attention/q_norm/scale"), st, L, D(m->q_lora, "norm"));
        ADD(P(v, st, "self_attention/wq_b/kernel"), st, L, D(m->q_lora, "q_lora"),
            D(H, "q_heads"), D(qk, "kv"));
    }
    ADD(P(v, st, "self_attention/wkv_a/kernel"), st, L, D(e, "embed"),
        D(m->kv_lora + m->qk_rope, "kv_lora_up_proj"));
    ADD(P(v, st, "self_attention/kv_norm/scale"), st, L, D(m->kv_lora, "norm"));
    ADD(P(v, st, "self_attention/wkv_b/kernel"), st, L, D(m->kv_lora, "kv_lora"),
        D(H, "kv_heads"), D(m->qk_nope + m->v_head, "kv_head_dim"));
    ADD(P(v, st, "self_attention/out/kernel"), st, L, D(H, ar ? NULL : "heads"),
        D(m->v_head, ar ? NULL : "kv"), D(e, ar ? NULL : "embed"));
    return SMOE_OK;
}

static smoe_status enum_deepseek(inv *v, const model_dims *m)
{
    smoe_status s;
    const int64_t nd = m->first_dense, nm = m->layers - m->first_dense;
    if ((s = add_top(v, m)))
        return s;
    if (nd > 0) {
        if ((s = add_norms(v, "dense_layers", nd, m->emb)) ||
            (s = add_mla(v, m, "dense_layers", nd)) ||
            (s = add_mlp(v, m, "dense_layers", nd, "mlp", m->emb, m->mlp)))
            return s;
    }
    if (nm > 0) {
        if ((s = add_norms(v, "moe_layers", nm, m->emb)) ||
            (s = add_mla(v, m, "moe_layers", nm)) ||
            (s = add_routed(v, m, "moe_layers", nm, "DeepSeekMoeBlock_0/MoeBlock_0",
                            "embed_moe", m->moe_mlp)))
            return s;
        if (m->shared_experts > 0 &&
            (s = add_mlp(v, m, "moe_layers", nm, "DeepSeekMoeBlock_0/shared_experts",
                         m->moe_in, m->shared_experts * m->moe_mlp)))
            return s;
    }
    return SMOE_OK;
}

static smoe_status enum_llama(inv *v, const model_dims *m)
{
    smoe_status s;
    if ((s = add_top(v, m)) || (s = add_norms(v, "layers", m->layers, m->emb)) ||
        (s = add_gqa(v, m, "layers", m->layers)) ||
        (s = add_mlp(v, m, "layers", m->layers, "mlp", m->emb, m->mlp)))
        return s;
    return SMOE_OK;
}

static smoe_status enum_mixtral(inv *v, const model_dims *m, int qwen)
{
    smoe_status s;
    if ((s = add_top(v, m)) || (s = add_norms(v, "layers", m->layers, m->emb)) ||
        (s = add_gqa(v, m, "layers", m->layers)) ||
        (s = add_routed(v, m, "layers", m->layers, qwen ? "moe_block" : "MoeBlock_0",
                        "embed", qwen ? m->moe_mlp : m->mlp)))
        return s;
    return SMOE_OK;
}

/* Compare two params paths component by component (tree-flatten order). */
static int path_cmp(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    for (;;) {
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        size_t l = la < lb ? la : lb;
        int c = memcmp(a, b, l);
        if (c)
            return c;
        if (la != lb)
            return la < lb ? -1 : 1;
        if (!a[la] || !b[lb])
            return a[la] ? 1 : b[lb] ? -1 : 0;
        a += la + 1;
        b += lb + 1;
    }
}

static char *key_of(smoe_arena *a, const char *prefix, const char *path)
{
    size_t n = strlen(prefix) + 5 * strlen(path) + 8;
    char *k = smoe_arena_alloc(a, n);
    if (!k)
        return NULL;
    size_t j = (size_t)snprintf(k, n, "%s['", prefix);
    for (const char *p = path; *p; p++) {
        if (*p == '/')
            j += (size_t)snprintf(k + j, n - j, "']/['");
        else
            k[j++] = *p;
    }
    snprintf(k + j, n - j, "']");
    return k;
}

smoe_status smoe_inventory_build(const smoe_config *cfg, smoe_arena *a,
                                 smoe_logical_entry **out, int *n,
                                 smoe_err *err)
{
    model_dims m;
    smoe_status s = plan_read_dims(cfg, &m, err);
    if (s)
        return s;
    inv v = { a, NULL, NULL, 0, 0, m.scan_axis, err };
    smoe_loc db = smoe_config_loc(cfg, "decoder_block");
    if (!m.scan_layers)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "scan_layers"),
                           "the built-in enumeration (and FSDP prefetch) needs "
                           "scan_layers=true");
    if (m.mtp_layers > 0)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "mtp_num_layers"),
                           "multi-token prediction layers are not in the built-in "
                           "enumeration; pass --params with MaxText's "
                           "logical_shardings.json");
    const char *blk = m.decoder_block;
    if (strcmp(blk, "deepseek") == 0)
        s = enum_deepseek(&v, &m);
    else if (strcmp(blk, "llama2") == 0 || strcmp(blk, "mistral") == 0)
        s = enum_llama(&v, &m);
    else if (strcmp(blk, "mixtral") == 0)
        s = enum_mixtral(&v, &m, 0);
    else if (strcmp(blk, "qwen3_moe") == 0)
        s = enum_mixtral(&v, &m, 1);
    else
        return smoe_err_at(err, SMOE_EINVAL, db,
                           "decoder_block '%s' has no built-in enumeration (known: "
                           "deepseek, llama2, mistral, mixtral, qwen3_moe); pass "
                           "--params with MaxText's logical_shardings.json", blk);
    if (s)
        return s;
    /* sort params by path, carrying entries along */
    int np = v.n;
    int *idx = smoe_arena_alloc(a, sizeof *idx * (size_t)(np ? np : 1));
    const char **sorted = smoe_arena_alloc(a, sizeof *sorted * (size_t)(np ? np : 1));
    smoe_logical_entry *e = smoe_arena_alloc(a, sizeof *e * (size_t)(3 * np + 3));
    if (!idx || !sorted || !e)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < np; i++)
        sorted[i] = v.path[i];
    qsort(sorted, (size_t)np, sizeof *sorted, path_cmp);
    for (int i = 0; i < np; i++)
        for (int j = 0; j < np; j++)
            if (sorted[i] == v.path[j]) {
                idx[i] = j;
                break;
            }
    int k = 0;
    smoe_loc none = { NULL, 0, 0 };
    e[k].key = ".step";
    e[k].rank = 0;
    e[k++].loc = none;
    static const char *const pre[3] = { ".params/['params']/",
                                        ".opt_state/[0]/.mu/['params']/",
                                        ".opt_state/[0]/.nu/['params']/" };
    for (int part = 0; part < 3; part++) {
        if (part == 1) {
            e[k].key = ".opt_state/[0]/.count";
            e[k].rank = 0;
            e[k++].loc = none;
        }
        for (int i = 0; i < np; i++) {
            e[k] = v.e[idx[i]];
            e[k].key = key_of(a, pre[part], v.path[idx[i]]);
            if (!e[k].key)
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            e[k++].loc = db;
        }
    }
    e[k].key = ".opt_state/[2]/.count";
    e[k].rank = 0;
    e[k++].loc = none;
    *out = e;
    *n = k;
    return SMOE_OK;
}
