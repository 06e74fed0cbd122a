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
    OPT_PTHREAD, OPT_NO_PTHREAD, OPT_MAXMEM, OPT_TRACE, OPT_DUMP, OPT_COMPARE, OPT_EXCHANGE, OPT_QUIET, OPT_HELP,
    OPT_TIMEOUT, OPT_CKPT_DIR, OPT_CKPT_EVERY, OPT_CKPT_KEEP, OPT_RESUME, OPT_LIST_KEYS, OPT_PLOT,
    OPT_SCHEDULE, OPT_HBM_BUDGET, OPT_HARDWARE, OPT_REDUCE_DTYPE, OPT_DEVICE, OPT_MATMUL
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N smoe train [--base FILE] [--model NAME|FILE] [--rules NAME|FILE]\n"
            "                  [KEY=VALUE ...] [--slices N] [--steps N] [--seed N] [--data FILE]\n"
            "                  [--prefetch-depth N] [--gather coaxis|legacy] [--shared-queue]\n"
            "                  [--progress-thread | --no-progress-thread]\n"
            "                  [--max-memory BYTES] [--trace FILE]\n"
            "                  [--dump-params FILE] [--compare | --compare-exchange]\n"
            "                  [--json] [--quiet]\n"
            "                  [--comm-timeout SECONDS] [--checkpoint-dir DIR]\n"
            "                  [--checkpoint-every N] [--checkpoint-keep N] [--resume]\n"
            "                  [--schedule FILE | --hbm-budget BYTES [--hardware NAME|FILE]]\n"
            "                  [--device cpu|emul|cuda] [--matmul-dtype fp32|bf16]\n"
            "  as root or with more ranks than cores: scripts/mpirun.sh -np N build/smoe train ...\n"
            "\n"
            "  the mesh: mesh_axes and ici_* from the config (one -1 filled from the\n"
            "  number of ranks); defaults: --base configs/train.yml (base.yml plus\n"
            "  training settings), --model tiny.\n"
            "  --slices N           N slices of consecutive ranks (one per host, say): the\n"
            "                       dcn_* sizes multiply the ici_* ones as in MaxText's\n"
            "                       multi-slice mesh; dcn_data_parallelism=N replicates the\n"
            "                       weights across slices (HSDP) (default 1)\n"
            "  --steps N            training steps (default 10)\n"
            "  --seed N             initialisation and data seed (default 1)\n"
            "  --data FILE          training text (default: the bundled data/gpl-3.0.txt)\n"
            "  --prefetch-depth N   gather N layers ahead (default 1; 0 = just before use)\n"
            CLI_GATHER_USAGE
            "  --reduce-dtype T     gradient reductions in fp32 (default) or bf16\n"
            "  --schedule FILE      execute a prefetch schedule (smoe sim --schedule-out);\n"
            "                       given 2 to " CLI_STR(SMOE_TRAIN_MAX_SCHEDULES)
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
            "  --device D           the kernels' device: cpu (default), emul (a GPU's\n"
            "                       streams emulated on the CPU, bit for bit the cpu run) or\n"
            "                       cuda (one rank on GPU 0, or several over NCCL, each on\n"
            "                       the GPU of its place on its host); emul runs one rank\n"
            "  --matmul-dtype T     the matrix products' inputs in fp32 (default) or bf16\n"
            "                       (rounded to bf16, accumulated in fp32, as a GPU's bf16\n"
            "                       GEMM; master weights, norms and AdamW stay fp32)\n"
            "  --compare-exchange   train twice, the experts' all-to-all then ring of\n"
            "                       experts (use_ring_of_experts), and print both\n"
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

/* The command line, parsed. */
typedef struct train_args {
    smoe_rt *rt;
    cli_common c;
    smoe_train_opts o;
    smoe_rt_opts ro;
    int compare, quiet, depth, depth_given, legacy, pthread_seen;
    int exchange; /* --compare-exchange */
    int device;   /* --device: CLI_DEVICE_* */
    int matmul_bf16; /* --matmul-dtype bf16 */
    int64_t hbm_budget;
    const char *plot_path, *maxmem_arg, *budget_arg, *hw_arg;
    const char *sched_paths[SMOE_TRAIN_MAX_SCHEDULES];
    int nsched;
    char data_default[4200], base_default[4200];
} train_args;

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
        cli_die(&err);
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

