/* The collectives of one process per GPU over NCCL (nccl.h): thin calls,
 * each NCCL failure turned into SMOE_ECOMM naming the collective and
 * NCCL's reason, counts checked before they reach NCCL.
 * NCCL's entry points are found at the first id or communicator asked for:
 * in the program itself when it links NCCL (or the tests' fake), else in
 * libnccl.so.2, loaded then. So a program links no NCCL, and runs where
 * none is installed until it asks for a communicator. */
#define _GNU_SOURCE
#include "smoe/nccl.h"

#include <nccl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_FNS(X)                                                                         \
    X(ncclGetErrorString, const char *, (ncclResult_t))                                     \
    X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId *))                                      \
    X(ncclCommInitRank, ncclResult_t, (ncclComm_t *, int, ncclUniqueId, int))               \
    X(ncclCommDestroy, ncclResult_t, (ncclComm_t))                                          \
    X(ncclCommSplit, ncclResult_t, (ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *))   \
    X(ncclCommUserRank, ncclResult_t, (const ncclComm_t, int *))                            \
    X(ncclCommCount, ncclResult_t, (const ncclComm_t, int *))                               \
    X(ncclAllGather, ncclResult_t,                                                          \
      (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))             \
    X(ncclReduceScatter, ncclResult_t,                                                      \
      (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
    X(ncclAllReduce, ncclResult_t,                                                          \
      (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
    X(ncclGroupStart, ncclResult_t, (void))                                                 \
    X(ncclGroupEnd, ncclResult_t, (void))                                                   \
    X(ncclSend, ncclResult_t, (const void *, size_t, ncclDataType_t, int, ncclComm_t,      \
                               cudaStream_t))                                               \
    X(ncclRecv, ncclResult_t, (void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))

#define FIELD(name, ret, args) ret(*name) args;
static struct {
    NCCL_FNS(FIELD)
} F;
#undef FIELD

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_missing[160]; /* "" when every entry point was found */

static void find_all(void)
{
    void *lib = NULL;
    if (!dlsym(RTLD_DEFAULT, "ncclGetUniqueId") &&
        !(lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL))) {
        snprintf(g_missing, sizeof g_missing, "libnccl.so.2 not found (%s)", dlerror());
        return;
    }
#define FIND(name, ret, args)                                                               \
    if (!g_missing[0]) {                                                                    \
        void *p_ = dlsym(lib ? lib : RTLD_DEFAULT, #name);                                  \
        if (p_)                                                                             \
            memcpy(&F.name, &p_, sizeof p_);                                                \
        else                                                                                \
            snprintf(g_missing, sizeof g_missing, "NCCL has no %s", #name);                 \
    }
    NCCL_FNS(FIND)
#undef FIND
}

static smoe_status loaded(smoe_err *err)
{
    pthread_once(&g_once, find_all);
    return g_missing[0] ? smoe_err_set(err, SMOE_ENOTFOUND, "nccl: %s", g_missing) : SMOE_OK;
}

struct smoe_nccl {
    ncclComm_t comm;
    int rank, size;
};

static smoe_status fail(smoe_err *err, ncclResult_t r, const char *what)
{
    return smoe_err_set(err, r == ncclInvalidArgument ? SMOE_EINVAL : SMOE_ECOMM,
                        "nccl: %s: %s", what, F.ncclGetErrorString(r));
}

#define NK(call, what)                         \
    do {                                       \
        ncclResult_t r_ = (call);              \
        if (r_ != ncclSuccess)                 \
            return fail(err, r_, what);        \
    } while (0)

smoe_status smoe_nccl_unique_id(unsigned char id[SMOE_NCCL_ID_BYTES], smoe_err *err)
{
    if (loaded(err))
        return SMOE_ENOTFOUND;
    ncclUniqueId u;
    NK(F.ncclGetUniqueId(&u), "ncclGetUniqueId");
    memcpy(id, u.internal, SMOE_NCCL_ID_BYTES);
    return SMOE_OK;
}

smoe_status smoe_nccl_new(const unsigned char id[SMOE_NCCL_ID_BYTES], int nranks, int rank,
                          smoe_nccl **out, smoe_err *err)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: rank %d of %d ranks", rank, nranks);
    if (loaded(err))
        return SMOE_ENOTFOUND;
    smoe_nccl *c = calloc(1, sizeof *c);
    if (!c)
        return smoe_err_set(err, SMOE_ENOMEM, "nccl: out of memory for a communicator");
    ncclUniqueId u;
    memcpy(u.internal, id, SMOE_NCCL_ID_BYTES);
    ncclResult_t r = F.ncclCommInitRank(&c->comm, nranks, u, rank);
    if (r != ncclSuccess) {
        free(c);
        return fail(err, r, "ncclCommInitRank");
    }
    c->rank = rank;
    c->size = nranks;
    *out = c;
    return SMOE_OK;
}

void smoe_nccl_free(smoe_nccl *c)
{
    if (!c)
        return;
    (void)F.ncclCommDestroy(c->comm);
    free(c);
}

smoe_status smoe_nccl_split(smoe_nccl *c, int color, int key, smoe_nccl **out, smoe_err *err)
{
    *out = NULL;
    if (color < 0)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: split with color %d", color);
    smoe_nccl *n = calloc(1, sizeof *n);
    if (!n)
        return smoe_err_set(err, SMOE_ENOMEM, "nccl: out of memory for a communicator");
    ncclResult_t r = F.ncclCommSplit(c->comm, color, key, &n->comm, NULL);
    if (r == ncclSuccess)
        r = F.ncclCommUserRank(n->comm, &n->rank);
    if (r == ncclSuccess)
        r = F.ncclCommCount(n->comm, &n->size);
    if (r != ncclSuccess) {
        free(n);
        return fail(err, r, "ncclCommSplit");
    }
    *out = n;
    return SMOE_OK;
}

int smoe_nccl_rank(const smoe_nccl *c) { return c->rank; }
int smoe_nccl_size(const smoe_nccl *c) { return c->size; }

typedef enum { ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE } coll_kind;

/* One fp32 collective of count floats a rank (see nccl.h for each). */
static smoe_status coll(smoe_nccl *c, coll_kind k, const float *send, float *recv,
                        int64_t count, void *stream, smoe_err *err)
{
    static const char *const what[] = { "ncclAllGather", "ncclReduceScatter", "ncclAllReduce" };
    if (count < 0)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: %s of %lld floats", what[k],
                            (long long)count);
    cudaStream_t s = (cudaStream_t)stream;
    size_t n = (size_t)count;
    ncclResult_t r =
        k == ALL_GATHER       ? F.ncclAllGather(send, recv, n, ncclFloat32, c->comm, s)
        : k == REDUCE_SCATTER ? F.ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, c->comm, s)
                              : F.ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, c->comm, s);
    return r == ncclSuccess ? SMOE_OK : fail(err, r, what[k]);
}

smoe_status smoe_nccl_all_gather(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err)
{
    return coll(c, ALL_GATHER, send, recv, count, stream, err);
}

smoe_status smoe_nccl_all_gather_bytes(smoe_nccl *c, const void *send, void *recv, int64_t bytes,
                                       void *stream, smoe_err *err)
{
    if (bytes < 0)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: ncclAllGather of %lld bytes",
                            (long long)bytes);
    NK(F.ncclAllGather(send, recv, (size_t)bytes, ncclUint8, c->comm, (cudaStream_t)stream),
       "ncclAllGather");
    return SMOE_OK;
}

