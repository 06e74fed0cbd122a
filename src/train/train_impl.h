/* Internal to the train module. */
#ifndef SMOE_TRAIN_IMPL_H
#define SMOE_TRAIN_IMPL_H

#include "smoe/ckpt.h"
#include "smoe/recipe.h"
#include "smoe/sched.h"
#include "smoe/train.h"

/* MaxText's recipe and hyperparameters: the recipe module's, by short
 * names */
typedef smoe_recipe tr_recipe;
typedef smoe_recipe_hparams tr_hparams;
SMOE_MUST_CHECK
static inline smoe_status tr_read_hparams(const smoe_config *cfg, tr_hparams *hp, smoe_err *err)
{
    return smoe_recipe_read_hparams(cfg, hp, err);
}
SMOE_MUST_CHECK
static inline smoe_status tr_read_recipe(const smoe_config *cfg, int64_t steps, tr_recipe *r,
                                         smoe_err *err)
{
    return smoe_recipe_read(cfg, steps, r, err);
}
static inline void tr_recipe_describe(const tr_hparams *hp, const smoe_model_cfg *mc, char *buf,
                                      size_t n)
{
    smoe_recipe_describe(hp, mc, buf, n);
}
static inline const char *tr_recipe_exchange(const smoe_model_cfg *mc)
{
    return smoe_recipe_exchange(mc);
}

/* One parameter of the plan, as stored on this rank. */
typedef struct tr_weight {
    const smoe_weight *pw;  /* plan entry */
    int top;                /* 1: top-level (embedding, final norm, logits) */
    int moe;                /* layer kind of its stack */
    int slot;               /* smoe_wslot (layers) or smoe_tslot (top) */
    int64_t layers;         /* layers in its stack (1 for top) */
    int64_t layer0;         /* global index of the stack's first layer */
    smoe_comm_gather *wg[2]; /* its gathers by the co-axis [0] and legacy [1] plan (built) */
    smoe_wgather_info info;
    int64_t shard_off;      /* of layer 0's shard in the slabs (floats) */
    int64_t unit_off;       /* of its gathered buffer inside a unit (floats) */
    float std;              /* init: N(0, std^2); 0 means ones; -1 zeros */
    int lrank;              /* per-layer shape and state spec */
    int64_t lshape[SMOE_MAX_RANK];
    smoe_pspec lspec;
} tr_weight;

/* Parameters, gradients and AdamW moments: one slab each. */
typedef struct tr_store {
    int n;
    tr_weight *w;
    int64_t total;          /* floats per slab */
    float *params;          /* shards, per weight layer-major (the table's memory) */
    float *grads;
    float *m, *v;
    int64_t unit_floats[2]; /* gathered floats of a dense / MoE layer */
    int64_t top_floats;     /* gathered floats of the top-level weights */
    /* the kernel table the slabs belong to, and the host's copies of the
     * state (initialisation, digests, checkpoints): on a synchronous table
     * the slabs themselves, else filled by tr_store_pull and written back
     * by tr_store_push */
    const smoe_kops *ops;
    void *stream;
    float *params_h, *m_h, *v_h;
} tr_store;


/* store.c: tr_store_build lays the weights out (offsets, gathers, sizes);
 * tr_store_alloc then allocates the four slabs of st->total floats. */
SMOE_MUST_CHECK
smoe_status tr_store_build(const smoe_comm *cm, const smoe_plan *plan, const smoe_model_cfg *mc,
                           const int plans[2], int reduce_dtype, tr_store *st, smoe_err *err);
SMOE_MUST_CHECK
smoe_status tr_store_alloc(tr_store *st, const smoe_kops *ops, void *stream, smoe_err *err);
void tr_store_free(tr_store *st);
/* The host copies <- the slabs (params, m, v), and back; nothing on a
 * synchronous table. */
void tr_store_pull(tr_store *st);
void tr_store_push(tr_store *st);
void tr_store_init_params(const smoe_comm *cm, tr_store *st, uint64_t seed);
/* Gather the parameters to rank 0 in MaxText's layout, in plan order:
 * hash them (and write them to `dump` if not NULL). */
SMOE_MUST_CHECK
smoe_status tr_store_digest(const smoe_comm *cm, const tr_store *st, const char *dump,
                            char hex[65], smoe_err *err);
/* Weight i whole, MaxText's layout, into full (rank 0). Collective. */
smoe_status tr_store_gather(const smoe_comm *cm, const tr_store *st, int i, float *full,
                            smoe_err *err);

