/* smoe kernels: the math of the model on plain row-major fp32 arrays.
 * Matrix products go through CBLAS (OpenBLAS); each has a naive reference
 * twin (suffix _ref) that the tests use as the oracle. The other kernels
 * (norms, activations, softmax, RoPE, attention, cross-entropy, AdamW) are
 * plain C with explicit backward functions, checked by finite differences.
 * Only src/kernels/ includes <cblas.h>.
 *
 * Conventions: all arrays row-major, contiguous, caller-owned; no kernel
 * allocates except where stated; "accumulate" arguments (beta) follow BLAS:
 * C = alpha * op(A) op(B) + beta * C. Kernels are thread-safe (no globals)
 * except smoe_blas_init. Shapes are given in the comments as (rows, cols). */
#ifndef SMOE_KERNELS_H
#define SMOE_KERNELS_H

#include <stdint.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- BLAS set-up ---- */
typedef struct smoe_blas_info {
    char corename[64];   /* openblas_get_corename() */
    char config[256];    /* openblas_get_config() */
    int threads;         /* OpenBLAS threads in use */
    int fallback;        /* 1 if the core is a generic/fallback one */
} smoe_blas_info;

/* If OPENBLAS_CORETYPE is unset and OpenBLAS fell back to a generic core on
 * a CPU that supports a better one (AVX-512 -> SkylakeX, AVX2 -> Haswell),
 * set OPENBLAS_CORETYPE and re-exec the program (argv as given) so OpenBLAS
 * initialises with the right kernel; a preset OPENBLAS_CORETYPE is always
 * respected. Call first thing in main(), before MPI_Init. Returns only if
 * no re-exec was needed or it failed. */
void smoe_blas_select_core(char **argv);
/* Pin OpenBLAS to `threads` threads (<= 0 keeps its default) and report
 * what it runs into info (may be NULL). */
void smoe_blas_init(int threads, smoe_blas_info *info);

/* ---- matrix products (CBLAS) and their naive twins ----
 * C (m,n) = alpha * op(A) * op(B) + beta * C; op(A) is (m,k): A is (m,k)
 * when ta == 0 and (k,m) when ta == 1; likewise op(B) is (k,n). lda/ldb/ldc
 * are the row strides of A, B, C as stored (at least the stored row
 * length). beta == 0 means C is not read. m, n, k and the strides must fit
 * in an int (CBLAS blasint); larger values fail SMOE_ASSERT. */
void smoe_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb,
               float beta, float *c, int64_t ldc);
void smoe_gemm_ref(int ta, int tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc);

/* Dense layer y (t,n) = x (t,k) @ w (k,n) (+ beta * y). */
void smoe_matmul(float *y, const float *x, const float *w, int64_t t,
                 int64_t k, int64_t n, float beta);
/* Its backward, accumulating (beta = 1): dx (t,k) += dy @ w^T (if dx not
 * NULL), dw (k,n) += x^T @ dy (if dw not NULL). */
void smoe_matmul_bwd(float *dx, float *dw, const float *dy, const float *x,
                     const float *w, int64_t t, int64_t k, int64_t n);
void smoe_matmul_ref(float *y, const float *x, const float *w, int64_t t,
                     int64_t k, int64_t n, float beta);
void smoe_matmul_bwd_ref(float *dx, float *dw, const float *dy,
                         const float *x, const float *w, int64_t t,
                         int64_t k, int64_t n);

/* The same products with their inputs rounded to bf16 first (round to
 * nearest even, dtype.h) and the products and sums in fp32: what a GPU's
 * bf16 GEMM with fp32 accumulation computes, up to the order of the sums
 * (the device tables' bf16 mode, cuda.h / emul.h). C keeps fp32. These
 * allocate the rounded copies of the inputs (and fail SMOE_ASSERT when
 * out of memory: the twins of a test and emulation mode, not a hot path). */
void smoe_gemm_bf16in(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                      float *c, int64_t ldc);
void smoe_matmul_bf16in(float *y, const float *x, const float *w, int64_t t, int64_t k,
                        int64_t n, float beta);
void smoe_matmul_bwd_bf16in(float *dx, float *dw, const float *dy, const float *x,
                            const float *w, int64_t t, int64_t k, int64_t n);

