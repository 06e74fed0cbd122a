/* The trainer API (train.h) on one rank, over the single-rank communicator
 * (smoe_comm_local_new: no MPI linked): a run saved after 3 of 6 steps
 * through smoe_trainer_save and resumed by a new trainer through smoe_trainer_load is bitwise the
 * uninterrupted run (losses, lr, grad norms, parameter digest); a
 * top-level parameter gathered whole equals this rank's shard (one rank
 * holds it all), a stacked one holds the same values; the parameter table
 * names every weight by its MaxText path; out-of-range tokens, a save
 * without a checkpoint directory, an unknown parameter and zero steps are
 * refused with an error (and the trainer still steps after a refusal);
 * the schedule changed between steps (smoe_trainer_use_schedule over the
 * trainer's depths 3, 0, 2 and 1, an index past them refused) trains
 * bitwise as depth 1; a schedule built from the trainer's weights
 * (smoe_schedule_build, depth 2) trains bitwise as depth 1, and one
 * missing a weight is refused naming its file; a communicator
 * whose mesh is not the plan's is refused.
 * usage: test_trainer CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_setup.h"
#include "smoe/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static smoe_comm comm;
static smoe_config *cfg;
static smoe_plan *plan;
static smoe_train_data *data;

static smoe_train_opts opts(int64_t steps, const char *ckpt, int resume)
{
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = steps;
    o.seed = 7;
    o.schedules = setup_schedules; /* depth 1 */
    o.nschedules = 1;
    o.ckpt_dir = ckpt;
    o.resume = resume;
    return o;
}

/* Steps [from, to) of trainer t on the data's batches. */
static int run(smoe_trainer *t, int64_t from, int64_t to, smoe_train_step *rec)
{
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    smoe_err err;
    int bad = 0;
    for (int64_t s = from; s < to && !bad; s++) {
        bad = smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt, &err) ||
              smoe_trainer_step(t, tok, tgt, &rec[s], &err) != SMOE_OK;
        CHECKF(!bad, "step %lld: %s", (long long)s + 1, err.msg);
    }
    free(tok);
    free(tgt);
    return bad;
}

static void test_resume(const char *dir)
{
    smoe_err err;
    smoe_train_step a[6], b[6];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    char ha[65] = "", hb[65] = "", ckpt[4200];
    smoe_train_opts o = opts(6, NULL, 0);
    smoe_trainer *t;
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    run(t, 0, 6, a);
    CHECK(smoe_trainer_digest(t, NULL, ha, &err) == SMOE_OK);
    CHECK(a[5].loss < a[0].loss);
    /* a save without a directory is refused */
    CHECK(smoe_trainer_save(t, &err) == SMOE_EINVAL);
    smoe_trainer_free(t);

    snprintf(ckpt, sizeof ckpt, "%s/ckpt", dir);
    o = opts(6, ckpt, 0);
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    run(t, 0, 3, b);
    CHECK_INT(smoe_trainer_steps_done(t), 3);
    CHECKF(smoe_trainer_save(t, &err) == SMOE_OK, "%s", err.msg);
    smoe_trainer_free(t);

    o = opts(6, ckpt, 1);
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    smoe_train_result res;
    memset(&res, 0, sizeof res);
    CHECKF(smoe_trainer_load(t, &res, &err) == SMOE_OK, "%s", err.msg);
    CHECK_INT(res.first_step, 3);
    CHECK(res.resumed_from[0] != 0);
    CHECK_INT(smoe_trainer_steps_done(t), 3);
    run(t, 3, 6, b);
    CHECK(smoe_trainer_digest(t, NULL, hb, &err) == SMOE_OK);
    for (int s = 0; s < 6; s++)
        CHECKF(a[s].loss == b[s].loss && a[s].lr == b[s].lr && a[s].grad_norm == b[s].grad_norm,
               "step %d: loss %.17g vs %.17g", s + 1, a[s].loss, b[s].loss);
    CHECK_STR(ha, hb);
    smoe_train_result_free(&res);
    smoe_trainer_free(t);
}

