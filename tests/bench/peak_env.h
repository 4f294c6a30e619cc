/* peak_env.h - the CPU's FMA peak as tests/bench/run.sh hands it to the
 * benchmarks that report their rates as fractions of it (sgemm.c,
 * forward.c): measured by bench/peak (tests/bench/peak.c) in the same run
 * and exported as
 *
 *   FMA_PEAK_512_1, FMA_PEAK_512_T   GFLOP/s at 512 bits, 1 and THREADS
 *                                    threads (empty without AVX-512F)
 *   FMA_PEAK_256_1, FMA_PEAK_256_T   the same at 256 bits (AVX2 and FMA)
 *
 * beside THREADS.  A benchmark run alone finds none of them and says so. */
#ifndef TFM_BENCH_PEAK_ENV_H
#define TFM_BENCH_PEAK_ENV_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* A positive number from the environment variable name; 0 when it is unset,
 * empty or not a positive number. */
static inline double peak_env_number(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    return errno || *end || !(v > 0) ? 0 : v;
}

/* The FMA peak of `threads` threads in GFLOP/s: FMA_PEAK_*_1 for 1 thread,
 * FMA_PEAK_*_T when threads is THREADS, at 512 bits where the CPU has them
 * (the widest it has), at 256 bits when narrow (TFM_ISA=avx2 keeps the
 * project's kernels to 256 bits) or without AVX-512.  0 when the
 * environment does not say; *bits gets the width (0 then). */
static inline double peak_env_gflops(int threads, bool narrow, int *bits)
{
    const char *suffix = "1";
    if (threads != 1) {
        if (peak_env_number("THREADS") != threads)
            return *bits = 0, 0;
        suffix = "T";
    }
    char name[32];
    if (!narrow) {
        snprintf(name, sizeof name, "FMA_PEAK_512_%s", suffix);
        double p = peak_env_number(name);
        if (p > 0)
            return *bits = 512, p;
    }
    snprintf(name, sizeof name, "FMA_PEAK_256_%s", suffix);
    double p = peak_env_number(name);
    *bits = p > 0 ? 256 : 0;
    return p;
}

#endif
