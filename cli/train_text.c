/* `smoe train`: the text summary rank 0 prints at the end. Times are the
 * median and quartiles of each schedule's steps (with --compare, after the
 * first round, which warms caches and buffers); a difference between two
 * schedules smaller than their spread is printed as within the noise. */
#include "cli.h"
#include "smoe/runtime.h"
#include "smoe/train.h"

#include <math.h>
#include <string.h>

static const char *const k_labels[3] = { "no-prefetch", "prefetch", "legacy" };

const char *train_mode_label(int mode, const cli_runs *runs)
{
    if (mode < 0 || mode >= runs->n)
        return "";
    return runs->compare ? k_labels[mode] : runs->key[mode];
}

const char *train_mode_key(int mode)
{
    static const char *const keys[3] = { "no_prefetch", "prefetch", "legacy" };
    return mode >= 0 && mode < 3 ? keys[mode] : "run";
}

int64_t train_warmup_steps(const smoe_train_result *r, const cli_runs *runs)
{
    /* the first round of the interleaved schedules, if more remain */
    return runs->n && r->nsteps > 2 * runs->n ? runs->n : 0;
}

static void cell(char *buf, size_t n, const smoe_train_stat *t)
{
    snprintf(buf, n, "%.2f [%.2f-%.2f]", t->median, t->p25, t->p75);
}

static void row(const char *name, const smoe_train_summary *s)
{
    char a[48], b[48], c[48], d[48], e[48], g[32];
    cell(a, sizeof a, &s->step_ms);
    cell(b, sizeof b, &s->exposed_gather_ms);
    cell(c, sizeof c, &s->residual_ms);
    cell(d, sizeof d, &s->a2a_ms);
    cell(e, sizeof e, &s->compute_ms);
    printf("%-12s %5lld  %-24s %-22s %-20s %-22s %-24s %12s\n", name, (long long)s->nsteps, a, b,
           c, d, e, cli_fmt_bytes((double)s->peak_gathered_bytes, g, sizeof g));
}

/* "a -> b ms/step (+x%)" and whether the change is beyond the spread. */
static void verdict(const char *what, const smoe_train_stat *x, const smoe_train_stat *y)
{
    double diff = y->median - x->median;
    double noise = fmax(x->p75 - x->p25, y->p75 - y->p25);
    char rel[32] = "";
    if (x->median >= 0.5)
        snprintf(rel, sizeof rel, " (%+.1f%%)", 100.0 * diff / x->median);
    printf("  %s %.2f -> %.2f ms/step%s: %s\n", what, x->median, y->median, rel,
           fabs(diff) <= noise ? "within the noise (the difference is smaller than the "
                                 "interquartile range of the steps)"
                               : "beyond the noise");
}

/* Where the run started and where its checkpoint went. */
static void print_resume(const smoe_train_opts *o, const smoe_train_result *r)
{
    if (r->resume_note[0])
        printf("\n%s\n", r->resume_note);
    if (o->resume && r->resumed_from[0])
        printf("\nresumed from %s (steps %lld..%lld run here)\n", r->resumed_from,
               (long long)r->first_step + 1, (long long)o->steps);
    else if (o->resume)
        printf("\nno checkpoint in %s: started from step 0\n", o->ckpt_dir);
    for (int i = 0; i < r->nchanges; i++)
        printf("%sconfig changed since the checkpoint: %s: %s -> %s\n", i ? "" : "\n",
               r->changes[i].key, r->changes[i].from, r->changes[i].to);
    if (o->ckpt_dir)
        printf("checkpoint: %s/step_%08lld (LATEST)\n", o->ckpt_dir, (long long)o->steps);
}

/* --compare's verdicts: sm[0] no prefetch, sm[1] prefetch, sm[2] legacy. */
static void print_compare(const smoe_train_summary *sm)
{
    const smoe_train_summary *np = &sm[0], *pf = &sm[1], *lg = &sm[2];
    double hidden = np->exposed_gather_ms.median > 0
                        ? 1 - pf->exposed_gather_ms.median / np->exposed_gather_ms.median
                        : 0;
    printf("\nprefetch vs no-prefetch: %.1f%% of the exposed all-gather wait hidden\n",
           100.0 * hidden);
    verdict("exposed all-gather wait", &np->exposed_gather_ms, &pf->exposed_gather_ms);
    verdict("step time", &np->step_ms, &pf->step_ms);
    printf("legacy vs prefetch: %.2f ms/step in un-prefetched residual gathers\n",
           lg->residual_ms.median);
    verdict("exposed all-gather wait", &pf->exposed_gather_ms, &lg->exposed_gather_ms);
    verdict("step time", &pf->step_ms, &lg->step_ms);
    printf("\nterms: exposed AG = time a rank is blocked waiting for FSDP all-gathers of "
           "weights; residual = the\n"
           "legacy plan's second, un-prefetched all-gather over the co-axes (expert, "
           "context) before use;\n"
           "a2a = the expert all-to-all (tokens to the ranks owning their experts); "
           "compute = model kernels;\n"
           "peak gathered = the most gathered-weight and gradient buffer bytes held at "
           "once. On one host a\n"
           "gather is a memcpy on the cores that compute, so prefetch moves its cost into "
           "compute rather than\n"
           "hiding it; only a transfer limited by a link can hide (see bench/README.md, "
           "overlap benchmark).\n");
}

