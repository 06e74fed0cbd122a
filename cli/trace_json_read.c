/* Reading a trace back (a Chrome/Perfetto trace as --trace writes it: "X"
 * spans, process_name / thread_name metadata), one smoe_trace per process
 * row, and the per-layer compute that `smoe sim --profile` takes from it.
 * Needs only cJSON, core and sched, so the fuzz target compiles it in.
 *
 * The traceEvents array is parsed one event at a time (smoe_json_parse at
 * a position), so memory is the text and the spans kept, and an error
 * names the event's file:line:col, its index and key. Every number the
 * reader uses is range-checked: pid and tid are integers from 0 to
 * INT_MAX, an X span's ts and dur finite microseconds from 0 to a year. */
#include "cli.h"
#include "smoe/sched.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A span starts and lasts within a year of its trace's origin: smoe's runs
 * are far shorter, so a larger number is a corrupt one, not a time (the
 * messages say 3.1536e13). */
#define TRACE_MAX_US (365.0 * 86400 * 1e6)

typedef struct reader {
    const char *name, *text;
    size_t n, at; /* at: where the current event starts */
    int64_t i;    /* the current event's index in traceEvents */
    smoe_trace **t;
    int max, rows, pids[CLI_TRACE_ROWS];
    smoe_err *err;
} reader;

static smoe_status oom(reader *r)
{
    return smoe_err_in(r->err, SMOE_ENOMEM, r->name, "out of memory reading the file");
}

/* Text that is not JSON at pos: "file:line:col: not JSON (expected ...)". */
static smoe_status syntax(reader *r, size_t pos, const char *what)
{
    return smoe_err_at(r->err, SMOE_EINVAL, smoe_text_loc(r->name, r->text, r->text + pos),
                       "not JSON (expected %s)", what);
}

/* Error at the current event: "file:line:col: traceEvents[i].key: what". */
static smoe_status bad(reader *r, const char *key, const char *what)
{
    return smoe_err_at(r->err, SMOE_EINVAL, smoe_text_loc(r->name, r->text, r->text + r->at),
                       "traceEvents[%lld]%s%s: %s", (long long)r->i, key[0] ? "." : "", key,
                       what);
}

/* Member `key` of event e: an integer from 0 to INT_MAX (time 0) or
 * microseconds from 0 to TRACE_MAX_US (time 1); absent: def (< 0:
 * required). */
static smoe_status number(reader *r, const cJSON *e, const char *key, int time, double def,
                          double *out)
{
    static const char *const range[2] = { "an integer from 0 to 2147483647",
                                          "microseconds from 0 to a year, 3.1536e13" };
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!v && def >= 0)
        x = def;
    else if (!(x >= 0 && x <= (time ? TRACE_MAX_US : INT_MAX) && (time || x == floor(x)))) {
        char msg[160];
        if (cJSON_IsNumber(v))
            snprintf(msg, sizeof msg, "%g is out of range (expected %s)", x, range[time]);
        else
            snprintf(msg, sizeof msg, "expected %s", range[time]);
        return bad(r, key, msg);
    }
    *out = x;
    return SMOE_OK;
}

/* The row of process id pid (a new one while fewer than max); -1 past
 * max, -2 out of memory. */
static int row_of(reader *r, int pid)
{
    for (int i = 0; i < r->rows; i++)
        if (r->pids[i] == pid)
            return i;
    if (r->rows == r->max)
        return -1;
    r->t[r->rows] = smoe_trace_new(pid, 0);
    if (!r->t[r->rows])
        return -2;
    r->pids[r->rows] = pid;
    return r->rows++;
}

/* process_name / thread_name metadata (other names are ignored). */
static void meta(smoe_trace *t, const cJSON *e, const char *name, int lane)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(args, "name");
    if (!cJSON_IsString(an))
        return;
    if (strcmp(name, "process_name") == 0)
        smoe_trace_process(t, an->valuestring);
    else if (strcmp(name, "thread_name") == 0)
        smoe_trace_lane(t, lane, an->valuestring);
}

