/* Kernel queues (cuda.h): a CUDA stream of the device layer with its
 * GEMM state and the sticky first failure of the work enqueued on it. */
#include "cuda_impl.h"

#include <stdlib.h>
#include <string.h>

smoe_status smoe_kq_cuda_new(const smoe_dev *d, smoe_dev_stream *s, size_t workspace_bytes,
                             unsigned flags, smoe_kq **out, smoe_err *err)
{
    *out = NULL;
    if (!d || !d->ops || strcmp(d->ops->name, "cuda") != 0 || !s)
        return smoe_err_set(err, SMOE_EINVAL,
                            "device cuda: a kernel queue needs a stream of a CUDA device");
    if (flags & ~(unsigned)SMOE_KOPS_BF16_GEMM)
        return smoe_err_set(err, SMOE_EINVAL, "device cuda: unknown queue flags 0x%x", flags);
    smoe_kq *q = calloc(1, sizeof *q);
    if (!q)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory for a kernel queue");
    q->dev = d;
    q->stream = s->s;
    q->flags = flags;
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

void *smoe_cuda_stream_handle(smoe_dev_stream *s) { return s ? (void *)s->s : NULL; }

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

/* ---- the table's memory entries (backend.h): device memory of the
 * queue's device, zeroed on the queue's stream; read and write wait for
 * the stream, so the host buffer is free when they return ---- */

void *cuda_mem_alloc(void *vq, size_t bytes)
{
    smoe_kq *q = vq;
    void *p = NULL;
    smoe_err e;
    if (q->err.code != SMOE_OK)
        return NULL;
    if (smoe_dev_alloc(q->dev, bytes, &p, &e) != SMOE_OK) {
        kq_fail(q, "alloc", e.msg);
        return NULL;
    }
    cudaError_t r = cudaMemsetAsync(p, 0, bytes, q->stream);
    if (r == cudaSuccess)
        r = cudaStreamSynchronize(q->stream);
    if (r != cudaSuccess) {
        kq_fail(q, "alloc", cudaGetErrorString(r));
        (void)cudaFree(p);
        return NULL;
    }
    return p;
}

void cuda_mem_free(void *vq, void *p, size_t bytes)
{
    smoe_kq *q = vq;
    smoe_err e;
    (void)bytes;
    if (p && smoe_dev_free(q->dev, p, &e) != SMOE_OK)
        kq_fail(q, "free", e.msg);
}

static void mem_op(smoe_kq *q, const char *what, cudaError_t r, int wait)
{
    if (r == cudaSuccess && wait)
        r = cudaStreamSynchronize(q->stream);
    if (r != cudaSuccess)
        kq_fail(q, what, cudaGetErrorString(r));
}

void cuda_mem_copy(void *vq, void *dst, const void *src, size_t bytes)
{
    smoe_kq *q = vq;
    if (q->err.code == SMOE_OK && bytes)
        mem_op(q, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, q->stream), 0);
}

void cuda_mem_fill0(void *vq, void *p, size_t bytes)
{
    smoe_kq *q = vq;
    if (q->err.code == SMOE_OK && bytes)
        mem_op(q, "fill0", cudaMemsetAsync(p, 0, bytes, q->stream), 0);
}

/* after a failure a read hands back NaN (0xff bytes), never stale bytes
 * that could pass for results */
void cuda_mem_read(void *vq, void *host, const void *src, size_t bytes)
{
    smoe_kq *q = vq;
    if (q->err.code != SMOE_OK) {
        memset(host, 0xff, bytes);
        return;
    }
    mem_op(q, "read", cudaMemcpyAsync(host, src, bytes, cudaMemcpyDefault, q->stream), 1);
    if (q->err.code != SMOE_OK)
        memset(host, 0xff, bytes);
}

void cuda_mem_write(void *vq, void *dst, const void *host, size_t bytes)
{
    smoe_kq *q = vq;
    if (q->err.code == SMOE_OK && bytes)
        mem_op(q, "write", cudaMemcpyAsync(dst, host, bytes, cudaMemcpyDefault, q->stream), 1);
}
