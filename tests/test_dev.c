/* The device layer's rules (dev.h), checked on the host emulation in both
 * modes (threads; adversarial over many seeds) and, with the argument
 * "cuda", on a CUDA device (exit 77, skipped, when there is none).
 * Oracles: values written and copied back by hand-known patterns; the
 * adversarial mode must produce both orders of an unordered pair (it can
 * expose a missing event) and never the wrong order of an ordered one. */
#define _POSIX_C_SOURCE 200809L
#include "smoe/dev.h"

#include "check.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 4096 /* bytes per test buffer */

static smoe_err err;

#define OK(call) CHECKF((call) == SMOE_OK, "%s: %s", #call, err.msg)

typedef struct logbuf {
    int v[64];
    int n;
} logbuf;

typedef struct log_arg {
    logbuf *log;
    int value;
} log_arg;

static void append(void *ud)
{
    log_arg *a = ud;
    a->log->v[a->log->n++] = a->value;
}

/* One stream runs its work in enqueue order. */
static void fifo(const smoe_dev *d)
{
    smoe_dev_stream *s;
    OK(smoe_dev_stream_new(d, 0, &s, &err));
    logbuf log = { { 0 }, 0 };
    log_arg a[10];
    for (int i = 0; i < 10; i++) {
        a[i] = (log_arg){ &log, i };
        OK(smoe_dev_host_fn(d, s, append, &a[i], &err));
    }
    OK(smoe_dev_sync(d, 0, &err));
    int in_order = log.n == 10;
    for (int i = 0; in_order && i < 10; i++)
        in_order = log.v[i] == i;
    CHECKF(in_order, "%s: one stream's work out of order", smoe_dev_name(d));
    smoe_dev_stream_free(d, s);
}

/* A fills x with `byte`; B copies x to y, after A's record when `ordered`.
 * Returns y's first byte (host copy). */
static int fill_then_copy(const smoe_dev *d, int ordered, unsigned char byte)
{
    smoe_dev_stream *a, *b;
    smoe_dev_event *e;
    unsigned char *x, *y, host[N];
    OK(smoe_dev_stream_new(d, 0, &a, &err));
    OK(smoe_dev_stream_new(d, 1, &b, &err));
    OK(smoe_dev_event_new(d, &e, &err));
    OK(smoe_dev_alloc(d, N, (void **)&x, &err));
    OK(smoe_dev_alloc(d, N, (void **)&y, &err));
    OK(smoe_dev_fill(d, x, 0, N, b, &err));
    OK(smoe_dev_fill(d, y, 0, N, b, &err));
    OK(smoe_dev_sync(d, 0, &err));
    OK(smoe_dev_fill(d, x, byte, N, a, &err));
    OK(smoe_dev_record(d, e, a, &err));
    if (ordered)
        OK(smoe_dev_wait(d, b, e, &err));
    OK(smoe_dev_copy(d, y, x, N, b, &err));
    OK(smoe_dev_copy(d, host, y, N, b, &err));
    OK(smoe_dev_sync(d, 0, &err));
    int whole = 1;
    for (int i = 1; i < N; i++)
        whole = whole && host[i] == host[0];
    CHECKF(whole, "%s: a copy torn across an operation", smoe_dev_name(d));
    OK(smoe_dev_free(d, x, &err));
    OK(smoe_dev_free(d, y, &err));
    smoe_dev_event_free(d, e);
    smoe_dev_stream_free(d, a);
    smoe_dev_stream_free(d, b);
    return host[0];
}

/* Record captures the work so far: B waits on A's first record, A then
 * fills again and records again; B's copy may see either fill. Returns
 * what B copied. */
static int capture(const smoe_dev *d)
{
    smoe_dev_stream *a, *b;
    smoe_dev_event *e;
    unsigned char x = 0, y = 0;
    OK(smoe_dev_stream_new(d, 0, &a, &err));
    OK(smoe_dev_stream_new(d, 0, &b, &err));
    OK(smoe_dev_event_new(d, &e, &err));
    OK(smoe_dev_fill(d, &x, 1, 1, a, &err));
    OK(smoe_dev_record(d, e, a, &err));
    OK(smoe_dev_wait(d, b, e, &err));
    OK(smoe_dev_fill(d, &x, 2, 1, a, &err));
    OK(smoe_dev_record(d, e, a, &err));
    OK(smoe_dev_copy(d, &y, &x, 1, b, &err));
    OK(smoe_dev_sync(d, 0, &err));
    smoe_dev_event_free(d, e);
    smoe_dev_stream_free(d, a);
    smoe_dev_stream_free(d, b);
    return y;
}

