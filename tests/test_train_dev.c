/* smoe train's steps on a device table (train.h: opts.kops), one rank over
 * the single-rank communicator, against the CPU:
 *   test_train_dev CONFIG_DIR DATA_FILE: the emulated table (emul.h) on
 *     the host emulation in its adversarial order: 4 steps of the tiny
 *     model (MoE, ep = 1) give bit for bit the CPU's losses, grad norms,
 *     learning rates and final parameter digest; in the bf16 mode
 *     (SMOE_KOPS_BF16_GEMM) bit for bit the CPU's bf16-input twin
 *     (smoe_kops_cpu_bf16), which differs from fp32; a run saved after 2
 *     steps and resumed by a new trainer on the device equals the
 *     uninterrupted one; and a communicator other than the single rank's
 *     is refused in one line.
 *   test_train_dev CONFIG_DIR DATA_FILE cuda: the CUDA table on device 0:
 *     losses and grad norms within 1e-5 of the CPU; exit 77 without a
 *     device. */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_setup.h"
#include "smoe/cuda.h"
#include "smoe/emul.h"
#include "smoe/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 4 };

static smoe_comm comm;
static smoe_config *cfg;
static smoe_plan *plan;
static smoe_train_data *data;
static smoe_dev dev;
static smoe_dev_stream *ds;
static double TOL;

typedef struct run_out {
    smoe_train_step rec[STEPS];
    char hex[65];
    int ok;
} run_out;

/* steps [from, to) of a trainer on table k (NULL: the CPU's), checkpoints
 * in ckpt (saved at `to` when to < STEPS; resumed when from > 0) */