/* ---- normalisation ---- */
/* RMSNorm over the last dim: y (t,d) = x / rms(x) * scale (d);
 * rstd (t) receives 1/rms for the backward. */
void smoe_rmsnorm(float *y, float *rstd, const float *x, const float *scale,
                  int64_t t, int64_t d, float eps);
/* Accumulates: dx (t,d) += dL/dx, dscale (d) += dL/dscale (either may be
 * NULL), from dy (t,d) and the forward's x and rstd. rstd = 1 / sqrt(
 * mean(x^2) + eps), eps inside the sqrt. */
void smoe_rmsnorm_bwd(float *dx, float *dscale, const float *dy,
                      const float *x, const float *scale, const float *rstd,
                      int64_t t, int64_t d);
/* Naive twins (one row at a time, ref.c); the two above match them bit for
 * bit (their rows' sums are the same chains, run side by side). */
void smoe_rmsnorm_ref(float *y, float *rstd, const float *x, const float *scale,
                      int64_t t, int64_t d, float eps);
void smoe_rmsnorm_bwd_ref(float *dx, float *dscale, const float *dy, const float *x,
                          const float *scale, const float *rstd, int64_t t, int64_t d);

/* ---- activations ---- */
/* SwiGLU: h (n) = silu(a) * b. */
void smoe_swiglu(float *h, const float *a, const float *b, int64_t n);
/* da (n) = dh * b * silu'(a), db (n) = dh * silu(a) (overwrite). */
void smoe_swiglu_bwd(float *da, float *db, const float *dh, const float *a,
                     const float *b, int64_t n);

/* The same with the sigmoid kept (act_fused.c; naive twins the two above):
 * h (n) = silu(a) * b and s (n) = sigmoid(a) (h may alias s); then
 * da (n), db (n) from dh and the forward's s (db may alias s). */
void smoe_swiglu_sig(float *h, float *s, const float *a, const float *b, int64_t n);
void smoe_swiglu_sig_bwd(float *da, float *db, const float *dh, const float *a,
                         const float *b, const float *s, int64_t n);

/* Row softmax in place: x (t,n). */
void smoe_softmax_rows(float *x, int64_t t, int64_t n);
/* dx (t,n) = y * (dy - sum(dy * y)) from the softmax output y (overwrite). */
void smoe_softmax_rows_bwd(float *dx, const float *dy, const float *y,
                           int64_t t, int64_t n);
void smoe_sigmoid(float *y, const float *x, int64_t n);

/* Eight lanes at a time (vexp.c), bitwise the scalar forms for every
 * input: y (n) = expf(x) (y may alias x; naive twin: expf per element) and
 * s (n) = sigmoid(a) as smoe_sigmoid computes it (s may alias a; naive
 * twin: smoe_sigmoid). */
void smoe_expf_n(float *y, const float *x, int64_t n);
void smoe_sigmoid_n(float *s, const float *a, int64_t n);

/* ---- rotary embedding ----
 * x (t, h, d) with d even, rotated in place by position pos[t]:
 * pairs (x[2i], x[2i+1]) turn by angle pos * theta^(-2i/d). The backward is
 * the inverse rotation (smoe_rope with inverse = 1) applied to the grads.
 * Element (token ti, head hi, dim j) is at x[ti*stride + hi*d + j]; stride
 * (floats between consecutive tokens) is h*d for a contiguous tensor and
 * larger to rotate a slice of a wider row in place (pass the slice start). */
void smoe_rope(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
               int64_t stride, float theta, int inverse);
/* MaxText's rotary embeddings (rope.c): the inverse frequencies (d/2) of
 * RotaryEmbedding (yarn = 0: 1 / (min * (max/min)^(2i/d) * linear_scale))
 * or YarnRotaryEmbedding (yarn = 1: theta = max_timescale, blended by
 * rope_factor between the correction dims of beta_fast and beta_slow),
 * then the rotation by angle pos * inv_freq[i] of the pairs (2i, 2i+1)
 * (halves = 0) or (i, i + d/2) (halves = 1), times scale. */
