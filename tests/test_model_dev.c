/* Oracle for the model on a device table: one step (embedding, every
 * layer forward, the head's loss, every layer backward, the embedding's
 * backward) on the device against the CPU table, same weights and tokens:
 * the loss and every gradient. Configurations: dense, and MoE on one rank
 * (sigmoid scores with the routed bias, softmax, the load-balance loss, a
 * capacity that drops pairs), with and without q_lora.
 *   test_model_dev (no argument): the emulated table (emul.h) on the host
 *     emulation in its adversarial order (nothing runs until the host
 *     waits): bit for bit the CPU's, which holds only if the model reads
 *     every result through the table and orders every use after its write.
 *   test_model_dev cuda: the CUDA table on device 0, within 1e-5 of the
 *     CPU (fp32, no TF32); exit 77 (skip) without CUDA or a device.
 * Each twice: fp32, then the bf16 mode (SMOE_KOPS_BF16_GEMM: the products'
 * inputs rounded to bf16) against the CPU's bf16-input twins.
 * The expert exchange across ranks and ring of experts are refused on a
 * device table, with one line. */
#include "model_testlib.h"

#include <stdio.h>

#include "check.h"
#include "smoe/backend.h"
#include "smoe/cuda.h"
#include "smoe/emul.h"

static smoe_dev dev;
static smoe_dev_stream *ds;
static const smoe_kops *D, *R; /* the table under test; the CPU reference */
static void *DQ;
static double TOL;
static smoe_err err;

static void *up(const void *h, size_t bytes)
{
    void *d = D->alloc(DQ, bytes);
    SMOE_ASSERT(d);
    D->write(DQ, d, h, bytes);
    return d;
}

/* n floats of the device at d within TOL of ref (relative to its largest) */
static void same(const char *what, int l, int slot, const float *d, const float *ref, int64_t n)
{
    float *h = calloc((size_t)n, sizeof *h);
    D->read(DQ, h, d, (size_t)n * sizeof *h);
    double md = 0.0, mr = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)h[i] - (double)ref[i]);
        md = e > md || isnan(e) ? (isnan(e) ? INFINITY : e) : md;
        mr = fabs((double)ref[i]) > mr ? fabs((double)ref[i]) : mr;
    }
    double rel = mr > 0.0 ? md / mr : md;
    CHECKF(TOL == 0.0 ? memcmp(h, ref, (size_t)n * sizeof *h) == 0 : rel <= TOL,
           "%s slot %d (layer %d): relative error %.3g (tolerance %.3g)", what, slot, l, rel,
           TOL);
    free(h);
}

/* Device copies of W's weights (DW) and zeroed gradients (DG): the same
 * shapes, pointers into the table's memory; or, with release, frees them. */
static void dev_sets(const wset *W, wset *DW, wset *DG, int release)
{
    for (int l = 0; l < W->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++) {
            const size_t b = (size_t)W->n[l][i] * sizeof(float);
            if (!W->w[l][i])
                continue;
            if (release) {
                D->free(DQ, DW->w[l][i], b);
                D->free(DQ, DG->w[l][i], b);
            } else {
                DW->w[l][i] = up(W->w[l][i], b);
                DG->w[l][i] = D->alloc(DQ, b);
            }
        }
    for (int i = 0; i < SMOE_T_NSLOTS; i++) {
        const size_t b = (size_t)W->tn[i] * sizeof(float);
        if (release) {
            D->free(DQ, DW->t[i], b);
            D->free(DQ, DG->t[i], b);
        } else {
            DW->t[i] = up(W->t[i], b);
            DG->t[i] = D->alloc(DQ, b);
        }
    }
}

/* The loss and every gradient of the device's step jd (weights DG) against
 * the CPU's jc (G). */
static void compare(const job *jd, const job *jc, const wset *DG, const wset *G)
{
    CHECKF(TOL == 0.0 ? jd->loss == jc->loss : fabs(jd->loss - jc->loss) <= TOL * fabs(jc->loss),
           "loss %.17g on the device, %.17g on the CPU", jd->loss, jc->loss);
    for (int l = 0; l < G->nl; l++)
        for (int i = 0; i < SMOE_W_NSLOTS; i++)
            if (G->w[l][i])
                same("gradient of weight", l, i, DG->w[l][i], G->w[l][i], G->n[l][i]);
    for (int i = 0; i < SMOE_T_NSLOTS; i++)
        same("gradient of top-level weight", -1, i, DG->t[i], G->t[i], G->tn[i]);
}

