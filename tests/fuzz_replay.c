/* Replays fuzz inputs through the fuzz targets' code (fuzz/targets.c) in a
 * normal build: the seed corpora and every crash the fuzzers ever found
 * (tests/data/fuzz-regress/<target>/), so a fixed bug stays fixed without
 * clang or libFuzzer. A crash, a sanitizer report (sanitizer builds) or a
 * broken invariant (abort) fails the test.
 *
 * usage: fuzz_replay TARGET PATH...        files, or directories (recursive)
 *        fuzz_replay --all REGRESS CORPUS  every target: REGRESS/<target>
 *                                          (may be missing or empty) and
 *                                          CORPUS/<target> (must have files)
 * Prints "N passed, N failed" (files replayed, files unreadable). */
#define _POSIX_C_SOURCE 200809L
#include "../fuzz/targets.h"
#include "smoe/core.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int g_pass, g_fail;

static void replay_file(smoe_fuzz_fn fn, const char *path)
{
    char *buf;
    size_t n;
    smoe_err err;
    if (smoe_read_file_max(path, SMOE_MAX_TRACE_BYTES, &buf, &n, &err)) {
        fprintf(stderr, "FAIL: %s: %s\n", path, err.msg);
        g_fail++;
        return;
    }
    fn((const uint8_t *)buf, n);
    smoe_free(buf);
    g_pass++;
}

/* Replay a file or every file under a directory (sorted, recursive);
 * returns the number of files replayed, or -1 if `path` does not exist. */
static int replay_path(smoe_fuzz_fn fn, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        replay_file(fn, path);
        return 1;
    }
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "FAIL: cannot list %s: %s\n", path, strerror(errno));
        g_fail++;
        return 0;
    }
    int files = 0;
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        if (name[0] != '.') { /* skips . .. and hidden files (.gitkeep) */
            size_t len = strlen(path) + strlen(name) + 2;
            char *sub = malloc(len);
            if (sub) {
                snprintf(sub, len, "%s/%s", path, name);
                int k = replay_path(fn, sub);
                files += k > 0 ? k : 0;
                free(sub);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return files;
}

int main(int argc, char **argv)
{
    static const char *const k_targets[] = { "yaml", "overrides", "rules",
                                             "params_json", "manifest", "hwfile", "scenario",
                                             "schedule", "trace" };
    if (argc == 4 && strcmp(argv[1], "--all") == 0) {
        for (size_t t = 0; t < sizeof k_targets / sizeof k_targets[0]; t++) {
            smoe_fuzz_fn fn = smoe_fuzz_target(k_targets[t]);
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[2], k_targets[t]);
            int regress = replay_path(fn, path);
            snprintf(path, sizeof path, "%s/%s", argv[3], k_targets[t]);
            int seeds = replay_path(fn, path);
            if (seeds <= 0) {
                fprintf(stderr, "FAIL: no seed corpus in %s\n", path);
                g_fail++;
            }
            printf("%-12s %d regression input(s), %d seed(s)\n", k_targets[t],
                   regress > 0 ? regress : 0, seeds > 0 ? seeds : 0);
        }
    } else if (argc >= 3 && smoe_fuzz_target(argv[1])) {
        smoe_fuzz_fn fn = smoe_fuzz_target(argv[1]);
        for (int i = 2; i < argc; i++)
            if (replay_path(fn, argv[i]) < 0) {
                fprintf(stderr, "FAIL: %s does not exist\n", argv[i]);
                g_fail++;
            }
    } else {
        fprintf(stderr, "usage: fuzz_replay yaml|overrides|rules|params_json|manifest|hwfile|scenario|schedule|"
                        "trace PATH...\n"
                        "       fuzz_replay --all REGRESS_DIR CORPUS_DIR\n");
        return 2;
    }
    smoe_fuzz_cleanup();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
