/* Oracle for a device kernel table (cuda.h): every entry, on random inputs
 * of odd shapes (ragged against the kernels' blocks, strided rows, pointers
 * off the 16-byte grid, accumulating outputs pre-filled, aliased outputs
 * where kernels.h allows them), against the CPU table (backend.h) on host
 * copies of the same inputs.
 *   test_kops_dev cuda: smoe_kops_cuda() on device 0, within 1e-5 of the
 *     CPU (relative to the largest reference value; fp32, no TF32); the
 *     same calls twice give the same bits, and a repeated GEMM shape
 *     reuses its algorithm. Exit 77 (skip) without CUDA or a device.
 *   test_kops_dev (no argument): the same harness with the CPU table on
 *     the host emulation's memory, equal bit for bit: the harness itself
 *     (uploads, downloads, aliasing set-ups) checked where CI runs.
 * Then the bf16 mode's products (SMOE_KOPS_BF16_GEMM) of the CUDA table
 * (within 1e-5) or the emulated one (bit for bit) against the CPU's
 * bf16-input twins (smoe_kops_cpu_bf16).
 * A beta = 0 GEMM gets an output full of NaN: it must not read it. */
#include "kernel_testlib.h"

#include <stdlib.h>

#include "smoe/backend.h"
#include "smoe/cuda.h"
#include "smoe/dev.h"
#include "smoe/emul.h"

static smoe_dev dev;
static smoe_dev_stream *ds;
static smoe_kq *kq;
static const smoe_kops *D, *R; /* the table under test; the CPU reference */
static void *DQ;               /* its stream argument */
static double TOL;
static smoe_err err;

#define OK(call) CHECKF((call) == SMOE_OK, "%s: %s", #call, err.msg)

/* device copies, freed together by dfree_all */
static void *dbufs[64];
static int ndbufs;

static void *up(const void *h, size_t bytes)
{
    void *d = NULL;
    SMOE_ASSERT(ndbufs < 64);
    if (smoe_dev_alloc(&dev, bytes, &d, &err) != SMOE_OK ||
        smoe_dev_copy(&dev, d, h, bytes, ds, &err) != SMOE_OK) {
        fprintf(stderr, "device upload: %s\n", err.msg);
        exit(1);
    }
    /* uploads complete before the call under test: the CPU table on the
     * emulation's memory runs at once, not in the stream's order */
    if (smoe_dev_sync(&dev, 60.0, &err) != SMOE_OK) {
        fprintf(stderr, "device upload: %s\n", err.msg);
        exit(1);
    }
    return dbufs[ndbufs++] = d;
}

static float *upf(const float *h, int64_t n) { return up(h, (size_t)n * sizeof *h); }

/* run what is enqueued; the queue's first failure fails the check */
static void run(const char *what)
{
    CHECKF(smoe_dev_sync(&dev, 60.0, &err) == SMOE_OK, "%s: %s", what, err.msg);
    if (kq)
        CHECKF(smoe_kq_status(kq, &err) == SMOE_OK, "%s: %s", what, err.msg);
}

/* host copy of n floats at device d */
static float *down(const float *d, int64_t n)
{
    float *h = fnew(n);
    OK(smoe_dev_copy(&dev, h, d, (size_t)n * sizeof *h, ds, &err));
    run("download");
    return h;
}

static void dfree_all(void)
{
    for (int i = 0; i < ndbufs; i++)
        OK(smoe_dev_free(&dev, dbufs[i], &err));
    ndbufs = 0;
}

/* the device's n floats at d against the reference ref: within TOL */
static void same(const char *what, const float *d, const float *ref, int64_t n)
{
    float *h = down(d, n);
    double e = rel_err(h, ref, n);
    CHECKF(TOL == 0.0 ? memcmp(h, ref, (size_t)n * sizeof *h) == 0 : e <= TOL,
           "%s: relative error %.3g (tolerance %.3g)", what, e, TOL);
    free(h);
}

/* the same for the (rows, cols) block of row stride ld: a GEMM leaves the
 * columns past cols alone */