typedef struct smoe_rope_cfg {
    int yarn;
    double min_timescale, max_timescale, linear_scale; /* rope_min/max_timescale, */
                                                       /* rope_linear_scaling_factor */
    double factor, beta_fast, beta_slow, orig_max;     /* rope_factor, beta_*, */
                                                       /* original_max_position_embeddings */
    int truncate;                                      /* rope_truncate */
} smoe_rope_cfg;
void smoe_rope_freqs(double *inv_freq, int64_t d, const smoe_rope_cfg *c);
void smoe_rope_apply(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
                     int64_t stride, const double *inv_freq, int halves, float scale,
                     int inverse);

/* RoPE from tables (rope_table.c), the naive twin being smoe_rope_apply:
 * cs, sn (npos, d/2) = cos, sin of p * inv_freq[i] for positions p in
 * [0, npos), built once by smoe_rope_table; smoe_rope_apply_tab rotates, as
 * smoe_rope_apply does (bitwise the same), the h heads of each token, head
 * hi of token ti at x[ti*stride + hi*hstride] (hstride >= d: a rope slice
 * of every head of a wider row in one call); pos[ti] in [0, npos). */
void smoe_rope_table(float *cs, float *sn, int64_t npos, int64_t d, const double *inv_freq);
void smoe_rope_apply_tab(float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
                         int64_t stride, int64_t hstride, const float *cs, const float *sn,
                         int64_t npos, int halves, float scale, int inverse);

/* ---- causal attention for one sequence ----
 * q (s, h, dk), k (s, h, dk), v (s, h, dv) with row strides qs, ks, vs
 * (elements between consecutive positions): element (position i, head hh,
 * dim j) of q is q[i*qs + hh*dk + j], likewise k, v; o (s, h, dv)
 * contiguous; p (h, s, s) receives the softmax probabilities (needed by the
 * backward), zero above the diagonal (position i attends to j <= i).
 * scale multiplies q.k. */
void smoe_attention(float *o, float *p, const float *q, const float *k,
                    const float *v, int64_t s, int64_t h, int64_t dk,
                    int64_t dv, int64_t qs, int64_t ks, int64_t vs,
                    float scale);
/* dq, dk, dv (same layouts and strides as q, k, v) += gradients from
 * dout (s, h, dv) contiguous; any of the three may be NULL. scratch needs s
 * floats. */
void smoe_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                        const float *p, const float *q, const float *k,
                        const float *v, int64_t s, int64_t h, int64_t dk_,
                        int64_t dv_, int64_t qs, int64_t ks, int64_t vs,
                        float scale, float *scratch);

/* ---- loss ----
 * Mean-free cross-entropy: returns sum over rows of -log softmax(logits)[y]
 * and, if dlogits, writes dlogits = (softmax - onehot(y)) * scale.
 * logits (t, v), targets (t) in [0, v) (else SMOE_ASSERT); dlogits may
 * alias logits. */
double smoe_cross_entropy(float *dlogits, const float *logits,
                          const int32_t *targets, int64_t t, int64_t v,
                          float scale);
/* The same with MaxText's z-loss: each row adds z * lse^2 to the loss
 * (lse = log-sum-exp of the row) and dlogits = ((1 + 2 z lse) softmax -
 * onehot(y)) * scale; *zsum (if not NULL) = sum of the z * lse^2 terms. */
double smoe_cross_entropy_z(float *dlogits, const float *logits,
                            const int32_t *targets, int64_t t, int64_t v,
                            float scale, float z, double *zsum);
/* Naive twin of smoe_cross_entropy_z (same arguments; the tests' oracle):
 * double exp twice per element; dlogits may alias logits. */
double smoe_cross_entropy_z_ref(float *dlogits, const float *logits,
                                const int32_t *targets, int64_t t, int64_t v,
                                float scale, float z, double *zsum);

/* ---- optimizer ----
 * AdamW step on n elements (bias-corrected, decoupled weight decay):
 * m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p), t = 1-based step. */
void smoe_adamw(float *p, float *m, float *v, const float *g, int64_t n,
                float lr, float b1, float b2, float eps, float wd, int64_t t);
/* The same as optax.adamw after optax.clip_by_global_norm (adamw.c):
 * g -> (g / clip_norm) * clip_max first when clip_norm > 0; eps_root
 * inside the square root; wd = 0 for a parameter the mask leaves out. */
