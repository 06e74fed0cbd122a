/* Cross-rank consistency: every rank must run the same configuration,
 * plan and data, or the collectives stop matching (a hang) or the numbers
 * silently differ. Each rank brings digests; rank 0 compares them. */
#include "rt_impl.h"

#include <stdio.h>
#include <string.h>

#define DIG 65

smoe_status smoe_rt_check_same(smoe_rt *rt, int n, const char *const names[],
                               const char *const digests[], smoe_err *err)
{
    if (n < 1 || n > 16)
        return smoe_err_set(err, SMOE_EINTERNAL, "smoe_rt_check_same: bad digest count %d", n);
    char mine[16 * DIG];
    memset(mine, 0, sizeof mine);
    for (int i = 0; i < n; i++)
        snprintf(mine + i * DIG, DIG, "%s", digests[i]);
    size_t row = (size_t)n * DIG;
    char *all = rt->rank == 0 ? smoe_malloc(row * (size_t)rt->size) : NULL;
    smoe_status s = rt->rank == 0 && !all ? SMOE_ENOMEM : SMOE_OK;
    if ((s = smoe_rt_agree(rt, s))) {
        smoe_free(all);
        return smoe_err_set(err, s, "out of memory checking cross-rank consistency");
    }
    smoe_rt_gather_bytes(rt, mine, all, (int64_t)row);
    if (rt->rank == 0) {
        for (int r = 1; r < rt->size && !s; r++)
            for (int i = 0; i < n && !s; i++) {
                const char *d = all + (size_t)r * row + (size_t)i * DIG;
                if (strcmp(d, mine + i * DIG) != 0)
                    s = smoe_err_set(err, SMOE_EINVAL,
                                     "rank %d runs a different %s than rank 0 (sha256 %.16s... "
                                     "on rank 0, %.16s... on rank %d): every rank must be "
                                     "started with the same arguments, configuration "
                                     "files, MAXTEXT_* environment and data",
                                     r, names[i], mine + i * DIG, d, r);
            }
    }
    smoe_free(all);
    s = smoe_rt_agree(rt, s);
    if (s && rt->rank != 0)
        smoe_err_set(err, s, "this rank differs from rank 0 (rank 0 reports which part)");
    return s;
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
    /* want_thread until the first queued op starts the thread, then have_thread */
    smoe_rt_opts o = { rt->shared_queue, rt->want_thread || rt->have_thread };
    return o;
}
