/* The trainer: one model's sharded state on the ranks of a communicator (comm.h), built
 * once (every check agreed across ranks before anything large is
 * allocated, so that all ranks stop together on bad input), then stepped
 * one batch at a time; checkpoints, the parameters whole, their digest and
 * the trace on request. smoe_train_run (run.c) is a loop over it. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct smoe_trainer {
    smoe_comm comm;              /* the caller's, copied */
    const smoe_config *cfg;
    const smoe_plan *plan;
    smoe_train_opts o;           /* a copy; its strings are the caller's */
    smoe_model_cfg mc;
    tr_hparams hp;
    tr_store st;
    smoe_model *model;
    tr_state *S;                 /* the step loop (loop.c) */
    smoe_trace *trace;           /* NULL unless o.trace_path */
    tr_fingerprint_t fp;
    tr_ckpt *ck;                 /* NULL unless o.ckpt_dir */
    tr_ckpt_opts co;
    char wire[128];              /* tr_wire_text, recorded in checkpoints */
    int64_t step;                /* steps done */
    int64_t memory_estimate;     /* bytes per rank, max over ranks */
    smoe_trainer_param *params;  /* (st.n) */
    char recipe[640];
    smoe_blas_info blas;
    /* the prefetch schedules are o's (schedules.c checks them) */
    int max_distance;
    int plans[2];                /* the co-axis / legacy gathers built */
    int next_told;               /* the next step's schedule given (tr_trainer_next) */
};

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

smoe_status smoe_train_check_ram(const smoe_config *cfg, double need, const char *what,
                                 const char *verdict, smoe_err *err)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
    if (!(ram > 0 && need > ram))
        return SMOE_OK;
    char dims[1400];
    size_keys(cfg, dims, sizeof dims);
    return smoe_err_set(err, SMOE_EINVAL,
                        "the model needs %.3g GiB per rank (%s), more than this machine's "
                        "%.3g GiB of memory: %s (%s)",
                        need / 1073741824.0, what, ram / 1073741824.0, verdict, dims);
}

/* What this rank will need, checked before anything large is allocated:
 * against --max-memory, and against the machine's memory. */
static smoe_status check_memory(smoe_trainer *t, int max_depth, int64_t data_bytes,
                                smoe_err *err)
{
    const smoe_model_cfg *mc = &t->mc;
    const tr_store *st = &t->st;
    int64_t act = 0;
    smoe_status s = smoe_model_need_bytes(mc, &act, err);
    double slabs = 4.0 * (double)st->total * 4, pool = (double)tr_pf_pool_bytes(st, max_depth);
    double top = 2.0 * (double)st->top_floats * 4;
    double need = slabs + pool + top + (double)act + (double)data_bytes;
    int64_t est[1] = { s ? 0 : (need < 9e18 ? (int64_t)need : INT64_MAX) };
    if ((s = smoe_comm_agree_err(&t->comm, s, err)))
        return s;
    smoe_comm_allreduce_max_i64(&t->comm, est, 1);
    t->memory_estimate = est[0];
    char what[400];
    snprintf(what, sizeof what,
             "shards, gradients and AdamW moments %.0f, gathered-layer pool %.0f, top-level "
             "buffers %.0f, activations %lld, data %lld",
             slabs, pool, top, (long long)act, (long long)data_bytes);
    if (t->o.max_memory > 0 && est[0] > t->o.max_memory) {
        char where[64];
        snprintf(where, sizeof where, "argument '--max-memory %lld'", (long long)t->o.max_memory);
        return smoe_err_in(err, SMOE_ENOMEM, where, "the plan needs %lld bytes per rank (%s)",
                           (long long)est[0], what);
    }
    return smoe_train_check_ram(t->cfg, (double)est[0], what,
                                "the model is too large for this mesh", err);
}

/* The communicator's ranks form the plan's mesh (the layout and every
 * gather are cut for it). */
