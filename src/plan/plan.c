/* Plan construction: inventory -> state shardings (Flax resolution with the
 * config's rules) -> per-layer gather plans, co-axis and legacy -> summary.
 */
#include "smoe/plan.h"
#include "legacy_names.h"

#include <stdio.h>
#include <string.h>

static const char *const k_stacks[] = { "layers", "dense_layers", "moe_layers",
                                        "local_layers", NULL };

static int is_stack_name(const char *n)
{
    for (int i = 0; n && k_stacks[i]; i++)
        if (strcmp(n, k_stacks[i]) == 0)
            return 1;
    return 0;
}

static smoe_entry_kind classify(const char *key)
{
    if (strcmp(key, ".step") == 0)
        return SMOE_ENTRY_STEP;
    if (strncmp(key, ".params/", 8) == 0)
        return SMOE_ENTRY_PARAM;
    if (strstr(key, "/.mu/"))
        return SMOE_ENTRY_MU;
    if (strstr(key, "/.nu/"))
        return SMOE_ENTRY_NU;
    size_t n = strlen(key);
    if (n >= 7 && strcmp(key + n - 7, "/.count") == 0)
        return SMOE_ENTRY_COUNT;
    return SMOE_ENTRY_OTHER;
}

/* ".params/['params']/['decoder']/['x']" -> "decoder/x" */
static const char *path_of(smoe_arena *a, const char *key)
{
    const char *p = strstr(key, "['params']/");
    if (!p)
        return NULL;
    p += strlen("['params']/");
    size_t n = strlen(p);
    char *out = smoe_arena_alloc(a, n + 1);
    if (!out)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '[' && p[i + 1] == '\'') {
            i++;
            continue;
        }
        if (p[i] == '\'' && p[i + 1] == ']') {
            i++;
            continue;
        }
        out[j++] = p[i];
    }
    out[j] = 0;
    return out;
}

static void per_layer(const smoe_weight *w, smoe_pspec *spec, int64_t shape[])
{
    spec->rank = 0;
    for (int d = 0; d < w->rank; d++) {
        if (d == w->scan_axis)
            continue;
        shape[spec->rank] = w->shape[d];
        spec->dim[spec->rank++] = w->spec.dim[d];
    }
}

static smoe_plan_stack *stack_of(smoe_plan_summary *s, const char *name,
                                 int64_t layers)
{
    for (int i = 0; i < s->n_stacks; i++)
        if (strcmp(s->stack[i].name, name) == 0)
            return &s->stack[i];
    if (s->n_stacks == SMOE_MAX_STACKS)
        return NULL;
    smoe_plan_stack *st = &s->stack[s->n_stacks++];
    memset(st, 0, sizeof *st);
    st->name = name;
    st->layers = layers;
    return st;
}

static void count_ways(smoe_plan_summary *s, int64_t ways)
{
    for (int i = 0; i < s->n_ways; i++)
        if (s->ways[i] == ways) {
            s->ways_count[i]++;
            return;
        }
    if (s->n_ways < SMOE_MAX_WAYS) {
        s->ways[s->n_ways] = ways;
        s->ways_count[s->n_ways++] = 1;
    }
}

static void summarise(smoe_plan *p, smoe_plan_summary *s, int legacy)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        if (!w->prefetch)
            continue;
        const smoe_gather *g = legacy ? &w->legacy : &w->gather;
        smoe_plan_stack *st = stack_of(s, w->stack, w->layers);
        if (!st)
            continue;
        st->n_weights++;
        st->gathered_bytes += g->bytes_out;
        switch (g->status) {
        case SMOE_GATHER_TAGGED:
            st->tagged++;
            s->tagged++;
            st->uneven += g->uneven;
            s->uneven += g->uneven;
            st->tagged_bytes_recv += g->bytes_recv;
            count_ways(s, g->ways);
            break;
        case SMOE_GATHER_FALLBACK:
            st->fallback++;
            s->fallback++;
            st->fallback_bytes_recv += g->bytes_recv;
            break;
        case SMOE_GATHER_NOOP:
            st->noop++;
            s->noop++;
            break;
        }
        st->residual_bytes_recv += g->residual_bytes_recv;
    }
    for (int k = 0; k < s->n_stacks; k++) {
        const smoe_plan_stack *st = &s->stack[k];
        s->step_gather_bytes_recv +=
            2 * st->layers * (st->tagged_bytes_recv + st->fallback_bytes_recv);
        s->step_residual_bytes_recv += 2 * st->layers * st->residual_bytes_recv;
    }
}

