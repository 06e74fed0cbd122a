/* The runtime of runtime.h for one rank without MPI: a program linked with
 * smoe_runtime_local instead of smoe_runtime (the MPI one) runs the same
 * code as a single rank, never calling MPI_Init. On a mesh of one device
 * nothing is ever sent: a weight's gathered buffer is its shard, a
 * gradient's reduce-scatter and all-reduce leave it as it is, the expert
 * all-to-all is a copy (smoe_ep_comm_self), every collective over the
 * world is the identity, and every op completes when it is issued. These
 * are the same copies the MPI runtime makes on a one-rank mesh (where it
 * builds no communicator for a weight), so a run is bitwise the same.
 * Thread-safety: one application thread; there is no progress thread
 * (smoe_rt_opts.progress_thread is accepted and has nothing to do). */
#define _GNU_SOURCE
#include "smoe/runtime.h"

#include "smoe/dtype.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct smoe_wgather {
    char name[160];
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    int64_t numel;
    smoe_dtype wire;        /* what the gather would move (dtype.h) */
    int64_t wblock;
    smoe_wgather *next;
};

struct smoe_rt {
    smoe_mesh mesh;
    int64_t coords[SMOE_MAX_AXES];
    smoe_rt_opts opts;
    smoe_rt_stats stats;
    double timeout;
    char phase[256];
    smoe_wgather *wg;       /* every gather built, freed at finalize */
};

smoe_status smoe_rt_init(int *argc, char ***argv, smoe_rt **out, smoe_err *err)
{
    (void)argc;
    (void)argv;
    smoe_rt *rt = smoe_calloc(1, sizeof *rt);
    if (!rt)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    rt->timeout = 20;
    snprintf(rt->phase, sizeof rt->phase, "start-up");
    *out = rt;
    return SMOE_OK;
}

smoe_status smoe_rt_set_mesh(smoe_rt *rt, const smoe_mesh *mesh, const smoe_rt_opts *opts,
                             smoe_err *err)
{
    int64_t devices = 1;
    for (int i = 0; i < mesh->n; i++)
        devices *= mesh->size[i];
    if (devices != 1)
        return smoe_err_set(err, SMOE_EINVAL,
                            "the mesh has %lld devices; this program runs as one rank (built "
                            "with the single-rank runtime, without MPI)",
                            (long long)devices);
    rt->mesh = *mesh;
    memset(rt->coords, 0, sizeof rt->coords);
    if (opts)
        rt->opts = *opts;
    return SMOE_OK;
}

void smoe_rt_finalize(smoe_rt *rt)
{
    if (!rt)
        return;
    while (rt->wg) {
        smoe_wgather *g = rt->wg;
        rt->wg = g->next;
        smoe_free(g);
    }
    smoe_free(rt);
}

_Noreturn void smoe_rt_abort(smoe_rt *rt, smoe_exit code, const char *msg)
{
    (void)rt;
    fprintf(stderr, "smoe: rank 0: %s\n", msg);
    fflush(stderr);
    fflush(stdout);
    _exit(code ? (int)code : 1);
}

int smoe_rt_rank(const smoe_rt *rt) { (void)rt; return 0; }
int smoe_rt_size(const smoe_rt *rt) { (void)rt; return 1; }
const smoe_mesh *smoe_rt_mesh(const smoe_rt *rt) { return &rt->mesh; }
const int64_t *smoe_rt_coords(const smoe_rt *rt) { return rt->coords; }
const char *smoe_rt_library(const smoe_rt *rt) { (void)rt; return "single rank, no MPI"; }
void smoe_rt_progress(smoe_rt *rt) { (void)rt; }

smoe_rt_wait smoe_rt_wait_begin(const char *what)
{
    smoe_rt_wait w = { smoe_now(), 0, what };
    return w;
}

/* Nothing is ever in flight, so a wait that is still waiting waits for
 * something that cannot happen: abort after the timeout, as the MPI
 * runtime does for a dead peer. */
void smoe_rt_wait_step(smoe_rt *rt, smoe_rt_wait *w)
{
    if (++w->spins > 200)
        usleep(50);
    if (rt->timeout > 0 && smoe_now() - w->t0 > rt->timeout) {
        char msg[512];
        snprintf(msg, sizeof msg, "waited %.0f s for %s during %s, which nothing on one rank "
                 "can complete", rt->timeout, w->what, rt->phase);
        smoe_rt_abort(rt, SMOE_EXIT_TIMEOUT, msg);
    }
}

void smoe_rt_set_timeout(smoe_rt *rt, double seconds) { rt->timeout = seconds; }

void smoe_rt_set_phase(smoe_rt *rt, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt->phase, sizeof rt->phase, fmt, ap);
    va_end(ap);
}

smoe_status smoe_rt_drain(smoe_rt *rt, smoe_err *err)
{
    (void)rt;
    (void)err;
    return SMOE_OK;
}

/* ---- collectives over a world of one ---- */
void smoe_rt_allreduce_sum_f64(smoe_rt *rt, double *v, int n)
{
    (void)rt, (void)v, (void)n;
}
void smoe_rt_allreduce_max_f64(smoe_rt *rt, double *v, int n)
{
    (void)rt, (void)v, (void)n;
}
void smoe_rt_allreduce_max_i64(smoe_rt *rt, int64_t *v, int n)
{
    (void)rt, (void)v, (void)n;
}
void smoe_rt_barrier(smoe_rt *rt) { (void)rt; }

