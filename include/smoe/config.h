/* smoe config: MaxText configuration files turned into typed values, with
 * file:line:col on every error.
 *
 * Assembly follows MaxText's pyconfig (see docs/plan.md, "Config assembly"):
 *   base file (with base_config: inheritance)
 *   <- model file (models/<model_name>.yml beside the base file)
 *   <- key=value overrides (and MAXTEXT_<KEY> environment variables)
 * with logical_axis_rules merged by MaxText's hand-written rule (an
 * overridden logical name moves to the end), then a custom_mesh_and_rule
 * file replacing mesh_axes / logical_axis_rules / data_sharding wholesale,
 * then the pipeline post-fixups. A key must be a field of MaxText's pydantic
 * MaxTextConfig (the table data/maxtext/config_fields.tsv, types.py at
 * e591f30) or a key of the base chain (an older MaxText's key); a field's
 * value is coerced as pydantic's lax mode does (8.0 -> 8 for an int), a
 * field no file sets takes MaxTextConfig's default.
 *
 * The YAML reader (libyaml) lives in yaml_load.c, the JSON --params reader
 * (cJSON) in params_json.c and the parse path every JSON reader shares in
 * json.c; besides them only smoe's other JSON files include cJSON. */
#ifndef SMOE_CONFIG_H
#define SMOE_CONFIG_H

#include <stdio.h>

#include "smoe/core.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- YAML documents as a tree ---- */
typedef enum smoe_node_kind {
    SMOE_NODE_SCALAR,
    SMOE_NODE_SEQ,
    SMOE_NODE_MAP
} smoe_node_kind;

typedef struct smoe_node {
    smoe_node_kind kind;
    const char *str;  /* scalar text (SCALAR) */
    int plain;        /* 1: plain scalar (typed by YAML rules); 0: quoted */
    int n;            /* items (SEQ) or pairs (MAP) */
    struct smoe_node **items; /* SEQ items, MAP values */
    const char **keys;        /* MAP keys */
    smoe_loc *key_locs;       /* MAP: where each key is written */
    smoe_loc loc;             /* where the node starts */
} smoe_node;

/* Parse a YAML file (one document; a mapping or empty) into an arena.
 * Duplicate mapping keys are an error. Errors carry file:line:col. */
SMOE_MUST_CHECK
smoe_status smoe_yaml_load_file(smoe_arena *a, const char *path,
                                smoe_node **out, smoe_err *err);
/* Parse YAML text; `name` is used as the file in locations. An empty
 * document gives a plain empty scalar. */
SMOE_MUST_CHECK
smoe_status smoe_yaml_load_string(smoe_arena *a, const char *text,
                                  const char *name, smoe_node **out,
                                  smoe_err *err);

/* Scalar typing, as MaxText's YAML loader resolves plain scalars. */
typedef enum smoe_scalar_type {
    SMOE_T_NULL,
    SMOE_T_BOOL,
    SMOE_T_INT,
    SMOE_T_FLOAT,
    SMOE_T_STR,
    SMOE_T_SEQ,
    SMOE_T_MAP
} smoe_scalar_type;
smoe_scalar_type smoe_node_type(const smoe_node *n);
/* 1 if n is a boolean scalar that reads true. */
int smoe_node_bool_value(const smoe_node *n);
const char *smoe_type_name(smoe_scalar_type t);
/* Structural equality with typed scalars ("10_000" == "10000"). */
int smoe_node_equal(const smoe_node *a, const smoe_node *b);
const smoe_node *smoe_node_get(const smoe_node *map, const char *key);
/* n as one line of YAML flow text (a quoted scalar in '', maps {k: v},
 * sequences [a, b]; "" for NULL): smoe_free it; NULL when out of memory. */
char *smoe_node_text(const smoe_node *n);

/* ---- assembled configuration ---- */
typedef struct smoe_config smoe_config;

typedef struct smoe_config_opts {
    const char *base_path;   /* NULL: the bundled configs/base.yml */
    const char *model;       /* --model NAME|FILE, or NULL */
    const char *rules;       /* --rules NAME|FILE, or NULL */
    int n_overrides;
    const char *const *overrides; /* "key=value" strings */
    /* [n_overrides] where each came from ("FILE:LINE:COL" of a scenario's
     * list), or NULL (all, or an entry): "argument 'key=value'" */
    const char *const *override_where;
    int use_env;             /* apply MAXTEXT_<KEY> environment variables */
} smoe_config_opts;

