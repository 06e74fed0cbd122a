/* The numerical oracle of the sharded trainer in one process: N ranks as
 * threads over the in-process communicator (comm.h: smoe_comm_vrank_new),
 * each running its own smoe_trainer. After 5 steps of the tiny model,
 * losses and every parameter of the sharded runs (4 ranks: fsdp=4,
 * fsdp=2 x expert=2, expert=4; 2 ranks: fsdp=2) equal the single-rank run
 * over the same global batch (relative 1e-5 by cmp_rule.h, as
 * train_oracle); runs that differ only in schedule (prefetch depth 0, 1,
 * 2, legacy gathers, the shared queue, a progress thread) are bitwise
 * identical; bf16 and int8 gathers equal the single-rank run with the same
 * wire (5e-5, as train_wire) and are bitwise identical across schedules;
 * bf16 gradient reductions are deterministic and not fp32's; and a rank
 * whose first gathered weight is scaled once by 1 + 1e-3 is caught by the
 * same comparison; with every recipe feature on, DeepSeek-V3's router and
 * YaRN on a small deepseek3 model (train_oracle's recipe runs), and with
 * MaxText's ep-as-dp rules, fsdp=2 x expert=2 equals the single-rank run.
 * With --quick (the unit tier's few seconds): 2 ranks only, fsdp=2
 * against the single-rank run, depth 0 with the shared queue and a
 * progress thread bitwise depth 1, and the perturbed rank caught. Both:
 * check_same names a rank whose digest differs, agree_err hands a rank's
 * error to every rank, ranks that issue different collectives end the process naming them
 * (exit 73), and a rank that never comes to a collective ends it after the
 * timeout naming what was waited for and the phase (exit 75).
 * usage: test_vrank CONFIG_DIR DATA_FILE [--quick] */
#define _GNU_SOURCE
#include "vrank_testlib.h"

#include <sys/wait.h>
#include <unistd.h>

#define E2 "ici_expert_parallelism=2"

/* fp32 sharded runs against the single-rank run over the same global
 * batch; returns fsdp=2 x expert=2 (in *f2e2). */
static void test_meshes(const run_out *ref, const run_out *ref2, run_out *f2e2)
{
    static const struct { const char *name, *kv; int n; } mesh[] = {
        { "fsdp=4", "ici_fsdp_parallelism=4", 4 }, { "expert=4", "ici_expert_parallelism=4", 4 },
        { "fsdp=2 (2 ranks)", NULL, 2 }, { "fsdp=2 x expert=2", E2, 4 },
    };
    for (size_t i = 0; i < sizeof mesh / sizeof mesh[0]; i++) {
        run_out x;
        run(&(run_spec){ .name = mesh[i].name, .devices = mesh[i].n, .kv = { mesh[i].kv },
                         .depth = 1 }, &x);
        char what[96];
        snprintf(what, sizeof what, "%s vs single rank", mesh[i].name);
        CHECKF(agree(mesh[i].n == 2 ? ref2 : ref, &x, 1e-5, what, 0), "%s", what);
        if (i == 3)
            *f2e2 = x;
        else
            out_free(&x);
    }
}

/* Runs differing only in schedule, bitwise the default run a (its mesh:
 * n ranks, override kv). */
static void test_schedules(const run_out *a, int n, const char *kv)
{
    static const struct { const char *what; int depth, legacy, shq, pth; } sch[] = {
        { "prefetch off == depth 1, bitwise", 0, 0, 0, 0 },
        { "depth 2 == depth 1, bitwise", 2, 0, 0, 0 },
        { "legacy == co-axis, bitwise", 1, 1, 0, 0 },
        { "shared queue == dedicated, bitwise", 1, 0, 1, 0 },
        { "progress thread == polling, bitwise", 1, 0, 0, 1 },
    };
    for (size_t i = 0; i < sizeof sch / sizeof sch[0]; i++) {
        run_out x;
        run(&(run_spec){ .name = sch[i].what, .devices = n, .kv = { kv }, .depth = sch[i].depth,
                         .legacy = sch[i].legacy, .shared_queue = sch[i].shq,
                         .progress_thread = sch[i].pth }, &x);
        CHECKF(agree(a, &x, 0, sch[i].what, 0), "%s", sch[i].what);
        out_free(&x);
    }
}

