/* The prefetch schedule as a JSON file (schema in the README, "schedule
 * files"): written by `smoe sim --schedule-out`, read by `smoe train
 * --schedule`. The one place the CLI turns a smoe_schedule into JSON and
 * back; the reader checks every field and names the first bad one. */
#include "cli.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT "smoe-schedule"
#define VERSION 1

static const char *const k_kinds[2] = { "dense", "moe" };

void cli_schedule_write(const char *path, const smoe_schedule *s, const char *hardware)
{
    char where[300];
    snprintf(where, sizeof where, "argument '--schedule-out %s'", path);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", FORMAT);
    cJSON_AddNumberToObject(o, "version", VERSION);
    cJSON_AddNumberToObject(o, "layers", s->L);
    cJSON_AddNumberToObject(o, "dense_layers", s->n_dense);
    cJSON_AddNumberToObject(o, "chunks_per_weight", SMOE_SCHED_CHUNKS);
    cJSON *src = cJSON_AddObjectToObject(o, "source");
    if (s->depth >= 0)
        cJSON_AddNumberToObject(src, "depth", s->depth);
    else
        cJSON_AddNumberToObject(src, "budget_bytes", s->budget);
    cJSON_AddItemToObject(src, "hardware", cli_json_string(hardware));
    cJSON *ws = cJSON_AddObjectToObject(o, "weights");
    for (int k = 0; k < 2; k++) {
        cJSON *a = cJSON_AddArrayToObject(ws, k_kinds[k]);
        for (int w = 0; w < s->nweights[k]; w++)
            cJSON_AddItemToArray(a, cli_json_string(s->names[k][w]));
    }
    cJSON *pr = cJSON_AddObjectToObject(o, "predicted");
    cJSON_AddNumberToObject(pr, "peak_bytes", s->peak_bytes);
    cJSON_AddNumberToObject(pr, "exposed_gather_s", s->exposed_s);
    cJSON_AddNumberToObject(pr, "step_s", s->step_s);
    cJSON *ga = cJSON_AddArrayToObject(o, "gathers");
    for (int i = 0; i < s->n; i++) {
        const smoe_sched_gather *g = &s->g[i];
        cJSON *e = cJSON_CreateObject();
        int bwd = g->unit >= s->L;
        cJSON_AddStringToObject(e, "pass", bwd ? "bwd" : "fwd");
        cJSON_AddNumberToObject(e, "layer", bwd ? 2 * s->L - 1 - g->unit : g->unit);
        cJSON_AddNumberToObject(e, "unit", g->unit);
        cJSON_AddNumberToObject(e, "weight", g->weight);
        cJSON_AddNumberToObject(e, "chunk0", g->chunk0);
        cJSON_AddNumberToObject(e, "nchunks", g->nchunks);
        cJSON_AddNumberToObject(e, "issue", g->issue);
        cJSON_AddNumberToObject(e, "free", g->free);
        cJSON_AddItemToArray(ga, e);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        cli_usage_error(NULL, "out of memory formatting the schedule");
    FILE *f = fopen(path, "w");
    if (!f) {
        free(text);
        cli_io_error(where, "cannot write the file");
    }
    errno = 0;
    int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
    int e = errno;
    free(text);
    errno = e;
    cli_close_written(f, bad, where);
}

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
        const cJSON *a = cJSON_IsObject(ws) ? cJSON_GetObjectItemCaseSensitive(ws, k_kinds[k]) : NULL;
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "weights.%s: expected an array of at most %d "
                                "names", k_kinds[k], SMOE_SIM_MAX_WEIGHTS);
        int w = 0;
        const cJSON *n;
        cJSON_ArrayForEach(n, a) {
            if (!cJSON_IsString(n) || strlen(n->valuestring) >= SMOE_SCHED_NAME)
                return smoe_err_set(err, SMOE_EINVAL, "weights.%s[%d]: expected a name", k_kinds[k], w);
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
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, FORMAT) != 0)
        return smoe_err_set(err, SMOE_EINVAL, "format: expected \"%s\"", FORMAT);
    int ver, L, nd, chunks;
    if (get_int(root, "version", "version", VERSION, VERSION, &ver, err) ||
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

smoe_status cli_schedule_read(const char *path, smoe_schedule **out, smoe_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return smoe_err_in(err, SMOE_EINVAL, path, "cannot read the file: %s", strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 > cap) {
            char *t = realloc(text, cap = 2 * cap + 65536);
            if (!t) {
                free(text);
                fclose(f);
                return smoe_err_in(err, SMOE_ENOMEM, path, "out of memory");
            }
            text = t;
        }
        size_t r = fread(text + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    int ioerr = ferror(f);
    fclose(f);
    text[n] = 0;
    if (ioerr) {
        free(text);
        return smoe_err_in(err, SMOE_EINVAL, path, "cannot read the file");
    }
    cJSON *root = cJSON_ParseWithLength(text, n);
    smoe_status st;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + n ? (long)(at - text) : 0;
        st = smoe_err_in(err, SMOE_EINVAL, path, "not JSON (at byte %ld)", off);
    } else {
        smoe_err e;
        st = parse(root, out, &e);
        if (st)
            smoe_err_in(err, st, path, "%s", e.msg);
    }
    cJSON_Delete(root);
    free(text);
    return st;
}
