/* Causal scaled-dot-product attention for one sequence, forward and
 * backward, head by head. Element (position i, head hh, dim j) of q is at
 * q[i*qs + hh*dk + j] (likewise k with ks, v with vs and dv), so q/k/v may
 * be column slices of a wider fused projection; o is contiguous (s, h, dv).
 *
 * Forward, per head: S = scale * Q K^T (one smoe_gemm over strided Q, K,
 * written straight into p's (s, s) block), then a causal softmax per row
 * (position i sees j <= i; the upper triangle is set to 0), then O = P V
 * (a second smoe_gemm; the zeros make the full product exact).
 *
 * Backward, per head: dV += P^T dO (smoe_gemm), then blocks of bs rows
 * i0 .. i0+nb-1, which see columns 0 .. nc-1 (nc = i0 + nb):
 *   dP = dO_blk V[0..nc)^T                          (smoe_gemm, (nb, nc))
 *   dS_ij = P_ij (dP_ij - sum_l P_il dP_il) * scale  (0 above the diagonal)
 *   dQ_blk += dS K[0..nc),   dK[0..nc) += dS^T Q_blk (two smoe_gemm)
 * dS of a block lives in a 16 KiB stack tile (bs = 4096 / s rows, so 16
 * rows at s = 256); for s > 2048 it falls back to one row at a time in the
 * caller's s-float scratch. At s = 256, h = 16, dk = 192, dv = 128 on one
 * core the backward costs about 1.2x the forward.
 */
#include "smoe/kernels.h"

#include <math.h>

enum { ATTN_TILE = 4096 }; /* floats of dS kept on the stack (16 KiB) */

static void check_layout(int64_t s, int64_t h, int64_t dk, int64_t dv,
                         int64_t qs, int64_t ks, int64_t vs)
{
    SMOE_ASSERT(s >= 0 && h >= 0 && dk >= 0 && dv >= 0);
    SMOE_ASSERT(s <= 1 || (qs >= h * dk && ks >= h * dk && vs >= h * dv));
}

/* Causal softmax of row i of a head's score block (length s): entries
 * j <= i are normalised, entries j > i are zeroed. */
static void causal_softmax_row(float *r, int64_t i, int64_t s)
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

/* o (s,h,dv) contiguous, overwritten; p (h,s,s) overwritten with the
 * probabilities (row i of head hh at p[(hh*s + i)*s], zero above the
 * diagonal). q, k, v as in the file comment. Thread-safe; OpenBLAS may use
 * its own threads inside the two products. */
void smoe_attention(float *o, float *p, const float *q, const float *k,
                    const float *v, int64_t s, int64_t h, int64_t dk,
                    int64_t dv, int64_t qs, int64_t ks, int64_t vs,
                    float scale)
{
    check_layout(s, h, dk, dv, qs, ks, vs);
    if (s == 0 || h == 0)
        return;
    if (s == 1) /* a single position: any stride is valid, give BLAS one */
        qs = h * dk, ks = h * dk, vs = h * dv;
    for (int64_t hh = 0; hh < h; hh++) {
        float *ph = p + hh * s * s;
        /* S (s,s) = scale * Q_h (s,dk) @ K_h^T */
        smoe_gemm(0, 1, s, s, dk, scale, q + hh * dk, qs, k + hh * dk, ks,
                  0.0f, ph, s);
        for (int64_t i = 0; i < s; i++)
            causal_softmax_row(ph + i * s, i, s);
        /* O_h (s,dv) = P (s,s) @ V_h (s,dv), rows of o strided by h*dv */
        smoe_gemm(0, 0, s, dv, s, 1.0f, ph, s, v + hh * dv, vs, 0.0f,
                  o + hh * dv, h * dv);
    }
}

/* One row i of dS * scale from dP (in place, length nc > i) and the
 * probabilities pr: dS_ij = P_ij (dP_ij - sum_l P_il dP_il) for j <= i,
 * 0 for i < j < nc (masked positions carry no gradient). */
static void ds_row(float *d, const float *pr, int64_t i, int64_t nc,
                   float scale)
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

/* Accumulates: dq, dk, dv (layouts and strides of q, k, v) += gradients of
 * the loss given dout (s,h,dv) contiguous and the forward's p (h,s,s).
 * Any of dq, dk, dv may be NULL to skip it. scratch (s floats) is
 * caller-owned working space (used only when s > 2048). Outputs must not
 * alias inputs. Thread-safe (uses 16 KiB of stack). */
void smoe_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                        const float *p, const float *q, const float *k,
                        const float *v, int64_t s, int64_t h, int64_t dk_,
                        int64_t dv_, int64_t qs, int64_t ks, int64_t vs,
                        float scale, float *scratch)
{
    check_layout(s, h, dk_, dv_, qs, ks, vs);
    if (s == 0 || h == 0)
        return;
    if (s == 1)
        qs = h * dk_, ks = h * dk_, vs = h * dv_;
    const int64_t os = h * dv_; /* row stride of dout */
    /* dS for a block of bs rows: on the stack for s <= ATTN_TILE/2, else
     * one row at a time in the caller's scratch */
    float tile[ATTN_TILE];
    float *ds = tile;
    int64_t bs = ATTN_TILE / s;
    if (bs < 2) {
        ds = scratch;
        bs = 1;
    }
    for (int64_t hh = 0; hh < h; hh++) {
        const float *ph = p + hh * s * s;
        const float *qh = q + hh * dk_, *kh = k + hh * dk_, *vh = v + hh * dv_;
        const float *doh = dout + hh * dv_;
        /* dV_h (s,dv) += P^T (s,s) @ dO_h (s,dv) */
        if (dv)
            smoe_gemm(1, 0, s, dv_, s, 1.0f, ph, s, doh, os, 1.0f,
                      dv + hh * dv_, vs);
        if (!dq && !dk)
            continue;
        for (int64_t i0 = 0; i0 < s; i0 += bs) {
            const int64_t nb = s - i0 < bs ? s - i0 : bs;
            const int64_t nc = i0 + nb; /* rows i0.. see columns 0..nc-1 */
            /* dP (nb,nc) = dO[i0..] (nb,dv) @ V[0..nc)^T */
            smoe_gemm(0, 1, nb, nc, dv_, 1.0f, doh + i0 * os, os, vh, vs,
                      0.0f, ds, nc);
            for (int64_t r = 0; r < nb; r++)
                ds_row(ds + r * nc, ph + (i0 + r) * s, i0 + r, nc, scale);
            /* dQ[i0..] (nb,dk) += dS (nb,nc) @ K[0..nc) (nc,dk) */
            if (dq)
                smoe_gemm(0, 0, nb, dk_, nc, 1.0f, ds, nc, kh, ks, 1.0f,
                          dq + i0 * qs + hh * dk_, qs);
            /* dK[0..nc) (nc,dk) += dS^T (nc,nb) @ Q[i0..] (nb,dk) */
            if (dk)
                smoe_gemm(1, 0, nc, dk_, nb, 1.0f, ds, nc, qh + i0 * qs, qs,
                          1.0f, dk + hh * dk_, ks);
        }
    }
}
