/* Helpers shared by the subcommands: strict option parsing, config and
 * plan loading with one-line errors. */
#include "cli.h"
#include "smoe/runtime.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_exit_code(const smoe_err *err)
{
    /* out of memory for what an argument asks (--max-memory) is its refusal */
    int arg = err->code == SMOE_ENOMEM && strncmp(err->where, "argument '", 10) == 0;
    return err->code == SMOE_EINVAL || err->code == SMOE_ENOTFOUND || arg ? SMOE_EXIT_USAGE
                                                                          : SMOE_EXIT_FAIL;
}

void cli_print_err(const smoe_err *err)
{
    char buf[1200];
    fprintf(stderr, "smoe: %s\n", smoe_err_format(err, buf, sizeof buf));
}

static smoe_rt *g_rt; /* the MPI runtime of the command, or NULL */

void cli_die_under(smoe_rt *rt) { g_rt = rt; }

smoe_rt *cli_rt_start(int *argc, char ***argv)
{
    smoe_rt *rt;
    smoe_err err;
    if (smoe_rt_init(argc, argv, &rt, &err)) {
        fprintf(stderr, "smoe: %s\n", err.msg);
        return NULL;
    }
    cli_die_under(rt);
    return rt;
}

_Noreturn void cli_die(const smoe_err *err)
{
    if (!g_rt || smoe_rt_rank(g_rt) == 0)
        cli_print_err(err);
    int code = cli_exit_code(err);
    if (g_rt)
        smoe_rt_finalize(g_rt);
    exit(code);
}

_Noreturn void cli_usage_error(const char *where, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    smoe_err e;
    smoe_err_in(&e, SMOE_EINVAL, where, "%s", msg);
    cli_die(&e);
}

_Noreturn void cli_io_error(const char *where, const char *what)
{
    fprintf(stderr, "smoe: %s: %s: %s\n", where, what, strerror(errno ? errno : EIO));
    exit(SMOE_EXIT_FAIL);
}

void *cli_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "smoe: out of memory (%zu bytes for the command line)\n", n);
        exit(SMOE_EXIT_FAIL);
    }
    return p;
}

void cli_check_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno) /* this flush failed: its reason */
            cli_io_error("standard output", "write error");
        /* an earlier buffered write failed; its errno is gone */
        fprintf(stderr, "smoe: standard output: write error (the output is incomplete)\n");
        exit(SMOE_EXIT_FAIL);
    }
}

int64_t cli_int(const char *opt, const char *val, int64_t lo, int64_t hi)
{
    int64_t v;
    char where[256];
    snprintf(where, sizeof where, "argument '%s %s'", opt, val ? val : "");
    if (!val || smoe_parse_i64(val, &v))
        cli_usage_error(where, "expected an integer");
    if (v < lo || v > hi)
        cli_usage_error(where, "must be between %lld and %lld", (long long)lo,
                        (long long)hi);
    return v;
}

double cli_float(const char *opt, const char *val, double lo, double hi)
{
    double v;
    char where[256];
    snprintf(where, sizeof where, "argument '%s %s'", opt, val ? val : "");
    if (!val || smoe_parse_f64(val, &v))
        cli_usage_error(where, "expected a number");
    if (v < lo || v > hi)
        cli_usage_error(where, "must be between %g and %g", lo, hi);
    return v;
}

smoe_status cli_parse_bytes(const char *opt, const char *val, int64_t *out, smoe_err *err)
{
    char where[256];
    snprintf(where, sizeof where, "argument '%s %s'", opt, val ? val : "");
    int64_t v;
    if (!val || smoe_parse_bytes(val, &v))
        return smoe_err_in(err, SMOE_EINVAL, where, "%s", CLI_BYTES_EXPECTED);
    if (v < 1) /* a budget or limit that nothing fits in */
        return smoe_err_in(err, SMOE_EINVAL, where,
                           "must be at least 1 byte: 0 bytes hold nothing (leave the option out "
                           "for no limit)");
    *out = v;
    return SMOE_OK;
}

