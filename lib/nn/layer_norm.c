/* layer_norm.c - layer normalisation (Ba et al., 2016) as PyTorch computes
 * it: biased variance, eps inside the square root, forward and backward; and
 * the two ends of a sublayer under pre-norm or post-norm placement. */
#include <math.h>
#include <stdbool.h>

#include "nn/layers.h"

/* The sum of x [D] - shift, in eight lanes (eight independent sums instead
 * of one chain of D dependent adds), the lanes added in a fixed order; with
 * square, the sum of squares. */
NN_INLINE float row_sum(const float *x, int D, float shift, bool square)
{
    nn_f32x8 acc = {0};
    int i = 0;
    for (; i + 8 <= D; i += 8) {
        const nn_f32x8 d = nn_load8(x + i) - shift;
        acc += square ? d * d : d;
    }
    float s = nn_sum8(&acc);
    for (; i < D; i++) s += square ? (x[i] - shift) * (x[i] - shift) : x[i] - shift;
    return s;
}

/* out, inp: [N, D]; weight, bias: [D]; mean, rstd: [N] or NULL.
 * Two passes over each row (mean, then squared deviations) rather than
 * E[x^2] - E[x]^2, which cancels badly when the mean is large. */
NN_MULTIVERSION
void layer_norm_forward(float *out, float *mean, float *rstd, const float *inp,
                        const float *weight, const float *bias, int N, int D, float eps)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        float *y = out + (size_t)n * D;
        const float m = row_sum(x, D, 0.0f, false) / (float)D;
        const float v = row_sum(x, D, m, true) / (float)D;
        const float s = 1.0f / sqrtf(v + eps);
        int i = 0;
        for (; i + 8 <= D; i += 8) /* (in place too: each lane read before it is written) */
            nn_store8(y + i, (nn_load8(x + i) - m) * s * nn_load8(weight + i) + nn_load8(bias + i));
        for (; i < D; i++) y[i] = (x[i] - m) * s * weight[i] + bias[i];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = s;
    }
}

/* dinp, dout, inp: [N, D]; dweight, dbias, weight: [D]; mean, rstd: [N] as
 * the forward saved them.  With xhat = (x - mean) * rstd and y = xhat * w + b
 * (llm.c's layernorm_backward):
 *   db += dy,  dw += dy * xhat,
 *   dx += rstd * (dy w - mean(dy w) - xhat * mean(dy w * xhat))
 * where the means run over the row: the last two terms are the gradient
 * through the row's mean and variance. */
NN_MULTIVERSION
void layer_norm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *mean, const float *rstd,
                         const float *weight, int N, int D)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * D;
        const float *dy = dout + (size_t)n * D;
        float *dx = dinp + (size_t)n * D;
        const float m = mean[n], s = rstd[n];
        /* the two sums over the row in eight lanes each, as row_sum */
        nn_f32x8 acc_dyw = {0}, acc_dyw_xhat = {0};
        int i = 0;
        for (; i + 8 <= D; i += 8) {
            const nn_f32x8 dyw = nn_load8(dy + i) * nn_load8(weight + i);
            acc_dyw += dyw;
            acc_dyw_xhat += dyw * (nn_load8(x + i) - m) * s;
        }
        float sum_dyw = nn_sum8(&acc_dyw), sum_dyw_xhat = nn_sum8(&acc_dyw_xhat);
        for (; i < D; i++) {
            float dyw = dy[i] * weight[i];
            sum_dyw += dyw;
            sum_dyw_xhat += dyw * (x[i] - m) * s;
        }
        const float mean_dyw = sum_dyw / (float)D, mean_dyw_xhat = sum_dyw_xhat / (float)D;
        /* eight lanes at a time, the operations of the tail's loop */
        for (i = 0; i + 8 <= D; i += 8) {
            const nn_f32x8 xhat = (nn_load8(x + i) - m) * s, d = nn_load8(dy + i);
            nn_store8(dbias + i, nn_load8(dbias + i) + d);
            nn_store8(dweight + i, nn_load8(dweight + i) + d * xhat);
            nn_store8(dx + i, nn_load8(dx + i) + s * (d * nn_load8(weight + i) - mean_dyw -
                                                      xhat * mean_dyw_xhat));
        }
        for (; i < D; i++) {
            float xhat = (x[i] - m) * s;
            dbias[i] += dy[i];
            dweight[i] += dy[i] * xhat;
            dx[i] += s * (dy[i] * weight[i] - mean_dyw - xhat * mean_dyw_xhat);
        }
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
