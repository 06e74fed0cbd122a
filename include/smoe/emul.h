/* smoe emul: the kernel table on the host emulation of a device (dev.h),
 * so that CI runs code written for a device table, without a GPU, in the
 * orders a device may choose.
 *
 * Every kernel entry of smoe_kops_emul() enqueues the CPU kernel of the
 * same name (kernels.h; bit for bit the CPU table's) as work of the queue's
 * stream, with a copy of its scalar arguments; the memory entries are the
 * emulation's (freed memory poisoned with NaN). In the emulation's
 * adversarial mode nothing runs until the host waits, so a caller that
 * reads a result in place instead of through `read`, or reuses a buffer
 * before the stream is done with it, gets wrong numbers, not right ones by
 * luck. The table is not synchronous (backend.h). */
#ifndef SMOE_EMUL_H
#define SMOE_EMUL_H

#include "smoe/backend.h"
#include "smoe/core.h"
#include "smoe/dev.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smoe_eq smoe_eq;

/* The emulated table: its stream argument is a smoe_eq. */
const smoe_kops *smoe_kops_emul(void);

/* A queue on stream s of the host emulation d (smoe_dev_host_open); it
 * borrows both. flags: 0 or SMOE_KOPS_BF16_GEMM (backend.h). SMOE_EINVAL
 * for a device that is not the emulation, or an unknown flag. */
SMOE_MUST_CHECK
smoe_status smoe_eq_new(const smoe_dev *d, smoe_dev_stream *s, unsigned flags, smoe_eq **out,
                        smoe_err *err);
/* Waits for the device, then frees the queue. */
void smoe_eq_free(smoe_eq *q);
/* SMOE_OK, or the first failure of the work enqueued so far (sticky). */
SMOE_MUST_CHECK smoe_status smoe_eq_status(const smoe_eq *q, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
