/* `smoe train`: sharded MoE training over the MPI ranks, the mesh from the
 * ici_* overrides and the number of ranks. Every rank parses the same
 * arguments and reaches the same verdict; rank 0 alone prints. With
 * --compare it runs no-prefetch, prefetch and legacy back to back from the
 * same initial state and prints them side by side. */
#include "cli.h"
#include "smoe/runtime.h"
#include "smoe/sched.h"
#include "smoe/train.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_STEPS = OPT_COMMON_END, OPT_SEED, OPT_DATA, OPT_DEPTH, OPT_GATHER, OPT_SHARED,
    OPT_PTHREAD, OPT_NO_PTHREAD, OPT_MAXMEM, OPT_TRACE, OPT_DUMP, OPT_COMPARE, OPT_QUIET, OPT_HELP,
    OPT_TIMEOUT, OPT_CKPT_DIR, OPT_CKPT_EVERY, OPT_CKPT_KEEP, OPT_RESUME, OPT_LIST_KEYS, OPT_PLOT,
    OPT_SCHEDULE, OPT_HBM_BUDGET, OPT_HARDWARE, OPT_REDUCE_DTYPE
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N smoe train [--base FILE] [--model NAME|FILE] [--rules NAME|FILE]\n"
            "                  [KEY=VALUE ...] [--steps N] [--seed N] [--data FILE]\n"
            "                  [--prefetch-depth N] [--gather coaxis|legacy] [--shared-queue]\n"
            "                  [--progress-thread | --no-progress-thread]\n"
            "                  [--max-memory BYTES] [--trace FILE]\n"
            "                  [--dump-params FILE] [--compare] [--json] [--quiet]\n"
            "                  [--comm-timeout SECONDS] [--checkpoint-dir DIR]\n"
            "                  [--checkpoint-every N] [--checkpoint-keep N] [--resume]\n"
            "                  [--schedule FILE | --hbm-budget BYTES [--hardware NAME|FILE]]\n"
            "  as root or with more ranks than cores: scripts/mpirun.sh -np N build/smoe train ...\n"
            "\n"
            "  the mesh: mesh_axes and ici_* from the config (one -1 filled from the\n"
            "  number of ranks); defaults: --base configs/train.yml (base.yml plus\n"
            "  training settings), --model tiny.\n"
            "  --steps N            training steps (default 10)\n"
            "  --seed N             initialisation and data seed (default 1)\n"
            "  --data FILE          training text (default: the bundled data/gpl-3.0.txt)\n"
            "  --prefetch-depth N   gather N layers ahead (default 1; 0 = just before use)\n"
            CLI_GATHER_USAGE
            "  --reduce-dtype T     gradient reductions in fp32 (default) or bf16\n"
            "  --schedule FILE      execute a prefetch schedule (smoe sim --schedule-out);\n"
            "                       given 2 to " CLI_STR(SMOE_TRAIN_MAX_MODES)
            " times: the files take turns step\n"
            "                       by step as with --compare, each summarized apiece\n"
            "  --hbm-budget BYTES   plan the schedule for this memory per rank (smoe sim's\n"
            "                       planner, whole weights) and hold every tracked class\n"
            "                       under it: a gather waits for memory rather than exceed it\n"
            "  --hardware NAME|FILE the profile --hbm-budget plans on (default cpu-mpi:\n"
            "                       configs/hardware/cpu-mpi.yml, from smoe sim --calibrate)\n"
            "  --gather MODE        coaxis (default) or legacy (pre-fix: co-axes gathered by\n"
            "                       a second, blocking all-gather just before use)\n"
            "  --shared-queue       gathers share one queue with the all-to-all and\n"
            "                       reductions (no dedicated collective engine)\n"
            "  --progress-thread    a progress thread polling once a millisecond, besides\n"
            "                       the progress at kernel boundaries (default: on when\n"
            "                       the ranks span more than one host and the MPI\n"
            "                       library provides MPI_THREAD_SERIALIZED, else off)\n"
            "  --no-progress-thread progress at kernel boundaries only\n"
            "  --max-memory BYTES   refuse a plan that needs more per rank (e.g. 512M)\n"
            "  --trace FILE         Chrome/Perfetto trace of every rank\n"
            "  --plot FILE.svg      that trace drawn as smoe sim --plot draws (needs --trace)\n"
            "  --dump-params FILE   final parameters in canonical order (rank 0)\n"
            "  --compare            run no-prefetch, prefetch and legacy; print a table\n"
            "  --json               one JSON object on stdout at the end (rank 0)\n"
            "  --comm-timeout S     abort the job when a collective makes no progress for\n"
            "                       S seconds (a dead rank, a cut link; default 20, 0 = never)\n"
            "  --checkpoint-dir DIR save checkpoints into DIR (step_NNNNNNNN/ + LATEST)\n"
            "  --checkpoint-every N save every N steps (default: only after the last step)\n"
            "  --checkpoint-keep N  keep the newest N checkpoints (default: all)\n"
            "  --resume             continue from the checkpoint DIR/LATEST names, on any\n"
            "                       mesh (shards are re-cut); --steps is the total\n"
            "  --list-keys          print the numeric MaxText keys smoe train reads and the\n"
            "                       values it accepts, then exit\n"
            "\n"
            "  --compare runs one training in which no-prefetch, prefetch and legacy take\n"
            "  turns step by step (the order rotating every round; they are numerically\n"
            "  identical) and prints each schedule's median and quartiles over its steps\n"
            "  after the first round.\n");
}