static void print_banner(const smoe_config *cfg, const smoe_plan *p, const train_args *a,
                         const smoe_hw *hw, const smoe_model_cfg *mc)
{
    smoe_rt *rt = a->rt;
    const smoe_train_opts *o = &a->o;
    int shared = a->ro.shared_queue;
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
    else if (a->hbm_budget)
        snprintf(sched, sizeof sched, "planned for %lld bytes per rank (--hbm-budget) on %s",
                 (long long)a->hbm_budget, hw->name);
    else
        snprintf(sched, sizeof sched, "prefetch depth %d", a->depth);
    printf("schedule: %s, %s gathers, %s queue, data %s, seed %llu\n", sched,
           a->legacy ? "legacy" : "co-axis", shared ? "shared" : "dedicated", o->data_path,
           (unsigned long long)o->seed);
    char blk[64] = "";
    if (p->gather_dtype == SMOE_DT_INT8)
        snprintf(blk, sizeof blk, " (blocks of %lld%s)", (long long)p->int8_block,
                 p->wire_fallbacks ? ", some weights in the fallback" : "");
    printf("wire: weight gathers %s%s, gradient reductions %s; master weights, gradients and "
           "AdamW fp32; matmul inputs %s\n", smoe_dtype_name(p->gather_dtype), blk,
           smoe_dtype_name((smoe_dtype)o->reduce_dtype), a->matmul_bf16 ? "bf16" : "fp32");
    printf("progress thread: %s\n", smoe_rt_progress_note(rt));
    if (a->device != CLI_DEVICE_CPU)
        printf("device: %s (kernels, activations, parameters and AdamW state there; %s)\n",
               a->device == CLI_DEVICE_EMUL ? "emul, a GPU's streams emulated on the CPU"
                                             : "cuda",
               smoe_rt_size(rt) > 1 ? "a GPU per rank by its place on its host, over NCCL"
                                    : "one rank");
    smoe_train_unapplied un[SMOE_TRAIN_MAX_UNAPPLIED];
    int nu = smoe_train_unapplied_keys(cfg, smoe_mesh_slices(&p->mesh), un,
                                       SMOE_TRAIN_MAX_UNAPPLIED);
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
        cli_usage_error(where, "%s", msg);
    }
}


static const struct option k_longopts[] = {
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
    { "compare-exchange", no_argument, 0, OPT_EXCHANGE },
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
    { "device", required_argument, 0, OPT_DEVICE },
    { "matmul-dtype", required_argument, 0, OPT_MATMUL },
    { 0, 0, 0, 0 },
};

/* --steps, --seed, --prefetch-depth */
static void parse_count(train_args *a, int opt, const char *arg, const char *where)
{
    int64_t v;
    if (smoe_parse_i64(arg, &v) || v < (opt == OPT_STEPS) ||
        v > (opt == OPT_DEPTH ? SMOE_SIM_MAX_DEPTH : (int64_t)1 << 40)) {
        if (opt == OPT_DEPTH)
            cli_usage_error(where, "expected an integer from 0 to %d", SMOE_SIM_MAX_DEPTH);
        cli_usage_error(where, "expected a positive integer");
    }
    if (opt == OPT_STEPS)
        a->o.steps = v;
    else if (opt == OPT_SEED)
        a->o.seed = (uint64_t)v;
    else {
        a->depth = (int)v;
        a->depth_given = 1;
    }
}

