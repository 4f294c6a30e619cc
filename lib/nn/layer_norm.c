/* layer_norm.c - layer normalisation (Ba et al., 2016) as PyTorch computes
 * it: biased variance, eps inside the square root; and the two ends of a
 * sublayer under pre-norm or post-norm placement. */
#include <math.h>

#include "nn/layers.h"

/* out, inp: [N, D]; weight, bias: [D]; mean, rstd: [N] or NULL.
 * Two passes over each row (mean, then squared deviations) rather than
 * E[x^2] - E[x]^2, which cancels badly when the mean is large. */
void layer_norm_forward(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int D, float eps)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        float *y = out + (size_t)n * D;
        float m = 0.0f;
        for (int i = 0; i < D; i++) m += x[i];
        m /= (float)D;
        float v = 0.0f;
        for (int i = 0; i < D; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= (float)D;
        float s = 1.0f / sqrtf(v + eps);
        for (int i = 0; i < D; i++) y[i] = (x[i] - m) * s * weight[i] + bias[i];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = s;
    }
}

/* y, x: [N, D] */
const float *sublayer_input(float *y, const float *x, const float *weight, const float *bias,
                            int N, int D, float eps, bool pre_norm)
{
    if (!pre_norm) return x;
    layer_norm_forward(y, NULL, NULL, x, weight, bias, N, D, eps);
    return y;
}

/* x, sub: [N, D] */
void sublayer_output(float *x, const float *sub, const float *weight, const float *bias, int N,
                     int D, float eps, bool pre_norm)
{
    residual_forward(x, sub, (size_t)N * D);
    if (!pre_norm) layer_norm_forward(x, NULL, NULL, x, weight, bias, N, D, eps);
}
