/* The weight gathers and their transposes over NCCL (ncomm.h), with the
 * in-process ranks' geometry (shard.h: smoe_gather_geom; comm.h:
 * smoe_comm_stage_walk): per dim, the plan's prefetch axes are one stage,
 * its at-use axes a residual stage run at the wait. A stage over the run S
 * of a dim's axes packs the blocks this member holds before it into the
 * transfer scratch, all-gathers them over S's group (NCCL's member order is
 * the group's mixed radix) and places every peer's blocks where they go:
 * one all-gather of bytes, records of the wire's type. A bf16 gather
 * converts the rank's gathered buffer into a staging block on the compute
 * stream first and expands it there at the wait. The transpose packs the
 * reduce-scatter's member blocks when a later dim gathers, reduce-scatters
 * over every gather axis, then all-reduces over the replicated ones. */
#define _GNU_SOURCE
#include "ncomm_impl.h"

#include "smoe/dtype.h"

#include <stdio.h>
#include <string.h>

typedef struct nc_stage {
    int role;                    /* NC_GATHER (prefetched) or NC_RESIDUAL */
    int dim;
    smoe_axes S;
    smoe_axes done[SMOE_MAX_RANK];
    nc_group *grp;
    int64_t combos, block_bytes; /* the blocks a member holds, each of block_bytes */
} nc_stage;

struct nc_gather {
    char name[96];
    nc_rank *r;
    smoe_gather_geom geo;
    int nst, nres;
    nc_stage st[SMOE_MAX_RANK], res[SMOE_MAX_RANK];
    nc_group *rs, *ar;
    int bf16;
    size_t esz;                  /* bytes an element moves as: 4, or 2 in bf16 */
    nc_gather *next;
};

static nc_gather *G(smoe_comm_gather *g) { return (nc_gather *)g; }
static const nc_gather *CG(const smoe_comm_gather *g) { return (const nc_gather *)g; }

/* ---- a stage on the transfer stream ---- */
typedef struct place_job {
    const nc_gather *g;
    smoe_dev_stream *s;
    void *recs;                  /* the gathered buffer's records */
    unsigned char *packed;       /* block c at c * bb */
    size_t bb;
    int dir;                     /* 0: pack recs' blocks, 1: place them */
} place_job;

static void place(void *ud, int64_t c, const int64_t off[])
{
    const place_job *j = ud;
    const nc_gather *g = j->g;
    smoe_err err;
    if (smoe_comm_dev_layout(g->r->d.dev, j->s, g->geo.rank, g->geo.B, g->geo.blk, off, g->esz,
                             j->recs, j->packed + (size_t)c * j->bb, NULL, j->dir, &err))
        nc_fail(g->r, "placing a gather's blocks", &err);
}

static void stage_run(const nc_gather *g, const nc_stage *st, void *recs)
{
    nc_rank *r = g->r;
    const smoe_mesh *m = smoe_comm_mesh(&r->host);
    const int64_t *coords = smoe_comm_coords(&r->host);
    size_t bb = (size_t)st->block_bytes, R = (size_t)st->combos * bb;
    unsigned char *send = r->scratch[st->role], *recv = send + (R + 255) / 256 * 256;
    smoe_dev_stream *s = r->s[st->role];
    place_job pack = { g, s, recs, send, bb, 0 };
    smoe_comm_stage_walk(&g->geo, m, coords, st->dim, &st->S, st->done, 1, st->grp->member,
                         place, &pack);
    smoe_err err;
    if (smoe_nccl_all_gather_bytes(st->grp->c, send, recv, (int64_t)R, r->ns[st->role], &err))
        nc_fail(r, "a weight's all-gather", &err);
    for (int mm = 0; mm < st->grp->size; mm++) {
        if (mm == st->grp->member)
            continue;
        place_job put = { g, s, recs, recv + (size_t)mm * R, bb, 1 };
        smoe_comm_stage_walk(&g->geo, m, coords, st->dim, &st->S, st->done, 1, mm, place, &put);
    }
}

/* ---- flights: a gather's event and staging between start and wait ----
 * Made when none is free (the first step's gathers), never grown or freed
 * before the end: a device's free waits for every stream, and another
 * rank's stream may be waiting in a collective for this one's. Each has
 * staging for the rank's largest bf16 gather (gather_new counts it). */
static nc_flight *flight_take(nc_rank *r)
{
    smoe_err err;
    nc_flight *f = r->flights;
    if (f) {
        r->flights = f->next;
        return f;
    }
    if (!(f = smoe_calloc(1, sizeof *f)) || smoe_dev_event_new(r->d.dev, &f->ev, &err) ||
        (r->stage_bytes && smoe_dev_alloc(r->d.dev, r->stage_bytes, &f->stage, &err)))
        nc_fail(r, "a gather's event or staging", f ? &err : NULL);
    return f;
}