static void test_params_and_refusals(void)
{
    smoe_err err;
    smoe_train_opts o = opts(2, NULL, 0);
    smoe_trainer *t;
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    int n;
    const smoe_trainer_param *p = smoe_trainer_params(t, &n);
    CHECK(n > 0);
    int top = smoe_trainer_param_find(t, "token_embedder/embedding");
    int stacked = -1;
    for (int i = 0; i < n; i++)
        if (p[i].layers > 1 && stacked < 0)
            stacked = i;
    CHECKF(top >= 0, "no token_embedder/embedding among %d parameters (first %s)", n,
           n ? p[0].name : "");
    CHECK(stacked >= 0);
    CHECK_INT(smoe_trainer_param_find(t, "no/such/weight"), -1);
    CHECK(smoe_trainer_gather(t, n, NULL, &err) == SMOE_EINVAL);
    smoe_train_step rec[2];
    run(t, 0, 1, rec);
    for (int k = 0; k < 2; k++) {
        int i = k ? stacked : top;
        if (i < 0)
            continue;
        float *full = malloc(sizeof *full * (size_t)p[i].numel);
        CHECK_INT(p[i].shard_numel, p[i].numel); /* one rank holds it all */
        CHECKF(smoe_trainer_gather(t, i, full, &err) == SMOE_OK, "%s", err.msg);
        double sf = 0, ss = 0;
        int same = 1, finite = 1;
        for (int64_t e = 0; e < p[i].numel; e++) {
            same &= full[e] == p[i].shard[e];
            finite &= isfinite(full[e]) != 0;
            sf += fabs((double)full[e]);
            ss += fabs((double)p[i].shard[e]);
        }
        CHECK(finite);
        if (k == 0)
            CHECKF(same, "%s gathered differs from its shard", p[i].name);
        else
            CHECKF(fabs(sf - ss) <= 1e-9 * ss, "%s: sum |x| %.17g vs %.17g", p[i].name, sf, ss);
        free(full);
    }
    /* tokens outside the vocabulary: refused, nothing stepped */
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tok = calloc((size_t)T, sizeof *tok), *tgt = calloc((size_t)T, sizeof *tgt);
    tok[T - 1] = (int32_t)mc->vocab;
    CHECK(smoe_trainer_step(t, tok, tgt, &rec[1], &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "outside") != NULL, "%s", err.msg);
    tok[T - 1] = 0;
    tgt[0] = -1;
    CHECK(smoe_trainer_step(t, tok, tgt, &rec[1], &err) == SMOE_EINVAL);
    CHECK_INT(smoe_trainer_steps_done(t), 1);
    tgt[0] = 0;
    CHECK(smoe_trainer_step(t, tok, tgt, &rec[1], &err) == SMOE_OK);
    CHECK_INT(smoe_trainer_steps_done(t), 2);
    free(tok);
    free(tgt);
    smoe_trainer_free(t);
    o = opts(0, NULL, 0);
    t = (smoe_trainer *)1;
    CHECK(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_EINVAL);
    CHECK(t == NULL);
    CHECKF(strstr(err.where, "--steps") != NULL, "%s: %s", err.where, err.msg);
    /* the communicator's ranks must form the plan's mesh */
    smoe_mesh other = { 1, { "data" }, { 1 }, { 0 } };
    smoe_comm c2;
    o = opts(2, NULL, 0);
    CHECK(smoe_comm_local_new(&other, 20, &c2, &err) == SMOE_OK);
    t = (smoe_trainer *)1;
    CHECK(smoe_trainer_new(cfg, plan, &c2, &o, data, &t, &err) == SMOE_EINVAL);
    CHECK(t == NULL);
    CHECKF(strstr(err.msg, "is not the plan's") != NULL, "%s", err.msg);
    smoe_comm_local_free(&c2);
    /* and the single-rank communicator runs one rank */
    smoe_mesh two = { 1, { "fsdp" }, { 2 }, { 0 } };
    CHECK(smoe_comm_local_new(&two, 20, &c2, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "2 devices") != NULL, "%s", err.msg);
}

/* The depth-1 run of 6 steps (the oracle of the schedule tests below),
 * and the trainer's layer weights by kind in its order (names into the
 * plan). */
static smoe_train_step ref[6];
static char ref_sha[65];
static const char *lw_names[2][64];
static int lw_n[2], n_layers, n_dense;

static void reference(void)
{
    smoe_err err;
    smoe_train_opts o = opts(6, NULL, 0);
    smoe_trainer *t;
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    run(t, 0, 6, ref);
    CHECK(smoe_trainer_digest(t, NULL, ref_sha, &err) == SMOE_OK);
    int n;
    const smoe_trainer_param *p = smoe_trainer_params(t, &n);
    for (int i = 0; i < n; i++) {
        int k = strstr(p[i].name, "moe_layers/") ? 1 : strstr(p[i].name, "dense_layers/") ? 0 : -1;
        if (k >= 0 && lw_n[k] < 64)
            lw_names[k][lw_n[k]++] = p[i].name;
    }
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    n_layers = (int)(mc->n_dense + mc->n_moe);
    n_dense = (int)mc->n_dense;
    smoe_trainer_free(t);
}

