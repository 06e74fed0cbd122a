/* MaxText's training recipe as smoe train runs it: the learning-rate
 * schedule, gradient clipping, the optimizer's extra settings (eps_root, the
 * weight-decay mask), the aux-loss-free bias update rate, and the model-side
 * keys (RoPE / YaRN, the MLA softmax scale, the router, the auxiliary
 * losses). Every formula cites the MaxText (commit e591f30) or optax
 * function it follows. The keys smoe train does not implement are refused
 * in recipe_keys.c. */
#include "recipe_impl.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

static smoe_status bad(const smoe_config *c, const char *k, smoe_err *err, const char *why)
{
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, k), "%s: %s", k, why);
}

/* a key that smoe's base.yml may lack: MaxText's default when absent;
 * numeric keys are range-checked by their row of keys.c */
static smoe_status opt_f(const smoe_config *c, const char *k, double def, double *v,
                         smoe_err *err)
{
    *v = def;
    if (!smoe_config_get(c, k))
        return SMOE_OK;
    return rc_key_find(k) ? rc_key_float(c, k, v, err) : smoe_config_float(c, k, v, err);
}

static smoe_status opt_i(const smoe_config *c, const char *k, int64_t def, int64_t *v,
                         smoe_err *err)
{
    *v = def;
    if (!smoe_config_get(c, k))
        return SMOE_OK;
    return rc_key_find(k) ? rc_key_int(c, k, v, err) : smoe_config_int(c, k, v, err);
}

static smoe_status opt_b(const smoe_config *c, const char *k, int def, int *v, smoe_err *err)
{
    *v = def;
    return smoe_config_get(c, k) ? smoe_config_bool(c, k, v, err) : SMOE_OK;
}

static smoe_status opt_s(const smoe_config *c, const char *k, const char *def, const char **v,
                         smoe_err *err)
{
    *v = def;
    return smoe_config_get(c, k) ? smoe_config_str(c, k, v, err) : SMOE_OK;
}

static int prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* ---- the learning-rate schedule ---- */

/* optax.linear_schedule (schedules/_schedule.py polynomial_schedule, power
 * 1): count clipped to [0, T]; (init - end) * (1 - count / T) + end; a
 * constant init when T <= 0. */
static double linear(double init, double end, int64_t T, int64_t count)
{
    if (T <= 0)
        return init;
    double c = (double)(count < 0 ? 0 : count > T ? T : count);
    return (init - end) * (1.0 - c / (double)T) + end;
}

/* make_cos_schedule of maxtext_utils.create_learning_rate_schedule: at
 * e591f30 pct = step / (len - 1) (1 when len <= 1); before e886dd212
 * (the legacy key) pct = step / len. a = (cos(pi pct) + 1) / 2; init * a +
 * final * (1 - a). Within the schedule pct <= 1; past its end (a trainer
 * stepped beyond its steps, which MaxText's loop never does) pct is held at
 * 1, the final value, as optax's cosine_decay_schedule holds its own
 * (count clipped to decay_steps) instead of climbing back. */
static double cosine(double init, double fin, int64_t len, int64_t step, int legacy)
{
    double pct = legacy ? (double)step / (double)len
                        : len > 1 ? (double)step / (double)(len - 1) : 1.0;
    if (pct > 1.0)
        pct = 1.0;
    double a = 0.5 * (cos(3.14159265358979323846 * pct) + 1.0);
    return init * a + fin * (1.0 - a);
}

enum { P_WARMUP, P_COS, P_CONST, P_LINEAR };

/* The pieces and boundaries of create_learning_rate_schedule (maxtext_utils
 * .py), evaluated as optax.join_schedules (schedules/_join.py): the first
 * piece at `count`, then for each boundary b_j the piece j+1 at count - b_j
 * whenever count >= b_j. Returns the number of pieces (0: MaxText would
 * have none and fail). */
