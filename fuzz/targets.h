/* smoe's fuzz targets: one function per hostile-input entry point, shared by
 * the libFuzzer wrappers (fuzz/fuzz_*.c, clang -fsanitize=fuzzer) and the
 * regression replay driver (tests/fuzz_replay.c, a normal build), so a
 * crash file found by the fuzzer replays through exactly the same code.
 *
 * Each function takes arbitrary bytes, never crashes, leaks or reads out of
 * bounds on any input (errors are expected and ignored), and aborts only
 * when a result breaks an invariant the library promises (a bug). Bundled
 * configs are found through smoe_config_default_dir() ($SMOE_CONFIG_DIR, or
 * configs/ next to or above the executable). Not thread-safe. */
#ifndef SMOE_FUZZ_TARGETS_H
#define SMOE_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

typedef int (*smoe_fuzz_fn)(const uint8_t *data, size_t size);

/* YAML text -> node tree (smoe_yaml_load_string), then every node typed and
 * compared with itself. */
int smoe_fuzz_yaml(const uint8_t *data, size_t size);
/* Lines of "key=value" overrides -> smoe_config_load on the bundled base,
 * then the mesh on 16 devices. */
int smoe_fuzz_overrides(const uint8_t *data, size_t size);
/* logical_axis_rules text (first byte picks rule-merge flag, rule file and
 * expert parallelism) -> config (model deepseek2-16b) -> smoe_plan_build on
 * 16 devices (rule resolution and both gather plans) -> local layouts. */
int smoe_fuzz_rules(const uint8_t *data, size_t size);
/* logical_shardings.json text -> smoe_params_load_json_text, then every
 * entry resolved with deepseek2-16b's rules and planned on 16 devices. */
int smoe_fuzz_params_json(const uint8_t *data, size_t size);

/* checkpoint manifest.json text -> tr_manifest_parse (target_manifest.c),
 * then its consistency and a write/parse round trip. */
int smoe_fuzz_manifest(const uint8_t *data, size_t size);

/* Target by name ("yaml", "overrides", "rules", "params_json", "manifest"),
 * or NULL. */
smoe_fuzz_fn smoe_fuzz_target(const char *name);
/* Frees what the targets cache between calls (the rules config). */
void smoe_fuzz_cleanup(void);

#endif
