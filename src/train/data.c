/* Training data: a text file read whole; its bytes are the tokens (vocab
 * 256). Sequence i of step s starts at an offset drawn from (seed, s, i),
 * so every mesh sees the same global batch; targets are the next bytes. */
#include "train_impl.h"

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
    FILE *f = fopen(path, "rb");
    if (!f)
        return smoe_err_in(err, SMOE_ENOTFOUND, path, "cannot open the data file");
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return smoe_err_in(err, SMOE_EIO, path, "cannot read the data file");
    }
    long n = ftell(f);
    rewind(f);
    /* a directory opens and seeks (its size reads as LONG_MAX) but cannot
     * be read: say so instead of trying to allocate that much */
    if (n > 0 && (getc(f) == EOF || fseek(f, 0, SEEK_SET) != 0)) {
        fclose(f);
        return smoe_err_in(err, SMOE_EIO, path, "cannot read the data file");
    }
    if (n < 0 || n < need) {
        fclose(f);
        return smoe_err_in(err, SMOE_EINVAL, path,
                           "the data file has %ld bytes; a sequence needs %lld", n,
                           (long long)need);
    }
    d->text = smoe_malloc((size_t)n);
    if (!d->text) {
        fclose(f);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory reading %s", path);
    }
    size_t got = fread(d->text, 1, (size_t)n, f);
    fclose(f);
    if ((long)got != n) {
        smoe_free(d->text);
        d->text = NULL;
        return smoe_err_in(err, SMOE_EIO, path, "short read");
    }
    d->n = n;
    return SMOE_OK;
}

void tr_data_free(tr_data *d)
{
    smoe_free(d->text);
    d->text = NULL;
}

void tr_data_batch(const tr_data *d, uint64_t seed, int64_t step, int64_t first,
                   int64_t batch, int64_t seq, int32_t *tokens, int32_t *targets)
{
    uint64_t span = (uint64_t)(d->n - seq - 1) + 1;
    for (int64_t b = 0; b < batch; b++) {
        uint64_t key = tr_mix(tr_mix(seed, (uint64_t)step), (uint64_t)(first + b));
        int64_t start = (int64_t)(tr_mix(key, 7) % span);
        for (int64_t t = 0; t < seq; t++) {
            tokens[b * seq + t] = d->text[start + t];
            targets[b * seq + t] = d->text[start + t + 1];
        }
    }
}
