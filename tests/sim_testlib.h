/* Step models and profiles the simulator's tests share. */
#ifndef SMOE_TEST_SIM_TESTLIB_H
#define SMOE_TEST_SIM_TESTLIB_H

#include "../src/sched/sched_impl.h"
#include "check.h"

#include <stdio.h>
#include <string.h>

/* Two dense layers, one weight: gather 2 s, reduce-scatter 1 s, forward
 * 3 s, backward 6 s, 100 bytes gathered. */
static inline smoe_sim_model two_layers(int engines)
{
    smoe_sim_model m;
    memset(&m, 0, sizeof m);
    m.hw.kind = SMOE_HW_TPU;
    m.hw.collective_engines = engines;
    m.L = 2;
    m.nkinds = 2;
    sim_kind *k = &m.k[0];
    k->nw = 1;
    k->w[0].name = "w";
    k->w[0].pre_s = 2;
    k->w[0].pre_legacy_s = 1;
    k->w[0].res_legacy_s = 1;
    k->w[0].rs_s = 1;
    k->w[0].bytes = 100;
    k->bytes = 100;
    k->fwd_pre = 3;
    k->bwd_pre = 6;
    return m;
}

/* m's step under executor e at a uniform prefetch depth. */
static inline smoe_status run_depth(const smoe_sim_model *m, smoe_sim_executor e, int depth,
                                    smoe_sim_result *r)
{
    smoe_sim_sched s;
    memset(&s, 0, sizeof s);
    s.executor = e;
    s.prefetch_depth = depth;
    return smoe_sim_run(m, &s, r, NULL);
}

/* Model `model` from CONFIG_DIR/base.yml with overrides; NULL (a check
 * failed) when it does not load. */
static inline smoe_config *load_model(const char *cfgdir, const char *model,
                                      const char *const *ov, int n_ov)
{
    char base[1024];
    snprintf(base, sizeof base, "%s/base.yml", cfgdir);
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model;
    o.overrides = ov;
    o.n_overrides = n_ov;
    smoe_config *cfg;
    smoe_err err;
    if (smoe_config_load(&o, &cfg, &err)) {
        CHECKF(0, "config: %s", err.msg);
        return NULL;
    }
    return cfg;
}

/* deepseek2-16b (load_model). */
static inline smoe_config *load_deepseek(const char *cfgdir, const char *const *ov, int n_ov)
{
    return load_model(cfgdir, "deepseek2-16b", ov, n_ov);
}

/* A cpu profile with every key set. */
static inline smoe_hw cpu_profile(void)
{
    smoe_hw cpu = { .name = "cpu-mpi", .kind = SMOE_HW_CPU, .devices_per_chip = 1,
                    .peak_flops = 3.25e10, .hbm_bytes = 6e9, .hbm_bandwidth = 1.1e10,
                    .ici_bandwidth = 4.5e9, .ici_links = 1, .ici_latency = 2.5e-6,
                    .devices_per_node = 4, .dcn_bandwidth = 4.5e9, .dcn_latency = 2.5e-6,
                    .collective_engines = 2, .compute_efficiency = 0.5,
                    .permute_bandwidth = 2e9,
                    .cpu = { .a2a_bandwidth = 3e9, .a2a_latency = 1e-6,
                             .collectives_use_compute = 1, .elementwise_bandwidth = 1.1e10,
                             .op_overhead = 1.5e-7, .compute_bytes = 4,
                             .gemm_small_flops = 8e9, .compute_scale = 1.7,
                             .sync_skew = 1e-4 } };
    return cpu;
}

#endif
