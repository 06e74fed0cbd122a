/* Traces read back: `smoe train --plot` draws the measured timeline as
 * `smoe sim --plot` draws a predicted one, and `smoe sim --profile` takes
 * per-layer compute durations from it. The file is read (within
 * SMOE_MAX_TRACE_BYTES) and parsed by trace_json_read.c; here the CLI's
 * side: one line and exit on any error. */
#include "cli.h"
#include "smoe/plot.h"
#include "smoe/sched.h"

int cli_read_trace(const char *trace_path, smoe_trace **t, int max)
{
    char *text;
    size_t len;
    int n;
    smoe_err err;
    if (smoe_read_file_max(trace_path, SMOE_MAX_TRACE_BYTES, &text, &len, &err))
        cli_die(&err);
    smoe_status s = cli_trace_parse_text(text, len, trace_path, t, max, &n, &err);
    smoe_free(text);
    if (s)
        cli_die(&err);
    return n;
}

void cli_plot_trace(const char *trace_path, const char *svg_path)
{
    smoe_trace *t[CLI_TRACE_ROWS];
    int n = cli_read_trace(trace_path, t, CLI_TRACE_ROWS);
    smoe_err err;
    smoe_out *o = cli_out_open("--plot", svg_path);
    smoe_status s = smoe_plot_svg(smoe_out_file(o), t, n, NULL, 0, NULL, 0, NULL, 0, &err);
    for (int i = 0; i < n; i++)
        smoe_trace_free(t[i]);
    cli_out_finish(o, s, &err, "--plot", svg_path);
}

void cli_trace_layer_times(const char *trace_path, double med[2][2], int count[2][2])
{
    smoe_trace *t[CLI_TRACE_ROWS];
    int n = cli_read_trace(trace_path, t, CLI_TRACE_ROWS);
    smoe_err err;
    smoe_status s = cli_trace_layers(t, n, med, count, &err);
    for (int r = 0; r < n; r++)
        smoe_trace_free(t[r]);
    if (s)
        cli_die(&err);
}
