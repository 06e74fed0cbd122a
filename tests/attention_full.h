/* The causal attention kernels as smoe computed them before the causal
 * extent was skipped: every head's scores and both products over the full
 * (s, s) block, and the backward in blocks of bs = 4096 / s rows (one row
 * at a time above s = 2048). test_attention holds smoe_attention and
 * smoe_attention_bwd to these bit for bit at sequence lengths that fit in
 * one OpenBLAS K panel (see src/kernels/attention.c); the scratch here is
 * s * max(bs, 1) floats. */
#ifndef SMOE_TEST_ATTENTION_FULL_H
#define SMOE_TEST_ATTENTION_FULL_H

#include "smoe/kernels.h"

#include <math.h>

static void full_softmax_row(float *r, int64_t i, int64_t s)
{
    float mx = r[0];
    for (int64_t j = 1; j <= i; j++)
        mx = r[j] > mx ? r[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j <= i; j++) {
        r[j] = expf(r[j] - mx);
        sum += (double)r[j];
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j <= i; j++)
        r[j] *= inv;
    for (int64_t j = i + 1; j < s; j++)
        r[j] = 0.0f;
}

static void attention_full(float *o, float *p, const float *q, const float *k,
                           const float *v, int64_t s, int64_t h, int64_t dk,
                           int64_t dv, int64_t qs, int64_t ks, int64_t vs, float scale)
{
    for (int64_t hh = 0; hh < h; hh++) {
        float *ph = p + hh * s * s;
        smoe_gemm(0, 1, s, s, dk, scale, q + hh * dk, qs, k + hh * dk, ks, 0.0f, ph, s);
        for (int64_t i = 0; i < s; i++)
            full_softmax_row(ph + i * s, i, s);
        smoe_gemm(0, 0, s, dv, s, 1.0f, ph, s, v + hh * dv, vs, 0.0f, o + hh * dv, h * dv);
    }
}

static void full_ds_row(float *d, const float *pr, int64_t i, int64_t nc, float scale)
{
    double dsum = 0.0;
    for (int64_t j = 0; j <= i; j++)
        dsum += (double)pr[j] * (double)d[j];
    const float df = (float)dsum;
    for (int64_t j = 0; j <= i; j++)
        d[j] = pr[j] * (d[j] - df) * scale;
    for (int64_t j = i + 1; j < nc; j++)
        d[j] = 0.0f;
}

static void attention_full_bwd(float *dq, float *dk, float *dv, const float *dout,
                               const float *p, const float *q, const float *k,
                               const float *v, int64_t s, int64_t h, int64_t dk_,
                               int64_t dv_, int64_t qs, int64_t ks, int64_t vs,
                               float scale, float *ds)
{
    const int64_t os = h * dv_;
    int64_t bs = 4096 / s;
    if (bs < 2)
        bs = 1;
    for (int64_t hh = 0; hh < h; hh++) {
        const float *ph = p + hh * s * s;
        const float *qh = q + hh * dk_, *kh = k + hh * dk_, *vh = v + hh * dv_;
        const float *doh = dout + hh * dv_;
        smoe_gemm(1, 0, s, dv_, s, 1.0f, ph, s, doh, os, 1.0f, dv + hh * dv_, vs);
        for (int64_t i0 = 0; i0 < s; i0 += bs) {
            const int64_t nb = s - i0 < bs ? s - i0 : bs;
            const int64_t nc = i0 + nb;
            smoe_gemm(0, 1, nb, nc, dv_, 1.0f, doh + i0 * os, os, vh, vs, 0.0f, ds, nc);
            for (int64_t r = 0; r < nb; r++)
                full_ds_row(ds + r * nc, ph + (i0 + r) * s, i0 + r, nc, scale);
            smoe_gemm(0, 0, nb, dk_, nc, 1.0f, ds, nc, kh, ks, 1.0f,
                      dq + i0 * qs + hh * dk_, qs);
            smoe_gemm(1, 0, nc, dk_, nb, 1.0f, ds, nc, qh + i0 * qs, qs, 1.0f,
                      dk + hh * dk_, ks);
        }
    }
}

#endif
