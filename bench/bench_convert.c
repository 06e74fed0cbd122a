/* Benchmark: single-thread throughput of the gather dtypes' conversions
 * (dtype.h) on 2^24 fp32 elements (64 MiB): pack (before a gather) and the
 * in-place tail expansion (after it) per dtype, rounds interleaved across
 * the dtypes, best of RUNS. Figures in fp32 GB/s (bytes of the fp32 side),
 * to set against the wire time a compressed gather saves. Nothing here
 * asserts on time.
 * usage: bench_convert [RUNS]   (RUNS >= 1, default 5)
 */
#include "smoe/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1) {
        fprintf(stderr, "usage: bench_convert [RUNS]   (RUNS >= 1)\n");
        return 2;
    }
    const int64_t n = 1 << 24, block = SMOE_INT8_BLOCK_DEFAULT;
    float *x = smoe_malloc(sizeof *x * (size_t)n), *buf = smoe_malloc(sizeof *buf * (size_t)n);
    void *rec = smoe_malloc(sizeof *x * (size_t)n);
    if (!x || !buf || !rec) {
        fprintf(stderr, "bench_convert: out of memory\n");
        return 1;
    }
    uint32_t s = 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    static const smoe_dtype ts[] = { SMOE_DT_BF16, SMOE_DT_INT8 };
    double best_pack[2] = { 1e30, 1e30 }, best_unpack[2] = { 1e30, 1e30 };
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < 2; k++) {
            double t0 = smoe_now();
            smoe_dtype_pack(ts[k], block, rec, x, n);
            double t1 = smoe_now();
            memcpy(smoe_dtype_tail(ts[k], block, buf, n), rec,
                   (size_t)smoe_dtype_bytes(ts[k], block, n));
            double t2 = smoe_now();
            smoe_dtype_unpack_tail(ts[k], block, buf, n);
            double t3 = smoe_now();
            best_pack[k] = t1 - t0 < best_pack[k] ? t1 - t0 : best_pack[k];
            best_unpack[k] = t3 - t2 < best_unpack[k] ? t3 - t2 : best_unpack[k];
        }
    printf("conversions of %lld fp32 elements (%.0f MiB), best of %d, one thread:\n",
           (long long)n, (double)n * 4 / 1048576.0, runs);
    for (int k = 0; k < 2; k++)
        printf("  %s%s: pack %.2f GB/s, expand in place %.2f GB/s (fp32 bytes per second); "
               "%.4f bytes on the wire per element\n",
               smoe_dtype_name(ts[k]), ts[k] == SMOE_DT_INT8 ? " (block 32)" : "",
               (double)n * 4 / best_pack[k] / 1e9, (double)n * 4 / best_unpack[k] / 1e9,
               (double)smoe_dtype_bytes(ts[k], block, n) / (double)n);
    smoe_free(x);
    smoe_free(buf);
    smoe_free(rec);
    return 0;
}
