/* MaxText's unscanned decoder (scan_layers=false: decoders.py makes one
 * module per layer, layers_0 ... layers_{N-1}, each rematerialised on its
 * own) as the step model's layer stack. The N layers' weights of one name
 * (the path after "layers_<i>/") become one weight of the layer kind,
 * each figure the mean over the N layers: N layers of the kind gather,
 * reduce and hold what the N unrolled layers do, in total. A weight only
 * some layers have (the K/V projections a KV-sharing layer lacks) counts
 * for those. The executors run the unrolled layers as XLA's scan runs
 * stacked ones (a layer's gathers issued when it is ready to run). */
#include "sched_impl.h"

#include <ctype.h>
#include <string.h>

int sim_expert_weight(const smoe_weight *w)
{
    if (smoe_weight_routed(w))
        return 1;
    for (int d = 0; d < w->rank; d++)
        if (w->logical[d] && strcmp(w->logical[d], "mlp_moe") == 0)
            return 1;
    return 0;
}

#define UNROLLED_PREFIX "decoder/layers_"

int sim_unrolled_layer(const char *path, const char **rest)
{
    size_t n = strlen(UNROLLED_PREFIX);
    if (!path || strncmp(path, UNROLLED_PREFIX, n) != 0 || !isdigit((unsigned char)path[n]))
        return -1;
    int i = 0;
    const char *p = path + n;
    for (; isdigit((unsigned char)*p) && i < 1000000; p++)
        i = i * 10 + (*p - '0');
    if (*p != '/')
        return -1;
    if (rest)
        *rest = p + 1;
    return i;
}

/* the running mean of a fraction of a time (pre_net of pre_s, ...) */
static double frac_mean(double f0, double t0, double f1, double t1)
{
    return t0 + t1 > 0 ? (f0 * t0 + f1 * t1) / (t0 + t1) : 0;
}

smoe_status sim_unrolled_add(sim_kind *k, const sim_w *x, double n, smoe_err *err)
{
    const char *rest = NULL, *r;
    sim_w *y = NULL;
    if (sim_unrolled_layer(x->name, &rest) < 0 || n < 1)
        return smoe_err_set(err, SMOE_EINVAL, "'%s' is no unscanned decoder layer's weight",
                            x->name ? x->name : "?");
    for (int j = 0; j < k->nw && !y; j++)
        if (sim_unrolled_layer(k->w[j].name, &r) >= 0 && strcmp(r, rest) == 0)
            y = &k->w[j];
    if (!y) {
        if (k->nw == SMOE_SIM_MAX_WEIGHTS)
            return smoe_err_set(err, SMOE_EINVAL, "more than %d weights in a layer",
                                SMOE_SIM_MAX_WEIGHTS);
        y = &k->w[k->nw++];
        memset(y, 0, sizeof *y);
        y->name = x->name;
        y->routed = x->routed;
        y->down = x->down;
    }
    y->pre_net = frac_mean(y->pre_net, y->pre_stored_s, x->pre_net, x->pre_stored_s / n);
    y->rs_net = frac_mean(y->rs_net, y->rs_s, x->rs_net, x->rs_s / n);
    double *dst[] = { &y->pre_s, &y->pre_legacy_s, &y->res_legacy_s, &y->pre_stored_s,
                      &y->rs_s, &y->ar_s, &y->rs_cast_s, &y->ag_lat_s, &y->rs_lat_s,
                      &y->bytes, &y->bytes_stored, &y->bytes_exec };
    const double src[] = { x->pre_s, x->pre_legacy_s, x->res_legacy_s, x->pre_stored_s,
                           x->rs_s, x->ar_s, x->rs_cast_s, x->ag_lat_s, x->rs_lat_s,
                           x->bytes, x->bytes_stored, x->bytes_exec };
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
        *dst[i] += src[i] / n;
    k->bytes += x->bytes / n;
    k->bytes_stored += x->bytes_stored / n;
    k->bytes_exec += x->bytes_exec / n;
    return SMOE_OK;
}

smoe_status sim_unrolled_count(const smoe_config *cfg, const smoe_plan *plan, int64_t layers,
                               int *n, double *mlp, smoe_err *err)
{
    int top = -1, nmlp = 0;
    double width = 0;
    const char *rest;
    for (int i = 0; i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        if (w->kind == SMOE_ENTRY_PARAM && sim_expert_weight(w))
            return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "scan_layers"),
                               "scan_layers: smoe sim models unscanned layers without routed "
                               "experts only (%s is a routed expert's)", w->path);
        int l = w->kind == SMOE_ENTRY_PARAM ? sim_unrolled_layer(w->path, &rest) : -1;
        if (l < 0)
            continue;
        top = l > top ? l : top;
        if (strcmp(rest, "mlp/wo/kernel") == 0 && w->rank == 2) { /* mlp x embed */
            width += (double)w->shape[0];
            nmlp++;
        }
    }
    if (top + 1 != layers)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "scan_layers"),
                           "scan_layers: the plan has %d unscanned decoder layers "
                           "(layers_<i>), the model %lld", top + 1, (long long)layers);
    *n = top + 1;
    *mlp = nmlp ? width / nmlp : 0;
    return SMOE_OK;
}
