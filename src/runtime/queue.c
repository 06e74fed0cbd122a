/* Op queues: each runs its collectives one at a time, in FIFO order, like
 * one collective engine (see DESIGN in runtime.h). Progress tests the
 * running op of each queue and starts the next; an optional thread does it
 * once a millisecond. */
#define _GNU_SOURCE
#include "rt_impl.h"

#include "smoe/dtype.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int rt_queue_of(const smoe_rt *rt, int q)
{
    /* the shared mode merges gathers into the all-to-all/reduction queue;
     * residual gathers keep their own queue (they model XLA's gathers on
     * the compute stream) */
    return rt->shared_queue && (q == RT_Q_GATHER || q == RT_Q_LEVEL || q == RT_Q_RLEVEL)
               ? RT_Q_COMM
               : q;
}

static int queues_busy(const smoe_rt *rt)
{
    for (int q = 0; q < RT_QUEUES; q++)
        if (rt->q[q].head)
            return 1;
    return 0;
}

rt_op *rt_op_new(smoe_rt *rt)
{
    pthread_mutex_lock(&rt->lock);
    rt_op *op = rt->freelist;
    if (op)
        rt->freelist = op->next;
    pthread_mutex_unlock(&rt->lock);
    if (!op)
        op = smoe_malloc(sizeof *op);
    if (!op)
        smoe_rt_abort(rt, SMOE_EXIT_NOMEM, "out of memory allocating a communication op");
    memset(op, 0, sizeof *op);
    return op;
}

static void start(smoe_rt *rt, rt_op *op)
{
    int rc = MPI_SUCCESS;
    op->t0 = smoe_now();
    switch (op->kind) {
    case OP_ALLGATHER:
        rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->rbuf, 1, op->dtype,
                            op->comm, &op->req);
        break;
    case OP_ALLGATHERV:
        rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op->rbuf, op->rcounts,
                             op->rdispls, op->dtype, op->comm, &op->req);
        break;
    case OP_REDUCE_SCATTER:
        rc = MPI_Ireduce_scatter_block(op->sbuf, op->rbuf, op->count,
                                       op->bf16 ? MPI_UINT16_T : MPI_FLOAT,
                                       op->bf16 ? rt->bf16_sum : MPI_SUM, op->comm, &op->req);
        break;
    case OP_ALLREDUCE:
        rc = MPI_Iallreduce(MPI_IN_PLACE, op->rbuf, op->count,
                            op->bf16 ? MPI_UINT16_T : MPI_FLOAT,
                            op->bf16 ? rt->bf16_sum : MPI_SUM, op->comm, &op->req);
        break;
    case OP_ALLTOALL_I64:
        rc = MPI_Ialltoall(op->sbuf, op->count, MPI_INT64_T, op->rbuf, op->count,
                           MPI_INT64_T, op->comm, &op->req);
        break;
    case OP_ALLTOALLV:
        rc = MPI_Ialltoallv(op->sbuf, op->scounts, op->sdispls, MPI_FLOAT, op->rbuf,
                            op->rcounts, op->rdispls, MPI_FLOAT, op->comm, &op->req);
        break;
    }
    rt_check(rt, rc, op->name ? op->name : "a nonblocking collective");
    op->running = 1;
}

static void finish(smoe_rt *rt, rt_op *op)
{
    double t1 = smoe_now();
    if (op->busy_acc)
        *op->busy_acc += t1 - op->t0;
    rt_span(rt, op->lane, op->name ? op->name : "op", op->t_issue, t1);
    if (op->expand)
        smoe_dtype_unpack_tail(SMOE_DT_BF16, 0, op->expand, op->expand_n);
    if (op->pending)
        (*op->pending)--;
    if (op->flag)
        *op->flag = 1;
    if (op->sent)
        *op->sent = 1;
}

/* Start order is FIFO on every queue (so every communicator sees its
 * collectives started in the same order on all ranks); completion may be
 * out of order. An op may start when every earlier op has started and:
 *   exclusive (all-to-all) or serial (a later stage of the same weight):
 *     every earlier op has completed;
 *   otherwise: no exclusive op is running and fewer than RT_WINDOW ops are;
 *   and, gated (a second level): the ops its gate counts have completed.
 * So gathers of different weights overlap, later stages follow earlier
 * ones, and an all-to-all runs alone: on a shared queue gathers wait
 * behind it and it waits behind them. */
