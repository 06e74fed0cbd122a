/* Config assembly, as MaxText's pyconfig does it: base file (with
 * base_config: inheritance) <- model file <- key=value overrides, the
 * hand-written logical_axis_rules merge, the custom_mesh_and_rule file
 * replacing mesh and rules wholesale, and the pipeline post-fixups.
 * Every failure names the file:line:col or the argument it comes from. */
#define _POSIX_C_SOURCE 200809L
#include "config_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_INHERIT 16

typedef struct override {
    const char *key;
    const smoe_node *value;
    const char *where; /* "argument 'k=v'" or "environment variable X" */
    const char *as;    /* the name it was set by: key, or an older
                          release's name of it (smoe_old_key) */
} override;

typedef struct loader {
    smoe_config *c;
    smoe_arena *a;
    cfg_map base;     /* after inheritance */
    cfg_map model;    /* model file keys */
    override *ov;
    int n_ov;
    const char *model_file;
    const char *model_where; /* where the model name/file was given */
    const cfg_fields *fields; /* MaxText's MaxTextConfig fields */
} loader;

int cfg_file_exists(const char *p) { return access(p, R_OK) == 0; }

static const char *dir_of(smoe_arena *a, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ".";
    if (slash == path)
        return "/";
    return smoe_arena_strndup(a, path, (size_t)(slash - path));
}

smoe_status cfg_add_source(smoe_config *c, smoe_arena *a, const char *path, smoe_err *err)
{
    const char *file = smoe_arena_strdup(a, path);
    if (!file)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (c->n_files == (int)(sizeof c->files / sizeof c->files[0]))
        return smoe_err_in(err, SMOE_EINVAL, path, "more than %d config files in one config",
                           (int)(sizeof c->files / sizeof c->files[0]));
    c->files[c->n_files++] = file;
    return SMOE_OK;
}

/* Load `path`, resolving base_config: chains (relative to the file's own
 * directory, then to the configs directory); the child's keys win. */
static smoe_status load_chain(loader *L, const char *path, int depth,
                              cfg_map *out, smoe_loc from, smoe_err *err)
{
    smoe_node *root;
    smoe_status s;
    if (depth > MAX_INHERIT)
        return smoe_err_at(err, SMOE_EINVAL, from,
                           "base_config chain deeper than %d (a cycle?)",
                           MAX_INHERIT);
    if (!cfg_file_exists(path)) {
        if (from.file)
            return smoe_err_at(err, SMOE_ENOTFOUND, from,
                               "base_config file '%s' not found", path);
        return smoe_err_in(err, SMOE_ENOTFOUND, path, "cannot open config file");
    }
    if ((s = smoe_yaml_load_file(L->a, path, &root, err)))
        return s;
    if (root->kind == SMOE_NODE_SCALAR && root->str[0] == 0)
        return SMOE_OK; /* empty file */
    if (root->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, root->loc,
                           "a config file must be a mapping of keys to values");
    const smoe_node *parent = smoe_node_get(root, "base_config");
    if (parent && smoe_node_type(parent) != SMOE_T_NULL) {
        if (parent->kind != SMOE_NODE_SCALAR)
            return smoe_err_at(err, SMOE_EINVAL, parent->loc,
                               "base_config must be a file name");
        const char *p = parent->str;
        if (p[0] != '/') {
            const char *cand = smoe_arena_printf(L->a, "%s/%s", dir_of(L->a, path), p);
            if (!cfg_file_exists(cand) && L->c->dir)
                cand = smoe_arena_printf(L->a, "%s/%s", L->c->dir, p);
            p = cand;
        }
        if ((s = load_chain(L, p, depth + 1, out, parent->loc, err)))
            return s;
    }
    if ((s = cfg_add_source(L->c, L->a, path, err)))
        return s;
    for (int i = 0; i < root->n; i++)
        if (strcmp(root->keys[i], "base_config") != 0 &&
            cfg_map_set(L->a, out, root->keys[i], root->items[i]))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    return SMOE_OK;
}

