/* What the plot module's files share (not API). */
#ifndef SMOE_PLOT_IMPL_H
#define SMOE_PLOT_IMPL_H

#include "smoe/plot.h"

#define PLOT_W 1100.0
#define PLOT_LEFT 190.0
#define PLOT_RIGHT 30.0

/* A nice tick step near range / 5. */
double plot_tick_step(double range);
/* The height of an envelope panel of r's rows. */
double plot_envelope_h(const smoe_plot_ranges *r);
/* Envelope panel k at the top y0 (plot.h: smoe_plot_ranges). */
void plot_envelope(FILE *f, double y0, int k, const smoe_plot_ranges *r);

#endif
