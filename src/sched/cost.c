/* The cost model: turns a plan, the model dimensions, a training shape and
 * a hardware profile into per-layer compute times, per-weight gather and
 * reduction times, expert-exchange times and memory. Roofline per op:
 * max(FLOPs / FLOP rate, bytes / memory bandwidth); collectives:
 * (G - 1) steps of latency plus bytes over the bandwidth of the links the
 * group spans (fast interconnect inside a node or slice, slow network
 * across). No constant here is tuned to any measured step. */
#include "cost_impl.h"

#include <math.h>
#include <string.h>

double smoe_sim_tokens(const smoe_sim_shape *sh)
{
    return (double)sh->batch * (double)sh->seq / (double)(sh->context > 1 ? sh->context : 1);
}

double cost_rate(const cost *c, double m, double k, double n)
{
    if (c->small_flops <= 0)
        return c->flops;
    double d = fmin(m, fmin(k, n));
    if (d <= 64)
        return c->small_flops;
    if (d >= 512)
        return c->flops;
    double f = log(d / 64) / log(8.0);
    return c->small_flops + f * (c->flops - c->small_flops);
}

/* y (m,n) = x (m,k) @ w (k,n), w in wb-byte elements */
double cost_mm(const cost *c, double m, double k, double n, double wb)
{
    if (m <= 0 || k <= 0 || n <= 0)
        return 0;
    double flops = 2 * m * k * n;
    if (c->eff > 0)
        return flops / (cost_rate(c, m, k, n) * c->eff) + c->overhead;
    double bytes = (m * k + m * n) * c->ab + k * n * wb;
    return fmax(flops / cost_rate(c, m, k, n), bytes / c->hbm) + c->overhead;
}

double cost_ew(const cost *c, double elems, double passes)
{
    return elems * c->ab * passes / c->ew + c->overhead;
}

/* Members of the group over `axes` that share device 0's node. */
static double local_members(const cost *c, const smoe_axes *axes, int64_t *g)
{
    return sim_local_members(c->mesh, axes, (int64_t)c->hw->devices_per_node, g);
}

/* A collective moving `bytes` per device into (or out of) it over `axes`.
 * Latency steps: a ring per torus dimension on TPUs (3 dimensions of
 * cbrt(G) members); rings inside and across nodes elsewhere. The bytes
 * from members on the same node move at the fast interconnect's rate,
 * those from other nodes at the slow network's, concurrently. Of that
 * time, the within-node steps and bytes are the cores' own work on cpu
 * profiles (a copy through shared memory); the network's latency and
 * bytes are not (the kernel's TCP stack and the link move them while the
 * rank computes): *c->net gets the second part.
 * A weight gather (`one_round`) on a cpu profile across nodes is not a
 * ring: smoe's runtime issues MPI_Iallgather, which Open MPI's libnbc runs
 * by default as its linear algorithm (ompi/mca/coll/libnbc/
 * nbc_iallgather.c: every member sends its block to every other in one
 * round), so the within-node blocks arrive while the cross-node ones are
 * on the way and the gather's fixed cost is the cross-node one, which is
 * what dcn_latency measures (smoe sim --calibrate: a layer's gathers as
 * smoe train issues them, per cross-node step). */
static double coll_at(const cost *c, const smoe_axes *axes, double bytes, double bw_override,
                      int one_round)
{
    int64_t g;
    double gl, near_bytes, far_bytes, far_steps;
    sim_stage_far(c->mesh, axes, c->hw->devices_per_node, bytes, &g, &gl, &near_bytes, &far_bytes,
                  &far_steps);
    if (g <= 1 || bytes <= 0)
        return 0;
    double ici = bw_override > 0 ? bw_override : c->ici;
    double far = (double)g - gl;
    double t_local = near_bytes / ici;
    double t_far = far_bytes / c->dcn;
    double steps_local = c->hw->kind == SMOE_HW_TPU ? 3 * (cbrt(gl) - 1) : gl - 1;
    double lat = steps_local * c->ici_lat;
    if (far > 0 && one_round && c->hw->kind == SMOE_HW_CPU)
        lat = 0; /* the within-node blocks arrive during the cross-node round */
    lat += far_steps * c->dcn_lat;
    if (c->net && far > 0)
        *c->net += far_steps * c->dcn_lat + fmax(0, t_far - t_local);
    return lat + fmax(t_local, t_far);
}

double cost_coll(const cost *c, const smoe_axes *axes, double bytes, double bw_override)
{
    return coll_at(c, axes, bytes, bw_override, 0);
}