#define RT_WINDOW 8

/* Which running ops have completed: one MPI_Testsome over all of them.
 * Open MPI runs its progress engine once per MPI_Test of an incomplete
 * request, and over TCP each run is a poll() of every socket: testing the
 * ops one by one cost a poll() per op in flight at every progress call
 * (across the shaped link, one call halved poll()'s share of the ranks'
 * CPU: bench/results/2026-12-02-overlap.md). One test call progresses
 * every collective at once (libnbc's progress is one callback over all of
 * them) and returns the same completions. */
static void test_running(smoe_rt *rt)
{
    MPI_Request req[RT_QUEUES * RT_WINDOW];
    rt_op *of[RT_QUEUES * RT_WINDOW];
    int idx[RT_QUEUES * RT_WINDOW], n = 0, done = 0;
    for (int q = 0; q < RT_QUEUES; q++)
        for (rt_op *op = rt->q[q].head; op; op = op->next) {
            op->done = -1; /* not in the batch: tested on its own */
            if (op->running && n < RT_QUEUES * RT_WINDOW) {
                op->done = 0;
                of[n] = op;
                req[n++] = op->req;
            }
        }
    if (n == 0)
        return;
    /* statuses of our own, not MPI_STATUSES_IGNORE: MPICH's header marks the
     * argument with an access size that gcc checks against the null pointer */
    MPI_Status st[RT_QUEUES * RT_WINDOW];
    rt_check(rt, MPI_Testsome(n, req, &done, idx, st), "MPI_Testsome");
    for (int i = 0; i < done && done != MPI_UNDEFINED; i++) {
        of[idx[i]]->done = 1;
        of[idx[i]]->req = req[idx[i]]; /* MPI_REQUEST_NULL: freed by the test */
    }
}

void rt_progress_locked(smoe_rt *rt)
{
    test_running(rt);
    for (int q = 0; q < RT_QUEUES; q++) {
        rt_queue *Q = &rt->q[q];
        int running = 0, excl_running = 0;
        rt_op *prev = NULL, *op = Q->head;
        while (op) {
            if (!op->running) {
                int earlier_busy = running > 0 || prev != NULL;
                int ok = (op->exclusive || op->serial) ? !earlier_busy
                                                       : !excl_running && running < RT_WINDOW;
                ok = ok && (!op->gate || *op->gate <= op->gate_max);
                if (!ok)
                    break; /* nothing later may start before it */
                start(rt, op);
                op->done = -1; /* just started: tested on its own */
            }
            int flag = op->done > 0;
            if (op->done < 0)
                rt_check(rt, MPI_Test(&op->req, &flag, MPI_STATUS_IGNORE),
                         op->name ? op->name : "MPI_Test");
            rt_op *next = op->next;
            if (flag) {
                if (prev)
                    prev->next = next;
                else
                    Q->head = next;
                if (Q->tail == op)
                    Q->tail = prev;
                finish(rt, op);
                op->next = rt->freelist;
                rt->freelist = op;
            } else {
                running++;
                excl_running |= op->exclusive;
                prev = op;
            }
            op = next;
        }
    }
}

void *rt_progress_main(void *arg);

/* The bytes `op` addresses to member k (smoe_comm_stats.host_bytes). */
static int64_t bytes_to(const rt_op *op, int k, int n)
{
    int64_t elem = op->bf16 ? 2 : 4;
    switch (op->kind) {
    case OP_ALLGATHER:
    case OP_ALLGATHERV: return n > 1 ? op->bytes / (n - 1) : 0; /* its region */
    case OP_REDUCE_SCATTER: return op->count * elem;
    case OP_ALLREDUCE: return 2 * op->count * elem / n;
    case OP_ALLTOALL_I64: return op->count * 8;
    case OP_ALLTOALLV: return op->scounts ? op->scounts[k] * 4LL : 0;
    }
    return 0;
}

static void count_by_host(smoe_rt *rt, const rt_op *op)
{
    const rt_comm *g = op->group;
    if (!g || !g->same_host)
        return;
    for (int k = 0; k < g->size; k++) {
        if (k == g->rank)
            continue;
        int64_t b = bytes_to(op, k, g->size);
        if (g->same_host[k])
            rt->stats.host_bytes += b;
        else
            rt->stats.link_bytes += b;
    }
}

