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

#include "nn/layers.h"

static float keep_scale(float p) { return 1.0f / (1.0f - p); }

/* x: [n] in place; keep: [n] (written; not touched when p is 0). */
void dropout_forward(float *x, uint8_t *keep, size_t n, float p, tfm_rng *rng)
{
    if (p <= 0.0f) return;
    /* A value survives when a uniform 32-bit draw is >= p 2^32; one 64-bit
     * draw serves two values. */
    const uint32_t threshold = (uint32_t)((double)p * 4294967296.0);
    const float scale = keep_scale(p);
    for (size_t i = 0; i < n; i += 2) {
        uint64_t r = tfm_rng_u64(rng);
        keep[i] = (uint32_t)r >= threshold;
        if (i + 1 < n) keep[i + 1] = (uint32_t)(r >> 32) >= threshold;
    }
    /* multiplies by 0 or scale, not a branch on a random mask */
    for (size_t i = 0; i < n; i++) x[i] *= (float)keep[i] * scale;
}

/* dx, dy, keep: [n].  dx += dy where kept, times the same scale. */
void dropout_backward(float *dx, const float *dy, const uint8_t *keep, size_t n, float p)
{
    if (p <= 0.0f) {
        for (size_t i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    const float scale = keep_scale(p);
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * ((float)keep[i] * scale);
}

/* Generators of different indices start from unrelated states: splitmix64
 * seeding (tfm_rng_seed) hashes seed + index * K, and K, an odd constant
 * unlike splitmix's own step, keeps the four inputs of one index away from
 * those of every other. */
void dropout_stream(tfm_rng *r, uint64_t seed, uint64_t index)
{
    tfm_rng_seed(r, seed + index * 0xd1b54a32d192ed03ULL);
}
