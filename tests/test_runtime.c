/* MPI runtime oracle: on a (fsdp, fsdp_transpose, expert) mesh, every rank
 * cuts its shard of known global tensors by the layout algebra, gathers it
 * with the runtime (co-axis plan, and legacy with its blocking residual
 * gather), and checks the gathered buffer equals the global tensor's block;
 * then reduce-scatters rank-scaled gradients and checks the sums; then the
 * expert all-to-all. Then the compressed gathers (bf16, int8 with the
 * largest block each weight's shards hold): the gathered buffer equals, bit
 * for bit, the block of the global tensor converted by the naive twins
 * (convert, then gather), and the bytes on the wire are the fp32 gather's
 * halved (bf16) or quartered plus the scales (int8); and the gradient
 * transpose in bf16. All through the smoe_comm interface (comm.h): the
 * MPI runtime's (smoe_rt_comm), run under mpirun with a timeout, or, built
 * with TEST_COMM_LOCAL, the single-rank communicator's (no MPI) on a mesh
 * of one device, against the same oracles (and there, a wait that nothing
 * can end aborts after the communicator's timeout with exit 75, naming
 * what it waited for and the phase), or, built with TEST_COMM_VRANK, the
 * in-process ranks' (smoe_comm_vrank_new: a thread per rank, no MPI).
 * usage: test_runtime FSDP EXPERT [FSDP_TRANSPOSE] */
#define _GNU_SOURCE
#ifdef TEST_COMM_VRANK
#define CHECK_PER_THREAD /* each rank's thread counts its own checks */
#endif
#include "check.h"
#include "spec_text.h"
#include "wire_testlib.h"
#ifndef TEST_COMM_LOCAL
#include "smoe/runtime.h"
#endif
#include "smoe/comm.h"
#include "smoe/plan.h"
#include "smoe/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef TEST_COMM_VRANK
#include <pthread.h>
#define RANK_LOCAL _Thread_local /* every rank's thread has its own */
#else
#define RANK_LOCAL
#endif
#ifdef TEST_COMM_LOCAL
#include <sys/wait.h>
#include <unistd.h>
#endif

static RANK_LOCAL smoe_comm comm_;
static RANK_LOCAL const smoe_comm *cm;

typedef struct wcase {
    const char *spec; /* "fsdp,expert|-": dims separated by |, "-" = None */
    int rank;
    int64_t shape[4];
} wcase;

static int64_t numel(const int64_t *s, int r)
{
    int64_t n = 1;
    for (int d = 0; d < r; d++)
        n *= s[d];
    return n;
}

/* A routed-expert-like weight keeps a leading 'expert' on dim 0. */
static int keeps_expert(const smoe_pspec *s, const smoe_mesh *m)
{
    smoe_axes live = smoe_axes_live(&s->dim[0], m);
    return live.n > 0 && strcmp(live.ax[0], "expert") == 0;
}

/* Small integers from a tensor value: every partial sum of up to 4 ranks
 * of (rank + 1) times them is exact in bf16. */
static float small_of(float v) { return (float)((int64_t)v % 4 + 1); }

/* The gradient transpose in bf16: exact on small integers (the sums are
 * exact in bf16 whatever the order), within bf16's rounding on values that
 * are not (and then, when there is a reduction, not the fp32 result). */
