// The entries whose result is a scalar in device memory: the
// cross-entropy with z-loss (smoe_cross_entropy_z; the loss and the
// z-terms' sum as doubles), smoe_vec_dot_scale (the dot product as a
// float) and smoe_vec_sumsq (a double). Each first writes per-row (per-block) partial sums to a
// temporary, then one block adds them in a fixed tree: the result repeats
// bit for bit, whatever the order the blocks ran in.
#include "kern_impl.cuh"

namespace {

// One row of logits: its loss term (NaN for a target outside [0, v), which
// the CPU refuses by assertion) and z-term, and the gradient when dr is
// not NULL (dr may alias r: a thread reads each of its elements before
// writing it, and every read of the row is done before the first write).
__global__ void ce_row_k(float *dl, const float *logits, const int32_t *targets, int64_t v,
                         float scale, float z, double *rows, double *zrows)
{
    const int64_t i = blockIdx.x;
    const float *r = logits + i * v;
    float *dr = dl ? dl + i * v : nullptr;
    const int32_t y = targets[i];
    const bool ok = y >= 0 && (int64_t)y < v;
    const float ry = ok ? r[y] : 0.0f;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < v; j += NT)
        mx = r[j] > mx ? r[j] : mx;
    mx = block_max(mx);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < v; j += NT)
        sum += (double)expf(r[j] - mx);
    sum = block_sum(sum);
    const double lse = (double)mx + log(sum);
    const double zl = (double)z * lse * lse;
    if (threadIdx.x == 0) {
        rows[i] = ok ? lse - (double)ry + zl : (double)NAN;
        zrows[i] = zl;
    }
    if (!dr)
        return;
    const double c = (1.0 + 2.0 * (double)z * lse) * (double)scale / sum;
    for (int64_t j = threadIdx.x; j < v; j += NT)
        dr[j] = (float)((double)expf(r[j] - mx) * c);
    __syncthreads();
    if (threadIdx.x == 0 && ok)
        dr[y] -= scale;
}

// out[0] = sum of a (n), out2[0] = sum of b (n) when b: one block
__global__ void sum2_k(double *out, const double *a, double *out2, const double *b, int64_t n)
{
    double sa = 0.0, sb = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += NT) {
        sa += a[j];
        if (b)
            sb += b[j];
    }
    sa = block_sum(sa);
    sb = block_sum(sb);
    if (threadIdx.x == 0) {
        out[0] = sa;
        if (out2)
            out2[0] = sb;
    }
}

// r = a d over the grid; each block's part of d . y into part[blockIdx]
__global__ void dot_scale_k(float *r, float a, const float *d, const float *y, int64_t n,
                            double *part)
{
    double acc = 0.0;
    FOR_ELEMENTS(i, n) {
        acc += (double)d[i] * (double)y[i];
        r[i] = a * d[i];
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

// *out = the sum of the n partial sums, as T (float for the dot product,
// double for the sum of squares): one block
template <typename T> __global__ void finish_k(T *out, const double *part, int64_t n)
{
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += NT)
        s += part[j];
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = (T)s;
}

// each block's part of sum x^2 into part[blockIdx]
__global__ void sumsq_k(const float *x, int64_t n, double *part)
{
    double acc = 0.0;
    FOR_ELEMENTS(i, n) acc += (double)x[i] * (double)x[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

} // namespace

extern "C" void cuda_k_vec_sumsq(void *s, const float *x, int64_t n, double *out)
{
    smoe_kq *q = Q(s);
    const unsigned nb = n > 0 ? blocks_for(n) : 1;
    double *part = temp<double>(q, nb, "vec_sumsq");
    if (!part)
        return;
    LAUNCH(q, "vec_sumsq", dim3(nb), sumsq_k, x, n, part);
    LAUNCH(q, "vec_sumsq", dim3(1), finish_k<double>, out, part, (int64_t)nb);
    untemp(q, part, "vec_sumsq");
}

extern "C" void cuda_k_cross_entropy_z(void *s, float *dlogits, const float *logits,
                                       const int32_t *targets, int64_t t, int64_t v,
                                       float scale, float z, double *loss, double *zsum)
{
    smoe_kq *q = Q(s);
    double *rows = temp<double>(q, 2 * t, "cross_entropy_z");
    if (!rows)
        return;
    LAUNCH(q, "cross_entropy_z", dim3((unsigned)t), ce_row_k, dlogits, logits, targets, v, scale,
           z, rows, rows + t);
    LAUNCH(q, "cross_entropy_z", dim3(1), sum2_k, loss, rows, zsum, zsum ? rows + t : nullptr,
           t);
    untemp(q, rows, "cross_entropy_z");
}

extern "C" void cuda_k_vec_dot_scale(void *s, float *r, float a, const float *d, const float *y,
                                     int64_t n, float *dot)
{
    smoe_kq *q = Q(s);
    const unsigned nb = n > 0 ? blocks_for(n) : 1;
    double *part = temp<double>(q, nb, "vec_dot_scale");
    if (!part)
        return;
    LAUNCH(q, "vec_dot_scale", dim3(nb), dot_scale_k, r, a, d, y, n, part);
    LAUNCH(q, "vec_dot_scale", dim3(1), finish_k<float>, dot, part, (int64_t)nb);
    untemp(q, part, "vec_dot_scale");
}
