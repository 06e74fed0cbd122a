/* Cross-rank consistency over any communicator (comm.h:
 * smoe_comm_check_same_by_gather): every rank must run the same
 * configuration, plan and data, or the collectives stop matching (a hang)
 * or the numbers silently differ. Each rank brings digests; rank 0
 * compares them. The MPI runtime's check_same and the in-process ranks'
 * are this one. */
#include "smoe/comm.h"

#include <stdio.h>
#include <string.h>

#define DIG 65

smoe_status smoe_comm_check_same_by_gather(const smoe_comm *c, int n, const char *const names[],
                                           const char *const digests[], smoe_err *err)
{
    if (n < 1 || n > 16)
        return smoe_err_set(err, SMOE_EINTERNAL, "check_same: bad digest count %d", n);
    int rank = smoe_comm_rank(c), size = smoe_comm_size(c);
    char mine[16 * DIG];
    memset(mine, 0, sizeof mine);
    for (int i = 0; i < n; i++)
        snprintf(mine + i * DIG, DIG, "%s", digests[i]);
    size_t row = (size_t)n * DIG;
    char *all = rank == 0 ? smoe_malloc(row * (size_t)size) : NULL;
    smoe_status s = rank == 0 && !all ? SMOE_ENOMEM : SMOE_OK;
    if ((s = smoe_comm_agree(c, s))) {
        smoe_free(all);
        return smoe_err_set(err, s, "out of memory checking cross-rank consistency");
    }
    smoe_comm_gather_bytes(c, mine, all, (int64_t)row);
    for (int r = 1; rank == 0 && r < size && !s; r++)
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
    smoe_free(all);
    s = smoe_comm_agree(c, s);
    if (s && rank != 0)
        smoe_err_set(err, s, "this rank differs from rank 0 (rank 0 reports which part)");
    return s;
}
