/* Where smoe sim --calibrate writes its profile: a temporary file beside
 * the target, created before anything is measured (a path that cannot be
 * written is refused at once, not after the measurement), renamed over the
 * target once the profile is whole (a failed calibration leaves an older
 * profile as it was); a target that is not a regular file is opened as it
 * is, also before measuring. Rank 0 alone holds the file; every rank gets
 * its verdict. */
#define _GNU_SOURCE
#include "calib_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A path that is there and not a regular file (a device such as
 * /dev/stdout, a FIFO, a symbolic link) is written through as it is:
 * renaming over it would replace the node itself. */
static smoe_status open_as_is(calib_out *o, const char *path, smoe_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return smoe_err_in(err, SMOE_EIO, path, "cannot write the profile: %s",
                           strerror(EISDIR));
    if (!(o->f = fopen(path, "w")))
        return smoe_err_in(err, SMOE_EIO, path, "cannot write the profile: %s",
                           strerror(errno));
    return SMOE_OK;
}

static smoe_status open_tmp(calib_out *o, const char *path, smoe_err *err)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return open_as_is(o, path, err);
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.XXXXXX", path) >= sizeof o->tmp)
        return smoe_err_in(err, SMOE_EINVAL, path, "the path is too long");
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        int e = errno;
        o->tmp[0] = 0;
        return smoe_err_in(err, SMOE_EIO, path, "cannot write the profile: %s", strerror(e));
    }
    mode_t mask = umask(0); /* the mode a plain fopen would have given */
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        return smoe_err_in(err, SMOE_EIO, path, "cannot write the profile: %s", strerror(e));
    }
    return SMOE_OK;
}

smoe_status calib_out_open(smoe_rt *rt, const char *path, calib_out *o, smoe_err *err)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    smoe_status s = SMOE_OK;
    if (smoe_rt_rank(rt) == 0 && path)
        s = open_tmp(o, path, err);
    else if (smoe_rt_rank(rt) == 0)
        o->f = stdout;
    s = smoe_rt_agree_err(rt, s, err);
    return s ? calib_out_close(o, s, err) : s;
}

smoe_status calib_out_close(calib_out *o, smoe_status s, smoe_err *err)
{
    int e = 0;
    errno = 0;
    if (o->f && !s && (ferror(o->f) || fflush(o->f) != 0))
        e = errno ? errno : EIO;
    if (o->f && o->path && fclose(o->f) != 0 && !e)
        e = errno ? errno : EIO;
    if (!s && !e && o->tmp[0] && rename(o->tmp, o->path) != 0)
        e = errno;
    if ((s || e) && o->tmp[0])
        unlink(o->tmp);
    o->f = NULL;
    if (s || !e)
        return s;
    return smoe_err_in(err, SMOE_EIO, o->path ? o->path : "standard output",
                       "cannot write the profile: %s", strerror(e));
}
