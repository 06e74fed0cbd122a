/* smoe command-line interface: shared helpers of the subcommands. The CLI
 * is the only code that calls exit(); errors print one line
 * "smoe: <where>: <message>" and exit with status SMOE_EXIT_USAGE (bad
 * input) or SMOE_EXIT_FAIL (smoe_exit in core.h lists every status). */
#ifndef SMOE_CLI_H
#define SMOE_CLI_H

#include "smoe/comm.h"
#include "smoe/config.h"
#include "smoe/core.h"
#include "smoe/dev.h"
#include "smoe/dtype.h"
#include "smoe/plan.h"
#include "smoe/plot.h"

#include <getopt.h>
#include <stdio.h>

/* Options shared by plan, sim and train. */
typedef struct cli_common {
    const char *base, *model, *rules, *params;
    int64_t devices, slices;
    int dtype_bytes;
    int dtype_bytes_set;        /* --dtype-bytes given */
    smoe_dtype gather_dtype;    /* --gather-dtype (default fp32) */
    int64_t int8_block;         /* --int8-block (0: the default) */
    smoe_dtype int8_fallback;   /* --int8-fallback (SMOE_DT_INT8: none, refuse) */
    int json;
    int n_kv;
    const char **kv; /* KEY=VALUE overrides */
    const char **kv_where; /* NULL, or [n_kv]: where each came from (NULL:
                              the command line; smoe_config_opts) */
    const char *devices_where; /* where --devices came from when not the
                                  command line (a scenario's file:line:col) */
} cli_common;

/* getopt_long entries of the common options; ids start at 1000. */
enum {
    OPT_BASE = 1000, OPT_MODEL, OPT_RULES, OPT_PARAMS, OPT_DEVICES, OPT_SLICES,
    OPT_DTYPE_BYTES, OPT_JSON, OPT_GATHER_DTYPE, OPT_INT8_BLOCK, OPT_INT8_FALLBACK,
    OPT_COMMON_END
};
#define CLI_COMMON_LONGOPTS                                   \
    { "base", required_argument, 0, OPT_BASE },               \
    { "model", required_argument, 0, OPT_MODEL },             \
    { "rules", required_argument, 0, OPT_RULES },             \
    { "params", required_argument, 0, OPT_PARAMS },           \
    { "devices", required_argument, 0, OPT_DEVICES },         \
    { "slices", required_argument, 0, OPT_SLICES },           \
    { "dtype-bytes", required_argument, 0, OPT_DTYPE_BYTES }, \
    { "json", no_argument, 0, OPT_JSON }
/* The gather dtype options, for the subcommands that follow them (handled
 * by cli_common_opt; cli_build_plan applies them to the plan). */
#define CLI_GATHER_LONGOPTS                                   \
    { "gather-dtype", required_argument, 0, OPT_GATHER_DTYPE }, \
    { "int8-block", required_argument, 0, OPT_INT8_BLOCK },     \
    { "int8-fallback", required_argument, 0, OPT_INT8_FALLBACK }
#define CLI_GATHER_USAGE                                                          \
    "  --gather-dtype T   what the weight gathers move: fp32 (default), bf16, or\n"   \
    "                     int8 (blockwise, one fp32 scale per block)\n"             \
    "  --int8-block N     int8 elements per scale along the last dim (default 32)\n" \
    "  --int8-fallback T  int8: gather a weight whose shards cannot hold whole\n"    \
    "                     blocks in T (fp32 or bf16) instead of refusing it\n"
/* Parse one gather dtype option into c: 1 if it was one, 0 if not, -1 on
 * a bad value (err says which). */
int cli_gather_opt(cli_common *c, int opt, const char *arg, smoe_err *err);
/* Check c's gather dtype options together and apply them to plan p
 * (smoe_plan_set_wire); err names the argument. */
SMOE_MUST_CHECK
smoe_status cli_apply_wire(const cli_common *c, smoe_plan *p, smoe_err *err);
/* Defaults (devices 0 = not given, slices 1, dtype 4). */
void cli_common_init(cli_common *c);
/* Handle one common option; returns 1 if it was one. */
int cli_common_opt(cli_common *c, int opt, const char *arg);
/* Collect KEY=VALUE positionals argv[optind..); anything else dies. */
void cli_collect_overrides(cli_common *c, int argc, char **argv, int first);

