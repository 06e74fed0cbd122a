/* Fuzz targets of `smoe sim`'s own input files (see targets.h): hardware
 * profiles and scenarios. A profile that loads is then run through the step
 * model of a fixed small plan (deepseek2-16b on 16 devices, fsdp=8 x
 * expert=2) under every schedule family: whatever numbers a profile that
 * passed the range checks holds, the simulator must give finite, non-
 * negative times and bytes (no inf, nan, overflow or out-of-bounds). */
#include "targets.h"

#include "smoe/config.h"
#include "smoe/plan.h"
#include "smoe/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define check smoe_fuzz_check
#define cstr smoe_fuzz_cstr

static smoe_plan *g_plan; /* the same plan for every input */

void smoe_fuzz_sim_cleanup(void)
{
    smoe_plan_free(g_plan);
    g_plan = NULL;
}

static int finite_nonneg(double v) { return isfinite(v) && v >= 0; }

static void check_result(const smoe_sim_result *r)
{
    check(finite_nonneg(r->step_s) && finite_nonneg(r->compute_s) &&
              finite_nonneg(r->exposed_gather_s) && finite_nonneg(r->a2a_s) &&
              finite_nonneg(r->gather_busy_s) && finite_nonneg(r->reduce_wait_s),
          "simulated times are finite and >= 0");
    check(finite_nonneg(r->peak_hbm_bytes) && finite_nonneg(r->mem_gathered),
          "simulated bytes are finite and >= 0");
    check(r->step_s + 1e-9 * r->step_s >= r->compute_s - 1e-12,
          "the step is at least its compute");
}

int smoe_fuzz_hwfile(const uint8_t *data, size_t size)
{
    char *text = cstr(data, size);
    if (!text)
        return 0;
    smoe_hw hw;
    smoe_err err;
    smoe_status s = smoe_hw_load_text(text, "fuzz.yml", &hw, &err);
    free(text);
    if (s) {
        check(err.msg[0] != 0, "an error has a message");
        return 0;
    }
    check(hw.devices_per_chip >= 1 && hw.devices_per_node >= 1 && hw.peak_flops > 0 &&
              hw.hbm_bandwidth > 0 && hw.ici_bandwidth > 0 && hw.dcn_bandwidth > 0,
          "a loaded profile has positive rates");
    const smoe_config *cfg = smoe_fuzz_ep2_config();
    if (!cfg)
        return 0;
    if (!g_plan) {
        smoe_plan_opts po = { 16, 1, NULL, 4 };
        if (smoe_plan_build(cfg, &po, &g_plan, NULL) != SMOE_OK)
            return 0;
    }
    smoe_sim_shape sh;
    memset(&sh, 0, sizeof sh);
    sh.batch = 1;
    sh.seq = 256;
    sh.remat = SMOE_REMAT_FULL;
    if (smoe_sim_dtypes(cfg, &hw, &sh, &err) != SMOE_OK)
        return 0;
    smoe_sim_model *m = NULL;
    if (smoe_sim_model_build(cfg, g_plan, &hw, &sh, &m, &err) != SMOE_OK)
        return 0;
    static const struct { int depth, legacy, shared; smoe_sim_executor e; } k[] = {
        { 0, 0, 1, SMOE_SIM_EXEC_XLA_SCAN }, { 2, 0, 0, SMOE_SIM_EXEC_XLA_PREFETCH },
        { 2, 0, 0, SMOE_SIM_EXEC_RUNTIME }, { 1, 0, 0, SMOE_SIM_EXEC_MAXTEXT },
        { 1, 0, 1, SMOE_SIM_EXEC_MAXTEXT }, { 1, 1, 0, SMOE_SIM_EXEC_MAXTEXT },
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        smoe_sim_sched sd;
        memset(&sd, 0, sizeof sd);
        sd.prefetch_depth = k[i].depth;
        sd.legacy = k[i].legacy;
        sd.shared_engine = k[i].shared;
        sd.executor = k[i].e;
        smoe_sim_result r;
        if (smoe_sim_run(m, &sd, &r, NULL) == SMOE_OK)
            check_result(&r);
    }
    smoe_sim_model_free(m);
    return 0;
}

