/* The matrix products of the CUDA table through cuBLASLt (the only file
 * with cublasLt.h): smoe_gemm's row-major contract (kernels.h) as a
 * column-major product, one algorithm per shape.
 *
 * Row-major C (m,n) = alpha op(A) op(B) + beta C is, read column-major,
 * C^T (n,m) = alpha op(B)^T op(A)^T + beta C^T: cuBLASLt's "A" is smoe's B
 * (transposed iff tb), its "B" is smoe's A (transposed iff ta), and a
 * row-major matrix of row stride ld is a column-major one of leading
 * dimension ld with rows and columns swapped.
 *
 * Reproducibility: a plan (the descriptors and the algorithm of the first
 * heuristic answer) is made once per key (transposes, m, n, k, strides and
 * the pointers' alignments, which decide the kernels cuBLASLt may use) and
 * reused, so a shape always runs the same algorithm; the workspace is the
 * queue's own, so queues on different streams never share one. Compute in
 * fp32 (CUBLAS_COMPUTE_32F: no TF32). In the queue's bf16 mode the
 * operands are first copied, compact, to bf16 (convert.cu) and the product
 * reads those: bf16 inputs, fp32 compute and output. */
#define _GNU_SOURCE
#include "cuda_impl.h"

#include <cublasLt.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* cuBLASLt is loaded when the first kernel queue is made, not with the
 * program: its library takes about 75 ms to load, which every smoe command
 * would pay. The functions this file calls, through pointers of their own
 * types (the names below resolve to them). */
#define LT_FUNCS(X)                                                                     \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetStatusString) X(cublasLtMatmul)  \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulDescCreate)                      \
    X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute)                     \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)               \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate)              \
    X(cublasLtMatrixLayoutDestroy)

static struct {
#define LT_MEMBER(f) __typeof__(&f) f;
    LT_FUNCS(LT_MEMBER)
#undef LT_MEMBER
} lt_fn;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;
static char lt_err[320]; /* why loading failed; empty when loaded */

#define LT_STR2(x) #x
#define LT_STR(x) LT_STR2(x)

static void lt_load(void)
{
    const char *lib = "libcublasLt.so." LT_STR(CUBLAS_VER_MAJOR);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lt_err, sizeof lt_err, "cannot load %s: %s", lib, dlerror());
        return;
    }