/* One step of cfg on the CPU and on the device; compare. */
static void step_case(smoe_model_cfg cfg, uint64_t seed)
{
    rng r = { seed };
    wset W, G;
    wset_alloc(&W, &cfg);
    wset_alloc(&G, &cfg);
    wset_random(&W, &r);
    const int64_t T = cfg.batch * cfg.seq;
    const size_t xb = (size_t)(T * cfg.emb) * sizeof(float), tb = (size_t)T * sizeof(int32_t);
    int32_t *tok = calloc((size_t)T, sizeof *tok), *tgt = calloc((size_t)T, sizeof *tgt);
    random_tokens(tok, T, cfg.vocab, &r);
    random_tokens(tgt, T, cfg.vocab, &r);

    smoe_model *mc = NULL, *md = NULL;
    CHECKF(smoe_model_new_on(&cfg, R, NULL, &mc, &err) == SMOE_OK, "%s", err.msg);
    job jc;
    job_init(&jc, mc, &W, 0, &G, tok, tgt, 1.0f / (float)T);
    job_run(&jc);
    CHECKF(jc.st == SMOE_OK, "%s", jc.err.msg);

    /* the same on the device: weights, zeroed gradients, tokens, x, dx */
    CHECKF(smoe_model_new_on(&cfg, D, DQ, &md, &err) == SMOE_OK, "%s", err.msg);
    wset DW = W, DG = G; /* the same shapes; dev_sets replaces the pointers */
    dev_sets(&W, &DW, &DG, 0);
    job jd;
    memset(&jd, 0, sizeof jd);
    jd.m = md;
    job_view(&jd, &DW, 0, 0);
    jd.g = &DG;
    jd.tok = up(tok, tb);
    jd.tgt = up(tgt, tb);
    jd.comm = smoe_ep_comm_self();
    jd.scale = 1.0f / (float)T;
    jd.x = D->alloc(DQ, xb);
    jd.dx = D->alloc(DQ, xb);
    job_run(&jd);
    CHECKF(jd.st == SMOE_OK, "%s", jd.err.msg);
    compare(&jd, &jc, &DG, &G);
    printf("%s vs %s, q_lora=%lld dense=%lld moe=%lld: loss %.9f (cpu %.9f)\n", D->name, R->name,
           (long long)cfg.q_lora, (long long)cfg.n_dense, (long long)cfg.n_moe, jd.loss, jc.loss);

    dev_sets(&W, &DW, &DG, 1);
    D->free(DQ, (void *)jd.tok, tb);
    D->free(DQ, (void *)jd.tgt, tb);
    D->free(DQ, jd.x, xb);
    D->free(DQ, jd.dx, xb);
    smoe_model_free(md);
    smoe_model_free(mc);
    job_free(&jc);
    wset_free(&W);
    wset_free(&G);
    free(tok);
    free(tgt);
}

static smoe_model_cfg dense_cfg(int q_lora, int layers)
{
    smoe_model_cfg c = tiny_cfg(q_lora, 0);
    c.n_dense = layers;
    c.n_moe = 0;
    return c;
}

/* every configuration on the queue q of table d against the CPU table r */
static void all_cases(const smoe_kops *d, void *q, const smoe_kops *r)
{
    D = d, DQ = q, R = r;
    step_case(dense_cfg(0, 2), 1);
    step_case(dense_cfg(6, 3), 2);
    step_case(tiny_cfg(0, 1), 3); /* sigmoid scores, routed bias */
    smoe_model_cfg c = tiny_cfg(6, 0);
    c.lb_weight = 0.01f; /* softmax scores, the load-balance loss */
    step_case(c, 4);
    c = tiny_cfg(0, 1);
    c.capacity_factor = 0.5f; /* pairs over capacity dropped */
    c.lb_weight = 0.01f;
    step_case(c, 5);
}

/* fp32 and then the bf16 mode (SMOE_KOPS_BF16_GEMM against the CPU's
 * bf16-input twins) on queues of one stream; a queue's first failure
 * fails the run */
static void both_modes(int cuda)
{
    for (unsigned flags = 0; flags <= SMOE_KOPS_BF16_GEMM; flags += SMOE_KOPS_BF16_GEMM) {
        const smoe_kops *r = flags ? smoe_kops_cpu_bf16() : smoe_kops_cpu();
        if (cuda) {
            smoe_kq *kq = NULL;
            CHECKF(smoe_kq_cuda_new(&dev, ds, 0, flags, &kq, &err) == SMOE_OK, "%s", err.msg);
            if (kq)
                all_cases(smoe_kops_cuda(), kq, r);
            CHECKF(!kq || smoe_kq_status(kq, &err) == SMOE_OK, "%s", err.msg);
            smoe_kq_free(kq);
        } else {
            smoe_eq *eq = NULL;
            CHECKF(smoe_eq_new(&dev, ds, flags, &eq, &err) == SMOE_OK, "%s", err.msg);
            if (eq)
                all_cases(smoe_kops_emul(), eq, r);
            CHECKF(!eq || smoe_eq_status(eq, &err) == SMOE_OK, "%s", err.msg);
            smoe_eq_free(eq);
        }
    }
}

int main(int argc, char **argv)
{
    const int cuda = argc > 1 && strcmp(argv[1], "cuda") == 0;
    if (cuda) {
        if (smoe_dev_cuda_open(0, &dev, &err) != SMOE_OK) {
            printf("skipped: %s\n", err.msg);
            return 77;
        }
        TOL = 1e-5;
    } else {
        CHECK(smoe_dev_host_open(SMOE_DEV_HOST_ADVERSARIAL, 11, &dev, &err) == SMOE_OK);
        TOL = 0.0;
    }
    CHECK(smoe_dev_stream_new(&dev, 0, &ds, &err) == SMOE_OK);
    both_modes(cuda);
    if (!cuda)
        CHECK(smoe_dev_host_ops_run(&dev) > 0);
    /* the expert exchange across ranks: refused on a device table, one line */
    smoe_model_cfg moe = tiny_cfg(0, 1);
    moe.ep = 2;
    smoe_model *m = NULL;
    CHECK(smoe_model_new_on(&moe, cuda ? smoe_kops_cuda() : smoe_kops_emul(), NULL, &m, &err) ==
              SMOE_EINVAL &&
          !m && strstr(err.msg, "ep = 1") && !strchr(err.msg, '\n'));
    smoe_dev_stream_free(&dev, ds);
    smoe_dev_close(&dev);
    return check_report();
}
