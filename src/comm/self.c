/* The single-rank implementations of the comm interfaces (comm.h): an
 * expert "group" of one rank, whose all-to-alls are plain copies. Pure
 * functions, thread-safe; no MPI. */
#include "smoe/comm.h"

#include <string.h>

static smoe_status self_exchange_counts(void *ctx, const int64_t *send,
                                        int64_t *recv, int64_t n)
{
    (void)ctx;
    if (n < 0)
        return SMOE_EINVAL;
    if (n > 0 && send != recv)
        memmove(recv, send, (size_t)n * sizeof *send);
    return SMOE_OK;
}

static smoe_status self_alltoallv(void *ctx, const float *send,
                                  const int64_t *send_rows, float *recv,
                                  const int64_t *recv_rows, int64_t row)
{
    (void)ctx;
    if (send_rows[0] != recv_rows[0] || send_rows[0] < 0 || row < 0)
        return SMOE_ECOMM;
    size_t n = (size_t)(send_rows[0] * row);
    if (n > 0 && send != recv)
        memmove(recv, send, n * sizeof *send);
    return SMOE_OK;
}

smoe_ep_comm smoe_ep_comm_self(void)
{
    smoe_ep_comm c;
    memset(&c, 0, sizeof c);
    c.size = 1;
    c.rank = 0;
    c.ctx = NULL;
    c.exchange_counts = self_exchange_counts;
    c.alltoallv = self_alltoallv;
    c.progress = NULL;
    return c;
}