int smoe_fuzz_scenario(const uint8_t *data, size_t size)
{
    char *text = cstr(data, size);
    smoe_arena *a = smoe_arena_new(64 * 1024);
    if (text && a) {
        smoe_scenario sc;
        smoe_err err;
        if (smoe_scenario_load_text(a, text, "fuzz.yml", &sc, &err) == SMOE_OK) {
            check(sc.devices >= 0 && sc.devices <= SMOE_SIM_MAX_DEVICES, "devices in range");
            check(sc.slices >= 1 && sc.slices <= SMOE_SIM_MAX_SLICES, "slices in range");
            check(sc.batch >= 0 && sc.batch <= SMOE_SIM_MAX_BATCH, "batch in range");
            check(sc.seq >= 0 && sc.seq <= SMOE_SIM_MAX_SEQ, "seq in range");
            check(sc.prefetch_depth >= 0 && sc.prefetch_depth <= SMOE_SIM_MAX_DEPTH,
                  "depth in range");
            check(sc.n_overrides <= SMOE_SCN_MAX_OVERRIDES &&
                      sc.n_variants <= SMOE_SCN_MAX_VARIANTS &&
                      sc.n_reported <= SMOE_SCN_MAX_VARIANTS + 4 &&
                      sc.n_sources <= SMOE_SCN_MAX_SOURCES,
                  "list lengths in range");
            for (int i = 0; i < sc.n_overrides; i++)
                check(sc.overrides[i] != NULL && sc.override_where[i] != NULL,
                      "an override has text and a place");
            for (int i = 0; i < sc.n_variants; i++) {
                check(sc.variants[i].name != NULL, "a variant has a name");
                check(sc.variants[i].n_overrides <= SMOE_SCN_MAX_OVERRIDES, "variant overrides");
                for (int j = 0; j < sc.variants[i].n_overrides; j++)
                    check(sc.variants[i].override_where[j] != NULL, "a variant override's place");
            }
            check(sc.mx_gather_bytes == 0 || sc.mx_gather_bytes == 2 || sc.mx_gather_bytes == 4,
                  "maxtext_gather_dtype in range");
            check(sc.reduce_engine >= SMOE_REDUCE_PROFILE && sc.reduce_engine <= SMOE_REDUCE_OWN,
                  "reduce_engine in range");
            int combos = 1;
            check(sc.n_facts <= SMOE_SCN_MAX_FACTS, "facts in range");
            for (int i = 0; i < sc.n_facts; i++) {
                check(sc.facts[i].n >= 1 && sc.facts[i].n <= SMOE_SCN_MAX_READINGS,
                      "readings per fact in range");
                combos *= sc.facts[i].n;
                for (int j = 0; j < sc.facts[i].n; j++)
                    check(sc.facts[i].text[j] && sc.facts[i].source[j] && sc.facts[i].source[j][0],
                          "a reading has its text and source");
            }
            check(combos <= SMOE_SCN_MAX_COMBOS, "combinations in range");
            for (int i = 0; i < sc.n_reported; i++) {
                const smoe_scn_numbers *x = &sc.reported[i];
                check(sc.reported_name[i] != NULL, "a reported row has a name");
                check(x->step_ms >= -1 && isfinite(x->step_ms) && x->peak_hbm_gib >= -1 &&
                          isfinite(x->peak_hbm_gib) && x->exposed_gather_ms >= -1 &&
                          isfinite(x->exposed_gather_ms),
                      "reported figures finite");
            }
            for (int i = 0; i < sc.n_sources; i++)
                check(sc.source_key[i] && sc.source_text[i] && sc.source_text[i][0],
                      "a source has text");
            if (sc.devices_loc.line)
                check(sc.devices_loc.col >= 1, "devices has a location");
        } else {
            check(err.msg[0] != 0, "an error has a message");
        }
    }
    smoe_arena_free(a);
    free(text);
    return 0;
}
