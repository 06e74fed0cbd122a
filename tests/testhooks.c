/* smoe_testhooks: the smoe CLI plus this file, which sets the library's
 * test hooks (core.h) from the environment before main runs. The tests
 * that kill a rank in a save, fail a step on one rank or meet an MPI
 * library below the thread level smoe asks for run this binary; the
 * production smoe and the library read no SMOE_TEST_* variable.
 *   SMOE_TEST_MPI_THREAD=single|funneled  MPI_Init_thread asks for that level
 *   SMOE_TEST_KILL_IN_SAVE=N              the last rank dies half-way through
 *                                         the save of step N
 *   SMOE_TEST_STEP_ERROR=N                the last rank fails in step N */
#include "smoe/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t env_step(const char *name)
{
    const char *v = getenv(name);
    int64_t n = 0;
    if (v && (smoe_parse_i64(v, &n) || n < 1)) {
        fprintf(stderr, "smoe_testhooks: %s=%s: expected a positive step\n", name, v);
        exit(2);
    }
    return n;
}

__attribute__((constructor)) static void testhooks_from_env(void)
{
    smoe_test_hooks h;
    memset(&h, 0, sizeof h);
    const char *tl = getenv("SMOE_TEST_MPI_THREAD");
    if (tl && strcmp(tl, "single") == 0)
        h.mpi_thread = SMOE_TEST_THREAD_SINGLE;
    else if (tl && strcmp(tl, "funneled") == 0)
        h.mpi_thread = SMOE_TEST_THREAD_FUNNELED;
    h.kill_in_save = env_step("SMOE_TEST_KILL_IN_SAVE");
    h.step_error = env_step("SMOE_TEST_STEP_ERROR");
    smoe_set_test_hooks(&h);
}
