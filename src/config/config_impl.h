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

smoe_status cfg_map_set(smoe_arena *a, cfg_map *m, const char *key,
                        const smoe_node *v);
const smoe_node *cfg_map_get(const cfg_map *m, const char *key);
int cfg_map_index(const cfg_map *m, const char *key);

struct smoe_config {
    smoe_arena *arena;
    cfg_map values;
    smoe_rules rules;
    const char *dir;          /* directory of the base file */
    const char *files[16];    /* base chain, model, custom rule file */
    int n_files;
};

/* Convert a logical_axis_rules node into rules (arena-allocated). */
smoe_status cfg_rules_from_node(smoe_arena *a, const smoe_node *n,
                                smoe_rules *out, smoe_err *err);
/* 1 if n is a boolean scalar that reads true. */
int smoe_node_bool_value(const smoe_node *n);
/* A node that is a plain scalar with the given text (arena). */
smoe_node *cfg_scalar(smoe_arena *a, const char *text, smoe_loc loc);

#endif
