/* Causal scaled-dot-product attention for one sequence, forward and
 * backward, head by head. Element (position i, head hh, dim j) of q is at
 * q[i*qs + hh*dk + j] (likewise k with ks, v with vs and dv), so q/k/v may
 * be column slices of a wider fused projection; o is contiguous (s, h, dv).
 *
 * Forward, per head, in blocks of ATTN_ROWS query rows i0 .. i0+nb-1 (row
 * i sees the keys j <= i): the scores S = scale * Q K^T of the block's
 * rows over the key columns 0 .. nk-1 only (one smoe_gemm into p's rows;
 * nk covers the block's diagonal, see below), then a causal softmax per
 * row (the entries j > i set to 0), then O = P V over those nk keys (a
 * second smoe_gemm; the zeros make the product exact). The key columns
 * right of nk (about half of the (s, s) block in all) are never computed.
 *
 * Backward, per head: dV += P^T dO in blocks of ATTN_ROWS output rows
 * j0 .., each summing over the rows i >= j0 only (P is 0 above the
 * diagonal), then blocks of bs rows i0 .. i0+nb-1, which see columns
 * 0 .. nc-1 (nc = i0 + nb):
 *   dP = dO_blk V[0..nc)^T                          (smoe_gemm, (nb, nc))
 *   dS_ij = P_ij (dP_ij - sum_l P_il dP_il) * scale  (0 above the diagonal)
 *   dQ_blk += dS K[0..nc),   dK[0..nc) += dS^T Q_blk (two smoe_gemm)
 * dS of a block lives in a 16 KiB stack tile (bs = 4096 / s rows, so 16
 * rows at s = 256); for s > 2048 it falls back to one row at a time in the
 * caller's scratch.
 *
 * Bitwise the products over the full (s, s) blocks. OpenBLAS's sgemm
 * (Haswell kernels) does not compute every element of C alike: the
 * elements of some register tiles, set by the element's place in the call
 * (groups of 12 rows, the first and the last full group of 8 columns), sum
 * their products in two interleaved chains instead of one. A call over a
 * block of rows that starts at a multiple of 12 (ATTN_ROWS = 48) gives its
 * rows the tiles of the full call; a call over the first nk columns gives
 * them the tiles of the full call except in its last full 8 columns and
 * the ragged rest, so nk reaches 8 to 15 columns past the block's last
 * row (those columns are masked for every row of the block) or s; and a
 * sum whose skipped terms are exact zeros (P above the diagonal) is
 * unchanged when both ends of the kept range are multiples of 8 (P V ends
 * at nk, P^T dO starts at j0). test_attention checks the kernels bit for
 * bit against the full products (tests/attention_full.h).
 */
#include "smoe/kernels.h"

#include <math.h>
#include <string.h>

enum {
    ATTN_TILE = 4096, /* floats of dS kept on the stack (16 KiB) */
    ATTN_ROWS = 48,   /* rows per forward and dV block: a multiple of 12 and 8 */
};

