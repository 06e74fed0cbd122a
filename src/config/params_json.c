/* MaxText logical_shardings.json -> smoe_logical_entry list (cJSON). The
 * only file of the config module that includes the JSON library. Errors
 * name file:line:col: cJSON's error pointer for syntax errors, the key's
 * position in the text for semantic ones. */
#include "config_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Position of "key" in the text (the first occurrence as a JSON string). */
static smoe_loc key_loc(const char *file, const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = strchr(text, '"'); p; p = strchr(p + 1, '"'))
        if (strncmp(p + 1, key, n) == 0 && p[n + 1] == '"')
            return smoe_text_loc(file, text, p);
    smoe_loc l = { file, 0, 0 };
    return l;
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

/* Parse NUL-terminated `text` (owned by the caller); `path` names it in
 * locations. */
static smoe_status load_text(smoe_arena *a, const char *path, const char *text,
                             smoe_logical_entry **out, int *n, smoe_err *err)
{
    smoe_status s = SMOE_OK;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        s = smoe_err_at(err, SMOE_EINVAL, smoe_text_loc(path, text, at ? at : text),
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
    return s;
}

smoe_status smoe_params_load_json(smoe_arena *a, const char *path,
                                  smoe_logical_entry **out, int *n,
                                  smoe_err *err)
{
    char *text;
    smoe_status s = smoe_read_file(path, &text, NULL, err);
    if (s)
        return s;
    s = load_text(a, path, text, out, n, err);
    smoe_free(text);
    return s;
}

smoe_status smoe_params_load_json_text(smoe_arena *a, const char *name,
                                       const char *text, size_t len,
                                       smoe_logical_entry **out, int *n,
                                       smoe_err *err)
{
    char *buf = smoe_malloc(len + 1);
    if (!buf)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory reading %s", name);
    if (len)
        memcpy(buf, text, len);
    buf[len] = 0;
    smoe_status s = load_text(a, name, buf, out, n, err);
    smoe_free(buf);
    return s;
}