/* Is the type of an override compatible with the base value's type? */
static int type_ok(smoe_scalar_type base, smoe_scalar_type ov)
{
    switch (base) {
    case SMOE_T_NULL: return 1;
    case SMOE_T_INT: return ov == SMOE_T_INT;
    case SMOE_T_FLOAT: return ov == SMOE_T_INT || ov == SMOE_T_FLOAT;
    case SMOE_T_BOOL: return ov == SMOE_T_BOOL;
    case SMOE_T_STR: return ov != SMOE_T_SEQ && ov != SMOE_T_MAP;
    case SMOE_T_SEQ: return ov == SMOE_T_SEQ;
    case SMOE_T_MAP: return ov == SMOE_T_MAP;
    }
    return 0;
}

/* "a,b,c" as a list of plain scalars; "" as an empty list. */
static const smoe_node *cfg_split_list(smoe_arena *a, const smoe_node *v)
{
    int n = v->str[0] ? 1 : 0;
    for (const char *p = v->str; *p; p++)
        n += *p == ',';
    smoe_node *l = smoe_arena_alloc(a, sizeof *l);
    smoe_node **it = smoe_arena_alloc(a, sizeof *it * (size_t)(n + 1));
    if (!l || !it)
        return NULL;
    memset(l, 0, sizeof *l);
    l->kind = SMOE_NODE_SEQ;
    l->loc = v->loc;
    l->items = it;
    const char *p = v->str;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        char *txt = smoe_arena_strndup(a, p, len);
        if (!txt || !(it[i] = cfg_scalar(a, txt, v->loc)))
            return NULL;
        p += len + (p[len] == ',');
    }
    l->n = n;
    return l;
}

/* What happens to a value before pydantic's type check: pyconfig's
 * _prepare_for_pydantic fix-ups, and types.py's one "before" validator
 * (constant_bound_config: "" -> [], "a,b" -> [a, b] as floats). */
static const smoe_node *pyconfig_fixup(smoe_arena *a, const char *key, const smoe_node *v)
{
    static const char *const empty_is_none[] = {
        "hf_train_files", "hf_eval_files", "hf_access_token", "hf_name",
        "hf_data_dir", "hf_eval_split", "tokenizer_path", NULL };
    static const char *const none_is_empty[] = {
        "run_name", "dump_hlo_local_module_name", "dump_hlo_module_name", NULL };
    static const char *const str_to_list[] = {
        "train_data_columns", "eval_data_columns", "trainable_parameters_mask",
        "adamw_mask", NULL };
    smoe_scalar_type t = smoe_node_type(v);
    int isnone = t == SMOE_T_NULL ||
                 (v->kind == SMOE_NODE_SCALAR && strcasecmp(v->str, "none") == 0);
    for (int i = 0; empty_is_none[i]; i++)
        if (strcmp(key, empty_is_none[i]) == 0 && t == SMOE_T_STR && !v->str[0])
            return cfg_scalar(a, "null", v->loc);
    for (int i = 0; none_is_empty[i]; i++)
        if (strcmp(key, none_is_empty[i]) == 0 && isnone) {
            smoe_node *n = cfg_scalar(a, "", v->loc);
            if (n)
                n->plain = 0;
            return n;
        }
    if (strcmp(key, "constant_bound_config") == 0 && t == SMOE_T_STR)
        return cfg_split_list(a, v);
    for (int i = 0; str_to_list[i]; i++)
        if (strcmp(key, str_to_list[i]) == 0 && t == SMOE_T_STR) {
            smoe_node *l = smoe_arena_alloc(a, sizeof *l);
            smoe_node **it = smoe_arena_alloc(a, sizeof *it);
            if (!l || !it)
                return NULL;
            memset(l, 0, sizeof *l);
            l->kind = SMOE_NODE_SEQ;
            l->loc = v->loc;
            l->n = 1;
            it[0] = (smoe_node *)v;
            l->items = it;
            return l;
        }
    return v;
}

