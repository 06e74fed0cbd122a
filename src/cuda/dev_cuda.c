/* The device layer on CUDA (dev.h: smoe_dev_cuda_open), through the CUDA
 * runtime's C API (CUDA headers stay in src/cuda/).
 * Every call runs on the device selected at open (one device per process;
 * a thread that opens another device must not share this one). An event
 * remembers whether it was ever recorded, so a wait on one that was not is
 * refused as the emulation refuses it; waits with a timeout poll
 * cudaEventQuery / cudaStreamQuery, so a dead peer's gather cannot hang the
 * host forever. */
#define _GNU_SOURCE
#include "cuda_impl.h"

#include <stdlib.h>
#include <time.h>

struct smoe_dev_event {
    cudaEvent_t e;
    int recorded;
};

typedef struct cuda_dev {
    int ordinal;
    smoe_dev_stream *streams;
} cuda_dev;

static cuda_dev *C(void *ctx) { return ctx; }

static smoe_status fail(smoe_err *err, cudaError_t e, const char *what)
{
    return smoe_err_set(err, e == cudaErrorMemoryAllocation ? SMOE_ENOMEM : SMOE_ECOMM,
                        "device cuda: %s: %s", what, cudaGetErrorString(e));
}

#define CK(call, what)                      \
    do {                                    \
        cudaError_t e_ = (call);            \
        if (e_ != cudaSuccess)              \
            return fail(err, e_, what);     \
    } while (0)

static void nap(void)
{
    struct timespec ts = { 0, 50 * 1000 };
    nanosleep(&ts, NULL);
}

static smoe_status c_alloc(void *ctx, size_t bytes, void **out, smoe_err *err)
{
    (void)ctx;
    CK(cudaMalloc(out, bytes ? bytes : 1), "cudaMalloc");
    return SMOE_OK;
}

static smoe_status c_free(void *ctx, void *p, smoe_err *err)
{
    (void)ctx;
    CK(cudaFree(p), "cudaFree");
    return SMOE_OK;
}

static smoe_status c_stream_new(void *ctx, int priority, smoe_dev_stream **out, smoe_err *err)
{
    int least = 0, greatest = 0;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
    smoe_dev_stream *s = calloc(1, sizeof *s);
    if (!s)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory for a stream");
    cudaError_t e = cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking,
                                                 priority > 0 ? greatest : least);
    if (e != cudaSuccess) {
        free(s);
        return fail(err, e, "cudaStreamCreateWithPriority");
    }
    s->next = C(ctx)->streams;
    C(ctx)->streams = s;
    *out = s;
    return SMOE_OK;
}

static void c_stream_free(void *ctx, smoe_dev_stream *s)
{
    smoe_dev_stream **p = &C(ctx)->streams;
    while (*p && *p != s)
        p = &(*p)->next;
    if (*p)
        *p = s->next;
    (void)cudaStreamSynchronize(s->s);
    (void)cudaStreamDestroy(s->s);
    free(s);
}

static smoe_status c_event_new(void *ctx, smoe_dev_event **out, smoe_err *err)
{
    (void)ctx;
    smoe_dev_event *e = calloc(1, sizeof *e);
    if (!e)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory for an event");
    cudaError_t r = cudaEventCreateWithFlags(&e->e, cudaEventDefault);
    if (r != cudaSuccess) {
        free(e);
        return fail(err, r, "cudaEventCreate");
    }
    *out = e;
    return SMOE_OK;
}

static void c_event_free(void *ctx, smoe_dev_event *e)
{
    (void)ctx;
    (void)cudaEventDestroy(e->e);
    free(e);
}

static smoe_status c_record(void *ctx, smoe_dev_event *e, smoe_dev_stream *s, smoe_err *err)
{
    (void)ctx;
    CK(cudaEventRecord(e->e, s->s), "cudaEventRecord");
    e->recorded = 1;
    return SMOE_OK;
}

static smoe_status c_wait(void *ctx, smoe_dev_stream *s, smoe_dev_event *e, smoe_err *err)
{
    (void)ctx;
    if (!e->recorded)
        return smoe_err_set(err, SMOE_EINVAL,
                            "device: wait on an event that was never recorded (it would not wait)");
    CK(cudaStreamWaitEvent(s->s, e->e, 0), "cudaStreamWaitEvent");
    return SMOE_OK;
}

static smoe_status c_query(void *ctx, smoe_dev_event *e, int *done, smoe_err *err)
{
    (void)ctx;
    cudaError_t r = cudaEventQuery(e->e);
    if (r != cudaSuccess && r != cudaErrorNotReady)
        return fail(err, r, "cudaEventQuery");
    *done = r == cudaSuccess;
    return SMOE_OK;
}

