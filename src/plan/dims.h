/* Internal to the plan module: model dimensions read from a config. */
#ifndef SMOE_PLAN_DIMS_H
#define SMOE_PLAN_DIMS_H

#include "smoe/config.h"

#include "smoe/plan.h"

typedef smoe_dims model_dims;

SMOE_MUST_CHECK
smoe_status plan_read_dims(const smoe_config *c, model_dims *d, smoe_err *err);

#endif
