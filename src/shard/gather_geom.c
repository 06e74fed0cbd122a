/* A weight's gather geometry on one device (shard.h: smoe_gather_geom),
 * shared by every implementation of the FSDP gathers: the gathered and
 * shard shapes, the shard's place, the axes each dim gathers, the groups
 * of the gradient's reduce-scatter and all-reduce. Pure arithmetic on the
 * plan's smoe_gather_exec and the mesh. */
#include "smoe/shard.h"

#include <string.h>

static int64_t coord_of(const smoe_mesh *m, const int64_t coords[], const char *a)
{
    int i = smoe_mesh_find(m, a);
    return i < 0 ? 0 : coords[i];
}

int64_t smoe_gather_geom_stride(const smoe_gather_geom *g, const smoe_mesh *m, int d, int k)
{
    int64_t s = g->blk[d];
    for (int j = k + 1; j < g->A[d].n; j++)
        s *= smoe_mesh_axis_size(m, g->A[d].ax[j]);
    return s;
}

static int index_in(const smoe_axes *e, const char *a)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->ax[i], a) == 0)
            return i;
    return -1;
}

int smoe_gather_geom_run(const smoe_gather_geom *g, int d, const smoe_axes *S)
{
    int k0 = S->n ? index_in(&g->A[d], S->ax[0]) : -1;
    for (int i = 0; i < S->n; i++)
        if (k0 < 0 || index_in(&g->A[d], S->ax[i]) != k0 + i)
            return -1;
    return k0;
}

smoe_status smoe_gather_geom_of(const smoe_gather_exec *x, const smoe_mesh *m,
                                const int64_t coords[], const char *name, smoe_gather_geom *g,
                                smoe_err *err)
{
    memset(g, 0, sizeof *g);
    g->rank = x->rank;
    g->shard_numel = g->gathered_numel = 1;
    /* A_d: the live axes gathered (prefetched or at use), in live order */
    for (int d = 0; d < x->rank; d++) {
        if (x->indivisible & (1u << d))
            return smoe_err_set(err, SMOE_EINVAL, "%s: dim %d (%lld) does not divide into its "
                                "shards", name, d, (long long)x->shape[d]);
        for (int i = 0; i < x->live[d].n; i++) {
            const char *a = x->live[d].ax[i];
            if (smoe_axes_has(&x->prefetch[d], a) || smoe_axes_has(&x->at_use[d], a))
                g->A[d].ax[g->A[d].n++] = a;
        }
        g->blk[d] = x->shape[d] / smoe_axes_size(&x->live[d], m);
        g->B[d] = g->blk[d] * smoe_axes_size(&g->A[d], m);
        g->shard_numel *= g->blk[d];
        g->gathered_numel *= g->B[d];
    }
    for (int d = 0; d < x->rank; d++)
        for (int k = 0; k < g->A[d].n; k++)
            g->off[d] += coord_of(m, coords, g->A[d].ax[k]) * smoe_gather_geom_stride(g, m, d, k);
    /* the transpose: one reduce-scatter over every gather axis, then an
     * all-reduce over the axes no dim is sharded on */
    for (int d = 0; d < x->rank; d++) {
        for (int k = 0; k < g->A[d].n; k++)
            g->rs.ax[g->rs.n++] = g->A[d].ax[k];
        if (d > 0 && g->A[d].n)
            g->pack = 1;
    }
    for (int a = 0; a < m->n; a++) {
        int used = 0;
        for (int d = 0; d < x->rank; d++)
            used |= smoe_axes_has(&x->live[d], m->name[a]);
        if (m->size[a] > 1 && !used)
            g->rep.ax[g->rep.n++] = m->name[a];
    }
    return SMOE_OK;
}

void smoe_gather_geom_member(const smoe_gather_geom *g, const smoe_mesh *m, int64_t member,
                             int64_t off[])
{
    for (int d = g->rank - 1; d >= 0; d--) {
        off[d] = 0;
        for (int k = g->A[d].n - 1; k >= 0; k--) {
            int64_t n = smoe_mesh_axis_size(m, g->A[d].ax[k]);
            off[d] += (member % n) * smoe_gather_geom_stride(g, m, d, k);
            member /= n;
        }
    }
}

int64_t smoe_gather_geom_level_offset(const smoe_gather_geom *g, const smoe_mesh *m, int d,
                                      const smoe_axes *P, int64_t member)
{
    int64_t o = 0;
    for (int i = P->n - 1; i >= 0; i--) {
        smoe_axis_part p;
        int a = smoe_mesh_part_find(m, P->ax[i], &p);
        int k = a < 0 ? -1 : index_in(&g->A[d], m->name[a]);
        if (k < 0)
            continue;
        int64_t sz = smoe_mesh_part_size(m, a, p);
        o += (member % sz) * smoe_gather_geom_stride(g, m, d, k) * smoe_mesh_part_scale(m, a, p);
        member /= sz;
    }
    return o;
}
