/* A JSON file read whole and parsed, for the bench comparison programs:
 * NULL when it cannot be read or is not JSON (cJSON_Delete the result). */
#ifndef SMOE_BENCH_JSON_FILE_H
#define SMOE_BENCH_JSON_FILE_H

#include <cjson/cJSON.h>
#include "smoe/core.h"

static inline cJSON *json_file_load(const char *path)
{
    char *b;
    if (smoe_read_file_max(path, (size_t)1 << 30, &b, NULL, NULL))
        return NULL;
    cJSON *j = cJSON_Parse(b);
    smoe_free(b);
    return j;
}

#endif
