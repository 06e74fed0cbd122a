/* smoe train: the step loop of sharded MoE training. Weights live sharded
 * exactly as the plan says (one slab per state class: parameters,
 * gradients, AdamW moments); each step gathers every weight by its plan
 * (one nonblocking all-gather per gathered dim over its joint axes, issued
 * as the run's smoe_schedule says, into buffers of a bounded pool, under
 * the schedule's memory budget when it has one), runs the
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

#include "smoe/ckpt.h"
#include "smoe/config.h"
#include "smoe/kernels.h"
#include "smoe/model.h"
#include "smoe/comm.h"
#include "smoe/plan.h"
#include "smoe/recipe.h"
#include "smoe/sched.h"

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
    int mode;               /* index into smoe_train_opts.schedules (the one it ran) */
    double step_ms;         /* max over ranks */
    double exposed_gather_ms; /* time blocked on gathers (incl. residual), max over ranks */
    double residual_ms;     /* of which blocking residual gathers (legacy) */
    double a2a_ms;          /* expert all-to-alls, max over ranks */
    double compute_ms;      /* model kernels outside communication, max over ranks */
    double gather_ms;       /* gather ops from start to completion (busy), max over ranks */
    double reduce_wait_ms;  /* waiting for gradient reductions at the end */
    int64_t peak_gathered_bytes; /* max over ranks */
    int64_t peak_tracked_bytes;  /* every tracked class at the step's peak, max over ranks */
    int64_t budget_overruns;     /* gathers issued past --hbm-budget (0 when it held) */
    int64_t gathers_at_use;      /* layer gathers not yet issued when their layer was
                                  * about to run (the compute then waits), max over ranks */
    int64_t gather_bytes;        /* received by the rank's weight gathers in the step
                                    (as moved: compressed records), max over ranks */
    int64_t host_bytes;          /* sent to ranks on the rank's own host, and */
    int64_t link_bytes;          /* to ranks on other hosts, by the step's gathers,
                                    reductions and expert exchange, counted as
                                    comm.h's smoe_comm_stats says; max over ranks */
    double compute_cpu_ms;  /* the training threads' CPU time inside the model calls
                               (compute and all-to-alls), summed over ranks */
    double cpu_ms;          /* CPU time of the ranks' processes over the step (every
                               thread: training, progress, MPI's), summed over ranks */
    double sys_ms;          /* of which kernel time (system calls: the transport's
                               sockets, sleeps), summed over ranks */
    double train_cpu_ms;    /* the training threads' CPU time over the step, summed
                               over ranks (cpu_ms less this: the other threads) */
    /* on a device's kernel table (opts.kops not synchronous; 0 otherwise),
     * by stamps on the model's stream: from the step's start to its end,
     * and the kernels of the model calls (compute_ms's calls; waits the
     * stream makes inside a call counted in); max over ranks */
    double device_step_ms, device_compute_ms;
} smoe_train_step;

/* Memory smoe train tracks per rank, by class (as smoe sim counts it). */
typedef struct smoe_train_mem {
    int64_t params, grads, optimizer; /* the slabs */
    int64_t gathered;                 /* top-level buffers + gathered layers and their
                                         gradients in use at the peak */
    int64_t activations;              /* the model's slab, routed-row stores, residuals */
    int64_t comm;                     /* communication buffers (none: in place) */
} smoe_train_mem;

#define SMOE_TRAIN_MAX_SCHEDULES 8