static void flight_give(nc_rank *r, nc_flight *f)
{
    f->next = r->flights;
    r->flights = f;
}

/* ---- building ---- */
static smoe_status stage_new(nc_gather *g, int role, int d, const smoe_axes *S,
                             const smoe_axes done[], nc_stage *st, smoe_err *err)
{
    nc_rank *r = g->r;
    if (smoe_gather_geom_run(&g->geo, d, S) < 0)
        return smoe_err_set(err, SMOE_EINVAL, "%s: the axes gathered together on dim %d are "
                            "not adjacent in its sharding; not supported", g->name, d);
    st->role = role;
    st->dim = d;
    st->S = *S;
    memcpy(st->done, done, sizeof st->done);
    smoe_status s = nc_group_get(r, role, S, &st->grp, err);
    if (s)
        return s;
    st->block_bytes = (int64_t)g->esz;
    for (int j = 0; j < g->geo.rank; j++)
        st->block_bytes *= g->geo.blk[j];
    st->combos = smoe_comm_stage_walk(&g->geo, smoe_comm_mesh(&r->host),
                                      smoe_comm_coords(&r->host), d, S, done, 1, 0, NULL, NULL);
    size_t R = (size_t)(st->combos * st->block_bytes);
    return nc_scratch_reserve(r, role, (R + 255) / 256 * 256 + R * (size_t)st->grp->size, err);
}

/* smoe_comm_stages' callback: prefetched stages, then residual ones */
static smoe_status add_stage(void *ud, int pass, int d, const smoe_axes *S,
                             const smoe_axes done[], smoe_err *err)
{
    nc_gather *g = ud;
    nc_stage *st = pass == 0 ? &g->st[g->nst++] : &g->res[g->nres++];
    return stage_new(g, pass ? NC_RESIDUAL : NC_GATHER, d, S, done, st, err);
}

static smoe_status build(nc_gather *g, const smoe_gather_exec *x, smoe_err *err)
{
    nc_rank *r = g->r;
    smoe_status s = smoe_gather_geom_of(x, smoe_comm_mesh(&r->host), smoe_comm_coords(&r->host),
                                        g->name, &g->geo, err);
    if (s || (s = smoe_comm_wire_check(x, g->geo.rank ? g->geo.blk[g->geo.rank - 1] : 0, g->name,
                                       err)))
        return s;
    if (x->wire == SMOE_DT_INT8 || (x->reduce_wire == SMOE_DT_BF16 && (g->geo.rs.n || g->geo.rep.n)))
        return smoe_err_set(err, SMOE_EINVAL, "%s: %s over NCCL are not supported yet (fp32 and "
                            "bf16 gathers, fp32 reductions)", g->name,
                            x->wire == SMOE_DT_INT8 ? "int8 gathers" : "bf16 reductions");
    g->bf16 = x->wire == SMOE_DT_BF16;
    g->esz = g->bf16 ? 2 : 4;
    size_t stage = g->bf16 ? sizeof(uint16_t) * (size_t)g->geo.gathered_numel : 0;
    if (stage > r->stage_bytes) {
        if (r->flights) /* made before: a gather built after the steps began */
            return smoe_err_set(err, SMOE_EINVAL, "%s: a bf16 gather built after gathers ran",
                                g->name);
        r->stage_bytes = stage;
    }
    if ((s = smoe_comm_stages(x, add_stage, g, err)))
        return s;
    if (g->geo.rs.n && (s = nc_group_get(r, NC_REDUCE, &g->geo.rs, &g->rs, err)))
        return s;
    if (g->geo.rep.n && (s = nc_group_get(r, NC_REDUCE, &g->geo.rep, &g->ar, err)))
        return s;
    return SMOE_OK;
}

smoe_status nc_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                          smoe_comm_gather **out, smoe_err *err)
{
    nc_rank *r = ctx;
    nc_gather *g = smoe_calloc(1, sizeof *g);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    snprintf(g->name, sizeof g->name, "%s", name);
    g->r = r;
    smoe_status s = build(g, x, err);
    if (s) {
        smoe_free(g);
        return s;
    }
    g->next = r->gathers;
    r->gathers = g;
    *out = (smoe_comm_gather *)g;
    return SMOE_OK;
}

void nc_gathers_free(nc_rank *r)
{
    while (r->gathers) {
        nc_gather *g = r->gathers;
        r->gathers = g->next;
        smoe_free(g);
    }
}

void nc_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info)
{
    const nc_gather *n = CG(g);
    smoe_comm_wgather_info(&n->geo, n->nst, n->nres, n->geo.rep.n, info);
}

int nc_gather_needs_pack(const smoe_comm_gather *g) { return CG(g)->geo.pack; }

