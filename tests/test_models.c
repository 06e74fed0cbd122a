/* Every upstream MaxText model file (../shared/maxtext/configs/models at
 * commit e591f30) planned with its base.yml on 64 devices from the built-in
 * enumeration, ici_fsdp_parallelism=-1 and, for MoE models,
 * ici_expert_parallelism=4. Oracles:
 *   - the published total parameter count of each model
 *     (tests/data/params/published.tsv: count, tolerance, source, and why
 *     when the tolerance is over 1%);
 *   - MaxText's naming: every logical axis is one MaxText's rules name (or a
 *     scanned-stack name), every dim is positive, the state tree is in
 *     tree-flatten order with the AdamW moments mirroring the params;
 *   - MaxText's refusals: gemma4-e2b/e4b need scan_layers=false (types.py);
 *   - scan_layers=false enumerates the same parameters, none stacked.
 * The golden dumps (test_golden) check keys, shapes and axes one by one
 * where MaxText ships them. Skips, saying so, when ../shared is absent. */
#include "check.h"
#include "smoe/config.h"
#include "smoe/plan.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct row {
    char model[64];
    double published; /* < 0: none */
    double tol_pct;
    char note[512];
} row;

static row g_rows[128];
static int g_nrows;

/* "15706484224", "236B", "1.04T" -> count; "-" -> -1. */
static double parse_count(const char *s)
{
    if (strcmp(s, "-") == 0)
        return -1;
    char *end;
    double v = strtod(s, &end);
    if (*end == 'B')
        v *= 1e9;
    else if (*end == 'T')
        v *= 1e12;
    return v;
}

static int load_table(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[2048];
    while (fgets(line, sizeof line, f) && g_nrows < (int)(sizeof g_rows / sizeof g_rows[0])) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *field[5] = { 0 };
        int n = 0;
        for (char *p = line; n < 5; n++) {
            field[n] = p;
            char *t = strchr(p, '\t');
            if (!t) {
                n++;
                break;
            }
            *t = 0;
            p = t + 1;
        }
        if (n < 4)
            continue;
        row *r = &g_rows[g_nrows++];
        snprintf(r->model, sizeof r->model, "%s", field[0]);
        r->published = parse_count(field[1]);
        r->tol_pct = atof(field[2]);
        snprintf(r->note, sizeof r->note, "%s", n > 4 && field[4] ? field[4] : "");
    }
    fclose(f);
    return 0;
}

static const row *find_row(const char *model)
{
    for (int i = 0; i < g_nrows; i++)
        if (strcmp(g_rows[i].model, model) == 0)
            return &g_rows[i];
    return NULL;
}

/* Tree-flatten order of two params paths (components compared in turn). */
static int path_cmp(const char *a, const char *b)
{
    for (;;) {
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        size_t l = la < lb ? la : lb;
        int c = memcmp(a, b, l);
        if (c)
            return c;
        if (la != lb)
            return la < lb ? -1 : 1;
        if (!a[la] || !b[lb])
            return a[la] ? 1 : b[lb] ? -1 : 0;
        a += la + 1;
        b += lb + 1;
    }
}

/* A logical name MaxText uses: one of base.yml's logical_axis_rules, a
 * scanned-stack name, or one of the names MaxText's model code (e591f30)
 * gives weights without a rule in base.yml (they resolve to None). */
