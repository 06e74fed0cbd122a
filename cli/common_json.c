/* What every JSON output of the CLI shares: the mesh object and printing
 * (then freeing) the document; and the schedule file written whole. */
#include "cli.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cJSON *cli_json_mesh(const smoe_mesh *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *names = cJSON_AddArrayToObject(o, "axis_names");
    cJSON *shape = cJSON_AddObjectToObject(o, "shape");
    for (int i = 0; i < m->n; i++) {
        cJSON_AddItemToArray(names, cJSON_CreateString(m->name[i]));
        cJSON_AddNumberToObject(shape, m->name[i], (double)m->size[i]);
    }
    return o;
}

void cli_json_print(FILE *f, struct cJSON *root)
{
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "smoe: out of memory formatting the JSON output\n");
        exit(SMOE_EXIT_FAIL);
    }
    fputs(text, f);
    fputc('\n', f);
    free(text);
}

/* JSON strings must be UTF-8: a path (or any text from outside) that is not
 * keeps its valid sequences and writes each invalid byte as the four
 * characters \xNN, so the document stays valid and the bytes recoverable. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong, surrogate */
    if (n == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}

/* s as UTF-8 (invalid bytes as \xNN), malloc'd; NULL when out of memory. */
static char *utf8_text(const char *s)
{
    char *buf = malloc(4 * strlen(s) + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n) {
            memcpy(buf + o, p, n);
            o += n;
            p += n;
        } else {
            o += (size_t)snprintf(buf + o, 5, "\\x%02X", *p);
            p++;
        }
    }
    buf[o] = 0;
    return buf;
}

struct cJSON *cli_json_string(const char *s)
{
    char *buf = utf8_text(s);
    cJSON *x = cJSON_CreateString(buf ? buf : "");
    free(buf);
    return x;
}

void cli_json_add(struct cJSON *obj, const char *key, struct cJSON *item)
{
    char *k = utf8_text(key);
    cJSON_AddItemToObject(obj, k ? k : "", item); /* the key is copied */
    free(k);
}

void cli_schedule_write(const char *path, const smoe_schedule *s, const char *hardware)
{
    char *hw = utf8_text(hardware);
    char *text = hw ? smoe_schedule_json(s, hw) : NULL;
    free(hw);
    if (!text)
        cli_usage_error(NULL, "out of memory formatting the schedule");
    smoe_out *out = cli_out_open("--schedule-out", path);
    fputs(text, smoe_out_file(out));
    fputc('\n', smoe_out_file(out));
    free(text);
    smoe_err err;
    cli_out_finish(out, SMOE_OK, &err, "--schedule-out", path); /* a failed write: the commit's */
}

smoe_status cli_schedule_read(const char *path, smoe_schedule **out, smoe_err *err)
{
    return smoe_schedule_read(path, out, err);
}