static smoe_status check_mesh(const smoe_comm *cm, const smoe_plan *plan, smoe_err *err)
{
    const smoe_mesh *a = smoe_comm_mesh(cm), *b = &plan->mesh;
    int same = a->n == b->n;
    for (int i = 0; same && i < a->n; i++)
        same = a->size[i] == b->size[i] && strcmp(a->name[i], b->name[i]) == 0;
    if (same)
        return SMOE_OK;
    char x[2][256];
    for (int k = 0; k < 2; k++) {
        const smoe_mesh *m = k ? b : a;
        size_t o = 0;
        x[k][0] = 0;
        for (int i = 0; i < m->n && o < sizeof x[k]; i++)
            o += (size_t)snprintf(x[k] + o, sizeof x[k] - o, "%s%s=%lld", i ? " " : "",
                                  m->name[i], (long long)m->size[i]);
    }
    return smoe_err_set(err, SMOE_EINVAL, "the communicator's mesh (%s) is not the plan's (%s)",
                        x[0], x[1]);
}

smoe_status tr_trainer_check(const smoe_comm *cm, const smoe_config *cfg, const smoe_plan *plan,
                             const smoe_train_opts *o, smoe_model_cfg *mc, tr_hparams *hp,
                             smoe_err *err)
{
    smoe_status s = check_mesh(cm, plan, err);
    if (!s)
        s = smoe_train_check_keys(cfg, err);
    if (!s)
        s = smoe_train_model_cfg(cfg, smoe_comm_mesh(cm), mc, err);
    if (!s)
        s = tr_read_hparams(cfg, hp, err);
    if (!s && o->steps < 1) /* before the schedule that depends on it */
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--steps'", "must be >= 1");
    if (!s) /* MaxText's recipe (recipe.c) */
        s = tr_read_recipe(cfg, o->steps, &hp->rc, err);
    if (!s && (o->nschedules < 1 || o->nschedules > SMOE_TRAIN_MAX_SCHEDULES || !o->schedules))
        s = smoe_err_set(err, SMOE_EINVAL, "%d schedules (1 to %d take turns in one run)",
                         o->nschedules, SMOE_TRAIN_MAX_SCHEDULES);
    if (!s && o->ckpt_dir && !o->ckpt_dir[0])
        s = smoe_err_in(err, SMOE_EINVAL, "argument '--checkpoint-dir'",
                        "is empty: name a directory");
    hp->batch = mc->batch;
    hp->seq = mc->seq;
    return smoe_comm_agree(cm, s);
}

static smoe_status new_trace(smoe_trainer *t, smoe_err *err)
{
    t->trace = smoe_trace_new(smoe_comm_rank(&t->comm), smoe_now());
    if (!t->trace)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace");
    smoe_trace_lanes(t->trace);
    return SMOE_OK;
}

static smoe_status param_table(smoe_trainer *t, smoe_err *err)
{
    t->params = smoe_calloc((size_t)(t->st.n ? t->st.n : 1), sizeof *t->params);
    if (!t->params)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    for (int i = 0; i < t->st.n; i++) {
        const tr_weight *w = &t->st.w[i];
        smoe_trainer_param *p = &t->params[i];
        p->name = w->pw->path ? w->pw->path : w->pw->key;
        p->rank = w->pw->rank;
        p->numel = 1;
        for (int d = 0; d < p->rank; d++) {
            p->shape[d] = w->pw->shape[d];
            p->numel *= p->shape[d];
        }
        p->layers = w->layers;
        p->shard = t->st.params_h + w->shard_off; /* the host copy (smoe_trainer_params) */
        p->shard_numel = w->layers * w->info.shard_numel;
    }
    return SMOE_OK;
}

/* The next steps run o's schedule i: its plan, and its budget (bytes per
 * rank for every tracked class; 0: none). */
static smoe_status use_schedule(smoe_trainer *t, int i, smoe_err *err)
{
    const smoe_schedule *s = t->o.schedules[i];
    return tr_loop_set_mode(t->S, s, s->legacy, (int64_t)s->budget, err);
}

