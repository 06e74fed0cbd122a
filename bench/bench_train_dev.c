/* One rank's training step on a kernel table, timed, for the comparison
 * with PyTorch on the same device (bench/vs_torch_gpu.sh): smoe's trainer
 * (train.h) over the single-rank communicator on the CPU, the emulated
 * device or CUDA device 0, in fp32 or with bf16 matmul inputs
 * (SMOE_KOPS_BF16_GEMM), on a model of bench_models.h. After one warm-up
 * step it runs STEPS steps and prints one JSON line: the parameter count,
 * the median and quartiles of the steps' wall time (rec.step_ms), the
 * mean step over the window between two device syncs (what the device
 * took, its queue drained at both ends), the step-1 loss, the model's
 * FLOPs per step (3 x the forward's, smoe_model_fwd_flops_per_token) and
 * the rate they make at the mean step. It asserts nothing.
 * usage: bench_train_dev CONFIG_DIR DATA_FILE [--device cpu|emul|cuda]
 *        [--model tiny|wide|big] [--matmul-dtype fp32|bf16] [--steps N] */
#define _GNU_SOURCE
#include "bench_models.h"
#include "bench_stats.h"
#include "smoe/cuda.h"
#include "smoe/emul.h"
#include "smoe/model.h"
#include "smoe/train.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct args {
    const char *device, *model;
    int bf16, steps;
} args;

static _Noreturn void usage(const char *msg)
{
    fprintf(stderr, "bench_train_dev: %s\nusage: bench_train_dev CONFIG_DIR DATA_FILE "
            "[--device cpu|emul|cuda] [--model tiny|wide|big] [--matmul-dtype fp32|bf16] "
            "[--steps N]\n", msg);
    exit(2);
}

static args parse(int argc, char **argv)
{
    args a = { "cpu", "tiny", 0, 10 };
    for (int i = 3; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v)
            usage("a flag without its value");
        if (!strcmp(f, "--device") &&
            (!strcmp(v, "cpu") || !strcmp(v, "emul") || !strcmp(v, "cuda")))
            a.device = v;
        else if (!strcmp(f, "--model"))
            a.model = v;
        else if (!strcmp(f, "--matmul-dtype") && (!strcmp(v, "fp32") || !strcmp(v, "bf16")))
            a.bf16 = !strcmp(v, "bf16");
        else if (!strcmp(f, "--steps") && (a.steps = (int)strtol(v, &end, 10)) >= 1 &&
                 a.steps <= 10000 && *end == 0)
            ;
        else
            usage("an unknown flag, or a value out of range");
    }
    return a;
}

typedef struct table {
    smoe_dev dev;
    smoe_dev_stream *s;
    smoe_eq *eq;
    smoe_kq *kq;
} table;

/* o->kops / o->kstream for the device named; 0, or 1 with err set */
static int table_open(table *t, const args *a, smoe_train_opts *o, smoe_err *err)
{
    unsigned flags = a->bf16 ? SMOE_KOPS_BF16_GEMM : 0;
    memset(t, 0, sizeof *t);
    if (!strcmp(a->device, "cpu")) {
        o->kops = a->bf16 ? smoe_kops_cpu_bf16() : NULL;
        return 0;
    }
    int cuda = !strcmp(a->device, "cuda");
    if ((cuda ? smoe_dev_cuda_open(0, &t->dev, err)
              : smoe_dev_host_open(SMOE_DEV_HOST_THREADS, 0, &t->dev, err)) ||
        smoe_dev_stream_new(&t->dev, 0, &t->s, err) ||
        (cuda ? smoe_kq_cuda_new(&t->dev, t->s, 0, flags, &t->kq, err)
              : smoe_eq_new(&t->dev, t->s, flags, &t->eq, err)))
        return 1;
    o->kops = cuda ? smoe_kops_cuda() : smoe_kops_emul();
    o->kstream = cuda ? (void *)t->kq : (void *)t->eq;
    return 0;
}

static int table_sync(table *t, smoe_err *err)
{
    return t->dev.ops && smoe_dev_sync(&t->dev, 0, err) != SMOE_OK;
}

static void table_close(table *t)
{
    smoe_eq_free(t->eq);
    smoe_kq_free(t->kq);
    if (t->dev.ops) {
        smoe_dev_stream_free(&t->dev, t->s);
        smoe_dev_close(&t->dev);
    }
}

