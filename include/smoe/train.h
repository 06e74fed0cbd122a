/* smoe train: the step loop of sharded MoE training. Weights live sharded
 * exactly as the plan says (one slab per state class: parameters,
 * gradients, AdamW moments); each step gathers every weight by its plan
 * (one nonblocking all-gather per gathered dim over its joint axes, issued
 * `prefetch_depth` layers ahead, into buffers of a bounded pool), runs the
 * model layer by layer, re-gathers in reverse for the backward, reduce-
 * scatters gradients back to the shards, all-reduces them over the axes a
 * weight is replicated on, and applies AdamW to the local shards.
 *
 * Data: byte-level tokens of a text file; every device holds a distinct
 * slice of the global batch (the batch dim is sharded over every mesh axis
 * of size > 1, in mesh order), sequence i of step s starts at a position
 * drawn from (seed, s, i), so runs on different meshes see the same global
 * batch. Initialisation is a function of (seed, weight, element) only, so
 * every mesh starts from the same parameters. */
#ifndef SMOE_TRAIN_H
#define SMOE_TRAIN_H

#include <stdint.h>

#include "smoe/config.h"
#include "smoe/kernels.h"
#include "smoe/model.h"
#include "smoe/plan.h"
#include "smoe/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smoe_train_step {
    int64_t step;
    double loss;            /* global mean cross-entropy + z-loss + load-balance loss
                               (MaxText's learning/loss) */
    double lr;              /* learning rate of this update (the schedule) */
    double grad_norm;       /* global norm of the raw gradient, before clipping */
    double aux_loss;        /* load-balance loss (mean over MoE layers) */
    double z_loss;          /* z-loss (global mean) */
    int mode;               /* index into smoe_train_opts.modes (0 with one mode) */
    double step_ms;         /* max over ranks */
    double exposed_gather_ms; /* time blocked on gathers (incl. residual), max over ranks */
    double residual_ms;     /* of which blocking residual gathers (legacy) */
    double a2a_ms;          /* expert all-to-alls, max over ranks */
    double compute_ms;      /* model kernels outside communication, max over ranks */
    double gather_ms;       /* gather ops from start to completion (busy), max over ranks */
    double reduce_wait_ms;  /* waiting for gradient reductions at the end */
    int64_t peak_gathered_bytes; /* max over ranks */
} smoe_train_step;

/* A schedule a step can run: prefetch depth and plan. */
typedef struct smoe_train_mode {
    int prefetch_depth;     /* 0: gather just before use */
    int legacy;             /* pre-fix plan: residual co-axes gathered at use */
} smoe_train_mode;
#define SMOE_TRAIN_MAX_MODES 4

typedef struct smoe_train_opts {
    int64_t steps;          /* >= 1 */
    uint64_t seed;
    const char *data_path;  /* text file, bytes are tokens */
    int prefetch_depth;     /* 0: gather just before use */
    int legacy;             /* pre-fix plan: residual co-axes gathered at use */
    /* interleaved measurement: with nmodes > 1 the schedules take turns
     * step by step (rounds of one step of each, the order rotating by one
     * every round: step s runs mode (s + s / nmodes) % nmodes) in one
     * training run; prefetch_depth and legacy are then ignored. The
     * schedules are numerically identical (bitwise, tested), so the run
     * trains exactly as a run of any one of them would. */
    int nmodes;
    smoe_train_mode modes[SMOE_TRAIN_MAX_MODES];
    int64_t max_memory;     /* bytes per rank, 0 = no limit */
    const char *trace_path; /* Chrome trace file (rank 0 writes), or NULL */
    const char *dump_path;  /* final parameters, canonical order, or NULL */
    /* checkpoints (see checkpoint.c): every ckpt_every steps (0: only at
     * the end) into ckpt_dir when set; resume: continue from the newest
     * complete checkpoint in ckpt_dir (any mesh: shards are re-cut) */
    const char *ckpt_dir;
    int64_t ckpt_every;
    int ckpt_keep;          /* keep the newest N checkpoints (0: all) */
    int resume;
    /* called on every rank after each step with the agreed record */
    void (*on_step)(void *ud, const smoe_train_step *rec);
    void *ud;
} smoe_train_opts;


typedef struct smoe_train_change {
    char *key, *from, *to;       /* a config key, its value in the checkpoint and now */
} smoe_train_change;

