/* SVG pictures of schedules: a Pareto panel (peak HBM against exposed
 * gather wait: the planner's path joined, marked points labelled) above one
 * timeline per trace, its lanes as rows on a common time axis. Plain SVG 1.1
 * (rects, lines, polylines, text), white background. Every panel and lane is
 * also named in a comment with its box, so a test can find it in the
 * rendered picture. */
#include "plot_impl.h"

#include <math.h>
#include <string.h>

#define W PLOT_W
#define LEFT PLOT_LEFT
#define RIGHT PLOT_RIGHT
#define PARETO_H 320.0
#define HEAD_H 24.0
#define LANE_H 18.0
#define GAP 12.0
#define AXIS_H 34.0
#define MAX_LANES 8

static const char *const lane_fill[MAX_LANES] = { "#4477aa", "#ee6677", "#228833", "#ccbb44",
                                                  "#66ccee", "#aa3377", "#bbbbbb", "#000000" };

double plot_tick_step(double range)
{
    if (!(range > 0))
        return 1;
    double p = pow(10, floor(log10(range / 5)));
    double r = range / 5 / p;
    return p * (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10);
}

static int lanes_of(const smoe_trace *t, const char **names)
{
    int nl = 0, tid;
    double t0, t1;
    const char *nm;
    for (int64_t i = 0; smoe_trace_event(t, i, &tid, &t0, &t1, &nm) >= 0; i++) {
        if (tid < 0 || tid >= MAX_LANES)
            continue;
        if (tid + 1 > nl)
            nl = tid + 1;
        if (smoe_trace_event(t, i, &tid, &t0, &t1, &nm) == 1)
            names[tid] = nm;
    }
    return nl;
}

static void pareto(FILE *f, double y0, const smoe_sim_point *curve, int nc,
                   const smoe_plot_mark *marks, int nm)
{
    const double GiB = 1024.0 * 1024 * 1024;
    double xlo = INFINITY, xhi = -INFINITY, yhi = 0;
    for (int i = 0; i < nc; i++) {
        xlo = fmin(xlo, curve[i].peak_hbm_bytes / GiB);
        xhi = fmax(xhi, curve[i].peak_hbm_bytes / GiB);
        yhi = fmax(yhi, curve[i].exposed_gather_s * 1e3);
    }
    for (int i = 0; i < nm; i++) {
        xlo = fmin(xlo, marks[i].peak_hbm_bytes / GiB);
        xhi = fmax(xhi, marks[i].peak_hbm_bytes / GiB);
        yhi = fmax(yhi, marks[i].exposed_gather_s * 1e3);
    }
    if (!(xhi > xlo)) {
        xlo -= 1;
        xhi += 1;
    }
    double pad = (xhi - xlo) * 0.05;
    xlo -= pad;
    xhi += pad;
    if (xlo < 0)
        xlo = 0;
    yhi = yhi > 0 ? yhi * 1.08 : 1;
    const double px = LEFT, py = y0 + 30, pw = W - LEFT - RIGHT, ph = PARETO_H - 80;
#define X(v) (px + ((v) - xlo) / (xhi - xlo) * pw)
#define Y(v) (py + ph - (v) / yhi * ph)
    fprintf(f, "<!-- panel pareto x=%.0f y=%.0f w=%.0f h=%.0f -->\n", px, py, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">"
               "Exposed gather wait vs peak HBM (memory-budgeted plans; uniform depths "
               "marked)</text>\n", px, y0 + 18);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#888\"/>\n", px, py, pw, ph);
    double sx = plot_tick_step(xhi - xlo), sy = plot_tick_step(yhi);
    for (double v = ceil(xlo / sx) * sx; v <= xhi; v += sx)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                X(v), py + ph, X(v), py + ph + 5, X(v), py + ph + 18, v);
    for (double v = 0; v <= yhi; v += sy)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
                px - 5, Y(v), px, Y(v), px - 8, Y(v) + 4, v);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">peak HBM per "
               "device (GiB)</text>\n", px + pw / 2, py + ph + 34);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">exposed gather wait (ms)</text>\n",
            px - 50, py + ph / 2, px - 50, py + ph / 2);
    if (nc) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"#4477aa\" stroke-width=\"2\" points=\"");
        for (int i = 0; i < nc; i++)
            fprintf(f, "%.1f,%.1f ", X(curve[i].peak_hbm_bytes / GiB),
                    Y(curve[i].exposed_gather_s * 1e3));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < nc; i++)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"#4477aa\"/>\n",
                    X(curve[i].peak_hbm_bytes / GiB), Y(curve[i].exposed_gather_s * 1e3));
    }
    for (int i = 0; i < nm; i++) {
        double cx = X(marks[i].peak_hbm_bytes / GiB), cy = Y(marks[i].exposed_gather_s * 1e3);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\" fill=\"#ee6677\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
                cx - 4.5, cy - 4.5, cx + 7, cy - 6, marks[i].label ? marks[i].label : "");
    }