/* The options of how the run executes; 0 when opt is none of them. */
static int parse_run_opt(train_args *a, int opt, const char *arg, const char *where)
{
    smoe_err err;
    switch (opt) {
    case OPT_STEPS:
    case OPT_SEED:
    case OPT_DEPTH: parse_count(a, opt, arg, where); return 1;
    case OPT_GATHER:
        if (strcmp(arg, "coaxis") != 0 && strcmp(arg, "legacy") != 0)
            cli_usage_error(where, "expected coaxis or legacy");
        a->legacy = strcmp(arg, "legacy") == 0;
        return 1;
    case OPT_SHARED: a->ro.shared_queue = 1; return 1;
    case OPT_PTHREAD:
    case OPT_NO_PTHREAD:
        if (a->pthread_seen && a->ro.progress_thread != (opt == OPT_PTHREAD))
            cli_usage_error(where, "contradicts the other progress-thread option");
        a->ro.progress_thread = opt == OPT_PTHREAD;
        a->pthread_seen = 1;
        return 1;
    case OPT_TIMEOUT: {
        double t;
        if (smoe_parse_f64(arg, &t) || !(t >= 0) || t > 1e6)
            cli_usage_error(where, "expected seconds from 0 (never) to 1000000");
        smoe_rt_set_timeout(a->rt, t);
        return 1;
    }
    case OPT_REDUCE_DTYPE: {
        smoe_dtype rd;
        if (smoe_dtype_parse("--reduce-dtype", arg, 3u, &rd, &err))
            cli_die(&err);
        a->o.reduce_dtype = (int)rd;
        return 1;
    }
    default: return 0;
    }
}

/* The options of memory and schedules; 0 when opt is none of them. */
static int parse_sched_opt(train_args *a, int opt, const char *arg, const char *where)
{
    smoe_err err;
    switch (opt) {
    case OPT_MAXMEM:
        if (cli_parse_bytes("--max-memory", arg, &a->o.max_memory, &err))
            cli_die(&err);
        a->maxmem_arg = arg;
        return 1;
    case OPT_SCHEDULE:
        if (a->nsched == SMOE_TRAIN_MAX_SCHEDULES)
            cli_usage_error(where, "too many schedules (at most " CLI_STR(
                                       SMOE_TRAIN_MAX_SCHEDULES) " take turns in one run)");
        for (int i = 0; i < a->nsched; i++)
            if (strcmp(a->sched_paths[i], arg) == 0)
                cli_usage_error(where, "is given twice");
        a->sched_paths[a->nsched++] = arg;
        return 1;
    case OPT_HARDWARE: a->hw_arg = arg; return 1;
    case OPT_DEVICE: a->device = cli_device_parse(arg); return 1;
    case OPT_MATMUL:
        if (strcmp(arg, "fp32") && strcmp(arg, "bf16"))
            cli_usage_error(where, "'%s': expected fp32 or bf16", arg);
        a->matmul_bf16 = strcmp(arg, "bf16") == 0;
        return 1;
    case OPT_HBM_BUDGET:
        if (cli_parse_bytes("--hbm-budget", arg, &a->hbm_budget, &err))
            cli_die(&err);
        a->budget_arg = arg;
        return 1;
    case OPT_COMPARE: a->compare = 1; return 1;
    case OPT_EXCHANGE: a->exchange = 1; return 1;
    default: return 0;
    }
}

/* The options of files and output; 0 when opt is none of them. */
static int parse_file_opt(train_args *a, int opt, const char *arg, const char *where)
{
    int64_t v;
    switch (opt) {
    case OPT_DATA: a->o.data_path = arg; return 1;
    case OPT_CKPT_DIR:
        if (!arg[0])
            cli_usage_error("argument '--checkpoint-dir'", "is empty: name a directory");
        a->o.ckpt_dir = arg;
        return 1;
    case OPT_CKPT_EVERY:
        if (smoe_parse_i64(arg, &v) || v < 1 || v > (int64_t)1 << 40)
            cli_usage_error(where, "expected a positive integer");
        a->o.ckpt_every = v;
        return 1;
    case OPT_CKPT_KEEP:
        if (smoe_parse_i64(arg, &v) || v < 1 || v > 1000000)
            cli_usage_error(where, "expected a positive integer");
        a->o.ckpt_keep = (int)v;
        return 1;
    case OPT_RESUME: a->o.resume = 1; return 1;
    case OPT_TRACE: a->o.trace_path = arg; return 1;
    case OPT_PLOT: a->plot_path = arg; return 1;
    case OPT_DUMP: a->o.dump_path = arg; return 1;
    case OPT_QUIET: a->quiet = 1; return 1;
    default: return 0;
    }
}

/* One option; returns -1, or the exit status of an option that ends the
 * command (--help, --list-keys). */
