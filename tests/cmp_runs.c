/* Compare two training runs: the per-step losses of their --json outputs
 * (and lr, grad_norm, aux_loss, z_loss) and every parameter of their
 * --dump-params files, entry by entry, by the rule of cmp_rule.h (a
 * tensor's relative error norm-wise, a loss's |a - b| / |a|; TOL = 0:
 * bitwise). The worst element, max |a - b| / max |a|, is printed. B may hold fewer steps
 * than A (a resumed run): its steps are matched by their "step" index.
 * With both dumps given as "-", only the steps' figures are compared (a
 * test that compares the parameters from checkpoints with cmp_ckpt).
 * usage: cmp_runs A.json A.bin B.json B.bin TOL */
#include "check.h"
#include "cmp_rule.h"

#include <cjson/cJSON.h>
#include "smoe/core.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static char *slurp(const char *path, long *n)
{
    char *b;
    size_t len;
    if (smoe_read_file_max(path, (size_t)1 << 30, &b, &len, NULL))
        return NULL;
    *n = (long)len;
    return b;
}

typedef struct entry {
    char key[512];
    int64_t n;
    const char *v; /* n floats, not aligned (keys have any length) */
} entry;

static int parse_dump(const char *buf, long len, entry *e, int max)
{
    if (len < 9 || memcmp(buf, "SMOEPRM1\n", 9) != 0)
        return -1;
    long i = 9;
    int n = 0;
    while (i < len && n < max) {
        uint32_t kl, rk;
        memcpy(&kl, buf + i, 4);
        i += 4;
        if (kl >= sizeof e[n].key || i + kl > len)
            return -1;
        memcpy(e[n].key, buf + i, kl);
        e[n].key[kl] = 0;
        i += kl;
        memcpy(&rk, buf + i, 4);
        i += 4;
        int64_t cnt = 1;
        for (uint32_t d = 0; d < rk; d++) {
            int64_t s;
            memcpy(&s, buf + i, 8);
            i += 8;
            cnt *= s;
        }
        e[n].n = cnt;
        e[n].v = buf + i;
        i += cnt * 4;
        if (i > len)
            return -1;
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: cmp_runs A.json A.bin B.json B.bin TOL\n");
        return 2;
    }
    double tol = atof(argv[5]);
    long la, lb, na = 0, nb = 0;
    int steps_only = strcmp(argv[2], "-") == 0 && strcmp(argv[4], "-") == 0;
    char *ja = slurp(argv[1], &la), *jb = slurp(argv[3], &lb);
    char *pa = steps_only ? NULL : slurp(argv[2], &na);
    char *pb = steps_only ? NULL : slurp(argv[4], &nb);
    int have = ja && jb && (steps_only || (pa && pb));
    CHECKF(have, "cannot read the inputs");
    if (!have)
        return check_report();
    cJSON *a = cJSON_Parse(ja), *b = cJSON_Parse(jb);
    /* B's steps matched to A's by their "step" index: a resumed run holds
     * only the steps after its checkpoint */
    cJSON *sa = cJSON_GetObjectItem(a, "steps"), *sb = cJSON_GetObjectItem(b, "steps");
    double worst_loss = 0;
    CHECKF(cJSON_GetArraySize(sb) > 0 && cJSON_GetArraySize(sa) >= cJSON_GetArraySize(sb),
           "step counts: %d vs %d", cJSON_GetArraySize(sa), cJSON_GetArraySize(sb));
    for (int i = 0; i < cJSON_GetArraySize(sb); i++) {
        cJSON *y = cJSON_GetArrayItem(sb, i), *x = NULL;
        double step = cJSON_GetObjectItem(y, "step")->valuedouble;
        for (int k = 0; k < cJSON_GetArraySize(sa) && !x; k++)
            if (cJSON_GetObjectItem(cJSON_GetArrayItem(sa, k), "step")->valuedouble == step)
                x = cJSON_GetArrayItem(sa, k);
        CHECKF(x != NULL, "step %g of B is not in A", step);
        if (!x)
            continue;
        /* the loss and the recipe's per-step figures (when present) */
        static const char *const keys[] = { "loss", "lr", "grad_norm", "aux_loss", "z_loss" };
        for (size_t q = 0; q < sizeof keys / sizeof keys[0]; q++) {
            cJSON *ix = cJSON_GetObjectItem(x, keys[q]), *iy = cJSON_GetObjectItem(y, keys[q]);
            if (q > 0 && (!ix || !iy))
                continue;
            double lx = ix->valuedouble, ly = iy->valuedouble, rel = cmp_number_rel(lx, ly);
            CHECKF(cmp_number_ok(lx, ly, tol), "step %g %s %.9g vs %.9g (rel %.3g)",
                   step, keys[q], lx, ly, rel);
            if (q == 0 && rel > worst_loss)
                worst_loss = rel;
        }
    }
    if (tol == 0 && !steps_only) {
        const char *ha = cJSON_GetObjectItem(a, "params_sha256")->valuestring;
        const char *hb = cJSON_GetObjectItem(b, "params_sha256")->valuestring;
        CHECK_STR(ha, hb);
    }
    printf("worst step loss relative difference %.3g\n", worst_loss);
    if (steps_only) {
        printf("worst: steps' figures only, %d step(s) of B compared\n", cJSON_GetArraySize(sb));
        cJSON_Delete(a);
        cJSON_Delete(b);
        smoe_free(ja);
        smoe_free(jb);
        return check_report();
    }
    static entry ea[512], eb[512];
    int ca = parse_dump(pa, na, ea, 512), cb = parse_dump(pb, nb, eb, 512);
    CHECKF(ca > 0 && ca == cb, "parameter dumps: %d vs %d entries", ca, cb);
    double worst = 0, worst_elem = 0;
    for (int i = 0; i < ca && i < cb; i++) {
        CHECK_STR(ea[i].key, eb[i].key);
        if (ea[i].n != eb[i].n) {
            CHECKF(0, "%s: sizes differ", ea[i].key);
            continue;
        }
        cmp_tensor c = cmp_tensor_of(ea[i].v, eb[i].v, ea[i].n);
        worst = c.rel > worst ? c.rel : worst;
        worst_elem = c.elem > worst_elem ? c.elem : worst_elem;
        CHECKF(cmp_tensor_ok(&c, tol), "%s: relative difference %.3g", ea[i].key, c.rel);
    }
    printf("worst tensor relative difference %.3g (2-norm), worst element %.3g of the "
           "tensor's max, over %d tensors\n",
           worst, worst_elem, ca);
    cJSON_Delete(a);
    cJSON_Delete(b);
    smoe_free(ja);
    smoe_free(jb);
    smoe_free(pa);
    smoe_free(pb);
    return check_report();
}