static void reduce_bf16_case(const smoe_gather *g, int keep,
                             const char *what, const float *want, const float *shard,
                             double factor, const smoe_wgather_info *info)
{
    smoe_gather_exec x;
    smoe_err err;
    smoe_comm_gather *w = NULL;
    smoe_status s = smoe_gather_exec_of(g, keep, what, &x, &err);
    x.reduce_wire = SMOE_DT_BF16;
    if (!s)
        s = smoe_comm_gather_new(cm, &x, what, &w, &err);
    CHECKF(s == SMOE_OK, "%s bf16 reduce: %s", what, err.msg);
    if (s)
        return;
    int64_t n = info->gathered_numel, k = info->shard_numel;
    float *full = malloc(sizeof *full * (size_t)n), *scratch = malloc(sizeof *full * (size_t)n);
    float *gs = malloc(sizeof *gs * (size_t)k);
    int me = smoe_comm_rank(cm);
    int reduces = smoe_comm_size(cm) > 1 && (factor != me + 1 || info->reduce_axes > 0);
    for (int inexact = 0; inexact < 2; inexact++) {
        float scale = inexact ? 1.0f + 0x1p-9f : 1.0f;
        for (int64_t i = 0; i < n; i++)
            full[i] = small_of(want[i]) * (float)(me + 1) * scale;
        _Atomic int done = 0;
        smoe_comm_gather_reduce(cm, w, full, scratch, gs, &done, NULL);
        while (!done)
            smoe_comm_progress(cm);
        int ok = 1, differs = 0;
        for (int64_t j = 0; j < k; j++) {
            double exact = (double)small_of(shard[j]) * factor * (double)scale;
            if (!inexact)
                ok &= (double)gs[j] == exact;
            else
                ok &= fabs((double)gs[j] - exact) <= exact * 4 * 0x1p-8;
            differs |= (double)gs[j] != exact;
        }
        CHECKF(ok, "%s: rank %d bf16 reduce-scatter (%s values) differs", what, me,
               inexact ? "inexact" : "exact");
        if (inexact && reduces)
            CHECKF(differs, "%s: rank %d bf16 reduction gave the fp32 sums", what, me);
    }
    free(full);
    free(scratch);
    free(gs);
}

/* Gather one weight over `wire` (block: int8's) and check the buffer; the
 * gradient transpose too when the wire is fp32. Returns the bytes the
 * gather received on this rank (-1: the case did not run). */
