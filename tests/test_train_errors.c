/* smoe train's refusals of bad input that the library makes, in process
 * (train_inproc.h: the CLI's calls on a mesh of DEVICES, run on one rank
 * over the single-rank communicator): the mesh and the ranks, uneven
 * shards, a model that does not divide over the expert axis, bad data
 * files (missing, too short, a directory, a FIFO, a device), values out of
 * range, and the MaxText keys smoe train does not implement (an override,
 * or a model file naming its file:line:col), each with the exit status the
 * CLI would give and the text of its one line after "smoe: " (the text is
 * the oracle: the same patterns as the CLI's train_errors.sh had). The
 * refusals made by the CLI itself (flags, --max-memory's requoting, the
 * MPI thread level) stay in train_errors.sh.
 * usage: test_train_errors CONFIG_DIR DATA_FILE */
#define _GNU_SOURCE
#include "check.h"
#include "train_inproc.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *g_cfg, *g_data;

/* want: the exit status, or -1 for any non-zero one */
static void expect_on(int want, int64_t devices, const char *model, const char *base,
                      const char *data, const char *pattern, const char *const *kv, int n_kv)
{
    inproc_case k = { g_cfg, base, model, kv, n_kv, devices, 2, data ? data : g_data, 0, NULL };
    inproc_result r;
    int rc = inproc_train(&k, &r);
    int ok_rc = want < 0 ? rc != 0 : rc == want;
    CHECKF(ok_rc && inproc_match(pattern, r.line),
           "%lld devices, %s%s -> exit %d (want %d): '%s'\n    expected: %s", (long long)devices,
           n_kv ? kv[0] : data ? data : "", n_kv > 1 ? " ..." : "", rc, want, r.line, pattern);
}

#define KV(...) (const char *const[]){ __VA_ARGS__ }, (int)(sizeof((const char *const[]){ __VA_ARGS__ }) / sizeof(const char *))
/* WANT DEVICES PATTERN KEY=VALUE... */
#define EXPECT(want, dev, pattern, ...) expect_on(want, dev, NULL, NULL, NULL, pattern, KV(__VA_ARGS__))
/* WANT DEVICES DATA_FILE PATTERN KEY=VALUE... */
#define EXPECT_DATA(want, data, pattern, ...) \
    expect_on(want, 1, NULL, NULL, data, pattern, KV(__VA_ARGS__))

static void test_mesh(void)
{
    EXPECT(-1, 4, "4 MPI ranks: the mesh has 3 devices", "ici_fsdp_parallelism=3");
    EXPECT(-1, 3, "3 MPI ranks: cannot fill ici_fsdp_parallelism", "ici_expert_parallelism=2");
    expect_on(-1, 3, NULL, NULL, NULL,
              "decoder/[a-z_]+/[a-z_/0-9]+ cannot be prefetched: uneven: layer dim [0-9] \\(128\\) "
              "does not divide into its 3 shards", NULL, 0);
    EXPECT(-1, 4, "argument 'num_experts=6': num_experts \\(6\\) is not divisible by the expert "
           "axis \\(4\\)", "ici_expert_parallelism=4", "num_experts=6", "override_model_config=true");
    EXPECT(-1, 4, "mesh axis 'tensor' has size 2", "ici_tensor_parallelism=2",
           "ici_fsdp_parallelism=2");
    EXPECT(-1, 4, "argument 'ici_expert_parallelism=two': 'ici_expert_parallelism' must be an "
           "integer", "ici_expert_parallelism=two");
    expect_on(2, 1, "nope", NULL, NULL, "argument '--model nope': unknown model 'nope'", NULL, 0);
}

static void test_data(const char *tmp)
{
    char small[4200], fifo[4200];
    snprintf(small, sizeof small, "%s/small.txt", tmp);
    snprintf(fifo, sizeof fifo, "%s/fifo", tmp);
    FILE *f = fopen(small, "w");
    if (f) {
        fputs("a few bytes of text, far fewer than a long sequence needs\n", f);
        fclose(f);
    }
    CHECK(mkfifo(fifo, 0600) == 0);
    expect_on(-1, 1, NULL, NULL, "/nonexistent/data.txt",
              "/nonexistent/data.txt: cannot open the data file", NULL, 0);
    EXPECT_DATA(2, small, ".*: the data file has [0-9]+ bytes; a sequence of max_target_length "
                "100000 tokens needs", "max_target_length=100000");
    expect_on(2, 1, NULL, NULL, tmp, ".*: the data file is a directory, not a regular file",
              NULL, 0);
    /* not regular files: a FIFO would block the open (a hang), a device has no size */
    expect_on(2, 1, NULL, NULL, fifo, ".*/fifo: the data file is a FIFO, not a regular file",
              NULL, 0);
    expect_on(2, 1, NULL, NULL, "/dev/zero",
              "/dev/zero: the data file is a device, not a regular file", NULL, 0);
}

