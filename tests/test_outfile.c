/* Output files written whole or not at all (core's smoe_out), and the
 * profile that says it is whole (config's `complete: true`):
 * - a new file gets 0666 less the umask; a rewrite keeps the file's mode;
 *   no temporary is left beside it;
 * - two writers of one path, interleaved by the test: each writes its own
 *   temporary and commits it; while they write the path is the old file
 *   byte for byte; after, it is the later commit's whole, both report
 *   success and no temporary is left;
 * - a write that fails (the write hook: ENOSPC after some bytes), an abort
 *   and an allocation that fails leave an existing file byte-identical
 *   and no temporary; the error names the path and the OS error;
 * - /dev/null is written in place (still the device); a symbolic link
 *   stays a link and its target is replaced;
 * - a cpu profile written by smoe_hw_write loads whole, and cut at any
 *   line boundary it is refused (naming the file: "incomplete profile"
 *   once past its kind), where before such a cut loaded as a profile
 *   without its later keys.
 * usage: test_outfile */
#define _GNU_SOURCE
#include "check.h"
#include "smoe/config.h"
#include "smoe/core.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64] = "/tmp/smoe_outfile_XXXXXX";

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECKF(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot set up %s", path);
}

/* The file's text (static buffer), "" when absent. */
static const char *text_of(const char *path)
{
    static char buf[65536];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Files in dir beside `keep` (a temporary left behind) */
static int others_in_dir(const char *keep1, const char *keep2)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep1) &&
             strcmp(e->d_name, keep2);
    if (d)
        closedir(d);
    return n;
}

static smoe_out *open_out(const char *path)
{
    smoe_out *o = NULL;
    smoe_err err;
    CHECKF(smoe_out_open(path, "the test file", &o, &err) == SMOE_OK, "open %s: %s", path,
           err.msg);
    return o;
}

static void test_modes(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/new.txt", dir);
    mode_t old = umask(027);
    smoe_err err;
    CHECK(smoe_out_write_file(p, "the test file", "one\n", 4, &err) == SMOE_OK);
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0640);
    CHECK_STR(text_of(p), "one\n");
    chmod(p, 0600);
    CHECK(smoe_out_write_file(p, "the test file", "two\n", 4, &err) == SMOE_OK);
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK_STR(text_of(p), "two\n");
    umask(old);
    CHECK_INT(others_in_dir("new.txt", ""), 0);
    unlink(p);
}

/* Two writers of one path, A and B, in the order the test chooses. */
static void test_two_writers(int b_first)
{
    char p[128];
    snprintf(p, sizeof p, "%s/x.bin", dir);
    put(p, "old\n");
    smoe_out *a = open_out(p), *b = open_out(p);
    if (!a || !b) {
        smoe_out_abort(a);
        smoe_out_abort(b);
        return;
    }
    fputs("from A, first half\n", smoe_out_file(a));
    fputs("from B, whole\n", smoe_out_file(b));
    fputs("from A, second half\n", smoe_out_file(a));
    CHECK_STR(text_of(p), "old\n"); /* while both write */
    CHECK_INT(others_in_dir("x.bin", ""), 2); /* each its own temporary */
    smoe_err ea, eb;
    smoe_status sa, sb;
    if (b_first) {
        sb = smoe_out_commit(b, &eb);
        CHECK_STR(text_of(p), "from B, whole\n");
        sa = smoe_out_commit(a, &ea);
    } else {
        sa = smoe_out_commit(a, &ea);
        CHECK_STR(text_of(p), "from A, first half\nfrom A, second half\n");
        sb = smoe_out_commit(b, &eb);
    }
    CHECKF(sa == SMOE_OK, "writer A: %s", ea.msg);
    CHECKF(sb == SMOE_OK, "writer B: %s", eb.msg);
    CHECK_STR(text_of(p), b_first ? "from A, first half\nfrom A, second half\n"
                                  : "from B, whole\n");
    CHECK_INT(others_in_dir("x.bin", ""), 0);
    unlink(p);
}

/* An existing file and a rewrite that fails `how`: 0 a write (ENOSPC
 * after 100 bytes), 1 the writer gives up, 2 an allocation. */
