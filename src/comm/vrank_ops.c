/* The in-process ranks' smoe_comm (comm.h: smoe_comm_vrank_new): the
 * operations over the engine of vrank.c, the world's small collectives
 * (sums, maxima, gathers to rank 0, broadcasts, the status agreements and
 * the consistency check, each as the MPI runtime's), the progress
 * threads, and the world's making and freeing. */
#define _GNU_SOURCE
#include "comm_impl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static vr_rank *R(void *ctx) { return ctx; }
static const smoe_comm_ops vrank_ops;
int vr_is_vrank_ops(const smoe_comm_ops *ops) { return ops == &vrank_ops; }

/* ---- the operations ---- */
static int v_rank(void *ctx) { return R(ctx)->rank; }
static int v_size(void *ctx) { return R(ctx)->w->n; }
static const smoe_mesh *v_mesh(void *ctx) { return &R(ctx)->w->mesh; }
static const int64_t *v_coords(void *ctx) { return R(ctx)->coords; }
static void v_settings(void *ctx, int64_t v[SMOE_COMM_NSETTINGS])
{
    v[SMOE_COMM_SHARED_QUEUE] = R(ctx)->w->shared_queue;
    v[SMOE_COMM_PROGRESS_THREAD] = R(ctx)->w->progress_thread;
}
static void v_set_phase(void *ctx, const char *text)
{
    snprintf(R(ctx)->phase, sizeof R(ctx)->phase, "%s", text);
}
static double v_swap_timeout(void *ctx, double s)
{
    double old = R(ctx)->timeout;
    R(ctx)->timeout = s;
    return old;
}
static void v_abort(void *ctx, smoe_exit code, const char *msg) { vr_abort(R(ctx), code, msg); }
static void v_progress(void *ctx) { vr_progress(R(ctx)); }
static void v_wait_step(void *ctx, smoe_comm_wait *w) { vr_wait_step(R(ctx), w); }
static smoe_status v_drain(void *ctx, smoe_err *err)
{
    (void)err;
    vr_rank *r = R(ctx);
    smoe_comm_wait w = smoe_comm_wait_begin("the gradient reductions");
    for (;;) {
        pthread_mutex_lock(&r->w->lock);
        vr_progress_locked(r);
        int busy = 0;
        for (int q = 0; q < VR_QUEUES; q++)
            busy |= r->q[q].head != NULL;
        pthread_mutex_unlock(&r->w->lock);
        if (!busy)
            return SMOE_OK;
        vr_wait_step(r, &w);
    }
}
static void v_sum_f64(void *ctx, double *v, int n)
{
    vr_world_op(R(ctx), VR_SUM_F64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_max_f64(void *ctx, double *v, int n)
{
    vr_world_op(R(ctx), VR_MAX_F64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_max_i64(void *ctx, int64_t *v, int n)
{
    vr_world_op(R(ctx), VR_MAX_I64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_gather_bytes(void *ctx, const void *send, void *recv, int64_t n)
{
    vr_world_op(R(ctx), VR_TO_ROOT, send, recv, n, 0, "a gather to rank 0");
}
static void v_bcast_from(vr_rank *r, void *buf, int64_t n, int root)
{
    vr_world_op(r, VR_BCAST, NULL, buf, n, root, "a broadcast");
}
static void v_bcast_bytes(void *ctx, void *buf, int64_t n) { v_bcast_from(R(ctx), buf, n, 0); }
static smoe_status v_agree(void *ctx, smoe_status s)
{
    int64_t v = (int64_t)s;
    v_max_i64(ctx, &v, 1);
    return (smoe_status)v;
}
static smoe_status v_gatherv_bytes(void *ctx, const void *send, int64_t n, char **out,
                                   int64_t *lens)
{
    vr_rank *r = R(ctx);
    int root = r->rank == 0;
    v_gather_bytes(ctx, &n, root ? lens : NULL, (int64_t)sizeof n);
    int64_t total = 0;
    for (int i = 0; root && i < r->w->n; i++)
        total += lens[i];
    char *buf = root ? smoe_malloc((size_t)total + 1) : NULL;
    smoe_status s = v_agree(ctx, root && !buf ? SMOE_ENOMEM : SMOE_OK);
    if (!s)
        vr_world_op(r, VR_TO_ROOT, send, buf, n, 0, "a gather to rank 0");
    if (s || !root) {
        smoe_free(buf);
        buf = NULL;
    }
    if (out)
        *out = buf;
    return s;
}
/* as the MPI runtime's (same.c): the worst status, the first failing
 * rank's err */
static smoe_status v_agree_err(void *ctx, smoe_status local, smoe_err *err)
{
    vr_rank *r = R(ctx);
    int64_t v[2] = { local ? -r->rank : -r->w->n, (int64_t)local };
    v_max_i64(ctx, v, 2);
    int who = (int)-v[0];
    if (who >= r->w->n)
        return SMOE_OK;
    smoe_err e;
    memset(&e, 0, sizeof e);
    if (r->rank == who && err)
        e = *err;
    v_bcast_from(r, &e, (int64_t)sizeof e, who);
    if (err) {
        *err = e;
        if (!err->code)
            err->code = (smoe_status)v[1];
    }
    return (smoe_status)v[1];
}
static smoe_status v_check_same(void *ctx, int n, const char *const names[],
                                const char *const digests[], smoe_err *err)
{
    smoe_comm c = { &vrank_ops, ctx };
    return smoe_comm_check_same_by_gather(&c, n, names, digests, err);
}
static smoe_comm_stats *v_stats(void *ctx) { return &R(ctx)->stats; }
static void v_span_hook(void *ctx, smoe_comm_span_fn fn, void *ud)
{
    R(ctx)->span = fn;
    R(ctx)->span_ud = ud;
}

static int v_on_device(void *ctx) { return R(ctx)->dv != NULL; }

static const smoe_comm_ops vrank_ops = {
    .name = "in-process ranks", .rank = v_rank, .size = v_size, .mesh = v_mesh,
    .coords = v_coords, .settings = v_settings, .set_phase = v_set_phase,
    .swap_timeout = v_swap_timeout, .abort = v_abort, .progress = v_progress,
    .wait_step = v_wait_step, .drain = v_drain, .allreduce_sum_f64 = v_sum_f64,
    .allreduce_max_f64 = v_max_f64, .allreduce_max_i64 = v_max_i64,
    .gather_bytes = v_gather_bytes, .gatherv_bytes = v_gatherv_bytes,
    .bcast_bytes = v_bcast_bytes, .agree = v_agree, .agree_err = v_agree_err,
    .check_same = v_check_same, .gather_new = vr_gather_new, .gather_info = vr_gather_info,
    .gather_start = vr_gather_start, .gather_wait = vr_gather_wait,
    .gather_reduce = vr_gather_reduce, .gather_needs_pack = vr_gather_needs_pack,
    .ep = vr_ep_comm, .stats = v_stats, .set_span_hook = v_span_hook, .on_device = v_on_device,
};

/* A rank's progress thread: advances the rank's ops whenever a peer's
 * event (or a millisecond; 100 us while its device work runs) wakes it,
 * as the MPI runtime's polls. */
static void *progress_main(void *arg)
{
    vr_rank *r = arg;
    pthread_mutex_lock(&r->w->lock);
    while (!r->w->stop) {
        vr_progress_locked(r);
        struct timespec ts; /* a device's completions broadcast nothing: poll them */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += r->dv && r->dv->inflight ? 100 * 1000 : 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->w->cond, &r->w->lock, &ts);
    }
    pthread_mutex_unlock(&r->w->lock);
    return NULL;
}

static void world_free(vr_world *w)
{
    w->stop = 1;
    pthread_mutex_lock(&w->lock);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; w->ranks && i < w->n; i++)
        if (w->ranks[i].has_thread)
            pthread_join(w->ranks[i].thread, NULL);
    for (int i = 0; w->ranks && i < w->n; i++) {
        vr_rank *r = &w->ranks[i];
        vr_gathers_free(r);
        for (int q = 0; q < VR_QUEUES; q++)
            while (r->q[q].head) {
                vr_op *op = r->q[q].head;
                r->q[q].head = op->next;
                if (op->dev)
                    vr_dev_release(r, op);
                else
                    smoe_free(op->tmp);
                vr_dev_op_free(r, op);
                smoe_free(op);
            }
        while (r->freelist) {
            vr_op *op = r->freelist;
            r->freelist = op->next;
            vr_dev_op_free(r, op);
            smoe_free(op);
        }
        vr_dev_free(r);
        smoe_free(r->ep.sc);
    }
    vr_groups_free(w);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    smoe_free(w->ranks);
    smoe_free(w);
}

smoe_status smoe_comm_vrank_new(const smoe_mesh *mesh, const smoe_comm_vrank_opts *o,
                                smoe_comm *out, smoe_err *err)
{
    int64_t n = smoe_mesh_devices(mesh);
    if (n < 1 || n > 4096)
        return smoe_err_set(err, SMOE_EINVAL, "the mesh has %lld devices; in-process ranks "
                            "run 1 to 4096", (long long)n);
    vr_world *w = smoe_calloc(1, sizeof *w);
    if (!w || !(w->ranks = smoe_calloc((size_t)n, sizeof *w->ranks))) {
        smoe_free(w);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->mesh = *mesh;
    for (int i = 0; i < mesh->n; i++) {
        snprintf(w->axis_names[i], sizeof w->axis_names[i], "%s", mesh->name[i]);
        w->mesh.name[i] = w->axis_names[i];
    }
    w->n = (int)n;
    w->shared_queue = o && o->shared_queue;
    w->progress_thread = o && o->progress_thread;
    smoe_axes all = { 0, { NULL } };
    for (int i = 0; i < mesh->n; i++)
        all.ax[all.n++] = w->mesh.name[i];
    for (int i = 0; i < w->n; i++) {
        vr_rank *r = &w->ranks[i];
        r->w = w;
        r->rank = i;
        r->timeout = o ? o->timeout_s : 0;
        snprintf(r->phase, sizeof r->phase, "start-up");
        smoe_mesh_coords(&w->mesh, i, r->coords);
        smoe_status s = vr_comm_get(r, &all, VR_WORLD, &r->world_comm, err);
        if (s) {
            world_free(w);
            return s;
        }
        out[i].ops = &vrank_ops;
        out[i].ctx = r;
    }
    for (int i = 0; w->progress_thread && i < w->n; i++) {
        int e = pthread_create(&w->ranks[i].thread, NULL, progress_main, &w->ranks[i]);
        w->ranks[i].has_thread = e == 0;
        if (e) {
            world_free(w);
            return smoe_err_set(err, SMOE_EINTERNAL, "a progress thread could not start (%s)",
                                strerror(e));
        }
    }
    return SMOE_OK;
}

void smoe_comm_vrank_free(smoe_comm *c, int n)
{
    if (!c || n < 1 || !c[0].ctx)
        return;
    world_free(R(c[0].ctx)->w);
    for (int i = 0; i < n; i++)
        c[i].ctx = NULL;
}