/* The exit status of err: 2 for bad input, 1 otherwise. */
int cli_exit_code(const smoe_err *err);
/* Print err: one line "smoe: <where>: <message>" on stderr. */
void cli_print_err(const smoe_err *err);
/* The one way a command dies: print err and exit (cli_exit_code). Under
 * MPI (cli_die_under registered the runtime) rank 0 alone prints, every
 * rank having reached the same verdict, and the runtime is finalized
 * first, so the ranks leave together. */
_Noreturn void cli_die(const smoe_err *err);
struct smoe_rt;
void cli_die_under(struct smoe_rt *rt);
/* Start the MPI runtime and register it with cli_die_under; NULL (the
 * reason printed) when it cannot start. */
struct smoe_rt *cli_rt_start(int *argc, char ***argv);
_Noreturn void cli_usage_error(const char *where, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print "smoe: where: what: strerror(errno)" and exit 1 (an I/O error). */
_Noreturn void cli_io_error(const char *where, const char *what);
/* malloc that dies with a message when out of memory (CLI-lifetime data). */
void *cli_alloc(size_t n);
/* Flush stdout and check it for write errors: exit 1 naming it. */
void cli_check_stdout(void);
/* Strict integer option value in [lo, hi]; dies naming the option. */
int64_t cli_int(const char *opt, const char *val, int64_t lo, int64_t hi);
double cli_float(const char *opt, const char *val, double lo, double hi);
/* The one reader of every byte-count flag (sim --hbm-budget, train
 * --hbm-budget and --max-memory): smoe_parse_bytes (4096, 512M, 16GB,
 * 1.5GiB), at least 1 (each is memory a run must fit in); SMOE_EINVAL
 * naming the argument as typed otherwise. cli_bytes: the same, exiting. */
SMOE_MUST_CHECK
smoe_status cli_parse_bytes(const char *opt, const char *val, int64_t *out, smoe_err *err);
int64_t cli_bytes(const char *opt, const char *val);
/* What every byte-count flag says when its value does not parse. */
#define CLI_BYTES_EXPECTED "expected a byte count such as 4096, 512M, 16GB or 1.5GiB"
/* Format a byte count as "1.5 GiB". */
const char *cli_fmt_bytes(double b, char *buf, size_t n);

/* The file of an option's NAME|FILE: a NAME is the bundled
 * configs/SUB/NAME.yml (written into buf; --hardware: SUB hardware,
 * --scenario: scenarios), a path (a '/' or .yml/.yaml) is itself. */
const char *cli_named_file(const char *arg, const char *sub, char *buf, size_t n);
/* SMOE_EINVAL naming `where` when the profile `path` of --hardware `arg`
 * cannot be read; for cpu-mpi (this machine's, which smoe does not ship)
 * the message says how to measure it. The one check of smoe sim and
 * smoe train --hbm-budget. */
SMOE_MUST_CHECK
smoe_status cli_hardware_check(const char *arg, const char *path, const char *where,
                               smoe_err *err);
/* Whether one of the n KEY=VALUE strings sets key, or its MAXTEXT_<KEY>
 * environment variable does (the config loader applies both). */
int cli_kv_sets(const char *const *kv, int n, const char *key);
/* The config loader's options from common options (base, model, rules,
 * KEY=VALUE overrides, the environment's). */
smoe_config_opts cli_config_opts(const cli_common *c);
/* Load the config from common options (dies on error). */
smoe_config *cli_load_config(const cli_common *c);
/* Build the plan (dies on error). */
smoe_plan *cli_build_plan(const cli_common *c, const smoe_config *cfg);

int cmd_plan(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sim(int argc, char **argv);

struct smoe_train_result;
/* Shared by the JSON outputs (common_json.c): {"axis_names": [...],
 * "shape": {AXIS: SIZE}}, and printing a document to f (which frees it). */
struct cJSON;
struct cJSON *cli_json_mesh(const smoe_mesh *m);
/* A JSON string of text that may not be UTF-8 (invalid bytes as \xNN). */
struct cJSON *cli_json_string(const char *s);
/* Add item to object obj under a key that may not be UTF-8 (as above). */
void cli_json_add(struct cJSON *obj, const char *key, struct cJSON *item);
void cli_json_print(FILE *f, struct cJSON *root);

#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x) /* a macro's value as a string literal */

/* The interleaved schedules of a training run, summarized apiece: n = 0
 * (one schedule), the three of --compare, or the files of repeated
 * --schedule; key: each one's JSON key and label. */
typedef struct cli_runs {
    int n, compare;
    const char *key[8]; /* SMOE_TRAIN_MAX_SCHEDULES */
    const char *progress; /* the progress thread's setting (smoe_rt_progress_note), or NULL */
    const char *priority; /* its priority (smoe_rt_progress_priority), or NULL */
    const char *slices;   /* the slices and their hosts (smoe_rt_slices_note), or NULL */
    int legacy;           /* n = 0: the one schedule gathers by the legacy plan */
    const char *device;   /* --device: "emul", "cuda"; NULL on the CPU */
    int matmul_bf16;      /* --matmul-dtype bf16 */
} cli_runs;

/* --device (train_device.c): the kernel table a one-rank training steps on */
enum { CLI_DEVICE_CPU, CLI_DEVICE_EMUL, CLI_DEVICE_CUDA };
struct smoe_train_opts;
typedef struct cli_device {
    int kind;
    smoe_dev dev;
    smoe_dev_stream *s;
    struct smoe_kq *kq;
    struct smoe_eq *eq;
    /* a launch of several ranks (CUDA): the NCCL communicator's transfer
     * streams, its queue on the first, and the communicator */
    smoe_dev_stream *xs, *res, *red;
    struct smoe_kq *xkq;
    smoe_comm nc;
    int local;            /* the run's communicator is a single-rank one made here */
} cli_device;
int cli_device_parse(const char *arg);
const char *cli_device_name(int kind);
struct smoe_rt;
/* A run's kernel table (into o) and communicator (into *comm): on the CPU
 * the MPI runtime's; on a device one rank over the single-rank
 * communicator, or a launch of several CUDA ranks over NCCL on top of the
 * runtime's (collective), each on the GPU of its place on its host; a
 * launch of several emul ranks is refused. Each failure ends the run. */
void cli_device_begin(cli_device *d, int kind, int bf16, struct smoe_rt *rt,
                      const smoe_mesh *mesh, struct smoe_train_opts *o, smoe_comm *comm);
/* What begin made, freed; the queue's first failure ends the run. */
void cli_device_end(cli_device *d, smoe_comm *comm);

/* Output of training runs: JSON (train_json.c) and text (train_text.c). */
void train_print_json(FILE *f, const smoe_plan *p, const struct smoe_train_result *res,
                      const cli_runs *runs, int reduce_dtype);
struct smoe_train_opts;
struct smoe_rt;
void print_result(const struct smoe_train_opts *o, struct smoe_rt *rt,
                  const struct smoe_train_result *r, const cli_runs *runs, int depth);
/* --compare-exchange's text: the all-to-all run r[0] beside the ring run r[1]. */
void print_exchange(const struct smoe_train_result *r);
/* The schedule names of --compare ("no-prefetch"; JSON key "no_prefetch"). */
const char *train_mode_label(int mode, const cli_runs *runs);
const char *train_mode_key(int mode);
/* Steps left out of the interleaved summaries (the first round). */
int64_t train_warmup_steps(const struct smoe_train_result *r, const cli_runs *runs);
struct smoe_sim_result;
struct smoe_sim_point;
/* Draw a --trace file's timelines (one row per rank) as an SVG
 * (trace_json.c; dies on error). */
void cli_plot_trace(const char *trace_path, const char *svg_path);
/* Read a trace file into up to max smoe_trace objects (one per process
 * row; the caller frees them); returns how many (dies on error). */
struct smoe_trace;
int cli_read_trace(const char *trace_path, struct smoe_trace **t, int max);
/* Per-layer compute from a trace file (cli_trace_layers; dies on error). */
void cli_trace_layer_times(const char *trace_path, double med[2][2], int count[2][2]);
/* The pure side (trace_json_read.c: cJSON, core and sched only, so the
 * fuzz target compiles it in). Parse a trace's text (n bytes; `name`
 * names it in errors) into up to max (at most CLI_TRACE_ROWS) traces, one
 * per process row in order of appearance, *rows of them (the caller frees
 * them; none on error). SMOE_EINVAL at name:line:col with the event's
 * index and key for a number out of range or text that is not a trace;
 * SMOE_ENOMEM "out of memory reading the file". */
#define CLI_TRACE_ROWS 64
SMOE_MUST_CHECK
smoe_status cli_trace_parse_text(const char *text, size_t n, const char *name,
                                 struct smoe_trace **t, int max, int *rows, smoe_err *err);
/* Per-layer compute in traces t[0..n) (spans named "fwd L<n> dense|moe",
 * "bwd L<n> ..." as smoe train and smoe sim write them, less the expert
 * exchanges inside them): the median seconds med[pass][kind] (pass 0
 * forward, 1 backward; kind 0 dense, 1 MoE) over count[pass][kind] spans
 * (a kind's first 4096). O(n log n) in the spans; SMOE_ENOMEM. */
SMOE_MUST_CHECK
smoe_status cli_trace_layers(struct smoe_trace *const *t, int n, double med[2][2],
                             int count[2][2], smoe_err *err);
/* Prefetch schedule files (the format is sched's: smoe_schedule_json,
 * smoe_schedule_read): write (common_json.c) dies with one line on error;
 * read is smoe_schedule_read. */
struct smoe_schedule;
void cli_schedule_write(const char *path, const struct smoe_schedule *s, const char *hardware);
SMOE_MUST_CHECK
smoe_status cli_schedule_read(const char *path, struct smoe_schedule **out, smoe_err *err);
/* The output file of option `opt` (--trace PATH ...), written whole or
 * not at all (smoe_out); a file that cannot be created is one line naming
 * the argument, exit 1. */
smoe_out *cli_out_open(const char *opt, const char *path);
/* The end of its writer, which returned s (smoe_out_finish): on any
 * failure one line naming the argument (the OS error's text), exit 1. */
void cli_out_finish(smoe_out *o, smoe_status s, smoe_err *err, const char *opt,
                    const char *path);
/* Whether the output `path` of option `opt` can be written (made in its
 * directory, or an existing special file opened as it is): SMOE_EIO
 * "argument 'OPT PATH': cannot write the file: REASON" otherwise. For
 * outputs written after long work, checked before it (out_probe.c). */
SMOE_MUST_CHECK
smoe_status cli_probe_output(const char *path, const char *opt, smoe_err *err);
/* JSON output of smoe sim (sim_json.c): per schedule its name, the
 * executor it simulates (smoe_sim_executor_name) and its result. */
struct smoe_sim_shape;
/* smoe sim's rows under every combination of a scenario's readings
 * (sim_readings.c prints them; cmd_sim.c runs them). */
#define SIM_MAX_ROWS 12
typedef struct sim_reading_rows {
    int idx[SMOE_SCN_MAX_FACTS]; /* each fact's value index; -1: the command line's */
    int n;
    char name[SIM_MAX_ROWS][32];
    double step_ms[SIM_MAX_ROWS], exposed_ms[SIM_MAX_ROWS], peak_gib[SIM_MAX_ROWS];
} sim_reading_rows;
typedef struct sim_readings {
    int n; /* combinations; 0: the scenario declares none */
    sim_reading_rows r[SMOE_SCN_MAX_COMBOS];
} sim_readings;
void sim_print_readings(FILE *f, const smoe_scenario *sc, const sim_readings *rd);
enum { SIM_FIG_STEP, SIM_FIG_EXPOSED, SIM_FIG_PEAK, SIM_FIGS };
/* Figure `which` (SIM_FIG_*) of row `row`. */
double sim_reading_fig(const sim_reading_rows *r, int row, int which);
/* The smallest and largest of a row's figure over every combination. */
void sim_reading_envelope(const sim_readings *rd, int row, int which, double *lo, double *hi);
/* One row of smoe sim's report: a schedule, the executor it simulates,
 * its result (have: it ran). */
typedef struct sim_row {
    const char *name;
    smoe_sim_executor exec; /* what the row simulates */
    smoe_sim_result r;
    int have;
} sim_row;
/* The command line, parsed, and the scenario's defaults under it. */
typedef struct sim_args {
    cli_common c;
    const char *scenario, *hardware, *remat, *trace_path, *out, *plot_path, *profile, *sched_out;
    int whole, depth, sweep, calib, pthread;
    int mx_gather_bytes; /* --maxtext-gather-dtype (or the scenario's); 0: not given,
                            -1: stored */
    int reduce_engine;   /* --reduce-engine (or the scenario's): SMOE_REDUCE_* */
    int fixed[SMOE_FACT_KINDS]; /* the readings' facts the command line set */
    int64_t batch, seq, budget;
    smoe_scenario sc;
    smoe_arena *arena;
    const char **scn_over; /* the scenario's overrides, then the command line's */
    const char **scn_where; /* [each] its FILE:LINE:COL, NULL: the command line */
    char dev_where[400];
} sim_args;
/* sim_args.c: the command line into a (1: it asked for the help, printed);
 * the scenario's defaults where the command line set none; the profile
 * --hardware names and the training shape as given (sh, unresolved). */
int sim_parse_args(sim_args *a, int argc, char **argv);
void sim_apply_scenario(sim_args *a);
void sim_load_hw(sim_args *a, smoe_hw *hw, char *hwf_buf, size_t cap, const char **hwf,
                 smoe_sim_shape *sh);
/* What the output says of the run's own configuration (sim_build fills
 * it): its kernel-tuning keys away from MaxText's default
 * (smoe_sim_tuned_keys) and whether it has scan_layers=false. */
typedef struct sim_run_facts {
    char tuned[1024];
    int unscanned;
} sim_run_facts;
/* The plan and step model of c's configuration with a variant's `rules`
 * (may be NULL) and `extra` keys (where each is written: `extra_where`, may
 * be NULL) (sim_build.c). The shape's unset parts (0)
 * come from the config: per_device_batch_size, max_target_length and the
 * keys the step model reads (smoe_sim_keys: the dtypes, remat_policy unless
 * --remat or the scenario chose); the plan is sized in the stored dtype.
 * `facts` (may be NULL) receives the configuration's. Dies on a refusal. */
smoe_sim_model *sim_build(const cli_common *c, const char *rules, const char *const *extra,
                          const char *const *extra_where, int n_extra, const smoe_hw *hw,
                          smoe_sim_shape *shp, smoe_plan **plan_out, sim_run_facts *facts);
/* --calibrate (sim_calibrate.c): under mpirun, this machine measured as a
 * cpu-mpi profile written to `out` (NULL: stdout), the progress thread as
 * `pthread` asks (smoe_calib_measure); the model (default: smoe train's
 * bundled run) sets the compute measurement's shape. An exit code. */
int sim_calibrate(int argc, char **argv, cli_common *c, const char *out, int pthread);
/* smoe sim's files (sim_files.c): a schedule's timeline (one process row,
 * smoe train's lane names); --plot: the Pareto curve with smoe's uniform
 * depths marked, the readings' envelopes (sc, rd) and every timeline;
 * --schedule-out: the schedule at `depth`, or the planner's (dist) under
 * `budget` >= 0, with its predicted figures. Each dies on failure. */
smoe_trace *sim_new_trace(int pid, const char *name);
void sim_write_plot(const char *path, const smoe_sim_model *m, smoe_sim_executor own,
                    smoe_trace *const *traces, int n, const smoe_sim_point *curve, int ncurve,
                    const smoe_scenario *sc, const sim_readings *rd);
void sim_write_schedule(const char *path, const smoe_sim_model *m, smoe_sim_executor own,
                        const smoe_hw *hw, int64_t budget,
                        const unsigned char dist[][SMOE_SIM_MAX_WEIGHTS], int depth);
/* The text report's parts (sim_text.c): the schedules' table; each
 * schedule's prediction beside the scenario's reported figures; a measured
 * trace's medians (med[phase][kind] seconds over n samples); the budget
 * sweep along the planner's curve. */
void sim_print_table(const sim_row *runs, int n);
/* A line naming the rows whose peak exceeds a device's HBM (none: nothing). */
void sim_print_fit(const sim_row *runs, int n, const smoe_hw *hw);
void sim_print_reported(const smoe_scenario *sc, const sim_row *runs, int n);
void sim_print_profile(const char *path, double med[2][2], int n[2][2]);
void sim_print_sweep(const smoe_sim_point *curve, int ncurve);
/* --plot's envelope panels: one per figure, a row per schedule (its range
 * over the readings and the reported value); the number of panels, 0 when
 * the scenario declares no readings. */
typedef struct sim_plot_env {
    smoe_plot_range r[SIM_FIGS][SIM_MAX_ROWS];
    smoe_plot_ranges p[SIM_FIGS];
} sim_plot_env;
int sim_readings_plot(const smoe_scenario *sc, const sim_readings *rd, sim_plot_env *e);
/* The readings and their envelope as a JSON object (NULL when none). */
struct cJSON *sim_readings_json(const smoe_scenario *sc, const sim_readings *rd);
void sim_print_json(FILE *f, const smoe_plan *p, const smoe_hw *hw,
                    const struct smoe_sim_shape *sh, const char *tuned, const char *const *names,
                    const char *const *executors, const struct smoe_sim_result *res, int n,
                    const smoe_scenario *sc, const sim_readings *rd,
                    const struct smoe_sim_point *curve, int ncurve);
/* JSON output of a plan (plan_json.c). */
void plan_print_json(FILE *f, const smoe_plan *p);

#endif