static run_out run(const smoe_kops *k, void *q, int64_t from, int64_t to, const char *ckpt)
{
    run_out r;
    memset(&r, 0, sizeof r);
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = STEPS;
    o.seed = 7;
    o.schedules = setup_schedules;
    o.nschedules = 1;
    o.kops = k;
    o.kstream = q;
    o.ckpt_dir = ckpt;
    o.resume = from > 0;
    smoe_err err;
    smoe_trainer *t = NULL;
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return r;
    smoe_train_result res;
    memset(&res, 0, sizeof res);
    if (from > 0)
        CHECKF(smoe_trainer_load(t, &res, &err) == SMOE_OK, "%s", err.msg);
    smoe_train_result_free(&res);
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    int bad = 0;
    for (int64_t s = from; s < to && !bad; s++) {
        bad = smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt, &err) ||
              smoe_trainer_step(t, tok, tgt, &r.rec[s], &err) != SMOE_OK;
        CHECKF(!bad, "step %lld on %s: %s", (long long)s + 1, k ? k->name : "cpu", err.msg);
    }
    if (!bad && to < STEPS)
        CHECKF(smoe_trainer_save(t, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(smoe_trainer_digest(t, NULL, r.hex, &err) == SMOE_OK, "%s", err.msg);
    r.ok = !bad;
    free(tok);
    free(tgt);
    smoe_trainer_free(t);
    return r;
}

static int near(double a, double b) { return TOL == 0.0 ? a == b : fabs(a - b) <= TOL * fabs(b); }

/* a's steps [from, STEPS) against b's */
static void same(const char *what, const run_out *a, const run_out *b, int from, int digest)
{
    for (int s = from; s < STEPS; s++)
        CHECKF(near(a->rec[s].loss, b->rec[s].loss) && near(a->rec[s].grad_norm, b->rec[s].grad_norm) &&
                   a->rec[s].lr == b->rec[s].lr,
               "%s, step %d: loss %.17g / %.17g, grad norm %.17g / %.17g", what, s + 1,
               a->rec[s].loss, b->rec[s].loss, a->rec[s].grad_norm, b->rec[s].grad_norm);
    if (digest)
        CHECKF(strcmp(a->hex, b->hex) == 0, "%s: parameters %s / %s", what, a->hex, b->hex);
}

static void emulated(const char *dir)
{
    smoe_err err;
    smoe_eq *q32 = NULL, *q16 = NULL;
    CHECKF(smoe_eq_new(&dev, ds, 0, &q32, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(smoe_eq_new(&dev, ds, SMOE_KOPS_BF16_GEMM, &q16, &err) == SMOE_OK, "%s", err.msg);
    if (!q32 || !q16)
        return;
    run_out cpu = run(NULL, NULL, 0, STEPS, NULL), em = run(smoe_kops_emul(), q32, 0, STEPS, NULL);
    CHECK(cpu.ok && em.ok);
    same("emulated device vs CPU", &em, &cpu, 0, 1);
    printf("fp32: loss %.9f -> %.9f, params %.16s (CPU and emulated device)\n", cpu.rec[0].loss,
           cpu.rec[STEPS - 1].loss, cpu.hex);
    run_out c16 = run(smoe_kops_cpu_bf16(), NULL, 0, STEPS, NULL);
    run_out e16 = run(smoe_kops_emul(), q16, 0, STEPS, NULL);
    same("bf16: emulated device vs the CPU twin", &e16, &c16, 0, 1);
    CHECKF(c16.rec[STEPS - 1].loss != cpu.rec[STEPS - 1].loss && strcmp(c16.hex, cpu.hex) != 0,
           "bf16 trains as fp32: the mode is not on");
    printf("bf16: loss %.9f -> %.9f\n", c16.rec[0].loss, c16.rec[STEPS - 1].loss);
    /* saved after 2 steps, resumed by a new trainer, both on the device */
    run_out first = run(smoe_kops_emul(), q32, 0, 2, dir);
    run_out rest = run(smoe_kops_emul(), q32, 2, STEPS, dir);
    CHECK(first.ok && rest.ok);
    same("resumed on the emulated device vs uninterrupted", &rest, &em, 2, 1);
    CHECKF(smoe_eq_status(q32, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(smoe_eq_status(q16, &err) == SMOE_OK, "%s", err.msg);
    smoe_eq_free(q32);
    smoe_eq_free(q16);
}

/* a communicator other than the single rank's: refused in one line */
static void refused(void)
{
    smoe_eq *q = NULL;
    smoe_err err;
    smoe_comm vr;
    smoe_comm_vrank_opts vo = { 20, 0, 0 };
    CHECKF(smoe_eq_new(&dev, ds, 0, &q, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(smoe_comm_vrank_new(&plan->mesh, &vo, &vr, &err) == SMOE_OK, "%s", err.msg);
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 1;
    o.schedules = setup_schedules;
    o.nschedules = 1;
    o.kops = smoe_kops_emul();
    o.kstream = q;
    smoe_trainer *t = NULL;
    CHECK(smoe_trainer_new(cfg, plan, &vr, &o, data, &t, &err) == SMOE_EINVAL && !t &&
          strstr(err.msg, "single-rank") && !strchr(err.msg, '\n'));
    smoe_comm_vrank_free(&vr, 1);
    smoe_eq_free(q);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const int cuda = argc > 3 && strcmp(argv[3], "cuda") == 0;
    char tmpl[] = "/tmp/smoe_train_dev_XXXXXX";
    if (trainer_setup("test_train_dev", argv[1], argv[2], &cfg, &plan, &comm, &data, tmpl))
        return 1;
    smoe_err err;
    if (cuda) {
        if (smoe_dev_cuda_open(0, &dev, &err) != SMOE_OK) {
            printf("skipped: %s\n", err.msg);
            trainer_teardown(tmpl, cfg, plan, &comm, data);
            return 77;
        }
        TOL = 1e-5;
        CHECK(smoe_dev_stream_new(&dev, 0, &ds, &err) == SMOE_OK);
        smoe_kq *kq = NULL;
        CHECKF(smoe_kq_cuda_new(&dev, ds, 0, 0, &kq, &err) == SMOE_OK, "%s", err.msg);
        run_out cpu = run(NULL, NULL, 0, STEPS, NULL), gpu = run(smoe_kops_cuda(), kq, 0, STEPS, NULL);
        same("CUDA vs CPU", &gpu, &cpu, 0, 0);
        smoe_kq_free(kq);
    } else {
        CHECK(smoe_dev_host_open(SMOE_DEV_HOST_ADVERSARIAL, 3, &dev, &err) == SMOE_OK);
        CHECK(smoe_dev_stream_new(&dev, 0, &ds, &err) == SMOE_OK);
        emulated(tmpl);
        refused();
    }
    smoe_dev_stream_free(&dev, ds);
    smoe_dev_close(&dev);
    CHECK(trainer_teardown(tmpl, cfg, plan, &comm, data) == 0);
    return check_report();
}
