/* Shared by the compressed-gather tests (test_runtime.c, test_wire_plan.c):
 * what a gather in a wire dtype must deliver, by the naive twins. */
#ifndef SMOE_TEST_WIRE_TESTLIB_H
#define SMOE_TEST_WIRE_TESTLIB_H

#include "smoe/dtype.h"

#include <stdint.h>
#include <stdlib.h>

/* The global tensor (n floats) through the wire, in place, by the naive
 * twins: every element (bf16); blocks of `block` elements of the flat
 * tensor (int8), which are blocks of its rows when the last dim divides
 * into them (the block rule); fp32 unchanged. */
static inline void naive_wire(float *G, int64_t n, smoe_dtype t, int64_t block)
{
    if (t == SMOE_DT_BF16) {
        uint16_t *h = malloc(sizeof *h * (size_t)n);
        smoe_bf16_from_f32_ref(h, G, n);
        smoe_bf16_to_f32_ref(G, h, n);
        free(h);
    } else if (t == SMOE_DT_INT8) {
        void *r = malloc((size_t)smoe_dtype_bytes(t, block, n));
        smoe_int8_quant_ref(r, G, n, block);
        smoe_int8_dequant_ref(G, r, n, block);
        free(r);
    }
}

#endif
