/* The global timer (%globaltimer, nanoseconds, one clock for the device):
 * the device layer's delay (dev.h), one thread of one block reading it
 * until `ns` nanoseconds have passed, holding its stream (and one slot of
 * one SM) that long: the time a slower link would take; and the kernel
 * table's stamp (backend.h), one thread writing it in seconds. */
#include "cuda_impl.h"

static __device__ unsigned long long now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void stamp_kernel(double *out) { *out = (double)now_ns() * 1e-9; }

extern "C" void cuda_k_stamp(void *s, double *out)
{
    smoe_kq *q = static_cast<smoe_kq *>(s);
    if (q->err.code != SMOE_OK)
        return;
    stamp_kernel<<<1, 1, 0, q->stream>>>(out);
    kq_check_launch(q, "stamp");
}

static __global__ void spin_kernel(unsigned long long ns)
{
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) {
    }
}

extern "C" cudaError_t cuda_spin(unsigned long long ns, cudaStream_t s)
{
    if (ns == 0)
        return cudaSuccess;
    spin_kernel<<<1, 1, 0, s>>>(ns);
    return cudaGetLastError();
}