/* Validate one key as MaxText does: a MaxTextConfig field gets pydantic's
 * coercion (*out is the coerced value); a key of the base chain that is no
 * field (an older MaxText version's key) keeps the base value's type; any
 * other key is an error. model_name and custom_mesh_and_rule are looked up
 * as files instead of checked against MaxText's lists of names, so that
 * smoe's bundled models and a user's own rule files can be named. */
static smoe_status check_key(loader *L, const char *key, const smoe_node *v,
                             const char *where, smoe_loc loc,
                             const smoe_node **out, smoe_err *err)
{
    const cfg_field *f = cfg_field_find(L->fields, key);
    *out = v;
    if (f && strcmp(key, "model_name") != 0 && strcmp(key, "custom_mesh_and_rule") != 0) {
        const smoe_node *fx = pyconfig_fixup(L->a, key, v);
        if (!fx)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        return cfg_field_coerce(L->a, L->fields, f, fx, where, out, err);
    }
    if (f)
        return SMOE_OK;
    const smoe_node *b = cfg_map_get(&L->base, key);
    smoe_old_key ok;
    if (!b && smoe_old_key_find(key, &ok) && ok.def &&
        !(b = cfg_scalar(L->a, ok.def, (smoe_loc){ "MaxText's default then", 0, 0 })))
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (!b) {
        if (where)
            return smoe_err_in(err, SMOE_EINVAL, where,
                               "unknown key '%s': it is no MaxText config field "
                               "(MaxTextConfig at " SMOE_MAXTEXT_FIELDS_COMMIT
                               ") and not in the base config", key);
        return smoe_err_at(err, SMOE_EINVAL, loc,
                           "unknown key '%s': it is no MaxText config field "
                           "(MaxTextConfig at " SMOE_MAXTEXT_FIELDS_COMMIT
                           ") and not in the base config", key);
    }
    smoe_scalar_type tb = smoe_node_type(b), tv = smoe_node_type(v);
    if (!type_ok(tb, tv)) {
        char bl[320];
        smoe_loc_format(b->loc, bl, sizeof bl);
        if (where)
            return smoe_err_in(err, SMOE_EINVAL, where,
                               "'%s' must be %s (as in %s), got '%s'", key,
                               smoe_type_name(tb), bl,
                               v->kind == SMOE_NODE_SCALAR ? v->str : "a collection");
        return smoe_err_at(err, SMOE_EINVAL, loc, "'%s' must be %s (as in %s)",
                           key, smoe_type_name(tb), bl);
    }
    return SMOE_OK;
}

/* Nodes parsed from an argument are located by the argument alone. */
static void relocate(smoe_node *n, const char *where)
{
    n->loc.file = where;
    n->loc.line = n->loc.col = 0;
    for (int i = 0; n->kind != SMOE_NODE_SCALAR && i < n->n; i++)
        relocate(n->items[i], where);
    for (int i = 0; n->kind == SMOE_NODE_MAP && i < n->n; i++)
        n->key_locs[i] = n->loc;
}

/* Today's name of a key: an older release's name of a renamed key
 * (smoe_old_key) is read as the key it became. */
static const char *current_name(const char *key)
{
    smoe_old_key ok;
    return smoe_old_key_find(key, &ok) && ok.current ? ok.current : key;
}

