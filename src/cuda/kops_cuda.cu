// The kernels of the CUDA table (cuda.h) that cuBLASLt does not do, and
// the table itself. Each kernel is the device twin of the kernels.h
// function of the same name: the same arguments, aliasing rules and
// arithmetic (float elementwise, double row sums), with the sums taken in
// a fixed tree (block_sum) instead of the CPU's chains, so a run repeats
// bit for bit and differs from the CPU only in the order of additions.
// Row kernels run one block of NT threads per row; a thread owns the
// row's elements j = tid, tid + NT, ..., so an in-place row never has two
// threads on one element. The GEMMs are gemm_lt.c's, attention
// attention.cu's, the entries with a scalar result reduce.cu's, the moving
// rows rows.cu's, the memory entries kq.c's.
#include "kern_impl.cuh"

#include "smoe/kernels.h"

namespace {

// ---- RMSNorm ----

__global__ void rmsnorm_k(float *y, float *rstd, const float *x, const float *scale, int64_t d,
                          float eps)
{
    const int64_t i = blockIdx.x;
    const float *xr = x + i * d;
    double ss = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += NT)
        ss += (double)xr[j] * (double)xr[j];
    ss = block_sum(ss);
    const float rf = (float)(1.0 / sqrt(ss / (double)d + (double)eps));
    for (int64_t j = threadIdx.x; j < d; j += NT)
        y[i * d + j] = xr[j] * rf * scale[j];
    if (rstd && threadIdx.x == 0)
        rstd[i] = rf;
}

// dscale (d) += sum over rows in row order, one thread per column (the
// CPU's order exactly)
__global__ void rmsnorm_dscale_k(float *dscale, const float *dy, const float *x,
                                 const float *rstd, int64_t t, int64_t d)
{
    FOR_ELEMENTS(j, d) {
        float acc = dscale[j];
        for (int64_t i = 0; i < t; i++)
            acc += dy[i * d + j] * x[i * d + j] * rstd[i];
        dscale[j] = acc;
    }
}

__global__ void rmsnorm_dx_k(float *dx, const float *dy, const float *x, const float *scale,
                             const float *rstd, int64_t d)
{
    const int64_t i = blockIdx.x;
    const float *xr = x + i * d, *dyr = dy + i * d;
    const float q = rstd[i];
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < d; j += NT)
        dot += (double)dyr[j] * (double)scale[j] * (double)xr[j];
    dot = block_sum(dot);
    const float c = (float)((double)q * (double)q * (double)q * dot / (double)d);
    for (int64_t j = threadIdx.x; j < d; j += NT)
        dx[i * d + j] += q * dyr[j] * scale[j] - c * xr[j];
}

void k_rmsnorm(void *s, float *y, float *rstd, const float *x, const float *scale, int64_t t,
               int64_t d, float eps)
{
    LAUNCH(Q(s), "rmsnorm", dim3((unsigned)t), rmsnorm_k, y, rstd, x, scale, d, eps);
}

void k_rmsnorm_bwd(void *s, float *dx, float *dscale, const float *dy, const float *x,
                   const float *scale, const float *rstd, int64_t t, int64_t d)
{
    if (dscale)
        LAUNCH(Q(s), "rmsnorm_bwd", dim3(blocks_for(d)), rmsnorm_dscale_k, dscale, dy, x, rstd,
               t, d);
    if (dx)
        LAUNCH(Q(s), "rmsnorm_bwd", dim3((unsigned)t), rmsnorm_dx_k, dx, dy, x, scale, rstd, d);
}

// ---- elementwise: SwiGLU with its sigmoid, the sigmoid, vectors, AdamW ----

__global__ void swiglu_sig_k(float *h, float *s, const float *a, const float *b, int64_t n)
{
    FOR_ELEMENTS(i, n) {
        const float ai = a[i], bi = b[i], si = sigmoid_stable(ai);
        s[i] = si;
        h[i] = ai * si * bi;
    }
}

__global__ void swiglu_sig_bwd_k(float *da, float *db, const float *dh, const float *a,
                                 const float *b, const float *s, int64_t n)
{
    FOR_ELEMENTS(i, n) {
        const float ai = a[i], si = s[i], di = dh[i], bi = b[i];
        da[i] = di * bi * si * (1.0f + ai * (1.0f - si));
        db[i] = di * ai * si;
    }
}

