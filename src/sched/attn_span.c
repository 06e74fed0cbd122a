/* The attention kernel's work against a causal mask's, as the mean over a
 * model's decoder layers of the blocks each layer's mask leaves the kernel
 * over those of the causal mask (blocks of sa_block_q x sa_block_kv, the
 * forward kernel's: splash attention skips a block its mask wholly masks
 * and computes any other whole). MaxText's masks (layers/attention_op.py at
 * e591f30): a LOCAL_SLIDING layer ANDs the causal mask with a LocalMask of
 * window (W - 1, W), W = sliding_window_size: a query sees its W latest
 * keys; a CHUNK layer with a ChunkedCausalMask of C =
 * chunk_attn_window_size: the keys of its own chunk up to itself; a GLOBAL
 * layer the causal mask. Which layers are which:
 *   gemma3 (models/gemma3.py GEMMA3_ATTENTION_PATTERN), gemma4 (gemma4.py
 *   GEMMA4_ATTENTION_PATTERN): 5 sliding, then 1 global, repeating;
 *   gemma4_small (gemma4_small.py get_attention_pattern): 4 + 1 for model
 *   gemma4-e2b, else 5 + 1;
 *   gpt_oss (gpt_oss.py GPT_OSS_ATTENTION_PATTERN): 1 sliding + 1 global;
 *   llama4 (llama4.py determine_is_nope_layer): CHUNK, but GLOBAL where
 *   (layer + 1) % nope_layer_interval == 0.
 * Any other decoder block, or a window of 0: causal (1). Splash's
 * backward kernels have blocks of their own (sa_block_*_dkv, *_dq): their
 * pairs are counted over theirs.
 * gemma4's global layers are a kind of their own: their heads' widths
 * differ (global_dims). */
#include "sched_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Blocks of bq queries x bk keys the kernel computes over S tokens: every
 * block its mask does not wholly mask (splash attention skips those and
 * computes the rest whole). w > 0: a window of w keys; c > 0: chunks of c;
 * else causal. */
static double mask_blocks(double S, double bq, double bk, double w, double c)
{
    double n = 0;
    for (double q0 = 0; q0 < S; q0 += bq) {
        double q1 = fmin(S, q0 + bq) - 1, k0 = 0; /* queries q0..q1 */
        if (w > 0)
            k0 = fmax(0, q0 - w + 1);
        else if (c > 0)
            k0 = floor(q0 / c) * c;
        n += floor(q1 / bk) - floor(k0 / bk) + 1;
    }
    return n;
}

/* Splash attention's three kernels: the forward, the backward's dkv
 * kernel (the fused backward's one) and its dq kernel. */
static const char *const k_kernel[SIM_ATTN_KERNELS] = { "", "_dkv", "_dq" };

/* A kernel's blocks in a layer: its query and key block sizes (prefix "sa"
 * or "local_sa": MaxText's local layers take local_sa_block_*, None: the
 * global ones', g), each at most S (attention_op.py: min(block, seq)). */
static smoe_status layer_blocks(const smoe_config *cfg, const char *prefix, int kern, double S,
                                const double *g, double b[2], smoe_err *err)
{
    static const char *const dim[2] = { "block_q", "block_kv" };
    for (int i = 0; i < 2; i++) {
        char name[40];
        int64_t v;
        snprintf(name, sizeof name, "%s_%s%s", prefix, dim[i], k_kernel[kern]);
        smoe_status s = smoe_config_int_or(cfg, name, 0, &v, err);
        if (s)
            return s;
        b[i] = fmin(S, v > 0 ? (double)v : g ? g[i] : 512); /* base.yml's */
    }
    return SMOE_OK;
}

/* gemma4's global layers' own widths (gemma4.py / gemma4_small.py: a
 * GLOBAL layer takes global_head_dim and global_num_kv_heads when set and,
 * in gemma4 with share_kv_projections, no value projection); kind 0 the
 * model's. */
static smoe_status global_dims(const smoe_config *cfg, const smoe_dims *d, int gemma4,
                               sim_attn_mix *a, smoe_err *err)
{
    int64_t hd = 0, kv = 0;
    int share = 0;
    smoe_status s;
    a->head_dim[0] = a->head_dim[1] = d->head_dim;
    a->kv_heads[0] = a->kv_heads[1] = d->kv_heads;
    if (!gemma4)
        return SMOE_OK;
    if ((s = smoe_config_int_or(cfg, "global_head_dim", 0, &hd, err)) ||
        (s = smoe_config_int_or(cfg, "global_num_kv_heads", 0, &kv, err)) ||
        (s = smoe_config_bool_or(cfg, "share_kv_projections", 0, &share, err)))
        return s;
    a->head_dim[1] = hd > 0 ? hd : d->head_dim;
    a->kv_heads[1] = kv > 0 ? kv : d->kv_heads;
    a->no_value[1] = share && strcmp(d->decoder_block, "gemma4") == 0;
    return SMOE_OK;
}