static int parse_opt(train_args *a, int opt, const char *where)
{
    smoe_err err;
    if (opt == OPT_DEVICES)
        cli_usage_error("argument '--devices'", "is set by the number of MPI ranks");
    if (opt == OPT_LIST_KEYS || opt == 'h' || opt == OPT_HELP) {
        if (smoe_rt_rank(a->rt) == 0)
            opt == OPT_LIST_KEYS ? list_keys(stdout) : usage(stdout);
        return SMOE_EXIT_OK;
    }
    if (parse_run_opt(a, opt, optarg, where) || parse_sched_opt(a, opt, optarg, where) ||
        parse_file_opt(a, opt, optarg, where))
        return -1;
    int g = cli_gather_opt(&a->c, opt, optarg, &err);
    if (g < 0)
        cli_die(&err);
    if (g || cli_common_opt(&a->c, opt, optarg))
        return -1;
    cli_usage_error(where, "%s", optopt ? "missing value or unknown option"
                                        : "unknown option (see 'smoe train --help')");
}

/* The command line into a (defaults filled); -1, or the exit status of an
 * option that ends the command. */
static int parse_args(train_args *a, int argc, char **argv)
{
    cli_common_init(&a->c);
    a->o.steps = 10;
    a->o.seed = 1;
    a->depth = 1;
    a->ro = (smoe_rt_opts){ 0, SMOE_RT_PROGRESS_AUTO };
    opterr = 0;
    optind = 1;
    int li = -1, opt;
    while ((opt = getopt_long(argc, argv, "h", k_longopts, &li)) != -1) {
        char where[300];
        if (li >= 0 && optarg)
            snprintf(where, sizeof where, "argument '--%s %s'", k_longopts[li].name, optarg);
        else
            snprintf(where, sizeof where, "argument '%s'", argv[optind - 1]);
        li = -1;
        int code = parse_opt(a, opt, where);
        if (code >= 0)
            return code;
    }
    for (int i = optind; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        char where[300];
        snprintf(where, sizeof where, "argument '%s'", argv[i]);
        if (!eq || eq == argv[i])
            cli_usage_error(where, "expected an option or KEY=VALUE");
    }
    a->c.kv = (const char **)(argv + optind);
    a->c.n_kv = argc - optind;
    const char *cdir = smoe_config_default_dir();
    if (!a->c.base && cdir) {
        snprintf(a->base_default, sizeof a->base_default, "%s/train.yml", cdir);
        a->c.base = a->base_default;
    }
    if (!a->c.model)
        a->c.model = "tiny";
    if (!a->o.data_path) {
        snprintf(a->data_default, sizeof a->data_default, "%s/../data/gpl-3.0.txt",
                 cdir ? cdir : ".");
        a->o.data_path = a->data_default;
    }
    a->c.devices = smoe_rt_size(a->rt);
    a->o.schedule_name = a->nsched == 1 ? a->sched_paths[0] : NULL;
    return -1;
}

/* --compare-exchange trains twice with one schedule and sets
 * use_ring_of_experts itself. */
static void check_exchange(const train_args *a)
{
    const smoe_train_opts *o = &a->o;
    const char *with = a->compare ? "--compare" : a->nsched > 1 ? "--schedule given twice"
                     : o->dump_path ? "--dump-params" : o->ckpt_dir ? "--checkpoint-dir"
                     : o->trace_path ? "--trace" : NULL;
    if (with) {
        char why[160];
        snprintf(why, sizeof why, "cannot be combined with %s (it trains twice)", with);
        cli_usage_error("argument '--compare-exchange'", why);
    }
    for (int i = 0; i < a->c.n_kv; i++)
        if (strncmp(a->c.kv[i], "use_ring_of_experts=", 20) == 0) {
            char where[160];
            snprintf(where, sizeof where, "argument '%s'", a->c.kv[i]);
            cli_usage_error(where, "is set by --compare-exchange (false, then true)");
        }
}

