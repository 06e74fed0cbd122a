/* smoe: sharded MoE planning, simulation and training. */
#include "cli.h"

#include "smoe/kernels.h"

#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smoe <command> [options]\n"
            "\n"
            "commands:\n"
            "  plan   resolve logical axis rules and print every weight's sharding\n"
            "         and FSDP gather plan (co-axis and legacy)\n"
            "  sim    predict step time, exposed gather wait and peak HBM of the\n"
            "         schedules on TPU/GPU/CPU profiles; plan prefetch under a budget\n"
            "  train  train a DeepSeek-style MoE over MPI ranks with prefetched\n"
            "         co-axis all-gathers (run under mpirun)\n"
            "\n"
            "run 'smoe <command> --help' for the options of a command,\n"
            "'smoe --version' for the version.\n");
}

/* Every command's output ends here: what stdout could not take (a full
 * disk, /dev/full, a closed pipe) is an error, never a silent exit 0. */
static int done(int rc)
{
    cli_check_stdout();
    return rc;
}

/* Does the command run the BLAS kernels: train, or sim with --calibrate
 * (getopt_long's long options: an unambiguous prefix, before a "--")? */
static int runs_kernels(int argc, char **argv)
{
    if (strcmp(argv[1], "train") == 0)
        return 1;
    if (strcmp(argv[1], "sim") != 0)
        return 0;
    static const char opt[] = "--calibrate";
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) {
        size_t n = strcspn(argv[i], "=");
        if (n >= 4 && n <= sizeof opt - 1 && strncmp(argv[i], opt, n) == 0)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return SMOE_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "plan") == 0)
        return done(cmd_plan(argc - 1, argv + 1));
    /* train and sim --calibrate run the kernels, and a profile must time
     * the kernel training runs: before MPI and OpenBLAS start, pick a
     * proper BLAS kernel if OpenBLAS fell back to a generic one (may
     * re-exec; the other commands skip its cost) */
    if (runs_kernels(argc, argv))
        smoe_blas_select_core(argv);
    if (strcmp(cmd, "sim") == 0)
        return done(cmd_sim(argc - 1, argv + 1));
    if (strcmp(cmd, "train") == 0)
        return done(cmd_train(argc - 1, argv + 1));
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return done(SMOE_EXIT_OK);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("smoe %s\n", SMOE_VERSION);
        return done(SMOE_EXIT_OK);
    }
    fprintf(stderr, "smoe: argument '%s': unknown command (see 'smoe --help')\n", cmd);
    return SMOE_EXIT_USAGE;
}
