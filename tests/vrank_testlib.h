/* The sharded trainer in one process, for the oracles of test_vrank and
 * test_vrank_dev: a run (run_spec: mesh overrides, schedule, wire, where
 * the ranks compute) is N threads, each a rank with its own smoe_trainer
 * over the in-process communicator (comm.h: smoe_comm_vrank_new), and
 * hands back rank 0's step records and every parameter gathered (run_out);
 * agree() compares two runs by cmp_rule.h's rule. The including test sets
 * cfgdir and data (one test per program). */
#ifndef SMOE_TEST_VRANK_TESTLIB_H
#define SMOE_TEST_VRANK_TESTLIB_H

#include "check.h"
#include "cmp_rule.h"
#include "smoe/cuda.h"
#include "smoe/dtype.h"
#include "smoe/emul.h"
#include "smoe/train.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 5
#define MAX_RANKS 4

static const char *cfgdir, *datafile;
static smoe_train_data *data;

struct rank_job;

typedef struct run_spec {
    const char *name;
    int devices;
    const char *kv[4];     /* KEY=VALUE overrides */
    int depth, legacy, shared_queue;
    int wire;              /* smoe_dtype of the gathers */
    int64_t block;         /* int8 */
    int reduce_dtype;
    int perturb_rank;      /* > 0: this rank's first gathered weight is scaled */
    int progress_thread;
    const char *model;     /* NULL: tiny */
    const char *rules;     /* --rules, or NULL */
    const char *const *more; /* more overrides (NULL-terminated), or NULL */
    int device;            /* VR_DEV_*: where the ranks compute */
    uint64_t seed;         /* the emulation's adversarial order */
    int expect_fail;       /* a rank's failure is the result (run_out's s0, err0) */
    double link_gbs;       /* on a device: the link stood in for (comm.h) */
    /* on a device: each rank's communicator made from its in-process one
     * (left on the host) by wrap, in the rank's thread, freed by unwrap */
    int (*wrap)(const struct rank_job *j, smoe_comm *out, smoe_err *err);
    void (*unwrap)(smoe_comm *c);
} run_spec;

typedef struct run_out {
    int ok;
    smoe_status s0;        /* rank 0's status and error */
    smoe_err err0;
    smoe_train_step rec[STEPS];
    int nparams;
    char **names;
    float **params;
    int64_t *numel;
} run_out;

/* Where a run's ranks compute: the CPU; the host emulation of a device
 * (emul.h) in its adversarial order or with a thread per stream; CUDA
 * device 0. On a device every rank has a compute stream with the
 * trainer's kernel queue and a transfer stream (high priority) with the
 * communicator's (comm.h: smoe_comm_vrank_set_device). */
enum { VR_DEV_CPU, VR_DEV_EMUL, VR_DEV_EMUL_THREADS, VR_DEV_CUDA };

typedef struct dev_ranks {
    smoe_dev dev;
    smoe_dev_stream *cs[MAX_RANKS], *xs[MAX_RANKS];
    smoe_dev_stream *res[MAX_RANKS], *red[MAX_RANKS]; /* the NCCL communicator's */
    void *cq[MAX_RANKS], *xq[MAX_RANKS];
    const smoe_kops *ops;
    int n;
} dev_ranks;

static void *queue_new(dev_ranks *d, smoe_dev_stream *s, int cuda, smoe_err *err)
{
    if (cuda) {
        smoe_kq *q = NULL;
        return smoe_kq_cuda_new(&d->dev, s, 0, 0, &q, err) ? NULL : q;
    }
    smoe_eq *q = NULL;
    return smoe_eq_new(&d->dev, s, 0, &q, err) ? NULL : q;
}

