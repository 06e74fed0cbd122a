/* Strict number parsing (integers, floats, byte counts) and the clock. */
#define _POSIX_C_SOURCE 200809L
#include "smoe/core.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

/* Copy s into buf without '_' separators; an underscore must sit between
 * two digits. Returns 0 on success. */
static int strip_underscores(const char *s, char *buf, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] == '_') {
            int prev = i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9';
            int next = s[i + 1] >= '0' && s[i + 1] <= '9';
            if (!prev || !next)
                return -1;
            continue;
        }
        if (j + 1 >= n)
            return -1;
        buf[j++] = s[i];
    }
    buf[j] = 0;
    return 0;
}

int smoe_parse_i64(const char *s, int64_t *out)
{
    char buf[64];
    if (!s || !*s || strip_underscores(s, buf, sizeof buf))
        return -1;
    const char *p = buf;
    if (*p == '+' || *p == '-')
        p++;
    if (!*p)
        return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(buf, &end, 10);
    if (errno || !end || *end)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int smoe_parse_f64(const char *s, double *out)
{
    char buf[128];
    if (!s || !*s || strip_underscores(s, buf, sizeof buf))
        return -1;
    for (const char *q = buf; *q; q++) /* no hex floats, inf or nan words */
        if (!strchr("0123456789+-.eE", *q))
            return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(buf, &end);
    if (errno || !end || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* The number of a byte count as the README's grammar has it: digits, with
 * at most one '.' between digits (and underscores between digits, which
 * smoe_parse_f64 checks): no sign, no exponent. */
static int plain_decimal(const char *s)
{
    size_t n = strlen(s);
    int dots = 0;
    if (n == 0 || s[0] < '0' || s[0] > '9' || s[n - 1] < '0' || s[n - 1] > '9')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '.' ? dots++ > 0 : s[i] != '_' && (s[i] < '0' || s[i] > '9'))
            return 0;
    return 1;
}

int smoe_parse_bytes(const char *s, int64_t *out)
{
    static const char units[] = "kmgt";
    char num[64];
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, s, n + 1);
    /* strip "B" or "iB" after a unit letter, then the unit letter */
    if (n > 2 && (num[n - 1] == 'B' || num[n - 1] == 'b') && num[n - 2] == 'i')
        num[n -= 2] = 0;
    else if (n > 1 && (num[n - 1] == 'B' || num[n - 1] == 'b'))
        num[--n] = 0;
    double mult = 1;
    const char *u = n > 0 ? strchr(units, num[n - 1] | 0x20) : NULL;
    if (u && *u) {
        mult = ldexp(1.0, 10 * (int)(u - units + 1));
        num[--n] = 0;
    } else if (n < strlen(s) && strlen(s) - n == 2) {
        return -1; /* "iB" without a unit letter */
    }
    double v;
    if (!plain_decimal(num) || smoe_parse_f64(num, &v) || !(v >= 0) || v * mult >= 9.2e18)
        return -1;
    *out = (int64_t)llround(v * mult);
    return 0;
}

const char *smoe_lane_name(int lane)
{
    static const char *const names[SMOE_LANES] = { "compute", "FSDP gathers",
                                                   "all-to-all / reductions", "waits",
                                                   "device kernels" };
    return lane >= 0 && lane < SMOE_LANES ? names[lane] : NULL;
}

double smoe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double smoe_thread_cpu(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void smoe_process_cpu(double *user, double *sys)
{
    struct rusage ru;
    *user = *sys = 0;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return;
    *user = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
    *sys = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

smoe_loc smoe_text_loc(const char *file, const char *text, const char *at)
{
    smoe_loc l = { file, 1, 1 };
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            l.line++;
            l.col = 1;
        } else {
            l.col++;
        }
    }
    return l;
}

/* Is f a regular file longer than max bytes (refused before reading)? */
static int regular_size_over(FILE *f, size_t max)
{
    struct stat st;
    return fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
           (unsigned long long)st.st_size > max;
}

/* Read all of f into a buffer of at most max + 2 bytes (room to see one
 * byte too many and the NUL); *n gets the bytes read. NULL when out of
 * memory. */
static char *slurp(FILE *f, size_t max, size_t *n)
{
    size_t limit = max + 2, cap = limit < ((size_t)1 << 16) ? limit : (size_t)1 << 16;
    char *buf = smoe_malloc(cap);
    *n = 0;
    while (buf && *n <= max) {
        if (*n + 1 >= cap) {
            size_t want = cap > limit / 2 ? limit : cap * 2;
            char *nb = smoe_realloc(buf, want);
            if (!nb) {
                smoe_free(buf);
                return NULL;
            }
            buf = nb;
            cap = want;
        }
        size_t got = fread(buf + *n, 1, cap - *n - 1, f);
        *n += got;
        if (got == 0)
            break;
    }
    return buf;
}

smoe_status smoe_read_file_max(const char *path, size_t max, char **out, size_t *len,
                               smoe_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return smoe_err_in(err, errno == ENOENT ? SMOE_ENOTFOUND : SMOE_EIO, path,
                           "cannot open file: %s", strerror(errno));
    size_t n = 0;
    int over = regular_size_over(f, max);
    char *buf = over ? NULL : slurp(f, max, &n);
    int bad = ferror(f), why = errno;
    fclose(f);
    if (over || (buf && n > max)) {
        smoe_free(buf);
        return smoe_err_in(err, SMOE_EINVAL, path,
                           "larger than %zu MiB (smoe's limit for this file)", max >> 20);
    }
    if (!buf)
        return smoe_err_in(err, SMOE_ENOMEM, path, "out of memory reading the file");
    if (bad) {
        smoe_free(buf);
        return smoe_err_in(err, SMOE_EIO, path, "read error: %s", strerror(why));
    }
    buf[n] = 0;
    *out = buf;
    if (len)
        *len = n;
    return SMOE_OK;
}