/* A gather stage's time (stage_levels' collectives). */
static double stage_time(const cost *c, const smoe_axes *ax, double local)
{
    smoe_levels lv;
    smoe_part_mesh pm;
    double b[2];
    if (!sim_stage_levels(c->mesh, ax, local, &lv, &pm, b))
        return coll_at(c, ax, b[0], 0, 1);
    cost cp = *c;
    cp.mesh = &pm.mesh;
    return coll_at(&cp, &lv.across, b[0], 0, 1) + coll_at(&cp, &lv.within, b[1], 0, 1);
}

/* Gather stages of one plan entry: one per gathered dim, the buffer
 * growing stage by stage. */
static double gather_time(const cost *c, const smoe_gather *g, const smoe_axes *stage_axes,
                          int residual, double scale)
{
    double local = (double)g->bytes_in * scale, t = 0;
    for (int d = 0; d < g->rank; d++) {
        const smoe_axes *ax = residual ? &stage_axes[d] : &g->axes[d];
        if (!ax->n)
            continue;
        t += stage_time(c, ax, local);
        local *= (double)smoe_axes_size(ax, c->mesh);
    }
    return t;
}

/* Mesh axes (> 1) a weight is replicated on: its gradient all-reduce. */
static double allreduce_time(const cost *c, const smoe_gather *g, double scale)
{
    smoe_axes rep;
    rep.n = 0;
    for (int a = 0; a < c->mesh->n; a++) {
        if (c->mesh->size[a] <= 1)
            continue;
        int used = 0;
        for (int d = 0; d < g->rank; d++)
            used |= smoe_axes_has(&g->live[d], c->mesh->name[a]);
        if (!used)
            rep.ax[rep.n++] = c->mesh->name[a];
    }
    if (!rep.n)
        return 0;
    double grp = (double)smoe_axes_size(&rep, c->mesh);
    /* ring all-reduce: a reduce-scatter and an all-gather of the shard */
    double before = c->net ? *c->net : 0;
    double t = cost_coll(c, &rep, (double)g->bytes_in * scale * (grp - 1) / grp, 0);
    if (c->net)
        *c->net += *c->net - before;
    return 2 * t;
}

/* A weight's gradient reduction: its gather's transpose (reduce-scattered
 * over the gather's axes) and the all-reduce over the axes it is
 * replicated on, at c's figures (the reductions' own across nodes). */
static double reduce_time(const cost *c, const smoe_gather *g, double scale)
{
    return gather_time(c, g, NULL, 0, scale) + allreduce_time(c, g, scale);
}


static smoe_status add_weight(sim_kind *k, const sim_w *w, smoe_err *err)
{
    if (k->nw == SMOE_SIM_MAX_WEIGHTS)
        return smoe_err_set(err, SMOE_EINVAL, "more than %d weights in a layer",
                            SMOE_SIM_MAX_WEIGHTS);
    k->w[k->nw++] = *w;
    k->bytes += w->bytes;
    k->bytes_stored += w->bytes_stored;
    k->bytes_exec += w->bytes_exec;
    return SMOE_OK;
}

/* num_vocab_tiling (MaxText vocabulary_tiling.py vocab_tiling_linen_loss):
 * the batch x seq tokens cut into that many tiles, each tile's logits and
 * loss computed in a scan; an integer >= 1 that divides the tokens. */
static smoe_status vocab_tiles(const smoe_config *cfg, const smoe_sim_shape *sh, int64_t *out,
                               smoe_err *err)
{
    double v;
    smoe_status s = smoe_config_float_or(cfg, "num_vocab_tiling", 1, &v, err);
    if (s)
        return s;
    int64_t tokens = (int64_t)smoe_sim_tokens(sh);
    if (!(v >= 1 && v <= (double)tokens && v == (double)(int64_t)v) || tokens % (int64_t)v)
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "num_vocab_tiling"),
                           "num_vocab_tiling = %g: MaxText cuts a device's %lld tokens (batch x "
                           "seq) into that many equal tiles: an integer >= 1 dividing them",
                           v, (long long)tokens);
    *out = (int64_t)v;
    return SMOE_OK;
}


/* Elements of smoe's runtime's gathered buffer of w (smoe train's): its
 * executable form (smoe_gather_exec_of) gathers every live axis, ahead or
 * at use, but keeps a routed weight's expert axis; the plan's bytes_out
 * over `elem` where that form cannot be made (the run refuses it). */
static double exec_elems(const smoe_weight *w, const smoe_mesh *mesh, int routed, double elem)
{
    smoe_gather_exec x;
    smoe_err e;
    if (smoe_gather_exec_of(&w->gather, routed, w->path, &x, &e))
        return (double)w->gather.bytes_out / elem;
    double n = 1;
    for (int d = 0; d < x.rank; d++) {
        double kept = 1;
        for (int i = 0; i < x.live[d].n; i++)
            if (!smoe_axes_has(&x.prefetch[d], x.live[d].ax[i]) &&
                !smoe_axes_has(&x.at_use[d], x.live[d].ax[i]))
                kept *= (double)smoe_mesh_axis_size(mesh, x.live[d].ax[i]);
        n *= (double)x.shape[d] / kept;
    }
    return n;
}