/* The flags that do not go together, before anything is read. */
static void check_flags(const train_args *a)
{
    const smoe_train_opts *o = &a->o;
    if (a->compare && (o->dump_path || o->ckpt_dir))
        cli_usage_error("argument '--compare'",
                        "cannot be combined with --dump-params or --checkpoint-dir");
    if (a->exchange)
        check_exchange(a);
    if (a->plot_path && !o->trace_path)
        cli_usage_error("argument '--plot'", "needs --trace FILE (the timeline it draws)");
    check_outputs(a->rt, a->plot_path, o->trace_path, o->dump_path);
    if ((o->ckpt_every || o->ckpt_keep || o->resume) && !o->ckpt_dir)
        cli_usage_error(o->resume      ? "argument '--resume'"
                        : o->ckpt_keep ? "argument '--checkpoint-keep'"
                                       : "argument '--checkpoint-every'",
                        "needs --checkpoint-dir DIR");
    if (a->depth_given && (a->nsched || a->hbm_budget))
        cli_usage_error("argument '--prefetch-depth'",
                        a->nsched ? "cannot be combined with --schedule (the file says when)"
                                  : "cannot be combined with --hbm-budget (the planner chooses)");
    if (a->hw_arg && !a->hbm_budget)
        cli_usage_error("argument '--hardware'", "is read only with --hbm-budget");
    if (a->nsched > 1 && (a->compare || a->hbm_budget))
        cli_usage_error("argument '--schedule'",
                        a->compare ? "given more than once takes turns itself (not with --compare)"
                                   : "cannot be combined with --hbm-budget (which plans its own)");
}

/* The profile --hbm-budget plans on. */
static void load_hw(const train_args *a, smoe_hw *hw)
{
    char hwbuf[4200], hw_where[300];
    smoe_err err;
    const char *name = a->hw_arg ? a->hw_arg : "cpu-mpi";
    const char *hwp = cli_named_file(name, "hardware", hwbuf, sizeof hwbuf);
    if (a->hw_arg)
        snprintf(hw_where, sizeof hw_where, "argument '--hardware %s'", a->hw_arg);
    else
        snprintf(hw_where, sizeof hw_where, "argument '--hbm-budget' (planned on --hardware "
                 "cpu-mpi unless given)");
    if (cli_hardware_check(name, hwp, hw_where, &err) || smoe_hw_load(hwp, hw, &err))
        cli_die(&err);
}

/* Config and plan: deterministic, so every rank gets the same verdict. */
/* The config of the flags and overrides, its keys checked. */
static smoe_config *load_config(const train_args *a, const char *const *kv, int n_kv)
{
    smoe_err err;
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = a->c.base;
    co.model = a->c.model;
    co.rules = a->c.rules;
    co.overrides = kv;
    co.n_overrides = n_kv;
    co.use_env = 1;
    smoe_config *cfg;
    if (smoe_config_load(&co, &cfg, &err) || smoe_train_check_keys(cfg, &err))
        cli_die(&err);
    return cfg;
}

static void load_plan(const train_args *a, smoe_config **cfg, smoe_plan **plan)
{
    smoe_err err;
    *cfg = load_config(a, a->c.kv, a->c.n_kv);
    smoe_plan_opts po = { a->c.devices, a->c.slices, a->c.params, 4 };
    if (smoe_plan_build(*cfg, &po, plan, &err)) {
        if (!err.where[0])
            snprintf(err.where, sizeof err.where, a->c.slices > 1 ? "%d MPI ranks, %lld slices"
                                                                  : "%d MPI ranks",
                     smoe_rt_size(a->rt), (long long)a->c.slices);
        cli_die(&err);
    }
    /* slice s runs on the ranks [s * D / S, (s + 1) * D / S) */
    if (!smoe_mesh_slices_contiguous(&(*plan)->mesh))
        cli_usage_error("argument '--slices'",
                        "MaxText's multi-slice device order for these dcn_* and ici_* sizes "
                        "interleaves the slices' ranks (an axis split within slices comes "
                        "before one split across them in mesh_axes); smoe train runs each "
                        "slice on consecutive ranks");
    /* what the gathers move (the int8 block rule refuses or falls back) */
    if (cli_apply_wire(&a->c, *plan, &err))
        cli_die(&err);
    /* a weight whose prefetch all-gather would get uneven shards */
    if (smoe_plan_check_even(*plan, SMOE_MODE_COAXIS, &err) ||
        smoe_plan_check_even(*plan, SMOE_MODE_LEGACY, &err))
        cli_die(&err);
}

/* The schedules the flags ask for, when no file gives them: --compare's
 * three (no-prefetch, prefetch and legacy at --prefetch-depth), the
 * budgeted planner's, or the one depth. Returns how many. */
