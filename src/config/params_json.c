/* MaxText logical_shardings.json -> smoe_logical_entry list (cJSON). The
 * only file of the config module that includes the JSON library. Errors
 * name file:line:col: cJSON's error pointer for syntax errors, the key's
 * position in the text for semantic ones. */
#include "config_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static smoe_loc text_loc(const char *file, const char *text, const char *at)
{
    smoe_loc l = { file, 1, 1 };
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            l.line++;
            l.col = 1;
        } else {
            l.col++;
        }
    }
    return l;
}

/* Position of "key" in the text (the first occurrence as a JSON string). */
static smoe_loc key_loc(const char *file, const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = strchr(text, '"'); p; p = strchr(p + 1, '"'))
        if (strncmp(p + 1, key, n) == 0 && p[n + 1] == '"')
            return text_loc(file, text, p);
    smoe_loc l = { file, 0, 0 };
    return l;
}

static char *read_all(const char *path, smoe_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        smoe_err_in(err, SMOE_ENOTFOUND, path, "cannot open file");
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = smoe_malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap)
            break;
        char *nb = smoe_realloc(buf, cap * 2);
        if (!nb) {
            smoe_free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf) {
        smoe_err_set(err, SMOE_ENOMEM, "out of memory reading %s", path);
        return NULL;
    }
    if (bad) {
        smoe_free(buf);
        smoe_err_in(err, SMOE_EIO, path, "read error");
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static smoe_status entry_from(smoe_arena *a, const char *path, const char *text,
                              const cJSON *item, smoe_logical_entry *e,
                              smoe_err *err)
{
    e->key = smoe_arena_strdup(a, item->string);
    e->loc = key_loc(smoe_arena_strdup(a, path), text, item->string);
    if (!e->key)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(item, "partition_spec");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    if (!cJSON_IsObject(item) || !cJSON_IsArray(spec) || !cJSON_IsArray(shape))
        return smoe_err_at(err, SMOE_EINVAL, e->loc,
                           "entry '%s' needs \"partition_spec\" and \"shape\" lists",
                           item->string);
    int rank = cJSON_GetArraySize(shape);
    if (rank > SMOE_MAX_RANK)
        return smoe_err_at(err, SMOE_EINVAL, e->loc, "entry '%s' has rank %d > %d",
                           item->string, rank, SMOE_MAX_RANK);
    if (cJSON_GetArraySize(spec) != rank)
        return smoe_err_at(err, SMOE_EINVAL, e->loc,
                           "entry '%s': partition_spec has %d entries but shape has %d",
                           item->string, cJSON_GetArraySize(spec), rank);
    e->rank = rank;
    int d = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, shape) {
        double v = cJSON_IsNumber(x) ? x->valuedouble : -1;
        if (v < 0 || v != floor(v) || v > 9.0e15)
            return smoe_err_at(err, SMOE_EINVAL, e->loc,
                               "entry '%s': shape[%d] is not a non-negative integer",
                               item->string, d);
        e->shape[d++] = (int64_t)v;
    }
    d = 0;
    cJSON_ArrayForEach(x, spec) {
        if (cJSON_IsNull(x)) {
            e->names[d] = NULL;
        } else if (cJSON_IsString(x) && x->valuestring[0]) {
            e->names[d] = smoe_arena_strdup(a, x->valuestring);
            if (!e->names[d])
                return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        } else {
            return smoe_err_at(err, SMOE_EINVAL, e->loc,
                               "entry '%s': partition_spec[%d] must be a logical "
                               "axis name or null",
                               item->string, d);
        }
        d++;
    }
    return SMOE_OK;
}

smoe_status smoe_params_load_json(smoe_arena *a, const char *path,
                                  smoe_logical_entry **out, int *n,
                                  smoe_err *err)
{
    smoe_status s = SMOE_OK;
    char *text = read_all(path, err);
    if (!text)
        return err ? err->code : SMOE_EIO;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        s = smoe_err_at(err, SMOE_EINVAL, text_loc(path, text, at ? at : text),
                        "malformed JSON");
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        s = smoe_err_in(err, SMOE_EINVAL, path,
                        "expected a JSON object mapping keys to "
                        "{\"partition_spec\", \"shape\"}");
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    smoe_logical_entry *e = smoe_arena_alloc(a, sizeof *e * (size_t)(count ? count : 1));
    if (!e) {
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        goto done;
    }
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        for (int j = 0; j < i; j++)
            if (strcmp(e[j].key, item->string) == 0) {
                s = smoe_err_at(err, SMOE_EINVAL, key_loc(path, text, item->string),
                                "duplicate key '%s'", item->string);
                goto done;
            }
        if ((s = entry_from(a, path, text, item, &e[i], err)))
            goto done;
        i++;
    }
    *out = e;
    *n = i;
done:
    cJSON_Delete(root);
    smoe_free(text);
    return s;
}
