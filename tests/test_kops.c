/* Oracle for the CPU kernel table (backend.h, src/kernels/kops_cpu.c):
 * every entry, called with the stream NULL on random inputs of odd shapes
 * (accumulating outputs pre-filled), writes bit for bit what its kernels.h
 * function writes from the same inputs, scalar results included (the
 * loss and z-sum of the cross-entropy, the dot product of vec_dot_scale).
 * Every entry is present. The model's side (every kernel of a step goes
 * through the table it was built on) is in test_model. */
#include "kernel_testlib.h"

#include "smoe/backend.h"
#include "smoe/dtype.h"

static const smoe_kops *K;

/* Two copies of n random floats (amplitude amp): one for the table, one
 * for the direct call. */
typedef struct pair {
    float *t, *d;
    int64_t n;
} pair;

static pair pnew(int64_t n, float amp)
{
    pair p = { fnew(n), NULL, n };
    fill(p.t, n, amp);
    p.d = fdup(p.t, n);
    return p;
}

/* Inputs: n random floats (amplitude amp), freed together by inputs_free. */
static float *held[16];
static int nheld;

static float *in(int64_t n, float amp)
{
    SMOE_ASSERT(nheld < 16);
    float *x = fnew(n);
    fill(x, n, amp);
    return held[nheld++] = x;
}

static void inputs_free(void)
{
    while (nheld > 0)
        smoe_free(held[--nheld]);
}

static void same(pair *p, const char *what)
{
    CHECKF(memcmp(p->t, p->d, (size_t)p->n * sizeof *p->t) == 0,
           "%s: the table differs from kernels.h (rel %g)", what, rel_err(p->t, p->d, p->n));
    smoe_free(p->t);
    smoe_free(p->d);
}

static void test_entries_present(void)
{
    CHECK(K && strcmp(K->name, "cpu") == 0);
    const void *e[] = {
        (const void *)K->gemm,           (const void *)K->matmul,
        (const void *)K->matmul_bwd,     (const void *)K->rmsnorm,
        (const void *)K->rmsnorm_bwd,    (const void *)K->swiglu_sig,
        (const void *)K->swiglu_sig_bwd, (const void *)K->sigmoid,
        (const void *)K->softmax_rows,   (const void *)K->softmax_rows_bwd,
        (const void *)K->rope_apply_tab, (const void *)K->attention,
        (const void *)K->attention_bwd,  (const void *)K->cross_entropy_z,
        (const void *)K->adamw_step,     (const void *)K->vec_add,
        (const void *)K->vec_axpy,       (const void *)K->vec_dot_scale,
        (const void *)K->alloc,          (const void *)K->free,
        (const void *)K->copy,           (const void *)K->fill0,
        (const void *)K->read,           (const void *)K->write,
        (const void *)K->embed_rows,     (const void *)K->embed_rows_bwd,
        (const void *)K->mla_kv_split,   (const void *)K->mla_kv_merge,
        (const void *)K->moe_dispatch_rows, (const void *)K->moe_combine_rows,
        (const void *)K->moe_combine_bwd, (const void *)K->moe_dispatch_bwd,
        (const void *)K->vec_sumsq,      (const void *)K->to_bf16,
        (const void *)K->from_bf16,      (const void *)K->stamp,
    };
    CHECK(K->synchronous == 1);
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        CHECKF(e[i] != NULL, "entry %zu of the CPU table is missing", i);
}

static void test_products(void)
{
    const int64_t m = 5, n = 7, k = 9;
    const float *a = in(m * k, 1.0f), *b = in(k * n, 1.0f), *dy = in(m * n, 1.0f);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            pair c = pnew(m * n, 1.0f);
            K->gemm(NULL, ta, tb, m, n, k, 0.5f, a, ta ? m : k, b, tb ? k : n, 1.0f, c.t, n);
            smoe_gemm(ta, tb, m, n, k, 0.5f, a, ta ? m : k, b, tb ? k : n, 1.0f, c.d, n);
            same(&c, "gemm");
        }
    pair y = pnew(m * n, 1.0f);
    K->matmul(NULL, y.t, a, b, m, k, n, 1.0f);
    smoe_matmul(y.d, a, b, m, k, n, 1.0f);
    same(&y, "matmul");
    pair dx = pnew(m * k, 1.0f), dw = pnew(k * n, 1.0f);
    K->matmul_bwd(NULL, dx.t, dw.t, dy, a, b, m, k, n);
    smoe_matmul_bwd(dx.d, dw.d, dy, a, b, m, k, n);
    same(&dx, "matmul_bwd dx");
    same(&dw, "matmul_bwd dw");
    inputs_free();
}

