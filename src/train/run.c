/* smoe_train_run: set-up (every check agreed across ranks before the first
 * step, so that all ranks stop together on bad input), the step loop, the
 * summary, the trace and the parameter digest. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>


static double forward_flops_per_token(const smoe_model_cfg *m)
{
    double e = (double)m->emb, h = (double)m->heads, qk = (double)(m->qk_nope + m->qk_rope);
    double att = m->q_lora ? 2 * (e * (double)m->q_lora + (double)m->q_lora * h * qk)
                           : 2 * e * h * qk;
    att += 2 * e * (double)(m->kv_lora + m->qk_rope);
    att += 2 * (double)m->kv_lora * h * (double)(m->qk_nope + m->v_head);
    att += 2 * h * (double)m->v_head * e;
    att += 2 * h * (qk + (double)m->v_head) * (double)(m->seq + 1) / 2; /* causal core */
    double dense = 6 * e * (double)m->mlp;
    double moe = 2 * e * (double)m->experts + 6 * e * (double)(m->shared * m->moe_mlp) +
                 6 * e * (double)m->moe_mlp * (double)m->topk;
    return (double)(m->n_dense + m->n_moe) * att + (double)m->n_dense * dense +
           (double)m->n_moe * moe + 2 * e * (double)m->vocab;
}

static smoe_status write_trace(smoe_rt *rt, smoe_trace *t, const char *path, smoe_err *err)
{
    size_t len = 0;
    const char *frag;
    smoe_status s = smoe_trace_fragment(t, &frag, &len, err);
    int size = smoe_rt_size(rt);
    int64_t *lens = smoe_calloc((size_t)size, sizeof *lens);
    char *all = NULL;
    if (!s && !lens)
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace");
    s = smoe_rt_agree_err(rt, s, err);
    if (!s)
        s = smoe_rt_gatherv_bytes(rt, frag, (int64_t)len, &all, lens);
    if (!s && smoe_rt_rank(rt) == 0) {
        const char **frags = smoe_calloc((size_t)size, sizeof *frags);
        size_t *fl = smoe_calloc((size_t)size, sizeof *fl);
        FILE *f = fopen(path, "w");
        if (!frags || !fl || !f) {
            s = smoe_err_in(err, SMOE_EIO, path, "cannot write the trace");
        } else {
            int64_t off = 0;
            for (int r = 0; r < size; r++) {
                frags[r] = all + off;
                fl[r] = (size_t)lens[r];
                off += lens[r];
            }
            s = smoe_trace_write(f, frags, fl, size, err);
        }
        if (f && fclose(f) != 0 && !s)
            s = smoe_err_in(err, SMOE_EIO, path, "cannot write the trace");
        smoe_free(frags);
        smoe_free(fl);
    }
    smoe_free(all);
    smoe_free(lens);
    return smoe_rt_agree(rt, s);
}

/* The modes of the run: o->modes when interleaved, else the one schedule. */
static int run_modes(const smoe_train_opts *o, smoe_train_mode *m)
{
    if (o->nmodes > 1) {
        memcpy(m, o->modes, sizeof(smoe_train_mode) * (size_t)o->nmodes);
        return o->nmodes;
    }
    m[0].prefetch_depth = o->prefetch_depth;
    m[0].legacy = o->legacy;
    return 1;
}

static int step_mode(int64_t step, int n)
{
    return n > 1 ? (int)((step + step / n) % n) : 0;
}

/* The keys of the model's size, as "k=v, ...", for messages about memory. */
static void size_keys(const smoe_config *cfg, char *buf, size_t cap)
{
    int nk;
    const smoe_train_key *k = smoe_train_keys(&nk);
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < nk && o + 64 < cap; i++) {
        const smoe_node *v = smoe_config_get(cfg, k[i].name);
        if ((k[i].kind & SMOE_TRAIN_KEY_SIZE) && v && v->kind == SMOE_NODE_SCALAR)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s=%s", o ? ", " : "", k[i].name, v->str);
    }
}

