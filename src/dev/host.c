/* The host emulation of the device layer (dev.h: smoe_dev_host_open).
 *
 * DESIGN. One mutex and one condition variable guard everything. A stream
 * is a FIFO of operations; an event holds two generations: `recorded`
 * (bumped by each record call, on the host) and `done` (set by the record
 * operation when the stream reaches it). A wait operation carries the
 * generation its event held when the wait was enqueued and is ready once
 * `done` has reached it: exactly CUDA's capture rule, and no cycle can
 * form, since the record it waits for was enqueued before it.
 * An operation runs outside the lock, its stream marked busy, so a host
 * function may take its time; at most one operation per stream runs at a
 * time. THREADS mode gives each stream a thread that runs its ready head;
 * ADVERSARIAL mode runs nothing until a host call waits, and then the
 * waiting thread runs ready heads one at a time, the stream drawn by a
 * seeded generator: with everything queued before anything runs, any
 * missing event shows up as a wrong order for some seed.
 * Freed memory is filled with 0xff and kept until close (quarantine);
 * freed events stay allocated, marked dead, so a late use is refused. */
#define _GNU_SOURCE
#include "smoe/dev.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { OP_COPY, OP_COPY2D, OP_FILL, OP_FN, OP_RECORD, OP_WAIT, OP_DELAY } op_kind;

typedef struct op {
    op_kind kind;
    struct op *next;
    void *dst;
    const void *src;
    size_t bytes, dpitch, spitch, width, height;
    unsigned char byte;
    smoe_dev_fn fn;
    void *ud;
    smoe_dev_event *ev;
    uint64_t gen;
    double secs;
} op;

struct smoe_dev_event {
    uint64_t recorded, done;
    double t_done;
    int dead;
    smoe_dev_event *next; /* every event made, freed at close */
};

typedef struct host host;
struct smoe_dev_stream {
    host *h;
    op *head, *tail;
    int busy, quit, has_thread;
    pthread_t thr;
    smoe_dev_stream *next;
};

typedef struct block {
    void *p;
    size_t bytes;
    int freed;
    struct block *next;
} block;

struct host {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    smoe_dev_host_mode mode;
    uint64_t rng;
    int64_t ops_run;
    smoe_dev_stream *streams;
    smoe_dev_event *events;
    block *blocks;
};

static host *H(void *ctx) { return ctx; }

