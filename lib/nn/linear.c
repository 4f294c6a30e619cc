/* linear.c - the linear layer y = x W^T + b (PyTorch's nn.Linear), and the
 * elementwise pieces the sublayers put around it: the FFN's ReLU and the
 * residual connection; each forward with its backward beside it. */
#include <string.h>

#include "nn/layers.h"

/* out: [N, n_out], inp: [N, n_in], weight: [n_out, n_in], bias: [n_out] or NULL.
 * The product is added to the bias as the kernels store it (the bits of the
 * bias broadcast into out and the product accumulated onto it, beta 1; that
 * copy, on one thread, was 3% of a training step), so the whole layer is
 * one product over all N rows. */
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                    int n_in, int n_out)
{
    if (N <= 0 || n_out <= 0) return;
    if (bias)
        nn_sgemm_bias(false, true, N, n_out, n_in, 1.0f, inp, n_in, weight, n_in, bias, out,
                      n_out);
    else
        nn_sgemm(false, true, N, n_out, n_in, 1.0f, inp, n_in, weight, n_in, 0.0f, out, n_out);
}

/* dinp: [N, n_in] or NULL, dweight: [n_out, n_in], dbias: [n_out] or NULL,
 * dout: [N, n_out], inp: [N, n_in], weight: [n_out, n_in].
 * From y = x W^T + b:  dx = dy W,  dW = dy^T x,  db = sum over rows of dy.
 * Both products accumulate (beta = 1) and run over all N rows at once. */
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int n_in, int n_out)
{
    if (N <= 0 || n_out <= 0 || n_in <= 0) return;
    if (dinp)
        nn_sgemm(false, false, N, n_in, n_out, 1.0f, dout, n_out, weight, n_in, 1.0f, dinp, n_in);
    nn_sgemm(true, false, n_out, n_in, N, 1.0f, dout, n_out, inp, n_in, 1.0f, dweight, n_in);
    if (!dbias) return;
    /* Row by row, four columns per vector: the rows stream through at the
     * memory's speed (a second thread, tried on column or row chunks, only
     * slowed this down), and each column's sum still goes in row order. */
    const int n4 = n_out & ~3;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * n_out;
        for (int o = 0; o < n4; o += 4) nn_store4(dbias + o, nn_load4(dbias + o) + nn_load4(d + o));
        for (int o = n4; o < n_out; o++) dbias[o] += d[o];
    }
}

/* x: [n], in place: x > 0 ? x : 0 (a NaN becomes 0), sixteen lanes at a
 * time by a mask. */
NN_INLINE void relu_forward_body(nn_isa isa, float *x, size_t n)
{
    (void)isa; /* sixteen lanes in every version */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        nn_f32x16 v;
        memcpy(&v, x + i, sizeof v);
        const nn_i32x16 on = v > 0.0f;
        v = (nn_f32x16)((nn_i32x16)v & on);
        memcpy(x + i, &v, sizeof v);
    }
    for (; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
NN_VERSIONS_512(, relu_forward, (float *x, size_t n), (x, n))

/* x: [n], in place: x * sigmoid(k x), sixteen lanes at a time: k = 1 is
 * swish (SiLU), k = 1.702 Marian's gelu.  sigmoid(z) = 1 / (1 + e) for z >= 0
 * and e / (1 + e) below, with e = exp(-|z|) <= 1, so the exponential never
 * overflows (the kernel of softmax.c, exact to 1e-7 relative). */
NN_INLINE void sigmoid_gate_body(nn_isa isa, float *x, size_t n, float k)
{
    (void)isa; /* sixteen lanes in every version */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        nn_f32x16 v, z, e;
        memcpy(&v, x + i, sizeof v);
        z = v * k;
        const nn_i32x16 negative = z < 0.0f;
        /* -|z|: the sign bit set */
        e = (nn_f32x16)((nn_i32x16)z | INT32_MIN);
        nn_exp16_nonpositive(&e);
        const nn_f32x16 one = e - e + 1.0f;
        const nn_f32x16 num = (nn_f32x16)(((nn_i32x16)e & negative) | ((nn_i32x16)one & ~negative));
        v = v * (num / (one + e));
        memcpy(x + i, &v, sizeof v);
    }
    for (; i < n; i++) {
        const float z = x[i] * k;
        const float e = nn_exp1_nonpositive(z < 0.0f ? z : -z);
        x[i] = x[i] * ((z < 0.0f ? e : 1.0f) / (1.0f + e));
    }
}
NN_VERSIONS_512(static, sigmoid_gate, (float *x, size_t n, float k), (x, n, k))

