/* smoe plot: pictures of simulated and measured steps, drawn from the
 * sched module's data (timelines as smoe_trace, the planner's Pareto curve
 * as smoe_sim_point). Presentation only: nothing in the simulator depends
 * on it (the layering check keeps sched below plot). Pure: it writes to a
 * FILE the caller gives. */
#ifndef SMOE_PLOT_H
#define SMOE_PLOT_H

#include <stdio.h>

#include "smoe/core.h"
#include "smoe/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An SVG: a Pareto panel (when ncurve + nmarks > 0: the points of curve
 * joined, marks labelled) above one timeline per trace (NULL traces are
 * skipped), lanes as rows on a common time axis. Each panel and lane is
 * named in a comment "<!-- lane TRACE LANE x= y= w= h= spans=N -->" /
 * "<!-- panel pareto x= y= w= h= -->" giving its box in pixels. The
 * caller opens and closes f; write errors give SMOE_EIO. Thread-safe
 * (no state). */
typedef struct smoe_plot_mark {
    double peak_hbm_bytes, exposed_gather_s;
    const char *label;
} smoe_plot_mark;
/* An envelope panel (drawn below the Pareto panel, one per figure): for
 * each row (a schedule) the range [lo, hi] of its prediction over the
 * scenario's readings as a bar, and the reported value as a mark, filled
 * when inside the range and hollow red when outside. Named in a comment
 * "<!-- panel envelope K x= y= w= h= rows=N inside=M reported=R -->". */
typedef struct smoe_plot_range {
    const char *label;
    double lo, hi;
    double reported; /* < 0: none reported */
} smoe_plot_range;
typedef struct smoe_plot_ranges {
    const char *title; /* "step time", ... */
    const char *unit;  /* the axis' unit: "ms", "GiB" */
    const smoe_plot_range *r;
    int n;
} smoe_plot_ranges;
SMOE_MUST_CHECK
smoe_status smoe_plot_svg(FILE *f, smoe_trace *const *traces, int n, const smoe_sim_point *curve,
                          int ncurve, const smoe_plot_mark *marks, int nmarks,
                          const smoe_plot_ranges *ranges, int nranges, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