static int pieces(const smoe_recipe *r, int kind[4], double val[4], int64_t len[4],
                  int64_t bound[4])
{
    const double lr = r->lr, fin = r->lr * r->final_frac;
    const int64_t S = r->sched_steps;
    const int64_t W = (int64_t)((double)S * r->warmup_frac); /* Python int(): toward 0 */
    int n = 0;
    if (r->legacy) {
        /* before e886dd212: warmup and cosine always, then zeros */
        const int64_t C = S - W;
        kind[n] = P_WARMUP, len[n] = W, bound[n++] = W;
        kind[n] = P_COS, len[n] = C, bound[n++] = W + C;
        if (r->steps - S > 0)
            kind[n] = P_CONST, val[n] = 0.0, bound[n++] = W + C + (r->steps - S);
        return n;
    }
    if (W > 0)
        kind[n] = P_WARMUP, len[n] = W, bound[n++] = W;
    if (!r->wsd) {
        const int64_t C = S - W;
        if (C > 0)
            kind[n] = P_COS, len[n] = C, bound[n++] = W + C;
    } else {
        const int64_t D = (int64_t)((double)S * r->wsd_frac);
        const int64_t stable = S - W - D;
        if (stable > 0)
            kind[n] = P_CONST, val[n] = lr, bound[n++] = W + stable;
        if (D > 0) {
            kind[n] = r->wsd_linear ? P_LINEAR : P_COS;
            len[n] = r->wsd_linear ? D - 1 : D;
            bound[n++] = W + stable + D;
        }
    }
    if (r->steps - S > 0)
        kind[n] = P_CONST, val[n] = 0.0, bound[n++] = S;
    (void)fin;
    return n;
}

static double piece_at(const smoe_recipe *r, int kind, double val, int64_t len, int64_t s)
{
    const double lr = r->lr, fin = r->lr * r->final_frac;
    switch (kind) {
    case P_WARMUP: return linear(0.0, lr, len, s);
    case P_COS: return cosine(lr, fin, len, s, r->legacy);
    case P_LINEAR: return linear(lr, fin, len, s);
    default: return val;
    }
}

float smoe_recipe_lr_at(const smoe_recipe *r, int64_t count)
{
    int kind[4];
    double val[4] = { 0 };
    int64_t len[4] = { 0 }, bound[4] = { 0 };
    int n = pieces(r, kind, val, len, bound);
    if (n == 0)
        return 0.0f;
    double out = piece_at(r, kind[0], val[0], len[0], count);
    for (int j = 0; j + 1 < n; j++)
        if (count >= bound[j])
            out = piece_at(r, kind[j + 1], val[j + 1], len[j + 1], count - bound[j]);
    return (float)out;
}

/* ---- adamw_mask: optimizers.py _get_path_mask_fn / get_adamw_mask ---- */

/* MaxText matches each pattern with Python's re.search against the
 * parameter's path, jax.tree_util.keystr(simple=True, separator="/") of the
 * train state's params ("params/decoder/..."); a parameter matching any
 * pattern does not decay. smoe compiles the patterns as POSIX extended
 * regular expressions, which agree with Python's on the constructs
 * accepted here (recipe_check_mask refuses the others). */
static int mask_syntax_ok(const char *p)
{
    for (const char *q = p; *q; q++) {
        if (*q == '\\')
            return 0; /* \d \w \s \b ... differ or do not exist in POSIX */
        if (q[0] == '(' && q[1] == '?')
            return 0; /* (?:...) (?i) lookarounds */
        if ((q[0] == '*' || q[0] == '+' || q[0] == '?' || q[0] == '}') && q[1] == '?')
            return 0; /* lazy quantifiers */
    }
    return 1;
}

int smoe_recipe_decays(const smoe_recipe *r, const char *path)
{
    char full[512];
    snprintf(full, sizeof full, "params/%s", path);
    for (int i = 0; i < r->nmask; i++) {
        regex_t re;
        if (regcomp(&re, r->mask[i], REG_EXTENDED | REG_NOSUB) != 0)
            continue; /* checked when read */
        int hit = regexec(&re, full, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit)
            return 0;
    }
    return 1;
}

