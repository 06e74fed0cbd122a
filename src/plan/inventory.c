/* Built-in parameter inventory: the state tree MaxText builds for a model
 * file, with its key strings, shapes and logical axes. This file holds the
 * machinery (entries, layer placement, tree-flatten order) and the table of
 * decoder blocks; each family lives in its own inv_<family>.c and cites the
 * MaxText model code it follows. The order is tree-flatten order: .step,
 * params (dict keys sorted), the AdamW count, mu, nu, and the schedule
 * count. */
#include "inv_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const inv_at inv_top = { "", NULL, 0, NULL, 0 };

smoe_status inv_add(inv *v, const inv_at *at, const char *rest, int rank,
                    const int64_t *shape, const char *const *names)
{
    if (!at->prefix || !rest)
        return smoe_err_set(v->err, SMOE_ENOMEM, "out of memory");
    const char *path = at->prefix[0] ? inv_fmt(v, "%s/%s", at->prefix, rest) : rest;
    if (!path)
        return smoe_err_set(v->err, SMOE_ENOMEM, "out of memory");
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
    int nstack = (at->L > 0) + (at->L_in > 0);
    if (rank + nstack > SMOE_MAX_RANK)
        return smoe_err_set(v->err, SMOE_EINTERNAL, "rank too large for %s", path);
    int r = rank;
    for (int i = 0; i < rank; i++) {
        e->shape[i] = shape[i];
        e->names[i] = names[i];
    }
    /* inner stack first, then the outer one, each at the scan axis */
    for (int k = 0; k < 2; k++) {
        int64_t len = k ? at->L : at->L_in;
        const char *nm = k ? at->stack : at->inner;
        if (len <= 0)
            continue;
        int d = (int)(v->scan_axis < r ? v->scan_axis : r);
        for (int i = r; i > d; i--) {
            e->shape[i] = e->shape[i - 1];
            e->names[i] = e->names[i - 1];
        }
        e->shape[d] = len;
        e->names[d] = nm;
        r++;
    }
    e->rank = r;
    v->path[v->n++] = path;
    return SMOE_OK;
}

const char *inv_fmt(inv *v, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof buf)
        return NULL;
    return smoe_arena_printf(v->a, "%s", buf);
}

inv_at inv_sub(inv *v, const inv_at *at, const char *name)
{
    inv_at s = *at;
    s.prefix = at->prefix && name ? (at->prefix[0] ? inv_fmt(v, "%s/%s", at->prefix, name)
                                                   : name)
                                  : NULL;
    return s;
}

/* Bounds of a config value the enumeration reads: products of two stay
 * inside int64 (hostile configs), -1 is MaxText's "unset". */
#define INV_MAX_VALUE 2147483647LL

smoe_status inv_int(inv *v, const char *key, int64_t def, int64_t *out)
{
    if (!smoe_config_get(v->cfg, key)) {
        *out = def;
        return SMOE_OK;
    }
    TRY(smoe_config_int(v->cfg, key, out, v->err));
    if (*out < -1 || *out > INV_MAX_VALUE)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, key),
                           "'%s' must be between -1 and %lld, got %lld", key, INV_MAX_VALUE,
                           (long long)*out);
    return SMOE_OK;
}

smoe_status inv_bool(inv *v, const char *key, int *out)
{
    *out = 0;
    if (!smoe_config_get(v->cfg, key))
        return SMOE_OK;
    return smoe_config_bool(v->cfg, key, out, v->err);
}

int64_t inv_list_len(inv *v, const char *key)
{
    const smoe_node *n = smoe_config_get(v->cfg, key);
    return n && n->kind == SMOE_NODE_SEQ ? n->n : 0;
}

smoe_status inv_list_int(inv *v, const char *key, int64_t i, int64_t *out)
{
    const smoe_node *n = smoe_config_get(v->cfg, key);
    if (!n || n->kind != SMOE_NODE_SEQ || i < 0 || i >= n->n)
        return smoe_err_set(v->err, SMOE_EINTERNAL, "'%s' has no item %lld", key,
                            (long long)i);
    const smoe_node *x = n->items[i];
    char digits[32];
    size_t k = 0;
    for (const char *p = x->str; p && *p && k + 1 < sizeof digits; p++)
        if (*p != '_')
            digits[k++] = *p;
    digits[k] = 0;
    char *end = NULL;
    long long val = k ? strtoll(digits, &end, 10) : 0;
    if (x->kind != SMOE_NODE_SCALAR || !k || *end || val < -1 || val > INV_MAX_VALUE)
        return smoe_err_at(v->err, SMOE_EINVAL, x->loc,
                           "'%s' must list integers between -1 and %lld", key, INV_MAX_VALUE);
    *out = val;
    return SMOE_OK;
}

smoe_status inv_layers(inv *v, const model_dims *m, const char *name, int64_t n,
                       int64_t first_idx, inv_layer_fn fn)
{
    if (n <= 0)
        return SMOE_OK;
    if (m->scan_layers) {
        inv_at at = { inv_fmt(v, "decoder/%s", name), name, n, NULL, 0 };
        return fn(v, m, &at, -1);
    }
    for (int64_t i = 0; i < n; i++) {
        inv_at at = { inv_fmt(v, "decoder/%s_%lld", name, (long long)i), NULL, 0, NULL, 0 };
        TRY(fn(v, m, &at, first_idx + i));
    }
    return SMOE_OK;
}