static void same_block(const char *what, const float *d, const float *ref, int64_t rows,
                       int64_t cols, int64_t ld)
{
    float *h = down(d, rows * ld), *a = fnew(rows * cols), *b = fnew(rows * cols);
    for (int64_t i = 0; i < rows; i++) {
        memcpy(a + i * cols, h + i * ld, (size_t)cols * sizeof *a);
        memcpy(b + i * cols, ref + i * ld, (size_t)cols * sizeof *b);
    }
    double e = rel_err(a, b, rows * cols);
    CHECKF(TOL == 0.0 ? memcmp(a, b, (size_t)(rows * cols) * sizeof *a) == 0 : e <= TOL,
           "%s: relative error %.3g (tolerance %.3g)", what, e, TOL);
    free(h), free(a), free(b);
}

static float *rnd(int64_t n, float amp)
{
    float *x = fnew(n);
    fill(x, n, amp);
    return x;
}

/* C = alpha op(A) op(B) + beta C, strided, A off the 16-byte grid when off */
static void case_gemm(int ta, int tb, float beta, int off)
{
    const int64_t m = 67, n = 45, k = 129;
    const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    const int64_t na = (ta ? k : m) * lda + off, nb = (tb ? n : k) * ldb, nc = m * ldc;
    float *a = rnd(na, 1.0f), *b = rnd(nb, 1.0f), *c = rnd(nc, 1.0f);
    float *cd = fdup(c, nc);
    if (beta == 0.0f)
        for (int64_t i = 0; i < nc; i++)
            cd[i] = NAN;
    float *da = upf(a, na), *db = upf(b, nb), *dc = upf(cd, nc);
    R->gemm(NULL, ta, tb, m, n, k, 0.7f, a + off, lda, b, ldb, beta, c, ldc);
    D->gemm(DQ, ta, tb, m, n, k, 0.7f, da + off, lda, db, ldb, beta, dc, ldc);
    run("gemm");
    char what[64];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d beta=%g off=%d", ta, tb, (double)beta, off);
    same_block(what, dc, c, m, n, ldc);
    free(a), free(b), free(c), free(cd);
    dfree_all();
}

static void case_matmul(void)
{
    const int64_t t = 33, k = 70, n = 41;
    float *x = rnd(t * k, 1.0f), *w = rnd(k * n, 0.5f), *y = rnd(t * n, 1.0f);
    float *dy = rnd(t * n, 1.0f), *dx = rnd(t * k, 1.0f), *dw = rnd(k * n, 1.0f);
    float *Dx = upf(x, t * k), *Dw = upf(w, k * n), *Dy = upf(y, t * n);
    float *Ddy = upf(dy, t * n), *Ddx = upf(dx, t * k), *Ddw = upf(dw, k * n);
    R->matmul(NULL, y, x, w, t, k, n, 1.0f);
    D->matmul(DQ, Dy, Dx, Dw, t, k, n, 1.0f);
    R->matmul_bwd(NULL, dx, dw, dy, x, w, t, k, n);
    D->matmul_bwd(DQ, Ddx, Ddw, Ddy, Dx, Dw, t, k, n);
    R->matmul_bwd(NULL, NULL, dw, dy, x, w, t, k, n);
    D->matmul_bwd(DQ, NULL, Ddw, Ddy, Dx, Dw, t, k, n);
    run("matmul");
    same("matmul beta=1", Dy, y, t * n);
    same("matmul_bwd dx", Ddx, dx, t * k);
    same("matmul_bwd dw (twice, once without dx)", Ddw, dw, k * n);
    free(x), free(w), free(y), free(dy), free(dx), free(dw);
    dfree_all();
}

static void case_rmsnorm(void)
{
    const int64_t t = 33, d = 300;
    float *x = rnd(t * d, 2.0f), *sc = rnd(d, 1.0f), *y = fnew(t * d), *rs = fnew(t);
    float *dy = rnd(t * d, 1.0f), *dx = rnd(t * d, 1.0f), *dsc = rnd(d, 1.0f);
    float *Dx = upf(x, t * d), *Dsc = upf(sc, d), *Dy = upf(y, t * d), *Drs = upf(rs, t);
    float *Ddy = upf(dy, t * d), *Ddx = upf(dx, t * d), *Ddsc = upf(dsc, d);
    R->rmsnorm(NULL, y, rs, x, sc, t, d, 1e-6f);
    D->rmsnorm(DQ, Dy, Drs, Dx, Dsc, t, d, 1e-6f);
    R->rmsnorm_bwd(NULL, dx, dsc, dy, x, sc, rs, t, d);
    D->rmsnorm_bwd(DQ, Ddx, Ddsc, Ddy, Dx, Dsc, Drs, t, d);
    run("rmsnorm");
    same("rmsnorm y", Dy, y, t * d);
    same("rmsnorm rstd", Drs, rs, t);
    same("rmsnorm_bwd dx", Ddx, dx, t * d);
    same("rmsnorm_bwd dscale", Ddsc, dsc, d);
    free(x), free(sc), free(y), free(rs), free(dy), free(dx), free(dsc);
    dfree_all();
}

