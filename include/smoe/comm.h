/* smoe comm: the communication interfaces that the model and the trainer
 * talk to, owned by neither the model nor the runtime. An interface is a
 * small vtable (function pointers and a context); the MPI runtime
 * (runtime.h: smoe_rt_ep_comm, smoe_rt_comm) supplies one implementation,
 * and a single-rank one that needs no MPI is provided here (src/comm/), so
 * code written against the interface builds and runs without MPI.
 *
 * smoe_ep_comm: the expert-parallel exchange of one rank's expert group
 * (the MoE layer's token all-to-all).
 * smoe_comm: everything the trainer (train.h) asks of its ranks: who they
 * are, the small collectives that agree on statuses and numbers, the FSDP
 * weight gathers and their gradient transposes, waits that never hang,
 * and the expert group. The trainer is written against it alone, so one
 * build of it runs under MPI (smoe_rt_comm), on one rank without MPI
 * (smoe_comm_local_new), or on N ranks in one process, a thread each
 * (smoe_comm_vrank_new). */
#ifndef SMOE_COMM_H
#define SMOE_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "smoe/core.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Expert-parallel communication (the runtime supplies the MPI one). Peers are the
 * ranks of the expert group (0..size-1); this rank is `rank` and owns
 * experts [rank*E_l, (rank+1)*E_l). */
typedef struct smoe_ep_comm {
    int size, rank;
    void *ctx;
    /* Exchange n int64 per peer: send[p*n .. p*n+n) goes to peer p,
     * recv[p*n ..) comes from peer p. Blocking. */
    smoe_status (*exchange_counts)(void *ctx, const int64_t *send,
                                   int64_t *recv, int64_t n);
    /* Variable all-to-all of rows of `row` floats: send holds
     * send_rows[p] rows for peer p (peer order), recv gets recv_rows[p]
     * rows from peer p (peer order). Blocking. */
    smoe_status (*alltoallv)(void *ctx, const float *send,
                             const int64_t *send_rows, float *recv,
                             const int64_t *recv_rows, int64_t row);
    /* Called between kernels so the runtime can advance its nonblocking
     * collectives (may be NULL). */
    void (*progress)(void *ctx);
} smoe_ep_comm;

/* The expert group of one rank: exchange = memcpy (src/comm/self.c). */
smoe_ep_comm smoe_ep_comm_self(void);

/* ---- smoe_comm: the trainer's ranks ----
 * Error contract (the runtime's): the small collectives and the gather
 * operations return nothing, since a failure in them (an MPI error, a wait
 * past the timeout) ends the whole job (abort) so that no rank is left in
 * a collective its peers have given up on; what can fail on one rank
 * (agree, agree_err, check_same, gather_new, gatherv_bytes) returns a
 * status that every rank gets the same (agree) or the caller agrees. */

/* One weight's prepared gathers (opaque; owned by the comm, freed with
 * it). */
typedef struct smoe_comm_gather smoe_comm_gather;

typedef struct smoe_wgather_info {
    int64_t shard_numel;   /* local shard, elements */
    int64_t gathered_numel;/* gathered buffer, elements */
    int64_t shard_shape[SMOE_MAX_RANK];
    int64_t gathered_shape[SMOE_MAX_RANK];
    int64_t offset[SMOE_MAX_RANK]; /* of the shard inside the gathered buffer */
    int rank;
    int stages;            /* prefetched all-gathers (one per gathered dim) */
    int residual_stages;   /* blocking all-gathers at use (legacy) */
    int reduce_axes;       /* mesh axes (size > 1) the weight is replicated on */
} smoe_wgather_info;

/* One gather in flight: the caller owns it (one per weight per buffer),
 * since several layers of the same weight may be gathered at once. The
 * counters are _Atomic: a progress thread may decrement them while the
 * application thread reads them. */