/* data.c */
struct smoe_train_data {
    unsigned char *text;
    int64_t n;
};
typedef struct smoe_train_data tr_data;
SMOE_MUST_CHECK
smoe_status tr_data_load(const char *path, int64_t need, tr_data *d, smoe_err *err);
void tr_data_free(tr_data *d);

/* SHA-256: the ckpt module's (OpenSSL), by short names */
typedef smoe_ckpt_sha tr_sha;
static inline tr_sha *tr_sha_new(void) { return smoe_ckpt_sha_new(); }
static inline void tr_sha_update(tr_sha *s, const void *p, size_t n)
{
    smoe_ckpt_sha_update(s, p, n);
}
static inline void tr_sha_final(tr_sha *s, char hex[65]) { smoe_ckpt_sha_final(s, hex); }

/* optim.c: gradient norm, clipping, AdamW with the schedule, bias update */
typedef struct tr_optim tr_optim;
SMOE_MUST_CHECK
smoe_status tr_optim_new(const tr_store *st, const tr_hparams *hp, const smoe_model_cfg *mc,
                         int ranks, tr_optim **out, smoe_err *err);
/* The update in two parts: the top-level weights and the layers marked in
 * first[0..L) (with their gate biases), then then(ud), then the rest. */
typedef struct tr_optim_split {
    const unsigned char *first; /* (L) 1: a layer of the first part */
    void (*then)(void *ud);
    void *ud;
} tr_optim_split;
/* After the gradient reductions of step `step` (0-based): *lr the rate
 * applied, *grad_norm the raw gradient's global norm; split NULL: all in
 * one part. Every element is updated by the same operations in either
 * case (the same bits). AdamW runs through the model's kernel table
 * (smoe_model_kops), the weights living where the model runs. Collective. */
SMOE_MUST_CHECK
smoe_status tr_optim_step(tr_optim *o, const smoe_comm *cm, tr_store *st, smoe_model *model,
                          const smoe_model_cfg *mc, const tr_hparams *hp, int64_t step,
                          const tr_optim_split *split, double *lr, double *grad_norm,
                          smoe_err *err);
void tr_optim_free(tr_optim *o);
/* calculate_load_balance_updates applied to one layer's bias (n experts):
 * bias[e] += sign(avg - counts[e]) * rate, avg = tokens * topk / experts. */
void tr_bias_step(float *bias, const double *counts, int64_t n, double avg, double rate);

static inline const float *tr_shard_of(const tr_store *st, const tr_weight *w, int l)
{
    int64_t local = w->top ? 0 : l - w->layer0;
    return st->params + w->shard_off + local * w->info.shard_numel;
}

static inline float *tr_grad_of(const tr_store *st, const tr_weight *w, int l)
{
    int64_t local = w->top ? 0 : l - w->layer0;
    return st->grads + w->shard_off + local * w->info.shard_numel;
}

/* prefetch.c: the executor of a smoe_schedule over a pool of gathered-
 * layer buffers (DESIGN there). Units: forward 0..L-1, backward L..2L-1. */
#define TR_MAX_LAYER_WEIGHTS 32
typedef struct tr_prefetch tr_prefetch;
typedef struct tr_pf_stats {
    int64_t cur_bytes, peak_bytes, peak_fwd, peak_bwd; /* gathered layers + gradient buffers */
    int64_t overruns;  /* gathers issued past the budget (nothing in flight could free) */
    int64_t at_use;    /* gathers still to issue when their unit was about to run */
    double grad_wait_s; /* waits for a gradient buffer (reductions in flight), this step */
} tr_pf_stats;
/* The pool holds max_distance + 2 units. */
SMOE_MUST_CHECK
smoe_status tr_pf_new(const smoe_comm *cm, tr_store *st, int L, int n_dense, int max_distance,
                      tr_prefetch **out, smoe_err *err);
void tr_pf_free(tr_prefetch *P);
/* The schedule the next steps run (names matched to the store's weights;
 * whole weights only; distance <= the pool's), the plan (legacy: its
 * gathers built) and a budget of gathered bytes (0: none). SMOE_EINVAL
 * names the schedule's field. */
SMOE_MUST_CHECK
smoe_status tr_pf_set_schedule(tr_prefetch *P, const smoe_schedule *s, int legacy,
                               int64_t budget, smoe_err *err);
void tr_pf_begin(tr_prefetch *P);                 /* the step's start */
float *tr_pf_acquire(tr_prefetch *P, int u); /* unit u's weights, gathered (backward:
                                                * and its gradient buffer) */