/* SwiGLU with h aliasing s, its backward with db aliasing s; the sigmoid
 * at large |x| */
static void case_act(void)
{
    const int64_t n = 1000;
    float *a = rnd(n, 12.0f), *b = rnd(n, 1.0f), *s = fnew(n), *dh = rnd(n, 1.0f);
    float *h2 = fnew(n), *s2 = fnew(n), *da = fnew(n);
    a[0] = 100.0f, a[1] = -100.0f;
    float *Da = upf(a, n), *Db = upf(b, n), *Ds = upf(s, n), *Ddh = upf(dh, n);
    float *Dh2 = upf(h2, n), *Ds2 = upf(s2, n), *Dda = upf(da, n);
    R->swiglu_sig(NULL, h2, s2, a, b, n);
    D->swiglu_sig(DQ, Dh2, Ds2, Da, Db, n);
    R->swiglu_sig(NULL, s, s, a, b, n);
    D->swiglu_sig(DQ, Ds, Ds, Da, Db, n);
    run("swiglu_sig");
    same("swiglu_sig h", Dh2, h2, n);
    same("swiglu_sig s", Ds2, s2, n);
    same("swiglu_sig h aliasing s", Ds, s, n);
    R->swiglu_sig_bwd(NULL, da, s2, dh, a, b, s2, n);
    D->swiglu_sig_bwd(DQ, Dda, Ds2, Ddh, Da, Db, Ds2, n);
    R->sigmoid(NULL, h2, a, n);
    D->sigmoid(DQ, Dh2, Da, n);
    run("swiglu_sig_bwd");
    same("swiglu_sig_bwd da", Dda, da, n);
    same("swiglu_sig_bwd db aliasing s", Ds2, s2, n);
    same("sigmoid", Dh2, h2, n);
    free(a), free(b), free(s), free(dh), free(h2), free(s2), free(da);
    dfree_all();
}

static void case_softmax(void)
{
    const int64_t t = 7, n = 513;
    float *x = rnd(t * n, 8.0f), *dy = rnd(t * n, 1.0f), *dx = fnew(t * n);
    float *Dx = upf(x, t * n), *Ddy = upf(dy, t * n), *Ddx = upf(dx, t * n);
    R->softmax_rows(NULL, x, t, n);
    D->softmax_rows(DQ, Dx, t, n);
    R->softmax_rows_bwd(NULL, dx, dy, x, t, n);
    D->softmax_rows_bwd(DQ, Ddx, Ddy, Dx, t, n);
    R->softmax_rows_bwd(NULL, dy, dy, x, t, n);
    D->softmax_rows_bwd(DQ, Ddy, Ddy, Dx, t, n);
    run("softmax_rows");
    same("softmax_rows", Dx, x, t * n);
    same("softmax_rows_bwd", Ddx, dx, t * n);
    same("softmax_rows_bwd dx aliasing dy", Ddy, dy, t * n);
    free(x), free(dy), free(dx);
    dfree_all();
}

/* every head of a wider row (hstride > d), both pair layouts, a scale,
 * and the inverse */
static void case_rope(int halves, float scale, int inverse)
{
    const int64_t t = 9, h = 3, d = 8, hstride = d + 4, stride = h * hstride + 1, npos = 20;
    double inv[4];
    smoe_rope_cfg rc = { 0, 1.0, 10000.0, 1.0, 0, 0, 0, 0, 0 };
    smoe_rope_freqs(inv, d, &rc);
    float *cs = fnew(npos * d / 2), *sn = fnew(npos * d / 2), *x = rnd(t * stride, 1.0f);
    smoe_rope_table(cs, sn, npos, d, inv);
    int32_t pos[9] = { 0, 3, 19, 7, 7, 1, 12, 5, 18 };
    float *Dx = upf(x, t * stride), *Dcs = upf(cs, npos * d / 2), *Dsn = upf(sn, npos * d / 2);
    int32_t *Dpos = up(pos, sizeof pos);
    R->rope_apply_tab(NULL, x, pos, t, h, d, stride, hstride, cs, sn, npos, halves, scale,
                      inverse);
    D->rope_apply_tab(DQ, Dx, Dpos, t, h, d, stride, hstride, Dcs, Dsn, npos, halves, scale,
                      inverse);
    run("rope");
    char what[64];
    snprintf(what, sizeof what, "rope halves=%d scale=%g inverse=%d", halves, (double)scale,
             inverse);
    same(what, Dx, x, t * stride);
    free(cs), free(sn), free(x);
    dfree_all();
}

