/* The device layer's CUDA entry points in a build without CUDA (CMake
 * compiles this file only then; src/cuda/dev_cuda.c defines them
 * otherwise): no device is ever present. */
#include "smoe/dev.h"

int smoe_dev_have_cuda(void) { return 0; }

int smoe_dev_cuda_count(void) { return 0; }

smoe_status smoe_dev_cuda_open(int ordinal, smoe_dev *out, smoe_err *err)
{
    out->ops = NULL;
    out->ctx = NULL;
    return smoe_err_set(err, SMOE_ENOTFOUND, "device cuda:%d: this build has no CUDA", ordinal);
}
