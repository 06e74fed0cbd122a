/* The checkpoint manifest: JSON through cJSON, the only file of the ckpt
 * module that includes it. It records what a shard file holds (the mesh,
 * every weight's per-layer shape, state spec and shard size), the digests
 * that guard the files, and the fingerprints of the run that wrote it. */
#include "ckpt_impl.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_format = "smoe-checkpoint";

static cJSON *i64_array(const int64_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static cJSON *spec_json(const smoe_pspec *p)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; a && d < p->rank; d++) {
        if (p->dim[d].n == 0) {
            cJSON_AddItemToArray(a, cJSON_CreateNull());
            continue;
        }
        cJSON *e = cJSON_CreateArray();
        for (int k = 0; e && k < p->dim[d].n; k++)
            cJSON_AddItemToArray(e, cJSON_CreateString(p->dim[d].ax[k]));
        cJSON_AddItemToArray(a, e);
    }
    return a;
}

char *ck_manifest_text(const ck_manifest *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)m->seed);
    cJSON_AddStringToObject(o, "format", k_format);
    cJSON_AddNumberToObject(o, "version", CK_VERSION);
    cJSON_AddNumberToObject(o, "step", (double)m->step);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON_AddStringToObject(o, "run_id", m->run_id);
    if (m->wire)
        cJSON_AddStringToObject(o, "wire", m->wire);
    cJSON *mesh = cJSON_AddObjectToObject(o, "mesh");
    cJSON *names = cJSON_AddArrayToObject(mesh, "axis_names");
    for (int i = 0; names && i < m->mesh.n; i++)
        cJSON_AddItemToArray(names, cJSON_CreateString(m->mesh.name[i]));
    cJSON_AddItemToObject(mesh, "shape", i64_array(m->mesh.size, m->mesh.n));
    cJSON *fp = cJSON_AddObjectToObject(o, "sha256");
    cJSON_AddStringToObject(fp, "config", m->fp.config);
    cJSON_AddStringToObject(fp, "plan", m->fp.plan);
    cJSON_AddStringToObject(fp, "options", m->fp.options);
    cJSON_AddStringToObject(fp, "data", m->fp.data);
    cJSON *cfg = cJSON_AddObjectToObject(o, "config");
    for (int i = 0; cfg && i < m->ncfg; i++)
        cJSON_AddStringToObject(cfg, m->cfg_keys[i], m->cfg_vals[i]);
    cJSON *rules = cJSON_AddArrayToObject(o, "logical_axis_rules");
    for (int i = 0; rules && m->rules && i < m->rules->n; i++) {
        const smoe_rule *r = &m->rules->r[i];
        cJSON *x = cJSON_CreateArray(), *v = cJSON_CreateArray();
        cJSON_AddItemToArray(x, cJSON_CreateString(r->name));
        for (int k = 0; v && k < r->value.n; k++)
            cJSON_AddItemToArray(v, cJSON_CreateString(r->value.ax[k]));
        cJSON_AddItemToArray(x, v);
        cJSON_AddItemToArray(rules, x);
    }
    cJSON *st = cJSON_AddArrayToObject(o, "states");
    static const char *const states[3] = { "params", "adamw_mu", "adamw_nu" };
    for (int i = 0; st && i < 3; i++)
        cJSON_AddItemToArray(st, cJSON_CreateString(states[i]));
    cJSON_AddNumberToObject(o, "header_bytes", CK_HEADER);
    cJSON_AddNumberToObject(o, "slab_floats", (double)m->slab_floats);
    cJSON *ws = cJSON_AddArrayToObject(o, "weights");
    for (int i = 0; ws && i < m->nw; i++) {
        const smoe_ckpt_weight *w = &m->w[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "path", w->path);
        cJSON_AddItemToObject(x, "shape", i64_array(w->lshape, w->lrank));
        cJSON_AddItemToObject(x, "spec", spec_json(&w->lspec));
        cJSON_AddNumberToObject(x, "layers", (double)w->layers);
        cJSON_AddNumberToObject(x, "shard_numel", (double)w->shard_numel);
        cJSON_AddNumberToObject(x, "shard_offset", (double)w->shard_offset);
        cJSON_AddItemToArray(ws, x);
    }
    cJSON *sh = cJSON_AddArrayToObject(o, "shards");
    for (int i = 0; sh && i < m->ns; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "file", m->shards[i].file);
        cJSON_AddNumberToObject(x, "bytes", (double)m->shards[i].bytes);
        cJSON_AddStringToObject(x, "sha256", m->shards[i].sha256);
        cJSON_AddItemToArray(sh, x);
    }
    char *t = cJSON_Print(o);
    cJSON_Delete(o);
    if (!t)
        return NULL;
    size_t n = strlen(t);
    char *out = smoe_malloc(n + 2);
    if (out) {
        memcpy(out, t, n);
        out[n] = '\n';
        out[n + 1] = 0;
    }
    cJSON_free(t);
    return out;
}

