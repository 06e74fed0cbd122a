/* Internal to the ncomm module: a rank's state (ncomm.c: the operations,
 * groups, reductions in flight) shared with its gather engine (ngather.c). */
#ifndef SMOE_NCOMM_IMPL_H
#define SMOE_NCOMM_IMPL_H

#include "smoe/backend.h"
#include "smoe/dev.h"
#include "smoe/nccl.h"
#include "smoe/ncomm.h"

#define NC_MAX_GROUPS 64

/* the roles, each with its transfer stream and NCCL communicators */
enum { NC_GATHER, NC_RESIDUAL, NC_REDUCE, NC_ROLES };

/* the ranks that differ only on an ordered tuple of axes, as NCCL's, for
 * one role */
typedef struct nc_group {
    int role;
    smoe_axes axes;
    char names[SMOE_MAX_ENTRY][48];
    smoe_nccl *c;
    int size, member;
} nc_group;

/* a gather between its start and its wait: its event on the transfer
 * stream, and a bf16 gather's staging block of the rank's stage_bytes
 * (kept for reuse) */
typedef struct nc_flight nc_flight;
struct nc_flight {
    smoe_dev_event *ev;
    void *stage;
    nc_flight *next;
};

/* a reduction in flight: its event, the caller's flags (either may be NULL) */
typedef struct nc_red {
    smoe_dev_event *ev;
    _Atomic int *done, *sent;
} nc_red;

typedef struct nc_gather nc_gather;

typedef struct nc_rank {
    smoe_comm host;
    smoe_comm_device d;
    smoe_dev_stream *s[NC_ROLES]; /* d's xfer, residual, reduce */
    void *ns[NC_ROLES];           /* NCCL's handles of them */
    smoe_nccl *world;
    nc_group groups[NC_MAX_GROUPS];
    int ngroups;
    smoe_dev_event *issue;       /* recorded on compute, waited on by xfer (reused) */
    nc_flight *flights;          /* free ones */
    size_t stage_bytes;          /* a flight's staging: the largest bf16 gather */
    nc_red *reds;
    int nreds, capreds;
    smoe_dev_event **idle_ev;    /* reductions' events, free */
    int nidle, capidle;
    void *scratch[2];            /* (scratch_bytes) a stage's send, then its receive, */
    size_t scratch_bytes[2];     /* for the gather and the residual roles */
    nc_gather *gathers;
    smoe_comm_stats stats;
} nc_rank;

/* Abort the job through the host naming what failed (a collective cannot
 * be backed out of on one rank). */
_Noreturn void nc_fail(nc_rank *r, const char *what, const smoe_err *err);
/* The role's group over `axes` (order matters), made on first use by a
 * split of the world (collective: every rank meets them in one order). */
SMOE_MUST_CHECK
smoe_status nc_group_get(nc_rank *r, int role, const smoe_axes *axes, nc_group **out,
                         smoe_err *err);
/* The compute stream's work so far ordered before what is enqueued on the
 * role's stream from now on. */
void nc_after_compute(nc_rank *r, int role);
/* A reduction's flag, set when the reduce stream has run what is enqueued
 * on it so far. */
void nc_red_push(nc_rank *r, _Atomic int *done, _Atomic int *sent);
/* The role's (gather, residual) scratch holds at least `bytes` (made
 * before any work, at gather_new). */
SMOE_MUST_CHECK
smoe_status nc_scratch_reserve(nc_rank *r, int role, size_t bytes, smoe_err *err);

/* ngather.c: the gather operations of smoe_comm_ops */
smoe_status nc_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                          smoe_comm_gather **out, smoe_err *err);
void nc_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info);
void nc_gather_start(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                     smoe_comm_ticket *t);
void nc_gather_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                    double *wait_s);
void nc_gather_reduce(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                      float *shard_grad, _Atomic int *done, _Atomic int *sent);
int nc_gather_needs_pack(const smoe_comm_gather *g);
void nc_gathers_free(nc_rank *r);

#endif