static smoe_status add_override(loader *L, const char *name, const char *text,
                                const char *where, smoe_err *err)
{
    smoe_node *v;
    smoe_status s;
    const char *key = current_name(name);
    for (int i = 0; i < L->n_ov; i++) { /* one override a key */
        if (strcmp(L->ov[i].key, key) != 0)
            continue;
        if (strcmp(L->ov[i].as, name) != 0)
            return smoe_err_in(err, SMOE_EINVAL, where,
                               "'%s' and '%s' are one setting (an older MaxText "
                               "release's name and today's), and %s sets it too: "
                               "set one", name, L->ov[i].as, L->ov[i].where);
        if (strncmp(L->ov[i].where, "env", 3) == 0)
            return smoe_err_in(err, SMOE_EINVAL, where,
                               "'%s' is set both on the command line and by %s",
                               key, L->ov[i].where);
    }
    if ((s = smoe_yaml_load_string(L->a, text, where, &v, err)))
        return s;
    relocate(v, where);
    const smoe_node *cv;
    if ((s = check_key(L, key, v, where, v->loc, &cv, err)))
        return s;
    override *o = NULL;
    for (int i = 0; i < L->n_ov; i++)
        if (strcmp(L->ov[i].key, key) == 0)
            o = &L->ov[i]; /* a later key=value wins, as kwargs do */
    if (!o)
        o = &L->ov[L->n_ov++];
    o->key = key;
    o->value = cv;
    o->where = where;
    o->as = name;
    return SMOE_OK;
}

const char *smoe_config_env_name(const char *key, char *buf, size_t n)
{
    size_t j = (size_t)snprintf(buf, n, "MAXTEXT_");
    for (; *key && j + 1 < n; key++)
        buf[j++] = (char)toupper((unsigned char)*key);
    buf[j < n ? j : n - 1] = 0;
    return buf;
}

static const override *find_override(const loader *L, const char *key)
{
    for (int i = 0; i < L->n_ov; i++)
        if (strcmp(L->ov[i].key, key) == 0)
            return &L->ov[i];
    return NULL;
}

static smoe_status parse_overrides(loader *L, const smoe_config_opts *o,
                                   smoe_err *err)
{
    int cap = o->n_overrides + L->base.n + 4;
    L->ov = smoe_arena_alloc(L->a, sizeof *L->ov * (size_t)cap);
    if (!L->ov)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (o->use_env) {
        for (int i = 0; i < L->base.n; i++) {
            char name[256];
            const char *v = getenv(smoe_config_env_name(L->base.e[i].key, name, sizeof name));
            if (!v)
                continue;
            const char *where = smoe_arena_printf(L->a, "environment variable %s", name);
            smoe_status s = add_override(L, L->base.e[i].key, v, where, err);
            if (s)
                return s;
        }
    }
    for (int i = 0; i < o->n_overrides; i++) {
        const char *arg = o->overrides[i];
        const char *eq = strchr(arg, '=');
        const char *where = o->override_where && o->override_where[i]
                              ? o->override_where[i]
                              : smoe_arena_printf(L->a, "argument '%s'", arg);
        if (!eq || eq == arg)
            return smoe_err_in(err, SMOE_EINVAL, where,
                               "expected KEY=VALUE (a MaxText config key)");
        const char *key = smoe_arena_strndup(L->a, arg, (size_t)(eq - arg));
        smoe_status s = add_override(L, key, eq + 1, where, err);
        if (s)
            return s;
    }
    return SMOE_OK;
}

/* Effective value of a key before the model file is merged in. */
static const smoe_node *early_value(const loader *L, const char *key,
                                    const char **where)
{
    const override *o = find_override(L, key);
    if (o) {
        *where = o->where;
        return o->value;
    }
    *where = NULL;
    return cfg_map_get(&L->base, key);
}

int cfg_looks_like_file(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 4 && strcmp(s + n - 4, ".yml") == 0) ||
           (n > 5 && strcmp(s + n - 5, ".yaml") == 0);
}

