/* The NCCL communicator in a build without NCCL (CMake compiles this file
 * only then; ncomm.c and ngather.c otherwise): it is never there. */
#include "smoe/ncomm.h"

smoe_status smoe_comm_nccl_new(const smoe_comm *host, const smoe_comm_device *d,
                               smoe_ncomm_stream_fn handle, smoe_comm *out, smoe_err *err)
{
    (void)host, (void)d, (void)handle;
    out->ops = NULL;
    out->ctx = NULL;
    return smoe_err_set(err, SMOE_ENOTFOUND, "this build has no NCCL");
}

void smoe_comm_nccl_free(smoe_comm *c)
{
    if (c)
        c->ctx = NULL;
}