/* 0, or 1 with err set (dev_ranks_free frees what was made) */
static int dev_ranks_new(dev_ranks *d, const run_spec *sp, smoe_comm *comm, int n, smoe_err *err)
{
    memset(d, 0, sizeof *d);
    int cuda = sp->device == VR_DEV_CUDA;
    smoe_status s = cuda ? smoe_dev_cuda_open(0, &d->dev, err)
                         : smoe_dev_host_open(sp->device == VR_DEV_EMUL ? SMOE_DEV_HOST_ADVERSARIAL
                                                                        : SMOE_DEV_HOST_THREADS,
                                              sp->seed, &d->dev, err);
    if (s)
        return 1;
    d->ops = cuda ? smoe_kops_cuda() : smoe_kops_emul();
    for (int r = 0; r < n; r++, d->n++) {
        if (smoe_dev_stream_new(&d->dev, 0, &d->cs[r], err) ||
            smoe_dev_stream_new(&d->dev, 1, &d->xs[r], err) ||
            smoe_dev_stream_new(&d->dev, 1, &d->res[r], err) ||
            smoe_dev_stream_new(&d->dev, 0, &d->red[r], err) ||
            !(d->cq[r] = queue_new(d, d->cs[r], cuda, err)) ||
            !(d->xq[r] = queue_new(d, d->xs[r], cuda, err)))
            return 1;
        smoe_comm_device cd = { &d->dev, d->cs[r], d->xs[r], d->ops, d->xq[r], d->cq[r],
                                sp->link_gbs, d->res[r], d->red[r] };
        if (!sp->wrap && smoe_comm_vrank_set_device(&comm[r], &cd, err))
            return 1;
    }
    return 0;
}

/* 0, or 1 naming a failure of the device's work */
static int dev_ranks_free(dev_ranks *d, int cuda, smoe_err *err)
{
    int bad = 0;
    for (int r = 0; r < d->n; r++)
        for (int k = 0; k < 2; k++) {
            void *q = k ? d->xq[r] : d->cq[r];
            if (!q)
                continue;
            if (cuda) {
                bad |= !bad && smoe_kq_status(q, err);
                smoe_kq_free(q);
            } else {
                bad |= !bad && smoe_eq_status(q, err);
                smoe_eq_free(q);
            }
        }
    for (int r = 0; r < d->n; r++) {
        smoe_dev_stream_free(&d->dev, d->cs[r]);
        smoe_dev_stream_free(&d->dev, d->xs[r]);
        smoe_dev_stream_free(&d->dev, d->res[r]);
        smoe_dev_stream_free(&d->dev, d->red[r]);
    }
    if (d->dev.ops)
        smoe_dev_close(&d->dev);
    return bad;
}

typedef struct rank_job {
    const run_spec *sp;
    const smoe_config *cfg;
    const smoe_plan *plan;
    const smoe_schedule *const *sched;
    smoe_comm comm;
    int rank;
    const smoe_kops *kops; /* NULL: the CPU */
    void *kq;
    const dev_ranks *dr;   /* on a device: every rank's streams and queues */
    run_out *out;          /* rank 0 fills it */
    smoe_status s;
    smoe_err err;
} rank_job;

/* ---- the perturbed rank: its communicator's gather_wait scales the
 * first weight it hands back by 1 + 1e-3 ---- */
static smoe_comm_ops perturbed_ops;
static const smoe_comm_ops *inner_ops;
static _Atomic int perturbed;
static void perturbed_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                           double *wait_s)
{
    inner_ops->gather_wait(ctx, g, buf, t, wait_s);
    if (!perturbed) {
        smoe_wgather_info info;
        inner_ops->gather_info(g, &info);
        for (int64_t i = 0; i < info.gathered_numel; i++)
            buf[i] *= 1 + 1e-3f;
        perturbed = 1;
    }
}

