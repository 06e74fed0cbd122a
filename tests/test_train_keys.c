/* Every numeric MaxText key smoe train reads (smoe_train_keys, the table
 * `smoe train --list-keys` prints) through hostile values: 0, -1, huge,
 * nan, inf, each as `smoe train --steps 2 KEY=VALUE override_model_config=true`
 * would run it on one rank, in process (train_inproc.h). Each case ends in
 * one of three ways: refused (exit 2) with a line naming the key; a run
 * whose every loss is finite; or, for a setting that makes the training
 * diverge (a learning rate of 1e30), the stop at the first non-finite loss
 * that abort_on_nan_loss / abort_on_inf_loss ask for (exit 1, naming the
 * step and the value). Never a crash, an assertion or a hang.
 * (tests/train_keys.sh runs a few of these cases through the CLI.)
 * usage: test_train_keys CONFIG_DIR DATA_FILE */
#include "check.h"
#include "train_inproc.h"

#include <stdio.h>
#include <string.h>

static void one(const char *cfgdir, const char *data, const char *key, const char *v,
                int counts[3])
{
    char ov[200];
    snprintf(ov, sizeof ov, "%s=%s", key, v);
    const char *kv[2] = { ov, "override_model_config=true" };
    inproc_case k = { cfgdir, NULL, NULL, kv, 2, 1, 2, data, 0, NULL };
    inproc_result r;
    inproc_train(&k, &r);
    if (r.exit_code == 2 && strstr(r.line, key)) {
        counts[0]++;
        printf("pass refused %s: %.140s\n", ov, r.line);
    } else if (r.exit_code == 0 && r.steps_run == 2 && r.finite) {
        counts[1]++;
        printf("pass ran %s: finite losses\n", ov);
    } else if (r.exit_code == 1 &&
               inproc_match("step [0-9]+: the loss is (nan|inf|-inf) "
                            "\\(abort_on_(nan|inf)_loss: true\\)", r.line)) {
        counts[2]++;
        printf("pass diverged %s: %.100s\n", ov, r.line);
    } else {
        CHECKF(0, "%s -> exit %d, %d steps, finite %d: %s", ov, r.exit_code, r.steps_run,
               r.finite, r.line);
        return;
    }
    CHECK(1);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_train_keys CONFIG_DIR DATA_FILE\n");
        return 2;
    }
    int n = 0, counts[3] = { 0, 0, 0 };
    const smoe_train_key *keys = smoe_train_keys(&n);
    CHECKF(n >= 20, "only %d keys listed", n);
    for (int i = 0; i < n; i++) {
        const char *vals[5] = { "0", "-1", keys[i].type == 'i' ? "1000000000" : "1e30", "nan",
                                "inf" };
        for (int j = 0; j < 5; j++)
            one(argv[1], argv[2], keys[i].name, vals[j], counts);
    }
    printf("%d keys: %d refused, %d ran, %d diverged\n", n, counts[0], counts[1], counts[2]);
    /* each outcome occurs: the oracle tells them apart */
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] > 0);
    return check_report();
}
