/* N ranks in one process (comm.h: smoe_comm_vrank_new): each rank is a
 * host thread with its own smoe_comm handle, and every collective is a
 * copy between the threads' buffers. The MPI runtime's semantics, op for
 * op: the same groups (one per ordered tuple of mesh axes and queue,
 * members numbered by the mixed radix of their coordinates), the same
 * queues and start rules (queue.c), the same completion signals. This
 * file is the engine (groups, mailboxes, queues, progress, waits); what
 * the weight gathers move is in vrank_gather.c, the smoe_comm operations
 * and the world's small collectives in vrank_ops.c.
 *
 * DESIGN (mailboxes)
 *   Every op of a group carries the group's next sequence number, counted
 *   by each rank as it issues (so every rank numbers the same op alike, as
 *   MPI matches collectives by their order on a communicator). Starting an
 *   op posts it to the group's mailbox under (seq): its buffers may be read
 *   from then on. When every member has posted, each member reads what it
 *   needs from its peers' buffers into its own (pull), then counts itself
 *   off each buffer it read. An op completes when its own result is in
 *   place and every peer has read its buffers: an owner never overwrites
 *   or frees a posted buffer before its readers are done. An in-place
 *   reduction computes into a scratch buffer and copies it home at
 *   completion. Reductions sum the members' contributions in member order
 *   (ascending), whatever order the ranks arrive in, so results are
 *   bitwise the same under every schedule.
 * DESIGN (threads and waits)
 *   One lock guards every mailbox and every rank's queues; each rank's
 *   thread advances only its own ops (progress), so a rank's statistics,
 *   spans and completion flags are written by its own thread. A rank that
 *   waits and could advance nothing sleeps on the world's condition, which
 *   every post, read and completion broadcasts (no spinning); a wait past
 *   the rank's timeout aborts the process, naming the rank, what it waited
 *   for and its phase, as the MPI runtime ends a job with a dead peer.
 *   Copies are made under the lock; on a device (vrank_dev.c) they are
 *   queued on the ranks' streams instead. */
#define _GNU_SOURCE
#include "comm_impl.h"

#include "smoe/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vr_slot {
    int64_t seq;
    int posted, released;
    int dev_ran;                 /* device ops: members whose reads have run */
    vr_op **op;                  /* by member */
    vr_slot *next;
};

struct vr_group {
    char key[400];
    int size;
    vr_slot *slots;
    vr_group *next;
};

_Noreturn void vr_abort(vr_rank *r, smoe_exit code, const char *msg)
{
    fprintf(stderr, "smoe: rank %d: %s\n", r->rank, msg);
    fflush(stderr);
    fflush(stdout);
    _exit(code ? (int)code : 1);
}

void vr_span(vr_rank *r, int lane, const char *name, double t0, double t1)
{
    if (r->span)
        r->span(r->span_ud, lane, name, t0, t1);
}

int vr_queue_of(const vr_rank *r, int q)
{
    return r->w->shared_queue && (q == VR_Q_GATHER || q == VR_Q_STAGE2) ? VR_Q_COMM : q;
}

/* ---- groups ---- */
smoe_status vr_comm_get(vr_rank *r, const smoe_axes *axes, int q, vr_comm **out, smoe_err *err)
{
    const smoe_mesh *m = &r->w->mesh;
    q = q == VR_WORLD ? q : vr_queue_of(r, q);
    for (int i = 0; i < r->ncomms; i++) {
        vr_comm *c = &r->comms[i];
        if (c->queue == q && smoe_axes_equal(&c->axes, axes)) {
            *out = c;
            return SMOE_OK;
        }
    }
    if (r->ncomms == VR_MAX_COMMS)
        return smoe_err_set(err, SMOE_EINTERNAL, "too many communicators");
    /* color: the coordinates of the other axes; member: the tuple's radix */
    int64_t color, member, size;
    smoe_status s = smoe_mesh_group(m, r->coords, axes, &color, &member, &size, err);
    if (s)
        return s;
    char key[400];
    int len = snprintf(key, sizeof key, "q%d", q);
    for (int k = 0; k < axes->n; k++)
        len += snprintf(key + len, sizeof key - (size_t)len, " %s", axes->ax[k]);
    snprintf(key + len, sizeof key - (size_t)len, " | %lld", (long long)color);
    vr_comm *c = &r->comms[r->ncomms];
    memset(c, 0, sizeof *c);
    c->axes.n = axes->n;
    for (int k = 0; k < axes->n; k++) {
        snprintf(c->names[k], sizeof c->names[k], "%s", axes->ax[k]);
        c->axes.ax[k] = c->names[k];
    }
    c->queue = q;
    c->size = (int)size;
    c->member = (int)member;
    pthread_mutex_lock(&r->w->lock);
    vr_group *g = r->w->groups;
    while (g && strcmp(g->key, key) != 0)
        g = g->next;
    if (!g && (g = smoe_calloc(1, sizeof *g)) != NULL) {
        snprintf(g->key, sizeof g->key, "%s", key);
        g->size = (int)size;
        g->next = r->w->groups;
        r->w->groups = g;
    }
    pthread_mutex_unlock(&r->w->lock);
    if (!g)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    c->grp = g;
    r->ncomms++;
    *out = c;
    return SMOE_OK;
}