__global__ void sigmoid_k(float *y, const float *x, int64_t n)
{
    FOR_ELEMENTS(i, n) y[i] = sigmoid_stable(x[i]);
}

__global__ void vec_add_k(float *y, const float *x, int64_t n)
{
    FOR_ELEMENTS(i, n) y[i] += x[i];
}

__global__ void vec_axpy_k(float *y, float a, const float *x, int64_t n)
{
    FOR_ELEMENTS(i, n) y[i] += a * x[i];
}

// adamw.c's update, its bias corrections computed on the host as there
__global__ void adamw_k(float *p, float *m, float *v, const float *g, int64_t n,
                        smoe_adamw_cfg c, float bc1, float bc2)
{
    const int clip = c.clip_norm > 0.0f, decay = c.wd != 0.0f;
    FOR_ELEMENTS(i, n) {
        const float gi = clip ? (g[i] / c.clip_norm) * c.clip_max : g[i];
        const float mi = (1.0f - c.b1) * gi + c.b1 * m[i];
        const float vi = (1.0f - c.b2) * (gi * gi) + c.b2 * v[i];
        m[i] = mi;
        v[i] = vi;
        float u = (mi / bc1) / (sqrtf(vi / bc2 + c.eps_root) + c.eps);
        if (decay)
            u = u + c.wd * p[i];
        p[i] = p[i] + -c.lr * u;
    }
}

void k_swiglu_sig(void *s, float *h, float *sg, const float *a, const float *b, int64_t n)
{
    LAUNCH(Q(s), "swiglu_sig", dim3(blocks_for(n)), swiglu_sig_k, h, sg, a, b, n);
}

void k_swiglu_sig_bwd(void *s, float *da, float *db, const float *dh, const float *a,
                      const float *b, const float *sg, int64_t n)
{
    LAUNCH(Q(s), "swiglu_sig_bwd", dim3(blocks_for(n)), swiglu_sig_bwd_k, da, db, dh, a, b, sg,
           n);
}

void k_sigmoid(void *s, float *y, const float *x, int64_t n)
{
    LAUNCH(Q(s), "sigmoid", dim3(blocks_for(n)), sigmoid_k, y, x, n);
}

void k_vec_add(void *s, float *y, const float *x, int64_t n)
{
    LAUNCH(Q(s), "vec_add", dim3(blocks_for(n)), vec_add_k, y, x, n);
}

void k_vec_axpy(void *s, float *y, float a, const float *x, int64_t n)
{
    LAUNCH(Q(s), "vec_axpy", dim3(blocks_for(n)), vec_axpy_k, y, a, x, n);
}

void k_adamw_step(void *s, float *p, float *m, float *v, const float *g, int64_t n,
                  const smoe_adamw_cfg *c)
{
    const float bc1 = (float)(1.0 - pow((double)c->b1, (double)c->t));
    const float bc2 = (float)(1.0 - pow((double)c->b2, (double)c->t));
    LAUNCH(Q(s), "adamw_step", dim3(blocks_for(n)), adamw_k, p, m, v, g, n, *c, bc1, bc2);
}

// ---- row softmax ----

__global__ void softmax_rows_k(float *x, int64_t n)
{
    float *r = x + (int64_t)blockIdx.x * n;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += NT)
        mx = r[j] > mx ? r[j] : mx;
    mx = block_max(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += NT) {
        r[j] = expf(r[j] - mx);
        sum += (double)r[j];
    }
    const float inv = (float)(1.0 / block_sum(sum));
    for (int64_t j = threadIdx.x; j < n; j += NT)
        r[j] *= inv;
}

__global__ void softmax_rows_bwd_k(float *dx, const float *dy, const float *y, int64_t n)
{
    const int64_t o = (int64_t)blockIdx.x * n;
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += NT)
        dot += (double)dy[o + j] * (double)y[o + j];
    const float df = (float)block_sum(dot);
    for (int64_t j = threadIdx.x; j < n; j += NT)
        dx[o + j] = y[o + j] * (dy[o + j] - df);
}

void k_softmax_rows(void *s, float *x, int64_t t, int64_t n)
{
    if (n > 0)
        LAUNCH(Q(s), "softmax_rows", dim3((unsigned)t), softmax_rows_k, x, n);
}

