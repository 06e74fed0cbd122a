/* Engram layers of the deepseek block (engram_layers), after MaxText e591f30
 * src/maxtext/layers/engram.py and src/maxtext/models/deepseek.py:
 *   engram_layer_norm                 RMSNorm (norm)
 *   engram/multi_head_embedding/embedding/embedding
 *                                     one table of the summed n-gram head
 *                                     vocabularies (vocab, embed_vocab)
 *   engram/key_proj                   (engram_dim, mhc, embed) with bias
 *   engram/k_norm, engram/q_norm, engram/short_conv/norm
 *                                     RMSNorms vmapped over the mhc
 *                                     branches: (branches, emb), the vmap
 *                                     adding an unnamed leading axis
 *   engram/value_proj                 (engram_dim, embed) with bias
 *   engram/short_conv/conv            depthwise nnx.Conv, no axes
 * engram_dim = engram_head_dim * engram_num_heads * (max_ngram_size - 1).
 * The head vocabularies are NgramHashMapping's: for each engram layer in
 * list order and each n-gram order n, engram_num_heads primes, each the
 * first prime above the previous one (starting at engram_vocab_bases[n-2])
 * not used before by any layer.
 * Scanned (decoders.py _apply_interleaved_scanned_layers): an engram layer
 * is unscanned as <stack>_engram_<i>; the runs between them are scans named
 * <stack>_<first>_<last>. */
#include "inv_impl.h"

static int is_prime(int64_t n)
{
    if (n < 2)
        return 0;
    for (int64_t d = 2; d * d <= n; d++)
        if (n % d == 0)
            return 0;
    return 1;
}

static smoe_status engram_list(inv *v, int64_t *ids, int64_t *n)
{
    *n = inv_list_len(v, "engram_layers");
    if (*n > 64)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "engram_layers"),
                           "engram_layers may list at most 64 layers");
    for (int64_t i = 0; i < *n; i++)
        TRY(inv_list_int(v, "engram_layers", i, &ids[i]));
    return SMOE_OK;
}

int inv_is_engram_layer(inv *v, int64_t idx)
{
    int64_t ids[64], n;
    if (idx < 0 || engram_list(v, ids, &n))
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] == idx)
            return 1;
    return 0;
}

/* Sum of layer idx's head vocabularies. */
static smoe_status vocab_total(inv *v, int64_t idx, int64_t *total)
{
    int64_t ids[64], n, heads, maxn;
    TRY(engram_list(v, ids, &n));
    TRY(inv_int(v, "engram_num_heads", 8, &heads));
    TRY(inv_int(v, "engram_max_ngram_size", 3, &maxn));
    if (heads < 1 || heads > 64 || maxn < 2 || maxn - 1 > inv_list_len(v, "engram_vocab_bases"))
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "engram_vocab_bases"),
                           "engram needs 1..64 heads and one vocabulary base per n-gram order "
                           "(2..engram_max_ngram_size)");
    /* bounded work for hostile configs: at most 4096 head vocabularies, each
     * base below 2^26 (MaxText's use 226240) */
    if (n * (maxn - 1) * heads > 4096)
        return smoe_err_at(v->err, SMOE_EINVAL, smoe_config_loc(v->cfg, "engram_layers"),
                           "engram: at most 4096 head vocabularies (layers x n-gram orders x "
                           "heads) in the built-in enumeration");
    int64_t seen[4096];
    int nseen = 0;
    for (int64_t l = 0; l < n; l++) {
        int64_t sum = 0;
        for (int64_t g = 2; g <= maxn; g++) {
            int64_t start;
            TRY(inv_list_int(v, "engram_vocab_bases", g - 2, &start));
            if (start < 1 || start >= (1LL << 26))
                return smoe_err_at(v->err, SMOE_EINVAL,
                                   smoe_config_loc(v->cfg, "engram_vocab_bases"),
                                   "engram_vocab_bases must be between 1 and 2^26");
            start -= 1;
            for (int64_t h = 0; h < heads; h++) {
                int64_t c = start + 1;
                for (;;) {
                    int used = 0;
                    for (int s = 0; s < nseen && !used; s++)
                        used = seen[s] == c;
                    if (!used && is_prime(c))
                        break;
                    c++;
                }
                if (nseen < (int)(sizeof seen / sizeof seen[0]))
                    seen[nseen++] = c;
                sum += c;
                start = c;
            }
        }
        if (ids[l] == idx) {
            *total = sum;
            return SMOE_OK;
        }
    }
    return smoe_err_set(v->err, SMOE_EINTERNAL, "layer %lld is no engram layer", (long long)idx);
}

smoe_status inv_engram(inv *v, const model_dims *m, const inv_at *at, int64_t idx)
{
    if (!inv_is_engram_layer(v, idx))
        return SMOE_OK;
    int64_t heads, hd, maxn, kernel, g, vocab;
    TRY(inv_int(v, "engram_num_heads", 8, &heads));
    TRY(inv_int(v, "engram_head_dim", 1280, &hd));
    TRY(inv_int(v, "engram_max_ngram_size", 3, &maxn));
    TRY(inv_int(v, "engram_kernel_size", 4, &kernel));
    TRY(inv_int(v, "mhc_expansion_rate", 1, &g));
    TRY(vocab_total(v, idx, &vocab));
    const int64_t e = m->emb, ed = inv_mul(inv_mul(hd, heads), maxn - 1);
    TRY(inv_norm(v, at, "engram_layer_norm", e));
    INV_ADD(at, "engram/multi_head_embedding/embedding/embedding", D(vocab, "vocab"),
            D(hd, "embed_vocab"));
    INV_ADD(at, "engram/key_proj/kernel", D(ed, "engram_dim"), D(g, "mhc"), D(e, "embed"));
    INV_ADD(at, "engram/key_proj/bias", D(g, "mhc"), D(e, "embed"));
    INV_ADD(at, "engram/k_norm/scale", D(g, NULL), D(e, "norm"));
    INV_ADD(at, "engram/q_norm/scale", D(g, NULL), D(e, "norm"));
    INV_ADD(at, "engram/value_proj/kernel", D(ed, "engram_dim"), D(e, "embed"));
    INV_ADD(at, "engram/value_proj/bias", D(e, "embed"));
    INV_ADD(at, "engram/short_conv/norm/scale", D(g, NULL), D(e, "norm"));
    INV_PLAIN(at, "engram/short_conv/conv/kernel", D(kernel, NULL), D(1, NULL), D(g * e, NULL));
    return SMOE_OK;
}

smoe_status inv_engram_stack(inv *v, const model_dims *m, const char *name, int64_t start,
                             int64_t end, inv_layer_fn fn)
{
    int64_t cur = start;
    while (cur < end) {
        if (inv_is_engram_layer(v, cur)) {
            inv_at at = { inv_fmt(v, "decoder/%s_engram_%lld", name, (long long)cur), NULL, 0,
                          NULL, 0 };
            TRY(fn(v, m, &at, cur));
            cur++;
            continue;
        }
        int64_t next = cur + 1;
        while (next < end && !inv_is_engram_layer(v, next))
            next++;
        const char *stack = inv_fmt(v, "%s_%lld_%lld", name, (long long)cur, (long long)(next - 1));
        inv_at at = { inv_fmt(v, "decoder/%s", stack ? stack : ""), stack, next - cur, NULL, 0 };
        TRY(fn(v, m, &at, -1));
        cur = next;
    }
    return SMOE_OK;
}