static void test_failed_rewrite(int how)
{
    char p[128], good[4096], big[10000];
    snprintf(p, sizeof p, "%s/good.yml", dir);
    for (size_t i = 0; i < sizeof good - 1; i++)
        good[i] = (char)('a' + i % 26);
    good[sizeof good - 1] = 0;
    put(p, good);
    memset(big, 'z', sizeof big);
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_status s;
    if (how == 0) {
        smoe_out_fail_after(100);
        s = smoe_out_write_file(p, "the test file", big, sizeof big, &err);
        smoe_out_fail_after(-1);
        CHECKF(s == SMOE_EIO && strcmp(err.where, p) == 0 &&
                   strstr(err.msg, "cannot write the test file: No space left on device (the "
                                   "file is unchanged)"),
               "%s: %s", err.where, err.msg);
    } else if (how == 1) {
        smoe_out *o = open_out(p);
        if (o)
            fwrite(big, 1, sizeof big, smoe_out_file(o));
        smoe_out_abort(o);
    } else {
        for (long n = 1; n <= 4; n++) { /* every allocation of the open */
            smoe_alloc_fail_after(n);
            smoe_out *o = NULL;
            s = smoe_out_open(p, "the test file", &o, &err);
            smoe_alloc_fail_after(0);
            if (s == SMOE_OK) {
                smoe_out_abort(o);
                break;
            }
            CHECKF(s == SMOE_ENOMEM && o == NULL, "allocation %ld: %s", n, err.msg);
        }
    }
    CHECKF(strcmp(text_of(p), good) == 0, "rewrite %d: the old file changed", how);
    CHECKF(others_in_dir("good.yml", "") == 0, "rewrite %d left a temporary", how);
    unlink(p);
}

static void test_special_files(void)
{
    smoe_err err;
    CHECK(smoe_out_write_file("/dev/null", "the test file", "x", 1, &err) == SMOE_OK);
    struct stat sb;
    CHECK(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    char target[128], link[128];
    snprintf(target, sizeof target, "%s/target.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    put(target, "old\n");
    CHECK(symlink("target.txt", link) == 0);
    CHECK(smoe_out_write_file(link, "the test file", "new\n", 4, &err) == SMOE_OK);
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK_STR(text_of(target), "new\n");
    CHECK_INT(others_in_dir("target.txt", "link.txt"), 0);
    unlink(link);
    unlink(target);
    /* a directory that does not exist: the path and the OS error */
    char p[128];
    snprintf(p, sizeof p, "%s/no/such.txt", dir);
    CHECK(smoe_out_write_file(p, "the test file", "x", 1, &err) == SMOE_EIO);
    CHECKF(strcmp(err.where, p) == 0 && strstr(err.msg, "No such file or directory (not created)"),
           "%s: %s", err.where, err.msg);
    size_t base;
    CHECK(smoe_out_is_temp("LATEST.tmp.aB3xYz", &base) && base == 6);
    CHECK(!smoe_out_is_temp("LATEST.tmp", NULL) && !smoe_out_is_temp(".tmp.aB3xYz", NULL) &&
          !smoe_out_is_temp("LATEST", NULL) && !smoe_out_is_temp("a.tmp.abc", NULL));
}

/* A calibrated profile, and every cut of it at a line boundary. */
static void test_profile_cuts(void)
{
    smoe_hw hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "cpu-mpi");
    hw.kind = SMOE_HW_CPU;
    snprintf(hw.cpu.progress, sizeof hw.cpu.progress, "calls");
    hw.devices_per_chip = 1, hw.peak_flops = 9e10, hw.hbm_bytes = 6e9, hw.hbm_bandwidth = 1e10;
    hw.ici_bandwidth = 3e9, hw.ici_links = 1, hw.ici_latency = 2e-5, hw.devices_per_node = 4;
    hw.dcn_bandwidth = 3e9, hw.dcn_latency = 2e-5, hw.collective_engines = 2;
    hw.cpu.a2a_bandwidth = 2e9, hw.cpu.compute_scale = 1.7, hw.cpu.sync_skew = 3e-4;
    hw.cpu.core_share = 0.5;
    char p[128], text[8192];
    snprintf(p, sizeof p, "%s/cpu.yml", dir);
    smoe_err err;
    FILE *f = fopen(p, "w");
    CHECK(f && smoe_hw_write(f, &hw, NULL, "# spread peak_flops 0.010 share 0.50\n", &err) == 0);
    if (f)
        fclose(f);
    snprintf(text, sizeof text, "%s", text_of(p));
    smoe_hw back;
    CHECKF(smoe_hw_load_text(text, p, &back, &err) == SMOE_OK, "whole: %s", err.msg);
    int cuts = 0, refused = 0, named = 0;
    for (char *nl = strchr(text, '\n'); nl && nl[1]; nl = strchr(nl + 1, '\n')) {
        char keep = nl[1];
        nl[1] = 0; /* the text up to and with this line */
        smoe_status s = smoe_hw_load_text(text, p, &back, &err);
        cuts++;
        refused += s == SMOE_EINVAL;
        named += s && strcmp(err.where, p) == 0 && strstr(err.msg, "incomplete profile");
        CHECKF(s != SMOE_OK, "cut after %zu bytes: loaded", (size_t)(nl + 1 - text));
        nl[1] = keep;
    }
    CHECKF(cuts > 15 && refused == cuts && named == cuts - 1, "%d cuts, %d refused, %d named",
           cuts, refused, named);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_outfile: cannot make a directory in /tmp\n");
        return 1;
    }
    test_modes();
    test_two_writers(0);
    test_two_writers(1);
    for (int how = 0; how < 3; how++)
        test_failed_rewrite(how);
    test_special_files();
    test_profile_cuts();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_report();
}
