/* The one parse path of smoe's JSON readers (--params, --schedule, a
 * checkpoint's manifest, a --trace read back): cJSON allocating through
 * smoe_malloc, so a failed allocation is reported as out of memory (and a
 * test can fail the N-th one) rather than as text that is not JSON, and a
 * syntax error located at file:line:col. */
#include "smoe/config.h"

#include <cjson/cJSON.h>
#include <string.h>

static int g_oom; /* an allocation failed during the current parse */

static void *json_malloc(size_t n)
{
    void *p = smoe_malloc(n);
    if (!p)
        g_oom = 1;
    return p;
}

/* cJSON's allocator is process-wide: installed once, before the first
 * parse (smoe parses JSON from one thread). */
static void use_smoe_alloc(void)
{
    static int done;
    if (!done) {
        cJSON_Hooks h = { json_malloc, smoe_free };
        cJSON_InitHooks(&h);
        done = 1;
    }
}

static size_t skip_space(const char *text, size_t n, size_t i)
{
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n'))
        i++;
    return i;
}

smoe_status smoe_json_parse(const char *name, const char *text, size_t n, size_t *pos,
                            const char *what, cJSON **out, smoe_err *err)
{
    use_smoe_alloc();
    *out = NULL;
    size_t from = pos ? skip_space(text, n, *pos) : 0;
    const char *end = NULL;
    g_oom = 0;
    cJSON *v = from < n ? cJSON_ParseWithLengthOpts(text + from, n - from, &end, 0) : NULL;
    if (!v && g_oom)
        return smoe_err_in(err, SMOE_ENOMEM, name, "out of memory reading the file");
    size_t at = v ? (size_t)(end - text) : from;
    if (!v && end && end >= text + from && end <= text + n)
        at = (size_t)(end - text);
    if (v && !pos && skip_space(text, n, at) < n) { /* something after the value */
        cJSON_Delete(v);
        v = NULL;
        at = skip_space(text, n, at);
    }
    if (!v)
        return smoe_err_at(err, SMOE_EINVAL, smoe_text_loc(name, text, text + at), "%s",
                           what ? what : "not JSON");
    if (pos)
        *pos = at;
    *out = v;
    return SMOE_OK;
}
