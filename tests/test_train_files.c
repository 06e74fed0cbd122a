/* The files the trainer writes, on one rank (the single-rank communicator,
 * no MPI):
 * - a parameter dump to X while another writer's temporary X.tmp is in
 *   progress leaves that temporary byte-identical (the dump has its own)
 *   and X a whole dump, equal to one written where nothing else is;
 * - a trace that cannot be rewritten (ENOSPC) leaves the good one
 *   byte-identical.
 * usage: test_train_files CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_testlib.h"
#include "smoe/train.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static smoe_comm comm;
static smoe_config *cfg;
static smoe_plan *plan;
static smoe_train_data *data;
static char dir[64] = "/tmp/smoe_train_files_XXXXXX";

static smoe_trainer *trainer(const char *ckpt, int resume, const char *trace, smoe_err *err)
{
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 6;
    o.seed = 7;
    o.prefetch_depth = 1;
    o.ckpt_dir = ckpt;
    o.resume = resume;
    o.trace_path = trace;
    smoe_trainer *t = NULL;
    if (smoe_trainer_new(cfg, plan, NULL, &comm, &o, data, &t, err))
        return NULL;
    return t;
}

/* n steps of t from its current step */
static int steps(smoe_trainer *t, int n)
{
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int64_t T = mc->batch * mc->seq, s0 = smoe_trainer_steps_done(t);
    int32_t *tok = malloc(sizeof *tok * (size_t)T), *tgt = malloc(sizeof *tgt * (size_t)T);
    smoe_train_step rec;
    smoe_err err;
    int bad = !tok || !tgt;
    for (int64_t s = s0; s < s0 + n && !bad; s++) {
        smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt);
        bad = smoe_trainer_step(t, tok, tgt, &rec, &err) != SMOE_OK;
    }
    free(tok);
    free(tgt);
    return bad;
}

/* A trainer that must be made, with n steps run; NULL (a failed check)
 * when it cannot be made. */
static smoe_trainer *trained(const char *ckpt, const char *trace, int n)
{
    smoe_err err;
    smoe_trainer *t = trainer(ckpt, 0, trace, &err);
    CHECKF(t != NULL, "%s", err.msg);
    if (t)
        CHECK(steps(t, n) == 0);
    return t;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECKF(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot set up %s", path);
}

/* The whole file into a malloc'ed buffer (*n bytes); NULL when absent. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static void test_dump_beside_other_writer(void)
{
    smoe_err err;
    smoe_trainer *t = trained(NULL, NULL, 2);
    if (!t)
        return;
    char x[128], tmp[128], ref[128], hx[65], hr[65];
    snprintf(x, sizeof x, "%s/x.bin", dir);
    snprintf(tmp, sizeof tmp, "%s/x.bin.tmp", dir);
    snprintf(ref, sizeof ref, "%s/ref.bin", dir);
    static const char half[] = "SMOEPRM1\nanother job's dump, half written";
    put(tmp, half);
    CHECKF(smoe_trainer_digest(t, x, hx, &err) == SMOE_OK, "%s", err.msg);
    CHECKF(smoe_trainer_digest(t, ref, hr, &err) == SMOE_OK, "%s", err.msg);
    size_t n = 0;
    char *other = slurp(tmp, &n);
    CHECKF(other && n == sizeof half - 1 && memcmp(other, half, n) == 0,
           "the other writer's temporary was %s", other ? "changed" : "taken");
    free(other);
    CHECKF(same_file(x, ref), "the dump beside another writer's temporary is not whole");
    CHECK_STR(hx, hr);
    smoe_trainer_free(t);
}

static void test_trace_rewrite(void)
{
    char tr[128], good[128];
    snprintf(tr, sizeof tr, "%s/trace.json", dir);
    snprintf(good, sizeof good, "%s/good.json", dir);
    smoe_err err;
    smoe_trainer *t = trained(NULL, tr, 1);
    if (!t)
        return;
    CHECKF(smoe_trainer_write_trace(t, tr, &err) == SMOE_OK, "%s", err.msg);
    CHECK(smoe_trainer_write_trace(t, good, &err) == SMOE_OK);
    CHECK(steps(t, 1) == 0);
    smoe_out_fail_after(100);
    smoe_status s = smoe_trainer_write_trace(t, tr, &err);
    smoe_out_fail_after(-1);
    CHECKF(s == SMOE_EIO && strcmp(err.where, tr) == 0 &&
               strstr(err.msg, "No space left on device (the file is unchanged)"),
           "%s: %s", err.where, err.msg);
    CHECKF(same_file(tr, good), "the good trace changed under a failed rewrite");
    smoe_trainer_free(t);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_train_files CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    if (trainer_setup("test_train_files", argv[1], argv[2], &cfg, &plan, &comm, &data, dir))
        return 1;
    test_dump_beside_other_writer();
    test_trace_rewrite();
    CHECK(trainer_teardown(dir, cfg, plan, &comm, data) == 0);
    return check_report();
}