static smoe_status load_model(loader *L, const smoe_config_opts *o,
                              smoe_err *err)
{
    const char *path = NULL, *where = NULL;
    if (o->model) {
        where = smoe_arena_printf(L->a, "argument '--model %s'", o->model);
        if (cfg_looks_like_file(o->model)) {
            path = o->model;
            if (!cfg_file_exists(path))
                return smoe_err_in(err, SMOE_ENOTFOUND, where,
                                   "model file '%s' not found", path);
        } else {
            const override *mo = find_override(L, "model_name");
            if (mo && !(mo->value->kind == SMOE_NODE_SCALAR &&
                        strcmp(mo->value->str, o->model) == 0))
                return smoe_err_in(err, SMOE_EINVAL, where,
                                   "conflicts with %s", mo->where);
            smoe_status s = add_override(L, "model_name", o->model, where, err);
            if (s)
                return s;
        }
    }
    if (!path) {
        const smoe_node *mn = early_value(L, "model_name", &where);
        if (!mn || smoe_node_type(mn) == SMOE_T_NULL)
            return SMOE_OK;
        if (mn->kind != SMOE_NODE_SCALAR)
            return smoe_err_at(err, SMOE_EINVAL, mn->loc, "model_name must be a name");
        char name[256];
        snprintf(name, sizeof name, "%s", mn->str);
        char *inst = strstr(name, "-Instruct");
        if (inst)
            memmove(inst, inst + 9, strlen(inst + 9) + 1);
        if (strcmp(name, "default") == 0)
            return SMOE_OK;
        if (!where) {
            char buf[320];
            where = smoe_arena_strdup(L->a, smoe_loc_format(mn->loc, buf, sizeof buf));
        }
        path = smoe_arena_printf(L->a, "%s/models/%s.yml", L->c->dir, name);
        if (strchr(name, '/') || !cfg_file_exists(path))
            return smoe_err_in(err, SMOE_ENOTFOUND, where,
                               "unknown model '%s': no models/%s.yml in %s",
                               name, name, L->c->dir);
    }
    smoe_node *root;
    smoe_status s = smoe_yaml_load_file(L->a, path, &root, err);
    if (s)
        return s;
    if ((s = cfg_add_source(L->c, L->a, path, err)))
        return s;
    L->model_file = path;
    L->model_where = where;
    if (root->kind == SMOE_NODE_SCALAR && root->str[0] == 0)
        return SMOE_OK;
    if (root->kind != SMOE_NODE_MAP)
        return smoe_err_at(err, SMOE_EINVAL, root->loc,
                           "a model file must be a mapping of keys to values");
    for (int i = 0; i < root->n; i++) {
        const smoe_node *cv;
        const char *key = current_name(root->keys[i]);
        if (cfg_map_index(&L->model, key) >= 0) /* YAML refuses repeated keys */
            return smoe_err_at(err, SMOE_EINVAL, root->key_locs[i],
                               "'%s' and '%s' are one setting (an older MaxText "
                               "release's name and today's): set one",
                               root->keys[i], key);
        if ((s = check_key(L, key, root->items[i], NULL, root->key_locs[i], &cv, err)))
            return s;
        if (cfg_map_set(L->a, &L->model, key, cv))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return SMOE_OK;
}

static int flag_value(const smoe_node *n)
{
    return n && smoe_node_type(n) == SMOE_T_BOOL && smoe_node_bool_value(n);
}

/* MaxText's rule merge: see config.h. */
static smoe_status apply_rules(loader *L, smoe_rules *cur, const smoe_node *nn,
                               int flag, smoe_err *err)
{
    smoe_rules add = { 0, NULL };
    smoe_status s;
    if (nn && (s = cfg_rules_from_node(L->a, nn, &add, err)))
        return s;
    if (flag) {
        *cur = add;
        return SMOE_OK;
    }
    if (add.n == 0)
        return SMOE_OK;
    smoe_rule *r = smoe_arena_alloc(L->a, sizeof *r * (size_t)(cur->n + add.n));
    if (!r)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < cur->n; i++) {
        int dropped = 0;
        for (int j = 0; j < add.n && !dropped; j++)
            dropped = strcmp(cur->r[i].name, add.r[j].name) == 0;
        if (!dropped)
            r[n++] = cur->r[i];
    }
    for (int j = 0; j < add.n; j++)
        r[n++] = add.r[j];
    cur->r = r;
    cur->n = n;
    return SMOE_OK;
}