static void test_values(void)
{
    EXPECT(2, 1, "argument 'vocab_size=100': 'vocab_size' must be >= 256 \\(smoe train's tokens "
           "are the data file's bytes\\) for smoe train, got 100", "vocab_size=100",
           "override_model_config=true");
    EXPECT(2, 1, "argument 'adam_b2=0.99999999': 'adam_b2' must be in \\[0, 1\\) after rounding "
           "to float32", "adam_b2=0.99999999");
    EXPECT(2, 1, "argument 'capacity_factor=1e-46': 'capacity_factor' must be <= 0 \\(dropless\\) "
           "or a finite number that stays > 0 in float32", "capacity_factor=1e-46");
    EXPECT(2, 1, "argument 'max_target_length=0': 'max_target_length' must be >= 1",
           "max_target_length=0");
    EXPECT(-1, 1, "argument 'scan_layers=false': scan_layers: smoe train runs scanned \\(stacked\\) "
           "layers only", "scan_layers=false");
}

/* MaxText keys smoe train does not implement: exit 2, one line naming the
 * key, where it is set and the value smoe implements */
static void test_refused(const char *tmp)
{
    EXPECT(2, 1, "argument 'dropout_rate=0.1': dropout_rate: smoe train implements only "
           "dropout_rate: 0", "dropout_rate=0.1");
    EXPECT(2, 1, "argument 'opt_type=sgd': opt_type: smoe train implements only opt_type: adamw",
           "opt_type=sgd");
    EXPECT(2, 1, "argument 'dtype=bfloat16': dtype: smoe train implements only dtype: float32",
           "dtype=bfloat16");
    EXPECT(2, 1, "argument 'gradient_accumulation_steps=4': gradient_accumulation_steps: smoe "
           "train implements only gradient_accumulation_steps: 1", "gradient_accumulation_steps=4");
    EXPECT(2, 1, "argument 'n_routing_groups=2': n_routing_groups: smoe train implements only "
           "n_routing_groups: -1", "n_routing_groups=2");
    EXPECT(2, 1, "argument 'routed_score_func=softplus': routed_score_func: smoe train implements",
           "routed_score_func=softplus", "override_model_config=true");
    EXPECT(2, 1, "argument 'rope_type=llama3.1': rope_type:", "rope_type=llama3.1");
    EXPECT(2, 1, "argument 'adamw_mask=\\[.*\\]': adamw_mask: pattern", "adamw_mask=['\\d']");
    EXPECT(2, 1, "argument 'warmup_steps_fraction=-0.5': 'warmup_steps_fraction' must be a number "
           "satisfying ge=0.0 le=1.0, got '-0.5'", "warmup_steps_fraction=-0.5");
    /* a model file (the bundled configs copied beside it) that sets a
     * refused key: the line names the file, line and column */
    char cmd[9000], path[4200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/cfg/models' && cp '%s/base.yml' '%s/train.yml' "
             "'%s/cfg/' && cp '%s/models/tiny.yml' '%s/cfg/models/'", tmp, g_cfg, g_cfg, tmp,
             g_cfg, tmp);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/cfg/dropout.yml", tmp);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("base_config: train.yml\ndropout_rate: 0.1\n", f);
        fclose(f);
    }
    expect_on(2, 1, NULL, path, NULL, ".*/dropout.yml:2:[0-9]+: dropout_rate: smoe train "
              "implements only dropout_rate: 0", NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_train_errors CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    g_cfg = argv[1];
    g_data = argv[2];
    char tmp[] = "/tmp/test_train_errors.XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_mesh();
    test_data(tmp);
    test_values();
    test_refused(tmp);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    return check_report();
}
