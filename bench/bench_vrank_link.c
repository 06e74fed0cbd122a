/* What prefetching hides when ranks share one device over a slow link:
 * N in-process ranks on one device (comm.h: smoe_comm_vrank_set_device),
 * their collectives held to a link of GBS GB/s (link_gbs), three runs
 * taking turns each round:
 *   compute:     no link, prefetch depth 1 (the step without any wait);
 *   no prefetch: the link, depth 0 (every gather waited for at its use);
 *   prefetch:    the link, depth 1.
 * Each run is 5 steps of test_vrank's runner (tests/vrank_testlib.h); the
 * first is a warm-up, the other 4 give the run's median step. The link
 * time of a step is the busiest rank's link bytes (comm.h) over GBS. It
 * prints, per round and as medians over the rounds: the three steps, the
 * link time, the exposed wait without and with prefetch (the step less
 * the compute step), the share of it prefetch hides, and the prefetch
 * step over max(compute, link); --out writes them as JSON. --link auto
 * (for a device whose speed is not known beforehand) first runs depth 1
 * over a link too fast to matter (10 TB/s), then picks the rate at which
 * the step's link time is 0.7 of that step. It asserts
 * nothing: a failed run's numbers are its own (the runner's checks print).
 * usage: bench_vrank_link CONFIG_DIR DATA_FILE [--device emul|cuda]
 *        [--model tiny|wide] [--mesh 2x2|fsdp4] [--link GBS|auto] [--rounds R]
 *        [--out FILE] */
#define _GNU_SOURCE
#include "bench_models.h"
#include "bench_stats.h"
#include "vrank_testlib.h"

#include <errno.h>


enum { RUN_COMPUTE, RUN_D0, RUN_D1, NRUNS, MAX_ROUNDS = 64 };

typedef struct opts {
    int device, wide, fsdp4, rounds;
    double gbs;
    const char *out;
} opts;

static void usage(const char *msg)
{
    fprintf(stderr, "bench_vrank_link: %s\nusage: bench_vrank_link CONFIG_DIR DATA_FILE "
            "[--device emul|cuda] [--model tiny|wide] [--mesh 2x2|fsdp4] [--link GBS|auto] "
            "[--rounds R] [--out FILE]\n", msg);
    exit(2);
}

static double number(const char *s, const char *flag, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi)) {
        char msg[200];
        snprintf(msg, sizeof msg, "argument '%s': '%s' is not a number in [%g, %g]", flag, s,
                 lo, hi);
        usage(msg);
    }
    return v;
}

static opts parse(int argc, char **argv)
{
    opts o = { VR_DEV_EMUL_THREADS, 0, 0, 3, 1.0, NULL };
    for (int i = 3; i < argc; i += 2) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage("a flag without its value");
        if (!strcmp(f, "--device") && (!strcmp(v, "emul") || !strcmp(v, "cuda")))
            o.device = !strcmp(v, "cuda") ? VR_DEV_CUDA : VR_DEV_EMUL_THREADS;
        else if (!strcmp(f, "--model") && (!strcmp(v, "tiny") || !strcmp(v, "wide")))
            o.wide = !strcmp(v, "wide");
        else if (!strcmp(f, "--mesh") && (!strcmp(v, "2x2") || !strcmp(v, "fsdp4")))
            o.fsdp4 = !strcmp(v, "fsdp4");
        else if (!strcmp(f, "--link"))
            o.gbs = !strcmp(v, "auto") ? 0 : number(v, f, 1e-3, 1e4);
        else if (!strcmp(f, "--rounds"))
            o.rounds = (int)number(v, f, 1, MAX_ROUNDS);
        else if (!strcmp(f, "--out"))
            o.out = v;
        else
            usage("unknown flag or value");
    }
    return o;
}

