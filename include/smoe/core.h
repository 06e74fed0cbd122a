/* smoe core: status codes, the error struct, the allocation path, the abort
 * hook, arenas, the clock and output files. Every other module depends on this one and on nothing
 * else below it. Nothing here calls exit(); fatal invariants go through the
 * abort hook (the MPI runtime points it at MPI_Abort so no rank hangs).
 */
#ifndef SMOE_CORE_H
#define SMOE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum smoe_status {
    SMOE_OK = 0,
    SMOE_EINVAL,   /* bad input: config, flag, data file, mesh */
    SMOE_ENOMEM,   /* allocation failed or a memory budget was exceeded */
    SMOE_EIO,      /* file could not be read or written */
    SMOE_ENOTFOUND,/* a named thing (file, model, rule set, key) does not exist */
    SMOE_ECOMM,    /* a communication operation failed */
    SMOE_EINTERNAL,/* a bug: an invariant did not hold */
    SMOE_ENONFINITE/* a computation produced nan or inf (a diverged run) */
} smoe_status;

/* A source location for diagnostics. file may be NULL (then only the message
 * is printed); line/col are 1-based, 0 when unknown. */
typedef struct smoe_loc {
    const char *file;
    int line;
    int col;
} smoe_loc;

/* Error details filled by library calls that fail. Callers may pass NULL
 * when they only want the status. */
typedef struct smoe_err {
    smoe_status code;
    char where[320]; /* "file:line:col" or "argument 'x=y'", may be empty */
    char msg[768];
} smoe_err;

