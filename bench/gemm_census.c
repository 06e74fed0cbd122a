/* Where a training step's sgemm time goes, for bench_compute --gemms: the
 * link step wraps cblas_sgemm (-Wl,--wrap=cblas_sgemm, so the library's
 * calls reach this file first), and while the census is on every call's
 * shape (the row-major call as made: op flags, m, n, k) and this thread's
 * CPU time inside it are summed per shape. The report compares each
 * shape's rate with a reference rate (the same process's 512^3 sgemm): the
 * time a shape loses against it, the GEMMs' share of the step, and the
 * ratio the step would reach if everything outside sgemm took no time (the
 * ceiling that the GEMM shapes alone set). Single-threaded use only.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "gemm_census.h"
#include "smoe/core.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ATTN_BLOCK_ROWS: src/kernels/attention.c's largest row block (ATTN_ROWS) */
enum { CENSUS_MAX = 8192, CENSUS_TOP = 14, ATTN_BLOCK_ROWS = 48 };

typedef struct shape {
    int ta, tb, m, n, k;
    long calls;
    double cpu; /* seconds */
} shape;

static shape tab[CENSUS_MAX];
static int ntab, on, overflow;


void __real_cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE a,
                        const enum CBLAS_TRANSPOSE b, const blasint m, const blasint n,
                        const blasint k, const float alpha, const float *A,
                        const blasint lda, const float *B, const blasint ldb,
                        const float beta, float *C, const blasint ldc);
void __wrap_cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE a,
                        const enum CBLAS_TRANSPOSE b, const blasint m, const blasint n,
                        const blasint k, const float alpha, const float *A,
                        const blasint lda, const float *B, const blasint ldb,
                        const float beta, float *C, const blasint ldc);

void __wrap_cblas_sgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE a,
                        const enum CBLAS_TRANSPOSE b, const blasint m, const blasint n,
                        const blasint k, const float alpha, const float *A,
                        const blasint lda, const float *B, const blasint ldb,
                        const float beta, float *C, const blasint ldc)
{
    if (!on) {
        __real_cblas_sgemm(o, a, b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    double t0 = smoe_thread_cpu();
    __real_cblas_sgemm(o, a, b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    double dt = smoe_thread_cpu() - t0;
    const int ta = a == CblasTrans, tb = b == CblasTrans;
    int i = 0;
    while (i < ntab && !(tab[i].ta == ta && tab[i].tb == tb && tab[i].m == m &&
                         tab[i].n == n && tab[i].k == k))
        i++;
    if (i == ntab) {
        if (ntab == CENSUS_MAX) {
            overflow = 1;
            return;
        }
        tab[ntab++] = (shape){ ta, tb, m, n, k, 0, 0.0 };
    }
    tab[i].calls++;
    tab[i].cpu += dt;
}

void gemm_census_on(int yes) { on = yes; }

static double flops_of(const shape *s)
{
    return 2.0 * (double)s->m * (double)s->n * (double)s->k * (double)s->calls;
}

/* seconds lost against the reference rate, larger first */
static double ref_rate;
static double lost(const shape *s) { return s->cpu - flops_of(s) / ref_rate; }
static int by_loss(const void *x, const void *y)
{
    double a = lost(x), b = lost(y);
    return (a < b) - (a > b);
}

void gemm_census_print(double step_cpu, double model_flops, int steps, double sgemm_rate)
{
    ref_rate = sgemm_rate * 1e9;
    double t = 0.0, f = 0.0, calls = 0.0;
    for (int i = 0; i < ntab; i++) {
        t += tab[i].cpu;
        f += flops_of(&tab[i]);
        calls += (double)tab[i].calls;
    }
    if (ntab == 0 || t <= 0.0 || step_cpu <= 0.0) {
        printf("  gemm census: no sgemm calls recorded\n");
        return;
    }
    qsort(tab, (size_t)ntab, sizeof *tab, by_loss);
    printf("  gemm census over %d steps (CPU time, reference sgemm n=512 %.2f GFLOP/s)%s:\n",
           steps, sgemm_rate, overflow ? " [table full: some shapes not counted]" : "");
    printf("    %d shapes, %.0f calls per step; sgemm %.1f %% of the step's CPU time, "
           "%.1f ms per step at %.2f GFLOP/s (%.3f of the reference)\n",
           ntab, calls / steps, 100.0 * t / step_cpu, 1e3 * t / steps, f / t / 1e9, f / t / ref_rate);
    printf("    GEMM FLOPs executed / model FLOPs counted %.3f; outside sgemm %.1f ms per step\n",
           f / model_flops, 1e3 * (step_cpu - t) / steps);
    printf("    ceiling (nothing outside sgemm, every shape at its own rate): ratio %.3f\n",
           model_flops / t / ref_rate);
    printf("    per step, the shapes that lose most:\n");
    printf("    %-3s %-3s %6s %6s %6s %7s %9s %9s %9s\n", "opA", "opB", "m", "n", "k",
           "calls", "GFLOP/s", "of ref", "lost ms");
    double shown = 0.0;
    for (int i = 0; i < ntab && i < CENSUS_TOP; i++) {
        const shape *s = &tab[i];
        shown += lost(s);
        printf("    %-3s %-3s %6d %6d %6d %7.1f %9.2f %9.3f %9.2f\n", s->ta ? "T" : "N",
               s->tb ? "T" : "N", s->m, s->n, s->k, (double)s->calls / steps,
               flops_of(s) / s->cpu / 1e9, flops_of(s) / s->cpu / ref_rate,
               1e3 * lost(s) / steps);
    }
    double all = 0.0, at = 0.0, af = 0.0, al = 0.0;
    for (int i = 0; i < ntab; i++) {
        all += lost(&tab[i]);
        if (tab[i].m <= ATTN_BLOCK_ROWS) { /* the causal attention's row blocks */
            at += tab[i].cpu;
            af += flops_of(&tab[i]);
            al += lost(&tab[i]);
        }
    }
    if (at > 0.0)
        printf("    calls of at most %d rows (the causal attention's blocks): %.1f ms per step "
               "at %.2f GFLOP/s (%.3f of the reference), losing %.1f ms\n",
               ATTN_BLOCK_ROWS, 1e3 * at / steps, af / at / 1e9, af / at / ref_rate,
               1e3 * al / steps);
    printf("    (the %d shapes above lose %.1f of the %.1f ms per step that all shapes lose "
           "against the reference)\n",
           ntab < CENSUS_TOP ? ntab : CENSUS_TOP, 1e3 * shown / steps, 1e3 * all / steps);
}
