/* The communicator over NCCL (ncomm.h) against the in-process ranks, on
 * the host emulation of a device with a thread per stream and the fake
 * NCCL (fake_nccl.c: its collectives launched in the transfer streams'
 * order, reductions in rank order): 4 ranks, each a thread with its own
 * trainer over smoe_comm_nccl_new on top of its in-process communicator
 * (left on the host: ranks, mesh, small collectives). After 5 steps of the
 * tiny model, fsdp=4 and data=2 x fsdp=2 ("2x2") are bit for bit the same
 * runs on CPU ranks, in fp32 and with bf16 gathers, and so is 2x2 with
 * legacy gathers at depth 0 (residual stages at the wait); within 1e-5 of
 * the single-rank CPU run; int8 gathers are refused in one line.
 * usage: test_ncomm CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "fake_nccl.h"
#include "smoe/ncomm.h"
#include "vrank_testlib.h"

static const smoe_dev *g_dev; /* the run's device, for the launcher */

/* the fake's collectives as host functions of the transfer stream */
static int launch(void *stream, void (*work)(void *), void *arg)
{
    smoe_err err;
    return smoe_dev_host_fn(g_dev, stream, work, arg, &err) != SMOE_OK;
}

/* the fake takes the emulation's streams as they are */
static void *same_stream(smoe_dev_stream *s) { return s; }

static int wrap(const rank_job *j, smoe_comm *out, smoe_err *err)
{
    const dev_ranks *d = j->dr;
    int r = j->rank;
    g_dev = &d->dev;
    smoe_comm_device cd = { &d->dev, d->cs[r], d->xs[r], d->ops, d->xq[r], d->cq[r], 0,
                            d->res[r], d->red[r] };
    return smoe_comm_nccl_new(&j->comm, &cd, same_stream, out, err) != SMOE_OK;
}

static void unwrap(smoe_comm *c) { smoe_comm_nccl_free(c); }

static run_spec spec(const char *name, const char *kv, int wire, int depth, int legacy, int nccl)
{
    return (run_spec){ .name = name, .devices = 4, .kv = { kv }, .depth = depth,
                       .legacy = legacy, .wire = wire,
                       .device = nccl ? VR_DEV_EMUL_THREADS : VR_DEV_CPU,
                       .wrap = nccl ? wrap : NULL, .unwrap = nccl ? unwrap : NULL };
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_ncomm CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    cfgdir = argv[1];
    datafile = argv[2];
    smoe_err err;
    if (smoe_train_data_load(datafile, 128, &data, &err)) {
        fprintf(stderr, "test_ncomm: %s\n", err.msg);
        return 1;
    }
    fake_nccl_set_launcher(launch);
    static const struct { const char *what, *kv; int wire, depth, legacy; } c[] = {
        { "fsdp=4", "ici_fsdp_parallelism=4", 0, 1, 0 },
        { "2x2", "ici_data_parallelism=2", 0, 1, 0 },
        { "2x2, bf16 gathers", "ici_data_parallelism=2", SMOE_DT_BF16, 1, 0 },
        { "2x2, legacy at depth 0", "ici_data_parallelism=2", 0, 0, 1 },
    };
    run_out ref;
    run(&(run_spec){ .name = "ref", .devices = 1, .kv = { "per_device_batch_size=16" },
                     .depth = 1 }, &ref);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        run_out cpu, nc;
        char msg[160];
        run_spec a = spec(c[i].what, c[i].kv, c[i].wire, c[i].depth, c[i].legacy, 0);
        run_spec b = spec(c[i].what, c[i].kv, c[i].wire, c[i].depth, c[i].legacy, 1);
        run(&a, &cpu);
        run(&b, &nc);
        snprintf(msg, sizeof msg, "%s over NCCL == on CPU ranks, bitwise", c[i].what);
        CHECKF(agree(&cpu, &nc, 0, msg, 0), "%s", msg);
        if (c[i].wire == 0) {
            snprintf(msg, sizeof msg, "%s over NCCL vs the single-rank CPU run", c[i].what);
            CHECKF(agree(&ref, &nc, 1e-5, msg, 0), "%s", msg);
        }
        out_free(&cpu);
        out_free(&nc);
    }
    run_spec bad = spec("int8", "ici_fsdp_parallelism=4", SMOE_DT_INT8, 1, 0, 1);
    bad.block = 8;
    bad.expect_fail = 1;
    run_out x;
    run(&bad, &x);
    int ok = x.s0 == SMOE_EINVAL && strstr(x.err0.msg, "int8 gathers over NCCL are not supported") &&
             !strchr(x.err0.msg, '\n');
    CHECKF(ok, "int8 over NCCL: status %d, '%s'", (int)x.s0, x.err0.msg);
    printf("%s: int8 gathers refused: %s\n", ok ? "ok" : "FAIL", x.err0.msg);
    out_free(&x);
    out_free(&ref);
    fake_nccl_set_launcher(NULL);
    smoe_train_data_free(data);
    return check_report();
}
