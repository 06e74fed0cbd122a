/* smoe runtime: the distributed engine. One process (rank) per mesh device;
 * communicators over subsets of mesh axes; the FSDP all-gathers of a gather
 * plan (one nonblocking all-gather per gathered dim over its joint axes,
 * landing in place in the natural layout through MPI derived datatypes),
 * their transposes (reduce-scatter of gradients, all-reduce over the axes a
 * weight is replicated on), the expert all-to-all, and the queues that
 * order them. Only src/runtime/ includes <mpi.h>; the model never sees MPI
 * (it talks to smoe_ep_comm, comm.h, which also has a single-rank implementation),
 * nor does the trainer (smoe_comm, comm.h: smoe_rt_comm is this runtime
 * behind it), and a process started without an MPI launcher runs as one
 * rank.
 *
 * DESIGN (layering)
 *   The runtime stands on core and shard only (it links neither libyaml
 *   nor cJSON, and no plan code): it executes gathers, it never plans them.
 *   The plan turns each weight's gather plan into plain data,
 *   smoe_gather_exec (shard.h: per dim the live axes; the prefetched axes,
 *   i.e. the plan's gather axes; the axes gathered at use, i.e. the plan's
 *   legacy residual and axes no FSDP axis leads; the plan's indivisible
 *   bits) through smoe_gather_exec_of, and train passes it down. Refusals
 *   that depend on the plan's status (an uneven tagged gather:
 *   smoe_plan_check_even) happen in train before the runtime sees a weight.
 *
 * DESIGN (queues and progress)
 *   Every collective is an op on a queue. A queue starts its ops in FIFO
 *   order, a few in flight at once (an all-to-all alone; queue.c has the
 *   rules), like one collective engine. With dedicated queues (the default) FSDP gathers have
 *   their own queue and the expert all-to-all and gradient reductions share
 *   the other, so a prefetched gather never waits behind an all-to-all
 *   (a weight's second stage, the level across slices of a two-level
 *   gather or reduce-scatter or the all-reduce after a reduce-scatter, goes
 *   on a queue of its own, gated on that weight's first stage alone); with
 *   a shared queue (smoe_rt_opts.shared_queue) everything goes through one
 *   queue, reproducing "no dedicated core". Nonblocking MPI collectives
 *   only move when MPI is entered, so smoe_rt_progress() must be called
 *   often: the model calls it between kernels, and an optional progress
 *   thread (progress_thread = 1, or AUTO across hosts) calls it once a
 *   millisecond, sleeping between polls. A pass tests every running op in
 *   one MPI_Testsome: Open MPI runs its progress engine (over TCP a poll()
 *   of every socket) once per test call, not once per op. All ranks
 *   enqueue the same ops in the same order, so the per-communicator order
 *   MPI requires holds.
 *   Thread-safety: one application thread drives the runtime; the optional
 *   progress thread shares the queues under a mutex.
 */
#ifndef SMOE_RUNTIME_H
#define SMOE_RUNTIME_H

#include <stdint.h>

#include "smoe/comm.h"
#include "smoe/core.h"
#include "smoe/shard.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct smoe_rt smoe_rt;

typedef struct smoe_rt_opts {
    int shared_queue;     /* 1: gathers share the all-to-all/reduction queue */
    int progress_thread;  /* 1: a progress thread polling once a millisecond;
                           * SMOE_RT_PROGRESS_AUTO: one when the ranks span
                           * more than one host and the library allows it */
} smoe_rt_opts;
#define SMOE_RT_PROGRESS_AUTO 2

/* MPI_Init_thread (asks for MPI_THREAD_MULTIPLE), errors returned (not
 * fatal), the abort hook pointed at MPI_Abort. Call once. When the process
 * was not started by an MPI launcher it runs as a single rank. */
SMOE_MUST_CHECK
smoe_status smoe_rt_init(int *argc, char ***argv, smoe_rt **out,
                         smoe_err *err);
