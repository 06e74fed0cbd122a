/* What differs between a checkpoint's run and the run resuming it, key by
 * key: the merged configuration, the dtypes the gathers and reductions
 * move, and what the ranks make of the configuration: the size of each
 * mesh axis (a -1 in ici_* is filled from the number of ranks) and the
 * global batch (per_device_batch_size x ranks). A resume on another number
 * of ranks changes the last two with no key's text changing; they are
 * listed as the keys are (old -> new). */
#include "ckpt_impl.h"

#include <stdio.h>
#include <string.h>

static char *copy_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = smoe_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* One entry of res->changes (room for it was allocated); `to` is taken
 * over. 0 when out of memory (the entry's strings are freed with res). */
static int add_change(smoe_ckpt_resume *res, const char *key, const char *from, char *to)
{
    smoe_ckpt_change *c = &res->changes[res->nchanges++];
    c->key = copy_str(key);
    c->from = copy_str(from ? from : "(not set)");
    c->to = to;
    return c->key && c->from && c->to;
}

/* The entry of `key` in res->changes, or NULL. */
static const smoe_ckpt_change *change_of(const smoe_ckpt_resume *res, const char *key)
{
    for (int i = 0; i < res->nchanges; i++)
        if (strcmp(res->changes[i].key, key) == 0)
            return &res->changes[i];
    return NULL;
}

/* The index of axis `name` in mesh m, or -1. */
static int axis_of(const smoe_mesh *m, const char *name)
{
    for (int a = 0; a < m->n; a++)
        if (strcmp(m->name[a], name) == 0)
            return a;
    return -1;
}

/* Each axis of either mesh whose size differs, named by its ici_* key
 * (smoe train's mesh is one slice: the ici_* sizes are the axes'), unless
 * that key's own change already reads old -> new. */
static int mesh_changes(const smoe_mesh *old, const smoe_mesh *now, smoe_ckpt_resume *res)
{
    for (int k = 0; k < old->n + now->n; k++) {
        const char *ax = k < old->n ? old->name[k] : now->name[k - old->n];
        int io = axis_of(old, ax), in = axis_of(now, ax);
        if (k >= old->n && io >= 0)
            continue; /* an axis of both, done from the old mesh */
        int64_t a = io < 0 ? 1 : old->size[io], b = in < 0 ? 1 : now->size[in];
        if (a == b)
            continue;
        const char *pk = smoe_config_axis_key(ax);
        char key[128], from[32], to[32];
        if (pk)
            snprintf(key, sizeof key, "ici_%s", pk);
        else
            snprintf(key, sizeof key, "mesh axis %s", ax);
        snprintf(from, sizeof from, "%lld", (long long)a);
        snprintf(to, sizeof to, "%lld", (long long)b);
        const smoe_ckpt_change *c = change_of(res, key);
        if (c && strcmp(c->from, from) == 0 && strcmp(c->to, to) == 0)
            continue;
        snprintf(key + strlen(key), sizeof key - strlen(key), " (resolved)");
        if (!add_change(res, key, from, copy_str(to)))
            return 0;
    }
    return 1;
}

/* The global batch, from the checkpoint's per_device_batch_size (its
 * text in the manifest) and ranks, and this run's. */
static int batch_change(const ck_manifest *m, const smoe_config *cfg, int ranks,
                        smoe_ckpt_resume *res)
{
    const char *txt = NULL;
    for (int j = 0; j < m->ncfg && !txt; j++)
        if (strcmp(m->cfg_keys[j], "per_device_batch_size") == 0)
            txt = m->cfg_vals[j];
    double a, b;
    if (!txt || smoe_parse_f64(txt, &a) ||
        smoe_config_float(cfg, "per_device_batch_size", &b, NULL))
        return 1; /* not known: nothing to compare */
    if (a * m->ns == b * ranks)
        return 1;
    char from[96], to[96];
    snprintf(from, sizeof from, "%g (%g per rank x %d rank%s)", a * m->ns, a, m->ns,
             m->ns == 1 ? "" : "s");
    snprintf(to, sizeof to, "%g (%g per rank x %d rank%s)", b * ranks, b, ranks,
             ranks == 1 ? "" : "s");
    return add_change(res, "global batch (per_device_batch_size x ranks)", from, copy_str(to));
}

smoe_status ck_changes(const ck_manifest *m, const smoe_config *cfg, const char *wire,
                       const smoe_mesh *mesh, int ranks, smoe_ckpt_resume *res,
                       smoe_err *err)
{
    const smoe_node *v;
    int n = 0;
    while (smoe_config_key_at(cfg, n, &v))
        n++;
    /* + the wire, the axes of both meshes, the global batch */
    int cap = n + m->ncfg + 2 + m->mesh.n + mesh->n;
    res->changes = smoe_calloc((size_t)cap, sizeof *res->changes);
    if (!res->changes)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) { /* changed or new keys */
        const char *k = smoe_config_key_at(cfg, i, &v);
        char *now = smoe_node_text(v);
        const char *old = NULL;
        for (int j = 0; j < m->ncfg && !old; j++)
            if (strcmp(m->cfg_keys[j], k) == 0)
                old = m->cfg_vals[j];
        if (now && old && strcmp(old, now) == 0) {
            smoe_free(now);
            continue;
        }
        if (!add_change(res, k, old, now))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    for (int j = 0; j < m->ncfg; j++) /* keys gone */
        if (!smoe_config_get(cfg, m->cfg_keys[j]) &&
            !add_change(res, m->cfg_keys[j], m->cfg_vals[j], copy_str("(not set)")))
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    /* the dtypes the gathers and reductions move (not config keys, but a
     * resumed run in other dtypes is not the checkpoint's run continued) */
    const char *old = m->wire ? m->wire : SMOE_CKPT_WIRE_FP32;
    if (wire && strcmp(old, wire) != 0 && !add_change(res, "(gather and reduce dtypes)", old,
                                                      copy_str(wire)))
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (!mesh_changes(&m->mesh, mesh, res) || !batch_change(m, cfg, ranks, res))
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    return SMOE_OK;
}
