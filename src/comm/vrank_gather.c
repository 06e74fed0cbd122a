/* The in-process ranks' weight gathers, their transposes and the expert
 * all-to-alls (vrank.c has the mailboxes and queues they run on).
 *
 * A weight's gathers are the MPI runtime's (wgather.c), with the same
 * geometry (smoe_gather_geom): per dim, the plan's prefetch axes are one
 * stage, its at-use axes a residual stage issued at wait; a stage over the
 * run S of A_d has each member read, from every peer's buffer, the region
 * that peer holds before the stage (its own block on the axes neither
 * gathered yet nor in S, all blocks of the axes already gathered) into the
 * same place of its own. A compressed gather moves records: start packs
 * the shard into its place in the records at the tail of the buffer
 * (smoe_dtype_pack_block), the stages copy records, wait expands them
 * (smoe_dtype_unpack_tail), so the buffer holds what every shard becomes
 * through the wire. The transpose reduce-scatters over every gather axis
 * (member blocks packed into scratch when a later dim gathers), then
 * all-reduces over the replicated axes; bf16 reductions convert the send
 * buffer in place and sum bf16 in rank order (smoe_bf16_add), landing in
 * the tail of the shard's gradient, expanded when the last one completes. */
#include "comm_impl.h"

#include "smoe/dtype.h"

#include <stdio.h>
#include <string.h>

struct vr_stage {
    const smoe_comm_gather *g;
    int dim;
    smoe_axes S;                     /* the run of A_dim this stage gathers */
    smoe_axes done[SMOE_MAX_RANK];   /* axes gathered before it, per dim */
    vr_comm *comm;
    int64_t bytes;                   /* received */
    char name[128];
};

struct smoe_comm_gather {
    char name[96];
    vr_rank *r;
    smoe_gather_geom geo;
    int nst, nres;
    vr_stage st[SMOE_MAX_RANK], res[SMOE_MAX_RANK];
    vr_comm *rs_comm, *ar_comm;
    smoe_dtype wire;
    int64_t wblock, rec, esz;        /* elements and bytes of a record */
    int64_t cB[SMOE_MAX_RANK], cblk[SMOE_MAX_RANK]; /* in records on the last dim */
    int rbf16;                       /* gradient reductions in bf16 */
    smoe_comm_gather *next;
};

static vr_rank *R(void *ctx) { return ctx; }

typedef struct read_job {
    const smoe_comm_gather *g;
    const void *src;
    void *dst;
} read_job;

static void read_block(void *ud, int64_t c, const int64_t off[])
{
    (void)c;
    const read_job *j = ud;
    const smoe_comm_gather *g = j->g;
    if (g->r->dv)
        vr_dev_layout(g->r, 1, g->geo.rank, g->cB, g->cblk, off, (size_t)g->esz, j->dst, NULL,
                      j->src, 2);
    else
        smoe_layout_copy_block(g->geo.rank, g->cB, g->cblk, off, (size_t)g->esz, j->src, j->dst);
}

/* The region member m of the stage's group held before it, copied from
 * peer's records into the same place of op's (comm.h: smoe_comm_stage_walk). */
void vr_stage_read(const vr_op *op, const vr_op *peer, int m)
{
    const vr_stage *st = op->stage;
    read_job j = { st->g, peer->rbuf, op->rbuf };
    smoe_comm_stage_walk(&st->g->geo, &st->g->r->w->mesh, st->g->r->coords, st->dim, &st->S,
                         st->done, st->g->rec, m, read_block, &j);
}

/* The wire: records, and the geometry counted in them. */
static smoe_status wire_setup(smoe_comm_gather *g, const smoe_gather_exec *x, smoe_err *err)
{
    int r = g->geo.rank;
    smoe_status s = smoe_comm_wire_check(x, r ? g->geo.blk[r - 1] : 0, g->name, err);
    if (s)
        return s;
    g->wire = (smoe_dtype)x->wire;
    g->wblock = x->wire_block;
    g->rec = smoe_dtype_rec_elems(g->wire, g->wblock);
    g->esz = smoe_dtype_rec_bytes(g->wire, g->wblock);
    for (int d = 0; d < r; d++) {
        g->cB[d] = g->geo.B[d] / (d == r - 1 ? g->rec : 1);
        g->cblk[d] = g->geo.blk[d] / (d == r - 1 ? g->rec : 1);
    }
    return SMOE_OK;
}