static void keep_params(rank_job *j, smoe_trainer *t)
{
    int n = 0;
    const smoe_trainer_param *p = smoe_trainer_params(t, &n);
    run_out *o = j->out;
    if (j->rank == 0) {
        o->nparams = n;
        o->names = calloc((size_t)n, sizeof *o->names);
        o->params = calloc((size_t)n, sizeof *o->params);
        o->numel = calloc((size_t)n, sizeof *o->numel);
    }
    for (int i = 0; i < n && !j->s; i++) {
        float *full = NULL;
        if (j->rank == 0) {
            o->names[i] = strdup(p[i].name);
            o->numel[i] = p[i].numel;
            full = o->params[i] = malloc(sizeof(float) * (size_t)p[i].numel);
        }
        j->s = smoe_trainer_gather(t, i, full, &j->err);
    }
}

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = STEPS;
    o.seed = 7;
    o.schedules = j->sched;
    o.nschedules = 1;
    o.reduce_dtype = j->sp->reduce_dtype;
    o.kops = j->kops;
    o.kstream = j->kq;
    smoe_trainer *t = NULL;
    smoe_comm use = j->comm;
    if (j->sp->wrap && j->sp->wrap(j, &use, &j->err)) {
        j->s = SMOE_ECOMM;
        return NULL;
    }
    j->s = smoe_trainer_new(j->cfg, j->plan, &use, &o, data, &t, &j->err);
    const smoe_model_cfg *mc = t ? smoe_trainer_model(t) : NULL;
    int64_t T = mc ? mc->batch * mc->seq : 1;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    for (int64_t s = 0; s < STEPS && !j->s; s++) {
        smoe_train_step rec;
        j->s = smoe_train_data_batch(data, 7, s, j->rank * mc->batch, mc->batch, mc->seq, tok,
                                     tgt, &j->err);
        if (!j->s)
            j->s = smoe_trainer_step(t, tok, tgt, &rec, &j->err);
        if (j->rank == 0)
            j->out->rec[s] = rec;
    }
    if (!j->s)
        keep_params(j, t);
    smoe_trainer_free(t);
    if (j->sp->wrap)
        j->sp->unwrap(&use);
    free(tok);
    free(tgt);
    return NULL;
}

static int load(const run_spec *sp, smoe_config **cfg, smoe_plan **plan, smoe_schedule **sched,
                smoe_err *err)
{
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", cfgdir);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = sp->model ? sp->model : "tiny";
    co.rules = sp->rules;
    const char *kv[24];
    co.n_overrides = 0;
    for (int i = 0; i < 4 && sp->kv[i]; i++)
        kv[co.n_overrides++] = sp->kv[i];
    for (int i = 0; sp->more && sp->more[i] && co.n_overrides < 24; i++)
        kv[co.n_overrides++] = sp->more[i];
    co.overrides = kv;
    smoe_plan_opts po = { sp->devices, 1, NULL, 4 };
    return smoe_config_load(&co, cfg, err) || smoe_plan_build(*cfg, &po, plan, err) ||
           smoe_plan_set_wire(*plan, (smoe_dtype)sp->wire, sp->block, SMOE_DT_INT8, err) ||
           smoe_plan_check_even(*plan, SMOE_MODE_COAXIS, err) ||
           smoe_plan_check_even(*plan, SMOE_MODE_LEGACY, err) ||
           smoe_schedule_for_plan(*plan, sp->depth, sp->legacy, sched, err);
}

/* Run sp into *out: one thread per rank (the single-rank communicator on
 * one device; on sp->device, in-process ranks whatever their number). */