/* ---- ops ---- */
vr_op *vr_op_new(vr_rank *r)
{
    pthread_mutex_lock(&r->w->lock); /* the progress thread returns ops to it */
    vr_op *op = r->freelist;
    if (op)
        r->freelist = op->next;
    pthread_mutex_unlock(&r->w->lock);
    if (!op && !(op = smoe_calloc(1, sizeof *op)))
        vr_abort(r, SMOE_EXIT_NOMEM, "out of memory allocating a communication op");
    smoe_dev_event *ei = op->ev_issue, *ed = op->ev_done; /* kept across reuse */
    memset(op, 0, sizeof *op);
    op->ev_issue = ei;
    op->ev_done = ed;
    return op;
}

static const char *kind_name(vr_kind k)
{
    static const char *const n[] = { "all-gather", "reduce-scatter", "all-reduce",
                                     "all-to-all", "all-to-all(v)", "sum", "max", "max",
                                     "gather to the root", "broadcast" };
    return n[k];
}

/* Post op to its group's mailbox (locked). */
static void post(vr_rank *r, vr_op *op)
{
    vr_comm *c = op->comm;
    vr_group *g = c->grp;
    op->seq = c->seq++;
    vr_slot *s = g->slots;
    while (s && s->seq != op->seq)
        s = s->next;
    if (!s) {
        s = smoe_calloc(1, sizeof *s);
        if (!s || !(s->op = smoe_calloc((size_t)g->size, sizeof *s->op)))
            vr_abort(r, SMOE_EXIT_NOMEM, "out of memory posting a communication op");
        s->seq = op->seq;
        s->next = g->slots;
        g->slots = s;
    }
    SMOE_ASSERT(!s->op[c->member]);
    s->op[c->member] = op;
    s->posted++;
    op->slot = s;
    op->state = 1;
    op->t0 = smoe_now();
    int n = c->size;
    op->reads_left = op->kind == VR_TO_ROOT ? c->member != op->root
                     : op->kind == VR_BCAST ? (c->member == op->root ? n - 1 : 0)
                                            : n - 1;
}

static size_t elem_size(const vr_op *op)
{
    switch (op->kind) {
    case VR_REDUCE_SCATTER:
    case VR_ALLREDUCE: return op->bf16 ? 2 : 4;
    case VR_SUM_F64:
    case VR_MAX_F64:
    case VR_ALLTOALL_I64:
    case VR_MAX_I64: return 8;
    default: return 1;
    }
}

/* acc (count elements of op's type) combined with x: the reductions' one
 * step, applied in member order */
static void combine(const vr_op *op, void *acc, const void *x)
{
    int64_t n = op->count;
    if (op->kind == VR_MAX_I64) {
        int64_t *a = acc;
        const int64_t *b = x;
        for (int64_t i = 0; i < n; i++)
            a[i] = b[i] > a[i] ? b[i] : a[i];
    } else if (op->kind == VR_SUM_F64 || op->kind == VR_MAX_F64) {
        double *a = acc;
        const double *b = x;
        for (int64_t i = 0; i < n; i++)
            a[i] = op->kind == VR_SUM_F64 ? a[i] + b[i] : b[i] > a[i] ? b[i] : a[i];
    } else if (op->bf16) {
        smoe_bf16_add(acc, x, n);
    } else {
        float *a = acc;
        const float *b = x;
        for (int64_t i = 0; i < n; i++)
            a[i] += b[i];
    }
}

