/* The checkpoint directory as a whole: one run owns it.
 *
 * - A run has an id (32 hex digits, random), recorded in every manifest it
 *   writes; a resumed run keeps the id of the checkpoint it resumed.
 * - A fresh run (no --resume) into a directory that already holds
 *   checkpoints is refused before step 1; nothing is ever deleted for it.
 * - Rank 0 holds an advisory lock (flock) on the directory for the job's
 *   lifetime, so a second job on the same directory stops at start.
 * - Every rank writes (and removes) a probe file before step 1: a read-only
 *   or unwritable directory is found before any step runs.
 * - Pruning keeps the newest N checkpoints of this run only, never the one
 *   just written and never another run's.
 * - What an interrupted save leaves (step_N.tmp/, LATEST's temporary, a
 *   replaced step_N.stale/, a probe file) is removed when a run opens the
 *   directory, under the lock, and named: on a full disk it holds the space
 *   the next save needs. A save that fails removes its own step_N.tmp/.
 * - LATEST names the checkpoint to resume; one that names a missing or
 *   incomplete checkpoint is an error naming both (no silent fallback); a
 *   directory without LATEST resumes from its newest complete checkpoint and
 *   says so. */
#define _GNU_SOURCE
#include "ckpt_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROBE_PREFIX ".probe-rank"

struct smoe_ckpt {
    int lock_fd; /* rank 0: the directory, flock'ed; -1 elsewhere */
};

/* ---- files ---- */
smoe_status ck_io_err(smoe_err *err, const char *path, const char *what)
{
    return smoe_err_in(err, SMOE_EIO, path, "%s: %s", what, strerror(errno));
}

int ck_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static smoe_status mkdirs(const char *path, smoe_err *err)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--checkpoint-dir'",
                           n ? "the path is too long" : "is empty: name a directory");
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ck_io_err(err, path, "cannot create the checkpoint directory");
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return ck_io_err(err, path, "cannot create the checkpoint directory");
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return smoe_err_in(err, SMOE_EIO, path, "is not a directory");
    return SMOE_OK;
}

int ck_remove_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    char f[4400];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        unlink(f);
    }
    closedir(d);
    return rmdir(path);
}

int64_t ck_step_of(const char *name)
{
    if (strncmp(name, "step_", 5) != 0 || strlen(name) != 13 || strspn(name + 5, "0123456789") != 8)
        return -1;
    return atoll(name + 5);
}

static int has_manifest(const char *dir, const char *name)
{
    char path[4400];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The newest step_N/ of dir that holds a manifest ("" if none). */
static void newest_complete(const char *dir, char name[32])
{
    name[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    int64_t best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t k = ck_step_of(e->d_name);
        if (k > best && has_manifest(dir, e->d_name)) {
            best = k;
            snprintf(name, 32, "%s", e->d_name);
        }
    }
    closedir(d);
}

smoe_status ck_find(const char *dir, char name[32], char *note, size_t note_cap,
                    smoe_err *err)
{
    char path[4400], line[128] = "", newest[32];
    name[0] = 0;
    note[0] = 0;
    newest_complete(dir, newest);
    snprintf(path, sizeof path, "%s/LATEST", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT)
            return ck_io_err(err, path, "cannot read");
        if (newest[0])
            snprintf(note, note_cap,
                     "%s has no LATEST file: resuming from its newest complete checkpoint %s",
                     dir, newest);
        snprintf(name, 32, "%s", newest);
        return SMOE_OK;
    }
    if (!fgets(line, sizeof line, f))
        line[0] = 0;
    fclose(f);
    line[strcspn(line, "\r\n")] = 0;
    char shown[200]; /* the file's bytes, any of them, escaped */
    if (ck_step_of(line) < 0)
        return smoe_err_in(err, SMOE_EIO, path,
                           "does not name a checkpoint (expected step_NNNNNNNN, found '%s'); "
                           "%s%s", smoe_err_quote(line, 40, shown, sizeof shown),
                           newest[0] ? "the newest complete checkpoint is " : "there is no "
                                                                                "complete checkpoint",
                           newest);
    if (!has_manifest(dir, line))
        return smoe_err_in(err, SMOE_EIO, path,
                           "names %s, but %s/%s is missing or incomplete (no manifest.json); "
                           "%s%s%s", line, dir, line,
                           newest[0] ? "the newest complete checkpoint is " : "there is no "
                                                                                "complete checkpoint",
                           newest,
                           newest[0] ? ": write its name into LATEST to resume from it" : "");
    snprintf(name, 32, "%s", line);
    return SMOE_OK;
}

