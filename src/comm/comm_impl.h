/* Internal to the comm module: the in-process ranks' engine of vrank.c
 * (the world, its groups and mailboxes, the ranks' queues of ops) shared
 * with vrank_gather.c (the weight gathers, their transposes and the expert
 * all-to-alls on top of it) and vrank_ops.c (the smoe_comm operations). */
#ifndef SMOE_COMM_IMPL_H
#define SMOE_COMM_IMPL_H

#include <pthread.h>

#include "smoe/comm.h"
#include "smoe/dev.h"

#define VR_QUEUES 4
#define VR_WINDOW 8 /* ops running at once on a queue (the MPI runtime's) */
#define VR_MAX_COMMS 64 /* a rank's communicators (the MPI runtime's) */
/* the gather queue, the all-to-all/reduction queue, the residual gathers'
 * queue (issued at use and waited at once) and that of the all-reduces
 * after a reduce-scatter (each gated on its own), as the MPI runtime's;
 * VR_WORLD: the world's small blocking collectives, on no queue */
enum { VR_Q_GATHER = 0, VR_Q_COMM = 1, VR_Q_RESIDUAL = 2, VR_Q_STAGE2 = 3, VR_WORLD = 4 };

typedef enum vr_kind {
    VR_ALLGATHER,      /* one stage of a weight's gather, in records */
    VR_REDUCE_SCATTER, /* count floats (bf16: uint16) per member, summed in rank order */
    VR_ALLREDUCE,      /* count floats (bf16: uint16) in place, summed in rank order */
    VR_ALLTOALL_I64,   /* count int64 per peer */
    VR_ALLTOALLV,      /* floats: counts and displacements per peer */
    VR_SUM_F64,        /* count doubles in place: sum in rank order */
    VR_MAX_F64,
    VR_MAX_I64,
    VR_TO_ROOT,        /* count bytes of every member to the root, back to back */
    VR_BCAST           /* count bytes from the root */
} vr_kind;

typedef struct vr_world vr_world;
typedef struct vr_rank vr_rank;
typedef struct vr_group vr_group;
typedef struct vr_stage vr_stage;
typedef struct vr_slot vr_slot;

/* A rank's view of one group: who it is there, its next sequence number. */
typedef struct vr_comm {
    smoe_axes axes;
    char names[SMOE_MAX_ENTRY][48];
    int queue;
    vr_group *grp;
    int size, member;
    int64_t seq;
} vr_comm;

typedef struct vr_op vr_op;
struct vr_op {
    vr_kind kind;
    vr_comm *comm;
    int64_t seq;
    vr_slot *slot;               /* its mailbox entry, once posted */
    const void *sbuf;
    void *rbuf;
    int64_t count;
    int bf16;
    int root;
    const vr_stage *stage;       /* VR_ALLGATHER */
    const int64_t *sc, *sd, *rc, *rd; /* VR_ALLTOALLV, floats per peer */
    /* 0 queued, 1 posted (peers may read its buffers), 2 read (its result
     * computed; on a device: its reads enqueued), 3 complete (every peer
     * has read its buffers); a device op's 4: its reads have run, 5: its
     * copy home is enqueued (vrank.c: advance_dev) */
    int state;
    int reads_left;              /* peers still to read this op's buffers */
    void *tmp;                   /* an in-place reduction's result until complete */
    int exclusive, serial;       /* the MPI runtime's start rules (queue.c) */
    _Atomic int *gate;           /* if set, starts only once *gate <= gate_max */
    int gate_max;
    _Atomic int level_pending;   /* a gate in the op itself (the reduce-scatter
                                    before an all-reduce decrements it) */
    double t0;
    const char *name;
    int64_t bytes;
    _Atomic int *pending, *flag; /* completion: decremented, set to 1 */
    _Atomic int *sent;           /* completion: set to 1 (a send buffer free) */
    double *busy_acc;            /* += the op's time from post to completion */
    float *expand;               /* at completion: bf16 tail of expand[0..expand_n) */
    int64_t expand_n;
    /* an op on buffers in the device's memory (vr_dev; vrank_dev.c): its
     * events (made once per op object, kept across reuse) are recorded at
     * issue on the rank's compute stream and after its device work on the
     * rank's transfer stream; dev_state 1: the work before ev_done has run */
    int dev, dev_state;
    smoe_dev_event *ev_issue, *ev_done;
    vr_op *next;
};

typedef struct vr_queue {
    vr_op *head, *tail;
} vr_queue;

/* A rank's device (comm.h: smoe_comm_vrank_set_device), with the scratch
 * blocks its in-place reductions borrow (vrank_dev.c). */
typedef struct vr_block vr_block;
typedef struct vr_dev {
    smoe_comm_device d;
    vr_block *free_blocks[2];    /* by the stream that last used them: xfer, compute */
    int64_t inflight;            /* device ops whose work has not run yet */
} vr_dev;

typedef struct vr_ep {
    vr_rank *r;
    vr_comm *comm;
    int64_t *sc, *sd, *rc, *rd;  /* all-to-all counts/displacements, per peer */
} vr_ep;

/* One rank: its thread alone calls its operations (under the world lock
 * where they touch what peers see), and its progress thread, when there is
 * one, advances its ops under the lock too. */