static smoe_status read_mask(const smoe_config *c, smoe_recipe *r, smoe_err *err)
{
    const smoe_node *n = smoe_config_get(c, "adamw_mask");
    r->nmask = 0;
    if (!n || smoe_node_type(n) == SMOE_T_NULL)
        return SMOE_OK;
    if (n->kind != SMOE_NODE_SEQ)
        return bad(c, "adamw_mask", err, "must be a list of regular expressions");
    if (n->n > SMOE_RECIPE_MAX_MASK)
        return bad(c, "adamw_mask", err, "smoe train takes at most 16 patterns");
    for (int i = 0; i < (int)n->n; i++) {
        const smoe_node *it = n->items[i];
        if (it->kind != SMOE_NODE_SCALAR)
            return bad(c, "adamw_mask", err, "must be a list of regular expressions");
        regex_t re;
        if (!mask_syntax_ok(it->str) || regcomp(&re, it->str, REG_EXTENDED | REG_NOSUB) != 0) {
            char why[400];
            snprintf(why, sizeof why,
                     "pattern '%.200s': smoe train takes POSIX extended regular expressions "
                     "without backslash classes, (?...) groups or lazy quantifiers",
                     it->str);
            return bad(c, "adamw_mask", err, why);
        }
        regfree(&re);
        r->mask[r->nmask++] = it->str;
    }
    return SMOE_OK;
}

/* ---- the recipe ---- */

/* The learning-rate schedule's keys into r: the final fraction (the old
 * key selects that MaxText's schedule), the type, WSD's decay, warmup and
 * the schedule's steps (-1: the run's `steps`). */
static smoe_status schedule_keys(const smoe_config *c, int64_t steps, smoe_recipe *r,
                                 smoe_err *err)
{
    smoe_status s;
    /* the final fraction: the key before MaxText e886dd212 selects that
     * version's schedule (MaxText then read only that key) */
    const smoe_node *legacy = smoe_config_get(c, "cosine_learning_rate_final_fraction");
    if (legacy && smoe_node_type(legacy) != SMOE_T_NULL) {
        r->legacy = 1;
        if ((s = rc_key_float(c, "cosine_learning_rate_final_fraction", &r->final_frac, err)))
            return s;
    } else if ((s = opt_f(c, "learning_rate_final_fraction", 0.1, &r->final_frac, err))) {
        return s;
    }
    const char *type;
    if ((s = opt_s(c, "lr_schedule_type", "cosine", &type, err)))
        return s;
    if (strcmp(type, "wsd") == 0)
        r->wsd = 1;
    else if (strcmp(type, "cosine") != 0)
        return bad(c, "lr_schedule_type", err, "must be cosine or wsd");
    if (r->wsd && r->legacy)
        return bad(c, "cosine_learning_rate_final_fraction", err,
                   "belongs to MaxText's schedule before lr_schedule_type existed; use "
                   "learning_rate_final_fraction with lr_schedule_type: wsd");
    const char *style;
    if ((s = opt_s(c, "wsd_decay_style", "linear", &style, err)) ||
        (s = opt_f(c, "wsd_decay_steps_fraction", 0.1, &r->wsd_frac, err)) ||
        (s = opt_f(c, "warmup_steps_fraction", 0.1, &r->warmup_frac, err)) ||
        (s = opt_i(c, "learning_rate_schedule_steps", -1, &r->sched_steps, err)))
        return s;
    if (strcmp(style, "linear") == 0)
        r->wsd_linear = 1;
    else if (strcmp(style, "cosine") != 0)
        return bad(c, "wsd_decay_style", err, "must be linear or cosine");
    /* types.py: learning_rate_schedule_steps -1 is the run's steps */
    if (r->sched_steps == -1)
        r->sched_steps = steps;
    return SMOE_OK;
}