/* Fill e (if not NULL) and return code. fmt is printf-style. */
smoe_status smoe_err_set(smoe_err *e, smoe_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, with a source location "file:line:col" recorded in e->where. */
smoe_status smoe_err_at(smoe_err *e, smoe_status code, smoe_loc loc,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Same, with a free-form place ("argument '--devices'"). */
smoe_status smoe_err_in(smoe_err *e, smoe_status code, const char *where,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Text from a file, fit for a one-line message: at most max bytes of s
 * into buf (n bytes), each byte outside printable ASCII (a newline, an
 * escape sequence, UTF-8) as the four characters \xNN; returns buf. */
const char *smoe_err_quote(const char *s, size_t max, char *buf, size_t n);
/* "where: msg" or just "msg" into buf; returns buf. */
const char *smoe_err_format(const smoe_err *e, char *buf, size_t n);
const char *smoe_status_name(smoe_status s);
/* Format a location as "file:line:col" into buf. */
const char *smoe_loc_format(smoe_loc loc, char *buf, size_t n);

/* Every function whose status can report a failure is declared
 * SMOE_MUST_CHECK: a caller that drops the status gets a warning (an error
 * under -DSMOE_WERROR=ON; a (void) cast does not silence it). A call that
 * cannot fail by construction says so with SMOE_ASSERT(call == SMOE_OK)
 * and a comment. Functions that cannot fail, or that abort the job on
 * failure (the runtime's collectives), return void instead. */
#define SMOE_MUST_CHECK __attribute__((warn_unused_result))

/* ---- process exit statuses: the one list. The CLI exits with them; the
 * runtime hands them to MPI_Abort (so mpirun returns them). ---- */
typedef enum smoe_exit {
    SMOE_EXIT_OK = 0,
    SMOE_EXIT_FAIL = 1,     /* a run or an output failed (I/O, divergence, nan) */
    SMOE_EXIT_USAGE = 2,    /* bad input: flags, configs, data files, budgets */
    SMOE_EXIT_ASSERT = 70,  /* an invariant failed (SMOE_ASSERT) under MPI */
    SMOE_EXIT_MPI = 71,     /* an MPI call failed */
    SMOE_EXIT_NOMEM = 72,   /* out of memory where every rank must stop */
    SMOE_EXIT_COMM = 73,    /* a collective phase failed on some rank */
    SMOE_EXIT_TIMEOUT = 75, /* a wait outlasted the communication timeout */
    SMOE_EXIT_TERM = 143    /* terminated by the launcher (128 + SIGTERM) */
} smoe_exit;

/* ---- trace lanes: the rows of a timeline, one list for the simulator's
 * predicted traces and the runtime's measured ones ---- */
typedef enum smoe_lane {
    SMOE_LANE_COMPUTE = 0, /* kernels: layers, head, optimizer */
    SMOE_LANE_GATHER = 1,  /* FSDP all-gathers, issue to completion */
    SMOE_LANE_COMM = 2,    /* expert all-to-alls, gradient reductions */
    SMOE_LANE_WAIT = 3,    /* exposed waits and un-prefetched gathers */
    SMOE_LANE_DEVICE = 4,  /* a device's kernels of the compute lane's calls */
    SMOE_LANES = 5
} smoe_lane;
/* A lane's row name in traces ("FSDP gathers"); NULL outside the list. */
const char *smoe_lane_name(int lane);

/* ---- allocation: every allocation of the library goes through here ---- */
void *smoe_malloc(size_t n);
void *smoe_calloc(size_t count, size_t size); /* overflow-checked */
void *smoe_realloc(void *p, size_t n);
char *smoe_strdup(const char *s); /* a copy of s; NULL when out of memory */
void smoe_free(void *p);
/* A zeroed slab of `bytes` (a state class's one block); large slabs are
 * mapped with huge pages asked for. Freed with smoe_slab_free and the same
 * size. NULL when out of memory (or a test's counted failure). */
void *smoe_slab_alloc(size_t bytes);
void smoe_slab_free(void *p, size_t bytes);
/* Count-limited failure for tests: the N-th allocation from now (1-based)
 * and every later one fail; 0 disables. */
void smoe_alloc_fail_after(long n);

/* ---- invariants ---- */
typedef void (*smoe_abort_fn)(const char *msg);
/* Install the function called when SMOE_ASSERT fails (default: print and
 * abort()). Returns the previous hook. */
smoe_abort_fn smoe_set_abort_hook(smoe_abort_fn fn);
void smoe_assert_fail(const char *expr, const char *file, int line);
#define SMOE_ASSERT(c) \
    do { if (!(c)) smoe_assert_fail(#c, __FILE__, __LINE__); } while (0)

/* ---- arena: many small allocations freed together (plans, configs) ---- */
typedef struct smoe_arena smoe_arena;
smoe_arena *smoe_arena_new(size_t chunk_bytes);
void smoe_arena_free(smoe_arena *a);
/* Zeroed, 16-byte aligned; NULL when out of memory. */
void *smoe_arena_alloc(smoe_arena *a, size_t n);
char *smoe_arena_strdup(smoe_arena *a, const char *s);
char *smoe_arena_strndup(smoe_arena *a, const char *s, size_t n);
char *smoe_arena_printf(smoe_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- small helpers ---- */
/* Strict integer/float parsing: whole string, no overflow. YAML-style
 * underscores between digits ("10_000") are accepted. */
int smoe_parse_i64(const char *s, int64_t *out);
int smoe_parse_f64(const char *s, double *out);
/* A byte count: a non-negative number (integer or decimal: digits with at
 * most one '.' between digits, no sign or exponent; underscores as
 * above) and an optional binary unit K, M, G or T (powers of 1024), each
 * also written KB or KiB (any case): "4096", "512M", "16GB", "1.5GiB".
 * The result is rounded to whole bytes and must stay below 2^63. The one
 * parser of every byte-count flag. Returns 0 on success, -1 otherwise. */
int smoe_parse_bytes(const char *s, int64_t *out);
/* Monotonic clock in seconds. */
double smoe_now(void);
/* CPU time in seconds: of the calling thread, and of the whole process
 * (every thread) split into user and kernel time. */
double smoe_thread_cpu(void);
void smoe_process_cpu(double *user, double *sys);
/* The 1-based line:col of `at` inside `text` (which starts at line 1). */
smoe_loc smoe_text_loc(const char *file, const char *text, const char *at);
/* Read a whole file into a NUL-terminated buffer (smoe_free); *len gets
 * its size (may be NULL). The one reader of smoe's input files: a file
 * longer than `max` bytes is refused (SMOE_EINVAL naming the file and the
 * cap) without reading it (a regular file) or after max + 1 bytes (a pipe,
 * /dev/zero), so memory stays bounded; SMOE_ENOMEM "out of memory reading
 * the file", SMOE_EIO / SMOE_ENOTFOUND, each naming the path. */
SMOE_MUST_CHECK
smoe_status smoe_read_file_max(const char *path, size_t max, char **out, size_t *len,
                               smoe_err *err);
/* ---- the size caps of smoe's input files: the one list ----
 * Rule: a cap is a multiple of the largest real file of its kind (the
 * largest that smoe writes, or that MaxText ships), so no real input comes
 * near it, while a runaway file is refused before a reader spends memory
 * on it (a JSON tree costs several times its text). Whole MiB. */
/* YAML: base, model, rules, --hardware, --scenario files; about 50x
 * MaxText's base.yml, the largest config there is. */
#define SMOE_MAX_YAML_BYTES ((size_t)4 << 20)
/* --params (MaxText's logical_shardings.json): about 100x the largest
 * golden dump (tests/data/maxtext). */
#define SMOE_MAX_PARAMS_BYTES ((size_t)16 << 20)
/* --schedule: 3x the largest schedule smoe sim writes for a bundled model
 * (DeepSeek at the simulator's 512-layer limit, every weight gathered in
 * quarters: four times the gathers of its whole-weight plans). Every rank
 * parses it. */
#define SMOE_MAX_SCHEDULE_BYTES ((size_t)32 << 20)
/* A checkpoint's manifest.json: the config and weight list (tens of KiB)
 * plus one line per rank's shard: room for about 100,000 ranks. */
#define SMOE_MAX_MANIFEST_BYTES ((size_t)16 << 20)
/* A --trace file read back (smoe sim --profile, smoe train --plot): it
 * grows with a run's steps x ranks; over ten times the largest smoe sim
 * writes (512 layers of DeepSeek under every schedule), thousands of
 * rank-steps of a training run. The reader keeps the text and its spans
 * (about twice the file). */
#define SMOE_MAX_TRACE_BYTES ((size_t)256 << 20)

/* ---- output files: written whole or not at all (outfile.c) ----
 * Every output file smoe writes goes through these. smoe_out_open creates a
 * temporary beside path (path.tmp.XXXXXX, unique per writer) that the
 * caller writes through smoe_out_file; smoe_out_commit flushes, fsyncs
 * and renames it onto path, which until then is the old file whole (or
 * absent). Of two writers of one path each commits its own complete file;
 * path holds the later one. A path that is not a regular file (/dev/null,
 * a FIFO) is written in place; a symbolic link's target is replaced.
 * `what` names the file in errors ("the trace": "PATH: cannot write the
 * trace: No space left on device (the file is unchanged)", or "(not
 * created)" where there was none; SMOE_EIO with the first OS error of any
 * write, flush, fsync or rename). Commit and abort free the handle (abort
 * removes the temporary; NULL is a no-op). Not thread-safe per handle. */
typedef struct smoe_out smoe_out;
SMOE_MUST_CHECK
smoe_status smoe_out_open(const char *path, const char *what, smoe_out **out, smoe_err *err);
FILE *smoe_out_file(const smoe_out *o);
SMOE_MUST_CHECK
smoe_status smoe_out_commit(smoe_out *o, smoe_err *err);
void smoe_out_abort(smoe_out *o);
/* The end of a writer that returned s: commit when s is SMOE_OK or a
 * failed write (SMOE_EIO, the stream in error: the commit fails naming its
 * OS error), else abort and return s. o may be NULL (then s). */
SMOE_MUST_CHECK
smoe_status smoe_out_finish(smoe_out *o, smoe_status s, smoe_err *err);
/* open, n bytes of data, commit */
SMOE_MUST_CHECK
smoe_status smoe_out_write_file(const char *path, const char *what, const void *data, size_t n,
                                smoe_err *err);
/* Is the file name `name` (no directory) a temporary of smoe_out_open's
 * (BASE.tmp.XXXXXX)? *base_len (may be NULL) gets BASE's length. */
int smoe_out_is_temp(const char *name, size_t *base_len);
/* fsync a directory (after a rename in it); 0, or -1 with errno. A file
 * system that cannot sync directories (EINVAL) counts as synced. */
int smoe_sync_dir(const char *dir);
/* Test hook: the writes of output files fail with ENOSPC once `bytes`
 * more bytes have been written; -1 (the default) disables. Process-global,
 * set before any writer runs. */
void smoe_out_fail_after(long bytes);

/* ---- test hooks: failures a test binary asks for (default: none) ----
 * The library never reads them from the environment: a test program (for
 * the CLI: the smoe_testhooks build, tests/testhooks.c) sets them before
 * the runtime starts. Process-global, like the hooks above. */
typedef enum smoe_test_thread {
    SMOE_TEST_THREAD_DEFAULT = 0, /* MPI_Init_thread asks what smoe needs */
    SMOE_TEST_THREAD_SINGLE,      /* ... asks MPI_THREAD_SINGLE (a library providing less) */
    SMOE_TEST_THREAD_FUNNELED     /* ... asks MPI_THREAD_FUNNELED */
} smoe_test_thread;
typedef struct smoe_test_hooks {
    smoe_test_thread mpi_thread;
    int64_t kill_in_save; /* > 0: the last rank is killed half-way through the save of this step */
    int64_t step_error;   /* > 0: the last rank fails in this step (1-based), the others go on */
    int dev_skip_peer_wait; /* in-process ranks on a device read their peers' buffers
                             * without waiting on their issue events (comm.h) */
} smoe_test_hooks;
/* Copy *h (NULL: none). */
void smoe_set_test_hooks(const smoe_test_hooks *h);
/* The hooks in force (all zero unless set). */
smoe_test_hooks smoe_get_test_hooks(void);

#ifdef __cplusplus
}
#endif
#endif
