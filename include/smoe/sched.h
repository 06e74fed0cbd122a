/* smoe sched: the pure (no MPI) side of scheduling: the timeline trace
 * format shared by the simulator and the runtime, so that a predicted and
 * a measured timeline open side by side in Perfetto / chrome://tracing. */
#ifndef SMOE_SCHED_H
#define SMOE_SCHED_H

#include <stdint.h>
#include <stdio.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- trace (Chrome trace event format, "X" complete events) ----
 * One process row per rank (pid), one thread row per lane (tid). */
typedef struct smoe_trace smoe_trace;

/* origin: the time (seconds) that maps to ts = 0. */
smoe_trace *smoe_trace_new(int pid, double origin);
void smoe_trace_free(smoe_trace *t);
/* Record a span [t0, t1] (seconds, same clock as origin) on lane `tid`.
 * The name is copied. Returns SMOE_ENOMEM if the event could not be kept. */
smoe_status smoe_trace_span(smoe_trace *t, int tid, const char *name, double t0,
                            double t1);
/* Name a lane (thread row) of this trace's pid. */
smoe_status smoe_trace_lane(smoe_trace *t, int tid, const char *name);
int64_t smoe_trace_count(const smoe_trace *t);
/* The events as JSON objects separated by ",\n" (no brackets), in a
 * buffer owned by the trace (valid until the next call or free). */
const char *smoe_trace_fragment(smoe_trace *t, size_t *len);
/* Write a whole trace file from per-rank fragments. */
smoe_status smoe_trace_write(FILE *f, const char *const *fragments, const size_t *lens,
                             int n, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
