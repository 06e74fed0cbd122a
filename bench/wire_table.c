/* The compressed-gather benchmark's table: for each `smoe train --compare
 * --json` file (one per gather dtype), the no-prefetch run's median exposed
 * gather wait and gathered bytes per step (per rank, as moved), the
 * prefetch run's median wait, and the share of the no-prefetch wait that
 * prefetch hides (1 - prefetch / no-prefetch). Medians over the steps each
 * run counted (the interleaved warm-up round skipped by smoe train).
 * usage: wire_table LABEL=TRAIN.json ... */
#include "json_file.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num(const cJSON *o, const char *run, const char *sec, const char *key)
{
    const cJSON *x = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "runs"), run), sec), key);
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

/* gathered bytes of a run's last step (every step moves the same) */
static double step_bytes(const cJSON *o, const char *run)
{
    const cJSON *steps = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "runs"),
                                                                 run), "steps");
    int n = cJSON_GetArraySize(steps);
    const cJSON *x = n ? cJSON_GetObjectItem(cJSON_GetArrayItem(steps, n - 1), "gather_bytes")
                       : NULL;
    return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: wire_table LABEL=TRAIN.json ...\n");
        return 2;
    }
    printf("%-14s %16s %14s %18s %16s %8s\n", "gathers", "gathered/step", "vs fp32",
           "no-prefetch wait", "prefetch wait", "hidden");
    double base = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char label[64];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof label) {
            fprintf(stderr, "wire_table: expected LABEL=FILE, got '%s'\n", argv[i]);
            return 2;
        }
        memcpy(label, argv[i], (size_t)(eq - argv[i]));
        label[eq - argv[i]] = 0;
        cJSON *j = json_file_load(eq + 1);
        if (!j) {
            fprintf(stderr, "wire_table: cannot read %s\n", eq + 1);
            return 1;
        }
        double b = step_bytes(j, "no_prefetch");
        double w0 = num(j, "no_prefetch", "summary", "median_exposed_gather_ms");
        double w1 = num(j, "prefetch", "summary", "median_exposed_gather_ms");
        if (b < 0 || w0 < 0 || w1 < 0) {
            fprintf(stderr, "wire_table: %s is not a smoe train --compare --json output\n",
                    eq + 1);
            rc = 1;
        }
        if (i == 1)
            base = b;
        printf("%-14s %13.2f MiB %13.3fx %15.1f ms %13.1f ms %7.1f%%\n", label, b / 1048576.0,
               base > 0 ? b / base : 0, w0, w1, w0 > 0 ? 100.0 * (1 - w1 / w0) : 0);
        cJSON_Delete(j);
    }
    return rc;
}
