/* adam.c - the optimizer of the paper (section 5.3): Adam with beta1 0.9,
 * beta2 0.98, eps 1e-9, over the flat parameter buffer in one loop, and the
 * small vector helpers an update needs (the gradient's norm, a moving
 * average of the weights).
 *
 * The moments and the gradient have the parameters' layout (tfm_params), so
 * none of this needs to know which tensor an element belongs to. */
#include <math.h>

#include "tfm/train.h"

tfm_adam_params tfm_adam_default_params(void)
{
    return (tfm_adam_params){.beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f};
}

/* The order of operations is PyTorch's torch.optim.Adam (single-tensor
 * path), so a step computed there and here agree to float rounding:
 *   step_size = lr / (1 - beta1^t);  denom = sqrt(v) / sqrt(1 - beta2^t) + eps */
void tfm_adam_update(const tfm_adam_params *p, int64_t t, double lr, float grad_scale, size_t n,
                     float *w, const float *g, float *m, float *v)
{
    const float b1 = p->beta1, b2 = p->beta2, eps = p->eps;
    const float step_size = (float)(lr / (1.0 - pow((double)b1, (double)t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow((double)b2, (double)t));
    for (size_t i = 0; i < n; i++) {
        float gi = grad_scale * g[i];
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        w[i] -= step_size * (m[i] / denom);
    }
}

double tfm_sum_squares(const float *x, size_t n)
{
    /* Four partial sums: the loop vectorises, and the rounding does not grow
     * with n as one running sum's does. */
    double s[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s[0] += (double)x[i] * x[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

void tfm_ema_update(float decay, size_t n, float *ema, const float *w)
{
    const float keep = decay, take = 1.0f - decay;
    for (size_t i = 0; i < n; i++) ema[i] = keep * ema[i] + take * w[i];
}