static smoe_status calls_across_hosts(const smoe_plan *plan, const smoe_hw *hw, smoe_err *err)
{
    long long dev = (long long)smoe_mesh_devices(&plan->mesh), per = (long long)hw->devices_per_node;
    long long slices = (long long)smoe_mesh_slices(&plan->mesh);
    if (slices > 1) /* each slice its own hosts (placement.c) */
        return smoe_err_set(err, SMOE_EINVAL,
                            "profile %s: progress 'calls' across the %lld slices is not modelled "
                            "(slices are joined by the network, which would move only at the "
                            "ranks' MPI calls): calibrate with --progress-thread and train with "
                            "--progress-thread",
                            hw->name, slices);
    return smoe_err_set(err, SMOE_EINVAL,
                        "profile %s: hosts of %lld ranks (devices_per_node: the ranks per host it "
                        "was calibrated with), so %lld devices span %lld hosts, and progress "
                        "'calls' with gathers across hosts is not modelled (the link would move "
                        "only at the ranks' MPI calls): for %lld ranks on one host calibrate "
                        "under as many ('mpirun -np %lld smoe sim --calibrate'); across hosts "
                        "calibrate with --progress-thread and train with --progress-thread",
                        hw->name, per, dev, (dev + per - 1) / per, dev, dev);
}

/* Tensor parallelism as MaxText's rules shard it (base.yml: heads, mlp
 * and mlp_moe on 'tensor', activation_embed on 'tensor', the batch not):
 * a tensor group of g devices holds g devices' tokens, each device 1/g of
 * every matmul (the FLOPs a device does are unchanged), and the layer
 * input, sharded on its embed dimension, is all-gathered over the axis
 * before attention and again before the MLP or MoE block, their outputs
 * reduce-scattered back: 4 collectives a layer forward, each moving
 * (g - 1) x T x E elements into a device, their transposes in the
 * backward, and again with the recomputed forward. They sit between the
 * matmuls that need them, so they are timed on the compute's path (the
 * MoE block's reduce-scatter after the combine, the rest before the
 * experts). The head's input is all-gathered the same way (forward, and
 * its transpose). *one = one such collective's time (0 without the axis). */
static void tensor_parallel(const cost *c, double T, double E, smoe_sim_model *m, double *one)
{
    static const smoe_axes tensor_ax = { 1, { "tensor" } };
    int64_t g;
    local_members(c, &tensor_ax, &g);
    *one = g > 1 ? cost_coll(c, &tensor_ax, (double)(g - 1) * T * E * c->ab, 0) : 0;
    for (int k = 0; k < 2 && *one > 0; k++) {
        sim_kind *x = &m->k[k];
        double pre = (x->moe ? 3 : 4) * *one, post = (x->moe ? 1 : 0) * *one;
        x->fwd_pre += pre;
        x->bwd_pre += pre * (1 + x->rc[0]);
        x->bwd_full_pre += 2 * pre;
        x->fwd_post += post;
        x->bwd_post += post * (1 + x->rc[2]);
        x->bwd_full_post += 2 * post;
    }
}

/* What smoe_sim_model_build's phases share: the model's dimensions, the
 * cost primitives for gathers (c) and for gradient reductions (cr), the
 * dtype sizes and the layer stacks. */
typedef struct build_ctx {
    smoe_dims d;
    cost c, cr;
    double a2a_bw;              /* the expert exchange's bytes/s (0: the links') */
    double wbytes, gbytes, mom; /* bytes per stored weight, gradient, moments */
    double cast;                /* gathered in the compute dtype / stored */
    double qcast;               /* the routed weights' (sh->gmm_qag: 1 byte) */
    const char *stacks[2];      /* the plan's stack of each layer kind */
    int unrolled;               /* unscanned layers folded into kind 0 */
} build_ctx;

