/* MaxText's configuration fields and pydantic's lax-mode coercion.
 *
 * MaxText validates the merged configuration against its pydantic
 * MaxTextConfig (src/maxtext/configs/types.py): a key that is no field is an
 * error, and every value is coerced to its field's type. The field table is
 * data, data/maxtext/config_fields.tsv, derived from types.py by
 * scripts/gen-maxtext-fields.py and compiled in (cmake/embed_table.cmake).
 *
 * Coercion follows pydantic v2 in lax (python) mode, as checked against
 * pydantic itself by tests/data/maxtext_coercion.tsv:
 *   int    int; float with no fraction; bool (0/1); a string that reads as
 *          an int or a whole float (whitespace stripped, '_' allowed)
 *   float  float, int, bool, a numeric string; smoe refuses inf and nan
 *   bool   bool; int or float 0/1; the strings 0 1 f t n y no on off yes
 *          true false in any case
 *   str    strings only (a number is not a string)
 *   enum   one of the values exactly; intenum: an int (as above) among them
 *   list[T] a list whose items coerce to T; dict: a mapping; any: anything
 *   model  a mapping of the nested model's fields (defaults filled in);
 *          unknown keys are dropped, or refused where the model forbids them
 * A union takes the first member that matches exactly (the value's own YAML
 * type), else the first that matches strictly (an int for a float), else the
 * first lax match: pydantic's "smart" union. Bounds (gt ge lt le) apply to
 * the numeric member they come with. */
#define _POSIX_C_SOURCE 200809L
#include "config_impl.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* name, type, constraints, default, declared in; sorted by name */
extern const char *const smoe_maxtext_fields[][5];
extern const size_t smoe_maxtext_fields_n;

struct cfg_fields {
    cfg_field *f; /* sorted by name, as the table is */
    int n;
};

enum { M_FAIL = 0, M_LAX = 1, M_STRICT = 2, M_EXACT = 3 };

smoe_status cfg_fields_open(smoe_arena *a, const cfg_fields **out, smoe_err *err)
{
    cfg_fields *t = smoe_arena_alloc(a, sizeof *t);
    if (!t)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    t->f = smoe_arena_alloc(a, sizeof *t->f * (smoe_maxtext_fields_n + 1));
    if (!t->f)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    t->n = 0;
    for (size_t i = 0; i < smoe_maxtext_fields_n; i++) {
        const char *const *col = smoe_maxtext_fields[i];
        cfg_field *f = &t->f[t->n];
        f->name = col[0];
        f->type = col[1];
        f->bounds = strcmp(col[2], "-") ? col[2] : "";
        f->def = strcmp(col[3], "-") ? col[3] : NULL;
        f->declared_in = col[4];
        if (t->n && strcmp(t->f[t->n - 1].name, f->name) >= 0)
            return smoe_err_set(err, SMOE_EINVAL,
                                "built-in MaxText field table: '%s' out of order", f->name);
        t->n++;
    }
    *out = t;
    return SMOE_OK;
}