static smoe_status c_event_sync(void *ctx, smoe_dev_event *e, double timeout_s, smoe_err *err)
{
    if (timeout_s <= 0) {
        CK(cudaEventSynchronize(e->e), "cudaEventSynchronize");
        return SMOE_OK;
    }
    double end = smoe_now() + timeout_s;
    for (int done = 0;;) {
        smoe_status st = c_query(ctx, e, &done, err);
        if (st != SMOE_OK || done)
            return st;
        if (smoe_now() >= end)
            return smoe_err_set(err, SMOE_ECOMM, "device: an event did not finish in %g s",
                                timeout_s);
        nap();
    }
}

static smoe_status c_elapsed(void *ctx, smoe_dev_event *a, smoe_dev_event *b, double *s,
                             smoe_err *err)
{
    (void)ctx;
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a->e, b->e), "cudaEventElapsedTime");
    *s = (double)ms * 1e-3;
    return SMOE_OK;
}

static smoe_status c_copy(void *ctx, void *dst, const void *src, size_t bytes,
                          smoe_dev_stream *s, smoe_err *err)
{
    (void)ctx;
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->s), "cudaMemcpyAsync");
    return SMOE_OK;
}

static smoe_status c_copy2d(void *ctx, void *dst, size_t dpitch, const void *src, size_t spitch,
                            size_t width, size_t height, smoe_dev_stream *s, smoe_err *err)
{
    (void)ctx;
    CK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault, s->s),
       "cudaMemcpy2DAsync");
    return SMOE_OK;
}

static smoe_status c_fill(void *ctx, void *p, unsigned char byte, size_t bytes,
                          smoe_dev_stream *s, smoe_err *err)
{
    (void)ctx;
    CK(cudaMemsetAsync(p, byte, bytes, s->s), "cudaMemsetAsync");
    return SMOE_OK;
}

static smoe_status c_delay(void *ctx, double seconds, smoe_dev_stream *s, smoe_err *err)
{
    (void)ctx;
    if (!(seconds >= 0 && seconds < 3600))
        return smoe_err_set(err, SMOE_EINVAL, "cuda: a delay of %g s", seconds);
    CK(cuda_spin((unsigned long long)(seconds * 1e9), s->s), "the delay kernel");
    return SMOE_OK;
}

static smoe_status c_host_fn(void *ctx, smoe_dev_stream *s, smoe_dev_fn fn, void *ud,
                             smoe_err *err)
{
    (void)ctx;
    CK(cudaLaunchHostFunc(s->s, fn, ud), "cudaLaunchHostFunc");
    return SMOE_OK;
}

static smoe_status c_sync(void *ctx, double timeout_s, smoe_err *err)
{
    if (timeout_s <= 0) {
        CK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        return SMOE_OK;
    }
    double end = smoe_now() + timeout_s;
    for (smoe_dev_stream *s = C(ctx)->streams; s;) {
        cudaError_t r = cudaStreamQuery(s->s);
        if (r == cudaSuccess) {
            s = s->next;
            continue;
        }
        if (r != cudaErrorNotReady)
            return fail(err, r, "cudaStreamQuery");
        if (smoe_now() >= end)
            return smoe_err_set(err, SMOE_ECOMM, "device: the device's work did not finish in %g s",
                                timeout_s);
        nap();
    }
    return SMOE_OK;
}

static smoe_status c_last_error(void *ctx, smoe_err *err)
{
    (void)ctx;
    CK(cudaGetLastError(), "an earlier launch");
    return SMOE_OK;
}

static void c_close(void *ctx)
{
    cuda_dev *d = C(ctx);
    while (d->streams)
        c_stream_free(d, d->streams);
    (void)cudaDeviceSynchronize();
    free(d);
}

static const smoe_dev_ops cuda_ops = {
    .name = "cuda",
    .alloc = c_alloc, .free = c_free,
    .stream_new = c_stream_new, .stream_free = c_stream_free,
    .event_new = c_event_new, .event_free = c_event_free,
    .record = c_record, .wait = c_wait, .query = c_query, .event_sync = c_event_sync,
    .elapsed = c_elapsed, .copy = c_copy, .copy2d = c_copy2d, .fill = c_fill,
    .delay = c_delay, .host_fn = c_host_fn, .sync = c_sync, .last_error = c_last_error, .close = c_close,
};

int smoe_dev_have_cuda(void) { return 1; }

int smoe_dev_cuda_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

smoe_status smoe_dev_cuda_open(int ordinal, smoe_dev *out, smoe_err *err)
{
    out->ops = &cuda_ops;
    out->ctx = NULL;
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess || ordinal < 0 || ordinal >= n)
        return smoe_err_set(err, SMOE_ENOTFOUND, "device cuda:%d: not present (%d device%s%s%s)",
                            ordinal, n, n == 1 ? "" : "s", r != cudaSuccess ? ": " : "",
                            r != cudaSuccess ? cudaGetErrorString(r) : "");
    CK(cudaSetDevice(ordinal), "cudaSetDevice");
    cuda_dev *d = calloc(1, sizeof *d);
    if (!d)
        return smoe_err_set(err, SMOE_ENOMEM, "device cuda: out of memory opening the device");
    d->ordinal = ordinal;
    out->ctx = d;
    return SMOE_OK;
}
