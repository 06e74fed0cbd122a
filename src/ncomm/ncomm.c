/* The communicator over NCCL (ncomm.h): the operations that are the host
 * communicator's, forwarded; NCCL's world and its groups; the reductions
 * in flight, whose flags progress, wait_step and drain set. The gathers
 * and their transposes are in ngather.c.
 *
 * DESIGN
 *   Roles: prefetched gathers, legacy gathers' stages at the wait, and
 *   gradient reductions each run on a transfer stream and NCCL
 *   communicators of their own. Within a role the trainer issues in the
 *   same order on every rank (the schedule's list, the units' order); the
 *   interleaving of roles depends on when memory frees, so one stream for
 *   all would meet NCCL's collectives in different orders on different
 *   ranks and hang.
 *   Groups: one NCCL communicator per role and ordered tuple of mesh axes,
 *   split from the world with color = the coordinates of the other axes and
 *   key = the member's mixed radix over the tuple (the in-process ranks'
 *   and the MPI runtime's numbering), made when a gather first needs it.
 *   Every rank builds the same gathers in the same order, so every rank
 *   splits for the same tuples in the same order, as ncclCommSplit
 *   requires.
 *   Reductions: enqueued on the transfer stream; their events are polled
 *   by the rank's own thread (progress, wait_step, drain), which sets the
 *   flag the trainer waits on, so a flag seen set means the gradient is in
 *   place on the device and the buffers it read are free. */
#define _GNU_SOURCE
#include "ncomm_impl.h"

#include <stdio.h>
#include <string.h>

static nc_rank *R(void *ctx) { return ctx; }

_Noreturn void nc_fail(nc_rank *r, const char *what, const smoe_err *err)
{
    char msg[700];
    snprintf(msg, sizeof msg, "NCCL communicator: %s: %s", what, err ? err->msg : "failed");
    smoe_comm_abort(&r->host, SMOE_EXIT_COMM, msg);
}

/* ---- groups ---- */
smoe_status nc_group_get(nc_rank *r, int role, const smoe_axes *axes, nc_group **out,
                         smoe_err *err)
{
    const smoe_mesh *m = smoe_comm_mesh(&r->host);
    const int64_t *coords = smoe_comm_coords(&r->host);
    for (int i = 0; i < r->ngroups; i++) {
        nc_group *g = &r->groups[i];
        if (g->role == role && smoe_axes_equal(&g->axes, axes)) {
            *out = g;
            return SMOE_OK;
        }
    }
    if (r->ngroups == NC_MAX_GROUPS)
        return smoe_err_set(err, SMOE_EINTERNAL, "too many NCCL communicators");
    int64_t color, member, size;
    smoe_status s = smoe_mesh_group(m, coords, axes, &color, &member, &size, err);
    if (s)
        return s;
    nc_group *g = &r->groups[r->ngroups];
    memset(g, 0, sizeof *g);
    if ((s = smoe_nccl_split(r->world, (int)color, (int)member, &g->c, err)))
        return s;
    g->role = role;
    g->axes.n = axes->n;
    for (int k = 0; k < axes->n; k++) {
        snprintf(g->names[k], sizeof g->names[k], "%s", axes->ax[k]);
        g->axes.ax[k] = g->names[k];
    }
    g->size = smoe_nccl_size(g->c);
    g->member = smoe_nccl_rank(g->c);
    r->ngroups++;
    *out = g;
    return SMOE_OK;
}

/* ---- ordering and reductions in flight ---- */
void nc_after_compute(nc_rank *r, int role)
{
    smoe_err err;
    if (smoe_dev_record(r->d.dev, r->issue, r->d.compute, &err) ||
        smoe_dev_wait(r->d.dev, r->s[role], r->issue, &err))
        nc_fail(r, "ordering a transfer stream", &err);
}

static void *grow(nc_rank *r, void *p, int *cap, size_t elem)
{
    int n = *cap ? 2 * *cap : 16;
    void *q = smoe_realloc(p, (size_t)n * elem);
    if (!q)
        nc_fail(r, "out of memory", NULL);
    *cap = n;
    return q;
}

void nc_red_push(nc_rank *r, _Atomic int *done, _Atomic int *sent)
{
    smoe_err err;
    smoe_dev_event *e = NULL;
    if (r->nidle)
        e = r->idle_ev[--r->nidle];
    else if (smoe_dev_event_new(r->d.dev, &e, &err))
        nc_fail(r, "an event", &err);
    if (smoe_dev_record(r->d.dev, e, r->s[NC_REDUCE], &err))
        nc_fail(r, "recording a reduction", &err);
    if (r->nreds == r->capreds)
        r->reds = grow(r, r->reds, &r->capreds, sizeof *r->reds);
    r->reds[r->nreds++] = (nc_red){ e, done, sent };
}

/* Set the flags of the reductions whose work has run (block: wait for
 * them all); 1 when one was set. Reductions complete in their stream's
 * order, so the first not done ends the poll. */
