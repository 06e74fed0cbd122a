/* What a gather stage moves, shared by the engines that move it in pieces
 * (the in-process ranks, NCCL's): the blocks member m of the stage's group
 * holds before the stage (comm.h: smoe_comm_stage_walk). */
#include "smoe/comm.h"

#include <string.h>

static int index_in(const smoe_axes *e, const char *a)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->ax[i], a) == 0)
            return i;
    return -1;
}

static int64_t coord_of(const smoe_mesh *mesh, const int64_t coords[], const char *a)
{
    int i = smoe_mesh_find(mesh, a);
    return i < 0 ? 0 : coords[i];
}

smoe_status smoe_comm_stages(const smoe_gather_exec *x, smoe_comm_stage_fn fn, void *ud,
                             smoe_err *err)
{
    smoe_axes done[SMOE_MAX_RANK];
    memset(done, 0, sizeof done);
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < x->rank; d++) {
            const smoe_axes *S = pass == 0 ? &x->prefetch[d] : &x->at_use[d];
            if (S->n == 0)
                continue;
            smoe_status s = fn(ud, pass, d, S, done, err);
            if (s)
                return s;
            for (int i = 0; i < S->n; i++)
                done[d].ax[done[d].n++] = S->ax[i];
        }
    return SMOE_OK;
}

int64_t smoe_comm_stage_walk(const smoe_gather_geom *geo, const smoe_mesh *mesh,
                             const int64_t coords[], int dim, const smoe_axes *S,
                             const smoe_axes done[], int64_t rec, int64_t m,
                             smoe_comm_block_fn fn, void *ud)
{
    int64_t sc[SMOE_MAX_ENTRY], combos = 1, mm = m;
    for (int k = S->n - 1; k >= 0; k--) {
        int64_t n = smoe_mesh_axis_size(mesh, S->ax[k]);
        sc[k] = mm % n;
        mm /= n;
    }
    for (int j = 0; j < geo->rank; j++)
        combos *= smoe_axes_size(&done[j], mesh);
    for (int64_t c = 0; c < combos; c++) {
        int64_t rest = c, off[SMOE_MAX_RANK];
        for (int j = geo->rank - 1; j >= 0; j--) {
            off[j] = 0;
            for (int k = geo->A[j].n - 1; k >= 0; k--) {
                const char *a = geo->A[j].ax[k];
                int64_t v, n = smoe_mesh_axis_size(mesh, a);
                int s = j == dim ? index_in(S, a) : -1;
                if (smoe_axes_has(&done[j], a)) {
                    v = rest % n;
                    rest /= n;
                } else {
                    v = s >= 0 ? sc[s] : coord_of(mesh, coords, a);
                }
                off[j] += v * smoe_gather_geom_stride(geo, mesh, j, k);
            }
        }
        off[geo->rank - 1] /= rec;
        if (fn)
            fn(ud, c, off);
    }
    return combos;
}
