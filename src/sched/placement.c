/* Where a collective's members sit, as the step model counts it: the
 * members of a group on device 0's node, a stage's near and far bytes and
 * steps, a gather's stages across and within slices (smoe_axes_levels).
 * Mesh geometry only: what the bytes cost is cost.c's. */
#include "sched_impl.h"

/* Group members over axes i.. (in mesh order, strides descending) whose
 * linear index offset is < x: the members' offsets are a mixed-radix
 * lattice in which every axis' stride exceeds the largest offset the later
 * axes reach, so whole digits of axis i below x / stride count every
 * combination of the rest. O(axes). */
static int64_t below(const int64_t *stride, const int64_t *size, const int64_t *rest, int n,
                     int i, int64_t x)
{
    if (x <= 0)
        return 0;
    if (i == n)
        return 1;
    int64_t q = x / stride[i];
    if (q >= size[i])
        return rest[i];
    return q * rest[i + 1] + below(stride, size, rest, n, i + 1, x - q * stride[i]);
}

double sim_local_members(const smoe_mesh *m, const smoe_axes *axes, int64_t dpn, int64_t *g)
{
    int64_t mstride[SMOE_MAX_AXES], size = 1;
    for (int a = m->n - 1; a >= 0; a--) {
        mstride[a] = size;
        size *= m->size[a];
    }
    /* slices (the mesh's dcn parts) are joined by the slow network
     * whatever the profile's node: a node is at most a slice's devices
     * (consecutive, smoe_mesh_slices_contiguous) */
    int64_t slices = smoe_mesh_slices(m);
    if (slices > 1 && size / slices < dpn)
        dpn = size / slices;
    int used[SMOE_MAX_AXES] = { 0 };
    for (int i = 0; i < axes->n; i++) {
        int a = smoe_mesh_find(m, axes->ax[i]);
        if (a >= 0 && m->size[a] > 1)
            used[a] = 1;
    }
    int64_t stride[SMOE_MAX_AXES], sz[SMOE_MAX_AXES], rest[SMOE_MAX_AXES + 1];
    int n = 0;
    for (int a = 0; a < m->n; a++) /* mesh order: strides descending */
        if (used[a]) {
            stride[n] = mstride[a];
            sz[n++] = m->size[a];
        }
    rest[n] = 1;
    for (int i = n - 1; i >= 0; i--)
        rest[i] = rest[i + 1] * sz[i];
    *g = rest[0];
    return (double)below(stride, sz, rest, n, 0, dpn);
}


void sim_stage_far(const smoe_mesh *m, const smoe_axes *axes, double dpn, double bytes,
                   int64_t *g, double *gl, double *near_bytes, double *far_bytes,
                   double *far_steps)
{
    *gl = sim_local_members(m, axes, (int64_t)dpn, g);
    *near_bytes = *far_bytes = *far_steps = 0;
    if (*g <= 1 || bytes <= 0)
        return;
    *near_bytes = bytes * (*gl - 1) / (double)(*g - 1);
    if (*gl >= (double)*g)
        return;
    *far_bytes = bytes * ((double)*g - *gl) / (double)(*g - 1);
    *far_steps = (double)*g / *gl - 1;
}

int sim_stage_levels(const smoe_mesh *m, const smoe_axes *ax, double local, smoe_levels *lv,
                        smoe_part_mesh *pm, double b[2])
{
    double grp = (double)smoe_axes_size(ax, m);
    b[0] = local * (grp - 1);
    if (!smoe_axes_levels(m, ax, lv))
        return 0;
    smoe_mesh_parts(m, pm);
    double x = (double)smoe_axes_part_members(m, &lv->across);
    double w = (double)smoe_axes_part_members(m, &lv->within);
    b[0] = local * (x - 1);
    b[1] = local * x * (w - 1);
    return 1;
}

/* Adds one collective's near bytes and steps and far ones to t[0..3]. */
static void stage_parts(const smoe_mesh *m, const smoe_axes *ax, double dpn, double bytes,
                        double t[4])
{
    double gl, nb, fb, fs;
    int64_t n;
    sim_stage_far(m, ax, dpn, bytes, &n, &gl, &nb, &fb, &fs);
    if (nb > 0) {
        t[0] += nb;
        t[1] += gl - 1;
    }
    t[2] += fb;
    t[3] += fs;
}

/* Both parts of a gather's stages: t[0..1] the near bytes and steps (as
 * coll_at counts them on cpu profiles), t[2..3] the far ones. */
static void gather_parts(const smoe_gather *g, const smoe_mesh *m, double dpn, double scale,
                         double t[4])
{
    double local = (double)g->bytes_in * scale;
    t[0] = t[1] = t[2] = t[3] = 0;
    for (int d = 0; d < g->rank; d++) {
        const smoe_axes *ax = &g->axes[d];
        if (!ax->n)
            continue;
        smoe_levels lv;
        smoe_part_mesh pm;
        double b[2];
        if (sim_stage_levels(m, ax, local, &lv, &pm, b)) {
            stage_parts(&pm.mesh, &lv.across, dpn, b[0], t);
            stage_parts(&pm.mesh, &lv.within, dpn, b[1], t);
        } else {
            stage_parts(m, ax, dpn, b[0], t);
        }
        local *= (double)smoe_axes_size(ax, m);
    }
}

void smoe_sim_gather_far(const smoe_gather *g, const smoe_mesh *m, double devices_per_node,
                         double scale, double *far_bytes, double *far_steps)
{
    double t[4];
    gather_parts(g, m, devices_per_node, scale, t);
    *far_bytes = t[2];
    *far_steps = t[3];
}

void smoe_sim_gather_near(const smoe_gather *g, const smoe_mesh *m, double devices_per_node,
                          double scale, double *near_bytes, double *near_steps)
{
    double t[4];
    gather_parts(g, m, devices_per_node, scale, t);
    *near_bytes = t[0];
    *near_steps = t[1];
}
