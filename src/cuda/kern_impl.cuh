// Device helpers of the CUDA table's kernel files (internal to src/cuda/):
// the row kernels' block size and fixed-tree reductions, the launch macro
// that keeps a queue's first failure, and stream-ordered temporaries.
#ifndef SMOE_KERN_IMPL_CUH
#define SMOE_KERN_IMPL_CUH

#include "cuda_impl.h"

#include <math.h>

namespace {

constexpr int NT = 256; // threads of a row kernel; a power of two

// v combined over the block's NT threads by op, the same tree every time.
// Shared memory: one array per element type, so a sum and a max in one
// kernel use separate storage.
template <typename T, typename Op> __device__ T block_reduce(T v, Op op)
{
    __shared__ T sh[NT];
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (t < s)
            sh[t] = op(sh[t], sh[t + s]);
        __syncthreads();
    }
    const T r = sh[0];
    __syncthreads();
    return r;
}

struct add_op {
    __device__ double operator()(double a, double b) const { return a + b; }
};
struct max_op {
    __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

__device__ double block_sum(double v) { return block_reduce(v, add_op()); }
__device__ float block_max(float v) { return block_reduce(v, max_op()); }

// act.c's sigmoid: expf never of a positive argument
__device__ float sigmoid_stable(float a)
{
    if (a >= 0.0f)
        return 1.0f / (1.0f + expf(-a));
    const float e = expf(a);
    return e / (1.0f + e);
}

inline smoe_kq *Q(void *s) { return static_cast<smoe_kq *>(s); }

// blocks for n elements, one per NT, at most 4096 (the loops stride)
inline unsigned blocks_for(int64_t n)
{
    const int64_t b = (n + NT - 1) / NT;
    return (unsigned)(b < 4096 ? b : 4096);
}

#define FOR_ELEMENTS(i, n)                                                          \
    for (int64_t i = (int64_t)blockIdx.x * NT + threadIdx.x; i < (n);              \
         i += (int64_t)gridDim.x * NT)

// Launches KERNEL<<<GRID, NT>>> on the queue's stream unless the queue has
// failed or the grid is empty, then keeps a launch error.
#define LAUNCH(q, what, grid, kernel, ...)                                          \
    do {                                                                            \
        if ((q)->err.code == SMOE_OK && (grid).x > 0 && (grid).y > 0) {             \
            kernel<<<(grid), NT, 0, (q)->stream>>>(__VA_ARGS__);                   \
            kq_check_launch((q), (what));                                           \
        }                                                                           \
    } while (0)

// A temporary of n elements on the queue's stream; NULL (queue failed) if none.
template <typename T> T *temp(smoe_kq *q, int64_t n, const char *what)
{
    void *p = nullptr;
    if (q->err.code != SMOE_OK)
        return nullptr;
    cudaError_t e = cudaMallocAsync(&p, (size_t)(n > 0 ? n : 1) * sizeof(T), q->stream);
    if (e != cudaSuccess) {
        kq_fail(q, what, cudaGetErrorString(e));
        return nullptr;
    }
    return static_cast<T *>(p);
}

inline void untemp(smoe_kq *q, void *p, const char *what)
{
    if (!p)
        return;
    cudaError_t e = cudaFreeAsync(p, q->stream);
    if (e != cudaSuccess)
        kq_fail(q, what, cudaGetErrorString(e));
}

} // namespace

#endif
