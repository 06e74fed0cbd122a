/* Output files written whole or not at all: the one way smoe writes a file.
 *
 * smoe_out_open creates a temporary beside the destination
 * (PATH.tmp.XXXXXX, mkstemp: two writers of one path never share a
 * temporary); the caller writes through smoe_out_file; smoe_out_commit
 * flushes and fsyncs it, renames it onto PATH and fsyncs the directory.
 * Until the rename PATH is the old file whole (or absent), after it the
 * new one whole: a write that fails (a full disk), a caller that gives up
 * (smoe_out_abort) or a killed process never leaves a truncated PATH. Of
 * two writers of one path each renames its own complete file, and PATH
 * ends as the later rename's.
 *
 * The temporary takes PATH's mode (a new file: 0666 less the umask, as
 * fopen gives). A symbolic link is followed: its target is replaced. A
 * PATH that exists and is not a regular file (/dev/null, a FIFO, a
 * terminal) is written in place: there is nothing to replace.
 *
 * Write errors are recorded as they happen (the first errno), so the
 * message names the OS error even when stdio buffered the failed write.
 * Not thread-safe per handle; handles are independent (the test hook
 * smoe_out_fail_after is process-global, set before any writer runs). */
#define _GNU_SOURCE
#include "smoe/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp."

struct smoe_out {
    FILE *f;
    int fd;
    int direct;   /* written in place: not a regular file */
    int existed;  /* PATH was a regular file before */
    mode_t mode;  /* of the file written */
    int err;      /* the first write error's errno; 0: none */
    char *name;   /* PATH as given: named in messages */
    char *path;   /* what is replaced: PATH, or a link's target */
    char *tmp;    /* the temporary; NULL when direct or renamed */
    char what[64];
};

static long g_fail_after = -1; /* bytes until writes fail; -1: never */

void smoe_out_fail_after(long bytes) { g_fail_after = bytes; }

/* The stdio write callback: every byte goes to the fd, the first error is
 * kept (later writes fail at once: a full disk is not retried per block). */
static ssize_t out_write(void *cookie, const char *buf, size_t n)
{
    smoe_out *o = cookie;
    size_t done = 0;
    while (!o->err && done < n) {
        size_t k = n - done;
        if (g_fail_after >= 0 && (size_t)g_fail_after < k)
            k = (size_t)g_fail_after;
        ssize_t w = k ? write(o->fd, buf + done, k) : 0;
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            o->err = w < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)w;
        if (g_fail_after >= 0)
            g_fail_after -= (long)w;
    }
    return (ssize_t)done; /* short: stdio marks the stream in error */
}

/* 0666 less the process's umask, read (setting it to read it would race
 * with other threads creating files); 022 where /proc is not mounted. */
static mode_t new_file_mode(void)
{
    unsigned mask = 022;
    char line[128];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Umask: %o", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return (mode_t)(0666 & ~mask);
}

static smoe_status fail(const smoe_out *o, int e, smoe_err *err)
{
    return smoe_err_in(err, SMOE_EIO, o->name, "cannot write %s: %s%s", o->what, strerror(e),
                       o->direct    ? ""
                       : o->existed ? " (the file is unchanged)"
                                    : " (not created)");
}

/* What is replaced (a link's target) and how: in place or by rename. */
static smoe_status resolve(smoe_out *o, const char *path, smoe_err *err)
{
    struct stat sb;
    char *real = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) ? realpath(path, NULL) : NULL;
    o->name = smoe_strdup(path);
    o->path = smoe_strdup(real ? real : path);
    free(real); /* realpath's, from malloc */
    if (!o->name || !o->path)
        return smoe_err_in(err, SMOE_ENOMEM, path, "out of memory writing %s", o->what);
    o->mode = new_file_mode();
    if (stat(o->path, &sb) == 0) {
        o->direct = !S_ISREG(sb.st_mode);
        o->existed = !o->direct;
        if (o->existed)
            o->mode = sb.st_mode & 07777;
    }
    return SMOE_OK;
}

static smoe_status open_temp(smoe_out *o, smoe_err *err)
{
    size_t n = strlen(o->path);
    o->tmp = smoe_malloc(n + sizeof TMP_SUFFIX + 6);
    if (!o->tmp)
        return smoe_err_in(err, SMOE_ENOMEM, o->name, "out of memory writing %s", o->what);
    snprintf(o->tmp, n + sizeof TMP_SUFFIX + 6, "%s" TMP_SUFFIX "XXXXXX", o->path);
    if ((o->fd = mkostemp(o->tmp, O_CLOEXEC)) < 0) {
        int e = errno;
        smoe_free(o->tmp);
        o->tmp = NULL; /* nothing to remove */
        return fail(o, e, err);
    }
    return fchmod(o->fd, o->mode) == 0 ? SMOE_OK : fail(o, errno, err);
}

