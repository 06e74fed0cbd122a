/* Compare two checkpoints (smoe train --checkpoint-dir, one step_N/
 * directory each) saved on any meshes: every weight of the states named
 * (params, adamw_mu, adamw_nu), whole, rebuilt from each checkpoint's
 * shards by the layout algebra (each rank's block of the weight's state
 * spec, as the manifest records them), tensor by tensor: relative error
 * ||a - b||_2 / ||a||_2 (as cmp_runs). The AdamW moments after a step are
 * the gradients' history (after step 1, mu = (1 - b1) g and
 * nu = (1 - b2) g^2), so comparing them compares gradients. Both
 * checkpoints must hold the same weights in the same order at the same
 * step. With TOL = 0 every value must be bitwise equal.
 * usage: cmp_ckpt A_DIR B_DIR TOL STATE... */
#include "check.h"

#include <cjson/cJSON.h>
#include "smoe/core.h"
#include "smoe/shard.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_W 512

typedef struct wt {
    const char *path;
    smoe_pspec spec;
    int rank;
    int64_t shape[SMOE_MAX_RANK];
    int64_t layers, shard_numel, shard_offset, numel; /* shard_numel, numel: of one layer */
} wt;

typedef struct ckpt {
    cJSON *man;
    smoe_mesh mesh;
    int nw, ranks;
    wt w[MAX_W];
    int64_t step, slab, header;
    char **shard; /* per rank: the file's bytes */
} ckpt;

