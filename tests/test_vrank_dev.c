/* Several ranks on one device, in one process (comm.h:
 * smoe_comm_vrank_set_device): each rank a thread with a compute stream
 * (its trainer's kernel queue) and a transfer stream (its collectives),
 * every collective device copies and sums ordered by events.
 *   test_vrank_dev CONFIG_DIR DATA_FILE: the host emulation of the device
 *     (emul.h), whose kernels are the CPU's, in its adversarial order.
 *     After 5 steps of the tiny model (MoE, ep = 1):
 *     - fsdp=4 and data=2 x fsdp=2 ("2x2") are bit for bit the same meshes
 *       on CPU ranks, and within 1e-5 of the single-rank CPU run over the
 *       same global batch (cmp_rule.h, as test_vrank);
 *     - on 2x2, prefetch depths 0 and 2, legacy gathers, the shared queue
 *       and a progress thread are bitwise depth 1, and so is depth 2 with
 *       a thread per stream (real concurrency);
 *     - reading the peers' buffers without waiting on their issue events
 *       (a test hook) gives different numbers: the events are what order
 *       the ranks;
 *     - bf16 gathers and an expert group of two are refused in one line.
 *   test_vrank_dev CONFIG_DIR DATA_FILE cuda: CUDA device 0: fsdp=4 and
 *     2x2 within 1e-5 of the single-rank CPU run, schedules bitwise; exit
 *     77 without a device. */
#define _GNU_SOURCE
#include "vrank_testlib.h"

#define D2 "ici_data_parallelism=2"
#define F4 "ici_fsdp_parallelism=4"

static run_spec spec(const char *name, int devices, const char *kv, int device, int depth)
{
    return (run_spec){ .name = name, .devices = devices, .kv = { kv }, .depth = depth,
                       .device = device, .seed = 11 };
}

/* a run on `device` against its CPU twin (bitwise; NULL: none) and the
 * single-rank run (1e-5); the run in *keep when keep is not NULL */
static void mesh_run(const char *what, int device, int n, const char *kv, const run_out *cpu,
                     const run_out *ref, run_out *keep)
{
    run_out x;
    char msg[160];
    run_spec sp = spec(what, n, kv, device, 1);
    run(&sp, &x);
    if (cpu) {
        snprintf(msg, sizeof msg, "%s on the device == on CPU ranks, bitwise", what);
        CHECKF(agree(cpu, &x, 0, msg, 0), "%s", msg);
    }
    snprintf(msg, sizeof msg, "%s on the device vs the single-rank CPU run", what);
    CHECKF(agree(ref, &x, 1e-5, msg, 0), "%s", msg);
    if (keep)
        *keep = x;
    else
        out_free(&x);
}

static void schedules(const run_out *a, int device)
{
    static const struct { const char *what; int depth, legacy, shq, pth, dev; double gbs; } sch[] = {
        { "2x2: prefetch off == depth 1, bitwise", 0, 0, 0, 0, 0, 0 },
        { "2x2: depth 2 == depth 1, bitwise", 2, 0, 0, 0, 0, 0 },
        { "2x2: legacy == co-axis, bitwise", 1, 1, 0, 0, 0, 0 },
        { "2x2: shared queue == dedicated, bitwise", 1, 0, 1, 0, 0, 0 },
        { "2x2: progress thread == polling, bitwise", 1, 0, 0, 1, 0, 0 },
        { "2x2: depth 2, a thread per stream == depth 1, bitwise", 2, 0, 0, 1,
          VR_DEV_EMUL_THREADS, 0 },
        { "2x2: a 2 GB/s link, a thread per stream == depth 1, bitwise", 1, 0, 0, 0,
          VR_DEV_EMUL_THREADS, 2 },
    };
    for (size_t i = 0; i < sizeof sch / sizeof sch[0]; i++) {
        if (sch[i].dev && device == VR_DEV_CUDA)
            continue;
        run_spec sp = spec(sch[i].what, 4, D2, sch[i].dev ? sch[i].dev : device, sch[i].depth);
        sp.legacy = sch[i].legacy;
        sp.shared_queue = sch[i].shq;
        sp.progress_thread = sch[i].pth;
        sp.link_gbs = sch[i].gbs;
        run_out x;
        run(&sp, &x);
        CHECKF(agree(a, &x, 0, sch[i].what, 0), "%s", sch[i].what);
        out_free(&x);
    }
}

/* the mutation: peers read without the events; some read must go stale */
static void unordered(const run_out *a)
{
    smoe_test_hooks h = smoe_get_test_hooks();
    h.dev_skip_peer_wait = 1;
    smoe_set_test_hooks(&h);
    run_out x;
    run_spec sp = spec("unordered", 4, D2, VR_DEV_EMUL, 1);
    run(&sp, &x);
    h.dev_skip_peer_wait = 0;
    smoe_set_test_hooks(&h);
    int caught = !x.ok || !agree(a, &x, 0, "", 1);
    CHECKF(caught, "reads without the peers' issue events gave the ordered run's numbers");
    printf("%s: peers read without waiting on their issue events: the numbers differ\n",
           caught ? "ok" : "FAIL");
    out_free(&x);
}