void ck_prune(const char *dir, const char *run_id, int64_t newest, int keep)
{
    if (keep <= 0)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    enum { CAP = 4096 };
    int64_t *steps = smoe_malloc(sizeof *steps * CAP);
    int n = 0;
    struct dirent *e;
    char path[4400], id[33];
    while (steps && (e = readdir(d)) != NULL && n < CAP) {
        int64_t k = ck_step_of(e->d_name);
        if (k < 0 || k >= newest)
            continue; /* the newest is kept whatever keep says */
        char *text = NULL;
        snprintf(path, sizeof path, "%s/%s/manifest.json", dir, e->d_name);
        if (smoe_read_file_max(path, SMOE_MAX_MANIFEST_BYTES, &text, NULL, NULL) == SMOE_OK &&
            ck_manifest_run_id(text, id) == SMOE_OK && strcmp(id, run_id) == 0)
            steps[n++] = k; /* this run's */
        smoe_free(text);
    }
    closedir(d);
    /* keep - 1 older ones besides the newest */
    for (int i = 0; i < n; i++) {
        int newer = 1;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer >= keep) {
            snprintf(path, sizeof path, "%s/step_%08lld", dir, (long long)steps[i]);
            ck_remove_dir(path);
        }
    }
    smoe_free(steps);
}

/* ---- stale temporaries ---- */
/* Is name (in dir) left by an interrupted save: step_N.tmp/ (never
 * published), LATEST's temporary (LATEST.tmp.XXXXXX; LATEST.tmp from
 * older versions), step_N.stale/ beside a complete step_N (the older
 * checkpoint it replaced); or by an interrupted start: a probe file? None
 * is ever read again. Returns what left it, or NULL. */
static const char *stale_from(const char *dir, const char *name)
{
    static const char save[] = "an interrupted save";
    size_t n = strlen(name), base;
    char step[16];
    if (strncmp(name, PROBE_PREFIX, strlen(PROBE_PREFIX)) == 0)
        return "an interrupted start";
    if (strcmp(name, "LATEST.tmp") == 0 ||
        (smoe_out_is_temp(name, &base) && base == 6 && strncmp(name, "LATEST", 6) == 0))
        return save;
    if (n < 13 || n >= 13 + 8)
        return NULL;
    memcpy(step, name, 13);
    step[13] = 0;
    if (ck_step_of(step) < 0)
        return NULL;
    if (strcmp(name + 13, ".tmp") == 0 ||
        (strcmp(name + 13, ".stale") == 0 && has_manifest(dir, step)))
        return save;
    return NULL;
}

/* Remove dir's stale temporaries, each said through co->on_note. Rank 0,
 * under the directory's lock (no other job writes there). */
static void remove_stale(const smoe_ckpt_opts *co)
{
    DIR *d = opendir(co->dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4400], line[4500];
    while ((e = readdir(d)) != NULL) {
        const char *from = stale_from(co->dir, e->d_name);
        if (!from)
            continue;
        snprintf(path, sizeof path, "%s/%s", co->dir, e->d_name);
        struct stat sb;
        int dir = lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        if ((dir ? ck_remove_dir(path) : unlink(path)) == 0)
            snprintf(line, sizeof line, "removed stale temporary %s from %s", path, from);
        else
            snprintf(line, sizeof line, "cannot remove stale temporary %s (from %s): %s", path,
                     from, strerror(errno));
        if (co->on_note)
            co->on_note(co->ud, line);
    }
    closedir(d);
}

