/* The parameter store: every plan parameter mapped to a model slot, its
 * gathers prepared from the plan, its shards in the four slabs (params,
 * grads, AdamW m and v; per weight layer-major), the deterministic
 * initialisation, and the canonical digest of all parameters. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const k_stacks[2] = { "decoder/dense_layers/", "decoder/moe_layers/" };

static float init_std(const smoe_model_cfg *mc, int top, int slot)
{
    if (top) {
        switch (slot) {
        case SMOE_T_EMBED: return 1.0f;
        case SMOE_T_FINAL_NORM: return 0.0f;
        default: return 1.0f / sqrtf((float)mc->emb);
        }
    }
    double fan = (double)mc->emb;
    switch (slot) {
    case SMOE_W_PRE_NORM:
    case SMOE_W_POST_NORM:
    case SMOE_W_Q_NORM:
    case SMOE_W_KV_NORM: return 0.0f;
    case SMOE_W_GATE_BIAS: return -1.0f;
    case SMOE_W_WQ_B: fan = (double)mc->q_lora; break;
    case SMOE_W_WKV_B: fan = (double)mc->kv_lora; break;
    case SMOE_W_OUT: fan = (double)(mc->heads * mc->v_head); break;
    case SMOE_W_MLP_WO: fan = (double)mc->mlp; break;
    case SMOE_W_SH_WO: fan = (double)(mc->shared * mc->moe_mlp); break;
    case SMOE_W_EXP_WO: fan = (double)mc->moe_mlp; break;
    default: break;
    }
    return (float)(1.0 / sqrt(fan));
}

static int find_slot(const char *rest, int top)
{
    int n = top ? SMOE_T_NSLOTS : SMOE_W_NSLOTS;
    for (int s = 0; s < n; s++)
        if (strcmp(rest, top ? smoe_tslot_path((smoe_tslot)s) : smoe_wslot_path((smoe_wslot)s)) == 0)
            return s;
    return -1;
}

/* Which slot of the model plan weight pw fills (w->slot, top, moe), its
 * layers and its per-layer shape and spec; refused when the model smoe
 * train runs has no such weight or another layer count. */
static smoe_status place_weight(const smoe_weight *pw, const smoe_model_cfg *mc, tr_weight *w,
                                smoe_err *err)
{
    memset(w, 0, sizeof *w);
    w->pw = pw;
    w->slot = find_slot(pw->path, 1);
    w->top = w->slot >= 0;
    for (int k = 0; k < 2 && w->slot < 0; k++) {
        size_t l = strlen(k_stacks[k]);
        if (strncmp(pw->path, k_stacks[k], l) == 0) {
            w->slot = find_slot(pw->path + l, 0);
            w->moe = k;
        }
    }
    if (w->slot < 0 || (!w->top && !smoe_wslot_used(mc, (smoe_wslot)w->slot, w->moe)))
        return smoe_err_set(err, SMOE_EINVAL,
                            "parameter %s is not part of the model smoe train runs", pw->path);
    w->layers = w->top ? 1 : pw->layers;
    w->layer0 = w->top || !w->moe ? 0 : mc->n_dense;
    if (!w->top && w->layers != (w->moe ? mc->n_moe : mc->n_dense))
        return smoe_err_set(err, SMOE_EINVAL, "%s: %lld stacked layers, expected %lld",
                            pw->path, (long long)w->layers,
                            (long long)(w->moe ? mc->n_moe : mc->n_dense));
    for (int d = 0; d < pw->rank; d++) {
        if (d == pw->scan_axis)
            continue;
        w->lshape[w->lrank] = pw->shape[d];
        w->lspec.dim[w->lspec.rank++] = pw->spec.dim[d];
        w->lrank++;
    }
    return SMOE_OK;
}

/* The gathers of each plan the run uses (same shard, same buffer), in the
 * wire the plan gives the weight (smoe_plan_set_wire); w->info from them,
 * checked against the model's buffer. */
