/* rng.c - xoshiro256** (Blackman and Vigna, 2018; its step in rng_next.h)
 * seeded with splitmix64. */
#include "core/rng_next.h"
#include "tfm/core.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void tfm_rng_seed(tfm_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t tfm_rng_u64(tfm_rng *r) { return tfm_rng_next(r); }

float tfm_rng_float(tfm_rng *r)
{
    return (float)(tfm_rng_u64(r) >> 40) * (1.0f / 16777216.0f);
}

double tfm_rng_double(tfm_rng *r)
{
    return (double)(tfm_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t tfm_rng_below(tfm_rng *r, uint64_t n)
{
    /* Reject the top partial block so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = tfm_rng_u64(r);
    while (x >= limit);
    return x % n;
}