/* the single-rank communicator's copies on a device's table (train.h) */
static void table_copy(void *ud, void *dst, const void *src, size_t bytes)
{
    const smoe_trainer *t = ud;
    t->o.kops->copy(t->o.kstream, dst, src, bytes);
}

/* The kernel table of o (the CPU's when none); one that is not synchronous
 * runs on the single-rank communicator, which then copies through it, or
 * on in-process ranks given the device (comm.h). */
static smoe_status use_table(smoe_trainer *t, smoe_err *err)
{
    if (!t->o.kops)
        t->o.kops = smoe_kops_cpu(), t->o.kstream = NULL;
    smoe_comm_local_set_copy(&t->comm, NULL, NULL); /* not a hook an earlier trainer left */
    if (t->o.kops->synchronous)
        return SMOE_OK;
    if (smoe_comm_on_device(&t->comm)) /* its gathers say what they move */
        return SMOE_OK;
    if (!smoe_comm_is_local(&t->comm))
        return smoe_err_set(err, SMOE_EINVAL,
                            "the '%s' kernel table runs over the single-rank communicator or "
                            "one whose ranks are on its device (comm.h) so far, not over '%s'",
                            t->o.kops->name, t->comm.ops->name);
    if (t->plan->gather_dtype != SMOE_DT_FP32)
        return smoe_err_set(err, SMOE_EINVAL,
                            "gathers in %s on the '%s' kernel table over the single-rank "
                            "communicator are not supported yet (fp32 only)",
                            smoe_dtype_name(t->plan->gather_dtype), t->o.kops->name);
    smoe_comm_local_set_copy(&t->comm, table_copy, t);
    return SMOE_OK;
}

/* The layout, then what it needs, then the allocations. */
static smoe_status build(smoe_trainer *t, const smoe_train_data *data, smoe_err *err)
{
    const smoe_comm *cm = &t->comm;
    int max_depth;
    smoe_status s = use_table(t, err);
    if (!s)
        s = tr_schedules(cm, &t->o, &max_depth, t->plans, err);
    if (s)
        return s;
    s = tr_store_build(cm, t->plan, &t->mc, t->plans, t->o.reduce_dtype, &t->st,
                                   err);
    if (s == SMOE_EINVAL && err) { /* a weight the runtime cannot move: name the sizes */
        char dims[1400];
        size_keys(t->cfg, dims, sizeof dims);
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, " (the model: %s)", dims);
    }
    if ((s = smoe_comm_agree_err(cm, s, err)) || /* the layout, then what it needs */
        (s = check_memory(t, max_depth, data ? data->n : 0, err)))
        return s;
    t->max_distance = max_depth;
    s = tr_store_alloc(&t->st, t->o.kops, t->o.kstream, err);
    if (!s)
        s = smoe_model_new_on(&t->mc, t->o.kops, t->o.kstream, &t->model, err);
    if (!s && t->o.trace_path)
        s = new_trace(t, err);
    if (!s)
        s = param_table(t, err);
    if ((s = smoe_comm_agree_err(cm, s, err)))
        return s;
    s = tr_loop_new(cm, &t->mc, &t->hp, max_depth, t->model, &t->st, t->trace, &t->S, err);
    /* each schedule checked against the model; the first one runs until
     * smoe_trainer_use_schedule */
    for (int i = t->o.nschedules - 1; i >= 0 && !s; i--)
        s = use_schedule(t, i, err);
    if (s && err && t->o.schedule_name && !err->where[0]) /* the file did not fit */
        snprintf(err->where, sizeof err->where, "%s",
                 t->o.schedule_name ? t->o.schedule_name : "the schedule");
    return smoe_comm_agree_err(cm, s, err);
}

