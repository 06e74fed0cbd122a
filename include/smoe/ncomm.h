/* smoe ncomm: a communicator (comm.h: smoe_comm) for one rank per device
 * whose weight gathers and gradient reductions run over NCCL (nccl.h) on
 * the device's streams, and whose everything else (who the ranks are, the
 * mesh, the small collectives on host numbers, waits, the expert group) is
 * a host communicator's: the MPI runtime's in a launch of one process per
 * GPU, the in-process ranks' in a test.
 *
 * The device side is comm.h's smoe_comm_device, with the rules of the
 * in-process ranks on a device: a collective is enqueued at its issue
 * point on the transfer stream behind an event recorded on the compute
 * stream (the host never blocks to issue), every rank issues them in the
 * same order (NCCL's rule; the trainer's order is the schedule's). A
 * gather's wait makes the compute stream wait on the gather's event (no
 * host wait); a reduction's flag is set once its event has fired (polled
 * by progress, wait_step and drain). fp32 and bf16 gathers (the bf16 wire
 * converted on the compute stream, as comm.h says), fp32 reductions;
 * NCCL's reductions add in the order its algorithm picks, so a run is not
 * bitwise the in-process ranks' on a real NCCL (the tests' fake adds in
 * rank order, and is). */
#ifndef SMOE_NCOMM_H
#define SMOE_NCOMM_H

#include "smoe/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over host: rank 0 makes NCCL's id and broadcasts it, every
 * rank joins the world communicator as its host rank. d needs three
 * distinct transfer streams: xfer for the prefetched gathers, residual for
 * a legacy gather's stages at its wait, reduce for the gradients' (each
 * role with NCCL communicators of its own, so each stream meets its
 * collectives in the same order on every rank: the trainer's issue order
 * within a role is fixed, the interleaving of roles is not). handle maps a
 * stream to the one NCCL takes (CUDA: smoe_cuda_stream_handle). host, d
 * and its objects are borrowed and must outlive *out. SMOE_EINVAL for an
 * incomplete device; NCCL's failures as SMOE_ECOMM. */
typedef void *(*smoe_ncomm_stream_fn)(struct smoe_dev_stream *s);
SMOE_MUST_CHECK
smoe_status smoe_comm_nccl_new(const smoe_comm *host, const smoe_comm_device *d,
                               smoe_ncomm_stream_fn handle, smoe_comm *out, smoe_err *err);
/* Waits for the rank's transfer stream, frees what smoe_comm_nccl_new and
 * the gathers made; c->ctx NULL after. */
void smoe_comm_nccl_free(smoe_comm *c);

#ifdef __cplusplus
}
#endif
#endif