static smoe_status check_model_conflicts(loader *L, smoe_err *err)
{
    /* override_model_config as it stands after base <- model <- overrides */
    const smoe_node *omc = cfg_map_get(&L->base, "override_model_config");
    const smoe_node *m = cfg_map_get(&L->model, "override_model_config");
    const override *o = find_override(L, "override_model_config");
    if (m)
        omc = m;
    if (o)
        omc = o->value;
    if (flag_value(omc))
        return SMOE_OK;
    for (int i = 0; i < L->n_ov; i++) {
        const smoe_node *mv = cfg_map_get(&L->model, L->ov[i].key);
        if (!mv || strcmp(L->ov[i].key, "model_name") == 0)
            continue;
        if (!smoe_node_equal(mv, L->ov[i].value)) {
            char ml[320];
            return smoe_err_in(err, SMOE_EINVAL, L->ov[i].where,
                               "'%s' is set by the model file (%s) to a "
                               "different value; pass override_model_config=true "
                               "to override model settings",
                               L->ov[i].key, smoe_loc_format(mv->loc, ml, sizeof ml));
        }
    }
    return SMOE_OK;
}

/* An older release's base.yml sets a renamed key by its old name: that
 * value is today's key's default, unless a file or argument sets it. */
static smoe_status base_old_name(loader *L, const char *key, const smoe_node *v,
                                 smoe_err *err)
{
    const char *cur = current_name(key);
    const smoe_node *cv;
    if (cur == key || cfg_map_index(&L->base, cur) >= 0 ||
        cfg_map_index(&L->model, cur) >= 0 || find_override(L, cur))
        return SMOE_OK;
    smoe_status s = check_key(L, cur, v, NULL, v->loc, &cv, err);
    if (s)
        return s;
    if (cfg_map_set(L->a, &L->c->values, cur, cv))
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    return SMOE_OK;
}

static smoe_status merge(loader *L, smoe_err *err)
{
    smoe_config *c = L->c;
    smoe_status s;
    smoe_rules rules = { 0, NULL };
    if ((s = apply_rules(L, &rules, cfg_map_get(&L->base, "logical_axis_rules"), 1, err)))
        return s;
    if ((s = apply_rules(L, &rules, cfg_map_get(&L->model, "logical_axis_rules"),
                         flag_value(cfg_map_get(&L->model, "override_logical_axis_rules")),
                         err)))
        return s;
    const override *ro = find_override(L, "logical_axis_rules");
    const override *rf = find_override(L, "override_logical_axis_rules");
    if ((s = apply_rules(L, &rules, ro ? ro->value : NULL,
                         rf ? flag_value(rf->value) : 0, err)))
        return s;
    c->rules = rules;
    for (int i = 0; i < L->base.n; i++) {
        const char *key = L->base.e[i].key;
        const smoe_node *v = L->base.e[i].value;
        /* pydantic validates what survives the merge, base values included;
         * a base value today's MaxTextConfig refuses is kept as written: it
         * is the default of the (older) MaxText version whose base.yml this
         * is, which validated it against its own types */
        const smoe_node *cv = v;
        if (cfg_map_index(&L->model, key) < 0 && !find_override(L, key) &&
            (s = check_key(L, key, v, NULL, v->loc, &cv, err)) == SMOE_ENOMEM)
            return s;
        v = s == SMOE_OK ? cv : v;
        if (cfg_map_set(L->a, &c->values, key, v))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        if ((s = base_old_name(L, key, v, err)))
            return s;
    }
    for (int i = 0; i < L->model.n; i++)
        if (cfg_map_set(L->a, &c->values, L->model.e[i].key, L->model.e[i].value))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < L->n_ov; i++)
        if (cfg_map_set(L->a, &c->values, L->ov[i].key, L->ov[i].value))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    /* fields no file sets take MaxTextConfig's defaults */
    for (int i = 0; i < cfg_fields_count(L->fields); i++) {
        const cfg_field *f = cfg_field_at(L->fields, i);
        if (!f->def || strchr(f->name, '.') || cfg_map_index(&c->values, f->name) >= 0)
            continue;
        smoe_node *d;
        smoe_loc at = { "MaxText default (types.py)", 0, 0 };
        size_t dl = strlen(f->def);
        if (f->def[0] == '[' || f->def[0] == '{' ||
            (f->def[0] == '"' && strchr(f->def, '\\'))) {
            if ((s = smoe_yaml_load_string(L->a, f->def, at.file, &d, err)))
                return s;
            relocate(d, at.file);
        } else if (f->def[0] == '"' && dl >= 2) { /* a plain JSON string */
            char *txt = smoe_arena_strndup(L->a, f->def + 1, dl - 2);
            if (!txt || !(d = cfg_scalar(L->a, txt, at)))
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            d->plain = 0;
        } else if (!(d = cfg_scalar(L->a, f->def, at))) { /* number, true, null */
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        }
        if (cfg_map_set(L->a, &c->values, f->name, d))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return SMOE_OK;
}

