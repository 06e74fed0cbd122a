/* FSDP weight gathers and their transposes.
 *
 * A weight's gathered buffer has the natural row-major layout of its
 * gathered shape B (global shape divided by the axes it keeps, i.e. all of
 * it, or E/ep experts for routed weights). On dim d the shard is block
 * number radix(coords over A_d) of size blk_d, where A_d is every axis the
 * weight ever gathers on that dim (a suffix of the dim's live axes).
 *
 * Each all-gather stage gathers a run S of A_d. Its receive type describes
 * the region a member holds before the stage (one block per not-yet-gathered
 * axis, all blocks of already-gathered axes: nested hvectors), resized so
 * member m's region starts m * unit after member 0's; the stage is one
 * MPI_Iallgather with MPI_IN_PLACE straight into the natural layout, so no
 * unpacking is needed. The plan's gather axes of a dim form one prefetched
 * stage (co-axis: all of them; legacy: the FSDP axes); the axes left (the
 * legacy residual co-axes, or axes no FSDP axis leads) form a residual
 * stage, issued at use on its own queue and waited at once.
 *
 * On a mesh of slices, a stage whose group spans slices and shares them
 * (smoe_axes_levels) runs in two levels over axis parts ("fsdp@dcn",
 * "fsdp@ici", shard.h): across the slices first, where each member's
 * region is its own blocks, then within the slice, where it is the blocks
 * of its counterparts too; each level is one MPI_Iallgatherv whose
 * displacements place the members (their blocks are not evenly spaced
 * when a group has several axes), so only a member's own blocks cross the
 * slow network. The transpose then reduce-scatters within the slice (in
 * place, the send buffer packed member by member in the levels' order:
 * level_member), then across.
 *
 * A compressed gather (smoe_gather_exec.wire bf16 or int8, dtype.h) runs the
 * same stages on records instead of floats: the geometry below in records
 * (the last dim divided by the record's elements, the plan having checked
 * that every shard holds whole ones), the element type a record of
 * rec_bytes. Start packs the shard's rows straight into their records in the
 * tail of the caller's fp32 buffer (smoe_dtype_tail: a record stream is
 * never larger than its floats; no scratch); the stages land there in
 * place; wait expands the records into the buffer's floats, front to back.
 *
 * The transpose is one reduce-scatter over every gather axis (dims in
 * order): shards are contiguous blocks of `full` when only dim 0 gathers;
 * otherwise they are packed member by member into a scratch buffer first.
 * Then an all-reduce over the mesh axes the weight is replicated on,
 * gated on this weight's reduce-scatter alone: the reduce-scatters of the
 * next weights start meanwhile (had it waited for every earlier op, each
 * weight's pair would wait a progress poll per op on every rank). With
 * a bf16 reduction (smoe_gather_exec.reduce_wire) the send buffer is packed
 * to bf16 in place, both reductions sum bf16 with fp32 arithmetic (the
 * user op rt->bf16_sum: each pairwise sum rounds to bf16), land in the
 * tail of the shard's gradient and are expanded into its floats when the
 * last one completes. A weight with no reduction stays fp32. */
#include "rt_impl.h"

#include "smoe/dtype.h"

#include <stdio.h>
#include <string.h>


typedef struct wg_stage {
    int dim;
    rt_comm *comm;
    MPI_Datatype dtype;
    int64_t base;  /* element offset of member 0's region in the buffer */
    int64_t bytes; /* bytes this rank receives */
    int level2;    /* the second level (within the slice) of a two-level stage */
    int *displs;   /* a level of a two-level stage (MPI_Iallgatherv): member m's
                      region at base + displs[m] rows of dim `dim`; else NULL */
    int *ones;     /* its counts, 1 each */
    char name[128];
} wg_stage;

