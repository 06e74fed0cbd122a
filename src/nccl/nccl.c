/* The collectives of one process per GPU over NCCL (nccl.h): thin calls,
 * each NCCL failure turned into SMOE_ECOMM naming the collective and
 * NCCL's reason, counts checked before they reach NCCL. */
#include "smoe/nccl.h"

#include <nccl.h>

#include <stdlib.h>
#include <string.h>

struct smoe_nccl {
    ncclComm_t comm;
    int rank, size;
};

static smoe_status fail(smoe_err *err, ncclResult_t r, const char *what)
{
    return smoe_err_set(err, r == ncclInvalidArgument ? SMOE_EINVAL : SMOE_ECOMM,
                        "nccl: %s: %s", what, ncclGetErrorString(r));
}

#define NK(call, what)                         \
    do {                                       \
        ncclResult_t r_ = (call);              \
        if (r_ != ncclSuccess)                 \
            return fail(err, r_, what);        \
    } while (0)

smoe_status smoe_nccl_unique_id(unsigned char id[SMOE_NCCL_ID_BYTES], smoe_err *err)
{
    ncclUniqueId u;
    NK(ncclGetUniqueId(&u), "ncclGetUniqueId");
    memcpy(id, u.internal, SMOE_NCCL_ID_BYTES);
    return SMOE_OK;
}

smoe_status smoe_nccl_new(const unsigned char id[SMOE_NCCL_ID_BYTES], int nranks, int rank,
                          smoe_nccl **out, smoe_err *err)
{
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: rank %d of %d ranks", rank, nranks);
    smoe_nccl *c = calloc(1, sizeof *c);
    if (!c)
        return smoe_err_set(err, SMOE_ENOMEM, "nccl: out of memory for a communicator");
    ncclUniqueId u;
    memcpy(u.internal, id, SMOE_NCCL_ID_BYTES);
    ncclResult_t r = ncclCommInitRank(&c->comm, nranks, u, rank);
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
    (void)ncclCommDestroy(c->comm);
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
    ncclResult_t r = ncclCommSplit(c->comm, color, key, &n->comm, NULL);
    if (r == ncclSuccess)
        r = ncclCommUserRank(n->comm, &n->rank);
    if (r == ncclSuccess)
        r = ncclCommCount(n->comm, &n->size);
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
        k == ALL_GATHER       ? ncclAllGather(send, recv, n, ncclFloat32, c->comm, s)
        : k == REDUCE_SCATTER ? ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, c->comm, s)
                              : ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, c->comm, s);
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
    NK(ncclAllGather(send, recv, (size_t)bytes, ncclUint8, c->comm, (cudaStream_t)stream),
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
    NK(ncclGroupStart(), "ncclGroupStart");
    ncclResult_t r = ncclSuccess;
    int64_t so = 0, ro = 0;
    for (int p = 0; p < c->size && r == ncclSuccess; p++) {
        if (send_counts[p])
            r = ncclSend(send + so, (size_t)send_counts[p], ncclFloat32, p, c->comm, s);
        if (r == ncclSuccess && recv_counts[p])
            r = ncclRecv(recv + ro, (size_t)recv_counts[p], ncclFloat32, p, c->comm, s);
        so += send_counts[p];
        ro += recv_counts[p];
    }
    ncclResult_t e = ncclGroupEnd(); /* always closes the group it opened */
    if (r != ncclSuccess)
        return fail(err, r, "ncclSend/ncclRecv");
    if (e != ncclSuccess)
        return fail(err, e, "ncclGroupEnd");
    return SMOE_OK;
}