/* The shape against the plan and profile, before anything is built. */
static smoe_status check_shape(const smoe_config *cfg, const smoe_plan *plan, const smoe_hw *hw,
                               const smoe_sim_shape *sh, const smoe_dims *d, smoe_err *err)
{
    if (sh->batch < 1 || sh->seq < 1)
        return smoe_err_set(err, SMOE_EINVAL, "the batch and sequence length must be >= 1");
    int64_t cx = smoe_mesh_axis_size(&plan->mesh, "context");
    if ((sh->context > 1 ? sh->context : 1) != cx || sh->seq % cx)
        return smoe_err_set(err, SMOE_EINVAL,
                            "the shape's context parallelism (%lld) must be the mesh's context "
                            "axis (%lld) and divide the sequence (%lld tokens)",
                            (long long)sh->context, (long long)cx, (long long)sh->seq);
    /* without a progress thread Open MPI advances a nonblocking collective
     * only inside MPI calls: "opal_progress() is today always called by the
     * main thread" (open-mpi/ompi#13074), and the TCP BTL's own progress
     * thread is off unless asked for (btl_tcp_progress_thread, ompi#1491,
     * #2839). The links below move data all along, which is the runtime's
     * progress thread; a link that moves at the ranks' polls is not
     * modelled, so such a prediction across hosts is refused. A host is
     * the profile's devices_per_node ranks (a cpu profile: the ranks per
     * host it was measured with), so more devices than that are hosts too:
     * the message says so, for the ranks that share one host. Slices are
     * hosts whatever the profile's host size (placement.c), and something
     * crosses them in every step (gathers over a dcn fsdp axis, the
     * gradients' all-reduce over a dcn data axis). */
    if (hw->kind == SMOE_HW_CPU && strcmp(hw->cpu.progress, "calls") == 0) {
        if (smoe_mesh_slices(&plan->mesh) > 1)
            return calls_across_hosts(plan, hw, err);
        for (int i = 0; i < plan->n; i++) {
            double fb, fs;
            if (plan->w[i].kind != SMOE_ENTRY_PARAM)
                continue;
            smoe_sim_gather_far(&plan->w[i].gather, &plan->mesh, hw->devices_per_node, 1, &fb, &fs);
            if (fs > 0)
                return calls_across_hosts(plan, hw, err);
        }
    }
    if (d->experts > 0 && d->topk > d->experts) /* as smoe train refuses it */
        return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "num_experts_per_tok"),
                           "num_experts_per_tok = %lld exceeds num_experts = %lld",
                           (long long)d->topk, (long long)d->experts);
    return SMOE_OK;
}

/* The dense expert path's slots (sim_moe_capacity): MaxText one-hot
 * encodes a token's slot over capacity + 1 classes (moe.py
 * generate_masks), an array dimension, which XLA keeps below 2^31. */
static smoe_status check_capacity(const smoe_config *cfg, const smoe_sim_shape *sh,
                                  const smoe_dims *d, smoe_err *err)
{
    if (!(sh->moe_capacity > 0) || d->experts < 1)
        return SMOE_OK;
    double c = sim_moe_capacity(d, sh);
    if (c + 1 < 2147483647.0)
        return SMOE_OK;
    return smoe_err_at(err, SMOE_EINVAL, smoe_config_loc(cfg, "capacity_factor"),
                       "capacity_factor: %g: %.3g slots per expert and sequence; MaxText's "
                       "one-hot over the slots (moe.py generate_masks) needs fewer than 2^31 - 1",
                       sh->moe_capacity, c);
}