struct smoe_wgather {
    char name[96];
    smoe_gather_geom geo;            /* shapes, the shard's place, A_d, groups */
    int nst, nres;
    wg_stage st[2 * SMOE_MAX_RANK];  /* prefetched stages (two per two-level one) */
    wg_stage res[2 * SMOE_MAX_RANK]; /* residual (legacy) stages */
    rt_comm *rs_comm;                /* all gather axes, dims in order */
    rt_comm *rs_within, *rs_across;  /* its two levels (reduce-scatter within the
                                        slice, then across), or NULL */
    int levels;                      /* a gather stage runs in two levels */
    int pack;                        /* shards not contiguous in B */
    rt_comm *ar_comm;                /* replicated axes, or NULL */
    int n_ar_axes;
    /* the wire: what the stages move (fp32: floats, as stored) */
    smoe_dtype wire;
    int64_t wblock;                  /* int8: elements per scale */
    int64_t rec;                     /* elements of the last dim per record */
    int64_t esz;                     /* bytes per record */
    MPI_Datatype etype;              /* one record */
    int64_t crow[SMOE_MAX_RANK];     /* records per index step of dim d in B */
    int rbf16;                       /* gradient reductions in bf16 */
};

/* Stride (in blocks of dim d, times blk) of axis A_d[k]. */
static int64_t stride_of(const smoe_rt *rt, const smoe_wgather *g, int d, int k)
{
    return smoe_gather_geom_stride(&g->geo, &rt->mesh, d, k);
}

/* The same in records (dim rank-1 counts records). */
static int64_t cstride_of(const smoe_rt *rt, const smoe_wgather *g, int d, int k)
{
    return stride_of(rt, g, d, k) / (d == g->geo.rank - 1 ? g->rec : 1);
}

static int64_t cblk_of(const smoe_wgather *g, int d)
{
    return g->geo.blk[d] / (d == g->geo.rank - 1 ? g->rec : 1);
}

static int index_in(const smoe_axes *e, const char *a)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->ax[i], a) == 0)
            return i;
    return -1;
}

static void free_type(MPI_Datatype *t)
{
    if (*t != MPI_FLOAT && *t != MPI_DATATYPE_NULL)
        MPI_Type_free(t);
}

static void free_stage(wg_stage *st)
{
    free_type(&st->dtype);
    smoe_free(st->displs);
    smoe_free(st->ones);
}

static void free_wg(smoe_wgather *g)
{
    for (int k = 0; k < g->nst; k++)
        free_stage(&g->st[k]);
    for (int k = 0; k < g->nres; k++)
        free_stage(&g->res[k]);
    if (g->etype)
        free_type(&g->etype);
    smoe_free(g);
}

/* Where part `name` (an axis of A_j whole, or its dcn or ici part) sits:
 * its index k in A_j (-1: not there), the mesh axis *a and the part *p. */
static int part_k(const smoe_rt *rt, const smoe_wgather *g, int j, const char *name, int *a,
                  smoe_axis_part *p)
{
    *a = smoe_mesh_part_find(&rt->mesh, name, p);
    return *a < 0 ? -1 : index_in(&g->geo.A[j], rt->mesh.name[*a]);
}

/* Records one step of part `name` moves along dim j (k: part_k's). */
static int64_t part_stride(const smoe_rt *rt, const smoe_wgather *g, int j, int k, int a,
                           smoe_axis_part p)
{
    return cstride_of(rt, g, j, k) * smoe_mesh_part_scale(&rt->mesh, a, p);
}

/* The region a member holds: its blocks, all blocks of the parts in done
 * (nested hvectors, last dim innermost), in records; *t committed by the
 * caller. */
static void region_type(smoe_rt *rt, const smoe_wgather *g, const smoe_axes done[],
                        MPI_Datatype *out)
{
    MPI_Datatype t = g->etype, nt;
    for (int j = g->geo.rank - 1; j >= 0; j--) {
        if (j == g->geo.rank - 1)
            rt_check(rt, MPI_Type_contiguous((int)cblk_of(g, j), t, &nt), "MPI_Type_contiguous");
        else
            rt_check(rt, MPI_Type_create_hvector((int)cblk_of(g, j), 1,
                                                 (MPI_Aint)(g->crow[j] * g->esz), t, &nt),
                     "MPI_Type_create_hvector");
        if (t != g->etype)
            free_type(&t);
        t = nt;
        for (int i = 0; i < done[j].n; i++) {
            int a;
            smoe_axis_part p;
            int k = part_k(rt, g, j, done[j].ax[i], &a, &p);
            int64_t s = part_stride(rt, g, j, k, a, p);
            rt_check(rt, MPI_Type_create_hvector((int)smoe_mesh_part_size(&rt->mesh, a, p), 1,
                                                 (MPI_Aint)(s * g->crow[j] * g->esz), t, &nt),
                     "MPI_Type_create_hvector");
            free_type(&t);
            t = nt;
        }
    }
    *out = t;
}

