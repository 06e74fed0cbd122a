/* Benchmark: model FLOP/s of one rank's training step inside compute
 * (embed, layers, head, backward: what `smoe train` counts as compute, with
 * the expert exchange a local copy) against the single-core sgemm rate at
 * n = 512, measured in the same process and interleaved round by round, so
 * a change of the machine's load moves both alike. Each round times one
 * model step (fwd + bwd) and then three 512^3 sgemms; the figures are
 * medians over the rounds with the quartiles, and the ratio of every round
 * (model rate / that round's sgemm median) is summarised the same way.
 * Both are timed by this thread's CPU time (the figure that load cannot
 * bias: a long step loses time slices to other processes that a short
 * sgemm does not) and by wall time.
 * Figures only; nothing here asserts on time.
 *
 * With --gemms the timed rounds also take a census of the step's sgemm
 * calls (gemm_census.c): each shape's rate against the rounds' median
 * sgemm, the time outside sgemm, and the ratio the step would reach with
 * no time outside sgemm, i.e. the ceiling the GEMM shapes alone set.
 *
 * usage: bench_compute tiny|wide [ROUNDS] [--gemms]
 *        (default 15 rounds, 1 warm-up)
 *   tiny: the bundled 'tiny' model of smoe train's main job (emb 128, 4
 *         heads, lora 32, nope/rope/v 16/8/16, mlp 256, moe_mlp 64,
 *         8 experts top-2 + 1 shared, 1 dense + 3 MoE layers, vocab 256),
 *         4 sequences of 128 (per_device_batch_size = 4);
 *   wide: the same at emb 512, 8 heads, lora 128, nope/rope/v 64/32/64,
 *         mlp 1024, moe_mlp 256, 4 sequences of 256.
 * Both on one rank (ep = 1: all 8 experts local, the routed rows of the
 * main job's per-rank batch). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "bench_stats.h"
#include "../tests/model_testlib.h"
#include "gemm_census.h"
#include "smoe/kernels.h"
#include "smoe/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static smoe_model_cfg bench_cfg(int wide)
{
    smoe_model_cfg c;
    memset(&c, 0, sizeof c);
    c.emb = wide ? 512 : 128;
    c.heads = wide ? 8 : 4;
    c.q_lora = wide ? 128 : 32;
    c.kv_lora = wide ? 128 : 32;
    c.qk_nope = wide ? 64 : 16;
    c.qk_rope = wide ? 32 : 8;
    c.v_head = wide ? 64 : 16;
    c.mlp = wide ? 1024 : 256;
    c.moe_mlp = wide ? 256 : 64;
    c.experts = 8;
    c.topk = 2;
    c.shared = 1;
    c.vocab = 256;
    c.n_dense = 1;
    c.n_moe = 3;
    c.routed_scale = 1.0f;
    c.eps = 1e-6f;
    c.rope_theta = 10000.0f;
    c.rope_halves = 1; /* MaxText's RotaryEmbedding, as smoe train runs it */
    c.seq = wide ? 256 : 128;
    c.batch = 4;
    c.ep = 1;
    return c;
}

/* This thread's CPU seconds: on a loaded machine the scheduler shares the
 * cores, so a 1 s step loses time slices that a 2 ms sgemm never sees; CPU
 * time counts only the time the code ran. */

