/* Tests for the kernels module. Two kinds of oracle:
 *
 *  - BLAS kernels (smoe_gemm, smoe_matmul, smoe_matmul_bwd) against their
 *    naive _ref twins (double accumulators) on odd shapes, all transpose
 *    combinations, padded strides, alpha != 1, beta 0 and 1. The error is
 *    measured norm-wise: max|c - ref| / max|ref| <= 1e-5, and padding
 *    between rows must be left untouched.
 *
 *  - Every backward against central finite differences. Scheme: the kernels
 *    run in fp32, so the scalar loss L = sum_i w_i f_i(x) (random fixed
 *    weights w, i.e. upstream gradient dy = w) is accumulated in double over
 *    the fp32 outputs. Each input/parameter element is moved to fp32 values
 *    x+h and x-h with h = 1e-3, and the derivative is (L+ - L-) / (xp - xm)
 *    using the perturbations actually representable in fp32. Truncation
 *    error is O(h^2) ~ 1e-6; the fp32 rounding noise of L (~1e-7 per output,
 *    tens of outputs) divided by 2h is up to ~1e-4. So an element passes
 *    when |analytic - fd| <= 2e-3 * max(|analytic|, |fd|) + 2e-4 (observed
 *    worst over several seeds: half of that), and the gradient's max
 *    magnitude must exceed 0.05 so a vanishing gradient cannot pass
 *    vacuously. Sizes are small (tens to hundreds of elements).
 *
 * Forward passes are also compared with naive double-precision versions
 * written here. Nothing depends on OPENBLAS_CORETYPE, the thread count or
 * the clock; the random numbers come from a fixed-seed xorshift.
 */
#define _POSIX_C_SOURCE 200809L
#include "smoe/kernels.h"

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ---- helpers ---- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float frand(void) /* uniform in [-1, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *x, int64_t n, float amp)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = amp * frand();
}

static float *fnew(int64_t n)
{
    float *p = smoe_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    SMOE_ASSERT(p);
    return p;
}

static float *fdup(const float *x, int64_t n)
{
    float *p = fnew(n);
    memcpy(p, x, (size_t)n * sizeof *p);
    return p;
}

/* max|a - b| / max|b| (b the reference); 0 when both are all zero. */
static double rel_err(const float *a, const float *b, int64_t n)
{
    double md = 0.0, mb = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (fabs((double)b[i]) > mb)
            mb = fabs((double)b[i]);
    }
    return mb > 0.0 ? md / mb : md;
}

static double max_abs_diff(const float *a, const double *b, int64_t n)
{
    double md = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        md = (d > md || isnan(d)) ? (isnan(d) ? INFINITY : d) : md;
    }
    return md;
}

/* max|a - b| / max|b| with a double reference. */
static double rel_err_d(const float *a, const double *b, int64_t n)
{
    double mb = 0.0;
    for (int64_t i = 0; i < n; i++)
        mb = fmax(mb, fabs(b[i]));
    double md = max_abs_diff(a, b, n);
    return mb > 0.0 ? md / mb : md;
}

static double wsum(const float *w, const float *y, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (double)w[i] * (double)y[i];
    return s;
}

/* ---- finite differences ---- */

typedef double (*loss_fn)(void *ctx);

/* Compare the analytic gradient ga (n) of loss() w.r.t. the n floats at x
 * with central differences (scheme in the file comment). */
static void fd_check(const char *what, float *x, int64_t n, const float *ga,
                     loss_fn loss, void *ctx)
{
    const float h = 1e-3f;
    double worst = 0.0, gmax = 0.0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = x0 + h, xm = x0 - h;
        x[i] = xp;
        double lp = loss(ctx);
        x[i] = xm;
        double lm = loss(ctx);
        x[i] = x0;
        double fd = (lp - lm) / ((double)xp - (double)xm);
        double a = (double)ga[i];
        double tol = 2e-3 * fmax(fabs(a), fabs(fd)) + 2e-4;
        double excess = fabs(a - fd) / tol;
        if (excess > worst || isnan(excess)) {
            worst = isnan(excess) ? INFINITY : excess;
            worst_i = i;
        }
        gmax = fmax(gmax, fabs(a));
    }
    CHECKF(worst <= 1.0 && gmax > 0.05,
           "%s: worst element %lld at %.2fx tolerance (analytic %g), "
           "max |grad| %g",
           what, (long long)worst_i, worst,
           worst_i >= 0 ? (double)ga[worst_i] : 0.0, gmax);
}

/* ---- BLAS set-up ---- */

static void test_blas_info(void)
{
    smoe_blas_info info;
    memset(&info, 0, sizeof info);
    smoe_blas_init(1, &info);
    printf("OpenBLAS core: %s (%s), threads %d%s\n", info.corename,
           info.config, info.threads, info.fallback ? ", fallback core" : "");
    CHECK(info.corename[0] != 0);
    CHECK(info.config[0] != 0);
    CHECK_INT(info.threads, 1);
    CHECK(info.fallback == 0 || info.fallback == 1);
    smoe_blas_init(0, NULL); /* keeps the thread count, tolerates NULL */
    smoe_blas_init(0, &info);
    CHECK_INT(info.threads, 1);
}