/* The schedule's values as MaxText's code can run them. */
static smoe_status schedule_check(const smoe_config *c, const smoe_recipe *r, smoe_err *err)
{
    if (!isfinite(r->final_frac) || !isfinite(r->warmup_frac) || !isfinite(r->wsd_frac) ||
        r->warmup_frac < 0 || r->wsd_frac < 0)
        return bad(c, r->warmup_frac < 0 || !isfinite(r->warmup_frac) ? "warmup_steps_fraction"
                      : !isfinite(r->final_frac) ? "learning_rate_final_fraction"
                                                  : "wsd_decay_steps_fraction",
                   err, "must be finite and >= 0");
    /* the piece lengths must stay integers (int() of a double) */
    if (r->warmup_frac > 1e6)
        return bad(c, "warmup_steps_fraction", err, "must be at most 1e6 for smoe train");
    if (r->wsd_frac > 1e6)
        return bad(c, "wsd_decay_steps_fraction", err, "must be at most 1e6 for smoe train");
    if (r->sched_steps < 1)
        return bad(c, "learning_rate_schedule_steps", err, "must be -1 or >= 1");
    int kind[4];
    double val[4];
    int64_t len[4], bound[4];
    if (pieces(r, kind, val, len, bound) == 0)
        return bad(c, "warmup_steps_fraction", err, "leaves MaxText's schedule without any piece");
    if (r->legacy && r->sched_steps - (int64_t)((double)r->sched_steps * r->warmup_frac) <= 0)
        return bad(c, "warmup_steps_fraction", err,
                   "MaxText's schedule before e886dd212 divides by zero when warmup "
                   "covers the whole schedule");
    return SMOE_OK;
}

/* The update's keys: clipping (train.py train_step: when > 0), AdamW's
 * eps_root, the routed bias's rate. */
static smoe_status update_keys(const smoe_config *c, smoe_recipe *r, smoe_err *err)
{
    smoe_status s;
    if ((s = opt_f(c, "gradient_clipping_threshold", 1.0, &r->clip, err)) ||
        (s = opt_f(c, "adam_eps_root", 0.0, &r->eps_root, err)) ||
        (s = opt_f(c, "routed_bias_update_rate", 0.0, &r->bias_rate, err)))
        return s;
    if (!isfinite(r->clip))
        return bad(c, "gradient_clipping_threshold", err, "must be finite");
    if (!(r->eps_root >= 0) || !isfinite(r->eps_root))
        return bad(c, "adam_eps_root", err, "must be finite and >= 0");
    if (!isfinite(r->bias_rate))
        return bad(c, "routed_bias_update_rate", err, "must be finite");
    return SMOE_OK;
}

smoe_status smoe_recipe_read(const smoe_config *c, int64_t steps, smoe_recipe *r, smoe_err *err)
{
    smoe_status s;
    memset(r, 0, sizeof *r);
    r->steps = steps;
    if ((s = rc_key_float(c, "learning_rate", &r->lr, err)) ||
        (s = schedule_keys(c, steps, r, err)) || (s = schedule_check(c, r, err)) ||
        (s = update_keys(c, r, err)) || (s = read_mask(c, r, err)))
        return s;
    return rc_refuse_keys(c, err);
}

/* ---- model-side keys ---- */

/* The router's recipe: the score function, where the bias goes, the
 * auxiliary losses' weights. */