static int64_t run_case(const smoe_mesh *m, const wcase *wc, int legacy, smoe_dtype wire,
                        int64_t block)
{
    smoe_pspec spec = spec_of(wc->spec);
    smoe_gather g;
    smoe_gather_compute(&spec, wc->shape, m, legacy ? SMOE_MODE_LEGACY : SMOE_MODE_COAXIS, 4,
                        &g);
    char what[160];
    snprintf(what, sizeof what, "%s %s %s", wc->spec, legacy ? "legacy" : "co-axis",
             smoe_dtype_name(wire));
    int keep = keeps_expert(&spec, m);
    smoe_comm_gather *w = NULL;
    smoe_err err;
    smoe_gather_exec x;
    smoe_status s = smoe_gather_exec_of(&g, keep, what, &x, &err);
    if (!s)
        s = smoe_gather_exec_set_wire(&x, &g, m, wire, block, what, &err);
    if (!s)
        s = smoe_comm_gather_new(cm, &x, what, &w, &err);
    CHECKF(s == SMOE_OK, "%s: %s", what, err.msg);
    if (s)
        return -1;
    smoe_wgather_info info;
    smoe_comm_gather_info(cm, w, &info);
    int64_t total = numel(wc->shape, wc->rank);
    float *G = malloc(sizeof *G * (size_t)total);
    /* fp32: integers (the reduce-scatter's sums are exact); compressed:
     * values not exact in bf16, in blocks of mixed scale */
    for (int64_t i = 0; i < total; i++)
        G[i] = wire == SMOE_DT_FP32 ? (float)(i + 1)
                                    : (float)(i + 1) * (1.0f + 0.0137f * (float)(i % 7)) *
                                          (i % 5 == 0 ? 0.01f : 1.0f);
    /* this rank's shard by the layout algebra */
    int64_t loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK];
    CHECK(smoe_layout_local(&spec, wc->shape, m, smoe_comm_coords(cm), loc, off, NULL) == SMOE_OK);
    CHECK_INT(numel(loc, wc->rank), info.shard_numel);
    float *shard = malloc(sizeof *shard * (size_t)info.shard_numel);
    smoe_layout_copy(wc->rank, wc->shape, loc, off, 4, G, shard, 0);
    /* expected gathered buffer: the global block of the kept axes */
    smoe_pspec kept;
    memset(&kept, 0, sizeof kept);
    kept.rank = wc->rank;
    if (keep) {
        kept.dim[0].n = 1;
        kept.dim[0].ax[0] = "expert";
    }
    int64_t bl[SMOE_MAX_RANK], bo[SMOE_MAX_RANK];
    CHECK(smoe_layout_local(&kept, wc->shape, m, smoe_comm_coords(cm), bl, bo, NULL) == SMOE_OK);
    CHECK_INT(numel(bl, wc->rank), info.gathered_numel);
    float *want = malloc(sizeof *want * (size_t)info.gathered_numel);
    float *Gw = malloc(sizeof *Gw * (size_t)total);
    memcpy(Gw, G, sizeof *G * (size_t)total);
    naive_wire(Gw, total, wire, block); /* convert, then gather */
    smoe_layout_copy(wc->rank, wc->shape, bl, bo, 4, Gw, want, 0);
    free(Gw);
    float *buf = calloc((size_t)info.gathered_numel, sizeof *buf);
    int64_t recv = 0;
    for (int rep = 0; rep < 2; rep++) { /* twice: persistent types are reusable */
        memset(buf, rep ? 0xff : 0, sizeof *buf * (size_t)info.gathered_numel);
        smoe_comm_ticket t;
        int64_t b0 = smoe_comm_stats_get(cm)->gather_bytes;
        smoe_comm_gather_start(cm, w, shard, buf, &t);
        double wait = 0;
        smoe_comm_gather_wait(cm, w, buf, &t, &wait);
        recv = smoe_comm_stats_get(cm)->gather_bytes - b0;
        int ok = memcmp(buf, want, sizeof *buf * (size_t)info.gathered_numel) == 0;
        CHECKF(ok, "%s: rank %d gathered buffer differs", what, smoe_comm_rank(cm));
    }
    if (wire != SMOE_DT_FP32) {
        free(G);
        free(shard);
        free(want);
        free(buf);
        return recv;
    }
    /* prefetched stages: one per dim the plan gathers */
    CHECK_INT(info.stages, g.n_gathered_dims);
    if (legacy && g.residual_ways > 1)
        CHECK(info.residual_stages > 0);
    /* reduce-scatter of rank-scaled gradients */
    int me = smoe_comm_rank(cm);
    float *full = malloc(sizeof *full * (size_t)info.gathered_numel);
    float *scratch = malloc(sizeof *scratch * (size_t)info.gathered_numel);
    float *gs = malloc(sizeof *gs * (size_t)info.shard_numel);
    for (int64_t i = 0; i < info.gathered_numel; i++)
        full[i] = want[i] * (float)(me + 1);
    /* the buffers sent free no later than the result is in */
    _Atomic int done = 0, sent = -1;
    smoe_comm_gather_reduce(cm, w, full, scratch, gs, &done, &sent);
    while (!done)
        smoe_comm_progress(cm);
    CHECKF(sent == 1, "%s: rank %d: the result in before its buffer was sent", what, me);
    /* every rank with the same kept coordinates contributed */
    double factor = 0;
    int ea = smoe_mesh_find(m, "expert");
    for (int q = 0; q < smoe_comm_size(cm); q++) {
        int64_t c[SMOE_MAX_AXES];
        smoe_mesh_coords(m, q, c);
        if (!keep || ea < 0 || c[ea] == smoe_comm_coords(cm)[ea])
            factor += q + 1;
    }
    int ok = 1;
    for (int64_t i = 0; i < info.shard_numel; i++)
        if ((double)gs[i] != (double)shard[i] * factor)
            ok = 0;
    CHECKF(ok, "%s: rank %d reduce-scattered gradient differs", what, me);
    reduce_bf16_case(&g, keep, what, want, shard, factor, &info);
    free(G);
    free(shard);
    free(want);
    free(buf);
    free(full);
    free(scratch);
    free(gs);
    return recv;
}

/* Every case through bf16 and int8 (the largest block its shards hold;
 * none: the plan must have refused every block, and the case is skipped),
 * against the fp32 gather's bytes. */