typedef struct smoe_comm_ticket {
    _Atomic int pending;      /* prefetched ops outstanding */
    _Atomic int res_pending;  /* residual ops outstanding */
    double busy_s;            /* the prefetched ops' time in flight, written as
                               * each completes (before `pending` drops), added
                               * to the stats by the wait on the calling thread */
    void *stage;              /* the engine's: in-process ranks on a device keep a
                               * compressed gather's records there */
} smoe_comm_ticket;

/* Timing of this rank's communication, reset by the caller. */
typedef struct smoe_comm_stats {
    double gather_wait_s;     /* exposed: inside gather_wait */
    double residual_s;        /* blocking residual gathers (legacy) */
    double gather_busy_s;     /* gather ops from start to completion */
    double a2a_s;             /* expert all-to-alls */
    double reduce_wait_s;     /* waiting for gradient reductions */
    int64_t gathers;          /* gather ops completed */
    int64_t gather_bytes;     /* bytes received by gathers (as moved: compressed
                                 gathers count their records) */
    double convert_s;         /* expanding compressed gathers into fp32 (in wait) */
    /* bytes this rank's queued collectives (gathers, gradient reductions,
     * the expert exchange) address to members on its own host and on other
     * hosts, each counted as a direct exchange: an all-gather sends its
     * part to every member, a reduce-scatter each member's part to it, an
     * all-reduce 2 / n of the buffer to every member (a reduce-scatter,
     * then an all-gather), an all-to-all its rows for each. With two
     * members MPI's algorithms send exactly that; with more they may relay
     * parts through other members. Counted as issued; the MPI runtime
     * counts, the in-process communicators leave them 0, but ranks on a
     * device with a link stood in for (link_gbs) count in link_bytes what
     * each op holds that link for (as much as they send, the ops being
     * symmetric). */
    int64_t host_bytes, link_bytes;
} smoe_comm_stats;

/* A span of the trace (lanes: smoe_lane, core.h; times: smoe_now()). */
typedef void (*smoe_comm_span_fn)(void *ud, int lane, const char *name, double t0, double t1);

/* A wait loop that never hangs: smoe_comm_wait_begin, then
 * smoe_comm_wait_step once per round (it drives progress, yields the CPU
 * after a few hundred fruitless rounds, and past the timeout aborts the job
 * naming this rank, `what` and the phase). */
typedef struct smoe_comm_wait {
    double t0;
    int spins;
    const char *what;
} smoe_comm_wait;

/* The settings every rank must share beyond the mesh (digested into the
 * trainer's fingerprint), their places in smoe_comm_ops.settings' v: the
 * MPI runtime's shared_queue, progress_thread. */
enum { SMOE_COMM_SHARED_QUEUE, SMOE_COMM_PROGRESS_THREAD, SMOE_COMM_NSETTINGS };

/* The operations; ctx is smoe_comm.ctx. Every one is required. Collective
 * ones are marked (every rank calls them in the same order). */