/* Which layers are which (the file's head). */
typedef struct masks {
    int64_t w, c, nope;           /* window, chunk, nope interval */
    int period, local, chunked, gemma4;
} masks;

static smoe_status read_masks(const smoe_config *cfg, const smoe_dims *d, masks *m, smoe_err *err)
{
    const char *b = d->decoder_block;
    smoe_status s;
    memset(m, 0, sizeof *m);
    if ((s = smoe_config_int_or(cfg, "sliding_window_size", 0, &m->w, err)) ||
        (s = smoe_config_int_or(cfg, "chunk_attn_window_size", 0, &m->c, err)) ||
        (s = smoe_config_int_or(cfg, "nope_layer_interval", 0, &m->nope, err)))
        return s;
    m->gemma4 = strcmp(b, "gemma4") == 0 || strcmp(b, "gemma4_small") == 0;
    if (strcmp(b, "gemma3") == 0 || strcmp(b, "gemma4") == 0)
        m->period = 6, m->local = 5;
    else if (strcmp(b, "gemma4_small") == 0) {
        const smoe_node *n = smoe_config_get(cfg, "model_name");
        const char *name = n && n->kind == SMOE_NODE_SCALAR ? n->str : "";
        m->period = strcmp(name, "gemma4-e2b") == 0 ? 5 : 6;
        m->local = m->period - 1;
    } else if (strcmp(b, "gpt_oss") == 0)
        m->period = 2, m->local = 1;
    else if (strcmp(b, "llama4") == 0 && m->c > 0)
        m->chunked = 1;
    return SMOE_OK;
}

/* Kernel kern's pairs, mean over each kind's layers, into out->pairs; and
 * the forward's blocks over a causal mask's into out->span. */
static smoe_status kernel_pairs(const smoe_config *cfg, const smoe_dims *d, const masks *m,
                                double S, int kern, sim_attn_mix *out, smoe_err *err)
{
    double gb[2], lb[2]; /* global and local layers' blocks */
    smoe_status s;
    if ((s = layer_blocks(cfg, "sa", kern, S, NULL, gb, err)) ||
        (s = layer_blocks(cfg, "local_sa", kern, S, gb, lb, err)))
        return s;
    const double w = (double)m->w, c = (double)m->c;
    double full = mask_blocks(S, gb[0], gb[1], 0, 0), ga = gb[0] * gb[1];
    double slid = w > 0 ? mask_blocks(S, lb[0], lb[1], w, 0) : full;
    double chunk = c > 0 ? mask_blocks(S, gb[0], gb[1], 0, c) : full;
    double slid_gb = w > 0 ? mask_blocks(S, gb[0], gb[1], w, 0) : full;
    double n[2] = { 0, 0 }, span[2] = { 0, 0 }, pairs[2] = { 0, 0 };
    for (int64_t l = 0; l < d->layers; l++) {
        int is_local = m->period && l % m->period < m->local;
        int is_chunk = !is_local && m->chunked && !(m->nope > 0 && (l + 1) % m->nope == 0);
        int k = m->gemma4 && !is_local; /* gemma4's global layers: kind 1 */
        n[k]++;
        span[k] += is_local ? slid_gb : is_chunk ? chunk : full;
        pairs[k] += is_local ? slid * lb[0] * lb[1] : (is_chunk ? chunk : full) * ga;
    }
    for (int k = 0; k < 2 && full > 0; k++)
        if (n[k] > 0) {
            if (kern == 0)
                out->span[k] = span[k] / (n[k] * full);
            out->pairs[k][kern] = pairs[k] / (n[k] * S * S / 2);
        }
    if (d->layers > 0)
        out->share = n[1] / (double)d->layers;
    return SMOE_OK;
}

smoe_status sim_attention_span(const smoe_config *cfg, const smoe_dims *d, double S,
                               sim_attn_mix *out, smoe_err *err)
{
    masks m;
    smoe_status s;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < 2; k++) {
        out->span[k] = 1;
        for (int j = 0; j < SIM_ATTN_KERNELS; j++)
            out->pairs[k][j] = 1;
    }
    if ((s = read_masks(cfg, d, &m, err)) || (s = global_dims(cfg, d, m.gemma4, out, err)))
        return s;
    for (int j = 0; j < SIM_ATTN_KERNELS && !s; j++)
        s = kernel_pairs(cfg, d, &m, S, j, out, err);
    return s;
}
