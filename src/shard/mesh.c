/* Device mesh: axis lookup, device coordinates (row-major, last axis
 * fastest, like MPI_Cart_create) and the -1 fill of MaxText's
 * fill_unspecified_mesh_axes. */
#include "smoe/shard.h"

#include <stdio.h>
#include <string.h>

int smoe_mesh_find(const smoe_mesh *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->name[i], name) == 0)
            return i;
    return -1;
}

smoe_status smoe_mesh_group(const smoe_mesh *m, const int64_t coords[], const smoe_axes *axes,
                            int64_t *color, int64_t *member, int64_t *size, smoe_err *err)
{
    *color = *member = 0;
    *size = 1;
    for (int k = 0; k < axes->n; k++) {
        int a = smoe_mesh_find(m, axes->ax[k]);
        if (a < 0)
            return smoe_err_set(err, SMOE_EINVAL, "axis '%s' is not in the mesh", axes->ax[k]);
        *member = *member * m->size[a] + coords[a];
        *size *= m->size[a];
    }
    for (int a = 0; a < m->n; a++)
        if (!smoe_axes_has(axes, m->name[a]))
            *color = *color * m->size[a] + coords[a];
    return SMOE_OK;
}

int64_t smoe_mesh_axis_size(const smoe_mesh *m, const char *name)
{
    int i = smoe_mesh_find(m, name);
    return i < 0 ? 1 : m->size[i];
}

int64_t smoe_mesh_devices(const smoe_mesh *m)
{
    int64_t p = 1;
    for (int i = 0; i < m->n; i++)
        p *= m->size[i];
    return p;
}

void smoe_mesh_coords(const smoe_mesh *m, int64_t rank, int64_t coords[])
{
    for (int i = m->n - 1; i >= 0; i--) {
        coords[i] = rank % m->size[i];
        rank /= m->size[i];
    }
}

int64_t smoe_mesh_rank_of(const smoe_mesh *m, const int64_t coords[])
{
    int64_t r = 0;
    for (int i = 0; i < m->n; i++)
        r = r * m->size[i] + coords[i];
    return r;
}

static int64_t dcn_part(const smoe_mesh *m, int i) { return m->dcn[i] > 1 ? m->dcn[i] : 1; }

int64_t smoe_mesh_slices(const smoe_mesh *m)
{
    int64_t p = 1;
    for (int i = 0; i < m->n; i++)
        p *= dcn_part(m, i);
    return p;
}

int smoe_mesh_slices_contiguous(const smoe_mesh *m)
{
    int seen_ici = 0;
    for (int i = 0; i < m->n; i++) {
        if (dcn_part(m, i) > 1 && seen_ici)
            return 0;
        seen_ici |= m->size[i] / dcn_part(m, i) > 1;
    }
    return 1;
}

smoe_status smoe_mesh_fill(int64_t vals[], int n, int64_t target,
                           const char *const labels[], const char *what,
                           int *bad, smoe_err *err)
{
    int unknown = -1;
    int dummy;
    if (!bad)
        bad = &dummy;
    *bad = -1;
    int64_t prod = 1;
    if (target < 1)
        return smoe_err_set(err, SMOE_EINVAL, "%s must be >= 1, got %lld",
                            what, (long long)target);
    for (int i = 0; i < n; i++) {
        if (vals[i] == -1) {
            *bad = i;
            if (unknown >= 0)
                return smoe_err_set(err, SMOE_EINVAL,
                                    "both %s and %s are -1; at most one "
                                    "parallelism value may be -1",
                                    labels[unknown], labels[i]);
            unknown = i;
        } else if (vals[i] < 1) {
            *bad = i;
            return smoe_err_set(err, SMOE_EINVAL,
                                "%s = %lld; a parallelism must be >= 1 or -1",
                                labels[i], (long long)vals[i]);
        } else {
            if (prod > INT64_MAX / vals[i])
                return smoe_err_set(err, SMOE_EINVAL,
                                    "the product of the parallelism values overflows");
            prod *= vals[i];
        }
    }
    *bad = -1; /* from here on the device count, not one value, is off */
    if (unknown >= 0) {
        if (target % prod != 0)
            return smoe_err_set(err, SMOE_EINVAL,
                                "cannot fill %s = -1: %s (%lld) is not a "
                                "multiple of the product of the others (%lld)",
                                labels[unknown], what, (long long)target,
                                (long long)prod);
        vals[unknown] = target / prod;
        prod = target;
    }
    if (prod != target) {
        char list[512];
        size_t k = 0;
        list[0] = 0;
        for (int i = 0; i < n && k < sizeof list - 64; i++)
            if (vals[i] != 1)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%s=%lld",
                                      k ? ", " : "", labels[i],
                                      (long long)vals[i]);
        return smoe_err_set(err, SMOE_EINVAL,
                            "the mesh has %lld devices (%s) but %s is %lld",
                            (long long)prod, k ? list : "all axes 1", what,
                            (long long)target);
    }
    return SMOE_OK;
}