typedef struct smoe_comm_ops {
    const char *name;                          /* "MPI", "single rank" */
    int (*rank)(void *ctx);
    int (*size)(void *ctx);
    const smoe_mesh *(*mesh)(void *ctx);       /* the mesh the ranks form */
    const int64_t *(*coords)(void *ctx);       /* this rank's, mesh order */
    void (*settings)(void *ctx, int64_t v[SMOE_COMM_NSETTINGS]);
    void (*set_phase)(void *ctx, const char *text); /* copied; named by failures */
    /* the seconds a wait may make no progress (<= 0: forever); returns the old */
    double (*swap_timeout)(void *ctx, double seconds);
    /* print msg, end every rank with exit status `code`; must not return */
    void (*abort)(void *ctx, smoe_exit code, const char *msg);
    void (*progress)(void *ctx);               /* advance nonblocking ops */
    void (*wait_step)(void *ctx, smoe_comm_wait *w);
    /* wait for every queued op (a wait past the timeout aborts) */
    smoe_status (*drain)(void *ctx, smoe_err *err);
    /* collective, over every rank */
    void (*allreduce_sum_f64)(void *ctx, double *v, int n);
    void (*allreduce_max_f64)(void *ctx, double *v, int n);
    void (*allreduce_max_i64)(void *ctx, int64_t *v, int n);
    void (*gather_bytes)(void *ctx, const void *send, void *recv, int64_t n);
    smoe_status (*gatherv_bytes)(void *ctx, const void *send, int64_t n, char **out,
                                 int64_t *lens);
    void (*bcast_bytes)(void *ctx, void *buf, int64_t n);
    smoe_status (*agree)(void *ctx, smoe_status local);
    smoe_status (*agree_err)(void *ctx, smoe_status local, smoe_err *err);
    smoe_status (*check_same)(void *ctx, int n, const char *const names[],
                              const char *const digests[], smoe_err *err);
    /* FSDP weight gathers (collective over the ranks of the weight's axes).
     * x->wire (dtype.h) compresses the gathers: buf receives what every
     * shard becomes through the wire (pack then unpack, bitwise the same on
     * one rank and on many); x->reduce_wire bf16 reduces the gradients in
     * bf16 (the buffer sent is converted in place). runtime.h has the
     * contract in full. */
    smoe_status (*gather_new)(void *ctx, const smoe_gather_exec *x, const char *name,
                              smoe_comm_gather **out, smoe_err *err);
    void (*gather_info)(const smoe_comm_gather *g, smoe_wgather_info *info);
    void (*gather_start)(void *ctx, smoe_comm_gather *g, const float *shard, float *buf,
                         smoe_comm_ticket *t);
    void (*gather_wait)(void *ctx, smoe_comm_gather *g, float *buf, smoe_comm_ticket *t,
                        double *wait_s);
    void (*gather_reduce)(void *ctx, smoe_comm_gather *g, float *full, float *scratch,
                          float *shard_grad, _Atomic int *done, _Atomic int *sent);
    int (*gather_needs_pack)(const smoe_comm_gather *g);
    smoe_ep_comm (*ep)(void *ctx);             /* this rank's expert group */
    smoe_comm_stats *(*stats)(void *ctx);
    void (*set_span_hook)(void *ctx, smoe_comm_span_fn fn, void *ud);
    /* 1: the gathers and reductions take buffers in a device's memory and
     * order their work on its streams (in-process ranks given a device,
     * the NCCL communicator); 0: host memory */
    int (*on_device)(void *ctx);
} smoe_comm_ops;

/* A communicator: the operations and their context. A value; the object
 * behind ctx belongs to whoever made it (the runtime, or
 * smoe_comm_local_new). */
typedef struct smoe_comm {
    const smoe_comm_ops *ops;
    void *ctx;
} smoe_comm;

/* ---- the calls (src/comm/comm.c), one per operation; see runtime.h for
 * the full contract of each (smoe_rt_X is smoe_comm_X over MPI) ---- */
