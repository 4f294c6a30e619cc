/* linear.c - the linear layer y = x W^T + b (PyTorch's nn.Linear), and the
 * elementwise pieces the sublayers put around it: the FFN's ReLU and the
 * residual connection. */
#include <cblas.h>
#include <string.h>

#include "nn/layers.h"

/* out: [N, n_out], inp: [N, n_in], weight: [n_out, n_in], bias: [n_out] or NULL.
 * The bias is broadcast into out first and the product accumulated onto it
 * (beta = 1), so the whole layer is one sgemm over all N rows. */
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int n_in, int n_out)
{
    if (N <= 0 || n_out <= 0) return;
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * n_out, bias, (size_t)n_out * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, n_out, n_in, 1.0f, inp, n_in, weight,
                n_in, beta, out, n_out);
}

/* x: [n] */
void relu_forward(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* x, y: [n] */
void residual_forward(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* out, inp: [N, D]; hidden: [N, F]; w1: [F, D], b1: [F]; w2: [D, F], b2: [D] */
void ffn_forward(float *out, float *hidden, const float *inp, const float *w1, const float *b1,
                 const float *w2, const float *b2, int N, int D, int F)
{
    linear_forward(hidden, inp, w1, b1, N, D, F);
    relu_forward(hidden, (size_t)N * F);
    linear_forward(out, hidden, w2, b2, N, F, D);
}
