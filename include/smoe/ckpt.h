/* Checkpoints of sharded training state: one directory per run (a lock,
 * a run id, stale temporaries removed), each checkpoint a step_NNNNNNNN/
 * of per-rank shard files and a manifest (schema in docs/formats.md),
 * written crash-safe and read back on any mesh (shards re-cut). The state
 * is described, not owned: the caller's slabs and the per-weight layout
 * that says what their bytes mean. SHA-256 (the digests that guard the
 * files) is exported for the layers above. */
#ifndef SMOE_CKPT_H
#define SMOE_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/comm.h"
#include "smoe/config.h"
#include "smoe/core.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SHA-256 (OpenSSL): new (NULL when out of memory), update, then final,
 * which writes 64 hex digits and a NUL and frees the context. */
typedef struct smoe_ckpt_sha smoe_ckpt_sha;
smoe_ckpt_sha *smoe_ckpt_sha_new(void);
void smoe_ckpt_sha_update(smoe_ckpt_sha *s, const void *p, size_t n);
void smoe_ckpt_sha_final(smoe_ckpt_sha *s, char hex[65]);

/* The digests of the run that wrote a checkpoint (hex SHA-256 each):
 * recorded in the manifest; the data digest is compared on load. */
typedef struct smoe_ckpt_fingerprint {
    char config[65], plan[65], options[65], data[65];
} smoe_ckpt_fingerprint;

/* One weight of the state: what its bytes in each slab mean. */
typedef struct smoe_ckpt_weight {
    const char *path;       /* the parameter's path ("decoder/...") */
    int lrank;              /* per-layer shape and state spec */
    int64_t lshape[SMOE_MAX_RANK];
    smoe_pspec lspec;
    int64_t layers;
    int64_t shard_numel;    /* per layer, on every rank */
    int64_t shard_offset;   /* of layer 0 inside each slab, floats */
} smoe_ckpt_weight;

/* This rank's state: n weights in plan order, and the three slabs saved
 * (parameters, AdamW mu, AdamW nu) of slab_floats floats each; a load
 * writes the slabs. */
typedef struct smoe_ckpt_state {
    int n;
    const smoe_ckpt_weight *w;
    int64_t slab_floats;
    float *params, *m, *v;
} smoe_ckpt_state;

/* What the gathers and reductions of a run that recorded none moved. */
#define SMOE_CKPT_WIRE_FP32 "gathers fp32, reductions fp32"

/* A checkpoint directory belongs to one run. */
typedef struct smoe_ckpt_opts {
    const char *dir;
    int64_t step;                /* save: completed steps */
    int64_t total_steps;         /* load: --steps (the checkpoint must be before it) */
    uint64_t seed;
    int keep;                    /* save: keep the newest `keep` of this run (0: all) */
    const smoe_ckpt_fingerprint *fp; /* save: recorded; load: compared */
    const smoe_rules *rules;     /* save: recorded in the manifest */
    const smoe_config *cfg;      /* save: recorded key by key; load: compared */
    char run_id[33];             /* this run's id: set by smoe_ckpt_open / smoe_ckpt_load */
    const char *wire;            /* what the gathers and reductions move (one line):
                                    save: recorded; load: a difference is a change */
    void (*on_note)(void *ud, const char *line); /* open: a stale temporary removed */
    void *ud;
} smoe_ckpt_opts;
typedef struct smoe_ckpt smoe_ckpt;

/* Open co->dir for this run before step 1. Rank 0 creates it and holds an
 * advisory lock (flock) on it until smoe_ckpt_close; a fresh run (resume 0)
 * into a directory that already holds checkpoints is refused (nothing is
 * deleted); otherwise rank 0 removes the stale temporaries of interrupted
 * saves, each said through co->on_note; every rank checks that it can
 * write there; a fresh run gets a new run id. Collective; errors agreed
 * (the failing rank's message). */
SMOE_MUST_CHECK
smoe_status smoe_ckpt_open(const smoe_comm *cm, smoe_ckpt_opts *co, int resume, smoe_ckpt **out,
                           smoe_err *err);
void smoe_ckpt_close(smoe_ckpt *ck);
/* Save the state after co->step steps. Refuses non-finite parameters.
 * Prunes to the newest co->keep checkpoints of this run (never the one just
 * written, never another run's). Collective. */
SMOE_MUST_CHECK
smoe_status smoe_ckpt_save(const smoe_comm *cm, smoe_ckpt *ck, const smoe_ckpt_state *st,
                           const smoe_ckpt_opts *co, smoe_err *err);

/* A config key (or a resolved quantity) that differs between the run that
 * wrote a checkpoint and the run resuming it (strings smoe_free'd). */
typedef struct smoe_ckpt_change {
    char *key, *from, *to;       /* a config key, its value in the checkpoint and now */
} smoe_ckpt_change;
/* What a load found. */
typedef struct smoe_ckpt_resume {
    int64_t first_step;          /* 0, or the checkpoint's step */
    char from[4300];             /* the checkpoint directory, or "" */
    char note[4600];             /* how the checkpoint was chosen, when not by LATEST */
    int nchanges;                /* owned by the caller (even on error) */
    smoe_ckpt_change *changes;
} smoe_ckpt_resume;
/* Load the checkpoint LATEST names (or, with no LATEST, the newest complete
 * one, said in res->note) into st's slabs, re-cut for this mesh: refuses a
 * LATEST naming a missing checkpoint, another model, data file or seed;
 * lists the other config keys that changed in res->changes; sets
 * res->first_step and res->from ("" when the directory holds none) and
 * co->run_id. Collective; errors agreed. */
SMOE_MUST_CHECK
smoe_status smoe_ckpt_load(const smoe_comm *cm, const smoe_ckpt_state *st, smoe_ckpt_opts *co,
                           smoe_ckpt_resume *res, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
