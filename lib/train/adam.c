/* adam.c - the optimizer of the paper (section 5.3): Adam with beta1 0.9,
 * beta2 0.98, eps 1e-9, over the flat parameter buffer in one loop, and the
 * small vector helpers an update needs (the gradient's norm, a moving
 * average of the weights).
 *
 * The moments and the gradient have the parameters' layout (tfm_params), so
 * none of this needs to know which tensor an element belongs to. */
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                           \
    !defined(NN_NO_MULTIVERSION)
#define ADAM_VECTORS 1
#include <immintrin.h>
#endif

#include "nn/layers.h"
#include "tfm/train.h"

tfm_adam_params tfm_adam_default_params(void)
{
    return (tfm_adam_params){.beta1 = 0.9f, .beta2 = 0.98f, .eps = 1e-9f};
}

/* The constants of one update, in float. */
typedef struct adam_step {
    float b1, b2, eps, one_minus_b1, one_minus_b2;
    float step_size, bc2_sqrt, grad_scale;
} adam_step;

/* The order of operations is PyTorch's torch.optim.Adam (single-tensor
 * path), so a step computed there and here agree to float rounding:
 *   step_size = lr / (1 - beta1^t);  denom = sqrt(v) / sqrt(1 - beta2^t) + eps
 * Every version below makes these IEEE operations in this order, without
 * fused multiply-adds (sqrt and division are correctly rounded at every
 * width), so they give the same bits. */
static void adam_plain(const adam_step *s, size_t n, float *w, const float *g, float *m,
                       float *v)
{
    for (size_t i = 0; i < n; i++) {
        float gi = s->grad_scale * g[i];
        m[i] = s->b1 * m[i] + s->one_minus_b1 * gi;
        v[i] = s->b2 * v[i] + s->one_minus_b2 * gi * gi;
        float denom = sqrtf(v[i]) / s->bc2_sqrt + s->eps;
        w[i] -= s->step_size * (m[i] / denom);
    }
}

#ifdef ADAM_VECTORS
/* Eight at a time with AVX2 (on AVX-512 CPUs too: the update is bound by
 * memory, four floats read and three written per parameter, not by its
 * arithmetic), the rest as adam_plain. */
__attribute__((target("avx2"))) static void adam_avx2(const adam_step *s, size_t n, float *w,
                                                      const float *g, float *m, float *v)
{
    const __m256 b1 = _mm256_set1_ps(s->b1), b2 = _mm256_set1_ps(s->b2);
    const __m256 c1 = _mm256_set1_ps(s->one_minus_b1), c2 = _mm256_set1_ps(s->one_minus_b2);
    const __m256 eps = _mm256_set1_ps(s->eps), bc2 = _mm256_set1_ps(s->bc2_sqrt);
    const __m256 step = _mm256_set1_ps(s->step_size), scale = _mm256_set1_ps(s->grad_scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gi = _mm256_mul_ps(scale, _mm256_loadu_ps(g + i));
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)),
                                        _mm256_mul_ps(c1, gi));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                        _mm256_mul_ps(_mm256_mul_ps(c2, gi), gi));
        const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
        const __m256 wi = _mm256_sub_ps(_mm256_loadu_ps(w + i),
                                        _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(w + i, wi);
    }
    adam_plain(s, n - i, w + i, g + i, m + i, v + i);
}
#endif

void tfm_adam_update(const tfm_adam_params *p, int64_t t, double lr, float grad_scale, size_t n,
                     float *w, const float *g, float *m, float *v)
{
    const adam_step s = {
        .b1 = p->beta1,
        .b2 = p->beta2,
        .eps = p->eps,
        .one_minus_b1 = 1.0f - p->beta1,
        .one_minus_b2 = 1.0f - p->beta2,
        .step_size = (float)(lr / (1.0 - pow((double)p->beta1, (double)t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow((double)p->beta2, (double)t)),
        .grad_scale = grad_scale,
    };
#ifdef ADAM_VECTORS
    if (nn_isa_level() >= NN_ISA_AVX2) {
        adam_avx2(&s, n, w, g, m, v);
        return;
    }
#endif
    adam_plain(&s, n, w, g, m, v);
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