/* ---- parsing: every member checked, errors name the member ---- */
typedef struct pctx {
    const char *file;
    smoe_err *err;
    smoe_arena *a;
} pctx;

static smoe_status bad(pctx *c, const char *member, const char *what)
{
    return smoe_err_in(c->err, SMOE_EINVAL, c->file, "member '%s': %s", member, what);
}

static const cJSON *member(pctx *c, const cJSON *o, const char *key, int type,
                           const char *path, smoe_status *s)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (*s)
        return NULL;
    if (!x || !(x->type & type)) {
        char m[160];
        snprintf(m, sizeof m, "%s%s", path, key);
        *s = bad(c, m, !x ? "missing" : "has the wrong type");
        return NULL;
    }
    return x;
}

static int get_i64(const cJSON *x, int64_t lo, int64_t *out)
{
    if (!cJSON_IsNumber(x))
        return 0;
    double v = x->valuedouble;
    if (!(v >= (double)lo && v <= 9007199254740992.0) || v != (double)(int64_t)v)
        return 0;
    *out = (int64_t)v;
    return 1;
}

static int get_hex(const cJSON *x, char out[65])
{
    if (!cJSON_IsString(x) || strlen(x->valuestring) != 64 ||
        strspn(x->valuestring, "0123456789abcdef") != 64)
        return 0;
    memcpy(out, x->valuestring, 65);
    return 1;
}

static smoe_status parse_spec(pctx *c, const cJSON *a, int rank, smoe_pspec *p,
                              const char *where)
{
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != rank)
        return bad(c, where, "expected one entry per dimension of 'shape'");
    p->rank = rank;
    for (int d = 0; d < rank; d++) {
        const cJSON *e = cJSON_GetArrayItem(a, d);
        p->dim[d].n = 0;
        if (cJSON_IsNull(e))
            continue;
        if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) > SMOE_MAX_ENTRY)
            return bad(c, where, "an entry is not null or a list of mesh axis names");
        for (int k = 0; k < cJSON_GetArraySize(e); k++) {
            const cJSON *n = cJSON_GetArrayItem(e, k);
            if (!cJSON_IsString(n))
                return bad(c, where, "a mesh axis name is not a string");
            p->dim[d].ax[p->dim[d].n++] = smoe_arena_strdup(c->a, n->valuestring);
        }
    }
    return SMOE_OK;
}