static smoe_status weight_gathers(const smoe_comm *cm, const smoe_plan *plan,
                                  const smoe_model_cfg *mc, const int plans[2], int reduce_dtype,
                                  tr_weight *w, smoe_err *err)
{
    const smoe_weight *pw = w->pw;
    const char *name = w->top ? pw->path : pw->path + strlen(k_stacks[w->moe]);
    int routed = !w->top && (w->slot == SMOE_W_EXP_WI0 || w->slot == SMOE_W_EXP_WI1 ||
                             w->slot == SMOE_W_EXP_WO);
    smoe_status s;
    for (int k = 0; k < 2; k++) {
        smoe_gather_exec x;
        const smoe_gather *g = k ? &pw->legacy : &pw->gather;
        if (!plans[k])
            continue;
        if ((s = smoe_gather_exec_of(g, routed, name, &x, err)) ||
            (s = smoe_gather_exec_set_wire(&x, g, &plan->mesh, g->wire, plan->int8_block,
                                           pw->path, err)))
            return s;
        x.reduce_wire = reduce_dtype;
        if ((s = smoe_comm_gather_new(cm, &x, name, &w->wg[k], err)))
            return s;
    }
    smoe_comm_gather_info(cm, w->wg[plans[0] ? 0 : 1], &w->info);
    int64_t want = w->top ? smoe_tslot_numel(mc, (smoe_tslot)w->slot)
                          : smoe_wslot_numel(mc, (smoe_wslot)w->slot);
    if (w->info.gathered_numel != want)
        return smoe_err_set(err, SMOE_EINVAL,
                            "%s: its gathered buffer has %lld elements but the model "
                            "needs %lld (is the expert dim sharded over 'expert' only?)",
                            pw->path, (long long)w->info.gathered_numel, (long long)want);
    return SMOE_OK;
}

/* Every weight the model uses is in the plan. */
static smoe_status check_complete(const smoe_model_cfg *mc, int seen[2][SMOE_W_NSLOTS],
                                  const int seen_top[SMOE_T_NSLOTS], smoe_err *err)
{
    for (int k = 0; k < 2; k++) {
        if ((k ? mc->n_moe : mc->n_dense) == 0)
            continue;
        for (int sl = 0; sl < SMOE_W_NSLOTS; sl++)
            if (smoe_wslot_used(mc, (smoe_wslot)sl, k) && !seen[k][sl])
                return smoe_err_set(err, SMOE_EINVAL, "the plan has no %s%s",
                                    k_stacks[k], smoe_wslot_path((smoe_wslot)sl));
    }
    for (int sl = 0; sl < SMOE_T_NSLOTS; sl++)
        if (!seen_top[sl])
            return smoe_err_set(err, SMOE_EINVAL, "the plan has no %s",
                                smoe_tslot_path((smoe_tslot)sl));
    return SMOE_OK;
}

smoe_status tr_store_build(const smoe_comm *cm, const smoe_plan *plan, const smoe_model_cfg *mc,
                           const int plans[2], int reduce_dtype, tr_store *st, smoe_err *err)
{
    smoe_status s;
    memset(st, 0, sizeof *st);
    int np = 0;
    for (int i = 0; i < plan->n; i++)
        np += plan->w[i].kind == SMOE_ENTRY_PARAM;
    st->w = smoe_calloc((size_t)(np ? np : 1), sizeof *st->w);
    if (!st->w)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    int seen[2][SMOE_W_NSLOTS] = { { 0 } }, seen_top[SMOE_T_NSLOTS] = { 0 };
    for (int i = 0; i < plan->n; i++) {
        if (plan->w[i].kind != SMOE_ENTRY_PARAM)
            continue;
        tr_weight *w = &st->w[st->n];
        if ((s = place_weight(&plan->w[i], mc, w, err)) ||
            (s = weight_gathers(cm, plan, mc, plans, reduce_dtype, w, err)))
            return s;
        if (w->top)
            seen_top[w->slot] = 1;
        else
            seen[w->moe][w->slot] = 1;
        w->std = init_std(mc, w->top, w->slot);
        w->shard_off = st->total;
        st->total += w->layers * w->info.shard_numel;
        if (w->top) {
            w->unit_off = st->top_floats;
            st->top_floats += w->info.gathered_numel;
        } else {
            w->unit_off = st->unit_floats[w->moe];
            st->unit_floats[w->moe] += w->info.gathered_numel;
        }
        st->n++;
    }
    return check_complete(mc, seen, seen_top, err);
}

static size_t slab_bytes(const tr_store *st)
{
    return sizeof(float) * (size_t)(st->total ? st->total : 1);
}