static smoe_status stage_new(smoe_comm_gather *g, int d, const smoe_axes *S,
                             const smoe_axes done[], int q, vr_stage *st, smoe_err *err)
{
    if (smoe_gather_geom_run(&g->geo, d, S) < 0)
        return smoe_err_set(err, SMOE_EINVAL, "%s: the axes gathered together on dim %d are "
                            "not adjacent in its sharding; not supported", g->name, d);
    st->g = g;
    st->dim = d;
    st->S = *S;
    int64_t region = 1;
    for (int j = 0; j < g->geo.rank; j++) {
        st->done[j] = done[j];
        region *= g->cblk[j] * smoe_axes_size(&done[j], &g->r->w->mesh);
    }
    smoe_status s = vr_comm_get(g->r, S, q, &st->comm, err);
    if (s)
        return s;
    st->bytes = region * g->esz * (st->comm->size - 1);
    char ax[128];
    smoe_axes_format(S, ax, sizeof ax);
    snprintf(st->name, sizeof st->name, "AG %s %d-way %s", g->name, st->comm->size, ax);
    return SMOE_OK;
}

/* smoe_comm_stages' callback: prefetched stages, then residual ones */
static smoe_status add_stage(void *ud, int pass, int d, const smoe_axes *S,
                             const smoe_axes done[], smoe_err *err)
{
    smoe_comm_gather *g = ud;
    vr_stage *st = pass == 0 ? &g->st[g->nst++] : &g->res[g->nres++];
    return stage_new(g, d, S, done, pass ? VR_Q_RESIDUAL : VR_Q_GATHER, st, err);
}

static smoe_status gather_build(smoe_comm_gather *g, const smoe_gather_exec *x, smoe_err *err)
{
    vr_rank *r = g->r;
    smoe_status s;
    if ((s = smoe_gather_geom_of(x, &r->w->mesh, r->coords, g->name, &g->geo, err)) ||
        (s = wire_setup(g, x, err)))
        return s;
    if ((s = smoe_comm_stages(x, add_stage, g, err)))
        return s;
    if (g->geo.rs.n && (s = vr_comm_get(r, &g->geo.rs, VR_Q_COMM, &g->rs_comm, err)))
        return s;
    if (g->geo.rep.n && (s = vr_comm_get(r, &g->geo.rep, g->rs_comm ? VR_Q_STAGE2 : VR_Q_COMM,
                                         &g->ar_comm, err)))
        return s;
    g->rbf16 = x->reduce_wire == SMOE_DT_BF16 && (g->rs_comm || g->ar_comm);
    if (r->dv && (g->wire == SMOE_DT_INT8 || g->rbf16))
        return smoe_err_set(err, SMOE_EINVAL, "%s: %s %s on a device are not supported yet "
                            "(fp32 and bf16 gathers, fp32 reductions)", g->name,
                            g->rbf16 ? "bf16" : smoe_dtype_name(g->wire),
                            g->rbf16 ? "reductions" : "gathers");
    return SMOE_OK;
}

smoe_status vr_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                          smoe_comm_gather **out, smoe_err *err)
{
    smoe_comm_gather *g = smoe_calloc(1, sizeof *g);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    snprintf(g->name, sizeof g->name, "%s", name);
    g->r = R(ctx);
    smoe_status s = gather_build(g, x, err);
    if (s) {
        smoe_free(g);
        return s;
    }
    g->next = g->r->gathers;
    g->r->gathers = g;
    *out = g;
    return SMOE_OK;
}

void vr_gathers_free(vr_rank *r)
{
    while (r->gathers) {
        smoe_comm_gather *g = r->gathers;
        r->gathers = g->next;
        smoe_free(g);
    }
}

void vr_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info)
{
    smoe_comm_wgather_info(&g->geo, g->nst, g->nres, g->geo.rep.n, info);
}

int vr_gather_needs_pack(const smoe_comm_gather *g) { return g->geo.pack; }

static void enqueue_stage(vr_rank *r, const vr_stage *st, char *cb, int serial, int q,
                          _Atomic int *pending, double *busy)
{
    vr_op *op = vr_op_new(r);
    op->kind = VR_ALLGATHER;
    op->comm = st->comm;
    op->stage = st;
    op->rbuf = cb;
    op->count = st->bytes;
    op->name = st->name;
    op->serial = serial;
    op->bytes = st->bytes;
    op->dev = r->dv != NULL;
    op->pending = pending;
    op->busy_acc = busy;
    r->stats.gathers++;
    r->stats.gather_bytes += st->bytes;
    vr_enqueue(r, q, op);
}