/* Build the Cartesian communicator of the mesh; the product of the sizes
 * must equal the number of ranks. */
SMOE_MUST_CHECK
smoe_status smoe_rt_set_mesh(smoe_rt *rt, const smoe_mesh *mesh,
                             const smoe_rt_opts *opts, smoe_err *err);
void smoe_rt_finalize(smoe_rt *rt);
/* Abort every rank (MPI_Abort with exit status `code`) after printing msg;
 * never returns. */
_Noreturn void smoe_rt_abort(smoe_rt *rt, smoe_exit code, const char *msg);

int smoe_rt_rank(const smoe_rt *rt);
int smoe_rt_size(const smoe_rt *rt);
/* this rank's place among the ranks on its host (MPI_COMM_TYPE_SHARED) */
int smoe_rt_local_rank(const smoe_rt *rt);
const smoe_mesh *smoe_rt_mesh(const smoe_rt *rt);
/* Mesh coordinates of this rank (mesh order). */
const int64_t *smoe_rt_coords(const smoe_rt *rt);
/* The library name and version ("Open MPI v4.1.4", ...). */
const char *smoe_rt_library(const smoe_rt *rt);
/* The progress thread's setting as resolved by smoe_rt_set_mesh, and why:
 * "on (2 hosts)", "off (one host)", "on (as asked)", ... */
const char *smoe_rt_progress_note(const smoe_rt *rt);
/* The mesh's slices (smoe_mesh_slices) and the hosts they run on, after
 * smoe_rt_set_mesh: "2 slices, one per host" where each slice's ranks share
 * a host of their own, else "1 slice on 2 hosts", "2 slices on 1 host". */
const char *smoe_rt_slices_note(smoe_rt *rt);
/* The progress thread's priority, agreed over the ranks: "nice -10" where
 * every rank's thread raised it, "not raised (REASON)" where one could
 * not, NULL where no thread ran. Collective. */
const char *smoe_rt_progress_priority(smoe_rt *rt);

/* Advance every queue: test the running ops, start the next ones. */
void smoe_rt_progress(smoe_rt *rt);
/* Waiting without ever hanging: a wait loop calls smoe_rt_wait_step once
 * per round. It drives progress; after a few hundred fruitless rounds it
 * sleeps 50 us between polls (so a rank sharing the core can compute); and
 * when the wait has lasted longer than the runtime's timeout it aborts the
 * whole job with a message naming this rank, what it waited for and the
 * current phase (a peer died, or a link is down). */
typedef smoe_comm_wait smoe_rt_wait; /* comm.h */
smoe_rt_wait smoe_rt_wait_begin(const char *what);
void smoe_rt_wait_step(smoe_rt *rt, smoe_rt_wait *w);
/* Seconds a wait may last before the job is aborted (default 20; <= 0:
 * forever). */
void smoe_rt_set_timeout(smoe_rt *rt, double seconds);
/* The same, returning the timeout it replaces. */
double smoe_rt_swap_timeout(smoe_rt *rt, double seconds);
/* What the application is doing, for failure messages ("backward of layer
 * 3"); the text is copied. When another rank fails and the launcher
 * terminates this one, it prints this phase before exiting. */
