/* A fake NCCL for the tests of src/nccl (CI has no GPU): ranks are threads
 * of one process, buffers are host memory, and a collective completes
 * before it returns (the stream is ignored) unless a launcher is set
 * (fake_nccl.h): then the all-gathers, reduce-scatters and all-reduces
 * run when the launcher runs them (on the stream's thread of the host
 * emulation, in the stream's order), as NCCL's run on the stream. It
 * implements the calls src/nccl makes, with NCCL's matching rules: every
 * rank of a communicator calls the same collectives in the same order
 * with the same counts (a mismatch returns ncclInvalidUsage on every
 * rank; launched, it aborts the process), and a group's k-th send to a
 * peer meets that peer's k-th receive from the sender. ncclCommSplit
 * makes the new communicators (by color, ranked by key). Reductions add
 * in rank order. ncclFloat32 with ncclSum; all-gathers also ncclUint8. */
#include <nccl.h>

#include "fake_nccl.h"

#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { MAXR = 16, MAXITEMS = 64, K_AG = 1, K_RS, K_AR, K_GROUP, K_SPLIT };

typedef struct item {
    int send, peer;
    void *buf;
    size_t count;
} item;

typedef struct post {
    int kind;
    const float *send;
    float *recv;
    size_t count;             /* elements; a split's color */
    const item *items;
    int nitems;               /* a split's key */
    size_t elem;              /* bytes an element (an all-gather of ncclUint8: 1) */
} post;

typedef struct fworld {
    ncclUniqueId id;
    int n, joined, left, count, gen;
    post posts[MAXR];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct fworld *next;
} fworld;

struct ncclComm {
    fworld *w;
    int rank;
    int nsplit;               /* splits made from it (every rank counts alike) */
};

static fake_nccl_launch_fn g_launch;

void fake_nccl_set_launcher(fake_nccl_launch_fn fn) { g_launch = fn; }

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fworld *g_worlds;
static unsigned g_ids;

/* a thread's open group */
static _Thread_local int t_group;
static _Thread_local ncclComm_t t_gcomm;
static _Thread_local item t_items[MAXITEMS];
static _Thread_local int t_nitems, t_gfail;

static void barrier(fworld *w)
{
    pthread_mutex_lock(&w->mu);
    int gen = w->gen;
    if (++w->count == w->n) {
        w->count = 0;
        w->gen++;
        pthread_cond_broadcast(&w->cv);
    } else {
        while (gen == w->gen)
            pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclInvalidArgument: return "invalid argument (fake NCCL)";
    case ncclInvalidUsage: return "invalid usage (fake NCCL)";
    case ncclSystemError: return "system error (fake NCCL)";
    default: return "error (fake NCCL)";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *u)
{
    memset(u, 0, sizeof *u);
    pthread_mutex_lock(&g_mu);
    unsigned k = ++g_ids;
    pthread_mutex_unlock(&g_mu);
    memcpy(u->internal, "fake-nccl", 9);
    memcpy(u->internal + 16, &k, sizeof k);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    pthread_mutex_lock(&g_mu);
    fworld *w = g_worlds;
    while (w && memcmp(&w->id, &id, sizeof id) != 0)
        w = w->next;
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) {
            pthread_mutex_unlock(&g_mu);
            return ncclSystemError;
        }
        w->id = id;
        w->n = nranks;
        pthread_mutex_init(&w->mu, NULL);
        pthread_cond_init(&w->cv, NULL);
        w->next = g_worlds;
        g_worlds = w;
    }
    int ok = w->n == nranks;
    pthread_mutex_unlock(&g_mu);
    if (!ok)
        return ncclInvalidUsage;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->w = w;
    c->rank = rank;
    barrier(w); /* as NCCL, initialisation waits for every rank */
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    fworld *w = c->w;
    pthread_mutex_lock(&g_mu);
    int last = ++w->left == w->n;
    if (last) {
        fworld **p = &g_worlds;
        while (*p != w)
            p = &(*p)->next;
        *p = w->next;
    }
    pthread_mutex_unlock(&g_mu);
    if (last) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
    }
    free(c);
    return ncclSuccess;
}

/* the matching rule: every rank posted the same kind and count */
static int matched(const fworld *w)
{
    for (int r = 1; r < w->n; r++)
        if (w->posts[r].kind != w->posts[0].kind || w->posts[r].count != w->posts[0].count)
            return 0;
    return 1;
}

/* One collective: post, meet, pull what this rank receives, meet again
 * (so no rank reuses a buffer another still reads). */
static ncclResult_t run(ncclComm_t c, post p)
{
    fworld *w = c->w;
    const int me = c->rank, n = w->n;
    pthread_mutex_lock(&w->mu);
    w->posts[me] = p;
    pthread_mutex_unlock(&w->mu);
    barrier(w);
    const int ok = matched(w);
    const size_t cnt = p.count;
    if (ok && p.kind == K_AG) {
        for (int r = 0; r < n; r++)
            memcpy((char *)p.recv + (size_t)r * cnt * p.elem, w->posts[r].send, cnt * p.elem);
    } else if (ok && (p.kind == K_RS || p.kind == K_AR)) {
        float *acc = malloc((cnt ? cnt : 1) * sizeof *acc);
        const size_t off = p.kind == K_RS ? (size_t)me * cnt : 0;
        for (size_t j = 0; acc && j < cnt; j++) {
            float s = w->posts[0].send[off + j];
            for (int r = 1; r < n; r++)
                s += w->posts[r].send[off + j];
            acc[j] = s;
        }
        barrier(w); /* every sum read before an in-place result lands */
        if (acc)
            memcpy(p.recv, acc, cnt * sizeof *acc);
        free(acc);
    }
    barrier(w);
    return ok ? ncclSuccess : ncclInvalidUsage;
}

