/* Internal to the ckpt module. */
#ifndef SMOE_CKPT_IMPL_H
#define SMOE_CKPT_IMPL_H

#include "smoe/ckpt.h"

/* manifest.c: the checkpoint manifest (JSON, schema in docs/formats.md) */
#define CK_VERSION 2 /* 2: run_id, config, layout digest in the shard header */
#define CK_HEADER 64 /* bytes before the slabs in a shard file */
typedef struct ck_mshard {
    const char *file;       /* relative to the checkpoint directory */
    int64_t bytes;
    char sha256[65];
} ck_mshard;
typedef struct ck_manifest {
    smoe_arena *a;          /* strings and arrays of a parsed manifest */
    int version;            /* parsed: 1 or 2 */
    int64_t step;           /* completed steps */
    uint64_t seed;
    char run_id[33];        /* the run that wrote it ("" in version 1) */
    smoe_mesh mesh;
    smoe_ckpt_fingerprint fp;
    const smoe_rules *rules;/* written only: the logical_axis_rules of the run */
    const char *wire;       /* the run's wire line, NULL when not recorded (fp32) */
    int ncfg;               /* the merged config, key by key (YAML flow text) */
    const char *const *cfg_keys, *const *cfg_vals;
    int64_t slab_floats;    /* floats per state slab per rank */
    int nw;
    smoe_ckpt_weight *w;
    int ns;                 /* one per rank of the saving mesh, rank order */
    ck_mshard *shards;
} ck_manifest;
/* JSON text of m (smoe_free), or NULL when out of memory. */
char *ck_manifest_text(const ck_manifest *m);
/* Parse `text` of `file`; errors name file:line:col or the JSON member. */
SMOE_MUST_CHECK
smoe_status ck_manifest_parse(const char *file, const char *text, ck_manifest *m,
                              smoe_err *err);
/* Only the run id of a manifest's text (SMOE_EINVAL if it has none). */
SMOE_MUST_CHECK
smoe_status ck_manifest_run_id(const char *text, char id[33]);
void ck_manifest_free(ck_manifest *m);

/* ckpt_changes.c: the differences between the run that wrote manifest m
 * and this one (cfg, wire, the ranks' mesh and number) into res->changes,
 * key by key: the merged config, the wire, each mesh axis whose size
 * differs and the global batch. Rank 0. */
SMOE_MUST_CHECK
smoe_status ck_changes(const ck_manifest *m, const smoe_config *cfg, const char *wire,
                       const smoe_mesh *mesh, int ranks, smoe_ckpt_resume *res,
                       smoe_err *err);

/* ckpt_dir.c: helpers shared with checkpoint.c */
SMOE_MUST_CHECK
smoe_status ck_io_err(smoe_err *err, const char *path, const char *what);
int ck_write_all(int fd, const void *p, size_t n);
int ck_remove_dir(const char *path); /* its files, then it: rmdir's result */
int64_t ck_step_of(const char *name);
/* The checkpoint to resume from in dir (name "" when none). */
SMOE_MUST_CHECK
smoe_status ck_find(const char *dir, char name[32], char *note, size_t note_cap,
                    smoe_err *err);
/* After publishing step `newest`: remove this run's checkpoints beyond the
 * newest `keep` (rank 0). */
void ck_prune(const char *dir, const char *run_id, int64_t newest, int keep);

#endif
