/* The prefetch schedule as data: which gathers are issued when, built from
 * a uniform depth or the planner's per-weight levels, and checked when read
 * from a file. One builder for the simulator and the trainer, so the depth
 * the simulator predicts is the depth the trainer runs. */
#include "sched_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unit_layer(int L, int u) { return sim_unit_layer(L, u); }

static int kind_of(const smoe_schedule *s, int u) { return unit_layer(s->L, u) >= s->n_dense; }

smoe_schedule *smoe_schedule_alloc(int n)
{
    smoe_schedule *s = smoe_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->g = smoe_calloc((size_t)(n > 0 ? n : 1), sizeof *s->g);
    if (!s->g) {
        smoe_free(s);
        return NULL;
    }
    s->n = n;
    s->depth = -1;
    return s;
}

void smoe_schedule_free(smoe_schedule *s)
{
    if (!s)
        return;
    smoe_free(s->g);
    smoe_free(s);
}

static int cmp_gather(const void *a, const void *b)
{
    const smoe_sched_gather *x = a, *y = b;
    if (x->issue != y->issue)
        return x->issue < y->issue ? -1 : 1;
    if (x->unit != y->unit)
        return x->unit < y->unit ? -1 : 1;
    if (x->weight != y->weight)
        return x->weight < y->weight ? -1 : 1;
    return (x->chunk0 > y->chunk0) - (x->chunk0 < y->chunk0);
}

static void put(smoe_schedule *s, int u, int w, int c0, int nc, int issue)
{
    smoe_sched_gather *g = &s->g[s->n++];
    g->unit = u;
    g->weight = w;
    g->chunk0 = c0;
    g->nchunks = nc;
    g->issue = issue < 0 ? -1 : issue;
    g->free = u;
}

smoe_status smoe_schedule_build(int L, int n_dense, const int nweights[2],
                                const char *const *names[2], int depth,
                                const unsigned char (*levels)[SMOE_SIM_MAX_WEIGHTS],
                                smoe_schedule **out, smoe_err *err)
{
    *out = NULL;
    if (L < 1 || n_dense < 0 || n_dense > L)
        return smoe_err_set(err, SMOE_EINVAL, "a schedule of %d layers (%d dense)", L, n_dense);
    if (!levels && (depth < 0 || depth > SMOE_SIM_MAX_DEPTH))
        return smoe_err_set(err, SMOE_EINVAL, "prefetch depth %d (0 to %d)", depth,
                            SMOE_SIM_MAX_DEPTH);
    for (int k = 0; k < 2; k++)
        if (nweights[k] < 0 || nweights[k] > SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "%d weights in a layer (at most %d)",
                                nweights[k], SMOE_SIM_MAX_WEIGHTS);
    int cap = 0;
    for (int u = 0; u < 2 * L; u++)
        cap += 2 * nweights[unit_layer(L, u) >= n_dense];
    smoe_schedule *s = smoe_schedule_alloc(cap);
    if (!s)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for a schedule");
    s->n = 0;
    s->L = L;
    s->n_dense = n_dense;
    s->depth = levels ? -1 : depth;
    for (int k = 0; k < 2; k++) {
        s->nweights[k] = nweights[k];
        for (int w = 0; w < nweights[k]; w++)
            snprintf(s->names[k][w], SMOE_SCHED_NAME, "%s", names[k][w] ? names[k][w] : "");
    }
    for (int u = 0; u < 2 * L; u++) {
        int k = kind_of(s, u);
        for (int w = 0; w < nweights[k]; w++) {
            int lv = levels ? levels[k][w] : depth > 0 ? 4 * depth : 0;
            int d = lv > 0 ? (lv - 1) / 4 + 1 : 0, q = lv > 0 ? (lv - 1) % 4 + 1 : 0;
            if (q > 0)
                put(s, u, w, 0, q, u - d);
            if (q < SMOE_SCHED_CHUNKS)
                put(s, u, w, q, SMOE_SCHED_CHUNKS - q, u);
        }
    }
    qsort(s->g, (size_t)s->n, sizeof *s->g, cmp_gather);
    *out = s;
    return SMOE_OK;
}

