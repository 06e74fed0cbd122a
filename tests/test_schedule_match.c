/* A schedule runs only when its weight names map one-to-one onto the
 * model's (smoe_schedule_match), in process:
 *   1. hand-made names: a permutation matches (the map gives each name's
 *      index in the model); a name given twice (and the one it leaves
 *      out), a missing one and one the model lacks are refused, each
 *      naming the field and the weight;
 *   2. the trainer (one rank, smoe_comm_local_new): a schedule of the tiny
 *      model whose dense weights name one twice (so another is never
 *      gathered) is refused by smoe_trainer_new with the file and the
 *      weight named; the same names in another order are accepted.
 * usage: test_schedule_match CONFIG_DIR */
#include "check.h"
#include "trainer_testlib.h"

#include <string.h>

/* A depth-1 schedule of 2 layers (1 dense) with these names. */
static smoe_schedule *build(int nd, const char *const *dense, int nm, const char *const *moe)
{
    int nw[2] = { nd, nm };
    const char *const *names[2] = { dense, moe };
    smoe_schedule *s = NULL;
    smoe_err err;
    CHECKF(smoe_schedule_build(2, 1, nw, names, 1, NULL, &s, &err) == SMOE_OK, "%s", err.msg);
    return s;
}

/* Match s with the model {a b c} {x y}: the status, err's message in msg. */
static smoe_status match(const smoe_schedule *s, int map[2][SMOE_SIM_MAX_WEIGHTS], char *msg)
{
    static const char *const md[] = { "a", "b", "c" }, *const mm[] = { "x", "y" };
    const int n[2] = { 3, 2 };
    const char *const *names[2] = { md, mm };
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_status st = smoe_schedule_match(s, n, names, map, &err);
    snprintf(msg, sizeof err.msg, "%s", err.msg);
    return st;
}

static void test_names(void)
{
    int map[2][SMOE_SIM_MAX_WEIGHTS];
    char msg[768];
    static const char *const perm[] = { "c", "a", "b" }, *const mperm[] = { "y", "x" };
    smoe_schedule *s = build(3, perm, 2, mperm);
    if (s) {
        CHECKF(match(s, map, msg) == SMOE_OK, "%s", msg);
        CHECK(map[0][0] == 2 && map[0][1] == 0 && map[0][2] == 1);
        CHECK(map[1][0] == 1 && map[1][1] == 0);
    }
    smoe_schedule_free(s);
    static const char *const twice[] = { "a", "c", "c" }, *const xy[] = { "x", "y" };
    s = build(3, twice, 2, xy);
    if (s) {
        CHECK(match(s, map, msg) == SMOE_EINVAL);
        CHECKF(strstr(msg, "weights.dense[2]: 'c' is named twice (also weights.dense[1])") &&
                   strstr(msg, "'b' is missing"),
               "%s", msg);
    }
    smoe_schedule_free(s);
    static const char *const mtwice[] = { "y", "y" };
    s = build(3, perm, 2, mtwice);
    if (s) {
        CHECK(match(s, NULL, msg) == SMOE_EINVAL);
        CHECKF(strstr(msg, "weights.moe[1]: 'y' is named twice") && strstr(msg, "'x' is missing"),
               "%s", msg);
    }
    smoe_schedule_free(s);
    s = build(2, perm, 2, xy);
    if (s) {
        CHECK(match(s, map, msg) == SMOE_EINVAL);
        CHECKF(strstr(msg, "weights.dense: 'b', a weight of the model's dense layers, is missing"),
               "%s", msg);
    }
    smoe_schedule_free(s);
    static const char *const other[] = { "a", "b", "z" };
    s = build(3, other, 2, xy);
    if (s) {
        CHECK(match(s, map, msg) == SMOE_EINVAL);
        CHECKF(strstr(msg, "weights.dense[2]: 'z' is not a weight of the model's dense layers"),
               "%s", msg);
    }
    smoe_schedule_free(s);
}

/* The trainer's layer weights by kind, in its order (names into the plan). */
static const char *lw[2][64];
static int nlw[2];

static void trainer_names(const smoe_trainer *t)
{
    int n;
    const smoe_trainer_param *p = smoe_trainer_params(t, &n);
    for (int i = 0; i < n; i++) {
        int k = strstr(p[i].name, "moe_layers/") ? 1 : strstr(p[i].name, "dense_layers/") ? 0 : -1;
        if (k >= 0 && nlw[k] < 64)
            lw[k][nlw[k]++] = p[i].name;
    }
}

static smoe_status new_trainer(const tiny_rank *r, const smoe_schedule *s, smoe_trainer **t,
                               smoe_err *err)
{
    smoe_train_opts o = tiny_opts(3);
    o.schedule_name = "dup.json";
    const smoe_schedule *one[1] = { s };
    if (s)
        o.schedules = one;
    return smoe_trainer_new(r->cfg, r->plan, &r->comm, &o, NULL, t, err);
}

static void test_trainer(const tiny_rank *r)
{
    smoe_err err;
    memset(&err, 0, sizeof err);
    smoe_trainer *t = NULL;
    CHECKF(new_trainer(r, NULL, &t, &err) == SMOE_OK, "%s", err.msg);
    if (!t)
        return;
    const smoe_model_cfg *mc = smoe_trainer_model(t);
    int L = (int)(mc->n_dense + mc->n_moe), nd = (int)mc->n_dense;
    trainer_names(t);
    smoe_trainer_free(t);
    CHECK(nlw[0] >= 8 && nlw[1] > 0);
    if (nlw[0] < 8)
        return;
    const char *dup[64], *rev[64];
    for (int k = 0; k < nlw[0]; k++) {
        dup[k] = lw[0][k];
        rev[k] = lw[0][nlw[0] - 1 - k];
    }
    dup[4] = dup[7]; /* weight 4 never gathered: its buffer would be stale */
    const char *const *names[2] = { dup, lw[1] };
    smoe_schedule *s = NULL;
    CHECKF(smoe_schedule_build(L, nd, nlw, names, 1, NULL, &s, &err) == SMOE_OK, "%s", err.msg);
    t = (smoe_trainer *)1;
    CHECK(s && new_trainer(r, s, &t, &err) == SMOE_EINVAL);
    CHECK(t == NULL);
    CHECKF(strcmp(err.where, "dup.json") == 0 && strstr(err.msg, "weights.dense[7]: ") &&
               strstr(err.msg, lw[0][7]) && strstr(err.msg, "is named twice") &&
               strstr(err.msg, lw[0][4]),
           "%s: %s", err.where, err.msg);
    smoe_schedule_free(s);
    names[0] = rev; /* the model's names in another order */
    s = NULL;
    CHECKF(smoe_schedule_build(L, nd, nlw, names, 1, NULL, &s, &err) == SMOE_OK, "%s", err.msg);
    t = NULL;
    CHECKF(s && new_trainer(r, s, &t, &err) == SMOE_OK, "%s", err.msg);
    smoe_trainer_free(t);
    smoe_schedule_free(s);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_schedule_match CONFIG_DIR\n");
        return 2;
    }
    test_names();
    smoe_err err;
    tiny_rank r;
    if (tiny_rank_init(&r, argv[1], &err)) {
        fprintf(stderr, "test_schedule_match: set-up: %s\n", err.msg);
        return 1;
    }
    test_trainer(&r);
    tiny_rank_free(&r);
    return check_report();
}
