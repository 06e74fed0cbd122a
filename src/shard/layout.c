/* Layout: which block of a global tensor a device holds, and copying blocks
 * in and out of a global row-major buffer. The block order on a dim is the
 * tiled all-gather order: mixed radix over the entry's axes, first axis
 * most significant. */
#include "smoe/shard.h"

#include <string.h>

int64_t smoe_axes_block(const smoe_axes *e, const smoe_mesh *m,
                        const int64_t coords[])
{
    int64_t b = 0;
    for (int i = 0; i < e->n; i++) {
        int a = smoe_mesh_find(m, e->ax[i]);
        int64_t size = a < 0 ? 1 : m->size[a];
        int64_t c = a < 0 ? 0 : coords[a];
        b = b * size + c;
    }
    return b;
}

smoe_status smoe_layout_local(const smoe_pspec *spec, const int64_t shape[],
                              const smoe_mesh *m, const int64_t coords[],
                              int64_t local[], int64_t offset[],
                              smoe_err *err)
{
    for (int d = 0; d < spec->rank; d++) {
        int64_t nb = smoe_axes_size(&spec->dim[d], m);
        if (shape[d] % nb != 0) {
            char tmp[256];
            return smoe_err_set(err, SMOE_EINVAL,
                                "dim %d of size %lld is not divisible by the "
                                "%lld shards of %s",
                                d, (long long)shape[d], (long long)nb,
                                smoe_axes_format(&spec->dim[d], tmp, sizeof tmp));
        }
        local[d] = shape[d] / nb;
        offset[d] = smoe_axes_block(&spec->dim[d], m, coords) * local[d];
    }
    return SMOE_OK;
}

void smoe_layout_planes(int rank, const int64_t shape[], const int64_t local[],
                        const int64_t offset[], size_t elem, smoe_layout_plane_fn fn, void *ud)
{
    smoe_layout_plane p = { 0, 0, 1, elem, elem, elem };
    if (rank == 0) {
        fn(ud, &p);
        return;
    }
    /* the last two dims make the plane; the dims before it are walked */
    int outer = rank >= 2 ? rank - 2 : 0;
    int64_t planes = 1, idx[SMOE_MAX_RANK];
    for (int d = 0; d < outer; d++) {
        planes *= local[d];
        idx[d] = 0;
    }
    p.width = (size_t)local[rank - 1] * elem;
    p.gpitch = (size_t)shape[rank - 1] * elem;
    p.lpitch = p.width;
    p.height = rank >= 2 ? (size_t)local[rank - 2] : 1;
    for (int64_t k = 0; k < planes; k++) {
        int64_t g = 0;
        for (int d = 0; d < outer; d++)
            g = g * shape[d] + offset[d] + idx[d];
        if (rank >= 2)
            g = g * shape[rank - 2] + offset[rank - 2];
        g = g * shape[rank - 1] + offset[rank - 1];
        p.goff = (size_t)g * elem;
        p.loff = (size_t)k * p.height * p.width;
        fn(ud, &p);
        for (int d = outer - 1; d >= 0 && ++idx[d] == local[d]; d--)
            idx[d] = 0;
    }
}

typedef struct copy_job {
    unsigned char *g, *l;
    const unsigned char *src;
    int dir; /* 0: global -> local, 1: local -> global, 2: block to block */
} copy_job;

static void copy_plane(void *ud, const smoe_layout_plane *p)
{
    const copy_job *j = ud;
    for (size_t r = 0; r < p->height; r++) {
        size_t go = p->goff + r * p->gpitch, lo = p->loff + r * p->lpitch;
        if (j->dir == 0)
            memcpy(j->l + lo, j->g + go, p->width);
        else if (j->dir == 1)
            memcpy(j->g + go, j->l + lo, p->width);
        else
            memcpy(j->g + go, j->src + go, p->width);
    }
}

void smoe_layout_copy(int rank, const int64_t shape[], const int64_t local[],
                      const int64_t offset[], size_t elem, void *global,
                      void *localbuf, int dir)
{
    copy_job j = { global, localbuf, NULL, dir ? 1 : 0 };
    smoe_layout_planes(rank, shape, local, offset, elem, copy_plane, &j);
}

void smoe_layout_copy_block(int rank, const int64_t shape[], const int64_t local[],
                            const int64_t offset[], size_t elem, const void *src, void *dst)
{
    copy_job j = { dst, NULL, src, 2 };
    smoe_layout_planes(rank, shape, local, offset, elem, copy_plane, &j);
}