void tr_pf_release(tr_prefetch *P, int u);        /* after a forward unit */
float *tr_pf_grad_buffer(tr_prefetch *P, int u, int *gslot); /* zeroed, taken by acquire */
void tr_pf_reduce(tr_prefetch *P, int u, int gslot); /* after a backward unit */
void tr_pf_progress(tr_prefetch *P);
void tr_pf_set_budget(tr_prefetch *P, int64_t budget); /* gathered bytes, 0 = none */
void tr_pf_drained(tr_prefetch *P);               /* after smoe_comm_drain */
void tr_pf_retire(tr_prefetch *P); /* the step begun is not run: its gathers completed, unused */
const tr_pf_stats *tr_pf_stats_get(const tr_prefetch *P);
int64_t tr_pf_pool_bytes(const tr_store *st, int max_distance);

/* schedules.c: o's schedules checked (none NULL) and compared across ranks; the farthest issue distance and the
 * plans they gather by (plans[legacy] = 1). Collective; errors agreed. */
SMOE_MUST_CHECK
smoe_status tr_schedules(const smoe_comm *cm, const smoe_train_opts *o, int *max_distance,
                         int plans[2], smoe_err *err);

/* loop.c: the step loop (forward, backward, AdamW) over the executor */
typedef struct tr_state tr_state;
/* Memory tracked by class (bytes per rank; the step's peak for gathered). */
typedef struct tr_mem {
    int64_t params, grads, optimizer, gathered, activations, comm, top;
} tr_mem;
SMOE_MUST_CHECK
smoe_status tr_loop_new(const smoe_comm *cm, const smoe_model_cfg *mc, const tr_hparams *hp,
                        int max_distance, smoe_model *model, tr_store *st,
                        smoe_trace *trace, tr_state **out, smoe_err *err);
/* The next steps' schedule, plan and memory budget (bytes per rank for
 * everything tracked; 0 = none). SMOE_EINVAL when the schedule does not
 * fit the model or the budget cannot hold one layer without prefetch. */
SMOE_MUST_CHECK
smoe_status tr_loop_set_mode(tr_state *S, const smoe_schedule *sched, int legacy,
                             int64_t budget, smoe_err *err);
/* The mode of the step after the next tr_loop_step (sched NULL: none
 * comes, or it is not known). When that schedule gathers at its start,
 * the step's optimizer updates those layers and the top-level weights
 * first and issues those gathers at once, for the next step; a next step
 * in another mode (tr_loop_set_mode) or tr_loop_retire completes them
 * unused. _same: the current mode, when more (nonzero) steps follow. */
void tr_loop_set_next(tr_state *S, const smoe_schedule *sched, int legacy);
void tr_loop_next_same(tr_state *S, int more);
/* Completes the next step's first gathers issued early, if any (before
 * the parameters change outside a step). Collective. */
void tr_loop_retire(tr_state *S);
/* sched is about to be freed: the loop keeps no pointer to it. */
void tr_loop_forget(tr_state *S, const smoe_schedule *sched);
SMOE_MUST_CHECK
smoe_status tr_loop_step(tr_state *S, int64_t step, smoe_train_step *rec, smoe_err *err);
/* This rank's token and target buffers, filled before each step. */
int32_t *tr_loop_tokens(tr_state *S, int32_t **targets);
/* Peak gathered bytes of the run so far, forward and backward; the
 * tracked memory at the run's peak. */
void tr_loop_peaks(const tr_state *S, int64_t *fwd, int64_t *bwd, tr_mem *peak);
void tr_loop_free(tr_state *S);
/* The memory tracked outside the gathered-layer pool (every class, the
 * top-level buffers included), for budgets. */
int64_t tr_mem_static(const tr_mem *m);
/* The loop's activations beside the model's: the residual stream and its
 * gradient. */
int64_t tr_residual_bytes(const smoe_model_cfg *mc);
/* The classes for a store, model and the model's activation bytes, with
 * `pool` gathered-layer bytes in use. */
tr_mem tr_mem_of(const tr_store *st, const smoe_model_cfg *mc, int64_t act_bytes, int64_t pool);

/* devtime.c: a step's timings on a device (a table that is not
 * synchronous; on a synchronous one tr_devtime_new gives NULL and every
 * call below does nothing). `calls`: the model calls a step times. mark:
 * a stamp, its index (-1 past the capacity); span: a stamp ending the call
 * that began at mark `begin` (drawn: also a trace span on the device
 * lane); step_end: the last stamp, one read of them all, the step's
 * device time and its calls' sum (seconds). */
typedef struct tr_devtime tr_devtime;
SMOE_MUST_CHECK
smoe_status tr_devtime_new(const smoe_kops *ops, void *stream, int calls, tr_devtime **out,
                           smoe_err *err);