smoe_status smoe_schedule_for_model(const smoe_sim_model *m, int depth,
                                    const unsigned char (*levels)[SMOE_SIM_MAX_WEIGHTS],
                                    smoe_schedule **out, smoe_err *err)
{
    int n_dense = 0, nw[2];
    while (n_dense < m->L && m->kind_of[n_dense] == 0)
        n_dense++;
    for (int l = n_dense; l < m->L; l++)
        if (m->kind_of[l] != 1)
            return smoe_err_set(err, SMOE_EINVAL, "layer kinds not dense-then-MoE");
    const char *nm[2][SMOE_SIM_MAX_WEIGHTS];
    for (int k = 0; k < 2; k++) {
        nw[k] = m->k[k].nw;
        for (int w = 0; w < nw[k]; w++)
            nm[k][w] = m->k[k].w[w].name;
    }
    const char *const *names[2] = { nm[0], nm[1] };
    return smoe_schedule_build(m->L, n_dense, nw, names, depth, levels, out, err);
}

static const char *const k_kind[2] = { "dense", "moe" };

/* The index of `name` among names[0..n), or -1. */
static int find_name(const char *const *names, int n, const char *name)
{
    for (int j = 0; j < n; j++)
        if (names[j] && strcmp(names[j], name) == 0)
            return j;
    return -1;
}

/* One kind's names: a permutation of the model's (see smoe_schedule_match). */
static smoe_status match_kind(const smoe_schedule *s, int k, int n, const char *const *names,
                              int *map, smoe_err *err)
{
    int at[SMOE_SIM_MAX_WEIGHTS], dup = -1, dup_of = -1, miss = -1;
    for (int j = 0; j < n; j++)
        at[j] = -1;
    for (int w = 0; w < s->nweights[k]; w++) {
        int j = find_name(names, n, s->names[k][w]);
        if (j < 0)
            return smoe_err_set(err, SMOE_EINVAL, "weights.%s[%d]: '%s' is not a weight of "
                                "the model's %s layers", k_kind[k], w, s->names[k][w],
                                k ? "MoE" : "dense");
        if (at[j] >= 0 && dup < 0)
            dup = w, dup_of = at[j];
        else if (at[j] < 0)
            at[j] = w;
        if (map)
            map[w] = j;
    }
    for (int j = 0; j < n && miss < 0; j++)
        if (at[j] < 0)
            miss = j;
    if (dup >= 0)
        return smoe_err_set(err, SMOE_EINVAL, "weights.%s[%d]: '%s' is named twice (also "
                            "weights.%s[%d])%s%s%s", k_kind[k], dup, s->names[k][dup],
                            k_kind[k], dup_of, miss < 0 ? "" : "; '",
                            miss < 0 ? "" : names[miss], miss < 0 ? "" : "' is missing");
    if (miss >= 0)
        return smoe_err_set(err, SMOE_EINVAL, "weights.%s: '%s', a weight of the model's %s "
                            "layers, is missing", k_kind[k], names[miss], k ? "MoE" : "dense");
    return SMOE_OK;
}

smoe_status smoe_schedule_match(const smoe_schedule *s, const int n[2],
                                const char *const *names[2],
                                int map[2][SMOE_SIM_MAX_WEIGHTS], smoe_err *err)
{
    for (int k = 0; k < 2; k++) {
        if (n[k] < 0 || n[k] > SMOE_SIM_MAX_WEIGHTS || s->nweights[k] < 0 ||
            s->nweights[k] > SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "weights.%s: %d names for %d weights (at "
                                "most %d)", k_kind[k], s->nweights[k], n[k],
                                SMOE_SIM_MAX_WEIGHTS);
        smoe_status st = match_kind(s, k, n[k], names[k], map ? map[k] : NULL, err);
        if (st)
            return st;
    }
    return SMOE_OK;
}