/* The reductions: member 0's contribution, then each next one's. */
static void reduce(vr_rank *r, vr_op *op, vr_op **o, int n)
{
    size_t es = elem_size(op), bytes = es * (size_t)op->count;
    int in_place = op->kind != VR_REDUCE_SCATTER;
    size_t part = in_place ? 0 : bytes * (size_t)op->comm->member;
    void *acc = op->rbuf;
    if (in_place && !(acc = op->tmp = smoe_malloc(bytes ? bytes : 1)))
        vr_abort(r, SMOE_EXIT_NOMEM, "out of memory for a reduction");
    for (int m = 0; m < n; m++) {
        const char *x = (const char *)(in_place ? o[m]->rbuf : o[m]->sbuf) + part;
        if (m == 0)
            memcpy(acc, x, bytes);
        else
            combine(op, acc, x);
    }
}

static void mismatch(vr_rank *r, const vr_op *op, const vr_op *peer, int m)
{
    char msg[600];
    snprintf(msg, sizeof msg, "collective %lld of group [%s] differs between the ranks: %s "
             "(%s of %lld) here, %s (%s of %lld) on member %d, during %s", (long long)op->seq,
             op->comm->grp->key, op->name ? op->name : "a collective", kind_name(op->kind),
             (long long)op->count, peer->name ? peer->name : "a collective",
             kind_name(peer->kind), (long long)peer->count, m, r->phase);
    vr_abort(r, SMOE_EXIT_COMM, msg);
}

/* Does op's member read member m's buffers? (Only those ops are sure to
 * be alive: an op that no one reads may complete and be reused.) */
static int reads(const vr_op *op, int m)
{
    int me = op->comm->member;
    return m != me && (op->kind == VR_TO_ROOT ? me == op->root
                       : op->kind == VR_BCAST ? m == op->root : 1);
}

/* Every member has posted: read what this member needs (locked). */
static void read_peers(vr_rank *r, vr_op *op)
{
    vr_op **o = op->slot->op;
    int n = op->comm->size, me = op->comm->member;
    for (int m = 0; m < n; m++) {
        if (!reads(op, m))
            continue;
        int sized = op->kind != VR_ALLTOALLV && op->kind != VR_TO_ROOT;
        if (o[m]->kind != op->kind || o[m]->bf16 != op->bf16 || o[m]->dev != op->dev ||
            (sized && o[m]->count != op->count) || o[m]->root != op->root)
            mismatch(r, op, o[m], m);
    }
    int64_t at = 0;
    if (op->dev) {
        vr_dev_read(r, op, o, n);
        for (int m = 0; m < n; m++)
            o[m]->reads_left -= reads(op, m);
        op->state = 2;
        return;
    }
    switch (op->kind) {
    case VR_ALLGATHER:
        for (int m = 0; m < n; m++)
            if (m != me)
                vr_stage_read(op, o[m], m);
        break;
    case VR_REDUCE_SCATTER:
    case VR_ALLREDUCE:
    case VR_SUM_F64:
    case VR_MAX_F64:
    case VR_MAX_I64: reduce(r, op, o, n); break;
    case VR_ALLTOALL_I64:
        for (int m = 0; m < n; m++)
            memcpy((int64_t *)op->rbuf + m * op->count,
                   (const int64_t *)o[m]->sbuf + me * op->count, 8 * (size_t)op->count);
        break;
    case VR_ALLTOALLV:
        for (int m = 0; m < n; m++) {
            if (o[m]->sc[me] != op->rc[m])
                mismatch(r, op, o[m], m);
            memcpy((float *)op->rbuf + op->rd[m], (const float *)o[m]->sbuf + o[m]->sd[me],
                   sizeof(float) * (size_t)op->rc[m]);
        }
        break;
    case VR_TO_ROOT:
        for (int m = 0; m < n && me == op->root; m++) {
            memcpy((char *)op->rbuf + at, o[m]->sbuf, (size_t)o[m]->count);
            at += o[m]->count;
        }
        break;
    case VR_BCAST:
        if (me != op->root)
            memcpy(op->rbuf, o[op->root]->rbuf, (size_t)op->count);
        break;
    }
    /* count this member off the buffers it read */
    for (int m = 0; m < n; m++)
        if (reads(op, m))
            o[m]->reads_left--;
    op->state = 2;
}

