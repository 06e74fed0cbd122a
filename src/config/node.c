/* Typing and comparison of YAML nodes, the way MaxText's YAML loader types
 * plain scalars (YAML 1.1 booleans, ints with '_' separators, floats with
 * or without a fraction part). Quoted scalars are always strings. */
#include "config_impl.h"

#include <string.h>

static int is_one_of(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

static const char *const k_null[] = { "", "~", "null", "Null", "NULL", NULL };
static const char *const k_true[] = { "true", "True", "TRUE", "yes", "Yes",
                                      "YES", "on", "On", "ON", NULL };
/* YAML 1.1 infinities and NaN: floats to the loader (smoe's numeric
 * getters refuse them, as every non-finite value). */
static const char *const k_nonfinite[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf",
                                           "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
                                           ".NaN", ".NAN", NULL };
static const char *const k_false[] = { "false", "False", "FALSE", "no", "No",
                                       "NO", "off", "Off", "OFF", NULL };

smoe_scalar_type smoe_node_type(const smoe_node *n)
{
    if (!n)
        return SMOE_T_NULL;
    if (n->kind == SMOE_NODE_SEQ)
        return SMOE_T_SEQ;
    if (n->kind == SMOE_NODE_MAP)
        return SMOE_T_MAP;
    if (!n->plain)
        return SMOE_T_STR;
    if (is_one_of(n->str, k_null))
        return SMOE_T_NULL;
    if (is_one_of(n->str, k_true) || is_one_of(n->str, k_false))
        return SMOE_T_BOOL;
    int64_t i;
    double f;
    if (smoe_parse_i64(n->str, &i) == 0)
        return SMOE_T_INT;
    if (strpbrk(n->str, ".eE") && smoe_parse_f64(n->str, &f) == 0)
        return SMOE_T_FLOAT;
    if (is_one_of(n->str, k_nonfinite))
        return SMOE_T_FLOAT;
    return SMOE_T_STR;
}

const char *smoe_type_name(smoe_scalar_type t)
{
    switch (t) {
    case SMOE_T_NULL: return "null";
    case SMOE_T_BOOL: return "a boolean";
    case SMOE_T_INT: return "an integer";
    case SMOE_T_FLOAT: return "a number";
    case SMOE_T_STR: return "a string";
    case SMOE_T_SEQ: return "a list";
    case SMOE_T_MAP: return "a mapping";
    }
    return "?";
}

int smoe_node_equal(const smoe_node *a, const smoe_node *b)
{
    smoe_scalar_type ta = smoe_node_type(a), tb = smoe_node_type(b);
    if ((ta == SMOE_T_INT || ta == SMOE_T_FLOAT) &&
        (tb == SMOE_T_INT || tb == SMOE_T_FLOAT)) {
        double x, y;
        if (smoe_parse_f64(a->str, &x) || smoe_parse_f64(b->str, &y))
            return strcmp(a->str, b->str) == 0; /* .inf, .nan */
        return x == y;
    }
    if (ta != tb)
        return 0;
    switch (ta) {
    case SMOE_T_NULL:
        return 1;
    case SMOE_T_BOOL:
        return is_one_of(a->str, k_true) == is_one_of(b->str, k_true);
    case SMOE_T_STR:
        return strcmp(a->str, b->str) == 0;
    case SMOE_T_SEQ:
    case SMOE_T_MAP:
        if (a->n != b->n)
            return 0;
        for (int i = 0; i < a->n; i++) {
            if (ta == SMOE_T_MAP && strcmp(a->keys[i], b->keys[i]) != 0)
                return 0;
            if (!smoe_node_equal(a->items[i], b->items[i]))
                return 0;
        }
        return 1;
    default:
        return 0;
    }
}

const smoe_node *smoe_node_get(const smoe_node *map, const char *key)
{
    if (!map || map->kind != SMOE_NODE_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0)
            return map->items[i];
    return NULL;
}

int smoe_node_bool_value(const smoe_node *n)
{
    return n && n->kind == SMOE_NODE_SCALAR && is_one_of(n->str, k_true);
}

smoe_node *cfg_scalar(smoe_arena *a, const char *text, smoe_loc loc)
{
    smoe_node *n = smoe_arena_alloc(a, sizeof *n);
    if (!n)
        return NULL;
    n->kind = SMOE_NODE_SCALAR;
    n->str = smoe_arena_strdup(a, text);
    n->plain = 1;
    n->loc = loc;
    return n->str ? n : NULL;
}

uint32_t cfg_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

int cfg_map_index(const cfg_map *m, const char *key)
{
    if (!m->nslot)
        return -1;
    unsigned mask = (unsigned)m->nslot - 1;
    for (unsigned i = cfg_hash(key) & mask;; i = (i + 1) & mask) {
        int k = m->slot[i];
        if (k == 0)
            return -1;
        if (strcmp(m->e[k - 1].key, key) == 0)
            return k - 1;
    }
}

const smoe_node *cfg_map_get(const cfg_map *m, const char *key)
{
    int i = cfg_map_index(m, key);
    return i < 0 ? NULL : m->e[i].value;
}

static void slot_put(int *slot, int nslot, const char *key, int index)
{
    unsigned mask = (unsigned)nslot - 1;
    unsigned i = cfg_hash(key) & mask;
    while (slot[i])
        i = (i + 1) & mask;
    slot[i] = index + 1;
}

smoe_status cfg_map_set(smoe_arena *a, cfg_map *m, const char *key,
                        const smoe_node *v)
{
    int i = cfg_map_index(m, key);
    if (i >= 0) {
        m->e[i].value = v;
        return SMOE_OK;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 256;
        cfg_entry *e = smoe_arena_alloc(a, sizeof *e * (size_t)cap);
        int *slot = smoe_arena_alloc(a, sizeof *slot * (size_t)cap * 2);
        if (!e || !slot)
            return SMOE_ENOMEM;
        if (m->n)
            memcpy(e, m->e, sizeof *e * (size_t)m->n);
        for (int k = 0; k < m->n; k++)
            slot_put(slot, cap * 2, e[k].key, k);
        m->e = e;
        m->cap = cap;
        m->slot = slot;
        m->nslot = cap * 2;
    }
    m->e[m->n].key = key;
    m->e[m->n].value = v;
    slot_put(m->slot, m->nslot, key, m->n);
    m->n++;
    return SMOE_OK;
}
