/* The device layer's delay (dev.h): one thread of one block reads the
 * global timer until `ns` nanoseconds have passed, holding its stream (and
 * one slot of one SM) that long: the time a slower link would take. */
#include "cuda_impl.h"

static __global__ void spin_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

extern "C" cudaError_t cuda_spin(unsigned long long ns, cudaStream_t s)
{
    if (ns == 0)
        return cudaSuccess;
    spin_kernel<<<1, 1, 0, s>>>(ns);
    return cudaGetLastError();
}
