/* The device layer's calls through its vtable (dev.h); the implementations
 * are src/dev/host.c and src/cuda/dev_cuda.c. */
#include "smoe/dev.h"

const char *smoe_dev_name(const smoe_dev *d) { return d->ops->name; }

smoe_status smoe_dev_alloc(const smoe_dev *d, size_t bytes, void **out, smoe_err *err)
{
    return d->ops->alloc(d->ctx, bytes, out, err);
}

smoe_status smoe_dev_free(const smoe_dev *d, void *p, smoe_err *err)
{
    return p ? d->ops->free(d->ctx, p, err) : SMOE_OK;
}

smoe_status smoe_dev_stream_new(const smoe_dev *d, int priority, smoe_dev_stream **out,
                                smoe_err *err)
{
    return d->ops->stream_new(d->ctx, priority, out, err);
}

void smoe_dev_stream_free(const smoe_dev *d, smoe_dev_stream *s)
{
    if (s)
        d->ops->stream_free(d->ctx, s);
}

smoe_status smoe_dev_event_new(const smoe_dev *d, smoe_dev_event **out, smoe_err *err)
{
    return d->ops->event_new(d->ctx, out, err);
}

void smoe_dev_event_free(const smoe_dev *d, smoe_dev_event *e)
{
    if (e)
        d->ops->event_free(d->ctx, e);
}

smoe_status smoe_dev_record(const smoe_dev *d, smoe_dev_event *e, smoe_dev_stream *s,
                            smoe_err *err)
{
    return d->ops->record(d->ctx, e, s, err);
}

smoe_status smoe_dev_wait(const smoe_dev *d, smoe_dev_stream *s, smoe_dev_event *e, smoe_err *err)
{
    return d->ops->wait(d->ctx, s, e, err);
}

smoe_status smoe_dev_query(const smoe_dev *d, smoe_dev_event *e, int *done, smoe_err *err)
{
    return d->ops->query(d->ctx, e, done, err);
}

smoe_status smoe_dev_event_sync(const smoe_dev *d, smoe_dev_event *e, double timeout_s,
                                smoe_err *err)
{
    return d->ops->event_sync(d->ctx, e, timeout_s, err);
}

smoe_status smoe_dev_elapsed(const smoe_dev *d, smoe_dev_event *a, smoe_dev_event *b, double *s,
                             smoe_err *err)
{
    return d->ops->elapsed(d->ctx, a, b, s, err);
}

smoe_status smoe_dev_copy(const smoe_dev *d, void *dst, const void *src, size_t bytes,
                          smoe_dev_stream *s, smoe_err *err)
{
    return d->ops->copy(d->ctx, dst, src, bytes, s, err);
}

smoe_status smoe_dev_copy2d(const smoe_dev *d, void *dst, size_t dpitch, const void *src,
                            size_t spitch, size_t width, size_t height, smoe_dev_stream *s,
                            smoe_err *err)
{
    return d->ops->copy2d(d->ctx, dst, dpitch, src, spitch, width, height, s, err);
}

smoe_status smoe_dev_fill(const smoe_dev *d, void *p, unsigned char byte, size_t bytes,
                          smoe_dev_stream *s, smoe_err *err)
{
    return d->ops->fill(d->ctx, p, byte, bytes, s, err);
}

smoe_status smoe_dev_delay(const smoe_dev *d, double seconds, smoe_dev_stream *s, smoe_err *err)
{
    return d->ops->delay(d->ctx, seconds, s, err);
}

smoe_status smoe_dev_host_fn(const smoe_dev *d, smoe_dev_stream *s, smoe_dev_fn fn, void *ud,
                             smoe_err *err)
{
    return d->ops->host_fn(d->ctx, s, fn, ud, err);
}

smoe_status smoe_dev_sync(const smoe_dev *d, double timeout_s, smoe_err *err)
{
    return d->ops->sync(d->ctx, timeout_s, err);
}

smoe_status smoe_dev_last_error(const smoe_dev *d, smoe_err *err)
{
    return d->ops->last_error(d->ctx, err);
}

void smoe_dev_close(smoe_dev *d)
{
    if (d->ctx)
        d->ops->close(d->ctx);
    d->ctx = NULL;
}