const cfg_field *cfg_field_find(const cfg_fields *t, const char *name)
{
    int lo = 0, hi = t->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(t->f[mid].name, name);
        if (c == 0)
            return &t->f[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int cfg_fields_count(const cfg_fields *t) { return t->n; }
const cfg_field *cfg_field_at(const cfg_fields *t, int i)
{
    return i >= 0 && i < t->n ? &t->f[i] : NULL;
}

/* ---- scalar readings ---- */

/* A copy of s without surrounding whitespace (pydantic strips numbers). */
static const char *strip_ws(char *buf, size_t n, const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len >= n)
        return NULL;
    memcpy(buf, s, len);
    buf[len] = 0;
    return buf;
}

/* The number a scalar holds as pydantic's int/float validators read it:
 * 1 if it is one (*is_int says whether it is written as an int). */
static int numeric_of(const smoe_node *v, smoe_scalar_type t, double *d,
                      int64_t *i, int *is_int)
{
    char buf[128];
    const char *s = v->str;
    if (t == SMOE_T_BOOL) {
        *i = smoe_node_bool_value(v);
        *d = (double)*i;
        *is_int = 1;
        return 1;
    }
    if (t == SMOE_T_STR && !(s = strip_ws(buf, sizeof buf, v->str)))
        return 0;
    if (t != SMOE_T_INT && t != SMOE_T_FLOAT && t != SMOE_T_STR)
        return 0;
    if (smoe_parse_i64(s, i) == 0) {
        *d = (double)*i;
        *is_int = 1;
        return 1;
    }
    if (smoe_parse_f64(s, d) == 0) {
        *is_int = 0;
        return 1;
    }
    return 0;
}

static int bounds_ok(const char *bounds, double x)
{
    const char *p = bounds;
    while (p && *p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        double lim = 0;
        const char *eq = strchr(p, '=');
        if (!eq)
            break;
        char num[64];
        size_t len = strcspn(eq + 1, " ");
        if (len >= sizeof num)
            return 0;
        memcpy(num, eq + 1, len);
        num[len] = 0;
        if (smoe_parse_f64(num, &lim) != 0) {
            int64_t li;
            if (smoe_parse_i64(num, &li) != 0)
                return 0;
            lim = (double)li;
        }
        if ((strncmp(p, "gt=", 3) == 0 && !(x > lim)) ||
            (strncmp(p, "ge=", 3) == 0 && !(x >= lim)) ||
            (strncmp(p, "lt=", 3) == 0 && !(x < lim)) ||
            (strncmp(p, "le=", 3) == 0 && !(x <= lim)))
            return 0;
        p = eq + 1 + len;
    }
    return 1;
}

static const smoe_node *scalar_like(smoe_arena *a, const smoe_node *v, const char *text)
{
    if (v->kind == SMOE_NODE_SCALAR && v->plain && strcmp(v->str, text) == 0)
        return v;
    return cfg_scalar(a, text, v->loc);
}

/* Shortest text that reads back as x, always with a '.' or an exponent. */
static void float_text(double x, char *buf, size_t n)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eE")) {
        size_t len = strlen(buf);
        if (len + 3 <= n)
            memcpy(buf + len, ".0", 3);
    }
}

static const char *const k_str_true[] = { "1", "on", "t", "true", "y", "yes", NULL };
static const char *const k_str_false[] = { "0", "off", "f", "false", "n", "no", NULL };

static int word_in(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcasecmp(s, *list) == 0)
            return 1;
    return 0;
}

/* ---- members ---- */

typedef struct coerce_ctx {
    smoe_arena *a;
    const cfg_fields *t;
    int oom;
} coerce_ctx;

static int union_try(coerce_ctx *c, const char *type, size_t tlen, const char *bounds,
                     const smoe_node *v, const smoe_node **out);