/* strided q, k, v (as slices of wider rows), the probabilities, and the
 * backward accumulating onto pre-filled gradients */
static void case_attention(int64_t s)
{
    const int64_t h = 2, dk = 16, dv = 12, qs = h * dk + 5, ks = h * dk + 3, vs = h * dv + 1;
    float *q = rnd(s * qs, 1.0f), *k = rnd(s * ks, 1.0f), *v = rnd(s * vs, 1.0f);
    float *o = fnew(s * h * dv), *p = fnew(h * s * s), *dout = rnd(s * h * dv, 1.0f);
    float *dq = rnd(s * qs, 1.0f), *dk_ = rnd(s * ks, 1.0f), *dv_ = rnd(s * vs, 1.0f);
    float *scr = fnew(s);
    float *Dq = upf(q, s * qs), *Dk = upf(k, s * ks), *Dv = upf(v, s * vs);
    float *Do = upf(o, s * h * dv), *Dp = upf(p, h * s * s), *Ddout = upf(dout, s * h * dv);
    float *Ddq = upf(dq, s * qs), *Ddk = upf(dk_, s * ks), *Ddv = upf(dv_, s * vs);
    float *Dscr = upf(scr, s);
    R->attention(NULL, o, p, q, k, v, s, h, dk, dv, qs, ks, vs, 0.25f);
    D->attention(DQ, Do, Dp, Dq, Dk, Dv, s, h, dk, dv, qs, ks, vs, 0.25f);
    R->attention_bwd(NULL, dq, dk_, dv_, dout, p, q, k, v, s, h, dk, dv, qs, ks, vs, 0.25f, scr);
    D->attention_bwd(DQ, Ddq, Ddk, Ddv, Ddout, Dp, Dq, Dk, Dv, s, h, dk, dv, qs, ks, vs, 0.25f,
                     Dscr);
    run("attention");
    same("attention o", Do, o, s * h * dv);
    same("attention p", Dp, p, h * s * s);
    same("attention_bwd dq", Ddq, dq, s * qs);
    same("attention_bwd dk", Ddk, dk_, s * ks);
    same("attention_bwd dv", Ddv, dv_, s * vs);
    free(q), free(k), free(v), free(o), free(p), free(dout), free(dq), free(dk_), free(dv_);
    free(scr);
    dfree_all();
}

/* the loss and z-sum (doubles on the device) with dlogits apart and
 * aliasing the logits */
static void case_loss(int alias)
{
    const int64_t t = 11, v = 1000;
    float *lg = rnd(t * v, 6.0f), *dl = fnew(t * v);
    int32_t tg[11];
    for (int i = 0; i < 11; i++)
        tg[i] = (int32_t)((i * 389 + 17) % v);
    double loss[2] = { 0, 0 }, hl[2];
    float *Dlg = upf(lg, t * v), *Ddl = alias ? Dlg : upf(dl, t * v);
    int32_t *Dtg = up(tg, sizeof tg);
    double *Dloss = up(loss, sizeof loss);
    R->cross_entropy_z(NULL, alias ? lg : dl, lg, tg, t, v, 1.0f / 11, 1e-4f, &loss[0], &loss[1]);
    D->cross_entropy_z(DQ, Ddl, Dlg, Dtg, t, v, 1.0f / 11, 1e-4f, &Dloss[0], &Dloss[1]);
    run("cross_entropy_z");
    OK(smoe_dev_copy(&dev, hl, Dloss, sizeof hl, ds, &err));
    run("cross_entropy_z");
    for (int i = 0; i < 2; i++) {
        double e = fabs(hl[i] - loss[i]) / fabs(loss[i]);
        CHECKF(TOL == 0.0 ? hl[i] == loss[i] : e <= TOL, "cross_entropy_z %s (alias %d): %.9g vs %.9g",
               i ? "zsum" : "loss", alias, hl[i], loss[i]);
    }
    same(alias ? "cross_entropy_z dlogits aliasing logits" : "cross_entropy_z dlogits", Ddl,
         alias ? lg : dl, t * v);
    free(lg), free(dl);
    dfree_all();
}