/* Member 0's region: this rank's blocks on the parts neither in done nor
 * (on dim d) in S, in records. */
static int64_t stage_base(const smoe_rt *rt, const smoe_wgather *g, int d, const smoe_axes *S,
                          const smoe_axes done[])
{
    static const smoe_axis_part parts[2] = { SMOE_PART_DCN, SMOE_PART_ICI };
    int64_t base = 0;
    for (int j = 0; j < g->geo.rank; j++) {
        int64_t o = 0;
        for (int k = 0; k < g->geo.A[j].n; k++) {
            int a = smoe_mesh_find(&rt->mesh, g->geo.A[j].ax[k]);
            for (int q = 0; q < 2 && a >= 0; q++) {
                smoe_axis_part p = parts[q];
                if (smoe_axes_has_part(&rt->mesh, &done[j], a, p) ||
                    (j == d && smoe_axes_has_part(&rt->mesh, S, a, p)))
                    continue;
                o += smoe_mesh_part_coord(&rt->mesh, a, p, rt->coords[a]) *
                     part_stride(rt, g, j, k, a, p);
            }
        }
        base += o * g->crow[j];
    }
    return base;
}

/* A level's members' places (rows of dim d from member 0's): member m, the
 * mixed radix over S's parts (last fastest), sits at the sum of its part
 * coordinates times their strides. NULL when out of memory. */
static int *level_displs(const smoe_rt *rt, const smoe_wgather *g, int d, const smoe_axes *S,
                         int n)
{
    int *dis = smoe_malloc(sizeof *dis * (size_t)n);
    if (!dis)
        return NULL;
    int64_t rec = d == g->geo.rank - 1 ? g->rec : 1; /* the last dim counts records */
    for (int m = 0; m < n; m++)
        dis[m] = (int)(smoe_gather_geom_level_offset(&g->geo, &rt->mesh, d, S, m) / rec);
    return dis;
}

/* Receive type and member-0 base offset of a stage over S on dim d, given
 * the parts already gathered per dim (done). One level (level 0): S is a
 * run of A_d, members evenly spaced (one MPI_Iallgather). A level of a
 * two-level stage (level 1): S are parts (smoe_axes_levels), members
 * placed by displacements (MPI_Iallgatherv). */
static smoe_status build_stage(smoe_rt *rt, smoe_wgather *g, int d, const smoe_axes *S,
                               const smoe_axes done[], int q, int level, wg_stage *st,
                               smoe_err *err)
{
    int k0 = level ? 0 : smoe_gather_geom_run(&g->geo, d, S);
    if (k0 < 0)
        return smoe_err_set(err, SMOE_EINVAL,
                                "%s: the axes gathered together on dim %d are not "
                                "adjacent in its sharding; not supported",
                                g->name, d);
    MPI_Datatype t, nt;
    st->dtype = MPI_DATATYPE_NULL;
    region_type(rt, g, done, &t);
    /* in records of esz bytes (fp32: floats); a level's extent is one row */
    int64_t unit = level ? g->crow[d] : cstride_of(rt, g, d, k0 + S->n - 1) * g->crow[d];
    rt_check(rt, MPI_Type_create_resized(t, 0, (MPI_Aint)(unit * g->esz), &nt),
             "MPI_Type_create_resized");
    free_type(&t);
    rt_check(rt, MPI_Type_commit(&nt), "MPI_Type_commit");
    st->dtype = nt;
    st->dim = d;
    st->base = stage_base(rt, g, d, S, done); /* records */
    smoe_status s = rt_comm_get(rt, S, q, &st->comm, err);
    if (s)
        return s;
    if (level) {
        st->displs = level_displs(rt, g, d, S, st->comm->size);
        st->ones = smoe_malloc(sizeof *st->ones * (size_t)st->comm->size);
        if (!st->displs || !st->ones)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        for (int m = 0; m < st->comm->size; m++)
            st->ones[m] = 1;
    }
    /* bytes received: (members - 1) x the region size */
    int size = 0;
    MPI_Type_size(nt, &size);
    st->bytes = (int64_t)size * (st->comm->size - 1);
    char ax[128];
    smoe_axes_format(S, ax, sizeof ax);
    snprintf(st->name, sizeof st->name, "AG %s %d-way %s", g->name, st->comm->size, ax);
    return SMOE_OK;
}

