/* The CUDA module in a build without CUDA (CMake compiles this file only
 * then): no kernel table, no kernel queue. */
#include "smoe/cuda.h"

const smoe_kops *smoe_kops_cuda(void) { return NULL; }

smoe_status smoe_kq_cuda_new(const smoe_dev *d, smoe_dev_stream *s, size_t workspace_bytes,
                             unsigned flags, smoe_kq **out, smoe_err *err)
{
    (void)d;
    (void)s;
    (void)workspace_bytes;
    (void)flags;
    *out = NULL;
    return smoe_err_set(err, SMOE_ENOTFOUND, "device cuda: this build has no CUDA");
}

void smoe_kq_free(smoe_kq *q) { (void)q; }

smoe_status smoe_kq_status(const smoe_kq *q, smoe_err *err)
{
    (void)q;
    return smoe_err_set(err, SMOE_ENOTFOUND, "device cuda: this build has no CUDA");
}

int smoe_kq_gemm_plans(const smoe_kq *q)
{
    (void)q;
    return 0;
}

void *smoe_cuda_stream_handle(smoe_dev_stream *s)
{
    (void)s;
    return NULL;
}
