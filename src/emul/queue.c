/* The emulated table's queue (emul.h) and its memory entries: the
 * emulation's memory, copies and fills as stream work, and reads and
 * writes that wait for the stream through an event. */
#include "emul_impl.h"

#include <stdlib.h>
#include <string.h>

smoe_status smoe_eq_new(const smoe_dev *d, smoe_dev_stream *s, unsigned flags, smoe_eq **out,
                        smoe_err *err)
{
    *out = NULL;
    if (!d || !d->ops || strcmp(d->ops->name, "host emulation") != 0 || !s)
        return smoe_err_set(err, SMOE_EINVAL,
                            "emul: a queue needs a stream of the host emulation");
    if (flags & ~(unsigned)SMOE_KOPS_BF16_GEMM)
        return smoe_err_set(err, SMOE_EINVAL, "emul: unknown queue flags 0x%x", flags);
    smoe_eq *q = calloc(1, sizeof *q);
    if (!q)
        return smoe_err_set(err, SMOE_ENOMEM, "emul: out of memory for a queue");
    q->dev = d;
    q->s = s;
    q->flags = flags;
    q->err.code = SMOE_OK;
    smoe_status st = smoe_dev_event_new(d, &q->ev, err);
    if (st != SMOE_OK) {
        free(q);
        return st;
    }
    *out = q;
    return SMOE_OK;
}

void smoe_eq_free(smoe_eq *q)
{
    if (!q)
        return;
    smoe_err e;
    smoe_status st = smoe_dev_sync(q->dev, 0, &e); /* nothing to tell at teardown */
    (void)st;
    smoe_dev_event_free(q->dev, q->ev);
    free(q);
}

smoe_status smoe_eq_status(const smoe_eq *q, smoe_err *err)
{
    if (q->err.code == SMOE_OK)
        return SMOE_OK;
    if (err)
        *err = q->err;
    return q->err.code;
}

void eq_fail(smoe_eq *q, const char *what, const char *msg)
{
    if (q->err.code == SMOE_OK)
        (void)smoe_err_set(&q->err, SMOE_ECOMM, "emul: %s: %s", what, msg);
}

/* the closure: the function, then its arguments */
typedef struct closure {
    void (*fn)(const void *args);
    max_align_t args[];
} closure;

static void run_closure(void *ud)
{
    closure *c = ud;
    c->fn(c->args);
    free(c);
}

void eq_enqueue(void *vq, void (*fn)(const void *args), const void *args, size_t bytes)
{
    smoe_eq *q = vq;
    smoe_err e;
    if (q->err.code != SMOE_OK)
        return;
    closure *c = malloc(sizeof *c + bytes);
    if (!c) {
        eq_fail(q, "enqueue", "out of memory for a kernel's arguments");
        return;
    }
    c->fn = fn;
    memcpy(c->args, args, bytes);
    if (smoe_dev_host_fn(q->dev, q->s, run_closure, c, &e) != SMOE_OK) {
        free(c);
        eq_fail(q, "enqueue", e.msg);
    }
}

/* the stream's work so far done: record, then wait on the host */
static void eq_wait(smoe_eq *q, const char *what)
{
    smoe_err e;
    if (smoe_dev_record(q->dev, q->ev, q->s, &e) != SMOE_OK ||
        smoe_dev_event_sync(q->dev, q->ev, 0, &e) != SMOE_OK)
        eq_fail(q, what, e.msg);
}

void *eq_alloc(void *vq, size_t bytes)
{
    smoe_eq *q = vq;
    smoe_err e;
    void *p = NULL;
    if (q->err.code != SMOE_OK)
        return NULL;
    if (smoe_dev_alloc(q->dev, bytes, &p, &e) != SMOE_OK) {
        eq_fail(q, "alloc", e.msg);
        return NULL;
    }
    if (smoe_dev_fill(q->dev, p, 0, bytes, q->s, &e) != SMOE_OK)
        eq_fail(q, "alloc", e.msg);
    eq_wait(q, "alloc");
    return q->err.code == SMOE_OK ? p : NULL;
}

void eq_free_mem(void *vq, void *p, size_t bytes)
{
    smoe_eq *q = vq;
    smoe_err e;
    (void)bytes;
    if (p && smoe_dev_free(q->dev, p, &e) != SMOE_OK)
        eq_fail(q, "free", e.msg);
}

void eq_copy(void *vq, void *dst, const void *src, size_t bytes)
{
    smoe_eq *q = vq;
    smoe_err e;
    if (q->err.code == SMOE_OK && bytes &&
        smoe_dev_copy(q->dev, dst, src, bytes, q->s, &e) != SMOE_OK)
        eq_fail(q, "copy", e.msg);
}

void eq_fill0(void *vq, void *p, size_t bytes)
{
    smoe_eq *q = vq;
    smoe_err e;
    if (q->err.code == SMOE_OK && bytes && smoe_dev_fill(q->dev, p, 0, bytes, q->s, &e) != SMOE_OK)
        eq_fail(q, "fill0", e.msg);
}

/* after a failure a read hands back NaN (0xff bytes), never stale bytes
 * that could pass for results */
void eq_read(void *vq, void *host, const void *src, size_t bytes)
{
    smoe_eq *q = vq;
    eq_copy(q, host, src, bytes);
    eq_wait(q, "read");
    if (q->err.code != SMOE_OK)
        memset(host, 0xff, bytes);
}

void eq_write(void *vq, void *dst, const void *host, size_t bytes)
{
    smoe_eq *q = vq;
    eq_copy(q, dst, host, bytes);
    eq_wait(q, "write");
}
