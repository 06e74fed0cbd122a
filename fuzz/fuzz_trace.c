/* libFuzzer entry point for smoe_fuzz_trace (fuzz/target_trace.c). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return smoe_fuzz_trace(data, size);
}