void smoe_rt_set_phase(smoe_rt *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Wait until every queued op has completed. Returns SMOE_OK: a wait past
 * the timeout aborts the job (the status stays for the step loop's caller,
 * to become void with the loop's schedule executor). */
SMOE_MUST_CHECK
smoe_status smoe_rt_drain(smoe_rt *rt, smoe_err *err);

/* ---- small blocking collectives over the whole world ----
 * These return nothing: an MPI error or a wait past the timeout aborts the
 * whole job (smoe_rt_abort), so no rank is left waiting in a collective its
 * peers have given up on, and there is no status to ignore. */
void smoe_rt_allreduce_sum_f64(smoe_rt *rt, double *v, int n);
void smoe_rt_allreduce_max_f64(smoe_rt *rt, double *v, int n);
void smoe_rt_allreduce_max_i64(smoe_rt *rt, int64_t *v, int n);
void smoe_rt_barrier(smoe_rt *rt);
/* Gather `n` bytes (n < 2^31) from every rank to rank 0 (recv: size * n
 * bytes). */
void smoe_rt_gather_bytes(smoe_rt *rt, const void *send, void *recv, int64_t n);
/* Gather a variable number of bytes from every rank to rank 0: on rank 0
 * *out receives a buffer (smoe_free) with the ranks' data back to back and
 * lens[r] their sizes (lens: size entries, rank 0 only). */
SMOE_MUST_CHECK
smoe_status smoe_rt_gatherv_bytes(smoe_rt *rt, const void *send, int64_t n, char **out,
                                  int64_t *lens);
/* Broadcast n bytes (n < 2^31) from rank 0. */
void smoe_rt_bcast_bytes(smoe_rt *rt, void *buf, int64_t n);
/* Agree on a status: returns the worst (highest) status over all ranks. */
SMOE_MUST_CHECK
smoe_status smoe_rt_agree(smoe_rt *rt, smoe_status local);
/* Agree on a status and its message: every rank returns the worst status
 * and, when it is an error, the err of the lowest-numbered rank that
 * failed (so rank 0 can print what went wrong on rank 5). */
SMOE_MUST_CHECK
smoe_status smoe_rt_agree_err(smoe_rt *rt, smoe_status local, smoe_err *err);
/* Check that every rank holds the same n digests (hex strings of up to 64
 * characters; names[i] says what digest i covers). On a mismatch every
 * rank returns SMOE_EINVAL and rank 0's err names the first differing
 * rank, what differs and both digests. Collective. */
SMOE_MUST_CHECK
smoe_status smoe_rt_check_same(smoe_rt *rt, int n, const char *const names[],
                               const char *const digests[], smoe_err *err);
/* The options the mesh was set with. */
smoe_rt_opts smoe_rt_get_opts(const smoe_rt *rt);

/* ---- FSDP weight gathers ---- */
typedef struct smoe_wgather smoe_wgather;

/* smoe_wgather_info: comm.h (the trainer reads it through smoe_comm). */

/* Prepare the gathers of one per-layer weight from the executable form of
 * its plan entry (smoe_gather_exec, made by the plan: smoe_gather_exec_of).
 * Each dim's prefetch axes are one prefetched all-gather; its at_use axes
 * (the legacy residual co-axes, or axes the plan leaves alone, e.g.
 * `expert` on a mesh without fsdp) a second all-gather at use, which the
 * caller waits for (un-prefetched, as XLA's gather before the consumer);
 * live axes in neither are kept. SMOE_EINVAL when the axes of one stage are
 * not adjacent in the dim's sharding, or a dim is marked indivisible.
 * `name` is used in traces and messages. Owned by rt (freed by
 * smoe_rt_finalize). */
SMOE_MUST_CHECK
smoe_status smoe_rt_wgather_new(smoe_rt *rt, const smoe_gather_exec *x, const char *name,
                                smoe_wgather **out, smoe_err *err);
void smoe_rt_wgather_info(const smoe_wgather *g, smoe_wgather_info *info);

/* One gather in flight: the caller owns it (one per weight per buffer),
 * since several layers of the same weight may be gathered at once. The
 * counters are _Atomic: the progress thread decrements them while the
 * application thread reads them (volatile orders nothing between threads). */
typedef smoe_comm_ticket smoe_rt_ticket; /* comm.h */

/* Copy `shard` into its place in `buf` (gathered_numel floats) and enqueue
 * the prefetched all-gathers on the gather queue; `t` tracks them. Cannot
 * fail (an MPI error aborts the job when the op runs).
 * With a compressed wire (smoe_gather_exec.wire bf16 or int8, dtype.h) the
 * shard is converted first and the records are gathered into the tail of
 * `buf`; smoe_rt_wgather_wait expands them into buf's floats, so buf holds
 * what every rank's shard becomes through the wire (smoe_dtype_round_trip),
 * and nothing of buf may be read before the wait. shard and buf do not
 * overlap. */
void smoe_rt_wgather_start(smoe_rt *rt, smoe_wgather *g, const float *shard, float *buf,
                           smoe_rt_ticket *t);
/* Block until the prefetched gathers of this weight are complete, then run
 * the residual gathers (if any) and wait for them, driving every queue all
 * along (a blocking MPI collective here could deadlock against peers whose
 * queued ops this rank has not started). Returns the seconds spent waiting
 * (exposed) in *wait_s (may be NULL). Cannot fail: a wait past the
 * timeout aborts the job; `err` is unused (kept for the callers). */
void smoe_rt_wgather_wait(smoe_rt *rt, smoe_wgather *g, float *buf, smoe_rt_ticket *t,
                          double *wait_s, smoe_err *err);

/* Gradient transpose: reduce-scatter `full` (gathered_numel floats, the
 * natural layout) over all the gather axes into `shard_grad` (shard_numel
 * floats, overwritten), then all-reduce over the mesh axes the weight is
 * replicated on. When the shard blocks are not contiguous in `full` they
 * are first packed into `scratch` (gathered_numel floats; may be the
 * weight's own gathered buffer once it is no longer needed); otherwise
 * `full` is sent as is. Enqueued on the reduction queue; `*done` (may be
 * NULL) is set to 1 when shard_grad holds the result, and `*sent` (may be
 * NULL) once `full` and `scratch` may be reused: when the reduce-scatter
 * that reads them completes (at once when nothing reads them after the
 * return), never after *done; they must stay alive until then. Cannot fail
 * (as smoe_rt_wgather_start).
 * With smoe_gather_exec.reduce_wire bf16 the buffer sent (scratch when it
 * was used, else full) is converted to bf16 in place (its contents are
 * lost), the reductions sum bf16 with fp32 arithmetic, and the result is
 * expanded into shard_grad's floats before *done is set; a weight with no
 * reduction (one rank) is copied as fp32. */
void smoe_rt_wgather_reduce(smoe_rt *rt, smoe_wgather *g, float *full, float *scratch,
                            float *shard_grad, _Atomic int *done, _Atomic int *sent);
/* Does the reduction of this weight need the scratch buffer? */
int smoe_rt_wgather_needs_pack(const smoe_wgather *g);

/* ---- expert parallelism ---- */
/* The smoe_ep_comm of this rank's expert group (ranks that differ only in
 * their `expert` coordinate), its all-to-alls queued on the a2a queue. */
smoe_ep_comm smoe_rt_ep_comm(smoe_rt *rt);

/* ---- timing of this rank's communication, reset by the caller ---- */
typedef smoe_comm_stats smoe_rt_stats; /* comm.h; gather_wait_s: inside smoe_rt_wgather_wait */
smoe_rt_stats *smoe_rt_stats_get(smoe_rt *rt);

/* ---- trace: spans recorded by the runtime and the train loop ---- */
/* Spans go to the lanes of smoe_lane (core.h). */
typedef smoe_comm_span_fn smoe_rt_span_fn;
/* Install a span recorder (NULL: none). Times are smoe_now() seconds. */
void smoe_rt_set_span_hook(smoe_rt *rt, smoe_rt_span_fn fn, void *ud);

/* ---- the runtime as a smoe_comm (comm.h) ----
 * The communicator the trainer talks to: every operation is the smoe_rt_X
 * call above on rt (its gathers are rt's smoe_wgather). Valid from
 * smoe_rt_set_mesh until smoe_rt_finalize. */
smoe_comm smoe_rt_comm(smoe_rt *rt);

#ifdef __cplusplus
}
#endif
#endif
