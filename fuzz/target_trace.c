/* The trace fuzz target (see targets.h): arbitrary bytes as a --trace file
 * read back (smoe sim --profile, smoe train --plot) ->
 * cli_trace_parse_text, then the per-layer compute of what it accepted
 * (cli_trace_layers). Every span kept lies within the reader's bounds
 * (finite, 0 <= start <= end, at most two years from the origin), every
 * lane is a non-negative integer, and every median is a finite length no
 * longer than the longest span. The reader is compiled in
 * (cli/trace_json_read.c: cJSON, core and sched only). */
#include "targets.h"

#include "../cli/cli.h"
#include "smoe/sched.h"

#include <math.h>
#include <stdlib.h>

#define MAX_S (2 * 365.0 * 86400) /* a span's start plus its length */

/* Check row t's spans; the longest one's length. */
static double check_row(const smoe_trace *t)
{
    int tid;
    double t0, t1, longest = 0;
    const char *nm;
    for (int64_t i = 0; smoe_trace_event(t, i, &tid, &t0, &t1, &nm) >= 0; i++) {
        smoe_fuzz_check(tid >= 0 && nm != NULL, "a kept event has a lane and a name");
        if (smoe_trace_event(t, i, &tid, &t0, &t1, &nm) != 0)
            continue;
        smoe_fuzz_check(isfinite(t0) && isfinite(t1) && t0 >= 0 && t1 >= t0 && t1 <= MAX_S,
                        "a kept span lies within the bounds");
        if (t1 - t0 > longest)
            longest = t1 - t0;
    }
    smoe_fuzz_check(smoe_trace_lost(t) == 0, "an accepted trace is complete");
    return longest;
}

int smoe_fuzz_trace(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        size = 1 << 20;
    char *text = smoe_fuzz_cstr(data, size);
    if (!text)
        return 0;
    smoe_trace *t[CLI_TRACE_ROWS];
    int n = -1;
    smoe_err err;
    if (cli_trace_parse_text(text, size, "trace.json", t, CLI_TRACE_ROWS, &n, &err)) {
        smoe_fuzz_check(err.msg[0] != 0 && n == 0, "a refused trace has a message");
        free(text);
        return 0;
    }
    smoe_fuzz_check(n >= 0 && n <= CLI_TRACE_ROWS, "rows within the limit");
    double longest = 0, med[2][2];
    int count[2][2];
    for (int r = 0; r < n; r++)
        longest = fmax(longest, check_row(t[r]));
    if (cli_trace_layers(t, n, med, count, &err) == SMOE_OK)
        for (int p = 0; p < 2; p++)
            for (int k = 0; k < 2; k++)
                smoe_fuzz_check(count[p][k] >= 0 && count[p][k] <= 4096 && isfinite(med[p][k]) &&
                                    med[p][k] >= 0 && med[p][k] <= longest,
                                "a layer median is a length within the spans'");
    for (int r = 0; r < n; r++)
        smoe_trace_free(t[r]);
    free(text);
    return 0;
}
