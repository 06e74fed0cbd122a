/* What every gather engine (the MPI runtime, the single rank, the
 * in-process ranks) shares about a weight's gathers: the one check of its
 * wire (comm.h: smoe_comm_wire_check) and its info record
 * (smoe_comm_wgather_info). */
#include "smoe/comm.h"

#include "smoe/dtype.h"

#include <string.h>

smoe_status smoe_comm_wire_check(const smoe_gather_exec *x, int64_t blk_last, const char *name,
                                 smoe_err *err)
{
    smoe_dtype t = (smoe_dtype)x->wire;
    if (t != SMOE_DT_FP32 && t != SMOE_DT_BF16 && t != SMOE_DT_INT8)
        return smoe_err_set(err, SMOE_EINVAL, "%s: unknown gather dtype %d", name, x->wire);
    if (t == SMOE_DT_INT8 && (x->wire_block < SMOE_INT8_BLOCK_MIN ||
                              x->wire_block > SMOE_INT8_BLOCK_MAX))
        return smoe_err_set(err, SMOE_EINVAL, "%s: int8 block %lld out of range", name,
                            (long long)x->wire_block);
    int64_t rec = smoe_dtype_rec_elems(t, x->wire_block);
    if (t != SMOE_DT_FP32 && (x->rank == 0 || blk_last % rec))
        return smoe_err_set(err, SMOE_EINVAL, "%s: the shard's last dim (%lld) is not a whole "
                            "number of %s records of %lld elements", name,
                            (long long)(x->rank ? blk_last : 0), smoe_dtype_name(t),
                            (long long)rec);
    if (x->reduce_wire != SMOE_DT_FP32 && x->reduce_wire != SMOE_DT_BF16)
        return smoe_err_set(err, SMOE_EINVAL, "%s: gradient reductions are fp32 or bf16, not %s",
                            name, smoe_dtype_name((smoe_dtype)x->reduce_wire));
    return SMOE_OK;
}

void smoe_comm_wgather_info(const smoe_gather_geom *geo, int stages, int residual_stages,
                            int reduce_axes, smoe_wgather_info *info)
{
    memset(info, 0, sizeof *info);
    info->shard_numel = geo->shard_numel;
    info->gathered_numel = geo->gathered_numel;
    info->rank = geo->rank;
    for (int d = 0; d < geo->rank; d++) {
        info->shard_shape[d] = geo->blk[d];
        info->gathered_shape[d] = geo->B[d];
        info->offset[d] = geo->off[d];
    }
    info->stages = stages;
    info->residual_stages = residual_stages;
    info->reduce_axes = reduce_axes;
}