static void orders_adversarial(void)
{
    int seen[3] = { 0 }, unordered[2] = { 0 }, captured[3] = { 0 };
    for (uint64_t seed = 1; seed <= 64; seed++) {
        smoe_dev d;
        OK(smoe_dev_host_open(SMOE_DEV_HOST_ADVERSARIAL, seed, &d, &err));
        int v = fill_then_copy(&d, 1, 7);
        seen[v == 7 ? 0 : v == 0 ? 1 : 2]++;
        v = fill_then_copy(&d, 0, 7);
        if (v == 7 || v == 0)
            unordered[v == 7]++;
        v = capture(&d);
        captured[v == 1 ? 0 : v == 2 ? 1 : 2]++;
        CHECK(smoe_dev_host_ops_run(&d) > 0);
        smoe_dev_close(&d);
    }
    CHECKF(seen[0] == 64, "ordered by an event: %d of 64 seeds copied the fill", seen[0]);
    CHECKF(unordered[0] > 0 && unordered[1] > 0,
           "no event: the copy ran before the fill in %d seeds and after it in %d (both must occur)",
           unordered[0], unordered[1]);
    CHECKF(captured[0] > 0 && captured[1] > 0 && captured[2] == 0,
           "a wait captures the record at the time of the call: saw the first fill %d times, "
           "the second %d, other %d", captured[0], captured[1], captured[2]);
}

/* A pipeline: k stages over 4 streams, each stage adds 1 to a counter
 * after waiting on the previous stage's event. */
typedef struct counter {
    int value;
    int bad;
} counter;

typedef struct stage_arg {
    counter *c;
    int expect;
} stage_arg;

static void stage(void *ud)
{
    stage_arg *a = ud;
    if (a->c->value != a->expect)
        a->c->bad++;
    a->c->value++;
}

static void pipeline(const smoe_dev *d)
{
    enum { S = 4, K = 48 };
    smoe_dev_stream *s[S];
    smoe_dev_event *e[K];
    stage_arg args[K];
    counter c = { 0, 0 };
    for (int i = 0; i < S; i++)
        OK(smoe_dev_stream_new(d, i & 1, &s[i], &err));
    for (int k = 0; k < K; k++) {
        OK(smoe_dev_event_new(d, &e[k], &err));
        if (k)
            OK(smoe_dev_wait(d, s[k % S], e[k - 1], &err));
        args[k] = (stage_arg){ &c, k };
        OK(smoe_dev_host_fn(d, s[k % S], stage, &args[k], &err));
        OK(smoe_dev_record(d, e[k], s[k % S], &err));
    }
    OK(smoe_dev_event_sync(d, e[K - 1], 0, &err));
    CHECKF(c.value == K && c.bad == 0, "%s: pipeline of %d stages: %d ran, %d out of order",
           smoe_dev_name(d), K, c.value, c.bad);
    double t = -1;
    OK(smoe_dev_elapsed(d, e[0], e[K - 1], &t, &err));
    CHECKF(t >= 0, "%s: elapsed from the first stage to the last %g s", smoe_dev_name(d), t);
    for (int k = 0; k < K; k++)
        smoe_dev_event_free(d, e[k]);
    for (int i = 0; i < S; i++)
        smoe_dev_stream_free(d, s[i]);
}

static void copy2d(const smoe_dev *d)
{
    smoe_dev_stream *s;
    unsigned char src[8 * 16], dst[8 * 16], *dev;
    for (int i = 0; i < 8 * 16; i++)
        src[i] = (unsigned char)i;
    memset(dst, 0, sizeof dst);
    OK(smoe_dev_stream_new(d, 0, &s, &err));
    OK(smoe_dev_alloc(d, sizeof dst, (void **)&dev, &err));
    OK(smoe_dev_fill(d, dev, 0, sizeof dst, s, &err));
    /* rows 0..7, bytes 4..9 of each 16-byte row, into 8-byte rows of dev */
    OK(smoe_dev_copy2d(d, dev, 8, src + 4, 16, 6, 8, s, &err));
    OK(smoe_dev_copy(d, dst, dev, sizeof dst, s, &err));
    OK(smoe_dev_sync(d, 0, &err));
    int good = 1;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            good = good && dst[r * 8 + c] == (c < 6 ? src[r * 16 + 4 + c] : 0);
    CHECKF(good, "%s: copy2d placed the rows wrong", smoe_dev_name(d));
    CHECK(smoe_dev_copy2d(d, dev, 4, src, 16, 6, 8, s, &err) != SMOE_OK || !strcmp(d->ops->name, "cuda"));
    OK(smoe_dev_free(d, dev, &err));
    smoe_dev_stream_free(d, s);
}

/* A delay holds its stream: the events around it are at least that far
 * apart (a lower bound: the stream cannot finish it early), and the copy
 * enqueued after it lands; a negative or NaN delay is refused. */