/* Steps b of trainer t (6 done) and its digest against the reference. */
static void check_as_reference(smoe_trainer *t, const smoe_train_step *b, const char *what)
{
    smoe_err err;
    char hb[65] = "";
    CHECK(smoe_trainer_digest(t, NULL, hb, &err) == SMOE_OK);
    for (int s = 0; s < 6; s++)
        CHECKF(ref[s].loss == b[s].loss && ref[s].grad_norm == b[s].grad_norm,
               "%s, step %d: loss %.17g vs %.17g", what, s + 1, b[s].loss, ref[s].loss);
    CHECKF(strcmp(ref_sha, hb) == 0, "%s: parameters %s vs %s", what, hb, ref_sha);
}

/* The schedule changed between steps through smoe_trainer_use_schedule:
 * the trainer's depths 3, 0, 2 and 1 train bitwise as depth 1 throughout
 * (gathers are exact copies; only their timing differs); an index past
 * them is refused and leaves the schedule as it was. */
static void test_use_schedule(void)
{
    smoe_err err;
    smoe_train_step b[6];
    memset(b, 0, sizeof b);
    static const int depths[4] = { 3, 0, 2, 1 };
    smoe_schedule *own[4] = { NULL };
    const smoe_schedule *sc[4];
    for (int i = 0; i < 4; i++) {
        CHECKF(smoe_schedule_for_plan(plan, depths[i], 0, &own[i], &err) == SMOE_OK, "%s",
               err.msg);
        sc[i] = own[i];
    }
    smoe_train_opts o = opts(6, NULL, 0);
    o.schedules = sc;
    o.nschedules = 4;
    smoe_trainer *t = NULL;
    if (own[3])
        CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s",
               err.msg);
    static const int use[6] = { 0, 1, 2, 2, 3, 3 };
    for (int s = 0; t && s < 6; s++) {
        CHECKF(smoe_trainer_use_schedule(t, use[s], &err) == SMOE_OK, "%s", err.msg);
        CHECK(smoe_trainer_use_schedule(t, 4, &err) == SMOE_EINVAL);
        run(t, s, s + 1, b);
    }
    if (t)
        check_as_reference(t, b, "depths 3 0 2 2 1 1");
    smoe_trainer_free(t);
    for (int i = 0; i < 4; i++)
        smoe_schedule_free(own[i]);
}

/* A uniform depth-2 schedule built by the sched module for the trainer's
 * layer weights trains bitwise as depth 1; one that names a weight too few
 * is refused naming its file. */
static void test_given_schedule(void)
{
    smoe_err err;
    smoe_train_step b[6];
    memset(b, 0, sizeof b);
    CHECK(lw_n[0] > 0 && lw_n[1] > 0);
    const char *const *nm[2] = { lw_names[0], lw_names[1] };
    smoe_schedule *sc = NULL, *few = NULL;
    CHECKF(smoe_schedule_build(n_layers, n_dense, lw_n, nm, 2, NULL, &sc, &err) == SMOE_OK, "%s",
           err.msg);
    if (!sc)
        return;
    smoe_train_opts o = opts(6, NULL, 0);
    const smoe_schedule *one[1] = { sc };
    o.schedules = one;
    o.schedule_name = "depth2.json";
    smoe_trainer *t;
    CHECKF(smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_OK, "%s", err.msg);
    if (t) {
        run(t, 0, 6, b);
        check_as_reference(t, b, "a given depth-2 schedule");
        smoe_trainer_free(t);
    }
    /* a schedule that misses a weight of the model */
    int nf[2] = { lw_n[0], lw_n[1] - 1 };
    CHECKF(smoe_schedule_build(n_layers, n_dense, nf, nm, 1, NULL, &few, &err) == SMOE_OK, "%s",
           err.msg);
    t = (smoe_trainer *)1;
    one[0] = few;
    CHECK(few && smoe_trainer_new(cfg, plan, &comm, &o, data, &t, &err) == SMOE_EINVAL);
    CHECK(t == NULL);
    CHECKF(strstr(err.where, "depth2.json") != NULL, "%s: %s", err.where, err.msg);
    smoe_schedule_free(few);
    smoe_schedule_free(sc);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_trainer CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    char tmpl[] = "/tmp/smoe_trainer_XXXXXX";
    if (trainer_setup("test_trainer", argv[1], argv[2], &cfg, &plan, &comm, &data, tmpl))
        return 1;
    test_resume(tmpl);
    test_params_and_refusals();
    reference();
    test_use_schedule();
    test_given_schedule();
    CHECK(trainer_teardown(tmpl, cfg, plan, &comm, data) == 0);
    return check_report();
}
