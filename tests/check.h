/* Minimal test harness: every CHECK counts as one test; check_report()
 * prints "N passed, N failed" and returns the exit status. */
#ifndef SMOE_TEST_CHECK_H
#define SMOE_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

/* A test whose threads each run a rank's checks (and sum them over the
 * ranks) defines CHECK_PER_THREAD: then every thread counts its own. */
#ifdef CHECK_PER_THREAD
static _Thread_local int check_pass_, check_fail_;
#else
static int check_pass_, check_fail_;
#endif

#define CHECK(cond) CHECKF(cond, "%s", #cond)
#define CHECKF(cond, ...)                                                   \
    do {                                                                    \
        if (cond) {                                                         \
            check_pass_++;                                                  \
        } else {                                                            \
            check_fail_++;                                                  \
            fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);   \
            fprintf(stderr, __VA_ARGS__);                                   \
            fprintf(stderr, "\n");                                          \
        }                                                                   \
    } while (0)
#define CHECK_STR(a, b)                                                     \
    CHECKF(strcmp((a), (b)) == 0, "'%s' != '%s'", (a), (b))
#define CHECK_INT(a, b)                                                     \
    CHECKF((long long)(a) == (long long)(b), "%s = %lld, expected %lld", #a, \
           (long long)(a), (long long)(b))

static inline int check_report(void)
{
    printf("%d passed, %d failed\n", check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}

#endif
