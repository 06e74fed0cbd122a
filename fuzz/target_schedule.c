/* The schedule-file fuzz target (see targets.h): arbitrary bytes as a
 * `smoe train --schedule` file -> cli_schedule_parse_text. A schedule it
 * accepts must pass smoe_schedule_check again and stay inside its own
 * bounds (every gather's unit, weight and chunks within the model it names,
 * issued no later than it is used). The reader is compiled in
 * (cli/schedule_json_read.c: cJSON, core and sched only). */
#include "targets.h"

#include "../cli/cli.h"
#include "smoe/sched.h"

#include <stdlib.h>

int smoe_fuzz_schedule(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        size = 1 << 20;
    char *text = smoe_fuzz_cstr(data, size);
    if (!text)
        return 0;
    smoe_schedule *s = NULL;
    smoe_err err;
    if (cli_schedule_parse_text(text, size, "schedule.json", &s, &err) != SMOE_OK) {
        smoe_fuzz_check(err.msg[0] != 0 && s == NULL, "a refused schedule has a message");
        free(text);
        return 0;
    }
    smoe_err again;
    smoe_fuzz_check(smoe_schedule_check(s, &again) == SMOE_OK, "an accepted schedule checks");
    for (int i = 0; i < s->n; i++) {
        const smoe_sched_gather *g = &s->g[i];
        int kind = (g->unit < s->L ? g->unit : 2 * s->L - 1 - g->unit) >= s->n_dense;
        smoe_fuzz_check(g->unit >= 0 && g->unit < 2 * s->L, "unit in range");
        smoe_fuzz_check(g->weight >= 0 && g->weight < s->nweights[kind], "weight in its kind");
        smoe_fuzz_check(g->chunk0 >= 0 && g->nchunks >= 1 &&
                            g->chunk0 + g->nchunks <= SMOE_SCHED_CHUNKS,
                        "chunks in range");
        smoe_fuzz_check(g->issue <= g->unit, "issued no later than used");
    }
    smoe_schedule_free(s);
    free(text);
    return 0;
}
