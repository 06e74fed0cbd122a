/* Logical names of older MaxText releases for the built-in enumeration.
 *
 * The enumeration writes today's logical axis names (embed_vocab,
 * embed_moe, mlp_moe). A base.yml of an older release has no rules for
 * them, and its model code used other names (embed, embed_no_exp, mlp):
 * planned as is, those weights would silently lose their sharding. The
 * renames are data, data/maxtext/logical_renames.tsv (compiled in): each
 * applies when the config's rules have (or lack: "!name") a rule of the
 * marker's name, which dates the rules to a release. */
#include "legacy_names.h"

#include <stdlib.h>
#include <string.h>

extern const char *const smoe_maxtext_renames[];
extern const size_t smoe_maxtext_renames_n;

static int has_rule(const smoe_rules *r, const char *name, size_t len)
{
    for (int i = 0; i < r->n; i++)
        if (strlen(r->r[i].name) == len && strncmp(r->r[i].name, name, len) == 0)
            return 1;
    return 0;
}

/* Column k of a tab-separated row: start and length. */
static const char *col(const char *row, int k, size_t *len)
{
    for (; k > 0 && row; k--)
        if ((row = strchr(row, '\t')))
            row++;
    if (row)
        *len = strcspn(row, "\t");
    return row;
}

smoe_status plan_legacy_names(smoe_arena *a, const smoe_rules *rules,
                              smoe_logical_entry *e, int n, int *renamed, smoe_err *err)
{
    *renamed = 0;
    for (size_t k = 0; k < smoe_maxtext_renames_n; k++) {
        const char *row = smoe_maxtext_renames[k];
        size_t lc, lo, lm, lw;
        const char *cur = col(row, 0, &lc), *old = col(row, 1, &lo);
        const char *marker = col(row, 2, &lm), *which = col(row, 3, &lw);
        if (!cur || !old || !marker || !which)
            return smoe_err_set(err, SMOE_EINVAL, "built-in rename table: bad row %zu", k + 1);
        int neg = lm > 0 && marker[0] == '!';
        if (has_rule(rules, marker + neg, lm - (size_t)neg) == neg)
            continue;
        const char *oldname = smoe_arena_strndup(a, old, lo);
        if (!oldname)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        for (int i = 0; i < n; i++) {
            int exp = 0;
            for (int d = 0; d < e[i].rank; d++)
                exp |= e[i].names[d] && strcmp(e[i].names[d], "exp") == 0;
            if ((lw == 3 && strncmp(which, "exp", 3) == 0 && !exp) ||
                (lw == 4 && strncmp(which, "!exp", 4) == 0 && exp))
                continue;
            for (int d = 0; d < e[i].rank; d++)
                if (e[i].names[d] && strlen(e[i].names[d]) == lc &&
                    strncmp(e[i].names[d], cur, lc) == 0) {
                    e[i].names[d] = oldname;
                    (*renamed)++;
                }
        }
    }
    return SMOE_OK;
}