static int poll_reds(nc_rank *r, int block)
{
    smoe_err err;
    int k = 0;
    for (; k < r->nreds; k++) {
        int done = 0;
        if (block ? smoe_dev_event_sync(r->d.dev, r->reds[k].ev, 0, &err)
                  : smoe_dev_query(r->d.dev, r->reds[k].ev, &done, &err))
            nc_fail(r, "waiting for a reduction", &err);
        if (!block && !done)
            break;
        if (r->reds[k].done)
            *r->reds[k].done = 1;
        if (r->reds[k].sent)
            *r->reds[k].sent = 1;
        if (r->nidle == r->capidle)
            r->idle_ev = grow(r, r->idle_ev, &r->capidle, sizeof *r->idle_ev);
        r->idle_ev[r->nidle++] = r->reds[k].ev;
    }
    if (k) /* reds is NULL until the first reduction */
        memmove(r->reds, r->reds + k, sizeof *r->reds * (size_t)(r->nreds - k));
    r->nreds -= k;
    return k > 0;
}

smoe_status nc_scratch_reserve(nc_rank *r, int role, size_t bytes, smoe_err *err)
{
    if (bytes <= r->scratch_bytes[role])
        return SMOE_OK;
    smoe_status s = r->scratch[role] ? smoe_dev_free(r->d.dev, r->scratch[role], err) : SMOE_OK;
    r->scratch[role] = NULL;
    r->scratch_bytes[role] = 0;
    if (!s && !(s = smoe_dev_alloc(r->d.dev, bytes, &r->scratch[role], err)))
        r->scratch_bytes[role] = bytes;
    return s;
}

/* ---- the operations: the host's, but for the gathers and the waits ---- */
#define HOST(r) (&(r)->host)
static int n_rank(void *ctx) { return smoe_comm_rank(HOST(R(ctx))); }
static int n_size(void *ctx) { return smoe_comm_size(HOST(R(ctx))); }
static const smoe_mesh *n_mesh(void *ctx) { return smoe_comm_mesh(HOST(R(ctx))); }
static const int64_t *n_coords(void *ctx) { return smoe_comm_coords(HOST(R(ctx))); }
static void n_settings(void *ctx, int64_t v[SMOE_COMM_NSETTINGS])
{
    smoe_comm_settings(HOST(R(ctx)), v);
}
static void n_set_phase(void *ctx, const char *t) { smoe_comm_set_phase(HOST(R(ctx)), "%s", t); }
static double n_swap_timeout(void *ctx, double s) { return smoe_comm_swap_timeout(HOST(R(ctx)), s); }
static void n_abort(void *ctx, smoe_exit code, const char *msg)
{
    smoe_comm_abort(HOST(R(ctx)), code, msg);
}
static void n_progress(void *ctx)
{
    poll_reds(R(ctx), 0);
    smoe_comm_progress(HOST(R(ctx)));
}
static void n_wait_step(void *ctx, smoe_comm_wait *w)
{
    if (!poll_reds(R(ctx), 0))
        smoe_comm_wait_step(HOST(R(ctx)), w);
}
static smoe_status n_drain(void *ctx, smoe_err *err)
{
    poll_reds(R(ctx), 1);
    return smoe_comm_drain(HOST(R(ctx)), err);
}
static void n_sum_f64(void *ctx, double *v, int n) { smoe_comm_allreduce_sum_f64(HOST(R(ctx)), v, n); }
static void n_max_f64(void *ctx, double *v, int n) { smoe_comm_allreduce_max_f64(HOST(R(ctx)), v, n); }
static void n_max_i64(void *ctx, int64_t *v, int n) { smoe_comm_allreduce_max_i64(HOST(R(ctx)), v, n); }
static void n_gather_bytes(void *ctx, const void *s, void *r, int64_t n)
{
    smoe_comm_gather_bytes(HOST(R(ctx)), s, r, n);
}
static smoe_status n_gatherv_bytes(void *ctx, const void *s, int64_t n, char **out, int64_t *lens)
{
    return smoe_comm_gatherv_bytes(HOST(R(ctx)), s, n, out, lens);
}
static void n_bcast_bytes(void *ctx, void *b, int64_t n) { smoe_comm_bcast_bytes(HOST(R(ctx)), b, n); }
static smoe_status n_agree(void *ctx, smoe_status s) { return smoe_comm_agree(HOST(R(ctx)), s); }
static smoe_status n_agree_err(void *ctx, smoe_status s, smoe_err *err)
{
    return smoe_comm_agree_err(HOST(R(ctx)), s, err);
}
static smoe_status n_check_same(void *ctx, int n, const char *const names[],
                                const char *const digests[], smoe_err *err)
{
    return smoe_comm_check_same(HOST(R(ctx)), n, names, digests, err);
}
static smoe_ep_comm n_ep(void *ctx) { return smoe_comm_ep(HOST(R(ctx))); }
static smoe_comm_stats *n_stats(void *ctx) { return &R(ctx)->stats; }
static void n_span_hook(void *ctx, smoe_comm_span_fn fn, void *ud)
{
    smoe_comm_set_span_hook(HOST(R(ctx)), fn, ud);
}
static int n_on_device(void *ctx)
{
    (void)ctx;
    return 1;
}

