/* Timeline traces in the Chrome trace event format: complete ("X") events
 * with microsecond timestamps, one process per rank and one thread per
 * lane, plus metadata events naming them. Events are kept in a growable
 * array (amortised doubling) and serialised on demand. Recording never
 * fails in the caller's path: an event that cannot be kept marks the trace
 * as incomplete (like a FILE's error flag), and smoe_trace_fragment then
 * refuses to hand out a truncated timeline. */
#include "smoe/sched.h"

#include <stdio.h>
#include <string.h>

typedef struct ev {
    double t0, t1;
    int tid;
    int meta; /* 1: lane name */
    char name[88];
} ev;

struct smoe_trace {
    int pid;
    char pname[88];
    double origin;
    ev *e;
    int64_t n, cap;
    char *text;
    size_t text_cap;
    int64_t lost;   /* events that could not be kept (out of memory) */
};

smoe_trace *smoe_trace_new(int pid, double origin)
{
    smoe_trace *t = smoe_calloc(1, sizeof *t);
    if (t) {
        t->pid = pid;
        t->origin = origin;
        snprintf(t->pname, sizeof t->pname, "rank %d", pid);
    }
    return t;
}

void smoe_trace_free(smoe_trace *t)
{
    if (!t)
        return;
    smoe_free(t->e);
    smoe_free(t->text);
    smoe_free(t);
}

static void push(smoe_trace *t, const ev *x)
{
    if (t->n == t->cap) {
        int64_t cap = t->cap ? t->cap * 2 : 1024;
        ev *n = smoe_realloc(t->e, sizeof *n * (size_t)cap);
        if (!n) {
            t->lost++;
            return;
        }
        t->e = n;
        t->cap = cap;
    }
    t->e[t->n++] = *x;
}

/* Copy a name keeping only characters that need no JSON escaping. */
static void copy_name(char *dst, size_t n, const char *src)
{
    size_t j = 0;
    for (size_t i = 0; src && src[i] && j + 1 < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[j++] = (c < 0x20 || c == '"' || c == '\\' || c > 0x7e) ? '?' : (char)c;
    }
    dst[j] = 0;
}

void smoe_trace_span(smoe_trace *t, int tid, const char *name, double t0, double t1)
{
    ev x;
    x.t0 = t0;
    x.t1 = t1 < t0 ? t0 : t1;
    x.tid = tid;
    x.meta = 0;
    copy_name(x.name, sizeof x.name, name);
    push(t, &x);
}

void smoe_trace_process(smoe_trace *t, const char *name)
{
    copy_name(t->pname, sizeof t->pname, name);
}

void smoe_trace_lane(smoe_trace *t, int tid, const char *name)
{
    ev x;
    memset(&x, 0, sizeof x);
    x.tid = tid;
    x.meta = 1;
    copy_name(x.name, sizeof x.name, name);
    push(t, &x);
}

void smoe_trace_lanes(smoe_trace *t)
{
    for (int l = 0; l < SMOE_LANE_DEVICE; l++) /* the device's: declared where drawn */
        smoe_trace_lane(t, l, smoe_lane_name(l));
}

smoe_status smoe_trace_fragment(smoe_trace *t, const char **out, size_t *len, smoe_err *err)
{
    *out = "";
    *len = 0;
    if (t->lost)
        return smoe_err_set(err, SMOE_ENOMEM,
                            "out of memory for the trace: %lld events could not be kept",
                            (long long)t->lost);
    size_t need = (size_t)(t->n + 1) * 200 + 200;
    if (need > t->text_cap) {
        char *n = smoe_realloc(t->text, need);
        if (!n)
            return smoe_err_set(err, SMOE_ENOMEM, "out of memory formatting the trace");
        t->text = n;
        t->text_cap = need;
    }
    size_t k = 0;
    k += (size_t)snprintf(t->text + k, need - k,
                          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                          "\"args\":{\"name\":\"%s\"}}",
                          t->pid, t->pname);
    for (int64_t i = 0; i < t->n && k < need; i++) {
        const ev *x = &t->e[i];
        if (x->meta)
            k += (size_t)snprintf(t->text + k, need - k,
                                  ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
                                  "\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                                  t->pid, x->tid, x->name);
        else
            k += (size_t)snprintf(t->text + k, need - k,
                                  ",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                                  "\"ts\":%.3f,\"dur\":%.3f}",
                                  x->name, t->pid, x->tid, (x->t0 - t->origin) * 1e6,
                                  (x->t1 - x->t0) * 1e6);
    }
    *len = k < need ? k : need - 1;
    *out = t->text;
    return SMOE_OK;
}

smoe_status smoe_trace_write(FILE *f, const char *const *fragments, const size_t *lens, int n,
                             smoe_err *err)
{
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(",\n", f);
        fwrite(fragments[i], 1, lens[i], f);
    }
    fputs("\n]}\n", f);
    if (ferror(f))
        return smoe_err_set(err, SMOE_EIO, "error writing the trace");
    return SMOE_OK;
}

const char *smoe_trace_name(const smoe_trace *t) { return t->pname; }

int64_t smoe_trace_lost(const smoe_trace *t) { return t->lost; }

int smoe_trace_event(const smoe_trace *t, int64_t i, int *tid, double *t0, double *t1,
                     const char **name)
{
    if (i < 0 || i >= t->n)
        return -1;
    const ev *x = &t->e[i];
    *tid = x->tid;
    *name = x->name;
    *t0 = x->meta ? 0 : x->t0 - t->origin;
    *t1 = x->meta ? 0 : x->t1 - t->origin;
    return x->meta ? 1 : 0;
}