static void test_norm_act(void)
{
    const int64_t t = 6, d = 11, n = t * d;
    const float *x = in(n, 2.0f), *sc = in(d, 1.0f), *dy = in(n, 1.0f), *b = in(n, 2.0f);
    pair y = pnew(n, 1.0f), rs = pnew(t, 1.0f);
    K->rmsnorm(NULL, y.t, rs.t, x, sc, t, d, 1e-6f);
    smoe_rmsnorm(y.d, rs.d, x, sc, t, d, 1e-6f);
    pair dx = pnew(n, 1.0f), ds = pnew(d, 1.0f);
    K->rmsnorm_bwd(NULL, dx.t, ds.t, dy, x, sc, rs.t, t, d);
    smoe_rmsnorm_bwd(dx.d, ds.d, dy, x, sc, rs.d, t, d);
    same(&y, "rmsnorm y");
    same(&rs, "rmsnorm rstd");
    same(&dx, "rmsnorm_bwd dx");
    same(&ds, "rmsnorm_bwd dscale");

    pair h = pnew(n, 1.0f), s = pnew(n, 1.0f), da = pnew(n, 1.0f), db = pnew(n, 1.0f);
    K->swiglu_sig(NULL, h.t, s.t, x, b, n);
    smoe_swiglu_sig(h.d, s.d, x, b, n);
    K->swiglu_sig_bwd(NULL, da.t, db.t, dy, x, b, s.t, n);
    smoe_swiglu_sig_bwd(da.d, db.d, dy, x, b, s.d, n);
    same(&h, "swiglu_sig h");
    same(&s, "swiglu_sig s");
    same(&da, "swiglu_sig_bwd da");
    same(&db, "swiglu_sig_bwd db");

    pair sg = pnew(n, 1.0f), sm = pnew(n, 3.0f), dsm = pnew(n, 1.0f);
    K->sigmoid(NULL, sg.t, x, n);
    smoe_sigmoid(sg.d, x, n);
    K->softmax_rows(NULL, sm.t, t, d);
    smoe_softmax_rows(sm.d, t, d);
    K->softmax_rows_bwd(NULL, dsm.t, dy, sm.t, t, d);
    smoe_softmax_rows_bwd(dsm.d, dy, sm.d, t, d);
    same(&sg, "sigmoid");
    same(&sm, "softmax_rows");
    same(&dsm, "softmax_rows_bwd");
    inputs_free();
}

static void test_rope(void)
{
    const int64_t t = 6, h = 3, d = 8, half = d / 2;
    double inv[4];
    smoe_rope_cfg rc = { 0, 1.0, 10000.0, 1.0, 0, 0, 0, 0, 0 };
    smoe_rope_freqs(inv, d, &rc);
    float *cs = in(t * half, 0.0f), *sn = in(t * half, 0.0f);
    smoe_rope_table(cs, sn, t, d, inv);
    int32_t pos[6] = { 0, 1, 2, 5, 4, 3 };
    for (int halves = 0; halves < 2; halves++)
        for (int inverse = 0; inverse < 2; inverse++) {
            pair x = pnew(t * h * d, 1.0f);
            K->rope_apply_tab(NULL, x.t, pos, t, h, d, h * d, d, cs, sn, t, halves, 1.25f,
                              inverse);
            smoe_rope_apply_tab(x.d, pos, t, h, d, h * d, d, cs, sn, t, halves, 1.25f, inverse);
            same(&x, "rope_apply_tab");
        }
    inputs_free();
}

