#ifndef SMOE_DEV_H
#define SMOE_DEV_H
/* The device layer: memory, streams, events and copies of one accelerator,
 * behind a vtable with two implementations:
 *  - CUDA (src/cuda/dev_cuda.c, the only file with CUDA headers), built
 *    when CMake finds the CUDA toolkit (-DSMOE_CUDA=AUTO|ON|OFF);
 *  - a host emulation (src/dev/host.c) that runs the streams' work on the
 *    CPU in an order chosen to break code that relies on anything the
 *    stream and event rules below do not promise, so CI exercises every
 *    ordering decision without a GPU.
 *
 * The rules (CUDA's, made strict where CUDA is silent or lenient):
 *  - Work enqueued on one stream runs in enqueue order; work on different
 *    streams is unordered unless an event orders it.
 *  - smoe_dev_record(ev, s) captures the work enqueued on s so far; the
 *    event completes when that work has run. Recording again replaces the
 *    capture (later waits and queries see the new one).
 *  - smoe_dev_wait(s, ev): work enqueued on s after the call runs after
 *    the capture ev held at the time of the call. Waiting on an event
 *    that was never recorded is an error (SMOE_EINVAL), where CUDA would
 *    silently not wait.
 *  - smoe_dev_query / smoe_dev_event_sync: done means the capture has run.
 *  - smoe_dev_free waits for the device to be idle first (as cudaFree
 *    does); the emulation fills the block with 0xff bytes (a NaN in fp32
 *    and bf16) and keeps it until smoe_dev_close, so a read through a stale
 *    pointer gives NaN instead of plausible numbers.
 * Device memory is addressed by host pointers (CUDA's unified virtual
 * addressing); the emulation's device memory is host memory. A host-side
 * call fails with a status; an enqueued operation's failure is sticky and
 * reported by the next smoe_dev_sync / smoe_dev_last_error. */
#include <stddef.h>
#include <stdint.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smoe_dev_stream smoe_dev_stream;
typedef struct smoe_dev_event smoe_dev_event;
typedef void (*smoe_dev_fn)(void *ud);

typedef struct smoe_dev_ops {
    const char *name; /* "cuda", "host emulation" */
    smoe_status (*alloc)(void *ctx, size_t bytes, void **out, smoe_err *err);
    smoe_status (*free)(void *ctx, void *p, smoe_err *err);
    /* priority: 0 normal, > 0 higher (gathers); clamped to what the device has */
    smoe_status (*stream_new)(void *ctx, int priority, smoe_dev_stream **out, smoe_err *err);
    void (*stream_free)(void *ctx, smoe_dev_stream *s);
    smoe_status (*event_new)(void *ctx, smoe_dev_event **out, smoe_err *err);
    void (*event_free)(void *ctx, smoe_dev_event *e);
    smoe_status (*record)(void *ctx, smoe_dev_event *e, smoe_dev_stream *s, smoe_err *err);
    smoe_status (*wait)(void *ctx, smoe_dev_stream *s, smoe_dev_event *e, smoe_err *err);
    /* 1 done, 0 not yet; a status < 0 is never returned: errors go to err */
    smoe_status (*query)(void *ctx, smoe_dev_event *e, int *done, smoe_err *err);
    smoe_status (*event_sync)(void *ctx, smoe_dev_event *e, double timeout_s, smoe_err *err);
    /* seconds from a's completion to b's, both recorded and done */
    smoe_status (*elapsed)(void *ctx, smoe_dev_event *a, smoe_dev_event *b, double *s,
                           smoe_err *err);
    smoe_status (*copy)(void *ctx, void *dst, const void *src, size_t bytes,
                        smoe_dev_stream *s, smoe_err *err);
    /* height rows of width bytes, rows dpitch / spitch bytes apart */
    smoe_status (*copy2d)(void *ctx, void *dst, size_t dpitch, const void *src, size_t spitch,
                          size_t width, size_t height, smoe_dev_stream *s, smoe_err *err);
    smoe_status (*fill)(void *ctx, void *p, unsigned char byte, size_t bytes,
                        smoe_dev_stream *s, smoe_err *err);
    /* the stream does nothing else for `seconds` (after its earlier work,
     * before its later work): a slower link's time, stood in for (CUDA: one
     * thread spinning on the global timer) */
    smoe_status (*delay)(void *ctx, double seconds, smoe_dev_stream *s, smoe_err *err);
    /* fn(ud) on a host thread once the stream's earlier work has run; it
     * must not call the device layer */
    smoe_status (*host_fn)(void *ctx, smoe_dev_stream *s, smoe_dev_fn fn, void *ud,
                           smoe_err *err);
    /* every stream's work done; SMOE_ECOMM after timeout_s (<= 0: never) */
    smoe_status (*sync)(void *ctx, double timeout_s, smoe_err *err);
    smoe_status (*last_error)(void *ctx, smoe_err *err);
    void (*close)(void *ctx);
} smoe_dev_ops;

