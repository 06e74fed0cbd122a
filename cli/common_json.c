/* What every JSON output of the CLI shares: the mesh object and printing
 * (then freeing) the document. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

struct cJSON *cli_json_mesh(const smoe_mesh *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *names = cJSON_AddArrayToObject(o, "axis_names");
    cJSON *shape = cJSON_AddObjectToObject(o, "shape");
    for (int i = 0; i < m->n; i++) {
        cJSON_AddItemToArray(names, cJSON_CreateString(m->name[i]));
        cJSON_AddNumberToObject(shape, m->name[i], (double)m->size[i]);
    }
    return o;
}

void cli_json_print(FILE *f, struct cJSON *root)
{
    char *text = cJSON_Print(root);
    if (text) {
        fputs(text, f);
        fputc('\n', f);
        free(text);
    }
    cJSON_Delete(root);
}