/* ---- opening the directory for a run ---- */
/* Anything a run leaves: LATEST, step_N/, step_N.stale/ (stale
 * temporaries do not count: they are removed). */
static int holds_checkpoints(const char *dir, char what[64])
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)) != NULL) {
        if (stale_from(dir, e->d_name))
            continue;
        if (strcmp(e->d_name, "LATEST") == 0 || strncmp(e->d_name, "step_", 5) == 0) {
            snprintf(what, 64, "%.60s", e->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

/* splitmix64 of a combination (the train module's counter-based mixer) */
static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void new_run_id(char id[33])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof b) { /* no urandom: time and pid */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = mix((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                            (uint64_t)getpid());
        uint64_t y = mix(x, 1);
        memcpy(b, &x, 8);
        memcpy(b + 8, &y, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(id + 2 * i, 3, "%02x", b[i]);
}

/* Every rank: create, write, sync and remove a file in dir (the file is
 * named when the write fails: a full disk). */
static smoe_status probe(const smoe_comm *cm, const char *dir, smoe_err *err)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/" PROBE_PREFIX "%d-%ld", dir, smoe_comm_rank(cm),
             (long)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return ck_io_err(err, dir, "cannot write into the checkpoint directory");
    int bad = ck_write_all(fd, "smoe\n", 5) != 0 || fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    unlink(path);
    errno = e;
    return bad ? ck_io_err(err, path, "cannot write into the checkpoint directory") : SMOE_OK;
}

smoe_status smoe_ckpt_open(const smoe_comm *cm, smoe_ckpt_opts *co, int resume, smoe_ckpt **out,
                           smoe_err *err)
{
    *out = NULL;
    int root = smoe_comm_rank(cm) == 0;
    smoe_ckpt *ck = smoe_calloc(1, sizeof *ck);
    smoe_status s = ck ? SMOE_OK : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if (ck)
        ck->lock_fd = -1;
    smoe_comm_set_phase(cm, "opening the checkpoint directory %s", co->dir);
    if (!s && root) {
        s = mkdirs(co->dir, err);
        if (!s && (ck->lock_fd = open(co->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            s = ck_io_err(err, co->dir, "cannot open the checkpoint directory");
        if (!s && flock(ck->lock_fd, LOCK_EX | LOCK_NB) != 0)
            s = errno == EWOULDBLOCK
                    ? smoe_err_in(err, SMOE_EINVAL, co->dir,
                                  "another job is using this checkpoint directory (it holds "
                                  "the directory's lock): wait for it to end, or use another "
                                  "directory")
                    : ck_io_err(err, co->dir, "cannot lock the checkpoint directory");
    }
    if ((s = smoe_comm_agree_err(cm, s, err)))
        goto fail;
    char what[64];
    if (root && !resume && holds_checkpoints(co->dir, what))
        s = smoe_err_in(err, SMOE_EINVAL, co->dir,
                        "already holds checkpoints (%s): continue that run with --resume, or "
                        "use an empty directory (nothing was changed)", what);
    else if (root) /* before the probe: on a full disk they hold its space */
        remove_stale(co);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        goto fail;
    /* every rank must be able to write its shard there */
    s = probe(cm, co->dir, err);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        goto fail;
    /* a fresh run's id (a resumed run takes the checkpoint's) */
    char id[33] = "";
    if (root)
        new_run_id(id);
    smoe_comm_bcast_bytes(cm, id, sizeof id);
    memcpy(co->run_id, id, sizeof id);
    *out = ck;
    return SMOE_OK;
fail:
    smoe_ckpt_close(ck);
    return s;
}

void smoe_ckpt_close(smoe_ckpt *ck)
{
    if (!ck)
        return;
    if (ck->lock_fd >= 0)
        close(ck->lock_fd); /* releases the flock */
    smoe_free(ck);
}