/* The profile's rates per device and the dtype sizes into b and m. */
static void set_rates(build_ctx *b, smoe_sim_model *m, const smoe_plan *plan, const smoe_hw *hw,
                      const smoe_sim_shape *sh)
{
    const smoe_hw_cpu *cpu = &hw->cpu; /* the CPU model's terms: 0 on accelerators */
    const double per = hw->devices_per_chip;
    cost *c = &b->c;
    memset(c, 0, sizeof *c);
    c->hw = &m->hw;
    c->mesh = &plan->mesh;
    c->flops = hw->peak_flops / per;
    c->small_flops = cpu->gemm_small_flops > 0 ? cpu->gemm_small_flops / per : 0;
    c->hbm = hw->hbm_bandwidth / per;
    c->ew = cpu->elementwise_bandwidth > 0 ? cpu->elementwise_bandwidth / per : c->hbm;
    /* dtype sizes: the shape's (smoe_sim_dtypes), else bf16 compute and
     * fp32 gradients and moments */
    b->wbytes = (double)plan->dtype_bytes;
    c->ab = sh->compute_bytes > 0    ? sh->compute_bytes
            : cpu->compute_bytes > 0 ? cpu->compute_bytes
                                     : 2;
    b->gbytes = sh->grad_bytes > 0 ? sh->grad_bytes : 4;
    b->mom = sh->no_moments ? 0
             : (sh->mu_bytes > 0 ? sh->mu_bytes : 4) + (sh->nu_bytes > 0 ? sh->nu_bytes : 4);
    b->cast = c->ab / b->wbytes;
    b->qcast = sh->gmm_qag ? 1 / b->wbytes : b->cast;
    c->eff = hw->compute_efficiency;
    c->overhead = cpu->op_overhead;
    c->ici = hw->ici_bandwidth / 2 / per;
    c->ici_lat = hw->ici_latency;
    c->dcn = hw->dcn_bandwidth / per;
    c->dcn_lat = hw->dcn_latency;
    m->use_compute = cpu->collectives_use_compute;
    m->skew = cpu->sync_skew;
    m->compute_bytes = c->ab;
    m->weight_bytes = b->wbytes;
    m->wire_bytes = sh->wire_bytes > 0 ? sh->wire_bytes : 0;
    m->mx_gather_bytes = sh->mx_gather_bytes > 0 ? sh->mx_gather_bytes : 0;
    m->reduce_engine = sh->reduce_engine;
    m->act_runtime = sh->act_bytes > 0 ? (double)sh->act_bytes : 0;
    /* the gradient reductions: their own figures where the profile
     * measured them (cpu: the MPI library's reduce-scatter is not the
     * gather's transpose on the wire), within and across nodes */
    b->cr = *c;
    if (cpu->ici_reduce_bandwidth > 0) {
        b->cr.ici = cpu->ici_reduce_bandwidth / 2 / per;
        b->cr.ici_lat = cpu->ici_reduce_latency;
    }
    if (cpu->dcn_reduce_bandwidth > 0) {
        b->cr.dcn = cpu->dcn_reduce_bandwidth / per;
        b->cr.dcn_lat = cpu->dcn_reduce_latency;
    }
    b->a2a_bw = cpu->a2a_bandwidth > 0 ? cpu->a2a_bandwidth / per : 0;
}

/* The layer kinds from the plan's stacks (kind 1: routed experts), the
 * layers in stack order, unscanned layers folded into kind 0. */
static smoe_status set_layers(build_ctx *b, smoe_sim_model *m, const smoe_config *cfg,
                              const smoe_plan *plan, smoe_err *err)
{
    int64_t layers[2] = { 0, 0 };
    for (int i = 0; i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        if (!w->prefetch)
            continue;
        int k = strcmp(w->stack, "moe_layers") == 0 ? 1 : 0;
        if (strcmp(w->stack, "layers") == 0 && sim_expert_weight(w))
            k = 1;
        if (b->stacks[k] && strcmp(b->stacks[k], w->stack) != 0 && strcmp(w->stack, "layers") != 0)
            return smoe_err_set(err, SMOE_EINVAL, "more than one stack of kind %d", k);
        b->stacks[k] = w->stack;
        layers[k] = w->layers;
    }
    /* a single 'layers' stack with routed experts is all MoE */
    if (b->stacks[0] && b->stacks[1] && strcmp(b->stacks[0], b->stacks[1]) == 0) {
        b->stacks[0] = NULL;
        layers[0] = 0;
    }
    /* unscanned layers (unrolled.c): one dense kind of their mean weights
     * and MLP width */
    if (!b->d.scan_layers) {
        double mlp = 0;
        smoe_status s = sim_unrolled_count(cfg, plan, b->d.layers, &b->unrolled, &mlp, err);
        if (s)
            return s;
        layers[0] = b->unrolled;
        if (mlp > 0)
            b->d.mlp = (int64_t)llround(mlp);
    }
    m->L = (int)(layers[0] + layers[1]);
    if (m->L < 1 || m->L > SIM_MAX_LAYERS)
        return smoe_err_set(err, SMOE_EINVAL, "%d stacked layers (1 to %d supported)", m->L,
                            SIM_MAX_LAYERS);
    for (int l = 0; l < m->L; l++)
        m->kind_of[l] = l < layers[0] ? 0 : 1;
    m->nkinds = 2;
    m->k[0].moe = 0;
    m->k[1].moe = 1;
    return SMOE_OK;
}

/* The parts of weight w's gather and reduction that are the cores' work
 * (the rest is on the network): x->pre_net, x->rs_net. */
static void net_parts(build_ctx *b, const smoe_weight *w, sim_w *x)
{
    double net = 0;
    b->c.net = &net;
    double t = gather_time(&b->c, &w->gather, NULL, 0, 1);
    x->pre_net = t > 0 ? fmin(1, net / t) : 0;
    b->c.net = NULL;
    net = 0;
    b->cr.net = &net;
    t = reduce_time(&b->cr, &w->gather, 1);
    x->rs_net = t > 0 ? fmin(1, net / t) : 0;
    b->cr.net = NULL;
}