static int in_list(const char *vals, size_t vlen, const char *s)
{
    size_t sl = strlen(s);
    const char *p = vals, *end = vals + vlen;
    while (p <= end) {
        const char *q = memchr(p, ',', (size_t)(end - p));
        size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
        if (len == sl && strncmp(p, s, len) == 0)
            return 1;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

static int model_try(coerce_ctx *c, const char *name, size_t nlen, const char *bounds,
                     const smoe_node *v, const smoe_node **out)
{
    if (v->kind != SMOE_NODE_MAP)
        return M_FAIL;
    int forbid = strstr(bounds, "extra=forbid") != NULL;
    /* the nested model's fields: rows named "<field>." + name, found by the
     * owning field, which the caller passes as `name` */
    char prefix[128];
    if (nlen + 2 > sizeof prefix)
        return M_FAIL;
    memcpy(prefix, name, nlen);
    prefix[nlen] = '.';
    prefix[nlen + 1] = 0;
    size_t pl = nlen + 1;
    int nf = 0;
    for (int i = 0; i < c->t->n; i++)
        nf += strncmp(c->t->f[i].name, prefix, pl) == 0;
    smoe_node *m = smoe_arena_alloc(c->a, sizeof *m);
    const smoe_node **items = smoe_arena_alloc(c->a, sizeof *items * (size_t)(nf + 1));
    const char **keys = smoe_arena_alloc(c->a, sizeof *keys * (size_t)(nf + 1));
    smoe_loc *kl = smoe_arena_alloc(c->a, sizeof *kl * (size_t)(nf + 1));
    if (!m || !items || !keys || !kl) {
        c->oom = 1;
        return M_FAIL;
    }
    for (int k = 0; k < v->n; k++) {
        char full[256];
        snprintf(full, sizeof full, "%s%s", prefix, v->keys[k]);
        if (!cfg_field_find(c->t, full) && forbid)
            return M_FAIL;
    }
    *m = *v;
    m->n = 0;
    for (int i = 0; i < c->t->n; i++) {
        const cfg_field *f = &c->t->f[i];
        if (strncmp(f->name, prefix, pl) != 0 || strchr(f->name + pl, '.'))
            continue;
        const smoe_node *given = smoe_node_get(v, f->name + pl), *got = NULL;
        smoe_loc at = v->loc;
        if (given) {
            if (union_try(c, f->type, strlen(f->type), f->bounds, given, &got) == M_FAIL)
                return M_FAIL;
            for (int k = 0; k < v->n; k++)
                if (strcmp(v->keys[k], f->name + pl) == 0)
                    at = v->key_locs[k];
        } else if (f->def) {
            smoe_node *d;
            smoe_err e;
            if (smoe_yaml_load_string(c->a, f->def, "MaxText default", &d, &e))
                return M_FAIL;
            d->loc = v->loc;
            got = d;
        } else {
            continue;
        }
        keys[m->n] = f->name + pl;
        kl[m->n] = at;
        items[m->n++] = got;
    }
    m->items = (smoe_node **)items;
    m->keys = keys;
    m->key_locs = kl;
    *out = m;
    return M_EXACT;
}

/* A value as a new scalar like v with text `text`: `lvl` if made, M_FAIL
 * (and c->oom) when out of memory. */
static int made(coerce_ctx *c, const smoe_node *v, const char *text, int lvl,
                const smoe_node **out)
{
    *out = scalar_like(c->a, v, text);
    if (!*out)
        c->oom = 1;
    return *out ? lvl : M_FAIL;
}

/* bool: a YAML bool, a true/false word, or the number 0 or 1. */
static int try_bool(coerce_ctx *c, const smoe_node *v, smoe_scalar_type t, const smoe_node **out)
{
    int b, lvl = M_LAX, is_int;
    double d;
    int64_t i;
    if (t == SMOE_T_BOOL) {
        b = smoe_node_bool_value(v);
        lvl = M_EXACT;
    } else if (t == SMOE_T_STR) {
        if (word_in(v->str, k_str_true))
            b = 1;
        else if (word_in(v->str, k_str_false))
            b = 0;
        else
            return M_FAIL;
    } else if ((t == SMOE_T_INT || t == SMOE_T_FLOAT) && numeric_of(v, t, &d, &i, &is_int) &&
               (d == 0 || d == 1)) {
        b = d == 1;
    } else {
        return M_FAIL;
    }
    return made(c, v, b ? "true" : "false", lvl, out);
}

/* int, or intenum{...} (m, mlen: the member's text): a whole number in
 * bounds, no exponent in a string. */
static int try_int(coerce_ctx *c, const char *m, size_t mlen, const char *bounds,
                   const smoe_node *v, smoe_scalar_type t, const smoe_node **out)
{
    double d;
    int64_t i;
    int is_int;
    char buf[64];
    if (!numeric_of(v, t, &d, &i, &is_int) || (t == SMOE_T_STR && strpbrk(v->str, "eE")))
        return M_FAIL; /* pydantic reads no exponent in an int string */
    if (!is_int) {
        if (!isfinite(d) || d != floor(d) || fabs(d) > 9.0e18)
            return M_FAIL;
        i = (int64_t)d;
    }
    if (!bounds_ok(bounds, (double)i))
        return M_FAIL;
    snprintf(buf, sizeof buf, "%lld", (long long)i);
    if (m[0] == 'i' && mlen > 3 && !in_list(m + 8, mlen - 9, buf))
        return M_FAIL;
    return made(c, v, buf, t == SMOE_T_INT ? M_EXACT : M_LAX, out);
}

/* float: a finite number in bounds. */
static int try_float(coerce_ctx *c, const char *bounds, const smoe_node *v, smoe_scalar_type t,
                     const smoe_node **out)
{
    double d;
    int64_t i;
    int is_int;
    char buf[64];
    if (!numeric_of(v, t, &d, &i, &is_int) || !isfinite(d) || !bounds_ok(bounds, d))
        return M_FAIL;
    if (t == SMOE_T_FLOAT) {
        *out = v;
        return M_EXACT;
    }
    float_text(d, buf, sizeof buf);
    return made(c, v, buf, t == SMOE_T_INT ? M_STRICT : M_LAX, out);
}

/* list[ITEM] (item: the union between the brackets): each item coerced,
 * the list's level the loosest item's. */
static int try_list(coerce_ctx *c, const char *item, size_t ilen, const smoe_node *v,
                    const smoe_node **out)
{
    if (smoe_node_type(v) != SMOE_T_SEQ)
        return M_FAIL;
    smoe_node *l = smoe_arena_alloc(c->a, sizeof *l);
    smoe_node **items = smoe_arena_alloc(c->a, sizeof *items * (size_t)(v->n + 1));
    if (!l || !items) {
        c->oom = 1;
        return M_FAIL;
    }
    *l = *v;
    int lvl = M_EXACT;
    for (int k = 0; k < v->n; k++) {
        const smoe_node *got;
        int li = union_try(c, item, ilen, "", v->items[k], &got);
        if (li == M_FAIL)
            return M_FAIL;
        lvl = li < lvl ? li : lvl;
        items[k] = (smoe_node *)got;
    }
    l->items = items;
    *out = l;
    return lvl;
}

/* Try one union member (type text of length mlen). */
static int member_try(coerce_ctx *c, const char *m, size_t mlen, const char *bounds,
                      const smoe_node *v, const smoe_node **out)
{
    smoe_scalar_type t = smoe_node_type(v);
#define IS(lit) (mlen == sizeof(lit) - 1 && strncmp(m, lit, mlen) == 0)
    /* members that take a value of one YAML type as it is */
    static const struct { const char *name; smoe_scalar_type t; } k_as_is[] = {
        { "none", SMOE_T_NULL }, { "str", SMOE_T_STR }, { "dict", SMOE_T_MAP },
        { "list", SMOE_T_SEQ },
    };
    if (IS("any")) {
        *out = v;
        return M_EXACT;
    }
    for (size_t k = 0; k < sizeof k_as_is / sizeof k_as_is[0]; k++)
        if (mlen == strlen(k_as_is[k].name) && strncmp(m, k_as_is[k].name, mlen) == 0) {
            if (t != k_as_is[k].t)
                return M_FAIL;
            *out = v;
            return M_EXACT;
        }
    if (IS("bool"))
        return try_bool(c, v, t, out);
    if (IS("int") || (mlen > 8 && strncmp(m, "intenum{", 8) == 0))
        return try_int(c, m, mlen, bounds, v, t, out);
    if (IS("float"))
        return try_float(c, bounds, v, t, out);
#undef IS
    if (mlen > 5 && strncmp(m, "enum{", 5) == 0) {
        if (t != SMOE_T_STR || !in_list(m + 5, mlen - 6, v->str))
            return M_FAIL;
        *out = v;
        return M_EXACT;
    }
    if (mlen > 5 && strncmp(m, "list[", 5) == 0)
        return try_list(c, m + 5, mlen - 6, v, out);
    /* "model:...": handled by the owning field (needs its name) */
    return M_FAIL;
}

/* Split a union at top-level '|' and keep the best match. */
static int union_try(coerce_ctx *c, const char *type, size_t tlen, const char *bounds,
                     const smoe_node *v, const smoe_node **out)
{
    int best = M_FAIL;
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= tlen; i++) {
        char ch = i < tlen ? type[i] : '|';
        if (ch == '[' || ch == '{')
            depth++;
        else if (ch == ']' || ch == '}')
            depth--;
        if (ch != '|' || depth > 0)
            continue;
        const smoe_node *got = NULL;
        int lvl = member_try(c, type + start, i - start, bounds, v, &got);
        if (lvl > best) {
            best = lvl;
            *out = got;
        }
        start = i + 1;
    }
    return best;
}

static const char *value_text(const smoe_node *v)
{
    return v->kind == SMOE_NODE_SCALAR ? v->str
           : v->kind == SMOE_NODE_SEQ  ? "a list"
                                       : "a mapping";
}

/* "int|list[int]|none" -> "an integer or a list or null", for messages. */
static void describe(const char *type, char *buf, size_t n)
{
    size_t len = 0;
    int depth = 0;
    buf[0] = 0;
    for (const char *p = type, *start = type;; p++) {
        if (*p == '[' || *p == '{')
            depth++;
        else if (*p == ']' || *p == '}')
            depth--;
        if ((*p != '|' || depth > 0) && *p)
            continue;
        size_t ml = (size_t)(p - start);
        const char *w = "a value of that type";
        char enumtxt[256];
        if (ml == 3 && strncmp(start, "int", 3) == 0) w = "an integer";
        else if (ml == 5 && strncmp(start, "float", 5) == 0) w = "a number";
        else if (ml == 4 && strncmp(start, "bool", 4) == 0) w = "a boolean";
        else if (ml == 3 && strncmp(start, "str", 3) == 0) w = "a string";
        else if (ml == 4 && strncmp(start, "none", 4) == 0) w = "null";
        else if (ml == 4 && strncmp(start, "dict", 4) == 0) w = "a mapping";
        else if (ml >= 4 && strncmp(start, "list", 4) == 0) w = "a list";
        else if (ml > 6 && strncmp(start, "model:", 6) == 0) w = "a mapping";
        else if ((ml > 5 && strncmp(start, "enum{", 5) == 0) ||
                 (ml > 8 && strncmp(start, "intenum{", 8) == 0)) {
            const char *o = strchr(start, '{') + 1;
            /* the member ends with its closing brace */
            snprintf(enumtxt, sizeof enumtxt, "one of {%.*s}", (int)(start + ml - 1 - o), o);
            w = enumtxt;
        }
        int k = snprintf(buf + len, n - len, "%s%s", len ? " or " : "", w);
        if (k < 0 || (size_t)k >= n - len)
            break;
        len += (size_t)k;
        if (!*p)
            break;
        start = p + 1;
    }
}

smoe_status cfg_field_coerce(smoe_arena *a, const cfg_fields *t, const cfg_field *f,
                             const smoe_node *v, const char *where,
                             const smoe_node **out, smoe_err *err)
{
    coerce_ctx c = { a, t, 0 };
    int lvl;
    /* pyconfig turns a string "none" (any case) into None first */
    if (v->kind == SMOE_NODE_SCALAR && strcasecmp(v->str, "none") == 0) {
        smoe_node *nn = cfg_scalar(a, "null", v->loc);
        if (!nn)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        v = nn;
    }
    if (strncmp(f->type, "model:", 6) == 0)
        lvl = model_try(&c, f->name, strlen(f->name), f->bounds, v, out);
    else
        lvl = union_try(&c, f->type, strlen(f->type), f->bounds, v, out);
    if (c.oom)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (lvl != M_FAIL)
        return SMOE_OK;
    char want[512];
    describe(f->type, want, sizeof want);
    /* a value of the right type outside the field's bounds says so */
    const char *sep = f->bounds[0] ? ", " : "";
    const char *sat = f->bounds[0] ? " satisfying " : "";
    if (where)
        return smoe_err_in(err, SMOE_EINVAL, where,
                           "'%s' must be %s%s%s, got '%s' (MaxTextConfig: %s%s%s)", f->name,
                           want, sat, f->bounds, value_text(v), f->type, sep, f->bounds);
    return smoe_err_at(err, SMOE_EINVAL, v->loc,
                       "'%s' must be %s%s%s, got '%s' (MaxTextConfig: %s%s%s)", f->name, want,
                       sat, f->bounds, value_text(v), f->type, sep, f->bounds);
}