static smoe_status add_wg(smoe_rt *rt, smoe_wgather *g, smoe_err *err)
{
    if (rt->nwg == rt->capwg) {
        int cap = rt->capwg ? rt->capwg * 2 : 64;
        smoe_wgather **n = smoe_realloc(rt->wg, sizeof *n * (size_t)cap);
        if (!n)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        rt->wg = n;
        rt->capwg = cap;
    }
    rt->wg[rt->nwg++] = g;
    return SMOE_OK;
}

void rt_wgather_free_all(smoe_rt *rt)
{
    for (int i = 0; i < rt->nwg; i++)
        free_wg(rt->wg[i]);
    smoe_free(rt->wg);
    rt->wg = NULL;
    rt->nwg = rt->capwg = 0;
}

static void bf16_sum_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    smoe_bf16_add(inout, in, *len);
}

smoe_status rt_bf16_sum_get(smoe_rt *rt, smoe_err *err)
{
    if (rt->have_bf16_sum)
        return SMOE_OK;
    if (MPI_Op_create(bf16_sum_fn, 1, &rt->bf16_sum) != MPI_SUCCESS)
        return smoe_err_set(err, SMOE_EINTERNAL, "MPI_Op_create failed");
    rt->have_bf16_sum = 1;
    return SMOE_OK;
}

/* The wire of p: records, their MPI type, the geometry in records and the
 * shard's record buffer. The plan has checked the int8 block rule; a
 * shard that still does not hold whole records is refused here. */
static smoe_status wire_setup(smoe_wgather *g, const smoe_gather_exec *p, smoe_err *err)
{
    smoe_status s = smoe_comm_wire_check(p, g->geo.rank ? g->geo.blk[g->geo.rank - 1] : 0,
                                         g->name, err);
    if (s)
        return s;
    g->wire = (smoe_dtype)p->wire;
    g->wblock = p->wire_block;
    g->rec = smoe_dtype_rec_elems(g->wire, g->wblock);
    g->esz = smoe_dtype_rec_bytes(g->wire, g->wblock);
    for (int d = g->geo.rank - 1; d >= 0; d--)
        g->crow[d] = d == g->geo.rank - 1 ? 1 : g->crow[d + 1] * (g->geo.B[d + 1] /
                                                              (d + 1 == g->geo.rank - 1 ? g->rec : 1));
    if (g->wire == SMOE_DT_FP32) {
        g->etype = MPI_FLOAT;
        return SMOE_OK;
    }
    if (MPI_Type_contiguous((int)g->esz, MPI_BYTE, &g->etype) != MPI_SUCCESS) {
        g->etype = MPI_DATATYPE_NULL;
        return smoe_err_set(err, SMOE_EINVAL, "%s: MPI_Type_contiguous failed", g->name);
    }
    return SMOE_OK;
}

/* The stages of a gather over S on dim d (pass 0 prefetched, 1 residual):
 * one, or across slices then within one where S's group spans slices and
 * shares them (smoe_axes_levels: each member sends only its own blocks
 * over the slow network). The stages are counted as built, so that a
 * failure frees what was made. */
static smoe_status add_stages(smoe_rt *rt, smoe_wgather *g, int d, const smoe_axes *S,
                              const smoe_axes done[], int pass, smoe_err *err)
{
    int q = pass ? RT_Q_RESIDUAL : RT_Q_GATHER; /* residual: own queue and comms */
    wg_stage *st = pass ? g->res : g->st;
    int *n = pass ? &g->nres : &g->nst;
    smoe_levels lv;
    if (!smoe_axes_levels(&rt->mesh, S, &lv))
        return build_stage(rt, g, d, S, done, q, 0, &st[(*n)++], err);
    smoe_status s = build_stage(rt, g, d, &lv.across, done, q, 1, &st[(*n)++], err);
    if (s)
        return s;
    smoe_axes after[SMOE_MAX_RANK];
    memcpy(after, done, sizeof after);
    for (int i = 0; i < lv.across.n; i++)
        after[d].ax[after[d].n++] = lv.across.ax[i];
    /* a prefetched second level runs on its own queue (smoe_rt_wgather_start) */
    st[*n].level2 = 1;
    g->levels = 1;
    return build_stage(rt, g, d, &lv.within, after, pass ? q : RT_Q_LEVEL, 1, &st[(*n)++], err);
}