static smoe_status parse_weights(pctx *c, const cJSON *ws, ck_manifest *m)
{
    m->nw = cJSON_GetArraySize(ws);
    m->w = smoe_arena_alloc(c->a, sizeof *m->w * (size_t)(m->nw ? m->nw : 1));
    if (!m->w)
        return smoe_err_set(c->err, SMOE_ENOMEM, "out of memory");
    smoe_status s = SMOE_OK;
    int64_t off = 0;
    for (int i = 0; i < m->nw && !s; i++) {
        const cJSON *x = cJSON_GetArrayItem(ws, i);
        smoe_ckpt_weight *w = &m->w[i];
        memset(w, 0, sizeof *w);
        char at[64];
        snprintf(at, sizeof at, "weights[%d].", i);
        if (!cJSON_IsObject(x))
            return bad(c, at, "expected an object");
        const cJSON *path = member(c, x, "path", cJSON_String, at, &s);
        const cJSON *shape = member(c, x, "shape", cJSON_Array, at, &s);
        const cJSON *spec = member(c, x, "spec", cJSON_Array, at, &s);
        const cJSON *layers = member(c, x, "layers", cJSON_Number, at, &s);
        const cJSON *numel = member(c, x, "shard_numel", cJSON_Number, at, &s);
        const cJSON *soff = member(c, x, "shard_offset", cJSON_Number, at, &s);
        if (s)
            return s;
        w->path = smoe_arena_strdup(c->a, path->valuestring);
        w->lrank = cJSON_GetArraySize(shape);
        if (w->lrank > SMOE_MAX_RANK)
            return bad(c, at, "'shape' has too many dimensions");
        for (int d = 0; d < w->lrank; d++)
            if (!get_i64(cJSON_GetArrayItem(shape, d), 1, &w->lshape[d]))
                return bad(c, at, "'shape' holds a non-positive or non-integer size");
        snprintf(at, sizeof at, "weights[%d].spec", i);
        if ((s = parse_spec(c, spec, w->lrank, &w->lspec, at)))
            return s;
        snprintf(at, sizeof at, "weights[%d]", i);
        if (!get_i64(layers, 1, &w->layers) || !get_i64(numel, 1, &w->shard_numel) ||
            !get_i64(soff, 0, &w->shard_offset))
            return bad(c, at, "'layers', 'shard_numel' or 'shard_offset' is not a valid count");
        if (w->shard_offset != off)
            return bad(c, at, "'shard_offset' does not follow the previous weight");
        off += w->layers * w->shard_numel;
    }
    if (off != m->slab_floats)
        return bad(c, "slab_floats", "differs from the sum of the weights' shards");
    return SMOE_OK;
}

static smoe_status parse_shards(pctx *c, const cJSON *sh, ck_manifest *m)
{
    m->ns = cJSON_GetArraySize(sh);
    m->shards = smoe_arena_alloc(c->a, sizeof *m->shards * (size_t)(m->ns ? m->ns : 1));
    if (!m->shards)
        return smoe_err_set(c->err, SMOE_ENOMEM, "out of memory");
    smoe_status s = SMOE_OK;
    int64_t want = CK_HEADER + 3 * m->slab_floats * (int64_t)sizeof(float);
    for (int i = 0; i < m->ns && !s; i++) {
        const cJSON *x = cJSON_GetArrayItem(sh, i);
        char at[64];
        snprintf(at, sizeof at, "shards[%d].", i);
        if (!cJSON_IsObject(x))
            return bad(c, at, "expected an object");
        const cJSON *file = member(c, x, "file", cJSON_String, at, &s);
        const cJSON *bytes = member(c, x, "bytes", cJSON_Number, at, &s);
        const cJSON *sha = member(c, x, "sha256", cJSON_String, at, &s);
        if (s)
            return s;
        ck_mshard *d = &m->shards[i];
        d->file = smoe_arena_strdup(c->a, file->valuestring);
        if (strchr(d->file, '/') || d->file[0] == '.' || !d->file[0])
            return bad(c, at, "'file' must be a plain file name inside the checkpoint");
        if (!get_i64(bytes, 0, &d->bytes) || d->bytes != want)
            return bad(c, at, "'bytes' differs from header + 3 slabs of 'slab_floats'");
        if (!get_hex(sha, d->sha256))
            return bad(c, at, "'sha256' is not 64 lowercase hex digits");
    }
    return SMOE_OK;
}

static smoe_status parse_config(pctx *c, const cJSON *cfg, ck_manifest *m)
{
    int n = cJSON_GetArraySize(cfg);
    m->cfg_keys = smoe_arena_alloc(c->a, sizeof(char *) * (size_t)(n ? n : 1));
    m->cfg_vals = smoe_arena_alloc(c->a, sizeof(char *) * (size_t)(n ? n : 1));
    if (!m->cfg_keys || !m->cfg_vals)
        return smoe_err_set(c->err, SMOE_ENOMEM, "out of memory");
    const char **k = (const char **)m->cfg_keys, **v = (const char **)m->cfg_vals;
    const cJSON *x;
    int i = 0;
    cJSON_ArrayForEach(x, cfg)
    {
        if (!cJSON_IsString(x) || !x->string)
            return bad(c, "config", "every value must be a string (the key's YAML text)");
        k[i] = smoe_arena_strdup(c->a, x->string);
        v[i] = smoe_arena_strdup(c->a, x->valuestring);
        if (!k[i] || !v[i])
            return smoe_err_set(c->err, SMOE_ENOMEM, "out of memory");
        i++;
    }
    m->ncfg = i;
    return SMOE_OK;
}

