/* smoe cuda: the kernel table on an NVIDIA GPU (src/cuda/), the device
 * twin of the CPU table of backend.h.
 *
 * The stream argument of every entry of smoe_kops_cuda() is a kernel queue
 * (smoe_kq): one device stream of the device layer (dev.h) with what its
 * kernels own: a cuBLASLt handle, a GEMM workspace, and the GEMM algorithm
 * chosen once per shape (the shapes, strides, transposes and pointer
 * alignments), so that a run repeats bit for bit. Every entry only
 * enqueues: its arrays are device memory, read and written when the stream
 * runs it; a scalar result (the loss, a dot product) lands in device
 * memory. Entries return nothing: the first failure of a launch or of
 * cuBLASLt is kept in the queue (sticky) and reported by smoe_kq_status.
 *
 * Numerics (fp32, the oracle mode): GEMMs in fp32 with fp32 compute
 * (CUBLAS_COMPUTE_32F: no TF32); the row sums that the CPU kernels take in
 * double (norms, softmax, loss, dot products) are double here too, in a
 * fixed reduction tree, so results repeat bit for bit and differ from the
 * CPU only in the order of additions.
 *
 * In a build without CUDA (src/cuda/none.c) smoe_kops_cuda() is NULL and
 * smoe_kq_cuda_new fails with SMOE_ENOTFOUND. */
#ifndef SMOE_CUDA_H
#define SMOE_CUDA_H

#include <stddef.h>

#include "smoe/backend.h"
#include "smoe/core.h"
#include "smoe/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smoe_kq smoe_kq;

/* The CUDA kernel table; NULL when the build has no CUDA. */
const smoe_kops *smoe_kops_cuda(void);

/* A kernel queue on stream s of the CUDA device d (smoe_dev_cuda_open),
 * with a GEMM workspace of workspace_bytes (0: 32 MiB) from d. flags: 0
 * (fp32, no TF32) or SMOE_KOPS_BF16_GEMM (backend.h: the products' inputs
 * copied to bf16 on the stream, cuBLASLt's bf16 GEMM with fp32 compute and
 * output). The queue borrows d and s: both outlive it. */
SMOE_MUST_CHECK
smoe_status smoe_kq_cuda_new(const smoe_dev *d, smoe_dev_stream *s, size_t workspace_bytes,
                             unsigned flags, smoe_kq **out, smoe_err *err);
/* Waits for the queue's stream, then frees what the queue owns. */
void smoe_kq_free(smoe_kq *q);
/* SMOE_OK, or the first failure of the work enqueued so far (sticky). */
SMOE_MUST_CHECK smoe_status smoe_kq_status(const smoe_kq *q, smoe_err *err);
/* The CUDA stream handle (a cudaStream_t) of stream s of a CUDA device,
 * for the libraries that take one (NCCL); NULL in a build without CUDA. */
void *smoe_cuda_stream_handle(smoe_dev_stream *s);
/* The number of GEMM algorithms chosen so far (one per distinct shape):
 * a test's witness that a repeated shape reuses its choice. */
int smoe_kq_gemm_plans(const smoe_kq *q);

#ifdef __cplusplus
}
#endif
#endif