void vr_gather_start(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                     smoe_comm_ticket *t)
{
    vr_rank *r = R(ctx);
    const smoe_gather_geom *e = &g->geo;
    char *cb = (char *)buf;
    t->stage = NULL;
    if (r->dv) { /* fp32 or bf16 (gather_new) */
        vr_dev_layout(r, 0, e->rank, e->B, e->blk, e->off, sizeof(float), buf, (void *)shard,
                      NULL, 1);
        if (g->wire == SMOE_DT_BF16)
            cb = t->stage = vr_dev_stage_pack(r, buf, e->gathered_numel);
    } else if (g->wire == SMOE_DT_FP32) {
        smoe_layout_copy(e->rank, e->B, e->blk, e->off, sizeof(float), buf, (void *)shard, 1);
    } else {
        cb = smoe_dtype_tail(g->wire, g->wblock, buf, e->gathered_numel);
        smoe_dtype_pack_block(g->wire, g->wblock, e->rank, e->B, e->blk, e->off, shard, cb);
    }
    t->busy_s = 0;
    t->pending = g->nst;
    t->res_pending = 0;
    for (int k = 0; k < g->nst; k++) /* a later dim's stage reads what the earlier wrote */
        enqueue_stage(r, &g->st[k], cb, k > 0, VR_Q_GATHER, &t->pending, &t->busy_s);
}

void vr_gather_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                    double *wait_s)
{
    vr_rank *r = R(ctx);
    double t0 = smoe_now();
    char what[160];
    snprintf(what, sizeof what, "the all-gather of %s", g->name);
    vr_wait_until(r, NULL, &t->pending, what);
    double t1 = smoe_now();
    r->stats.gather_wait_s += t1 - t0;
    r->stats.gather_busy_s += t->busy_s;
    t->busy_s = 0;
    if (t1 - t0 > 20e-6)
        vr_span(r, SMOE_LANE_WAIT, g->name, t0, t1);
    char *cb = t->stage ? t->stage : smoe_dtype_tail(g->wire, g->wblock, buf, g->geo.gathered_numel);
    if (g->nres) {
        double r0 = smoe_now();
        t->res_pending = g->nres;
        for (int k = 0; k < g->nres; k++) /* on top of the prefetched stages */
            enqueue_stage(r, &g->res[k], cb, 1, VR_Q_RESIDUAL, &t->res_pending, NULL);
        snprintf(what, sizeof what, "the residual all-gather of %s", g->name);
        vr_wait_until(r, NULL, &t->res_pending, what);
        r->stats.residual_s += smoe_now() - r0;
    }
    if (t->stage) {
        vr_dev_stage_unpack(r, buf, t->stage, g->geo.gathered_numel);
        t->stage = NULL;
    } else if (g->wire != SMOE_DT_FP32) {
        double c0 = smoe_now();
        smoe_dtype_unpack_tail(g->wire, g->wblock, buf, g->geo.gathered_numel);
        r->stats.convert_s += smoe_now() - c0;
    }
    if (wait_s)
        *wait_s = smoe_now() - t0;
}

/* A gradient reduction's op, not yet enqueued. */
static vr_op *reduction_op(vr_rank *r, vr_kind kind, vr_comm *c, const void *send, void *recv,
                           const smoe_comm_gather *g, _Atomic int *done, _Atomic int *sent,
                           float *expand)
{
    vr_op *op = vr_op_new(r);
    op->kind = kind;
    op->comm = c;
    op->sbuf = send;
    op->rbuf = recv;
    op->count = g->geo.shard_numel;
    op->bf16 = g->rbf16;
    op->name = kind == VR_REDUCE_SCATTER ? (g->rbf16 ? "RS grad bf16" : "RS grad")
                                         : (g->rbf16 ? "AR grad bf16" : "AR grad");
    op->flag = done;
    op->sent = sent;
    op->dev = r->dv != NULL;
    op->expand = expand;
    op->expand_n = g->geo.shard_numel;
    return op;
}

void vr_gather_reduce(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                      float *shard_grad, _Atomic int *done, _Atomic int *sent)
{
    vr_rank *r = R(ctx);
    int64_t n = g->geo.shard_numel;
    if (done)
        *done = 0;
    if (sent) /* until the reduce-scatter reading them completes */
        *sent = !g->rs_comm;
    float *send = full;
    if (g->rs_comm && g->geo.pack) {
        for (int64_t m = 0; m < g->rs_comm->size; m++) {
            int64_t off[SMOE_MAX_RANK];
            smoe_gather_geom_member(&g->geo, &r->w->mesh, m, off);
            if (r->dv)
                vr_dev_layout(r, 0, g->geo.rank, g->geo.B, g->geo.blk, off, sizeof(float), full,
                              scratch + m * n, NULL, 0);
            else
                smoe_layout_copy(g->geo.rank, g->geo.B, g->geo.blk, off, sizeof(float), full,
                                 scratch + m * n, 0);
        }
        send = scratch;
    }
    int b = g->rbf16;
    void *rb = b ? smoe_dtype_tail(SMOE_DT_BF16, 0, shard_grad, n) : (void *)shard_grad;
    vr_op *ar = g->ar_comm ? reduction_op(r, VR_ALLREDUCE, g->ar_comm, NULL, rb, g, done, NULL,
                                          b ? shard_grad : NULL)
                           : NULL;
    if (g->rs_comm) {
        if (b)
            smoe_dtype_pack_head(SMOE_DT_BF16, 0, send, g->rs_comm->size * n);
        vr_op *rs = reduction_op(r, VR_REDUCE_SCATTER, g->rs_comm, send, rb, g, ar ? NULL : done,
                                 sent, b && !ar ? shard_grad : NULL);
        if (ar) { /* the all-reduce reads what the reduce-scatter writes */
            ar->level_pending = 1;
            ar->gate = &ar->level_pending;
            ar->gate_max = 0;
            rs->pending = &ar->level_pending;
        }
        vr_enqueue(r, VR_Q_COMM, rs);
    } else if (b) {
        smoe_dtype_pack(SMOE_DT_BF16, 0, rb, full, n);
    } else if (r->dv) {
        vr_dev_copy(r, shard_grad, full, sizeof(float) * (size_t)n);
    } else {
        memcpy(shard_grad, full, sizeof(float) * (size_t)n);
    }
    if (ar) /* after this weight's reduce-scatter, on a queue of its own */
        vr_enqueue(r, g->rs_comm ? VR_Q_STAGE2 : VR_Q_COMM, ar);
    else if (!g->rs_comm && done)
        *done = 1;
}

