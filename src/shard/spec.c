/* PartitionSpec entries: equality, sizes on a mesh, the size-1 drop of
 * remove_size_one_mesh_axis, and text forms. */
#include "smoe/shard.h"

#include <stdio.h>
#include <string.h>

int smoe_axes_has(const smoe_axes *e, const char *axis)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->ax[i], axis) == 0)
            return 1;
    return 0;
}

int smoe_axes_equal(const smoe_axes *a, const smoe_axes *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->ax[i], b->ax[i]) != 0)
            return 0;
    return 1;
}

int64_t smoe_axes_size(const smoe_axes *e, const smoe_mesh *m)
{
    int64_t p = 1;
    for (int i = 0; i < e->n; i++)
        p *= smoe_mesh_axis_size(m, e->ax[i]);
    return p;
}

smoe_axes smoe_axes_live(const smoe_axes *e, const smoe_mesh *m)
{
    smoe_axes out;
    out.n = 0;
    for (int i = 0; i < e->n; i++)
        if (smoe_mesh_axis_size(m, e->ax[i]) > 1)
            out.ax[out.n++] = e->ax[i];
    return out;
}

void smoe_pspec_drop_size1(const smoe_pspec *in, const smoe_mesh *m,
                           smoe_pspec *out)
{
    smoe_pspec tmp;
    tmp.rank = in->rank;
    for (int d = 0; d < in->rank; d++)
        tmp.dim[d] = smoe_axes_live(&in->dim[d], m);
    *out = tmp;
}

const char *smoe_axes_format(const smoe_axes *e, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    if (e->n == 0) {
        snprintf(buf, n, "-");
        return buf;
    }
    if (e->n == 1) {
        snprintf(buf, n, "%s", e->ax[0]);
        return buf;
    }
    for (int i = 0; i < e->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "(", e->ax[i]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
    return buf;
}

const char *smoe_pspec_format(const smoe_pspec *s, int python, char *buf,
                              size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    if (python)
        k += (size_t)snprintf(buf, n, "P(");
    for (int d = 0; d < s->rank && k < n; d++) {
        const smoe_axes *e = &s->dim[d];
        if (d)
            k += (size_t)snprintf(buf + k, n - k, python ? ", " : " ");
        if (k >= n)
            break;
        if (!python) {
            char tmp[256];
            k += (size_t)snprintf(buf + k, n - k, "%s",
                                  smoe_axes_format(e, tmp, sizeof tmp));
        } else if (e->n == 0) {
            k += (size_t)snprintf(buf + k, n - k, "None");
        } else if (e->n == 1) {
            k += (size_t)snprintf(buf + k, n - k, "'%s'", e->ax[0]);
        } else {
            for (int i = 0; i < e->n && k < n; i++)
                k += (size_t)snprintf(buf + k, n - k, "%s'%s'", i ? ", " : "(",
                                      e->ax[i]);
            if (k < n)
                k += (size_t)snprintf(buf + k, n - k, ")");
        }
    }
    if (python && k < n)
        k += (size_t)snprintf(buf + k, n - k, s->rank == 1 ? ",)" : ")");
    return buf;
}
