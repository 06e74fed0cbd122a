/* Internal to the config module. */
#ifndef SMOE_CONFIG_IMPL_H
#define SMOE_CONFIG_IMPL_H

#include "smoe/config.h"

/* One key of the merged configuration. */
typedef struct cfg_entry {
    const char *key;
    const smoe_node *value;
} cfg_entry;

/* An ordered key -> node map living in an arena, with a hash index (a
 * MaxText base config has ~700 keys; linear lookups made loading
 * quadratic). A zeroed cfg_map is empty. */
typedef struct cfg_map {
    cfg_entry *e;
    int n, cap;
    int *slot;  /* open addressing: entry index + 1, 0 = free; nslot slots */
    int nslot;  /* power of 2, >= 2 * cap */
} cfg_map;

/* FNV-1a hash of a string (the config module's hash indexes). */
uint32_t cfg_hash(const char *s);

SMOE_MUST_CHECK
smoe_status cfg_map_set(smoe_arena *a, cfg_map *m, const char *key,
                        const smoe_node *v);
const smoe_node *cfg_map_get(const cfg_map *m, const char *key);
int cfg_map_index(const cfg_map *m, const char *key);

struct smoe_config {
    smoe_arena *arena;
    cfg_map values;
    smoe_rules rules;
    const char *dir;          /* directory of the base file */
    const char *files[24];    /* base chain (up to 17 deep), model, custom rule file */
    int n_files;
};

/* Convert a logical_axis_rules node into rules (arena-allocated). */
SMOE_MUST_CHECK
smoe_status cfg_rules_from_node(smoe_arena *a, const smoe_node *n,
                                smoe_rules *out, smoe_err *err);
/* A node that is a plain scalar with the given text (arena). */
smoe_node *cfg_scalar(smoe_arena *a, const char *text, smoe_loc loc);

/* ---- config assembly's shared steps (config.c) ---- */
int cfg_file_exists(const char *path);
/* Is a --model / --rules argument a file (a '/' or a .yml/.yaml name)? */
int cfg_looks_like_file(const char *s);
/* Record a file the config was read from (the list smoe_config_sources
 * returns): never dropped silently. */
SMOE_MUST_CHECK
smoe_status cfg_add_source(smoe_config *c, smoe_arena *a, const char *path, smoe_err *err);
/* Apply the custom_mesh_and_rule file (rules_file.c): `rules` is --rules
 * (a file or a rule-set name; NULL: the config's custom_mesh_and_rule),
 * ov_where where an override set custom_mesh_and_rule (NULL: none). */
SMOE_MUST_CHECK
smoe_status cfg_apply_rules_file(smoe_config *c, smoe_arena *a, const char *rules,
                                 const char *ov_where, smoe_err *err);

/* ---- MaxText's config fields (fields.c; table in data/maxtext/) ---- */
typedef struct cfg_field {
    const char *name;        /* "rope_factor"; nested: "lora.lora_rank" */
    const char *type;        /* e.g. "int|list[int]|none" (see fields.c) */
    const char *bounds;      /* "gt=0 le=1", "extra=forbid" or "" */
    const char *def;         /* default as JSON text, or NULL */
    const char *declared_in; /* the pydantic class, e.g. "Rope" */
} cfg_field;
typedef struct cfg_fields cfg_fields;

/* The built-in table, parsed into the arena. */
SMOE_MUST_CHECK
smoe_status cfg_fields_open(smoe_arena *a, const cfg_fields **out, smoe_err *err);
const cfg_field *cfg_field_find(const cfg_fields *t, const char *name);
int cfg_fields_count(const cfg_fields *t);
const cfg_field *cfg_field_at(const cfg_fields *t, int i);
/* Coerce v to f's type as pydantic's lax mode does (after pyconfig's
 * "none" -> None); *out is v or a new node at v's location. Errors name
 * `where` (an argument) or v's file:line:col. */
SMOE_MUST_CHECK
smoe_status cfg_field_coerce(smoe_arena *a, const cfg_fields *t, const cfg_field *f,
                             const smoe_node *v, const char *where,
                             const smoe_node **out, smoe_err *err);
/* The upstream commit the table was derived from (short). */
#define SMOE_MAXTEXT_FIELDS_COMMIT "e591f30"

/* pipeline.c: the pipeline post-fixups on the assembled config c. */
SMOE_MUST_CHECK
smoe_status cfg_pipeline_fixups(smoe_config *c, smoe_arena *a, smoe_err *err);

/* readings.c: a scenario's readings: mapping (node n) into sc. */
SMOE_MUST_CHECK
smoe_status cfg_scn_readings(smoe_arena *a, const smoe_node *n, smoe_scenario *sc, smoe_err *err);

#endif