static void run(const run_spec *sp, run_out *out)
{
    memset(out, 0, sizeof *out);
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_config *cfg = NULL;
    smoe_plan *plan = NULL;
    smoe_schedule *sched = NULL;
    smoe_comm comm[MAX_RANKS];
    memset(comm, 0, sizeof comm);
    int n = sp->devices, bad = load(sp, &cfg, &plan, &sched, &err);
    smoe_comm_vrank_opts vo = { 60, sp->shared_queue, sp->progress_thread };
    int local = n == 1 && !sp->device;
    dev_ranks dr;
    memset(&dr, 0, sizeof dr);
    if (!bad)
        bad = local ? smoe_comm_local_new(&plan->mesh, 60, &comm[0], &err) != SMOE_OK
                    : smoe_comm_vrank_new(&plan->mesh, &vo, comm, &err) != SMOE_OK;
    if (!bad && sp->device)
        bad = dev_ranks_new(&dr, sp, comm, n, &err);
    CHECKF(!bad, "%s: set-up: %s", sp->name, err.msg);
    if (!bad) {
        const smoe_schedule *one[1] = { sched };
        rank_job job[MAX_RANKS];
        pthread_t th[MAX_RANKS];
        perturbed = 0;
        for (int r = 0; r < n; r++) {
            job[r] = (rank_job){ sp, cfg, plan, one, comm[r], r, sp->device ? dr.ops : NULL,
                                 sp->device ? dr.cq[r] : NULL, &dr, out, SMOE_OK, { 0 } };
            if (sp->perturb_rank && r == sp->perturb_rank) {
                inner_ops = comm[r].ops;
                perturbed_ops = *inner_ops;
                perturbed_ops.gather_wait = perturbed_wait;
                job[r].comm.ops = &perturbed_ops;
            }
            pthread_create(&th[r], NULL, rank_main, &job[r]);
        }
        out->ok = 1;
        for (int r = 0; r < n; r++) {
            pthread_join(th[r], NULL);
            CHECKF(!job[r].s || sp->expect_fail, "%s: rank %d: %s", sp->name, r, job[r].err.msg);
            out->ok &= !job[r].s;
        }
        out->s0 = job[0].s;
        out->err0 = job[0].err;
    }
    if (comm[0].ctx)
        local ? smoe_comm_local_free(&comm[0]) : smoe_comm_vrank_free(comm, n);
    if (sp->device) {
        int dbad = dev_ranks_free(&dr, sp->device == VR_DEV_CUDA, &err);
        CHECKF(!dbad, "%s: the device: %s", sp->name, err.msg);
        out->ok &= !dbad;
    }
    smoe_schedule_free(sched);
    smoe_plan_free(plan);
    smoe_config_free(cfg);
}

static void out_free(run_out *o)
{
    for (int i = 0; i < o->nparams; i++) {
        free(o->names[i]);
        free(o->params[i]);
    }
    free(o->names);
    free(o->params);
    free(o->numel);
}

/* Do a and b agree within tol (0: bitwise)? Says the worst differences. */
static inline int agree(const run_out *a, const run_out *b, double tol, const char *what, int quiet)
{
    if (!a->ok || !b->ok || a->nparams != b->nparams || a->nparams == 0)
        return 0;
    int ok = 1;
    double worst = 0, worst_loss = 0;
    for (int s = 0; s < STEPS; s++) {
        const smoe_train_step *x = &a->rec[s], *y = &b->rec[s];
        double v[5][2] = { { x->loss, y->loss }, { x->lr, y->lr }, { x->grad_norm, y->grad_norm },
                           { x->aux_loss, y->aux_loss }, { x->z_loss, y->z_loss } };
        for (int k = 0; k < 5; k++) {
            ok &= cmp_number_ok(v[k][0], v[k][1], tol);
            double rel = cmp_number_rel(v[k][0], v[k][1]);
            worst_loss = rel > worst_loss ? rel : worst_loss;
        }
    }
    for (int i = 0; i < a->nparams; i++) {
        if (strcmp(a->names[i], b->names[i]) != 0 || a->numel[i] != b->numel[i]) {
            ok = 0;
            continue;
        }
        cmp_tensor c = cmp_tensor_of(a->params[i], b->params[i], a->numel[i]);
        ok &= cmp_tensor_ok(&c, tol);
        if (!quiet && !cmp_tensor_ok(&c, tol))
            printf("  %s: relative difference %.3g\n", a->names[i], c.rel);
        worst = c.rel > worst ? c.rel : worst;
    }
    if (!quiet)
        printf("%s: %s: worst step figure %.3g, worst tensor %.3g over %d tensors\n",
               ok ? "ok" : "FAIL", what, worst_loss, worst, a->nparams);
    return ok;
}


#endif
