/* Benchmark: whole-process wall time of a `smoe plan` command line, run
 * repeatedly; prints min / median / max in milliseconds.
 * usage: bench_cmd RUNS smoe plan ARGS... */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_cmd RUNS PROGRAM ARGS...\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    if (runs < 1 || runs > 10000)
        runs = 20;
    double *t = malloc(sizeof *t * (size_t)runs);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    for (int i = 0; i < runs; i++) {
        pid_t pid;
        double t0 = now_ms();
        if (posix_spawn(&pid, argv[2], &fa, NULL, argv + 2, environ) != 0) {
            perror("posix_spawn");
            return 1;
        }
        int st;
        waitpid(pid, &st, 0);
        t[i] = now_ms() - t0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "command failed (status %d)\n", st);
            return 1;
        }
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    printf("runs %d  min %.1f ms  median %.1f ms  max %.1f ms\n", runs, t[0], t[runs / 2],
           t[runs - 1]);
    free(t);
    return 0;
}