static smoe_status router_recipe(const smoe_config *c, const char *name, smoe_model_cfg *mc,
                                 smoe_err *err)
{
    smoe_status s;
    const char *score;
    double f;
    if ((s = smoe_config_str(c, "routed_score_func", &score, err)))
        return s;
    /* moe.py GateLogit: score_func "" leaves the logits as they are; else
     * linears._convert_to_activation_function ("linear" is the identity) */
    mc->score_sigmoid = strcmp(score, "sigmoid") == 0;
    mc->score_raw = score[0] == '\0' || strcmp(score, "linear") == 0;
    if (!mc->score_sigmoid && !mc->score_raw && strcmp(score, "softmax") != 0)
        return bad(c, "routed_score_func", err,
                   "smoe train implements \"\" and linear (raw logits), softmax and sigmoid");
    /* GateLogit keeps pre-bias scores (weights without the bias) only for
     * model names starting with deepseek3 or deepseek4 */
    mc->bias_in_weights = !(prefix(name, "deepseek3") || prefix(name, "deepseek4"));
    if ((s = opt_f(c, "load_balance_loss_weight", 0.0, &f, err)))
        return s;
    if (!(f >= 0) || !isfinite(f))
        return bad(c, "load_balance_loss_weight", err, "must be finite and >= 0");
    mc->lb_weight = (float)f;
    if ((s = opt_f(c, "z_loss_multiplier", 0.0, &f, err)))
        return s;
    if (!isfinite(f))
        return bad(c, "z_loss_multiplier", err, "must be finite");
    mc->z_loss = (float)f;
    return SMOE_OK;
}

/* rope_type, lower-cased into buf as Attention.__init__ does: RoPE is
 * attentions.py init_rotary_embedding's YarnRotaryEmbedding for yarn*,
 * LLaMARotaryEmbedding for llama3.1 names or types (refused), else
 * RotaryEmbedding (rotate_half: pairs (i, i + d/2)). *yarn on success. */
static smoe_status rope_kind(const smoe_config *c, const char *name, char *buf, size_t cap,
                             int *yarn, smoe_err *err)
{
    const char *rtype;
    smoe_status s = opt_s(c, "rope_type", "default", &rtype, err);
    if (s)
        return s;
    size_t i = 0;
    for (; rtype[i] && i + 1 < cap; i++)
        buf[i] = (char)(rtype[i] >= 'A' && rtype[i] <= 'Z' ? rtype[i] - 'A' + 'a' : rtype[i]);
    buf[i] = '\0';
    if (prefix(name, "llama3.1") || prefix(buf, "llama3.1"))
        return bad(c, prefix(buf, "llama3.1") ? "rope_type" : "model_name", err,
                   "smoe train implements the default and the yarn rotary embeddings, not "
                   "LLaMA 3.1's");
    *yarn = prefix(buf, "yarn");
    if (!*yarn && strcmp(buf, "default") != 0)
        return bad(c, "rope_type", err, "smoe train implements default and yarn");
    return SMOE_OK;
}

/* The rope's numbers as its embedding can use them (orig, maxpos: the
 * table's sizes; seq: the run's sequence). */
static smoe_status rope_check(const smoe_config *c, const smoe_rope_cfg *r, int64_t orig,
                              int64_t maxpos, int64_t seq, smoe_err *err)
{
    if (!(r->max_timescale > 0) || !isfinite(r->max_timescale))
        return bad(c, "rope_max_timescale", err, "must be finite and > 0");
    if (!r->yarn && (!(r->min_timescale > 0) || !isfinite(r->min_timescale)))
        return bad(c, "rope_min_timescale", err, "must be finite and > 0");
    if (!r->yarn && (!(r->linear_scale > 0) || !isfinite(r->linear_scale)))
        return bad(c, "rope_linear_scaling_factor", err, "must be finite and > 0");
    if (!r->yarn)
        return SMOE_OK;
    if (!(r->factor > 0) || !isfinite(r->factor))
        return bad(c, "rope_factor", err, "must be finite and > 0");
    if (!(r->beta_fast > 0) || !isfinite(r->beta_fast))
        return bad(c, "beta_fast", err, "must be finite and > 0");
    if (!(r->beta_slow > 0) || !isfinite(r->beta_slow))
        return bad(c, "beta_slow", err, "must be finite and > 0");
    if (orig < 1)
        return bad(c, "original_max_position_embeddings", err, "must be >= 1");
    if (r->max_timescale == 1.0)
        return bad(c, "rope_max_timescale", err, "must not be 1 for yarn (log base)");
    /* freqs_cis has max_position_embeddings rows, indexed by position */
    if (seq > maxpos)
        return bad(c, "max_position_embeddings", err,
                   "is below max_target_length: YaRN's table has no row for the last "
                   "positions");
    return SMOE_OK;
}