#define LT_SYM(f)                                                                \
    if (!lt_err[0] && !(*(void **)&lt_fn.f = dlsym(h, #f)))                      \
        snprintf(lt_err, sizeof lt_err, "%s has no %s", lib, #f);
    LT_FUNCS(LT_SYM)
#undef LT_SYM
}

/* from here on the names are the loaded functions */
#define cublasLtCreate lt_fn.cublasLtCreate
#define cublasLtDestroy lt_fn.cublasLtDestroy
#define cublasLtGetStatusString lt_fn.cublasLtGetStatusString
#define cublasLtMatmul lt_fn.cublasLtMatmul
#define cublasLtMatmulAlgoGetHeuristic lt_fn.cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmulDescCreate lt_fn.cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy lt_fn.cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute lt_fn.cublasLtMatmulDescSetAttribute
#define cublasLtMatmulPreferenceCreate lt_fn.cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy lt_fn.cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute lt_fn.cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatrixLayoutCreate lt_fn.cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy lt_fn.cublasLtMatrixLayoutDestroy

typedef struct lt_key {
    int ta, tb;
    int bf16; /* the operands are compact bf16 copies (the queue's bf16 mode) */
    int64_t m, n, k, lda, ldb, ldc;
    int al_a, al_b, al_c; /* pointer alignments in bytes, at most 256 */
} lt_key;

typedef struct lt_plan {
    lt_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (smoe's B), B (smoe's A), C */
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct cuda_lt {
    cublasLtHandle_t h;
    void *ws;
    size_t ws_bytes;
    lt_plan *plans;
    int nplans, cap;
};

smoe_status cuda_lt_new(smoe_kq *q, size_t workspace_bytes, smoe_err *err)
{
    pthread_once(&lt_once, lt_load);
    if (lt_err[0])
        return smoe_err_set(err, SMOE_ENOTFOUND, "device cuda: cuBLASLt: %s", lt_err);
    cuda_lt *lt = calloc(1, sizeof *lt);
    if (!lt)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory for a GEMM state");
    lt->ws_bytes = workspace_bytes ? workspace_bytes : (size_t)32 << 20;
    cublasStatus_t st = cublasLtCreate(&lt->h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(lt);
        return smoe_err_set(err, SMOE_ECOMM, "device cuda: cublasLtCreate: %s",
                            cublasLtGetStatusString(st));
    }
    smoe_status rc = smoe_dev_alloc(q->dev, lt->ws_bytes, &lt->ws, err);
    if (rc != SMOE_OK) {
        cublasLtDestroy(lt->h);
        free(lt);
        return rc;
    }
    q->lt = lt;
    return SMOE_OK;
}

void cuda_lt_free(smoe_kq *q)
{
    cuda_lt *lt = q->lt;
    if (!lt)
        return;
    for (int i = 0; i < lt->nplans; i++) {
        lt_plan *p = &lt->plans[i];
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatmulDescDestroy(p->op);
    }
    free(lt->plans);
    smoe_err e;
    smoe_status rc = smoe_dev_free(q->dev, lt->ws, &e); /* nothing to tell at teardown */
    (void)rc;
    cublasLtDestroy(lt->h);
    free(lt);
    q->lt = NULL;
}

int cuda_lt_plans(const cuda_lt *lt) { return lt ? lt->nplans : 0; }

static int align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 1;
    while (al < 256 && !(a & (uintptr_t)al))
        al <<= 1;
    return al;
}

static int key_eq(const lt_key *a, const lt_key *b)
{
    return a->ta == b->ta && a->tb == b->tb && a->bf16 == b->bf16 && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->al_a == b->al_a &&
           a->al_b == b->al_b && a->al_c == b->al_c;
}

#define LT(call)                                   \
    do {                                           \
        cublasStatus_t s_ = (call);                \
        if (s_ != CUBLAS_STATUS_SUCCESS)           \
            return s_;                             \
    } while (0)

/* Descriptors of the column-major product for key k (see the top). */
static cublasStatus_t plan_layouts(lt_plan *p, const lt_key *k)
{
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* stored column-major shapes: smoe's B is (n,k) untransposed, (k,n)
     * transposed; smoe's A is (k,m) untransposed, (m,k) transposed */
    uint64_t ar = (uint64_t)(k->tb ? k->k : k->n), ac = (uint64_t)(k->tb ? k->n : k->k);
    uint64_t br = (uint64_t)(k->ta ? k->m : k->k), bc = (uint64_t)(k->ta ? k->k : k->m);
    const cudaDataType_t in = k->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    LT(cublasLtMatrixLayoutCreate(&p->la, in, ar, ac, k->ldb));
    LT(cublasLtMatrixLayoutCreate(&p->lb, in, br, bc, k->lda));
    LT(cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, (uint64_t)k->n, (uint64_t)k->m, k->ldc));
    return CUBLAS_STATUS_SUCCESS;
}

/* The first heuristic answer for the plan's layouts within the workspace
 * and at the key's alignments (cuBLASLt's A is smoe's B). */
static cublasStatus_t plan_algo(cuda_lt *lt, lt_plan *p, const lt_key *k)
{
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    uint32_t al[3] = { (uint32_t)k->al_b, (uint32_t)k->al_a, (uint32_t)k->al_c };
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt->ws_bytes, sizeof lt->ws_bytes);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                 &al[0], sizeof al[0]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                 &al[1], sizeof al[1]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                 &al[2], sizeof al[2]);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                 &al[2], sizeof al[2]);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt->h, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                           &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found < 1)
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s == CUBLAS_STATUS_SUCCESS)
        p->algo = res.algo;
    return s;
}

/* The plan of key k, made on first use; NULL (the queue failed) if
 * cuBLASLt cannot run it. */