void tr_devtime_free(tr_devtime *t);
void tr_devtime_step_begin(tr_devtime *t);
int tr_devtime_mark(tr_devtime *t);
void tr_devtime_span(tr_devtime *t, int begin, const char *name, int drawn);
void tr_devtime_step_end(tr_devtime *t, smoe_trace *trace, double *step_s, double *compute_s);

/* trainer.c: the checks of smoe_trainer_new that come before any data is
 * read (the communicator's mesh against the plan's, model config,
 * hyperparameters and recipe, the options): agreed
 * across ranks (each rank reaches the same verdict, its own err). */
smoe_status tr_trainer_check(const smoe_comm *cm, const smoe_config *cfg, const smoe_plan *plan,
                             const smoe_train_opts *o, smoe_model_cfg *mc, tr_hparams *hp,
                             smoe_err *err);
/* The set-up facts of a run (recipe, BLAS, memory estimate, the keys not
 * applied) into res. */
void tr_trainer_result(const smoe_trainer *t, smoe_train_result *res);
/* The summary of res's steps and of the run (peaks, RSS, sizes). Collective. */
void tr_trainer_summarize(smoe_trainer *t, smoe_train_result *res);
/* The schedule of the step after the next smoe_trainer_step: none (more
 * 0) or o's schedule i. Without it, a step takes the next to run its own
 * schedule while o's steps last. */
void tr_trainer_next(smoe_trainer *t, int more, int i);

/* fingerprint.c: digests every rank must agree on (and checkpoints record) */
typedef smoe_ckpt_fingerprint tr_fingerprint_t;
SMOE_MUST_CHECK
smoe_status tr_fingerprint(const smoe_config *cfg, const smoe_plan *plan,
                           const smoe_train_opts *o, const smoe_comm *cm, const tr_data *data,
                           tr_fingerprint_t *fp, smoe_err *err);
/* SMOE_EINVAL on every rank (rank 0's err names rank, part and digests)
 * when some rank's fingerprint differs from rank 0's. */
SMOE_MUST_CHECK
smoe_status tr_fingerprint_check(const smoe_comm *cm, const tr_fingerprint_t *fp, smoe_err *err);

/* fingerprint.c: what a run's gathers and reductions move, as one line
 * ("gathers bf16, reductions fp32"; int8 with its block and fallback) */
void tr_wire_text(const smoe_plan *plan, int reduce_dtype, char *buf, size_t n);

/* Checkpoints (the ckpt module) of the store: the directory opened for
 * the run (smoe_ckpt_open), saved and loaded through ckpt_state.c, which
 * describes the store's slabs and weights to it. */
typedef smoe_ckpt_opts tr_ckpt_opts;
typedef smoe_ckpt tr_ckpt;
SMOE_MUST_CHECK
static inline smoe_status tr_ckpt_open(const smoe_comm *cm, tr_ckpt_opts *co, int resume,
                                       tr_ckpt **out, smoe_err *err)
{
    return smoe_ckpt_open(cm, co, resume, out, err);
}
static inline void tr_ckpt_close(tr_ckpt *ck) { smoe_ckpt_close(ck); }
/* smoe_ckpt_save of the store's parameters and AdamW moments. Collective. */
SMOE_MUST_CHECK
smoe_status tr_ckpt_save(const smoe_comm *cm, tr_ckpt *ck, const tr_store *st,
                         const tr_ckpt_opts *co, smoe_err *err);
/* smoe_ckpt_load into the store; what it found into res (first_step,
 * resumed_from, resume_note, changes). Collective; errors agreed. */
SMOE_MUST_CHECK
smoe_status tr_ckpt_load(const smoe_comm *cm, tr_store *st, tr_ckpt_opts *co,
                         smoe_train_result *res, smoe_err *err);

/* Checkpoint I/O (fsync, a busy or network file system) can keep one rank
 * out of the collectives far longer than any step does while its peers wait
 * for it, and it is not a dead rank: while a checkpoint directory is
 * opened, saved or loaded, waits allow TR_IO_TIMEOUT_S seconds (the
 * configured timeout where it is longer, or 0 = never). tr_io_begin returns
 * the timeout to restore with smoe_comm_swap_timeout. */
#define TR_IO_TIMEOUT_S 600.0
static inline double tr_io_begin(const smoe_comm *cm)
{
    double old = smoe_comm_swap_timeout(cm, 0);
    smoe_comm_swap_timeout(cm, old <= 0 || old >= TR_IO_TIMEOUT_S ? old : TR_IO_TIMEOUT_S);
    return old;
}

/* rng shared by init and data */
uint64_t tr_mix(uint64_t a, uint64_t b);
double tr_normal(uint64_t key);

#endif