smoe_status smoe_nccl_reduce_scatter(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                     void *stream, smoe_err *err)
{
    return coll(c, REDUCE_SCATTER, send, recv, count, stream, err);
}

smoe_status smoe_nccl_all_reduce(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err)
{
    return coll(c, ALL_REDUCE, send, recv, count, stream, err);
}

smoe_status smoe_nccl_all_to_all_v(smoe_nccl *c, const float *send, const int64_t *send_counts,
                                   float *recv, const int64_t *recv_counts, void *stream,
                                   smoe_err *err)
{
    for (int p = 0; p < c->size; p++)
        if (send_counts[p] < 0 || recv_counts[p] < 0)
            return smoe_err_set(err, SMOE_EINVAL,
                                "nccl: all-to-all with a negative count for peer %d", p);
    cudaStream_t s = (cudaStream_t)stream;
    NK(F.ncclGroupStart(), "ncclGroupStart");
    ncclResult_t r = ncclSuccess;
    int64_t so = 0, ro = 0;
    for (int p = 0; p < c->size && r == ncclSuccess; p++) {
        if (send_counts[p])
            r = F.ncclSend(send + so, (size_t)send_counts[p], ncclFloat32, p, c->comm, s);
        if (r == ncclSuccess && recv_counts[p])
            r = F.ncclRecv(recv + ro, (size_t)recv_counts[p], ncclFloat32, p, c->comm, s);
        so += send_counts[p];
        ro += recv_counts[p];
    }
    ncclResult_t e = F.ncclGroupEnd(); /* always closes the group it opened */
    if (r != ncclSuccess)
        return fail(err, r, "ncclSend/ncclRecv");
    if (e != ncclSuccess)
        return fail(err, e, "ncclGroupEnd");
    return SMOE_OK;
}
