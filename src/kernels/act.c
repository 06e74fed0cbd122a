/* Elementwise activations and the row softmax: SwiGLU (silu(a) * b, the
 * gate of the MoE experts' MLP), the logistic sigmoid (router scores) and a
 * numerically stable softmax over the rows of a matrix, with backwards.
 * silu(a) = a * sigmoid(a); silu'(a) = s * (1 + a * (1 - s)) with
 * s = sigmoid(a). The sigmoid never calls expf on a positive argument, so
 * it neither overflows nor produces NaN for large |a|.
 */
#include "smoe/kernels.h"

#include <math.h>

static inline float sigmoidf_stable(float a)
{
    if (a >= 0.0f)
        return 1.0f / (1.0f + expf(-a));
    float e = expf(a);
    return e / (1.0f + e);
}

/* h (n) = silu(a) * b. h may alias a or b. */
void smoe_swiglu(float *h, const float *a, const float *b, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) {
        float ai = a[i];
        h[i] = ai * sigmoidf_stable(ai) * b[i];
    }
}

/* Overwrites: da (n) = dh * b * silu'(a), db (n) = dh * silu(a). Either
 * output may be NULL to skip it; outputs must not alias the inputs. */
void smoe_swiglu_bwd(float *da, float *db, const float *dh, const float *a,
                     const float *b, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++) {
        float ai = a[i];
        float s = sigmoidf_stable(ai);
        if (da)
            da[i] = dh[i] * b[i] * s * (1.0f + ai * (1.0f - s));
        if (db)
            db[i] = dh[i] * ai * s;
    }
}

/* Each row of x (t,n) replaced by its softmax, max subtracted first. A row
 * whose entries are all -inf yields NaN (there is no distribution). */
void smoe_softmax_rows(float *x, int64_t t, int64_t n)
{
    SMOE_ASSERT(t >= 0 && n >= 0);
    if (n == 0)
        return;
    for (int64_t i = 0; i < t; i++) {
        float *r = x + i * n;
        float mx = r[0];
        for (int64_t j = 1; j < n; j++)
            mx = r[j] > mx ? r[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j < n; j++) {
            r[j] = expf(r[j] - mx);
            sum += (double)r[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; j++)
            r[j] *= inv;
    }
}

/* Overwrites dx (t,n) = y * (dy - sum_j dy_j y_j) row by row, from the
 * softmax output y (t,n). dx may alias dy. */
void smoe_softmax_rows_bwd(float *dx, const float *dy, const float *y,
                           int64_t t, int64_t n)
{
    SMOE_ASSERT(t >= 0 && n >= 0);
    for (int64_t i = 0; i < t; i++) {
        const float *yr = y + i * n;
        const float *dyr = dy + i * n;
        double dot = 0.0;
        for (int64_t j = 0; j < n; j++)
            dot += (double)dyr[j] * (double)yr[j];
        float df = (float)dot;
        float *dxr = dx + i * n;
        for (int64_t j = 0; j < n; j++)
            dxr[j] = yr[j] * (dyr[j] - df);
    }
}

/* y (n) = 1 / (1 + exp(-x)), stable for large |x|. y may alias x. */
void smoe_sigmoid(float *y, const float *x, int64_t n)
{
    SMOE_ASSERT(n >= 0);
    for (int64_t i = 0; i < n; i++)
        y[i] = sigmoidf_stable(x[i]);
}