smoe_status inv_decoder(inv *v, const model_dims *m, inv_layer_fn fn)
{
    TRY(inv_top_weights(v, m, 0));
    return inv_layers(v, m, "layers", m->layers, 0, fn);
}

smoe_status inv_cycle(inv *v, const model_dims *m, int64_t n, int64_t cycle,
                      const char *sub, inv_layer_fn fn)
{
    if (!m->scan_layers) {
        for (int64_t i = 0; i < n; i++) {
            inv_at at = { inv_fmt(v, "decoder/layers_%lld", (long long)i), NULL, 0, NULL, 0 };
            TRY(fn(v, m, &at, i));
        }
        return SMOE_OK;
    }
    inv_at blk = { "decoder/layers", "layers", n / cycle, NULL, 0 };
    for (int64_t k = 0; k < cycle; k++) {
        inv_at at = inv_sub(v, &blk, inv_fmt(v, "%s_%lld", sub, (long long)k));
        TRY(fn(v, m, &at, k));
    }
    return SMOE_OK;
}

const char *inv_model_name(inv *v)
{
    const smoe_node *n = smoe_config_get(v->cfg, "model_name");
    if (n && n->kind == SMOE_NODE_SCALAR && n->str && strcmp(n->str, "default") != 0 &&
        n->str[0])
        return n->str;
    /* a model given as a file: decoder_block comes from it, not from the
     * file that says model_name (the base file) */
    smoe_loc l = smoe_config_loc(v->cfg, "decoder_block");
    smoe_loc nl = smoe_config_loc(v->cfg, "model_name");
    if (!l.file || (nl.file && strcmp(nl.file, l.file) == 0))
        return NULL;
    const char *b = strrchr(l.file, '/');
    b = b ? b + 1 : l.file;
    size_t len = strlen(b);
    if (len > 4 && strcmp(b + len - 4, ".yml") == 0)
        len -= 4;
    return smoe_arena_printf(v->a, "%.*s", (int)len, b);
}

smoe_status inv_cycle_len(inv *v, const model_dims *m, int64_t *cycle)
{
    TRY(inv_int(v, "inhomogeneous_layer_cycle_interval", 1, cycle));
    if (*cycle < 1 || (m->scan_layers && m->layers % *cycle != 0))
        return smoe_err_at(v->err, SMOE_EINVAL,
                           smoe_config_loc(v->cfg, "inhomogeneous_layer_cycle_interval"),
                           "inhomogeneous_layer_cycle_interval (%lld) must be >= 1 and divide "
                           "the number of decoder layers (%lld) when layers are scanned",
                           (long long)*cycle, (long long)m->layers);
    return SMOE_OK;
}

/* The decoder blocks with a built-in enumeration. */
static const struct {
    const char *block;
    smoe_status (*fn)(inv *v, const model_dims *m);
} k_blocks[] = {
    { "deepseek", inv_deepseek },
    { "deepseek4", inv_deepseek4 },
    { "envy", inv_envy },
    { "gemma", inv_gemma },
    { "gemma2", inv_gemma2 },
    { "gemma3", inv_gemma3 },
    { "gemma4", inv_gemma4 },
    { "gemma4_small", inv_gemma4_small },
    { "gpt3", inv_gpt3 },
    { "gpt_oss", inv_gpt_oss },
    { "llama2", inv_llama },
    { "llama4", inv_llama4 },
    { "mistral", inv_llama },
    { "mixtral", inv_mixtral },
    { "olmo3", inv_olmo3 },
    { "qwen2", inv_qwen2 },
    { "qwen3", inv_qwen3 },
    { "qwen3_5", inv_qwen_hybrid },
    { "qwen3_custom_moe", inv_qwen3_custom_moe },
    { "qwen3_moe", inv_qwen3_moe },
    { "qwen3_next", inv_qwen_hybrid },
};

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

/* The multimodal towers the built-in enumeration knows (use_multimodal,
 * use_audio), their weights added to v. */
static smoe_status add_towers(inv *v, const smoe_config *cfg, const model_dims *m, smoe_err *err)
{
    int mm = 0, audio = 0;
    smoe_status s;
    if ((smoe_config_get(cfg, "use_multimodal") &&
         (s = smoe_config_bool(cfg, "use_multimodal", &mm, err))) ||
        (smoe_config_get(cfg, "use_audio") && (s = smoe_config_bool(cfg, "use_audio", &audio, err))))
        return s;
    if (mm) {
        const smoe_node *vb = smoe_config_get(cfg, "vision_encoder_block");
        const char *venc = vb && vb->kind == SMOE_NODE_SCALAR && vb->str ? vb->str : "";
        if (strcmp(venc, "qwen3_vl") != 0 && strcmp(venc, "qwen3_omni") != 0)
            return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "use_multimodal"),
                               "the vision encoder '%s' is not in the built-in enumeration "
                               "(known: qwen3_vl, qwen3_omni); pass --params with MaxText's "
                               "logical_shardings.json", venc);
        if ((s = inv_qwen3_vision(v, m, venc)))
            return s;
    }
    return audio ? inv_qwen3_audio(v, m) : SMOE_OK;
}