smoe_status smoe_rt_wgather_new(smoe_rt *rt, const smoe_gather_exec *p, const char *name,
                                smoe_wgather **out, smoe_err *err)
{
    smoe_status s;
    smoe_wgather *g = smoe_calloc(1, sizeof *g);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    snprintf(g->name, sizeof g->name, "%s", name);
    if ((s = smoe_gather_geom_of(p, &rt->mesh, rt->coords, g->name, &g->geo, err)))
        goto fail;
    if (g->geo.shard_numel > 0x7fffffff || g->geo.gathered_numel > 0x7fffffffLL * 8) {
        s = smoe_err_set(err, SMOE_EINVAL, "%s: too large for one MPI message", name);
        goto fail;
    }
    if ((s = wire_setup(g, p, err)))
        goto fail;
    /* prefetched stages, then residual ones */
    smoe_axes done[SMOE_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
        done[d].n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < p->rank; d++) {
            const smoe_axes *S = pass == 0 ? &p->prefetch[d] : &p->at_use[d];
            if (S->n && (s = add_stages(rt, g, d, S, done, pass, err)))
                goto fail;
            for (int i = 0; i < S->n; i++)
                done[d].ax[done[d].n++] = S->ax[i];
        }
    /* the transpose: one reduce-scatter over every gather axis, then an
     * all-reduce over the replicated axes */
    g->pack = g->geo.pack;
    if (g->geo.rs.n && (s = rt_comm_get(rt, &g->geo.rs, RT_Q_COMM, &g->rs_comm, err)))
        goto fail;
    smoe_levels lv;
    if (g->rs_comm && smoe_axes_levels(&rt->mesh, &g->geo.rs, &lv)) {
        if ((s = rt_comm_get(rt, &lv.within, RT_Q_COMM, &g->rs_within, err)) ||
            (s = rt_comm_get(rt, &lv.across, RT_Q_RLEVEL, &g->rs_across, err)))
            goto fail;
        g->pack = 1; /* member blocks in the levels' order */
    }
    g->n_ar_axes = g->geo.rep.n;
    /* the all-reduce after a reduce-scatter goes on the second levels'
     * queue, gated on that reduce-scatter alone (smoe_rt_wgather_reduce) */
    if (g->geo.rep.n && (s = rt_comm_get(rt, &g->geo.rep, g->rs_comm ? RT_Q_RLEVEL : RT_Q_COMM,
                                         &g->ar_comm, err)))
        goto fail;
    g->rbf16 = p->reduce_wire == SMOE_DT_BF16 && (g->rs_comm || g->ar_comm);
    if (g->rbf16 && (s = rt_bf16_sum_get(rt, err)))
        goto fail;
    if ((s = add_wg(rt, g, err)))
        goto fail;
    *out = g;
    return SMOE_OK;
fail:
    free_wg(g);
    return s;
}

void smoe_rt_wgather_info(const smoe_wgather *g, smoe_wgather_info *info)
{
    smoe_comm_wgather_info(&g->geo, g->nst, g->nres, g->n_ar_axes, info);
}

int smoe_rt_wgather_needs_pack(const smoe_wgather *g) { return g->pack; }

/* An all-gather op of stage st landing in the record buffer cb. */
static rt_op *stage_op(smoe_rt *rt, const smoe_wgather *g, const wg_stage *st, char *cb)
{
    rt_op *op = rt_op_new(rt);
    op->kind = st->displs ? OP_ALLGATHERV : OP_ALLGATHER;
    op->comm = st->comm->comm;
    op->group = st->comm;
    op->dtype = st->dtype;
    op->rbuf = cb + st->base * g->esz;
    op->rcounts = st->ones;
    op->rdispls = st->displs;
    op->name = st->name;
    op->bytes = st->bytes;
    return op;
}

