/* The envelope panels (plot.h: smoe_plot_ranges): a row per schedule, the
 * prediction's range over the readings as a bar on a common axis, the
 * reported value as a diamond (filled inside the range, hollow red
 * outside). */
#include "plot_impl.h"

#include <math.h>

#define HEAD 30.0
#define ROW 20.0
#define AXIS 40.0

double plot_envelope_h(const smoe_plot_ranges *r) { return HEAD + r->n * ROW + AXIS; }

/* The axis' span: every range and reported value, padded, from 0 when
 * that is near. */
static void span(const smoe_plot_ranges *r, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < r->n; i++) {
        *lo = fmin(*lo, r->r[i].lo);
        *hi = fmax(*hi, r->r[i].hi);
        if (r->r[i].reported >= 0) {
            *lo = fmin(*lo, r->r[i].reported);
            *hi = fmax(*hi, r->r[i].reported);
        }
    }
    if (!(*hi > *lo)) {
        *lo -= 1;
        *hi += 1;
    }
    double pad = (*hi - *lo) * 0.05;
    *lo = *lo - pad < 0 || *lo < (*hi - *lo) ? fmax(0, *lo - pad) : *lo - pad;
    *hi += pad;
}

static void axis(FILE *f, double lo, double hi, double y, const char *unit)
{
    const double pw = PLOT_W - PLOT_LEFT - PLOT_RIGHT;
    double st = plot_tick_step(hi - lo);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
            PLOT_LEFT, y, PLOT_LEFT + pw, y);
    for (double v = ceil(lo / st) * st; v <= hi; v += st) {
        double x = PLOT_LEFT + (v - lo) / (hi - lo) * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                x, y, x, y + 5, x, y + 18, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n",
            PLOT_LEFT + pw / 2, y + 33, unit);
}

void plot_envelope(FILE *f, double y0, int k, const smoe_plot_ranges *r)
{
    const double pw = PLOT_W - PLOT_LEFT - PLOT_RIGHT;
    double lo, hi;
    span(r, &lo, &hi);
#define X(v) (PLOT_LEFT + ((v) - lo) / (hi - lo) * pw)
    int inside = 0, reported = 0;
    for (int i = 0; i < r->n; i++)
        if (r->r[i].reported >= 0) {
            reported++;
            inside += r->r[i].reported >= r->r[i].lo && r->r[i].reported <= r->r[i].hi;
        }
    fprintf(f, "<!-- panel envelope %d x=%.0f y=%.0f w=%.0f h=%.0f rows=%d inside=%d "
               "reported=%d -->\n", k, PLOT_LEFT, y0 + HEAD, pw, r->n * ROW, r->n, inside, reported);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">%s: predicted "
               "over every reading (bar) and reported (diamond; hollow red: outside)</text>\n",
            PLOT_LEFT, y0 + 20, r->title);
    for (int i = 0; i < r->n; i++) {
        const smoe_plot_range *g = &r->r[i];
        double y = y0 + HEAD + i * ROW;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                PLOT_LEFT - 8, y + 14, g->label);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#88bbdd\"/>\n",
                X(g->lo), y + 5, fmax(X(g->hi) - X(g->lo), 2.0), ROW - 10);
        if (g->reported < 0)
            continue;
        int in = g->reported >= g->lo && g->reported <= g->hi;
        double cx = X(g->reported), cy = y + ROW / 2;
        fprintf(f, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\" "
                   "stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                cx, cy - 6, cx + 6, cy, cx, cy + 6, cx - 6, cy, in ? "#000000" : "none",
                in ? "#000000" : "#cc3311");
    }
#undef X
    axis(f, lo, hi, y0 + HEAD + r->n * ROW, r->unit);
}