smoe_status ck_manifest_run_id(const char *text, char id[33])
{
    id[0] = 0;
    cJSON *o;
    if (smoe_json_parse("manifest.json", text, strlen(text), NULL, NULL, &o, NULL))
        return SMOE_EINVAL;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "run_id");
    smoe_status s = SMOE_EINVAL;
    if (cJSON_IsString(x) && strlen(x->valuestring) == 32) {
        memcpy(id, x->valuestring, 33);
        s = SMOE_OK;
    }
    cJSON_Delete(o);
    return s;
}

/* The format, its version, and version 2's run id and config. */
static smoe_status parse_head(pctx *c, const cJSON *o, ck_manifest *m)
{
    smoe_status s = SMOE_OK;
    const cJSON *fmt = member(c, o, "format", cJSON_String, "", &s);
    const cJSON *ver = member(c, o, "version", cJSON_Number, "", &s);
    if (s)
        return s;
    if (strcmp(fmt->valuestring, k_format) != 0)
        return bad(c, "format", "is not \"smoe-checkpoint\"");
    if (ver->valuedouble != CK_VERSION && ver->valuedouble != 1)
        return smoe_err_in(c->err, SMOE_EINVAL, c->file,
                           "checkpoint format version %g; this smoe reads versions 1 and %d",
                           ver->valuedouble, CK_VERSION);
    m->version = (int)ver->valuedouble;
    if (m->version < 2)
        return SMOE_OK;
    /* version 2: the run's id and its config key by key */
    const cJSON *id = member(c, o, "run_id", cJSON_String, "", &s);
    if (!s && (strlen(id->valuestring) != 32 || strspn(id->valuestring, "0123456789abcdef") != 32))
        s = bad(c, "run_id", "is not 32 lowercase hex digits");
    if (!s)
        memcpy(m->run_id, id->valuestring, 33);
    const cJSON *cfg = member(c, o, "config", cJSON_Object, "", &s);
    return s ? s : parse_config(c, cfg, m);
}

/* The manifest's required members, looked up in one order (the first
 * missing or mistyped one is the error). */
typedef struct manifest_members {
    const cJSON *step, *seed, *names, *shape, *fp, *hdr, *slab, *ws, *sh;
} manifest_members;

static smoe_status find_members(pctx *c, const cJSON *o, manifest_members *x)
{
    smoe_status s = SMOE_OK;
    x->step = member(c, o, "step", cJSON_Number, "", &s);
    x->seed = member(c, o, "seed", cJSON_String, "", &s);
    const cJSON *mesh = member(c, o, "mesh", cJSON_Object, "", &s);
    x->names = mesh ? member(c, mesh, "axis_names", cJSON_Array, "mesh.", &s) : NULL;
    x->shape = mesh ? member(c, mesh, "shape", cJSON_Array, "mesh.", &s) : NULL;
    x->fp = member(c, o, "sha256", cJSON_Object, "", &s);
    x->hdr = member(c, o, "header_bytes", cJSON_Number, "", &s);
    x->slab = member(c, o, "slab_floats", cJSON_Number, "", &s);
    x->ws = member(c, o, "weights", cJSON_Array, "", &s);
    x->sh = member(c, o, "shards", cJSON_Array, "", &s);
    return s;
}

/* The step, the gather wire (optional: absent in checkpoints of runs that
 * gathered fp32 before it was recorded) and the data seed. */