/* AdamW with and without clipping and decay; the vector helpers */
static void case_vec(void)
{
    const int64_t n = 10007;
    float *p = rnd(n, 1.0f), *m = rnd(n, 0.1f), *v = rnd(n, 0.1f), *g = rnd(n, 1.0f);
    for (int64_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    float *Dp = upf(p, n), *Dm = upf(m, n), *Dv = upf(v, n), *Dg = upf(g, n);
    for (int c = 0; c < 4; c++) {
        smoe_adamw_cfg ac = { 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, (c & 1) ? 0.1f : 0.0f,
                              c + 1, (c & 2) ? 3.0f : 0.0f, 1.0f };
        R->adamw_step(NULL, p, m, v, g, n, &ac);
        D->adamw_step(DQ, Dp, Dm, Dv, Dg, n, &ac);
    }
    float dot = 0, hdot = 0, *Ddot = upf(&dot, 1), *r = fnew(n), *Dr = upf(r, n);
    double sq = 0.0, hsq = -1.0, *Dsq = up(&sq, sizeof sq);
    R->vec_add(NULL, m, g, n);
    D->vec_add(DQ, Dm, Dg, n);
    R->vec_axpy(NULL, v, -0.3f, g, n);
    D->vec_axpy(DQ, Dv, -0.3f, Dg, n);
    R->vec_dot_scale(NULL, r, 0.5f, g, p, n, &dot);
    D->vec_dot_scale(DQ, Dr, 0.5f, Dg, Dp, n, Ddot);
    R->vec_sumsq(NULL, g, n, &sq);
    D->vec_sumsq(DQ, Dg, n, Dsq);
    run("adamw, vec");
    same("adamw_step p (4 steps: clip, decay)", Dp, p, n);
    same("adamw_step then vec_add m", Dm, m, n);
    same("adamw_step then vec_axpy v", Dv, v, n);
    same("vec_dot_scale r", Dr, r, n);
    OK(smoe_dev_copy(&dev, &hdot, Ddot, sizeof hdot, ds, &err));
    run("vec_dot_scale");
    CHECKF(TOL == 0.0 ? hdot == dot : fabs((double)hdot - dot) <= TOL * fabs((double)dot),
           "vec_dot_scale dot %.9g vs %.9g", (double)hdot, (double)dot);
    OK(smoe_dev_copy(&dev, &hsq, Dsq, sizeof hsq, ds, &err));
    run("vec_sumsq");
    CHECKF(TOL == 0.0 ? hsq == sq : fabs(hsq - sq) <= TOL * sq, "vec_sumsq %.17g vs %.17g", hsq,
           sq);
    free(p), free(m), free(v), free(g), free(r);
    dfree_all();
}

/* the bf16 wire, bit for bit whatever TOL: random values, exact ties
 * (both ways), subnormals, infinities and NaNs of both signs, and the
 * round trip back to fp32 */
static void case_wire(void)
{
    const int64_t n = 4099;
    float *x = rnd(n, 3.0f), *back = fnew(n);
    const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0xbf808000u, 0x00000001u,
                                 0x807fffffu, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                 0xffa00000u, 0x7f7fffffu, 0x00000000u, 0x80000000u };
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        memcpy(x + i, special + i, 4);
    uint16_t *h = malloc(sizeof *h * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    R->to_bf16(NULL, h, x, n);
    R->from_bf16(NULL, back, h, n);
    memset(got, 0xff, sizeof *got * (size_t)n); /* the outputs start as NaNs */
    float *poison = fnew(n);
    memset(poison, 0xff, sizeof *poison * (size_t)n);
    float *Dx = upf(x, n), *Dback = upf(poison, n);
    uint16_t *Dh = up(got, sizeof *got * (size_t)n);
    D->to_bf16(DQ, Dh, Dx, n);
    D->from_bf16(DQ, Dback, Dh, n);
    OK(smoe_dev_copy(&dev, got, Dh, sizeof *got * (size_t)n, ds, &err));
    float *hb = down(Dback, n);
    CHECKF(memcmp(got, h, sizeof *h * (size_t)n) == 0, "to_bf16 differs from dtype.h's");
    CHECKF(memcmp(hb, back, sizeof *back * (size_t)n) == 0, "from_bf16 differs from dtype.h's");
    free(x), free(back), free(h), free(got), free(hb), free(poison);
    dfree_all();
}

/* stamps in one stream's order read one clock that does not go back */
static void case_stamp(void)
{
    const int64_t n = 1 << 16;
    double h[3] = { -1, -1, -1 }, *Dt = up(h, sizeof h);
    float *x = rnd(n, 1.0f), *Dx = upf(x, n);
    D->stamp(DQ, Dt);
    D->vec_add(DQ, Dx, Dx, n);
    D->stamp(DQ, Dt + 1);
    D->stamp(DQ, Dt + 2);
    OK(smoe_dev_copy(&dev, h, Dt, sizeof h, ds, &err));
    run("stamp");
    CHECKF(h[0] > 0 && h[1] >= h[0] && h[2] >= h[1], "stamps %.9f %.9f %.9f", h[0], h[1], h[2]);
    free(x);
    dfree_all();
}

/* the embedding with repeated tokens; MLA's split and merge */
static void case_rows(void)
{
    const int64_t t = 300, d = 70, vocab = 9, h = 3, dn = 16, dr = 8, dv = 12;
    int32_t tok[300];
    for (int i = 0; i < 300; i++)
        tok[i] = (int32_t)((i * 7 + i / 5) % vocab);
    float *emb = rnd(vocab * d, 1.0f), *x = fnew(t * d), *dx = rnd(t * d, 1.0f);
    float *de = rnd(vocab * d, 1.0f);
    int32_t *Dtok = up(tok, sizeof tok);
    float *Demb = upf(emb, vocab * d), *Dx = upf(x, t * d), *Ddx = upf(dx, t * d);
    float *Dde = upf(de, vocab * d);
    R->embed_rows(NULL, x, emb, tok, t, d, vocab);
    D->embed_rows(DQ, Dx, Demb, Dtok, t, d, vocab);
    R->embed_rows_bwd(NULL, de, tok, dx, t, d, vocab);
    D->embed_rows_bwd(DQ, Dde, Dtok, Ddx, t, d, vocab);
    float *kv = rnd(t * h * (dn + dv), 1.0f), *kpe = rnd(t * dr, 1.0f);
    float *k = fnew(t * h * (dn + dr)), *v = fnew(t * h * dv);
    float *dkv = rnd(t * h * (dn + dv), 1.0f), *dkpe = rnd(t * dr, 1.0f);
    float *Dkv = upf(kv, t * h * (dn + dv)), *Dkpe = upf(kpe, t * dr);
    float *Dk = upf(k, t * h * (dn + dr)), *Dv = upf(v, t * h * dv);
    float *Ddkv = upf(dkv, t * h * (dn + dv)), *Ddkpe = upf(dkpe, t * dr);
    R->mla_kv_split(NULL, k, v, kv, kpe, t, h, dn, dr, dv);
    D->mla_kv_split(DQ, Dk, Dv, Dkv, Dkpe, t, h, dn, dr, dv);
    R->mla_kv_merge(NULL, dkv, dkpe, k, v, t, h, dn, dr, dv);
    D->mla_kv_merge(DQ, Ddkv, Ddkpe, Dk, Dv, t, h, dn, dr, dv);
    run("rows");
    /* copies and in-order sums: bitwise on every table */
    const double tol = TOL;
    TOL = 0.0;
    same("embed_rows", Dx, x, t * d);
    same("embed_rows_bwd (repeated tokens)", Dde, de, vocab * d);
    same("mla_kv_split k", Dk, k, t * h * (dn + dr));
    same("mla_kv_split v", Dv, v, t * h * dv);
    same("mla_kv_merge dkv", Ddkv, dkv, t * h * (dn + dv));
    same("mla_kv_merge dkpe", Ddkpe, dkpe, t * dr);
    TOL = tol;
    free(emb), free(x), free(dx), free(de), free(kv), free(kpe), free(k), free(v), free(dkv);
    free(dkpe);
    dfree_all();
}

/* the MoE rows: 600 pairs of 300 tokens, some dropped, rows in a shuffled
 * order; the copies and in-order sums bitwise, the dot products within TOL */
static void case_moe_rows(void)
{
    const int64_t t = 300, k = 2, d = 70, np = t * k;
    int64_t pos[600], n = 0;
    for (int64_t i = 0; i < np; i++)
        pos[i] = i % 7 == 3 ? -1 : 0;
    for (int64_t i = 0; i < np; i++)
        if (pos[i] == 0)
            pos[i] = n++;
    for (int64_t i = 0; i < np; i++) /* a permutation of the kept rows */
        if (pos[i] >= 0)
            pos[i] = (pos[i] * 37) % n;
    float *x = rnd(t * d, 1.0f), *wts = rnd(np, 1.0f), *er = rnd(n * d, 1.0f);
    float *r = fnew(n * d), *y = rnd(t * d, 1.0f), *der = fnew(n * d), *dwk = fnew(np);
    float *dx = rnd(t * d, 1.0f);
    int64_t *Dpos = up(pos, sizeof pos);
    float *Dx = upf(x, t * d), *Dw = upf(wts, np), *Der = upf(er, n * d), *Dr = upf(r, n * d);
    float *Dy = upf(y, t * d), *Dder = upf(der, n * d), *Ddwk = upf(dwk, np);
    float *Ddx = upf(dx, t * d);
    R->moe_dispatch_rows(NULL, r, x, pos, t, k, d);
    D->moe_dispatch_rows(DQ, Dr, Dx, Dpos, t, k, d);
    R->moe_combine_rows(NULL, y, er, pos, wts, t, k, d);
    D->moe_combine_rows(DQ, Dy, Der, Dpos, Dw, t, k, d);
    R->moe_combine_bwd(NULL, der, dwk, x, er, pos, wts, t, k, d);
    D->moe_combine_bwd(DQ, Dder, Ddwk, Dx, Der, Dpos, Dw, t, k, d);
    R->moe_dispatch_bwd(NULL, dx, er, pos, t, k, d);
    D->moe_dispatch_bwd(DQ, Ddx, Der, Dpos, t, k, d);
    run("moe rows");
    same("moe_combine_bwd dwk", Ddwk, dwk, np);
    const double tol = TOL;
    TOL = 0.0;
    same("moe_dispatch_rows", Dr, r, n * d);
    same("moe_combine_rows", Dy, y, t * d);
    same("moe_combine_bwd der", Dder, der, n * d);
    same("moe_dispatch_bwd", Ddx, dx, t * d);
    TOL = tol;
    free(x), free(wts), free(er), free(r), free(y), free(der), free(dwk), free(dx);
    dfree_all();
}

/* the table's memory: zeroed blocks; write, copy, fill0 and read move the
 * bytes they name, in the stream's order */
static void case_memory(void)
{
    const size_t n = 1000;
    float *a = D->alloc(DQ, n * sizeof *a), *b = D->alloc(DQ, n * sizeof *b);
    CHECK(a && b);
    float *h = rnd((int64_t)n, 1.0f), *back = fnew((int64_t)n);
    D->read(DQ, back, a, n * sizeof *a);
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        ok = ok && back[i] == 0.0f;
    CHECKF(ok, "alloc: a block is not zeroed");
    D->write(DQ, a, h, n * sizeof *h);
    D->copy(DQ, b + 100, a + 100, 500 * sizeof *a);
    D->fill0(DQ, a + 10, 20 * sizeof *a);
    D->read(DQ, back, b, n * sizeof *b);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok = ok && back[i] == (i >= 100 && i < 600 ? h[i] : 0.0f);
    CHECKF(ok, "write / copy / read: other bytes than named");
    D->read(DQ, back, a, n * sizeof *a);
    ok = 1;
    for (size_t i = 0; i < n; i++)
        ok = ok && back[i] == (i >= 10 && i < 30 ? 0.0f : h[i]);
    CHECKF(ok, "fill0 / read: other bytes than named");
    run("memory");
    D->free(DQ, a, n * sizeof *a);
    D->free(DQ, b, n * sizeof *b);
    free(h), free(back);
}

/* the same GEMM twice: the same bits, and the shape seen before adds no
 * algorithm */
static void case_repeat(void)
{
    const int64_t t = 40, k = 96, n = 72;
    float *x = rnd(t * k, 1.0f), *w = rnd(k * n, 1.0f);
    float *y0 = fnew(t * n);
    float *Dx = upf(x, t * k), *Dw = upf(w, k * n), *Dy1 = upf(y0, t * n), *Dy2 = upf(y0, t * n);
    D->matmul(DQ, Dy1, Dx, Dw, t, k, n, 0.0f);
    int plans = kq ? smoe_kq_gemm_plans(kq) : 0;
    D->matmul(DQ, Dy2, Dx, Dw, t, k, n, 0.0f);
    run("repeat");
    float *y1 = down(Dy1, t * n), *y2 = down(Dy2, t * n);
    CHECK(memcmp(y1, y2, (size_t)(t * n) * sizeof *y1) == 0);
    if (kq)
        CHECK_INT(smoe_kq_gemm_plans(kq), plans);
    free(x), free(w), free(y0), free(y1), free(y2);
    dfree_all();
}

static int open_side(int cuda)
{
    R = smoe_kops_cpu();
    if (!cuda) {
        OK(smoe_dev_host_open(SMOE_DEV_HOST_ADVERSARIAL, 7, &dev, &err));
        OK(smoe_dev_stream_new(&dev, 0, &ds, &err));
        D = R, DQ = NULL, TOL = 0.0;
        return 0;
    }
    if (smoe_dev_cuda_open(0, &dev, &err) != SMOE_OK) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    OK(smoe_dev_stream_new(&dev, 0, &ds, &err));
    OK(smoe_kq_cuda_new(&dev, ds, 0, 0, &kq, &err));
    D = smoe_kops_cuda(), DQ = kq, TOL = 1e-5;
    return 0;
}

/* The bf16 mode (SMOE_KOPS_BF16_GEMM): the products of a second queue on
 * the same stream against the CPU's bf16-input twins (smoe_kops_cpu_bf16),
 * the rest of the table being the fp32 one. */
static void bf16_mode(int cuda)
{
    smoe_kq *kq16 = NULL;
    smoe_eq *eq16 = NULL;
    if (cuda)
        OK(smoe_kq_cuda_new(&dev, ds, 0, SMOE_KOPS_BF16_GEMM, &kq16, &err));
    else
        OK(smoe_eq_new(&dev, ds, SMOE_KOPS_BF16_GEMM, &eq16, &err));
    smoe_kq *kq32 = kq;
    const smoe_kops *d32 = D;
    void *q32 = DQ;
    R = smoe_kops_cpu_bf16();
    D = cuda ? smoe_kops_cuda() : smoe_kops_emul();
    DQ = cuda ? (void *)kq16 : (void *)eq16;
    kq = kq16;
    for (int c = 0; c < 8; c++)
        case_gemm(c & 1, (c >> 1) & 1, (c & 4) ? 1.3f : 0.0f, c == 5);
    case_matmul();
    if (eq16)
        CHECKF(smoe_eq_status(eq16, &err) == SMOE_OK, "%s", err.msg);
    smoe_kq_free(kq16);
    smoe_eq_free(eq16);
    R = smoe_kops_cpu(), D = d32, DQ = q32, kq = kq32;
}

int main(int argc, char **argv)
{
    const int cuda = argc > 1 && strcmp(argv[1], "cuda") == 0;
    int rc = open_side(cuda);
    if (rc)
        return rc;
    printf("table %s on %s\n", D->name, smoe_dev_name(&dev));
    for (int c = 0; c < 8; c++)
        case_gemm(c & 1, (c >> 1) & 1, (c & 4) ? 1.3f : 0.0f, c == 5);
    case_matmul();
    case_rmsnorm();
    case_act();
    case_softmax();
    for (int c = 0; c < 8; c++)
        case_rope(c & 1, (c & 2) ? 0.5f : 1.0f, (c >> 2) & 1);
    case_attention(37);
    case_attention(300);
    case_loss(0);
    case_loss(1);
    case_vec();
    case_wire();
    case_stamp();
    case_rows();
    case_moe_rows();
    case_memory();
    case_repeat();
    bf16_mode(cuda);
    /* a kernel queue needs a CUDA device's stream */
    smoe_kq *bad = NULL;
    smoe_dev host;
    OK(smoe_dev_host_open(SMOE_DEV_HOST_THREADS, 1, &host, &err));
    CHECK(smoe_kq_cuda_new(&host, ds, 0, 0, &bad, &err) != SMOE_OK && bad == NULL);
    smoe_dev_close(&host);
    smoe_kq_free(kq);
    smoe_dev_stream_free(&dev, ds);
    smoe_dev_close(&dev);
    return check_report();
}