/* JAX's NamedSharding refuses a spec naming an axis the mesh does not have
 * ("Resource axis: X of ... is not found in mesh"); MaxText builds every
 * state sharding that way, so such a rule is an error for a weight (only
 * activation constraints drop unknown axes). The message names the rule. */
static smoe_status check_axes_in_mesh(const smoe_plan *p, const smoe_logical_entry *e,
                                      const smoe_rules *rules, const smoe_pspec *spec,
                                      smoe_err *err)
{
    for (int d = 0; d < spec->rank; d++)
        for (int k = 0; k < spec->dim[d].n; k++) {
            const char *ax = spec->dim[d].ax[k];
            if (smoe_mesh_find(&p->mesh, ax) >= 0)
                continue;
            smoe_loc at = e->loc;
            for (int r = 0; r < rules->n; r++) {
                const smoe_rule *ru = &rules->r[r];
                int has = 0;
                for (int j = 0; j < ru->value.n; j++)
                    has |= strcmp(ru->value.ax[j], ax) == 0;
                if (has && e->names[d] && strcmp(ru->name, e->names[d]) == 0) {
                    at = ru->loc;
                    break;
                }
            }
            char axes[512];
            size_t n = 0;
            axes[0] = 0;
            for (int i = 0; i < p->mesh.n && n < sizeof axes; i++)
                n += (size_t)snprintf(axes + n, sizeof axes - n, "%s%s", i ? ", " : "",
                                      p->mesh.name[i]);
            return smoe_err_at(err, SMOE_EINVAL, at,
                               "resource axis '%s' of the rule for '%s' is not found in "
                               "the mesh (%s): JAX refuses the sharding of %s",
                               ax, e->names[d] ? e->names[d] : "?", axes, e->key);
        }
    return SMOE_OK;
}

static smoe_status fill_weight(smoe_plan *p, const smoe_logical_entry *e,
                               const smoe_rules *rules, smoe_weight *w,
                               smoe_err *err)
{
    memset(w, 0, sizeof *w);
    w->key = e->key;
    w->kind = classify(e->key);
    w->rank = e->rank;
    w->scan_axis = -1;
    w->layers = 1;
    for (int d = 0; d < e->rank; d++) {
        w->shape[d] = e->shape[d];
        w->logical[d] = e->names[d];
        if (w->scan_axis < 0 && is_stack_name(e->names[d])) {
            w->scan_axis = d;
            w->stack = e->names[d];
            w->layers = e->shape[d];
        }
    }
    if (w->kind == SMOE_ENTRY_PARAM || w->kind == SMOE_ENTRY_MU ||
        w->kind == SMOE_ENTRY_NU) {
        w->path = path_of(p->arena, e->key);
        if (!w->path)
            w->path = e->key;
    }
    smoe_status s = smoe_shard_resolve(rules, e->rank, e->names, &w->spec,
                                       e->key, err);
    if (s) {
        if (err && e->loc.file)
            smoe_loc_format(e->loc, err->where, sizeof err->where);
        return s;
    }
    if ((s = check_axes_in_mesh(p, e, rules, &w->spec, err)))
        return s;
    smoe_pspec_drop_size1(&w->spec, &p->mesh, &w->use_spec);
    if (w->kind == SMOE_ENTRY_PARAM) {
        smoe_pspec ls;
        int64_t lshape[SMOE_MAX_RANK];
        per_layer(w, &ls, lshape);
        w->has_gather = 1;
        w->prefetch = w->scan_axis >= 0;
        smoe_gather_compute(&ls, lshape, &p->mesh, SMOE_MODE_COAXIS,
                            p->dtype_bytes, &w->gather);
        smoe_gather_compute(&ls, lshape, &p->mesh, SMOE_MODE_LEGACY,
                            p->dtype_bytes, &w->legacy);
        char why[512];
        if (smoe_gather_reason(&w->gather, SMOE_MODE_COAXIS, &p->mesh, why, sizeof why) &&
            !(w->gather.reason = smoe_arena_strdup(p->arena, why)))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        if (smoe_gather_reason(&w->legacy, SMOE_MODE_LEGACY, &p->mesh, why, sizeof why) &&
            !(w->legacy.reason = smoe_arena_strdup(p->arena, why)))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return SMOE_OK;
}

/* All entries together hold at most this many elements: with 16-byte
 * elements every byte count of the plan (summed over weights, times two
 * per step) stays inside int64. DeepSeek-V3's params and AdamW moments are
 * about 2^41. */
#define SMOE_MAX_ELEMS (1LL << 50)

static smoe_status check_size(const smoe_logical_entry *e, int64_t *total,
                              smoe_err *err)
{
    int64_t n = 1;
    for (int d = 0; d < e->rank; d++) {
        if (e->shape[d] < 0 || (e->shape[d] > 0 && n > SMOE_MAX_ELEMS / e->shape[d])) {
            n = SMOE_MAX_ELEMS + 1;
            break;
        }
        n *= e->shape[d];
    }
    *total += n;
    if (n <= SMOE_MAX_ELEMS && *total <= SMOE_MAX_ELEMS)
        return SMOE_OK;
    char shape[SMOE_MAX_RANK * 21 + 1] = "";
    for (int d = 0, k = 0; d < e->rank; d++)
        k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? "x" : "",
                      (long long)e->shape[d]);
    smoe_status s = smoe_err_set(err, SMOE_EINVAL,
                                 "%s (shape %s): the parameters hold more than 2^50 "
                                 "elements (smoe's limit)", e->key, shape);
    if (err && e->loc.file)
        smoe_loc_format(e->loc, err->where, sizeof err->where);
    return s;
}

