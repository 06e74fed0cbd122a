/* The sgemm census of bench_compute --gemms (gemm_census.c): per-shape CPU
 * time of the cblas_sgemm calls made while it is on. Single-threaded. */
#ifndef SMOE_BENCH_GEMM_CENSUS_H
#define SMOE_BENCH_GEMM_CENSUS_H

/* Record the calls from now on (yes = 1) or stop recording (0). */
void gemm_census_on(int yes);
/* Print the census of `steps` recorded steps: step_cpu and model_flops are
 * their CPU seconds and counted model FLOPs in all, sgemm_rate (GFLOP/s)
 * the reference every shape is compared with. */
void gemm_census_print(double step_cpu, double model_flops, int steps, double sgemm_rate);

#endif
