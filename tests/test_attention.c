/* Tests for the attention and cross-entropy kernels. Oracles:
 *
 *  - smoe_attention and smoe_attention_bwd against naive causal attention
 *    in double written here (forward o and p, and the backward from the
 *    kernel's p), at sizes that take every path of the backward: one
 *    position, several row blocks with a ragged last one, and rows longer
 *    than the stack tile (row by row in the caller's scratch). Errors are
 *    norm-wise (max|x - ref| / max|ref|); NULL outputs must be skipped with
 *    the others bit-identical, and the stride padding left alone.
 *
 *  - Both backwards (attention dq, dk, dv; cross-entropy dlogits) against
 *    central finite differences: fd_check in kernel_testlib.h, whose
 *    comment gives the scheme and the tolerance.
 *
 *  - Both kernels bit for bit against the full (s, s) products they skip
 *    the masked blocks of (tests/attention_full.h, the kernels as they
 *    were), at the tiny and the 512-wide model's attention shapes and at
 *    ragged ones, with prefilled gradients: the skipped work is exact
 *    zeros, so nothing else may move (attention.c says why and when).
 *
 * Cross-entropy is also checked against its value in double, in place, at
 * huge logits, and an out-of-range target must fire SMOE_ASSERT. The
 * random numbers come from a fixed-seed xorshift.
 */
#define _POSIX_C_SOURCE 200809L
#include "smoe/kernels.h"

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_full.h"
#include "check.h"
#include "kernel_testlib.h"

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

/* Bitwise comparisons with the full-block kernels only under OpenBLAS's
 * Haswell core (set in main). */
static int full_bitwise = 1;

/* smoe_attention / smoe_attention_bwd against the full-block kernels of
 * attention_full.h at tolerance 0: o, p and the accumulated dq, dk, dv. */