/* The oracle can fail: one rank's first gathered weight scaled once. */
static void test_perturbed(const run_out *ref, int n, const char *kv)
{
    run_out x;
    run(&(run_spec){ .name = "perturbed", .devices = n, .kv = { kv }, .depth = 1,
                     .perturb_rank = 1 }, &x);
    CHECKF(x.ok && !agree(ref, &x, 1e-5, "", 1), "a perturbed rank is not caught");
    printf("%s: a rank's gathered weight scaled by 1 + 1e-3 once: caught\n", x.ok ? "ok" : "FAIL");
    out_free(&x);
}

/* Compressed gathers: the single-rank run with the same wire, bitwise
 * across schedules, not fp32's. */
static void test_wire(const run_out *f2e2)
{
    static const struct { const char *name; int wire; int64_t block; } wire[] = {
        { "bf16", SMOE_DT_BF16, 0 }, { "int8", SMOE_DT_INT8, 8 },
    };
    for (size_t i = 0; i < sizeof wire / sizeof wire[0]; i++) {
        int w = wire[i].wire;
        int64_t b = wire[i].block;
        char what[96];
        run_out x, y, z;
        run(&(run_spec){ .name = "wref", .devices = 1, .kv = { "per_device_batch_size=16" },
                         .depth = 1, .wire = w, .block = b }, &x);
        run(&(run_spec){ .name = "we2", .devices = 4, .kv = { E2 }, .depth = 1, .wire = w,
                         .block = b }, &y);
        snprintf(what, sizeof what, "%s: fsdp=2 x expert=2 vs single rank", wire[i].name);
        CHECKF(agree(&x, &y, 5e-5, what, 0), "%s", what);
        snprintf(what, sizeof what, "%s: the run is not fp32's", wire[i].name);
        CHECKF(y.ok && !agree(f2e2, &y, 0, what, 1), "%s", what);
        run(&(run_spec){ .name = "wf4", .devices = 4, .kv = { "ici_fsdp_parallelism=4" },
                         .depth = 1, .wire = w, .block = b }, &z);
        snprintf(what, sizeof what, "%s: fsdp=4 vs single rank", wire[i].name);
        CHECKF(agree(&x, &z, 5e-5, what, 0), "%s", what);
        out_free(&z);
        out_free(&x);
        run(&(run_spec){ .name = "wleg", .devices = 4, .kv = { E2 }, .legacy = 1, .shared_queue = 1,
                         .wire = w, .block = b }, &x);
        snprintf(what, sizeof what, "%s: legacy, depth 0, shared queue == default, bitwise",
                 wire[i].name);
        CHECKF(agree(&y, &x, 0, what, 0), "%s", what);
        out_free(&x);
        out_free(&y);
    }
}

/* Every recipe feature on, DeepSeek-V3's router and YaRN on a small
 * deepseek3 model (train_oracle's recipe runs), and MaxText's ep-as-dp
 * rules on the tiny model: the sharded runs equal the single-rank run. */
static const char *const recipe_kv[] = {
    "warmup_steps_fraction=0.4", "learning_rate_schedule_steps=8",
    "gradient_clipping_threshold=0.5", "adam_eps_root=1e-10", "adamw_mask=[norm,bias]",
    "routed_bias_update_rate=0.002", "load_balance_loss_weight=0.01", "z_loss_multiplier=1e-3",
    "override_model_config=true", "base_num_decoder_layers=4", "first_num_dense_layers=1",
    "vocab_size=256", "rope_attention_scaling=true", NULL,
};

