/* Internal to the runtime module: communicators, ops and queues. */
#ifndef SMOE_RT_IMPL_H
#define SMOE_RT_IMPL_H

#include <mpi.h>
#include <pthread.h>

#include "smoe/runtime.h"

#define RT_MAX_COMMS 64
#define RT_QUEUES 5
/* The progress thread's nice value (queue.c raise_priority). */
#define RT_PROGRESS_NICE (-10)
/* the gather queue, the all-to-all/reduction queue, the queue of the
 * un-prefetched residual gathers (issued at use and waited at once), and
 * those of the second stages of gathers and reductions: a two-level
 * gather's or reduce-scatter's second level, and the all-reduce after a
 * reduce-scatter, each gated on its own weight's first stage, so that the
 * first stages of other weights go on meanwhile */
enum { RT_Q_GATHER = 0, RT_Q_COMM = 1, RT_Q_RESIDUAL = 2, RT_Q_LEVEL = 3, RT_Q_RLEVEL = 4 };

/* A communicator over an ordered tuple of mesh axes: ranks are numbered by
 * the mixed radix of their coordinates over the tuple, first axis most
 * significant (the tiled-gather block order). One per (tuple, queue), so
 * ops of different queues never share a communicator. */
typedef struct rt_comm {
    smoe_axes axes;
    char names[SMOE_MAX_ENTRY][SMOE_PART_NAME];
    int queue;
    MPI_Comm comm;
    int size, rank;
    int *same_host;    /* [size]: 1 where the member shares this rank's host */
} rt_comm;

typedef enum rt_op_kind {
    OP_ALLGATHER,      /* MPI_Iallgather(IN_PLACE, 1 x dtype at rbuf) */
    OP_ALLGATHERV,     /* MPI_Iallgatherv(IN_PLACE, 1 x dtype at rbuf + rdispls) */
    OP_REDUCE_SCATTER, /* MPI_Ireduce_scatter_block(sbuf -> rbuf, count floats) */
    OP_ALLREDUCE,      /* MPI_Iallreduce(IN_PLACE, rbuf, count floats) */
    OP_ALLTOALL_I64,   /* MPI_Ialltoall(sbuf -> rbuf, count int64 per peer) */
    OP_ALLTOALLV       /* MPI_Ialltoallv of floats */
} rt_op_kind;

typedef struct rt_op rt_op;
struct rt_op {
    rt_op_kind kind;
    MPI_Comm comm;
    MPI_Datatype dtype;
    const void *sbuf;
    void *rbuf;
    int count;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    MPI_Request req;
    int running;
    int done;          /* by the pass's one test of the running ops: 1 complete,
                          0 not, -1 not in it (tested on its own) */
    double t_issue;    /* enqueued (the trace spans issue -> completion) */
    int exclusive;     /* runs alone on its queue (the expert all-to-all) */
    int serial;        /* waits for every earlier op (a dependent stage) */
    _Atomic int *gate; /* if set, starts only once *gate <= gate_max (the ops
                          it depends on, on other queues, have completed) */
    int gate_max;
    _Atomic int level_pending; /* a gate that lives in the op itself: the first
                          level of a two-level reduction decrements it */
    double t0;
    const char *name;
    int lane;
    int64_t bytes;
    const rt_comm *group; /* the members, for the bytes by host (NULL: not counted) */
    /* completion: decrement *pending (if set), set *flag = 1 (if set); both
     * atomic, since the progress thread may complete the op */
    _Atomic int *pending;
    _Atomic int *flag;
    _Atomic int *sent; /* set too: a reduction's send buffer may be reused */
    double *busy_acc;  /* += duration on completion (if set) */
    int bf16;          /* reductions: count bf16 elements, summed by rt->bf16_sum */
    float *expand;     /* on completion: expand the bf16 tail of expand[0..expand_n) */
    int64_t expand_n;
    rt_op *next;
};

typedef struct rt_queue {
    rt_op *head, *tail;
} rt_queue;

struct smoe_wgather;

/* The expert group of this rank (see ep.c). */
typedef struct rt_ep {
    struct smoe_rt *rt;
    rt_comm *comm;
    rt_comm self;           /* when the mesh has no expert axis */
    int *sc, *sd, *rc, *rd; /* all-to-all counts/displacements, per peer */
} rt_ep;