/* Weight w's gather and reduction terms. */
static void weight_terms(build_ctx *b, const smoe_plan *plan, const smoe_weight *w, sim_w *x)
{
    const cost *c = &b->c, *cr = &b->cr;
    memset(x, 0, sizeof *x);
    x->name = w->path;
    /* gathered cast to the compute dtype (XLA's scan, smoe's runtime),
     * or as stored (MaxText's prefetch path) */
    x->routed = sim_expert_weight(w);
    const double cast = x->routed ? b->qcast : b->cast; /* fp8 QAG: its gather's bytes */
    x->pre_s = gather_time(c, &w->gather, NULL, 0, cast);
    x->pre_stored_s = gather_time(c, &w->gather, NULL, 0, 1);
    /* MaxText's MoeBlock names its down projection wo (moe.py) */
    size_t n = strlen(w->path);
    x->down = x->routed && n >= 3 && strcmp(w->path + n - 3, "/wo") == 0;
    x->pre_legacy_s = gather_time(c, &w->legacy, NULL, 0, 1);
    /* legacy residual: gathered after the FSDP stages */
    smoe_gather tmp = w->legacy;
    tmp.bytes_in = w->legacy.bytes_out;
    x->res_legacy_s = gather_time(c, &tmp, w->legacy.residual, 1, 1);
    /* a weight's gradient is reduced in the dtype its gather moved (the
     * reduce-scatter is the gather's transpose): as stored (MaxText's
     * prefetch path: dW of the gathered parameter) or cast (XLA's scan:
     * the layers cast before the gather, linears.py / moe.py
     * jnp.asarray(kernel, self.dtype)); the latency parts (the times
     * at 2 bytes per element less those at 1) let a run scale both to
     * the bytes its gathers move */
    x->rs_s = reduce_time(cr, &w->gather, 1);
    x->ar_s = allreduce_time(cr, &w->gather, 1);
    x->rs_cast_s = reduce_time(cr, &w->gather, b->cast);
    net_parts(b, w, x);
    double g1 = gather_time(c, &w->gather, NULL, 0, 1 / b->wbytes);
    double g2 = gather_time(c, &w->gather, NULL, 0, 2 / b->wbytes);
    double r1 = reduce_time(cr, &w->gather, 1 / b->wbytes);
    double r2 = reduce_time(cr, &w->gather, 2 / b->wbytes);
    x->ag_lat_s = fmax(0, 2 * g1 - g2);
    x->rs_lat_s = fmax(0, 2 * r1 - r2);
    x->bytes = (double)w->gather.bytes_out * cast;
    x->bytes_stored = (double)w->gather.bytes_out;
    x->bytes_exec = exec_elems(w, &plan->mesh, x->routed, b->wbytes) * c->ab;
}

/* A weight that is not prefetched (the embedding, the head): gathered
 * once a step, held while used. */
static void add_top(smoe_sim_model *m, const sim_w *x)
{
    /* MaxText's embedding module is `token_embedder` (models.py) */
    int embed = strncmp(x->name, "token_embedder/", 15) == 0;
    if (embed) {
        m->top_embed_s += x->pre_s;
        m->top_embed_bytes += x->bytes;
    } else {
        m->top_head_net += x->pre_s * x->pre_net; /* divided in add_weights */
    }
    m->top_gather_s += x->pre_s;
    m->top_rs_s += x->rs_s;
    m->top_bytes += x->bytes;
    m->top_bytes_exec += x->bytes_exec;
}

/* Every parameter: its memory, and its gather and reduction terms in its
 * layer kind (or the unscanned stack's, or the top-level weights'). */
static smoe_status add_weights(build_ctx *b, smoe_sim_model *m, const smoe_plan *plan,
                               smoe_err *err)
{
    for (int i = 0; i < plan->n; i++) {
        const smoe_weight *w = &plan->w[i];
        if (w->kind != SMOE_ENTRY_PARAM)
            continue;
        double shard = (double)w->gather.bytes_in * (double)w->layers / b->wbytes;
        m->mem_params += shard * b->wbytes;
        m->mem_grads += shard * b->gbytes;
        m->mem_optimizer += shard * b->mom;
        m->shard_elems += shard;
        sim_w x;
        weight_terms(b, plan, w, &x);
        smoe_status s = SMOE_OK;
        if (b->unrolled && sim_unrolled_layer(w->path, NULL) >= 0)
            s = sim_unrolled_add(&m->k[0], &x, b->unrolled, err);
        else if (!w->prefetch)
            add_top(m, &x);
        else
            s = add_weight(&m->k[b->stacks[1] && strcmp(w->stack, b->stacks[1]) == 0 ? 1 : 0],
                           &x, err);
        if (s)
            return s;
    }
    if (m->top_gather_s > m->top_embed_s)
        m->top_head_net /= m->top_gather_s - m->top_embed_s;
    return SMOE_OK;
}