/* the model's config and plan on one device; 0, or 1 with err set */
static int load(const char *cfgdir, const char *const *kv, smoe_config **cfg, smoe_plan **plan,
                smoe_schedule **sched, smoe_err *err)
{
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", cfgdir);
    int n = 0;
    while (kv[n])
        n++;
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    co.overrides = kv;
    co.n_overrides = n;
    smoe_plan_opts po = { 1, 1, NULL, 4 };
    return smoe_config_load(&co, cfg, err) || smoe_plan_build(*cfg, &po, plan, err) ||
           smoe_schedule_for_plan(*plan, 1, 0, sched, err);
}

/* the steps of trainer t; 0, or 1 with err set */
static int steps(smoe_trainer *t, table *tb, smoe_train_data *data, int n, double *ms,
                 double *mean_ms, double *loss0, smoe_err *err)
{
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    int bad = !tok || !tgt;
    double t0 = 0;
    for (int s = 0; s <= n && !bad; s++) {
        smoe_train_step rec;
        bad = smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt, err) ||
              smoe_trainer_step(t, tok, tgt, &rec, err);
        if (!bad && s == 0) { /* the warm-up: the device drained, the clock starts */
            *loss0 = rec.loss;
            bad = table_sync(tb, err);
            t0 = smoe_now();
        } else if (!bad) {
            ms[s - 1] = rec.step_ms;
        }
    }
    bad = bad || table_sync(tb, err);
    *mean_ms = (smoe_now() - t0) * 1e3 / n;
    free(tok);
    free(tgt);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage("CONFIG_DIR and DATA_FILE are required");
    args a = parse(argc, argv);
    int known;
    const char *const *kv = bench_model_kv(a.model, &known);
    if (!known)
        usage("--model: expected tiny, wide or big");
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_config *cfg = NULL;
    smoe_plan *plan = NULL;
    smoe_schedule *sched = NULL;
    smoe_comm comm = { NULL, NULL };
    smoe_train_data *data = NULL;
    smoe_trainer *t = NULL;
    table tb;
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    memset(&tb, 0, sizeof tb);
    double *ms = calloc((size_t)a.steps, sizeof *ms), mean = 0, loss0 = 0;
    int bad = !ms || load(argv[1], kv, &cfg, &plan, &sched, &err) ||
              smoe_comm_local_new(&plan->mesh, 600, &comm, &err) ||
              table_open(&tb, &a, &o, &err);
    const smoe_schedule *one[1] = { sched };
    o.steps = a.steps + 1;
    o.seed = 7;
    o.schedules = one;
    o.nschedules = 1;
    int64_t seq = 0;
    bad = bad || smoe_config_int(cfg, "max_target_length", &seq, &err) ||
          smoe_train_data_load(argv[2], seq, &data, &err) ||
          smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) ||
          steps(t, &tb, data, a.steps, ms, &mean, &loss0, &err);
    if (bad) {
        fprintf(stderr, "bench_train_dev: %s\n", err.msg);
    } else {
        const smoe_model_cfg *mc = smoe_trainer_model(t);
        int np = 0;
        const smoe_trainer_param *p = smoe_trainer_params(t, &np);
        int64_t params = 0;
        for (int i = 0; i < np; i++)
            params += p[i].numel;
        double flops = 3 * smoe_model_fwd_flops_per_token(mc) * (double)(mc->batch * mc->seq);
        double q[3];
        bench_quartiles(ms, a.steps, q);
        printf("{\"device\": \"%s\", \"model\": \"%s\", \"matmul_dtype\": \"%s\", "
               "\"params\": %lld, \"steps\": %d, \"median_step_ms\": %.4f, \"q1_ms\": %.4f, "
               "\"q3_ms\": %.4f, \"mean_step_ms\": %.4f, \"loss0\": %.6f, "
               "\"model_flops_per_step\": %.6g, \"tflops\": %.4f}\n",
               a.device, a.model, a.bf16 ? "bf16" : "fp32", (long long)params, a.steps,
               q[1], q[0], q[2], mean, loss0, flops,
               flops / (mean * 1e-3) / 1e12);
    }
    smoe_trainer_free(t);
    table_close(&tb);
    smoe_train_data_free(data);
    if (comm.ctx)
        smoe_comm_local_free(&comm);
    smoe_schedule_free(sched);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
    free(ms);
    return bad;
}
