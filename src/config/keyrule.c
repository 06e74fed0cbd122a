/* A tool's policy for MaxText keys it reads but implements only at some
 * values: each tool keeps a table of rules (smoe train's recipe, smoe sim's
 * step model); this file decides whether a configuration holds a rule's
 * values and words the one-line refusal. A key absent from the
 * configuration, or null (MaxText's None), holds MaxText's default. */
#include "config_impl.h"

#include <stdio.h>
#include <string.h>

/* Is `v` one of the '|'-separated alternatives of `list`? Numbers (num)
 * compare by value ("150_001" is 150001). */
static int one_of(const char *v, const char *list, int num)
{
    double x = 0, y;
    if (num && smoe_parse_f64(v, &x))
        return 0;
    for (const char *p = list;;) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char alt[64];
        snprintf(alt, sizeof alt, "%.*s", (int)(l < sizeof alt ? l : sizeof alt - 1), p);
        if (num ? smoe_parse_f64(alt, &y) == 0 && x == y : strcmp(alt, v) == 0)
            return 1;
        if (!e)
            return 0;
        p = e + 1;
    }
}

int smoe_key_holds(const smoe_node *n, const smoe_key_rule *r)
{
    double x;
    if (!n || smoe_node_type(n) == SMOE_T_NULL) /* MaxText's None: not set */
        return 1;
    if (r->kind == SMOE_KEY_EMPTY)
        return n->kind == SMOE_NODE_SEQ && n->n == 0;
    if (n->kind != SMOE_NODE_SCALAR)
        return 0;
    smoe_scalar_type t = smoe_node_type(n);
    switch (r->kind) {
    case SMOE_KEY_BOOL: return t == SMOE_T_BOOL && smoe_node_bool_value(n) == (r->want[0] == 't');
    case SMOE_KEY_INT:
    case SMOE_KEY_FLOAT: return one_of(n->str, r->want, 1);
    case SMOE_KEY_NONPOS: return smoe_parse_f64(n->str, &x) == 0 && x <= 0;
    default: return one_of(n->str, r->want, 0);
    }
}

/* r's values as the refusal states them: "a|b" -> a or b, "" spelled out. */
static void want_text(const smoe_key_rule *r, char *want, size_t cap)
{
    if (r->kind != SMOE_KEY_STR) {
        snprintf(want, cap, "%s", r->kind == SMOE_KEY_NONPOS ? "a value <= 0" : r->want);
        return;
    }
    size_t o = 0;
    want[0] = '\0';
    for (const char *w = r->want, *p = w;; p++) {
        if (*p == '|' || !*p) {
            if (p == w || p[-1] == '|')
                o += (size_t)snprintf(want + o, cap - o, "\"\"");
            if (!*p || o + 1 >= cap)
                break;
            o += (size_t)snprintf(want + o, cap - o, " or ");
        } else if (o + 1 < cap) {
            want[o++] = *p;
            want[o] = '\0';
        }
        if (o >= cap)
            break;
    }
}

smoe_status smoe_key_refuse(const smoe_config *c, const smoe_key_rule *r, const char *only,
                            const char *would, smoe_err *err)
{
    char want[96];
    want_text(r, want, sizeof want);
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(c, r->key), "%s: %s only %s: %s (%s %s)",
                       r->key, only, r->key, want, would, r->why);
}

smoe_status smoe_key_check(const smoe_config *c, const smoe_key_rule *r, const char *only,
                           const char *would, smoe_err *err)
{
    const smoe_node *n = smoe_config_get(c, r->key);
    smoe_status s = SMOE_OK;
    int b;
    int64_t i;
    double f;
    const char *str;
    if (!n || smoe_node_type(n) == SMOE_T_NULL)
        return SMOE_OK;
    switch (r->kind) { /* the type first: the config's own error */
    case SMOE_KEY_BOOL: s = smoe_config_bool(c, r->key, &b, err); break;
    case SMOE_KEY_INT: s = smoe_config_int(c, r->key, &i, err); break;
    case SMOE_KEY_FLOAT:
    case SMOE_KEY_NONPOS: s = smoe_config_float(c, r->key, &f, err); break;
    case SMOE_KEY_STR: s = smoe_config_str(c, r->key, &str, err); break;
    case SMOE_KEY_EMPTY: break;
    }
    if (s)
        return s;
    return smoe_key_holds(n, r) ? SMOE_OK : smoe_key_refuse(c, r, only, would, err);
}
