/* Internal to the plan module: older MaxText releases' logical names. */
#ifndef SMOE_PLAN_LEGACY_NAMES_H
#define SMOE_PLAN_LEGACY_NAMES_H

#include "smoe/plan.h"

/* Rewrite the built-in enumeration's logical names e[0..n) to those of the
 * release whose rules these are (data/maxtext/logical_renames.tsv); names
 * live in the arena. *renamed counts the rewritten dims. */
SMOE_MUST_CHECK
smoe_status plan_legacy_names(smoe_arena *a, const smoe_rules *rules,
                              smoe_logical_entry *e, int n, int *renamed, smoe_err *err);

#endif
