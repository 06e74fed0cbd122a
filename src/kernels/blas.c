/* The BLAS-backed kernels: OpenBLAS core selection and set-up, and the
 * matrix products (smoe_gemm, the dense layer smoe_matmul and its backward)
 * through cblas_sgemm in row-major order. This file and the rest of
 * src/kernels/ are the only places that include <cblas.h>. CBLAS takes int
 * (blasint) dimensions and strides; values that do not fit are a caller bug
 * and fail SMOE_ASSERT rather than being truncated.
 */
/* setenv/unsetenv/execv; cblas.h also wants it (cpu_set_t) */
#define _GNU_SOURCE
#include "smoe/kernels.h"

#include <cblas.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- core selection ---- */

/* Cores that OpenBLAS's DYNAMIC_ARCH build reports when it does not know the
 * CPU (the fallback targets of its x86-64 detection). */
static const char *const fallback_cores[] = {
    "generic", "prescott", "core2", "penryn", "dunnington", "nehalem",
};

static int is_fallback_core(const char *name)
{
    char low[64];
    size_t i = 0;
    if (!name)
        return 1;
    for (; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = 0;
    const size_t ncores = sizeof fallback_cores / sizeof fallback_cores[0];
    for (size_t c = 0; c < ncores; c++)
        if (strcmp(low, fallback_cores[c]) == 0)
            return 1;
    return 0;
}

/* The OpenBLAS core worth forcing on this CPU, or NULL when none is. */
static const char *better_core(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

/* Not thread-safe (touches the environment): call first thing in main().
 * On a successful re-exec this never returns; if execv fails the two
 * variables are removed again so the environment tells the truth. */
void smoe_blas_select_core(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv("SMOE_BLAS_REEXEC"))
        return; /* a preset choice is respected; never loop */
    if (!argv || !argv[0] || !is_fallback_core(openblas_get_corename()))
        return;
    const char *core = better_core();
    if (!core)
        return;
    if (setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    if (setenv("SMOE_BLAS_REEXEC", "1", 1) != 0) {
        unsetenv("OPENBLAS_CORETYPE");
        return;
    }
    fflush(NULL);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("SMOE_BLAS_REEXEC");
}

/* threads <= 0 keeps OpenBLAS's own default. info may be NULL. Not
 * thread-safe: OpenBLAS's thread count is process-wide. */
void smoe_blas_init(int threads, smoe_blas_info *info)
{
    if (threads > 0)
        openblas_set_num_threads(threads);
    if (!info)
        return;
    const char *core = openblas_get_corename();
    const char *config = openblas_get_config();
    snprintf(info->corename, sizeof info->corename, "%s", core ? core : "?");
    snprintf(info->config, sizeof info->config, "%s", config ? config : "?");
    info->threads = openblas_get_num_threads();
    info->fallback = is_fallback_core(core);
}

/* ---- matrix products ---- */

static blasint to_blasint(int64_t x)
{
    SMOE_ASSERT(x >= 0 && x <= (int64_t)INT_MAX);
    return (blasint)x;
}

/* C (m,n) *= beta, with beta == 0 writing zeros (C is not read, as in BLAS). */
static void scale_c(float *c, int64_t m, int64_t n, int64_t ldc, float beta)
{
    for (int64_t i = 0; i < m; i++) {
        float *row = c + i * ldc;
        if (beta == 0.0f)
            memset(row, 0, (size_t)n * sizeof *row);
        else if (beta != 1.0f)
            for (int64_t j = 0; j < n; j++)
                row[j] *= beta;
    }
}

/* C (m,n) = alpha op(A) op(B) + beta C, row-major. Dimensions and strides
 * must fit in an int (CBLAS); strides must cover a stored row (lda >= k when
 * ta == 0, lda >= m when ta == 1; likewise ldb, and ldc >= n). Degenerate
 * sizes (m, n or k == 0) and alpha == 0 are handled here without BLAS. */
void smoe_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb,
               float beta, float *c, int64_t ldc)
{
    SMOE_ASSERT(m >= 0 && n >= 0 && k >= 0);
    if (m == 0 || n == 0)
        return;
    SMOE_ASSERT(ldc >= n);
    if (k == 0 || alpha == 0.0f) {
        scale_c(c, m, n, ldc, beta);
        return;
    }
    SMOE_ASSERT(lda >= (ta ? m : k));
    SMOE_ASSERT(ldb >= (tb ? k : n));
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, to_blasint(m), to_blasint(n),
                to_blasint(k), alpha, a, to_blasint(lda), b, to_blasint(ldb),
                beta, c, to_blasint(ldc));
}

/* y (t,n) = x (t,k) @ w (k,n) + beta * y; all contiguous. */
void smoe_matmul(float *y, const float *x, const float *w, int64_t t,
                 int64_t k, int64_t n, float beta)
{
    smoe_gemm(0, 0, t, n, k, 1.0f, x, k, w, n, beta, y, n);
}

/* Accumulates (beta = 1): dx (t,k) += dy (t,n) @ w^T, dw (k,n) += x^T @ dy.
 * Either output may be NULL to skip it. */
void smoe_matmul_bwd(float *dx, float *dw, const float *dy, const float *x,
                     const float *w, int64_t t, int64_t k, int64_t n)
{
    if (dx)
        smoe_gemm(0, 1, t, k, n, 1.0f, dy, n, w, n, 1.0f, dx, k);
    if (dw)
        smoe_gemm(1, 0, k, n, t, 1.0f, x, k, dy, n, 1.0f, dw, n);
}