void smoe_rt_wgather_start(smoe_rt *rt, smoe_wgather *g, const float *shard, float *buf,
                           smoe_rt_ticket *t)
{
    char *cb = (char *)buf;
    if (g->wire == SMOE_DT_FP32) {
        smoe_layout_copy(g->geo.rank, g->geo.B, g->geo.blk, g->geo.off, sizeof(float), buf, (void *)shard, 1);
    } else {
        cb = smoe_dtype_tail(g->wire, g->wblock, buf, g->geo.gathered_numel);
        smoe_dtype_pack_block(g->wire, g->wblock, g->geo.rank, g->geo.B, g->geo.blk, g->geo.off,
                              shard, cb);
    }
    t->busy_s = 0;
    t->pending = g->nst;
    t->res_pending = 0;
    for (int k = 0; k < g->nst; k++) {
        rt_op *op = stage_op(rt, g, &g->st[k], cb);
        /* a later stage reads what the earlier wrote: it waits for every
         * earlier op, or, with two levels, for this weight's earlier
         * stages alone (its ticket), the second levels on a queue of their
         * own so that other weights' first levels go on meanwhile */
        if (g->levels && k > 0) {
            op->gate = &t->pending;
            op->gate_max = g->nst - k;
        } else {
            op->serial = k > 0;
        }
        op->lane = SMOE_LANE_GATHER;
        op->pending = &t->pending;
        op->busy_acc = &t->busy_s; /* not the stats: the progress thread may run it */
        rt_enqueue(rt, g->st[k].level2 ? RT_Q_LEVEL : RT_Q_GATHER, op);
    }
}

void smoe_rt_wgather_wait(smoe_rt *rt, smoe_wgather *g, float *buf, smoe_rt_ticket *t,
                          double *wait_s, smoe_err *err)
{
    (void)err;
    double t0 = smoe_now();
    char what[160];
    snprintf(what, sizeof what, "the all-gather of %s", g->name);
    smoe_rt_wait w = smoe_rt_wait_begin(what);
    while (t->pending)
        smoe_rt_wait_step(rt, &w);
    double t1 = smoe_now();
    rt->stats.gather_wait_s += t1 - t0;
    rt->stats.gather_busy_s += t->busy_s; /* complete: no op writes it now */
    t->busy_s = 0;
    if (t1 - t0 > 20e-6)
        rt_span(rt, SMOE_LANE_WAIT, g->name, t0, t1);
    char *cb = smoe_dtype_tail(g->wire, g->wblock, buf, g->geo.gathered_numel);
    if (g->nres) {
        double r0 = smoe_now();
        t->res_pending = g->nres;
        for (int k = 0; k < g->nres; k++) {
            rt_op *op = stage_op(rt, g, &g->res[k], cb);
            op->serial = 1; /* on top of the prefetched stages */
            op->lane = SMOE_LANE_WAIT;
            op->pending = &t->res_pending;
            rt_enqueue(rt, RT_Q_RESIDUAL, op);
        }
        snprintf(what, sizeof what, "the residual all-gather of %s", g->name);
        smoe_rt_wait w2 = smoe_rt_wait_begin(what);
        while (t->res_pending)
            smoe_rt_wait_step(rt, &w2);
        rt->stats.residual_s += smoe_now() - r0;
    }
    if (g->wire != SMOE_DT_FP32) {
        double c0 = smoe_now();
        smoe_dtype_unpack_tail(g->wire, g->wblock, buf, g->geo.gathered_numel);
        rt->stats.convert_s += smoe_now() - c0;
    }
    if (wait_s)
        *wait_s = smoe_now() - t0;
}

/* Member m's shard block of `full` copied to dst (contiguous). */
static void pack_member(const smoe_rt *rt, const smoe_wgather *g, int64_t m, const float *full,
                        float *dst)
{
    int64_t off[SMOE_MAX_RANK];
    smoe_gather_geom_member(&g->geo, &rt->mesh, m, off); /* m over the gather axes */
    smoe_layout_copy(g->geo.rank, g->geo.B, g->geo.blk, off, sizeof(float), (void *)full, dst, 0);
}

/* The reduce-scatter group's member whose blocks go m-th into the send
 * buffer. One level: m. Two levels (within the slice, then across): the
 * buffer holds, for each member w of the level within, the blocks of its
 * counterparts x across (member x * W + w of the levels' radix), so that
 * the level within leaves each rank the sums of its counterparts' blocks,
 * in the order the level across reduce-scatters them. */
static int64_t level_member(const smoe_rt *rt, const smoe_wgather *g, int64_t m)
{
    if (!g->rs_within)
        return m;
    return smoe_levels_member(&rt->mesh, &g->geo.rs, m % g->rs_across->size,
                              m / g->rs_across->size);
}