struct vr_rank {
    vr_world *w;
    int rank;
    int64_t coords[SMOE_MAX_AXES];
    vr_comm comms[VR_MAX_COMMS];
    int ncomms;
    vr_comm *world_comm;
    vr_queue q[VR_QUEUES];
    vr_op *freelist;
    smoe_comm_stats stats;
    double timeout;
    char phase[256];
    smoe_comm_span_fn span;
    void *span_ud;
    smoe_comm_gather *gathers;   /* every gather built, freed with the world */
    vr_ep ep;
    vr_dev *dv;                  /* its device, or NULL: host buffers */
    pthread_t thread;            /* its progress thread, when the world has them */
    int has_thread;
};

/* The lock and condition every rank's waits share (DESIGN in vrank.c). */
struct vr_world {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    smoe_mesh mesh;
    char axis_names[SMOE_MAX_AXES][48];
    int n;
    int shared_queue;
    int progress_thread;         /* a progress thread per rank runs */
    _Atomic int stop;            /* the progress threads end */
    vr_rank *ranks;
    vr_group *groups;            /* every group any rank made */
};

/* The group over `axes` (order matters) on queue q for rank r (its view,
 * made on first use; every rank of the group gets the same group).
 * Takes the lock. */
SMOE_MUST_CHECK
smoe_status vr_comm_get(vr_rank *r, const smoe_axes *axes, int q, vr_comm **out, smoe_err *err);
int vr_queue_of(const vr_rank *r, int q);
vr_op *vr_op_new(vr_rank *r);
/* Append op to r's queue q and progress (takes the lock). */
void vr_enqueue(vr_rank *r, int q, vr_op *op);
/* Wait (driving progress, sleeping on the world's condition, aborting past
 * the timeout) until *flag is set or *pending is 0 (one of them NULL). */
void vr_wait_until(vr_rank *r, _Atomic int *flag, _Atomic int *pending, const char *what);
/* Advance r's ops (takes the lock; _locked: the caller holds it, and it
 * returns whether anything moved). */
void vr_progress(vr_rank *r);
int vr_progress_locked(vr_rank *r);
/* A blocking collective over the world (no queue): posted at once,
 * waited for while r's queues keep moving; `what` names it in a timeout. */
void vr_world_op(vr_rank *r, vr_kind kind, const void *sbuf, void *rbuf, int64_t count, int root,
                 const char *what);
/* Free every group and its mailbox (at the world's end). */
void vr_groups_free(vr_world *w);
_Noreturn void vr_abort(vr_rank *r, smoe_exit code, const char *msg);
void vr_span(vr_rank *r, int lane, const char *name, double t0, double t1);
void vr_wait_step(vr_rank *r, smoe_comm_wait *w);
/* VR_ALLGATHER's read of member m's region, whose op is peer (vrank_gather.c;
 * under the lock). */
void vr_stage_read(const vr_op *op, const vr_op *peer, int m);
/* ---- device ranks (vrank_dev.c); each aborts the rank on a device error ----
 * vr_dev_issue: record op's issue event on the compute stream (the rank's
 * thread, before the op is queued). vr_dev_read: op's reads of its peers'
 * buffers (o: the slot's ops by member) enqueued on the transfer stream
 * behind the issue events, then its done event. vr_dev_poll: 1 once op's
 * enqueued work has run. vr_dev_home: an in-place reduction's result
 * copied home, then the done event again. vr_dev_layout: a block moved as
 * smoe_comm_dev_layout moves it, on the rank's transfer stream (xfer) or
 * its compute stream. vr_dev_release: a finished op's scratch back to the
 * rank. */
void vr_dev_issue(vr_rank *r, vr_op *op);
void vr_dev_read(vr_rank *r, vr_op *op, vr_op **o, int n);
int vr_dev_poll(vr_rank *r, vr_op *op);
void vr_dev_home(vr_rank *r, vr_op *op);
void vr_dev_layout(vr_rank *r, int xfer, int rank, const int64_t shape[], const int64_t local[],
                   const int64_t offset[], size_t elem, void *global, void *localbuf,
                   const void *src, int dir);
void vr_dev_copy(vr_rank *r, void *dst, const void *src, size_t bytes);
void vr_dev_release(vr_rank *r, vr_op *op);
/* a bf16 gather's records: buf's n floats converted on the compute stream
 * into a staging block (returned), expanded back into buf at the wait (and
 * the block kept for the next gather) */
void *vr_dev_stage_pack(vr_rank *r, const float *buf, int64_t n);
void vr_dev_stage_unpack(vr_rank *r, float *buf, void *stage, int64_t n);
/* an op object's events (at the world's end), the rank's device state */
void vr_dev_op_free(vr_rank *r, vr_op *op);
void vr_dev_free(vr_rank *r);
/* 1 for the in-process ranks' operations (vrank_ops.c) */
int vr_is_vrank_ops(const smoe_comm_ops *ops);
/* gathers (vrank_gather.c) */
void vr_gathers_free(vr_rank *r);
smoe_status vr_gather_new(void *ctx, const smoe_gather_exec *x, const char *name,
                          smoe_comm_gather **out, smoe_err *err);
void vr_gather_info(const smoe_comm_gather *g, smoe_wgather_info *info);
void vr_gather_start(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                     smoe_comm_ticket *t);
void vr_gather_wait(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                    double *wait_s);
void vr_gather_reduce(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                      float *shard_grad, _Atomic int *done, _Atomic int *sent);
int vr_gather_needs_pack(const smoe_comm_gather *g);
smoe_ep_comm vr_ep_comm(void *ctx);

#endif
