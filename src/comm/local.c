/* The single-rank communicator (comm.h: smoe_comm_local_new): the trainer
 * on one rank without MPI. On a mesh of one device nothing is ever sent:
 * a weight's gathered buffer is its shard, a gradient's reduce-scatter and
 * all-reduce leave it as it is, the expert all-to-all is a copy
 * (smoe_ep_comm_self), every collective over the world is the identity,
 * and every op completes when it is issued. These are the same copies the
 * MPI runtime makes on a one-rank mesh (where it builds no communicator
 * for a weight), so a run is bitwise the same. One thread. */
#define _GNU_SOURCE
#include "smoe/comm.h"

#include "smoe/dtype.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct smoe_comm_gather {
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    int64_t numel;
    smoe_dtype wire;        /* what the gather would move (dtype.h) */
    int64_t wblock;
    smoe_comm_gather *next;
};

typedef struct local {
    smoe_mesh mesh;
    int64_t coords[SMOE_MAX_AXES];
    smoe_comm_stats stats;
    double timeout;
    char phase[256];
    smoe_comm_gather *gathers;  /* every gather built, freed with the comm */
    smoe_comm_copy_fn copy;     /* the copies' maker: host_copy, or a device's */
    void *copy_ud;
} local;

static local *L(void *ctx) { return ctx; }

static void host_copy(void *ud, void *dst, const void *src, size_t bytes)
{
    (void)ud;
    memcpy(dst, src, bytes);
}

static int l_rank(void *ctx) { (void)ctx; return 0; }
static int l_size(void *ctx) { (void)ctx; return 1; }
static const smoe_mesh *l_mesh(void *ctx) { return &L(ctx)->mesh; }
static const int64_t *l_coords(void *ctx) { return L(ctx)->coords; }
/* what the MPI runtime reports by default (no shared queue, no thread) */
static void l_settings(void *ctx, int64_t v[SMOE_COMM_NSETTINGS])
{
    (void)ctx;
    memset(v, 0, sizeof *v * SMOE_COMM_NSETTINGS);
}
static void l_set_phase(void *ctx, const char *text)
{
    snprintf(L(ctx)->phase, sizeof L(ctx)->phase, "%s", text);
}
static double l_swap_timeout(void *ctx, double s)
{
    double old = L(ctx)->timeout;
    L(ctx)->timeout = s;
    return old;
}
static void l_abort(void *ctx, smoe_exit code, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "smoe: rank 0: %s\n", msg);
    fflush(stderr);
    fflush(stdout);
    _exit(code ? (int)code : 1);
}
static void l_progress(void *ctx) { (void)ctx; }

/* Nothing is ever in flight, so a wait that is still waiting waits for
 * something that cannot happen: abort after the timeout, as the MPI
 * runtime does for a dead peer. */
static void l_wait_step(void *ctx, smoe_comm_wait *w)
{
    local *c = L(ctx);
    if (++w->spins > 200)
        usleep(50);
    if (c->timeout > 0 && smoe_now() - w->t0 > c->timeout) {
        char msg[512];
        snprintf(msg, sizeof msg, "waited %.0f s for %s during %s, which nothing on one rank "
                 "can complete", c->timeout, w->what, c->phase);
        l_abort(ctx, SMOE_EXIT_TIMEOUT, msg);
    }
}
static smoe_status l_drain(void *ctx, smoe_err *err)
{
    (void)ctx, (void)err;
    return SMOE_OK;
}

/* ---- collectives over a world of one ---- */
static void l_f64(void *ctx, double *v, int n) { (void)ctx, (void)v, (void)n; }
static void l_i64(void *ctx, int64_t *v, int n) { (void)ctx, (void)v, (void)n; }
static void l_gather_bytes(void *ctx, const void *send, void *recv, int64_t n)
{
    (void)ctx;
    if (n > 0 && send != recv)
        memmove(recv, send, (size_t)n);
}
static smoe_status l_gatherv_bytes(void *ctx, const void *send, int64_t n, char **out,
                                   int64_t *lens)
{
    (void)ctx;
    *out = smoe_malloc((size_t)(n > 0 ? n : 1));
    if (!*out)
        return SMOE_ENOMEM;
    if (n > 0)
        memcpy(*out, send, (size_t)n);
    lens[0] = n;
    return SMOE_OK;
}
static void l_bcast_bytes(void *ctx, void *buf, int64_t n) { (void)ctx, (void)buf, (void)n; }
static smoe_status l_agree(void *ctx, smoe_status s)
{
    (void)ctx;
    return s;
}
static smoe_status l_agree_err(void *ctx, smoe_status s, smoe_err *err)
{
    (void)ctx, (void)err;
    return s;
}
static smoe_status l_check_same(void *ctx, int n, const char *const names[],
                                const char *const digests[], smoe_err *err)
{
    (void)ctx, (void)n, (void)names, (void)digests, (void)err;
    return SMOE_OK;
}

