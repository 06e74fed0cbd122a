/* Tests for the kernels module, except attention and cross-entropy (those
 * are in test_attention.c). Two kinds of oracle:
 *
 *  - BLAS kernels (smoe_gemm, smoe_matmul, smoe_matmul_bwd) against their
 *    naive _ref twins (double accumulators) on odd shapes, all transpose
 *    combinations, padded strides, alpha != 1, beta 0 and 1. The error is
 *    measured norm-wise: max|c - ref| / max|ref| <= 1e-5, and padding
 *    between rows must be left untouched.
 *
 *  - Every backward (matmul, RMSNorm, SwiGLU, softmax rows, RoPE) against
 *    central finite differences: fd_check in kernel_testlib.h, whose
 *    comment gives the scheme and the tolerance.
 *
 * Forward passes are also compared with naive double-precision versions
 * written here; AdamW against two steps worked by hand. Nothing depends on
 * OPENBLAS_CORETYPE, the thread count or the clock; the random numbers come
 * from a fixed-seed xorshift.
 */
#define _POSIX_C_SOURCE 200809L
#include "smoe/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernel_testlib.h"

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

/* The blocked kernels against their one-row naive twins, bit for bit
 * (memcmp): t covers blocks of 16 (for a kernel that runs 16 rows' chains
 * side by side) and of 4 rows and the ragged rest, d several widths; the
 * backward also with each output NULL. Then finite differences over 37
 * rows. */