static smoe_status parse_run(pctx *c, const cJSON *o, const manifest_members *x, ck_manifest *m)
{
    if (!get_i64(x->step, 1, &m->step))
        return bad(c, "step", "is not a positive integer");
    const cJSON *wire = cJSON_GetObjectItemCaseSensitive(o, "wire");
    if (wire && (!cJSON_IsString(wire) || strlen(wire->valuestring) > 120))
        return bad(c, "wire", "is not a string of at most 120 bytes");
    if (wire && !(m->wire = smoe_arena_strdup(m->a, wire->valuestring)))
        return smoe_err_set(c->err, SMOE_ENOMEM, "out of memory");
    char *e = NULL;
    m->seed = strtoull(x->seed->valuestring, &e, 10);
    if (!x->seed->valuestring[0] || *e)
        return bad(c, "seed", "is not a decimal integer");
    return SMOE_OK;
}

/* The mesh's axes into m (*devices: their product). */
static smoe_status parse_mesh(pctx *c, const manifest_members *x, ck_manifest *m,
                              int64_t *devices)
{
    const int n = cJSON_GetArraySize(x->names);
    if (n != cJSON_GetArraySize(x->shape) || n < 1 || n > SMOE_MAX_AXES)
        return bad(c, "mesh", "'axis_names' and 'shape' differ in length or are empty");
    *devices = 1;
    for (int i = 0; i < n; i++) {
        const cJSON *name = cJSON_GetArrayItem(x->names, i);
        m->mesh.n = i + 1;
        if (!cJSON_IsString(name) ||
            !get_i64(cJSON_GetArrayItem(x->shape, i), 1, &m->mesh.size[i]) ||
            m->mesh.size[i] > 1 << 20)
            return bad(c, "mesh", "an axis name is not a string or a size is not positive");
        m->mesh.name[i] = smoe_arena_strdup(m->a, name->valuestring);
        *devices *= m->mesh.size[i];
    }
    return *devices > 1 << 20 ? bad(c, "mesh", "too many devices") : SMOE_OK;
}

/* The digests, the shard files' header and slab sizes. */
static smoe_status parse_layout(pctx *c, const manifest_members *x, ck_manifest *m)
{
    if (!get_hex(cJSON_GetObjectItemCaseSensitive(x->fp, "config"), m->fp.config) ||
        !get_hex(cJSON_GetObjectItemCaseSensitive(x->fp, "plan"), m->fp.plan) ||
        !get_hex(cJSON_GetObjectItemCaseSensitive(x->fp, "options"), m->fp.options) ||
        !get_hex(cJSON_GetObjectItemCaseSensitive(x->fp, "data"), m->fp.data))
        return bad(c, "sha256", "needs 'config', 'plan', 'options' and 'data' digests");
    if (x->hdr->valuedouble != CK_HEADER)
        return bad(c, "header_bytes", "must be 64");
    if (!get_i64(x->slab, 1, &m->slab_floats))
        return bad(c, "slab_floats", "is not a positive integer");
    return SMOE_OK;
}

smoe_status ck_manifest_parse(const char *file, const char *text, ck_manifest *m,
                              smoe_err *err)
{
    memset(m, 0, sizeof *m);
    m->a = smoe_arena_new(1 << 14);
    if (!m->a)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    pctx c = { file, err, m->a };
    cJSON *o;
    smoe_status s = smoe_json_parse(file, text, strlen(text), NULL,
                                    "not valid JSON (truncated or corrupted manifest)", &o, err);
    if (s)
        return s;
    manifest_members x;
    int64_t devices = 1;
    if (!(s = parse_head(&c, o, m)) && !(s = find_members(&c, o, &x)) &&
        !(s = parse_run(&c, o, &x, m)) && !(s = parse_mesh(&c, &x, m, &devices)) &&
        !(s = parse_layout(&c, &x, m)) && !(s = parse_weights(&c, x.ws, m)) &&
        !(s = parse_shards(&c, x.sh, m)) && m->ns != devices)
        s = bad(&c, "shards", "needs one shard per device of the mesh");
    cJSON_Delete(o);
    return s;
}

void ck_manifest_free(ck_manifest *m)
{
    smoe_arena_free(m->a);
    memset(m, 0, sizeof *m);
}