/* Each layer kind's compute (layer_cost.c), MaxText's activation sizes and
 * the offload time; a cpu profile's measured kernels over the roofline. */
static void layer_compute(build_ctx *b, smoe_sim_model *m, const smoe_plan *plan,
                          const smoe_hw *hw, const smoe_sim_shape *sh)
{
    const double ep = (double)smoe_mesh_axis_size(&plan->mesh, "expert");
    double e_local = fmax(1, (double)b->d.experts / ep);
    for (int k = 0; k < 2; k++) {
        sim_kind *x = &m->k[k];
        cost_layer(&b->c, &b->d, sh, e_local, x);
        sim_mx_sizes(&b->d, sh, b->c.ab, ep, x);
        if (x->act_host > 0) /* keys.c refuses offload without the figure */
            x->offload_s = x->act_host / (hw->host_bandwidth / hw->devices_per_chip);
        double f = hw->cpu.compute_scale;
        if (f > 0) { /* measured kernels vs the roofline (cpu) */
            x->fwd_pre *= f, x->fwd_exp *= f, x->fwd_post *= f;
            x->bwd_pre *= f, x->bwd_exp *= f, x->bwd_post *= f;
        }
    }
}

/* The MoE layers' expert exchange and their dispatch and combine. */
static void moe_traffic(build_ctx *b, smoe_sim_model *m, const smoe_hw *hw,
                        const smoe_sim_shape *sh)
{
    /* the expert exchange: T * topk rows of emb, to the other members */
    const smoe_axes expert_ax = { 1, { "expert" } };
    const double T = smoe_sim_tokens(sh), topk = (double)b->d.topk, in = (double)b->d.moe_in;
    int64_t g;
    local_members(&b->c, &expert_ax, &g);
    /* the dense path exchanges every expert's slots (layer_cost.c
     * dense_moe_ops) */
    double rows = sh->moe_capacity > 0 ? sim_moe_slots(&b->d, sh) : T * topk;
    if (g > 1) {
        double rows_bytes = rows * in * b->c.ab;
        if (sh->ring_of_experts) /* all-gather tokens, reduce-scatter outputs */
            m->k[1].a2a_s = cost_coll(&b->c, &expert_ax, T * in * b->c.ab * (double)(g - 1),
                                      b->a2a_bw);
        else
            m->k[1].a2a_s = cost_coll(&b->c, &expert_ax, rows_bytes * (double)(g - 1) / (double)g,
                                      b->a2a_bw);
    }
    /* dispatch and combine (sort, permute) of the routed rows on the
     * collective engines: each moves T * topk rows once per pass (the
     * sparse path's; the dense path's are einsums, in the compute) */
    if (hw->permute_bandwidth > 0 && b->d.experts > 0 && !(sh->moe_capacity > 0))
        m->k[1].permute_s = 2 * T * topk * in * b->c.ab /
                            (hw->permute_bandwidth / hw->devices_per_chip);
}

/* The embedding lookup, the head (forward + backward, with tensor
 * parallelism's collectives tp_one) and the optimizer update. */
static smoe_status top_compute(build_ctx *b, smoe_sim_model *m, const smoe_config *cfg,
                               const smoe_hw *hw, const smoe_sim_shape *sh, double tp_one,
                               smoe_err *err)
{
    const smoe_hw_cpu *cpu = &hw->cpu;
    const double T = smoe_sim_tokens(sh), V = (double)b->d.vocab, E = (double)b->d.emb;
    m->embed_fwd_s = cost_ew(&b->c, T * E, 2);
    m->embed_bwd_s = cost_ew(&b->c, T * E, 3);
    int64_t tiles = 1;
    smoe_status s = vocab_tiles(cfg, sh, &tiles, err);
    if (s)
        return s;
    cost dn = cost_dense(&b->c, 0); /* the head is not quantized (keys.c) */
    m->head_s = cost_head(&dn, T, E, V, (double)tiles) + 2 * tp_one;
    /* the logits dot's output: `dtype`, fp32 with logits_dot_in_fp32
     * (decoders.py apply_output_head); one tile's at a time */
    int fp32_logits;
    if ((s = smoe_config_bool_or(cfg, "logits_dot_in_fp32", 0, &fp32_logits, err)))
        return s;
    m->logits_bytes = T / (double)tiles * V * (fp32_logits ? 4 : b->c.ab);
    if (cpu->compute_scale > 0) {
        m->head_s *= cpu->compute_scale;
        m->embed_fwd_s *= cpu->compute_scale;
        m->embed_bwd_s *= cpu->compute_scale;
    }
    /* AdamW reads p, g, mu, nu and writes p, mu, nu */
    m->optimizer_s = cpu->optimizer_rate > 0 /* measured (cpu profiles) */
                         ? m->shard_elems / (cpu->optimizer_rate / hw->devices_per_chip)
                         : m->shard_elems * (2 * b->wbytes + b->gbytes + 2 * b->mom) / b->c.ew;
    return SMOE_OK;
}