/* ---- the operations ---- */
static void count(nc_rank *r, const nc_stage *st, int n)
{
    for (int k = 0; k < n; k++) {
        r->stats.gathers++;
        r->stats.gather_bytes += st[k].combos * st[k].block_bytes * (st[k].grp->size - 1);
    }
}

void nc_gather_start(void *ctx, smoe_comm_gather *gg, const float *shard, float *buf,
                     smoe_comm_ticket *t)
{
    nc_rank *r = ctx;
    nc_gather *g = G(gg);
    const smoe_gather_geom *e = &g->geo;
    smoe_err err;
    if (smoe_comm_dev_layout(r->d.dev, r->d.compute, e->rank, e->B, e->blk, e->off, sizeof(float),
                             buf, (void *)shard, NULL, 1, &err))
        nc_fail(r, "placing a shard", &err);
    nc_flight *f = flight_take(r);
    if (g->bf16)
        r->d.ops->to_bf16(r->d.cq, f->stage, buf, e->gathered_numel);
    nc_after_compute(r, NC_GATHER);
    for (int k = 0; k < g->nst; k++)
        stage_run(g, &g->st[k], g->bf16 ? f->stage : buf);
    if (smoe_dev_record(r->d.dev, f->ev, r->s[NC_GATHER], &err))
        nc_fail(r, "recording a gather", &err);
    count(r, g->st, g->nst);
    t->pending = 0;
    t->res_pending = 0;
    t->busy_s = 0;
    t->stage = f;
}

void nc_gather_wait(void *ctx, smoe_comm_gather *gg, float *buf, smoe_comm_ticket *t,
                    double *wait_s)
{
    nc_rank *r = ctx;
    nc_gather *g = G(gg);
    nc_flight *f = t->stage;
    smoe_err err;
    if (!f)
        nc_fail(r, "a gather waited for that was not started", NULL);
    if (g->nres) { /* at use, on the residual stream, after the prefetched stages */
        if (smoe_dev_wait(r->d.dev, r->s[NC_RESIDUAL], f->ev, &err))
            nc_fail(r, "ordering a residual gather", &err);
        for (int k = 0; k < g->nres; k++)
            stage_run(g, &g->res[k], g->bf16 ? f->stage : buf);
        if (smoe_dev_record(r->d.dev, f->ev, r->s[NC_RESIDUAL], &err))
            nc_fail(r, "recording a residual gather", &err);
    }
    if (smoe_dev_wait(r->d.dev, r->d.compute, f->ev, &err))
        nc_fail(r, "waiting for a gather", &err);
    count(r, g->res, g->nres);
    if (g->bf16)
        r->d.ops->from_bf16(r->d.cq, buf, f->stage, g->geo.gathered_numel);
    flight_give(r, f);
    t->stage = NULL;
    if (wait_s) /* the compute stream waits, not the host */
        *wait_s = 0;
}

void nc_gather_reduce(void *ctx, smoe_comm_gather *gg, float *full, float *scratch,
                      float *shard_grad, _Atomic int *done, _Atomic int *sent)
{
    nc_rank *r = ctx;
    nc_gather *g = G(gg);
    int64_t n = g->geo.shard_numel;
    smoe_err err;
    if (done)
        *done = 0;
    if (sent) /* once the reduce stream has read the buffer sent */
        *sent = 0;
    const float *send = full;
    if (g->rs && g->geo.pack) { /* on compute: the caller frees `full` at return */
        for (int64_t m = 0; m < g->rs->size; m++) {
            int64_t off[SMOE_MAX_RANK];
            smoe_gather_geom_member(&g->geo, smoe_comm_mesh(&r->host), m, off);
            if (smoe_comm_dev_layout(r->d.dev, r->d.compute, g->geo.rank, g->geo.B, g->geo.blk,
                                     off, sizeof(float), full, scratch + m * n, NULL, 0, &err))
                nc_fail(r, "packing a gradient", &err);
        }
        send = scratch;
    }
    nc_after_compute(r, NC_REDUCE);
    smoe_dev_stream *rs = r->s[NC_REDUCE];
    void *ns = r->ns[NC_REDUCE];
    smoe_status s = g->rs ? smoe_nccl_reduce_scatter(g->rs->c, send, shard_grad, n, ns, &err)
                          : smoe_dev_copy(r->d.dev, shard_grad, full, sizeof(float) * (size_t)n,
                                          rs, &err);
    if (!s && g->ar) {
        nc_red_push(r, NULL, sent);
        sent = NULL;
        s = smoe_nccl_all_reduce(g->ar->c, shard_grad, shard_grad, n, ns, &err);
    }
    if (s)
        nc_fail(r, "a gradient's reduction", &err);
    nc_red_push(r, done, sent);
}