static void attn_vs_full(int64_t s, int64_t h, int64_t dk, int64_t dv, int64_t pad)
{
    const int64_t qs = h * dk + pad, ks = h * dk + pad, vs = h * dv + pad;
    float *q = fnew(s * qs), *k = fnew(s * ks), *v = fnew(s * vs);
    float *dout = fnew(s * h * dv);
    float *o[2], *p[2], *gq[2], *gk[2], *gv[2];
    fill(q, s * qs, 2.0f);
    fill(k, s * ks, 2.0f);
    fill(v, s * vs, 1.0f);
    fill(dout, s * h * dv, 1.0f);
    float *g0q = fnew(s * qs), *g0k = fnew(s * ks), *g0v = fnew(s * vs);
    fill(g0q, s * qs, 0.5f);
    fill(g0k, s * ks, 0.5f);
    fill(g0v, s * vs, 0.5f);
    const int64_t bs = 4096 / s < 2 ? 1 : 4096 / s;
    float *sc_full = fnew(s * bs), *sc = fnew(s);
    const float scale = 0.3f;
    for (int w = 0; w < 2; w++) {
        o[w] = fnew(s * h * dv);
        p[w] = fnew(h * s * s);
        fill(p[w], h * s * s, 5.0f); /* garbage to overwrite */
        gq[w] = fdup(g0q, s * qs);
        gk[w] = fdup(g0k, s * ks);
        gv[w] = fdup(g0v, s * vs);
    }
    attention_full(o[0], p[0], q, k, v, s, h, dk, dv, qs, ks, vs, scale);
    smoe_attention(o[1], p[1], q, k, v, s, h, dk, dv, qs, ks, vs, scale);
    attention_full_bwd(gq[0], gk[0], gv[0], dout, p[0], q, k, v, s, h, dk, dv, qs, ks, vs,
                       scale, sc_full);
    smoe_attention_bwd(gq[1], gk[1], gv[1], dout, p[0], q, k, v, s, h, dk, dv, qs, ks, vs,
                       scale, sc);
#define SAME(a, n)                                                                         \
    (full_bitwise ? memcmp(a[0], a[1], (size_t)(n) * sizeof(float)) == 0                       \
                  : rel_err(a[1], a[0], (n)) <= 1e-5)
    CHECKF(SAME(o, s * h * dv) && SAME(p, h * s * s),
           "attention s=%lld h=%lld dk=%lld dv=%lld: o, p bitwise the full products",
           (long long)s, (long long)h, (long long)dk, (long long)dv);
    CHECKF(SAME(gq, s * qs) && SAME(gk, s * ks) && SAME(gv, s * vs),
           "attention_bwd s=%lld h=%lld dk=%lld dv=%lld: dq %d dk %d dv %d bitwise the full "
           "products", (long long)s, (long long)h, (long long)dk, (long long)dv,
           SAME(gq, s * qs), SAME(gk, s * ks), SAME(gv, s * vs));
#undef SAME
    for (int w = 0; w < 2; w++) {
        float *mine[] = {o[w], p[w], gq[w], gk[w], gv[w]};
        for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
            smoe_free(mine[i]);
    }
    float *all[] = {q, k, v, dout, g0q, g0k, g0v, sc_full, sc};
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

    attn_vs_full(128, 4, 24, 16, 0); /* the tiny model's heads */
    attn_vs_full(256, 8, 96, 64, 0); /* the 512-wide model's */
    attn_vs_full(200, 3, 20, 12, 3); /* ragged blocks, padded strides */
    attn_vs_full(77, 2, 9, 5, 1);
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

/* The one-exp kernel against its naive twin (two double exps per element)
 * on random rows: whole chunks, a ragged last chunk, a single column, with
 * and without the z-loss, in place. The float exponential is within an ulp
 * of the double one, so the loss agrees to 1e-7 relative and each gradient
 * element to 1e-6 of the row's largest. */
static void ce_vs_ref(int64_t t, int64_t v, float z, float spread)
{
    float *lg = fnew(t * v), *d = fnew(t * v), *dr = fnew(t * v);
    int32_t *tg = malloc((size_t)t * sizeof *tg);
    fill(lg, t * v, spread);
    for (int64_t i = 0; i < t; i++)
        tg[i] = (int32_t)((i * 7919) % v);
    const float scale = 1.0f / (float)t;
    double zs = 0.0, zr = 0.0;
    double l = smoe_cross_entropy_z(d, lg, tg, t, v, scale, z, &zs);
    double lr = smoe_cross_entropy_z_ref(dr, lg, tg, t, v, scale, z, &zr);
    double worst = 0.0;
    for (int64_t i = 0; i < t; i++) {
        double mx = 0.0;
        for (int64_t j = 0; j < v; j++)
            mx = fmax(mx, fabs((double)dr[i * v + j]));
        for (int64_t j = 0; j < v; j++)
            worst = fmax(worst, fabs((double)d[i * v + j] - (double)dr[i * v + j]) / mx);
    }
    CHECKF(fabs(l - lr) <= 1e-7 * fabs(lr) && fabs(zs - zr) <= 1e-7 * fabs(zr),
           "cross-entropy (%lld x %lld, z %g): loss %.12g vs naive %.12g, z-loss %.12g vs %.12g",
           (long long)t, (long long)v, (double)z, l, lr, zs, zr);
    CHECKF(worst <= 1e-6, "cross-entropy (%lld x %lld, z %g): gradient %.3g of the row's "
           "largest from the naive twin", (long long)t, (long long)v, (double)z, worst);
    float *ip = fdup(lg, t * v);
    double li = smoe_cross_entropy_z(ip, ip, tg, t, v, scale, z, NULL);
    CHECKF(li == l && rel_err(ip, d, t * v) == 0.0, "cross-entropy (%lld x %lld) in place",
           (long long)t, (long long)v);
    printf("cross-entropy %4lld x %-5lld z %-6g loss %.9f (naive %.9f), gradient within "
           "%.2g of the row's largest\n", (long long)t, (long long)v, (double)z, l, lr, worst);
    smoe_free(lg);
    smoe_free(d);
    smoe_free(dr);
    smoe_free(ip);
    free(tg);
}

int main(int argc, char **argv)
{
    (void)argc;
    smoe_blas_select_core(argv);
    smoe_blas_info info;
    smoe_blas_init(1, &info);
    /* the bitwise rule of attention.c follows the element order of
     * OpenBLAS's Haswell sgemm kernels; other cores are compared within
     * rounding (the naive and finite-difference checks hold everywhere) */
    full_bitwise = strcmp(info.corename, "Haswell") == 0;
    if (!full_bitwise)
        printf("note: OpenBLAS core %s, not Haswell: the causal kernels are compared with the "
               "full products within 1e-5, not bitwise\n", info.corename);
    test_attention();
    test_cross_entropy();
    ce_vs_ref(64, 256, 0.0f, 3.0f);  /* the tiny model's vocabulary */
    ce_vs_ref(16, 300, 1e-3f, 8.0f); /* a ragged last chunk, the z-loss */
    ce_vs_ref(5, 1000, 0.0f, 30.0f); /* four chunks, peaked rows */
    ce_vs_ref(3, 1, 0.5f, 1.0f);     /* a single column */
    return check_report();
}