smoe_status smoe_config_load(const smoe_config_opts *opts, smoe_config **out,
                             smoe_err *err)
{
    smoe_status s;
    loader L;
    memset(&L, 0, sizeof L);
    *out = NULL;
    smoe_arena *a = smoe_arena_new(256 * 1024);
    smoe_config *c = a ? smoe_arena_alloc(a, sizeof *c) : NULL;
    if (!c) {
        smoe_arena_free(a);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    c->arena = a;
    L.c = c;
    L.a = a;
    const char *base = opts->base_path;
    if (!base) {
        const char *d = smoe_config_default_dir();
        if (!d) {
            s = smoe_err_set(err, SMOE_ENOTFOUND,
                             "cannot find the bundled configs directory; "
                             "pass --base FILE or set SMOE_CONFIG_DIR");
            goto fail;
        }
        base = smoe_arena_printf(a, "%s/base.yml", d);
    }
    c->dir = dir_of(a, base);
    if ((s = cfg_fields_open(a, &L.fields, err)))
        goto fail;
    smoe_loc none = { NULL, 0, 0 };
    if ((s = load_chain(&L, base, 0, &L.base, none, err)))
        goto fail;
    if ((s = parse_overrides(&L, opts, err)))
        goto fail;
    if ((s = load_model(&L, opts, err)))
        goto fail;
    if ((s = check_model_conflicts(&L, err)))
        goto fail;
    if ((s = merge(&L, err)))
        goto fail;
    const override *rov = find_override(&L, "custom_mesh_and_rule");
    if ((s = cfg_apply_rules_file(c, a, opts->rules, rov ? rov->where : NULL, err)))
        goto fail;
    if ((s = cfg_pipeline_fixups(L.c, L.a, err)))
        goto fail;
    *out = c;
    return SMOE_OK;
fail:
    smoe_arena_free(a);
    return s;
}

void smoe_config_free(smoe_config *c)
{
    if (c)
        smoe_arena_free(c->arena);
}

int smoe_config_sources(const smoe_config *c, const char *const **files)
{
    *files = c->files;
    return c->n_files;
}

const char *smoe_config_default_dir(void)
{
    static char found[4096];
    if (found[0])
        return found;
    const char *env = getenv("SMOE_CONFIG_DIR");
    if (env && *env) {
        snprintf(found, sizeof found, "%s", env);
        return found;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return NULL;
    *slash = 0;
    static const char *const rel[] = { "configs", "../configs", "../share/smoe/configs" };
    for (int i = 0; i < 3; i++) {
        char cand[4096 + 64];
        snprintf(cand, sizeof cand, "%s/%s/base.yml", exe, rel[i]);
        if (cfg_file_exists(cand)) {
            size_t len = strlen(cand) - strlen("/base.yml");
            if (len >= sizeof found)
                return NULL;
            memcpy(found, cand, len);
            found[len] = 0;
            return found;
        }
    }
    return NULL;
}
