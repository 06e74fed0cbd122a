/* `smoe train --plot`: the measured timeline drawn as `smoe sim --plot`
 * draws a predicted one. Reads the Chrome/Perfetto trace the run wrote
 * (--trace), one process row per rank, and hands it to smoe_plot_svg. */
#include "cli.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 64

static int row_of(int *pids, int *n, int pid, smoe_trace **t)
{
    for (int i = 0; i < *n; i++)
        if (pids[i] == pid)
            return i;
    if (*n == MAX_ROWS)
        return -1;
    pids[*n] = pid;
    t[*n] = smoe_trace_new(pid, 0);
    if (!t[*n])
        cli_usage_error(NULL, "out of memory for the timeline");
    return (*n)++;
}

void cli_plot_trace(const char *trace_path, const char *svg_path)
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
    smoe_trace *t[MAX_ROWS];
    int pids[MAX_ROWS], n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(ph) || !cJSON_IsNumber(pid) || !cJSON_IsString(name))
            continue;
        int r = row_of(pids, &n, (int)pid->valuedouble, t);
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
            else if (strcmp(name->valuestring, "thread_name") == 0 &&
                     smoe_trace_lane(t[r], lane, an->valuestring))
                cli_usage_error(NULL, "out of memory for the timeline");
        } else if (strcmp(ph->valuestring, "X") == 0) {
            const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
            const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
            if (!cJSON_IsNumber(ts) || !cJSON_IsNumber(dur))
                continue;
            double t0 = ts->valuedouble * 1e-6;
            if (smoe_trace_span(t[r], lane, name->valuestring, t0, t0 + dur->valuedouble * 1e-6))
                cli_usage_error(NULL, "out of memory for the timeline");
        }
    }
    cJSON_Delete(root);
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