void smoe_rt_gather_bytes(smoe_rt *rt, const void *send, void *recv, int64_t n)
{
    (void)rt;
    if (n > 0 && send != recv)
        memmove(recv, send, (size_t)n);
}

smoe_status smoe_rt_gatherv_bytes(smoe_rt *rt, const void *send, int64_t n, char **out,
                                  int64_t *lens)
{
    (void)rt;
    *out = smoe_malloc((size_t)(n > 0 ? n : 1));
    if (!*out)
        return SMOE_ENOMEM;
    if (n > 0)
        memcpy(*out, send, (size_t)n);
    lens[0] = n;
    return SMOE_OK;
}

void smoe_rt_bcast_bytes(smoe_rt *rt, void *buf, int64_t n)
{
    (void)rt, (void)buf, (void)n;
}

smoe_status smoe_rt_agree(smoe_rt *rt, smoe_status local)
{
    (void)rt;
    return local;
}

smoe_status smoe_rt_agree_err(smoe_rt *rt, smoe_status local, smoe_err *err)
{
    (void)rt, (void)err;
    return local;
}

smoe_status smoe_rt_check_same(smoe_rt *rt, int n, const char *const names[],
                               const char *const digests[], smoe_err *err)
{
    (void)rt, (void)n, (void)names, (void)digests, (void)err;
    return SMOE_OK;
}

smoe_rt_opts smoe_rt_get_opts(const smoe_rt *rt) { return rt->opts; }

/* ---- FSDP weight gathers: the shard is the whole weight ---- */
smoe_status smoe_rt_wgather_new(smoe_rt *rt, const smoe_gather_exec *plan, const char *name,
                                smoe_wgather **out, smoe_err *err)
{
    smoe_wgather *g = smoe_calloc(1, sizeof *g);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    snprintf(g->name, sizeof g->name, "%s", name);
    g->rank = plan->rank;
    g->numel = 1;
    for (int d = 0; d < plan->rank; d++) {
        g->shape[d] = plan->shape[d];
        g->numel *= plan->shape[d];
    }
    /* the wire: the shard is the whole weight, so the gathered buffer is
     * what it becomes through the wire (as every rank's shard does in wgather.c) */
    g->wire = (smoe_dtype)plan->wire;
    g->wblock = plan->wire_block;
    int64_t rec = smoe_dtype_rec_elems(g->wire, g->wblock);
    if ((g->wire != SMOE_DT_FP32 && g->wire != SMOE_DT_BF16 && g->wire != SMOE_DT_INT8) ||
        (g->wire == SMOE_DT_INT8 &&
         (g->wblock < SMOE_INT8_BLOCK_MIN || g->wblock > SMOE_INT8_BLOCK_MAX)) ||
        (g->wire != SMOE_DT_FP32 && (g->rank == 0 || g->shape[g->rank - 1] % rec))) {
        smoe_status s = smoe_err_set(err, SMOE_EINVAL, "%s: the last dim is not a whole number "
                                     "of %s records of %lld elements", name,
                                     smoe_dtype_name(g->wire), (long long)rec);
        smoe_free(g);
        return s;
    }
    g->next = rt->wg;
    rt->wg = g;
    *out = g;
    return SMOE_OK;
}

void smoe_rt_wgather_info(const smoe_wgather *g, smoe_wgather_info *info)
{
    memset(info, 0, sizeof *info);
    info->shard_numel = info->gathered_numel = g->numel;
    for (int d = 0; d < g->rank; d++)
        info->shard_shape[d] = info->gathered_shape[d] = g->shape[d];
    info->rank = g->rank;
}

void smoe_rt_wgather_start(smoe_rt *rt, smoe_wgather *g, const float *shard, float *buf,
                           smoe_rt_ticket *t)
{
    (void)rt;
    if (buf != shard)
        memcpy(buf, shard, sizeof *buf * (size_t)g->numel);
    if (g->wire != SMOE_DT_FP32 && buf != shard)
        smoe_dtype_round_trip(g->wire, g->wblock, buf, g->numel);
    t->pending = 0;
    t->res_pending = 0;
}

void smoe_rt_wgather_wait(smoe_rt *rt, smoe_wgather *g, float *buf, smoe_rt_ticket *t,
                          double *wait_s, smoe_err *err)
{
    (void)rt, (void)g, (void)buf, (void)t, (void)err;
    if (wait_s)
        *wait_s = 0;
}

void smoe_rt_wgather_reduce(smoe_rt *rt, smoe_wgather *g, float *full, float *scratch,
                            float *shard_grad, _Atomic int *done, int *used_scratch)
{
    (void)rt, (void)scratch;
    if (shard_grad != full)
        memcpy(shard_grad, full, sizeof *full * (size_t)g->numel);
    if (used_scratch)
        *used_scratch = 0;
    if (done)
        *done = 1;
}

int smoe_rt_wgather_needs_pack(const smoe_wgather *g)
{
    (void)g;
    return 0;
}

smoe_ep_comm smoe_rt_ep_comm(smoe_rt *rt)
{
    (void)rt;
    return smoe_ep_comm_self();
}

smoe_rt_stats *smoe_rt_stats_get(smoe_rt *rt) { return &rt->stats; }

void smoe_rt_set_span_hook(smoe_rt *rt, smoe_rt_span_fn fn, void *ud)
{
    (void)rt, (void)fn, (void)ud; /* no communication, no spans */
}
