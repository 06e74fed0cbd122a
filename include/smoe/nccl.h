/* smoe nccl: the collectives of one process per GPU, over NCCL
 * (src/nccl/, the only file with nccl.h). Built when CMake finds nccl.h
 * beside the CUDA toolkit; the library links no NCCL itself, so a program
 * links the real one and the test a fake one (tests/fake_nccl.c: ranks as
 * threads, host memory), which is how CI checks this code without a GPU.
 *
 * Every collective only enqueues on `stream` (a CUDA stream handle,
 * smoe_cuda_stream_handle; NULL: the legacy default stream) and takes fp32
 * buffers of device memory. Every rank calls the collectives in the same
 * order, as NCCL requires. NCCL's reductions add in the order its
 * algorithm picks, not in rank order: a run over NCCL is reproducible on
 * the same machine and ring, not bitwise the in-process ranks' (comm.h). */
#ifndef SMOE_NCCL_H
#define SMOE_NCCL_H

#include <stdint.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SMOE_NCCL_ID_BYTES = 128 };

typedef struct smoe_nccl smoe_nccl;

/* A new unique id: one rank makes it, the caller hands it to every rank
 * (over MPI, say) before smoe_nccl_new. */
SMOE_MUST_CHECK
smoe_status smoe_nccl_unique_id(unsigned char id[SMOE_NCCL_ID_BYTES], smoe_err *err);
/* This process's rank of nranks, on the CUDA device current on the calling
 * thread; collective: every rank calls it with the same id. SMOE_EINVAL for
 * a rank outside [0, nranks). */
SMOE_MUST_CHECK
smoe_status smoe_nccl_new(const unsigned char id[SMOE_NCCL_ID_BYTES], int nranks, int rank,
                          smoe_nccl **out, smoe_err *err);
void smoe_nccl_free(smoe_nccl *c);
/* Collective over c: the ranks of equal color form a new communicator,
 * ranked by key (ties by their rank in c); ncclCommSplit. */
SMOE_MUST_CHECK
smoe_status smoe_nccl_split(smoe_nccl *c, int color, int key, smoe_nccl **out, smoe_err *err);
int smoe_nccl_rank(const smoe_nccl *c);
int smoe_nccl_size(const smoe_nccl *c);

/* recv (size * count) = every rank's send (count), in rank order. */
SMOE_MUST_CHECK
smoe_status smoe_nccl_all_gather(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err);
/* The same for `bytes` bytes a rank (records of any type). */
SMOE_MUST_CHECK
smoe_status smoe_nccl_all_gather_bytes(smoe_nccl *c, const void *send, void *recv, int64_t bytes,
                                       void *stream, smoe_err *err);
/* recv (count) = the sum over the ranks of their send's chunk `rank`
 * (send: size * count). */
SMOE_MUST_CHECK
smoe_status smoe_nccl_reduce_scatter(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                     void *stream, smoe_err *err);
/* recv (count) = the sum over the ranks of send (count); recv may be send. */
SMOE_MUST_CHECK
smoe_status smoe_nccl_all_reduce(smoe_nccl *c, const float *send, float *recv, int64_t count,
                                 void *stream, smoe_err *err);
/* The expert exchange: send holds send_counts[p] floats for peer p, peers
 * back to back in order; recv gets recv_counts[p] floats from peer p, the
 * same way (one group of sends and receives). */
SMOE_MUST_CHECK
smoe_status smoe_nccl_all_to_all_v(smoe_nccl *c, const float *send, const int64_t *send_counts,
                                   float *recv, const int64_t *recv_counts, void *stream,
                                   smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
