// Causal attention of one sequence on the device: the twins of
// smoe_attention and smoe_attention_bwd (kernels.h), same layouts and
// strides. One block per (query row i, head): the scores q_i . k_j for
// j <= i go into the row of p, the softmax is taken there (max, float
// exponentials, double sum) and o_i = sum_j p_ij v_j. The backward takes
// dS = p (dP - rowsum(p dP)) scale, dP_ij = dout_i . v_j, into a
// temporary (h, s, s) on the stream; then per row i, dq_i += sum_j dS_ij
// k_j, and per key row j, dk_j += sum_{i>=j} dS_ij q_i and dv_j +=
// sum_{i>=j} p_ij dout_i. The CPU's scratch (s floats) is not needed.
#include "kern_impl.cuh"

namespace {

struct att_dims {
    int64_t s, h, dk, dv, qs, ks, vs;
    float scale;
};

__global__ void attention_k(float *o, float *p, const float *q, const float *k, const float *v,
                            att_dims g)
{
    const int64_t i = blockIdx.x, hh = blockIdx.y;
    float *pr = p + (hh * g.s + i) * g.s;
    const float *qi = q + i * g.qs + hh * g.dk;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += NT) {
        const float *kj = k + j * g.ks + hh * g.dk;
        float acc = 0.0f;
        for (int64_t c = 0; c < g.dk; c++)
            acc += qi[c] * kj[c];
        pr[j] = g.scale * acc;
        mx = pr[j] > mx ? pr[j] : mx;
    }
    mx = block_max(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j <= i; j += NT) {
        pr[j] = expf(pr[j] - mx);
        sum += (double)pr[j];
    }
    const float inv = (float)(1.0 / block_sum(sum));
    for (int64_t j = threadIdx.x; j < g.s; j += NT)
        pr[j] = j <= i ? pr[j] * inv : 0.0f;
    __syncthreads();
    for (int64_t c = threadIdx.x; c < g.dv; c += NT) {
        float acc = 0.0f;
        for (int64_t j = 0; j <= i; j++)
            acc += pr[j] * v[j * g.vs + hh * g.dv + c];
        o[(i * g.h + hh) * g.dv + c] = acc;
    }
}

// dS's row i (into ds), then dq_i
__global__ void attention_dq_k(float *dq, float *ds, const float *dout, const float *p,
                               const float *k, const float *v, att_dims g)
{
    const int64_t i = blockIdx.x, hh = blockIdx.y;
    const float *pr = p + (hh * g.s + i) * g.s;
    float *dr = ds + (hh * g.s + i) * g.s;
    const float *doi = dout + (i * g.h + hh) * g.dv;
    double dsum = 0.0;
    for (int64_t j = threadIdx.x; j <= i; j += NT) {
        const float *vj = v + j * g.vs + hh * g.dv;
        float acc = 0.0f;
        for (int64_t c = 0; c < g.dv; c++)
            acc += doi[c] * vj[c];
        dr[j] = acc;
        dsum += (double)pr[j] * (double)acc;
    }
    const float df = (float)block_sum(dsum);
    for (int64_t j = threadIdx.x; j <= i; j += NT)
        dr[j] = pr[j] * (dr[j] - df) * g.scale;
    __syncthreads();
    if (!dq)
        return;
    for (int64_t c = threadIdx.x; c < g.dk; c += NT) {
        float acc = 0.0f;
        for (int64_t j = 0; j <= i; j++)
            acc += dr[j] * k[j * g.ks + hh * g.dk + c];
        dq[i * g.qs + hh * g.dk + c] += acc;
    }
}

// key row j: dk_j and dv_j from the columns of dS and p
__global__ void attention_dkv_k(float *dk, float *dv, const float *ds, const float *dout,
                                const float *p, const float *q, att_dims g)
{
    const int64_t j = blockIdx.x, hh = blockIdx.y;
    const float *dcol = ds + hh * g.s * g.s + j, *pcol = p + hh * g.s * g.s + j;
    for (int64_t c = threadIdx.x; dk && c < g.dk; c += NT) {
        float acc = 0.0f;
        for (int64_t i = j; i < g.s; i++)
            acc += dcol[i * g.s] * q[i * g.qs + hh * g.dk + c];
        dk[j * g.ks + hh * g.dk + c] += acc;
    }
    for (int64_t c = threadIdx.x; dv && c < g.dv; c += NT) {
        float acc = 0.0f;
        for (int64_t i = j; i < g.s; i++)
            acc += pcol[i * g.s] * dout[(i * g.h + hh) * g.dv + c];
        dv[j * g.vs + hh * g.dv + c] += acc;
    }
}

} // namespace

extern "C" void cuda_k_attention(void *s, float *o, float *p, const float *q, const float *k,
                                 const float *v, int64_t sl, int64_t h, int64_t dk, int64_t dv,
                                 int64_t qs, int64_t ks, int64_t vs, float scale)
{
    att_dims g = { sl, h, dk, dv, qs, ks, vs, scale };
    LAUNCH(Q(s), "attention", dim3((unsigned)sl, (unsigned)h), attention_k, o, p, q, k, v, g);
}

extern "C" void cuda_k_attention_bwd(void *s, float *dq, float *dk, float *dv, const float *dout,
                                     const float *p, const float *q, const float *k,
                                     const float *v, int64_t sl, int64_t h, int64_t dk_,
                                     int64_t dv_, int64_t qs, int64_t ks, int64_t vs,
                                     float scale, float *scratch)
{
    (void)scratch;
    smoe_kq *kq = Q(s);
    if (sl == 0 || h == 0 || (!dq && !dk && !dv))
        return;
    att_dims g = { sl, h, dk_, dv_, qs, ks, vs, scale };
    float *ds = temp<float>(kq, h * sl * sl, "attention_bwd");
    if (!ds)
        return;
    const dim3 grid((unsigned)sl, (unsigned)h);
    LAUNCH(kq, "attention_bwd", grid, attention_dq_k, dq, ds, dout, p, k, v, g);
    if (dk || dv)
        LAUNCH(kq, "attention_bwd", grid, attention_dkv_k, dk, dv, ds, dout, p, q, g);
    untemp(kq, ds, "attention_bwd");
}
