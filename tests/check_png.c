/* Checks a rendered picture of `smoe sim --plot` (or `smoe train --plot`):
 * the PNG has the SVG's width and height, and inside every box the SVG
 * names in its comments ("<!-- lane T L x= y= w= h= spans=N -->" with N > 0,
 * "<!-- panel pareto x= y= w= h= -->", "<!-- panel envelope K x= y= w= h= ...")
 * some pixel differs from the white
 * background, grid and text (a coloured pixel). Every trace's lane 0 (compute) must have spans.
 * usage: check_png FILE.png FILE.svg        prints "N passed, N failed" */
#include "check.h"

#include <png.h>
#include <stdlib.h>

typedef struct img {
    int w, h;
    unsigned char *rgb; /* h x w x 3 */
} img;

static int load_png(const char *path, img *im)
{
    png_image p;
    memset(&p, 0, sizeof p);
    p.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&p, path)) {
        fprintf(stderr, "%s: %s\n", path, p.message);
        return -1;
    }
    p.format = PNG_FORMAT_RGB;
    im->w = (int)p.width;
    im->h = (int)p.height;
    im->rgb = malloc(PNG_IMAGE_SIZE(p));
    if (!im->rgb || !png_image_finish_read(&p, NULL, im->rgb, 0, NULL)) {
        fprintf(stderr, "%s: %s\n", path, p.message);
        png_image_free(&p);
        return -1;
    }
    return 0;
}

/* Coloured pixels in [x, x+w) x [y+1, y+h-1): the spans, curve and marks
 * are saturated colours; the background, grid lines and text are white,
 * grey or black and do not count. */
static long ink(const img *im, double x, double y, double w, double h)
{
    long n = 0;
    for (int r = (int)y + 1; r < (int)(y + h) - 1 && r < im->h; r++)
        for (int c = (int)x; c < (int)(x + w) && c < im->w; c++) {
            const unsigned char *p = im->rgb + 3 * ((size_t)r * (size_t)im->w + (size_t)c);
            int hi = p[0] > p[1] ? p[0] : p[1], lo = p[0] < p[1] ? p[0] : p[1];
            hi = hi > p[2] ? hi : p[2];
            lo = lo < p[2] ? lo : p[2];
            n += hi - lo > 40;
        }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: check_png FILE.png FILE.svg\n");
        return 2;
    }
    img im;
    CHECK(load_png(argv[1], &im) == 0);
    FILE *f = fopen(argv[2], "r");
    CHECK(f != NULL);
    if (check_fail_ || !f)
        return check_report();
    char line[4096];
    int width = -1, height = -1, lanes = 0, panels = 0, traces = 0, compute_ok = 1;
    while (fgets(line, sizeof line, f)) {
        const char *svg = strstr(line, "<svg ");
        if (svg && width < 0) {
            const char *w = strstr(svg, "width=\""), *h = strstr(svg, "height=\"");
            if (w)
                width = atoi(w + 7);
            if (h)
                height = atoi(h + 8);
        }
        int t, l, spans, k, rows, in, rep;
        double x, y, w, h;
        if (sscanf(line, "<!-- lane %d %d x=%lf y=%lf w=%lf h=%lf spans=%d", &t, &l, &x, &y, &w,
                   &h, &spans) == 7) {
            lanes++;
            if (l == 0) {
                traces++;
                compute_ok &= spans > 0;
            }
            if (spans > 0)
                CHECKF(ink(&im, x, y, w, h) > 0, "trace %d lane %d (%d spans) has no pixels", t, l,
                       spans);
        } else if (sscanf(line, "<!-- panel pareto x=%lf y=%lf w=%lf h=%lf", &x, &y, &w, &h) == 4) {
            panels++;
            /* inside the frame: the curve and the marks */
            CHECKF(ink(&im, x + 2, y + 1, w - 4, h - 2) > 0, "the Pareto panel is empty");
        } else if (sscanf(line, "<!-- panel envelope %d x=%lf y=%lf w=%lf h=%lf rows=%d inside=%d "
                                "reported=%d", &k, &x, &y, &w, &h, &rows, &in, &rep) == 8) {
            panels++;
            /* the rows' bars (and diamonds) */
            CHECKF(rows > 0 && ink(&im, x, y, w, h) > 0, "envelope panel %d (%d rows) is empty", k,
                   rows);
            CHECKF(in >= 0 && in <= rep && rep <= rows, "envelope panel %d: %d inside of %d "
                   "reported, %d rows", k, in, rep, rows);
        }
    }
    fclose(f);
    CHECKF(width == im.w && height == im.h, "PNG %dx%d, SVG %dx%d", im.w, im.h, width, height);
    CHECKF(lanes >= 4 && traces >= 1, "%d lanes in %d timelines", lanes, traces);
    CHECKF(compute_ok, "a timeline has no compute spans");
    printf("%d lanes in %d timelines, %d panels\n", lanes, traces, panels);
    free(im.rgb);
    return check_report();
}
