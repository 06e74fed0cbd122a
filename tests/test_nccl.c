/* Oracle for the NCCL collectives (nccl.h) against a fake NCCL
 * (fake_nccl.c: ranks as threads, host memory; CI has no GPU): 3 ranks
 * each make an all-gather, a reduce-scatter, an in-place all-reduce and an
 * all-to-all with uneven counts (a zero among them), checked against the
 * values computed by hand from each rank's inputs; a split by color and
 * key and a byte all-gather over it; then the refusals:
 * a rank outside the communicator, a negative count (both before NCCL),
 * and collectives whose counts differ across the ranks, which NCCL's
 * failure turns into SMOE_ECOMM naming the call. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "smoe/nccl.h"

enum { N = 3, C = 4 };

static unsigned char g_id[SMOE_NCCL_ID_BYTES];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_pass, g_fail;

/* a check from a rank's thread, counted under the lock */
static void tcheck(int ok, int rank, const char *what, const char *msg)
{
    pthread_mutex_lock(&g_mu);
    if (ok) {
        g_pass++;
    } else {
        g_fail++;
        fprintf(stderr, "rank %d: check failed: %s%s%s\n", rank, what, msg ? ": " : "",
                msg ? msg : "");
    }
    pthread_mutex_unlock(&g_mu);
}

static float val(int rank, int j) { return (float)(rank * 100 + j); }

/* floats rank `from` sends to rank `to` in the all-to-all: 0 (to itself) to 2 */
static int64_t npair(int from, int to) { return (2 * from + to) % N; }

static void collectives(smoe_nccl *c, int r)
{
    smoe_err err = { 0 };
    float send[N * C], recv[N * C];
    for (int j = 0; j < N * C; j++)
        send[j] = val(r, j);
    int ok = smoe_nccl_all_gather(c, send, recv, C, NULL, &err) == SMOE_OK;
    for (int p = 0; p < N; p++)
        for (int j = 0; j < C; j++)
            ok = ok && recv[p * C + j] == val(p, j);
    tcheck(ok, r, "all-gather: rank p's values at place p", err.msg);

    ok = smoe_nccl_reduce_scatter(c, send, recv, C, NULL, &err) == SMOE_OK;
    for (int j = 0; j < C; j++)
        ok = ok && recv[j] == val(0, r * C + j) + val(1, r * C + j) + val(2, r * C + j);
    tcheck(ok, r, "reduce-scatter: the sum of every rank's chunk r", err.msg);

    ok = smoe_nccl_all_reduce(c, send, send, N * C, NULL, &err) == SMOE_OK;
    for (int j = 0; j < N * C; j++)
        ok = ok && send[j] == val(0, j) + val(1, j) + val(2, j);
    tcheck(ok, r, "all-reduce in place: the sum", err.msg);

    /* rank r sends npair(r, p) floats to peer p (not symmetric: r's count to
     * p is not p's to r), each float 1000 r + 10 p + k */
    int64_t sc[N], rc[N], so = 0;
    float a2s[16], a2r[16];
    for (int p = 0; p < N; p++) {
        sc[p] = npair(r, p);
        rc[p] = npair(p, r);
        for (int k = 0; k < sc[p]; k++)
            a2s[so + k] = (float)(1000 * r + 10 * p + k);
        so += sc[p];
    }
    ok = smoe_nccl_all_to_all_v(c, a2s, sc, a2r, rc, NULL, &err) == SMOE_OK;
    for (int p = 0, ro = 0; p < N; ro += (int)rc[p], p++)
        for (int k = 0; k < rc[p]; k++)
            ok = ok && a2r[ro + k] == (float)(1000 * p + 10 * r + k);
    tcheck(ok, r, "all-to-all: peer p's floats for r at p's place", err.msg);
}

/* split by color r % 2, ranked by key -r (descending ranks): ranks 0 and 2
 * make a pair with 2 first, rank 1 a group of one; a byte all-gather of 3
 * bytes on each (records of any size) */
static void split(smoe_nccl *c, int r)
{
    smoe_err err = { 0 };
    smoe_nccl *s = NULL;
    int ok = smoe_nccl_split(c, r % 2, -r, &s, &err) == SMOE_OK;
    tcheck(ok && smoe_nccl_size(s) == (r % 2 ? 1 : 2) && smoe_nccl_rank(s) == (r == 0 ? 1 : 0), r,
           "split: size by color, rank by key", err.msg);
    if (!ok)
        return;
    unsigned char mine[3] = { (unsigned char)r, (unsigned char)(10 + r), (unsigned char)(20 + r) },
                  all[6];
    ok = smoe_nccl_all_gather_bytes(s, mine, all, 3, NULL, &err) == SMOE_OK;
    for (int m = 0; m < smoe_nccl_size(s); m++) {
        int from = r % 2 ? 1 : (m == 0 ? 2 : 0);
        ok = ok && all[3 * m] == from && all[3 * m + 2] == 20 + from;
    }
    tcheck(ok, r, "byte all-gather over the split, in key order", err.msg);
    smoe_nccl *neg = NULL;
    tcheck(smoe_nccl_split(c, -1, 0, &neg, &err) == SMOE_EINVAL && !neg, r,
           "a negative color refused", NULL);
    smoe_nccl_free(s);
}

static void refusals(smoe_nccl *c, int r)
{
    smoe_err err = { 0 };
    float buf[8] = { 0 }, out[32];
    tcheck(smoe_nccl_all_gather(c, buf, out, -1, NULL, &err) == SMOE_EINVAL &&
               strstr(err.msg, "ncclAllGather"),
           r, "a negative count refused before NCCL", err.msg);
    /* rank 0 gathers 2 floats, the others 3: NCCL's usage error */
    smoe_status st = smoe_nccl_all_gather(c, buf, out, r == 0 ? 2 : 3, NULL, &err);
    tcheck(st == SMOE_ECOMM && strstr(err.msg, "ncclAllGather") && !strchr(err.msg, '\n'), r,
           "counts that differ across ranks: SMOE_ECOMM naming the call", err.msg);
}

static void *rank_main(void *arg)
{
    const int r = (int)(intptr_t)arg;
    smoe_nccl *c = NULL;
    smoe_err err = { 0 };
    tcheck(smoe_nccl_new(g_id, N, r, &c, &err) == SMOE_OK, r, "smoe_nccl_new", err.msg);
    if (!c)
        return NULL;
    tcheck(smoe_nccl_rank(c) == r && smoe_nccl_size(c) == N, r, "rank and size", NULL);
    collectives(c, r);
    split(c, r);
    refusals(c, r);
    smoe_nccl_free(c);
    return NULL;
}

int main(void)
{
    smoe_err err = { 0 };
    if (smoe_nccl_unique_id(g_id, &err) != SMOE_OK) {
        fprintf(stderr, "unique id: %s\n", err.msg);
        return 1;
    }
    smoe_nccl *bad = NULL;
    CHECK(smoe_nccl_new(g_id, N, N, &bad, &err) == SMOE_EINVAL && !bad);
    pthread_t t[N];
    for (int r = 0; r < N; r++)
        pthread_create(&t[r], NULL, rank_main, (void *)(intptr_t)r);
    for (int r = 0; r < N; r++)
        pthread_join(t[r], NULL);
    check_pass_ += g_pass;
    check_fail_ += g_fail;
    return check_report();
}
