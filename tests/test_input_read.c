/* smoe's JSON input readers under failing allocations, and the trace
 * reader's work, in process:
 *  - every allocation failing in turn (smoe_alloc_fail_after) while a
 *    schedule, a --params file and a trace are parsed: each failure is
 *    SMOE_ENOMEM "out of memory ..." naming the file, never "not JSON"
 *    (what a failed allocation inside the JSON parser used to say), and
 *    the sweep reaches the parser: at least one failing allocation per
 *    JSON value of the document (cJSON allocates through smoe_malloc);
 *  - per-layer compute from a trace of many spans (every layer kind's 4096
 *    sampled spans and as many exchanges) reads each event a bounded
 *    number of times: smoe_trace_event is linked with --wrap and counted
 *    here (a rescan of the row for every layer span made it spans x
 *    events).
 * usage: test_input_read SCHEDULE.json PARAMS.json TRACE.json */
#include "../cli/cli.h"
#include "check.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- smoe_trace_event, counted (-Wl,--wrap=smoe_trace_event) ---- */
int __real_smoe_trace_event(const smoe_trace *t, int64_t i, int *tid, double *t0, double *t1,
                            const char **name);
int __wrap_smoe_trace_event(const smoe_trace *t, int64_t i, int *tid, double *t0, double *t1,
                            const char **name);
static long long g_reads;

int __wrap_smoe_trace_event(const smoe_trace *t, int64_t i, int *tid, double *t0, double *t1,
                            const char **name)
{
    g_reads++;
    return __real_smoe_trace_event(t, i, tid, t0, t1, name);
}

/* ---- the parsers, one signature ---- */
typedef smoe_status (*parse_fn)(const char *text, size_t n, const char *name, smoe_arena *a,
                                smoe_err *err);

static smoe_status parse_schedule(const char *text, size_t n, const char *name, smoe_arena *a,
                                  smoe_err *err)
{
    (void)a;
    smoe_schedule *s;
    smoe_status st = smoe_schedule_parse_text(text, n, name, &s, err);
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

static smoe_status parse_trace(const char *text, size_t n, const char *name, smoe_arena *a,
                               smoe_err *err)
{
    (void)a;
    smoe_trace *t[CLI_TRACE_ROWS];
    int rows;
    smoe_status st = cli_trace_parse_text(text, n, name, t, CLI_TRACE_ROWS, &rows, err);
    for (int r = 0; r < rows; r++)
        smoe_trace_free(t[r]);
    return st;
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

/* ---- the trace reader's work ---- */

/* A trace of one row: every pass and kind's LAYERS spans, each holding an
 * expert exchange (plus metadata). */
#define LAYERS 4096
static char *many_spans(size_t *n, int64_t *events)
{
    size_t cap = (size_t)LAYERS * 8 * 96 + 256, k = 0;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    k += (size_t)snprintf(b + k, cap - k, "{\"traceEvents\":[\n{\"name\":\"process_name\","
                          "\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"rank 0\"}}");
    *events = 1;
    double ts = 0;
    for (int i = 0; i < LAYERS; i++)
        for (int pk = 0; pk < 4; pk++, ts += 10, *events += 2)
            k += (size_t)snprintf(b + k, cap - k,
                                  ",\n{\"name\":\"%s L%d %s\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                                  "\"ts\":%.0f,\"dur\":8}"
                                  ",\n{\"name\":\"A2A\",\"ph\":\"X\",\"pid\":0,\"tid\":2,"
                                  "\"ts\":%.0f,\"dur\":%d}",
                                  pk / 2 ? "bwd" : "fwd", i, pk % 2 ? "moe" : "dense", ts,
                                  ts + 1, 1 + pk);
    k += (size_t)snprintf(b + k, cap - k, "\n]}\n");
    *n = k;
    return b;
}

static void linear_work(void)
{
    size_t n;
    int64_t events;
    char *text = many_spans(&n, &events);
    CHECK(text != NULL);
    if (!text)
        return;
    smoe_trace *t[CLI_TRACE_ROWS];
    int rows = 0, count[2][2];
    double med[2][2];
    smoe_err err;
    CHECK(cli_trace_parse_text(text, n, "many.json", t, CLI_TRACE_ROWS, &rows, &err) == SMOE_OK);
    g_reads = 0;
    CHECK(cli_trace_layers(t, rows, med, count, &err) == SMOE_OK);
    CHECKF(g_reads <= 8 * events, "%lld event reads for %lld events: not linear", g_reads,
           (long long)events);
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            CHECK_INT(count[p][k], LAYERS);
            /* each 8 us span holds a (1 + 2p + k) us exchange */
            CHECKF(med[p][k] > (7 - 2 * p - k) * 1e-6 - 1e-12 &&
                       med[p][k] < (7 - 2 * p - k) * 1e-6 + 1e-12,
                   "median[%d][%d] = %g s", p, k, med[p][k]);
        }
    for (int r = 0; r < rows; r++)
        smoe_trace_free(t[r]);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_input_read SCHEDULE.json PARAMS.json TRACE.json\n");
        return 2;
    }
    sweep(argv[1], parse_schedule);
    sweep(argv[2], parse_params);
    sweep(argv[3], parse_trace);
    linear_work();
    return check_report();
}