void rt_enqueue(smoe_rt *rt, int q, rt_op *op)
{
    if (rt->want_thread && !rt->have_thread) {
        rt->want_thread = 0;
        int e = pthread_create(&rt->progress_thread, NULL, rt_progress_main, rt);
        if (e != 0) { /* the run would go on in another progress mode than it reports */
            char msg[160];
            snprintf(msg, sizeof msg, "the progress thread could not start (%s); "
                     "run with --no-progress-thread", strerror(e));
            smoe_rt_abort(rt, SMOE_EXIT_FAIL, msg);
        }
        rt->have_thread = 1;
    }
    q = rt_queue_of(rt, q);
    op->t_issue = smoe_now();
    if (op->kind == OP_ALLGATHER || op->kind == OP_ALLGATHERV) { /* counted as issued */
        rt->stats.gathers++;
        rt->stats.gather_bytes += op->bytes;
    }
    count_by_host(rt, op);
    pthread_mutex_lock(&rt->lock);
    op->next = NULL;
    rt_queue *Q = &rt->q[q];
    if (Q->tail)
        Q->tail->next = op;
    else
        Q->head = op;
    Q->tail = op;
    rt_progress_locked(rt);
    pthread_mutex_unlock(&rt->lock);
}

void smoe_rt_progress(smoe_rt *rt)
{
    if (rt->have_thread) {
        /* the thread polls; the compute thread only makes sure it is not
         * starved when it holds no lock (cheap try) */
        if (pthread_mutex_trylock(&rt->lock) == 0) {
            rt_progress_locked(rt);
            pthread_mutex_unlock(&rt->lock);
        }
        return;
    }
    pthread_mutex_lock(&rt->lock);
    rt_progress_locked(rt);
    pthread_mutex_unlock(&rt->lock);
}

smoe_status smoe_rt_drain(smoe_rt *rt, smoe_err *err)
{
    (void)err;
    smoe_rt_wait w = smoe_rt_wait_begin("the gradient reductions");
    for (;;) {
        pthread_mutex_lock(&rt->lock);
        rt_progress_locked(rt);
        int busy = queues_busy(rt);
        pthread_mutex_unlock(&rt->lock);
        if (!busy)
            return SMOE_OK;
        smoe_rt_wait_step(rt, &w);
    }
}

/* The progress thread polls once a millisecond, sleeping in between: a
 * thread that polled without pause (yielding the CPU between polls) took
 * the cores from the ranks' compute where ranks outnumber cores, and hid
 * less of the gathers across the shaped link than none at all
 * (bench/results/2026-12-01-overlap.md); a millisecond keeps a link of a
 * few Gbit/s fed from the socket buffers while the compute thread is
 * inside a long kernel. */
#define RT_POLL_NS (1000 * 1000)

/* The thread runs at a higher priority than the ranks' compute (its nice
 * value RT_PROGRESS_NICE, rt_impl.h; Linux gives each thread its own, by
 * its thread id). Where the ranks outnumber the cores, at the compute's
 * priority it woke behind the compute threads on the shared cores and a
 * gather across the link waited for its turn (pairs of runs at the two
 * priorities: bench/results/2026-12-02-overlap.md). It sleeps between
 * polls, so it takes no core from the compute beyond its polls. Raising
 * it needs CAP_SYS_NICE or an RLIMIT_NICE that allows it; without, the
 * thread runs at the compute's priority and the run says so
 * (smoe_rt_progress_priority). */
static void raise_priority(smoe_rt *rt)
{
    errno = 0;
    int rc = setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RT_PROGRESS_NICE);
    rt->prio_err = rc == 0 ? 0 : errno > 0 ? errno : EPERM;
}

void *rt_progress_main(void *arg)
{
    smoe_rt *rt = arg;
    raise_priority(rt);
    struct timespec ts = { 0, RT_POLL_NS };
    while (!rt->stop_thread) {
        pthread_mutex_lock(&rt->lock);
        if (queues_busy(rt))
            rt_progress_locked(rt);
        pthread_mutex_unlock(&rt->lock);
        nanosleep(&ts, NULL);
    }
    return NULL;
}