typedef struct smoe_dev {
    const smoe_dev_ops *ops;
    void *ctx;
} smoe_dev;

/* ---- the host emulation (src/dev/host.c) ----
 * SMOE_DEV_HOST_THREADS: one CPU thread per stream, running its work as
 * soon as it is ready (real concurrency, for the sanitizers).
 * SMOE_DEV_HOST_ADVERSARIAL: nothing runs until the host waits (sync,
 * event_sync, query, free); then one operation at a time, the stream
 * drawn at random (seeded) among those whose next operation is ready,
 * so every order the rules allow can happen and a given seed repeats. */
typedef enum smoe_dev_host_mode { SMOE_DEV_HOST_THREADS, SMOE_DEV_HOST_ADVERSARIAL } smoe_dev_host_mode;

SMOE_MUST_CHECK
smoe_status smoe_dev_host_open(smoe_dev_host_mode mode, uint64_t seed, smoe_dev *out,
                               smoe_err *err);
/* The number of operations the emulation has run (a test's witness that
 * work happened where it expected). */
int64_t smoe_dev_host_ops_run(const smoe_dev *d);

/* ---- CUDA (src/cuda/dev_cuda.c; absent from builds without CUDA) ----
 * SMOE_ENOTFOUND when the build has no CUDA or no device is present (a
 * test skips on it); the device is selected on the calling thread. */
SMOE_MUST_CHECK
smoe_status smoe_dev_cuda_open(int ordinal, smoe_dev *out, smoe_err *err);
/* 1 when this build has the CUDA implementation */
int smoe_dev_have_cuda(void);
/* the CUDA devices this process sees (0 without CUDA or a driver) */
int smoe_dev_cuda_count(void);

/* ---- calls through the vtable (src/dev/dev.c) ---- */
const char *smoe_dev_name(const smoe_dev *d);
SMOE_MUST_CHECK smoe_status smoe_dev_alloc(const smoe_dev *d, size_t bytes, void **out, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_free(const smoe_dev *d, void *p, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_stream_new(const smoe_dev *d, int priority,
                                                smoe_dev_stream **out, smoe_err *err);
void smoe_dev_stream_free(const smoe_dev *d, smoe_dev_stream *s);
SMOE_MUST_CHECK smoe_status smoe_dev_event_new(const smoe_dev *d, smoe_dev_event **out, smoe_err *err);
void smoe_dev_event_free(const smoe_dev *d, smoe_dev_event *e);
SMOE_MUST_CHECK smoe_status smoe_dev_record(const smoe_dev *d, smoe_dev_event *e, smoe_dev_stream *s,
                                            smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_wait(const smoe_dev *d, smoe_dev_stream *s, smoe_dev_event *e,
                                          smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_query(const smoe_dev *d, smoe_dev_event *e, int *done, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_event_sync(const smoe_dev *d, smoe_dev_event *e, double timeout_s,
                                                smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_elapsed(const smoe_dev *d, smoe_dev_event *a, smoe_dev_event *b,
                                             double *s, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_copy(const smoe_dev *d, void *dst, const void *src, size_t bytes,
                                          smoe_dev_stream *s, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_copy2d(const smoe_dev *d, void *dst, size_t dpitch, const void *src,
                                            size_t spitch, size_t width, size_t height,
                                            smoe_dev_stream *s, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_fill(const smoe_dev *d, void *p, unsigned char byte, size_t bytes,
                                          smoe_dev_stream *s, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_delay(const smoe_dev *d, double seconds, smoe_dev_stream *s,
                                           smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_host_fn(const smoe_dev *d, smoe_dev_stream *s, smoe_dev_fn fn,
                                             void *ud, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_sync(const smoe_dev *d, double timeout_s, smoe_err *err);
SMOE_MUST_CHECK smoe_status smoe_dev_last_error(const smoe_dev *d, smoe_err *err);
/* Waits for the device, frees what the implementation holds; d->ctx NULL after. */
void smoe_dev_close(smoe_dev *d);

#ifdef __cplusplus
}
#endif
#endif
