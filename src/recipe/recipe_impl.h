/* Internal to the recipe module. */
#ifndef SMOE_RECIPE_IMPL_H
#define SMOE_RECIPE_IMPL_H

#include "smoe/plan.h"
#include "smoe/recipe.h"

/* keys.c: every numeric key smoe train reads, read and range-checked
 * (SMOE_EINVAL with the key's location and the accepted values) */
const smoe_train_key *rc_key_find(const char *name);
SMOE_MUST_CHECK
smoe_status rc_key_int(const smoe_config *c, const char *key, int64_t *out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status rc_key_float(const smoe_config *c, const char *key, double *out, smoe_err *err);
/* An integer key already read elsewhere (the model dimensions, read once by
 * the plan: smoe_plan_dims) checked against smoe train's range: v is the
 * value read; an absent key gets the config's own error. */
SMOE_MUST_CHECK
smoe_status rc_key_check_int(const smoe_config *c, const char *key, int64_t v, smoe_err *err);
/* The refusal of `key` (its rule from the table), `got` the value as text. */
SMOE_MUST_CHECK
smoe_status rc_key_refuse(const smoe_config *c, const char *key, const char *got,
                          smoe_err *err);

/* The model-side keys: RoPE / YaRN, MLA softmax scale, router, losses. */
SMOE_MUST_CHECK
smoe_status rc_model_recipe(const smoe_config *cfg, smoe_model_cfg *mc, smoe_err *err);
/* recipe_keys.c: SMOE_EINVAL naming the first MaxText key set to a value
 * smoe train does not implement, and the value(s) it does. */
SMOE_MUST_CHECK
smoe_status rc_refuse_keys(const smoe_config *cfg, smoe_err *err);

#endif