void k_softmax_rows_bwd(void *s, float *dx, const float *dy, const float *y, int64_t t,
                        int64_t n)
{
    if (n > 0)
        LAUNCH(Q(s), "softmax_rows_bwd", dim3((unsigned)t), softmax_rows_bwd_k, dx, dy, y, n);
}

// ---- RoPE from tables: one thread per (token, head, pair) ----

struct rope_args {
    int64_t t, h, half, stride, hstride, step, other;
    float sgn, scale;
};

__global__ void rope_k(float *x, const int32_t *pos, const float *cs, const float *sn,
                       rope_args g)
{
    FOR_ELEMENTS(e, g.t * g.h * g.half) {
        const int64_t c = e % g.half, hi = (e / g.half) % g.h, ti = e / (g.half * g.h);
        const int64_t row = (int64_t)pos[ti] * g.half;
        float *a = x + ti * g.stride + hi * g.hstride + c * g.step, *b = a + g.other;
        const float x0 = *a, x1 = *b, sv = g.sgn * sn[row + c], cv = cs[row + c];
        const float r0 = x0 * cv - x1 * sv, r1 = x0 * sv + x1 * cv;
        *a = g.scale == 1.0f ? r0 : r0 * g.scale;
        *b = g.scale == 1.0f ? r1 : r1 * g.scale;
    }
}

void k_rope_apply_tab(void *s, float *x, const int32_t *pos, int64_t t, int64_t h, int64_t d,
                      int64_t stride, int64_t hstride, const float *cs, const float *sn,
                      int64_t npos, int halves, float scale, int inverse)
{
    (void)npos; // pos[ti] in [0, npos): the caller's contract, as on the CPU
    const int64_t half = d / 2;
    rope_args g = { t, h, half, stride, hstride, halves ? 1 : 2, halves ? half : 1,
                    inverse ? -1.0f : 1.0f, scale };
    LAUNCH(Q(s), "rope_apply_tab", dim3(blocks_for(t * h * half)), rope_k, x, pos, cs, sn, g);
}

} // namespace

static smoe_kops make_table()
{
    smoe_kops t = {};
    t.name = "cuda";
    t.synchronous = 0;
    t.alloc = cuda_mem_alloc;
    t.free = cuda_mem_free;
    t.copy = cuda_mem_copy;
    t.fill0 = cuda_mem_fill0;
    t.read = cuda_mem_read;
    t.write = cuda_mem_write;
    t.embed_rows = cuda_k_embed_rows;
    t.embed_rows_bwd = cuda_k_embed_rows_bwd;
    t.mla_kv_split = cuda_k_mla_kv_split;
    t.mla_kv_merge = cuda_k_mla_kv_merge;
    t.moe_dispatch_rows = cuda_k_moe_dispatch_rows;
    t.moe_combine_rows = cuda_k_moe_combine_rows;
    t.moe_combine_bwd = cuda_k_moe_combine_bwd;
    t.moe_dispatch_bwd = cuda_k_moe_dispatch_bwd;
    t.gemm = cuda_gemm;
    t.matmul = cuda_matmul;
    t.matmul_bwd = cuda_matmul_bwd;
    t.rmsnorm = k_rmsnorm;
    t.rmsnorm_bwd = k_rmsnorm_bwd;
    t.swiglu_sig = k_swiglu_sig;
    t.swiglu_sig_bwd = k_swiglu_sig_bwd;
    t.sigmoid = k_sigmoid;
    t.softmax_rows = k_softmax_rows;
    t.softmax_rows_bwd = k_softmax_rows_bwd;
    t.rope_apply_tab = k_rope_apply_tab;
    t.attention = cuda_k_attention;
    t.attention_bwd = cuda_k_attention_bwd;
    t.cross_entropy_z = cuda_k_cross_entropy_z;
    t.adamw_step = k_adamw_step;
    t.vec_add = k_vec_add;
    t.vec_axpy = k_vec_axpy;
    t.vec_dot_scale = cuda_k_vec_dot_scale;
    t.vec_sumsq = cuda_k_vec_sumsq;
    t.to_bf16 = cuda_k_wire_to_bf16;
    t.from_bf16 = cuda_k_wire_from_bf16;
    t.stamp = cuda_k_stamp;
    return t;
}

// initialised when the program loads (no function-local static: no C++
// runtime guard), so the table is complete before any thread can ask
static const smoe_kops cuda_table = make_table();

const smoe_kops *smoe_kops_cuda(void) { return &cuda_table; }