static void delay(const smoe_dev *d)
{
    smoe_dev_stream *s;
    smoe_dev_event *a, *b;
    int x = 7, y = 0, *dev;
    OK(smoe_dev_stream_new(d, 0, &s, &err));
    OK(smoe_dev_event_new(d, &a, &err));
    OK(smoe_dev_event_new(d, &b, &err));
    OK(smoe_dev_alloc(d, sizeof x, (void **)&dev, &err));
    OK(smoe_dev_record(d, a, s, &err));
    OK(smoe_dev_delay(d, 0.02, s, &err));
    OK(smoe_dev_copy(d, dev, &x, sizeof x, s, &err));
    OK(smoe_dev_record(d, b, s, &err));
    OK(smoe_dev_copy(d, &y, dev, sizeof y, s, &err));
    OK(smoe_dev_sync(d, 0, &err));
    double t = 0;
    OK(smoe_dev_elapsed(d, a, b, &t, &err));
    CHECKF(t >= 0.0199 && y == 7, "%s: a delay of 20 ms held its stream %g s, then copied %d",
           smoe_dev_name(d), t, y);
    CHECK(smoe_dev_delay(d, -1, s, &err) == SMOE_EINVAL && strstr(err.msg, "a delay of"));
    CHECK(smoe_dev_delay(d, NAN, s, &err) == SMOE_EINVAL);
    OK(smoe_dev_free(d, dev, &err));
    smoe_dev_event_free(d, a);
    smoe_dev_event_free(d, b);
    smoe_dev_stream_free(d, s);
}

/* Refusals: a wait on an event never recorded; a freed event; freeing
 * twice or what the device did not allocate. */
static void refusals(const smoe_dev *d)
{
    smoe_dev_stream *s;
    smoe_dev_event *e;
    OK(smoe_dev_stream_new(d, 0, &s, &err));
    OK(smoe_dev_event_new(d, &e, &err));
    CHECK(smoe_dev_wait(d, s, e, &err) == SMOE_EINVAL && strstr(err.msg, "never recorded"));
    if (strcmp(d->ops->name, "cuda")) {
        float *p;
        int local;
        OK(smoe_dev_alloc(d, 64 * sizeof *p, (void **)&p, &err));
        for (int i = 0; i < 64; i++)
            p[i] = 1.0f;
        OK(smoe_dev_free(d, p, &err));
        CHECKF(isnan(p[0]) && isnan(p[63]), "a freed block reads %g, %g (NaN expected)",
               (double)p[0], (double)p[63]);
        CHECK(smoe_dev_free(d, p, &err) == SMOE_EINVAL && strstr(err.msg, "already freed"));
        CHECK(smoe_dev_free(d, &local, &err) == SMOE_EINVAL && strstr(err.msg, "did not allocate"));
        smoe_dev_event_free(d, e);
        CHECK(smoe_dev_record(d, e, s, &err) == SMOE_EINVAL && strstr(err.msg, "already freed"));
    } else {
        smoe_dev_event_free(d, e);
    }
    smoe_dev_stream_free(d, s);
}

/* A sync whose work cannot finish times out with SMOE_ECOMM; released, it
 * finishes (threads mode: the blocking function runs on its own thread). */
typedef struct gate {
    _Atomic int open;
} gate;

static void wait_gate(void *ud)
{
    gate *g = ud;
    while (!g->open) {
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static void timeout(void)
{
    smoe_dev d;
    smoe_dev_stream *s;
    gate g;
    atomic_init(&g.open, 0);
    OK(smoe_dev_host_open(SMOE_DEV_HOST_THREADS, 0, &d, &err));
    OK(smoe_dev_stream_new(&d, 0, &s, &err));
    OK(smoe_dev_host_fn(&d, s, wait_gate, &g, &err));
    CHECK(smoe_dev_sync(&d, 0.05, &err) == SMOE_ECOMM && strstr(err.msg, "did not finish"));
    g.open = 1;
    OK(smoe_dev_sync(&d, 0, &err));
    smoe_dev_close(&d);
}

static void common(const smoe_dev *d)
{
    fifo(d);
    CHECKF(fill_then_copy(d, 1, 9) == 9, "%s: a wait on the fill's event did not order the copy",
           smoe_dev_name(d));
    pipeline(d);
    copy2d(d);
    delay(d);
    refusals(d);
    OK(smoe_dev_last_error(d, &err));
}

int main(int argc, char **argv)
{
    smoe_dev d;
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        if (smoe_dev_cuda_open(0, &d, &err) != SMOE_OK) {
            printf("skipped: %s\n", err.msg);
            return 77;
        }
        common(&d);
        smoe_dev_close(&d);
        return check_report();
    }
    OK(smoe_dev_host_open(SMOE_DEV_HOST_THREADS, 0, &d, &err));
    common(&d);
    smoe_dev_close(&d);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        OK(smoe_dev_host_open(SMOE_DEV_HOST_ADVERSARIAL, seed, &d, &err));
        common(&d);
        smoe_dev_close(&d);
    }
    orders_adversarial();
    timeout();
    return check_report();
}
