/* A hardware profile's kind and the CPU model's keys: the kind is parsed
 * once into smoe_hw_kind (its name written back as the file spells it); a
 * cpu profile's own keys (smoe_hw.cpu) land in the sub-struct, and a tpu or
 * gpu profile that sets one is refused at the key's file:line:col, in one
 * line, where it used to be read into the accelerator's cost model.
 * usage: test_sim_hw */
#include "smoe/config.h"
#include "check.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The required keys of every profile (values in range). */
static const char k_head[] = "devices_per_chip: 1\npeak_flops: 1e12\nhbm_bytes: 1e9\n"
                             "hbm_bandwidth: 1e10\nici_bandwidth: 1e10\nici_links: 1\n"
                             "ici_latency: 1e-6\ndevices_per_node: 4\ndcn_bandwidth: 1e9\n"
                             "dcn_latency: 1e-5\ncollective_engines: 2\n";

/* Each cpu key, a value in its range, and where it lands. */
#define CPU(f) offsetof(smoe_hw, cpu.f)
static const struct {
    const char *key, *val;
    size_t off;
    double want;
} k_cpu[] = {
    { "a2a_bandwidth", "2e9", CPU(a2a_bandwidth), 2e9 },
    { "a2a_latency", "1e-5", CPU(a2a_latency), 1e-5 },
    { "collectives_use_compute", "1", CPU(collectives_use_compute), 1 },
    { "elementwise_bandwidth", "3e9", CPU(elementwise_bandwidth), 3e9 },
    { "op_overhead", "2e-6", CPU(op_overhead), 2e-6 },
    { "compute_bytes", "2", CPU(compute_bytes), 2 },
    { "gemm_small_flops", "4e9", CPU(gemm_small_flops), 4e9 },
    { "compute_scale", "1.5", CPU(compute_scale), 1.5 },
    { "sync_skew", "3e-4", CPU(sync_skew), 3e-4 },
    { "reduce_lag_bandwidth", "5e9", CPU(reduce_lag_bandwidth), 5e9 },
    { "optimizer_rate", "6e8", CPU(optimizer_rate), 6e8 },
    { "core_share", "0.5", CPU(core_share), 0.5 },
    { "dcn_reduce_bandwidth", "7e8", CPU(dcn_reduce_bandwidth), 7e8 },
    { "dcn_reduce_latency", "1e-4", CPU(dcn_reduce_latency), 1e-4 },
    { "dcn_link_bandwidth", "6e8", CPU(dcn_link_bandwidth), 6e8 },
    { "ici_reduce_bandwidth", "8e9", CPU(ici_reduce_bandwidth), 8e9 },
    { "ici_reduce_latency", "2e-5", CPU(ici_reduce_latency), 2e-5 },
    { "gather_core_fraction", "0.25", CPU(gather_core_fraction), 0.25 },
};
#define N_CPU ((int)(sizeof k_cpu / sizeof k_cpu[0]))

static double field(const smoe_hw *hw, int i)
{
    const char *p = (const char *)hw + k_cpu[i].off;
    if (strcmp(k_cpu[i].key, "collectives_use_compute") == 0)
        return *(const int *)p;
    return *(const double *)p;
}

/* A profile of `kind` with the required keys and then `extra` (a cpu
 * profile ends with the line that says it is whole). */
static smoe_status load(const char *kind, const char *extra, smoe_hw *hw, smoe_err *err)
{
    char text[2048];
    snprintf(text, sizeof text, "name: x\nkind: %s\n%s%s%s", kind, k_head, extra,
             strcmp(kind, "cpu") == 0 ? "complete: true\n" : "");
    return smoe_hw_load_text(text, "p.yml", hw, err);
}

static void test_kinds(void)
{
    static const char *const names[] = { "tpu", "gpu", "cpu" };
    static const smoe_hw_kind kinds[] = { SMOE_HW_TPU, SMOE_HW_GPU, SMOE_HW_CPU };
    smoe_hw hw;
    smoe_err err;
    for (int i = 0; i < 3; i++) {
        smoe_status s = load(names[i], "", &hw, &err);
        CHECKF(s == SMOE_OK && hw.kind == kinds[i], "kind %s: status %d, kind %d", names[i],
               (int)s, (int)hw.kind);
        CHECK_STR(smoe_hw_kind_name(kinds[i]), names[i]);
    }
    CHECK_STR(smoe_hw_kind_name((smoe_hw_kind)7), "?");
    smoe_status s = load("TPU", "", &hw, &err);
    CHECKF(s == SMOE_EINVAL && strstr(err.msg, "'kind' must be tpu, gpu or cpu"),
           "kind TPU: status %d (%s)", (int)s, err.msg);
    /* a cpu profile without progress was measured as "calls" */
    CHECK(load("cpu", "", &hw, &err) == SMOE_OK && strcmp(hw.cpu.progress, "calls") == 0);
    CHECK(load("tpu", "", &hw, &err) == SMOE_OK && hw.cpu.progress[0] == 0);
}

/* Every cpu key lands in smoe_hw.cpu on a cpu profile and is refused, at
 * its line, on a tpu and a gpu profile. */
static void test_cpu_keys(void)
{
    for (int i = 0; i < N_CPU; i++) {
        char extra[128];
        snprintf(extra, sizeof extra, "%s: %s\n", k_cpu[i].key, k_cpu[i].val);
        smoe_hw hw;
        smoe_err err;
        smoe_status s = load("cpu", extra, &hw, &err);
        CHECKF(s == SMOE_OK && field(&hw, i) == k_cpu[i].want, "cpu %s: status %d (%s)",
               k_cpu[i].key, (int)s, s ? err.msg : "");
        for (int g = 0; g < 2; g++) {
            s = load(g ? "gpu" : "tpu", extra, &hw, &err);
            char want[128];
            snprintf(want, sizeof want, "'%s' is a cpu profile's key", k_cpu[i].key);
            CHECKF(s == SMOE_EINVAL && strstr(err.msg, want) && !strchr(err.msg, '\n') &&
                       strncmp(err.where, "p.yml:14:", 9) == 0,
                   "%s %s: status %d at '%s' (%s)", g ? "gpu" : "tpu", k_cpu[i].key, (int)s,
                   err.where, s ? err.msg : "accepted");
        }
    }
}

int main(void)
{
    test_kinds();
    test_cpu_keys();
    return check_report();
}
