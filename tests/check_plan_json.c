/* `smoe plan --json` against a golden named_shardings.json: the mesh, and
 * every entry's key (in order), shape and partition_spec, exactly; gather
 * objects present for params and null for optimizer state.
 * usage: check_plan_json PLAN.json NAMED.json */
#include "check.h"

#include "../bench/json_file.h"
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: check_plan_json PLAN.json NAMED.json\n");
        return 2;
    }
    cJSON *plan = json_file_load(argv[1]), *named = json_file_load(argv[2]);
    CHECKF(plan && named, "cannot read the inputs");
    if (!plan || !named)
        return check_report();
    const cJSON *entries = cJSON_GetObjectItem(plan, "entries");
    CHECK_INT(cJSON_GetArraySize(entries), cJSON_GetArraySize(named));
    const cJSON *g = named->child, *e = entries ? entries->child : NULL;
    CHECK(cJSON_Compare(cJSON_GetObjectItem(plan, "mesh"), cJSON_GetObjectItem(g, "mesh"), 1));
    for (; g && e; g = g->next, e = e->next) {
        CHECK_STR(e->string, g->string);
        CHECKF(cJSON_Compare(cJSON_GetObjectItem(e, "partition_spec"),
                             cJSON_GetObjectItem(g, "partition_spec"), 1),
               "%s: partition_spec differs", g->string);
        CHECKF(cJSON_Compare(cJSON_GetObjectItem(e, "shape"), cJSON_GetObjectItem(g, "shape"), 1),
               "%s: shape differs", g->string);
        const cJSON *ga = cJSON_GetObjectItem(e, "gather");
        int param = strncmp(g->string, ".params/", 8) == 0;
        CHECKF(param ? cJSON_IsObject(ga) && cJSON_GetObjectItem(ga, "status") &&
                           cJSON_GetObjectItem(ga, "ways") &&
                           cJSON_GetObjectItem(ga, "gathered_spec") &&
                           cJSON_GetObjectItem(ga, "bytes_recv") &&
                           cJSON_GetObjectItem(ga, "residual") &&
                           cJSON_IsObject(cJSON_GetObjectItem(e, "legacy_gather"))
                     : cJSON_IsNull(ga),
               "%s: gather object", g->string);
        /* the coverage lint: a reason exactly where the weight is fallback,
         * noop, uneven or leaves a legacy residual */
        for (int k = 0; param && k < 2; k++) {
            const cJSON *x = cJSON_GetObjectItem(e, k ? "legacy_gather" : "gather");
            const cJSON *st = cJSON_GetObjectItem(x, "status");
            const cJSON *why = cJSON_GetObjectItem(x, "reason");
            const cJSON *un = cJSON_GetObjectItem(x, "uneven");
            const cJSON *rw = cJSON_GetObjectItem(x, "residual_ways");
            int need = !cJSON_IsString(st) || strcmp(st->valuestring, "tagged") != 0 ||
                       cJSON_IsTrue(un) || (k == 1 && rw && rw->valuedouble > 1);
            CHECKF(cJSON_IsBool(un) && (need ? cJSON_IsString(why) && why->valuestring[0]
                                             : cJSON_IsNull(why)),
                   "%s: %s reason/uneven", g->string, k ? "legacy" : "co-axis");
        }
    }
    CHECK(cJSON_IsObject(cJSON_GetObjectItem(plan, "summary")));
    cJSON_Delete(plan);
    cJSON_Delete(named);
    return check_report();
}