typedef struct smoe_adamw_cfg {
    float lr, b1, b2, eps, eps_root, wd;
    int64_t t;              /* 1-based update count */
    float clip_norm;        /* > 0: the global norm the gradient is clipped from */
    float clip_max;         /* ... to this norm */
} smoe_adamw_cfg;
void smoe_adamw_step(float *p, float *m, float *v, const float *g, int64_t n,
                     const smoe_adamw_cfg *c);

/* ---- moving rows (rows.c) ----
 * The model's data movement, as kernels so that a device table can run it
 * where the data lives. x (t, d) = embed[tokens] row by row; dembed
 * (vocab, d) += the rows of dx (t, d) scattered by tokens, in t order (a
 * row that two tokens share gets their sums in that order). tokens (t) in
 * [0, vocab) (else SMOE_ASSERT: the trainer checks its data first). */
void smoe_embed_rows(float *x, const float *embed, const int32_t *tokens, int64_t t, int64_t d,
                     int64_t vocab);
void smoe_embed_rows_bwd(float *dembed, const int32_t *tokens, const float *dx, int64_t t,
                         int64_t d, int64_t vocab);
/* MLA's keys and values from the up-projection: kv (t*h, dn + dv) and the
 * shared rotary key kpe (t, dr) into k (t*h, dn + dr) = [kv's first dn |
 * kpe of the token] and v (t*h, dv) = kv's last dv. The backward: dkv
 * (t*h, dn + dv) = [dk's first dn | dv] (overwritten) and dkpe (t, dr) =
 * the sum over the token's heads of dk's last dr, in head order
 * (overwritten). */
void smoe_mla_kv_split(float *k, float *v, const float *kv, const float *kpe, int64_t t,
                       int64_t h, int64_t dn, int64_t dr, int64_t dv);
void smoe_mla_kv_merge(float *dkv, float *dkpe, const float *dk, const float *dv, int64_t t,
                       int64_t h, int64_t dn, int64_t dr, int64_t dv_);

/* The MoE block's rows between tokens and experts, for the (token, k)
 * pairs i = t * k + kk in order (pos (t*k): the pair's row among the
 * experts' rows, -1 when dropped):
 *  - dispatch_rows: er row pos[i] = x row i / k (overwrite);
 *  - combine_rows:  x row i / k += wts[i] * er row pos[i] (smoe_vec_axpy);
 *  - combine_bwd:   der row pos[i] = wts[i] * dx row i / k and dwk[i] =
 *    (float) dx row i / k . er row pos[i] (smoe_vec_dot_scale; 0 when
 *    dropped), er the forward's expert outputs;
 *  - dispatch_bwd:  dx row i / k += der row pos[i] (smoe_vec_add).
 * Rows are d floats; the sums run in pair order. */
void smoe_moe_dispatch_rows(float *er, const float *x, const int64_t *pos, int64_t t, int64_t k,
                            int64_t d);
void smoe_moe_combine_rows(float *x, const float *er, const int64_t *pos, const float *wts,
                           int64_t t, int64_t k, int64_t d);
void smoe_moe_combine_bwd(float *der, float *dwk, const float *dx, const float *er,
                          const int64_t *pos, const float *wts, int64_t t, int64_t k, int64_t d);
void smoe_moe_dispatch_bwd(float *dx, const float *der, const int64_t *pos, int64_t t, int64_t k,
                           int64_t d);

/* ---- small vector helpers ---- */
void smoe_vec_add(float *y, const float *x, int64_t n);          /* y += x */
void smoe_vec_axpy(float *y, float a, const float *x, int64_t n); /* y += a x */
void smoe_vec_scale(float *y, float a, int64_t n);               /* y *= a */
/* r (n) = a d; returns the double dot product d . y (four interleaved
 * chains; naive twin _ref: one chain in order). r must not alias d, y. */
double smoe_vec_dot_scale(float *r, float a, const float *d, const float *y, int64_t n);
double smoe_vec_dot_scale_ref(float *r, float a, const float *d, const float *y, int64_t n);
/* sum of x_j^2 in double, one chain in j order (the gradient's global norm) */
double smoe_vec_sumsq(const float *x, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