static int build_schedules(const train_args *a, const smoe_config *cfg, const smoe_plan *plan,
                           const smoe_hw *hw, const smoe_model_cfg *mc, smoe_schedule **out)
{
    smoe_err err;
    smoe_status s = SMOE_OK;
    int n = a->compare ? 3 : 1;
    if (a->compare && a->hbm_budget)
        cli_usage_error("argument '--hbm-budget'", "runs one schedule (not with --compare)");
    if (a->hbm_budget) {
        int64_t act;
        s = smoe_train_act_bytes(mc, &act, &err);
        if (!s)
            s = smoe_schedule_for_budget(cfg, plan, hw, mc->batch, mc->seq, a->hbm_budget, act,
                                         a->legacy, &out[0], &err);
    }
    for (int i = 0; i < n && !a->hbm_budget && !s; i++)
        s = a->compare ? smoe_schedule_for_plan(plan, i ? a->depth : 0, i == 2, &out[i], &err)
                       : smoe_schedule_for_plan(plan, a->depth, a->legacy, &out[i], &err);
    if (s)
        cli_die(&err);
    return n;
}

/* The schedule files, read before anything else is loaded; each gathers by
 * the plan --gather names. */
static void read_schedules(const train_args *a, smoe_schedule **out)
{
    smoe_err err;
    for (int i = 0; i < a->nsched; i++) {
        if (cli_schedule_read(a->sched_paths[i], &out[i], &err))
            cli_die(&err);
        out[i]->legacy = a->legacy;
    }
}

/* The library names a run's own refusals of the schedule files by the
 * flag that asked for them. */
static void check_files(const train_args *a)
{
    if (a->nsched && a->compare)
        cli_usage_error("argument '--schedule'", "runs one schedule (not with --compare)");
    if (a->nsched && a->hbm_budget)
        cli_usage_error("argument '--schedule'",
                        "cannot be combined with --hbm-budget (which plans its own)");
}

/* One training of cfg into *res (every rank; rank 0 reports the steps). */
static void train_once(train_args *a, const smoe_config *cfg, const smoe_plan *plan,
                       smoe_schedule *const *scheds, int n, cli_runs *runs,
                       smoe_train_result *res)
{
    smoe_rt *rt = a->rt;
    smoe_train_opts *o = &a->o;
    o->schedules = (const smoe_schedule *const *)scheds;
    o->nschedules = n;
    run_ctx rc = { smoe_rt_rank(rt) == 0, a->quiet, a->c.json, runs, o->steps };
    o->on_step = on_step;
    o->on_note = on_note;
    o->ud = &rc;
    smoe_err err;
    smoe_comm comm;
    cli_device dev;
    if (a->device != CLI_DEVICE_CPU)
        runs->device = cli_device_name(a->device);
    runs->matmul_bf16 = a->matmul_bf16;
    cli_device_begin(&dev, a->device, a->matmul_bf16, rt, &plan->mesh, o, &comm);
    memset(res, 0, sizeof *res);
    if (smoe_train_run(cfg, plan, &comm, o, res, &err)) {
        requote(&err, "--max-memory", a->maxmem_arg);
        requote(&err, "--hbm-budget", a->budget_arg);
        cli_die(&err);
    }
    cli_device_end(&dev, &comm);
    runs->priority = smoe_rt_progress_priority(rt); /* collective */
    runs->slices = smoe_rt_slices_note(rt);
}

/* The training and its summary (rank 0 prints). */
static void run(train_args *a, const smoe_config *cfg, const smoe_plan *plan,
                smoe_schedule *const *scheds, int n)
{
    smoe_rt *rt = a->rt;
    int root = smoe_rt_rank(rt) == 0;
    smoe_train_opts *o = &a->o;
    cli_runs runs = { a->compare ? 3 : a->nsched > 1 ? a->nsched : 0, a->compare, { NULL },
                      smoe_rt_progress_note(rt), NULL, NULL, a->legacy, NULL, 0 };
    for (int i = 0; i < runs.n; i++)
        runs.key[i] = a->compare ? train_mode_key(i) : a->sched_paths[i];
    smoe_train_result res;
    train_once(a, cfg, plan, scheds, n, &runs, &res);
    if (root && a->plot_path)
        cli_plot_trace(o->trace_path, a->plot_path);
    if (root && a->c.json)
        train_print_json(stdout, plan, &res, &runs, o->reduce_dtype);
    else if (root)
        print_result(o, rt, &res, &runs, a->compare ? a->depth : res.prefetch_distance);
    smoe_train_result_free(&res);
}