static void test_attention_entries(void)
{
    const int64_t s = 6, h = 2, dk = 4, dv = 3;
    const float *q = in(s * h * dk, 1.0f), *k = in(s * h * dk, 1.0f), *v = in(s * h * dv, 1.0f);
    const float *dout = in(s * h * dv, 1.0f);
    float *scr = in(s, 0.0f);
    pair o = pnew(s * h * dv, 1.0f), p = pnew(h * s * s, 1.0f);
    K->attention(NULL, o.t, p.t, q, k, v, s, h, dk, dv, h * dk, h * dk, h * dv, 0.5f);
    smoe_attention(o.d, p.d, q, k, v, s, h, dk, dv, h * dk, h * dk, h * dv, 0.5f);
    pair dq = pnew(s * h * dk, 1.0f), dkk = pnew(s * h * dk, 1.0f), dvv = pnew(s * h * dv, 1.0f);
    K->attention_bwd(NULL, dq.t, dkk.t, dvv.t, dout, p.t, q, k, v, s, h, dk, dv, h * dk, h * dk,
                     h * dv, 0.5f, scr);
    smoe_attention_bwd(dq.d, dkk.d, dvv.d, dout, p.d, q, k, v, s, h, dk, dv, h * dk, h * dk,
                       h * dv, 0.5f, scr);
    same(&o, "attention o");
    same(&p, "attention p");
    same(&dq, "attention_bwd dq");
    same(&dkk, "attention_bwd dk");
    same(&dvv, "attention_bwd dv");
    inputs_free();
}

static void test_loss_optim_vec(void)
{
    const int64_t t = 5, v = 13, n = 37;
    int32_t tg[5] = { 0, 12, 3, 7, 7 };
    pair lg = pnew(t * v, 4.0f);
    double lt = 0.0, ld = 0.0, zt = 0.0, zd = 0.0;
    K->cross_entropy_z(NULL, lg.t, lg.t, tg, t, v, 0.25f, 1e-3f, &lt, &zt);
    ld = smoe_cross_entropy_z(lg.d, lg.d, tg, t, v, 0.25f, 1e-3f, &zd);
    same(&lg, "cross_entropy_z dlogits");
    CHECKF(memcmp(&lt, &ld, sizeof lt) == 0 && memcmp(&zt, &zd, sizeof zt) == 0,
           "cross_entropy_z: loss %.17g / %.17g, zsum %.17g / %.17g", lt, ld, zt, zd);

    smoe_adamw_cfg c = { 1e-2f, 0.9f, 0.95f, 1e-8f, 1e-12f, 0.1f, 3, 2.5f, 1.0f };
    const float *g = in(n, 1.0f);
    pair p = pnew(n, 1.0f), m = pnew(n, 0.1f), vv = pnew(n, 0.0f);
    K->adamw_step(NULL, p.t, m.t, vv.t, g, n, &c);
    smoe_adamw_step(p.d, m.d, vv.d, g, n, &c);
    same(&p, "adamw_step p");
    same(&m, "adamw_step m");
    same(&vv, "adamw_step v");

    pair y = pnew(n, 1.0f), r = pnew(n, 1.0f);
    K->vec_add(NULL, y.t, g, n);
    smoe_vec_add(y.d, g, n);
    K->vec_axpy(NULL, y.t, -0.75f, g, n);
    smoe_vec_axpy(y.d, -0.75f, g, n);
    float dt = 0.0f, dd = (float)smoe_vec_dot_scale(r.d, 0.3f, g, y.d, n);
    K->vec_dot_scale(NULL, r.t, 0.3f, g, y.t, n, &dt);
    CHECKF(memcmp(&dt, &dd, sizeof dt) == 0, "vec_dot_scale: dot %.9g / %.9g", (double)dt,
           (double)dd);
    same(&y, "vec_add, vec_axpy");
    same(&r, "vec_dot_scale r");
    double sq = -1.0, want = 0.0;
    for (int64_t i = 0; i < n; i++)
        want += (double)g[i] * (double)g[i];
    K->vec_sumsq(NULL, g, n, &sq);
    CHECKF(sq == want && sq == smoe_vec_sumsq(g, n), "vec_sumsq %.17g, in order %.17g", sq, want);
    inputs_free();
}