static void test_recipe(const run_out *ref)
{
    run_out a, x;
    run(&(run_spec){ .name = "rref", .devices = 1, .kv = { "per_device_batch_size=16" },
                     .depth = 1, .model = "deepseek3-tiny", .more = recipe_kv }, &a);
    run(&(run_spec){ .name = "rf2e2", .devices = 4, .kv = { E2 }, .depth = 1,
                     .model = "deepseek3-tiny", .more = recipe_kv }, &x);
    CHECK(agree(&a, &x, 1e-5, "recipe (deepseek3): fsdp=2 x expert=2 vs single rank", 0));
    out_free(&x);
    out_free(&a);
    run(&(run_spec){ .name = "epdp", .devices = 4, .kv = { E2 }, .depth = 1,
                     .rules = "ep-as-dp" }, &x);
    CHECK(agree(ref, &x, 1e-5, "ep-as-dp fsdp=2 x expert=2 vs single rank", 0));
    out_free(&x);
}

/* bf16 gradient reductions: deterministic, not fp32's. */
static void test_reduce_bf16(const run_out *f2e2)
{
    run_out x, y;
    run(&(run_spec){ .name = "r16", .devices = 4, .kv = { E2 }, .depth = 1,
                     .reduce_dtype = SMOE_DT_BF16 }, &x);
    run(&(run_spec){ .name = "r16d0", .devices = 4, .kv = { E2 }, .shared_queue = 1,
                     .reduce_dtype = SMOE_DT_BF16 }, &y);
    CHECK(agree(&x, &y, 0, "bf16 reductions: depth 0 + shared queue == depth 1, bitwise", 0));
    CHECKF(x.ok && !agree(f2e2, &x, 0, "", 1), "bf16 reductions: the run is fp32's");
    out_free(&x);
    out_free(&y);
}

/* ---- failures: in a child process, what a rank prints and exits with ---- */
typedef struct fail_job {
    smoe_comm c;
    int mode; /* 0: ranks issue different collectives; 1: rank 1 never comes */
} fail_job;

static void *fail_main(void *arg)
{
    fail_job *j = arg;
    double v = 1;
    char b[16] = "x";
    smoe_comm_set_phase(&j->c, "the failure test");
    if (smoe_comm_rank(&j->c) == 0)
        smoe_comm_allreduce_sum_f64(&j->c, &v, 1);
    else if (j->mode == 0)
        smoe_comm_gather_bytes(&j->c, b, NULL, 8);
    return NULL;
}

/* Run a 2-rank world with `mode` in a child; its exit status and stderr. */
static int fail_run(int mode, char *out, size_t cap)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    fflush(stdout); /* the child's abort flushes its copy */
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        smoe_mesh m = { 1, { "fsdp" }, { 2 }, { 0 } };
        smoe_comm c[2];
        smoe_comm_vrank_opts o = { 1, 0, 0 };
        smoe_err err;
        if (smoe_comm_vrank_new(&m, &o, c, &err))
            _exit(99);
        fail_job j[2] = { { c[0], mode }, { c[1], mode } };
        pthread_t th[2];
        for (int r = 0; r < 2; r++)
            pthread_create(&th[r], NULL, fail_main, &j[r]);
        for (int r = 0; r < 2; r++)
            pthread_join(th[r], NULL);
        _exit(0); /* not reached: the collective aborts */
    }
    close(fd[1]);
    ssize_t n, got = 0;
    while (got < (ssize_t)cap - 1 && (n = read(fd[0], out + got, cap - 1 - (size_t)got)) > 0)
        got += n;
    out[got] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_failures(void)
{
    char out[2048];
    int rc = fail_run(0, out, sizeof out);
    CHECKF(rc == SMOE_EXIT_COMM && strstr(out, "smoe: rank ") &&
               strstr(out, "differs between the ranks: a ") &&
               strstr(out, "during the failure test"),
           "different collectives: exit %d, '%s'", rc, out);
    printf("%s: ranks issuing different collectives abort: %s", rc == SMOE_EXIT_COMM ? "ok" : "FAIL",
           out);
    rc = fail_run(1, out, sizeof out);
    CHECKF(rc == SMOE_EXIT_TIMEOUT &&
               strstr(out, "smoe: rank 0: waited 1 s for an all-reduce over all ranks during "
                           "the failure test"),
           "a rank that never comes: exit %d, '%s'", rc, out);
    printf("%s: a rank that never comes times out: %s", rc == SMOE_EXIT_TIMEOUT ? "ok" : "FAIL",
           out);
}