/* op looks at its slot no more; the last member frees it */
static void leave_slot(vr_op *op)
{
    vr_slot *s = op->slot;
    if (++s->released == op->comm->size) { /* no member looks at the slot again */
        vr_slot **p = &op->comm->grp->slots;
        while (*p != s)
            p = &(*p)->next;
        *p = s->next;
        smoe_free(s->op);
        smoe_free(s);
    }
    op->slot = NULL;
}

static void finish(vr_rank *r, vr_op *op)
{
    double t1 = smoe_now();
    if (op->busy_acc)
        *op->busy_acc += t1 - op->t0;
    if (op->name)
        vr_span(r, op->kind == VR_ALLGATHER ? SMOE_LANE_GATHER : SMOE_LANE_COMM, op->name,
                op->t0, t1);
    if (op->dev)
        vr_dev_release(r, op);
    op->state = 3;
    if (op->pending)
        (*op->pending)--;
    if (op->flag)
        *op->flag = 1;
    if (op->sent)
        *op->sent = 1;
}

static void complete(vr_rank *r, vr_op *op)
{
    if (op->tmp) {
        memcpy(op->rbuf, op->tmp, elem_size(op) * (size_t)op->count);
        smoe_free(op->tmp);
        op->tmp = NULL;
    }
    if (op->expand)
        smoe_dtype_unpack_tail(SMOE_DT_BF16, 0, op->expand, op->expand_n);
    leave_slot(op);
    finish(r, op);
}

/* A device op after its reads were enqueued (state 2): 4 once they have
 * run (counted in the slot); when every member's have, it leaves the slot
 * and finishes, an in-place sum after its copy home has run (5). */
static int advance_dev(vr_rank *r, vr_op *op)
{
    int moved = 0;
    if (op->state == 2 && vr_dev_poll(r, op)) {
        op->slot->dev_ran++;
        op->state = 4;
        moved = 1;
    }
    if (op->state == 4 && op->reads_left == 0 && op->slot->dev_ran == op->comm->size) {
        leave_slot(op);
        if (op->tmp) {
            vr_dev_home(r, op);
            op->state = 5;
        } else {
            finish(r, op);
        }
        moved = 1;
    }
    if (op->state == 5 && vr_dev_poll(r, op)) {
        finish(r, op);
        moved = 1;
    }
    return moved;
}

/* Advance a posted op as far as its peers allow; 1 when it moved. */
static int advance(vr_rank *r, vr_op *op)
{
    if (op->dev && op->state >= 2)
        return advance_dev(r, op);
    int moved = 0;
    if (op->state == 1 && op->slot->posted == op->comm->size) {
        read_peers(r, op);
        moved = 1;
        if (op->dev)
            return moved | advance_dev(r, op);
    }
    if (op->state == 2 && op->reads_left == 0) {
        complete(r, op);
        moved = 1;
    }
    return moved;
}

/* Start what the queues' rules allow (queue.c's: FIFO starts; an exclusive
 * or serial op after every earlier one has completed; others while no
 * exclusive op runs and fewer than VR_WINDOW do; a gated one once its gate
 * has dropped) and advance what runs.
 * Locked; returns whether anything moved. */
int vr_progress_locked(vr_rank *r)
{
    int moved = 0;
    for (int q = 0; q < VR_QUEUES; q++) {
        vr_queue *Q = &r->q[q];
        int running = 0, excl_running = 0;
        vr_op *prev = NULL, *op = Q->head;
        while (op) {
            if (op->state == 0) {
                int earlier_busy = running > 0 || prev != NULL;
                int ok = (op->exclusive || op->serial) ? !earlier_busy
                                                       : !excl_running && running < VR_WINDOW;
                ok = ok && (!op->gate || *op->gate <= op->gate_max);
                if (!ok)
                    break;
                post(r, op);
                moved = 1;
            }
            moved |= advance(r, op);
            vr_op *next = op->next;
            if (op->state == 3) {
                if (prev)
                    prev->next = next;
                else
                    Q->head = next;
                if (Q->tail == op)
                    Q->tail = prev;
                op->next = r->freelist;
                r->freelist = op;
            } else {
                running++;
                excl_running |= op->exclusive;
                prev = op;
            }
            op = next;
        }
    }
    if (moved)
        pthread_cond_broadcast(&r->w->cond);
    return moved;
}