struct smoe_rt {
    int rank, size;
    int initialized_mpi;
    MPI_Comm world, cart;
    smoe_mesh mesh;
    char axis_names[SMOE_MAX_AXES][48];
    int64_t coords[SMOE_MAX_AXES];
    rt_comm comms[RT_MAX_COMMS];
    int ncomms;
    rt_queue q[RT_QUEUES];
    int shared_queue;
    rt_op *freelist;
    pthread_mutex_t lock;
    pthread_t progress_thread;
    int have_thread, want_thread;
    int thread_on;                /* the setting resolved: a thread runs (or will) */
    int hosts;                    /* hosts the ranks span (MPI_COMM_TYPE_SHARED) */
    int local_rank;               /* this rank's place among its host's ranks */
    int *host_of;                 /* [size]: the lowest world rank of each rank's host */
    char slices_note[64];         /* smoe_rt_slices_note's text */
    char thread_why[96];          /* why it is on or off, for the banner */
    _Atomic int stop_thread;
    _Atomic int prio_err;         /* the thread's priority: -1 not tried, 0 raised, else errno */
    char prio_note[96];           /* smoe_rt_progress_priority's text */
    smoe_rt_stats stats;
    smoe_rt_span_fn span;
    void *span_ud;
    struct smoe_wgather **wg;
    int nwg, capwg;
    char library[128];
    rt_ep ep;
    double timeout;         /* seconds a wait may last */
    MPI_Op bf16_sum;        /* the bf16 sum (smoe_bf16_add); made on first use */
    int have_bf16_sum;
};

/* Wait for one request (a small collective of the application thread)
 * with the runtime's timeout; `what` names it in the abort message. */
void rt_wait_request(smoe_rt *rt, MPI_Request *req, const char *what);
/* Default timeout, the SIGTERM handler (watchdog.c). */
void rt_watchdog_init(smoe_rt *rt);
/* Restores the default SIGTERM action (a finishing rank stays quiet). */
void rt_watchdog_fini(void);
/* MPI_Abort must reach the launcher, which may be cut off from this host
 * (a dead link): the process ends itself 5 s later whatever happens. */
void rt_exit_deadline(void);
/* Waits (bounded) until the launcher has read what this rank wrote to a
 * stderr pipe, so that a message printed before MPI_Abort is not lost. */
void rt_stderr_drain(void);
/* The current phase text ("set-up", "step 3 forward"). */
const char *rt_phase(const smoe_rt *rt);

/* The communicator over `axes` (order matters) for queue q. */
SMOE_MUST_CHECK
smoe_status rt_comm_get(smoe_rt *rt, const smoe_axes *axes, int q,
                        rt_comm **out, smoe_err *err);
/* Queue index to use for a logical queue (shared mode maps both to one). */
int rt_queue_of(const smoe_rt *rt, int q);
/* A zeroed op from the freelist. */
rt_op *rt_op_new(smoe_rt *rt);
/* Append to a queue; starts it if the queue is idle. Takes the lock. */
void rt_enqueue(smoe_rt *rt, int q, rt_op *op);
/* Progress with the lock already held. */
void rt_progress_locked(smoe_rt *rt);
/* Check an MPI return code; aborts all ranks with `what` on failure. */
void rt_check(smoe_rt *rt, int rc, const char *what);
void rt_span(smoe_rt *rt, int lane, const char *name, double t0, double t1);
/* Broadcast n bytes (n < 2^31) from rank `root` over the world (rt.c);
 * aborts the job on failure. */
void rt_bcast_from(smoe_rt *rt, void *buf, int64_t n, int root);
/* The bf16 sum op, made on first use (wgather.c). */
SMOE_MUST_CHECK
smoe_status rt_bf16_sum_get(smoe_rt *rt, smoe_err *err);
/* Free every weight gather of rt (wgather.c; at finalize). */
void rt_wgather_free_all(smoe_rt *rt);
/* Serialise the application thread's direct MPI calls with the progress
 * thread (no-ops without one). */
void rt_mpi_lock(smoe_rt *rt);
void rt_mpi_unlock(smoe_rt *rt);

#endif
