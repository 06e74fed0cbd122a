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

int smoe_nccl_rank(const smoe_nccl *c) { return c->rank; }
int smoe_nccl_size(const smoe_nccl *c) { return c->size; }

static smoe_status count_ok(int64_t n, const char *what, smoe_err *err)
{
    if (n < 0)
        return smoe_err_set(err, SMOE_EINVAL, "nccl: %s of %lld floats", what, (long long)n);
    return SMOE_OK;
}

smoe_status smoe_nccl_all_gather(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err)
{
    smoe_status st = count_ok(count, "all-gather", err);
    if (st)
        return st;
    NK(ncclAllGather(send, recv, (size_t)count, ncclFloat32, c->comm, (cudaStream_t)stream),
       "ncclAllGather");
    return SMOE_OK;
}

smoe_status smoe_nccl_reduce_scatter(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                     void *stream, smoe_err *err)
{
    smoe_status st = count_ok(count, "reduce-scatter", err);
    if (st)
        return st;
    NK(ncclReduceScatter(send, recv, (size_t)count, ncclFloat32, ncclSum, c->comm,
                         (cudaStream_t)stream),
       "ncclReduceScatter");
    return SMOE_OK;
}

smoe_status smoe_nccl_all_reduce(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err)
{
    smoe_status st = count_ok(count, "all-reduce", err);
    if (st)
        return st;
    NK(ncclAllReduce(send, recv, (size_t)count, ncclFloat32, ncclSum, c->comm,
                     (cudaStream_t)stream),
       "ncclAllReduce");
    return SMOE_OK;
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
