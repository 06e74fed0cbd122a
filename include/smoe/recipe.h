/* MaxText's training recipe as smoe train applies it: the numeric keys it
 * reads and their accepted ranges, the model configuration and
 * hyperparameters a config describes, the learning-rate schedule,
 * clipping and weight-decay mask, the keys it refuses (they would change
 * the numbers) and those it reads and does not apply (they would not).
 * Pure functions of a config: no communicator, no state. */
#ifndef SMOE_RECIPE_H
#define SMOE_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/config.h"
#include "smoe/core.h"
#include "smoe/model.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A MaxText key smoe train reads and does not apply (smoe_train_unapplied_keys). */
typedef struct smoe_train_unapplied {
    const char *key;             /* static storage */
    char value[64];              /* its value in the config, YAML flow text (cut to fit) */
    const char *reason;          /* static storage: what MaxText would do, what smoe train does */
} smoe_train_unapplied;
#define SMOE_TRAIN_MAX_UNAPPLIED 128

/* A numeric MaxText key smoe train reads, and the values it accepts (any
 * other value is refused with the key's location before the first step). */
typedef struct smoe_train_key {
    const char *name;
    char type;          /* 'i' integer, 'f' float */
    double lo, hi;      /* the range (see flags) */
    unsigned flags;     /* open ends, float32 rounding, whole numbers (src/recipe/keys.c) */
    unsigned kind;      /* SMOE_TRAIN_KEY_SIZE: a model dimension */
    const char *rule;   /* the accepted values in words */
} smoe_train_key;
#define SMOE_TRAIN_KEY_SIZE 1u
/* The table of those keys (static storage); *n gets its length. */
const smoe_train_key *smoe_train_keys(int *n);
/* Every key of the table that cfg sets, range-checked (SMOE_EINVAL naming
 * the key and its location): before anything is built from them. */
SMOE_MUST_CHECK
smoe_status smoe_train_check_keys(const smoe_config *cfg, smoe_err *err);

/* The MaxText keys cfg sets to a value smoe train does not apply, in the
 * order of its table (src/recipe/recipe_keys.c), at most cap of them into
 * out; returns how many there are (never more than SMOE_TRAIN_MAX_UNAPPLIED). Each asks
 * for something that leaves the numbers of a step as they are (a kernel,
 * remat, memory or placement choice) or that smoe train takes from
 * elsewhere (the data, the run's length, the initialisation, checkpoints);
 * a key that would change the numbers is refused instead (smoe_train_run's
 * checks). A key absent, null or at MaxText's default asks nothing and is
 * not listed. With slices > 1 (the run's mesh, smoe_mesh_slices) the
 * dcn_* sizes are applied, and num_slices where it equals slices. Pure;
 * out's strings are static or inside out. */
int smoe_train_unapplied_keys(const smoe_config *cfg, int64_t slices, smoe_train_unapplied *out,
                              int cap);

/* The model configuration a smoe config describes (decoder_block deepseek,
 * MLA attention); SMOE_EINVAL with the key's location otherwise. */
SMOE_MUST_CHECK
smoe_status smoe_train_model_cfg(const smoe_config *cfg, const smoe_mesh *mesh,
                                 smoe_model_cfg *mc, smoe_err *err);

/* MaxText's training recipe: schedule, clipping, optimizer
 * extras, bias update. */
#define SMOE_RECIPE_MAX_MASK 16
typedef struct smoe_recipe {
    int legacy;             /* cosine_learning_rate_final_fraction: MaxText's
                               schedule before e886dd212 */
    int wsd, wsd_linear;    /* lr_schedule_type wsd, wsd_decay_style linear */
    double lr, final_frac, warmup_frac, wsd_frac;
    int64_t sched_steps;    /* learning_rate_schedule_steps (-1 resolved) */
    int64_t steps;          /* the run's steps (--steps) */
    double clip;            /* gradient_clipping_threshold; <= 0: no clipping */
    double eps_root;        /* adam_eps_root */
    int nmask;              /* adamw_mask patterns (point into the config) */
    const char *mask[SMOE_RECIPE_MAX_MASK];
    double bias_rate;       /* routed_bias_update_rate */
} smoe_recipe;

typedef struct smoe_recipe_hparams {
    double lr, b1, b2, eps, wd;
    int64_t batch, seq;
    smoe_recipe rc;
    int abort_on_nan, abort_on_inf; /* MaxText's abort_on_nan_loss / abort_on_inf_loss */
} smoe_recipe_hparams;

/* The hyperparameters of a config (the recipe not read: smoe_recipe_read). */
SMOE_MUST_CHECK
smoe_status smoe_recipe_read_hparams(const smoe_config *cfg, smoe_recipe_hparams *hp,
                                     smoe_err *err);

/* The recipe for a run of `steps` steps (also refuses the keys smoe train
 * does not implement, with the key's location). */
SMOE_MUST_CHECK
smoe_status smoe_recipe_read(const smoe_config *cfg, int64_t steps, smoe_recipe *r,
                             smoe_err *err);
/* The learning rate of the update with 0-based count `count` (MaxText's
 * schedule is evaluated at the optimizer's update count). */
float smoe_recipe_lr_at(const smoe_recipe *r, int64_t count);
/* Does the parameter at `path` ("decoder/...") decay (adamw_mask)? */
int smoe_recipe_decays(const smoe_recipe *r, const char *path);
/* How the MoE layers of mc exchange their tokens over the expert axis:
 * "all-to-all", "ring (all-gather, reduce-scatter)" (use_ring_of_experts),
 * or "local (expert axis 1)". */
const char *smoe_recipe_exchange(const smoe_model_cfg *mc);
/* One line saying which recipe features are active. */
void smoe_recipe_describe(const smoe_recipe_hparams *hp, const smoe_model_cfg *mc, char *buf,
                          size_t n);

#ifdef __cplusplus
}
#endif
#endif