/* The decoder's weights by its decoder_block (k_blocks), added to v. */
static smoe_status add_decoder(inv *v, const model_dims *m, smoe_loc db, smoe_err *err)
{
    const char *blk = m->decoder_block;
    size_t nb = sizeof k_blocks / sizeof k_blocks[0], b = 0;
    while (b < nb && strcmp(blk, k_blocks[b].block) != 0)
        b++;
    if (b < nb)
        return k_blocks[b].fn(v, m);
    char known[512];
    size_t j = 0;
    for (size_t i = 0; i < nb; i++)
        j += (size_t)snprintf(known + j, sizeof known - j, "%s%s", i ? ", " : "",
                              k_blocks[i].block);
    return smoe_err_at(err, SMOE_EINVAL, db,
                       "decoder_block '%s' has no built-in enumeration (known: "
                       "%s); pass --params with MaxText's logical_shardings.json",
                       blk, known);
}

/* Every weight a real tensor whose bytes fit in int64 (dims from hostile
 * configs: a negative or zero width, a product of several large ones). */
static smoe_status check_sizes(const inv *v, smoe_loc db, smoe_err *err)
{
    for (int i = 0; i < v->n; i++) {
        int64_t elems = 1;
        for (int d = 0; d < v->e[i].rank; d++) {
            int64_t x = v->e[i].shape[d];
            if (x < 1 || elems > (INT64_MAX / 16) / x)
                return smoe_err_at(err, SMOE_EINVAL, db,
                                   "weight %s: dimension %d is %lld: the model's dimensions "
                                   "give no tensor smoe can hold (each >= 1, at most 2^59 "
                                   "bytes)", v->path[i], d, (long long)x);
            elems *= x;
        }
    }
    return SMOE_OK;
}

/* A rank-0 entry (a step counter). */
static smoe_logical_entry counter(const char *key)
{
    smoe_logical_entry c;
    memset(&c, 0, sizeof c);
    c.key = key;
    return c;
}

/* The state's entries as MaxText's logical_shardings.json lists them: the
 * step, the params sorted by path, then AdamW's count, mu and nu of each,
 * and the schedule's count. */
static smoe_status state_entries(inv *v, smoe_arena *a, smoe_loc db, smoe_logical_entry **out,
                                 int *n, smoe_err *err)
{
    int np = v->n;
    int *idx = smoe_arena_alloc(a, sizeof *idx * (size_t)(np ? np : 1));
    const char **sorted = smoe_arena_alloc(a, sizeof *sorted * (size_t)(np ? np : 1));
    smoe_logical_entry *e = smoe_arena_alloc(a, sizeof *e * (size_t)(3 * np + 3));
    if (!idx || !sorted || !e)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < np; i++)
        sorted[i] = v->path[i];
    qsort(sorted, (size_t)np, sizeof *sorted, path_cmp);
    for (int i = 0; i < np; i++)
        for (int j = 0; j < np; j++)
            if (sorted[i] == v->path[j]) {
                idx[i] = j;
                break;
            }
    int k = 0;
    e[k++] = counter(".step");
    static const char *const pre[3] = { ".params/['params']/",
                                        ".opt_state/[0]/.mu/['params']/",
                                        ".opt_state/[0]/.nu/['params']/" };
    for (int part = 0; part < 3; part++) {
        if (part == 1)
            e[k++] = counter(".opt_state/[0]/.count");
        for (int i = 0; i < np; i++) {
            e[k] = v->e[idx[i]];
            e[k].key = key_of(a, pre[part], v->path[idx[i]]);
            if (!e[k].key)
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            e[k++].loc = db;
        }
    }
    e[k++] = counter(".opt_state/[2]/.count");
    *out = e;
    *n = k;
    return SMOE_OK;
}

smoe_status smoe_inventory_build(const smoe_config *cfg, smoe_arena *a,
                                 smoe_logical_entry **out, int *n,
                                 smoe_err *err)
{
    model_dims m;
    smoe_status s = plan_read_dims(cfg, &m, err);
    if (s)
        return s;
    inv v = { a, cfg, NULL, NULL, 0, 0, m.scan_axis, 0, err };
    smoe_loc db = smoe_config_loc(cfg, "decoder_block");
    if (m.mtp_layers > 0 && strcmp(m.decoder_block, "deepseek") != 0)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "mtp_num_layers"),
                           "multi-token prediction layers are in the built-in enumeration "
                           "for decoder_block deepseek only; pass --params with MaxText's "
                           "logical_shardings.json");
    if ((s = add_towers(&v, cfg, &m, err)) || (s = add_decoder(&v, &m, db, err)) ||
        (s = check_sizes(&v, db, err)))
        return s;
    return state_entries(&v, a, db, out, n, err);
}