void vr_enqueue(vr_rank *r, int q, vr_op *op)
{
    q = vr_queue_of(r, q);
    if (op->dev)
        vr_dev_issue(r, op); /* and counts the bytes a link carries */
    pthread_mutex_lock(&r->w->lock);
    op->next = NULL;
    vr_queue *Q = &r->q[q];
    if (Q->tail)
        Q->tail->next = op;
    else
        Q->head = op;
    Q->tail = op;
    vr_progress_locked(r);
    pthread_mutex_unlock(&r->w->lock);
}

/* Sleep on the world's condition: every host event broadcasts it, so the
 * bound is long; a device's completions broadcast nothing, so a rank with
 * device work in flight polls every 100 us. */
static void wait_cond(vr_rank *r)
{
    vr_world *w = r->w;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += r->dv && r->dv->inflight ? 100 * 1000 : 10 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

static void check_timeout(vr_rank *r, const smoe_comm_wait *w)
{
    if (r->timeout > 0 && smoe_now() - w->t0 > r->timeout) {
        char msg[600];
        snprintf(msg, sizeof msg, "waited %.0f s for %s during %s (a peer rank stopped, or "
                 "the ranks issue different collectives)", r->timeout, w->what, r->phase);
        vr_abort(r, SMOE_EXIT_TIMEOUT, msg);
    }
}

void vr_wait_step(vr_rank *r, smoe_comm_wait *w)
{
    pthread_mutex_lock(&r->w->lock);
    if (!vr_progress_locked(r))
        wait_cond(r);
    pthread_mutex_unlock(&r->w->lock);
    w->spins++;
    check_timeout(r, w);
}

void vr_wait_until(vr_rank *r, _Atomic int *flag, _Atomic int *pending, const char *what)
{
    smoe_comm_wait w = smoe_comm_wait_begin(what);
    while (flag ? !*flag : *pending > 0)
        vr_wait_step(r, &w);
}

/* A blocking collective over the world (no queue): posted at once,
 * waited for while the queues keep moving. */
void vr_world_op(vr_rank *r, vr_kind kind, const void *sbuf, void *rbuf, int64_t count,
                 int root, const char *what)
{
    vr_op *op = vr_op_new(r);
    op->kind = kind;
    op->comm = r->world_comm;
    op->sbuf = sbuf;
    op->rbuf = rbuf;
    op->count = count;
    op->root = root;
    smoe_comm_wait w = smoe_comm_wait_begin(what);
    pthread_mutex_lock(&r->w->lock);
    post(r, op);
    pthread_cond_broadcast(&r->w->cond);
    for (;;) {
        int moved = advance(r, op);
        if (moved)
            pthread_cond_broadcast(&r->w->cond);
        moved |= vr_progress_locked(r);
        if (op->state == 3)
            break;
        if (!moved)
            wait_cond(r);
        pthread_mutex_unlock(&r->w->lock);
        check_timeout(r, &w);
        pthread_mutex_lock(&r->w->lock);
    }
    op->next = r->freelist;
    r->freelist = op;
    pthread_mutex_unlock(&r->w->lock);
}

void vr_progress(vr_rank *r)
{
    pthread_mutex_lock(&r->w->lock);
    vr_progress_locked(r);
    pthread_mutex_unlock(&r->w->lock);
}

void vr_groups_free(vr_world *w)
{
    while (w->groups) {
        vr_group *g = w->groups;
        w->groups = g->next;
        while (g->slots) {
            vr_slot *s = g->slots;
            g->slots = s->next;
            smoe_free(s->op);
            smoe_free(s);
        }
        smoe_free(g);
    }
}