/* ---- gemm against its twin ---- */

static void gemm_case(int64_t m, int64_t n, int64_t k, int ta, int tb,
                      float alpha, float beta, int pad)
{
    /* stored shapes: A (m,k) or (k,m); B (k,n) or (n,k); C (m,n) */
    int64_t ar = ta ? k : m, ac = ta ? m : k;
    int64_t br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = ac + pad, ldb = bc + 2 * pad, ldc = n + pad;
    float *a = fnew(ar * lda), *b = fnew(br * ldb), *c = fnew(m * ldc);
    fill(a, ar * lda, 1.0f);
    fill(b, br * ldb, 1.0f);
    fill(c, m * ldc, 1.0f);
    float *cr = fdup(c, m * ldc), *c0 = fdup(c, m * ldc);
    smoe_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    smoe_gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cr, ldc);
    double err = rel_err(c, cr, m * ldc);
    int pad_ok = 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++)
            pad_ok &= c[i * ldc + j] == c0[i * ldc + j];
    CHECKF(err <= 1e-5 && pad_ok,
           "gemm m=%lld n=%lld k=%lld ta=%d tb=%d beta=%g pad=%d: err %g%s",
           (long long)m, (long long)n, (long long)k, ta, tb, (double)beta, pad,
           err, pad_ok ? "" : ", padding written");
    smoe_free(a);
    smoe_free(b);
    smoe_free(c);
    smoe_free(cr);
    smoe_free(c0);
}

static void test_gemm(void)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1},   {3, 5, 7},  {17, 13, 9},
        {64, 33, 65}, {1, 40, 3}, {31, 1, 130},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int bi = 0; bi < 2; bi++)
                for (int pad = 0; pad <= 3; pad += 3)
                    gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], t & 1,
                              t >> 1, bi ? 0.75f : 1.0f, (float)bi, pad);

    /* k == 0: C = beta C; beta == 0 never reads C (NaN is overwritten) */
    float c[6] = {1, 2, 3, 4, 5, NAN}, a[1] = {0}, b[1] = {0};
    smoe_gemm(0, 0, 2, 3, 0, 1.0f, a, 1, b, 3, 2.0f, c, 3);
    CHECK(c[0] == 2.0f && c[4] == 10.0f);
    smoe_gemm(0, 0, 2, 3, 0, 1.0f, a, 1, b, 3, 0.0f, c, 3);
    CHECK(c[0] == 0.0f && c[5] == 0.0f);
    float x[4] = {1, 2, 3, 4}, y[4] = {NAN, NAN, NAN, NAN};
    smoe_gemm(0, 0, 2, 2, 2, 1.0f, x, 2, x, 2, 0.0f, y, 2);
    CHECK(y[0] == 7.0f && y[1] == 10.0f && y[2] == 15.0f && y[3] == 22.0f);
}

/* ---- matmul and its backward ---- */

typedef struct mm_ctx {
    float *x, *w, *y, *wt; /* x (t,k), w (k,n), y (t,n), loss weights (t,n) */
    int64_t t, k, n;
} mm_ctx;

static double mm_loss(void *p)
{
    mm_ctx *c = p;
    smoe_matmul(c->y, c->x, c->w, c->t, c->k, c->n, 0.0f);
    return wsum(c->wt, c->y, c->t * c->n);
}