/* one run's median step (steps 2..STEPS) and link bytes; 0 when it failed */
static double one_run(const opts *o, int kind, double gbs, int64_t *link_bytes)
{
    run_spec sp = { .name = kind == RUN_COMPUTE ? "compute" : kind == RUN_D0 ? "no prefetch"
                                                                              : "prefetch",
                    .devices = 4, .kv = { o->fsdp4 ? "ici_fsdp_parallelism=4"
                                                   : "ici_data_parallelism=2" },
                    .depth = kind == RUN_D1 || kind == RUN_COMPUTE, .device = o->device,
                    .progress_thread = 1, .more = o->wide ? bench_wide_kv : NULL,
                    .link_gbs = kind == RUN_COMPUTE ? 0 : gbs };
    run_out x;
    run(&sp, &x);
    double v[STEPS];
    int64_t lb = 0;
    for (int s = 1; s < STEPS; s++) {
        v[s - 1] = x.rec[s].step_ms;
        lb = x.rec[s].link_bytes > lb ? x.rec[s].link_bytes : lb;
    }
    int ok = x.ok;
    out_free(&x);
    *link_bytes = lb;
    return ok ? bench_median(v, STEPS - 1) : 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage("CONFIG_DIR and DATA_FILE are required");
    cfgdir = argv[1];
    datafile = argv[2];
    opts o = parse(argc, argv);
    smoe_err err;
    smoe_dev probe;
    if (o.device == VR_DEV_CUDA && smoe_dev_cuda_open(0, &probe, &err)) {
        fprintf(stderr, "bench_vrank_link: %s\n", err.msg);
        return 1;
    }
    if (o.device == VR_DEV_CUDA)
        smoe_dev_close(&probe);
    if (smoe_train_data_load(datafile, 128, &data, &err)) {
        fprintf(stderr, "bench_vrank_link: %s\n", err.msg);
        return 1;
    }
    static double step[NRUNS][MAX_ROUNDS], link_ms[MAX_ROUNDS];
    if (o.gbs == 0) { /* auto: the link time 0.7 of the step */
        int64_t lb = 0;
        double ms = one_run(&o, RUN_D1, 1e4, &lb);
        o.gbs = ms > 0 && lb > 0 ? (double)lb / (0.7 * ms * 1e-3) / 1e9 : 1;
        printf("link: %lld bytes a step, a %.2f ms step: %.4g GB/s\n", (long long)lb, ms, o.gbs);
    }
    printf("round  compute_ms  no_prefetch_ms  prefetch_ms  link_ms\n");
    for (int r = 0; r < o.rounds; r++) {
        int64_t lb = 0, ignored;
        for (int k = 0; k < NRUNS; k++)
            step[k][r] = one_run(&o, k, o.gbs, k == RUN_D1 ? &lb : &ignored);
        link_ms[r] = (double)lb / (o.gbs * 1e9) * 1e3;
        printf("%5d  %10.2f  %14.2f  %11.2f  %7.2f\n", r + 1, step[RUN_COMPUTE][r],
               step[RUN_D0][r], step[RUN_D1][r], link_ms[r]);
    }
    double c = bench_median(step[RUN_COMPUTE], o.rounds);
    double d0 = bench_median(step[RUN_D0], o.rounds), d1 = bench_median(step[RUN_D1], o.rounds);
    double l = bench_median(link_ms, o.rounds);
    double e0 = d0 - c, e1 = d1 - c, hidden = e0 > 0 ? 1 - e1 / e0 : 0;
    double bound = c > l ? c : l, over = d1 / bound;
    printf("medians over %d rounds: compute %.2f ms, link %.2f ms, no prefetch %.2f ms, "
           "prefetch %.2f ms\nexposed wait: %.2f ms without prefetch, %.2f ms with; hidden "
           "%.1f %%; prefetch step / max(compute, link) = %.3f\n", o.rounds, c, l, d0, d1, e0,
           e1, 100 * hidden, over);
    int rc = check_report();
    if (o.out) {
        FILE *f = fopen(o.out, "w");
        int bad = !f || fprintf(f, "{\"device\": \"%s\", \"model\": \"%s\", \"mesh\": \"%s\", "
                                   "\"link_gbs\": %g, \"rounds\": %d, \"compute_ms\": %.4f, "
                                   "\"link_ms\": %.4f, \"no_prefetch_ms\": %.4f, "
                                   "\"prefetch_ms\": %.4f, \"hidden\": %.4f, "
                                   "\"prefetch_over_bound\": %.4f}\n",
                                o.device == VR_DEV_CUDA ? "cuda" : "emul", o.wide ? "wide" : "tiny",
                                o.fsdp4 ? "fsdp4" : "2x2", o.gbs, o.rounds, c, l, d0, d1, hidden,
                                over) < 0;
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad) {
            fprintf(stderr, "bench_vrank_link: cannot write %s: %s\n", o.out, strerror(errno));
            rc = 1;
        }
    }
    smoe_train_data_free(data);
    return rc;
}
