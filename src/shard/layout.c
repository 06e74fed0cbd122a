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

void smoe_layout_copy(int rank, const int64_t shape[], const int64_t local[],
                      const int64_t offset[], size_t elem, void *global,
                      void *localbuf, int dir)
{
    /* Walk the local block row by row; the innermost dim is contiguous. */
    int64_t rows = 1, idx[SMOE_MAX_RANK];
    if (rank == 0) {
        if (dir == 0)
            memcpy(localbuf, global, elem);
        else
            memcpy(global, localbuf, elem);
        return;
    }
    for (int d = 0; d < rank - 1; d++) {
        rows *= local[d];
        idx[d] = 0;
    }
    size_t row_bytes = (size_t)local[rank - 1] * elem;
    unsigned char *g = global, *l = localbuf;
    for (int64_t r = 0; r < rows; r++) {
        int64_t goff = 0;
        for (int d = 0; d < rank - 1; d++)
            goff = goff * shape[d] + offset[d] + idx[d];
        goff = goff * shape[rank - 1] + offset[rank - 1];
        unsigned char *gp = g + (size_t)goff * elem;
        unsigned char *lp = l + (size_t)r * row_bytes;
        if (dir == 0)
            memcpy(lp, gp, row_bytes);
        else
            memcpy(gp, lp, row_bytes);
        for (int d = rank - 2; d >= 0; d--) {
            if (++idx[d] < local[d])
                break;
            idx[d] = 0;
        }
    }
}

void smoe_layout_copy_block(int rank, const int64_t shape[], const int64_t local[],
                            const int64_t offset[], size_t elem, const void *src, void *dst)
{
    int64_t rows = 1, idx[SMOE_MAX_RANK];
    if (rank == 0) {
        memcpy(dst, src, elem);
        return;
    }
    for (int d = 0; d < rank - 1; d++) {
        rows *= local[d];
        idx[d] = 0;
    }
    size_t row_bytes = (size_t)local[rank - 1] * elem;
    for (int64_t r = 0; r < rows; r++) {
        int64_t o = 0;
        for (int d = 0; d < rank - 1; d++)
            o = o * shape[d] + offset[d] + idx[d];
        o = o * shape[rank - 1] + offset[rank - 1];
        memcpy((unsigned char *)dst + (size_t)o * elem,
               (const unsigned char *)src + (size_t)o * elem, row_bytes);
        for (int d = rank - 2; d >= 0 && ++idx[d] == local[d]; d--)
            idx[d] = 0;
    }
}
