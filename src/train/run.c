/* smoe_train_run: set-up (every check agreed across ranks before the first
 * step, so that all ranks stop together on bad input), the step loop, the
 * summary, the trace and the parameter digest. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>


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
    const char *frag = smoe_trace_fragment(t, &len);
    int size = smoe_rt_size(rt);
    int64_t *lens = smoe_calloc((size_t)size, sizeof *lens);
    char *all = NULL;
    smoe_status s = lens ? SMOE_OK : SMOE_ENOMEM;
    s = smoe_rt_agree(rt, s);
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
    memset(res, 0, sizeof *res);
    memset(&data, 0, sizeof data);
    memset(&st, 0, sizeof st);

    s = smoe_train_model_cfg(cfg, smoe_rt_mesh(rt), &mc, err);
    if (!s)
        s = tr_read_hparams(cfg, &hp, err);
    if (!s) /* MaxText's recipe (recipe.c) */
        s = tr_read_recipe(cfg, o->steps, &hp.rc, err);
    if (!s && o->steps < 1)
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--steps'", "must be >= 1");
    if (!s && o->prefetch_depth < 0)
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--prefetch-depth'", "must be >= 0");
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
    if ((s = smoe_model_new(&mc, &model, err)))
        goto fail;
    if ((s = tr_store_build(rt, plan, &mc, o->legacy, &st, err)))
        goto fail;
    /* what this rank needs, checked against --max-memory */
    int64_t pool = tr_loop_pool_bytes(&mc, &st, o->prefetch_depth);
    res->memory_estimate_bytes = 4 * st.total * (int64_t)sizeof(float) + pool +
                                 2 * st.top_floats * (int64_t)sizeof(float) +
                                 smoe_model_act_bytes(model) + (int64_t)data.n;
    int64_t est[1] = { res->memory_estimate_bytes };
    smoe_rt_allreduce_max_i64(rt, est, 1);
    res->memory_estimate_bytes = est[0];
    if (o->max_memory > 0 && est[0] > o->max_memory) {
        char where[64];
        snprintf(where, sizeof where, "argument '--max-memory %lld'", (long long)o->max_memory);
        s = smoe_err_in(err, SMOE_ENOMEM, where,
                        "the plan needs %lld bytes per rank (shards, gradients and AdamW "
                        "moments %lld, gathered-layer pool %lld, top-level buffers %lld, "
                        "activations %lld, data %lld)",
                        (long long)est[0], (long long)(4 * st.total * 4), (long long)pool,
                        (long long)(2 * st.top_floats * 4),
                        (long long)smoe_model_act_bytes(model), (long long)data.n);
        goto fail;
    }
    smoe_rt_barrier(rt);
    if (o->trace_path) {
        trace = smoe_trace_new(smoe_rt_rank(rt), smoe_now());
        if (!trace) {
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace");
            goto fail;
        }
        smoe_trace_lane(trace, SMOE_LANE_COMPUTE, "compute");
        smoe_trace_lane(trace, SMOE_LANE_GATHER, "FSDP gathers");
        smoe_trace_lane(trace, SMOE_LANE_COMM, "all-to-all / reductions");
        smoe_trace_lane(trace, SMOE_LANE_WAIT, "waits");
    }
    if ((s = tr_loop_new(rt, &mc, &hp, o, model, &st, trace, &S, err)))
        goto fail;
    tr_ckpt_opts co = { o->ckpt_dir, 0, o->steps, o->seed, o->ckpt_keep, &fp,
                        smoe_config_rules(cfg) };
    if (o->ckpt_dir && o->resume &&
        (s = tr_ckpt_load(rt, &st, &co, &res->first_step, res->resumed_from, err)))
        goto fail;
    if (!res->resumed_from[0]) /* a fresh start (or nothing to resume) */
        tr_store_init_params(rt, &st, o->seed);
    res->steps = smoe_calloc((size_t)(o->steps - res->first_step), sizeof *res->steps);
    if (!res->steps) {
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory");
        goto fail;
    }
    int32_t *targets, *tokens = tr_loop_tokens(S, &targets);
    int64_t first = (int64_t)smoe_rt_rank(rt) * mc.batch;
    for (int64_t step = res->first_step; step < o->steps; step++) {
        smoe_train_step *rec = &res->steps[step - res->first_step];
        tr_data_batch(&data, o->seed, step, first, mc.batch, mc.seq, tokens, targets);
        if ((s = tr_loop_step(S, step, rec, err)))
            goto fail;
        res->nsteps++;
        if (o->on_step)
            o->on_step(o->ud, rec);
        int64_t done = step + 1;
        if (o->ckpt_dir && (done == o->steps || (o->ckpt_every && done % o->ckpt_every == 0))) {
            co.step = done;
            if ((s = tr_ckpt_save(rt, &st, &co, err)))
                goto fail;
        }
    }
    smoe_rt_set_phase(rt, "the summary");
    /* summary */
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
        (st.unit_floats[0] > st.unit_floats[1] ? st.unit_floats[0] : st.unit_floats[1]) * 4;
    res->top_gathered_bytes = 2 * st.top_floats * 4;
    {
        int64_t pk[2];
        tr_loop_peaks(S, &pk[0], &pk[1]);
        smoe_rt_allreduce_max_i64(rt, pk, 2);
        res->peak_gathered_fwd_bytes = pk[0];
        res->peak_gathered_bwd_bytes = pk[1];
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t rss[1] = { (int64_t)ru.ru_maxrss * 1024 };
    smoe_rt_allreduce_max_i64(rt, rss, 1);
    res->peak_rss_bytes = rss[0];
    res->tokens_per_step = mc.batch * mc.seq * smoe_rt_size(rt);
    res->model_flops_per_step = 3 * forward_flops_per_token(&mc) * (double)res->tokens_per_step;
    for (int i = 0; i < st.n; i++) {
        int64_t e = st.w[i].layers;
        for (int d = 0; d < st.w[i].lrank; d++)
            e *= st.w[i].lshape[d];
        res->params += e;
    }
    if ((s = tr_store_digest(rt, &st, o->dump_path, res->params_sha256, err)))
        goto fail;
    if (trace && (s = write_trace(rt, trace, o->trace_path, err)))
        goto fail;
fail:
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
}
