/* dropout.c - dropout (Srivastava et al., 2014) as the paper uses it in
 * training: each value is zeroed with probability p and the survivors are
 * scaled by 1 / (1 - p) ("inverted" dropout, as PyTorch), so inference needs
 * no rescaling.  The mask is kept, one byte per value, for the backward pass.
 *
 * The mask comes from the caller's tfm_rng, drawn in order, so the same
 * generator state gives the same mask: a training step is reproducible and a
 * gradient check can replay it.  Work split over threads takes a generator
 * per piece (dropout_stream), so the masks do not depend on which thread
 * draws them. */
#include <string.h>

#include "core/rng_next.h"
#include "nn/layers.h"

static float keep_scale(float p) { return 1.0f / (1.0f - p); }

typedef uint8_t nn_u8x16 __attribute__((vector_size(16)));

/* x [n] *= keep [n] * scale, sixteen values at a time: the mask's bytes
 * turned to 0.0 or 1.0, times scale, then times x, as in the tail's loop
 * (multiplies by 0 or scale, not a branch on a random mask). */
NN_INLINE void dropout_scale_body(nn_isa isa, float *x, const uint8_t *keep, size_t n,
                                  float scale)
{
    (void)isa; /* sixteen lanes in every version */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        nn_u8x16 k;
        nn_f32x16 v;
        memcpy(&k, keep + i, sizeof k);
        memcpy(&v, x + i, sizeof v);
        v = v * (__builtin_convertvector(k, nn_f32x16) * scale);
        memcpy(x + i, &v, sizeof v);
    }
    for (; i < n; i++) x[i] *= (float)keep[i] * scale;
}
NN_VERSIONS_512(static, dropout_scale, (float *x, const uint8_t *keep, size_t n, float scale),
                (x, keep, n, scale))

/* dx [n] += dy [n] * (keep [n] * scale), sixteen values at a time. */
NN_INLINE void dropout_add_body(nn_isa isa, float *dx, const float *dy, const uint8_t *keep,
                                size_t n, float scale)
{
    (void)isa;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        nn_u8x16 k;
        nn_f32x16 d, y;
        memcpy(&k, keep + i, sizeof k);
        memcpy(&d, dx + i, sizeof d);
        memcpy(&y, dy + i, sizeof y);
        d = d + y * (__builtin_convertvector(k, nn_f32x16) * scale);
        memcpy(dx + i, &d, sizeof d);
    }
    for (; i < n; i++) dx[i] += dy[i] * ((float)keep[i] * scale);
}
NN_VERSIONS_512(static, dropout_add,
                (float *dx, const float *dy, const uint8_t *keep, size_t n, float scale),
                (dx, dy, keep, n, scale))

/* x: [n] in place; keep: [n] (written; not touched when p is 0). */
void dropout_forward(float *x, uint8_t *keep, size_t n, float p, tfm_rng *rng)
{
    if (p <= 0.0f) return;
    /* A value survives when a uniform 32-bit draw is >= p 2^32; one 64-bit
     * draw serves two values (the generator's step inline: a call per
     * draw was a third of dropout's time). */
    const uint32_t threshold = (uint32_t)((double)p * 4294967296.0);
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        const uint64_t r = tfm_rng_next(rng);
        keep[i] = (uint32_t)r >= threshold;
        keep[i + 1] = (uint32_t)(r >> 32) >= threshold;
    }
    if (i < n) keep[i] = (uint32_t)tfm_rng_next(rng) >= threshold;
    dropout_scale(x, keep, n, keep_scale(p));
}

void dropout_apply(float *x, const uint8_t *keep, size_t n, float p)
{
    if (p <= 0.0f) return;
    dropout_scale(x, keep, n, keep_scale(p));
}

/* dx, dy, keep: [n].  dx += dy where kept, times the same scale. */
void dropout_backward(float *dx, const float *dy, const uint8_t *keep, size_t n, float p)
{
    if (p <= 0.0f) {
        for (size_t i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    dropout_add(dx, dy, keep, n, keep_scale(p));
}

/* Generators of different indices start from unrelated states: splitmix64
 * seeding (tfm_rng_seed) hashes seed + index * K, and K, an odd constant
 * unlike splitmix's own step, keeps the four inputs of one index away from
 * those of every other. */
void dropout_stream(tfm_rng *r, uint64_t seed, uint64_t index)
{
    tfm_rng_seed(r, seed + index * 0xd1b54a32d192ed03ULL);
}
