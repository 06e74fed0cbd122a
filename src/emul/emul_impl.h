/* Internal to src/emul/: the queue and the closure that carries one
 * kernel call to the emulated stream. */
#ifndef SMOE_EMUL_IMPL_H
#define SMOE_EMUL_IMPL_H

#include "smoe/emul.h"

struct smoe_eq {
    const smoe_dev *dev;
    smoe_dev_stream *s;
    smoe_dev_event *ev; /* read / write wait on it */
    unsigned flags;     /* SMOE_KOPS_BF16_GEMM or 0 */
    smoe_err err;       /* the first failure; err.code == SMOE_OK while none */
};

/* Run fn(args) as the stream's next work, args (bytes) copied first. */
void eq_enqueue(void *q, void (*fn)(const void *args), const void *args, size_t bytes);
void eq_fail(smoe_eq *q, const char *what, const char *msg);

/* queue.c: the memory entries of backend.h */
void *eq_alloc(void *q, size_t bytes);
void eq_free_mem(void *q, void *p, size_t bytes);
void eq_copy(void *q, void *dst, const void *src, size_t bytes);
void eq_fill0(void *q, void *p, size_t bytes);
void eq_read(void *q, void *host, const void *src, size_t bytes);
void eq_write(void *q, void *dst, const void *host, size_t bytes);

#endif