smoe_status smoe_trainer_new(const smoe_config *cfg, const smoe_plan *plan, const smoe_comm *comm,
                             const smoe_train_opts *o, const smoe_train_data *data,
                             smoe_trainer **out, smoe_err *err)
{
    *out = NULL;
    const smoe_comm *cm = comm;
    smoe_trainer *t = smoe_calloc(1, sizeof *t);
    smoe_status s = t ? SMOE_OK : smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    if ((s = smoe_comm_agree_err(cm, s, err))) {
        smoe_free(t); /* another rank's failure */
        return s;
    }
    t->comm = *comm;
    cm = &t->comm;
    t->cfg = cfg;
    t->plan = plan;
    t->o = *o;
    if ((s = tr_trainer_check(cm, cfg, plan, o, &t->mc, &t->hp, err)))
        goto fail;
    tr_recipe_describe(&t->hp, &t->mc, t->recipe, sizeof t->recipe);
    smoe_blas_init(1, &t->blas);
    /* every rank runs the same configuration, plan, options and data, or
     * the collectives stop matching: check before the first of them */
    smoe_comm_set_phase(cm, "the cross-rank consistency check");
    s = tr_fingerprint(cfg, plan, o, &t->comm, data, &t->fp, err);
    if ((s = smoe_comm_agree(cm, s)) || (s = tr_fingerprint_check(cm, &t->fp, err)))
        goto fail;
    smoe_comm_set_phase(cm, "set-up");
    if ((s = build(t, data, err)))
        goto fail;
    tr_wire_text(plan, o->reduce_dtype, t->wire, sizeof t->wire);
    tr_ckpt_opts co = { o->ckpt_dir, 0, o->steps, o->seed, o->ckpt_keep, &t->fp,
                        smoe_config_rules(cfg), cfg, "", t->wire, o->on_note, o->ud };
    t->co = co;
    /* the checkpoint directory: this run's, writable on every rank */
    if (o->ckpt_dir) {
        double io = tr_io_begin(cm);
        s = tr_ckpt_open(cm, &t->co, o->resume, &t->ck, err);
        smoe_comm_swap_timeout(cm, io);
        if (s)
            goto fail;
    }
    tr_store_init_params(cm, &t->st, o->seed);
    *out = t;
    return SMOE_OK;
fail:
    smoe_trainer_free(t);
    return s;
}

void smoe_trainer_free(smoe_trainer *t)
{
    if (!t)
        return;
    if (t->o.kops && !t->o.kops->synchronous) /* the communicator outlives t */
        smoe_comm_local_set_copy(&t->comm, NULL, NULL);
    tr_ckpt_close(t->ck);
    tr_loop_free(t->S);
    smoe_trace_free(t->trace);
    tr_store_free(&t->st);
    smoe_model_free(t->model);
    smoe_free(t->params);
    smoe_free(t);
}

const smoe_model_cfg *smoe_trainer_model(const smoe_trainer *t) { return &t->mc; }

int64_t smoe_trainer_steps_done(const smoe_trainer *t) { return t->step; }

smoe_status smoe_trainer_use_schedule(smoe_trainer *t, int i, smoe_err *err)
{
    if (i < 0 || i >= t->o.nschedules)
        return smoe_err_set(err, SMOE_EINVAL, "schedule %d: the trainer has %d", i,
                            t->o.nschedules);
    return use_schedule(t, i, err);
}