typedef struct smoe_train_result {
    int64_t first_step;          /* 0, or the step a resumed run started at */
    char resumed_from[4300];     /* the checkpoint directory, or "" */
    char resume_note[4600];      /* how the checkpoint was chosen, when not by LATEST */
    int nchanges;                /* config keys that differ from the checkpoint's */
    smoe_train_change *changes;
    int64_t nsteps;
    smoe_train_step *steps;      /* owned; smoe_train_result_free */
    double mean_step_ms, mean_exposed_gather_ms, mean_compute_ms, mean_gather_ms;
    double mean_a2a_ms, mean_residual_ms;
    int64_t peak_gathered_bytes;     /* gathered weights + gradient buffers of layers */
    int64_t peak_gathered_fwd_bytes; /* during the forward pass */
    int64_t peak_gathered_bwd_bytes; /* during the backward pass */
    int64_t layer_gathered_bytes;    /* largest layer's gathered weights */
    int64_t top_gathered_bytes;      /* embedding/head buffers (not layers) */
    int64_t peak_rss_bytes;          /* max over ranks */
    int64_t memory_estimate_bytes;   /* per rank, what --max-memory is checked against */
    int64_t params, tokens_per_step;
    double model_flops_per_step;     /* forward + backward, all ranks */
    char params_sha256[65];
    char recipe[640];                /* the MaxText recipe features in effect */
    smoe_blas_info blas;
} smoe_train_result;

/* A numeric MaxText key smoe train reads, and the values it accepts (any
 * other value is refused with the key's location before the first step). */
typedef struct smoe_train_key {
    const char *name;
    char type;          /* 'i' integer, 'f' float */
    double lo, hi;      /* the range (see flags) */
    unsigned flags;     /* open ends, float32 rounding, whole numbers (keys.c) */
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

/* Run the training on the rank set of rt (smoe_rt_set_mesh done with the
 * plan's mesh). Collective: every rank calls it with the same arguments.
 * Errors (bad data file, unsupported config, memory over max_memory) are
 * agreed across ranks before any step, so every rank returns the same
 * status; rank 0's err carries the message. */
SMOE_MUST_CHECK
smoe_status smoe_train_run(smoe_rt *rt, const smoe_config *cfg,
                           const smoe_plan *plan, const smoe_train_opts *o,
                           smoe_train_result *res, smoe_err *err);
void smoe_train_result_free(smoe_train_result *r);

/* Quartiles of one quantity over a set of steps. */
typedef struct smoe_train_stat {
    double median, p25, p75, mean, min, max;
} smoe_train_stat;
typedef struct smoe_train_summary {
    int64_t nsteps;              /* steps counted */
    smoe_train_stat step_ms, exposed_gather_ms, residual_ms, a2a_ms, compute_ms, gather_ms,
        reduce_wait_ms;
    int64_t peak_gathered_bytes;
    double last_loss;
} smoe_train_summary;
/* The steps of r that ran `mode` (-1: all), skipping the run's first
 * `skip` steps (warm-up). Quartiles by linear interpolation. */
void smoe_train_summarize(const smoe_train_result *r, int mode, int64_t skip,
                          smoe_train_summary *out);

/* The model configuration a smoe config describes (decoder_block deepseek,
 * MLA attention); SMOE_EINVAL with the key's location otherwise. */
SMOE_MUST_CHECK
smoe_status smoe_train_model_cfg(const smoe_config *cfg, const smoe_mesh *mesh,
                                 smoe_model_cfg *mc, smoe_err *err);

/* Measure this machine's cpu-mpi hardware profile with every rank busy at
 * once (as in training): matmul rates (64- and 512-wide), memory bandwidth,
 * per-kernel overhead, all-gather and all-to-all latency and bandwidth
 * over all ranks, the spread of the ranks' arrival at a collective entered
 * after a stretch of compute (sync_skew), and the
 * ratio of smoe's model kernels to the cost model's roofline for the
 * model of cfg at its training shape (compute_scale, as XLA's profile-
 * guided latency estimator measures op costs). Rank 0 writes the profile
 * (YAML, the keys of configs/hardware/ files) to `path`, or stdout when
 * NULL. Collective; the mesh of rt must not be set yet. */
SMOE_MUST_CHECK
smoe_status smoe_train_calibrate(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                                 const char *path, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
