/* smoe comm: the communication interfaces that the model and the trainer
 * talk to, owned by neither the model nor the runtime. An interface is a
 * small vtable (function pointers and a context); the MPI runtime
 * (runtime.h) supplies one implementation, and a single-rank one that
 * needs no MPI is provided here (src/comm/), so code written against the
 * interface builds and runs without MPI.
 *
 * smoe_ep_comm: the expert-parallel exchange of one rank's expert group
 * (the MoE layer's token all-to-all). */
#ifndef SMOE_COMM_H
#define SMOE_COMM_H

#include <stdint.h>

#include "smoe/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expert-parallel communication (the runtime supplies the MPI one). Peers are the
 * ranks of the expert group (0..size-1); this rank is `rank` and owns
 * experts [rank*E_l, (rank+1)*E_l). */
typedef struct smoe_ep_comm {
    int size, rank;
    void *ctx;
    /* Exchange n int64 per peer: send[p*n .. p*n+n) goes to peer p,
     * recv[p*n ..) comes from peer p. Blocking. */
    smoe_status (*exchange_counts)(void *ctx, const int64_t *send,
                                   int64_t *recv, int64_t n);
    /* Variable all-to-all of rows of `row` floats: send holds
     * send_rows[p] rows for peer p (peer order), recv gets recv_rows[p]
     * rows from peer p (peer order). Blocking. */
    smoe_status (*alltoallv)(void *ctx, const float *send,
                             const int64_t *send_rows, float *recv,
                             const int64_t *recv_rows, int64_t row);
    /* Called between kernels so the runtime can advance its nonblocking
     * collectives (may be NULL). */
    void (*progress)(void *ctx);
} smoe_ep_comm;

/* The expert group of one rank: exchange = memcpy (src/comm/self.c). */
smoe_ep_comm smoe_ep_comm_self(void);

#ifdef __cplusplus
}
#endif
#endif
