/* Cross-rank consistency (the check itself is comm's,
 * smoe_comm_check_same_by_gather) and the agreement on a status and its
 * message. */
#include "rt_impl.h"

#include <stdio.h>
#include <string.h>

smoe_status smoe_rt_check_same(smoe_rt *rt, int n, const char *const names[],
                               const char *const digests[], smoe_err *err)
{
    smoe_comm c = smoe_rt_comm(rt);
    return smoe_comm_check_same_by_gather(&c, n, names, digests, err);
}

smoe_status smoe_rt_agree_err(smoe_rt *rt, smoe_status local, smoe_err *err)
{
    /* who failed first: min over ranks of (failed ? rank : size), and the
     * worst status */
    int64_t v[2] = { local ? -rt->rank : -rt->size, (int64_t)local };
    smoe_rt_allreduce_max_i64(rt, v, 2);
    int who = (int)-v[0];
    if (who >= rt->size)
        return SMOE_OK;
    smoe_err e;
    memset(&e, 0, sizeof e);
    if (rt->rank == who && err)
        e = *err;
    rt_bcast_from(rt, &e, (int64_t)sizeof e, who);
    if (err) {
        *err = e;
        if (!err->code)
            err->code = (smoe_status)v[1];
    }
    return (smoe_status)v[1];
}

smoe_rt_opts smoe_rt_get_opts(const smoe_rt *rt)
{
    smoe_rt_opts o = { rt->shared_queue, rt->thread_on };
    return o;
}
