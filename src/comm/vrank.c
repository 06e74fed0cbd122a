/* N ranks in one process (comm.h: smoe_comm_vrank_new): each rank is a
 * host thread with its own smoe_comm handle, and every collective is a
 * copy between the threads' buffers. The MPI runtime's semantics, op for
 * op: the same groups (one per ordered tuple of mesh axes and queue,
 * members numbered by the mixed radix of their coordinates), the same
 * queues and start rules (queue.c), the same completion signals; what the
 * weight gathers move is in vrank_gather.c.
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
 *   Copies are made under the lock (a later device version queues them on
 *   streams instead). */
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
    vr_op **op;                  /* by member */
    vr_slot *next;
};

struct vr_group {
    char key[400];
    int size;
    vr_slot *slots;
    vr_group *next;
};

static vr_rank *R(void *ctx) { return ctx; }

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
    return r->w->shared_queue && q == VR_Q_GATHER ? VR_Q_COMM : q;
}

/* ---- groups ---- */
smoe_status vr_comm_get(vr_rank *r, const smoe_axes *axes, int q, vr_comm **out, smoe_err *err)
{
    const smoe_mesh *m = &r->w->mesh;
    q = q == VR_WORLD ? q : vr_queue_of(r, q);
    for (int i = 0; i < r->ncomms; i++) {
        vr_comm *c = &r->comms[i];
        int same = c->queue == q && c->axes.n == axes->n;
        for (int k = 0; k < axes->n && same; k++)
            same = strcmp(c->names[k], axes->ax[k]) == 0;
        if (same) {
            *out = c;
            return SMOE_OK;
        }
    }
    if (r->ncomms == VR_MAX_COMMS)
        return smoe_err_set(err, SMOE_EINTERNAL, "too many communicators");
    /* color: the coordinates of the other axes; member: the tuple's radix */
    int64_t color = 0, member = 0, size = 1;
    char key[400];
    int len = snprintf(key, sizeof key, "q%d", q);
    for (int k = 0; k < axes->n; k++) {
        int a = smoe_mesh_find(m, axes->ax[k]);
        if (a < 0)
            return smoe_err_set(err, SMOE_EINVAL, "axis '%s' is not in the mesh", axes->ax[k]);
        member = member * m->size[a] + r->coords[a];
        size *= m->size[a];
        len += snprintf(key + len, sizeof key - (size_t)len, " %s", axes->ax[k]);
    }
    for (int a = 0; a < m->n; a++)
        if (!smoe_axes_has(axes, m->name[a]))
            color = color * m->size[a] + r->coords[a];
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
    if (!op && !(op = smoe_malloc(sizeof *op)))
        vr_abort(r, SMOE_EXIT_NOMEM, "out of memory allocating a communication op");
    memset(op, 0, sizeof *op);
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
    snprintf(msg, sizeof msg, "collective %lld of group [%s] differs between the ranks: a %s "
             "of %lld here, a %s of %lld on member %d, during %s", (long long)op->seq,
             op->comm->grp->key, kind_name(op->kind), (long long)op->count,
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
        if (o[m]->kind != op->kind || o[m]->bf16 != op->bf16 ||
            (sized && o[m]->count != op->count) || o[m]->root != op->root)
            mismatch(r, op, o[m], m);
    }
    int64_t at = 0;
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

static void complete(vr_rank *r, vr_op *op)
{
    if (op->tmp) {
        memcpy(op->rbuf, op->tmp, elem_size(op) * (size_t)op->count);
        smoe_free(op->tmp);
        op->tmp = NULL;
    }
    if (op->expand)
        smoe_dtype_unpack_tail(SMOE_DT_BF16, 0, op->expand, op->expand_n);
    double t1 = smoe_now();
    if (op->busy_acc)
        *op->busy_acc += t1 - op->t0;
    if (op->name)
        vr_span(r, op->kind == VR_ALLGATHER ? SMOE_LANE_GATHER : SMOE_LANE_COMM, op->name,
                op->t0, t1);
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
    op->state = 3;
    if (op->pending)
        (*op->pending)--;
    if (op->flag)
        *op->flag = 1;
}

/* Advance a posted op as far as its peers allow; 1 when it moved. */
static int advance(vr_rank *r, vr_op *op)
{
    int moved = 0;
    if (op->state == 1 && op->slot->posted == op->comm->size) {
        read_peers(r, op);
        moved = 1;
    }
    if (op->state == 2 && op->reads_left == 0) {
        complete(r, op);
        moved = 1;
    }
    return moved;
}

/* Start what the queues' rules allow (queue.c's: FIFO starts; an exclusive
 * or serial op after every earlier one has completed; others while no
 * exclusive op runs and fewer than VR_WINDOW do) and advance what runs.
 * Locked; returns whether anything moved. */
static int progress_locked(vr_rank *r)
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
    pthread_mutex_lock(&r->w->lock);
    op->next = NULL;
    vr_queue *Q = &r->q[q];
    if (Q->tail)
        Q->tail->next = op;
    else
        Q->head = op;
    Q->tail = op;
    progress_locked(r);
    pthread_mutex_unlock(&r->w->lock);
}

