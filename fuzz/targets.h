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

/* Hardware-profile text -> smoe_hw_load_text, then a loaded profile through
 * the step model of a fixed plan under every schedule family (targets_sim.c). */
int smoe_fuzz_hwfile(const uint8_t *data, size_t size);
/* Scenario text -> smoe_scenario_load_text (targets_sim.c). */
int smoe_fuzz_scenario(const uint8_t *data, size_t size);

/* Shared by the target files: abort with a message when an invariant
 * breaks; the input as a NUL-terminated string (cut at 1 MiB; free()). */
void smoe_fuzz_check(int ok, const char *what);
char *smoe_fuzz_cstr(const uint8_t *data, size_t size);
/* deepseek2-16b with ici_expert_parallelism=2 on the bundled base, loaded
 * once (NULL if it cannot be); freed by smoe_fuzz_cleanup. */
struct smoe_config;
const struct smoe_config *smoe_fuzz_ep2_config(void);
/* Frees what targets_sim.c caches (called by smoe_fuzz_cleanup). */
void smoe_fuzz_sim_cleanup(void);

/* checkpoint manifest.json text -> ck_manifest_parse (target_manifest.c),
 * then its consistency and a write/parse round trip. */
int smoe_fuzz_manifest(const uint8_t *data, size_t size);
/* prefetch schedule file text -> smoe_schedule_parse_text (target_schedule.c),
 * then the accepted schedule's bounds and its match with the tiny model's
 * weights (smoe_schedule_match). */
int smoe_fuzz_schedule(const uint8_t *data, size_t size);
/* Frees the model target_schedule.c caches (called by smoe_fuzz_cleanup). */
void smoe_fuzz_schedule_cleanup(void);
/* --trace file text read back -> cli_trace_parse_text (target_trace.c),
 * then the per-layer compute of an accepted trace (cli_trace_layers). */
int smoe_fuzz_trace(const uint8_t *data, size_t size);

/* Target by name ("yaml", "overrides", "rules", "params_json", "manifest",
 * "hwfile", "scenario", "schedule", "trace"), or NULL. */
smoe_fuzz_fn smoe_fuzz_target(const char *name);
/* Frees what the targets cache between calls (the rules config). */
void smoe_fuzz_cleanup(void);

#endif