/* The moving rows against their definitions, element by element (the
 * kernels.h functions are these loops' oracle), and the table's entries
 * against kernels.h. Tokens repeat, so the embedding's scatter-add sums. */
static void test_rows(void)
{
    const int64_t t = 7, d = 5, vocab = 4, h = 3, dn = 4, dr = 2, dv = 3, dq = dn + dr;
    const int32_t tok[7] = { 2, 0, 2, 3, 1, 2, 0 };
    const float *emb = in(vocab * d, 1.0f), *dx = in(t * d, 1.0f);
    pair x = pnew(t * d, 1.0f), de = pnew(vocab * d, 1.0f);
    float *want = fdup(de.t, vocab * d);
    K->embed_rows(NULL, x.t, emb, tok, t, d, vocab);
    smoe_embed_rows(x.d, emb, tok, t, d, vocab);
    int ok = 1;
    for (int64_t i = 0; i < t * d; i++)
        ok = ok && x.t[i] == emb[tok[i / d] * d + i % d];
    CHECKF(ok, "embed_rows: a row is not its token's");
    same(&x, "embed_rows");
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < d; j++)
            want[tok[i] * d + j] += dx[i * d + j];
    K->embed_rows_bwd(NULL, de.t, tok, dx, t, d, vocab);
    smoe_embed_rows_bwd(de.d, tok, dx, t, d, vocab);
    CHECKF(memcmp(de.t, want, (size_t)(vocab * d) * sizeof *want) == 0,
           "embed_rows_bwd: not the sums in token order");
    same(&de, "embed_rows_bwd");
    smoe_free(want);

    const float *kv = in(t * h * (dn + dv), 1.0f), *kpe = in(t * dr, 1.0f);
    pair k = pnew(t * h * dq, 1.0f), v = pnew(t * h * dv, 1.0f);
    K->mla_kv_split(NULL, k.t, v.t, kv, kpe, t, h, dn, dr, dv);
    smoe_mla_kv_split(k.d, v.d, kv, kpe, t, h, dn, dr, dv);
    ok = 1;
    for (int64_t r = 0; r < t * h; r++)
        for (int64_t c = 0; c < dq; c++)
            ok = ok && k.t[r * dq + c] ==
                           (c < dn ? kv[r * (dn + dv) + c] : kpe[(r / h) * dr + c - dn]);
    for (int64_t r = 0; r < t * h; r++)
        for (int64_t c = 0; c < dv; c++)
            ok = ok && v.t[r * dv + c] == kv[r * (dn + dv) + dn + c];
    CHECKF(ok, "mla_kv_split: k or v is not its definition");
    pair dkv = pnew(t * h * (dn + dv), 1.0f), dkpe = pnew(t * dr, 1.0f);
    K->mla_kv_merge(NULL, dkv.t, dkpe.t, k.t, v.t, t, h, dn, dr, dv);
    smoe_mla_kv_merge(dkv.d, dkpe.d, k.d, v.d, t, h, dn, dr, dv);
    ok = 1;
    for (int64_t r = 0; r < t * h; r++)
        for (int64_t c = 0; c < dn + dv; c++)
            ok = ok && dkv.t[r * (dn + dv) + c] ==
                           (c < dn ? k.t[r * dq + c] : v.t[r * dv + c - dn]);
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t c = 0; c < dr; c++) {
            float acc = 0.0f;
            for (int64_t hh = 0; hh < h; hh++)
                acc += k.t[(ti * h + hh) * dq + dn + c];
            ok = ok && dkpe.t[ti * dr + c] == acc;
        }
    CHECKF(ok, "mla_kv_merge: dkv or dkpe is not its definition");
    same(&k, "mla_kv_split k");
    same(&v, "mla_kv_split v");
    same(&dkv, "mla_kv_merge dkv");
    same(&dkpe, "mla_kv_merge dkpe");
    inputs_free();
}

/* The MoE rows against their definitions (pairs in order; a dropped pair
 * moves nothing and has dwk 0), and the table against kernels.h. */
