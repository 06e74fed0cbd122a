/* MaxText logical_shardings.json -> smoe_logical_entry list (cJSON). The
 * only file of the config module that includes the JSON library. Errors
 * name file:line:col: cJSON's error pointer for syntax errors, the key's
 * position in the text for semantic ones (all keys located in one pass, so
 * reading is linear in the file; size and entry count are capped). */
#include "config_impl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Limits: a MaxText state tree of the largest models has a few thousand
 * entries; a --params file past these (or past SMOE_MAX_PARAMS_BYTES) is
 * refused, not read into memory (each entry becomes a plan row of ~11 KB). */
#define PARAMS_MAX_ENTRIES (1 << 17)

/* Where each top-level key of the JSON object starts, in document order (the
 * order cJSON keeps), found in one pass over the text: line and column are
 * counted as the scan goes, so locating every key costs O(text). Returns the
 * number of keys found, at most max; -1 if out of memory. */
static int top_level_keys(smoe_arena *a, const char *file, const char *text,
                          smoe_loc **out, int max)
{
    smoe_loc *loc = smoe_arena_alloc(a, sizeof *loc * (size_t)(max ? max : 1));
    if (!loc)
        return -1;
    int n = 0, depth = 0, line = 1, col = 1;
    for (const char *p = text; *p; p++) {
        char c = *p;
        if (c == '"') {
            int kline = line, kcol = col;
            /* skip the string, counting columns; JSON strings hold no raw newline */
            for (p++, col++; *p && *p != '"'; p++, col++)
                if (*p == '\\' && p[1]) {
                    p++;
                    col++;
                }
            if (!*p)
                break;
            col++;
            if (depth == 1) {
                const char *q = p + 1;
                while (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n')
                    q++;
                if (*q == ':' && n < max) {
                    loc[n].file = file;
                    loc[n].line = kline;
                    loc[n].col = kcol;
                    n++;
                }
            }
            continue;
        }
        if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']')
            depth--;
        if (c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    *out = loc;
    return n;
}

static smoe_status entry_from(smoe_arena *a, const cJSON *item, smoe_loc loc,
                              smoe_logical_entry *e, smoe_err *err)
{
    e->key = smoe_arena_strdup(a, item->string);
    e->loc = loc;
    if (!e->key)
        return smoe_err_in(err, SMOE_ENOMEM, loc.file, "out of memory reading the file");
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
                return smoe_err_in(err, SMOE_ENOMEM, loc.file, "out of memory reading the file");
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
    cJSON *root = NULL;
    s = smoe_json_parse(path, text, strlen(text), NULL, "malformed JSON", &root, err);
    if (s)
        goto done;
    if (!cJSON_IsObject(root)) {
        s = smoe_err_in(err, SMOE_EINVAL, path,
                        "expected a JSON object mapping keys to "
                        "{\"partition_spec\", \"shape\"}");
        goto done;
    }
    int count = cJSON_GetArraySize(root);
    if (count > PARAMS_MAX_ENTRIES) {
        s = smoe_err_in(err, SMOE_EINVAL, path,
                        "%d entries: more than %d (smoe's limit for a --params file)", count,
                        PARAMS_MAX_ENTRIES);
        goto done;
    }
    const char *file = smoe_arena_strdup(a, path);
    smoe_logical_entry *e = smoe_arena_alloc(a, sizeof *e * (size_t)(count ? count : 1));
    smoe_loc *locs = NULL;
    int nloc = file && e ? top_level_keys(a, file, text, &locs, count) : -1;
    if (nloc < 0) {
        s = smoe_err_in(err, SMOE_ENOMEM, path, "out of memory reading the file");
        goto done;
    }
    cfg_map seen;
    memset(&seen, 0, sizeof seen);
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        smoe_loc at = { file, 0, 0 };
        if (i < nloc)
            at = locs[i];
        if (cfg_map_index(&seen, item->string) >= 0) {
            s = smoe_err_at(err, SMOE_EINVAL, at, "duplicate key '%s'", item->string);
            goto done;
        }
        if ((s = entry_from(a, item, at, &e[i], err)))
            goto done;
        if (cfg_map_set(a, &seen, e[i].key, NULL)) {
            s = smoe_err_in(err, SMOE_ENOMEM, path, "out of memory reading the file");
            goto done;
        }
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
    smoe_status s = smoe_read_file_max(path, SMOE_MAX_PARAMS_BYTES, &text, NULL, err);
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
    if (len > SMOE_MAX_PARAMS_BYTES)
        return smoe_err_in(err, SMOE_EINVAL, name,
                           "larger than %zu MiB (smoe's limit for a --params file)",
                           SMOE_MAX_PARAMS_BYTES >> 20);
    char *buf = smoe_malloc(len + 1);
    if (!buf)
        return smoe_err_in(err, SMOE_ENOMEM, name, "out of memory reading the file");
    if (len)
        memcpy(buf, text, len);
    buf[len] = 0;
    smoe_status s = load_text(a, name, buf, out, n, err);
    smoe_free(buf);
    return s;
}