/* ---- the expert group: ranks that differ only in their `expert` coordinate ---- */
static smoe_status exchange_counts(void *ctx, const int64_t *send, int64_t *recv, int64_t n)
{
    vr_ep *e = ctx;
    double t0 = smoe_now();
    _Atomic int flag = 0;
    vr_op *op = vr_op_new(e->r);
    op->kind = VR_ALLTOALL_I64;
    op->comm = e->comm;
    op->sbuf = send;
    op->rbuf = recv;
    op->count = n;
    op->name = "A2A counts";
    op->exclusive = 1;
    op->flag = &flag;
    vr_enqueue(e->r, VR_Q_COMM, op);
    vr_wait_until(e->r, &flag, NULL, "the expert all-to-all");
    e->r->stats.a2a_s += smoe_now() - t0;
    return SMOE_OK;
}

static smoe_status alltoallv(void *ctx, const float *send, const int64_t *send_rows,
                             float *recv, const int64_t *recv_rows, int64_t row)
{
    vr_ep *e = ctx;
    if (e->r->dv)
        vr_abort(e->r, SMOE_EXIT_COMM, "the expert all-to-all of ranks on a device is not "
                 "supported yet");
    double t0 = smoe_now();
    int64_t so = 0, ro = 0;
    for (int p = 0; p < e->comm->size; p++) {
        e->sc[p] = send_rows[p] * row;
        e->sd[p] = so;
        e->rc[p] = recv_rows[p] * row;
        e->rd[p] = ro;
        so += e->sc[p];
        ro += e->rc[p];
    }
    _Atomic int flag = 0;
    vr_op *op = vr_op_new(e->r);
    op->kind = VR_ALLTOALLV;
    op->comm = e->comm;
    op->sbuf = send;
    op->rbuf = recv;
    op->sc = e->sc;
    op->sd = e->sd;
    op->rc = e->rc;
    op->rd = e->rd;
    op->name = "A2A tokens";
    op->exclusive = 1;
    op->bytes = ro * 4;
    op->flag = &flag;
    vr_enqueue(e->r, VR_Q_COMM, op);
    vr_wait_until(e->r, &flag, NULL, "the expert all-to-all");
    e->r->stats.a2a_s += smoe_now() - t0;
    return SMOE_OK;
}

static void ep_progress(void *ctx)
{
    vr_ep *e = ctx;
    vr_progress(e->r);
}

smoe_ep_comm vr_ep_comm(void *ctx)
{
    vr_rank *r = R(ctx);
    vr_ep *e = &r->ep;
    if (!e->comm) {
        smoe_axes ax = { 1, { "expert" } };
        smoe_err err;
        if (smoe_mesh_find(&r->w->mesh, "expert") < 0)
            ax.n = 0; /* no expert axis: a group of one */
        if (vr_comm_get(r, &ax, VR_Q_COMM, &e->comm, &err))
            vr_abort(r, SMOE_EXIT_COMM, err.msg);
        int n = e->comm->size;
        if (!(e->sc = smoe_calloc((size_t)n * 4, sizeof *e->sc)))
            vr_abort(r, SMOE_EXIT_NOMEM, "out of memory");
        e->sd = e->sc + n;
        e->rc = e->sc + 2 * n;
        e->rd = e->sc + 3 * n;
        e->r = r;
    }
    smoe_ep_comm c;
    memset(&c, 0, sizeof c);
    c.size = e->comm->size;
    c.rank = e->comm->member;
    c.ctx = e;
    c.exchange_counts = exchange_counts;
    c.alltoallv = alltoallv;
    c.progress = ep_progress;
    return c;
}
