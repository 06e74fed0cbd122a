/* Benchmark: single-thread SGEMM throughput of smoe_gemm (OpenBLAS) on
 * square n x n matrices for n = 256, 512, 1024 (best of several runs), and
 * of the naive twin smoe_gemm_ref at n = 256 for comparison. Prints the
 * OpenBLAS core first, since a generic fallback core is the usual cause of
 * a slow machine. Figures only; nothing here asserts on time.
 * usage: bench_gemm [RUNS]   (RUNS >= 1, default 5)
 */
#include "smoe/kernels.h"

#include <stdio.h>
#include <string.h>

static float *filled(int64_t n)
{
    float *p = smoe_malloc((size_t)n * sizeof *p);
    if (!p)
        return NULL;
    uint32_t s = 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

/* Best GFLOP/s over `runs` runs of C = A B for n x n, BLAS or naive. */
static double best_gflops(int64_t n, int runs, int naive)
{
    float *a = filled(n * n), *b = filled(n * n), *c = filled(n * n);
    double best = 0.0;
    if (a && b && c) {
        if (!naive) /* warm-up: OpenBLAS buffers, page faults */
            smoe_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        for (int r = 0; r < runs; r++) {
            double t0 = smoe_now();
            if (naive)
                smoe_gemm_ref(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            else
                smoe_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = smoe_now() - t0;
            double gf = 2.0 * (double)n * (double)n * (double)n / dt * 1e-9;
            best = gf > best ? gf : best;
        }
    }
    smoe_free(a);
    smoe_free(b);
    smoe_free(c);
    return best;
}

int main(int argc, char **argv)
{
    smoe_blas_select_core(argv);
    int64_t runs = 5;
    if (argc > 2 || (argc == 2 && (smoe_parse_i64(argv[1], &runs) != 0 ||
                                   runs < 1 || runs > 1000))) {
        fprintf(stderr, "usage: bench_gemm [RUNS]   (1..1000, default 5)\n");
        return 2;
    }
    smoe_blas_info info;
    memset(&info, 0, sizeof info);
    smoe_blas_init(1, &info);
    printf("OpenBLAS core: %s%s, threads %d\n", info.corename,
           info.fallback ? " (generic fallback)" : "", info.threads);
    printf("config: %s\n", info.config);
    static const int64_t sizes[] = {256, 512, 1024};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double gf = best_gflops(sizes[i], (int)runs, 0);
        if (gf <= 0.0) {
            fprintf(stderr, "bench_gemm: out of memory at n=%lld\n",
                    (long long)sizes[i]);
            return 1;
        }
        printf("sgemm     n=%-5lld %8.2f GFLOP/s (best of %lld)\n",
               (long long)sizes[i], gf, (long long)runs);
    }
    int nruns = runs < 3 ? (int)runs : 3;
    printf("naive ref n=%-5d %8.2f GFLOP/s (best of %d)\n", 256,
           best_gflops(256, nruns, 1), nruns);
    return 0;
}
