/* Outputs written after long work (a training run's --plot, --trace,
 * --dump-params) checked before it starts: a path that cannot be written
 * is refused up front, not after the last step. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A file can be made in path's directory: one is made there and removed. */
static int dir_writable(const char *path)
{
    char tmp[4200];
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path) + 1 : 0;
    if (snprintf(tmp, sizeof tmp, "%.*s.smoe-probe-XXXXXX", dl, path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return 0;
    }
    int fd = mkstemp(tmp);
    if (fd < 0)
        return 0;
    close(fd);
    unlink(tmp);
    return 1;
}

smoe_status cli_probe_output(const char *path, const char *opt, smoe_err *err)
{
    struct stat st;
    int e = 0;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        e = EISDIR;
    else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* a device, a pipe: as it is */
        e = access(path, W_OK) == 0 ? 0 : errno;
    else if (!dir_writable(path) || (access(path, F_OK) == 0 && access(path, W_OK) != 0))
        e = errno ? errno : EIO;
    if (!e)
        return SMOE_OK;
    char where[4300];
    snprintf(where, sizeof where, "argument '%s %s'", opt, path);
    return smoe_err_in(err, SMOE_EIO, where, "cannot write the file: %s", strerror(e));
}
