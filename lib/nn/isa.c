/* isa.c - the instruction set the vector loops of lib/nn run in
 * (nn_isa_level, for NN_VERSIONS_512 and the packed kernels' choice): what
 * the CPU has, less when TFM_ISA in the environment asks for less
 * (nn_isa_asked_for, the one reader of TFM_ISA).  Both are worked out at
 * the first call and kept: the vector loops ask at every call, and a getenv
 * walks the whole environment.  nn_isa_forget makes the next call work them
 * out again (a test that changes TFM_ISA). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"

/* -1 until worked out; threads that race to work one out write the same
 * value */
static atomic_int known_level = -1, known_asked = -1;

void nn_isa_forget(void)
{
    atomic_store_explicit(&known_level, -1, memory_order_relaxed);
    atomic_store_explicit(&known_asked, -1, memory_order_relaxed);
}

/* nn_isa_level worked out: an nn_isa */
static int level_now(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    nn_isa isa = NN_ISA_PLAIN;
    if (__builtin_cpu_supports("avx2")) isa = NN_ISA_AVX2;
    if (isa == NN_ISA_AVX2 && __builtin_cpu_supports("avx512f")) isa = NN_ISA_AVX512;
    const nn_isa_asked asked = nn_isa_asked_for();
    if (asked == NN_ASKED_AVX2 && isa > NN_ISA_AVX2) isa = NN_ISA_AVX2;
    if (asked == NN_ASKED_PLAIN) isa = NN_ISA_PLAIN;
    return isa;
#else
    return NN_ISA_PLAIN;
#endif
}

/* *known, worked out by now() the first time */
static int known_or(atomic_int *known, int (*now)(void))
{
    int value = atomic_load_explicit(known, memory_order_relaxed);
    if (value < 0) {
        value = now();
        atomic_store_explicit(known, value, memory_order_relaxed);
    }
    return value;
}

nn_isa nn_isa_level(void)
{
    return (nn_isa)known_or(&known_level, level_now);
}

/* nn_isa_asked_for worked out: an nn_isa_asked */
static int asked_now(void)
{
    const char *asked = getenv("TFM_ISA");
    if (!asked) return NN_ASKED_ANY;
    if (strcmp(asked, "avx512bw") == 0) return NN_ASKED_AVX512BW;
    if (strcmp(asked, "avx2") == 0) return NN_ASKED_AVX2;
    if (strcmp(asked, "none") == 0) return NN_ASKED_PLAIN;
    return NN_ASKED_ANY;
}

nn_isa_asked nn_isa_asked_for(void)
{
    return (nn_isa_asked)known_or(&known_asked, asked_now);
}

bool tfm_isa_request_unknown(char *msg, size_t size)
{
    const char *asked = getenv("TFM_ISA");
    if (!asked || nn_isa_asked_for() != NN_ASKED_ANY) return false;
    snprintf(msg, size,
             "TFM_ISA=%s is not one of avx512bw, avx2 and none (lower case): ignored, the "
             "kernels are the best this CPU has",
             asked);
    return true;
}
