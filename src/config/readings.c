/* A scenario's declared readings: the facts its source does not state
 * (the sequence length, the stored weights' bytes, what MaxText's prefetch
 * path gathers), each given as the set of values the public sources allow,
 * every value with its source. smoe sim predicts under every combination
 * and prints them side by side with the envelope, so no unstated fact is
 * chosen because it matches the reported figures.
 *
 *   readings:
 *     seq_len:
 *       - {value: 8192, source: "..."}
 *       - {value: 4096, source: "..."}
 */
#include "config_impl.h"

#include <string.h>

typedef struct fact_rule {
    smoe_scn_fact_key key;
    const char *name;
    double lo, hi;              /* integers in [lo, hi], unless named: */
    int (*named)(const char *); /* a value by name (-1: none), or NULL */
    const char *names;          /* the names, for the refusal */
} fact_rule;

static const fact_rule k_facts[] = {
    { SMOE_FACT_SEQ, "seq_len", 1, (double)SMOE_SIM_MAX_SEQ, NULL, NULL },
    { SMOE_FACT_BATCH, "per_device_batch", 1, (double)SMOE_SIM_MAX_BATCH, NULL, NULL },
    { SMOE_FACT_DTYPE_BYTES, "dtype_bytes", 1, 16, NULL, NULL },
    { SMOE_FACT_MX_GATHER, "maxtext_gather_dtype", 0, 0, smoe_mx_gather_bytes,
      SMOE_MX_GATHER_NAMES },
    { SMOE_FACT_REDUCE_ENGINE, "reduce_engine", 0, 0, smoe_reduce_engine_of,
      SMOE_REDUCE_ENGINE_NAMES },
};

int smoe_reduce_engine_of(const char *name)
{
    return strcmp(name, "shared") == 0 ? SMOE_REDUCE_SHARED
         : strcmp(name, "own") == 0    ? SMOE_REDUCE_OWN
                                       : -1;
}

int smoe_mx_gather_bytes(const char *name)
{
    return strcmp(name, "stored") == 0 ? 0
         : strcmp(name, "fp32") == 0   ? 4
         : strcmp(name, "bf16") == 0   ? 2
                                       : -1;
}

const char *smoe_scn_fact_name(smoe_scn_fact_key k)
{
    for (size_t i = 0; i < sizeof k_facts / sizeof k_facts[0]; i++)
        if (k_facts[i].key == k)
            return k_facts[i].name;
    return "?";
}

/* One {value: V, source: S} item into f's next value. */
static smoe_status one_value(smoe_arena *a, const fact_rule *r, const smoe_node *it,
                             smoe_scn_fact *f, smoe_err *err)
{
    const smoe_node *v = it->kind == SMOE_NODE_MAP ? smoe_node_get(it, "value") : NULL;
    const smoe_node *src = it->kind == SMOE_NODE_MAP ? smoe_node_get(it, "source") : NULL;
    if (!v || !src || it->n != 2 || v->kind != SMOE_NODE_SCALAR || src->kind != SMOE_NODE_SCALAR ||
        !src->str[0])
        return smoe_err_at(err, SMOE_EINVAL, it->loc,
                           "readings: %s: each reading is {value: V, source: TEXT}", r->name);
    double x = 0;
    if (r->named) {
        x = r->named(v->str);
        if (x < 0)
            return smoe_err_at(err, SMOE_EINVAL, v->loc, "readings: %s: expected %s", r->name,
                               r->names);
    } else if (smoe_node_type(v) != SMOE_T_INT || smoe_parse_f64(v->str, &x) || x < r->lo ||
               x > r->hi) {
        return smoe_err_at(err, SMOE_EINVAL, v->loc,
                           "readings: %s: expected an integer in [%.0f, %.0f]", r->name, r->lo,
                           r->hi);
    }
    for (int i = 0; i < f->n; i++)
        if (f->value[i] == x)
            return smoe_err_at(err, SMOE_EINVAL, v->loc, "readings: %s: '%s' is given twice",
                               r->name, v->str);
    f->value[f->n] = x;
    f->text[f->n] = smoe_arena_strdup(a, v->str);
    f->source[f->n] = smoe_arena_strdup(a, src->str);
    if (!f->text[f->n] || !f->source[f->n])
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    f->n++;
    return SMOE_OK;
}

smoe_status cfg_scn_readings(smoe_arena *a, const smoe_node *n, smoe_scenario *sc, smoe_err *err)
{
    if (n->kind != SMOE_NODE_MAP || n->n > SMOE_SCN_MAX_FACTS)
        return smoe_err_at(err, SMOE_EINVAL, n->loc,
                           "readings: a mapping of at most %d facts to their readings",
                           SMOE_SCN_MAX_FACTS);
    int combos = 1;
    for (int i = 0; i < n->n; i++) {
        const fact_rule *r = NULL;
        for (size_t k = 0; k < sizeof k_facts / sizeof k_facts[0]; k++)
            if (strcmp(n->keys[i], k_facts[k].name) == 0)
                r = &k_facts[k];
        if (!r)
            return smoe_err_at(err, SMOE_EINVAL, n->key_locs[i],
                               "readings: unknown fact '%s' (seq_len, per_device_batch, "
                               "dtype_bytes, maxtext_gather_dtype, reduce_engine)", n->keys[i]);
        const smoe_node *l = n->items[i];
        if (l->kind != SMOE_NODE_SEQ || l->n < 1 || l->n > SMOE_SCN_MAX_READINGS)
            return smoe_err_at(err, SMOE_EINVAL, l->loc, "readings: %s: a list of 1 to %d readings",
                               r->name, SMOE_SCN_MAX_READINGS);
        smoe_scn_fact *f = &sc->facts[sc->n_facts++];
        f->key = r->key;
        for (int j = 0; j < l->n; j++) {
            smoe_status s = one_value(a, r, l->items[j], f, err);
            if (s)
                return s;
        }
        combos *= f->n;
        if (combos > SMOE_SCN_MAX_COMBOS)
            return smoe_err_at(err, SMOE_EINVAL, n->loc,
                               "readings: more than %d combinations of readings",
                               SMOE_SCN_MAX_COMBOS);
    }
    return SMOE_OK;
}
