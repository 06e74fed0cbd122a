/* The smoe_comm calls (comm.h): each one dispatches to its operation. */
#include "smoe/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int smoe_comm_rank(const smoe_comm *c) { return c->ops->rank(c->ctx); }
int smoe_comm_size(const smoe_comm *c) { return c->ops->size(c->ctx); }
const smoe_mesh *smoe_comm_mesh(const smoe_comm *c) { return c->ops->mesh(c->ctx); }
const int64_t *smoe_comm_coords(const smoe_comm *c) { return c->ops->coords(c->ctx); }

void smoe_comm_settings(const smoe_comm *c, int64_t v[SMOE_COMM_NSETTINGS])
{
    c->ops->settings(c->ctx, v);
}

void smoe_comm_set_phase(const smoe_comm *c, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    c->ops->set_phase(c->ctx, text);
}

double smoe_comm_swap_timeout(const smoe_comm *c, double seconds)
{
    return c->ops->swap_timeout(c->ctx, seconds);
}

_Noreturn void smoe_comm_abort(const smoe_comm *c, smoe_exit code, const char *msg)
{
    c->ops->abort(c->ctx, code, msg);
    _exit(code ? (int)code : 1); /* an abort operation that returned */
}

void smoe_comm_progress(const smoe_comm *c) { c->ops->progress(c->ctx); }

smoe_comm_wait smoe_comm_wait_begin(const char *what)
{
    smoe_comm_wait w = { smoe_now(), 0, what };
    return w;
}

void smoe_comm_wait_step(const smoe_comm *c, smoe_comm_wait *w) { c->ops->wait_step(c->ctx, w); }
smoe_status smoe_comm_drain(const smoe_comm *c, smoe_err *err)
{
    return c->ops->drain(c->ctx, err);
}

void smoe_comm_allreduce_sum_f64(const smoe_comm *c, double *v, int n)
{
    c->ops->allreduce_sum_f64(c->ctx, v, n);
}
void smoe_comm_allreduce_max_f64(const smoe_comm *c, double *v, int n)
{
    c->ops->allreduce_max_f64(c->ctx, v, n);
}
void smoe_comm_allreduce_max_i64(const smoe_comm *c, int64_t *v, int n)
{
    c->ops->allreduce_max_i64(c->ctx, v, n);
}
void smoe_comm_gather_bytes(const smoe_comm *c, const void *send, void *recv, int64_t n)
{
    c->ops->gather_bytes(c->ctx, send, recv, n);
}
smoe_status smoe_comm_gatherv_bytes(const smoe_comm *c, const void *send, int64_t n, char **out,
                                    int64_t *lens)
{
    return c->ops->gatherv_bytes(c->ctx, send, n, out, lens);
}
void smoe_comm_bcast_bytes(const smoe_comm *c, void *buf, int64_t n)
{
    c->ops->bcast_bytes(c->ctx, buf, n);
}
smoe_status smoe_comm_agree(const smoe_comm *c, smoe_status local)
{
    return c->ops->agree(c->ctx, local);
}
smoe_status smoe_comm_agree_err(const smoe_comm *c, smoe_status local, smoe_err *err)
{
    return c->ops->agree_err(c->ctx, local, err);
}
smoe_status smoe_comm_check_same(const smoe_comm *c, int n, const char *const names[],
                                 const char *const digests[], smoe_err *err)
{
    return c->ops->check_same(c->ctx, n, names, digests, err);
}

smoe_status smoe_comm_gather_new(const smoe_comm *c, const smoe_gather_exec *x, const char *name,
                                 smoe_comm_gather **out, smoe_err *err)
{
    return c->ops->gather_new(c->ctx, x, name, out, err);
}
void smoe_comm_gather_info(const smoe_comm *c, const smoe_comm_gather *g,
                           smoe_wgather_info *info)
{
    c->ops->gather_info(g, info);
}
void smoe_comm_gather_start(const smoe_comm *c, smoe_comm_gather *g, const float *shard,
                            float *buf, smoe_comm_ticket *t)
{
    c->ops->gather_start(c->ctx, g, shard, buf, t);
}
void smoe_comm_gather_wait(const smoe_comm *c, smoe_comm_gather *g, float *buf,
                           smoe_comm_ticket *t, double *wait_s)
{
    c->ops->gather_wait(c->ctx, g, buf, t, wait_s);
}
void smoe_comm_gather_reduce(const smoe_comm *c, smoe_comm_gather *g, float *full,
                             float *scratch, float *shard_grad, _Atomic int *done,
                             _Atomic int *sent)
{
    c->ops->gather_reduce(c->ctx, g, full, scratch, shard_grad, done, sent);
}
int smoe_comm_gather_needs_pack(const smoe_comm *c, const smoe_comm_gather *g)
{
    return c->ops->gather_needs_pack(g);
}

smoe_ep_comm smoe_comm_ep(const smoe_comm *c) { return c->ops->ep(c->ctx); }
smoe_comm_stats *smoe_comm_stats_get(const smoe_comm *c) { return c->ops->stats(c->ctx); }
int smoe_comm_on_device(const smoe_comm *c) { return c->ops->on_device(c->ctx); }

void smoe_comm_set_span_hook(const smoe_comm *c, smoe_comm_span_fn fn, void *ud)
{
    c->ops->set_span_hook(c->ctx, fn, ud);
}
