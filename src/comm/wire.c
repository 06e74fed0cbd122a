/* The one check of a weight's wire that every gather engine makes (the MPI
 * runtime, the single rank, the in-process ranks; comm.h:
 * smoe_comm_wire_check). */
#include "smoe/comm.h"

#include "smoe/dtype.h"

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