/* --compare-exchange: the same training with the experts' all-to-all, then
 * with ring of experts (the config again with use_ring_of_experts=true;
 * the plan does not depend on it), one after the other. */
static void run_exchange(train_args *a, const smoe_config *cfg, const smoe_plan *plan,
                         smoe_schedule *const *scheds, int n)
{
    const char **kv = smoe_malloc(sizeof *kv * (size_t)(a->c.n_kv + 1));
    if (!kv)
        cli_usage_error(NULL, "out of memory");
    for (int i = 0; i < a->c.n_kv; i++)
        kv[i] = a->c.kv[i];
    kv[a->c.n_kv] = "use_ring_of_experts=true";
    smoe_config *ring = load_config(a, kv, a->c.n_kv + 1);
    cli_runs runs = { 0, 0, { NULL }, smoe_rt_progress_note(a->rt), NULL, NULL, a->legacy, NULL,
                      0 };
    smoe_train_result res[2];
    train_once(a, cfg, plan, scheds, n, &runs, &res[0]);
    train_once(a, ring, plan, scheds, n, &runs, &res[1]);
    if (smoe_rt_rank(a->rt) == 0) {
        if (a->c.json) {
            printf("{\"exchange\": {\"all_to_all\": ");
            train_print_json(stdout, plan, &res[0], &runs, a->o.reduce_dtype);
            printf(", \"ring\": ");
            train_print_json(stdout, plan, &res[1], &runs, a->o.reduce_dtype);
            printf("}}\n");
        } else {
            print_exchange(res);
        }
    }
    smoe_train_result_free(&res[0]);
    smoe_train_result_free(&res[1]);
    smoe_config_free(ring);
    smoe_free(kv);
}

int cmd_train(int argc, char **argv)
{
    smoe_rt *rt = cli_rt_start(&argc, &argv);
    smoe_err err;
    if (!rt)
        return SMOE_EXIT_FAIL;
    train_args a;
    memset(&a, 0, sizeof a);
    a.rt = rt;
    int code = parse_args(&a, argc, argv);
    if (code >= 0) {
        smoe_rt_finalize(rt);
        return code;
    }
    check_flags(&a);
    smoe_schedule *scheds[SMOE_TRAIN_MAX_SCHEDULES] = { NULL };
    read_schedules(&a, scheds);
    smoe_hw hw;
    if (a.hbm_budget)
        load_hw(&a, &hw);
    smoe_config *cfg;
    smoe_plan *plan;
    load_plan(&a, &cfg, &plan);
    if (smoe_rt_set_mesh(rt, &plan->mesh, &a.ro, &err))
        cli_die(&err);
    check_progress(rt, scheds, a.nsched, a.sched_paths, a.hbm_budget ? &hw : NULL);
    smoe_model_cfg mc;
    if (smoe_train_model_cfg(cfg, &plan->mesh, &mc, &err))
        cli_die(&err);
    if (a.exchange && (mc.ep <= 1 || mc.n_moe == 0))
        cli_usage_error("argument '--compare-exchange'",
                        "ring of experts differs from the all-to-all only with MoE layers "
                        "and an expert axis over more than one rank (ici_expert_parallelism)");
    if (smoe_rt_rank(rt) == 0 && !a.quiet && !a.c.json)
        print_banner(cfg, plan, &a, &hw, &mc);
    check_files(&a);
    int n = a.nsched ? a.nsched : build_schedules(&a, cfg, plan, &hw, &mc, scheds);
    if (a.exchange)
        run_exchange(&a, cfg, plan, scheds, n);
    else
        run(&a, cfg, plan, scheds, n);
    for (int i = 0; i < n; i++)
        smoe_schedule_free(scheds[i]);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    cli_die_under(NULL);
    smoe_rt_finalize(rt);
    return SMOE_EXIT_OK;
}