int64_t cli_bytes(const char *opt, const char *val)
{
    int64_t v;
    smoe_err err;
    if (cli_parse_bytes(opt, val, &v, &err))
        cli_die(&err);
    return v;
}

/* "argument '--trace PATH'" into err->where, and die */
static _Noreturn void die_in_arg(smoe_err *err, const char *opt, const char *path)
{
    snprintf(err->where, sizeof err->where, "argument '%s %s'", opt, path);
    cli_die(err);
}

smoe_out *cli_out_open(const char *opt, const char *path)
{
    smoe_out *o;
    smoe_err err;
    if (smoe_out_open(path, "the file", &o, &err))
        die_in_arg(&err, opt, path);
    return o;
}

void cli_out_finish(smoe_out *o, smoe_status s, smoe_err *err, const char *opt, const char *path)
{
    if (smoe_out_finish(o, s, err))
        die_in_arg(err, opt, path);
}

const char *cli_fmt_bytes(double b, char *buf, size_t n)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    double a = fabs(b);
    while (a >= 1024 && u < 4) {
        a /= 1024;
        b /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%.0f B", b);
    else
        snprintf(buf, n, "%.1f %s", b, unit[u]);
    return buf;
}

const char *cli_named_file(const char *arg, const char *sub, char *buf, size_t n)
{
    if (strchr(arg, '/') || strstr(arg, ".yml") || strstr(arg, ".yaml"))
        return arg;
    const char *dir = smoe_config_default_dir();
    snprintf(buf, n, "%s/%s/%s.yml", dir ? dir : ".", sub, arg);
    return buf;
}

smoe_status cli_hardware_check(const char *arg, const char *path, const char *where,
                               smoe_err *err)
{
    if (access(path, R_OK) == 0)
        return SMOE_OK;
    if (strcmp(arg, "cpu-mpi") != 0)
        return smoe_err_in(err, SMOE_EINVAL, where, "no hardware profile %s", path);
    return smoe_err_in(err, SMOE_EINVAL, where,
                       "no cpu-mpi profile %s (this machine's: smoe does not ship one): measure "
                       "it with 'mpirun -np N smoe sim --calibrate --out %s', or pass "
                       "--hardware FILE", path, path);
}

int cli_kv_sets(const char *const *kv, int n, const char *key)
{
    size_t k = strlen(key);
    for (int i = 0; i < n; i++)
        if (strncmp(kv[i], key, k) == 0 && kv[i][k] == '=')
            return 1;
    char env[256];
    return getenv(smoe_config_env_name(key, env, sizeof env)) != NULL;
}

smoe_config_opts cli_config_opts(const cli_common *c)
{
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = c->base;
    o.model = c->model;
    o.rules = c->rules;
    o.n_overrides = c->n_kv;
    o.overrides = c->kv;
    o.override_where = c->kv_where;
    o.use_env = 1;
    return o;
}

smoe_config *cli_load_config(const cli_common *c)
{
    smoe_config_opts o = cli_config_opts(c);
    smoe_config *cfg;
    smoe_err err;
    if (smoe_config_load(&o, &cfg, &err))
        cli_die(&err);
    return cfg;
}

int cli_gather_opt(cli_common *c, int opt, const char *arg, smoe_err *err)
{
    int64_t v;
    switch (opt) {
    case OPT_GATHER_DTYPE:
        return smoe_dtype_parse("--gather-dtype", arg, 7u, &c->gather_dtype, err) ? -1 : 1;
    case OPT_INT8_FALLBACK:
        return smoe_dtype_parse("--int8-fallback", arg, 3u, &c->int8_fallback, err) ? -1 : 1;
    case OPT_INT8_BLOCK:
        if (!arg || smoe_parse_i64(arg, &v) || v < SMOE_INT8_BLOCK_MIN ||
            v > SMOE_INT8_BLOCK_MAX) {
            smoe_err_set(err, SMOE_EINVAL, "must be between %d and %d", SMOE_INT8_BLOCK_MIN,
                         SMOE_INT8_BLOCK_MAX);
            snprintf(err->where, sizeof err->where, "argument '--int8-block %s'",
                     arg ? arg : "");
            return -1;
        }
        c->int8_block = v;
        return 1;
    default:
        return 0;
    }
}

