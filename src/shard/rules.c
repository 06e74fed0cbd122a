/* Flax's logical_to_mesh_axes, rule-major. See the header for the exact
 * semantics; the golden MaxText dumps are its oracle. */
#include "smoe/shard.h"

#include <string.h>

smoe_status smoe_shard_resolve(const smoe_rules *rules, int rank,
                               const char *const names[], smoe_pspec *out,
                               const char *where, smoe_err *err)
{
    int assigned[SMOE_MAX_RANK];
    if (rank < 0 || rank > SMOE_MAX_RANK)
        return smoe_err_set(err, SMOE_EINVAL, "%s%stensor rank %d exceeds %d",
                            where ? where : "", where ? ": " : "", rank,
                            SMOE_MAX_RANK);
    for (int i = 0; i < rank; i++) {
        assigned[i] = 0;
        out->dim[i].n = 0;
        if (!names[i])
            continue;
        for (int j = 0; j < i; j++)
            if (names[j] && strcmp(names[i], names[j]) == 0)
                return smoe_err_set(err, SMOE_EINVAL,
                                    "%s%slogical axis '%s' is used twice "
                                    "(dims %d and %d)",
                                    where ? where : "", where ? ": " : "",
                                    names[i], j, i);
    }
    out->rank = rank;
    for (int r = 0; rules && r < rules->n; r++) {
        const smoe_rule *rule = &rules->r[r];
        int pos = -1;
        for (int i = 0; i < rank; i++)
            if (names[i] && strcmp(names[i], rule->name) == 0) {
                pos = i;
                break;
            }
        if (pos < 0 || assigned[pos])
            continue;
        int clash = 0;
        for (int k = 0; k < rule->value.n && !clash; k++)
            for (int i = 0; i < rank && !clash; i++)
                if (assigned[i] && smoe_axes_has(&out->dim[i], rule->value.ax[k]))
                    clash = 1;
        if (clash)
            continue;
        out->dim[pos] = rule->value;
        assigned[pos] = 1;
    }
    return SMOE_OK;
}
