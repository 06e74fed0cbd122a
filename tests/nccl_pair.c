/* One rank of the two-process NCCL check on a GPU (nccl_pair.sh runs both
 * on device 0, each with its own NCCL_HOSTID, as NCCL allows two processes
 * on one device): the real NCCL and smoe's collectives (nccl.h) on device
 * buffers and a device stream, checked against values computed by hand.
 * Rank 0 writes the unique id to ID_FILE, rank 1 waits for it (60 s).
 * Exit 77 (skip) without a CUDA device.
 * usage: nccl_pair RANK ID_FILE */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "smoe/cuda.h"
#include "smoe/nccl.h"

enum { C = 1024 };

static smoe_dev dev;
static smoe_dev_stream *ds;
static smoe_err err;

static int share_id(int rank, const char *path, unsigned char *id)
{
    if (rank == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, 1, SMOE_NCCL_ID_BYTES, f) != SMOE_NCCL_ID_BYTES || fclose(f) != 0)
            return -1;
        return rename(tmp, path);
    }
    for (int i = 0; i < 600; i++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(id, 1, SMOE_NCCL_ID_BYTES, f);
            fclose(f);
            return n == SMOE_NCCL_ID_BYTES ? 0 : -1;
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return -1;
}

static float *dput(const float *h, size_t n)
{
    void *d = NULL;
    if (smoe_dev_alloc(&dev, n * sizeof *h, &d, &err) != SMOE_OK ||
        smoe_dev_copy(&dev, d, h, n * sizeof *h, ds, &err) != SMOE_OK)
        return NULL;
    return d;
}

static void dget(float *h, const float *d, size_t n)
{
    CHECKF(smoe_dev_copy(&dev, h, d, n * sizeof *h, ds, &err) == SMOE_OK &&
               smoe_dev_sync(&dev, 60, &err) == SMOE_OK,
           "%s", err.msg);
}

static void run(smoe_nccl *c, int r)
{
    void *s = smoe_cuda_stream_handle(ds);
    static float h[2 * C], out[2 * C];
    for (int j = 0; j < 2 * C; j++)
        h[j] = (float)(r * 10000 + j);
    float *send = dput(h, 2 * C), *recv = dput(h, 2 * C);
    CHECKF(send && recv, "%s", err.msg);
    if (!send || !recv)
        return;
    CHECKF(smoe_nccl_all_gather(c, send, recv, C, s, &err) == SMOE_OK, "%s", err.msg);
    dget(out, recv, 2 * C);
    int ok = 1;
    for (int p = 0; p < 2; p++)
        for (int j = 0; j < C; j++)
            ok = ok && out[p * C + j] == (float)(p * 10000 + j);
    CHECKF(ok, "all-gather: rank p's values at place p");
    CHECKF(smoe_nccl_reduce_scatter(c, send, recv, C, s, &err) == SMOE_OK, "%s", err.msg);
    dget(out, recv, C);
    ok = 1;
    for (int j = 0; j < C; j++)
        ok = ok && out[j] == (float)(r * C + j) + (float)(10000 + r * C + j);
    CHECKF(ok, "reduce-scatter: the sum of both ranks' chunk r");
    CHECKF(smoe_nccl_all_reduce(c, send, send, 2 * C, s, &err) == SMOE_OK, "%s", err.msg);
    dget(out, send, 2 * C);
    ok = 1;
    for (int j = 0; j < 2 * C; j++)
        ok = ok && out[j] == (float)j + (float)(10000 + j);
    CHECKF(ok, "all-reduce in place: the sum");
    CHECK(smoe_dev_free(&dev, send, &err) == SMOE_OK && smoe_dev_free(&dev, recv, &err) == SMOE_OK);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "0") != 0 && strcmp(argv[1], "1") != 0)) {
        fprintf(stderr, "usage: nccl_pair 0|1 ID_FILE\n");
        return 2;
    }
    const int r = argv[1][0] - '0';
    if (smoe_dev_cuda_open(0, &dev, &err) != SMOE_OK) {
        printf("skipped: %s\n", err.msg);
        return 77;
    }
    CHECK(smoe_dev_stream_new(&dev, 0, &ds, &err) == SMOE_OK);
    unsigned char id[SMOE_NCCL_ID_BYTES] = { 0 };
    if (r == 0)
        CHECKF(smoe_nccl_unique_id(id, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(share_id(r, argv[2], id) == 0, "rank %d: the id through %s", r, argv[2]);
    smoe_nccl *c = NULL;
    CHECKF(smoe_nccl_new(id, 2, r, &c, &err) == SMOE_OK, "%s", err.msg);
    if (c)
        run(c, r);
    smoe_nccl_free(c);
    smoe_dev_stream_free(&dev, ds);
    smoe_dev_close(&dev);
    return check_report();
}
