/* rng_next.h - the step of xoshiro256** (Blackman and Vigna, 2018), inline:
 * tfm_rng_u64 (rng.c) is this step, and the loops that draw a value per
 * element (dropout's masks) take it inline instead of calling it. */
#ifndef TFM_CORE_RNG_NEXT_H
#define TFM_CORE_RNG_NEXT_H

#include "tfm/core.h"

static inline uint64_t tfm_rng_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next draw of r, as tfm_rng_u64. */
static inline uint64_t tfm_rng_next(tfm_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = tfm_rng_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = tfm_rng_rotl(s[3], 45);
    return result;
}

#endif