static const smoe_comm_ops nccl_ops = {
    .name = "NCCL",
    .rank = n_rank, .size = n_size, .mesh = n_mesh, .coords = n_coords,
    .settings = n_settings, .set_phase = n_set_phase, .swap_timeout = n_swap_timeout,
    .abort = n_abort, .progress = n_progress, .wait_step = n_wait_step, .drain = n_drain,
    .allreduce_sum_f64 = n_sum_f64, .allreduce_max_f64 = n_max_f64,
    .allreduce_max_i64 = n_max_i64, .gather_bytes = n_gather_bytes,
    .gatherv_bytes = n_gatherv_bytes, .bcast_bytes = n_bcast_bytes, .agree = n_agree,
    .agree_err = n_agree_err, .check_same = n_check_same, .gather_new = nc_gather_new,
    .gather_info = nc_gather_info, .gather_start = nc_gather_start,
    .gather_wait = nc_gather_wait, .gather_reduce = nc_gather_reduce,
    .gather_needs_pack = nc_gather_needs_pack, .ep = n_ep, .stats = n_stats,
    .set_span_hook = n_span_hook, .on_device = n_on_device,
};

/* ---- making and freeing ---- */
static smoe_status join_world(nc_rank *r, smoe_err *err)
{
    unsigned char id[SMOE_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    int rank = smoe_comm_rank(&r->host);
    smoe_status s = rank == 0 ? smoe_nccl_unique_id(id, err) : SMOE_OK;
    if ((s = smoe_comm_agree_err(&r->host, s, err)))
        return s;
    smoe_comm_bcast_bytes(&r->host, id, sizeof id);
    s = smoe_nccl_new(id, smoe_comm_size(&r->host), rank, &r->world, err);
    return smoe_comm_agree_err(&r->host, s, err);
}

smoe_status smoe_comm_nccl_new(const smoe_comm *host, const smoe_comm_device *d,
                               smoe_ncomm_stream_fn handle, smoe_comm *out, smoe_err *err)
{
    out->ops = NULL;
    out->ctx = NULL;
    if (!host || !host->ops || !d || !d->dev || !d->compute || !d->xfer || !d->residual ||
        !d->reduce || d->xfer == d->residual || d->xfer == d->reduce ||
        d->residual == d->reduce || !d->ops || !d->xq || !d->cq || !handle)
        return smoe_err_set(err, SMOE_EINVAL, "an NCCL communicator needs a host communicator, "
                            "the device, its compute stream and three distinct transfer "
                            "streams, a kernel queue on compute and on xfer, and NCCL's "
                            "stream handles");
    nc_rank *r = smoe_calloc(1, sizeof *r);
    if (!r)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    r->host = *host;
    r->d = *d;
    r->s[NC_GATHER] = d->xfer;
    r->s[NC_RESIDUAL] = d->residual;
    r->s[NC_REDUCE] = d->reduce;
    for (int k = 0; k < NC_ROLES; k++)
        r->ns[k] = handle(r->s[k]);
    smoe_status s = smoe_dev_event_new(d->dev, &r->issue, err);
    if (!s)
        s = join_world(r, err);
    out->ops = &nccl_ops;
    out->ctx = r;
    if (s)
        smoe_comm_nccl_free(out);
    return s;
}

void smoe_comm_nccl_free(smoe_comm *c)
{
    if (!c || !c->ctx)
        return;
    nc_rank *r = c->ctx;
    smoe_err err;
    if (smoe_dev_sync(r->d.dev, 0, &err))
        fprintf(stderr, "smoe: the NCCL communicator's device: %s\n", err.msg);
    nc_gathers_free(r);
    for (int i = 0; i < r->ngroups; i++)
        smoe_nccl_free(r->groups[i].c);
    smoe_nccl_free(r->world);
    while (r->flights) {
        nc_flight *f = r->flights;
        r->flights = f->next;
        if (f->stage && smoe_dev_free(r->d.dev, f->stage, &err))
            fprintf(stderr, "smoe: %s\n", err.msg);
        smoe_dev_event_free(r->d.dev, f->ev);
        smoe_free(f);
    }
    for (int i = 0; i < r->nreds; i++)
        smoe_dev_event_free(r->d.dev, r->reds[i].ev);
    for (int i = 0; i < r->nidle; i++)
        smoe_dev_event_free(r->d.dev, r->idle_ev[i]);
    if (r->issue)
        smoe_dev_event_free(r->d.dev, r->issue);
    for (int k = 0; k < 2; k++)
        if (r->scratch[k] && smoe_dev_free(r->d.dev, r->scratch[k], &err))
            fprintf(stderr, "smoe: %s\n", err.msg);
    smoe_free(r->reds);
    smoe_free(r->idle_ev);
    smoe_free(r);
    c->ctx = NULL;
}
