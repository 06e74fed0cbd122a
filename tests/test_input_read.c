/* smoe's JSON input readers under failing allocations, in process:
 *  - every allocation failing in turn (smoe_alloc_fail_after) while a
 *    schedule and a --params file are parsed: each failure is
 *    SMOE_ENOMEM "out of memory ..." naming the file, never "not JSON"
 *    (what a failed allocation inside the JSON parser used to say), and
 *    the sweep reaches the parser: at least one failing allocation per
 *    JSON value of the document (cJSON allocates through smoe_malloc).
 * usage: test_input_read SCHEDULE.json PARAMS.json */
#include "../cli/cli.h"
#include "check.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <string.h>

/* ---- the parsers, one signature ---- */
typedef smoe_status (*parse_fn)(const char *text, size_t n, const char *name, smoe_arena *a,
                                smoe_err *err);

static smoe_status parse_schedule(const char *text, size_t n, const char *name, smoe_arena *a,
                                  smoe_err *err)
{
    (void)a;
    smoe_schedule *s;
    smoe_status st = cli_schedule_parse_text(text, n, name, &s, err);
    smoe_schedule_free(s);
    return st;
}

static smoe_status parse_params(const char *text, size_t n, const char *name, smoe_arena *a,
                                smoe_err *err)
{
    smoe_logical_entry *e;
    int ne;
    return smoe_params_load_json_text(a, name, text, n, &e, &ne, err);
}

static int json_values(const cJSON *v)
{
    int n = 1;
    for (const cJSON *c = v ? v->child : NULL; c; c = c->next)
        n += json_values(c);
    return n;
}

/* Fail the N-th allocation for N = 1, 2, ... until the parse succeeds. */
static void sweep(const char *path, parse_fn fn)
{
    char *text;
    size_t n;
    smoe_err err;
    CHECKF(smoe_read_file_max(path, SMOE_MAX_TRACE_BYTES, &text, &n, &err) == SMOE_OK, "%s",
           err.msg);
    cJSON *doc = cJSON_ParseWithLength(text, n);
    int values = json_values(doc), oom = 0, other = 0, at;
    cJSON_Delete(doc);
    for (at = 1; at < 1000000; at++) {
        smoe_arena *a = smoe_arena_new(1 << 12);
        smoe_alloc_fail_after(at);
        smoe_status s = fn(text, n, path, a, &err);
        smoe_alloc_fail_after(0);
        smoe_arena_free(a);
        if (s == SMOE_OK)
            break;
        if (s == SMOE_ENOMEM && strncmp(err.msg, "out of memory", 13) == 0 &&
            (strcmp(err.where, path) == 0 || strstr(err.msg, path))) {
            oom++;
        } else if (other++ == 0) {
            char buf[1200];
            fprintf(stderr, "%s: allocation %d failed: %s\n", path, at,
                    smoe_err_format(&err, buf, sizeof buf));
        }
    }
    CHECKF(at < 1000000, "%s: the sweep never succeeded", path);
    CHECKF(other == 0, "%s: %d failed allocations said something else than out of memory, "
           "naming the file", path, other);
    CHECKF(oom >= values, "%s: %d allocations could fail, fewer than its %d JSON values: the "
           "JSON parser's allocations are not smoe_malloc's", path, oom, values);
    smoe_free(text);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_input_read SCHEDULE.json PARAMS.json\n");
        return 2;
    }
    sweep(argv[1], parse_schedule);
    sweep(argv[2], parse_params);
    return check_report();
}
