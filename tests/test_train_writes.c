/* The parameter dump's writes are checked, in process (train_inproc.h: one
 * rank, no MPI): a dump to /dev/full fails with exit 1 and a line naming
 * the file and the OS error; a dump onto a file system that fills up (the
 * write hook smoe_out_fail_after: ENOSPC) fails naming it "(not created)"
 * and leaves nothing in its directory, not even a temporary. The CLI's own
 * writes (standard output, --trace, --plot) stay in cli_writes.sh.
 * usage: test_train_writes CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "train_inproc.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_train_writes CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    inproc_case k = { argv[1], NULL, NULL, NULL, 0, 1, 1, argv[2], 0, "/dev/full" };
    inproc_result r;
    int rc = inproc_train(&k, &r);
    CHECKF(rc == 1 && inproc_match("/dev/full: cannot write the parameter dump: No space left on "
                                   "device$", r.line),
           "--dump-params /dev/full -> exit %d: '%s'", rc, r.line);
    char tmp[] = "/tmp/test_train_writes.XXXXXX", path[100];
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/p.bin", tmp);
    k.dump_path = path;
    smoe_out_fail_after(0); /* the file system is full from the dump's first byte */
    rc = inproc_train(&k, &r);
    smoe_out_fail_after(-1);
    char want[300];
    snprintf(want, sizeof want, "%s: cannot write the parameter dump: No space left on device "
             "\\(not created\\)", path);
    CHECKF(rc == 1 && inproc_match(want, r.line), "a dump onto a full file system -> exit %d: '%s'",
           rc, r.line);
    CHECKF(entries(tmp) == 0, "%d files left beside the failed dump", entries(tmp));
    /* and with room, the same dump is written */
    rc = inproc_train(&k, &r);
    struct stat st;
    CHECKF(rc == 0 && stat(path, &st) == 0 && st.st_size > 0, "the dump -> exit %d: '%s'", rc,
           r.line);
    unlink(path);
    CHECK(rmdir(tmp) == 0);
    return check_report();
}