/* The rotation's layout and output scale: YarnRotaryEmbedding takes
 * rope_interleave (RotaryEmbedding always rotates halves) and, with
 * rope_attention_scaling and rope_factor > 1, scales by
 * 0.1 ln(rope_factor) + 1. */
static smoe_status rope_layout(const smoe_config *c, smoe_model_cfg *mc, smoe_err *err)
{
    const smoe_rope_cfg *r = &mc->rope;
    int interleave, scaling, pairwise;
    smoe_status s;
    if ((s = opt_b(c, "rope_interleave", 1, &interleave, err)) ||
        (s = opt_b(c, "rope_attention_scaling", 0, &scaling, err)))
        return s;
    mc->rope_halves = r->yarn ? !interleave : 1;
    mc->rope_scale = 1.0f;
    if (r->yarn && scaling && r->factor > 1)
        mc->rope_scale = (float)(0.1 * log(r->factor) + 1.0);
    if ((s = opt_b(c, "rope_pairwise", 0, &pairwise, err)))
        return s;
    if (r->yarn && pairwise && !interleave)
        return bad(c, "rope_pairwise", err, "needs rope_interleave: true (as in MaxText)");
    return SMOE_OK;
}

/* The rotary embedding (and its table's rows: *orig, *maxpos; mscale
 * into *mscale for the MLA scale). */
static smoe_status rope_recipe(const smoe_config *c, const char *name, smoe_model_cfg *mc,
                               int64_t *orig_out, int64_t *maxpos_out, double *mscale,
                               smoe_err *err)
{
    smoe_rope_cfg *r = &mc->rope;
    char lower[64];
    int64_t orig, maxpos;
    double f;
    smoe_status s;
    if ((s = rope_kind(c, name, lower, sizeof lower, &r->yarn, err)) ||
        (s = opt_f(c, "rope_max_timescale", 10000, &r->max_timescale, err)) ||
        (s = opt_f(c, "rope_min_timescale", 1, &r->min_timescale, err)) ||
        (s = opt_f(c, "rope_linear_scaling_factor", 1.0, &r->linear_scale, err)) ||
        (s = opt_f(c, "rope_factor", 40, &r->factor, err)) ||
        (s = opt_f(c, "beta_fast", 32, &r->beta_fast, err)) ||
        (s = opt_f(c, "beta_slow", 1, &r->beta_slow, err)) ||
        (s = opt_i(c, "original_max_position_embeddings", 4096, &orig, err)) ||
        (s = opt_i(c, "max_position_embeddings", 163840, &maxpos, err)) ||
        (s = opt_b(c, "rope_truncate", 1, &r->truncate, err)) ||
        (s = opt_f(c, "mscale", 1.0, &f, err)))
        return s;
    r->orig_max = (double)orig;
    mc->rope_theta = (float)r->max_timescale;
    if ((s = rope_check(c, r, orig, maxpos, mc->seq, err)) || (s = rope_layout(c, mc, err)))
        return s;
    *orig_out = orig;
    *maxpos_out = maxpos;
    *mscale = f;
    return SMOE_OK;
}