/* ---- FSDP weight gathers: the shard is the whole weight ---- */
static smoe_status l_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                                smoe_comm_gather **out, smoe_err *err)
{
    smoe_comm_gather *g = smoe_calloc(1, sizeof *g);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    g->rank = x->rank;
    g->numel = 1;
    for (int d = 0; d < x->rank; d++) {
        g->shape[d] = x->shape[d];
        g->numel *= x->shape[d];
    }
    /* the wire: the shard is the whole weight, so the gathered buffer is
     * what it becomes through the wire (as every rank's shard does in the
     * MPI runtime's wgather.c); reductions: none, so fp32 either way */
    g->wire = (smoe_dtype)x->wire;
    g->wblock = x->wire_block;
    smoe_status s = smoe_comm_wire_check(x, g->rank ? g->shape[g->rank - 1] : 0, name, err);
    if (!s && L(ctx)->copy != host_copy && g->wire != SMOE_DT_FP32)
        s = smoe_err_set(err, SMOE_EINVAL,
                         "%s: gathers in %s on a device's memory are not supported yet "
                         "(fp32 only)", name, smoe_dtype_name(g->wire));
    if (s) {
        smoe_free(g);
        return s;
    }
    g->next = L(ctx)->gathers;
    L(ctx)->gathers = g;
    *out = g;
    return SMOE_OK;
}
static void l_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info)
{
    memset(info, 0, sizeof *info);
    info->shard_numel = info->gathered_numel = g->numel;
    for (int d = 0; d < g->rank; d++)
        info->shard_shape[d] = info->gathered_shape[d] = g->shape[d];
    info->rank = g->rank;
}
static void l_gather_start(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                           smoe_comm_ticket *t)
{
    local *c = L(ctx);
    if (buf != shard)
        c->copy(c->copy_ud, buf, shard, sizeof *buf * (size_t)g->numel);
    if (g->wire != SMOE_DT_FP32 && buf != shard)
        smoe_dtype_round_trip(g->wire, g->wblock, buf, g->numel);
    t->pending = 0;
    t->res_pending = 0;
}
static void l_gather_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                          double *wait_s)
{
    (void)ctx, (void)g, (void)buf, (void)t;
    if (wait_s)
        *wait_s = 0;
}
static void l_gather_reduce(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                            float *shard_grad, _Atomic int *done, _Atomic int *sent)
{
    (void)scratch;
    local *c = L(ctx);
    if (shard_grad != full)
        c->copy(c->copy_ud, shard_grad, full, sizeof *full * (size_t)g->numel);
    if (sent)
        *sent = 1;
    if (done)
        *done = 1;
}
static int l_needs_pack(const smoe_comm_gather *g)
{
    (void)g;
    return 0;
}
static smoe_ep_comm l_ep(void *ctx)
{
    (void)ctx;
    return smoe_ep_comm_self();
}
static smoe_comm_stats *l_stats(void *ctx) { return &L(ctx)->stats; }
static void l_span_hook(void *ctx, smoe_comm_span_fn fn, void *ud)
{
    (void)ctx, (void)fn, (void)ud; /* no communication, no spans */
}

static int l_on_device(void *ctx)
{
    (void)ctx; /* a device's copies go through the hook, in host order */
    return 0;
}

static const smoe_comm_ops local_ops = {
    .name = "single rank, no MPI", .rank = l_rank, .size = l_size, .mesh = l_mesh,
    .coords = l_coords, .settings = l_settings, .set_phase = l_set_phase, .swap_timeout = l_swap_timeout, .abort = l_abort,
    .progress = l_progress, .wait_step = l_wait_step, .drain = l_drain,
    .allreduce_sum_f64 = l_f64, .allreduce_max_f64 = l_f64, .allreduce_max_i64 = l_i64,
    .gather_bytes = l_gather_bytes, .gatherv_bytes = l_gatherv_bytes,
    .bcast_bytes = l_bcast_bytes, .agree = l_agree, .agree_err = l_agree_err,
    .check_same = l_check_same, .gather_new = l_gather_new, .gather_info = l_gather_info,
    .gather_start = l_gather_start, .gather_wait = l_gather_wait,
    .gather_reduce = l_gather_reduce, .gather_needs_pack = l_needs_pack, .ep = l_ep,
    .stats = l_stats, .set_span_hook = l_span_hook, .on_device = l_on_device,
};

smoe_status smoe_comm_local_new(const smoe_mesh *mesh, double timeout_s, smoe_comm *out,
                                smoe_err *err)
{
    out->ops = NULL;
    out->ctx = NULL;
    int64_t devices = 1;
    for (int i = 0; i < mesh->n; i++)
        devices *= mesh->size[i];
    if (devices != 1)
        return smoe_err_set(err, SMOE_EINVAL,
                            "the mesh has %lld devices; the single-rank communicator (no MPI) "
                            "runs one", (long long)devices);
    local *c = smoe_calloc(1, sizeof *c);
    if (!c)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    c->mesh = *mesh;
    c->timeout = timeout_s;
    c->copy = host_copy;
    snprintf(c->phase, sizeof c->phase, "start-up");
    out->ops = &local_ops;
    out->ctx = c;
    return SMOE_OK;
}

void smoe_comm_local_free(smoe_comm *c)
{
    if (!c || !c->ctx)
        return;
    local *l = c->ctx;
    while (l->gathers) {
        smoe_comm_gather *g = l->gathers;
        l->gathers = g->next;
        smoe_free(g);
    }
    smoe_free(l);
    c->ctx = NULL;
}

void smoe_comm_local_set_copy(smoe_comm *c, smoe_comm_copy_fn fn, void *ud)
{
    if (c->ops != &local_ops)
        return;
    local *l = L(c->ctx);
    l->copy = fn ? fn : host_copy;
    l->copy_ud = fn ? ud : NULL;
}

int smoe_comm_is_local(const smoe_comm *c) { return c->ops == &local_ops; }