static void test_moe_rows(void)
{
    const int64_t t = 5, k = 2, d = 3, n = 8; /* 10 pairs, 8 kept */
    const int64_t pos[10] = { 3, 0, -1, 5, 1, 7, 2, -1, 6, 4 };
    const float *x = in(t * d, 1.0f), *wts = in(t * k, 1.0f), *er = in(n * d, 1.0f);
    pair r = pnew(n * d, 1.0f), y = pnew(t * d, 1.0f), der = pnew(n * d, 1.0f);
    pair dwk = pnew(t * k, 1.0f), dx = pnew(t * d, 1.0f);
    float *y0 = fdup(y.t, t * d), *dx0 = fdup(dx.t, t * d);
    K->moe_dispatch_rows(NULL, r.t, x, pos, t, k, d);
    smoe_moe_dispatch_rows(r.d, x, pos, t, k, d);
    int ok = 1;
    for (int64_t i = 0; i < t * k; i++)
        for (int64_t c = 0; pos[i] >= 0 && c < d; c++)
            ok = ok && r.t[pos[i] * d + c] == x[(i / k) * d + c];
    CHECKF(ok, "moe_dispatch_rows: a row is not its pair's token");
    K->moe_combine_rows(NULL, y.t, er, pos, wts, t, k, d);
    smoe_moe_combine_rows(y.d, er, pos, wts, t, k, d);
    ok = 1;
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t c = 0; c < d; c++) {
            float acc = y0[ti * d + c];
            for (int64_t kk = 0; kk < k; kk++)
                if (pos[ti * k + kk] >= 0)
                    acc += wts[ti * k + kk] * er[pos[ti * k + kk] * d + c];
            ok = ok && y.t[ti * d + c] == acc;
        }
    CHECKF(ok, "moe_combine_rows: not the weighted sums in pair order");
    K->moe_combine_bwd(NULL, der.t, dwk.t, x, er, pos, wts, t, k, d);
    smoe_moe_combine_bwd(der.d, dwk.d, x, er, pos, wts, t, k, d);
    ok = 1;
    for (int64_t i = 0; i < t * k; i++) {
        double dot = 0.0;
        for (int64_t c = 0; pos[i] >= 0 && c < d; c++) {
            dot += (double)x[(i / k) * d + c] * (double)er[pos[i] * d + c];
            ok = ok && der.t[pos[i] * d + c] == wts[i] * x[(i / k) * d + c];
        }
        ok = ok && fabs((double)dwk.t[i] - dot) <= 1e-6 * (1.0 + fabs(dot));
    }
    CHECKF(ok, "moe_combine_bwd: a row or a weight's gradient is not its definition");
    K->moe_dispatch_bwd(NULL, dx.t, er, pos, t, k, d);
    smoe_moe_dispatch_bwd(dx.d, er, pos, t, k, d);
    ok = 1;
    for (int64_t ti = 0; ti < t; ti++)
        for (int64_t c = 0; c < d; c++) {
            float acc = dx0[ti * d + c];
            for (int64_t kk = 0; kk < k; kk++)
                if (pos[ti * k + kk] >= 0)
                    acc += er[pos[ti * k + kk] * d + c];
            ok = ok && dx.t[ti * d + c] == acc;
        }
    CHECKF(ok, "moe_dispatch_bwd: not the sums in pair order");
    same(&r, "moe_dispatch_rows");
    same(&y, "moe_combine_rows");
    same(&der, "moe_combine_bwd der");
    same(&dwk, "moe_combine_bwd dwk");
    same(&dx, "moe_dispatch_bwd");
    smoe_free(y0);
    smoe_free(dx0);
    inputs_free();
}

/* The bf16-input table: its products are smoe_gemm on inputs rounded to
 * bf16 first (dtype.h), every other entry the CPU table's own. */
