/* Traces read back: `smoe train --plot` draws the measured timeline as
 * `smoe sim --plot` draws a predicted one, and `smoe sim --profile` takes
 * per-layer compute durations from it. A Chrome/Perfetto trace as --trace
 * writes it ("X" spans, process_name / thread_name metadata), one
 * smoe_trace per process row. */
#include "cli.h"
#include "smoe/plot.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 64

static int row_of(int *pids, int *n, int max, int pid, smoe_trace **t)
{
    for (int i = 0; i < *n; i++)
        if (pids[i] == pid)
            return i;
    if (*n == max)
        return -1;
    pids[*n] = pid;
    t[*n] = smoe_trace_new(pid, 0);
    if (!t[*n])
        cli_usage_error(NULL, "out of memory for the timeline");
    return (*n)++;
}

int cli_read_trace(const char *trace_path, smoe_trace **t, int max)
{
    char *text;
    size_t len;
    smoe_err err;
    if (smoe_read_file(trace_path, &text, &len, &err))
        cli_die(&err);
    cJSON *root = cJSON_ParseWithLength(text, len);
    smoe_free(text);
    const cJSON *ev = root ? cJSON_GetObjectItemCaseSensitive(root, "traceEvents") : NULL;
    if (!cJSON_IsArray(ev)) {
        smoe_err_in(&err, SMOE_EINVAL, trace_path, "not a trace written by --trace");
        cli_die(&err);
    }
    int pids[MAX_ROWS], n = 0;
    if (max > MAX_ROWS)
        max = MAX_ROWS;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(ph) || !cJSON_IsNumber(pid) || !cJSON_IsString(name))
            continue;
        int r = row_of(pids, &n, max, (int)pid->valuedouble, t);
        if (r < 0)
            continue;
        int lane = cJSON_IsNumber(tid) ? (int)tid->valuedouble : 0;
        if (strcmp(ph->valuestring, "M") == 0) {
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
            const cJSON *an = args ? cJSON_GetObjectItemCaseSensitive(args, "name") : NULL;
            if (!cJSON_IsString(an))
                continue;
            if (strcmp(name->valuestring, "process_name") == 0)
                smoe_trace_process(t[r], an->valuestring);
            else if (strcmp(name->valuestring, "thread_name") == 0)
                smoe_trace_lane(t[r], lane, an->valuestring);
        } else if (strcmp(ph->valuestring, "X") == 0) {
            const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
            const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
            if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(dur))
                continue;
            double t0 = ts->valuedouble * 1e-6;
            smoe_trace_span(t[r], lane, name->valuestring, t0, t0 + dur->valuedouble * 1e-6);
        }
    }
    cJSON_Delete(root);
    return n;
}

void cli_plot_trace(const char *trace_path, const char *svg_path)
{
    smoe_trace *t[MAX_ROWS];
    int n = cli_read_trace(trace_path, t, MAX_ROWS);
    smoe_err err;
    FILE *f = fopen(svg_path, "w");
    if (!f) {
        char where[300];
        snprintf(where, sizeof where, "argument '--plot %s'", svg_path);
        cli_io_error(where, "cannot write the file");
    }
    smoe_status s = smoe_plot_svg(f, t, n, NULL, 0, NULL, 0, &err);
    if (fclose(f) != 0 && !s)
        s = smoe_err_set(&err, SMOE_EIO, "error writing the picture");
    for (int i = 0; i < n; i++)
        smoe_trace_free(t[i]);
    if (s) {
        snprintf(err.where, sizeof err.where, "%s", svg_path);
        cli_die(&err);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Is [a0, a1] an expert exchange of the same row inside [t0, t1]? */
static int is_exchange(const char *name)
{
    return strncmp(name, "A2A", 3) == 0 || strncmp(name, "expert exchange", 15) == 0;
}

void cli_trace_layer_times(const char *trace_path, double med[2][2], int count[2][2])
{
    smoe_trace *t[MAX_ROWS];
    int n = cli_read_trace(trace_path, t, MAX_ROWS);
    double *v[2][2];
    int cap = 4096;
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            v[p][k] = cli_alloc(sizeof(double) * (size_t)cap);
            count[p][k] = 0;
            med[p][k] = 0;
        }
    for (int r = 0; r < n; r++) {
        int tid, layer;
        double t0, t1;
        const char *nm;
        char pass[8], kind[16];
        for (int64_t i = 0; smoe_trace_event(t[r], i, &tid, &t0, &t1, &nm) >= 0; i++) {
            if (smoe_trace_event(t[r], i, &tid, &t0, &t1, &nm) != 0 ||
                sscanf(nm, "%3s L%d %15s", pass, &layer, kind) != 3)
                continue;
            int p = strcmp(pass, "fwd") == 0 ? 0 : strcmp(pass, "bwd") == 0 ? 1 : -1;
            int k = strcmp(kind, "dense") == 0 ? 0 : strcmp(kind, "moe") == 0 ? 1 : -1;
            if (p < 0 || k < 0 || count[p][k] == cap)
                continue;
            /* the layer's span holds its exchanges: the sim adds its own */
            double d = t1 - t0;
            int tj;
            double a0, a1;
            const char *an;
            for (int64_t j = 0; smoe_trace_event(t[r], j, &tj, &a0, &a1, &an) >= 0; j++)
                if (smoe_trace_event(t[r], j, &tj, &a0, &a1, &an) == 0 && is_exchange(an) &&
                    a0 >= t0 && a1 <= t1)
                    d -= a1 - a0;
            v[p][k][count[p][k]++] = d > 0 ? d : 0;
        }
    }
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            if (count[p][k]) {
                qsort(v[p][k], (size_t)count[p][k], sizeof(double), cmp_double);
                med[p][k] = v[p][k][count[p][k] / 2];
            }
            free(v[p][k]);
        }
    for (int r = 0; r < n; r++)
        smoe_trace_free(t[r]);
}
