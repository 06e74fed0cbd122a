/* The rule two training runs are compared by (cmp_runs, test_vrank): the
 * relative error of a tensor is ||a - b||_2 / ||a||_2 (norm-wise: AdamW
 * divides each element by its own gradient scale, so an element whose
 * gradient is pure rounding noise may move by a visible fraction of the
 * learning rate while the tensor as a whole agrees; ||a - b||_2 when a is
 * zero), of a number |a - b| / |a|; with a tolerance of 0 everything must
 * be bitwise equal. */
#ifndef SMOE_TEST_CMP_RULE_H
#define SMOE_TEST_CMP_RULE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct cmp_tensor {
    double rel;      /* ||a - b|| / ||a|| */
    double elem;     /* the worst element: max |a - b| / max |a| */
    double max_diff; /* max |a - b| (0: bitwise equal) */
} cmp_tensor;

/* n floats each at a and b (any alignment). */
static inline cmp_tensor cmp_tensor_of(const void *a, const void *b, int64_t n)
{
    double md = 0, mx = 0, d2 = 0, a2 = 0;
    for (int64_t k = 0; k < n; k++) {
        float fa, fb;
        memcpy(&fa, (const char *)a + 4 * k, sizeof fa);
        memcpy(&fb, (const char *)b + 4 * k, sizeof fb);
        double x = fa, d = fabs(x - (double)fb);
        md = d > md ? d : md;
        mx = fabs(x) > mx ? fabs(x) : mx;
        d2 += d * d;
        a2 += x * x;
    }
    cmp_tensor c = { a2 > 0 ? sqrt(d2 / a2) : sqrt(d2), mx > 0 ? md / mx : md, md };
    return c;
}

/* Within tol (0: bitwise). */
static inline int cmp_tensor_ok(const cmp_tensor *c, double tol)
{
    return tol == 0 ? c->max_diff == 0 : c->rel <= tol;
}

static inline double cmp_number_rel(double a, double b)
{
    return a == b ? 0.0 : fabs(a - b) / fmax(fabs(a), 1e-30);
}

static inline int cmp_number_ok(double a, double b, double tol)
{
    return tol == 0 ? a == b : cmp_number_rel(a, b) <= tol;
}

#endif