/* One element of traceEvents: M and X events are kept, others ignored. */
static smoe_status event(reader *r, const cJSON *e)
{
    if (!cJSON_IsObject(e))
        return bad(r, "", "expected an object");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    int span = cJSON_IsString(ph) && strcmp(ph->valuestring, "X") == 0;
    if (!span && !(cJSON_IsString(ph) && strcmp(ph->valuestring, "M") == 0))
        return SMOE_OK;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    double pid, tid, ts = 0, dur = 0;
    smoe_status s;
    if (!cJSON_IsString(name))
        return bad(r, "name", "expected a string");
    if ((s = number(r, e, "pid", 0, -1, &pid)) || (s = number(r, e, "tid", 0, 0, &tid)))
        return s;
    if (span && ((s = number(r, e, "ts", 1, -1, &ts)) || (s = number(r, e, "dur", 1, -1, &dur))))
        return s;
    int row = row_of(r, (int)pid);
    if (row == -2)
        return oom(r);
    if (row < 0) /* past the rows asked for */
        return SMOE_OK;
    if (span)
        smoe_trace_span(r->t[row], (int)tid, name->valuestring, ts * 1e-6, (ts + dur) * 1e-6);
    else
        meta(r->t[row], e, name->valuestring, (int)tid);
    return SMOE_OK;
}

static size_t skip_space(const reader *r, size_t i)
{
    while (i < r->n && (r->text[i] == ' ' || r->text[i] == '\t' || r->text[i] == '\r' ||
                        r->text[i] == '\n'))
        i++;
    return i;
}

/* Expect one of the characters `any` at *pos (whitespace skipped); the
 * one found, past it, or 0 with the error set. */
static char expect(reader *r, size_t *pos, const char *any)
{
    *pos = skip_space(r, *pos);
    char c = *pos < r->n ? r->text[*pos] : 0;
    if (c && strchr(any, c)) {
        (*pos)++;
        return c;
    }
    syntax(r, *pos, any);
    return 0;
}

/* The elements of an array or the members of an object, after its
 * opening bracket and up to `close`, each read by item(). */
typedef smoe_status (*item_fn)(reader *r, size_t *pos, int *found);
static smoe_status list(reader *r, size_t *pos, char close, item_fn item, int *found)
{
    const char seps[3] = { ',', close, 0 };
    size_t after = skip_space(r, *pos);
    if (after < r->n && r->text[after] == close) {
        *pos = after + 1;
        return SMOE_OK;
    }
    for (;;) {
        smoe_status s = item(r, pos, found);
        if (s)
            return s;
        char c = expect(r, pos, seps);
        if (c != ',')
            return c ? SMOE_OK : SMOE_EINVAL;
    }
}

/* The next element of traceEvents. */
static smoe_status one_event(reader *r, size_t *pos, int *found)
{
    (void)found;
    cJSON *e;
    r->i++;
    r->at = skip_space(r, *pos);
    smoe_status s = smoe_json_parse(r->name, r->text, r->n, pos, NULL, &e, r->err);
    if (!s)
        s = event(r, e);
    cJSON_Delete(e);
    return s;
}

/* The traceEvents array at *pos, one event at a time. */
static smoe_status events(reader *r, size_t *pos)
{
    if (!expect(r, pos, "["))
        return SMOE_EINVAL;
    r->i = -1;
    return list(r, pos, ']', one_event, NULL);
}

/* A member of the top-level object: the first traceEvents read as events,
 * every other value parsed and dropped. *found: traceEvents seen. */
static smoe_status one_member(reader *r, size_t *pos, int *found)
{
    cJSON *key, *v = NULL;
    size_t at = skip_space(r, *pos);
    smoe_status s = smoe_json_parse(r->name, r->text, r->n, pos, NULL, &key, r->err);
    if (s)
        return s;
    int is_key = cJSON_IsString(key);
    int ev = is_key && strcmp(key->valuestring, "traceEvents") == 0 && !*found;
    cJSON_Delete(key);
    if (!is_key)
        return syntax(r, at, "a member name");
    if (!expect(r, pos, ":"))
        return SMOE_EINVAL;
    s = ev ? events(r, pos) : smoe_json_parse(r->name, r->text, r->n, pos, NULL, &v, r->err);
    cJSON_Delete(v);
    *found |= ev;
    return s;
}