/* attention_mla.py MLA's softmax factor from the rope's table sizes. */
static smoe_status mla_scale(const smoe_config *c, smoe_model_cfg *mc, int64_t orig,
                             int64_t maxpos, double f, smoe_err *err)
{
    const smoe_rope_cfg *r = &mc->rope;
    /* attention_mla.py MLA: softmax_scale = qk_head_dim^-0.5, times mscale^2
     * with mscale = 0.1 * mscale * ln(rope_factor) + 1 whenever
     * max_position_embeddings > original_max_position_embeddings */
    mc->attn_scale_mult = 1.0f;
    if (maxpos > orig) {
        if (!(r->factor > 0) || !isfinite(r->factor) || !isfinite(f))
            return bad(c, "rope_factor", err,
                       "must be finite and > 0 (the MLA softmax scale takes its log)");
        double ms = 0.1 * f * log(r->factor) + 1.0;
        mc->attn_scale_mult = (float)(ms * ms);
        if (!isfinite(mc->attn_scale_mult) || !(mc->attn_scale_mult > 0.0f))
            return bad(c, "mscale", err,
                       "gives an MLA softmax factor (0.1 * mscale * ln(rope_factor) + 1)^2 "
                       "that is not a positive float32");
    }
    return SMOE_OK;
}

smoe_status rc_model_recipe(const smoe_config *c, smoe_model_cfg *mc, smoe_err *err)
{
    smoe_status s;
    const char *name;
    int64_t orig = 0, maxpos = 0;
    double mscale = 1;
    /* moe.py RoutedMoE.sparse_matmul: use_ring_of_experts exchanges the
     * tokens by all-gather and reduce-scatter instead of all-to-all (the
     * model's cfg.ring; with one expert rank nothing is exchanged) */
    if ((s = opt_s(c, "model_name", "default", &name, err)) ||
        (s = router_recipe(c, name, mc, err)) ||
        (s = rope_recipe(c, name, mc, &orig, &maxpos, &mscale, err)) ||
        (s = opt_b(c, "use_ring_of_experts", 0, &mc->ring, err)))
        return s;
    return mla_scale(c, mc, orig, maxpos, mscale, err);
}

const char *smoe_recipe_exchange(const smoe_model_cfg *mc)
{
    if (!mc->n_moe || mc->ep <= 1)
        return "local (expert axis 1)";
    return mc->ring ? "ring (all-gather, reduce-scatter)" : "all-to-all";
}

void smoe_recipe_describe(const smoe_recipe_hparams *hp, const smoe_model_cfg *mc, char *buf,
                          size_t n)
{
    const smoe_recipe *r = &hp->rc;
    const int64_t W = (int64_t)((double)r->sched_steps * r->warmup_frac);
    const char *score = mc->score_sigmoid ? "sigmoid" : mc->score_raw ? "raw logits" : "softmax";
    snprintf(buf, n,
             "lr %s%s: peak %g, warmup %lld of %lld updates, final fraction %g%s; "
             "clip %s%g; AdamW b1 %g b2 %g eps %g eps_root %g wd %g (%d mask pattern%s); "
             "RoPE %s %s%s, MLA softmax scale x%.4f; router %s, bias %s; "
             "load balance %g, z-loss %g, bias update %g; experts %s",
             r->legacy ? "cosine (before e886dd212)" : r->wsd ? "wsd" : "cosine",
             r->wsd ? (r->wsd_linear ? " linear" : " cosine") : "", r->lr, (long long)W,
             (long long)r->sched_steps, r->final_frac,
             r->steps > r->sched_steps ? ", then 0" : "", r->clip > 0 ? "by global norm " : "off ",
             r->clip, hp->b1, hp->b2, hp->eps, r->eps_root, hp->wd, r->nmask,
             r->nmask == 1 ? "" : "s", mc->rope.yarn ? "yarn" : "default",
             mc->rope_halves ? "halves" : "interleaved",
             mc->rope_scale != 1.0f ? " (output scaled)" : "", (double)mc->attn_scale_mult,
             score,
             !mc->routed_bias ? "none" : mc->bias_in_weights ? "in the weights (trained)"
                                                               : "selection only",
             (double)mc->lb_weight, (double)mc->z_loss, r->bias_rate, smoe_recipe_exchange(mc));
}
