/* Training data: a text file read whole; its bytes are the tokens (vocab
 * 256). Sequence i of step s starts at an offset drawn from (seed, s, i),
 * so every mesh sees the same global batch; targets are the next bytes. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

uint64_t tr_mix(uint64_t a, uint64_t b)
{
    /* splitmix64 of a combination: a counter-based generator */
    uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tr_normal(uint64_t key)
{
    /* Box-Muller from two uniform draws in (0, 1] */
    double u1 = ((double)(tr_mix(key, 1) >> 11) + 1.0) * 0x1.0p-53;
    double u2 = (double)(tr_mix(key, 2) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

smoe_status tr_data_load(const char *path, int64_t need, tr_data *d, smoe_err *err)
{
    memset(d, 0, sizeof *d);
    /* a FIFO would block the open (and the job's set-up), a device or a
     * directory has no size: only regular files are training text */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return smoe_err_in(err, errno == ENOENT ? SMOE_ENOTFOUND : SMOE_EIO, path,
                           "cannot open the data file: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return smoe_err_in(err, SMOE_EINVAL, path,
                           "the data file is %s, not a regular file",
                           S_ISDIR(sb.st_mode)    ? "a directory"
                           : S_ISFIFO(sb.st_mode) ? "a FIFO"
                           : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
                                                                         : "a special file");
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return smoe_err_in(err, SMOE_EIO, path, "cannot open the data file: %s",
                           strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return smoe_err_in(err, SMOE_EINVAL, path, "the data file is not a regular file");
    }
    int64_t n = (int64_t)sb.st_size;
    if (n < need) {
        close(fd);
        return smoe_err_in(err, SMOE_EINVAL, path,
                           "the data file has %lld bytes; a sequence of max_target_length %lld "
                           "tokens needs %lld (its bytes and the next one as target, plus one)",
                           (long long)n, (long long)(need - 2), (long long)need);
    }
    d->text = smoe_malloc((size_t)n);
    if (!d->text) {
        close(fd);
        return smoe_err_in(err, SMOE_ENOMEM, path, "out of memory reading the data file "
                           "(%lld bytes)", (long long)n);
    }
    int64_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, d->text + got, (size_t)(n - got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += r;
    }
    close(fd);
    if (got != n) {
        smoe_free(d->text);
        d->text = NULL;
        return smoe_err_in(err, SMOE_EIO, path, "cannot read the data file (short read)");
    }
    d->n = n;
    return SMOE_OK;
}

void tr_data_free(tr_data *d)
{
    smoe_free(d->text);
    d->text = NULL;
}

/* needs seq + 2 <= d->n (smoe_train_data_batch checks): a sequence's
 * start is drawn from [0, d->n - seq), its last target is text[start + seq] */
static void data_batch(const tr_data *d, uint64_t seed, int64_t step, int64_t first,
                       int64_t batch, int64_t seq, int32_t *tokens, int32_t *targets)
{
    uint64_t span = (uint64_t)(d->n - seq);
    for (int64_t b = 0; b < batch; b++) {
        uint64_t key = tr_mix(tr_mix(seed, (uint64_t)step), (uint64_t)(first + b));
        int64_t start = (int64_t)(tr_mix(key, 7) % span);
        for (int64_t t = 0; t < seq; t++) {
            tokens[b * seq + t] = d->text[start + t];
            targets[b * seq + t] = d->text[start + t + 1];
        }
    }
}

smoe_status smoe_train_data_load(const char *path, int64_t seq, smoe_train_data **out,
                                 smoe_err *err)
{
    *out = NULL;
    smoe_train_data *d = smoe_calloc(1, sizeof *d);
    if (!d)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_status s = tr_data_load(path, seq + 2, d, err);
    if (s) {
        smoe_free(d);
        return s;
    }
    *out = d;
    return SMOE_OK;
}

void smoe_train_data_free(smoe_train_data *d)
{
    if (!d)
        return;
    tr_data_free(d);
    smoe_free(d);
}

smoe_status smoe_train_data_batch(const smoe_train_data *d, uint64_t seed, int64_t step,
                                  int64_t first, int64_t batch, int64_t seq, int32_t *tokens,
                                  int32_t *targets, smoe_err *err)
{
    if (batch < 0 || seq < 1 || ((!tokens || !targets) && batch > 0))
        return smoe_err_set(err, SMOE_EINVAL, "a batch of %lld sequences of %lld tokens%s: "
                            "expected batch >= 0 and seq >= 1", (long long)batch,
                            (long long)seq, tokens && targets ? "" : " (no buffers)");
    if (seq > d->n - 2)
        return smoe_err_set(err, SMOE_EINVAL, "seq %lld: a sequence of %lld tokens needs %lld "
                            "bytes of text (its bytes and the next one as target, plus one); "
                            "the data holds %lld", (long long)seq, (long long)seq,
                            (long long)seq + 2, (long long)d->n);
    data_batch(d, seed, step, first, batch, seq, tokens, targets);
    return SMOE_OK;
}
