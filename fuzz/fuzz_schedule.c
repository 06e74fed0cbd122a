/* libFuzzer entry point for smoe_fuzz_schedule (fuzz/target_schedule.c). */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return smoe_fuzz_schedule(data, size);
}