int smoe_schedule_max_distance(const smoe_schedule *s)
{
    int d = 0;
    for (int i = 0; i < s->n; i++) {
        int di = s->g[i].issue < 0 ? s->g[i].unit + 1 : s->g[i].unit - s->g[i].issue;
        d = di > d ? di : d;
    }
    return d;
}

static smoe_status bad(smoe_err *err, int i, const char *field, const char *msg, long long v)
{
    return smoe_err_set(err, SMOE_EINVAL, "gathers[%d].%s: %s (got %lld)", i, field, msg, v);
}

smoe_status smoe_schedule_check(const smoe_schedule *s, smoe_err *err)
{
    if (s->L < 1 || s->L > 65536)
        return smoe_err_set(err, SMOE_EINVAL, "layers: %d (1 to 65536)", s->L);
    if (s->n_dense < 0 || s->n_dense > s->L)
        return smoe_err_set(err, SMOE_EINVAL, "dense_layers: %d (0 to layers %d)", s->n_dense,
                            s->L);
    for (int k = 0; k < 2; k++)
        if (s->nweights[k] < 0 || s->nweights[k] > SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "weights.%s: %d names (at most %d)",
                                k ? "moe" : "dense", s->nweights[k], SMOE_SIM_MAX_WEIGHTS);
    int nu = 2 * s->L;
    /* chunks covered per (unit, weight): a bit mask each */
    unsigned char *cover = smoe_calloc((size_t)nu * SMOE_SIM_MAX_WEIGHTS, 1);
    if (!cover)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    smoe_status st = SMOE_OK;
    for (int i = 0; i < s->n && !st; i++) {
        const smoe_sched_gather *g = &s->g[i];
        if (g->unit < 0 || g->unit >= nu) {
            st = bad(err, i, "unit", "outside 0..2 x layers - 1", g->unit);
            break;
        }
        int k = kind_of(s, g->unit);
        if (g->weight < 0 || g->weight >= s->nweights[k])
            st = bad(err, i, "weight", "not an index into its layer kind's weights", g->weight);
        else if (g->chunk0 < 0 || g->nchunks < 1 || g->chunk0 + g->nchunks > SMOE_SCHED_CHUNKS)
            st = bad(err, i, "chunks", "outside 0..4", g->chunk0);
        else if (g->issue < -1 || g->issue > g->unit)
            st = bad(err, i, "issue", "not -1 (step start) or a unit up to its own", g->issue);
        else if (g->free != g->unit)
            st = bad(err, i, "free", "smoe frees a buffer after its own unit", g->free);
        else if (i > 0 && cmp_gather(&s->g[i - 1], g) > 0)
            st = bad(err, i, "issue", "entries not in issue order", g->issue);
        if (st)
            break;
        unsigned char *c = &cover[(size_t)g->unit * SMOE_SIM_MAX_WEIGHTS + (size_t)g->weight];
        unsigned mask = ((1u << g->nchunks) - 1u) << g->chunk0;
        if (*c & mask)
            st = bad(err, i, "chunks", "a chunk gathered twice in one unit", g->chunk0);
        *c = (unsigned char)(*c | mask);
    }
    for (int u = 0; u < nu && !st; u++) {
        int k = kind_of(s, u);
        for (int w = 0; w < s->nweights[k] && !st; w++)
            if (cover[(size_t)u * SMOE_SIM_MAX_WEIGHTS + (size_t)w] != (1u << SMOE_SCHED_CHUNKS) - 1)
                st = smoe_err_set(err, SMOE_EINVAL,
                                  "gathers: unit %d weight %d (%s) is not gathered whole", u, w,
                                  s->names[k][w]);
    }
    smoe_free(cover);
    return st;
}
