/* The files the trainer writes, on one rank (the single-rank communicator,
 * no MPI):
 * - a parameter dump to X while another writer's temporary X.tmp is in
 *   progress leaves that temporary byte-identical (the dump has its own)
 *   and X a whole dump, equal to one written where nothing else is;
 * - a save that cannot be written (the write hook: ENOSPC) fails naming
 *   the shard file and the OS error, and leaves no step_N.tmp/ (LATEST
 *   still names the previous checkpoint);
 * - a run that opens a checkpoint directory removes the stale temporaries
 *   of interrupted saves (step_N.tmp/, LATEST.tmp, LATEST.tmp.XXXXXX, a
 *   probe file, a step_N.stale/ beside a complete step_N) and says each in
 *   one line through on_note, keeps everything else (a step_N.stale/
 *   without its step_N, a file of the user's), and resumes; a fresh run
 *   into a directory holding checkpoints is refused and removes nothing;
 * - a trace that cannot be rewritten (ENOSPC) leaves the good one
 *   byte-identical.
 * usage: test_train_files CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_setup.h"
#include "smoe/train.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static smoe_comm comm;
static smoe_config *cfg;
static smoe_plan *plan;
static smoe_train_data *data;
static char dir[64] = "/tmp/smoe_train_files_XXXXXX";

typedef struct notes {
    int n;
    char line[16][512];
} notes;

static void on_note(void *ud, const char *line)
{
    notes *nt = ud;
    if (nt->n < 16)
        snprintf(nt->line[nt->n++], sizeof nt->line[0], "%s", line);
}

static smoe_trainer *trainer(const char *ckpt, int resume, const char *trace, notes *nt,
                             smoe_err *err)
{
    smoe_train_opts o;
    memset(&o, 0, sizeof o);
    o.steps = 6;
    o.seed = 7;
    o.schedules = setup_schedules;
    o.nschedules = 1;
    o.ckpt_dir = ckpt;
    o.resume = resume;
    o.trace_path = trace;
    o.on_note = nt ? on_note : NULL;
    o.ud = nt;
    smoe_trainer *t = NULL;
    if (smoe_trainer_new(cfg, plan, &comm, &o, data, &t, err))
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
        bad = smoe_train_data_batch(data, 7, s, 0, mc->batch, mc->seq, tok, tgt, &err) ||
              smoe_trainer_step(t, tok, tgt, &rec, &err) != SMOE_OK;
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
    smoe_trainer *t = trainer(ckpt, 0, trace, NULL, &err);
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

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
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

static void test_failed_save(const char *ck)
{
    smoe_err err;
    smoe_trainer *t = trained(ck, NULL, 2);
    if (!t)
        return;
    CHECKF(smoe_trainer_save(t, &err) == SMOE_OK, "%s", err.msg);
    CHECK(steps(t, 1) == 0);
    smoe_out_fail_after(4096);
    smoe_status s = smoe_trainer_save(t, &err);
    smoe_out_fail_after(-1);
    char shard[256], latest[256], tmp[256];
    snprintf(shard, sizeof shard, "%s/step_00000003.tmp/shard_00000.bin", ck);
    snprintf(tmp, sizeof tmp, "%s/step_00000003.tmp", ck);
    snprintf(latest, sizeof latest, "%s/LATEST", ck);
    CHECKF(s == SMOE_EIO && strcmp(err.where, shard) == 0 &&
               strstr(err.msg, "No space left on device"),
           "%s: %s", err.where, err.msg);
    CHECKF(!exists(tmp), "a failed save left %s", tmp);
    size_t n = 0;
    char *l = slurp(latest, &n);
    CHECKF(l && n == 14 && memcmp(l, "step_00000002\n", 14) == 0, "LATEST: %.*s", (int)n,
           l ? l : "");
    free(l);
    smoe_trainer_free(t);
}

/* ck holds step 2 (test_failed_save): plant what interrupted saves leave */
static void test_stale_removed(const char *ck)
{
    static const char *const stale[] = { "step_00000004.tmp", "LATEST.tmp", "LATEST.tmp.Ab3xYz",
                                         ".probe-rank0-999", "step_00000002.stale" };
    static const char *const kept[] = { "step_00000001.stale", "notes.txt", "step_00000002",
                                        "LATEST" };
    char p[256], f[300];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, stale[i]);
        if (strstr(stale[i], "step_")) {
            CHECK(mkdir(p, 0777) == 0);
            snprintf(f, sizeof f, "%s/shard_00000.bin", p);
            put(f, "half a shard");
        } else {
            put(p, "x");
        }
    }
    snprintf(p, sizeof p, "%s/step_00000001.stale", ck);
    CHECK(mkdir(p, 0777) == 0);
    snprintf(p, sizeof p, "%s/notes.txt", ck);
    put(p, "mine");
    smoe_err err;
    notes nt = { 0 };
    /* a fresh run is refused and removes nothing */
    smoe_trainer *t = trainer(ck, 0, NULL, &nt, &err);
    CHECKF(!t && strstr(err.msg, "already holds checkpoints"), "fresh run: %s", err.msg);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, stale[i]);
        CHECKF(exists(p), "a refused fresh run removed %s", stale[i]);
    }
    CHECK_INT(nt.n, 0);
    smoe_trainer_free(t);
    t = trainer(ck, 1, NULL, &nt, &err);
    CHECKF(t != NULL, "resume: %s", err.msg);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, stale[i]);
        CHECKF(!exists(p), "%s was not removed", stale[i]);
        int said = 0;
        char want[400];
        snprintf(want, sizeof want, "removed stale temporary %s from an interrupted %s", p,
                 stale[i][0] == '.' ? "start" : "save");
        for (int k = 0; k < nt.n; k++)
            said += strcmp(nt.line[k], want) == 0;
        CHECKF(said == 1, "'%s' said %d times", want, said);
    }
    CHECK_INT(nt.n, 5);
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", ck, kept[i]);
        CHECKF(exists(p), "%s was removed", kept[i]);
    }
    smoe_train_result res;
    memset(&res, 0, sizeof res);
    CHECKF(t && smoe_trainer_load(t, &res, &err) == SMOE_OK, "load: %s", err.msg);
    CHECK_INT(res.first_step, 2);
    smoe_train_result_free(&res);
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
    char ck[128];
    if (trainer_setup("test_train_files", argv[1], argv[2], &cfg, &plan, &comm, &data, dir))
        return 1;
    snprintf(ck, sizeof ck, "%s/ck", dir);
    test_dump_beside_other_writer();
    test_failed_save(ck);
    test_stale_removed(ck);
    test_trace_rewrite();
    CHECK(trainer_teardown(dir, cfg, plan, &comm, data) == 0);
    return check_report();
}