/* The device mesh into p, its axis names copied into the plan's arena
 * (they must outlive the config). */
static smoe_status plan_mesh(smoe_plan *p, const smoe_config *cfg, const smoe_plan_opts *o,
                             smoe_err *err)
{
    smoe_status s = smoe_config_mesh(cfg, o->devices, o->slices > 0 ? o->slices : 1, &p->mesh,
                                     err);
    if (s)
        return s;
    for (int i = 0; i < p->mesh.n; i++)
        if (!(p->mesh.name[i] = smoe_arena_strdup(p->arena, p->mesh.name[i])))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    return SMOE_OK;
}

/* The logical entries: from json (the --params text, len bytes), else
 * from o->params_file, else the built-in enumeration of the model; the
 * plan's source says which. */
static smoe_status plan_entries(smoe_plan *p, const smoe_config *cfg, const smoe_plan_opts *o,
                                const char *json, size_t len, smoe_logical_entry **e, int *n,
                                smoe_err *err)
{
    smoe_arena *a = p->arena;
    if (json) {
        p->source = smoe_arena_strdup(a, o->params_file ? o->params_file : "<params>");
        return p->source ? smoe_params_load_json_text(a, p->source, json, len, e, n, err)
                         : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    if (o->params_file) {
        p->source = smoe_arena_strdup(a, o->params_file);
        return p->source ? smoe_params_load_json(a, o->params_file, e, n, err)
                         : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    p->source = "built-in enumeration";
    int renamed;
    smoe_status s = smoe_inventory_build(cfg, a, e, n, err);
    if (!s)
        s = plan_legacy_names(a, smoe_config_rules(cfg), *e, *n, &renamed, err);
    if (!s && renamed)
        p->source = "built-in enumeration, with an older MaxText's logical names";
    return s;
}

/* The config's rules (and the strings they point at) copied into arena a,
 * so the plan stands alone. */
static smoe_status copy_rules(smoe_arena *a, const smoe_rules *cr, smoe_rules *out, smoe_err *err)
{
    out->n = cr->n;
    out->r = smoe_arena_alloc(a, sizeof *out->r * (size_t)(cr->n + 1));
    if (!out->r)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < cr->n; i++) {
        out->r[i] = cr->r[i];
        if (!(out->r[i].name = smoe_arena_strdup(a, cr->r[i].name)))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        for (int k = 0; k < cr->r[i].value.n; k++)
            if (!(out->r[i].value.ax[k] = smoe_arena_strdup(a, cr->r[i].value.ax[k])))
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    return SMOE_OK;
}

/* json: the --params text in memory (len bytes), or NULL to read
 * o->params_file (or, without one, enumerate the model). */
static smoe_status build(const smoe_config *cfg, const smoe_plan_opts *o,
                         const char *json, size_t len, smoe_plan **out,
                         smoe_err *err)
{
    *out = NULL;
    if (o->dtype_bytes < 1 || o->dtype_bytes > 16)
        return smoe_err_set(err, SMOE_EINVAL, "dtype bytes must be between 1 and 16");
    smoe_arena *a = smoe_arena_new(256 * 1024);
    smoe_plan *p = a ? smoe_arena_alloc(a, sizeof *p) : NULL;
    if (!p) {
        smoe_arena_free(a);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    p->arena = a;
    p->dtype_bytes = o->dtype_bytes;
    p->gather_dtype = SMOE_DT_FP32;
    p->int8_block = SMOE_INT8_BLOCK_DEFAULT;
    p->int8_fallback = SMOE_DT_INT8;
    p->wire_fallbacks = 0;
    smoe_logical_entry *e;
    int n;
    smoe_rules rules;
    smoe_status s;
    if ((s = plan_mesh(p, cfg, o, err)) || (s = plan_entries(p, cfg, o, json, len, &e, &n, err)) ||
        (s = copy_rules(a, smoe_config_rules(cfg), &rules, err)))
        goto fail;
    p->w = smoe_arena_alloc(a, sizeof *p->w * (size_t)(n ? n : 1));
    if (!p->w) {
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        goto fail;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if ((s = check_size(&e[i], &total, err)) ||
            (s = fill_weight(p, &e[i], &rules, &p->w[i], err)))
            goto fail;
        p->n++;
    }
    summarise(p, &p->coaxis, 0);
    summarise(p, &p->legacy, 1);
    *out = p;
    return SMOE_OK;
fail:
    smoe_arena_free(a);
    return s;
}

smoe_status smoe_plan_build(const smoe_config *cfg, const smoe_plan_opts *o,
                            smoe_plan **out, smoe_err *err)
{
    return build(cfg, o, NULL, 0, out, err);
}

smoe_status smoe_plan_build_json(const smoe_config *cfg, const smoe_plan_opts *o,
                                 const char *json, size_t len, smoe_plan **out,
                                 smoe_err *err)
{
    return build(cfg, o, json, len, out, err);
}

void smoe_plan_free(smoe_plan *p)
{
    if (p)
        smoe_arena_free(p->arena);
}

smoe_status smoe_plan_set_wire(smoe_plan *p, smoe_dtype t, int64_t block, smoe_dtype fallback,
                               smoe_err *err)
{
    smoe_status s;
    if (!block)
        block = SMOE_INT8_BLOCK_DEFAULT;
    if (t != SMOE_DT_FP32 && p->dtype_bytes != 4)
        return smoe_err_set(err, SMOE_EINVAL, "a %s gather converts fp32 master weights: the "
                            "element size must be 4 bytes, not %d", smoe_dtype_name(t),
                            p->dtype_bytes);
    if (t == SMOE_DT_INT8 && (s = smoe_dtype_check_block("int8 block", block, err)))
        return s;
    if (fallback != SMOE_DT_INT8 && fallback != SMOE_DT_FP32 && fallback != SMOE_DT_BF16)
        return smoe_err_set(err, SMOE_EINVAL, "the int8 fallback must be fp32 or bf16");
    /* first every refusal, so a refused plan stays as it was */
    for (int i = 0; i < p->n && t == SMOE_DT_INT8 && fallback == SMOE_DT_INT8; i++) {
        const smoe_weight *w = &p->w[i];
        if (w->has_gather &&
            (s = smoe_gather_check_blocks(&w->gather, &p->mesh, block, w->path, err)))
            return s;
    }
    p->wire_fallbacks = 0;
    for (int i = 0; i < p->n; i++) {
        smoe_weight *w = &p->w[i];
        if (!w->has_gather)
            continue;
        smoe_dtype wt = t;
        const char *why = NULL;
        smoe_err e;
        if (t == SMOE_DT_INT8 && smoe_gather_check_blocks(&w->gather, &p->mesh, block, w->path,
                                                          &e)) {
            wt = fallback;
            if (!(why = smoe_arena_strdup(p->arena, e.msg)))
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
            p->wire_fallbacks++;
        }
        smoe_gather_set_wire(&w->gather, wt, block);
        smoe_gather_set_wire(&w->legacy, wt, block);
        w->gather.wire_reason = w->legacy.wire_reason = why;
    }
    p->gather_dtype = t;
    p->int8_block = block;
    p->int8_fallback = fallback;
    summarise(p, &p->coaxis, 0);
    summarise(p, &p->legacy, 1);
    return SMOE_OK;
}

smoe_status smoe_plan_check_even(const smoe_plan *p, smoe_gather_mode mode, smoe_err *err)
{
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        const smoe_gather *g = mode == SMOE_MODE_LEGACY ? &w->legacy : &w->gather;
        if (w->prefetch && g->uneven)
            return smoe_err_set(err, SMOE_EINVAL, "%s cannot be prefetched: %s", w->path,
                                g->reason ? g->reason : "uneven");
    }
    return SMOE_OK;
}

const smoe_weight *smoe_plan_find(const smoe_plan *p, const char *path)
{
    for (int i = 0; i < p->n; i++)
        if (p->w[i].kind == SMOE_ENTRY_PARAM && strcmp(p->w[i].path, path) == 0)
            return &p->w[i];
    return NULL;
}