static void rmsnorm_vs_ref(int64_t t, int64_t d)
{
    const float eps = 1e-5f;
    float *x = fnew(t * d), *scale = fnew(d), *dy = fnew(t * d);
    float *y[2] = {fnew(t * d), fnew(t * d)}, *rs[2] = {fnew(t), fnew(t)};
    float *dx[2] = {fnew(t * d), fnew(t * d)}, *ds[2] = {fnew(d), fnew(d)};
    fill(x, t * d, 2.0f);
    fill(dy, t * d, 1.0f);
    for (int64_t j = 0; j < d; j++)
        scale[j] = 1.0f + 0.5f * frand();
    smoe_rmsnorm(y[0], rs[0], x, scale, t, d, eps);
    smoe_rmsnorm_ref(y[1], rs[1], x, scale, t, d, eps);
    int same = !memcmp(y[0], y[1], sizeof(float) * (size_t)(t * d)) &&
               !memcmp(rs[0], rs[1], sizeof(float) * (size_t)t);
    for (int pass = 0; pass < 3; pass++) { /* both, dscale NULL, dx NULL */
        for (int k = 0; k < 2; k++) {
            memset(dx[k], 0, sizeof(float) * (size_t)(t * d));
            for (int64_t j = 0; j < d; j++)
                ds[k][j] = 0.25f;
        }
        float *dx0 = pass == 2 ? NULL : dx[0], *dx1 = pass == 2 ? NULL : dx[1];
        float *ds0 = pass == 1 ? NULL : ds[0], *ds1 = pass == 1 ? NULL : ds[1];
        smoe_rmsnorm_bwd(dx0, ds0, dy, x, scale, rs[0], t, d);
        smoe_rmsnorm_bwd_ref(dx1, ds1, dy, x, scale, rs[1], t, d);
        same = same && !memcmp(dx[0], dx[1], sizeof(float) * (size_t)(t * d)) &&
               !memcmp(ds[0], ds[1], sizeof(float) * (size_t)d);
    }
    CHECKF(same, "rmsnorm t=%lld d=%lld: kernels bitwise their naive twins",
           (long long)t, (long long)d);
    if (t == 37 && d == 9) {
        for (int64_t j = 0; j < d; j++)
            ds[0][j] = 0.0f;
        memset(dx[0], 0, sizeof(float) * (size_t)(t * d));
        smoe_rmsnorm_bwd(dx[0], ds[0], dy, x, scale, rs[0], t, d);
        norm_ctx c = {x, scale, y[1], rs[1], dy, t, d, eps};
        fd_check("rmsnorm dx (37 rows)", x, t * d, dx[0], norm_loss, &c);
        fd_check("rmsnorm dscale (37 rows)", scale, d, ds[0], norm_loss, &c);
    }
    float *all[] = {x, scale, dy, y[0], y[1], rs[0], rs[1], dx[0], dx[1], ds[0], ds[1]};
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

/* ---- SwiGLU with the sigmoid kept: against its naive twin ---- */

static double swiglu_sig_loss(void *p)
{
    act_ctx *c = p;
    smoe_swiglu_sig(c->h, c->h, c->a, c->b, c->n);
    return wsum(c->wt, c->h, c->n);
}

static void test_swiglu_sig(void)
{
    const int64_t n = 37;
    float *a = fnew(n + 3), *b = fnew(n), *h = fnew(n), *s = fnew(n + 3), *dh = fnew(n);
    float *h0 = fnew(n), *da = fnew(n), *db = fnew(n), *da0 = fnew(n), *db0 = fnew(n);
    fill(a, n + 3, 6.0f);
    fill(b, n, 1.0f);
    fill(dh, n, 1.0f);
    a[5] = -1e4f, a[6] = -100.0f, a[7] = 100.0f, a[8] = 1e4f, a[9] = 0.0f;
    smoe_swiglu_sig(h, s, a, b, n);
    smoe_swiglu(h0, a, b, n);
    CHECKF(memcmp(h, h0, (size_t)n * sizeof *h) == 0, "swiglu_sig == smoe_swiglu bitwise");
    int fin = 1;
    for (int64_t i = 0; i < n; i++)
        fin &= isfinite(h[i]) && isfinite(s[i]) && s[i] >= 0.0f && s[i] <= 1.0f;
    CHECKF(fin && h[5] == 0.0f && h[8] == 1e4f * b[8], "swiglu_sig finite at |a| = 1e4");
    float *s2 = fnew(n + 3), *h2 = fnew(n + 3);
    /* h may alias s */
    memcpy(h2, h, (size_t)n * sizeof *h);
    smoe_swiglu_sig(s2, s2, a, b, n);
    CHECKF(memcmp(s2, h2, (size_t)n * sizeof *h) == 0, "swiglu_sig with h aliasing s");

    smoe_swiglu_bwd(da0, db0, dh, a, b, n);
    smoe_swiglu_sig_bwd(da, db, dh, a, b, s, n);
    CHECKF(memcmp(da, da0, (size_t)n * sizeof *da) == 0 &&
               memcmp(db, db0, (size_t)n * sizeof *db) == 0,
           "swiglu_sig_bwd == smoe_swiglu_bwd bitwise");
    /* db may alias s */
    memcpy(s2, s, (size_t)n * sizeof *s);
    smoe_swiglu_sig_bwd(h2, s2, dh, a, b, s2, n);
    CHECKF(memcmp(h2, da, (size_t)n * sizeof *h) == 0 && memcmp(s2, db, (size_t)n * sizeof *h) == 0,
           "swiglu_sig_bwd with db aliasing s");

    /* the backward by finite differences (moderate a, away from the clamps) */
    fill(a, n, 4.0f);
    smoe_swiglu_sig(h, s, a, b, n);
    smoe_swiglu_sig_bwd(da, db, dh, a, b, s, n);
    act_ctx c = {a, b, h, dh, 1, n};
    fd_check("swiglu_sig da", a, n, da, swiglu_sig_loss, &c);
    fd_check("swiglu_sig db", b, n, db, swiglu_sig_loss, &c);

    float *all[] = {a, b, h, s, dh, h0, da, db, da0, db0, s2, h2};
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

/* ---- RoPE from tables: bitwise its naive twin smoe_rope_apply ---- */

typedef struct ropet_ctx {
    float *x, *y, *wt, *cs, *sn;
    const int32_t *pos;
    int64_t t, h, d, npos;
} ropet_ctx;

static double ropet_loss(void *p)
{
    ropet_ctx *c = p;
    int64_t n = c->t * c->h * c->d;
    memcpy(c->y, c->x, (size_t)n * sizeof(float));
    smoe_rope_apply_tab(c->y, c->pos, c->t, c->h, c->d, c->h * c->d, c->d, c->cs, c->sn,
                        c->npos, 1, 1.25f, 0);
    return wsum(c->wt, c->y, n);
}

static void test_rope_table(void)
{
    /* 3 heads of 8 rope dims, 10 floats apart, in rows of 37, offset 2 */
    const int64_t t = 5, h = 3, d = 8, hs = 10, stride = 37, off = 2, npos = 9;
    const int32_t pos[5] = {0, 1, 8, 3, 3};
    double inv[4];
    smoe_rope_cfg rc = { 0, 1.0, 10000.0, 1.0, 0, 0, 0, 0, 0 };
    smoe_rope_freqs(inv, d, &rc);
    float *cs = fnew(npos * d / 2), *sn = fnew(npos * d / 2);
    smoe_rope_table(cs, sn, npos, d, inv);
    const int64_t n = t * stride;
    float *x = fnew(n), *y = fnew(n), *z = fnew(n);
    fill(x, n, 1.0f);
    int same = 1;
    for (int halves = 0; halves < 2; halves++)
        for (int inverse = 0; inverse < 2; inverse++)
            for (int k = 0; k < 2; k++) {
                float scale = k ? 1.25f : 1.0f;
                memcpy(y, x, (size_t)n * sizeof *y);
                memcpy(z, x, (size_t)n * sizeof *z);
                smoe_rope_apply_tab(y + off, pos, t, h, d, stride, hs, cs, sn, npos, halves,
                                    scale, inverse);
                for (int64_t hi = 0; hi < h; hi++)
                    smoe_rope_apply(z + off + hi * hs, pos, t, 1, d, stride, inv, halves, scale,
                                    inverse);
                same &= memcmp(y, z, (size_t)n * sizeof *y) == 0;
            }
    CHECKF(same, "rope from tables == smoe_rope_apply bitwise (halves/interleaved, inverse, "
                 "scale, head stride, gaps untouched)");

    /* backward = the inverse rotation (times the scale): finite differences */
    const int64_t nc = t * h * d;
    float *xc = fnew(nc), *yc = fnew(nc), *w = fnew(nc), *g = fnew(nc);
    fill(xc, nc, 1.0f);
    fill(w, nc, 1.0f);
    memcpy(g, w, (size_t)nc * sizeof *g);
    smoe_rope_apply_tab(g, pos, t, h, d, h * d, d, cs, sn, npos, 1, 1.25f, 1);
    ropet_ctx c = {xc, yc, w, cs, sn, pos, t, h, d, npos};
    fd_check("rope from tables dx (inverse rotation)", xc, nc, g, ropet_loss, &c);

    float *all[] = {cs, sn, x, y, z, xc, yc, w, g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        smoe_free(all[i]);
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

    /* the combine's dot product against its naive twin: the scaled copy
     * bit for bit, the dot within 1e-14 of sum |d y| (four chains of
     * double products, which are exact: only the order of the adds differs),
     * and exactly on small integers */
    const int64_t ns[] = { 0, 1, 3, 4, 7, 128, 513 };
    for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
        const int64_t n = ns[c];
        float *d = fnew(n + 1), *w = fnew(n + 1), *r = fnew(n + 1), *rr = fnew(n + 1);
        fill(d, n, 2.0f);
        fill(w, n, 3.0f);
        double dot = smoe_vec_dot_scale(r, 0.7f, d, w, n);
        double ref = smoe_vec_dot_scale_ref(rr, 0.7f, d, w, n), mag = 0.0;
        for (int64_t j = 0; j < n; j++)
            mag += fabs((double)d[j] * (double)w[j]);
        CHECKF(fabs(dot - ref) <= 1e-14 * mag && (n == 0 || rel_err(r, rr, n) == 0.0),
               "vec_dot_scale n=%lld: %.17g vs naive %.17g", (long long)n, dot, ref);
        for (int64_t j = 0; j < n; j++)
            d[j] = (float)(j % 7) - 3.0f, w[j] = (float)(j % 5);
        CHECK(smoe_vec_dot_scale(r, 1.0f, d, w, n) == smoe_vec_dot_scale_ref(rr, 1.0f, d, w, n));
        smoe_free(d);
        smoe_free(w);
        smoe_free(r);
        smoe_free(rr);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    smoe_blas_select_core(argv);
    test_blas_info();
    test_gemm();
    test_matmul();
    test_rmsnorm();
    rmsnorm_vs_ref(37, 9);
    rmsnorm_vs_ref(37, 128);
    rmsnorm_vs_ref(48, 130);
    rmsnorm_vs_ref(3, 1);
    rmsnorm_vs_ref(16, 3);
    test_activations();
    test_swiglu_sig();
    test_rope();
    test_rope_table();
    test_adamw();
    test_vec();
    return check_report();
}