/* `after` starts only once `before` has completed (a gate in the op
 * itself: before's completion decrements it; queue.c's start rules). */
static void gate_on(rt_op *after, rt_op *before)
{
    after->level_pending = 1;
    after->gate = &after->level_pending;
    after->gate_max = 0;
    before->pending = &after->level_pending;
}

/* The level within the slice of a two-level reduce-scatter: in place in
 * send (fp32 or, packed at its head, bf16), leaving at its head the sums
 * the level across (`across`, gated on it) reduce-scatters. Returns send. */
static float *reduce_within(smoe_rt *rt, const smoe_wgather *g, float *send, rt_op *across)
{
    rt_op *op = rt_op_new(rt);
    gate_on(across, op);
    op->kind = OP_REDUCE_SCATTER;
    op->comm = g->rs_within->comm;
    op->group = g->rs_within;
    op->sbuf = MPI_IN_PLACE;
    op->rbuf = send;
    op->count = (int)(g->rs_across->size * g->geo.shard_numel);
    op->bf16 = g->rbf16;
    op->name = g->rbf16 ? "RS grad within bf16" : "RS grad within";
    op->lane = SMOE_LANE_COMM;
    rt_enqueue(rt, RT_Q_COMM, op);
    return send;
}

void smoe_rt_wgather_reduce(smoe_rt *rt, smoe_wgather *g, float *full, float *scratch,
                            float *shard_grad, _Atomic int *done, _Atomic int *sent)
{
    if (done)
        *done = 0;
    if (sent) /* until the reduce-scatter reading them completes */
        *sent = !g->rs_comm;
    float *send = full;
    if (g->rs_comm && g->pack) {
        for (int64_t m = 0; m < g->rs_comm->size; m++)
            pack_member(rt, g, level_member(rt, g, m), full, scratch + m * g->geo.shard_numel);
        send = scratch;
    }
    /* bf16 (see the head comment): send packed in place, the results in
     * the tail of shard_grad, expanded when the last op completes */
    int b = g->rbf16;
    void *rb = b ? smoe_dtype_tail(SMOE_DT_BF16, 0, shard_grad, g->geo.shard_numel)
                 : (void *)shard_grad;
    rt_op *ar = g->ar_comm ? rt_op_new(rt) : NULL;
    if (g->rs_comm) {
        if (b)
            smoe_dtype_pack_head(SMOE_DT_BF16, 0, send, g->rs_comm->size * g->geo.shard_numel);
        rt_op *op = rt_op_new(rt);
        if (g->rs_within)
            send = reduce_within(rt, g, send, op);
        const rt_comm *rc = g->rs_within ? g->rs_across : g->rs_comm;
        op->kind = OP_REDUCE_SCATTER;
        op->comm = rc->comm;
        op->group = rc;
        op->sbuf = send;
        op->rbuf = rb;
        op->count = (int)g->geo.shard_numel;
        op->bf16 = b;
        op->name = b ? "RS grad bf16" : "RS grad";
        op->lane = SMOE_LANE_COMM;
        op->flag = ar ? NULL : done;
        op->sent = sent;
        op->expand = b && !ar ? shard_grad : NULL;
        op->expand_n = g->geo.shard_numel;
        if (ar) /* the all-reduce reads what this op writes */
            gate_on(ar, op);
        rt_enqueue(rt, g->rs_within ? RT_Q_RLEVEL : RT_Q_COMM, op);
    } else if (b) {
        smoe_dtype_pack(SMOE_DT_BF16, 0, rb, full, g->geo.shard_numel);
    } else {
        memcpy(shard_grad, full, sizeof(float) * (size_t)g->geo.shard_numel);
    }
    if (ar) {
        rt_op *op = ar;
        op->kind = OP_ALLREDUCE;
        op->comm = g->ar_comm->comm;
        op->group = g->ar_comm;
        op->rbuf = rb;
        op->count = (int)g->geo.shard_numel;
        op->bf16 = b;
        op->name = b ? "AR grad bf16" : "AR grad";
        op->lane = SMOE_LANE_COMM;
        op->flag = done;
        op->expand = b ? shard_grad : NULL;
        op->expand_n = g->geo.shard_numel;
        rt_enqueue(rt, g->rs_comm ? RT_Q_RLEVEL : RT_Q_COMM, op);
    } else if (!g->rs_comm && done) {
        *done = 1;
    }
}