/* bf16 gathers: the device's records are the host's, bit for bit, on both
 * meshes and across schedules, and not fp32's numbers */
static void wire_bf16(const run_out *fp32)
{
    static const struct { const char *what, *kv; int depth, legacy, dev; } w[] = {
        { "bf16 fsdp=4", F4, 1, 0, 0 }, { "bf16 2x2", D2, 1, 0, 0 },
        { "bf16 2x2, legacy, depth 0", D2, 0, 1, 0 },
        { "bf16 2x2, a thread per stream", D2, 1, 0, VR_DEV_EMUL_THREADS },
    };
    run_out cpu[2];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        run_spec sp = spec(w[i].what, 4, w[i].kv, w[i].dev ? w[i].dev : VR_DEV_EMUL, w[i].depth);
        sp.wire = SMOE_DT_BF16;
        sp.legacy = w[i].legacy;
        run_out x;
        char msg[160];
        if (i < 2) { /* the CPU ranks' run of the mesh */
            run_spec c = sp;
            c.device = VR_DEV_CPU;
            run(&c, &cpu[i]);
        }
        run(&sp, &x);
        snprintf(msg, sizeof msg, "%s on the device == on CPU ranks, bitwise", w[i].what);
        CHECKF(agree(&cpu[i < 2 ? i : 1], &x, 0, msg, 0), "%s", msg);
        if (i == 1)
            CHECKF(x.ok && !agree(fp32, &x, 0, "", 1), "bf16 gathers on the device train as fp32");
        out_free(&x);
    }
    out_free(&cpu[0]);
    out_free(&cpu[1]);
}

/* what the device ranks do not run yet: refused in one line */
static void refused_one(const char *what, run_spec *sp, const char *want)
{
    run_out x;
    sp->expect_fail = 1;
    run(sp, &x);
    int ok = x.s0 == SMOE_EINVAL && strstr(x.err0.msg, want) && !strchr(x.err0.msg, '\n');
    CHECKF(ok, "%s: status %d, '%s'", what, (int)x.s0, x.err0.msg);
    printf("%s: %s: %s\n", ok ? "ok" : "FAIL", what, x.err0.msg);
    out_free(&x);
}

static void refusals(void)
{
    run_spec sp = spec("int8", 4, F4, VR_DEV_EMUL, 1);
    sp.wire = SMOE_DT_INT8;
    sp.block = 8;
    refused_one("int8 gathers", &sp, "int8 gathers on a device are not supported yet");
    sp = spec("r16", 4, D2, VR_DEV_EMUL, 1);
    sp.reduce_dtype = SMOE_DT_BF16;
    refused_one("bf16 gradient reductions", &sp, "bf16 reductions on a device are not supported yet");
    sp = spec("e2", 4, "ici_expert_parallelism=2", VR_DEV_EMUL, 1);
    refused_one("an expert group of two", &sp, "(ep = 1, no ring of experts)");
}

int main(int argc, char **argv)
{
    int cuda = argc == 4 && strcmp(argv[3], "cuda") == 0;
    if (argc != 3 && !cuda) {
        fprintf(stderr, "usage: test_vrank_dev CONFIG_DIR DATA_FILE [cuda]\n");
        return 2;
    }
    cfgdir = argv[1];
    datafile = argv[2];
    smoe_err err;
    if (cuda) {
        smoe_dev d;
        if (smoe_dev_cuda_open(0, &d, &err)) {
            printf("skipped: %s\n", err.msg);
            return 77;
        }
        smoe_dev_close(&d);
    }
    if (smoe_train_data_load(datafile, 128, &data, &err)) {
        fprintf(stderr, "test_vrank_dev: %s\n", err.msg);
        return 1;
    }
    int device = cuda ? VR_DEV_CUDA : VR_DEV_EMUL;
    run_out ref, cpu4, cpu22, d22;
    run(&(run_spec){ .name = "ref", .devices = 1, .kv = { "per_device_batch_size=16" },
                     .depth = 1 }, &ref);
    if (!cuda) {
        run_spec c4 = spec("cpu fsdp=4", 4, F4, VR_DEV_CPU, 1);
        run_spec c22 = spec("cpu 2x2", 4, D2, VR_DEV_CPU, 1);
        run(&c4, &cpu4);
        run(&c22, &cpu22);
    }
    mesh_run("fsdp=4", device, 4, F4, cuda ? NULL : &cpu4, &ref, NULL);
    mesh_run("data=2 x fsdp=2", device, 4, D2, cuda ? NULL : &cpu22, &ref, &d22);
    schedules(&d22, device);
    if (!cuda) {
        unordered(&d22);
        wire_bf16(&d22);
        refusals();
        out_free(&cpu4);
        out_free(&cpu22);
    }
    out_free(&d22);
    out_free(&ref);
    smoe_train_data_free(data);
    return check_report();
}
