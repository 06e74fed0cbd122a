/* Kernel queues (cuda.h): a CUDA stream of the device layer with its
 * GEMM state and the sticky first failure of the work enqueued on it. */
#include "cuda_impl.h"

#include <stdlib.h>
#include <string.h>

smoe_status smoe_kq_cuda_new(const smoe_dev *d, smoe_dev_stream *s, size_t workspace_bytes,
                             smoe_kq **out, smoe_err *err)
{
    *out = NULL;
    if (!d || !d->ops || strcmp(d->ops->name, "cuda") != 0 || !s)
        return smoe_err_set(err, SMOE_EINVAL,
                            "device cuda: a kernel queue needs a stream of a CUDA device");
    smoe_kq *q = calloc(1, sizeof *q);
    if (!q)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory for a kernel queue");
    q->dev = d;
    q->stream = s->s;
    q->err.code = SMOE_OK;
    smoe_status rc = cuda_lt_new(q, workspace_bytes, err);
    if (rc != SMOE_OK) {
        free(q);
        return rc;
    }
    *out = q;
    return SMOE_OK;
}

void smoe_kq_free(smoe_kq *q)
{
    if (!q)
        return;
    (void)cudaStreamSynchronize(q->stream);
    cuda_lt_free(q);
    free(q);
}

smoe_status smoe_kq_status(const smoe_kq *q, smoe_err *err)
{
    if (q->err.code != SMOE_OK) {
        if (err)
            *err = q->err;
        return q->err.code;
    }
    /* a kernel's fault (an illegal address, ...) surfaces on the stream */
    cudaError_t e = cudaStreamQuery(q->stream);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        return smoe_err_set(err, SMOE_ECOMM, "device cuda: kernel queue: %s",
                            cudaGetErrorString(e));
    return SMOE_OK;
}

int smoe_kq_gemm_plans(const smoe_kq *q) { return cuda_lt_plans(q->lt); }

void kq_fail(smoe_kq *q, const char *what, const char *msg)
{
    if (q->err.code == SMOE_OK)
        (void)smoe_err_set(&q->err, SMOE_ECOMM, "device cuda: kernel %s: %s", what, msg);
}

void kq_check_launch(smoe_kq *q, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        kq_fail(q, what, cudaGetErrorString(e));
}