/* splitmix64: the adversarial order's generator */
static uint64_t next_rand(host *h)
{
    uint64_t z = (h->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* under the lock: the stream's next operation may run now */
static int head_ready(const smoe_dev_stream *s)
{
    const op *o = s->head;
    if (!o || s->busy)
        return 0;
    return o->kind != OP_WAIT || o->ev->done >= o->gen;
}

static void run_body(op *o)
{
    switch (o->kind) {
    case OP_COPY: memmove(o->dst, o->src, o->bytes); break;
    case OP_COPY2D:
        for (size_t r = 0; r < o->height; r++)
            memmove((char *)o->dst + r * o->dpitch, (const char *)o->src + r * o->spitch,
                    o->width);
        break;
    case OP_FILL: memset(o->dst, o->byte, o->bytes); break;
    case OP_FN: o->fn(o->ud); break;
    case OP_DELAY: {
        struct timespec ts = { (time_t)o->secs, (long)((o->secs - (double)(time_t)o->secs) * 1e9) };
        while (nanosleep(&ts, &ts) != 0) {
        }
        break;
    }
    case OP_RECORD:
    case OP_WAIT: break;
    }
}

/* Under the lock: pop s's ready head and run it (the lock released while
 * it runs); wakes every waiter after. */
static void run_head(host *h, smoe_dev_stream *s)
{
    op *o = s->head;
    s->head = o->next;
    if (!s->head)
        s->tail = NULL;
    s->busy = 1;
    pthread_mutex_unlock(&h->mu);
    run_body(o);
    double t = smoe_now();
    pthread_mutex_lock(&h->mu);
    if (o->kind == OP_RECORD && o->gen > o->ev->done) {
        o->ev->done = o->gen;
        o->ev->t_done = t;
    }
    s->busy = 0;
    h->ops_run++;
    free(o);
    pthread_cond_broadcast(&h->cv);
}

/* Under the lock, adversarial mode: run one ready head of a stream drawn
 * at random; 0 when none is ready. */
static int run_one_random(host *h)
{
    int n = 0;
    for (smoe_dev_stream *s = h->streams; s; s = s->next)
        n += head_ready(s);
    if (!n)
        return 0;
    int pick = (int)(next_rand(h) % (uint64_t)n);
    for (smoe_dev_stream *s = h->streams; s; s = s->next)
        if (head_ready(s) && pick-- == 0) {
            run_head(h, s);
            return 1;
        }
    return 0;
}

static void *stream_thread(void *arg)
{
    smoe_dev_stream *s = arg;
    host *h = s->h;
    pthread_mutex_lock(&h->mu);
    while (!(s->quit && !s->head)) {
        if (head_ready(s))
            run_head(h, s);
        else
            pthread_cond_wait(&h->cv, &h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

typedef int (*until_fn)(host *h, const void *arg);

/* Under the lock: wait until done(h, arg), running work in adversarial
 * mode; SMOE_ECOMM after timeout_s (<= 0: never). */
static smoe_status drive(host *h, until_fn done, const void *arg, double timeout_s,
                         const char *what, smoe_err *err)
{
    double end = smoe_now() + timeout_s;
    while (!done(h, arg)) {
        if (h->mode == SMOE_DEV_HOST_ADVERSARIAL && run_one_random(h))
            continue;
        if (timeout_s > 0 && smoe_now() >= end)
            return smoe_err_set(err, SMOE_ECOMM, "device: %s did not finish in %g s", what,
                                timeout_s);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    return SMOE_OK;
}

static int all_idle(host *h, const void *arg)
{
    (void)arg;
    for (smoe_dev_stream *s = h->streams; s; s = s->next)
        if (s->head || s->busy)
            return 0;
    return 1;
}

static int stream_idle(host *h, const void *arg)
{
    (void)h;
    const smoe_dev_stream *s = arg;
    return !s->head && !s->busy;
}

typedef struct ev_gen {
    const smoe_dev_event *e;
    uint64_t gen;
} ev_gen;

static int event_reached(host *h, const void *arg)
{
    (void)h;
    const ev_gen *g = arg;
    return g->e->done >= g->gen;
}

/* ---- enqueueing ---- */

static smoe_status live_event(const smoe_dev_event *e, const char *what, smoe_err *err)
{
    if (e->dead)
        return smoe_err_set(err, SMOE_EINVAL, "device: %s of an event already freed", what);
    return SMOE_OK;
}

/* Queue o (a copy of *tmpl) on s. */
static smoe_status enqueue(host *h, smoe_dev_stream *s, const op *tmpl, smoe_err *err)
{
    op *o = malloc(sizeof *o);
    if (!o)
        return smoe_err_set(err, SMOE_ENOMEM, "device: out of memory queueing an operation");
    *o = *tmpl;
    o->next = NULL;
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&h->cv);
    return SMOE_OK;
}

static smoe_status h_record(void *ctx, smoe_dev_event *e, smoe_dev_stream *s, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = live_event(e, "record", err);
    if (st == SMOE_OK) {
        op o = { .kind = OP_RECORD, .ev = e, .gen = e->recorded + 1 };
        st = enqueue(h, s, &o, err);
        if (st == SMOE_OK)
            e->recorded++;
    }
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status h_wait(void *ctx, smoe_dev_stream *s, smoe_dev_event *e, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = live_event(e, "wait", err);
    if (st == SMOE_OK && e->recorded == 0)
        st = smoe_err_set(err, SMOE_EINVAL,
                          "device: wait on an event that was never recorded (it would not wait)");
    if (st == SMOE_OK) {
        op o = { .kind = OP_WAIT, .ev = e, .gen = e->recorded };
        st = enqueue(h, s, &o, err);
    }
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status queue_op(void *ctx, smoe_dev_stream *s, const op *o, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = enqueue(h, s, o, err);
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status h_copy(void *ctx, void *dst, const void *src, size_t bytes, smoe_dev_stream *s,
                          smoe_err *err)
{
    op o = { .kind = OP_COPY, .dst = dst, .src = src, .bytes = bytes };
    return queue_op(ctx, s, &o, err);
}

static smoe_status h_copy2d(void *ctx, void *dst, size_t dpitch, const void *src, size_t spitch,
                            size_t width, size_t height, smoe_dev_stream *s, smoe_err *err)
{
    if (height > 1 && (width > dpitch || width > spitch))
        return smoe_err_set(err, SMOE_EINVAL, "device: copy2d rows of %zu bytes overlap "
                            "(pitches %zu, %zu)", width, dpitch, spitch);
    op o = { .kind = OP_COPY2D, .dst = dst, .src = src, .dpitch = dpitch, .spitch = spitch,
             .width = width, .height = height };
    return queue_op(ctx, s, &o, err);
}

static smoe_status h_fill(void *ctx, void *p, unsigned char byte, size_t bytes,
                          smoe_dev_stream *s, smoe_err *err)
{
    op o = { .kind = OP_FILL, .dst = p, .byte = byte, .bytes = bytes };
    return queue_op(ctx, s, &o, err);
}

static smoe_status h_delay(void *ctx, double seconds, smoe_dev_stream *s, smoe_err *err)
{
    if (!(seconds >= 0 && seconds < 3600))
        return smoe_err_set(err, SMOE_EINVAL, "host emulation: a delay of %g s", seconds);
    op o = { .kind = OP_DELAY, .secs = seconds };
    return queue_op(ctx, s, &o, err);
}

static smoe_status h_host_fn(void *ctx, smoe_dev_stream *s, smoe_dev_fn fn, void *ud,
                             smoe_err *err)
{
    op o = { .kind = OP_FN, .fn = fn, .ud = ud };
    return queue_op(ctx, s, &o, err);
}

/* ---- host waits ---- */

static smoe_status h_sync(void *ctx, double timeout_s, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = drive(h, all_idle, NULL, timeout_s, "the device's work", err);
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status h_event_sync(void *ctx, smoe_dev_event *e, double timeout_s, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = live_event(e, "sync", err);
    ev_gen g = { e, e->recorded };
    if (st == SMOE_OK)
        st = drive(h, event_reached, &g, timeout_s, "an event", err);
    pthread_mutex_unlock(&h->mu);
    return st;
}

/* A query lets at most one operation run first (adversarial mode), so a
 * polling loop makes progress without the query finishing everything. */
static smoe_status h_query(void *ctx, smoe_dev_event *e, int *done, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = live_event(e, "query", err);
    if (st == SMOE_OK) {
        if (h->mode == SMOE_DEV_HOST_ADVERSARIAL && e->done < e->recorded)
            run_one_random(h);
        *done = e->done >= e->recorded;
    }
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status h_elapsed(void *ctx, smoe_dev_event *a, smoe_dev_event *b, double *s,
                             smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = SMOE_OK;
    if (a->dead || b->dead || !a->recorded || !b->recorded || a->done < a->recorded ||
        b->done < b->recorded)
        st = smoe_err_set(err, SMOE_EINVAL, "device: elapsed time of events not recorded and done");
    else
        *s = b->t_done - a->t_done;
    pthread_mutex_unlock(&h->mu);
    return st;
}

static smoe_status h_last_error(void *ctx, smoe_err *err)
{
    (void)ctx;
    (void)err;
    return SMOE_OK; /* no enqueued operation of the emulation can fail */
}

/* ---- memory ---- */

static smoe_status h_alloc(void *ctx, size_t bytes, void **out, smoe_err *err)
{
    host *h = H(ctx);
    block *b = malloc(sizeof *b);
    size_t n = (bytes + 255) / 256 * 256;
    void *p = b ? aligned_alloc(256, n ? n : 256) : NULL;
    if (!p) {
        free(b);
        return smoe_err_set(err, SMOE_ENOMEM, "device: out of memory allocating %zu bytes", bytes);
    }
    *b = (block){ p, bytes, 0, NULL };
    pthread_mutex_lock(&h->mu);
    b->next = h->blocks;
    h->blocks = b;
    pthread_mutex_unlock(&h->mu);
    *out = p;
    return SMOE_OK;
}

static smoe_status h_free(void *ctx, void *p, smoe_err *err)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    block *b = h->blocks;
    while (b && b->p != p)
        b = b->next;
    smoe_status st = SMOE_OK;
    if (!b || b->freed)
        st = smoe_err_set(err, SMOE_EINVAL, "device: free of %s", b ? "a block already freed"
                                                                     : "memory it did not allocate");
    if (st == SMOE_OK)
        st = drive(h, all_idle, NULL, 0, "the device's work", err);
    if (st == SMOE_OK) {
        memset(b->p, 0xff, b->bytes);
        b->freed = 1;
    }
    pthread_mutex_unlock(&h->mu);
    return st;
}

/* ---- streams and events ---- */

static smoe_status h_stream_new(void *ctx, int priority, smoe_dev_stream **out, smoe_err *err)
{
    (void)priority; /* the emulation has no priorities: any order may happen */
    host *h = H(ctx);
    smoe_dev_stream *s = calloc(1, sizeof *s);
    if (!s)
        return smoe_err_set(err, SMOE_ENOMEM, "device: out of memory for a stream");
    s->h = h;
    if (h->mode == SMOE_DEV_HOST_THREADS) {
        if (pthread_create(&s->thr, NULL, stream_thread, s) != 0) {
            free(s);
            return smoe_err_set(err, SMOE_ENOMEM, "device: cannot start a stream's thread");
        }
        s->has_thread = 1;
    }
    pthread_mutex_lock(&h->mu);
    s->next = h->streams;
    h->streams = s;
    pthread_mutex_unlock(&h->mu);
    *out = s;
    return SMOE_OK;
}

/* The stream's work runs to its end first (CUDA's destroy returns at once
 * and lets it finish; here the host waits for it). */
static void h_stream_free(void *ctx, smoe_dev_stream *s)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    smoe_status st = drive(h, stream_idle, s, 0, "a stream", NULL);
    (void)st; /* no timeout: cannot fail */
    s->quit = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (s->has_thread)
        pthread_join(s->thr, NULL);
    pthread_mutex_lock(&h->mu);
    smoe_dev_stream **p = &h->streams;
    while (*p != s)
        p = &(*p)->next;
    *p = s->next;
    pthread_mutex_unlock(&h->mu);
    free(s);
}

static smoe_status h_event_new(void *ctx, smoe_dev_event **out, smoe_err *err)
{
    host *h = H(ctx);
    smoe_dev_event *e = calloc(1, sizeof *e);
    if (!e)
        return smoe_err_set(err, SMOE_ENOMEM, "device: out of memory for an event");
    pthread_mutex_lock(&h->mu);
    e->next = h->events;
    h->events = e;
    pthread_mutex_unlock(&h->mu);
    *out = e;
    return SMOE_OK;
}

static void h_event_free(void *ctx, smoe_dev_event *e)
{
    host *h = H(ctx);
    pthread_mutex_lock(&h->mu);
    e->dead = 1; /* queued waits and records may still name it: freed at close */
    pthread_mutex_unlock(&h->mu);
}

static void h_close(void *ctx)
{
    host *h = H(ctx);
    while (h->streams)
        h_stream_free(h, h->streams);
    for (smoe_dev_event *e = h->events, *n; e; e = n) {
        n = e->next;
        free(e);
    }
    for (block *b = h->blocks, *n; b; b = n) {
        n = b->next;
        free(b->p);
        free(b);
    }
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static const smoe_dev_ops host_ops = {
    .name = "host emulation",
    .alloc = h_alloc, .free = h_free,
    .stream_new = h_stream_new, .stream_free = h_stream_free,
    .event_new = h_event_new, .event_free = h_event_free,
    .record = h_record, .wait = h_wait, .query = h_query, .event_sync = h_event_sync,
    .elapsed = h_elapsed, .copy = h_copy, .copy2d = h_copy2d, .fill = h_fill,
    .delay = h_delay, .host_fn = h_host_fn, .sync = h_sync, .last_error = h_last_error, .close = h_close,
};

smoe_status smoe_dev_host_open(smoe_dev_host_mode mode, uint64_t seed, smoe_dev *out,
                               smoe_err *err)
{
    out->ops = &host_ops;
    out->ctx = NULL;
    host *h = calloc(1, sizeof *h);
    if (!h)
        return smoe_err_set(err, SMOE_ENOMEM, "device: out of memory opening the emulation");
    h->mode = mode;
    h->rng = seed;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    out->ctx = h;
    return SMOE_OK;
}

int64_t smoe_dev_host_ops_run(const smoe_dev *d)
{
    host *h = H(d->ctx);
    pthread_mutex_lock(&h->mu);
    int64_t n = h->ops_run;
    pthread_mutex_unlock(&h->mu);
    return n;
}