typedef struct smoe_train_opts {
    int64_t steps;          /* >= 1 */
    uint64_t seed;
    const char *data_path;  /* text file, bytes are tokens */
    /* the prefetch schedules the steps run (sched.h: smoe_schedule_for_plan
     * for a depth, smoe_schedule_for_budget, or a file of smoe sim
     * --schedule-out; whole weights; each carries its plan, `legacy`, and
     * its memory budget; not owned, they must outlive the trainer), 1 to
     * SMOE_TRAIN_MAX_SCHEDULES. With more than one they take turns step by
     * step (rounds of one step of each, the order rotating by one every
     * round: step s runs schedule (s + s / n) % n) in one training run, for
     * interleaved measurement. The schedules are numerically identical
     * (bitwise, tested), so the run trains exactly as a run of any one of
     * them would. */
    const smoe_schedule *const *schedules;
    int nschedules;
    int64_t max_memory;     /* bytes per rank, 0 = no limit */
    /* the gradient reductions' dtype (dtype.h: SMOE_DT_FP32 = 0, or
     * SMOE_DT_BF16: summed in fp32, rounded to bf16 at each step, expanded
     * into the fp32 shard); the weight gathers' dtype is the plan's
     * (smoe_plan_set_wire) */
    int reduce_dtype;
    /* the file of the first schedule (smoe sim --schedule-out), named in
     * errors when it does not fit the model (may be NULL) */
    const char *schedule_name;
    const char *trace_path; /* Chrome trace file (rank 0 writes), or NULL */
    const char *dump_path;  /* final parameters, canonical order, or NULL */
    /* checkpoints (ckpt.h): every ckpt_every steps (0: only at
     * the end) into ckpt_dir when set; resume: continue from the newest
     * complete checkpoint in ckpt_dir (any mesh: shards are re-cut) */
    const char *ckpt_dir;
    int64_t ckpt_every;
    int ckpt_keep;          /* keep the newest N checkpoints (0: all) */
    int resume;
    /* the kernel table the steps run on and its stream argument
     * (backend.h); NULL: the CPU table. A table that is not synchronous
     * (a device's) keeps the model, the parameters and the optimizer state
     * in its memory; it needs one rank on the single-rank communicator
     * (smoe_comm_local_new), whose copies it then makes, fp32 gathers, and
     * MoE layers without ring of experts (SMOE_EINVAL otherwise). */
    const smoe_kops *kops;
    void *kstream;
    /* called on every rank after each step with the agreed record */
    void (*on_step)(void *ud, const smoe_train_step *rec);
    /* called on rank 0 with each line the run says about the files it
     * found (a stale temporary of an interrupted save, removed); may be NULL */
    void (*on_note)(void *ud, const char *line);
    void *ud;
} smoe_train_opts;

/* A config key that differs from the checkpoint's: key, its value in the
 * checkpoint and now (ckpt.h). */
typedef smoe_ckpt_change smoe_train_change;
/* The keys smoe train reads (smoe_train_keys, smoe_train_check_keys), those
 * it reads and does not apply (smoe_train_unapplied_keys) and the model
 * configuration of a config (smoe_train_model_cfg): recipe.h. */

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
    int64_t peak_tracked_bytes;      /* max over steps and ranks */
    smoe_train_mem peak_tracked;     /* its breakdown (rank 0 at its own peak) */
    int64_t budget_overruns;         /* over the run */
    int64_t gathers_at_use;          /* over the run */
    char schedule_note[200];         /* how the schedule was chosen (its note) */
    int prefetch_distance;           /* the farthest issue distance of the run's schedules */
    int64_t memory_estimate_bytes;   /* per rank, what --max-memory is checked against */
    int64_t params, tokens_per_step;
    double model_flops_per_step;     /* forward + backward, all ranks */
    char params_sha256[65];
    char recipe[640];                /* the MaxText recipe features in effect */
    char expert_exchange[40];        /* smoe_recipe_exchange of the model */
    int nunapplied;                  /* keys read and not applied (smoe_train_unapplied_keys) */
    smoe_train_unapplied unapplied[SMOE_TRAIN_MAX_UNAPPLIED];
    smoe_blas_info blas;
} smoe_train_result;

/* The one check of a rank's memory against this machine's (smoe train's
 * plan, smoe sim --calibrate's layers), made before anything large is
 * allocated: `need` bytes per rank, its parts in words in `what`, over the
 * physical memory is SMOE_EINVAL "the model needs X GiB per rank (what),
 * more than this machine's Y GiB of memory: VERDICT (the model's size
 * keys of cfg)"; SMOE_OK otherwise (or where the memory is unknown). */
SMOE_MUST_CHECK
smoe_status smoe_train_check_ram(const smoe_config *cfg, double need, const char *what,
                                 const char *verdict, smoe_err *err);

/* The activation bytes a rank of smoe train of model mc
 * (smoe_train_model_cfg) tracks from its start: the model's
 * (smoe_model_need_bytes: its slab, the routed-row stores at the balanced
 * load) and the loop's residual stream and its gradient. What smoe sim's
 * runtime executor is given (smoe_sim_shape.act_bytes), so that both count
 * every class alike; skewed routing may grow the stores during a run
 * (smoe_model_act_bytes). */
SMOE_MUST_CHECK
smoe_status smoe_train_act_bytes(const smoe_model_cfg *mc, int64_t *bytes,
                                 smoe_err *err);

/* Run the training on the ranks of comm (their mesh: the plan's), with
 * o's schedules (see smoe_trainer_new). Collective: every rank calls it with the same
 * arguments. Errors (bad data file, unsupported config, memory over
 * max_memory) are agreed across ranks before any step, so every rank
 * returns the same status; rank 0's err carries the message. */
