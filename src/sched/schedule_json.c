/* The prefetch schedule as a JSON file (schema in docs/formats.md, "Schedule
 * files"), written by `smoe sim --schedule-out`; the reader, used by `smoe
 * train --schedule`, is schedule_json_read.c. With it, the only files of
 * sched that include cJSON. */
#include "sched_impl.h"

#include <cjson/cJSON.h>

char *smoe_schedule_json(const smoe_schedule *s, const char *hardware)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", SMOE_SCHEDULE_FORMAT);
    cJSON_AddNumberToObject(o, "version", SMOE_SCHEDULE_VERSION);
    cJSON_AddNumberToObject(o, "layers", s->L);
    cJSON_AddNumberToObject(o, "dense_layers", s->n_dense);
    cJSON_AddNumberToObject(o, "chunks_per_weight", SMOE_SCHED_CHUNKS);
    cJSON *src = cJSON_AddObjectToObject(o, "source");
    if (s->depth >= 0)
        cJSON_AddNumberToObject(src, "depth", s->depth);
    else
        cJSON_AddNumberToObject(src, "budget_bytes", s->budget);
    cJSON_AddStringToObject(src, "hardware", hardware);
    if (s->progress[0])
        cJSON_AddStringToObject(src, "progress", s->progress);
    cJSON *ws = cJSON_AddObjectToObject(o, "weights");
    for (int k = 0; k < 2; k++) {
        cJSON *a = cJSON_AddArrayToObject(ws, smoe_schedule_kinds[k]);
        for (int w = 0; w < s->nweights[k]; w++)
            cJSON_AddItemToArray(a, cJSON_CreateString(s->names[k][w]));
    }
    cJSON *pr = cJSON_AddObjectToObject(o, "predicted");
    cJSON_AddNumberToObject(pr, "peak_bytes", s->peak_bytes);
    cJSON_AddNumberToObject(pr, "exposed_gather_s", s->exposed_s);
    cJSON_AddNumberToObject(pr, "step_s", s->step_s);
    cJSON *ga = cJSON_AddArrayToObject(o, "gathers");
    for (int i = 0; i < s->n; i++) {
        const smoe_sched_gather *g = &s->g[i];
        cJSON *e = cJSON_CreateObject();
        int bwd = g->unit >= s->L;
        cJSON_AddStringToObject(e, "pass", bwd ? "bwd" : "fwd");
        cJSON_AddNumberToObject(e, "layer", bwd ? 2 * s->L - 1 - g->unit : g->unit);
        cJSON_AddNumberToObject(e, "unit", g->unit);
        cJSON_AddNumberToObject(e, "weight", g->weight);
        cJSON_AddNumberToObject(e, "chunk0", g->chunk0);
        cJSON_AddNumberToObject(e, "nchunks", g->nchunks);
        cJSON_AddNumberToObject(e, "issue", g->issue);
        cJSON_AddNumberToObject(e, "free", g->free);
        cJSON_AddItemToArray(ga, e);
    }
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}
