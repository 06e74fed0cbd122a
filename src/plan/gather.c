/* The FSDP-prefetch gather plan of one per-layer weight, legacy and
 * co-axis (the change description; docs/plan.md, "The gather plan"). Pure. */
#include "smoe/plan.h"

#include <stdio.h>
#include <string.h>

int smoe_is_fsdp_axis(const char *a)
{
    return strcmp(a, "fsdp") == 0 || strcmp(a, "fsdp_transpose") == 0;
}

int smoe_is_co_axis(const char *a)
{
    return strcmp(a, "expert") == 0 || strcmp(a, "context") == 0 ||
           strcmp(a, "context_usp_ulysses") == 0;
}

const char *smoe_gather_status_name(smoe_gather_status s)
{
    switch (s) {
    case SMOE_GATHER_NOOP: return "noop";
    case SMOE_GATHER_TAGGED: return "tagged";
    case SMOE_GATHER_FALLBACK: return "fallback";
    }
    return "?";
}

/* Gather axes of one dim's live axes (fsdp_axes_for_dim in co-axis mode). */
static smoe_axes gather_axes(const smoe_axes *live, smoe_gather_mode mode)
{
    smoe_axes g;
    g.n = 0;
    int i0 = -1;
    for (int i = 0; i < live->n && i0 < 0; i++)
        if (smoe_is_fsdp_axis(live->ax[i]))
            i0 = i;
    if (i0 < 0)
        return g;
    for (int i = mode == SMOE_MODE_LEGACY ? 0 : i0; i < live->n; i++) {
        const char *a = live->ax[i];
        if (smoe_is_fsdp_axis(a) || (mode == SMOE_MODE_COAXIS && smoe_is_co_axis(a)))
            g.ax[g.n++] = a;
    }
    return g;
}

static smoe_axes minus(const smoe_axes *a, const smoe_axes *b)
{
    smoe_axes r;
    r.n = 0;
    for (int i = 0; i < a->n; i++)
        if (!smoe_axes_has(b, a->ax[i]))
            r.ax[r.n++] = a->ax[i];
    return r;
}