static void run_wire_cases(const smoe_mesh *m, const wcase *wc, int legacy)
{
    int64_t f = run_case(m, wc, legacy, SMOE_DT_FP32, 0);
    int64_t b = run_case(m, wc, legacy, SMOE_DT_BF16, 0);
    CHECKF(b == f / 2, "%s: bf16 gather received %lld bytes, fp32 %lld", wc->spec,
           (long long)b, (long long)f);
    static const int64_t blocks[] = { 32, 16, 8, 4, 3, 2 };
    smoe_pspec spec = spec_of(wc->spec);
    smoe_gather g;
    smoe_gather_compute(&spec, wc->shape, m, legacy ? SMOE_MODE_LEGACY : SMOE_MODE_COAXIS, 4,
                        &g);
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++) {
        smoe_err err;
        if (smoe_gather_check_blocks(&g, m, blocks[k], wc->spec, &err))
            continue;
        int64_t q = run_case(m, wc, legacy, SMOE_DT_INT8, blocks[k]);
        CHECKF(q == f / 4 / blocks[k] * (blocks[k] + 4), "%s: int8/%lld gather received %lld "
               "bytes, fp32 %lld", wc->spec, (long long)blocks[k], (long long)q, (long long)f);
        return;
    }
}

static void test_ep(void)
{
    smoe_ep_comm c = smoe_comm_ep(cm);
    int n = c.size;
    int64_t *sc = calloc((size_t)n * 2, sizeof *sc), *rc = calloc((size_t)n * 2, sizeof *rc);
    /* send (rank + p + 1) rows of 3 floats to peer p; 2 counts per peer */
    int64_t srows[64], rrows[64], stot = 0, rtot = 0;
    for (int p = 0; p < n; p++) {
        srows[p] = c.rank + p + 1;
        sc[2 * p] = srows[p];
        sc[2 * p + 1] = 100 * c.rank + p;
        stot += srows[p];
    }
    c.exchange_counts(c.ctx, sc, rc, 2);
    int ok = 1;
    for (int p = 0; p < n; p++) {
        rrows[p] = rc[2 * p];
        ok &= rc[2 * p] == p + c.rank + 1 && rc[2 * p + 1] == 100 * p + c.rank;
        rtot += rrows[p];
    }
    CHECKF(ok, "expert counts exchange");
    float *s = malloc(sizeof *s * (size_t)(stot * 3 + 1)), *r = malloc(sizeof *r * (size_t)(rtot * 3 + 1));
    int64_t k = 0;
    for (int p = 0; p < n; p++)
        for (int64_t i = 0; i < srows[p] * 3; i++)
            s[k++] = (float)(1000 * c.rank + 10 * p) + (float)i;
    c.alltoallv(c.ctx, s, srows, r, rrows, 3);
    k = 0;
    ok = 1;
    for (int p = 0; p < n; p++)
        for (int64_t i = 0; i < rrows[p] * 3; i++)
            ok &= r[k++] == (float)(1000 * p + 10 * c.rank) + (float)i;
    CHECKF(ok, "expert all-to-all rows");
    free(sc);
    free(rc);
    free(s);
    free(r);
}

#ifdef TEST_COMM_LOCAL
/* Nothing is ever in flight on one rank: a wait that is still waiting
 * ends the process after the timeout (in a child, its stderr read back). */
static void test_local_timeout(const smoe_mesh *m)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        alarm(60); /* a wait that never ends fails the check below */
        smoe_comm c;
        smoe_err err;
        if (smoe_comm_local_new(m, 0.05, &c, &err))
            _exit(99);
        smoe_comm_set_phase(&c, "phase %d", 7);
        smoe_comm_wait w = smoe_comm_wait_begin("a test event");
        for (;;)
            smoe_comm_wait_step(&c, &w);
    }
    close(fds[1]);
    char buf[2048];
    size_t got = 0;
    ssize_t n;
    while (got + 1 < sizeof buf && (n = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = 0;
    close(fds[0]);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == SMOE_EXIT_TIMEOUT, "wait status %d", st);
    CHECKF(strstr(buf, "rank 0") && strstr(buf, "a test event") && strstr(buf, "phase 7"),
           "the timeout's message: %s", buf);
}
#endif

/* One rank's checks on the mesh m over comm_; every rank's counts summed
 * into counts. */