/* d, z: [n]; d *= the derivative of x sigmoid(k x) at z:
 * s (1 + k z (1 - s)), s = sigmoid(k z), sixteen lanes at a time as
 * sigmoid_gate_body takes the sigmoid. */
NN_INLINE void sigmoid_gate_backward_body(nn_isa isa, float *d, const float *z, size_t n,
                                          float k)
{
    (void)isa;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        nn_f32x16 v, g, e;
        memcpy(&v, z + i, sizeof v);
        memcpy(&g, d + i, sizeof g);
        const nn_f32x16 kz = v * k;
        const nn_i32x16 negative = kz < 0.0f;
        e = (nn_f32x16)((nn_i32x16)kz | INT32_MIN);
        nn_exp16_nonpositive(&e);
        const nn_f32x16 one = e - e + 1.0f;
        const nn_f32x16 num = (nn_f32x16)(((nn_i32x16)e & negative) | ((nn_i32x16)one & ~negative));
        const nn_f32x16 s = num / (one + e);
        g = g * (s * (one + kz * (one - s)));
        memcpy(d + i, &g, sizeof g);
    }
    for (; i < n; i++) {
        const float kz = z[i] * k;
        const float e = nn_exp1_nonpositive(kz < 0.0f ? kz : -kz);
        const float s = (kz < 0.0f ? e : 1.0f) / (1.0f + e);
        d[i] = d[i] * (s * (1.0f + kz * (1.0f - s)));
    }
}
NN_VERSIONS_512(static, sigmoid_gate_backward, (float *d, const float *z, size_t n, float k),
                (d, z, n, k))

void activation_backward(tfm_activation act, float *d, const float *z, size_t n)
{
    switch (act) {
    case TFM_ACT_SWISH: sigmoid_gate_backward(d, z, n, 1.0f); break;
    case TFM_ACT_GELU_SIGMOID: sigmoid_gate_backward(d, z, n, 1.702f); break;
    default: relu_backward(d, z, n); break; /* z or relu(z): both > 0 at the same places */
    }
}

void activation_forward(tfm_activation act, float *x, size_t n)
{
    switch (act) {
    case TFM_ACT_SWISH: sigmoid_gate(x, n, 1.0f); break;
    case TFM_ACT_GELU_SIGMOID: sigmoid_gate(x, n, 1.702f); break;
    default: relu_forward(x, n); break;
    }
}

/* d, y: [n].  y > 0 exactly where the input was > 0, so the output alone
 * tells where the gradient passes.  A bit mask four lanes at a time, not a
 * branch: about half the units are off, in no pattern a branch predictor
 * can follow, and [rows, F] is the widest activation of a layer. */
void relu_backward(float *d, const float *y, size_t n)
{
    const nn_f32x4 zero = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        nn_i32x4 on = nn_load4(y + i) > zero;
        nn_store4(d + i, (nn_f32x4)((nn_i32x4)nn_load4(d + i) & on));
    }
    for (; i < n; i++) d[i] = y[i] > 0.0f ? d[i] : 0.0f;
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

/* dinp: [N, D] or NULL; dw1: [F, D], db1: [F]; dw2: [D, F], db2: [D];
 * dhidden: [N, F] scratch; dout, inp: [N, D]; hidden: [N, F] as the forward
 * left it (after the ReLU); w1: [F, D]; w2: [D, F] */
void ffn_backward(float *dinp, float *dw1, float *db1, float *dw2, float *db2, float *dhidden,
                  const float *dout, const float *inp, const float *hidden, const float *w1,
                  const float *w2, int N, int D, int F, float p_act)
{
    if (N <= 0) return;
    /* dhidden [N, F] = dout W2, written by the product (beta 0) rather than
     * added to zeros: the same bits, without a pass over [N, F] */
    nn_sgemm(false, false, N, F, D, 1.0f, dout, D, w2, F, 0.0f, dhidden, F);
    linear_backward(NULL, dw2, db2, dout, hidden, w2, N, F, D);
    relu_backward(dhidden, hidden, (size_t)N * F);
    /* Dropout after the ReLU: where hidden > 0 the value was kept and scaled
     * by 1 / (1 - p); where it is 0, relu_backward has zeroed the gradient
     * already (dropped or negative alike).  So the mask is not needed. */
    if (p_act > 0) {
        const float scale = 1.0f / (1.0f - p_act);
        for (size_t i = 0; i < (size_t)N * F; i++) dhidden[i] *= scale;
    }
    linear_backward(dinp, dw1, db1, dhidden, inp, w1, N, D, F);
}
