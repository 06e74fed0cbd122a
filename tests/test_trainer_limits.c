/* The trainer library at its edges, in process (one rank, no MPI): every
 * misuse is a status and a message, never an assertion or a crash.
 *   1. smoe_train_data_batch: a sequence longer than the text allows
 *      (seq + 2 bytes, as smoe_train_data_load checks) is refused, the
 *      longest one allowed reads inside the text (tokens are the file's
 *      bytes from an offset, targets the next ones); a negative batch and
 *      an empty sequence are refused;
 *   2. smoe_trainer_use_schedule: an index outside the trainer's
 *      schedules is refused, and the trainer still steps; no schedules,
 *      too many or a NULL one are refused by smoe_trainer_new; a legacy
 *      schedule (a property of the schedule) and a co-axis one take turns
 *      in one trainer;
 *   3. the learning rate past o->steps: a trainer stepped beyond its steps
 *      holds the schedule's final value (optax's cosine_decay_schedule
 *      clips its count; MaxText's loop never steps past the end) instead of
 *      climbing back up the cosine.
 * usage: test_trainer_limits CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXT 200 /* bytes of the hand-made data file */

static void test_batch(void)
{
    char path[] = "/tmp/smoe_limits_XXXXXX";
    unsigned char text[TEXT];
    for (int i = 0; i < TEXT; i++)
        text[i] = (unsigned char)(i * 7 + 3);
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, TEXT) == TEXT);
    if (fd >= 0)
        close(fd);
    smoe_train_data *d = NULL;
    smoe_err err;
    CHECKF(smoe_train_data_load(path, 16, &d, &err) == SMOE_OK, "%s", err.msg);
    unlink(path);
    if (!d)
        return;
    int32_t tok[2 * TEXT], tgt[2 * TEXT];
    /* the longest sequence: seq + 2 = TEXT bytes, two sequences */
    CHECKF(smoe_train_data_batch(d, 1, 0, 0, 2, TEXT - 2, tok, tgt, &err) == SMOE_OK, "%s",
           err.msg);
    for (int b = 0; b < 2; b++) {
        int start = -1;
        for (int s = 0; s < 2 && start < 0; s++)
            if (tok[b * (TEXT - 2)] == text[s])
                start = s;
        int same = start >= 0;
        for (int t = 0; same && t < TEXT - 2; t++)
            same = tok[b * (TEXT - 2) + t] == text[start + t] &&
                   tgt[b * (TEXT - 2) + t] == text[start + t + 1];
        CHECKF(same, "sequence %d: not the text's bytes from offset 0 or 1", b);
    }
    /* one token more than the text allows: refused, nothing written */
    tok[0] = -1;
    CHECK(smoe_train_data_batch(d, 1, 0, 0, 2, TEXT - 1, tok, tgt, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "seq 199: ") && strstr(err.msg, "the data holds 200"), "%s", err.msg);
    CHECK(tok[0] == -1);
    CHECK(smoe_train_data_batch(d, 1, 0, 0, 1, (int64_t)1 << 40, tok, tgt, &err) ==
          SMOE_EINVAL);
    CHECK(smoe_train_data_batch(d, 1, 0, 0, -1, 8, tok, tgt, &err) == SMOE_EINVAL);
    CHECK(smoe_train_data_batch(d, 1, 0, 0, 1, 0, tok, tgt, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "seq >= 1") != NULL, "%s", err.msg);
    smoe_train_data_free(d);
}

/* Steps [from, to) of t on the data's batches; 0 when all ran. */
static int run(smoe_trainer *t, const smoe_train_data *data, int64_t from, int64_t to,
               smoe_train_step *rec)
{
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq;
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    smoe_err err;
    int bad = !tok || !tgt;
    for (int64_t s = from; s < to && !bad; s++) {
        bad = smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt, &err) ||
              smoe_trainer_step(t, tok, tgt, &rec[s], &err);
        CHECKF(!bad, "step %lld: %s", (long long)s + 1, err.msg);
    }
    free(tok);
    free(tgt);
    return bad;
}