smoe_status tr_store_alloc(tr_store *st, const smoe_kops *ops, void *stream, smoe_err *err)
{
    size_t bytes = slab_bytes(st);
    st->ops = ops;
    st->stream = stream;
    if (ops->synchronous) {
        st->params = st->params_h = smoe_malloc(bytes);
        st->grads = smoe_malloc(bytes);
        st->m = st->m_h = smoe_calloc(1, bytes);
        st->v = st->v_h = smoe_calloc(1, bytes);
    } else { /* the table's blocks are zeroed; the host copies too */
        st->params = ops->alloc(stream, bytes);
        st->grads = ops->alloc(stream, bytes);
        st->m = ops->alloc(stream, bytes);
        st->v = ops->alloc(stream, bytes);
        st->params_h = smoe_calloc(1, bytes);
        st->m_h = smoe_calloc(1, bytes);
        st->v_h = smoe_calloc(1, bytes);
    }
    if (!st->params || !st->grads || !st->m || !st->v || !st->params_h || !st->m_h || !st->v_h)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for %lld parameters per rank",
                            (long long)st->total);
    return SMOE_OK;
}

void tr_store_free(tr_store *st)
{
    smoe_free(st->w);
    if (st->ops && !st->ops->synchronous) {
        float *slabs[4] = { st->params, st->grads, st->m, st->v };
        for (int i = 0; i < 4; i++)
            if (slabs[i])
                st->ops->free(st->stream, slabs[i], slab_bytes(st));
        smoe_free(st->params_h);
        smoe_free(st->m_h);
        smoe_free(st->v_h);
    } else {
        smoe_free(st->params);
        smoe_free(st->grads);
        smoe_free(st->m);
        smoe_free(st->v);
    }
    memset(st, 0, sizeof *st);
}

void tr_store_pull(tr_store *st)
{
    if (st->params_h == st->params)
        return;
    st->ops->read(st->stream, st->params_h, st->params, slab_bytes(st));
    st->ops->read(st->stream, st->m_h, st->m, slab_bytes(st));
    st->ops->read(st->stream, st->v_h, st->v, slab_bytes(st));
}

void tr_store_push(tr_store *st)
{
    if (st->params_h == st->params)
        return;
    st->ops->write(st->stream, st->params, st->params_h, slab_bytes(st));
    st->ops->write(st->stream, st->m, st->m_h, slab_bytes(st));
    st->ops->write(st->stream, st->v, st->v_h, slab_bytes(st));
}

/* Walk the elements of a block of `shape` at `off` with extents `loc`,
 * calling back with the global row-major index. */
static void fill_block(const tr_weight *w, const int64_t *loc, const int64_t *off, float *dst,
                       uint64_t key)
{
    int64_t idx[SMOE_MAX_RANK] = { 0 }, n = 1;
    for (int d = 0; d < w->lrank; d++)
        n *= loc[d];
    for (int64_t j = 0; j < n; j++) {
        int64_t g = 0;
        for (int d = 0; d < w->lrank; d++)
            g = g * w->lshape[d] + off[d] + idx[d];
        dst[j] = w->std > 0 ? (float)(w->std * tr_normal(tr_mix(key, (uint64_t)g)))
                 : w->std == 0 ? 1.0f
                               : 0.0f;
        for (int d = w->lrank - 1; d >= 0; d--) {
            if (++idx[d] < loc[d])
                break;
            idx[d] = 0;
        }
    }
}

void tr_store_init_params(const smoe_comm *cm, tr_store *st, uint64_t seed)
{
    for (int i = 0; i < st->n; i++) {
        tr_weight *w = &st->w[i];
        int64_t loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK];
        /* an invariant: tr_store_build checked that every dim divides */
        SMOE_ASSERT(smoe_layout_local(&w->lspec, w->lshape, smoe_comm_mesh(cm),
                                      smoe_comm_coords(cm), loc, off, NULL) == SMOE_OK);
        /* the key depends on (seed, parameter index, layer) only */
        for (int64_t l = 0; l < w->layers; l++) {
            uint64_t key = tr_mix(tr_mix(seed, (uint64_t)i), (uint64_t)l);
            fill_block(w, loc, off, st->params_h + w->shard_off + l * w->info.shard_numel, key);
        }
    }
    tr_store_push(st);
}

/* Rank 0: place every rank's shard of one layer into the stacked global
 * tensor `full` (MaxText layout, scan dim at pw->scan_axis). */
static void place_layer(const smoe_comm *cm, const tr_weight *w, int64_t l, const float *all,
                        float *full)
{
    const smoe_mesh *m = smoe_comm_mesh(cm);
    const smoe_weight *pw = w->pw;
    for (int q = 0; q < smoe_comm_size(cm); q++) {
        int64_t c[SMOE_MAX_AXES], loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK];
        int64_t gl[SMOE_MAX_RANK], go[SMOE_MAX_RANK];
        smoe_mesh_coords(m, q, c);
        SMOE_ASSERT(smoe_layout_local(&w->lspec, w->lshape, m, c, loc, off, NULL) == SMOE_OK);
        int r = 0;
        for (int d = 0; d < pw->rank; d++) {
            if (d == pw->scan_axis) {
                gl[d] = 1;
                go[d] = l;
            } else {
                gl[d] = loc[r];
                go[d] = off[r];
                r++;
            }
        }
        smoe_layout_copy(pw->rank, pw->shape, gl, go, sizeof(float), full,
                         (void *)(all + (int64_t)q * w->info.shard_numel), 1);
    }
}

