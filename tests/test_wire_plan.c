/* Compressed gathers of the model smoe train runs are mesh-independent: for
 * every parameter of the tiny model (configs/train.yml, --model tiny)
 * planned on this job's mesh, through bf16 and through int8 blocks of 8,
 * each rank cuts its shard of a known global tensor (per layer, as smoe
 * train holds a stacked weight: the scan dim removed), gathers it with the
 * gather the run executes (smoe_gather_exec_of + smoe_gather_exec_set_wire
 * in the plan's wire, co-axis and legacy), and the gathered buffer must
 * equal, bit for bit, the naive twins' conversion of the whole global
 * tensor cut to the rank's block. One rank's buffer is that conversion
 * whole, so the values a rank gathers on any mesh are bitwise the values
 * one rank gathers from the same master weights: the int8 block grid and
 * bf16's rounding do not depend on the mesh. No weight falls back.
 * usage: mpirun -n N test_wire_plan CONFIG_DIR [KEY=VALUE ...] */
#define _GNU_SOURCE
#include "check.h"
#include "wire_testlib.h"
#include "smoe/comm.h"
#include "smoe/config.h"
#include "smoe/dtype.h"
#include "smoe/plan.h"
#include "smoe/runtime.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const smoe_comm *cm;

/* Master-weight-like values of (weight, layer, element): magnitudes over
 * three decades within a block, signs mixed, and one in 7 an exact bf16
 * tie (9 significant bits, the last one set). */
static float value(int w, int64_t layer, int64_t i)
{
    uint64_t h = (uint64_t)w * 0x9E3779B97F4A7C15u ^ (uint64_t)layer * 0xC2B2AE3D27D4EB4Fu ^
                 (uint64_t)i * 0x165667B19E3779F9u;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9u;
    h ^= h >> 32;
    if (h % 7 == 0) {
        double m = (double)(257 + 2 * (int64_t)(h / 7 % 127));
        return (float)((h >> 40 & 1 ? -1.0 : 1.0) * ldexp(m, -10));
    }
    double u = (double)(h >> 11) / 9007199254740992.0 - 0.5;
    return (float)(u * (h % 3 == 0 ? 1e-3 : h % 3 == 1 ? 0.1 : 1.0));
}

static int64_t numel(const int64_t *s, int r)
{
    int64_t n = 1;
    for (int d = 0; d < r; d++)
        n *= s[d];
    return n;
}

/* One parameter's gathers in one mode: every layer bitwise the naive
 * conversion of the global layer. Returns 1 if it ran. */
static int check_weight(const smoe_plan *p, int wi, int legacy)
{
    const smoe_weight *pw = &p->w[wi];
    const smoe_gather *g = legacy ? &pw->legacy : &pw->gather;
    /* the per-layer form smoe train holds (src/train/store.c) */
    smoe_pspec ls;
    memset(&ls, 0, sizeof ls);
    int64_t lshape[SMOE_MAX_RANK];
    int lr = 0;
    for (int d = 0; d < pw->rank; d++) {
        if (d == pw->scan_axis)
            continue;
        lshape[lr] = pw->shape[d];
        ls.dim[lr++] = pw->spec.dim[d];
    }
    ls.rank = lr;
    /* routed experts keep their 'expert' sharding */
    int routed = strstr(pw->path, "/MoeBlock_0/w") != NULL;
    char what[600];
    snprintf(what, sizeof what, "%s (%s, %s)", pw->path, legacy ? "legacy" : "co-axis",
             smoe_dtype_name(g->wire));
    smoe_err err;
    smoe_gather_exec x;
    smoe_comm_gather *cg = NULL;
    smoe_status s = smoe_gather_exec_of(g, routed, what, &x, &err);
    if (!s)
        s = smoe_gather_exec_set_wire(&x, g, &p->mesh, g->wire, p->int8_block, pw->path, &err);
    if (!s)
        s = smoe_comm_gather_new(cm, &x, what, &cg, &err);
    CHECKF(s == SMOE_OK, "%s: %s", what, err.msg);
    if (s)
        return 0;
    smoe_wgather_info info;
    smoe_comm_gather_info(cm, cg, &info);
    int64_t loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK], bl[SMOE_MAX_RANK], bo[SMOE_MAX_RANK];
    CHECK(smoe_layout_local(&ls, lshape, &p->mesh, smoe_comm_coords(cm), loc, off, NULL) ==
          SMOE_OK);
    smoe_pspec kept;
    memset(&kept, 0, sizeof kept);
    kept.rank = lr;
    if (routed) {
        kept.dim[0].n = 1;
        kept.dim[0].ax[0] = "expert";
    }
    CHECK(smoe_layout_local(&kept, lshape, &p->mesh, smoe_comm_coords(cm), bl, bo, NULL) ==
          SMOE_OK);
    CHECK_INT(numel(loc, lr), info.shard_numel);
    CHECK_INT(numel(bl, lr), info.gathered_numel);
    int64_t total = numel(lshape, lr);
    float *G = malloc(sizeof *G * (size_t)total), *shard = malloc(sizeof *shard * (size_t)info.shard_numel);
    float *want = malloc(sizeof *want * (size_t)info.gathered_numel);
    float *buf = malloc(sizeof *buf * (size_t)info.gathered_numel);
    int ok = 1;
    for (int64_t l = 0; l < pw->layers; l++) {
        for (int64_t i = 0; i < total; i++)
            G[i] = value(wi, l, i);
        smoe_layout_copy(lr, lshape, loc, off, 4, G, shard, 0);
        naive_wire(G, total, g->wire, p->int8_block); /* one rank: convert the whole */
        smoe_layout_copy(lr, lshape, bl, bo, 4, G, want, 0);
        memset(buf, 0xff, sizeof *buf * (size_t)info.gathered_numel);
        smoe_comm_ticket t;
        double wait = 0;
        smoe_comm_gather_start(cm, cg, shard, buf, &t);
        smoe_comm_gather_wait(cm, cg, buf, &t, &wait);
        ok &= memcmp(buf, want, sizeof *buf * (size_t)info.gathered_numel) == 0;
    }
    CHECKF(ok, "%s: rank %d: gathered values differ from the whole tensor's conversion", what,
           smoe_comm_rank(cm));
    free(G);
    free(shard);
    free(want);
    free(buf);
    return 1;
}

