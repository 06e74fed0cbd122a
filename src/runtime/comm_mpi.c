/* The runtime behind the smoe_comm interface (comm.h): each operation is
 * the runtime.h call of the same name on the smoe_rt in ctx, and a
 * smoe_comm_gather is the runtime's smoe_wgather. No logic of its own. */
#include "rt_impl.h"

static smoe_rt *R(void *ctx) { return ctx; }
static smoe_wgather *W(smoe_comm_gather *g) { return (smoe_wgather *)(void *)g; }
static const smoe_wgather *CW(const smoe_comm_gather *g)
{
    return (const smoe_wgather *)(const void *)g;
}

static int c_rank(void *ctx) { return smoe_rt_rank(R(ctx)); }
static int c_size(void *ctx) { return smoe_rt_size(R(ctx)); }
static const smoe_mesh *c_mesh(void *ctx) { return smoe_rt_mesh(R(ctx)); }
static const int64_t *c_coords(void *ctx) { return smoe_rt_coords(R(ctx)); }
static void c_settings(void *ctx, int64_t v[SMOE_COMM_NSETTINGS])
{
    smoe_rt_opts o = smoe_rt_get_opts(R(ctx));
    v[SMOE_COMM_SHARED_QUEUE] = o.shared_queue;
    v[SMOE_COMM_PROGRESS_THREAD] = o.progress_thread;
}
static void c_set_phase(void *ctx, const char *text) { smoe_rt_set_phase(R(ctx), "%s", text); }
static double c_swap_timeout(void *ctx, double s) { return smoe_rt_swap_timeout(R(ctx), s); }
static void c_abort(void *ctx, smoe_exit code, const char *msg)
{
    smoe_rt_abort(R(ctx), code, msg);
}
static void c_progress(void *ctx) { smoe_rt_progress(R(ctx)); }
static void c_wait_step(void *ctx, smoe_comm_wait *w) { smoe_rt_wait_step(R(ctx), w); }
static smoe_status c_drain(void *ctx, smoe_err *err) { return smoe_rt_drain(R(ctx), err); }
static void c_sum_f64(void *ctx, double *v, int n) { smoe_rt_allreduce_sum_f64(R(ctx), v, n); }
static void c_max_f64(void *ctx, double *v, int n) { smoe_rt_allreduce_max_f64(R(ctx), v, n); }
static void c_max_i64(void *ctx, int64_t *v, int n) { smoe_rt_allreduce_max_i64(R(ctx), v, n); }
static void c_gather_bytes(void *ctx, const void *send, void *recv, int64_t n)
{
    smoe_rt_gather_bytes(R(ctx), send, recv, n);
}
static smoe_status c_gatherv_bytes(void *ctx, const void *send, int64_t n, char **out,
                                   int64_t *lens)
{
    return smoe_rt_gatherv_bytes(R(ctx), send, n, out, lens);
}
static void c_bcast_bytes(void *ctx, void *buf, int64_t n) { smoe_rt_bcast_bytes(R(ctx), buf, n); }
static smoe_status c_agree(void *ctx, smoe_status s) { return smoe_rt_agree(R(ctx), s); }
static smoe_status c_agree_err(void *ctx, smoe_status s, smoe_err *err)
{
    return smoe_rt_agree_err(R(ctx), s, err);
}
static smoe_status c_check_same(void *ctx, int n, const char *const names[],
                                const char *const digests[], smoe_err *err)
{
    return smoe_rt_check_same(R(ctx), n, names, digests, err);
}
static smoe_status c_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                                smoe_comm_gather **out, smoe_err *err)
{
    smoe_wgather *g = NULL;
    smoe_status s = smoe_rt_wgather_new(R(ctx), x, name, &g, err);
    *out = (smoe_comm_gather *)(void *)g;
    return s;
}
static void c_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info)
{
    smoe_rt_wgather_info(CW(g), info);
}
static void c_gather_start(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                           smoe_comm_ticket *t)
{
    smoe_rt_wgather_start(R(ctx), W(g), shard, buf, t);
}
static void c_gather_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                          double *wait_s)
{
    smoe_rt_wgather_wait(R(ctx), W(g), buf, t, wait_s, NULL);
}
static void c_gather_reduce(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                            float *shard_grad, _Atomic int *done, _Atomic int *sent)
{
    smoe_rt_wgather_reduce(R(ctx), W(g), full, scratch, shard_grad, done, sent);
}
static int c_needs_pack(const smoe_comm_gather *g) { return smoe_rt_wgather_needs_pack(CW(g)); }
static smoe_ep_comm c_ep(void *ctx) { return smoe_rt_ep_comm(R(ctx)); }
static smoe_comm_stats *c_stats(void *ctx) { return smoe_rt_stats_get(R(ctx)); }
static void c_span_hook(void *ctx, smoe_comm_span_fn fn, void *ud)
{
    smoe_rt_set_span_hook(R(ctx), fn, ud);
}

static int c_on_device(void *ctx)
{
    (void)ctx;
    return 0;
}

static const smoe_comm_ops mpi_ops = {
    .name = "MPI", .rank = c_rank, .size = c_size, .mesh = c_mesh, .coords = c_coords,
    .settings = c_settings, .set_phase = c_set_phase, .swap_timeout = c_swap_timeout, .abort = c_abort, .progress = c_progress,
    .wait_step = c_wait_step, .drain = c_drain, .allreduce_sum_f64 = c_sum_f64,
    .allreduce_max_f64 = c_max_f64, .allreduce_max_i64 = c_max_i64,
    .gather_bytes = c_gather_bytes, .gatherv_bytes = c_gatherv_bytes,
    .bcast_bytes = c_bcast_bytes, .agree = c_agree, .agree_err = c_agree_err,
    .check_same = c_check_same, .gather_new = c_gather_new, .gather_info = c_gather_info,
    .gather_start = c_gather_start, .gather_wait = c_gather_wait,
    .gather_reduce = c_gather_reduce, .gather_needs_pack = c_needs_pack, .ep = c_ep,
    .stats = c_stats, .set_span_hook = c_span_hook, .on_device = c_on_device,
};

smoe_comm smoe_rt_comm(smoe_rt *rt)
{
    smoe_comm c = { &mpi_ops, rt };
    return c;
}