static void test_bf16_table(void)
{
    const smoe_kops *B = smoe_kops_cpu_bf16();
    CHECK(B && B->synchronous && B->rmsnorm == K->rmsnorm && B->adamw_step == K->adamw_step &&
          B->alloc == K->alloc && B->gemm != K->gemm && B->matmul != K->matmul);
    const int64_t m = 5, n = 7, k = 9, lda = k + 2;
    const float *a = in(m * lda, 1.0f), *b = in(k * n, 1.0f);
    float *ar = fdup(a, m * lda), *br = fdup(b, k * n);
    smoe_dtype_round_trip(SMOE_DT_BF16, 0, ar, m * lda);
    smoe_dtype_round_trip(SMOE_DT_BF16, 0, br, k * n);
    pair c = pnew(m * n, 1.0f);
    float *c32 = fdup(c.t, m * n);
    B->gemm(NULL, 0, 0, m, n, k, 0.5f, a, lda, b, n, 1.0f, c.t, n);
    smoe_gemm(0, 0, m, n, k, 0.5f, ar, lda, br, n, 1.0f, c.d, n);
    smoe_gemm(0, 0, m, n, k, 0.5f, a, lda, b, n, 1.0f, c32, n);
    CHECKF(memcmp(c.t, c32, sizeof *c32 * (size_t)(m * n)) != 0,
           "bf16 gemm: the same bits as fp32 (the inputs were not rounded)");
    same(&c, "bf16 gemm: smoe_gemm on rounded inputs");
    pair y = pnew(m * n, 1.0f), dx = pnew(m * k, 1.0f), dw = pnew(k * n, 1.0f);
    const float *x = in(m * k, 1.0f), *dy = in(m * n, 1.0f);
    float *xr = fdup(x, m * k), *dyr = fdup(dy, m * n);
    smoe_dtype_round_trip(SMOE_DT_BF16, 0, xr, m * k);
    smoe_dtype_round_trip(SMOE_DT_BF16, 0, dyr, m * n);
    B->matmul(NULL, y.t, x, b, m, k, n, 0.0f);
    smoe_matmul(y.d, xr, br, m, k, n, 0.0f);
    B->matmul_bwd(NULL, dx.t, dw.t, dy, x, b, m, k, n);
    smoe_matmul_bwd(dx.d, dw.d, dyr, xr, br, m, k, n);
    same(&y, "bf16 matmul");
    same(&dx, "bf16 matmul_bwd dx");
    same(&dw, "bf16 matmul_bwd dw");
    smoe_free(ar), smoe_free(br), smoe_free(c32), smoe_free(xr), smoe_free(dyr);
    inputs_free();
}

/* The CPU table's memory: zeroed blocks; copy, fill0, read and write move
 * the bytes they name and nothing else. */
static void test_memory(void)
{
    float *a = K->alloc(NULL, 64 * sizeof *a), *b = K->alloc(NULL, 64 * sizeof *b);
    CHECK(a && b);
    int zero = 1;
    for (int i = 0; i < 64; i++)
        zero = zero && a[i] == 0.0f && b[i] == 0.0f;
    CHECKF(zero, "alloc: a block is not zeroed");
    float h[64], back[64];
    for (int i = 0; i < 64; i++)
        h[i] = (float)i + 0.5f;
    K->write(NULL, a, h, sizeof h);
    K->copy(NULL, b + 8, a + 8, 16 * sizeof *a);
    K->fill0(NULL, a + 4, 4 * sizeof *a);
    K->read(NULL, back, b, sizeof back);
    int ok = 1;
    for (int i = 0; i < 64; i++)
        ok = ok && back[i] == (i >= 8 && i < 24 ? h[i] : 0.0f);
    CHECKF(ok, "copy / read moved other bytes than named");
    K->read(NULL, back, a, sizeof back);
    ok = 1;
    for (int i = 0; i < 64; i++)
        ok = ok && back[i] == (i >= 4 && i < 8 ? 0.0f : h[i]);
    CHECKF(ok, "write / fill0 / read moved other bytes than named");
    K->free(NULL, a, 64 * sizeof *a);
    K->free(NULL, b, 64 * sizeof *b);
    K->free(NULL, NULL, 0);
}

int main(void)
{
    K = smoe_kops_cpu();
    test_entries_present();
    test_products();
    test_norm_act();
    test_rope();
    test_attention_entries();
    test_loss_optim_vec();
    test_rows();
    test_moe_rows();
    test_bf16_table();
    test_memory();
    return check_report();
}