smoe_status smoe_out_open(const char *path, const char *what, smoe_out **out, smoe_err *err)
{
    *out = NULL;
    smoe_out *o = smoe_calloc(1, sizeof *o);
    if (!o)
        return smoe_err_in(err, SMOE_ENOMEM, path, "out of memory writing %s", what);
    o->fd = -1;
    snprintf(o->what, sizeof o->what, "%s", what);
    smoe_status s = resolve(o, path, err);
    if (!s && o->direct && (o->fd = open(o->path, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0)
        s = fail(o, errno, err);
    if (!s && !o->direct)
        s = open_temp(o, err);
    cookie_io_functions_t io = { NULL, out_write, NULL, NULL };
    if (!s && !(o->f = fopencookie(o, "w", io)))
        s = fail(o, errno ? errno : ENOMEM, err);
    if (s) {
        smoe_out_abort(o);
        return s;
    }
    *out = o;
    return SMOE_OK;
}

FILE *smoe_out_file(const smoe_out *o) { return o->f; }

int smoe_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc == 0 || e == EINVAL ? 0 : -1; /* EINVAL: a file system without it */
}

/* The directory holding o->path, synced after the rename. */
static int sync_parent(const smoe_out *o)
{
    char *dir = smoe_strdup(o->path);
    if (!dir)
        return 0; /* the rename is done; only its durability is unchecked */
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = 0; /* "/x" -> "/" */
    int rc = smoe_sync_dir(slash ? dir : ".");
    smoe_free(dir);
    return rc;
}

smoe_status smoe_out_commit(smoe_out *o, smoe_err *err)
{
    errno = 0;
    int e = fflush(o->f) != 0 || ferror(o->f) ? (o->err ? o->err : errno ? errno : EIO) : 0;
    if (!e && !o->direct && fsync(o->fd) != 0)
        e = errno;
    fclose(o->f); /* the cookie's FILE: the fd stays open */
    o->f = NULL;
    if (close(o->fd) != 0 && !e)
        e = errno;
    o->fd = -1;
    if (!e && o->tmp && rename(o->tmp, o->path) != 0)
        e = errno;
    smoe_status s = e ? fail(o, e, err) : SMOE_OK;
    if (!e && o->tmp) {
        smoe_free(o->tmp);
        o->tmp = NULL; /* renamed: nothing to remove */
        if (sync_parent(o) != 0)
            s = smoe_err_in(err, SMOE_EIO, o->name,
                            "%s was written, but its directory could not be synced: %s",
                            o->what, strerror(errno));
    }
    smoe_out_abort(o);
    return s;
}

void smoe_out_abort(smoe_out *o)
{
    if (!o)
        return;
    o->err = o->err ? o->err : ECANCELED; /* what stdio still holds is not written */
    if (o->f)
        fclose(o->f);
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp)
        unlink(o->tmp);
    smoe_free(o->tmp);
    smoe_free(o->name);
    smoe_free(o->path);
    smoe_free(o);
}

smoe_status smoe_out_finish(smoe_out *o, smoe_status s, smoe_err *err)
{
    if (!o)
        return s;
    if (s && (s != SMOE_EIO || !ferror(o->f))) { /* not a failed write */
        smoe_out_abort(o);
        return s;
    }
    return smoe_out_commit(o, err); /* fails where the writing did, naming the OS error */
}

smoe_status smoe_out_write_file(const char *path, const char *what, const void *data, size_t n,
                                smoe_err *err)
{
    smoe_out *o;
    smoe_status s = smoe_out_open(path, what, &o, err);
    if (s)
        return s;
    fwrite(data, 1, n, o->f); /* a failure is the commit's */
    return smoe_out_commit(o, err);
}

int smoe_out_is_temp(const char *name, size_t *base_len)
{
    size_t n = strlen(name), k = sizeof TMP_SUFFIX - 1 + 6; /* ".tmp.XXXXXX" */
    if (n <= k || strncmp(name + n - k, TMP_SUFFIX, sizeof TMP_SUFFIX - 1) != 0)
        return 0;
    if (base_len)
        *base_len = n - k;
    return 1;
}
