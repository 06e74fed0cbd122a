/* A step's timings on a device (train_impl.h: tr_devtime): where the loop
 * times a model call on the host (its compute spans), it also enqueues a
 * stamp (backend.h) before and after the call's kernels, and one at the
 * step's start and end; at the step's end one read brings the stamps back
 * (a synchronisation: the host then waits for the device, so the step's
 * wall time is the device's too). A call's device span is from its first
 * stamp to its second: when the stream reached the call's kernels to when
 * it finished them (a wait inside, such as a MoE layer's routing on the
 * host, counted in). Device clocks are mapped onto the host's (smoe_now)
 * by the step's last stamp, read at the host time the read returned. */
#define _GNU_SOURCE
#include "train_impl.h"

#include <stdio.h>

struct tr_devtime {
    const smoe_kops *ops;
    void *stream;
    int cap, n;            /* stamps this step (the first is the step's start) */
    double *d, *h;         /* (cap) in the table's memory, and read back */
    int nspans;
    struct { int a, b, drawn; char name[48]; } *span; /* (cap / 2) */
    int lane_named;        /* the trace's device lane declared */
};

smoe_status tr_devtime_new(const smoe_kops *ops, void *stream, int calls, tr_devtime **out,
                           smoe_err *err)
{
    *out = NULL;
    if (ops->synchronous)
        return SMOE_OK;
    tr_devtime *t = smoe_calloc(1, sizeof *t);
    if (!t)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    t->ops = ops;
    t->stream = stream;
    t->cap = 2 * calls + 2;
    t->d = ops->alloc(stream, sizeof *t->d * (size_t)t->cap);
    t->h = smoe_calloc((size_t)t->cap, sizeof *t->h);
    t->span = smoe_calloc((size_t)calls + 1, sizeof *t->span);
    if (!t->d || !t->h || !t->span) {
        tr_devtime_free(t);
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the device's timings");
    }
    *out = t;
    return SMOE_OK;
}

void tr_devtime_free(tr_devtime *t)
{
    if (!t)
        return;
    if (t->d)
        t->ops->free(t->stream, t->d, sizeof *t->d * (size_t)t->cap);
    smoe_free(t->h);
    smoe_free(t->span);
    smoe_free(t);
}

int tr_devtime_mark(tr_devtime *t)
{
    if (!t || t->n == t->cap)
        return -1;
    t->ops->stamp(t->stream, t->d + t->n);
    return t->n++;
}

void tr_devtime_step_begin(tr_devtime *t)
{
    if (!t)
        return;
    t->n = t->nspans = 0;
    tr_devtime_mark(t);
}

void tr_devtime_span(tr_devtime *t, int begin, const char *name, int drawn)
{
    int end = tr_devtime_mark(t);
    if (!t || begin < 0 || end < 0)
        return;
    t->span[t->nspans].a = begin;
    t->span[t->nspans].b = end;
    t->span[t->nspans].drawn = drawn;
    snprintf(t->span[t->nspans].name, sizeof t->span[t->nspans].name, "%s", name);
    t->nspans++;
}

void tr_devtime_step_end(tr_devtime *t, smoe_trace *trace, double *step_s, double *compute_s)
{
    *step_s = *compute_s = 0;
    int last = tr_devtime_mark(t);
    if (!t || last < 0)
        return;
    t->ops->read(t->stream, t->h, t->d, sizeof *t->h * (size_t)t->n);
    double off = smoe_now() - t->h[last]; /* device clock -> host clock */
    *step_s = t->h[last] - t->h[0];
    if (trace && !t->lane_named) {
        smoe_trace_lane(trace, SMOE_LANE_DEVICE, smoe_lane_name(SMOE_LANE_DEVICE));
        t->lane_named = 1;
    }
    for (int i = 0; i < t->nspans; i++) {
        double a = t->h[t->span[i].a], b = t->h[t->span[i].b];
        *compute_s += b - a;
        if (trace && t->span[i].drawn)
            smoe_trace_span(trace, SMOE_LANE_DEVICE, t->span[i].name, a + off, b + off);
    }
}