void print_result(const smoe_train_opts *o, smoe_rt *rt, const smoe_train_result *r,
                  const cli_runs *runs, int depth)
{
    print_resume(o, r);
    printf("\nBLAS core %s, %lld parameters, %lld tokens per step, params sha256 %s\n",
           r->blas.corename, (long long)r->params, (long long)r->tokens_per_step,
           r->params_sha256);
    printf("recipe: %s\n", r->recipe);
    int64_t skip = train_warmup_steps(r, runs);
    printf("\nper step, median [25th-75th percentile] over the steps of each schedule%s:\n",
           skip ? " after the first round (warm-up)" : "");
    printf("%-12s %5s  %-24s %-22s %-20s %-22s %-24s %12s\n", "schedule", "steps", "step ms",
           "exposed AG ms", "residual ms", "a2a ms", "compute ms", "peak gathered");
    smoe_train_summary sm[8];
    int n = runs->n ? runs->n : 1;
    for (int i = 0; i < n; i++) {
        smoe_train_summarize(r, runs->n ? i : -1, skip, &sm[i]);
        row(runs->n ? train_mode_label(i, runs) : (runs->legacy ? "legacy" : "co-axis"), &sm[i]);
    }
    for (int i = 0; runs->device && strcmp(runs->device, "cpu") != 0 && i < n; i++)
        printf("%s on the device: step %.2f ms, the model calls' kernels %.2f ms (medians)\n",
               runs->n ? train_mode_label(i, runs) : "the run", sm[i].device_step_ms.median,
               sm[i].device_compute_ms.median);
    printf("last loss %.4f (loss %.4f at the first step); peak RSS per rank %.1f MiB\n",
           r->nsteps ? r->steps[r->nsteps - 1].loss : 0.0, r->nsteps ? r->steps[0].loss : 0.0,
           (double)r->peak_rss_bytes / 1048576.0);
    if (runs->compare)
        print_compare(sm);
    printf("\npeak gathered buffers per rank: forward %lld B, backward %lld B (largest layer "
           "%lld B; bound %d and %d layers at depth %d)\n",
           (long long)r->peak_gathered_fwd_bytes, (long long)r->peak_gathered_bwd_bytes,
           (long long)r->layer_gathered_bytes, depth + 1, depth + 2, depth);
    const smoe_train_mem *m = &r->peak_tracked;
    printf("tracked memory per rank at its peak: %lld B (parameters %lld, gradients %lld, "
           "optimizer %lld, gathered %lld, activations %lld, communication %lld)\n",
           (long long)r->peak_tracked_bytes, (long long)m->params, (long long)m->grads,
           (long long)m->optimizer, (long long)m->gathered, (long long)m->activations,
           (long long)m->comm);
    if (r->schedule_note[0])
        printf("schedule: %s; %lld gathers past the budget\n", r->schedule_note,
               (long long)r->budget_overruns);
    double mf = r->model_flops_per_step / (r->mean_compute_ms * 1e-3) / smoe_rt_size(rt) / 1e9;
    printf("model FLOP/s per rank in compute: %.2f GFLOP/s\n", mf);
    if (r->nsteps > 0) {
        const smoe_train_step *last = &r->steps[r->nsteps - 1];
        printf("bytes a rank sent in the last step (the most of any rank; %s): within its "
               "host %lld, to other hosts %lld\n", smoe_rt_slices_note(rt),
               (long long)last->host_bytes, (long long)last->link_bytes);
    }
}

/* --compare-exchange: the all-to-all run (r[0]) and the ring run (r[1]),
 * each over all its steps after the first, and how far their losses are
 * apart (the two exchanges sum the same products in other orders). */
void print_exchange(const smoe_train_result *r)
{
    static const char *const name[2] = { "all-to-all", "ring" };
    smoe_train_summary sm[2];
    printf("\nper step, median [25th-75th percentile] over the steps after the first "
           "(two trainings, one after the other):\n");
    printf("%-12s %5s  %-24s %-22s %-20s %-22s %-24s %12s\n", "exchange", "steps", "step ms",
           "exposed AG ms", "residual ms", "a2a ms", "compute ms", "peak gathered");
    for (int i = 0; i < 2; i++) {
        smoe_train_summarize(&r[i], -1, r[i].nsteps > 1, &sm[i]);
        row(name[i], &sm[i]);
    }
    double worst = 0;
    for (int64_t k = 0; k < r[0].nsteps && k < r[1].nsteps; k++) {
        double a = r[0].steps[k].loss, b = r[1].steps[k].loss;
        worst = fmax(worst, fabs(a - b) / fmax(fabs(a), 1e-30));
    }
    printf("largest relative loss difference over the steps: %.2e\n", worst);
    printf("\nring vs all-to-all (a2a ms: the expert exchange; on the ring its "
           "all-gather and reduce-scatter):\n");
    verdict("expert exchange", &sm[0].a2a_ms, &sm[1].a2a_ms);
    verdict("step time", &sm[0].step_ms, &sm[1].step_ms);
}