static void test_matmul(void)
{
    const int64_t t = 7, k = 5, n = 6;
    float *x = fnew(t * k), *w = fnew(k * n), *y = fnew(t * n);
    float *dy = fnew(t * n);
    fill(x, t * k, 1.0f);
    fill(w, k * n, 1.0f);
    fill(dy, t * n, 1.0f);
    fill(y, t * n, 1.0f);
    float *yr = fdup(y, t * n);
    smoe_matmul(y, x, w, t, k, n, 1.0f);
    smoe_matmul_ref(yr, x, w, t, k, n, 1.0f);
    CHECKF(rel_err(y, yr, t * n) <= 1e-5, "matmul beta=1");
    smoe_matmul(y, x, w, t, k, n, 0.0f);
    smoe_matmul_ref(yr, x, w, t, k, n, 0.0f);
    CHECKF(rel_err(y, yr, t * n) <= 1e-5, "matmul beta=0");

    /* backward accumulates into prefilled dx, dw; compare with the twin */
    float *dx = fnew(t * k), *dw = fnew(k * n);
    fill(dx, t * k, 1.0f);
    fill(dw, k * n, 1.0f);
    float *dxr = fdup(dx, t * k), *dwr = fdup(dw, k * n);
    float *dx0 = fdup(dx, t * k), *dw0 = fdup(dw, k * n);
    smoe_matmul_bwd(dx, dw, dy, x, w, t, k, n);
    smoe_matmul_bwd_ref(dxr, dwr, dy, x, w, t, k, n);
    CHECKF(rel_err(dx, dxr, t * k) <= 1e-5, "matmul_bwd dx vs ref");
    CHECKF(rel_err(dw, dwr, k * n) <= 1e-5, "matmul_bwd dw vs ref");

    /* NULL outputs are skipped */
    float *dx1 = fdup(dx0, t * k), *dw1 = fdup(dw0, k * n);
    smoe_matmul_bwd(NULL, dw1, dy, x, w, t, k, n);
    smoe_matmul_bwd(dx1, NULL, dy, x, w, t, k, n);
    CHECKF(rel_err(dx1, dxr, t * k) <= 1e-5 && rel_err(dw1, dwr, k * n) <= 1e-5,
           "matmul_bwd with one NULL output");

    /* finite differences on the accumulated part (dx - dx0) */
    for (int64_t i = 0; i < t * k; i++)
        dx[i] -= dx0[i];
    for (int64_t i = 0; i < k * n; i++)
        dw[i] -= dw0[i];
    mm_ctx c = {x, w, y, dy, t, k, n};
    fd_check("matmul dx", x, t * k, dx, mm_loss, &c);
    fd_check("matmul dw", w, k * n, dw, mm_loss, &c);

    float *all[] = {x, w, y, dy, yr, dx, dw, dxr, dwr, dx0, dw0, dx1, dw1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
}

/* ---- RMSNorm ---- */

typedef struct norm_ctx {
    float *x, *scale, *y, *rstd, *wt;
    int64_t t, d;
    float eps;
} norm_ctx;

static double norm_loss(void *p)
{
    norm_ctx *c = p;
    smoe_rmsnorm(c->y, c->rstd, c->x, c->scale, c->t, c->d, c->eps);
    return wsum(c->wt, c->y, c->t * c->d);
}

static void test_rmsnorm(void)
{
    const int64_t t = 4, d = 9;
    const float eps = 1e-2f; /* large enough that "inside the sqrt" shows */
    float *x = fnew(t * d), *scale = fnew(d), *y = fnew(t * d), *rstd = fnew(t);
    float *dy = fnew(t * d), *dx = fnew(t * d), *ds = fnew(d);
    fill(x, t * d, 1.0f);
    for (int64_t j = 0; j < d; j++)
        scale[j] = 1.0f + 0.5f * frand();
    fill(dy, t * d, 1.0f);
    smoe_rmsnorm(y, rstd, x, scale, t, d, eps);

    double *yref = calloc((size_t)(t * d), sizeof *yref);
    double rerr = 0.0;
    for (int64_t i = 0; i < t; i++) {
        double ss = 0.0;
        for (int64_t j = 0; j < d; j++)
            ss += (double)x[i * d + j] * (double)x[i * d + j];
        double r = 1.0 / sqrt(ss / (double)d + (double)eps);
        rerr = fmax(rerr, fabs(r - (double)rstd[i]) / r);
        for (int64_t j = 0; j < d; j++)
            yref[i * d + j] = (double)x[i * d + j] * r * (double)scale[j];
    }
    CHECKF(max_abs_diff(y, yref, t * d) <= 1e-5 && rerr <= 1e-6,
           "rmsnorm forward vs double");
    free(yref);

    /* backward accumulates: prefill, then subtract */
    fill(dx, t * d, 1.0f);
    fill(ds, d, 1.0f);
    float *dx0 = fdup(dx, t * d), *ds0 = fdup(ds, d);
    smoe_rmsnorm_bwd(dx, ds, dy, x, scale, rstd, t, d);
    for (int64_t i = 0; i < t * d; i++)
        dx[i] -= dx0[i];
    for (int64_t j = 0; j < d; j++)
        ds[j] -= ds0[j];
    norm_ctx c = {x, scale, y, rstd, dy, t, d, eps};
    fd_check("rmsnorm dx", x, t * d, dx, norm_loss, &c);
    fd_check("rmsnorm dscale", scale, d, ds, norm_loss, &c);

    /* NULL dscale skips it and leaves dx identical */
    float *dx2 = fnew(t * d);
    norm_loss(&c);
    smoe_rmsnorm_bwd(dx2, NULL, dy, x, scale, rstd, t, d);
    CHECKF(rel_err(dx2, dx, t * d) <= 1e-5, "rmsnorm_bwd with dscale NULL");

    float *all[] = {x, scale, y, rstd, dy, dx, ds, dx0, ds0, dx2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
}

/* ---- activations ---- */

typedef struct act_ctx {
    float *a, *b, *h, *wt;
    int64_t t, n;
} act_ctx;

static double swiglu_loss(void *p)
{
    act_ctx *c = p;
    smoe_swiglu(c->h, c->a, c->b, c->n);
    return wsum(c->wt, c->h, c->n);
}

static double softmax_loss(void *p)
{
    act_ctx *c = p;
    memcpy(c->h, c->a, (size_t)(c->t * c->n) * sizeof(float));
    smoe_softmax_rows(c->h, c->t, c->n);
    return wsum(c->wt, c->h, c->t * c->n);
}

static void test_activations(void)
{
    const int64_t n = 24;
    float *a = fnew(n), *b = fnew(n), *h = fnew(n), *dh = fnew(n);
    float *da = fnew(n), *db = fnew(n);
    fill(a, n, 4.0f);
    fill(b, n, 1.0f);
    fill(dh, n, 1.0f);
    smoe_swiglu(h, a, b, n);
    double *href = calloc((size_t)n, sizeof *href);
    for (int64_t i = 0; i < n; i++)
        href[i] = (double)a[i] / (1.0 + exp(-(double)a[i])) * (double)b[i];
    CHECKF(max_abs_diff(h, href, n) <= 1e-5, "swiglu forward vs double");
    free(href);
    smoe_swiglu_bwd(da, db, dh, a, b, n);
    act_ctx c = {a, b, h, dh, 1, n};
    fd_check("swiglu da", a, n, da, swiglu_loss, &c);
    fd_check("swiglu db", b, n, db, swiglu_loss, &c);

    /* stability at large |a| */
    float big[4] = {-1e4f, -100.0f, 100.0f, 1e4f}, one[4] = {1, 1, 1, 1};
    float hb[4], sg[4], gd[4], gb[4];
    smoe_swiglu(hb, big, one, 4);
    smoe_sigmoid(sg, big, 4);
    smoe_swiglu_bwd(gd, gb, one, big, one, 4);
    CHECK(hb[0] == 0.0f && fabsf(hb[1]) < 1e-30f && hb[2] == 100.0f &&
          hb[3] == 1e4f);
    CHECK(sg[0] == 0.0f && sg[1] >= 0.0f && sg[1] < 1e-30f && sg[2] == 1.0f &&
          sg[3] == 1.0f);
    CHECK(gd[0] == 0.0f && isfinite(gd[1]) && gd[2] == 1.0f && gd[3] == 1.0f);

    float xs[5] = {-3.0f, -0.5f, 0.0f, 0.5f, 3.0f}, ys[5];
    smoe_sigmoid(ys, xs, 5);
    double serr = 0.0;
    for (int i = 0; i < 5; i++)
        serr = fmax(serr, fabs((double)ys[i] -
                               1.0 / (1.0 + exp(-(double)xs[i]))));
    CHECKF(serr <= 1e-7, "sigmoid vs double: %g", serr);

    /* softmax rows: forward vs double, stability, backward by FD */
    const int64_t t = 3, m = 7;
    float *x = fnew(t * m), *sy = fnew(t * m);
    float *dy = fnew(t * m), *dx = fnew(t * m);
    fill(x, t * m, 3.0f);
    fill(dy, t * m, 1.0f);
    memcpy(sy, x, (size_t)(t * m) * sizeof *sy);
    smoe_softmax_rows(sy, t, m);
    double *sref = calloc((size_t)(t * m), sizeof *sref);
    for (int64_t i = 0; i < t; i++) {
        double z = 0.0;
        for (int64_t j = 0; j < m; j++)
            z += exp((double)x[i * m + j]);
        for (int64_t j = 0; j < m; j++)
            sref[i * m + j] = exp((double)x[i * m + j]) / z;
    }
    CHECKF(max_abs_diff(sy, sref, t * m) <= 1e-6, "softmax forward vs double");
    free(sref);
    float hot[4] = {1e4f, 1e4f - 1.0f, -1e4f, 0.0f};
    smoe_softmax_rows(hot, 1, 4);
    CHECK(fabsf(hot[0] + hot[1] - 1.0f) < 1e-6f && hot[2] == 0.0f &&
          fabsf(hot[0] / hot[1] - expf(1.0f)) < 1e-4f);
    smoe_softmax_rows_bwd(dx, dy, sy, t, m);
    act_ctx sc = {x, NULL, sy, dy, t, m};
    fd_check("softmax rows dx", x, t * m, dx, softmax_loss, &sc);

    float *all[] = {a, b, h, dh, da, db, x, sy, dy, dx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
}

/* ---- RoPE ---- */

typedef struct rope_ctx {
    float *x, *y, *wt;
    const int32_t *pos;
    int64_t t, h, d, stride;
    float theta;
} rope_ctx;

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    int64_t n = c->t * c->stride;
    memcpy(c->y, c->x, (size_t)n * sizeof(float));
    smoe_rope(c->y, c->pos, c->t, c->h, c->d, c->stride, c->theta, 0);
    return wsum(c->wt, c->y, n);
}

static void test_rope(void)
{
    /* a rope slice of width h*d = 2*6 inside rows of 17 floats, offset 3 */
    const int64_t t = 4, h = 2, d = 6, stride = 17, off = 3;
    const float theta = 10000.0f;
    const int32_t pos[4] = {0, 1, 7, 1000};
    const int64_t n = t * stride;
    float *x = fnew(n), *y = fnew(n), *w = fnew(n), *g = fnew(n);
    fill(x, n, 1.0f);
    memcpy(y, x, (size_t)n * sizeof *y);
    smoe_rope(y + off, pos, t, h, d, stride, theta, 0);

    double *yref = calloc((size_t)n, sizeof *yref);
    int pad_ok = 1;
    for (int64_t i = 0; i < n; i++)
        yref[i] = (double)x[i];
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t hi = 0; hi < h; hi++)
            for (int64_t k = 0; k < d / 2; k++) {
                int64_t e = ti * stride + off + hi * d + 2 * k;
                double ang = pos[ti] * pow(theta, -2.0 * (double)k / (double)d);
                double x0 = x[e], x1 = x[e + 1];
                yref[e] = x0 * cos(ang) - x1 * sin(ang);
                yref[e + 1] = x0 * sin(ang) + x1 * cos(ang);
            }
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t j = 0; j < stride; j++)
            if (j < off || j >= off + h * d)
                pad_ok &= y[ti * stride + j] == x[ti * stride + j];
    CHECKF(max_abs_diff(y, yref, n) <= 2e-6 && pad_ok,
           "rope forward vs double (strided slice)");
    free(yref);

    /* the inverse undoes the rotation */
    float *z = fdup(y, n);
    smoe_rope(z + off, pos, t, h, d, stride, theta, 1);
    CHECKF(rel_err(z, x, n) <= 1e-6, "rope inverse round trip: %g",
           rel_err(z, x, n));

    /* backward = inverse rotation of the upstream gradient, checked by FD
     * on the contiguous layout */
    const int64_t sc = h * d, nc = t * sc;
    float *xc = fnew(nc), *yc = fnew(nc);
    fill(xc, nc, 1.0f);
    fill(w, nc, 1.0f);
    memcpy(g, w, (size_t)nc * sizeof *g);
    smoe_rope(g, pos, t, h, d, sc, theta, 1);
    rope_ctx c = {xc, yc, w, pos, t, h, d, sc, theta};
    fd_check("rope dx (inverse rotation)", xc, nc, g, rope_loss, &c);

    float *all[] = {x, y, w, g, z, xc, yc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
}

/* ---- attention ---- */

typedef struct attn_ctx {
    float *q, *k, *v, *o, *p, *wt;
    int64_t s, h, dk, dv, qs, ks, vs;
    float scale;
} attn_ctx;

static double attn_loss(void *ptr)
{
    attn_ctx *c = ptr;
    smoe_attention(c->o, c->p, c->q, c->k, c->v, c->s, c->h, c->dk, c->dv,
                   c->qs, c->ks, c->vs, c->scale);
    return wsum(c->wt, c->o, c->s * c->h * c->dv);
}

/* Naive causal attention in double: o (s,h,dv), p (h,s,s). */
static void attn_naive(double *o, double *p, const attn_ctx *c)
{
    for (int64_t hh = 0; hh < c->h; hh++)
        for (int64_t i = 0; i < c->s; i++) {
            double *pr = p + (hh * c->s + i) * c->s, mx = -INFINITY, z = 0.0;
            for (int64_t j = 0; j < c->s; j++) {
                double dot = 0.0;
                for (int64_t e = 0; e < c->dk; e++)
                    dot += (double)c->q[i * c->qs + hh * c->dk + e] *
                           (double)c->k[j * c->ks + hh * c->dk + e];
                pr[j] = j <= i ? dot * (double)c->scale : -INFINITY;
                mx = fmax(mx, pr[j]);
            }
            for (int64_t j = 0; j < c->s; j++)
                z += pr[j] = exp(pr[j] - mx);
            for (int64_t e = 0; e < c->dv; e++) {
                double acc = 0.0;
                for (int64_t j = 0; j < c->s; j++)
                    acc += pr[j] / z * (double)c->v[j * c->vs + hh * c->dv + e];
                o[(i * c->h + hh) * c->dv + e] = acc;
            }
            for (int64_t j = 0; j < c->s; j++)
                pr[j] /= z;
        }
}

/* Naive backward in double from the kernel's p: dq, dk, dv (layouts of
 * q, k, v) += gradients for dout = c->wt (s,h,dv). */
static void attn_bwd_naive(double *dq, double *dk, double *dv,
                           const attn_ctx *c)
{
    const int64_t s = c->s, h = c->h, dkn = c->dk, dvn = c->dv;
    double *ds = calloc((size_t)s, sizeof *ds);
    for (int64_t hh = 0; hh < h; hh++)
        for (int64_t i = 0; i < s; i++) {
            const float *pr = c->p + (hh * s + i) * s;
            const float *doi = c->wt + (i * h + hh) * dvn;
            double sum = 0.0;
            for (int64_t j = 0; j <= i; j++) {
                double dp = 0.0;
                for (int64_t e = 0; e < dvn; e++)
                    dp += (double)doi[e] *
                          (double)c->v[j * c->vs + hh * dvn + e];
                ds[j] = dp;
                sum += (double)pr[j] * dp;
            }
            for (int64_t j = 0; j <= i; j++) {
                double g = (double)pr[j] * (ds[j] - sum) * (double)c->scale;
                for (int64_t e = 0; e < dkn; e++) {
                    dq[i * c->qs + hh * dkn + e] +=
                        g * (double)c->k[j * c->ks + hh * dkn + e];
                    dk[j * c->ks + hh * dkn + e] +=
                        g * (double)c->q[i * c->qs + hh * dkn + e];
                }
                for (int64_t e = 0; e < dvn; e++)
                    dv[j * c->vs + hh * dvn + e] +=
                        (double)pr[j] * (double)doi[e];
            }
        }
    free(ds);
}

/* Forward and backward against the naive double versions at a size where
 * the backward works in several row blocks (s <= 2048, stack tile) or row
 * by row in the caller's scratch (s > 2048). */
static void attn_vs_naive(int64_t s, int64_t h, int64_t dk, int64_t dv)
{
    const int64_t qs = h * dk + 1, ks = h * dk + 2, vs = h * dv + 1;
    float *q = fnew(s * qs), *k = fnew(s * ks), *v = fnew(s * vs);
    float *o = fnew(s * h * dv), *p = fnew(h * s * s), *dout = fnew(s * h * dv);
    float *gq = fnew(s * qs), *gk = fnew(s * ks), *gv = fnew(s * vs);
    float *scratch = fnew(s);
    fill(q, s * qs, 2.0f);
    fill(k, s * ks, 2.0f);
    fill(v, s * vs, 1.0f);
    fill(dout, s * h * dv, 1.0f);
    const float scale = 0.7f;
    attn_ctx c = {q, k, v, o, p, dout, s, h, dk, dv, qs, ks, vs, scale};
    smoe_attention(o, p, q, k, v, s, h, dk, dv, qs, ks, vs, scale);
    double *oref = calloc((size_t)(s * h * dv), sizeof *oref);
    double *pref = calloc((size_t)(h * s * s), sizeof *pref);
    attn_naive(oref, pref, &c);
    double eo = rel_err_d(o, oref, s * h * dv);
    double ep = max_abs_diff(p, pref, h * s * s);
    free(oref);
    free(pref);

    smoe_attention_bwd(gq, gk, gv, dout, p, q, k, v, s, h, dk, dv, qs, ks, vs,
                       scale, scratch);
    double *rq = calloc((size_t)(s * qs), sizeof *rq);
    double *rk = calloc((size_t)(s * ks), sizeof *rk);
    double *rv = calloc((size_t)(s * vs), sizeof *rv);
    attn_bwd_naive(rq, rk, rv, &c);
    double eq = rel_err_d(gq, rq, s * qs), ek = rel_err_d(gk, rk, s * ks);
    double ev = rel_err_d(gv, rv, s * vs);
    CHECKF(eo <= 1e-5 && ep <= 1e-5, "attention s=%lld vs naive: o %g, p %g",
           (long long)s, eo, ep);
    CHECKF(eq <= 2e-5 && ek <= 2e-5 && ev <= 2e-5,
           "attention_bwd s=%lld vs naive: dq %g, dk %g, dv %g", (long long)s,
           eq, ek, ev);
    free(rq);
    free(rk);
    free(rv);

    /* NULL outputs are skipped; the others come out bit-identical */
    float *hq = fnew(s * qs), *hk = fnew(s * ks), *hv = fnew(s * vs);
    smoe_attention_bwd(hq, NULL, NULL, dout, p, q, k, v, s, h, dk, dv, qs, ks,
                       vs, scale, scratch);
    smoe_attention_bwd(NULL, hk, NULL, dout, p, q, k, v, s, h, dk, dv, qs, ks,
                       vs, scale, scratch);
    smoe_attention_bwd(NULL, NULL, hv, dout, p, q, k, v, s, h, dk, dv, qs, ks,
                       vs, scale, scratch);
    CHECKF(memcmp(hq, gq, (size_t)(s * qs) * sizeof *hq) == 0 &&
               memcmp(hk, gk, (size_t)(s * ks) * sizeof *hk) == 0 &&
               memcmp(hv, gv, (size_t)(s * vs) * sizeof *hv) == 0,
           "attention_bwd s=%lld with NULL outputs", (long long)s);
    smoe_free(hq);
    smoe_free(hk);
    smoe_free(hv);
    float *all[] = {q, k, v, o, p, dout, gq, gk, gv, scratch};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
}

static void test_attention(void)
{
    const int64_t s = 6, h = 2, dk = 4, dv = 3;
    const int64_t qs = h * dk + 3, ks = h * dk + 1, vs = h * dv + 2;
    const float scale = 0.5f;
    float *q = fnew(s * qs), *k = fnew(s * ks), *v = fnew(s * vs);
    float *o = fnew(s * h * dv), *p = fnew(h * s * s), *dout = fnew(s * h * dv);
    float *dq = fnew(s * qs), *dk_ = fnew(s * ks), *dv_ = fnew(s * vs);
    float *scratch = fnew(s);
    fill(q, s * qs, 1.5f);
    fill(k, s * ks, 1.5f);
    fill(v, s * vs, 1.0f);
    fill(dout, s * h * dv, 1.0f);
    fill(p, h * s * s, 7.0f); /* garbage that the forward must overwrite */
    attn_ctx c = {q, k, v, o, p, dout, s, h, dk, dv, qs, ks, vs, scale};
    attn_loss(&c);

    double *oref = calloc((size_t)(s * h * dv), sizeof *oref);
    double *pref = calloc((size_t)(h * s * s), sizeof *pref);
    attn_naive(oref, pref, &c);
    CHECKF(max_abs_diff(o, oref, s * h * dv) <= 1e-5, "attention o vs double");
    CHECKF(max_abs_diff(p, pref, h * s * s) <= 1e-6, "attention p vs double");
    int upper_zero = 1;
    for (int64_t hh = 0; hh < h; hh++)
        for (int64_t i = 0; i < s; i++)
            for (int64_t j = i + 1; j < s; j++)
                upper_zero &= p[(hh * s + i) * s + j] == 0.0f;
    CHECK(upper_zero);
    free(oref);
    free(pref);

    /* backward accumulates into prefilled grads; padding is left alone */
    fill(dq, s * qs, 1.0f);
    fill(dk_, s * ks, 1.0f);
    fill(dv_, s * vs, 1.0f);
    float *dq0 = fdup(dq, s * qs), *dk0 = fdup(dk_, s * ks);
    float *dv0 = fdup(dv_, s * vs);
    smoe_attention_bwd(dq, dk_, dv_, dout, p, q, k, v, s, h, dk, dv, qs, ks,
                       vs, scale, scratch);
    int pad_ok = 1;
    for (int64_t i = 0; i < s; i++) {
        for (int64_t j = h * dk; j < qs; j++)
            pad_ok &= dq[i * qs + j] == dq0[i * qs + j];
        for (int64_t j = h * dk; j < ks; j++)
            pad_ok &= dk_[i * ks + j] == dk0[i * ks + j];
        for (int64_t j = h * dv; j < vs; j++)
            pad_ok &= dv_[i * vs + j] == dv0[i * vs + j];
    }
    CHECKF(pad_ok, "attention_bwd left the stride padding alone");
    for (int64_t i = 0; i < s * qs; i++)
        dq[i] -= dq0[i];
    for (int64_t i = 0; i < s * ks; i++)
        dk_[i] -= dk0[i];
    for (int64_t i = 0; i < s * vs; i++)
        dv_[i] -= dv0[i];
    fd_check("attention dq", q, s * qs, dq, attn_loss, &c);
    fd_check("attention dk", k, s * ks, dk_, attn_loss, &c);
    fd_check("attention dv", v, s * vs, dv_, attn_loss, &c);

    float *all[] = {q, k, v, o, p, dout, dq, dk_, dv_, scratch, dq0, dk0, dv0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);

    attn_vs_naive(1, 3, 4, 2);    /* a single position */
    attn_vs_naive(300, 2, 5, 3);  /* 13-row blocks, ragged last block */
    attn_vs_naive(2100, 1, 3, 2); /* row by row in the caller's scratch */
}

/* ---- cross-entropy ---- */

typedef struct ce_ctx {
    float *logits;
    const int32_t *tg;
    int64_t t, v;
    float scale;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    return (double)c->scale *
           smoe_cross_entropy(NULL, c->logits, c->tg, c->t, c->v, c->scale);
}

static jmp_buf g_abort_jmp;
static void abort_to_test(const char *msg)
{
    (void)msg;
    longjmp(g_abort_jmp, 1);
}

static void test_cross_entropy(void)
{
    const int64_t t = 3, v = 8;
    const int32_t tg[3] = {0, 5, 7};
    const float scale = 1.0f / 3.0f;
    float *lg = fnew(t * v), *dl = fnew(t * v);
    fill(lg, t * v, 3.0f);
    double loss = smoe_cross_entropy(dl, lg, tg, t, v, scale);
    double ref = 0.0;
    for (int64_t i = 0; i < t; i++) {
        double z = 0.0;
        for (int64_t j = 0; j < v; j++)
            z += exp((double)lg[i * v + j]);
        ref += log(z) - (double)lg[i * v + tg[i]];
    }
    CHECKF(fabs(loss - ref) <= 1e-6 * fabs(ref), "cross-entropy %g vs %g",
           loss, ref);
    ce_ctx c = {lg, tg, t, v, scale};
    fd_check("cross-entropy dlogits", lg, t * v, dl, ce_loss, &c);

    /* in place, and stable at huge logits */
    float *inplace = fdup(lg, t * v);
    double l2 = smoe_cross_entropy(inplace, inplace, tg, t, v, scale);
    CHECKF(l2 == loss && rel_err(inplace, dl, t * v) == 0.0,
           "cross-entropy in place");
    float hot[3] = {1e4f, 0.0f, -1e4f};
    int32_t one = 0, two = 2;
    float dh[3];
    CHECK(smoe_cross_entropy(dh, hot, &one, 1, 3, 1.0f) == 0.0 &&
          dh[0] == 0.0f && dh[1] == 0.0f);
    CHECK(fabs(smoe_cross_entropy(NULL, hot, &two, 1, 3, 1.0f) - 2e4) < 1e-6);

    /* an out-of-range target is a caller bug: SMOE_ASSERT fires */
    int32_t bad = (int32_t)v;
    volatile int fired = 0;
    smoe_abort_fn old = smoe_set_abort_hook(abort_to_test);
    if (setjmp(g_abort_jmp) == 0)
        smoe_cross_entropy(NULL, lg, &bad, 1, v, 1.0f);
    else
        fired = 1;
    smoe_set_abort_hook(old);
    CHECK(fired);

    smoe_free(lg);
    smoe_free(dl);
    smoe_free(inplace);
}

/* ---- AdamW: two steps worked by hand ----
 * lr 0.01, b1 0.9, b2 0.999, eps 1e-8, wd 0.1; p = (1, -0.5);
 * g1 = (0.1, -0.2), g2 = (0.3, 0.1).
 * Step 1: m = 0.1 g1 = (0.01, -0.02), v = 0.001 g1^2 = (1e-5, 4e-5); the
 *   corrections give mhat = g1, vhat = g1^2, so mhat/(sqrt(vhat)+eps) =
 *   (+1, -1) up to 1e-7: p = (1 - 0.01 (1 + 0.1), -0.5 - 0.01 (-1 - 0.05))
 *   = (0.989, -0.4895).
 * Step 2 (element 0): m = 0.009 + 0.03 = 0.039, mhat = 0.039 / 0.19 =
 *   0.2052632; v = 0.999e-5 + 9e-5 = 9.999e-5, vhat = 9.999e-5 / 0.001999 =
 *   0.0500200; sqrt = 0.2236515, ratio 0.9177751; p = 0.989 - 0.01 (0.9177751
 *   + 0.0989) = 0.9788332. Element 1: m = -0.018 + 0.01 = -0.008, mhat =
 *   -0.0421053; v = 3.996e-5 + 1e-5 = 4.996e-5, vhat = 0.0249925, sqrt
 *   0.1580901, ratio -0.2663374; p = -0.4895 - 0.01 (-0.2663374 - 0.04895)
 *   = -0.4863471. */
static void test_adamw(void)
{
    float p[2] = {1.0f, -0.5f}, m[2] = {0, 0}, v[2] = {0, 0};
    const float g1[2] = {0.1f, -0.2f}, g2[2] = {0.3f, 0.1f};
    smoe_adamw(p, m, v, g1, 2, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 1);
    CHECKF(fabsf(p[0] - 0.989f) < 1e-6f && fabsf(p[1] + 0.4895f) < 1e-6f,
           "adamw step 1: %.7f %.7f", (double)p[0], (double)p[1]);
    /* moments to fp32 accuracy (1 - 0.999f is only good to ~1e-5) */
    CHECKF(fabsf(m[0] - 0.01f) < 1e-7f && fabsf(v[1] - 4e-5f) < 4e-5f * 2e-5f,
           "adamw step 1 moments: %g %g", (double)m[0], (double)v[1]);
    smoe_adamw(p, m, v, g2, 2, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 2);
    CHECKF(fabsf(p[0] - 0.9788332f) < 1e-6f && fabsf(p[1] + 0.4863471f) < 1e-6f,
           "adamw step 2: %.7f %.7f", (double)p[0], (double)p[1]);
    CHECKF(fabsf(m[0] - 0.039f) < 4e-7f &&
               fabsf(v[0] - 9.999e-5f) < 9.999e-5f * 2e-5f,
           "adamw step 2 moments: %g %g", (double)m[0], (double)v[0]);
}

static void test_vec(void)
{
    float y[3] = {1, 2, 3};
    const float x[3] = {1, -1, 0.5f};
    smoe_vec_add(y, x, 3);
    CHECK(y[0] == 2.0f && y[1] == 1.0f && y[2] == 3.5f);
    smoe_vec_axpy(y, 2.0f, x, 3);
    CHECK(y[0] == 4.0f && y[1] == -1.0f && y[2] == 4.5f);
    smoe_vec_scale(y, 0.5f, 3);
    CHECK(y[0] == 2.0f && y[1] == -0.5f && y[2] == 2.25f);
}

int main(int argc, char **argv)
{
    (void)argc;
    smoe_blas_select_core(argv);
    test_blas_info();
    test_gemm();
    test_matmul();
    test_rmsnorm();
    test_activations();
    test_rope();
    test_attention();
    test_cross_entropy();
    test_adamw();
    test_vec();
    return check_report();
}