static int known_name(const smoe_rules *rules, const char *n)
{
    static const char *const extra[] = {
        "layers", "dense_layers", "moe_layers", "local_layers",  /* scan names */
        "q_lora_up_proj", "kv_lora_up_proj",       /* layers/attention_mla.py */
        "num_activations",                          /* layers/linears.py */
        "expert_only",                              /* layers/moe.py */
        "o_groups", "o_lora_up_proj", "indexer_q", "indexer_weights",
                                                    /* layers/attention_compressed.py */
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        if (strcmp(n, extra[i]) == 0)
            return 1;
    /* scans between engram layers: dense_layers_<a>_<b>, moe_layers_<a>_<b> */
    long a, b;
    char tail;
    if ((sscanf(n, "dense_layers_%ld_%ld%c", &a, &b, &tail) == 2 ||
         sscanf(n, "moe_layers_%ld_%ld%c", &a, &b, &tail) == 2) && a <= b)
        return 1;
    for (int i = 0; i < rules->n; i++)
        if (strcmp(rules->r[i].name, n) == 0)
            return 1;
    return 0;
}

static smoe_status load_model(const char *base, const char *model, const char *const *ov, int nov,
                              smoe_config **cfg, smoe_err *err)
{
    smoe_config_opts o;
    memset(&o, 0, sizeof o);
    o.base_path = base;
    o.model = model;
    o.overrides = ov;
    o.n_overrides = nov;
    return smoe_config_load(&o, cfg, err);
}

/* Structure and naming of one plan; returns the total parameter count. */
static int64_t check_plan(const smoe_plan *p, const smoe_rules *rules, const char *model)
{
    int nparams = 0, bad_names = 0, bad_dims = 0, order = 1, mirror = 1;
    int64_t total = 0;
    const smoe_weight *prev = NULL;
    for (int k = 0; k < p->n; k++) {
        const smoe_weight *w = &p->w[k];
        for (int d = 0; d < w->rank; d++) {
            if (w->shape[d] < 1)
                bad_dims++;
            if (w->logical[d] && !known_name(rules, w->logical[d])) {
                if (!bad_names)
                    fprintf(stderr, "%s: %s: logical axis '%s' is no name of MaxText's rules\n",
                            model, w->key, w->logical[d]);
                bad_names++;
            }
        }
        if (w->kind != SMOE_ENTRY_PARAM)
            continue;
        nparams++;
        int64_t e = 1;
        for (int d = 0; d < w->rank; d++)
            e *= w->shape[d];
        total += e;
        if (prev && path_cmp(prev->path, w->path) >= 0)
            order = 0;
        prev = w;
    }
    /* .step, params, count, mu, nu, count: each moment mirrors its param */
    CHECKF(p->n == 3 * nparams + 3, "%s: %d entries for %d params", model, p->n, nparams);
    for (int k = 0; k < nparams && p->n == 3 * nparams + 3; k++) {
        const smoe_weight *a = &p->w[1 + k], *mu = &p->w[2 + nparams + k],
                          *nu = &p->w[2 + 2 * nparams + k];
        int same = a->kind == SMOE_ENTRY_PARAM && mu->kind == SMOE_ENTRY_MU &&
                   nu->kind == SMOE_ENTRY_NU && a->rank == mu->rank && a->rank == nu->rank &&
                   strcmp(a->path, mu->path) == 0 && strcmp(a->path, nu->path) == 0;
        for (int d = 0; same && d < a->rank; d++)
            same = a->shape[d] == mu->shape[d] && a->shape[d] == nu->shape[d];
        mirror &= same;
    }
    CHECKF(mirror, "%s: AdamW moments do not mirror the params", model);
    CHECKF(order, "%s: params are not in tree-flatten order", model);
    CHECKF(bad_names == 0, "%s: %d logical axes MaxText's rules do not name", model, bad_names);
    CHECKF(bad_dims == 0, "%s: %d dims < 1", model, bad_dims);
    return total;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_models SHARED_MAXTEXT_CONFIGS PUBLISHED_TSV\n");
        return 2;
    }
    char base[1024], dir[1024];
    snprintf(base, sizeof base, "%s/base.yml", argv[1]);
    snprintf(dir, sizeof dir, "%s/models", argv[1]);
    DIR *d = opendir(dir);
    if (!d || access(base, R_OK) != 0) {
        printf("skipped: upstream model files: %s not found\n", dir);
        if (d)
            closedir(d);
        return check_report();
    }
    if (load_table(argv[2]))
        return 2;
    /* base.yml's own rules: model files may replace them (2dfsdp, batchsplit) */
    smoe_config *base_cfg;
    smoe_err berr;
    if (load_model(base, NULL, NULL, 0, &base_cfg, &berr)) {
        fprintf(stderr, "%s: %s\n", berr.where, berr.msg);
        return 2;
    }
    const smoe_rules *base_rules = smoe_config_rules(base_cfg);
    char names[128][64];
    int nm = 0;
    struct dirent *de;
    while ((de = readdir(d)) && nm < 128) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".yml") == 0 && l - 4 < sizeof names[0])
            snprintf(names[nm++], sizeof names[0], "%.*s", (int)(l - 4), de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nm, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    int planned = 0, counted = 0;
    printf("%-28s %16s %16s %8s\n", "model file", "smoe", "published", "diff");
    for (int i = 0; i < nm; i++) {
        const char *model = names[i];
        const row *r = find_row(model);
        CHECKF(r != NULL, "%s: no row in the published-count table", model);
        const char *ov[3] = { "ici_fsdp_parallelism=-1", NULL, NULL };
        int nov = 1;
        smoe_config *cfg;
        smoe_err err;
        if (load_model(base, model, ov, nov, &cfg, &err)) {
            CHECKF(0, "%s: config: %s: %s", model, err.where, err.msg);
            continue;
        }
        smoe_dims dm;
        int moe = smoe_plan_dims(cfg, &dm, &err) == SMOE_OK && dm.experts > 1;
        int small = dm.decoder_block && strcmp(dm.decoder_block, "gemma4_small") == 0;
        smoe_config_free(cfg);
        if (moe)
            ov[nov++] = "ici_expert_parallelism=4";
        smoe_plan_opts po = { 64, 1, NULL, 4 };
        smoe_plan *p = NULL;
        if (small) {
            /* MaxText refuses scanned layers for these (types.py) */
            if (load_model(base, model, ov, nov, &cfg, &err) == SMOE_OK) {
                smoe_status s = smoe_plan_build(cfg, &po, &p, &err);
                CHECKF(s != SMOE_OK && strstr(err.msg, "scan_layers=false"),
                       "%s: scanned layers not refused", model);
                smoe_plan_free(s == SMOE_OK ? p : NULL);
                smoe_config_free(cfg);
            }
            ov[nov++] = "scan_layers=false";
        }
        if (load_model(base, model, ov, nov, &cfg, &err)) {
            CHECKF(0, "%s: config: %s: %s", model, err.where, err.msg);
            continue;
        }
        smoe_status s = smoe_plan_build(cfg, &po, &p, &err);
        if (s) {
            printf("%-28s %16s   (not planned: %s)\n", model, "-", err.msg);
            CHECKF(0, "%s: plan: %s: %s", model, err.where, err.msg);
            smoe_config_free(cfg);
            continue;
        }
        planned++;
        int64_t total = check_plan(p, base_rules, model);
        /* scan_layers=false: the same weights, one module per layer */
        if (!small) {
            const char *uov[4] = { ov[0], ov[1], ov[2], NULL };
            uov[nov] = "scan_layers=false";
            smoe_config *ucfg;
            smoe_plan *up;
            if (load_model(base, model, uov, nov + 1, &ucfg, &err) == SMOE_OK) {
                if (smoe_plan_build(ucfg, &po, &up, &err) == SMOE_OK) {
                    int stacked = 0;
                    for (int k = 0; k < up->n; k++)
                        stacked += up->w[k].scan_axis >= 0;
                    int64_t ut = check_plan(up, base_rules, model);
                    CHECKF(ut == total, "%s: %lld parameters unscanned, %lld scanned", model,
                           (long long)ut, (long long)total);
                    CHECKF(stacked == 0, "%s: %d stacked weights with scan_layers=false", model,
                           stacked);
                    smoe_plan_free(up);
                } else {
                    CHECKF(0, "%s: scan_layers=false: %s", model, err.msg);
                }
                smoe_config_free(ucfg);
            }
        }
        if (r && r->published > 0) {
            double diff = 100.0 * ((double)total - r->published) / r->published;
            printf("%-28s %16lld %16.0f %+7.2f%%%s\n", model, (long long)total, r->published,
                   diff, r->tol_pct > 1 ? "  (explained)" : "");
            CHECKF(diff <= r->tol_pct && diff >= -r->tol_pct,
                   "%s: %lld parameters, published %.0f (%+.2f%%, tolerance %.1f%%)", model,
                   (long long)total, r->published, diff, r->tol_pct);
            CHECKF(r->tol_pct <= 1 || r->note[0], "%s: tolerance over 1%% without a reason",
                   model);
            counted++;
        } else {
            printf("%-28s %16lld %16s\n", model, (long long)total, "-");
        }
        smoe_plan_free(p);
        smoe_config_free(cfg);
    }
    /* Multi-token prediction: DeepSeek-V3 is 685B with its MTP module
     * (technical report, arXiv:2412.19437: 671B main model + 14B MTP, whose
     * embedding and output head are the main model's, shared) */
    {
        const char *mov[3] = { "ici_fsdp_parallelism=-1", "ici_expert_parallelism=4",
                               "mtp_num_layers=1" };
        smoe_config *cfg;
        smoe_err err;
        smoe_plan_opts po = { 64, 1, NULL, 4 };
        smoe_plan *p;
        if (load_model(base, "deepseek3-671b", mov, 3, &cfg, &err) == SMOE_OK) {
            if (smoe_plan_build(cfg, &po, &p, &err) == SMOE_OK) {
                int64_t total = check_plan(p, base_rules, "deepseek3-671b+mtp");
                const smoe_weight *w =
                    smoe_plan_find(p, "mtp_block/mtp_layer_1/mtp_1_projection/kernel");
                CHECKF(w && w->rank == 2 && w->shape[0] == 2 * 7168 && w->shape[1] == 7168,
                       "deepseek3-671b+mtp: mtp_1_projection");
                double diff = 100.0 * ((double)total - 685e9) / 685e9;
                printf("%-28s %16lld %16.0f %+7.2f%%\n", "deepseek3-671b+mtp", (long long)total,
                       685e9, diff);
                CHECKF(diff <= 1 && diff >= -1, "deepseek3-671b+mtp: %lld parameters",
                       (long long)total);
                smoe_plan_free(p);
            } else {
                CHECKF(0, "deepseek3-671b+mtp: %s", err.msg);
            }
            smoe_config_free(cfg);
        }
        /* MTP for another block is refused, not silently left out */
        const char *qov[2] = { "ici_fsdp_parallelism=-1", "mtp_num_layers=1" };
        if (load_model(base, "qwen3-8b", qov, 2, &cfg, &err) == SMOE_OK) {
            smoe_status s = smoe_plan_build(cfg, &po, &p, &err);
            CHECKF(s != SMOE_OK && strstr(err.msg, "multi-token"), "qwen3-8b+mtp not refused");
            if (s == SMOE_OK)
                smoe_plan_free(p);
            smoe_config_free(cfg);
        }
    }
    printf("model files planned: %d of %d; parameter counts checked: %d\n", planned, nm,
           counted);
    smoe_config_free(base_cfg);
    CHECKF(nm >= 78, "%d model files, expected MaxText's 78", nm);
    CHECKF(planned == nm, "%d of %d model files planned", planned, nm);
    return check_report();
}