static void wait_cond(vr_world *w)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000 * 1000; /* a bound, not a poll: every event broadcasts */
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
    if (!progress_locked(r))
        wait_cond(r->w);
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
static void world_op(vr_rank *r, vr_kind kind, const void *sbuf, void *rbuf, int64_t count,
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
        moved |= progress_locked(r);
        if (op->state == 3)
            break;
        if (!moved)
            wait_cond(r->w);
        pthread_mutex_unlock(&r->w->lock);
        check_timeout(r, &w);
        pthread_mutex_lock(&r->w->lock);
    }
    op->next = r->freelist;
    r->freelist = op;
    pthread_mutex_unlock(&r->w->lock);
}

/* ---- the operations ---- */
static int v_rank(void *ctx) { return R(ctx)->rank; }
static int v_size(void *ctx) { return R(ctx)->w->n; }
static const smoe_mesh *v_mesh(void *ctx) { return &R(ctx)->w->mesh; }
static const int64_t *v_coords(void *ctx) { return R(ctx)->coords; }
static void v_settings(void *ctx, int64_t v[SMOE_COMM_NSETTINGS])
{
    v[SMOE_COMM_SHARED_QUEUE] = R(ctx)->w->shared_queue;
    v[SMOE_COMM_PROGRESS_THREAD] = R(ctx)->w->progress_thread;
}
static void v_set_phase(void *ctx, const char *text)
{
    snprintf(R(ctx)->phase, sizeof R(ctx)->phase, "%s", text);
}
static double v_swap_timeout(void *ctx, double s)
{
    double old = R(ctx)->timeout;
    R(ctx)->timeout = s;
    return old;
}
static void v_abort(void *ctx, smoe_exit code, const char *msg) { vr_abort(R(ctx), code, msg); }
void vr_progress(vr_rank *r)
{
    pthread_mutex_lock(&r->w->lock);
    progress_locked(r);
    pthread_mutex_unlock(&r->w->lock);
}
static void v_progress(void *ctx) { vr_progress(R(ctx)); }
static void v_wait_step(void *ctx, smoe_comm_wait *w) { vr_wait_step(R(ctx), w); }
static smoe_status v_drain(void *ctx, smoe_err *err)
{
    (void)err;
    vr_rank *r = R(ctx);
    smoe_comm_wait w = smoe_comm_wait_begin("the gradient reductions");
    for (;;) {
        pthread_mutex_lock(&r->w->lock);
        progress_locked(r);
        int busy = r->q[0].head || r->q[1].head || r->q[2].head;
        pthread_mutex_unlock(&r->w->lock);
        if (!busy)
            return SMOE_OK;
        vr_wait_step(r, &w);
    }
}
static void v_sum_f64(void *ctx, double *v, int n)
{
    world_op(R(ctx), VR_SUM_F64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_max_f64(void *ctx, double *v, int n)
{
    world_op(R(ctx), VR_MAX_F64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_max_i64(void *ctx, int64_t *v, int n)
{
    world_op(R(ctx), VR_MAX_I64, NULL, v, n, 0, "an all-reduce over all ranks");
}
static void v_gather_bytes(void *ctx, const void *send, void *recv, int64_t n)
{
    world_op(R(ctx), VR_TO_ROOT, send, recv, n, 0, "a gather to rank 0");
}
static void v_bcast_from(vr_rank *r, void *buf, int64_t n, int root)
{
    world_op(r, VR_BCAST, NULL, buf, n, root, "a broadcast");
}
static void v_bcast_bytes(void *ctx, void *buf, int64_t n) { v_bcast_from(R(ctx), buf, n, 0); }
static smoe_status v_agree(void *ctx, smoe_status s)
{
    int64_t v = (int64_t)s;
    v_max_i64(ctx, &v, 1);
    return (smoe_status)v;
}
static smoe_status v_gatherv_bytes(void *ctx, const void *send, int64_t n, char **out,
                                   int64_t *lens)
{
    vr_rank *r = R(ctx);
    int root = r->rank == 0;
    v_gather_bytes(ctx, &n, root ? lens : NULL, (int64_t)sizeof n);
    int64_t total = 0;
    for (int i = 0; root && i < r->w->n; i++)
        total += lens[i];
    char *buf = root ? smoe_malloc((size_t)total + 1) : NULL;
    smoe_status s = v_agree(ctx, root && !buf ? SMOE_ENOMEM : SMOE_OK);
    if (!s)
        world_op(r, VR_TO_ROOT, send, buf, n, 0, "a gather to rank 0");
    if (s || !root) {
        smoe_free(buf);
        buf = NULL;
    }
    if (out)
        *out = buf;
    return s;
}
/* as the MPI runtime's (same.c): the worst status, the first failing
 * rank's err */
static smoe_status v_agree_err(void *ctx, smoe_status local, smoe_err *err)
{
    vr_rank *r = R(ctx);
    int64_t v[2] = { local ? -r->rank : -r->w->n, (int64_t)local };
    v_max_i64(ctx, v, 2);
    int who = (int)-v[0];
    if (who >= r->w->n)
        return SMOE_OK;
    smoe_err e;
    memset(&e, 0, sizeof e);
    if (r->rank == who && err)
        e = *err;
    v_bcast_from(r, &e, (int64_t)sizeof e, who);
    if (err) {
        *err = e;
        if (!err->code)
            err->code = (smoe_status)v[1];
    }
    return (smoe_status)v[1];
}
#define DIG 65
static smoe_status v_check_same(void *ctx, int n, const char *const names[],
                                const char *const digests[], smoe_err *err)
{
    vr_rank *r = R(ctx);
    if (n < 1 || n > 16)
        return smoe_err_set(err, SMOE_EINTERNAL, "check_same: bad digest count %d", n);
    char mine[16 * DIG];
    memset(mine, 0, sizeof mine);
    for (int i = 0; i < n; i++)
        snprintf(mine + i * DIG, DIG, "%s", digests[i]);
    size_t row = (size_t)n * DIG;
    char *all = r->rank == 0 ? smoe_malloc(row * (size_t)r->w->n) : NULL;
    smoe_status s = v_agree(ctx, r->rank == 0 && !all ? SMOE_ENOMEM : SMOE_OK);
    if (s)
        return smoe_err_set(err, s, "out of memory checking cross-rank consistency");
    v_gather_bytes(ctx, mine, all, (int64_t)row);
    for (int k = 1; r->rank == 0 && k < r->w->n && !s; k++)
        for (int i = 0; i < n && !s; i++) {
            const char *d = all + (size_t)k * row + (size_t)i * DIG;
            if (strcmp(d, mine + i * DIG) != 0)
                s = smoe_err_set(err, SMOE_EINVAL, "rank %d runs a different %s than rank 0 "
                                 "(sha256 %.16s... on rank 0, %.16s... on rank %d)", k,
                                 names[i], mine + i * DIG, d, k);
        }
    smoe_free(all);
    s = v_agree(ctx, s);
    if (s && r->rank != 0)
        smoe_err_set(err, s, "this rank differs from rank 0 (rank 0 reports which part)");
    return s;
}
static smoe_comm_stats *v_stats(void *ctx) { return &R(ctx)->stats; }
static void v_span_hook(void *ctx, smoe_comm_span_fn fn, void *ud)
{
    R(ctx)->span = fn;
    R(ctx)->span_ud = ud;
}

static const smoe_comm_ops vrank_ops = {
    .name = "in-process ranks", .rank = v_rank, .size = v_size, .mesh = v_mesh,
    .coords = v_coords, .settings = v_settings, .set_phase = v_set_phase,
    .swap_timeout = v_swap_timeout, .abort = v_abort, .progress = v_progress,
    .wait_step = v_wait_step, .drain = v_drain, .allreduce_sum_f64 = v_sum_f64,
    .allreduce_max_f64 = v_max_f64, .allreduce_max_i64 = v_max_i64,
    .gather_bytes = v_gather_bytes, .gatherv_bytes = v_gatherv_bytes,
    .bcast_bytes = v_bcast_bytes, .agree = v_agree, .agree_err = v_agree_err,
    .check_same = v_check_same, .gather_new = vr_gather_new, .gather_info = vr_gather_info,
    .gather_start = vr_gather_start, .gather_wait = vr_gather_wait,
    .gather_reduce = vr_gather_reduce, .gather_needs_pack = vr_gather_needs_pack,
    .ep = vr_ep_comm, .stats = v_stats, .set_span_hook = v_span_hook,
};

/* A rank's progress thread: advances the rank's ops whenever a peer's
 * event (or a millisecond) wakes it, as the MPI runtime's polls. */
static void *progress_main(void *arg)
{
    vr_rank *r = arg;
    pthread_mutex_lock(&r->w->lock);
    while (!r->w->stop) {
        progress_locked(r);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->w->cond, &r->w->lock, &ts);
    }
    pthread_mutex_unlock(&r->w->lock);
    return NULL;
}

static void world_free(vr_world *w)
{
    w->stop = 1;
    pthread_mutex_lock(&w->lock);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; w->ranks && i < w->n; i++)
        if (w->ranks[i].has_thread)
            pthread_join(w->ranks[i].thread, NULL);
    for (int i = 0; w->ranks && i < w->n; i++) {
        vr_rank *r = &w->ranks[i];
        vr_gathers_free(r);
        for (int q = 0; q < VR_QUEUES; q++)
            while (r->q[q].head) {
                vr_op *op = r->q[q].head;
                r->q[q].head = op->next;
                smoe_free(op->tmp);
                smoe_free(op);
            }
        while (r->freelist) {
            vr_op *op = r->freelist;
            r->freelist = op->next;
            smoe_free(op);
        }
        smoe_free(r->ep.sc);
    }
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
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    smoe_free(w->ranks);
    smoe_free(w);
}

smoe_status smoe_comm_vrank_new(const smoe_mesh *mesh, const smoe_comm_vrank_opts *o,
                                smoe_comm *out, smoe_err *err)
{
    int64_t n = smoe_mesh_devices(mesh);
    if (n < 1 || n > 4096)
        return smoe_err_set(err, SMOE_EINVAL, "the mesh has %lld devices; in-process ranks "
                            "run 1 to 4096", (long long)n);
    vr_world *w = smoe_calloc(1, sizeof *w);
    if (!w || !(w->ranks = smoe_calloc((size_t)n, sizeof *w->ranks))) {
        smoe_free(w);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->mesh = *mesh;
    for (int i = 0; i < mesh->n; i++) {
        snprintf(w->axis_names[i], sizeof w->axis_names[i], "%s", mesh->name[i]);
        w->mesh.name[i] = w->axis_names[i];
    }
    w->n = (int)n;
    w->shared_queue = o && o->shared_queue;
    w->progress_thread = o && o->progress_thread;
    smoe_axes all = { 0, { NULL } };
    for (int i = 0; i < mesh->n; i++)
        all.ax[all.n++] = w->mesh.name[i];
    for (int i = 0; i < w->n; i++) {
        vr_rank *r = &w->ranks[i];
        r->w = w;
        r->rank = i;
        r->timeout = o ? o->timeout_s : 0;
        snprintf(r->phase, sizeof r->phase, "start-up");
        smoe_mesh_coords(&w->mesh, i, r->coords);
        smoe_status s = vr_comm_get(r, &all, VR_WORLD, &r->world_comm, err);
        if (s) {
            world_free(w);
            return s;
        }
        out[i].ops = &vrank_ops;
        out[i].ctx = r;
    }
    for (int i = 0; w->progress_thread && i < w->n; i++) {
        int e = pthread_create(&w->ranks[i].thread, NULL, progress_main, &w->ranks[i]);
        w->ranks[i].has_thread = e == 0;
        if (e) {
            world_free(w);
            return smoe_err_set(err, SMOE_EINTERNAL, "a progress thread could not start (%s)",
                                strerror(e));
        }
    }
    return SMOE_OK;
}

void smoe_comm_vrank_free(smoe_comm *c, int n)
{
    if (!c || n < 1 || !c[0].ctx)
        return;
    world_free(R(c[0].ctx)->w);
    for (int i = 0; i < n; i++)
        c[i].ctx = NULL;
}
