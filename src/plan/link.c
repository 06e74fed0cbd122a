/* The bytes a device sends to other slices in one step of smoe train, from
 * the plan and the geometry the runtime uses (smoe_gather_exec_of,
 * smoe_gather_geom_of), each collective counted as a direct exchange as
 * smoe_comm_stats.link_bytes counts it:
 *   a gather stage sends the region a member holds to each member in
 *   another slice; one in two levels (smoe_axes_levels) sends it across
 *   only to its counterparts (the level within stays in the slice);
 *   the gradient reduce-scatter sends each member in another slice its
 *   shard; in two levels, each counterpart across;
 *   the all-reduce over the replicated axes (one level) 2 / n of the
 *   shard to each member in another slice (integer bytes, as the runtime
 *   counts).
 * A stacked weight counts once per layer; a prefetched one (a decoder
 * weight) is gathered twice a layer (forward, and the backward's
 * re-gather), every weight reduced once a layer; the unstacked ones
 * (embedding, head, final norm) are gathered and reduced once a step.
 * Devices differ only in coordinates, so every device sends the same. */
#include "smoe/plan.h"

#include "smoe/dtype.h"

/* Members of the group over S in slices other than this device's: one
 * level, all but those sharing its slice; two (where levels is set and the
 * group runs so), its counterparts across. */
static int64_t far_members(const smoe_mesh *m, const smoe_axes *S, int levels)
{
    smoe_levels lv;
    if (levels && smoe_axes_levels(m, S, &lv))
        return smoe_axes_part_members(m, &lv.across) - 1;
    int64_t g = 1, near = 1;
    for (int k = 0; k < S->n; k++) {
        int a = smoe_mesh_find(m, S->ax[k]);
        if (a < 0)
            continue;
        g *= m->size[a];
        near *= smoe_mesh_part_size(m, a, SMOE_PART_ICI);
    }
    return g - near;
}

static int64_t gathers_far(const smoe_mesh *m, const smoe_gather_exec *x,
                           const smoe_gather_geom *geo)
{
    int64_t region = smoe_dtype_bytes((smoe_dtype)x->wire, x->wire_block, geo->shard_numel);
    int64_t far = 0;
    for (int pass = 0; pass < 2; pass++) /* the runtime's stage order */
        for (int d = 0; d < x->rank; d++) {
            const smoe_axes *S = pass ? &x->at_use[d] : &x->prefetch[d];
            if (!S->n)
                continue;
            far += region * far_members(m, S, 1);
            region *= smoe_axes_size(S, m);
        }
    return far;
}

static int64_t reduction_far(const smoe_mesh *m, const smoe_gather_geom *geo, int elem)
{
    int64_t shard = geo->shard_numel * elem, far = 0;
    if (geo->rs.n)
        far += shard * far_members(m, &geo->rs, 1);
    if (geo->rep.n) {
        int64_t n = smoe_axes_size(&geo->rep, m);
        far += 2 * shard / n * far_members(m, &geo->rep, 0); /* one level */
    }
    return far;
}

smoe_status smoe_plan_link_bytes(const smoe_plan *p, smoe_gather_mode mode, int reduce_bytes,
                                 smoe_plan_link *out, smoe_err *err)
{
    int64_t coords[SMOE_MAX_AXES] = { 0 };
    out->gathers = out->reductions = 0;
    for (int i = 0; i < p->n; i++) {
        const smoe_weight *w = &p->w[i];
        if (w->kind != SMOE_ENTRY_PARAM || !w->has_gather)
            continue;
        const smoe_gather *g = mode == SMOE_MODE_LEGACY ? &w->legacy : &w->gather;
        const char *name = w->path ? w->path : w->key;
        smoe_gather_exec x;
        smoe_gather_geom geo;
        smoe_status s;
        if ((s = smoe_gather_exec_of(g, smoe_weight_routed(w), name, &x, err)) ||
            (s = smoe_gather_exec_set_wire(&x, g, &p->mesh, g->wire, p->int8_block, name,
                                           err)) ||
            (s = smoe_gather_geom_of(&x, &p->mesh, coords, name, &geo, err)))
            return s;
        int64_t times = w->scan_axis >= 0 ? w->layers : 1; /* a stacked weight's layers */
        out->gathers += (w->prefetch ? 2 : 1) * times * gathers_far(&p->mesh, &x, &geo);
        out->reductions += times * reduction_far(&p->mesh, &geo, reduce_bytes);
    }
    return SMOE_OK;
}
