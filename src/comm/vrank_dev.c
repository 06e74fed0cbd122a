/* The in-process ranks on one device (comm.h: smoe_comm_vrank_set_device):
 * what a collective moves when the ranks' buffers are device memory. The
 * engine (vrank.c) keeps its mailboxes and its host-side states; here are
 * the device work it enqueues and the events that order it.
 *
 * DESIGN (ordering)
 *   Issue: the rank's thread records the op's issue event on its compute
 *   stream, capturing the kernels that wrote what the op sends (and the
 *   last use of what it overwrites); the host goes on at once.
 *   Read: once every member has posted, a member's transfer stream waits
 *   on its own issue event and on the issue event of every peer it reads,
 *   then copies (gathers) or sums in member order (reductions), then
 *   records the op's done event. The peer ops are alive then: a member's
 *   op stays in the slot until every member's work has run.
 *   Completion (host): an op completes when the done events of every
 *   member have fired (the slot counts them), so no peer still reads its
 *   buffers; an in-place reduction then copies its sum home on the
 *   transfer stream and completes when that has run. The trainer's next
 *   use of a result is enqueued after it sees the completion, so it needs
 *   no device wait of its own.
 * Device errors abort the rank naming the op, as a failed MPI call ends a
 * job: a rank cannot back out of a collective its peers are in. */
#define _GNU_SOURCE
#include "comm_impl.h"

#include "smoe/backend.h"

#include <stdio.h>
#include <string.h>

struct vr_block {
    void *p;
    size_t bytes;
    vr_block *next;
};

static void must(vr_rank *r, smoe_status s, const smoe_err *err, const char *what)
{
    if (s == SMOE_OK)
        return;
    char msg[600];
    snprintf(msg, sizeof msg, "device %s failed during %s: %s", what, r->phase, err->msg);
    vr_abort(r, SMOE_EXIT_COMM, msg);
}

static smoe_dev_event *event(vr_rank *r, smoe_dev_event **e)
{
    smoe_err err;
    if (!*e)
        must(r, smoe_dev_event_new(r->dv->d.dev, e, &err), &err, "event creation");
    return *e;
}

/* the bytes op receives from its peers (comm.h: link_gbs) */
static double received(const vr_op *op, int n)
{
    double part = sizeof(float) * (double)op->count;
    return op->kind == VR_ALLGATHER       ? (double)op->count
           : op->kind == VR_REDUCE_SCATTER ? part * (n - 1)
                                           : part * 2.0 * (n - 1) / n;
}

void vr_dev_issue(vr_rank *r, vr_op *op)
{
    smoe_err err;
    if (r->dv->d.link_gbs > 0) /* on the rank's thread, as its other statistics */
        r->stats.link_bytes += (int64_t)received(op, op->comm->size);
    must(r, smoe_dev_record(r->dv->d.dev, event(r, &op->ev_issue), r->dv->d.compute, &err), &err,
         "record");
}

static void xfer_wait(vr_rank *r, smoe_dev_event *e)
{
    smoe_err err;
    must(r, smoe_dev_wait(r->dv->d.dev, r->dv->d.xfer, e, &err), &err, "stream wait");
}

void vr_dev_copy(vr_rank *r, void *dst, const void *src, size_t bytes)
{
    smoe_err err;
    must(r, smoe_dev_copy(r->dv->d.dev, dst, src, bytes, r->dv->d.compute, &err), &err, "copy");
}

/* ---- layouts (comm.h: smoe_comm_dev_layout) ---- */
void vr_dev_layout(vr_rank *r, int xfer, int rank, const int64_t shape[], const int64_t local[],
                   const int64_t offset[], size_t elem, void *global, void *localbuf,
                   const void *src, int dir)
{
    smoe_err err;
    must(r, smoe_comm_dev_layout(r->dv->d.dev, xfer ? r->dv->d.xfer : r->dv->d.compute, rank,
                                 shape, local, offset, elem, global, localbuf, src, dir, &err),
         &err, "2-D copy");
}

/* ---- scratch: blocks kept by the rank and reused, in two pools by the
 * stream whose work last touched them (POOL_XFER: in-place sums, whose
 * block is free once the op completes; POOL_COMPUTE: bf16 staging, whose
 * expansion is still queued on the compute stream when it is given back,
 * so only later compute work, or work ordered after it by an issue event,
 * may use it) ---- */
enum { POOL_XFER, POOL_COMPUTE };

static void *block_take(vr_rank *r, int pool, size_t bytes)
{
    for (vr_block **b = &r->dv->free_blocks[pool]; *b; b = &(*b)->next)
        if ((*b)->bytes >= bytes) {
            vr_block *k = *b;
            *b = k->next;
            void *p = k->p;
            smoe_free(k);
            return p;
        }
    void *p = NULL;
    smoe_err err;
    must(r, smoe_dev_alloc(r->dv->d.dev, bytes ? bytes : 1, &p, &err), &err, "allocation");
    return p;
}

static void block_give(vr_rank *r, int pool, void *p, size_t bytes)
{
    vr_block *k = smoe_malloc(sizeof *k);
    if (!k)
        vr_abort(r, SMOE_EXIT_NOMEM, "out of memory keeping a device block");
    *k = (vr_block){ p, bytes, r->dv->free_blocks[pool] };
    r->dv->free_blocks[pool] = k;
}

void *vr_dev_stage_pack(vr_rank *r, const float *buf, int64_t n)
{
    uint16_t *st = block_take(r, POOL_COMPUTE, sizeof *st * (size_t)n);
    r->dv->d.ops->to_bf16(r->dv->d.cq, st, buf, n);
    return st;
}