/* GFLOP/s of one 512^3 sgemm, by CPU time (cpu = 1) or wall time. */
static double sgemm512(float *a, float *b, float *c, int cpu)
{
    const int64_t n = 512;
    double t0 = cpu ? smoe_thread_cpu() : smoe_now();
    smoe_gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    return 2.0 * (double)(n * n * n) / ((cpu ? smoe_thread_cpu() : smoe_now()) - t0) / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "tiny") && strcmp(argv[1], "wide"))) {
        fprintf(stderr, "usage: bench_compute tiny|wide [ROUNDS] [--gemms]\n");
        return 2;
    }
    const int wide = strcmp(argv[1], "wide") == 0;
    const int rounds = argc > 2 ? atoi(argv[2]) : 15;
    const int census = argc > 3 && strcmp(argv[3], "--gemms") == 0;
    if (argc > 4 || (argc > 3 && !census)) {
        fprintf(stderr, "bench_compute: unknown argument '%s'\n", argv[argc > 4 ? 4 : 3]);
        return 2;
    }
    if (rounds < 1 || rounds > 10000) {
        fprintf(stderr, "bench_compute: ROUNDS must be in [1, 10000]\n");
        return 2;
    }
    smoe_blas_info bi;
    smoe_blas_select_core(argv);
    smoe_blas_init(1, &bi);

    smoe_model_cfg c = bench_cfg(wide);
    smoe_model *m = NULL;
    smoe_err err;
    if (smoe_model_new(&c, &m, &err)) {
        char buf[600];
        fprintf(stderr, "bench_compute: %s\n", smoe_err_format(&err, buf, sizeof buf));
        return 1;
    }
    rng r = { 7 };
    wset w, g;
    wset_alloc(&w, &c);
    wset_alloc(&g, &c);
    wset_random(&w, &r);
    const int64_t T = c.batch * c.seq;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    float *ga = malloc(sizeof(float) * 512 * 512), *gb = malloc(sizeof(float) * 512 * 512),
          *gc = malloc(sizeof(float) * 512 * 512);
    /* per round, [0] by CPU time, [1] by wall time */
    double *mf[2], *sg[2], *ra[2];
    for (int q = 0; q < 2; q++) {
        mf[q] = malloc(sizeof(double) * (size_t)rounds);
        sg[q] = malloc(sizeof(double) * (size_t)rounds);
        ra[q] = malloc(sizeof(double) * (size_t)rounds);
        if (!mf[q] || !sg[q] || !ra[q])
            tok = NULL;
    }
    if (!tok || !tgt || !ga || !gb || !gc) {
        fprintf(stderr, "bench_compute: out of memory\n");
        return 1;
    }
    random_tokens(tok, T, c.vocab, &r);
    random_tokens(tgt, T, c.vocab, &r);
    fill(ga, 512 * 512, &r, 0.0, 1.0);
    fill(gb, 512 * 512, &r, 0.0, 1.0);
    job j;
    job_init(&j, m, &w, 0, &g, tok, tgt, 1.0f / (float)T);
    const double flops = 3.0 * smoe_model_fwd_flops_per_token(&c) * (double)T;

    double census_cpu = 0.0; /* CPU seconds of the timed steps */
    for (int k = -1; k < rounds; k++) { /* round -1: warm-up */
        gemm_census_on(census && k >= 0);
        double c0 = smoe_thread_cpu(), t0 = smoe_now();
        job_run(&j);
        double dc = smoe_thread_cpu() - c0, dt = smoe_now() - t0;
        gemm_census_on(0);
        if (k >= 0)
            census_cpu += dc;
        if (j.st) {
            char buf[600];
            fprintf(stderr, "bench_compute: %s\n", smoe_err_format(&j.err, buf, sizeof buf));
            return 1;
        }
        double s3[2][3];
        for (int i = 0; i < 3; i++) {
            s3[0][i] = sgemm512(ga, gb, gc, 1);
            s3[1][i] = sgemm512(ga, gb, gc, 0);
        }
        if (k < 0)
            continue;
        for (int q = 0; q < 2; q++) {
            qsort(s3[q], 3, sizeof(double), bench_cmp_double);
            mf[q][k] = flops / (q ? dt : dc) / 1e9;
            sg[q][k] = s3[q][1];
            ra[q][k] = mf[q][k] / sg[q][k];
        }
    }
    printf("%s: emb %lld, %lld tokens, %.3f GFLOP per step, BLAS core %s, %d rounds\n",
           argv[1], (long long)c.emb, (long long)T, flops / 1e9, bi.corename, rounds);
    for (int q = 0; q < 2; q++) {
        double qm[3], qs[3], qr[3];
        bench_quartiles(mf[q], rounds, qm);
        bench_quartiles(sg[q], rounds, qs);
        bench_quartiles(ra[q], rounds, qr);
        printf("  by %s time: model FLOP/s in compute %7.2f GFLOP/s [%.2f-%.2f], "
               "sgemm n=512 %7.2f [%.2f-%.2f], ratio %.3f [%.3f-%.3f]\n",
               q ? "wall" : "CPU ", qm[1], qm[0], qm[2], qs[1], qs[0], qs[2], qr[1], qr[0],
               qr[2]);
        if (census && q == 0)
            gemm_census_print(census_cpu, flops * rounds, rounds, qs[1]);
        free(mf[q]), free(sg[q]), free(ra[q]);
    }
    job_free(&j);
    wset_free(&w);
    wset_free(&g);
    smoe_model_free(m);
    free(tok), free(tgt), free(ga), free(gb), free(gc);
    return 0;
}