static void list_keys(FILE *f)
{
    int n;
    const smoe_train_key *k = smoe_train_keys(&n);
    fprintf(f, "# numeric MaxText keys smoe train reads: key, type, accepted values\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "%-30s %-6s %s\n", k[i].name, k[i].type == 'i' ? "int" : "float", k[i].rule);
}

typedef struct run_ctx {
    int root, quiet, json;
    const cli_runs *runs;
    int64_t steps;
} run_ctx;

static void on_step(void *ud, const smoe_train_step *r)
{
    run_ctx *c = ud;
    if (!c->root || c->quiet)
        return;
    fprintf(c->json ? stderr : stdout,
            "%s step %3lld/%lld  loss %.4f  lr %.3e  grad_norm %.3f  aux_loss %.4f  "
            "z_loss %.4f  step %8.2f ms  exposed gather %7.2f ms  a2a %6.2f ms  "
            "compute %8.2f ms\n",
            train_mode_label(r->mode, c->runs), (long long)r->step + 1, (long long)c->steps,
            r->loss, r->lr,
            r->grad_norm, r->aux_loss, r->z_loss, r->step_ms, r->exposed_gather_ms, r->a2a_ms,
            r->compute_ms);
    fflush(c->json ? stderr : stdout);
}

/* what the run says about the files it found (rank 0), even when quiet */
static void on_note(void *ud, const char *line)
{
    (void)ud;
    fprintf(stderr, "note: %s\n", line);
}

static _Noreturn void fail(smoe_rt *rt, const smoe_err *err)
{
    if (smoe_rt_rank(rt) == 0) {
        char buf[1200];
        fprintf(stderr, "smoe: %s\n", smoe_err_format(err, buf, sizeof buf));
    }
    int code = err->code == SMOE_EINVAL || err->code == SMOE_ENOTFOUND ||
                       err->code == SMOE_ENOMEM
                   ? SMOE_EXIT_USAGE
                   : SMOE_EXIT_FAIL;
    smoe_rt_finalize(rt);
    exit(code);
}

static _Noreturn void fail_arg(smoe_rt *rt, const char *where, const char *msg)
{
    smoe_err e;
    smoe_err_in(&e, SMOE_EINVAL, where, "%s", msg);
    fail(rt, &e);
}

/* The files rank 0 writes after the last step, checked before the first
 * (every rank gets rank 0's verdict). */
static void check_outputs(smoe_rt *rt, const char *plot, const char *trace, const char *dump)
{
    const char *path[3] = { plot, trace, dump }, *opt[3] = { "--plot", "--trace", "--dump-params" };
    smoe_err err;
    smoe_status s = SMOE_OK;
    for (int i = 0; i < 3 && !s; i++)
        if (path[i] && smoe_rt_rank(rt) == 0)
            s = cli_probe_output(path[i], opt[i], &err);
    if (smoe_rt_agree_err(rt, s, &err))
        fail(rt, &err);
}

/* The library names a byte-count flag by its value in bytes: the error
 * quotes what was typed instead. */
static void requote(smoe_err *err, const char *opt, const char *typed)
{
    char pre[64];
    snprintf(pre, sizeof pre, "argument '%s ", opt);
    if (typed && strncmp(err->where, pre, strlen(pre)) == 0)
        snprintf(err->where, sizeof err->where, "argument '%s %s'", opt, typed);
}

static void print_banner(const smoe_config *cfg, const smoe_plan *p, smoe_rt *rt,
                         const smoe_train_opts *o, int shared, const smoe_model_cfg *mc)
{
    const char *const *files;
    int nf = smoe_config_sources(cfg, &files);
    printf("smoe train: %d ranks (%s)\n", smoe_rt_size(rt), smoe_rt_library(rt));
    printf("config:");
    for (int i = 0; i < nf; i++)
        printf(" %s", files[i]);
    printf("\nmesh:");
    for (int i = 0; i < p->mesh.n; i++)
        if (p->mesh.size[i] > 1)
            printf(" %s=%lld", p->mesh.name[i], (long long)p->mesh.size[i]);
    printf("\nmodel: emb %lld, %lld heads, q_lora %lld, kv_lora %lld, %lld dense + %lld MoE "
           "layers, %lld experts top-%lld, %lld shared, vocab %lld; batch %lld x %lld per rank\n",
           (long long)mc->emb, (long long)mc->heads, (long long)mc->q_lora,
           (long long)mc->kv_lora, (long long)mc->n_dense, (long long)mc->n_moe,
           (long long)mc->experts, (long long)mc->topk, (long long)mc->shared,
           (long long)mc->vocab, (long long)mc->batch, (long long)mc->seq);
    printf("plan: co-axis %d tagged / %d fallback / %d noop per layer kind; legacy %d / %d / "
           "%d\n",
           p->coaxis.tagged, p->coaxis.fallback, p->coaxis.noop, p->legacy.tagged,
           p->legacy.fallback, p->legacy.noop);
    char sched[4300];
    if (o->schedule_name) /* --schedule FILE */
        snprintf(sched, sizeof sched, "the schedule %s", o->schedule_name);
    else if (o->hbm_budget)
        snprintf(sched, sizeof sched, "planned for %lld bytes per rank (--hbm-budget) on %s",
                 (long long)o->hbm_budget, o->hw->name);
    else
        snprintf(sched, sizeof sched, "prefetch depth %d", o->prefetch_depth);
    printf("schedule: %s, %s gathers, %s queue, data %s, seed %llu\n", sched,
           o->legacy ? "legacy" : "co-axis", shared ? "shared" : "dedicated", o->data_path,
           (unsigned long long)o->seed);
    char blk[64] = "";
    if (p->gather_dtype == SMOE_DT_INT8)
        snprintf(blk, sizeof blk, " (blocks of %lld%s)", (long long)p->int8_block,
                 p->wire_fallbacks ? ", some weights in the fallback" : "");
    printf("wire: weight gathers %s%s, gradient reductions %s; master weights, gradients and "
           "AdamW fp32\n", smoe_dtype_name(p->gather_dtype), blk,
           smoe_dtype_name((smoe_dtype)o->reduce_dtype));
    printf("progress thread: %s\n", smoe_rt_progress_note(rt));
    smoe_train_unapplied un[SMOE_TRAIN_MAX_UNAPPLIED];
    int nu = smoe_train_unapplied_keys(cfg, un, SMOE_TRAIN_MAX_UNAPPLIED);
    for (int i = 0; i < nu; i++)
        printf("%s  %s: %s: %s\n", i ? "" : "not applied by smoe train:\n", un[i].key,
               un[i].value, un[i].reason);
    fflush(stdout);
}

/* A schedule's prediction, or a profile the planner runs on, is for one
 * progress mode (smoe_hw.cpu.progress): this run's (the runtime's, after the
 * mesh is set, whatever set it) must be the same, or it is refused. */
static void check_progress(smoe_rt *rt, smoe_schedule *const *scheds, int n,
                           const char *const *paths, const smoe_hw *hw)
{
    const char *mine = smoe_rt_get_opts(rt).progress_thread ? "thread" : "calls";
    char where[4300], msg[400];
    for (int i = 0; i <= n; i++) {
        const char *theirs = i < n ? scheds[i]->progress : hw ? hw->cpu.progress : "";
        if (!theirs[0] || strcmp(theirs, mine) == 0)
            continue;
        if (i < n)
            snprintf(where, sizeof where, "argument '--schedule %s'", paths[i]);
        else
            snprintf(where, sizeof where, "argument '--hbm-budget' (profile %s)", hw->name);
        snprintf(msg, sizeof msg, "predicted for progress '%s' (smoe sim --calibrate%s), but this "
                 "run progresses by %s: %s", theirs, strcmp(theirs, "thread") ? "" : " --progress-thread",
                 strcmp(mine, "thread") ? "MPI calls only" : "a progress thread",
                 strcmp(mine, "thread") ? "pass --progress-thread" : "calibrate with --progress-thread");
        fail_arg(rt, where, msg);
    }
}

int cmd_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
        CLI_GATHER_LONGOPTS,
        { "reduce-dtype", required_argument, 0, OPT_REDUCE_DTYPE },
        { "steps", required_argument, 0, OPT_STEPS },
        { "seed", required_argument, 0, OPT_SEED },
        { "data", required_argument, 0, OPT_DATA },
        { "prefetch-depth", required_argument, 0, OPT_DEPTH },
        { "gather", required_argument, 0, OPT_GATHER },
        { "shared-queue", no_argument, 0, OPT_SHARED },
        { "progress-thread", no_argument, 0, OPT_PTHREAD },
        { "no-progress-thread", no_argument, 0, OPT_NO_PTHREAD },
        { "max-memory", required_argument, 0, OPT_MAXMEM },
        { "trace", required_argument, 0, OPT_TRACE },
        { "plot", required_argument, 0, OPT_PLOT },
        { "dump-params", required_argument, 0, OPT_DUMP },
        { "compare", no_argument, 0, OPT_COMPARE },
        { "quiet", no_argument, 0, OPT_QUIET },
        { "help", no_argument, 0, OPT_HELP },
        { "comm-timeout", required_argument, 0, OPT_TIMEOUT },
        { "checkpoint-dir", required_argument, 0, OPT_CKPT_DIR },
        { "checkpoint-every", required_argument, 0, OPT_CKPT_EVERY },
        { "checkpoint-keep", required_argument, 0, OPT_CKPT_KEEP },
        { "resume", no_argument, 0, OPT_RESUME },
        { "list-keys", no_argument, 0, OPT_LIST_KEYS },
        { "schedule", required_argument, 0, OPT_SCHEDULE },
        { "hbm-budget", required_argument, 0, OPT_HBM_BUDGET },
        { "hardware", required_argument, 0, OPT_HARDWARE },
        { 0, 0, 0, 0 },
    };
    smoe_rt *rt;
    smoe_err err;
    if (smoe_rt_init(&argc, &argv, &rt, &err)) {
        fprintf(stderr, "smoe: %s\n", err.msg);
        return SMOE_EXIT_FAIL;
    }
    int root = smoe_rt_rank(rt) == 0;
    cli_common c;
    cli_common_init(&c);
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 10;
    o.seed = 1;
    o.prefetch_depth = 1;
    int compare = 0, quiet = 0, opt, depth_given = 0;
    const char *plot_path = NULL;
    smoe_rt_opts ro = { 0, SMOE_RT_PROGRESS_AUTO };
    int pthread_seen = 0;
    char data_default[4200];
    opterr = 0;
    optind = 1;
    int li = -1;
    const char *maxmem_arg = NULL, *budget_arg = NULL, *sched_path = NULL, *hw_arg = NULL;
    const char *sched_paths[SMOE_TRAIN_MAX_MODES];
    int nsched = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, &li)) != -1) {
        char where[300];
        if (li >= 0 && optarg)
            snprintf(where, sizeof where, "argument '--%s %s'", longopts[li].name, optarg);
        else
            snprintf(where, sizeof where, "argument '%s'", argv[optind - 1]);
        li = -1;
        int64_t v;
        switch (opt) {
        case OPT_DEVICES:
            fail_arg(rt, "argument '--devices'", "is set by the number of MPI ranks");
        case OPT_STEPS:
        case OPT_SEED:
        case OPT_DEPTH:
            if (smoe_parse_i64(optarg, &v) || v < (opt == OPT_STEPS) ||
                v > (opt == OPT_DEPTH ? SMOE_SIM_MAX_DEPTH : (int64_t)1 << 40)) {
                char msg[64];
                snprintf(msg, sizeof msg, "expected an integer from 0 to %d", SMOE_SIM_MAX_DEPTH);
                fail_arg(rt, where, opt == OPT_DEPTH ? msg : "expected a positive integer");
            }
            if (opt == OPT_STEPS)
                o.steps = v;
            else if (opt == OPT_SEED)
                o.seed = (uint64_t)v;
            else {
                o.prefetch_depth = (int)v;
                depth_given = 1;
            }
            break;
        case OPT_DATA: o.data_path = optarg; break;
        case OPT_GATHER:
            if (strcmp(optarg, "coaxis") == 0)
                o.legacy = 0;
            else if (strcmp(optarg, "legacy") == 0)
                o.legacy = 1;
            else
                fail_arg(rt, where, "expected coaxis or legacy");
            break;
        case OPT_SHARED: ro.shared_queue = 1; break;
        case OPT_PTHREAD:
        case OPT_NO_PTHREAD:
            if (pthread_seen && ro.progress_thread != (opt == OPT_PTHREAD))
                fail_arg(rt, where, "contradicts the other progress-thread option");
            ro.progress_thread = opt == OPT_PTHREAD;
            pthread_seen = 1;
            break;
        case OPT_MAXMEM:
            if (cli_parse_bytes("--max-memory", optarg, &o.max_memory, &err))
                fail(rt, &err);
            maxmem_arg = optarg;
            break;
        case OPT_TIMEOUT: {
            double t;
            if (smoe_parse_f64(optarg, &t) || !(t >= 0) || t > 1e6)
                fail_arg(rt, where, "expected seconds from 0 (never) to 1000000");
            smoe_rt_set_timeout(rt, t);
            break;
        }
        case OPT_CKPT_DIR:
            if (!optarg[0])
                fail_arg(rt, "argument '--checkpoint-dir'", "is empty: name a directory");
            o.ckpt_dir = optarg;
            break;
        case OPT_CKPT_EVERY:
            if (smoe_parse_i64(optarg, &v) || v < 1 || v > (int64_t)1 << 40)
                fail_arg(rt, where, "expected a positive integer");
            o.ckpt_every = v;
            break;
        case OPT_CKPT_KEEP:
            if (smoe_parse_i64(optarg, &v) || v < 1 || v > 1000000)
                fail_arg(rt, where, "expected a positive integer");
            o.ckpt_keep = (int)v;
            break;
        case OPT_RESUME: o.resume = 1; break;
        case OPT_SCHEDULE:
            if (nsched == SMOE_TRAIN_MAX_MODES)
                fail_arg(rt, where, "too many schedules (at most " CLI_STR(SMOE_TRAIN_MAX_MODES)
                         " take turns in one run)");
            for (int i = 0; i < nsched; i++)
                if (strcmp(sched_paths[i], optarg) == 0)
                    fail_arg(rt, where, "is given twice");
            sched_path = sched_paths[nsched++] = optarg;
            break;
        case OPT_HARDWARE: hw_arg = optarg; break;
        case OPT_HBM_BUDGET:
            if (cli_parse_bytes("--hbm-budget", optarg, &o.hbm_budget, &err))
                fail(rt, &err);
            budget_arg = optarg;
            break;
        case OPT_TRACE: o.trace_path = optarg; break;
        case OPT_PLOT: plot_path = optarg; break;
        case OPT_DUMP: o.dump_path = optarg; break;
        case OPT_COMPARE: compare = 1; break;
        case OPT_QUIET: quiet = 1; break;
        case OPT_LIST_KEYS:
            if (root)
                list_keys(stdout);
            smoe_rt_finalize(rt);
            return SMOE_EXIT_OK;
        case 'h':
        case OPT_HELP:
            if (root)
                usage(stdout);
            smoe_rt_finalize(rt);
            return SMOE_EXIT_OK;
        case OPT_REDUCE_DTYPE: {
            smoe_dtype rd;
            if (smoe_dtype_parse("--reduce-dtype", optarg, 3u, &rd, &err))
                fail(rt, &err);
            o.reduce_dtype = (int)rd;
            break;
        }
        default: {
            int g = cli_gather_opt(&c, opt, optarg, &err);
            if (g < 0)
                fail(rt, &err);
            if (g)
                break;
            if (cli_common_opt(&c, opt, optarg))
                break;
            fail_arg(rt, where, optopt ? "missing value or unknown option"
                                       : "unknown option (see 'smoe train --help')");
        }
        }
    }
    for (int i = optind; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i]) {
            char where[300];
            snprintf(where, sizeof where, "argument '%s'", argv[i]);
            fail_arg(rt, where, "expected an option or KEY=VALUE");
        }
    }
    c.kv = (const char **)(argv + optind);
    c.n_kv = argc - optind;
    const char *cdir = smoe_config_default_dir();
    char base_default[4200];
    if (!c.base && cdir) {
        snprintf(base_default, sizeof base_default, "%s/train.yml", cdir);
        c.base = base_default;
    }
    if (!c.model)
        c.model = "tiny";
    c.devices = smoe_rt_size(rt);
    if (compare && (o.dump_path || o.ckpt_dir))
        fail_arg(rt, "argument '--compare'",
                 "cannot be combined with --dump-params or --checkpoint-dir");
    if (plot_path && !o.trace_path)
        fail_arg(rt, "argument '--plot'", "needs --trace FILE (the timeline it draws)");
    check_outputs(rt, plot_path, o.trace_path, o.dump_path);
    if ((o.ckpt_every || o.ckpt_keep || o.resume) && !o.ckpt_dir)
        fail_arg(rt, o.resume ? "argument '--resume'" : o.ckpt_keep ? "argument '--checkpoint-keep'"
                                                      : "argument '--checkpoint-every'",
                 "needs --checkpoint-dir DIR");
    if (depth_given && (sched_path || o.hbm_budget))
        fail_arg(rt, "argument '--prefetch-depth'",
                 sched_path ? "cannot be combined with --schedule (the file says when)"
                            : "cannot be combined with --hbm-budget (the planner chooses)");
    if (hw_arg && !o.hbm_budget)
        fail_arg(rt, "argument '--hardware'", "is read only with --hbm-budget");
    if (nsched > 1 && (compare || o.hbm_budget))
        fail_arg(rt, "argument '--schedule'", compare
                 ? "given more than once takes turns itself (not with --compare)"
                 : "cannot be combined with --hbm-budget (which plans its own)");
    smoe_schedule *scheds[SMOE_TRAIN_MAX_MODES] = { NULL };
    for (int i = 0; i < nsched; i++)
        if (cli_schedule_read(sched_paths[i], &scheds[i], &err))
            fail(rt, &err);
    if (nsched == 1) {
        o.schedule_name = sched_path;
    } else if (nsched > 1) { /* the files take turns, as --compare's schedules */
        o.nmodes = nsched;
        for (int i = 0; i < nsched; i++)
            o.modes[i] = (smoe_train_mode){ 0, 0, scheds[i] };
    }
    smoe_hw hw;
    if (o.hbm_budget) {
        char hwbuf[4200], hw_where[300];
        const char *name = hw_arg ? hw_arg : "cpu-mpi";
        const char *hwp = cli_named_file(name, "hardware", hwbuf, sizeof hwbuf);
        if (hw_arg)
            snprintf(hw_where, sizeof hw_where, "argument '--hardware %s'", hw_arg);
        else
            snprintf(hw_where, sizeof hw_where, "argument '--hbm-budget' (planned on --hardware "
                     "cpu-mpi unless given)");
        if (cli_hardware_check(name, hwp, hw_where, &err) || smoe_hw_load(hwp, &hw, &err))
            fail(rt, &err);
        o.hw = &hw;
    }
    if (!o.data_path) {
        snprintf(data_default, sizeof data_default, "%s/../data/gpl-3.0.txt", cdir ? cdir : ".");
        o.data_path = data_default;
    }
    /* config and plan: deterministic, so every rank gets the same verdict */
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = c.base;
    co.model = c.model;
    co.rules = c.rules;
    co.overrides = c.kv;
    co.n_overrides = c.n_kv;
    co.use_env = 1;
    smoe_config *cfg;
    if (smoe_config_load(&co, &cfg, &err) || smoe_train_check_keys(cfg, &err))
        fail(rt, &err);
    smoe_plan_opts po = { c.devices, 1, c.params, 4 };
    smoe_plan *plan;
    if (smoe_plan_build(cfg, &po, &plan, &err)) {
        if (!err.where[0])
            snprintf(err.where, sizeof err.where, "%d MPI ranks", smoe_rt_size(rt));
        fail(rt, &err);
    }
    /* what the gathers move (the int8 block rule refuses or falls back) */
    if (cli_apply_wire(&c, plan, &err))
        fail(rt, &err);
    /* a weight whose prefetch all-gather would get uneven shards */
    if (smoe_plan_check_even(plan, SMOE_MODE_COAXIS, &err) ||
        smoe_plan_check_even(plan, SMOE_MODE_LEGACY, &err))
        fail(rt, &err);
    if (smoe_rt_set_mesh(rt, &plan->mesh, &ro, &err))
        fail(rt, &err);
    check_progress(rt, scheds, nsched, sched_paths, o.hbm_budget ? &hw : NULL);
    smoe_model_cfg mc;
    if (smoe_train_model_cfg(cfg, &plan->mesh, &mc, &err))
        fail(rt, &err);
    if (root && !quiet && !c.json)
        print_banner(cfg, plan, rt, &o, ro.shared_queue, &mc);

    smoe_train_result res;
    memset(&res, 0, sizeof res);
    int depth = o.prefetch_depth;
    if (compare) { /* one run, the three schedules taking turns */
        static const smoe_train_mode cmp_modes[3] = { { 0, 0, NULL }, { 1, 0, NULL },
                                                      { 1, 1, NULL } };
        o.nmodes = 3;
        for (int i = 0; i < 3; i++) {
            o.modes[i] = cmp_modes[i];
            if (o.modes[i].prefetch_depth)
                o.modes[i].prefetch_depth = depth;
        }
    }
    cli_runs runs = { compare ? 3 : nsched > 1 ? nsched : 0, compare, { NULL },
                      smoe_rt_progress_note(rt), NULL };
    for (int i = 0; i < runs.n; i++)
        runs.key[i] = compare ? train_mode_key(i) : sched_paths[i];
    run_ctx rc = { root, quiet, c.json, &runs, o.steps };
    o.on_step = on_step;
    o.on_note = on_note;
    o.ud = &rc;
    smoe_comm comm = smoe_rt_comm(rt);
    if (smoe_train_run(cfg, plan, nsched == 1 ? scheds[0] : NULL, &comm, &o, &res, &err)) {
        requote(&err, "--max-memory", maxmem_arg);
        requote(&err, "--hbm-budget", budget_arg);
        fail(rt, &err);
    }
    runs.priority = smoe_rt_progress_priority(rt); /* collective */
    if (root && plot_path)
        cli_plot_trace(o.trace_path, plot_path);
    if (root) {
        if (c.json)
            train_print_json(stdout, plan, &res, &runs, o.reduce_dtype);
        else
            print_result(&o, rt, &res, &runs, compare ? depth : res.prefetch_distance);
    }
    smoe_train_result_free(&res);
    for (int i = 0; i < nsched; i++)
        smoe_schedule_free(scheds[i]);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    smoe_rt_finalize(rt);
    return SMOE_EXIT_OK;
}