int main(int argc, char **argv)
{
    smoe_err err;
    smoe_rt *rt;
    if (smoe_rt_init(&argc, &argv, &rt, &err)) {
        fprintf(stderr, "init: %s\n", err.msg);
        return 1;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: test_wire_plan CONFIG_DIR [KEY=VALUE ...]\n");
        smoe_rt_finalize(rt);
        return 2;
    }
    char base[4200];
    snprintf(base, sizeof base, "%s/train.yml", argv[1]);
    smoe_config_opts co;
    memset(&co, 0, sizeof co);
    co.base_path = base;
    co.model = "tiny";
    co.n_overrides = argc - 2;
    co.overrides = (const char *const *)(argv + 2);
    int64_t ranks = smoe_rt_size(rt);
    smoe_comm c;
    int set = 0, weights = 0;
    static const struct {
        smoe_dtype t;
        int64_t block;
    } wires[] = { { SMOE_DT_BF16, 0 }, { SMOE_DT_INT8, 8 } };
    for (size_t k = 0; k < sizeof wires / sizeof wires[0]; k++) {
        smoe_config *cfg = NULL;
        smoe_plan *p = NULL;
        smoe_plan_opts po = { ranks, 1, NULL, 4 };
        smoe_status s = smoe_config_load(&co, &cfg, &err);
        if (!s)
            s = smoe_plan_build(cfg, &po, &p, &err);
        if (!s)
            s = smoe_plan_set_wire(p, wires[k].t, wires[k].block, SMOE_DT_INT8, &err);
        if (!s && !set) {
            smoe_rt_opts o = { 0, 0 };
            s = smoe_rt_set_mesh(rt, &p->mesh, &o, &err);
            c = smoe_rt_comm(rt);
            cm = &c;
            set = 1;
        }
        CHECKF(s == SMOE_OK, "%s: %s", smoe_dtype_name(wires[k].t), err.msg);
        if (s) {
            smoe_plan_free(p);
            smoe_config_free(cfg);
            break;
        }
        CHECK_INT(p->wire_fallbacks, 0);
        int n = 0;
        for (int i = 0; i < p->n; i++) {
            if (p->w[i].kind != SMOE_ENTRY_PARAM || !p->w[i].has_gather)
                continue;
            CHECKF(p->w[i].gather.wire == wires[k].t && p->w[i].legacy.wire == wires[k].t,
                   "%s: gathered in %s", p->w[i].path, smoe_dtype_name(p->w[i].gather.wire));
            for (int legacy = 0; legacy < 2; legacy++)
                n += check_weight(p, i, legacy);
        }
        weights = n / 2;
        smoe_plan_free(p);
        smoe_config_free(cfg);
    }
    if (!cm) {
        smoe_rt_finalize(rt);
        return 1;
    }
    double counts[2] = { check_pass_, check_fail_ };
    smoe_comm_allreduce_sum_f64(cm, counts, 2);
    int rank = smoe_comm_rank(cm);
    smoe_rt_finalize(rt);
    if (rank == 0)
        printf("%d weights per wire; %d passed, %d failed\n", weights, (int)counts[0],
               (int)counts[1]);
    return counts[1] > 0 ? 1 : 0;
}