/* Each stacked layer's unit is `sub` decoder layers; in an all-MoE stack
 * that interleaves dense layers, those are kind 0's (block.c). */
static void block_units(const build_ctx *b, smoe_sim_model *m, const smoe_plan *plan, double sub)
{
    int n_sub = 0, n_moe = 0;
    if (!b->stacks[0] && b->stacks[1])
        sim_block_moe_layers(plan, b->stacks[1], &n_sub, &n_moe);
    if (n_sub == (int)sub && n_moe > 0 && n_moe < n_sub) {
        sim_block_mix(&m->k[1], &m->k[0], (double)n_moe, sub - n_moe);
        sim_block_scale(&m->k[0], sub);
        return;
    }
    for (int k = 0; k < 2; k++)
        sim_block_scale(&m->k[k], sub);
}

smoe_status smoe_sim_model_build(const smoe_config *cfg, const smoe_plan *plan,
                                 const smoe_hw *hw, const smoe_sim_shape *sh,
                                 smoe_sim_model **out, smoe_err *err)
{
    build_ctx b;
    memset(&b, 0, sizeof b);
    smoe_status s = smoe_plan_dims(cfg, &b.d, err);
    if (s || (s = check_shape(cfg, plan, hw, sh, &b.d, err)) ||
        (s = check_capacity(cfg, sh, &b.d, err)))
        return s;
    smoe_sim_model *m = smoe_calloc(1, sizeof *m);
    if (!m)
        return smoe_err_set(err, SMOE_ENOMEM, "out of memory");
    m->hw = *hw;
    set_rates(&b, m, plan, hw, sh);
    if ((s = sim_attention_span(cfg, &b.d, (double)sh->seq, &b.c.attn, err)))
        goto fail;
    b.cr.attn = b.c.attn;
    if ((s = set_layers(&b, m, cfg, plan, err)) || (s = add_weights(&b, m, plan, err)))
        goto fail;
    layer_compute(&b, m, plan, hw, sh);
    moe_traffic(&b, m, hw, sh);
    double tp_one;
    tensor_parallel(&b.c, smoe_sim_tokens(sh), (double)b.d.emb, m, &tp_one);
    /* decoder layers a stacked layer holds (scannable blocks, block.c) */
    if (b.d.layers > m->L && b.d.layers % m->L == 0)
        block_units(&b, m, plan, (double)(b.d.layers / m->L));
    if ((s = top_compute(&b, m, cfg, hw, sh, tp_one, err)))
        goto fail;
    *out = m;
    return SMOE_OK;
fail:
    smoe_sim_model_free(m);
    return s;
}

void smoe_sim_model_free(smoe_sim_model *m) { smoe_free(m); }

void smoe_sim_model_compute(const smoe_sim_model *m, int kind, double *fwd, double *bwd)
{
    const sim_kind *k = &m->k[kind];
    *fwd = k->fwd_pre + k->fwd_exp + k->fwd_post;
    *bwd = k->bwd_pre + k->bwd_exp + k->bwd_post;
}

int smoe_sim_model_has_kind(const smoe_sim_model *m, int kind)
{
    for (int l = 0; l < m->L; l++)
        if (m->kind_of[l] == kind)
            return 1;
    return 0;
}

void smoe_sim_model_set_compute(smoe_sim_model *m, int kind, double fwd, double bwd)
{
    sim_kind *k = &m->k[kind];
    double f = k->fwd_pre + k->fwd_exp + k->fwd_post;
    double b = k->bwd_pre + k->bwd_exp + k->bwd_post;
    double bf = k->bwd_full_pre + k->bwd_full_exp + k->bwd_full_post;
    if (fwd >= 0) {
        double s = f > 0 ? fwd / f : 0;
        k->fwd_pre = f > 0 ? k->fwd_pre * s : fwd, k->fwd_exp *= s, k->fwd_post *= s;
    }
    if (bwd >= 0) {
        double s = b > 0 ? bwd / b : 0, sf = bf > 0 ? bwd / bf : 0;
        k->bwd_pre = b > 0 ? k->bwd_pre * s : bwd, k->bwd_exp *= s, k->bwd_post *= s;
        k->bwd_full_pre = bf > 0 ? k->bwd_full_pre * sf : bwd;
        k->bwd_full_exp *= sf, k->bwd_full_post *= sf;
    }
}