void tr_trainer_next(smoe_trainer *t, int more, int i)
{
    const smoe_schedule *s = more && i >= 0 && i < t->o.nschedules ? t->o.schedules[i] : NULL;
    tr_loop_set_next(t->S, s, s ? s->legacy : 0);
    t->next_told = 1;
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
static _Noreturn void step_failed(const smoe_comm *cm, smoe_status s, const smoe_err *err)
{
    char buf[1200];
    smoe_comm_abort(cm, s == SMOE_ENOMEM ? SMOE_EXIT_NOMEM : SMOE_EXIT_COMM,
                    smoe_err_format(err, buf, sizeof buf));
}

smoe_status smoe_trainer_step(smoe_trainer *t, const int32_t *tokens, const int32_t *targets,
                              smoe_train_step *rec, smoe_err *err)
{
    int32_t *tgt, *tok = tr_loop_tokens(t->S, &tgt);
    int64_t T = t->mc.batch * t->mc.seq, bad = -1;
    for (int64_t i = 0; i < T && bad < 0; i++)
        if (tokens[i] < 0 || tokens[i] >= t->mc.vocab || targets[i] < 0 ||
            targets[i] >= t->mc.vocab)
            bad = i;
    smoe_status s = SMOE_OK;
    if (bad >= 0)
        s = smoe_err_set(err, SMOE_EINVAL,
                         "step %lld: token or target %lld of rank %d is outside [0, %lld)",
                         (long long)t->step + 1, (long long)bad, smoe_comm_rank(&t->comm),
                         (long long)t->mc.vocab);
    if ((s = smoe_comm_agree_err(&t->comm, s, err)))
        return s;
    if (tok != tokens)
        memcpy(tok, tokens, sizeof *tok * (size_t)T);
    if (tgt != targets)
        memcpy(tgt, targets, sizeof *tgt * (size_t)T);
    memset(rec, 0, sizeof *rec);
    if (!t->next_told) /* the same mode again, while o's steps last */
        tr_loop_next_same(t->S, t->step + 1 < t->o.steps);
    t->next_told = 0;
    if ((s = tr_loop_step(t->S, t->step, rec, err)))
        step_failed(&t->comm, s, err);
    t->step++;
    return check_loss(&t->hp, rec, err);
}

smoe_status smoe_trainer_save(smoe_trainer *t, smoe_err *err)
{
    if (!t->ck)
        return smoe_err_set(err, SMOE_EINVAL, "the trainer has no checkpoint directory");
    t->co.step = t->step;
    double io = tr_io_begin(&t->comm);
    tr_store_pull(&t->st);
    smoe_status s = tr_ckpt_save(&t->comm, t->ck, &t->st, &t->co, err);
    smoe_comm_swap_timeout(&t->comm, io);
    return s;
}

smoe_status smoe_trainer_load(smoe_trainer *t, smoe_train_result *res, smoe_err *err)
{
    if (!t->ck)
        return smoe_err_set(err, SMOE_EINVAL, "the trainer has no checkpoint directory");
    tr_loop_retire(t->S); /* gathers of the parameters about to be replaced */
    double io = tr_io_begin(&t->comm);
    smoe_status s = tr_ckpt_load(&t->comm, &t->st, &t->co, res, err);
    smoe_comm_swap_timeout(&t->comm, io);
    if (!s)
        tr_store_push(&t->st);
    if (!s && res->resumed_from[0])
        t->step = res->first_step;
    return s;
}

const smoe_trainer_param *smoe_trainer_params(const smoe_trainer *t, int *n)
{
    /* the shards' host copy brought up to date: a cache of the state, which
     * the caller sees as the trainer's parameters (nothing on the CPU) */
    tr_store_pull((tr_store *)&t->st);
    *n = t->st.n;
    return t->params;
}

int smoe_trainer_param_find(const smoe_trainer *t, const char *name)
{
    for (int i = 0; i < t->st.n; i++)
        if (strcmp(t->params[i].name, name) == 0)
            return i;
    return -1;
}

smoe_status smoe_trainer_gather(smoe_trainer *t, int i, float *full, smoe_err *err)
{
    if (i < 0 || i >= t->st.n)
        return smoe_err_set(err, SMOE_EINVAL, "no parameter %d (the trainer has %d)", i,
                            t->st.n);
    tr_store_pull(&t->st);
    return tr_store_gather(&t->comm, &t->st, i, full, err);
}

smoe_status smoe_trainer_digest(smoe_trainer *t, const char *dump, char hex[65], smoe_err *err)
{
    tr_store_pull(&t->st);
    return tr_store_digest(&t->comm, &t->st, dump, hex, err);
}

smoe_status smoe_trainer_write_trace(smoe_trainer *t, const char *path, smoe_err *err)
{
    const smoe_comm *cm = &t->comm;
    if (!t->trace)
        return smoe_err_set(err, SMOE_EINVAL, "the trainer records no trace (no trace_path)");
    size_t len = 0;
    const char *frag;
    smoe_status s = smoe_trace_fragment(t->trace, &frag, &len, err);
    int size = smoe_comm_size(cm);
    int64_t *lens = smoe_calloc((size_t)size, sizeof *lens);
    char *all = NULL;
    if (!s && !lens)
        s = smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace");
    s = smoe_comm_agree_err(cm, s, err);
    if (!s)
        s = smoe_comm_gatherv_bytes(cm, frag, (int64_t)len, &all, lens);
    if (!s && smoe_comm_rank(cm) == 0) {
        const char **frags = smoe_calloc((size_t)size, sizeof *frags);
        size_t *fl = smoe_calloc((size_t)size, sizeof *fl);
        smoe_out *o = NULL;
        if (!frags || !fl)
            s = smoe_err_in(err, SMOE_ENOMEM, path, "out of memory writing the trace");
        else
            s = smoe_out_open(path, "the trace", &o, err);
        if (!s) {
            int64_t off = 0;
            for (int r = 0; r < size; r++) {
                frags[r] = all + off;
                fl[r] = (size_t)lens[r];
                off += lens[r];
            }
            s = smoe_out_finish(o, smoe_trace_write(smoe_out_file(o), frags, fl, size, err),
                                err);
        }
        smoe_free(frags);
        smoe_free(fl);
    }
    smoe_free(all);
    smoe_free(lens);
    return smoe_comm_agree(cm, s);
}

void tr_trainer_result(const smoe_trainer *t, smoe_train_result *res)
{
    snprintf(res->recipe, sizeof res->recipe, "%s", t->recipe);
    snprintf(res->expert_exchange, sizeof res->expert_exchange, "%s",
             tr_recipe_exchange(&t->mc));
    res->blas = t->blas;
    res->memory_estimate_bytes = t->memory_estimate;
    res->schedule_note[0] = 0;
    for (int i = 0; i < t->o.nschedules && !res->schedule_note[0]; i++)
        snprintf(res->schedule_note, sizeof res->schedule_note, "%s", t->o.schedules[i]->note);
    res->prefetch_distance = t->max_distance;
    res->nunapplied = smoe_train_unapplied_keys(t->cfg, smoe_mesh_slices(&t->plan->mesh),
                                                res->unapplied, SMOE_TRAIN_MAX_UNAPPLIED);
}

void tr_trainer_summarize(smoe_trainer *t, smoe_train_result *res)
{
    const smoe_comm *cm = &t->comm;
    const tr_store *st = &t->st;
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
    tr_mem tm;
    tr_loop_peaks(t->S, &pk[0], &pk[1], &tm);
    smoe_comm_allreduce_max_i64(cm, pk, 2);
    smoe_train_mem pt = { tm.params, tm.grads, tm.optimizer, tm.gathered, tm.activations, tm.comm };
    res->peak_tracked = pt;
    for (int64_t i = 0; i < res->nsteps; i++) {
        const smoe_train_step *r = &res->steps[i];
        if (r->peak_tracked_bytes > res->peak_tracked_bytes)
            res->peak_tracked_bytes = r->peak_tracked_bytes;
        res->budget_overruns += r->budget_overruns;
        res->gathers_at_use += r->gathers_at_use;
    }
    res->peak_gathered_fwd_bytes = pk[0];
    res->peak_gathered_bwd_bytes = pk[1];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int64_t rss[1] = { (int64_t)ru.ru_maxrss * 1024 };
    smoe_comm_allreduce_max_i64(cm, rss, 1);
    res->peak_rss_bytes = rss[0];
    res->tokens_per_step = t->mc.batch * t->mc.seq * smoe_comm_size(cm);
    res->model_flops_per_step = 3 * smoe_model_fwd_flops_per_token(&t->mc) * (double)res->tokens_per_step;
    for (int i = 0; i < st->n; i++) {
        int64_t e = st->w[i].layers;
        for (int d = 0; d < st->w[i].lrank; d++)
            e *= st->w[i].lshape[d];
        res->params += e;
    }
}