#undef X
#undef Y
}

/* The traces' rows: each trace's lane names (names[i], nl[i] lanes; the
 * default names where the trace names none) and its last span's end
 * (*tmax, 1 when nothing ran); returns the rows' height. */
static double measure_traces(smoe_trace *const *traces, int n, const char *names[][MAX_LANES],
                             int *nl, double *tmax)
{
    static const char *const def[MAX_LANES] = { "compute", "gathers", "exchange / reductions",
                                                "waits", "device kernels", "lane 5", "lane 6",
                                                "lane 7" };
    _Static_assert(SMOE_LANES <= MAX_LANES, "every smoe_lane has a row");
    double h = 0;
    *tmax = 0;
    for (int i = 0; i < n; i++) {
        memcpy(names[i], def, sizeof def);
        nl[i] = traces[i] ? lanes_of(traces[i], names[i]) : 0;
        int tid;
        double t0, t1;
        const char *nm;
        for (int64_t e = 0; traces[i] && smoe_trace_event(traces[i], e, &tid, &t0, &t1, &nm) >= 0;
             e++)
            *tmax = fmax(*tmax, t1);
        if (traces[i])
            h += HEAD_H + nl[i] * LANE_H + GAP;
    }
    if (!(*tmax > 0))
        *tmax = 1;
    return h;
}

/* Trace i's rows from y: its name, then each lane's spans (tmax s wide
 * over pw); returns the y after them. */
static double draw_trace(FILE *f, double y, int i, smoe_trace *t, const char *const *names,
                         int nl, double tmax, double pw)
{
    fprintf(f, "<text x=\"10\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n",
            y + 17, smoe_trace_name(t));
    y += HEAD_H;
    for (int l = 0; l < nl; l++) {
        int spans = 0, tid;
        double t0, t1;
        const char *nm;
        for (int64_t e = 0; smoe_trace_event(t, e, &tid, &t0, &t1, &nm) >= 0; e++) {
            if (tid != l || smoe_trace_event(t, e, &tid, &t0, &t1, &nm) != 0)
                continue;
            double x0 = LEFT + t0 / tmax * pw, w = fmax((t1 - t0) / tmax * pw, 1.0);
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                       "fill=\"%s\"/>\n", x0, y + 2, w, LANE_H - 4, lane_fill[l]);
            spans++;
        }
        fprintf(f, "<!-- lane %d %d x=%.0f y=%.0f w=%.0f h=%.0f spans=%d -->\n", i, l, LEFT, y,
                pw, LANE_H, spans);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n",
                LEFT - 8, y + 13, names[l]);
        y += LANE_H;
    }
    return y + GAP;
}

/* The time axis at y under the rows from top (tmax s over pw). */
static void draw_axis(FILE *f, double top, double y, double tmax, double pw)
{
    double st = plot_tick_step(tmax * 1e3);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n", LEFT, y,
            LEFT + pw, y);
    for (double v = 0; v <= tmax * 1e3 + 1e-9; v += st) {
        double x = LEFT + v / 1e3 / tmax * pw;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                x, top, x, y + 4, x, y + 16, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">time "
               "(ms)</text>\n</svg>\n", LEFT + pw / 2, y + 30);
}

smoe_status smoe_plot_svg(FILE *f, smoe_trace *const *traces, int n, const smoe_sim_point *curve,
                          int ncurve, const smoe_plot_mark *marks, int nmarks,
                          const smoe_plot_ranges *ranges, int nranges, smoe_err *err)
{
    int nl[64];
    const char *names[64][MAX_LANES];
    if (n > 64)
        n = 64;
    double tmax, h = 10 + (ncurve + nmarks > 0 ? PARETO_H : 0);
    h += measure_traces(traces, n, names, nl, &tmax);
    for (int k = 0; k < nranges; k++)
        h += plot_envelope_h(&ranges[k]);
    h += AXIS_H;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
               "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
            W, ceil(h), W, ceil(h), W, ceil(h));
    double y = 10;
    if (ncurve + nmarks > 0) {
        pareto(f, y, curve, ncurve, marks, nmarks);
        y += PARETO_H;
    }
    for (int k = 0; k < nranges; k++) {
        plot_envelope(f, y, k, &ranges[k]);
        y += plot_envelope_h(&ranges[k]);
    }
    const double pw = W - LEFT - RIGHT, top = y;
    for (int i = 0; i < n; i++)
        if (traces[i])
            y = draw_trace(f, y, i, traces[i], names[i], nl[i], tmax, pw);
    draw_axis(f, top, y, tmax, pw);
    if (ferror(f))
        return smoe_err_set(err, SMOE_EIO, "error writing the picture");
    return SMOE_OK;
}