/* The document: {"traceEvents": [...], ...} or a bare array of events. */
static smoe_status document(reader *r)
{
    size_t pos = 0;
    int found = 0;
    smoe_status s = SMOE_EINVAL;
    char c = expect(r, &pos, "{[");
    if (c == '[') {
        pos--; /* events() takes the bracket */
        found = 1;
        s = events(r, &pos);
    } else if (c == '{') {
        s = list(r, &pos, '}', one_member, &found);
    }
    if (!s && skip_space(r, pos) < r->n)
        s = syntax(r, skip_space(r, pos), "the end of the file");
    if (!s && !found)
        s = smoe_err_in(r->err, SMOE_EINVAL, r->name, "not a trace written by --trace "
                        "(no traceEvents array)");
    for (int i = 0; !s && i < r->rows; i++)
        if (smoe_trace_lost(r->t[i]))
            s = oom(r);
    return s;
}

smoe_status cli_trace_parse_text(const char *text, size_t n, const char *name, smoe_trace **t,
                                 int max, int *rows, smoe_err *err)
{
    reader r = { name, text, n, 0, 0, t, max < CLI_TRACE_ROWS ? max : CLI_TRACE_ROWS, 0,
                 { 0 }, err };
    smoe_status s = document(&r);
    if (s) {
        for (int i = 0; i < r.rows; i++)
            smoe_trace_free(t[i]);
        r.rows = 0;
    }
    *rows = r.rows;
    return s;
}

/* ---- per-layer compute: a layer's span less the expert exchanges inside
 * it (the simulator adds its own), in O(n log n) of a row's spans ---- */

#define LAYER_SAMPLES 4096 /* the median of a kind's first spans */

typedef struct span {
    double t0, t1;
    int pass, kind; /* a layer's (pass 0 fwd, 1 bwd; kind 0 dense, 1 moe) */
} span;

static int is_exchange(const char *name)
{
    return strncmp(name, "A2A", 3) == 0 || strncmp(name, "expert exchange", 15) == 0;
}

/* "fwd L<n> dense|moe" -> pass and kind; 0 if name is no layer's span. */
static int layer_of(const char *name, int *pass, int *kind)
{
    char p[8], k[16];
    if (sscanf(name, "%3s L%*d %15s", p, k) != 2)
        return 0;
    *pass = strcmp(p, "fwd") == 0 ? 0 : strcmp(p, "bwd") == 0 ? 1 : -1;
    *kind = strcmp(k, "dense") == 0 ? 0 : strcmp(k, "moe") == 0 ? 1 : -1;
    return *pass >= 0 && *kind >= 0;
}