static const cJSON *item(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Read DIR/manifest.json and every shard; 0 on success. */
static int ckpt_load(const char *dir, ckpt *c)
{
    char path[4400];
    char *text;
    size_t len;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (smoe_read_file_max(path, SMOE_MAX_MANIFEST_BYTES, &text, &len, NULL)) {
        fprintf(stderr, "cmp_ckpt: cannot read %s\n", path);
        return -1;
    }
    c->man = cJSON_Parse(text);
    smoe_free(text);
    const cJSON *mesh = item(c->man, "mesh"), *names = item(mesh, "axis_names"),
                *shape = item(mesh, "shape"), *ws = item(c->man, "weights"),
                *shards = item(c->man, "shards");
    if (!c->man || !cJSON_IsArray(names) || !cJSON_IsArray(ws) || !cJSON_IsArray(shards)) {
        fprintf(stderr, "cmp_ckpt: %s: not a checkpoint manifest\n", path);
        return -1;
    }
    c->mesh.n = cJSON_GetArraySize(names);
    for (int a = 0; a < c->mesh.n && a < SMOE_MAX_AXES; a++) {
        c->mesh.name[a] = cJSON_GetArrayItem(names, a)->valuestring;
        c->mesh.size[a] = (int64_t)cJSON_GetArrayItem(shape, a)->valuedouble;
    }
    c->step = (int64_t)item(c->man, "step")->valuedouble;
    c->slab = (int64_t)item(c->man, "slab_floats")->valuedouble;
    c->header = (int64_t)item(c->man, "header_bytes")->valuedouble;
    c->nw = cJSON_GetArraySize(ws);
    if (c->nw > MAX_W)
        return -1;
    for (int i = 0; i < c->nw; i++) {
        const cJSON *w = cJSON_GetArrayItem(ws, i), *sh = item(w, "shape"), *sp = item(w, "spec");
        wt *x = &c->w[i];
        x->path = item(w, "path")->valuestring;
        x->rank = cJSON_GetArraySize(sh);
        x->spec.rank = x->rank;
        x->numel = 1;
        for (int d = 0; d < x->rank; d++) {
            const cJSON *axes = cJSON_GetArrayItem(sp, d);
            x->shape[d] = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble;
            x->numel *= x->shape[d];
            x->spec.dim[d].n = cJSON_GetArraySize(axes);
            for (int k = 0; k < x->spec.dim[d].n; k++)
                x->spec.dim[d].ax[k] = cJSON_GetArrayItem(axes, k)->valuestring;
        }
        x->layers = (int64_t)item(w, "layers")->valuedouble;
        x->shard_numel = (int64_t)item(w, "shard_numel")->valuedouble;
        x->shard_offset = (int64_t)item(w, "shard_offset")->valuedouble;
    }
    c->ranks = cJSON_GetArraySize(shards);
    c->shard = calloc((size_t)c->ranks, sizeof *c->shard);
    for (int r = 0; r < c->ranks; r++) {
        snprintf(path, sizeof path, "%s/%s", dir,
                 item(cJSON_GetArrayItem(shards, r), "file")->valuestring);
        if (smoe_read_file_max(path, (size_t)1 << 34, &c->shard[r], &len, NULL) ||
            (int64_t)len < c->header + 3 * c->slab * 4) {
            fprintf(stderr, "cmp_ckpt: cannot read %s\n", path);
            return -1;
        }
    }
    return 0;
}

/* Weight i's layer l of state s (0 params, 1 mu, 2 nu), whole, into G. */
static void ckpt_tensor(const ckpt *c, int i, int64_t l, int s, float *G)
{
    const wt *x = &c->w[i];
    int64_t per = x->shard_numel; /* the manifest's shard_numel is per layer */
    for (int r = 0; r < c->ranks; r++) {
        int64_t coords[SMOE_MAX_AXES], loc[SMOE_MAX_RANK], off[SMOE_MAX_RANK];
        smoe_mesh_coords(&c->mesh, r, coords);
        if (smoe_layout_local(&x->spec, x->shape, &c->mesh, coords, loc, off, NULL))
            continue;
        char *base = c->shard[r] + c->header + 4 * (s * c->slab + x->shard_offset + l * per);
        smoe_layout_copy(x->rank, x->shape, loc, off, 4, G, base, 1);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: cmp_ckpt A_DIR B_DIR TOL STATE...\n");
        return 2;
    }
    static ckpt a, b;
    double tol = atof(argv[3]);
    CHECKF(ckpt_load(argv[1], &a) == 0 && ckpt_load(argv[2], &b) == 0, "cannot read the inputs");
    if (check_fail_)
        return check_report();
    CHECKF(a.step == b.step, "steps %lld vs %lld", (long long)a.step, (long long)b.step);
    CHECKF(a.nw == b.nw, "weights: %d vs %d", a.nw, b.nw);
    static const char *const names[] = { "params", "adamw_mu", "adamw_nu" };
    for (int q = 4; q < argc; q++) {
        int s = -1;
        for (int k = 0; k < 3; k++)
            if (strcmp(argv[q], names[k]) == 0)
                s = k;
        CHECKF(s >= 0, "no state %s (params, adamw_mu, adamw_nu)", argv[q]);
        if (s < 0)
            continue;
        double worst = 0;
        int n = 0;
        for (int i = 0; i < a.nw && i < b.nw; i++) {
            CHECK_STR(a.w[i].path, b.w[i].path);
            if (a.w[i].numel != b.w[i].numel || a.w[i].layers != b.w[i].layers) {
                CHECKF(0, "%s: shapes differ", a.w[i].path);
                continue;
            }
            float *x = malloc(sizeof *x * (size_t)a.w[i].numel);
            float *y = malloc(sizeof *y * (size_t)a.w[i].numel);
            double d2 = 0, a2 = 0, md = 0;
            for (int64_t l = 0; l < a.w[i].layers; l++) {
                ckpt_tensor(&a, i, l, s, x);
                ckpt_tensor(&b, i, l, s, y);
                for (int64_t k = 0; k < a.w[i].numel; k++) {
                    double d = fabs((double)x[k] - (double)y[k]);
                    md = d > md ? d : md;
                    d2 += d * d;
                    a2 += (double)x[k] * x[k];
                }
            }
            free(x);
            free(y);
            double rel = a2 > 0 ? sqrt(d2 / a2) : sqrt(d2);
            worst = rel > worst ? rel : worst;
            CHECKF(tol == 0 ? md == 0 : rel <= tol, "%s %s: relative difference %.3g", argv[q],
                   a.w[i].path, rel);
            n++;
        }
        printf("%s: worst tensor relative difference %.3g (2-norm) over %d tensors\n", argv[q],
               worst, n);
    }
    for (int r = 0; r < a.ranks; r++)
        smoe_free(a.shard[r]);
    for (int r = 0; r < b.ranks; r++)
        smoe_free(b.shard[r]);
    free(a.shard);
    free(b.shard);
    cJSON_Delete(a.man);
    cJSON_Delete(b.man);
    return check_report();
}
