/* The schedule-file fuzz target (see targets.h): arbitrary bytes as a
 * `smoe train --schedule` file -> smoe_schedule_parse_text. A schedule it
 * accepts must pass smoe_schedule_check again and stay inside its own
 * bounds (every gather's unit, weight and chunks within the model it names,
 * issued no later than it is used); then it is matched with the bundled
 * tiny model's layer weights (smoe_schedule_match, as smoe train does): a
 * match maps each kind's names one-to-one onto the model's, a refusal has
 * a message. The reader is sched's (src/sched/schedule_json_read.c). */
#include "targets.h"

#include "smoe/config.h"
#include "smoe/plan.h"
#include "smoe/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the tiny model's layer weights by kind (plan paths), loaded once */
static smoe_config *g_cfg;
static smoe_plan *g_plan;
static const char *g_names[2][SMOE_SIM_MAX_WEIGHTS];
static int g_n[2] = { -1, -1 };

void smoe_fuzz_schedule_cleanup(void)
{
    smoe_plan_free(g_plan);
    smoe_config_free(g_cfg);
    g_plan = NULL;
    g_cfg = NULL;
    g_n[0] = g_n[1] = -1;
}

static int tiny_names(void)
{
    static const char *const stacks[2] = { "decoder/dense_layers/", "decoder/moe_layers/" };
    const char *dir = smoe_config_default_dir();
    if (g_n[0] >= 0 || !dir)
        return g_n[0] >= 0;
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", dir);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = "tiny";
    smoe_plan_opts po = { 1, 1, NULL, 4 };
    if (smoe_config_load(&o, &g_cfg, NULL) || smoe_plan_build(g_cfg, &po, &g_plan, NULL))
        return 0;
    g_n[0] = g_n[1] = 0;
    for (int i = 0; i < g_plan->n; i++) {
        const smoe_weight *w = &g_plan->w[i];
        for (int k = 0; k < 2 && w->kind == SMOE_ENTRY_PARAM; k++)
            if (strncmp(w->path, stacks[k], strlen(stacks[k])) == 0 &&
                g_n[k] < SMOE_SIM_MAX_WEIGHTS)
                g_names[k][g_n[k]++] = w->path;
    }
    return 1;
}

/* A schedule matched with the tiny model: one-to-one, or refused in words. */
static void check_match(const smoe_schedule *s)
{
    if (!tiny_names())
        return;
    int map[2][SMOE_SIM_MAX_WEIGHTS];
    const char *const *names[2] = { g_names[0], g_names[1] };
    smoe_err err;
    if (smoe_schedule_match(s, g_n, names, map, &err) != SMOE_OK) {
        smoe_fuzz_check(err.msg[0] != 0, "a refused match has a message");
        return;
    }
    for (int k = 0; k < 2; k++) {
        unsigned char hit[SMOE_SIM_MAX_WEIGHTS] = { 0 };
        smoe_fuzz_check(s->nweights[k] == g_n[k], "a match names every weight");
        for (int w = 0; w < s->nweights[k]; w++) {
            int j = map[k][w];
            smoe_fuzz_check(j >= 0 && j < g_n[k] && !hit[j], "a match is one-to-one");
            smoe_fuzz_check(strcmp(s->names[k][w], g_names[k][j]) == 0, "a match keeps names");
            hit[j] = 1;
        }
    }
}

int smoe_fuzz_schedule(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        size = 1 << 20;
    char *text = smoe_fuzz_cstr(data, size);
    if (!text)
        return 0;
    smoe_schedule *s = NULL;
    smoe_err err;
    if (smoe_schedule_parse_text(text, size, "schedule.json", &s, &err) != SMOE_OK) {
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
    check_match(s);
    smoe_schedule_free(s);
    free(text);
    return 0;
}