/* The parameter dump goes through smoe_out (core): written whole or not
 * at all, by each writer into its own temporary. */
static void dump_put(smoe_out *d, const void *p, size_t size, size_t n)
{
    if (d)
        fwrite(p, size, n, smoe_out_file(d)); /* a failure is the commit's */
}

/* Weight w whole into full on rank 0 (all: shard_numel * ranks floats of
 * scratch there; both unused on the other ranks). Collective. */
static void gather_weight(const smoe_comm *cm, const tr_store *st, const tr_weight *w, float *all,
                          float *full)
{
    for (int64_t l = 0; l < w->layers; l++) {
        smoe_comm_gather_bytes(cm, st->params_h + w->shard_off + l * w->info.shard_numel, all,
                               w->info.shard_numel * (int64_t)sizeof(float));
        if (smoe_comm_rank(cm) == 0)
            place_layer(cm, w, l, all, full);
    }
}

smoe_status tr_store_gather(const smoe_comm *cm, const tr_store *st, int i, float *full,
                            smoe_err *err)
{
    const tr_weight *w = &st->w[i];
    float *all = NULL;
    smoe_status s = SMOE_OK;
    if (smoe_comm_rank(cm) == 0) {
        all = smoe_malloc(sizeof *all * (size_t)(w->info.shard_numel * smoe_comm_size(cm)));
        if (!full)
            s = smoe_err_set(err, SMOE_EINVAL, "no buffer for %s on rank 0", w->pw->key);
        else if (!all)
            s = smoe_err_set(err, SMOE_ENOMEM, "out of memory gathering %s", w->pw->key);
    }
    if (!(s = smoe_comm_agree_err(cm, s, err)))
        gather_weight(cm, st, w, all, full);
    smoe_free(all);
    return s;
}

smoe_status tr_store_digest(const smoe_comm *cm, const tr_store *st, const char *dump, char hex[65],
                            smoe_err *err)
{
    int root = smoe_comm_rank(cm) == 0;
    smoe_out *d = NULL;
    tr_sha *sha = NULL;
    float *all = NULL, *full = NULL;
    smoe_status s = SMOE_OK;
    if (root) {
        sha = tr_sha_new();
        if (!sha)
            s = smoe_err_set(err, SMOE_ENOMEM, "cannot start SHA-256");
        if (!s && dump)
            s = smoe_out_open(dump, "the parameter dump", &d, err);
        dump_put(d, "SMOEPRM1\n", 1, 9);
    }
    s = smoe_comm_agree(cm, s);
    for (int i = 0; i < st->n && !s; i++) {
        const tr_weight *w = &st->w[i];
        const smoe_weight *pw = w->pw;
        int64_t total = 1;
        for (int k = 0; k < pw->rank; k++)
            total *= pw->shape[k];
        if (root) {
            all = smoe_malloc(sizeof *all * (size_t)(w->info.shard_numel * smoe_comm_size(cm)));
            full = smoe_malloc(sizeof *full * (size_t)total);
            if (!all || !full)
                smoe_comm_abort(cm, SMOE_EXIT_NOMEM, "out of memory gathering the parameters");
        }
        gather_weight(cm, st, w, all, full);
        if (root) {
            tr_sha_update(sha, full, sizeof *full * (size_t)total);
            uint32_t kl = (uint32_t)strlen(pw->key), rk = (uint32_t)pw->rank;
            dump_put(d, &kl, sizeof kl, 1);
            dump_put(d, pw->key, 1, kl);
            dump_put(d, &rk, sizeof rk, 1);
            dump_put(d, pw->shape, sizeof(int64_t), (size_t)pw->rank);
            dump_put(d, full, sizeof *full, (size_t)total);
            smoe_free(all);
            smoe_free(full);
            all = full = NULL;
        }
    }
    if (root && sha)
        tr_sha_final(sha, hex);
    if (root && s)
        smoe_out_abort(d);
    else if (root && d)
        s = smoe_out_commit(d, err);
    return smoe_comm_agree(cm, s);
}
