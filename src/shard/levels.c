/* Axis parts and the two levels of a group across slices.
 *
 * On a mesh with slices (MaxText's dcn_* sizes), axis i of size ici * dcn
 * gives the device of slice s and local index l the coordinate
 * dcn_i(s) * ici + ici_i(l) (smoe_mesh_slices_contiguous), so an axis
 * splits into two parts: "a@dcn", the coordinate / ici (size dcn), which
 * only slices differ in, and "a@ici", the coordinate % ici (size ici),
 * which only devices of one slice differ in. One step of a@dcn moves ici
 * steps of a; one step of a@ici moves one.
 *
 * A group over axes S whose members span slices and share them too runs in
 * two levels: across slices over the dcn parts (each member exchanges its
 * own part with its counterparts in the other slices: (X - 1) parts over
 * the slow network, X the slices the group spans), then within the slice
 * over the ici parts ((W - 1) X parts, all local). One level sends
 * (X - 1) W parts across slices, W times as many. */
#include "smoe/shard.h"

#include <stdio.h>
#include <string.h>

static int64_t ici_of(const smoe_mesh *m, int i)
{
    int64_t d = m->dcn[i] > 1 ? m->dcn[i] : 1;
    return m->size[i] / d;
}

int smoe_mesh_part_find(const smoe_mesh *m, const char *name, smoe_axis_part *part)
{
    const char *at = strchr(name, '@');
    *part = SMOE_PART_WHOLE;
    if (!at)
        return smoe_mesh_find(m, name);
    if (strcmp(at, "@dcn") == 0)
        *part = SMOE_PART_DCN;
    else if (strcmp(at, "@ici") == 0)
        *part = SMOE_PART_ICI;
    else
        return -1;
    for (int i = 0; i < m->n; i++)
        if (strlen(m->name[i]) == (size_t)(at - name) &&
            strncmp(m->name[i], name, (size_t)(at - name)) == 0)
            return i;
    return -1;
}

int64_t smoe_mesh_part_size(const smoe_mesh *m, int i, smoe_axis_part p)
{
    return p == SMOE_PART_WHOLE ? m->size[i] : p == SMOE_PART_ICI ? ici_of(m, i)
                                                                  : m->size[i] / ici_of(m, i);
}

int64_t smoe_mesh_part_coord(const smoe_mesh *m, int i, smoe_axis_part p, int64_t coord)
{
    return p == SMOE_PART_WHOLE ? coord : p == SMOE_PART_ICI ? coord % ici_of(m, i)
                                                             : coord / ici_of(m, i);
}

int64_t smoe_mesh_part_scale(const smoe_mesh *m, int i, smoe_axis_part p)
{
    return p == SMOE_PART_DCN ? ici_of(m, i) : 1;
}

int smoe_axes_has_part(const smoe_mesh *m, const smoe_axes *set, int axis, smoe_axis_part p)
{
    for (int k = 0; k < set->n; k++) {
        smoe_axis_part q;
        if (smoe_mesh_part_find(m, set->ax[k], &q) == axis &&
            (q == SMOE_PART_WHOLE || q == p))
            return 1;
    }
    return 0;
}

/* parts[] of S's axes whose part p has more than one member, named into
 * names (the axis itself where the other part is 1) */
static void level_of(const smoe_mesh *m, const smoe_axes *S, smoe_axis_part p, smoe_axes *out,
                     char names[][SMOE_PART_NAME])
{
    out->n = 0;
    for (int k = 0; k < S->n; k++) {
        int i = smoe_mesh_find(m, S->ax[k]);
        if (i < 0 || smoe_mesh_part_size(m, i, p) <= 1)
            continue;
        int whole = smoe_mesh_part_size(m, i, p) == m->size[i];
        snprintf(names[out->n], SMOE_PART_NAME, "%s%s", m->name[i],
                 whole ? "" : p == SMOE_PART_DCN ? "@dcn" : "@ici");
        out->ax[out->n] = names[out->n];
        out->n++;
    }
}

int smoe_axes_levels(const smoe_mesh *m, const smoe_axes *S, smoe_levels *lv)
{
    level_of(m, S, SMOE_PART_DCN, &lv->across, lv->across_names);
    level_of(m, S, SMOE_PART_ICI, &lv->within, lv->within_names);
    return lv->across.n > 0 && lv->within.n > 0;
}

int64_t smoe_axes_part_members(const smoe_mesh *m, const smoe_axes *parts)
{
    int64_t g = 1;
    for (int k = 0; k < parts->n; k++) {
        smoe_axis_part p;
        int i = smoe_mesh_part_find(m, parts->ax[k], &p);
        g *= i < 0 ? 1 : smoe_mesh_part_size(m, i, p);
    }
    return g;
}

void smoe_mesh_parts(const smoe_mesh *m, smoe_part_mesh *pm)
{
    smoe_mesh *o = &pm->mesh;
    o->n = 0;
    for (int i = 0; i < m->n && o->n < SMOE_MAX_AXES; i++) {
        int64_t nd = smoe_mesh_part_size(m, i, SMOE_PART_DCN);
        int64_t ni = smoe_mesh_part_size(m, i, SMOE_PART_ICI);
        if (m->size[i] <= 1)
            continue;
        int two = nd > 1 && ni > 1;
        for (int p = 0; p < 2 && o->n < SMOE_MAX_AXES; p++) {
            int64_t sz = p ? ni : nd;
            if (sz <= 1)
                continue;
            snprintf(pm->names[o->n], SMOE_PART_NAME, "%s%s", m->name[i],
                     !two ? "" : p ? "@ici" : "@dcn");
            o->name[o->n] = pm->names[o->n];
            o->size[o->n] = sz;
            o->dcn[o->n] = p ? 1 : sz;
            o->n++;
        }
    }
}

int64_t smoe_levels_member(const smoe_mesh *m, const smoe_axes *S, int64_t x, int64_t w)
{
    int64_t xc[SMOE_MAX_ENTRY], wc[SMOE_MAX_ENTRY], member = 0;
    for (int i = S->n - 1; i >= 0; i--) { /* each axis's part coordinates */
        int a = smoe_mesh_find(m, S->ax[i]);
        int64_t nd = a < 0 ? 1 : smoe_mesh_part_size(m, a, SMOE_PART_DCN);
        int64_t ni = a < 0 ? 1 : smoe_mesh_part_size(m, a, SMOE_PART_ICI);
        xc[i] = x % nd, x /= nd;
        wc[i] = w % ni, w /= ni;
    }
    for (int i = 0; i < S->n; i++) {
        int a = smoe_mesh_find(m, S->ax[i]);
        if (a >= 0)
            member = member * m->size[a] +
                     xc[i] * smoe_mesh_part_size(m, a, SMOE_PART_ICI) + wc[i];
    }
    return member;
}