void vr_dev_stage_unpack(vr_rank *r, float *buf, void *stage, int64_t n)
{
    r->dv->d.ops->from_bf16(r->dv->d.cq, buf, stage, n);
    block_give(r, POOL_COMPUTE, stage, sizeof(uint16_t) * (size_t)n);
}

/* ---- an op's device work ---- */
static void sum(vr_rank *r, vr_op *op, vr_op **o, int n)
{
    const smoe_kops *k = r->dv->d.ops;
    void *q = r->dv->d.xq;
    int in_place = op->kind == VR_ALLREDUCE;
    size_t count = (size_t)op->count, bytes = sizeof(float) * count;
    size_t part = in_place ? 0 : bytes * (size_t)op->comm->member;
    float *acc = op->rbuf;
    if (in_place)
        acc = op->tmp = block_take(r, POOL_XFER, bytes);
    for (int m = 0; m < n; m++) { /* member order, as the host's sums */
        const float *x = (const float *)((const char *)(in_place ? o[m]->rbuf : o[m]->sbuf) + part);
        if (m == 0)
            k->copy(q, acc, x, bytes);
        else
            k->vec_add(q, acc, x, (int64_t)count);
    }
}

void vr_dev_read(vr_rank *r, vr_op *op, vr_op **o, int n)
{
    int me = op->comm->member, skip = smoe_get_test_hooks().dev_skip_peer_wait;
    smoe_err err;
    xfer_wait(r, op->ev_issue);
    for (int m = 0; m < n; m++)
        if (m != me && !skip)
            xfer_wait(r, o[m]->ev_issue);
    if (r->dv->d.link_gbs > 0)
        must(r, smoe_dev_delay(r->dv->d.dev, received(op, n) / (r->dv->d.link_gbs * 1e9),
                               r->dv->d.xfer, &err), &err, "link delay");
    if (op->kind == VR_ALLGATHER) {
        for (int m = 0; m < n; m++)
            if (m != me)
                vr_stage_read(op, o[m], m);
    } else if (op->kind == VR_REDUCE_SCATTER || op->kind == VR_ALLREDUCE) {
        sum(r, op, o, n);
    } else {
        vr_abort(r, SMOE_EXIT_COMM, "a collective of this kind is not supported on a device");
    }
    must(r, smoe_dev_record(r->dv->d.dev, event(r, &op->ev_done), r->dv->d.xfer, &err), &err,
         "record");
    op->dev_state = 0;
    r->dv->inflight++;
}

int vr_dev_poll(vr_rank *r, vr_op *op)
{
    if (op->dev_state)
        return 1;
    int done = 0;
    smoe_err err;
    must(r, smoe_dev_query(r->dv->d.dev, op->ev_done, &done, &err), &err, "event query");
    if (done) {
        op->dev_state = 1;
        r->dv->inflight--;
    }
    return done;
}

void vr_dev_home(vr_rank *r, vr_op *op)
{
    smoe_err err;
    const smoe_dev *d = r->dv->d.dev;
    must(r, smoe_dev_copy(d, op->rbuf, op->tmp, sizeof(float) * (size_t)op->count, r->dv->d.xfer,
                          &err), &err, "copy");
    must(r, smoe_dev_record(d, op->ev_done, r->dv->d.xfer, &err), &err, "record");
    op->dev_state = 0;
    r->dv->inflight++;
}

void vr_dev_release(vr_rank *r, vr_op *op)
{
    if (op->tmp)
        block_give(r, POOL_XFER, op->tmp, sizeof(float) * (size_t)op->count);
    op->tmp = NULL;
}

void vr_dev_free(vr_rank *r)
{
    if (!r->dv)
        return;
    smoe_err err;
    for (int pool = 0; pool < 2; pool++)
        while (r->dv->free_blocks[pool]) {
            vr_block *k = r->dv->free_blocks[pool];
            r->dv->free_blocks[pool] = k->next;
            if (smoe_dev_free(r->dv->d.dev, k->p, &err))
                fprintf(stderr, "smoe: rank %d: %s\n", r->rank, err.msg);
            smoe_free(k);
        }
    smoe_free(r->dv);
    r->dv = NULL;
}

void vr_dev_op_free(vr_rank *r, vr_op *op)
{
    if (r->dv && op->ev_issue)
        smoe_dev_event_free(r->dv->d.dev, op->ev_issue);
    if (r->dv && op->ev_done)
        smoe_dev_event_free(r->dv->d.dev, op->ev_done);
}

static vr_rank *R(const smoe_comm *c) { return c->ctx; }
static int is_vrank(const smoe_comm *c) { return vr_is_vrank_ops(c->ops); }

smoe_status smoe_comm_vrank_set_device(smoe_comm *c, const smoe_comm_device *d, smoe_err *err)
{
    if (!c || !is_vrank(c))
        return smoe_err_set(err, SMOE_EINVAL, "a device is set on an in-process rank only");
    if (!d || !d->dev || !d->compute || !d->xfer || !d->ops || !d->xq || !d->cq)
        return smoe_err_set(err, SMOE_EINVAL, "a rank's device needs the device, its compute "
                            "and transfer streams, and a kernel queue on each");
    if (!(d->link_gbs >= 0 && d->link_gbs < 1e9))
        return smoe_err_set(err, SMOE_EINVAL, "a link of %g GB/s (expected 0, none, or a "
                            "positive rate)", d->link_gbs);
    vr_rank *r = R(c);
    if (r->dv || r->gathers || r->world_comm->seq)
        return smoe_err_set(err, SMOE_EINVAL, "rank %d: the device is set once, before the "
                            "rank's first collective", r->rank);
    if (!(r->dv = smoe_calloc(1, sizeof *r->dv)))
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    r->dv->d = *d;
    return SMOE_OK;
}