/* Assemble. On error *out is NULL and err names the file:line:col or the
 * argument. Not thread-safe (reads the environment). */
SMOE_MUST_CHECK
smoe_status smoe_config_load(const smoe_config_opts *opts, smoe_config **out,
                             smoe_err *err);
void smoe_config_free(smoe_config *c);

/* The merged value of a key, or NULL. */
const smoe_node *smoe_config_get(const smoe_config *c, const char *key);
/* Typed getters: SMOE_ENOTFOUND if the key is absent, SMOE_EINVAL with the
 * value's location if it has the wrong type. */
SMOE_MUST_CHECK
smoe_status smoe_config_int(const smoe_config *c, const char *key,
                            int64_t *out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_float(const smoe_config *c, const char *key,
                              double *out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_bool(const smoe_config *c, const char *key, int *out,
                             smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_str(const smoe_config *c, const char *key,
                            const char **out, smoe_err *err);
/* An optional key: absent or null (MaxText's None) gives `def`, else the
 * typed getter's value or error. */
SMOE_MUST_CHECK
smoe_status smoe_config_int_or(const smoe_config *c, const char *key, int64_t def,
                               int64_t *out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_float_or(const smoe_config *c, const char *key, double def,
                                 double *out, smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_bool_or(const smoe_config *c, const char *key, int def, int *out,
                                smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_config_str_or(const smoe_config *c, const char *key, const char *def,
                               const char **out, smoe_err *err);
/* Keys of the merged configuration in their (deterministic) merge order:
 * the i-th key and its value, or NULL past the end. */
const char *smoe_config_key_at(const smoe_config *c, int i, const smoe_node **value);
/* Where a key's value came from, "file:line:col" or "argument '...'". */
smoe_loc smoe_config_loc(const smoe_config *c, const char *key);
/* The environment variable that sets key when opts.use_env is on:
 * MAXTEXT_ and the key in capitals, into buf (n bytes); returns buf. */
const char *smoe_config_env_name(const char *key, char *buf, size_t n);

/* ---- key policies ----
 * A MaxText key a tool reads but implements only at some values. Each tool
 * keeps a table of rules (smoe train's recipe, smoe sim's step model). A
 * key absent from the configuration, or null (MaxText's None), holds
 * MaxText's default. */
typedef enum smoe_key_kind {
    SMOE_KEY_BOOL,   /* want "true" or "false" */
    SMOE_KEY_INT,    /* want numbers, '|'-separated, compared by value */
    SMOE_KEY_FLOAT,
    SMOE_KEY_STR,    /* want strings, '|'-separated ("" allowed) */
    SMOE_KEY_EMPTY,  /* want an empty list */
    SMOE_KEY_NONPOS  /* the key acts only when > 0 */
} smoe_key_kind;
typedef struct smoe_key_rule {
    const char *key;
    smoe_key_kind kind;
    const char *want;
    const char *why; /* what MaxText would do instead (refusal), or why the
                        tool does not apply it */
} smoe_key_rule;
/* 1 if n (may be NULL: absent) holds one of r's values; a value of another
 * type holds none. */
int smoe_key_holds(const smoe_node *n, const smoe_key_rule *r);
/* Refuse r's key in one line at its file:line:col:
 * "KEY: ONLY only KEY: WANT (WOULD WHY)", e.g. ONLY "smoe sim models",
 * WOULD "MaxText would run". Returns SMOE_EINVAL. */
smoe_status smoe_key_refuse(const smoe_config *c, const smoe_key_rule *r, const char *only,
                            const char *would, smoe_err *err);
/* The key's type (the config's error), then its value (smoe_key_refuse
 * unless it holds). */
SMOE_MUST_CHECK
smoe_status smoe_key_check(const smoe_config *c, const smoe_key_rule *r, const char *only,
                           const char *would, smoe_err *err);

/* ---- keys of other MaxText releases ----
 * Keys that MaxTextConfig at e591f30 lacks and that the release a published
 * recipe pins had (data/maxtext/key_history.tsv, each with its commits). A
 * renamed key is read as today's key; setting both names is an error. A
 * tuning key (a kernel's tiles or DMA buffers: how a kernel runs, not what
 * it computes) is accepted at the type of its default then, and tools name
 * a value other than that default as not modelled. Any other unknown key is
 * refused. */
typedef struct smoe_old_key {
    const char *key;
    const char *current; /* renamed: today's key; tuning: NULL */
    const char *def;     /* tuning: MaxText's default then; renamed: NULL */
    const char *history; /* the commits that added and renamed/removed it */
} smoe_old_key;
/* 1 and *out = the row of `key`, or 0 when it is no key of another
 * release. */
int smoe_old_key_find(const char *key, smoe_old_key *out);
/* 1 and *out = the i-th row, or 0 past the end. */
int smoe_old_key_at(size_t i, smoe_old_key *out);

/* The final, merged logical_axis_rules. Owned by the config. */
const smoe_rules *smoe_config_rules(const smoe_config *c);
/* The file names that went into this config, in load order, for the
 * resolved-configuration banner. */
int smoe_config_sources(const smoe_config *c, const char *const **files);
/* Bundled default configs directory: $SMOE_CONFIG_DIR, else configs/ next
 * to the executable, else ../share/smoe/configs next to it. */
const char *smoe_config_default_dir(void);

/* Build the device mesh: axes from mesh_axes, sizes from ici_* (and dcn_*
 * when slices > 1) with one -1 filled. Errors: an axis MaxText does not
 * know (with the mesh_axes item's location), two -1, product != devices. */
SMOE_MUST_CHECK
smoe_status smoe_config_mesh(const smoe_config *c, int64_t devices,
                             int64_t slices, smoe_mesh *out, smoe_err *err);

/* The parallelism key of a mesh axis without its ici_/dcn_ prefix
 * ("fsdp" -> "fsdp_parallelism", "stage" -> "pipeline_parallelism"), or
 * NULL for an axis with none or unknown. Static storage. */
const char *smoe_config_axis_key(const char *axis);

/* ---- MaxText accelerator names ----
 * MaxText's accelerator_to_spec_map.py (data/maxtext/topologies.tsv, at
 * e591f30): v5p-256 -> 128 devices per slice, tpu7x-8 -> 8, a3 -> 8. */
typedef struct smoe_topology {
    char name[32];          /* "v5p-256" */
    char platform[8];       /* tpu | gpu */
    char topology[32];      /* "v5:4x4x8", "-" for gpu */
    char chip_config[16];   /* megacore | default | - */
    int64_t devices_per_slice;
} smoe_topology;
/* Look a name up (exact match). SMOE_ENOTFOUND naming some known sizes of
 * the family otherwise. Thread-safe. */
SMOE_MUST_CHECK
smoe_status smoe_topology_find(const char *name, smoe_topology *out, smoe_err *err);

/* ---- logical shardings file (--params): MaxText's logical_shardings.json */
typedef struct smoe_logical_entry {
    const char *key;    /* the JAX key path string, e.g. ".step" */
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    const char *names[SMOE_MAX_RANK]; /* logical name per dim, NULL = None */
    smoe_loc loc;       /* of the key in the file */
} smoe_logical_entry;

/* Read every entry in file order. A spec entry that is a list of names
 * (possible in Flax) is an error here: smoe resolves one name per dim. */
SMOE_MUST_CHECK
smoe_status smoe_params_load_json(smoe_arena *a, const char *path,
                                  smoe_logical_entry **out, int *n,
                                  smoe_err *err);
/* The same from memory: `text` holds `len` bytes (NUL not required; the
 * text ends at the first NUL byte, as a file's would); `name` stands for the
 * file in locations. Entries and strings live in the arena; `text` is only
 * read during the call. */
SMOE_MUST_CHECK
smoe_status smoe_params_load_json_text(smoe_arena *a, const char *name,
                                       const char *text, size_t len,
                                       smoe_logical_entry **out, int *n,
                                       smoe_err *err);

/* ---- JSON text: the parse path every JSON reader of smoe's shares ----
 * Parse text[0..n) (a file's bytes; `name` names it in errors) into *out
 * (cJSON_Delete). pos NULL: the text is one JSON value and whitespace.
 * pos not NULL: the value that starts at text[*pos] (whitespace skipped)
 * and *pos moves past it, so a reader can take a long array one element
 * at a time. Errors: SMOE_ENOMEM "out of memory reading the file" (cJSON
 * allocates through smoe_malloc), SMOE_EINVAL `what` (NULL: "not JSON")
 * at name:line:col. Not thread-safe (cJSON's allocator is process-wide). */
struct cJSON;
SMOE_MUST_CHECK
smoe_status smoe_json_parse(const char *name, const char *text, size_t n, size_t *pos,
                            const char *what, struct cJSON **out, smoe_err *err);

/* ---- hardware profiles (configs/hardware/NAME.yml) ----
 * Per-chip numbers as the vendors publish them; the simulator derives
 * per-device ones (devices_per_chip). See configs/hardware/ for sources. */
/* The devices a profile describes: its file's "kind: tpu | gpu | cpu",
 * parsed once by the loader (nothing else compares the text). */
typedef enum smoe_hw_kind { SMOE_HW_TPU = 0, SMOE_HW_GPU, SMOE_HW_CPU } smoe_hw_kind;
/* A kind's name in profile files: "tpu", "gpu", "cpu" ("?" out of range). */
const char *smoe_hw_kind_name(smoe_hw_kind k);

/* The CPU model's terms: a cpu profile's own keys (smoe sim --calibrate
 * measures them on smoe train's MPI ranks, per device). Only cpu profiles
 * hold them (the loader refuses them in a tpu or gpu profile), so they are
 * 0 / "" ("not set") on accelerators. */
typedef struct smoe_hw_cpu {
    char progress[16];       /* how MPI transfers progress in the run the
                                profile was measured under, and which it
                                predicts: "calls" (only inside MPI calls: the
                                runtime's polls at kernel boundaries) or
                                "thread" (smoe train --progress-thread); a
                                profile without the key was measured as
                                "calls" */
    double a2a_bandwidth;    /* bytes/s, 0 = use ici_bandwidth */
    double a2a_latency;
    int collectives_use_compute; /* 1: collectives are CPU work of the ranks */
    double elementwise_bandwidth; /* bytes/s for non-matmul work, 0 = hbm */
    double op_overhead;      /* seconds per kernel call, 0 = none */
    double compute_bytes;    /* bytes per activation element (4: smoe's fp32
                                kernels; accelerators: the config's dtype) */
    double gemm_small_flops; /* FLOP/s of a 64-wide matmul, 0 = peak */
    double compute_scale;    /* measured kernel time / roofline, 0 = 1 */
    double sync_skew;        /* seconds a collective waits for the last rank
                                after independent compute, 0 = none */
    double reduce_lag_bandwidth; /* gradient bytes per second of the wait the
                                    next collective has for a reduce-scatter's
                                    root (which alone reduces); 0 = none */
    double optimizer_rate;   /* parameter elements per second of smoe train's
                                update (gradient norm + AdamW); 0 = a
                                bandwidth-bound estimate */
    double dcn_reduce_bandwidth; /* a gradient reduction across hosts, the
                                    bytes its weight's gather brings from
                                    other hosts per second (its transpose
                                    on the wire is the MPI library's
                                    algorithm); 0 = dcn_bandwidth */
    double dcn_reduce_latency; /* the same per cross-host step, s (with
                                  dcn_reduce_bandwidth) */
    double dcn_link_bandwidth; /* the link the gathers and the reductions
                                  across hosts share: the bytes from other
                                  hosts it carries per second for both at
                                  once, on dcn_bandwidth's terms; 0 = each
                                  has the link to itself */
    double ici_reduce_bandwidth; /* a gradient reduction within a host, on
                                    ici_bandwidth's terms (2 x the bytes its
                                    weight's gather moves there per second);
                                    0 = ici_bandwidth */
    double ici_reduce_latency; /* the same per within-host step, s (with
                                  ici_reduce_bandwidth) */
    double gather_core_fraction; /* the part of a layer's gathers' and
                                    reductions' time that is the cores' work
                                    (the ranks' CPU time in them over their
                                    wall time at core_share; the rest they
                                    wait on each other's turns or the link);
                                    0 = all but the network's part */
    double core_share;       /* the part of a core each rank had while every
                                rank computed (its CPU time over the wall
                                time, the rates' condition); 0 = not
                                measured (sched/cores.c) */
} smoe_hw_cpu;

typedef struct smoe_hw {
    char name[64];
    smoe_hw_kind kind;
    double devices_per_chip;
    double peak_flops;       /* dense FLOP/s per chip (bf16; fp32 for cpu) */
    double fp8_peak_flops;   /* dense fp8 FLOP/s per chip; 0 = no fp8 matmuls */
    double hbm_bytes;        /* memory per chip */
    double hbm_bandwidth;    /* bytes/s per chip */
    double ici_bandwidth;    /* fast interconnect, bytes/s per chip, bidirectional */
    double ici_links;
    double ici_latency;      /* seconds per collective step */
    double devices_per_node; /* devices on the fast interconnect */
    double dcn_bandwidth;    /* slow network, bytes/s per chip, one direction */
    double dcn_latency;
    double collective_engines;
    double compute_efficiency; /* achieved / peak FLOP/s of the layers' matmul
                                  work, from a published run; 0 = 1 (roofline) */
    double gemm_efficiency;    /* achieved / peak FLOP/s of a large dense matmul
                                  (with compute_efficiency: the dense
                                  projections, MLPs, router and head; the
                                  attention kernel (but with
                                  attention_efficiency) and routed experts
                                  keep compute_efficiency); 0 =
                                  compute_efficiency */
    double attention_efficiency; /* achieved / peak FLOP/s of the attention
                                  kernel over the blocks it computes (with
                                  compute_efficiency); 0 = compute_efficiency */
    double host_bandwidth;     /* bytes/s per chip between the chip and its
                                  host, one direction (activations offloaded
                                  by a remat policy); 0 = not known */
    double permute_bandwidth;  /* bytes/s of routed rows the MoE dispatch and
                                  combine (sort, permute) move on the collective
                                  engines; 0 = that work is not modelled */
    smoe_hw_cpu cpu;         /* kind SMOE_HW_CPU only: the CPU model */
} smoe_hw;

/* Read a profile file: its name, its kind (into smoe_hw_kind), numbers
 * each in its range (docs/formats.md, "Hardware profiles"); a key of the
 * CPU model (smoe_hw_cpu, progress included) in a tpu or gpu profile is
 * refused; a cpu profile must hold `complete: true` (smoe_hw_write's last
 * line), else it is refused as cut short, naming the file. Errors carry
 * file:line:col. */
SMOE_MUST_CHECK
smoe_status smoe_hw_load(const char *path, smoe_hw *hw, smoe_err *err);
/* The same from text; `name` is the file named in locations. */
SMOE_MUST_CHECK
smoe_status smoe_hw_load_text(const char *text, const char *name, smoe_hw *hw, smoe_err *err);
/* A comment written after a profile key (what was measured). */
typedef struct smoe_hw_note {
    const char *key, *text;
} smoe_hw_note;
/* Write hw as a profile file that smoe_hw_load reads back to the same
 * values (6 significant digits): name, kind, every required key, and each
 * optional key that is set (non-zero), in the loader's order, with the note
 * of `notes` (an array ended by a NULL key; may be NULL) that names the key;
 * then `trailer` (comment lines, may be NULL) and last `complete: true`,
 * the line a cpu profile must end with (the loader refuses one without it:
 * a file cut short). The one schema is the loader's key table. SMOE_EIO
 * when f has an error. */
SMOE_MUST_CHECK
smoe_status smoe_hw_write(FILE *f, const smoe_hw *hw, const smoe_hw_note *notes,
                          const char *trailer, smoe_err *err);

/* ---- simulation scenarios (configs/scenarios/NAME.yml) ---- */
#define SMOE_SCN_MAX_OVERRIDES 96 /* a published run's keys fit */
#define SMOE_SCN_MAX_VARIANTS 8
#define SMOE_SCN_MAX_SOURCES 32
/* Bounds shared by scenario files and smoe sim's options. */
#define SMOE_SIM_MAX_DEVICES (1LL << 30)
#define SMOE_SIM_MAX_SLICES (1LL << 20)
#define SMOE_SIM_MAX_BATCH (1LL << 20)
#define SMOE_SIM_MAX_SEQ (1LL << 24)
/* The prefetch depth (layers ahead) of scenario files, smoe sim's and
 * smoe train's --prefetch-depth and schedule files: the one bound. */
#define SMOE_SIM_MAX_DEPTH 64

typedef struct smoe_scn_numbers { /* reported figures, < 0 = not reported */
    double step_ms, exposed_gather_ms, peak_hbm_gib;
} smoe_scn_numbers;

typedef struct smoe_scn_variant {
    const char *name;            /* schedule name, e.g. prefetch_ep_as_dp */
    const char *rules;           /* custom rule set, or NULL */
    int n_overrides;
    const char *overrides[SMOE_SCN_MAX_OVERRIDES];
    const char *override_where[SMOE_SCN_MAX_OVERRIDES]; /* each one's FILE:LINE:COL */
} smoe_scn_variant;

/* A declared reading (readings: in a scenario): a fact the scenario's
 * source does not state, with every value its public sources allow. */
#define SMOE_SCN_MAX_FACTS 5
#define SMOE_SCN_MAX_READINGS 4  /* values per fact */
#define SMOE_SCN_MAX_COMBOS 32   /* combinations of all facts' values */
typedef enum smoe_scn_fact_key {
    SMOE_FACT_SEQ,          /* seq_len */
    SMOE_FACT_BATCH,        /* per_device_batch */
    SMOE_FACT_DTYPE_BYTES,  /* dtype_bytes: the stored weights' bytes */
    SMOE_FACT_MX_GATHER,    /* maxtext_gather_dtype: bytes (4 fp32, 2 bf16, 0 stored) */
    SMOE_FACT_REDUCE_ENGINE /* reduce_engine: SMOE_REDUCE_SHARED or _OWN */
} smoe_scn_fact_key;
#define SMOE_FACT_KINDS 5
typedef struct smoe_scn_fact {
    smoe_scn_fact_key key;
    int n;
    double value[SMOE_SCN_MAX_READINGS];
    const char *text[SMOE_SCN_MAX_READINGS];   /* as written */
    const char *source[SMOE_SCN_MAX_READINGS];
} smoe_scn_fact;
/* The scenario-file name of a fact ("seq_len", ...). */
const char *smoe_scn_fact_name(smoe_scn_fact_key k);
/* A maxtext_gather_dtype value (scenario key, reading, --maxtext-gather-dtype):
 * "stored" (what fsdp_prefetch.py gathers: the parameters as stored) 0,
 * "fp32" 4, "bf16" 2 bytes per element; -1 for anything else. */
#define SMOE_MX_GATHER_NAMES "stored, fp32 or bf16"
int smoe_mx_gather_bytes(const char *name);
/* Where the simulator puts the gradient reductions (sched.h:
 * smoe_sim_shape.reduce_engine): the profile's rule, the exchanges' engine,
 * or an engine of their own. */
enum { SMOE_REDUCE_PROFILE = 0, SMOE_REDUCE_SHARED = 1, SMOE_REDUCE_OWN = 2 };
/* A reduce_engine value (scenario key, reading, --reduce-engine): "shared"
 * or "own" (SMOE_REDUCE_*); -1 for anything else. */
#define SMOE_REDUCE_ENGINE_NAMES "shared or own"
int smoe_reduce_engine_of(const char *name);

typedef struct smoe_scenario {
    const char *file;
    const char *description;
    const char *model, *rules, *hardware;
    int64_t devices, slices;
    smoe_loc devices_loc, slices_loc; /* where they are written (line 0: absent) */
    int n_overrides;
    const char *overrides[SMOE_SCN_MAX_OVERRIDES];
    const char *override_where[SMOE_SCN_MAX_OVERRIDES]; /* each one's FILE:LINE:COL */
    int64_t batch, seq;
    const char *remat;           /* full | none | save-dot-products */
    int dtype_bytes;             /* 0: from the config's weight_dtype */
    int prefetch_depth;
    int mx_gather_bytes;         /* maxtext_gather_dtype: 4 (fp32), 2 (bf16), 0 stored or absent */
    int reduce_engine;           /* reduce_engine: 1 shared, 2 own, 0 absent (the profile's) */
    int64_t dtype_bytes64, prefetch_depth64;
    int n_sources;               /* sources: {KEY: where its value comes from} */
    const char *source_key[SMOE_SCN_MAX_SOURCES], *source_text[SMOE_SCN_MAX_SOURCES];
    int n_variants;
    smoe_scn_variant variants[SMOE_SCN_MAX_VARIANTS];
    int n_reported;
    const char *reported_name[SMOE_SCN_MAX_VARIANTS + 4];
    smoe_scn_numbers reported[SMOE_SCN_MAX_VARIANTS + 4];
    int n_facts;                 /* readings: the unstated facts */
    smoe_scn_fact facts[SMOE_SCN_MAX_FACTS];
} smoe_scenario;

/* Read a scenario file into an arena (strings live there); every number
 * is range-checked with its file:line:col. */
SMOE_MUST_CHECK
smoe_status smoe_scenario_load(smoe_arena *a, const char *path, smoe_scenario *s,
                               smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_scenario_load_text(smoe_arena *a, const char *text, const char *name,
                                    smoe_scenario *s, smoe_err *err);

#ifdef __cplusplus
}
#endif
#endif