static int by_t0_desc(const void *a, const void *b)
{
    double x = ((const span *)a)->t0, y = ((const span *)b)->t0;
    return x > y ? -1 : x < y;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Index of the first of ys[0..n) (ascending) above y (or_equal: at or
 * above y). */
static size_t bound(const double *ys, size_t n, double y, int or_equal)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (or_equal ? ys[mid] < y : ys[mid] <= y)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* d[i] = layer i's length less the exchanges x with x.t0 >= its t0 and
 * x.t1 <= its t1: layers and exchanges by start, latest first; each
 * exchange enters a Fenwick tree of durations by its end before the
 * layers that start at or before it are asked for the sum up to their
 * end. ys: the exchanges' ends sorted; tree: nx doubles, zeroed. */
static void less_exchanges(span *ly, size_t nl, span *x, size_t nx, const double *ys,
                           double *tree, double *d)
{
    qsort(ly, nl, sizeof *ly, by_t0_desc);
    qsort(x, nx, sizeof *x, by_t0_desc);
    size_t j = 0;
    for (size_t i = 0; i < nl; i++) {
        for (; j < nx && x[j].t0 >= ly[i].t0; j++)
            for (size_t k = bound(ys, nx, x[j].t1, 1) + 1; k <= nx; k += k & (~k + 1))
                tree[k - 1] += x[j].t1 - x[j].t0;
        double in = 0;
        for (size_t k = bound(ys, nx, ly[i].t1, 0); k > 0; k -= k & (~k + 1))
            in += tree[k - 1];
        d[i] = ly[i].t1 - ly[i].t0 - in;
    }
}

/* Row t's layer spans (while their kind has fewer than LAYER_SAMPLES in
 * count) into v[pass][kind], each less the exchanges inside it. The spans
 * of one lane: a device's kernels when the row has them (smoe train on a
 * device: the compute lane's spans are the host's time to enqueue), else
 * the compute lane's. */
static smoe_status row_layers(const smoe_trace *t, double *v[2][2], int count[2][2],
                              smoe_err *err)
{
    int tid, p, k, take[2][2];
    double t0, t1;
    const char *nm;
    size_t nl = 0, nx = 0;
    int lane = SMOE_LANE_COMPUTE;
    for (int64_t i = 0; smoe_trace_event(t, i, &tid, &t0, &t1, &nm) >= 0; i++)
        if (smoe_trace_event(t, i, &tid, &t0, &t1, &nm) == 0 && tid == SMOE_LANE_DEVICE &&
            layer_of(nm, &p, &k))
            lane = SMOE_LANE_DEVICE;
    for (int64_t i = 0; smoe_trace_event(t, i, &tid, &t0, &t1, &nm) >= 0; i++)
        if (smoe_trace_event(t, i, &tid, &t0, &t1, &nm) == 0) {
            nl += tid == lane && layer_of(nm, &p, &k) != 0;
            nx += is_exchange(nm) != 0;
        }
    size_t bytes = (nl + nx) * sizeof(span) + (nl + 2 * nx) * sizeof(double);
    span *ly = smoe_malloc(bytes), *x = ly + nl;
    if (!ly)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace's layers");
    double *ys = (double *)(x + nx), *tree = ys + nx, *d = tree + nx;
    memcpy(take, count, sizeof take);
    nl = nx = 0;
    for (int64_t i = 0; smoe_trace_event(t, i, &tid, &t0, &t1, &nm) >= 0; i++) {
        if (smoe_trace_event(t, i, &tid, &t0, &t1, &nm) != 0)
            continue;
        if (tid == lane && layer_of(nm, &p, &k) && take[p][k] < LAYER_SAMPLES) {
            take[p][k]++;
            ly[nl++] = (span){ t0, t1, p, k };
        } else if (is_exchange(nm)) {
            ys[nx] = t1;
            tree[nx] = 0;
            x[nx++] = (span){ t0, t1, 0, 0 };
        }
    }
    qsort(ys, nx, sizeof *ys, cmp_double);
    less_exchanges(ly, nl, x, nx, ys, tree, d);
    for (size_t i = 0; i < nl; i++)
        v[ly[i].pass][ly[i].kind][count[ly[i].pass][ly[i].kind]++] = d[i] > 0 ? d[i] : 0;
    smoe_free(ly);
    return SMOE_OK;
}

smoe_status cli_trace_layers(smoe_trace *const *t, int n, double med[2][2], int count[2][2],
                             smoe_err *err)
{
    double *all = smoe_malloc(4 * LAYER_SAMPLES * sizeof(double)), *v[2][2];
    if (!all)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory for the trace's layers");
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            v[p][k] = all + (2 * p + k) * LAYER_SAMPLES;
            count[p][k] = 0;
            med[p][k] = 0;
        }
    smoe_status s = SMOE_OK;
    for (int r = 0; r < n && !s; r++)
        s = row_layers(t[r], v, count, err);
    for (int p = 0; p < 2 && !s; p++)
        for (int k = 0; k < 2; k++)
            if (count[p][k]) {
                qsort(v[p][k], (size_t)count[p][k], sizeof(double), cmp_double);
                med[p][k] = v[p][k][count[p][k] / 2];
            }
    smoe_free(all);
    return s;
}