/* Are the g axes exactly the last |g| axes of live? */
static int is_suffix(const smoe_axes *live, const smoe_axes *g)
{
    if (g->n > live->n)
        return 0;
    for (int i = 0; i < g->n; i++)
        if (strcmp(live->ax[live->n - g->n + i], g->ax[i]) != 0)
            return 0;
    return 1;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void smoe_gather_compute(const smoe_pspec *spec, const int64_t shape[],
                         const smoe_mesh *m, smoe_gather_mode mode,
                         int dtype_bytes, smoe_gather *out)
{
    memset(out, 0, sizeof *out);
    out->rank = spec->rank;
    out->ways = 1;
    out->residual_ways = 1;
    int any = 0, fallback = 0;
    int64_t local_in = 1, local_out = 1, local_final = 1;
    for (int d = 0; d < spec->rank; d++) {
        out->shape[d] = shape[d];
        out->live[d] = smoe_axes_live(&spec->dim[d], m);
        out->axes[d] = gather_axes(&out->live[d], mode);
        out->out[d] = minus(&out->live[d], &out->axes[d]);
        smoe_axes co = gather_axes(&out->live[d], SMOE_MODE_COAXIS);
        out->residual[d] = minus(&co, &out->axes[d]);
        out->group[d] = smoe_axes_size(&out->axes[d], m);
        out->ways *= out->group[d];
        out->residual_ways *= smoe_axes_size(&out->residual[d], m);
        if (out->axes[d].n) {
            any = 1;
            out->n_gathered_dims++;
            if (!is_suffix(&out->live[d], &out->axes[d]))
                fallback = 1;
        }
        int64_t shards = smoe_axes_size(&out->live[d], m);
        if (shape[d] % shards != 0)
            out->indivisible |= 1u << d;
        local_in *= ceil_div(shape[d], shards);
        local_out *= ceil_div(shape[d], smoe_axes_size(&out->out[d], m));
        smoe_axes fin = minus(&out->out[d], &out->residual[d]);
        local_final *= ceil_div(shape[d], smoe_axes_size(&fin, m));
    }
    out->status = fallback ? SMOE_GATHER_FALLBACK
                  : any    ? SMOE_GATHER_TAGGED
                           : SMOE_GATHER_NOOP;
    out->uneven = out->status == SMOE_GATHER_TAGGED && out->indivisible != 0;
    out->numel_in = local_in;
    out->numel_out = local_out;
    out->numel_final = local_final;
    out->bytes_in = local_in * dtype_bytes;
    out->bytes_out = local_out * dtype_bytes;
    out->bytes_recv = out->bytes_out - out->bytes_in;
    out->residual_bytes_recv = (local_final - local_out) * dtype_bytes;
}

/* "('fsdp','expert')" */
static const char *axes_text(const smoe_axes *a, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    if (a->n != 1)
        k += (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < a->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s'%s'", i ? "," : "", a->ax[i]);
    if (a->n != 1 && k < n)
        snprintf(buf + k, n - k, ")");
    return buf;
}

/* "(fsdp,expert)" without quotes, for gathered-axis lists */
static const char *axes_plain(const smoe_axes *a, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < a->n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? "," : "", a->ax[i]);
    return buf;
}

int smoe_gather_reason(const smoe_gather *g, smoe_gather_mode mode, const smoe_mesh *m,
                       char *buf, size_t n)
{
    char t1[256], t2[256];
    buf[0] = 0;
    if (g->uneven) {
        for (int d = 0; d < g->rank; d++)
            if (g->indivisible & (1u << d)) {
                int64_t shards = smoe_axes_size(&g->live[d], m);
                snprintf(buf, n,
                         "uneven: layer dim %d (%lld) does not divide into its %lld shards over %s; "
                         "the prefetch all-gather runs in shard_map, which needs even shards",
                         d, (long long)g->shape[d], (long long)shards,
                         axes_text(&g->live[d], t1, sizeof t1));
                return 1;
            }
    }
    if (mode == SMOE_MODE_LEGACY && g->residual_ways > 1) {
        for (int d = 0; d < g->rank; d++)
            if (g->residual[d].n && g->axes[d].n) {
                /* the first residual co-axis and the FSDP axis it follows */
                const char *co = g->residual[d].ax[0], *fs = g->axes[d].ax[0];
                snprintf(buf, n,
                         "legacy: '%s' follows '%s' on layer dim %d and legacy gathers only "
                         "fsdp/fsdp_transpose%s",
                         co, fs, d,
                         g->status == SMOE_GATHER_FALLBACK
                             ? " (an untagged reshard, then a second all-gather over it)"
                             : " (a second, un-prefetched all-gather over it before use)");
                return 1;
            }
    }
    if (g->status == SMOE_GATHER_FALLBACK) {
        for (int d = 0; d < g->rank; d++)
            if (g->axes[d].n && !is_suffix(&g->live[d], &g->axes[d])) {
                snprintf(buf, n, "fallback: gathered axes (%s) are not the minor-most of layer dim %d %s",
                         axes_plain(&g->axes[d], t1, sizeof t1), d,
                         axes_text(&g->live[d], t2, sizeof t2));
                return 1;
            }
    }
    if (g->status == SMOE_GATHER_NOOP) {
        int d0 = -1;
        for (int d = 0; d < g->rank && d0 < 0; d++)
            if (g->live[d].n)
                d0 = d;
        if (d0 < 0)
            snprintf(buf, n, "noop: no axis of size > 1 on any dim (replicated)");
        else
            snprintf(buf, n, "noop: layer dim %d is sharded over %s, no FSDP axis (fsdp, "
                     "fsdp_transpose) of size > 1 on any dim; nothing to gather",
                     d0, axes_text(&g->live[d0], t1, sizeof t1));
        return 1;
    }
    return 0;
}

smoe_status smoe_gather_exec_of(const smoe_gather *g, int keep_expert, const char *name,
                                smoe_gather_exec *out, smoe_err *err)
{
    memset(out, 0, sizeof *out);
    out->rank = g->rank;
    out->indivisible = g->indivisible;
    for (int d = 0; d < g->rank; d++) {
        out->shape[d] = g->shape[d];
        out->live[d] = g->live[d];
        out->prefetch[d] = g->axes[d];
        int keep = keep_expert && d == 0 && g->live[0].n && strcmp(g->live[0].ax[0], "expert") == 0;
        if (keep && smoe_axes_has(&g->axes[0], "expert"))
            return smoe_err_set(err, SMOE_EINVAL, "%s: 'expert' both kept and gathered", name);
        for (int i = keep; i < g->live[d].n; i++)
            if (!smoe_axes_has(&g->axes[d], g->live[d].ax[i]))
                out->at_use[d].ax[out->at_use[d].n++] = g->live[d].ax[i];
        /* the plan's residual is part of what is gathered at use */
        for (int i = 0; i < g->residual[d].n; i++)
            SMOE_ASSERT(smoe_axes_has(&out->at_use[d], g->residual[d].ax[i]));
        if (g->indivisible & (1u << d))
            return smoe_err_set(err, SMOE_EINVAL, "%s: layer dim %d (%lld) does not divide into "
                                "its shards over %d mesh axes", name, d, (long long)g->shape[d],
                                g->live[d].n);
    }
    return SMOE_OK;
}

void smoe_remove_fsdp_from_spec(const smoe_pspec *in, const smoe_mesh *m,
                                smoe_pspec *out)
{
    smoe_pspec r;
    r.rank = in->rank;
    for (int d = 0; d < in->rank; d++) {
        /* fsdp_axes_for_dim on the raw entry: size-1 axes are dropped first
         * so they neither start nor stop the co-axis run */
        smoe_axes live = smoe_axes_live(&in->dim[d], m);
        smoe_axes g = gather_axes(&live, SMOE_MODE_COAXIS);
        r.dim[d] = minus(&live, &g);
    }
    *out = r;
}

smoe_status smoe_gather_check_blocks(const smoe_gather *g, const smoe_mesh *m,
                                     int64_t block, const char *name, smoe_err *err)
{
    int64_t len = g->rank ? g->shape[g->rank - 1] : 1, shards = 1;
    if (g->rank)
        shards = smoe_axes_size(&g->live[g->rank - 1], m);
    if (len % shards == 0 && (len / shards) % block == 0)
        return SMOE_OK;
    char ax[128] = "";
    if (g->rank && g->live[g->rank - 1].n)
        smoe_axes_format(&g->live[g->rank - 1], ax, sizeof ax);
    if (len % shards)
        return smoe_err_set(err, SMOE_EINVAL, "%s: int8 gather: its last dim (%lld) does not "
                            "divide into its %lld shards over %s, so its int8 blocks of %lld "
                            "would straddle shard boundaries", name, (long long)len,
                            (long long)shards, ax, (long long)block);
    return smoe_err_set(err, SMOE_EINVAL, "%s: int8 gather: the shard's last dim (%lld%s%s) "
                        "is not a whole number of int8 blocks of %lld elements; choose a block "
                        "that divides %lld", name, (long long)(len / shards),
                        shards > 1 ? " over " : "", shards > 1 ? ax : "", (long long)block,
                        (long long)(len / shards));
}

void smoe_gather_set_wire(smoe_gather *g, smoe_dtype t, int64_t block)
{
    g->wire = t;
    if (t == SMOE_DT_FP32)
        return;
    g->bytes_in = smoe_dtype_bytes(t, block, g->numel_in);
    g->bytes_out = smoe_dtype_bytes(t, block, g->numel_out);
    g->bytes_recv = g->bytes_out - g->bytes_in;
    g->residual_bytes_recv = smoe_dtype_bytes(t, block, g->numel_final) - g->bytes_out;
}

smoe_status smoe_gather_exec_set_wire(smoe_gather_exec *x, const smoe_gather *g,
                                      const smoe_mesh *m, smoe_dtype t, int64_t block,
                                      const char *name, smoe_err *err)
{
    smoe_status s;
    if (t == SMOE_DT_INT8 && (s = smoe_gather_check_blocks(g, m, block, name, err)))
        return s;
    x->wire = (int)t;
    x->wire_block = t == SMOE_DT_INT8 ? block : 0;
    return SMOE_OK;
}

int smoe_gather_crosses_slices(const smoe_gather *g, const smoe_mesh *m)
{
    for (int d = 0; d < g->rank; d++) {
        const smoe_axes *sets[2] = { &g->axes[d], &g->residual[d] };
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < sets[j]->n; k++) {
                int a = smoe_mesh_find(m, sets[j]->ax[k]);
                if (a >= 0 && m->dcn[a] > 1)
                    return 1;
            }
    }
    return 0;
}

int smoe_weight_routed(const smoe_weight *w)
{
    for (int d = 0; d < w->rank; d++)
        if (w->logical[d] && (strcmp(w->logical[d], "exp") == 0 ||
                              strcmp(w->logical[d], "expert_only") == 0))
            return 1;
    return 0;
}

int smoe_gather_two_level(const smoe_gather *g, const smoe_mesh *m)
{
    smoe_levels lv;
    for (int d = 0; d < g->rank; d++)
        if (smoe_axes_levels(m, &g->axes[d], &lv) || smoe_axes_levels(m, &g->residual[d], &lv))
            return 1;
    return 0;
}