smoe_status cli_apply_wire(const cli_common *c, smoe_plan *p, smoe_err *err)
{
    if (c->int8_block && c->gather_dtype != SMOE_DT_INT8)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--int8-block'",
                           "needs --gather-dtype int8");
    if (c->int8_fallback != SMOE_DT_INT8 && c->gather_dtype != SMOE_DT_INT8)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--int8-fallback'",
                           "needs --gather-dtype int8");
    if (c->gather_dtype != SMOE_DT_FP32 && c->dtype_bytes_set && c->dtype_bytes != 4)
        return smoe_err_in(err, SMOE_EINVAL, "argument '--dtype-bytes'",
                           "a %s gather converts fp32 master weights: give --dtype-bytes 4 "
                           "or leave it out", smoe_dtype_name(c->gather_dtype));
    smoe_status s = smoe_plan_set_wire(p, c->gather_dtype, c->int8_block, c->int8_fallback, err);
    if (s)
        snprintf(err->where, sizeof err->where, "argument '--gather-dtype %s'",
                 smoe_dtype_name(c->gather_dtype));
    return s;
}

smoe_plan *cli_build_plan(const cli_common *c, const smoe_config *cfg)
{
    smoe_plan_opts po;
    memset(&po, 0, sizeof po);
    po.devices = c->devices;
    po.slices = c->slices;
    po.params_file = c->params;
    po.dtype_bytes = c->dtype_bytes;
    smoe_plan *p;
    smoe_err err;
    if (smoe_plan_build(cfg, &po, &p, &err)) {
        /* mesh errors without a place are about --devices/--slices */
        if (!err.where[0] && err.code == SMOE_EINVAL && c->devices_where)
            snprintf(err.where, sizeof err.where, "%s", c->devices_where);
        else if (!err.where[0] && err.code == SMOE_EINVAL)
            snprintf(err.where, sizeof err.where, "argument '--devices %lld'",
                     (long long)c->devices);
        cli_die(&err);
    }
    if (cli_apply_wire(c, p, &err))
        cli_die(&err);
    return p;
}

void cli_common_init(cli_common *c)
{
    memset(c, 0, sizeof *c);
    c->slices = 1;
    c->dtype_bytes = 4;
    c->int8_fallback = SMOE_DT_INT8;
}

int cli_common_opt(cli_common *c, int opt, const char *arg)
{
    switch (opt) {
    case OPT_BASE: c->base = arg; return 1;
    case OPT_MODEL: c->model = arg; return 1;
    case OPT_RULES: c->rules = arg; return 1;
    case OPT_PARAMS: c->params = arg; return 1;
    case OPT_DEVICES: c->devices = cli_int("--devices", arg, 1, 1LL << 30); return 1;
    case OPT_SLICES: c->slices = cli_int("--slices", arg, 1, 1LL << 20); return 1;
    case OPT_DTYPE_BYTES:
        c->dtype_bytes = (int)cli_int("--dtype-bytes", arg, 1, 16);
        c->dtype_bytes_set = 1;
        return 1;
    case OPT_GATHER_DTYPE:
    case OPT_INT8_FALLBACK:
    case OPT_INT8_BLOCK: {
        smoe_err err;
        if (cli_gather_opt(c, opt, arg, &err) < 0)
            cli_die(&err);
        return 1;
    }
    case OPT_JSON: c->json = 1; return 1;
    default: return 0;
    }
}

void cli_collect_overrides(cli_common *c, int argc, char **argv, int first)
{
    c->kv = (const char **)(argv + first);
    c->n_kv = argc - first;
    for (int i = first; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i]) {
            char where[256];
            snprintf(where, sizeof where, "argument '%s'", argv[i]);
            cli_usage_error(where, "expected an option or KEY=VALUE");
        }
    }
}