static void check_layout(int64_t s, int64_t h, int64_t dk, int64_t dv,
                         int64_t qs, int64_t ks, int64_t vs)
{
    SMOE_ASSERT(s >= 0 && h >= 0 && dk >= 0 && dv >= 0);
    SMOE_ASSERT(s <= 1 || (qs >= h * dk && ks >= h * dk && vs >= h * dv));
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The key columns the forward computes for rows up to nc - 1: past the
 * last full group of 8 that holds a kept column, or all s. */
static int64_t key_cols(int64_t nc, int64_t s)
{
    return min64(s, (nc + 7) / 8 * 8 + 8);
}

/* Causal softmax of the nr <= 4 rows i0 .. i0+nr-1 of a head's score
 * block (row r at b + r*s, length s): entries j <= i are normalised,
 * entries j > i are zeroed. Each row's max and double sum are the chains
 * of one row alone, in j order; the rows' chains are interleaved only so
 * that they do not wait on each other. */
static void causal_softmax_rows(float *b, int64_t i0, int64_t nr, int64_t s)
{
    float mx[4];
    double sum[4];
    for (int64_t r = 0; r < nr; r++)
        mx[r] = b[r * s];
    int64_t j = 1;
    if (nr == 4)
        for (float *r0 = b, *r1 = b + s, *r2 = b + 2 * s, *r3 = b + 3 * s; j <= i0; j++) {
            mx[0] = r0[j] > mx[0] ? r0[j] : mx[0];
            mx[1] = r1[j] > mx[1] ? r1[j] : mx[1];
            mx[2] = r2[j] > mx[2] ? r2[j] : mx[2];
            mx[3] = r3[j] > mx[3] ? r3[j] : mx[3];
        }
    for (int64_t r = 0; r < nr; r++) {
        float *row = b + r * s;
        for (int64_t jr = j; jr <= i0 + r; jr++)
            mx[r] = row[jr] > mx[r] ? row[jr] : mx[r];
        for (int64_t jr = 0; jr <= i0 + r; jr++)
            row[jr] -= mx[r];
        smoe_expf_n(row, row, i0 + r + 1);
        sum[r] = 0.0;
    }
    j = 0;
    if (nr == 4)
        for (float *r0 = b, *r1 = b + s, *r2 = b + 2 * s, *r3 = b + 3 * s; j <= i0; j++) {
            sum[0] += (double)r0[j];
            sum[1] += (double)r1[j];
            sum[2] += (double)r2[j];
            sum[3] += (double)r3[j];
        }
    for (int64_t r = 0; r < nr; r++) {
        float *row = b + r * s;
        const int64_t i = i0 + r;
        for (int64_t jr = j; jr <= i; jr++)
            sum[r] += (double)row[jr];
        float inv = (float)(1.0 / sum[r]);
        for (int64_t jr = 0; jr <= i; jr++)
            row[jr] *= inv;
        if (i + 1 < s)
            memset(row + i + 1, 0, (size_t)(s - i - 1) * sizeof *row);
    }
}

/* o (s,h,dv) contiguous, overwritten; p (h,s,s) overwritten with the
 * probabilities (row i of head hh at p[(hh*s + i)*s], zero above the
 * diagonal). q, k, v as in the file comment. Thread-safe; OpenBLAS may use
 * its own threads inside the products. */
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
    const int64_t os = h * dv; /* row stride of o */
    for (int64_t hh = 0; hh < h; hh++) {
        float *ph = p + hh * s * s;
        for (int64_t i0 = 0; i0 < s; i0 += ATTN_ROWS) {
            const int64_t nb = min64(ATTN_ROWS, s - i0);
            const int64_t nk = key_cols(i0 + nb, s);
            float *pb = ph + i0 * s;
            /* S_blk (nb,nk) = scale * Q[i0..] (nb,dk) @ K[0..nk)^T */
            smoe_gemm(0, 1, nb, nk, dk, scale, q + i0 * qs + hh * dk, qs,
                      k + hh * dk, ks, 0.0f, pb, s);
            for (int64_t r = 0; r < nb; r += 4)
                causal_softmax_rows(pb + r * s, i0 + r, min64(4, nb - r), s);
            /* O[i0..] (nb,dv) = P_blk (nb,nk) @ V[0..nk) (nk,dv) */
            smoe_gemm(0, 0, nb, dv, nk, 1.0f, pb, s, v + hh * dv, vs, 0.0f,
                      o + i0 * os + hh * dv, os);
        }
    }
}

/* Rows i0 .. i0+nr-1 (nr <= 4, row r at d + r*nc) of dS * scale from dP
 * (in place, length nc > i) and the probabilities (row r at pr + r*s):
 * dS_ij = P_ij (dP_ij - sum_l P_il dP_il) for j <= i, 0 for i < j < nc
 * (masked positions carry no gradient). Each row's double sum is one
 * row's chain in j order; the rows' chains run interleaved. */
static void ds_rows(float *d, const float *pr, int64_t i0, int64_t nr, int64_t nc,
                    int64_t s, float scale)
{
    double dsum[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t j = 0;
    if (nr == 4)
        for (; j <= i0; j++) {
            dsum[0] += (double)pr[j] * (double)d[j];
            dsum[1] += (double)pr[s + j] * (double)d[nc + j];
            dsum[2] += (double)pr[2 * s + j] * (double)d[2 * nc + j];
            dsum[3] += (double)pr[3 * s + j] * (double)d[3 * nc + j];
        }
    for (int64_t r = 0; r < nr; r++) {
        const int64_t i = i0 + r;
        const float *p = pr + r * s;
        float *dr = d + r * nc;
        for (int64_t jr = j; jr <= i; jr++)
            dsum[r] += (double)p[jr] * (double)dr[jr];
        const float df = (float)dsum[r];
        for (int64_t jr = 0; jr <= i; jr++)
            dr[jr] = p[jr] * (dr[jr] - df) * scale;
        for (int64_t jr = i + 1; jr < nc; jr++)
            dr[jr] = 0.0f;
    }
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
        /* dV[j0..] (nb,dv) += P[j0..s, j0..j0+nb)^T @ dO[j0..s) (s-j0,dv) */
        for (int64_t j0 = 0; dv && j0 < s; j0 += ATTN_ROWS)
            smoe_gemm(1, 0, min64(ATTN_ROWS, s - j0), dv_, s - j0, 1.0f,
                      ph + j0 * s + j0, s, doh + j0 * os, os, 1.0f,
                      dv + j0 * vs + hh * dv_, vs);
        if (!dq && !dk)
            continue;
        for (int64_t i0 = 0; i0 < s; i0 += bs) {
            const int64_t nb = s - i0 < bs ? s - i0 : bs;
            const int64_t nc = i0 + nb; /* rows i0.. see columns 0..nc-1 */
            /* dP (nb,nc) = dO[i0..] (nb,dv) @ V[0..nc)^T */
            smoe_gemm(0, 1, nb, nc, dv_, 1.0f, doh + i0 * os, os, vh, vs,
                      0.0f, ds, nc);
            for (int64_t r = 0; r < nb; r += 4)
                ds_rows(ds + r * nc, ph + (i0 + r) * s, i0 + r, min64(4, nb - r), nc, s,
                        scale);
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
