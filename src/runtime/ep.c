/* The expert-parallel communication of the model over MPI: the ranks that
 * differ only in their `expert` coordinate exchange routing counts and
 * token rows with all-to-alls queued on the communication queue (behind the
 * gradient reductions, and, with a shared queue, behind the gathers too),
 * while the other queues keep progressing. */
#include "rt_impl.h"

#include <limits.h>
#include <string.h>

typedef rt_ep ep_ctx;

static void wait_flag(smoe_rt *rt, _Atomic int *flag)
{
    smoe_rt_wait w = smoe_rt_wait_begin("the expert all-to-all");
    while (!*flag)
        smoe_rt_wait_step(rt, &w);
}

static smoe_status exchange_counts(void *ctx, const int64_t *send, int64_t *recv, int64_t n)
{
    ep_ctx *e = ctx;
    double t0 = smoe_now();
    _Atomic int flag = 0;
    rt_op *op = rt_op_new(e->rt);
    op->kind = OP_ALLTOALL_I64;
    op->comm = e->comm->comm;
    op->group = e->comm;
    op->sbuf = send;
    op->rbuf = recv;
    op->count = (int)n;
    op->name = "A2A counts";
    op->exclusive = 1;
    op->lane = SMOE_LANE_COMM;
    op->flag = &flag;
    rt_enqueue(e->rt, RT_Q_COMM, op);
    wait_flag(e->rt, &flag);
    e->rt->stats.a2a_s += smoe_now() - t0;
    return SMOE_OK;
}

static smoe_status alltoallv(void *ctx, const float *send, const int64_t *send_rows,
                             float *recv, const int64_t *recv_rows, int64_t row)
{
    ep_ctx *e = ctx;
    double t0 = smoe_now();
    int64_t so = 0, ro = 0;
    for (int p = 0; p < e->comm->size; p++) {
        int64_t s = send_rows[p] * row, r = recv_rows[p] * row;
        if (so + s > INT_MAX || ro + r > INT_MAX)
            return SMOE_EINVAL;
        e->sc[p] = (int)s;
        e->sd[p] = (int)so;
        e->rc[p] = (int)r;
        e->rd[p] = (int)ro;
        so += s;
        ro += r;
    }
    _Atomic int flag = 0;
    rt_op *op = rt_op_new(e->rt);
    op->kind = OP_ALLTOALLV;
    op->comm = e->comm->comm;
    op->group = e->comm;
    op->sbuf = send;
    op->rbuf = recv;
    op->scounts = e->sc;
    op->sdispls = e->sd;
    op->rcounts = e->rc;
    op->rdispls = e->rd;
    op->name = "A2A tokens";
    op->exclusive = 1;
    op->lane = SMOE_LANE_COMM;
    op->bytes = ro * 4;
    op->flag = &flag;
    rt_enqueue(e->rt, RT_Q_COMM, op);
    wait_flag(e->rt, &flag);
    e->rt->stats.a2a_s += smoe_now() - t0;
    return SMOE_OK;
}

static void progress(void *ctx)
{
    ep_ctx *e = ctx;
    smoe_rt_progress(e->rt);
}

smoe_ep_comm smoe_rt_ep_comm(smoe_rt *rt)
{
    smoe_ep_comm c;
    memset(&c, 0, sizeof c);
    rt_ep *ep = &rt->ep;
    if (!ep->comm) {
        smoe_axes ax = { 1, { "expert" } };
        smoe_err err;
        if (smoe_mesh_find(&rt->mesh, "expert") < 0) {
            /* no expert axis: a group of one, through MPI_COMM_SELF */
            ep->self.comm = MPI_COMM_SELF;
            ep->self.size = 1;
            ep->comm = &ep->self;
        } else if (rt_comm_get(rt, &ax, RT_Q_COMM, &ep->comm, &err)) {
            smoe_rt_abort(rt, SMOE_EXIT_COMM, err.msg);
        }
        int n = ep->comm->size;
        ep->sc = smoe_calloc((size_t)n * 4, sizeof(int));
        if (!ep->sc)
            smoe_rt_abort(rt, SMOE_EXIT_NOMEM, "out of memory");
        ep->sd = ep->sc + n;
        ep->rc = ep->sc + 2 * n;
        ep->rd = ep->sc + 3 * n;
        ep->rt = rt;
    }
    c.size = ep->comm->size;
    c.rank = ep->comm->rank;
    c.ctx = ep;
    c.exchange_counts = exchange_counts;
    c.alltoallv = alltoallv;
    c.progress = progress;
    return c;
}