/* What this rank will need, checked before anything large is allocated:
 * against --max-memory, and against the machine's memory. */
static smoe_status check_memory(smoe_rt *rt, const smoe_config *cfg, const smoe_model_cfg *mc,
                                const tr_store *st, int max_depth, const tr_data *data,
                                const smoe_train_opts *o, smoe_train_result *res, smoe_err *err)
{
    int64_t act = 0;
    smoe_status s = smoe_model_need_bytes(mc, &act, err);
    double slabs = 4.0 * (double)st->total * 4, pool = (double)tr_loop_pool_bytes(mc, st, max_depth);
    double top = 2.0 * (double)st->top_floats * 4;
    double need = slabs + pool + top + (double)act + (double)data->n;
    int64_t est[1] = { s ? 0 : (need < 9e18 ? (int64_t)need : INT64_MAX) };
    if ((s = smoe_rt_agree_err(rt, s, err)))
        return s;
    smoe_rt_allreduce_max_i64(rt, est, 1);
    res->memory_estimate_bytes = est[0];
    char what[400], dims[1400];
    snprintf(what, sizeof what,
             "shards, gradients and AdamW moments %.0f, gathered-layer pool %.0f, top-level "
             "buffers %.0f, activations %lld, data %lld",
             slabs, pool, top, (long long)act, (long long)data->n);
    if (o->max_memory > 0 && est[0] > o->max_memory) {
        char where[64];
        snprintf(where, sizeof where, "argument '--max-memory %lld'", (long long)o->max_memory);
        return smoe_err_in(err, SMOE_ENOMEM, where, "the plan needs %lld bytes per rank (%s)",
                           (long long)est[0], what);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
    if (ram > 0 && (double)est[0] > ram) {
        size_keys(cfg, dims, sizeof dims);
        return smoe_err_set(err, SMOE_EINVAL,
                            "the model needs %.3g GiB per rank (%s), more than this machine's "
                            "%.3g GiB of memory: the model is too large for this mesh (%s)",
                            (double)est[0] / 1073741824.0, what, ram / 1073741824.0, dims);
    }
    return SMOE_OK;
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

/* MaxText's abort_on_nan_loss / abort_on_inf_loss (train.py checks the
 * loss of each step); the loss is the same on every rank (all-reduced),
 * so every rank returns the same status. */
static smoe_status check_loss(const tr_hparams *hp, const smoe_train_step *rec, smoe_err *err)
{
    double l = rec->loss;
    if (isnan(l) && hp->abort_on_nan)
        return smoe_err_set(err, SMOE_ENONFINITE,
                            "step %lld: the loss is nan (abort_on_nan_loss: true); stopped "
                            "before saving anything of this step",
                            (long long)rec->step + 1);
    if (isinf(l) && hp->abort_on_inf)
        return smoe_err_set(err, SMOE_ENONFINITE,
                            "step %lld: the loss is %s (abort_on_inf_loss: true); stopped "
                            "before saving anything of this step",
                            (long long)rec->step + 1, l > 0 ? "inf" : "-inf");
    return SMOE_OK;
}

/* An error inside a step is this rank's alone (the others wait in the
 * next collective): end the whole job now, with this rank's message. */
static _Noreturn void step_failed(smoe_rt *rt, smoe_status s, const smoe_err *err)
{
    char buf[1200];
    smoe_rt_abort(rt, s == SMOE_ENOMEM ? SMOE_EXIT_NOMEM : SMOE_EXIT_COMM,
                  smoe_err_format(err, buf, sizeof buf));
}

static void summarize_run(smoe_rt *rt, const tr_store *st, const tr_state *S,
                          const smoe_model_cfg *mc, smoe_train_result *res)
{
    double n = (double)res->nsteps;
    for (int64_t i = 0; i < res->nsteps; i++) {
        const smoe_train_step *r = &res->steps[i];
        res->mean_step_ms += r->step_ms / n;
        res->mean_exposed_gather_ms += r->exposed_gather_ms / n;
        res->mean_compute_ms += r->compute_ms / n;
        res->mean_gather_ms += r->gather_ms / n;
        res->mean_a2a_ms += r->a2a_ms / n;
        res->mean_residual_ms += r->residual_ms / n;
        if (r->peak_gathered_bytes > res->peak_gathered_bytes)
            res->peak_gathered_bytes = r->peak_gathered_bytes;
    }
    res->layer_gathered_bytes =
        (st->unit_floats[0] > st->unit_floats[1] ? st->unit_floats[0] : st->unit_floats[1]) * 4;
    res->top_gathered_bytes = 2 * st->top_floats * 4;
    int64_t pk[2];
    tr_loop_peaks(S, &pk[0], &pk[1]);
    smoe_rt_allreduce_max_i64(rt, pk, 2);
    res->peak_gathered_fwd_bytes = pk[0];
    res->peak_gathered_bwd_bytes = pk[1];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t rss[1] = { (int64_t)ru.ru_maxrss * 1024 };
    smoe_rt_allreduce_max_i64(rt, rss, 1);
    res->peak_rss_bytes = rss[0];
    res->tokens_per_step = mc->batch * mc->seq * smoe_rt_size(rt);
    res->model_flops_per_step = 3 * forward_flops_per_token(mc) * (double)res->tokens_per_step;
    for (int i = 0; i < st->n; i++) {
        int64_t e = st->w[i].layers;
        for (int d = 0; d < st->w[i].lrank; d++)
            e *= st->w[i].lshape[d];
        res->params += e;
    }
}

smoe_status smoe_train_run(smoe_rt *rt, const smoe_config *cfg, const smoe_plan *plan,
                           const smoe_train_opts *o, smoe_train_result *res, smoe_err *err)
{
    smoe_status s;
    smoe_model_cfg mc;
    tr_hparams hp;
    tr_data data;
    tr_store st;
    smoe_model *model = NULL;
    tr_state *S = NULL;
    smoe_trace *trace = NULL;
    tr_ckpt *ck = NULL;
    smoe_train_mode modes[SMOE_TRAIN_MAX_MODES];
    memset(res, 0, sizeof *res);
    memset(&data, 0, sizeof data);
    memset(&st, 0, sizeof st);

    int nmodes = run_modes(o, modes), max_depth = 0, plans[2] = { 0, 0 };
    s = smoe_train_model_cfg(cfg, smoe_rt_mesh(rt), &mc, err);
    if (!s)
        s = tr_read_hparams(cfg, &hp, err);
    if (!s) /* MaxText's recipe (recipe.c) */
        s = tr_read_recipe(cfg, o->steps, &hp.rc, err);
    if (!s && o->steps < 1)
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--steps'", "must be >= 1");
    if (!s && (o->nmodes < 0 || o->nmodes > SMOE_TRAIN_MAX_MODES))
        s = smoe_err_set(err, SMOE_EINVAL, "at most %d interleaved schedules",
                         SMOE_TRAIN_MAX_MODES);
    for (int i = 0; i < nmodes && !s; i++) {
        if (modes[i].prefetch_depth < 0)
            s = smoe_err_in(err, SMOE_EINVAL, "argument '--prefetch-depth'", "must be >= 0");
        max_depth = modes[i].prefetch_depth > max_depth ? modes[i].prefetch_depth : max_depth;
        plans[modes[i].legacy ? 1 : 0] = 1;
    }
    if (!s && o->ckpt_dir && !o->ckpt_dir[0])
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--checkpoint-dir'",
                        "is empty: name a directory");
    if ((s = smoe_rt_agree(rt, s)))
        return s;
    hp.batch = mc.batch;
    hp.seq = mc.seq;
    tr_recipe_describe(&hp, &mc, res->recipe, sizeof res->recipe);
    smoe_blas_init(1, &res->blas);
    /* data: every rank reads the file (a host may lack it) */
    s = tr_data_load(o->data_path, mc.seq + 2, &data, err);
    if ((s = smoe_rt_agree_err(rt, s, err))) /* the failing rank's message */
        goto fail;
    /* every rank runs the same configuration, plan, options and data, or
     * the collectives stop matching: check before the first of them */
    smoe_rt_set_phase(rt, "the cross-rank consistency check");
    tr_fingerprint_t fp;
    s = tr_fingerprint(cfg, plan, o, smoe_rt_get_opts(rt), &data, &fp, err);
    if ((s = smoe_rt_agree(rt, s)) || (s = tr_fingerprint_check(rt, &fp, err)))
        goto fail;
    smoe_rt_set_phase(rt, "set-up");
    /* the layout, then what it needs, then the allocations */
    s = tr_store_build(rt, plan, &mc, plans, &st, err);
    if (s == SMOE_EINVAL && err) { /* a weight the runtime cannot move: name the sizes */
        char dims[1400];
        size_keys(cfg, dims, sizeof dims);
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (the model: %s)", dims);
    }
    if ((s = smoe_rt_agree_err(rt, s, err)) ||
        (s = check_memory(rt, cfg, &mc, &st, max_depth, &data, o, res, err)))
        goto fail;
    s = tr_store_alloc(&st, err);
    if (!s)
        s = smoe_model_new(&mc, &model, err);
    if ((s = smoe_rt_agree_err(rt, s, err)))
        goto fail;
    if (o->trace_path) {
        trace = smoe_trace_new(smoe_rt_rank(rt), smoe_now());
        if (!trace) {
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace");
            goto fail;
        }
        smoe_trace_lanes(trace);
    }
    s = tr_loop_new(rt, &mc, &hp, max_depth, model, &st, trace, &S, err);
    if ((s = smoe_rt_agree_err(rt, s, err)))
        goto fail;
    tr_ckpt_opts co = { o->ckpt_dir, 0, o->steps, o->seed, o->ckpt_keep, &fp,
                        smoe_config_rules(cfg), cfg, "" };
    /* the checkpoint directory: this run's, writable on every rank */
    if (o->ckpt_dir && (s = tr_ckpt_open(rt, &co, o->resume, &ck, err)))
        goto fail;
    if (ck && o->resume && (s = tr_ckpt_load(rt, &st, &co, res, err)))
        goto fail;
    if (!res->resumed_from[0]) /* a fresh start (or nothing to resume) */
        tr_store_init_params(rt, &st, o->seed);
    int32_t *targets, *tokens = tr_loop_tokens(S, &targets);
    int64_t first = (int64_t)smoe_rt_rank(rt) * mc.batch, cap = 0;
    for (int64_t step = res->first_step; step < o->steps; step++) {
        s = grow_steps(res, &cap, err);
        if ((s = smoe_rt_agree_err(rt, s, err)))
            goto fail;
        smoe_train_step *rec = &res->steps[res->nsteps];
        int mi = step_mode(step, nmodes);
        tr_loop_set_mode(S, modes[mi].prefetch_depth, modes[mi].legacy);
        tr_data_batch(&data, o->seed, step, first, mc.batch, mc.seq, tokens, targets);
        if ((s = tr_loop_step(S, step, rec, err)))
            step_failed(rt, s, err);
        rec->mode = mi;
        res->nsteps++;
        if ((s = check_loss(&hp, rec, err)))
            goto fail;
        if (o->on_step)
            o->on_step(o->ud, rec);
        int64_t done = step + 1;
        if (ck && (done == o->steps || (o->ckpt_every && done % o->ckpt_every == 0))) {
            co.step = done;
            if ((s = tr_ckpt_save(rt, ck, &st, &co, err)))
                goto fail;
        }
    }
    smoe_rt_set_phase(rt, "the summary");
    summarize_run(rt, &st, S, &mc, res);
    if ((s = tr_store_digest(rt, &st, o->dump_path, res->params_sha256, err)))
        goto fail;
    if (trace && (s = write_trace(rt, trace, o->trace_path, err)))
        goto fail;
fail:
    tr_ckpt_close(ck);
    tr_loop_free(S);
    smoe_trace_free(trace);
    tr_store_free(&st);
    smoe_model_free(model);
    tr_data_free(&data);
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
