/* Reading a prefetch schedule file (schema in docs/formats.md, "Schedule
 * files"; written by schedule_json.c): every field checked, the first bad
 * one named, then the schedule checked as a whole (smoe_schedule_check). */
#include "sched_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const smoe_schedule_kinds[2] = { "dense", "moe" };

/* An integer member `key` of o in [lo, hi]: 0, or 1 with *err set. */
static int get_int(const cJSON *o, const char *key, const char *field, long lo, long hi,
                   int *out, smoe_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi) {
        smoe_err_set(err, SMOE_EINVAL, "%s: expected an integer from %ld to %ld", field, lo, hi);
        return 1;
    }
    *out = (int)v->valuedouble;
    return 0;
}

static smoe_status read_names(const cJSON *root, smoe_schedule *s, smoe_err *err)
{
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "weights");
    for (int k = 0; k < 2; k++) {
        const cJSON *a = cJSON_IsObject(ws) ? cJSON_GetObjectItemCaseSensitive(ws, smoe_schedule_kinds[k]) : NULL;
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "weights.%s: expected an array of at most %d "
                                "names", smoe_schedule_kinds[k], SMOE_SIM_MAX_WEIGHTS);
        int w = 0;
        const cJSON *n;
        cJSON_ArrayForEach(n, a) {
            if (!cJSON_IsString(n) || strlen(n->valuestring) >= SMOE_SCHED_NAME)
                return smoe_err_set(err, SMOE_EINVAL, "weights.%s[%d]: expected a name", smoe_schedule_kinds[k], w);
            snprintf(s->names[k][w++], SMOE_SCHED_NAME, "%s", n->valuestring);
        }
        s->nweights[k] = w;
    }
    return SMOE_OK;
}

static smoe_status read_gather(const cJSON *e, int i, const smoe_schedule *s, smoe_sched_gather *g,
                               smoe_err *err)
{
    char f[64];
    int layer;
    const char *keys[] = { "unit", "layer", "weight", "chunk0", "nchunks", "issue", "free" };
    int *dst[] = { &g->unit, &layer, &g->weight, &g->chunk0, &g->nchunks, &g->issue, &g->free };
    long lo[] = { 0, 0, 0, 0, 1, -1, 0 };
    long hi[] = { 2L * s->L - 1, s->L - 1, SMOE_SIM_MAX_WEIGHTS - 1, SMOE_SCHED_CHUNKS - 1,
                  SMOE_SCHED_CHUNKS, 2L * s->L - 1, 2L * s->L - 1 };
    if (!cJSON_IsObject(e))
        return smoe_err_set(err, SMOE_EINVAL, "gathers[%d]: expected an object", i);
    for (int j = 0; j < 7; j++) {
        snprintf(f, sizeof f, "gathers[%d].%s", i, keys[j]);
        if (get_int(e, keys[j], f, lo[j], hi[j], dst[j], err))
            return SMOE_EINVAL;
    }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pass");
    int bwd = g->unit >= s->L;
    if (!cJSON_IsString(p) || strcmp(p->valuestring, bwd ? "bwd" : "fwd") != 0)
        return smoe_err_set(err, SMOE_EINVAL, "gathers[%d].pass: expected \"%s\" for unit %d", i,
                            bwd ? "bwd" : "fwd", g->unit);
    if (layer != (bwd ? 2 * s->L - 1 - g->unit : g->unit))
        return smoe_err_set(err, SMOE_EINVAL, "gathers[%d].layer: %d is not the layer of unit %d",
                            i, layer, g->unit);
    return SMOE_OK;
}

static smoe_status parse(const cJSON *root, smoe_schedule **out, smoe_err *err)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, SMOE_SCHEDULE_FORMAT) != 0)
        return smoe_err_set(err, SMOE_EINVAL, "format: expected \"%s\"", SMOE_SCHEDULE_FORMAT);
    int ver, L, nd, chunks;
    if (get_int(root, "version", "version", SMOE_SCHEDULE_VERSION, SMOE_SCHEDULE_VERSION, &ver, err) ||
        get_int(root, "layers", "layers", 1, 65536, &L, err) ||
        get_int(root, "dense_layers", "dense_layers", 0, L, &nd, err) ||
        get_int(root, "chunks_per_weight", "chunks_per_weight", SMOE_SCHED_CHUNKS,
                SMOE_SCHED_CHUNKS, &chunks, err))
        return SMOE_EINVAL;
    const cJSON *ga = cJSON_GetObjectItemCaseSensitive(root, "gathers");
    if (!cJSON_IsArray(ga))
        return smoe_err_set(err, SMOE_EINVAL, "gathers: expected an array");
    smoe_schedule *s = smoe_schedule_alloc(cJSON_GetArraySize(ga));
    if (!s)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    s->L = L;
    s->n_dense = nd;
    smoe_status st = read_names(root, s, err);
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "source");
    const cJSON *d = cJSON_IsObject(src) ? cJSON_GetObjectItemCaseSensitive(src, "depth") : NULL;
    if (!st && d && get_int(src, "depth", "source.depth", 0, SMOE_SIM_MAX_DEPTH, &s->depth, err))
        st = SMOE_EINVAL;
    const cJSON *pm = cJSON_IsObject(src) ? cJSON_GetObjectItemCaseSensitive(src, "progress") : NULL;
    if (!st && pm) {
        if (!cJSON_IsString(pm) || (strcmp(pm->valuestring, "calls") && strcmp(pm->valuestring, "thread")))
            st = smoe_err_set(err, SMOE_EINVAL, "source.progress: expected \"calls\" or \"thread\"");
        else
            snprintf(s->progress, sizeof s->progress, "%s", pm->valuestring);
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ga) {
        if (st)
            break;
        st = read_gather(e, i, s, &s->g[i], err);
        i++;
    }
    if (!st)
        st = smoe_schedule_check(s, err);
    if (st) {
        smoe_schedule_free(s);
        return st;
    }
    *out = s;
    return SMOE_OK;
}

smoe_status smoe_schedule_parse_text(const char *text, size_t n, const char *name,
                                    smoe_schedule **out, smoe_err *err)
{
    *out = NULL;
    cJSON *root;
    smoe_status st = smoe_json_parse(name, text, n, NULL, NULL, &root, err);
    if (!st) {
        smoe_err e;
        st = parse(root, out, &e);
        if (st)
            smoe_err_in(err, st, name, "%s", e.msg);
    }
    cJSON_Delete(root);
    return st;
}

smoe_status smoe_schedule_read(const char *path, smoe_schedule **out, smoe_err *err)
{
    *out = NULL;
    char *text;
    size_t n;
    smoe_status st = smoe_read_file_max(path, SMOE_MAX_SCHEDULE_BYTES, &text, &n, err);
    if (st == SMOE_EIO || st == SMOE_ENOTFOUND) { /* a bad --schedule argument */
        err->code = SMOE_EINVAL;
        return SMOE_EINVAL;
    }
    if (st)
        return st;
    st = smoe_schedule_parse_text(text, n, path, out, err);
    smoe_free(text);
    return st;
}