int smoe_comm_rank(const smoe_comm *c);
int smoe_comm_size(const smoe_comm *c);
const smoe_mesh *smoe_comm_mesh(const smoe_comm *c);
const int64_t *smoe_comm_coords(const smoe_comm *c);
void smoe_comm_settings(const smoe_comm *c, int64_t v[SMOE_COMM_NSETTINGS]);
void smoe_comm_set_phase(const smoe_comm *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Set the no-progress timeout of waits to `seconds` (<= 0: never) and
 * return the one it replaces. Not collective (every rank sets the same). */
double smoe_comm_swap_timeout(const smoe_comm *c, double seconds);
_Noreturn void smoe_comm_abort(const smoe_comm *c, smoe_exit code, const char *msg);
void smoe_comm_progress(const smoe_comm *c);
smoe_comm_wait smoe_comm_wait_begin(const char *what);
void smoe_comm_wait_step(const smoe_comm *c, smoe_comm_wait *w);
SMOE_MUST_CHECK
smoe_status smoe_comm_drain(const smoe_comm *c, smoe_err *err);
void smoe_comm_allreduce_sum_f64(const smoe_comm *c, double *v, int n);
void smoe_comm_allreduce_max_f64(const smoe_comm *c, double *v, int n);
void smoe_comm_allreduce_max_i64(const smoe_comm *c, int64_t *v, int n);
/* n bytes from every rank to rank 0 (recv: size * n bytes) */
void smoe_comm_gather_bytes(const smoe_comm *c, const void *send, void *recv, int64_t n);
/* variable byte counts to rank 0: *out (smoe_free) back to back, lens[r] */
SMOE_MUST_CHECK
smoe_status smoe_comm_gatherv_bytes(const smoe_comm *c, const void *send, int64_t n, char **out,
                                    int64_t *lens);
void smoe_comm_bcast_bytes(const smoe_comm *c, void *buf, int64_t n);
/* the worst status over the ranks */
SMOE_MUST_CHECK
smoe_status smoe_comm_agree(const smoe_comm *c, smoe_status local);
/* the worst status, and the err of the lowest-numbered rank that failed */
SMOE_MUST_CHECK
smoe_status smoe_comm_agree_err(const smoe_comm *c, smoe_status local, smoe_err *err);
/* the same n digests on every rank, or SMOE_EINVAL naming what differs */
SMOE_MUST_CHECK
smoe_status smoe_comm_check_same(const smoe_comm *c, int n, const char *const names[],
                                 const char *const digests[], smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_comm_gather_new(const smoe_comm *c, const smoe_gather_exec *x, const char *name,
                                 smoe_comm_gather **out, smoe_err *err);
void smoe_comm_gather_info(const smoe_comm *c, const smoe_comm_gather *g,
                           smoe_wgather_info *info);
void smoe_comm_gather_start(const smoe_comm *c, smoe_comm_gather *g, const float *shard,
                            float *buf, smoe_comm_ticket *t);
void smoe_comm_gather_wait(const smoe_comm *c, smoe_comm_gather *g, float *buf,
                           smoe_comm_ticket *t, double *wait_s);
void smoe_comm_gather_reduce(const smoe_comm *c, smoe_comm_gather *g, float *full,
                             float *scratch, float *shard_grad, _Atomic int *done,
                             _Atomic int *sent);
int smoe_comm_gather_needs_pack(const smoe_comm *c, const smoe_comm_gather *g);
smoe_ep_comm smoe_comm_ep(const smoe_comm *c);
smoe_comm_stats *smoe_comm_stats_get(const smoe_comm *c);
void smoe_comm_set_span_hook(const smoe_comm *c, smoe_comm_span_fn fn, void *ud);
int smoe_comm_on_device(const smoe_comm *c);

/* check_same built on agree and gather_bytes (src/comm/same.c), the one
 * every implementation uses: every rank's n digests gathered to rank 0
 * and compared; SMOE_EINVAL on every rank when one differs, rank 0's err
 * naming the first differing rank, what differs and both digests. */
SMOE_MUST_CHECK
smoe_status smoe_comm_check_same_by_gather(const smoe_comm *c, int n, const char *const names[],
                                           const char *const digests[], smoe_err *err);

/* The wire of a weight's gathers (x->wire, wire_block, reduce_wire), the
 * one check every gather engine makes: a known gather dtype, an int8
 * block in range, a shard whose last dim (blk_last) holds whole records,
 * fp32 or bf16 reductions; SMOE_EINVAL naming `name` otherwise. */
SMOE_MUST_CHECK
smoe_status smoe_comm_wire_check(const smoe_gather_exec *x, int64_t blk_last, const char *name,
                                 smoe_err *err);

/* The blocks member m of a stage's group holds before the stage: the
 * stage gathers, on dim `dim`, the run S of that dim's axes; done[j] are
 * the axes of dim j gathered before it. For every combination c of the
 * done axes' coordinates (c in [0, returned count), the first of them most
 * significant), fn gets the block's offset in a buffer of the gathered
 * shape counted in records of `rec` elements on the last dim (the block's
 * shape: the shard's, its last dim over rec): m's coordinates on S, the
 * combination's on the done axes, this rank's (coords) on the others. fn
 * NULL: the count only. */
typedef void (*smoe_comm_block_fn)(void *ud, int64_t c, const int64_t off[]);
/* A weight's gather stages in the order every engine runs them: the
 * prefetched ones (pass 0: dims in order, x->prefetch), then the residual
 * ones at use (pass 1: x->at_use); fn gets each with the axes of every dim
 * gathered before it (done). fn's first failure, else SMOE_OK. */
typedef smoe_status (*smoe_comm_stage_fn)(void *ud, int pass, int dim, const smoe_axes *S,
                                          const smoe_axes done[], smoe_err *err);
SMOE_MUST_CHECK
smoe_status smoe_comm_stages(const smoe_gather_exec *x, smoe_comm_stage_fn fn, void *ud,
                             smoe_err *err);
struct smoe_dev;
struct smoe_dev_stream;
/* The block (local, at offset) of a global row-major buffer of `shape`
 * moved on stream s of device d as 2-D copies: dir 0 into the packed
 * buffer localbuf, 1 from it (smoe_layout_copy's), 2 from the same place
 * of src (smoe_layout_copy_block's). The first copy's failure. */
SMOE_MUST_CHECK
smoe_status smoe_comm_dev_layout(const struct smoe_dev *d, struct smoe_dev_stream *s, int rank,
                                 const int64_t shape[], const int64_t local[],
                                 const int64_t offset[], size_t elem, void *global,
                                 void *localbuf, const void *src, int dir, smoe_err *err);
int64_t smoe_comm_stage_walk(const smoe_gather_geom *geo, const smoe_mesh *mesh,
                             const int64_t coords[], int dim, const smoe_axes *S,
                             const smoe_axes done[], int64_t rec, int64_t m,
                             smoe_comm_block_fn fn, void *ud);

/* A weight's smoe_wgather_info from its gather geometry (shard.h) and its
 * engine's counts: prefetched stages, residual stages, reduction axes
 * (every gather engine's gather_info). */
void smoe_comm_wgather_info(const smoe_gather_geom *geo, int stages, int residual_stages,
                            int reduce_axes, smoe_wgather_info *info);

/* ---- the single-rank communicator (src/comm/local.c; no MPI) ----
 * On a mesh of one device nothing is ever sent: a weight's gathered buffer
 * is its shard, a gradient's reduce-scatter and all-reduce leave it as it
 * is, the expert all-to-all is a copy (smoe_ep_comm_self), every
 * collective is the identity and every op completes when it is issued:
 * the same copies the MPI runtime makes on a one-rank mesh, so a run is
 * bitwise the same. A wait that waits can never end, so it aborts after
 * `timeout_s` seconds (<= 0: never), as the MPI runtime's does for a dead
 * peer; abort prints "smoe: rank 0: MSG" and _exits with the code. One
 * thread. SMOE_EINVAL when the mesh has more than one device. */
SMOE_MUST_CHECK
smoe_status smoe_comm_local_new(const smoe_mesh *mesh, double timeout_s, smoe_comm *out,
                                smoe_err *err);
/* Free what smoe_comm_local_new made (its gathers included); c->ctx NULL
 * after. */
void smoe_comm_local_free(smoe_comm *c);
/* The single-rank communicator's copies (a gather's shard into its buffer,
 * a reduction's gradient into the shard's) made by fn instead of memcpy:
 * for buffers in a device's memory, fn being its stream-ordered copy. A
 * gather built after it moves fp32 only (another wire: SMOE_EINVAL).
 * fn NULL: memcpy again. Nothing on another communicator. */
typedef void (*smoe_comm_copy_fn)(void *ud, void *dst, const void *src, size_t bytes);
void smoe_comm_local_set_copy(smoe_comm *c, smoe_comm_copy_fn fn, void *ud);
/* 1 when c is a single-rank communicator of smoe_comm_local_new */
int smoe_comm_is_local(const smoe_comm *c);

/* ---- ranks in one process (src/comm/vrank.c; no MPI) ----
 * The mesh's N devices as N ranks of one process: out[r] (the caller's
 * array of N) is rank r's communicator, used by one thread of the
 * caller's, which runs rank r (a smoe_trainer over out[r], say); every
 * collective is a copy between the ranks' buffers, ordered by a mailbox
 * per (group, sequence number) under one lock. The MPI runtime's groups,
 * queues and contract (runtime.h), op for op: what a weight gather hands
 * back, compressed ones included, is bitwise what the MPI runtime's does;
 * its reductions sum the ranks' contributions in rank order, so a run is
 * bitwise the same under every schedule (MPI's order is the library's).
 * A wait that makes no progress for timeout_s seconds (<= 0: never)
 * aborts the process naming the rank, what it waited for and its phase;
 * abort prints "smoe: rank R: MSG" and _exits with the code. Without a
 * progress thread a rank's ops advance when its thread enters the comm;
 * with one (progress_thread), also whenever a peer's event wakes it.
 * SMOE_EINVAL for a mesh of more than 4096 devices. */
typedef struct smoe_comm_vrank_opts {
    double timeout_s;
    int shared_queue;    /* gathers share the reductions' queue (smoe_rt_opts's) */
    int progress_thread; /* a progress thread per rank (smoe_rt_opts's, never AUTO) */
} smoe_comm_vrank_opts;
SMOE_MUST_CHECK
smoe_status smoe_comm_vrank_new(const smoe_mesh *mesh, const smoe_comm_vrank_opts *o,
                                smoe_comm *out, smoe_err *err);
/* A rank whose buffers live in a device's memory (dev.h), all ranks of
 * one world on one device, each with streams of its own:
 *  - compute: where the rank's trainer writes the buffers it hands over
 *    (shards, gradients) and uses what it gets back;
 *  - xfer: the rank's collectives' copies and sums (ops/xq: a kernel
 *    queue on it, for vec_add); cq: a queue of the same table on
 *    `compute`, for the bf16 wire's conversions.
 * A collective's device work is enqueued at its post behind an event
 * recorded on `compute` when it was issued (so the host never blocks to
 * issue), and the op completes once that work has run on every member:
 * when a gather's wait returns or a reduction's flag is set, the result
 * is in place and the buffers the peers read are free. Sums add the
 * members in rank order, as on the host. A bf16 gather converts the
 * rank's buffer on `compute` into records of a staging block, moves
 * records, and expands them at the wait: bitwise what the host's gathers
 * hand back. int8 gathers and bf16 reductions are not supported yet
 * (SMOE_EINVAL at gather_new); the expert all-to-all
 * of a group of more than one rank is not supported yet (the rank aborts
 * naming it). link_gbs > 0 stands in for a link of that many GB/s
 * between the ranks: each op's transfer stream is held (smoe_dev_delay)
 * for the bytes the rank receives in it (as smoe_comm_stats counts them:
 * a reduce-scatter's parts from every peer, an all-reduce's 2 (n - 1) / n
 * of the buffer) over that rate, before its copies; so prefetching has a
 * wait to hide on a device whose own copies take microseconds. Call once
 * per rank, before its first collective; the device, streams and queue
 * are borrowed. */
struct smoe_dev;
struct smoe_dev_stream;
struct smoe_kops;
typedef struct smoe_comm_device {
    const struct smoe_dev *dev;
    struct smoe_dev_stream *compute, *xfer;
    const struct smoe_kops *ops;
    void *xq, *cq;
    double link_gbs;
    /* the NCCL communicator's (ncomm.h) other transfer streams: a legacy
     * gather's stages at its wait, and the gradient reductions (in-process
     * ranks run everything on xfer and ignore them) */
    struct smoe_dev_stream *residual, *reduce;
} smoe_comm_device;
SMOE_MUST_CHECK
smoe_status smoe_comm_vrank_set_device(smoe_comm *c, const smoe_comm_device *d, smoe_err *err);
/* Free the ranks smoe_comm_vrank_new made (c: its array of n), after every
 * rank's thread is done with them; each c[i].ctx NULL after. */
void smoe_comm_vrank_free(smoe_comm *c, int n);

#ifdef __cplusplus
}
#endif
#endif
