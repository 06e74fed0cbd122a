/* smoe_train_run: a loop over the trainer (trainer.c): the options
 * checked, the data read, o's schedules taking turns, the checkpoint
 * cadence, the summary, the digest and the trace. Also the summaries over
 * a subset of steps. */
#include "train_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int step_mode(int64_t step, int n)
{
    return n > 1 ? (int)((step + step / n) % n) : 0;
}

/* The per-step records grow geometrically (a run of 10^9 steps does not
 * ask for all of them up front). */
static smoe_status grow_steps(smoe_train_result *res, int64_t *cap, smoe_err *err)
{
    if (res->nsteps < *cap)
        return SMOE_OK;
    int64_t n = *cap ? *cap * 2 : 64;
    smoe_train_step *p = smoe_realloc(res->steps, sizeof *p * (size_t)n);
    if (!p)
        return smoe_err_set(err, SMOE_ENOMEM,
                            "out of memory for the per-step records (%lld steps, %lld bytes)",
                            (long long)n, (long long)(n * (int64_t)sizeof *p));
    res->steps = p;
    *cap = n;
    return SMOE_OK;
}

/* Steps res->first_step .. o->steps - 1 on this rank's slice of each
 * global batch, checkpoints at the cadence of o. */
static smoe_status run_steps(const smoe_comm *cm, smoe_trainer *t, const smoe_train_opts *o,
                             const smoe_train_data *data, smoe_train_result *res, smoe_err *err)
{
    int n = o->nschedules;
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq, first = (int64_t)smoe_comm_rank(cm) * mc->batch, cap = 0;
    int32_t *tokens = smoe_malloc(sizeof *tokens * (size_t)T);
    int32_t *targets = smoe_malloc(sizeof *targets * (size_t)T);
    smoe_status s = tokens && targets ? SMOE_OK : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    s = smoe_comm_agree_err(cm, s, err);
    for (int64_t step = res->first_step; step < o->steps && !s; step++) {
        s = grow_steps(res, &cap, err);
        if ((s = smoe_comm_agree_err(cm, s, err)))
            break;
        smoe_train_step *rec = &res->steps[res->nsteps];
        int mi = step_mode(step, n);
        if ((s = smoe_trainer_use_schedule(t, mi, err))) /* each rank the same verdict */
            break;
        /* the next step's, for its first gathers */
        tr_trainer_next(t, step + 1 < o->steps, step_mode(step + 1, n));
        /* the data was loaded for mc->seq on every rank: the same verdict */
        if ((s = smoe_train_data_batch(data, o->seed, step, first, mc->batch, mc->seq, tokens,
                                       targets, err)))
            break;
        s = smoe_trainer_step(t, tokens, targets, rec, err);
        rec->mode = mi;
        res->nsteps++;
        if (s)
            break;
        if (o->on_step)
            o->on_step(o->ud, rec);
        int64_t done = step + 1;
        if (o->ckpt_dir && (done == o->steps || (o->ckpt_every && done % o->ckpt_every == 0)))
            s = smoe_trainer_save(t, err);
    }
    smoe_free(tokens);
    smoe_free(targets);
    return s;
}

smoe_status smoe_train_run(const smoe_config *cfg, const smoe_plan *plan, const smoe_comm *cm,
                           const smoe_train_opts *o, smoe_train_result *res, smoe_err *err)
{
    smoe_model_cfg mc;
    tr_hparams hp;
    smoe_train_data *data = NULL;
    smoe_trainer *t = NULL;
    memset(res, 0, sizeof *res);
    /* the options and the config first (every rank's own verdict), then the
     * data: every rank reads the file (a host may lack it) */
    smoe_status s = tr_trainer_check(cm, cfg, plan, o, &mc, &hp, err);
    if (s)
        return s;
    tr_recipe_describe(&hp, &mc, res->recipe, sizeof res->recipe);
    snprintf(res->expert_exchange, sizeof res->expert_exchange, "%s", tr_recipe_exchange(&mc));
    s = smoe_train_data_load(o->data_path, mc.seq, &data, err);
    if ((s = smoe_comm_agree_err(cm, s, err))) /* the failing rank's message */
        goto fail;
    if ((s = smoe_trainer_new(cfg, plan, cm, o, data, &t, err)))
        goto fail;
    tr_trainer_result(t, res);
    if (o->ckpt_dir && o->resume && (s = smoe_trainer_load(t, res, err)))
        goto fail;
    if ((s = run_steps(cm, t, o, data, res, err)))
        goto fail;
    smoe_comm_set_phase(cm, "the summary");
    tr_trainer_summarize(t, res);
    if ((s = smoe_trainer_digest(t, o->dump_path, res->params_sha256, err)))
        goto fail;
    if (o->trace_path && (s = smoe_trainer_write_trace(t, o->trace_path, err)))
        goto fail;
fail:
    smoe_trainer_free(t);
    smoe_train_data_free(data);
    return s;
}

void smoe_train_result_free(smoe_train_result *r)
{
    smoe_free(r->steps);
    r->steps = NULL;
    for (int i = 0; i < r->nchanges; i++) {
        smoe_free(r->changes[i].key);
        smoe_free(r->changes[i].from);
        smoe_free(r->changes[i].to);
    }
    smoe_free(r->changes);
    r->changes = NULL;
    r->nchanges = 0;
}

/* ---- summaries over a subset of steps ---- */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static smoe_train_stat stat_of(double *v, int64_t n)
{
    smoe_train_stat t;
    memset(&t, 0, sizeof t);
    if (n == 0)
        return t;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += v[i];
    t.mean = sum / (double)n;
    t.min = v[0];
    t.max = v[n - 1];
    double q[3] = { 0.25, 0.5, 0.75 }, r[3];
    for (int k = 0; k < 3; k++) {
        double x = q[k] * (double)(n - 1);
        int64_t i = (int64_t)x;
        double f = x - (double)i;
        r[k] = i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[i];
    }
    t.p25 = r[0];
    t.median = r[1];
    t.p75 = r[2];
    return t;
}

void smoe_train_summarize(const smoe_train_result *r, int mode, int64_t skip,
                          smoe_train_summary *out)
{
    memset(out, 0, sizeof *out);
    double *v = smoe_malloc(sizeof *v * (size_t)(r->nsteps ? r->nsteps : 1));
    if (!v)
        return;
    int64_t idx = 0;
#define STAT(field, member)                                                               \
    do {                                                                                  \
        idx = 0;                                                                          \
        for (int64_t i = skip; i < r->nsteps; i++)                                        \
            if (mode < 0 || r->steps[i].mode == mode)                                     \
                v[idx++] = r->steps[i].member;                                            \
        out->field = stat_of(v, idx);                                                     \
    } while (0)
    STAT(step_ms, step_ms);
    STAT(exposed_gather_ms, exposed_gather_ms);
    STAT(residual_ms, residual_ms);
    STAT(a2a_ms, a2a_ms);
    STAT(compute_ms, compute_ms);
    STAT(gather_ms, gather_ms);
    STAT(reduce_wait_ms, reduce_wait_ms);
    STAT(device_step_ms, device_step_ms);
    STAT(device_compute_ms, device_compute_ms);
#undef STAT
    out->nsteps = idx;
    for (int64_t i = skip; i < r->nsteps; i++)
        if ((mode < 0 || r->steps[i].mode == mode) &&
            r->steps[i].peak_gathered_bytes > out->peak_gathered_bytes)
            out->peak_gathered_bytes = r->steps[i].peak_gathered_bytes;
    if (r->nsteps)
        out->last_loss = r->steps[r->nsteps - 1].loss;
    smoe_free(v);
}