static lt_plan *plan_for(smoe_kq *q, const lt_key *k)
{
    cuda_lt *lt = q->lt;
    for (int i = 0; i < lt->nplans; i++)
        if (key_eq(&lt->plans[i].key, k))
            return &lt->plans[i];
    if (lt->nplans == lt->cap) {
        int cap = lt->cap ? 2 * lt->cap : 16;
        lt_plan *np = realloc(lt->plans, (size_t)cap * sizeof *np);
        if (!np) {
            kq_fail(q, "gemm", "out of memory for a GEMM plan");
            return NULL;
        }
        lt->plans = np;
        lt->cap = cap;
    }
    lt_plan *p = &lt->plans[lt->nplans];
    *p = (lt_plan){ .key = *k };
    cublasStatus_t s = plan_layouts(p, k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = plan_algo(lt, p, k);
    if (s != CUBLAS_STATUS_SUCCESS) {
        char msg[160];
        snprintf(msg, sizeof msg, "no cuBLASLt algorithm for ta=%d tb=%d m=%lld n=%lld k=%lld: %s",
                 k->ta, k->tb, (long long)k->m, (long long)k->n, (long long)k->k,
                 cublasLtGetStatusString(s));
        kq_fail(q, "gemm", msg);
        if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
        if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
        if (p->la) cublasLtMatrixLayoutDestroy(p->la);
        if (p->op) cublasLtMatmulDescDestroy(p->op);
        return NULL;
    }
    lt->nplans++;
    return p;
}

/* k == 0: C = beta C, for the two betas the model uses */
static void gemm_empty(smoe_kq *q, int64_t m, int64_t n, float beta, float *c, int64_t ldc)
{
    if (beta == 1.0f || m == 0 || n == 0)
        return;
    if (beta != 0.0f) {
        kq_fail(q, "gemm", "k = 0 with beta other than 0 or 1 is not supported");
        return;
    }
    cudaError_t e = cudaMemset2DAsync(c, (size_t)ldc * sizeof *c, 0, (size_t)n * sizeof *c,
                                      (size_t)m, q->stream);
    if (e != cudaSuccess)
        kq_fail(q, "gemm", cudaGetErrorString(e));
}

void cuda_gemm(void *vq, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc)
{
    smoe_kq *q = vq;
    if (q->err.code != SMOE_OK || m == 0 || n == 0)
        return;
    if (k == 0) {
        gemm_empty(q, m, n, beta, c, ldc);
        return;
    }
    const void *ga = a, *gb = b;
    void *a16 = NULL, *b16 = NULL;
    const int bf16 = (q->flags & SMOE_KOPS_BF16_GEMM) != 0;
    if (bf16) { /* the operands as stored, compact: rows (ta ? k : m) of A ... */
        const int64_t ac = ta ? m : k, bc = tb ? k : n;
        ga = a16 = cuda_k_to_bf16(q, a, ta ? k : m, ac, lda);
        gb = b16 = cuda_k_to_bf16(q, b, tb ? n : k, bc, ldb);
        lda = ac, ldb = bc;
    }
    lt_key key = { ta != 0, tb != 0, bf16, m, n, k, lda, ldb, ldc,
                   align_of(ga), align_of(gb), align_of(c) };
    lt_plan *p = q->err.code == SMOE_OK ? plan_for(q, &key) : NULL;
    if (p) {
        cuda_lt *lt = q->lt;
        cublasStatus_t s = cublasLtMatmul(lt->h, p->op, &alpha, gb, p->la, ga, p->lb, &beta, c,
                                          p->lc, c, p->lc, &p->algo, lt->ws, lt->ws_bytes,
                                          q->stream);
        if (s != CUBLAS_STATUS_SUCCESS)
            kq_fail(q, "gemm", cublasLtGetStatusString(s));
    }
    cuda_k_untemp(q, a16);
    cuda_k_untemp(q, b16);
}

/* y (t,n) = x (t,k) @ w (k,n) + beta y */
void cuda_matmul(void *q, float *y, const float *x, const float *w, int64_t t, int64_t k,
                 int64_t n, float beta)
{
    cuda_gemm(q, 0, 0, t, n, k, 1.0f, x, k, w, n, beta, y, n);
}

/* dx (t,k) += dy (t,n) @ w^T, dw (k,n) += x^T @ dy; either may be NULL */
void cuda_matmul_bwd(void *q, float *dx, float *dw, const float *dy, const float *x,
                     const float *w, int64_t t, int64_t k, int64_t n)
{
    if (dx)
        cuda_gemm(q, 0, 1, t, k, n, 1.0f, dy, n, w, n, 1.0f, dx, k);
    if (dw)
        cuda_gemm(q, 1, 0, k, n, t, 1.0f, x, k, dy, n, 1.0f, dw, n);
}