/* ---- the world's status agreements on 2 ranks ---- */
typedef struct agree_job {
    smoe_comm c;
    smoe_status same, agreed;
    smoe_err same_err, agreed_err;
} agree_job;

static void *agree_main(void *arg)
{
    agree_job *j = arg;
    int r = smoe_comm_rank(&j->c);
    const char *names[1] = { "thing" }, *dig[1] = { r ? "bb" : "aa" };
    j->same = smoe_comm_check_same(&j->c, 1, names, dig, &j->same_err);
    smoe_status s = r ? smoe_err_set(&j->agreed_err, SMOE_EIO, "rank 1's own failure") : SMOE_OK;
    j->agreed = smoe_comm_agree_err(&j->c, s, &j->agreed_err);
    return NULL;
}

static void test_agree(void)
{
    smoe_mesh m = { 1, { "fsdp" }, { 2 }, { 0 } };
    smoe_comm c[2];
    smoe_comm_vrank_opts o = { 20, 0, 0 };
    smoe_err err;
    agree_job j[2];
    memset(j, 0, sizeof j);
    CHECK(smoe_comm_vrank_new(&m, &o, c, &err) == SMOE_OK);
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        j[r].c = c[r];
        pthread_create(&th[r], NULL, agree_main, &j[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    smoe_comm_vrank_free(c, 2);
    CHECK(j[0].same == SMOE_EINVAL && j[1].same == SMOE_EINVAL);
    CHECKF(strstr(j[0].same_err.msg, "rank 1 runs a different thing than rank 0"), "%s",
           j[0].same_err.msg);
    CHECK(j[0].agreed == SMOE_EIO && j[1].agreed == SMOE_EIO);
    CHECKF(strcmp(j[0].agreed_err.msg, "rank 1's own failure") == 0, "%s", j[0].agreed_err.msg);
    printf("ok: check_same names the differing rank; agree_err hands rank 1's error to "
           "rank 0\n");
}

int main(int argc, char **argv)
{
    int quick = argc == 4 && strcmp(argv[3], "--quick") == 0;
    if (argc != 3 && !quick) {
        fprintf(stderr, "usage: test_vrank CONFIG_DIR DATA_FILE [--quick]\n");
        return 2;
    }
    cfgdir = argv[1];
    datafile = argv[2];
    smoe_err err;
    if (smoe_train_data_load(datafile, 128, &data, &err)) {
        fprintf(stderr, "test_vrank: %s\n", err.msg);
        return 1;
    }
    test_failures();
    test_agree();
    run_out ref2, x;
    run(&(run_spec){ .name = "ref2", .devices = 1, .kv = { "per_device_batch_size=8" },
                     .depth = 1 }, &ref2);
    if (quick) { /* 2 ranks: the oracle, two schedules, the perturbed rank */
        run(&(run_spec){ .name = "fsdp=2", .devices = 2, .depth = 1 }, &x);
        CHECK(agree(&ref2, &x, 1e-5, "fsdp=2 (2 ranks) vs single rank", 0));
        run_out y;
        run(&(run_spec){ .name = "d0shq", .devices = 2, .shared_queue = 1, .perturb_rank = -1,
                         .progress_thread = 1 }, &y);
        CHECK(agree(&x, &y, 0, "fsdp=2: depth 0, shared queue, progress thread == depth 1, "
                    "bitwise", 0));
        out_free(&y);
        test_perturbed(&ref2, 2, NULL);
        out_free(&x);
    } else {
        run_out ref, f2e2;
        run(&(run_spec){ .name = "ref", .devices = 1, .kv = { "per_device_batch_size=16" },
                         .depth = 1 }, &ref);
        test_meshes(&ref, &ref2, &f2e2);
        test_schedules(&f2e2, 4, E2);
        test_perturbed(&ref, 4, E2);
        test_wire(&f2e2);
        test_reduce_bf16(&f2e2);
        test_recipe(&ref);
        out_free(&f2e2);
        out_free(&ref);
    }
    out_free(&ref2);
    smoe_train_data_free(data);
    return check_report();
}