SMOE_MUST_CHECK
smoe_status smoe_train_run(const smoe_config *cfg, const smoe_plan *plan, const smoe_comm *comm,
                           const smoe_train_opts *o, smoe_train_result *res, smoe_err *err);
void smoe_train_result_free(smoe_train_result *r);

/* ---- training as a library ----
 * A trainer holds one model's sharded state on the ranks of a communicator
 * (comm.h: smoe_rt_comm(rt) over MPI, or smoe_comm_local_new on one rank
 * without MPI; every rank creates one with the same arguments: the calls
 * below are collective unless said otherwise) and trains it one batch at a
 * time; smoe_train_run is a loop over it. The train library links no MPI:
 * everything it asks of the ranks goes through the smoe_comm it is given.
 * Thread-safety: one thread drives a trainer.
 *
 *   smoe_train_data_load(path, seq, &data, &err);        the batches' source
 *   smoe_schedule_for_plan(plan, 1, 0, &sched, &err);      depth 1, co-axis
 *   opts.schedules = &sched; opts.nschedules = 1;
 *   smoe_trainer_new(cfg, plan, &comm, &opts, data, &t, &err);
 *   for (step = 0; step < opts.steps; step++) {
 *       smoe_train_data_batch(data, opts.seed, step, rank * batch, batch, seq,
 *                             tokens, targets, &err);
 *       smoe_trainer_step(t, tokens, targets, &rec, &err);
 *   }
 *   smoe_trainer_gather(t, i, full, &err);               parameter i, whole
 *   smoe_trainer_free(t); */

/* Training text: a regular file whose bytes are the tokens (vocab 256). */
typedef struct smoe_train_data smoe_train_data;
/* Read the file whole; SMOE_EINVAL/SMOE_EIO naming it when it is not a
 * regular file or holds fewer than seq + 2 bytes. Not collective. */
SMOE_MUST_CHECK
smoe_status smoe_train_data_load(const char *path, int64_t seq, smoe_train_data **out,
                                 smoe_err *err);
void smoe_train_data_free(smoe_train_data *d);
/* The tokens (batch * seq) and next-byte targets of the global batch's
 * sequences first .. first + batch - 1 of step `step` (0-based): sequence
 * i starts at an offset drawn from (seed, step, i), so every mesh sees the
 * same global batch. Rank r of a trainer holds sequences
 * r * batch .. (r + 1) * batch - 1 (batch: smoe_trainer_model(t)->batch).
 * SMOE_EINVAL, nothing written, for batch < 0, seq < 1, or a seq longer
 * than the text allows (seq + 2 bytes, as smoe_train_data_load checks).
 * Pure. */
SMOE_MUST_CHECK
smoe_status smoe_train_data_batch(const smoe_train_data *d, uint64_t seed, int64_t step,
                                  int64_t first, int64_t batch, int64_t seq, int32_t *tokens,
                                  int32_t *targets, smoe_err *err);