typedef struct job {
    ncclComm_t c;
    post p;
} job;

static void run_job(void *arg)
{
    job *j = arg;
    if (run(j->c, j->p) != ncclSuccess) {
        fprintf(stderr, "fake NCCL: a launched collective's ranks do not match\n");
        abort();
    }
    free(j);
}

static ncclResult_t coll(int kind, const void *send, void *recv, size_t count,
                         ncclDataType_t t, ncclComm_t c, cudaStream_t s)
{
    if (t != ncclFloat32 && !(t == ncclUint8 && kind == K_AG))
        return ncclInvalidArgument;
    post p = { kind, send, recv, count, NULL, 0, t == ncclUint8 ? 1 : sizeof(float) };
    if (!g_launch || !s)
        return run(c, p);
    job *j = malloc(sizeof *j);
    if (!j)
        return ncclSystemError;
    *j = (job){ c, p };
    return g_launch((void *)s, run_job, j) ? ncclSystemError : ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t c, int *count)
{
    *count = c->w->n;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank)
{
    *rank = c->rank;
    return ncclSuccess;
}

/* every rank posts its color and key; each joins the world of its color
 * (named by the parent, the split's number and the color) at its place */
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, ncclConfig_t *cfg)
{
    (void)cfg;
    fworld *w = c->w;
    post p = { K_SPLIT, NULL, NULL, (size_t)color, NULL, key, 0 };
    pthread_mutex_lock(&w->mu);
    w->posts[c->rank] = p;
    pthread_mutex_unlock(&w->mu);
    barrier(w);
    int n = 0, me = 0;
    for (int r = 0; r < w->n; r++) {
        const post *q = &w->posts[r];
        if ((int)q->count != color)
            continue;
        n++;
        if (q->nitems < key || (q->nitems == key && r < c->rank))
            me++;
    }
    barrier(w); /* every post read before the next collective's */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    memcpy(id.internal, "fake-split", 10);
    memcpy(id.internal + 16, &w, sizeof w);
    memcpy(id.internal + 32, &c->nsplit, sizeof c->nsplit);
    memcpy(id.internal + 40, &color, sizeof color);
    c->nsplit++;
    return ncclCommInitRank(out, n, id, me);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t s)
{
    return coll(K_AG, send, recv, count, t, c, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
    return op != ncclSum ? ncclInvalidArgument : coll(K_RS, send, recv, count, t, c, s);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t s)
{
    return op != ncclSum ? ncclInvalidArgument : coll(K_AR, send, recv, count, t, c, s);
}

/* nccl.h declares the two group calls without a prototype, "()" */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
ncclResult_t ncclGroupStart(void)
{
    t_group = 1;
    t_nitems = 0;
    t_gfail = 0;
    t_gcomm = NULL;
    return ncclSuccess;
}

static ncclResult_t add_item(int send, void *buf, size_t count, ncclDataType_t t, int peer,
                             ncclComm_t c)
{
    if (!t_group || t != ncclFloat32 || peer < 0 || peer >= c->w->n ||
        t_nitems == MAXITEMS || (t_gcomm && t_gcomm != c)) {
        t_gfail = 1;
        return ncclInvalidArgument;
    }
    t_gcomm = c;
    t_items[t_nitems++] = (item){ send, peer, buf, count };
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s)
{
    (void)s;
    return add_item(1, (void *)buf, count, t, peer, c);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s)
{
    (void)s;
    return add_item(0, buf, count, t, peer, c);
}

/* the k-th send of rank `from` to `to` */
static const item *nth_send(const post *p, int to, int k)
{
    for (int i = 0; i < p->nitems; i++)
        if (p->items[i].send && p->items[i].peer == to && k-- == 0)
            return &p->items[i];
    return NULL;
}

ncclResult_t ncclGroupEnd(void)
{
    t_group = 0;
    if (!t_gcomm) /* an empty group: nothing to meet over */
        return t_gfail ? ncclInvalidArgument : ncclSuccess;
    ncclComm_t c = t_gcomm;
    fworld *w = c->w;
    post p = { K_GROUP, NULL, NULL, 0, t_items, t_nitems, sizeof(float) };
    pthread_mutex_lock(&w->mu);
    w->posts[c->rank] = p;
    pthread_mutex_unlock(&w->mu);
    barrier(w);
    int ok = !t_gfail;
    int seen[MAXR] = { 0 };
    for (int i = 0; i < t_nitems; i++) {
        const item *r = &t_items[i];
        if (r->send)
            continue;
        const item *s = nth_send(&w->posts[r->peer], c->rank, seen[r->peer]++);
        if (!s || s->count != r->count) {
            ok = 0;
            continue;
        }
        memcpy(r->buf, s->buf, r->count * sizeof(float));
    }
    barrier(w);
    return ok ? ncclSuccess : ncclInvalidUsage;
}
#pragma GCC diagnostic pop