/* smoe_trainer_new refuses no schedules, too many and a NULL one. */
static void test_schedule_refusals(const tiny_rank *r)
{
    smoe_err err;
    smoe_train_opts o = tiny_opts(3);
    const smoe_schedule *many[SMOE_TRAIN_MAX_SCHEDULES + 1], *none[1] = { NULL };
    for (int i = 0; i <= SMOE_TRAIN_MAX_SCHEDULES; i++)
        many[i] = r->sched;
    for (int k = 0; k < 3; k++) {
        o.schedules = k == 2 ? none : many;
        o.nschedules = k == 0 ? 0 : k == 1 ? SMOE_TRAIN_MAX_SCHEDULES + 1 : 1;
        smoe_trainer *t = (smoe_trainer *)1;
        CHECK(smoe_trainer_new(r->cfg, r->plan, &r->comm, &o, NULL, &t, &err) == SMOE_EINVAL);
        CHECK(t == NULL);
        CHECKF(strstr(err.msg, k == 2 ? "schedule 0 is NULL" : "take turns in one run") != NULL,
               "%s", err.msg);
    }
}

/* Schedule refusals, then 5 steps of a trainer made for 3: its lr holds. */
static void test_modes_and_lr(const tiny_rank *r, const smoe_train_data *data)
{
    smoe_err err;
    smoe_train_opts o = tiny_opts(3);
    smoe_trainer *t = NULL;
    CHECKF(smoe_trainer_new(r->cfg, r->plan, &r->comm, &o, data, &t, &err) == SMOE_OK,
           "%s", err.msg);
    if (!t)
        return;
    CHECK(smoe_trainer_use_schedule(t, -1, &err) == SMOE_EINVAL);
    CHECKF(strstr(err.msg, "schedule -1: the trainer has 1") != NULL, "%s", err.msg);
    CHECK(smoe_trainer_use_schedule(t, 1, &err) == SMOE_EINVAL);
    CHECKF(smoe_trainer_use_schedule(t, 0, &err) == SMOE_OK, "%s", err.msg);
    smoe_train_step rec[5];
    memset(rec, 0, sizeof rec);
    if (run(t, data, 0, 5, rec) == 0) {
        /* train.yml: lr 3e-3, final fraction 0.1; 3 steps: no warmup, the
         * cosine over 3 updates ends at 3e-4 on the third */
        CHECKF(fabs(rec[2].lr - 3e-4) <= 1e-9, "step 3: lr %.9g, expected 3e-4", rec[2].lr);
        for (int s = 3; s < 5; s++)
            CHECKF(rec[s].lr == rec[2].lr, "step %d, past the 3 steps: lr %.9g, not the final "
                   "%.9g", s + 1, rec[s].lr, rec[2].lr);
        CHECK(isfinite(rec[4].loss));
    }
    smoe_trainer_free(t);
    test_schedule_refusals(r);
    /* a legacy schedule beside a co-axis one: the plan is the schedule's */
    smoe_schedule *leg = NULL;
    CHECKF(smoe_schedule_for_plan(r->plan, 0, 1, &leg, &err) == SMOE_OK, "%s", err.msg);
    const smoe_schedule *two[2] = { r->sched, leg };
    o.schedules = two;
    o.nschedules = 2;
    CHECKF(smoe_trainer_new(r->cfg, r->plan, &r->comm, &o, NULL, &t, &err) == SMOE_OK,
           "%s", err.msg);
    if (t) {
        CHECKF(smoe_trainer_use_schedule(t, 1, &err) == SMOE_OK, "%s", err.msg);
        CHECKF(smoe_trainer_use_schedule(t, 0, &err) == SMOE_OK, "%s", err.msg);
    }
    smoe_trainer_free(t);
    smoe_schedule_free(leg);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_trainer_limits CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    test_batch();
    smoe_err err;
    tiny_rank r;
    smoe_train_data *data = NULL;
    if (tiny_rank_init(&r, argv[1], &err) || smoe_train_data_load(argv[2], 128, &data, &err)) {
        fprintf(stderr, "test_trainer_limits: set-up: %s\n", err.msg);
        return 1;
    }
    test_modes_and_lr(&r, data);
    smoe_train_data_free(data);
    tiny_rank_free(&r);
    return check_report();
}