static void rank_checks(const smoe_mesh *m, double counts[2])
{
    cm = &comm_;
    static const wcase cases[] = {
        { "fsdp,expert|-", 2, { 16, 6 } },
        { "fsdp,fsdp_transpose,expert|-", 2, { 16, 6 } },
        { "-|-|fsdp,expert", 3, { 3, 4, 8 } },
        { "expert|fsdp|-", 3, { 4, 8, 6 } },
        { "expert|-|fsdp", 3, { 4, 6, 8 } },
        { "expert,fsdp|-", 2, { 8, 4 } },
        { "fsdp,expert|fsdp_transpose", 2, { 8, 6 } },
        { "-|-", 2, { 5, 3 } },
        { "fsdp|-", 2, { 8, 3 } },
        { "fsdp|expert", 2, { 8, 4 } },
        { "expert|-", 2, { 8, 4 } },
        { "fsdp,fsdp_transpose|expert", 2, { 8, 4 } },
        { "fsdp|expert", 2, { 8, 64 } },
        { "-|fsdp,expert", 2, { 6, 128 } },
        { "expert|-|fsdp,fsdp_transpose", 3, { 4, 3, 64 } },
    };
    for (int legacy = 0; legacy < 2; legacy++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_wire_cases(m, &cases[i], legacy);
    test_ep();
#ifdef TEST_COMM_LOCAL
    test_local_timeout(m);
#endif
    /* every rank reports */
    counts[0] = check_pass_;
    counts[1] = check_fail_;
    smoe_comm_allreduce_sum_f64(cm, counts, 2);
}

#ifdef TEST_COMM_VRANK
typedef struct rank_job {
    const smoe_mesh *m;
    smoe_comm comm;
    double counts[2];
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    comm_ = j->comm;
    rank_checks(j->m, j->counts);
    return NULL;
}

/* A thread per rank of m; rank 0's summed counts. */
static int run_vrank(const smoe_mesh *m, double counts[2])
{
    int n = (int)smoe_mesh_devices(m);
    smoe_comm *c = calloc((size_t)n, sizeof *c);
    rank_job *job = calloc((size_t)n, sizeof *job);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    smoe_comm_vrank_opts o = { 20, 0, 0 };
    smoe_err err;
    if (!c || !job || !th || smoe_comm_vrank_new(m, &o, c, &err)) {
        fprintf(stderr, "mesh: %s\n", c && job && th ? err.msg : "out of memory");
        return 1;
    }
    for (int r = 0; r < n; r++) {
        job[r] = (rank_job){ m, c[r], { 0, 0 } };
        pthread_create(&th[r], NULL, rank_main, &job[r]);
    }
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    counts[0] = job[0].counts[0];
    counts[1] = job[0].counts[1];
    smoe_comm_vrank_free(c, n);
    free(c);
    free(job);
    free(th);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    smoe_err err;
    int64_t F = argc > 1 ? atoll(argv[1]) : 2, E = argc > 2 ? atoll(argv[2]) : 2;
    int64_t T = argc > 3 ? atoll(argv[3]) : 1;
    smoe_mesh m = { 3, { "fsdp", "fsdp_transpose", "expert" }, { F, T, E }, { 0 } };
    double counts[2];
#ifdef TEST_COMM_VRANK
    (void)err;
    if (run_vrank(&m, counts))
        return 1;
    printf("%d passed, %d failed\n", (int)counts[0], (int)counts[1]);
    return counts[1] > 0 ? 1 : 0;
#else
#ifdef TEST_COMM_LOCAL
    if (smoe_comm_local_new(&m, 20, &comm_, &err)) {
        fprintf(stderr, "mesh: %s\n", err.msg);
        return 1;
    }
#else
    smoe_rt *rt;
    if (smoe_rt_init(&argc, &argv, &rt, &err)) {
        fprintf(stderr, "init: %s\n", err.msg);
        return 1;
    }
    smoe_rt_opts o = { 0, 0 };
    if (smoe_rt_set_mesh(rt, &m, &o, &err)) {
        fprintf(stderr, "mesh: %s\n", err.msg);
        smoe_rt_finalize(rt);
        return 1;
    }
    comm_ = smoe_rt_comm(rt);
#endif
    rank_checks(&m, counts);
    int rank = smoe_comm_rank(cm);
#ifdef TEST_COMM_LOCAL
    smoe_comm_local_free(&comm_);
#else
    smoe_rt_finalize(rt);
#endif
    if (rank == 0)
        printf("%d passed, %d failed\n", (int)counts[0], (int)counts[1]);
    return counts[1] > 0 ? 1 : 0;
#endif
}