typedef struct smoe_trainer smoe_trainer;
/* Build the trainer: the model configuration, the recipe and the numeric
 * keys of cfg (refused with their location), every rank's config, plan,
 * options and data compared (smoe_train_run's fingerprint), the sharded
 * layout, the memory estimate (against o->max_memory and this machine),
 * the slabs, and the parameters initialised from o->seed.
 * The schedules of o are checked against the model and compared across
 * ranks; the first runs until smoe_trainer_use_schedule. comm: the ranks (copied; what it points to must outlive the trainer);
 * its mesh must be plan's. From o it reads: steps (the length of the run,
 * >= 1: the learning-rate schedule), seed, the schedules (the pool is
 * sized for the deepest), max_memory, trace_path (a trace is recorded when
 * set; smoe_trainer_write_trace), and ckpt_dir / ckpt_keep / ckpt_every /
 * resume (the checkpoint directory is opened for this run when set, see
 * smoe_trainer_save). data (may be NULL) is the batches' source, digested
 * into the fingerprint and counted in the memory estimate; the trainer
 * keeps no pointer to it. cfg,
 * plan and the strings of o must outlive the trainer. Errors are agreed:
 * every rank returns the same status, rank 0's err the failing rank's
 * message; *out is NULL on error. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_new(const smoe_config *cfg, const smoe_plan *plan, const smoe_comm *comm,
                             const smoe_train_opts *o, const smoe_train_data *data,
                             smoe_trainer **out, smoe_err *err);
void smoe_trainer_free(smoe_trainer *t);
/* The model as this rank runs it (batch: local sequences; seq; vocab). */
const smoe_model_cfg *smoe_trainer_model(const smoe_trainer *t);
/* Steps done so far (the next step's 0-based index). */
int64_t smoe_trainer_steps_done(const smoe_trainer *t);
/* The next steps run o's schedule i (0 <= i < o->nschedules).
 * Numerically every schedule is the same (bitwise). SMOE_EINVAL for an i
 * out of range; the schedule is then unchanged. Not collective, but every
 * rank must choose the same. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_use_schedule(smoe_trainer *t, int i, smoe_err *err);
/* One training step on this rank's batch: tokens and targets (batch *
 * seq, values in [0, vocab)), this rank's sequences of the global batch.
 * Gathers, forward, backward, gradient reductions, AdamW with the
 * schedule; *rec gets the agreed record (loss, lr, grad norm, timings;
 * rec->mode is 0). After the step, a non-finite loss with MaxText's
 * abort_on_nan_loss / abort_on_inf_loss set returns SMOE_ENONFINITE on
 * every rank (the update is applied; save nothing after it). An error
 * inside the step is one rank's alone while its peers wait in a
 * collective: the job is ended (smoe_comm_abort, exit 72 out of memory,
 * 73 otherwise) with that rank's message. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_step(smoe_trainer *t, const int32_t *tokens, const int32_t *targets,
                              smoe_train_step *rec, smoe_err *err);
/* Save the state after the steps done into o->ckpt_dir (SMOE_EINVAL when
 * the trainer has none): step_NNNNNNNN/ and LATEST, pruned to the newest
 * o->ckpt_keep of this run; refuses non-finite parameters. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_save(smoe_trainer *t, smoe_err *err);
/* Resume from the checkpoint o->ckpt_dir's LATEST names (or the newest
 * complete one), re-cut for this mesh: parameters, AdamW moments and the
 * step count. Fills res->first_step, resumed_from, resume_note and
 * changes (the config keys that differ); leaves the trainer as it was and
 * res->resumed_from "" when the directory holds no checkpoint. Refuses
 * another model, data file or seed, and a checkpoint at or after o->steps. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_load(smoe_trainer *t, smoe_train_result *res, smoe_err *err);
/* The parameters in plan order: MaxText's path and global shape (the scan
 * dim of a stacked weight included), and this rank's shard of it (layers
 * one after another, each shard_numel / layers floats in the shard's
 * natural layout; live, changed by every step). Not collective. */
typedef struct smoe_trainer_param {
    const char *name;            /* "decoder/moe_layers/self_attention/wq_a/kernel" */
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    int64_t numel;               /* of the whole tensor */
    int64_t layers;              /* 1 for a top-level weight */
    const float *shard;          /* (shard_numel) this rank's shards, layer-major */
    int64_t shard_numel;
} smoe_trainer_param;
const smoe_trainer_param *smoe_trainer_params(const smoe_trainer *t, int *n);
/* Index of the parameter `name`, or -1. Not collective. */
int smoe_trainer_param_find(const smoe_trainer *t, const char *name);
/* Parameter i whole, in MaxText's layout, into full (numel floats) on
 * rank 0 (full is not touched, may be NULL, on the other ranks). */
SMOE_MUST_CHECK
smoe_status smoe_trainer_gather(smoe_trainer *t, int i, float *full, smoe_err *err);
/* SHA-256 of every parameter whole in plan order (what smoe train reports
 * as params_sha256), into hex on rank 0; with dump != NULL rank 0 also
 * writes them there (the --dump-params format). */
SMOE_MUST_CHECK
smoe_status smoe_trainer_digest(smoe_trainer *t, const char *dump, char hex[65], smoe_err *err);
/* Write the trace recorded so far (o->trace_path set) to path: every
 * rank's spans, rank 0 writes. */
SMOE_MUST_CHECK
smoe_status smoe_trainer_write_trace(smoe_trainer *t, const char *path, smoe_err *err);

/* Quartiles of one quantity over a set of steps. */
typedef struct smoe_train_stat {
    double median, p25, p75, mean, min, max;
} smoe_train_stat;
typedef struct smoe_train_summary {
    int64_t nsteps;              /* steps counted */
    smoe_train_stat step_ms, exposed_gather_ms, residual_ms, a2a_ms, compute_ms, gather_ms,
        reduce_wait_ms, device_step_ms, device_compute_ms;
    int64_t peak_gathered_bytes;
    double last_loss;
} smoe_train_summary;
/* The steps of r that ran `mode` (-1: all), skipping the run's first
 * `skip` steps (warm-up). Quartiles by linear interpolation. */
void smoe_train_summarize(const smoe_train_result *r, int mode, int64_t skip,
                          smoe_train_summary *out);

#ifdef __cplusplus
}
#endif
#endif
